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
use std::time::{Duration, Instant};

/// Short, so that a round waits little for a crashed executor's lease; long enough that a
/// live executor starved of CPU (two cores, fifty executors, a build beside them) still
/// renews it in time — a lease that expires under a live executor lets another take the run
/// over while its tool runs (its journal writes are fenced; its side effect is not).
const TTL: Duration = Duration::from_millis(600);
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

// ------------------------------------------------ the same with separate processes

const CHILD_ENV: &str = "AGENTLOOP_LEASE_CHILD";
const PROCESSES: usize = 50;
const PROCESS_ROUNDS: usize = 20;

/// A tool whose side effect is a line appended to a file shared by every process.
struct FileCharge {
    file: std::path::PathBuf,
}

impl Tool for FileCharge {
    const NAME: &'static str = "charge";
    type Args = ChargeArgs;
    type Output = String;
    type Error = String;

    fn description(&self) -> String {
        "Charges a card.".into()
    }

    async fn call(&self, args: ChargeArgs, ctx: ToolContext) -> Result<String, String> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.file)
            .map_err(|e| e.to_string())?;
        writeln!(file, "{} pid {}", ctx.idempotency_key, std::process::id())
            .map_err(|e| e.to_string())?;
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(format!("charged {}", args.cents))
    }
}

/// The child: one executor process that tries to resume the run and prints what happened.
#[test]
#[ignore = "the separate-process test runs it in child processes"]
fn lease_child() {
    let Ok(db) = std::env::var(CHILD_ENV) else { return };
    let run_id = std::env::var("LEASE_RUN_ID").unwrap();
    let effects = std::path::PathBuf::from(std::env::var("LEASE_EFFECTS").unwrap());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let store = Arc::new(agentloop::store::sqlite::SqliteStore::open(&db).unwrap());
        let model = ScriptedModel::new([ScriptedTurn::text("Charged.")]);
        let agent = Agent::builder(model)
            .tool(FileCharge { file: effects })
            .store(store)
            .lease_ttl(TTL)
            .build()
            .unwrap();
        match agent.resume(&run_id).await {
            Ok(events) => {
                let events = collect(events).await;
                // A process that stalls past its lease (a loaded machine) is fenced: its next
                // append fails and it stops; another finishes the run.
                let verdict = match events.last() {
                    Some(Event::JournalFailed { .. }) => "fenced",
                    _ if events.len() > 1 => "executed",
                    _ => "over",
                };
                println!("@@ {verdict}");
            }
            Err(ResumeError::Store(StoreError::LeaseHeld { .. })) => println!("@@ refused"),
            Err(other) => println!("@@ error {other}"),
        }
    });
}

#[cfg(all(unix, feature = "sqlite"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_processes_run_the_in_flight_tool_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let started = Instant::now();
    for round in 0..PROCESS_ROUNDS {
        let run_id = format!("run_proc_{round}");
        let effects = dir.path().join(format!("effects_{round}.txt"));
        let store = Arc::new(agentloop::store::sqlite::SqliteStore::open(&db).unwrap());
        crash(store, &run_id).await;
        tokio::time::sleep(TTL + Duration::from_millis(50)).await;
        let children: Vec<_> = (0..PROCESSES)
            .map(|_| {
                tokio::process::Command::new(std::env::current_exe().unwrap())
                    .args(["lease_child", "--exact", "--ignored", "--nocapture", "-q"])
                    .env(CHILD_ENV, &db)
                    .env("LEASE_RUN_ID", &run_id)
                    .env("LEASE_EFFECTS", &effects)
                    .stdout(std::process::Stdio::piped())
                    .kill_on_drop(true)
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut verdicts = std::collections::BTreeMap::<String, usize>::new();
        for child in children {
            let output = child.wait_with_output().await.unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout);
            let verdict = stdout
                .lines()
                .find_map(|l| l.strip_prefix("@@ "))
                .unwrap_or("no verdict")
                .to_owned();
            *verdicts.entry(verdict).or_default() += 1;
        }
        let lines = std::fs::read_to_string(&effects).unwrap_or_default();
        assert_eq!(lines.lines().count(), 1, "round {round}: {verdicts:?}\n{lines}");
        assert_eq!(verdicts.get("executed"), Some(&1), "round {round}: {verdicts:?}");
        let others = ["refused", "over", "fenced"]
            .iter()
            .map(|v| verdicts.get(*v).unwrap_or(&0))
            .sum::<usize>();
        assert_eq!(others, PROCESSES - 1, "round {round}: {verdicts:?}");
    }
    eprintln!(
        "{PROCESS_ROUNDS} rounds of {PROCESSES} processes in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
