//! The crash test that really crashes. A child process (this test binary, re-executed to run
//! the ignored `crash_child` test) runs an agent journaled in SQLite or Redis: a scripted
//! model that streams slowly, and a tool whose side effect is a line appended to a file
//! (with its idempotency key). The parent kills the child with SIGKILL at 20 points — during a
//! model stream, between a tool's start and its result, just before and just after a journal
//! append, at fixed times — and, in the crash matrix, just before and just after *every*
//! journal append of the run (three iterations, three tool calls), then resumes the run in a
//! new process. Every time:
//!
//! - the final answer and the whole conversation equal the uninterrupted run's;
//! - the journal has dense sequence numbers, keeps every entry written before the crash
//!   unchanged, folds cleanly, and has the uninterrupted journal's shape (except for the
//!   `tool_started` of a call that had to run again);
//! - no tool whose result was journaled before the crash ran again (side-effect lines are
//!   counted by idempotency key), and every call ran at most once per process;
//! - in `Durability::Sync`, every durable event the child passed on before it died is in the
//!   journal; in `Durability::Checkpoint` (the matrix runs in both modes), only model answers,
//!   tool results and iteration starts may be missing, never the record that a side effect
//!   (a model request, a tool start) began — the loss is counted and printed.
#![cfg(all(unix, feature = "sqlite"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::event::Event;
use agentloop::message::{Message, Role};
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::{ChunkStream, ModelRequest, Provider};
use agentloop::run::Run;
use agentloop::store::{Durability, JournalEntry, RunStore, StoreError};
use agentloop::tool::{Tool, ToolContext};
use agentloop::{Agent, ResumeError, RunOptions};
use async_trait::async_trait;
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod crash_support;
use crash_support::{open_store, AppendTap, Tapped};

const ANSWER: &str = "Done: a, b and c each ran once. Nothing was lost in the crash.";
const CHILD_ENV: &str = "AGENTLOOP_CRASH_CHILD";
/// The events that `Durability::Checkpoint` streams before they are committed.
const MAY_WAIT: [&str; 5] =
    ["iteration_started", "model_responded", "tool_completed", "tool_failed", "tool_timed_out"];

// ---------------------------------------------------------------- the child's agent

/// Serves the turn that fits the conversation (the number of assistant messages so far), so
/// a resumed process gets the same answers as the first one.
struct TurnModel;

impl Provider for TurnModel {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let turn = request.messages.iter().filter(|m| m.role == Role::Assistant).count();
        let scripted = match turn {
            0 => ScriptedTurn::tool_call("effect", json!({"tag": "a", "ms": 60}))
                .with_call_id("call_a")
                .with_tool_call("effect", json!({"tag": "b", "ms": 60}))
                .with_call_id("call_b")
                .with_text("Let me run a and b."),
            1 => ScriptedTurn::tool_call("effect", json!({"tag": "c", "ms": 60}))
                .with_call_id("call_c"),
            _ => ScriptedTurn::text(ANSWER),
        };
        ScriptedModel::new([scripted.with_chunk_delay(Duration::from_millis(4))]).stream(request)
    }
}

/// Appends `<idempotency key> <tag>` to a file halfway through its sleep.
struct Effect {
    file: PathBuf,
}

#[derive(Deserialize, JsonSchema)]
struct EffectArgs {
    tag: String,
    ms: u64,
}

impl Tool for Effect {
    const NAME: &'static str = "effect";
    type Args = EffectArgs;
    type Output = String;
    type Error = String;

    fn description(&self) -> String {
        "Does something that must not happen twice.".into()
    }

    async fn call(&self, args: EffectArgs, ctx: ToolContext) -> Result<String, String> {
        tokio::time::sleep(Duration::from_millis(args.ms / 2)).await;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.file)
            .map_err(|e| e.to_string())?;
        writeln!(file, "{} {}", ctx.idempotency_key, args.tag).map_err(|e| e.to_string())?;
        tokio::time::sleep(Duration::from_millis(args.ms / 2)).await;
        Ok(format!("done {}", args.tag))
    }
}

/// Reports each append to the parent and leaves a window before and after it.
struct Announcing;

#[async_trait]
impl AppendTap for Announcing {
    async fn before(&self, _run_id: &str, expected_seq: u64, count: usize) {
        println!("@@ append-begin {expected_seq} {}", expected_seq + count as u64);
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
    async fn after(&self, _run_id: &str, expected_seq: u64, next: u64) {
        println!("@@ append-end {expected_seq} {next}");
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
}

/// The child: resumes the run if its journal exists, else starts it; reports every event.
#[test]
#[ignore = "the crash test runs it in a child process"]
fn crash_child() {
    let Ok(store) = std::env::var(CHILD_ENV) else {
        eprintln!("crash_child only runs as the crash test's child process");
        return;
    };
    let run_id = std::env::var("CRASH_RUN_ID").unwrap();
    let effects = PathBuf::from(std::env::var("CRASH_EFFECTS").unwrap());
    let durability = match std::env::var("CRASH_DURABILITY").as_deref() {
        Ok("checkpoint") => Durability::Checkpoint,
        _ => Durability::Sync,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let store: Arc<dyn RunStore> = Arc::new(Tapped(open_store(&store).await, Announcing));
        let agent = Agent::builder(TurnModel)
            .tool(Effect { file: effects })
            .tool_concurrency(1)
            .store(store)
            .lease_ttl(Duration::from_millis(300))
            .durability(durability)
            .build()
            .unwrap();
        // The killed process's lease lives on until it expires: wait for it, as a restarted
        // worker does.
        let resumed = loop {
            match agent.resume(&run_id).await {
                Err(ResumeError::Store(StoreError::LeaseHeld { expires_in_ms, .. })) => {
                    println!("@@ lease held {expires_in_ms}");
                    tokio::time::sleep(Duration::from_millis(expires_in_ms + 10)).await;
                }
                other => break other,
            }
        };
        let mut events = match resumed {
            Ok(events) => {
                println!("@@ mode resume");
                events
            }
            Err(ResumeError::NotFound(_)) => {
                println!("@@ mode start");
                let options = RunOptions { run_id: Some(run_id.clone()), ..RunOptions::default() };
                agent.run_stream_with("Run a, b and c.", options)
            }
            Err(error) => panic!("resume failed: {error}"),
        };
        let mut answer = None;
        while let Some(event) = events.next().await {
            println!("@@ event {}", event.kind());
            match event {
                Event::RunFinished { outcome } => answer = Some(outcome.answer),
                Event::JournalFailed { error } => panic!("journal failed: {error}"),
                _ => {}
            }
        }
        println!("@@ outcome {}", serde_json::to_string(&answer).unwrap());
    });
}

// ---------------------------------------------------------------- the parent

/// When to kill the child.
#[derive(Debug, Clone)]
enum KillAt {
    /// Right after the child reported the `nth` (1-based) event of this kind.
    Event(&'static str, usize),
    /// As the append that holds this seq begins (before it is written; the journal appends
    /// the events that are ready together, so one append may hold several).
    AppendBegin(u64),
    /// As the append that holds this seq ended (written, but its events not yet passed on).
    AppendEnd(u64),
    /// This long (ms) after the `nth` event of this kind: a tool that started has written
    /// its side effect but not returned.
    AfterEvent(&'static str, usize, u64),
    /// This long after the child began its run (reported its mode).
    Time(u64),
}

impl KillAt {
    fn matches(&self, line: &str, seen: &HashMap<String, usize>) -> bool {
        match self {
            Self::Event(kind, nth) | Self::AfterEvent(kind, nth, _) => {
                line == format!("@@ event {kind}") && seen.get(*kind) == Some(nth)
            }
            Self::AppendBegin(seq) => holds(line.strip_prefix("@@ append-begin "), *seq),
            Self::AppendEnd(seq) => holds(line.strip_prefix("@@ append-end "), *seq),
            Self::Time(_) => false,
        }
    }
}

/// Whether an append reported as `"<first seq> <end>"` holds `seq`.
fn holds(range: Option<&str>, seq: u64) -> bool {
    let Some((first, end)) = range.and_then(|r| r.split_once(' ')) else { return false };
    (first.parse::<u64>().unwrap()..end.parse::<u64>().unwrap()).contains(&seq)
}

/// The outcome of one child process.
struct ChildRun {
    killed: bool,
    mode: Option<String>,
    answer: Option<String>,
    /// The seq each journal append began at, in order.
    appends: Vec<u64>,
    /// How many events of each kind the child passed on (all it printed, read to the end).
    seen: HashMap<String, usize>,
}

async fn run_child(
    (store, durability): (&str, &str),
    run_id: &str,
    effects: &Path,
    kill: Option<&KillAt>,
) -> ChildRun {
    use std::os::unix::process::ExitStatusExt;
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["crash_child", "--exact", "--ignored", "--nocapture", "--test-threads=1", "-q"])
        .env(CHILD_ENV, store)
        .env("CRASH_RUN_ID", run_id)
        .env("CRASH_EFFECTS", effects)
        .env("CRASH_DURABILITY", durability)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    // A `Time` kill is armed when the child reports its mode (its run begins): a loaded
    // machine may take longer than the kill's time to start a process.
    let (mut deadline, mut armed) = (started + Duration::from_secs(30), false);
    let (mut seen, mut mode, mut answer, mut killed) = (HashMap::new(), None, None, false);
    let mut appends = Vec::new();
    loop {
        let line = tokio::select! {
            line = lines.next_line() => line.unwrap(),
            () = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)) => {
                assert!(armed, "the child hung");
                child.start_kill().unwrap();
                killed = true;
                break;
            }
        };
        let Some(line) = line else { break };
        if let Some(kind) = line.strip_prefix("@@ event ") {
            *seen.entry(kind.to_owned()).or_insert(0) += 1;
        } else if let Some(m) = line.strip_prefix("@@ mode ") {
            mode = Some(m.to_owned());
            if let Some(KillAt::Time(ms)) = kill {
                deadline = Instant::now() + Duration::from_millis(*ms);
                armed = true;
            }
        } else if let Some(json) = line.strip_prefix("@@ outcome ") {
            answer = serde_json::from_str(json).unwrap();
        } else if let Some(range) = line.strip_prefix("@@ append-begin ") {
            appends.push(range.split(' ').next().unwrap().parse().unwrap());
        }
        if !armed && kill.is_some_and(|k| k.matches(&line, &seen)) {
            if let Some(KillAt::AfterEvent(_, _, ms)) = kill {
                deadline = Instant::now() + Duration::from_millis(*ms);
                armed = true;
                continue;
            }
            child.start_kill().unwrap();
            killed = true;
            break;
        }
    }
    let status = child.wait().await.unwrap();
    // What the child printed before it died is still in the pipe: those events were passed on.
    while let Some(line) = lines.next_line().await.unwrap() {
        if let Some(kind) = line.strip_prefix("@@ event ") {
            *seen.entry(kind.to_owned()).or_insert(0) += 1;
        }
    }
    if killed {
        assert_eq!(status.signal(), Some(9), "the child died of SIGKILL ({status:?})");
    } else {
        assert!(status.success(), "the child failed: {status:?}");
    }
    ChildRun { killed, mode, answer, appends, seen }
}

fn kinds(journal: &[JournalEntry]) -> Vec<&'static str> {
    journal.iter().map(|e| e.event.kind()).collect()
}

/// The journal without the `tool_started` of attempts that never finished (a call that ran
/// again after the crash is started twice).
fn without_repeated_starts(journal: &[JournalEntry]) -> Vec<&'static str> {
    let mut out = Vec::new();
    for (index, entry) in journal.iter().enumerate() {
        if let Event::ToolStarted { call, .. } = &*entry.event {
            let again = journal[index + 1..].iter().find_map(|e| match &*e.event {
                Event::ToolStarted { call: c, .. } if c.id == call.id => Some(true),
                Event::ToolCompleted { result, .. } if result.call_id == call.id => Some(false),
                _ => None,
            });
            if again == Some(true) {
                continue;
            }
        }
        out.push(entry.event.kind());
    }
    out
}

/// The seq of the `nth` (1-based) entry of `kind` in the journal.
fn seq_of(journal: &[JournalEntry], kind: &str, nth: usize) -> u64 {
    journal.iter().filter(|e| e.event.kind() == kind).nth(nth - 1).unwrap().seq
}

/// Call ids whose result is in the journal.
fn finished_calls(journal: &[JournalEntry]) -> Vec<String> {
    journal
        .iter()
        .filter_map(|e| match &*e.event {
            Event::ToolCompleted { result, .. } => Some(result.call_id.clone()),
            _ => None,
        })
        .collect()
}

/// Side-effect lines per idempotency key.
fn effects_by_key(path: &Path) -> HashMap<String, usize> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut counts = HashMap::new();
    for line in text.lines() {
        let key = line.split(' ').next().unwrap().to_owned();
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

fn history(journal: &[JournalEntry]) -> (Vec<Message>, String) {
    let run = Run::from_journal(journal.iter().map(|e| &*e.event)).expect("the journal folds");
    assert!(run.is_finished());
    (run.history().to_vec(), run.outcome().unwrap().answer.clone())
}

/// The whole crash test against one store. `store_for(name)` names a store for the child.
/// The kill points of the 20-point test: inside streams, tools and appends, and at times.
fn twenty_points(clean: &[JournalEntry], _appends: &[u64]) -> Vec<KillAt> {
    vec![
        KillAt::AppendBegin(0),
        KillAt::AppendEnd(0),
        KillAt::Event("text_delta", 1),
        KillAt::Event("tool_arguments_delta", 4),
        KillAt::AfterEvent("tool_started", 1, 45),
        KillAt::Event("tool_started", 1),
        KillAt::AppendBegin(seq_of(clean, "tool_completed", 1)),
        KillAt::AppendEnd(seq_of(clean, "tool_completed", 1)),
        KillAt::AppendEnd(seq_of(clean, "tool_started", 2)),
        KillAt::AfterEvent("tool_started", 2, 45),
        KillAt::Event("tool_completed", 2),
        KillAt::AppendBegin(seq_of(clean, "iteration_completed", 1)),
        KillAt::Event("model_requested", 2),
        KillAt::Event("tool_started", 3),
        KillAt::AppendBegin(seq_of(clean, "model_requested", 3)),
        KillAt::AfterEvent("tool_started", 3, 45),
        KillAt::AppendBegin(seq_of(clean, "run_finished", 1)),
        KillAt::AppendEnd(seq_of(clean, "run_finished", 1)),
        KillAt::Time(150),
        KillAt::Time(420),
    ]
}

/// The crash matrix: just before and just after every journal append of the run.
fn every_boundary(_clean: &[JournalEntry], appends: &[u64]) -> Vec<KillAt> {
    appends.iter().flat_map(|seq| [KillAt::AppendBegin(*seq), KillAt::AppendEnd(*seq)]).collect()
}

/// The matrix, and the points of the 20 that are not appends (inside streams and tools, and
/// at times): in `Checkpoint` those fall between a streamed event and its commit.
fn every_boundary_and_between(clean: &[JournalEntry], appends: &[u64]) -> Vec<KillAt> {
    let mut points = every_boundary(clean, appends);
    points.extend(
        twenty_points(clean, appends)
            .into_iter()
            .filter(|p| !matches!(p, KillAt::AppendBegin(_) | KillAt::AppendEnd(_))),
    );
    points
}

/// How many events the child passed on that its journal does not hold, by kind; in `Sync`
/// there must be none, in `Checkpoint` only events that wait for a checkpoint.
fn passed_on_but_lost(
    seen: &HashMap<String, usize>,
    clean: &[JournalEntry],
    journal: &[JournalEntry],
) -> HashMap<&'static str, usize> {
    let durable: std::collections::HashSet<&'static str> = kinds(clean).into_iter().collect();
    let mut lost = HashMap::new();
    for kind in durable {
        let passed_on = seen.get(kind).copied().unwrap_or(0);
        let journaled = kinds(journal).iter().filter(|k| **k == kind).count();
        if passed_on > journaled {
            lost.insert(kind, passed_on - journaled);
        }
    }
    lost
}

async fn crash_test(
    (store_spec, durability): (&str, &str),
    workdir: &Path,
    kill_points: KillPoints,
) {
    let child = (store_spec, durability);
    let parent_store = open_store(store_spec).await;
    // The uninterrupted run.
    let effects = workdir.join("reference.effects");
    let reference = run_child(child, "run_reference", &effects, None).await;
    assert_eq!(reference.answer.as_deref(), Some(ANSWER));
    let clean = parent_store.load("run_reference").await.unwrap();
    let (clean_history, clean_answer) = history(&clean);
    assert_eq!(clean_answer, ANSWER);
    assert_eq!(effects_by_key(&effects).values().sum::<usize>(), 3);

    let points = kill_points(&clean, &reference.appends);
    let started = Instant::now();
    let (mut rerun, mut lost_in_all) = (0, 0);
    for (index, point) in points.iter().enumerate() {
        let run_id = format!("run_crash_{index}");
        let effects = workdir.join(format!("{run_id}.effects"));
        let first = run_child(child, &run_id, &effects, Some(point)).await;
        assert!(first.killed, "point {point:?}: the child was killed");
        assert_eq!(first.mode.as_deref(), Some("start"));
        let before = parent_store.load(&run_id).await.unwrap();
        let effects_before = effects_by_key(&effects);
        let lost = passed_on_but_lost(&first.seen, &clean, &before);
        if durability == "sync" {
            assert!(lost.is_empty(), "point {point:?}: passed on, never committed: {lost:?}");
        } else {
            let never = lost.keys().find(|kind| !MAY_WAIT.contains(kind));
            assert!(never.is_none(), "point {point:?}: a checkpoint event was lost: {lost:?}");
        }
        lost_in_all += lost.values().sum::<usize>();

        let second = run_child(child, &run_id, &effects, None).await;
        let expected_mode = if before.is_empty() { "start" } else { "resume" };
        assert_eq!(second.mode.as_deref(), Some(expected_mode), "point {point:?}");
        assert_eq!(second.answer.as_deref(), Some(ANSWER), "point {point:?}: same answer");

        let after = parent_store.load(&run_id).await.unwrap();
        for (seq, entry) in after.iter().enumerate() {
            assert_eq!(entry.seq, seq as u64, "point {point:?}: dense seqs");
        }
        assert_eq!(after[..before.len()], before[..], "point {point:?}: nothing rewritten");
        let (resumed_history, resumed_answer) = history(&after);
        assert_eq!(resumed_answer, ANSWER);
        assert_eq!(resumed_history, clean_history, "point {point:?}: same conversation");
        assert_eq!(
            without_repeated_starts(&after),
            kinds(&clean),
            "point {point:?}: the uninterrupted journal's shape"
        );

        let effects_after = effects_by_key(&effects);
        let journaled_before = finished_calls(&before);
        for call in ["call_a", "call_b", "call_c"] {
            let key = format!("{run_id}:{call}");
            let (was, now) = (effects_before.get(&key).copied().unwrap_or(0), effects_after[&key]);
            if journaled_before.contains(&call.to_owned()) {
                assert_eq!((was, now), (1, 1), "point {point:?}: {call} must not run again");
            } else {
                assert!(was <= 1 && now == was + 1, "point {point:?}: {call} ran {was} then {now}");
                rerun += usize::from(was == 1);
            }
        }
        assert_eq!(effects_after.len(), 3, "point {point:?}: only the run's keys");
        eprintln!(
            "crash test {store_spec:.6} {durability} point {index:2} {point:?}: {} entries before \
             the kill (last {:?}), {} after; passed on but lost: {lost:?}",
            before.len(),
            before.last().map(|e| e.event.kind()),
            after.len()
        );
        parent_store.delete_run(&run_id).await.unwrap();
    }
    eprintln!(
        "crash test {store_spec:.6} {durability}: {} kill points ({} appends of {} entries) in \
         {:?}; {rerun} unfinished calls ran again; {lost_in_all} events passed on and lost",
        points.len(),
        reference.appends.len(),
        clean.len(),
        started.elapsed()
    );
    parent_store.delete_run("run_reference").await.unwrap();
}

type KillPoints = fn(&[JournalEntry], &[u64]) -> Vec<KillAt>;

async fn sqlite_crash_test(durability: &str, kill_points: KillPoints) {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("sqlite:{}", dir.path().join("crash.db").display());
    crash_test((&spec, durability), dir.path(), kill_points).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_nine_at_20_points_then_resume_on_sqlite() {
    sqlite_crash_test("sync", twenty_points).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_nine_at_every_journal_boundary_then_resume_on_sqlite() {
    sqlite_crash_test("sync", every_boundary).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_mode_kill_nine_at_every_boundary_and_between_on_sqlite() {
    sqlite_crash_test("checkpoint", every_boundary_and_between).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_nine_at_20_points_then_resume_on_redis() {
    redis_crash_test("sync", twenty_points).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_nine_at_every_journal_boundary_then_resume_on_redis() {
    redis_crash_test("sync", every_boundary).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_mode_kill_nine_at_every_boundary_and_between_on_redis() {
    redis_crash_test("checkpoint", every_boundary_and_between).await;
}

#[cfg(feature = "redis")]
async fn redis_crash_test(durability: &str, kill_points: KillPoints) {
    let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") else {
        eprintln!("skipped: AGENTLOOP_REDIS_URL is not set (the Redis crash test did not run)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("agentloop-test:{}:", uuid::Uuid::new_v4().simple());
    crash_test((&format!("redis:{url} {prefix}"), durability), dir.path(), kill_points).await;
    let client = ::redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let left: Vec<String> =
        ::redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(&mut conn).await.unwrap();
    assert!(left.is_empty(), "the test deleted its runs: {left:?}");
}
