//! The worker pool under chaos, with real processes on a real Redis: three worker processes
//! (this test binary, re-executed to run the ignored `worker_child`) execute 300 runs of
//! three tool calls each on a deterministic model, while a killer stops a random worker
//! every 2–5 s and starts it again, for as long as runs remain. The tools record every
//! execution in Redis with its idempotency key; `step_a` and `step_c` are safe to retry,
//! `step_b` is not. Runs that stop in `needs_attention` (a `step_b` was in flight when its
//! worker died) are resolved through the run service as an operator would: the call's result
//! supplied if it had its effect, the call retried if not. At the end:
//!
//! - every run finished with the right answer;
//! - every journal is dense, and its events are the uninterrupted run's, except for the
//!   documented re-tries (a safe call's `tool_started` again; `attention_needed`,
//!   `run_suspended` and `approval_decided` around an unsafe call);
//! - `step_b` ran exactly once per run; `step_a` and `step_c` at least once, every
//!   repetition with the same idempotency key;
//! - no job is left in the queue.
//!
//! `chaos_sigkill` kills with SIGKILL; `chaos_sigterm` with SIGTERM (a drain), where no run
//! may need attention and no tool may run twice. Both are ignored by default (they take a
//! minute each) and run in `.ci/run`: `cargo nextest run -p agentloop --features
//! redis,test-util --test worker_chaos --run-ignored only`. `AGENTLOOP_CHAOS_RUNS` sets the
//! number of runs (300).
#![cfg(all(unix, feature = "redis", feature = "test-util"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod worker_support;

use agentloop::run::Decision;
use agentloop::store::{RunFilter, RunState};
use agentloop::worker::{Worker, WorkerOptions};
use agentloop::{RunOptions, StopReason};
use serde_json::json;
use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use worker_support::{
    agent, clean, executions, finished, open, prefix, redis_url, submit, Delays, ANSWER,
};

const CHILD_ENV: &str = "AGENTLOOP_WORKER_CHILD";
const WORKERS: usize = 3;
const TTL: Duration = Duration::from_millis(1_000);
const TOOL_DELAY: Duration = Duration::from_millis(400);
/// The whole test stops (and fails) after this.
const LIMIT: Duration = Duration::from_secs(600);

/// A worker process: serves the `steps` agent on the prefix in the environment until
/// SIGTERM, then drains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by worker_chaos's tests as a child process"]
async fn worker_child() {
    let Ok(prefix) = std::env::var(CHILD_ENV) else { return };
    let url = redis_url().unwrap();
    let (store, queue, redis) = open(&url, &prefix).await;
    let agent = agent(store, redis, &prefix, Delays::split(TOOL_DELAY), TTL);
    let options = WorkerOptions::default()
        .concurrency(4)
        .takeover_after(TTL + Duration::from_millis(500))
        .block(Duration::from_millis(200))
        .drain(Duration::from_secs(10))
        .max_deliveries(50);
    let worker = Worker::builder(queue).agent("steps", agent).options(options).build().unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let token = shutdown.clone();
    tokio::spawn(async move {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
        term.recv().await;
        token.cancel();
    });
    let report = worker.run(shutdown).await.unwrap();
    eprintln!("worker {} stopped: {report:?}", std::process::id());
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

fn spawn_worker(prefix: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["worker_child", "--exact", "--ignored", "--nocapture", "--test-threads=1", "-q"])
        .env(CHILD_ENV, prefix)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// The worker processes; killed when dropped (a failed test leaves none behind).
struct Pool(Vec<Child>);

impl Drop for Pool {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn signal(child: &mut Child, signal: &str) {
    let status =
        Command::new("kill").arg(format!("-{signal}")).arg(child.id().to_string()).status();
    assert!(status.unwrap().success());
    child.wait().unwrap();
}

/// The kinds of a journal without the documented re-tries: a call's `tool_started` again,
/// and the operator's round trip around an unsafe call (`attention_needed`,
/// `run_suspended`, `approval_decided` — which holds the call's result when the operator
/// supplied it, in place of `tool_completed`).
fn normalized(entries: &[agentloop::store::JournalEntry]) -> Vec<&'static str> {
    let mut started = std::collections::HashSet::new();
    let mut kinds = Vec::new();
    // The iteration a suspension closed early: closed again where the run goes on.
    let mut owed = false;
    for (i, entry) in entries.iter().enumerate() {
        let kind = match &*entry.event {
            agentloop::Event::ToolStarted { call, .. } if !started.insert(call.id.clone()) => {
                continue
            }
            // The operator supplied the call's result: it stands for `tool_completed`.
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

async fn chaos(kill_signal: &str) {
    let Some(url) = redis_url() else { return };
    let runs: usize =
        std::env::var("AGENTLOOP_CHAOS_RUNS").ok().and_then(|n| n.parse().ok()).unwrap_or(300);
    let prefix = prefix(&format!("worker-chaos-{}", kill_signal.to_lowercase()));
    let (store, queue, mut redis) = open(&url, &prefix).await;
    let submitter = agent(store.clone(), redis.clone(), &prefix, Delays::split(TOOL_DELAY), TTL);
    // The uninterrupted run, in this process, for its journal's shape.
    let reference = submitter
        .run_with(
            "the reference",
            RunOptions { run_id: Some("reference".into()), ..RunOptions::default() },
        )
        .await
        .unwrap();
    assert_eq!(reference.answer, ANSWER);
    let expected = normalized(&store.load("reference").await.unwrap());
    store.delete_run("reference").await.unwrap();
    clean_executions(&mut redis, &prefix).await;

    let started = Instant::now();
    let ids = submit(&queue, &submitter, runs).await;
    let service = queue.service(store.clone());
    let seed = started.elapsed().as_nanos() as u64 | 1;
    let mut dice = Dice(seed);
    let mut pool = Pool((0..WORKERS).map(|_| spawn_worker(&prefix)).collect());
    let workers = &mut pool.0;
    let (mut kills, mut resolved, mut resolved_by_result) = (0, 0, 0);
    let mut decided = std::collections::HashSet::new();
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
                // Decided already: the run waits for a worker to continue it.
                if !decided.insert(key.clone()) {
                    continue;
                }
                let ran = executions(&mut redis, &prefix, &call.name).await.contains(&key);
                let decided = if ran {
                    resolved_by_result += 1;
                    service.set_result(&summary.run_id, &call.id, json!("b2")).await
                } else {
                    service.retry_call(&summary.run_id, &call.id).await
                };
                decided.unwrap();
                resolved += 1;
            }
        }
        if Instant::now() >= next_kill {
            let victim = dice.roll(WORKERS as u64) as usize;
            signal(&mut workers[victim], kill_signal);
            workers[victim] = spawn_worker(&prefix);
            kills += 1;
            next_kill = Instant::now() + Duration::from_millis(2_000 + dice.roll(3_000));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = started.elapsed();
    for worker in workers.iter_mut() {
        signal(worker, "TERM");
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
    // step_b once per run; the safe steps at least once, always with the run's key.
    let mut reexecuted = 0;
    for (tool, safe) in worker_support::STEPS {
        let keys = executions(&mut redis, &prefix, tool).await;
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
        "worker chaos ({kill_signal}, seed {seed}): {runs} runs of 3 tool calls on {WORKERS} worker \
         processes in {:.1} s; {kills} workers stopped with SIG{kill_signal}; {resolved} runs needed \
         attention ({resolved_by_result} resolved with the call's result, {} retried); {reexecuted} \
         safe calls ran again with their key; 0 entries lost or duplicated; 0 jobs left",
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
    clean(&mut redis, &prefix).await;
}

async fn clean_executions(redis: &mut redis::aio::ConnectionManager, prefix: &str) {
    for (tool, _) in worker_support::STEPS {
        let _: i64 =
            redis::cmd("DEL").arg(format!("{prefix}exec:{tool}")).query_async(redis).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a minute of chaos: run by .ci/run (--run-ignored only)"]
async fn chaos_sigkill() {
    chaos("KILL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a minute of chaos: run by .ci/run (--run-ignored only)"]
async fn chaos_sigterm() {
    chaos("TERM").await;
}
