//! `bench-prune`: `RunService::prune` over a store of many finished runs (see
//! `docs/RELIABILITY.md`, "Pruning").
//!
//! `cargo run --release -p agentloop-bench --bin bench-prune [-- --store sqlite|redis --runs N
//! --batch N]` (defaults sqlite, 100000, 500; Redis at `AGENTLOOP_REDIS_URL`, default
//! `redis://127.0.0.1:6379`, under a key prefix of its own that the prune empties). Seeds
//! `--runs` finished runs of six entries each, their last entry 40 days old (appended 256 at
//! a time), then times one `prune --older-than 30d` and checks that no run is left.

use agentloop::event::Event;
use agentloop::message::{FinishReason, Message};
use agentloop::run::{Outcome, RunConfig, StopReason, SCHEMA_VERSION};
use agentloop::service::{PruneOptions, RunService};
use agentloop::store::redis::{RedisOptions, RedisStore};
use agentloop::store::sqlite::SqliteStore;
use agentloop::store::{now_ms, JournalEntry, RunFilter, RunStore};
use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

fn journal(id: &str, at_ms: u64) -> Result<Vec<JournalEntry>> {
    let mut config = RunConfig::default();
    config.agent = Some("pruned".into());
    let outcome = Outcome::new(id, "done", StopReason::Completed);
    let events = vec![
        Event::RunStarted { run_id: id.into(), config: Box::new(config), input: vec![] },
        Event::IterationStarted { iteration: 1, at_ms },
        Event::ModelRequested { iteration: 1, purpose: Default::default() },
        Event::ModelResponded {
            iteration: 1,
            message: Message::assistant("done"),
            finish_reason: FinishReason::Stop,
            usage: Default::default(),
            duration_ms: 1,
            response_id: None,
            response_model: None,
            provider: None,
        },
        Event::IterationCompleted { iteration: 1, duration_ms: 1 },
        Event::RunFinished { outcome: Box::new(outcome) },
    ];
    events
        .into_iter()
        .enumerate()
        .map(|(seq, event)| {
            Ok(JournalEntry {
                seq: seq as u64,
                at_ms: at_ms + seq as u64,
                schema_version: SCHEMA_VERSION,
                event: event.try_into().map_err(|e| format!("{e:?}"))?,
            })
        })
        .collect()
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = arg(&args, "--runs").map_or(Ok(100_000), |n| n.parse())?;
    let batch: usize = arg(&args, "--batch").map_or(Ok(500), |n| n.parse())?;
    let kind = arg(&args, "--store").unwrap_or_else(|| "sqlite".into());
    let dir = std::env::temp_dir().join(format!("bench-prune-{}", std::process::id()));
    let store: Arc<dyn RunStore> = match kind.as_str() {
        "sqlite" => Arc::new(SqliteStore::open(dir.join("prune.db"))?),
        "redis" => {
            let url = std::env::var("AGENTLOOP_REDIS_URL")
                .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
            let prefix = format!("bench-prune:{}:", std::process::id());
            Arc::new(RedisStore::connect_with(&url, RedisOptions::default().prefix(prefix)).await?)
        }
        other => return Err(format!("unknown store '{other}' (sqlite or redis)").into()),
    };
    let old = now_ms() - 40 * 86_400_000;
    let seeding = Instant::now();
    for chunk in (0..runs).collect::<Vec<_>>().chunks(256) {
        let appends = chunk.iter().map(|n| {
            let store = store.clone();
            async move {
                let id = format!("run-{n:07}");
                let entries = journal(&id, old + *n as u64)?;
                store.append_entries(&id, 0, &entries).await?;
                Ok::<_, Box<dyn Error>>(())
            }
        });
        for result in futures::future::join_all(appends).await {
            result?;
        }
    }
    let seeded = seeding.elapsed();
    let service = RunService::new(store.clone());
    let options = PruneOptions::older_than(Duration::from_secs(30 * 86_400)).batch(batch);
    let started = Instant::now();
    let report = service.prune(&options).await?;
    let took = started.elapsed();
    let left = store.list_runs(&RunFilter::all().limit(1)).await?.len();
    println!(
        "store={kind} runs={runs} batch={batch} seeded_in_s={:.1} pruned={} batches={} \
         skipped_live={} prune_s={:.2} runs_per_s={:.0} left={left}",
        seeded.as_secs_f64(),
        report.removed,
        report.batches,
        report.skipped_live,
        took.as_secs_f64(),
        report.removed as f64 / took.as_secs_f64().max(1e-9)
    );
    let _ = std::fs::remove_dir_all(&dir);
    if left != 0 || report.removed != runs as u64 {
        return Err("the prune left runs behind".into());
    }
    Ok(())
}
