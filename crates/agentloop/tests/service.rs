//! The run service from another process's point of view: a `RunService` on its own store
//! connection (a second `SqliteStore` on the same file, as another process has) follows a run
//! as it is executed, reconnects at random points without losing or repeating an entry, and
//! cancels, pauses and resumes it.
#![cfg(feature = "sqlite")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::event::Event;
use agentloop::protocol::Envelope;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::run::StopReason;
use agentloop::service::RunService;
use agentloop::store::sqlite::SqliteStore;
use agentloop::store::{JournalEntry, RunFilter, RunStore};
use agentloop::tool::{Tool, ToolContext};
use agentloop::{Agent, RunOptions};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sleeps `ms` (forever when `ms` is 0), then answers.
struct Wait;

#[derive(Deserialize, JsonSchema)]
struct WaitArgs {
    ms: u64,
}

impl Tool for Wait {
    const NAME: &'static str = "wait";
    type Args = WaitArgs;
    type Output = String;
    type Error = String;

    fn description(&self) -> String {
        "Waits.".into()
    }

    async fn call(&self, args: WaitArgs, _ctx: ToolContext) -> Result<String, String> {
        if args.ms == 0 {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(Duration::from_millis(args.ms)).await;
        Ok(format!("waited {}", args.ms))
    }
}

/// The journal entries the envelopes carry.
fn entries(envelopes: &[Envelope]) -> Vec<JournalEntry> {
    envelopes
        .iter()
        .map(|e| JournalEntry {
            seq: e.seq,
            at_ms: e.at_ms,
            schema_version: e.format,
            event: e.event.clone().try_into().unwrap(),
        })
        .collect()
}

fn store(path: &Path) -> Arc<dyn RunStore> {
    Arc::new(SqliteStore::open(path).unwrap())
}

fn executor(path: &Path, turns: Vec<ScriptedTurn>) -> Agent {
    Agent::builder(ScriptedModel::new(turns)).tool(Wait).store(store(path)).build().unwrap()
}

/// Three tool turns with pauses between the journal's entries, then an answer.
fn slow_turns() -> Vec<ScriptedTurn> {
    let call = |ms: u64| {
        ScriptedTurn::tool_call("wait", json!({ "ms": ms }))
            .with_chunk_delay(Duration::from_millis(3))
    };
    vec![call(20), call(5), call(30), ScriptedTurn::text("All done.")]
}

fn start(agent: &Agent, run_id: &str) -> tokio::task::JoinHandle<Vec<Event>> {
    let options = RunOptions { run_id: Some(run_id.into()), ..RunOptions::default() };
    let events = agent.run_stream_with("Wait three times.", options);
    tokio::spawn(common::collect(events))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_in_another_process_sees_the_journal_as_it_grows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let service = RunService::new(store(&path)).poll_interval(Duration::from_millis(5));
    // Subscribed before the run exists: it waits for the first entry.
    let early = tokio::spawn({
        let service = service.clone();
        async move { service.subscribe("run_sub", 0).collect::<Vec<_>>().await }
    });
    let run = start(&executor(&path, slow_turns()), "run_sub");
    let streamed = run.await.unwrap();
    let seen: Vec<Envelope> = early.await.unwrap().into_iter().map(Result::unwrap).collect();
    let journal = store(&path).load("run_sub").await.unwrap();
    assert!(seen.iter().all(|e| e.run_id == "run_sub" && e.is_journaled()));
    assert_eq!(entries(&seen), journal, "the subscriber saw every entry, in order, once");
    let durable: Vec<Event> = streamed.into_iter().filter(Event::is_durable).collect();
    assert_eq!(seen.iter().map(|e| e.event.clone()).collect::<Vec<_>>(), durable);
    assert_eq!(seen.last().unwrap().event.kind(), "run_finished", "it ends with the outcome");
    // After the end: from the last seq the subscription ends at once; past it, too.
    let last = journal.last().unwrap().seq;
    assert_eq!(service.subscribe("run_sub", last + 1).count().await, 0);
    assert_eq!(service.subscribe("run_sub", last).count().await, 1);
    let listed = service.list(&RunFilter::all()).await.unwrap();
    assert_eq!(listed.len(), 1);
}

/// One run followed by a subscriber that takes `takes[i]` entries, drops its subscription and
/// comes back from the seq after the last entry it saw, again and again: what it saw is the
/// journal, entry for entry.
async fn reconnecting_subscriber(path: &Path, run_id: &str, takes: &[usize]) {
    let service = RunService::new(store(path)).poll_interval(Duration::from_millis(3));
    let run = start(&executor(path, slow_turns()), run_id);
    let mut seen: Vec<Envelope> = Vec::new();
    for take in takes.iter().cycle() {
        let from = seen.last().map_or(0, |e| e.seq + 1);
        let batch: Vec<Envelope> =
            service.subscribe(run_id, from).take(*take).map(Result::unwrap).collect().await;
        let ended = batch.is_empty() || batch.iter().any(|e| e.event.outcome().is_some());
        seen.extend(batch);
        if ended {
            break;
        }
    }
    run.await.unwrap();
    let journal = store(path).load(run_id).await.unwrap();
    assert_eq!(entries(&seen), journal, "{run_id} with takes {takes:?}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 12, ..Default::default() })]

    /// A subscriber that disconnects at random points (random batch sizes, while the run
    /// goes on) and resubscribes from its last seq reconstructs the exact journal.
    #[test]
    fn a_subscriber_that_reconnects_at_random_points_loses_and_repeats_nothing(
        takes in proptest::collection::vec(1usize..5, 1..12),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(reconnecting_subscriber(&dir.path().join("runs.db"), "run_re", &takes));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_cancels_a_run_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let service = RunService::new(store(&path));
    let mut latencies = Vec::new();
    for n in 0..5 {
        let run_id = format!("run_cancel_{n}");
        let agent = executor(&path, vec![ScriptedTurn::tool_call("wait", json!({"ms": 0}))]);
        let options = RunOptions { run_id: Some(run_id.clone()), ..RunOptions::default() };
        let mut events = agent.run_stream_with("Wait forever.", options);
        while let Some(event) = events.next().await {
            if event.kind() == "tool_started" {
                break;
            }
        }
        let rest = tokio::spawn(async move {
            let mut last = None;
            while let Some(event) = events.next().await {
                if event.outcome().is_some() {
                    last = Some((event, Instant::now()));
                }
            }
            last.unwrap()
        });
        let asked = Instant::now();
        service.cancel(&run_id, "closed from the dashboard").await.unwrap();
        let (event, at) = rest.await.unwrap();
        latencies.push(at - asked);
        let Event::RunCancelled { outcome, .. } = &event else { panic!("{event:?}") };
        assert!(matches!(outcome.stop_reason, StopReason::Cancelled { .. }), "{outcome:?}");
        let subscribed: Vec<_> = service.subscribe(&run_id, 0).collect().await;
        assert_eq!(subscribed.last().unwrap().as_ref().unwrap().event.kind(), "run_cancelled");
    }
    latencies.sort();
    eprintln!("cross-process cancel latency: {latencies:?}");
    assert!(latencies.iter().all(|l| *l < Duration::from_secs(1)), "{latencies:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_pauses_and_resumes_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let service = RunService::new(store(&path)).poll_interval(Duration::from_millis(5));
    let turns = vec![
        ScriptedTurn::tool_call("wait", json!({"ms": 400})),
        ScriptedTurn::tool_call("wait", json!({"ms": 1})),
        ScriptedTurn::text("Done."),
    ];
    let run = start(&executor(&path, turns), "run_pause");
    let mut entries = service.subscribe("run_pause", 0);
    while let Some(entry) = entries.next().await {
        if entry.unwrap().event.kind() == "tool_started" {
            break;
        }
    }
    service.pause("run_pause", "maintenance").await.unwrap();
    // The run pauses at its next safe point and stays there.
    let mut paused = false;
    while let Some(entry) = entries.next().await {
        if let Event::Paused { reason } = entry.unwrap().event {
            assert_eq!(reason, "maintenance");
            paused = true;
            break;
        }
    }
    assert!(paused);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!run.is_finished(), "still paused");
    service.resume("run_pause").await.unwrap();
    let events = run.await.unwrap();
    let outcome = events.iter().rev().find_map(Event::outcome).unwrap();
    assert_eq!(outcome.answer, "Done.");
}

/// On Redis the subscription is pushed: every append publishes on the run's channel, and a
/// subscriber whose poll interval is ten seconds still sees each entry within milliseconds
/// of its append (polling alone would take up to the interval; the fallback read, a second).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_a_subscriber_is_woken_by_each_append() {
    use agentloop::store::redis::{RedisOptions, RedisStore};
    let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") else {
        eprintln!("skipped: AGENTLOOP_REDIS_URL is not set");
        return;
    };
    let prefix = format!("agentloop-test:{}:", uuid::Uuid::new_v4().simple());
    let open = || async {
        let options = RedisOptions::default().prefix(prefix.clone());
        Arc::new(RedisStore::connect_with(&url, options).await.unwrap()) as Arc<dyn RunStore>
    };
    let service = RunService::new(open().await).poll_interval(Duration::from_secs(10));
    let subscriber = tokio::spawn({
        let service = service.clone();
        async move {
            let mut seen = Vec::new();
            let mut envelopes = service.subscribe("run_push", 0);
            while let Some(envelope) = envelopes.next().await {
                seen.push((envelope.unwrap(), agentloop::store::now_ms()));
            }
            seen
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let agent = Agent::builder(ScriptedModel::new(slow_turns()))
        .tool(Wait)
        .store(open().await)
        .build()
        .unwrap();
    let started = Instant::now();
    start(&agent, "run_push").await.unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(5), subscriber).await.unwrap().unwrap();
    let journal = open().await.load("run_push").await.unwrap();
    let envelopes: Vec<Envelope> = seen.iter().map(|(e, _)| e.clone()).collect();
    assert_eq!(entries(&envelopes), journal, "every entry, in order, once");
    let mut lags: Vec<u64> = seen.iter().map(|(e, at)| at.saturating_sub(e.at_ms)).collect();
    lags.sort_unstable();
    let p50 = lags[lags.len() / 2];
    assert!(p50 < 200, "median delivery lag {p50} ms: not pushed ({lags:?})");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(open().await.delete_run("run_push").await.unwrap());
}
