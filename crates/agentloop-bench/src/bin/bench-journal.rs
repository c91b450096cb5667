//! `bench-journal`: durable appends from many runs at once (see `docs/PERFORMANCE.md`,
//! "Group commit").
//!
//! `cargo run --release -p agentloop-bench --bin bench-journal [-- --appends N]`: for
//! C = 1, 100 and 1,000 concurrent runs, each run appends a journal of N events (default
//! 30: a five-round run's durable events) one event at a time, each append awaited before the
//! next, as an executor does. Stores: SQLite with one transaction per append (`max_batch 1`,
//! the store before group commit), SQLite with group commit (no delay, and a 1 ms delay),
//! Redis (at `AGENTLOOP_REDIS_URL`, under a key prefix of its own, emptied afterwards) and
//! memory. Prints appends per second and the p50 / p99 latency of one append.

use agentloop::event::Event;
use agentloop::message::{FinishReason, Message};
use agentloop::run::RunConfig;
use agentloop::store::redis::{RedisOptions, RedisStore};
use agentloop::store::sqlite::{SqliteOptions, SqliteStore};
use agentloop::store::{MemoryStore, RunStore};
use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// A journal of `n` events the size of a real one's: the start, then model answers.
fn journal(run_id: &str, n: usize) -> Vec<Event> {
    let mut events = vec![Event::RunStarted {
        run_id: run_id.into(),
        config: Box::new(RunConfig::default()),
        input: vec![Message::user("What is 17 times 23, and what is the capital of Japan?")],
    }];
    let text = "The answer, with the tool results folded in: ".repeat(6);
    for i in 1..n {
        events.push(Event::ModelResponded {
            iteration: u32::try_from(i).unwrap_or(u32::MAX),
            message: Message::assistant(text.clone()),
            finish_reason: FinishReason::Stop,
            usage: Default::default(),
            duration_ms: 50,
            response_id: None,
            response_model: None,
        });
    }
    events
}

/// Appends per second, and the p50 / p99 latency of one append.
async fn measure(
    store: Arc<dyn RunStore>,
    runs: usize,
    appends: usize,
) -> Result<(f64, Duration, Duration)> {
    let prefix = uuid::Uuid::new_v4().simple().to_string();
    let started = Instant::now();
    let tasks: Vec<_> = (0..runs)
        .map(|r| {
            let store = store.clone();
            let id = format!("bench-{prefix}-{r}");
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(appends);
                for (seq, event) in (0u64..).zip(journal(&id, appends)) {
                    let at = Instant::now();
                    store.append(&id, seq, std::slice::from_ref(&event)).await?;
                    latencies.push(at.elapsed());
                }
                Ok::<_, agentloop::store::StoreError>((id, latencies))
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(runs * appends);
    let mut ids = Vec::with_capacity(runs);
    for task in tasks {
        let (id, mut each) = task.await??;
        latencies.append(&mut each);
        ids.push(id);
    }
    let elapsed = started.elapsed();
    for id in ids {
        store.delete_run(&id).await?;
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Ok(((runs * appends) as f64 / elapsed.as_secs_f64(), at(0.5), at(0.99)))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let appends = args
        .iter()
        .position(|a| a == "--appends")
        .and_then(|i| args.get(i + 1))
        .map_or(Ok(30), |n| n.parse())?;
    let dir = std::env::temp_dir().join(format!("agentloop-bench-journal-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let url =
        std::env::var("AGENTLOOP_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let redis_prefix = format!("agentloop-bench-journal:{}:", std::process::id());
    println!("{appends} appends per run, one event each; 2 worker threads");
    println!("| store | runs at once | appends/s | p50 append | p99 append |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for runs in [1usize, 100, 1_000] {
        let sqlite = |name: &str, max_batch: usize, delay_ms: u64| -> Result<Arc<dyn RunStore>> {
            let options = SqliteOptions {
                max_batch,
                group_commit_delay: Duration::from_millis(delay_ms),
                ..SqliteOptions::default()
            };
            Ok(Arc::new(SqliteStore::open_with(dir.join(format!("{name}-{runs}.db")), options)?))
        };
        let stores: Vec<(&str, Arc<dyn RunStore>)> = vec![
            ("memory", Arc::new(MemoryStore::new())),
            ("SQLite, a transaction per append", sqlite("single", 1, 0)?),
            ("SQLite, group commit", sqlite("group", 256, 0)?),
            ("SQLite, group commit, 1 ms delay", sqlite("delay", 256, 1)?),
            (
                "Redis",
                Arc::new(
                    RedisStore::connect_with(
                        &url,
                        RedisOptions::default().prefix(redis_prefix.clone()),
                    )
                    .await?,
                ),
            ),
        ];
        for (name, store) in stores {
            let (rate, p50, p99) = measure(store, runs, appends).await?;
            println!(
                "| {name} | {runs} | {rate:.0} | {:.0} µs | {:.0} µs |",
                p50.as_secs_f64() * 1e6,
                p99.as_secs_f64() * 1e6
            );
        }
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
