//! A thousand runs journaling at once through one store writer, killed with SIGKILL at a
//! random moment. A child process (this test binary, re-executed to run the ignored
//! `concurrent_child` test) runs 1,000 agents concurrently on one SQLite file (its one writer
//! thread, group commit) or one Redis connection, in `Durability::Sync`. It prints every append
//! the store acknowledged and every durable event each run passed on. The parent kills it at a
//! random moment, reads what it printed to the end, then checks every run's journal:
//!
//! - every acknowledged append is in the journal (its entries are below the journal's length);
//! - the durable events a run passed on are a prefix of its journal (none came from a batch
//!   that was not committed), in order;
//! - sequence numbers are dense and the journal folds into a run.
//!
//! A second child then resumes all 1,000 runs; each finishes with the answer of an
//! uninterrupted run.
#![cfg(all(unix, feature = "sqlite"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::message::Role;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::{ChunkStream, ModelRequest, Provider};
use agentloop::run::Run;
use agentloop::store::{RunStore, StoreError};
use agentloop::tool::{Tool, ToolContext};
use agentloop::{Agent, ResumeError, RunOptions};
use async_trait::async_trait;
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod crash_support;
use crash_support::{open_store, AppendTap, Tapped};

const RUNS: usize = 1_000;
const ROUNDS: usize = 3;
const ANSWER: &str = "All three steps ran.";
const CHILD_ENV: &str = "AGENTLOOP_CONCURRENT_CHILD";

/// `ROUNDS` tool calls, one per turn, then the answer; the turn is read off the conversation,
/// so a resumed run gets the same answers.
struct StepModel;

impl Provider for StepModel {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let turn = request.messages.iter().filter(|m| m.role == Role::Assistant).count();
        let scripted = if turn < ROUNDS {
            ScriptedTurn::tool_call("step", json!({"n": turn})).with_call_id(format!("call_{turn}"))
        } else {
            ScriptedTurn::text(ANSWER)
        };
        ScriptedModel::new([scripted.with_chunk_delay(Duration::from_millis(2))]).stream(request)
    }
}

struct Step;

#[derive(Deserialize, JsonSchema)]
struct StepArgs {
    n: u64,
}

impl Tool for Step {
    const NAME: &'static str = "step";
    type Args = StepArgs;
    type Output = String;
    type Error = String;

    fn description(&self) -> String {
        "Runs one step.".into()
    }

    async fn call(&self, args: StepArgs, _ctx: ToolContext) -> Result<String, String> {
        tokio::time::sleep(Duration::from_millis(5 + args.n * 3)).await;
        Ok(format!("step {} done", args.n))
    }
}

/// Prints `@@ ack <run> <next seq>` once the store acknowledged an append.
struct Acknowledging;

#[async_trait]
impl AppendTap for Acknowledging {
    async fn after(&self, run_id: &str, _expected_seq: u64, next: u64) {
        println!("@@ ack {run_id} {next}");
    }
}

/// `sqlite` or `redis`, for the report.
fn kind(spec: &str) -> &str {
    spec.split(':').next().unwrap_or(spec)
}

fn run_id(index: usize) -> String {
    format!("run_{index:04}")
}

/// The child: starts (or resumes, where a journal exists) the 1,000 runs at once and prints
/// each durable event as `@@ event <run> <kind>`.
#[test]
#[ignore = "the concurrency crash test runs it in a child process"]
fn concurrent_child() {
    let Ok(store) = std::env::var(CHILD_ENV) else {
        eprintln!("concurrent_child only runs as the concurrency crash test's child process");
        return;
    };
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let store: Arc<dyn RunStore> = Arc::new(Tapped(open_store(&store).await, Acknowledging));
        let agent = Agent::builder(StepModel)
            .tool(Step)
            .store(store)
            .lease_ttl(Duration::from_millis(500))
            .build()
            .unwrap();
        let tasks: Vec<_> = (0..RUNS)
            .map(|index| {
                let agent = agent.clone();
                tokio::spawn(async move { one_run(&agent, &run_id(index)).await })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        println!("@@ all done");
    });
}

async fn one_run(agent: &Agent, run_id: &str) {
    // A killed process's lease lives on until it expires: wait for it, as a restarted worker
    // does.
    let resumed = loop {
        match agent.resume(run_id).await {
            Err(ResumeError::Store(StoreError::LeaseHeld { expires_in_ms, .. })) => {
                tokio::time::sleep(Duration::from_millis(expires_in_ms + 10)).await;
            }
            other => break other,
        }
    };
    let mut events = match resumed {
        Ok(events) => events,
        Err(ResumeError::NotFound(_)) => {
            let options = RunOptions { run_id: Some(run_id.to_owned()), ..RunOptions::default() };
            agent.run_stream_with("Run the three steps.", options)
        }
        Err(error) => panic!("{run_id}: resume failed: {error}"),
    };
    while let Some(event) = events.next().await {
        if event.is_durable() {
            println!("@@ event {run_id} {}", event.kind());
        }
        if let agentloop::event::Event::RunFinished { outcome } = &event {
            println!("@@ answer {run_id} {}", serde_json::to_string(&outcome.answer).unwrap());
        }
        if let agentloop::event::Event::JournalFailed { error } = &event {
            panic!("{run_id}: journal failed: {error}");
        }
    }
}

/// What one child printed: per run, the highest acknowledged seq, the durable events it passed
/// on, and its answer.
#[derive(Default)]
struct Printed {
    acked: HashMap<String, u64>,
    events: HashMap<String, Vec<String>>,
    answers: HashMap<String, String>,
    lines: usize,
}

/// Runs a child on `store`; with `kill_after`, kills it that long after the store acknowledged
/// its first append.
async fn run_child(store: &str, kill_after: Option<Duration>) -> Printed {
    use std::os::unix::process::ExitStatusExt;
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["concurrent_child", "--exact", "--ignored", "--nocapture", "--test-threads=1", "-q"])
        .env(CHILD_ENV, store)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let mut printed = Printed::default();
    let mut deadline: Option<tokio::time::Instant> = None;
    let hang = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut killed = false;
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = tokio::select! {
            read = stdout.read_until(b'\n', &mut line) => read.unwrap(),
            () = tokio::time::sleep_until(deadline.unwrap_or(hang)) => {
                assert!(deadline.is_some(), "the child hung");
                child.start_kill().unwrap();
                killed = true;
                break;
            }
        };
        if read == 0 {
            break;
        }
        if deadline.is_none() && line.starts_with(b"@@ ack ") {
            deadline = kill_after.map(|after| tokio::time::Instant::now() + after);
        }
        take(&mut printed, &line);
    }
    let status = child.wait().await.unwrap();
    // What the child printed before it died is still in the pipe: those appends were
    // acknowledged and those events passed on (a line the kill cut short is not counted; one
    // the select left half read is read on).
    while stdout.read_until(b'\n', &mut line).await.unwrap() > 0 {
        take(&mut printed, &line);
        line.clear();
    }
    if killed {
        assert_eq!(status.signal(), Some(9), "the child died of SIGKILL ({status:?})");
    } else {
        assert!(status.success(), "the child failed: {status:?}");
    }
    printed
}

fn take(printed: &mut Printed, line: &[u8]) {
    let Some(line) = std::str::from_utf8(line).ok().and_then(|l| l.strip_suffix('\n')) else {
        return;
    };
    printed.lines += 1;
    let mut words = line.splitn(4, ' ');
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("@@"), Some("ack"), Some(run), Some(next)) => {
            let next: u64 = next.parse().unwrap();
            let acked = printed.acked.entry(run.to_owned()).or_insert(0);
            *acked = (*acked).max(next);
        }
        (Some("@@"), Some("event"), Some(run), Some(kind)) => {
            printed.events.entry(run.to_owned()).or_default().push(kind.to_owned());
        }
        (Some("@@"), Some("answer"), Some(run), Some(json)) => {
            printed.answers.insert(run.to_owned(), serde_json::from_str(json).unwrap());
        }
        _ => {}
    }
}

/// A kill moment from `from_ms` to `to_ms` after the first append (random, and printed).
fn random_moment(from_ms: u64, to_ms: u64) -> Duration {
    let random = u64::from_le_bytes(uuid::Uuid::new_v4().as_bytes()[..8].try_into().unwrap());
    Duration::from_millis(from_ms + random % (to_ms - from_ms))
}

async fn concurrency_crash_test(store: &str) {
    let parent = open_store(store).await;
    let started = Instant::now();
    // A first kill at a random moment of the first run.
    let kill_after = random_moment(1, 2_000);
    let first = run_child(store, Some(kill_after)).await;
    let (mut entries, mut acked_entries, mut passed_on, mut finished) = (0, 0, 0, 0);
    for index in 0..RUNS {
        let id = run_id(index);
        let journal = parent.load(&id).await.unwrap();
        for (seq, entry) in journal.iter().enumerate() {
            assert_eq!(entry.seq, seq as u64, "{id}: dense seqs");
        }
        let acked = first.acked.get(&id).copied().unwrap_or(0);
        assert!(
            acked <= journal.len() as u64,
            "{id}: acknowledged up to {acked}, the journal holds {}",
            journal.len()
        );
        let kinds: Vec<&str> = journal.iter().map(|e| e.event.kind()).collect();
        let seen = first.events.get(&id).cloned().unwrap_or_default();
        assert!(
            seen.len() <= kinds.len() && seen.iter().zip(&kinds).all(|(a, b)| a == b),
            "{id}: passed on {seen:?}, journaled {kinds:?}"
        );
        if !journal.is_empty() {
            let run = Run::from_journal(journal.iter().map(|e| &*e.event));
            assert!(run.is_ok(), "{id}: the journal folds");
            finished += usize::from(run.is_ok_and(|r| r.is_finished()));
        }
        entries += journal.len();
        acked_entries += acked as usize;
        passed_on += seen.len();
    }
    eprintln!(
        "{}: killed {kill_after:?} after the first append ({} lines read): {entries} entries in \
         {RUNS} journals, {acked_entries} acknowledged, {passed_on} passed on, {finished} runs \
         finished",
        kind(store),
        first.lines
    );
    assert!(entries > 0, "the kill came after some appends");

    // Every run resumes and ends as an uninterrupted one does.
    let second = run_child(store, None).await;
    for index in 0..RUNS {
        let id = run_id(index);
        let journal = parent.load(&id).await.unwrap();
        let run = Run::from_journal(journal.iter().map(|e| &*e.event)).unwrap();
        assert!(run.is_finished(), "{id}: finished after the resume");
        assert_eq!(run.outcome().unwrap().answer, ANSWER, "{id}");
        let completed = journal.iter().filter(|e| e.event.kind() == "tool_completed").count();
        assert_eq!(completed, ROUNDS, "{id}: each step's result journaled once");
        if let Some(answer) = second.answers.get(&id) {
            assert_eq!(answer, ANSWER);
        }
        parent.delete_run(&id).await.unwrap();
    }
    eprintln!(
        "{}: all {RUNS} runs resumed and finished; {:?} in all",
        kind(store),
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_runs_killed_at_a_random_moment_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("sqlite:{}", dir.path().join("concurrent.db").display());
    concurrency_crash_test(&spec).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_runs_killed_at_a_random_moment_on_redis() {
    let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") else {
        eprintln!(
            "skipped: AGENTLOOP_REDIS_URL is not set (the Redis concurrency test did not run)"
        );
        return;
    };
    let prefix = format!("agentloop-test:{}:", uuid::Uuid::new_v4().simple());
    concurrency_crash_test(&format!("redis:{url} {prefix}")).await;
    let client = ::redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let left: Vec<String> =
        ::redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(&mut conn).await.unwrap();
    assert!(left.is_empty(), "the test deleted its runs: {left:?}");
}
