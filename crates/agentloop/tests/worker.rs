//! The worker pool on a real Redis: runs submitted and executed, a dead worker's runs taken
//! over (a safe tool run again with its key, an unsafe one held in `needs_attention` and
//! resolved through the run service), a draining worker handing its runs over, and bad input
//! (malformed jobs, unknown runs, another configuration, a job that kills its workers, a
//! stream without a group, a full queue). A worker "dies" here by having its task aborted:
//! nothing is released or acknowledged, as with SIGKILL (the process test is
//! `crates/agentloop-cli/tests/worker_chaos.rs`).
#![cfg(all(feature = "redis", feature = "test-util"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod worker_support;

use agentloop::event::Event;
use agentloop::store::{RunFilter, RunState, RunStore};
use agentloop::worker::{Queue, Worker, WorkerError, WorkerOptions, WorkerReport};
use agentloop::{Agent, RunOptions, StopReason};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use worker_support::{
    agent, clean, executions, finished, open, prefix, redis_url, submit, Delays, ANSWER,
};

const TTL: Duration = Duration::from_millis(1_000);

fn options() -> WorkerOptions {
    WorkerOptions::default()
        .concurrency(4)
        .takeover_after(TTL + Duration::from_millis(500))
        .block(Duration::from_millis(100))
        .drain(Duration::from_secs(10))
}

/// A worker running in a task, and the token that drains it.
fn spawn(
    queue: &Queue,
    agent: &Agent,
    options: WorkerOptions,
) -> (JoinHandle<WorkerReport>, CancellationToken) {
    let worker = Worker::builder(queue.clone())
        .agent("steps", agent.clone())
        .options(options)
        .build()
        .unwrap();
    let token = CancellationToken::new();
    let shutdown = token.clone();
    (tokio::spawn(async move { worker.run(shutdown).await.unwrap() }), token)
}

/// Waits (up to 30 s) until `check` holds.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn state(store: &Arc<dyn RunStore>, run_id: &str) -> RunState {
    let entries = store.load(run_id).await.unwrap();
    entries.last().map_or(RunState::Running, |entry| RunState::after(&entry.event))
}

async fn started(store: &Arc<dyn RunStore>, run_id: &str, tool: &str) -> bool {
    store
        .load(run_id)
        .await
        .unwrap()
        .iter()
        .any(|entry| matches!(&*entry.event, Event::ToolStarted { call, .. } if call.name == tool))
}

fn answer(entries: &[agentloop::store::JournalEntry]) -> String {
    entries.iter().rev().find_map(|entry| entry.event.outcome()).unwrap().answer.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submitted_runs_are_executed_once_and_acknowledged() {
    let Some(url) = redis_url() else { return };
    let prefix = prefix("worker-runs");
    let (store, queue, mut redis) = open(&url, &prefix).await;
    let agent = agent(store.clone(), redis.clone(), &prefix, Delays::after(Duration::ZERO), TTL);
    let ids = submit(&queue, &agent, 20).await;
    let (worker, token) = spawn(&queue, &agent, options());
    until("every run finished", || async { finished(&store).await == ids.len() }).await;
    token.cancel();
    let report = worker.await.unwrap();
    assert_eq!((report.jobs, report.ended, report.takeovers), (20, 20, 0), "{report:?}");
    for id in &ids {
        assert_eq!(answer(&store.load(id).await.unwrap()), ANSWER);
    }
    for tool in ["step_a", "step_b", "step_c"] {
        let mut keys = executions(&mut redis, &prefix, tool).await;
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), 20, "{tool} ran once per run");
    }
    let status = queue.status().await.unwrap();
    assert_eq!(status.agents.len(), 1);
    assert_eq!((status.agents[0].depth, status.agents[0].pending), (0, 0), "{status:?}");
    assert!(!queue.has_job(&ids[0]).await.unwrap());
    clean(&mut redis, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_workers_run_is_taken_over_and_an_unsafe_call_waits_for_an_operator() {
    let Some(url) = redis_url() else { return };
    let prefix = prefix("worker-takeover");
    let (store, queue, mut redis) = open(&url, &prefix).await;
    let slow =
        agent(store.clone(), redis.clone(), &prefix, Delays::after(Duration::from_secs(5)), TTL);
    let run_id = queue.submit("steps", &slow, "go", RunOptions::default()).await.unwrap();
    let (dying, _) = spawn(&queue, &slow, options());
    // step_a is safe to retry: killed during it, it runs again with the same key.
    until("step_a started", || started(&store, &run_id, "step_a")).await;
    dying.abort();
    let _ = dying.await;
    let quick = agent(
        store.clone(),
        redis.clone(),
        &prefix,
        Delays::after(Duration::from_millis(1_500)),
        TTL,
    );
    let (worker, token) = spawn(&queue, &quick, options());
    // step_b is not: killed during it (after its effect), the run waits for an operator.
    until("step_b had its effect", || {
        let (prefix, mut redis) = (prefix.clone(), redis.clone());
        async move { !executions(&mut redis, &prefix, "step_b").await.is_empty() }
    })
    .await;
    token.cancel();
    worker.abort();
    let _ = worker.await;
    let (worker, token) = spawn(&queue, &quick, options());
    until("the run needs attention", || async {
        state(&store, &run_id).await == RunState::NeedsAttention
    })
    .await;
    let entries = store.load(&run_id).await.unwrap();
    let outcome = entries.last().unwrap().event.outcome().unwrap().clone();
    let StopReason::NeedsAttention { calls, reason } = &outcome.stop_reason else {
        panic!("{:?}", outcome.stop_reason)
    };
    assert_eq!(calls[0].name, "step_b");
    assert!(reason.contains("not declared safe to retry"), "{reason}");
    assert!(entries.iter().any(|e| e.event.kind() == "attention_needed"));
    // The operator sees that step_b had its effect, and supplies its result.
    let b = executions(&mut redis, &prefix, "step_b").await;
    assert_eq!(b.len(), 1, "step_b ran once: {b:?}");
    until("the job is acknowledged", || async { !queue.has_job(&run_id).await.unwrap() }).await;
    let service = queue.service(store.clone());
    service.set_result(&run_id, &calls[0].id, json!("b2")).await.unwrap();
    until("the run finished", || async { state(&store, &run_id).await == RunState::Finished })
        .await;
    token.cancel();
    let report = worker.await.unwrap();
    assert!(report.ended >= 1, "{report:?}");
    assert_eq!(answer(&store.load(&run_id).await.unwrap()), ANSWER);
    let a = executions(&mut redis, &prefix, "step_a").await;
    assert_eq!(a.len(), 2, "step_a ran again: {a:?}");
    assert_eq!(a[0], a[1], "with the same idempotency key");
    assert_eq!(executions(&mut redis, &prefix, "step_b").await.len(), 1, "step_b ran once");
    assert_eq!(executions(&mut redis, &prefix, "step_c").await.len(), 1);
    let status = queue.status().await.unwrap();
    assert_eq!((status.agents[0].depth, status.agents[0].pending), (0, 0), "{status:?}");
    clean(&mut redis, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_worker_hands_its_runs_over_at_a_safe_point() {
    let Some(url) = redis_url() else { return };
    let prefix = prefix("worker-drain");
    let (store, queue, mut redis) = open(&url, &prefix).await;
    let agent = agent(
        store.clone(),
        redis.clone(),
        &prefix,
        Delays::after(Duration::from_millis(300)),
        TTL,
    );
    let ids = submit(&queue, &agent, 3).await;
    let (first, token) = spawn(&queue, &agent, options());
    for id in &ids {
        until("a tool started", || started(&store, id, "step_a")).await;
    }
    let drained_at = Instant::now();
    token.cancel();
    let report = first.await.unwrap();
    assert_eq!(report.handed_over, 3, "{report:?}");
    assert!(drained_at.elapsed() < Duration::from_secs(2), "{:?}", drained_at.elapsed());
    // Handed over at once: the next worker need not wait for a lease or a takeover.
    let (second, token) = spawn(&queue, &agent, options().takeover_after(Duration::from_secs(60)));
    until("every run finished", || async { finished(&store).await == 3 }).await;
    token.cancel();
    let report = second.await.unwrap();
    assert_eq!((report.ended, report.takeovers), (3, 0), "{report:?}");
    for tool in ["step_a", "step_b", "step_c"] {
        assert_eq!(executions(&mut redis, &prefix, tool).await.len(), 3, "{tool}: no re-execution");
    }
    for id in &ids {
        let entries = store.load(id).await.unwrap();
        assert_eq!(answer(&entries), ANSWER);
        assert!(entries.iter().all(|e| e.event.kind() != "attention_needed"));
    }
    clean(&mut redis, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_jobs_go_to_the_dead_letter_stream_with_their_reason() {
    let Some(url) = redis_url() else { return };
    let prefix = prefix("worker-bad");
    let (store, queue, mut redis) = open(&url, &prefix).await;
    let agent = agent(store.clone(), redis.clone(), &prefix, Delays::after(Duration::ZERO), TTL);
    // A stream that is not a consumer group yet, holding a malformed job and a job for a run
    // the store does not have; then a good one.
    let stream = queue.stream("steps");
    let _: String = redis::cmd("XADD")
        .arg(&stream)
        .arg("*")
        .arg("hello")
        .arg("world")
        .query_async(&mut redis)
        .await
        .unwrap();
    let _: String = redis::cmd("XADD")
        .arg(&stream)
        .arg("*")
        .arg("run")
        .arg("run_nowhere")
        .query_async(&mut redis)
        .await
        .unwrap();
    let good = agent.create_run("go", RunOptions::default()).await.unwrap();
    let _: String = redis::cmd("XADD")
        .arg(&stream)
        .arg("*")
        .arg("run")
        .arg(&good)
        .query_async(&mut redis)
        .await
        .unwrap();
    let (worker, token) = spawn(&queue, &agent, options());
    until("the good run finished", || async { state(&store, &good).await == RunState::Finished })
        .await;
    until("two dead letters", || async { queue.dead_letters(10).await.unwrap().len() == 2 }).await;
    token.cancel();
    let report = worker.await.unwrap();
    assert_eq!((report.dead_letters, report.ended), (2, 1), "{report:?}");
    let dead = queue.dead_letters(10).await.unwrap();
    assert!(dead[0].reason.contains("malformed job: it has no `run` field"), "{dead:?}");
    assert!(dead[1].reason.contains("no run 'run_nowhere'"), "{dead:?}");
    let status = queue.status().await.unwrap();
    assert_eq!(status.dead_letters, 2);
    assert_eq!(status.agents[0].pending, 0, "{status:?}");
    clean(&mut redis, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_another_configuration_refuses_the_job() {
    let Some(url) = redis_url() else { return };
    let prefix = prefix("worker-refuse");
    let (store, queue, mut redis) = open(&url, &prefix).await;
    let agent = agent(store.clone(), redis.clone(), &prefix, Delays::after(Duration::ZERO), TTL);
    let run_id = queue.submit("steps", &agent, "go", RunOptions::default()).await.unwrap();
    let other = Agent::builder(worker_support::Steps)
        .name("steps")
        .instructions("Another prompt.")
        .store(store.clone())
        .build()
        .unwrap();
    let mut refusing = options();
    refusing.max_refusals = 2;
    let (worker, token) = spawn(&queue, &other, refusing);
    until("a dead letter", || async { !queue.dead_letters(10).await.unwrap().is_empty() }).await;
    token.cancel();
    let report = worker.await.unwrap();
    assert_eq!((report.refused, report.dead_letters), (1, 1), "{report:?}");
    let dead = queue.dead_letters(10).await.unwrap();
    assert_eq!(dead[0].run_id, run_id);
    assert!(dead[0].reason.contains("differs from the run's"), "{}", dead[0].reason);
    assert!(dead[0].reason.contains("instructions"), "the difference is named: {}", dead[0].reason);
    // The run itself is untouched: a sweep leaves it alone, an explicit enqueue gives it to a
    // worker with the right configuration.
    assert_eq!(state(&store, &run_id).await, RunState::Running);
    assert_eq!(queue.sweep(store.as_ref(), "steps", Duration::ZERO, 10).await.unwrap(), 0);
    let again = queue.enqueue("steps", &run_id, agentloop::worker::JobKind::Continue).await;
    assert!(matches!(again, Ok(agentloop::worker::Enqueued::Added(_))), "{again:?}");
    let (worker, token) = spawn(&queue, &agent, options());
    until("the run finished", || async { state(&store, &run_id).await == RunState::Finished })
        .await;
    token.cancel();
    worker.await.unwrap();
    clean(&mut redis, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_kills_its_workers_is_dead_lettered_and_its_run_failed() {
    let Some(url) = redis_url() else { return };
    let prefix = prefix("worker-poison");
    let (store, queue, mut redis) = open(&url, &prefix).await;
    let slow =
        agent(store.clone(), redis.clone(), &prefix, Delays::after(Duration::from_secs(5)), TTL);
    let run_id = queue.submit("steps", &slow, "go", RunOptions::default()).await.unwrap();
    let (dying, _) = spawn(&queue, &slow, options().max_deliveries(1));
    until("step_a started", || started(&store, &run_id, "step_a")).await;
    dying.abort();
    let _ = dying.await;
    let (worker, token) = spawn(&queue, &slow, options().max_deliveries(1));
    until("the run failed", || async { state(&store, &run_id).await == RunState::Failed }).await;
    token.cancel();
    let report = worker.await.unwrap();
    assert_eq!((report.takeovers, report.dead_letters), (1, 1), "{report:?}");
    let dead = queue.dead_letters(10).await.unwrap();
    assert!(dead[0].reason.contains("delivered 2 times"), "{dead:?}");
    let entries = store.load(&run_id).await.unwrap();
    let Event::RunFailed { error, .. } = &*entries.last().unwrap().event else { panic!() };
    assert!(error.contains("delivered 2 times"), "{error}");
    clean(&mut redis, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_limit_holds_across_the_pool() {
    let Some(url) = redis_url() else { return };
    let prefix = prefix("worker-limit");
    let (store, queue, mut redis) = open(&url, &prefix).await;
    let agent = agent(
        store.clone(),
        redis.clone(),
        &prefix,
        Delays::after(Duration::from_millis(100)),
        TTL,
    );
    queue.set_limit("steps", Some(2)).await.unwrap();
    assert_eq!(queue.limits().await.unwrap().get("steps"), Some(&2));
    submit(&queue, &agent, 8).await;
    // Two workers of 4 each: 8 slots, of which the agent may use 2.
    let pool = [spawn(&queue, &agent, options()), spawn(&queue, &agent, options())];
    let mut most = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = agentloop::store::now_ms();
        let running = store.list_runs(&RunFilter::all().state(RunState::Running)).await.unwrap();
        most = most.max(running.iter().filter(|run| run.lease_is_live(now)).count());
        assert!(queue.slots_in_use("steps").await.unwrap() <= 2);
        if finished(&store).await == 8 {
            break;
        }
        assert!(Instant::now() < deadline, "timed out waiting for the runs");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!((1..=2).contains(&most), "at most 2 runs at once, seen {most}");
    for (worker, token) in pool {
        token.cancel();
        worker.await.unwrap();
    }
    assert_eq!(queue.slots_in_use("steps").await.unwrap(), 0, "every slot given back");
    queue.set_limit("steps", None).await.unwrap();
    assert!(queue.limits().await.unwrap().is_empty());
    clean(&mut redis, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_journaled_without_its_job_is_swept_into_the_queue() {
    let Some(url) = redis_url() else { return };
    let prefix = prefix("worker-sweep");
    let (store, queue, mut redis) = open(&url, &prefix).await;
    let agent = agent(store.clone(), redis.clone(), &prefix, Delays::after(Duration::ZERO), TTL);
    // A submitter that died between the journal and the job.
    let run_id = agent.create_run("go", RunOptions::default()).await.unwrap();
    let sweeping = options()
        .sweep_every(Some(Duration::from_millis(200)))
        .takeover_after(Duration::from_millis(300));
    let (worker, token) = spawn(&queue, &agent, sweeping);
    until("the swept run finished", || async {
        state(&store, &run_id).await == RunState::Finished
    })
    .await;
    token.cancel();
    let report = worker.await.unwrap();
    assert_eq!(report.ended, 1, "{report:?}");
    assert_eq!(answer(&store.load(&run_id).await.unwrap()), ANSWER);
    clean(&mut redis, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_refuses_a_submission_and_leaves_nothing() {
    let Some(url) = redis_url() else { return };
    let prefix = prefix("worker-full");
    let (store, _, mut redis) = open(&url, &prefix).await;
    let options = agentloop::worker::QueueOptions::default().prefix(&prefix).max_queued(Some(2));
    let queue = Queue::connect_with(&url, options).await.unwrap();
    let agent = agent(store.clone(), redis.clone(), &prefix, Delays::after(Duration::ZERO), TTL);
    for _ in 0..2 {
        queue.submit("steps", &agent, "go", RunOptions::default()).await.unwrap();
    }
    let run_id = "run_refused".to_owned();
    let options = RunOptions { run_id: Some(run_id.clone()), ..RunOptions::default() };
    let error = queue.submit("steps", &agent, "go", options).await.unwrap_err();
    assert!(matches!(error, WorkerError::QueueFull { depth: 2, max: 2, .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.contains("is full (2 of at most 2 jobs waiting or executing): try again"),
        "{text}"
    );
    assert!(store.load(&run_id).await.unwrap().is_empty(), "the refused run left nothing");
    clean(&mut redis, &prefix).await;
}

/// A TCP proxy to Redis that can be cut (every connection closed, new ones refused) and
/// restored: Redis going away and coming back, as the worker and the store see it.
struct Proxy {
    url: String,
    down: Arc<std::sync::atomic::AtomicBool>,
    cut: tokio::sync::watch::Sender<u64>,
}

impl Proxy {
    async fn start(target: &str) -> Self {
        let target = target.trim_start_matches("redis://").trim_end_matches('/').to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("redis://{}", listener.local_addr().unwrap());
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (cut, _) = tokio::sync::watch::channel(0u64);
        let (is_down, cuts) = (down.clone(), cut.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else { return };
                if is_down.load(std::sync::atomic::Ordering::SeqCst) {
                    continue;
                }
                let target = target.clone();
                let mut cut = cuts.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(&target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Self { url, down, cut }
    }

    fn set_down(&self, down: bool) {
        self.down.store(down, std::sync::atomic::Ordering::SeqCst);
        if down {
            self.cut.send_modify(|n| *n += 1);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_going_away_mid_run_is_waited_out_and_nothing_is_lost() {
    let Some(url) = redis_url() else { return };
    let prefix = prefix("worker-outage");
    let proxy = Proxy::start(&url).await;
    // The worker and its store reach Redis through the proxy; the tools and the test do not.
    let (store, queue, mut redis) = open(&proxy.url, &prefix).await;
    let agent = agent(
        store.clone(),
        redis.clone(),
        &prefix,
        Delays::after(Duration::from_millis(300)),
        TTL,
    );
    let ids = submit(&queue, &agent, 4).await;
    let (worker, token) = spawn(&queue, &agent, options());
    let (direct, _, _) = open(&url, &prefix).await;
    until("a tool started", || started(&direct, &ids[0], "step_a")).await;
    proxy.set_down(true);
    assert!(store.next_seq(&ids[0]).await.is_err(), "Redis is away for the worker");
    tokio::time::sleep(Duration::from_secs(2)).await;
    proxy.set_down(false);
    until("every run finished", || async { finished(&direct).await == ids.len() }).await;
    token.cancel();
    // Waited out by the connection (the appends went through once Redis was back), or
    // interrupted and taken up again: either way every run is whole.
    let report = worker.await.unwrap();
    assert_eq!(report.ended + report.interrupted, report.jobs, "{report:?}");
    for id in &ids {
        let entries = direct.load(id).await.unwrap();
        assert!(entries.iter().enumerate().all(|(i, e)| e.seq == i as u64), "{id}: not dense");
        assert_eq!(answer(&entries), ANSWER);
    }
    let status = queue.status().await.unwrap();
    assert_eq!((status.agents[0].depth, status.agents[0].pending), (0, 0), "{status:?}");
    clean(&mut redis, &prefix).await;
}
