//! The worker pool under chaos, all of it real processes on a real Redis
//! (`AGENTLOOP_REDIS_URL`; skipped without it): `agentloop serve --queue` accepts 300 A2A
//! tasks, three `agentloop worker` processes execute them — three tool calls each, on a
//! scripted model that follows the conversation (any process plays a run the same turns) —
//! while a killer stops a random worker every 2–5 s and starts it again, for as long as runs
//! remain. The tools are an MCP server (`crates/agentloop/tests/fixtures/mcp/step_tools.py`) that records every
//! execution with the idempotency key the worker passes in `_meta`; `step_a` and `step_c`
//! declare `idempotentHint`, `step_b` does not. Runs that stop in `needs_attention` (a
//! `step_b` was in flight when its worker died) are resolved through the run service as an
//! operator would: the call's result supplied if it had its effect, the call retried if not.
//! At the end:
//!
//! - every run finished with the right answer;
//! - every journal is dense, and its events are the uninterrupted run's, except for the
//!   documented re-tries (a safe call's `tool_started` again; `attention_needed`,
//!   `run_suspended` and `approval_decided` around an unsafe call);
//! - `step_b` ran exactly once per run; `step_a` and `step_c` at least once, every
//!   repetition with the same idempotency key;
//! - no job is left in the queue, none went to the dead letters.
//!
//! `chaos_sigkill` kills with SIGKILL; `chaos_sigterm` with SIGTERM (a drain), where no run
//! may need attention and no tool may run twice. Both are ignored by default (they take a
//! minute each) and run in `.ci/run`. `AGENTLOOP_CHAOS_RUNS` sets the number of runs (300).
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::run::Decision;
use agentloop::store::redis::{RedisOptions, RedisStore};
use agentloop::store::{JournalEntry, RunFilter, RunState, RunStore};
use agentloop::worker::{Queue, QueueOptions};
use agentloop::StopReason;
use common::{agentloop, Keys, Running};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WORKERS: usize = 3;
/// The tool calls of every run, in order: (tool, safe to retry).
const STEPS: [(&str, bool); 3] = [("step_a", true), ("step_b", false), ("step_c", true)];
const ANSWER: &str = "done: a1 b2 c3";
/// The whole test stops (and fails) after this.
const LIMIT: Duration = Duration::from_secs(600);

/// The test's directory: `agentloop.toml` (the agent `steps`, its runs in Redis under
/// `prefix` with a lease of 1 s, the step tools' MCP server), the script, the tools' log.
fn setup(dir: &Path, url: &str, prefix: &str) -> PathBuf {
    let log = dir.join("executions.log");
    let calls: Vec<Value> = STEPS
        .iter()
        .enumerate()
        .map(|(i, (tool, _))| {
            json!({"tool_calls": [{"name": format!("steps__{tool}"), "arguments": {"n": i + 1}}]})
        })
        .chain([json!({"text": ANSWER})])
        .collect();
    let script = json!({"follow_history": true, "turns": calls});
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    let tools =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../agentloop/tests/fixtures/mcp/step_tools.py");
    let toml = format!(
        "[agent]\nname = \"steps\"\n\n[provider]\nkind = \"scripted\"\nscript = \"script.json\"\n\n\
         [tools]\nenabled = []\n\n\
         [store]\nkind = \"redis\"\nurl = {url:?}\nprefix = {prefix:?}\nlease_ttl_secs = 1\n\n\
         [[mcp]]\nname = \"steps\"\ntransport = {{ type = \"stdio\", command = \"python3\", \
         args = [{tools:?}], env = {{ STEP_LOG = {log:?}, STEP_DELAY_MS = \"400\" }} }}\n",
        tools = tools.display().to_string(),
        log = log.display().to_string(),
    );
    std::fs::write(dir.join("agentloop.toml"), toml).unwrap();
    log
}

/// `agentloop serve --queue` on a free port, added to `pool`: the agent's URL.
fn serve(dir: &Path, url: &str, pool: &mut Vec<Running>) -> String {
    let child = agentloop(dir, url)
        .args(["serve", "--bind", "127.0.0.1:0", "--queue", url])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    pool.push(Running(child));
    let stdout = pool.last_mut().unwrap().stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    loop {
        let line = lines.next().expect("serve said where it listens").unwrap();
        if let Some(rest) = line.strip_prefix("listening on ") {
            return rest.split(' ').next().unwrap().to_owned();
        }
    }
}

/// `agentloop worker`: 4 runs at once, deliveries enough for the chaos.
fn worker(dir: &Path, url: &str) -> Running {
    let child = agentloop(dir, url)
        .args(["worker", "--queue", url, "--concurrency", "4", "--drain-secs", "10"])
        .args(["--max-deliveries", "50"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Running(child)
}

fn signal(child: &mut Child, signal: &str) {
    let status =
        Command::new("kill").arg(format!("-{signal}")).arg(child.id().to_string()).status();
    assert!(status.unwrap().success());
    child.wait().unwrap();
}

/// A small seeded generator (xorshift), for the killer's choices.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// The executions the tools recorded: per tool, the idempotency keys in order.
fn executions(log: &Path) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let (tool, key) = line.split_once(' ').unwrap();
        out.entry(tool.to_owned()).or_default().push(key.to_owned());
    }
    out
}

/// The kinds of a journal without the documented re-tries: a call's `tool_started` again,
/// and the operator's round trip around an unsafe call (`attention_needed`,
/// `run_suspended`, `approval_decided` — which holds the call's result when the operator
/// supplied it, in place of `tool_completed`).
fn normalized(entries: &[JournalEntry]) -> Vec<&'static str> {
    let mut started = HashSet::new();
    let mut kinds = Vec::new();
    // The iteration a suspension closed early: closed again where the run goes on.
    let mut owed = false;
    for (i, entry) in entries.iter().enumerate() {
        let kind = match &*entry.event {
            agentloop::Event::ToolStarted { call, .. } if !started.insert(call.id.clone()) => {
                continue
            }
            agentloop::Event::ApprovalDecided { decision: Decision::SetResult { .. }, .. } => {
                "tool_completed"
            }
            agentloop::Event::IterationCompleted { .. }
                if entries.get(i + 1).is_some_and(|next| next.event.kind() == "run_suspended") =>
            {
                owed = true;
                continue;
            }
            event
                if ["attention_needed", "run_suspended", "approval_decided"]
                    .contains(&event.kind()) =>
            {
                continue
            }
            event => event.kind(),
        };
        if owed && kind == "iteration_started" {
            kinds.push("iteration_completed");
        }
        owed &= !matches!(kind, "iteration_started" | "iteration_completed");
        kinds.push(kind);
    }
    kinds
}

/// Sends a task without waiting for it: its id.
async fn send(client: &reqwest::Client, agent_url: &str, text: &str) -> String {
    let message =
        json!({"messageId": message_id(), "role": "ROLE_USER", "parts": [{"text": text}]});
    let params = json!({"message": message, "configuration": {"returnImmediately": true}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params});
    let response: Value =
        client.post(agent_url).json(&body).send().await.unwrap().json().await.unwrap();
    response["result"]["task"]["id"].as_str().unwrap_or_else(|| panic!("{response}")).to_owned()
}

fn message_id() -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("m-{nanos}")
}

async fn finished(store: &Arc<dyn RunStore>) -> usize {
    store.list_runs(&RunFilter::all().state(RunState::Finished)).await.unwrap().len()
}

async fn chaos(kill_signal: &str) {
    let Some(url) = common::redis_url() else { return };
    let runs: usize =
        std::env::var("AGENTLOOP_CHAOS_RUNS").ok().and_then(|n| n.parse().ok()).unwrap_or(300);
    let keys = Keys::new(&url, &format!("chaos-{}", kill_signal.to_lowercase()));
    let prefix = keys.prefix.clone();
    let dir = tempfile::tempdir().unwrap();
    let log = setup(dir.path(), &url, &prefix);
    let options = RedisOptions::default().prefix(prefix.clone());
    let store: Arc<dyn RunStore> = Arc::new(RedisStore::connect_with(&url, options).await.unwrap());
    let queue =
        Queue::connect_with(&url, QueueOptions::default().prefix(prefix.clone())).await.unwrap();
    let client = agentloop::tls::http_client_builder()
        .unwrap()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut pool: Vec<Running> = Vec::new();
    let agent_url = serve(dir.path(), &url, &mut pool);

    // The uninterrupted run, on one worker, for its journal's shape.
    pool.push(worker(dir.path(), &url));
    let reference = send(&client, &agent_url, "the reference").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while finished(&store).await < 1 {
        assert!(Instant::now() < deadline, "the reference run did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let entries = store.load(&reference).await.unwrap();
    assert_eq!(entries.last().unwrap().event.outcome().unwrap().answer, ANSWER);
    let expected = normalized(&entries);
    store.delete_run(&reference).await.unwrap();
    std::fs::remove_file(&log).unwrap();

    let started = Instant::now();
    let mut ids = Vec::with_capacity(runs);
    for n in 0..runs {
        ids.push(send(&client, &agent_url, &format!("task {n}")).await);
    }
    let service = queue.service(store.clone());
    let seed = started.elapsed().as_nanos() as u64 | 1;
    let mut dice = Dice(seed);
    for _ in 1..WORKERS {
        pool.push(worker(dir.path(), &url));
    }
    let (mut kills, mut resolved, mut resolved_by_result) = (0, 0, 0);
    let mut decided = HashSet::new();
    let mut next_kill = Instant::now() + Duration::from_millis(2_000 + dice.roll(3_000));
    loop {
        assert!(started.elapsed() < LIMIT, "the chaos test ran out of time");
        if finished(&store).await == runs {
            break;
        }
        // An operator resolves the runs that need attention.
        let waiting =
            store.list_runs(&RunFilter::all().state(RunState::NeedsAttention)).await.unwrap();
        for summary in waiting {
            let entries = store.load(&summary.run_id).await.unwrap();
            let Some(outcome) = entries.last().and_then(|e| e.event.outcome()) else { continue };
            let StopReason::NeedsAttention { calls, .. } = &outcome.stop_reason else { continue };
            for call in calls {
                let key = format!("{}:{}", summary.run_id, call.id);
                if !decided.insert(key.clone()) {
                    continue;
                }
                let ran = executions(&log).get("step_b").is_some_and(|keys| keys.contains(&key));
                let decision = if ran {
                    resolved_by_result += 1;
                    service.set_result(&summary.run_id, &call.id, json!("b2")).await
                } else {
                    service.retry_call(&summary.run_id, &call.id).await
                };
                decision.unwrap();
                resolved += 1;
            }
        }
        if Instant::now() >= next_kill {
            // Workers only: the server (index 0) stays.
            let victim = 1 + dice.roll(WORKERS as u64) as usize;
            signal(&mut pool[victim], kill_signal);
            pool[victim] = worker(dir.path(), &url);
            kills += 1;
            next_kill = Instant::now() + Duration::from_millis(2_000 + dice.roll(3_000));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = started.elapsed();
    for child in pool.iter_mut().skip(1) {
        signal(child, "TERM");
    }

    // Every run finished with the right answer, its journal dense and of the right shape.
    let mut shapes: BTreeMap<String, usize> = BTreeMap::new();
    for id in &ids {
        let entries = store.load(id).await.unwrap();
        assert!(entries.iter().enumerate().all(|(i, e)| e.seq == i as u64), "{id}: not dense");
        let outcome = entries.last().unwrap().event.outcome().unwrap();
        assert_eq!(outcome.answer, ANSWER, "{id}");
        let kinds = normalized(&entries);
        if kinds != expected {
            *shapes.entry(format!("{kinds:?}")).or_default() += 1;
        }
    }
    assert!(
        shapes.is_empty(),
        "journals unlike the uninterrupted run's: {shapes:#?}\nexpected {expected:?}"
    );
    // step_b once per call; the safe steps at least once, always with the run's key.
    let recorded = executions(&log);
    let mut reexecuted = 0;
    for (tool, safe) in STEPS {
        let keys = recorded.get(tool).cloned().unwrap_or_default();
        let mut per_call: BTreeMap<&str, usize> = BTreeMap::new();
        for key in &keys {
            *per_call.entry(key.as_str()).or_default() += 1;
        }
        assert_eq!(per_call.len(), runs, "{tool}: one idempotency key per run");
        for id in &ids {
            assert!(
                per_call.keys().any(|key| key.starts_with(&format!("{id}:"))),
                "{tool} never ran for {id}"
            );
        }
        if !safe {
            assert!(
                per_call.values().all(|&n| n == 1),
                "{tool} ran twice for a call: {per_call:?}"
            );
        }
        reexecuted += keys.len() - runs;
    }
    let status = queue.status().await.unwrap();
    let left: u64 = status.agents.iter().map(|a| a.depth + a.pending).sum();
    assert_eq!(left, 0, "jobs left: {status:?}");
    assert_eq!(status.dead_letters, 0, "{:?}", queue.dead_letters(10).await.unwrap());
    println!(
        "worker chaos ({kill_signal}, seed {seed}): {runs} A2A tasks of 3 MCP tool calls on \
         {WORKERS} `agentloop worker` processes in {:.1} s; {kills} workers stopped with \
         SIG{kill_signal}; {resolved} runs needed attention ({resolved_by_result} resolved with \
         the call's result, {} retried); {reexecuted} safe calls ran again with their key; 0 \
         entries lost or duplicated; 0 jobs left",
        elapsed.as_secs_f64(),
        resolved - resolved_by_result,
    );
    if kill_signal == "TERM" {
        assert_eq!(
            (resolved, reexecuted),
            (0, 0),
            "a drain needs no attention and runs nothing twice"
        );
    }
    drop(pool);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a minute of chaos: run by .ci/run"]
async fn chaos_sigkill() {
    chaos("KILL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a minute of chaos: run by .ci/run"]
async fn chaos_sigterm() {
    chaos("TERM").await;
}
