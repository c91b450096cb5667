//! Leases and fencing at the agent level: a crashed run (its journal ends with a tool call
//! started, no result) resumed by 50 executors at once — each on a store connection of its
//! own, as separate processes would be — runs the in-flight tool exactly once, 20 times over;
//! and an executor whose lease was taken over stops without writing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::event::Event;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::store::{MemoryStore, RunStore, StoreError};
use agentloop::tool::{Tool, ToolContext};
use agentloop::{Agent, ResumeError, RunOptions};
use common::collect;
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const TTL: Duration = Duration::from_millis(200);
const RESUMERS: usize = 50;
const ROUNDS: usize = 20;

/// A tool with a side effect that must happen once: it counts its executions (and, in the
/// crashed executor, never returns).
#[derive(Clone)]
struct Charge {
    runs: Arc<AtomicUsize>,
    hang: bool,
}

#[derive(Deserialize, JsonSchema)]
struct ChargeArgs {
    cents: u64,
}

impl Tool for Charge {
    const NAME: &'static str = "charge";
    type Args = ChargeArgs;
    type Output = String;
    type Error = String;

    fn description(&self) -> String {
        "Charges a card.".into()
    }

    async fn call(&self, args: ChargeArgs, _ctx: ToolContext) -> Result<String, String> {
        if self.hang {
            std::future::pending::<()>().await;
        }
        self.runs.fetch_add(1, Ordering::SeqCst);
        // Long enough for every other resumer to try while this one runs.
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(format!("charged {}", args.cents))
    }
}

fn agent(store: Arc<dyn RunStore>, model: ScriptedModel, charge: Charge) -> Agent {
    Agent::builder(model).tool(charge).store(store).lease_ttl(TTL).build().unwrap()
}

/// Starts `run_id` and "kills" its executor while the tool runs: the journal ends with
/// `tool_started`, and the dead executor's lease lives on until it expires.
async fn crash(store: Arc<dyn RunStore>, run_id: &str) {
    let model = ScriptedModel::new([ScriptedTurn::tool_call("charge", json!({"cents": 500}))]);
    let charge = Charge { runs: Arc::default(), hang: true };
    let crashed = agent(store, model, charge);
    let options = RunOptions { run_id: Some(run_id.into()), ..RunOptions::default() };
    let mut events = crashed.run_stream_with("Charge 5 dollars.", options);
    while let Some(event) = events.next().await {
        if event.kind() == "tool_started" {
            break;
        }
    }
    drop(events);
}

/// One round: crash a run, wait for its lease to expire, then resume it from `RESUMERS`
/// executors at once, each with a store from `open`.
async fn round<F, Fut>(open: &F, run_id: &str)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn RunStore>>,
{
    crash(open().await, run_id).await;
    tokio::time::sleep(TTL + Duration::from_millis(50)).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..RESUMERS {
        let store = open().await;
        let charge = Charge { runs: runs.clone(), hang: false };
        let run_id = run_id.to_owned();
        tasks.push(tokio::spawn(async move {
            let model = ScriptedModel::new([ScriptedTurn::text("Charged.")]);
            let resumer = agent(store, model, charge);
            match resumer.resume(&run_id).await {
                Ok(events) => Ok(collect(events).await),
                Err(error) => Err(error),
            }
        }));
    }
    let mut finished = 0;
    for task in tasks {
        match task.await.unwrap() {
            // A resumer that came after the run ended gets its terminal event again.
            Ok(events) if events.len() == 1 => {
                assert_eq!(events[0].outcome().unwrap().answer, "Charged.");
            }
            Ok(events) => {
                let outcome = events.iter().rev().find_map(Event::outcome).unwrap();
                assert_eq!(outcome.answer, "Charged.");
                assert_eq!(outcome.metrics.tool_calls, 1, "the in-flight call counts once");
                finished += 1;
            }
            Err(ResumeError::Store(StoreError::LeaseHeld { .. })) => {}
            Err(other) => panic!("unexpected: {other}"),
        }
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the in-flight tool ran exactly once");
    assert_eq!(finished, 1, "one resumer took the lease and executed the rest of the run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_resumers_run_the_in_flight_tool_once_memory() {
    let store: Arc<dyn RunStore> = Arc::new(MemoryStore::new());
    let open = || {
        let store = store.clone();
        async move { store }
    };
    for n in 0..ROUNDS {
        round(&open, &format!("run_mem_{n}")).await;
    }
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_resumers_run_the_in_flight_tool_once_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    // One connection (and thread) per executor, as separate processes have.
    let open = || {
        let path = path.clone();
        async move {
            let store = agentloop::store::sqlite::SqliteStore::open(&path).unwrap();
            Arc::new(store) as Arc<dyn RunStore>
        }
    };
    for n in 0..ROUNDS {
        round(&open, &format!("run_sqlite_{n}")).await;
    }
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_resumers_run_the_in_flight_tool_once_redis() {
    use agentloop::store::redis::{RedisOptions, RedisStore};
    let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") else {
        eprintln!("skipped: AGENTLOOP_REDIS_URL is not set");
        return;
    };
    let prefix = format!("agentloop-test:{}:", uuid::Uuid::new_v4().simple());
    let open = || {
        let (url, prefix) = (url.clone(), prefix.clone());
        async move {
            let options = RedisOptions::default().prefix(prefix);
            Arc::new(RedisStore::connect_with(&url, options).await.unwrap()) as Arc<dyn RunStore>
        }
    };
    for n in 0..ROUNDS {
        round(&open, &format!("run_redis_{n}")).await;
    }
    let store = open().await;
    for n in 0..ROUNDS {
        store.delete_run(&format!("run_redis_{n}")).await.unwrap();
    }
}

/// An executor that stalls past its lease, while another takes the run over, is fenced: its
/// next append is refused, it stops, and the journal holds only the new holder's entries.
#[tokio::test]
async fn a_stale_executor_is_fenced_and_stops() {
    let store: Arc<dyn RunStore> = Arc::new(MemoryStore::new());
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("charge", json!({"cents": 1})),
        ScriptedTurn::text("first"),
    ]);
    let runs = Arc::new(AtomicUsize::new(0));
    let stale = agent(store.clone(), model, Charge { runs: runs.clone(), hang: false });
    let options = RunOptions { run_id: Some("run_stale".into()), ..RunOptions::default() };
    let mut events = stale.run_stream_with("go", options);
    while let Some(event) = events.next().await {
        if event.kind() == "tool_started" {
            break;
        }
    }
    // The stale executor stops polling (a GC pause, a frozen VM) past its lease…
    tokio::time::sleep(TTL + Duration::from_millis(50)).await;
    // …and another executor takes the run over and finishes it.
    let model = ScriptedModel::new([ScriptedTurn::text("second")]);
    let other = agent(store.clone(), model, Charge { runs: runs.clone(), hang: false });
    let taken = collect(other.resume("run_stale").await.unwrap()).await;
    assert_eq!(taken.iter().rev().find_map(Event::outcome).unwrap().answer, "second");
    let journal_len = store.load("run_stale").await.unwrap().len();
    // The stale executor wakes up: its first renewal or append is refused, and it stops.
    let rest: Vec<Event> = events.collect().await;
    let Some(Event::JournalFailed { error }) = rest.last() else { panic!("{rest:?}") };
    assert!(error.contains("was taken over"), "{error}");
    assert!(rest.iter().all(|e| e.outcome().is_none()), "the stale executor did not finish");
    assert_eq!(store.load("run_stale").await.unwrap().len(), journal_len, "it wrote nothing");
}
