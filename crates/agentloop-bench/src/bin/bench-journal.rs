//! `bench-journal`: durable appends from many runs at once (see `docs/PERFORMANCE.md`,
//! "Group commit").
//!
//! `cargo run --release -p agentloop-bench --bin bench-journal [-- --appends N]`: for
//! C = 1, 100 and 1,000 concurrent runs, each run appends a journal of N events (default
//! 30: a five-round run's durable events) one event at a time, each append awaited before the
//! next, as an executor does. Stores: SQLite with one transaction per append (`max_batch 1`,
//! the store before group commit), SQLite with group commit (no delay, and a 1 ms delay),
//! Redis (at `AGENTLOOP_REDIS_URL`, under a key prefix of its own, emptied afterwards) and
//! memory. Prints appends per second, the p50 / p99 latency of one append and the process's
//! CPU time per append (all threads: the runs' and the store's).
//!
//! `--runs 1000` (comma-separated) picks the concurrencies, `--stores group,redis` the stores
//! (`memory`, `single`, `group`, `delay`, `sqlite-defaults`: group commit with SQLite's
//! default page cache and checkpoints made by the writer every 1,000 pages, `redis`).

use agentloop::event::Event;
use agentloop::message::{FinishReason, Message};
use agentloop::run::RunConfig;
use agentloop::store::redis::{RedisOptions, RedisStore};
use agentloop::store::sqlite::{SqliteOptions, SqliteStore};
use agentloop::store::{MemoryStore, RunStore};
use agentloop_bench::measure::{process_cpu, written};
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
            provider: None,
        });
    }
    events
}

/// What one measurement gives.
struct Measured {
    appends_per_s: f64,
    p50: Duration,
    p99: Duration,
    cpu_per_append: Duration,
    /// The store's connection thread's share (SQLite), per append.
    writer_per_append: Duration,
    /// Bytes this process passed to `write` calls (the WAL, for SQLite), per append.
    written_per_append: f64,
    /// Appends per commit: SQLite's group commit at work (1 on Redis, in memory).
    appends_per_commit: f64,
}

/// CPU time of this process's threads named `name`, by thread id (from `/proc`, in clock
/// ticks: good over seconds, not for one append).
fn threads_cpu(name: &str) -> std::collections::HashMap<String, Duration> {
    let tick = Duration::from_secs(1)
        / u32::try_from(rustix::param::clock_ticks_per_second()).unwrap_or(100);
    let mut found = std::collections::HashMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return found };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        // `pid (comm) state ...`: the fields after the closing parenthesis.
        let Some((head, rest)) = stat.rsplit_once(") ") else { continue };
        if !head.ends_with(&format!("({name}")) {
            continue;
        }
        let fields: Vec<&str> = rest.split(' ').collect();
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after the state.
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u32>().ok()).unwrap_or(0);
        found.insert(
            task.file_name().to_string_lossy().into_owned(),
            tick * (ticks(11) + ticks(12)),
        );
    }
    found
}

/// Appends per second, the p50 / p99 latency of one append, and CPU time per append.
async fn measure(store: Arc<dyn RunStore>, runs: usize, appends: usize) -> Result<Measured> {
    let prefix = uuid::Uuid::new_v4().simple().to_string();
    let started = Instant::now();
    let cpu = process_cpu();
    let writer = threads_cpu("agentloop-sqlit");
    let bytes = written();
    let stats = store.write_stats().unwrap_or_default();
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
    let cpu = process_cpu().saturating_sub(cpu);
    let bytes = written().saturating_sub(bytes);
    let stats = store.write_stats().unwrap_or_default().since(stats);
    let writer: Duration = threads_cpu("agentloop-sqlit")
        .into_iter()
        .map(|(tid, now)| now.saturating_sub(writer.get(&tid).copied().unwrap_or_default()))
        .sum();
    for id in ids {
        store.delete_run(&id).await?;
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    let total = runs * appends;
    Ok(Measured {
        appends_per_s: total as f64 / elapsed.as_secs_f64(),
        p50: at(0.5),
        p99: at(0.99),
        cpu_per_append: cpu / u32::try_from(total).unwrap_or(u32::MAX),
        writer_per_append: writer / u32::try_from(total).unwrap_or(u32::MAX),
        written_per_append: bytes as f64 / total as f64,
        appends_per_commit: stats.appends as f64 / stats.commits.max(1) as f64,
    })
}

/// The comma-separated values after `flag`, or `default`.
fn list(args: &[String], flag: &str, default: &str) -> Vec<String> {
    let value = args
        .iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map_or(default, String::as_str);
    value.split(',').map(str::to_owned).collect()
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
    let concurrencies = list(&args, "--runs", "1,100,1000")
        .iter()
        .map(|n| n.parse::<usize>())
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let wanted = list(&args, "--stores", "memory,single,group,delay,redis");
    println!("| store | runs at once | appends/s | p50 append | p99 append | CPU per append | of it, SQLite's thread | bytes written per append | appends per commit |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for runs in concurrencies {
        let sqlite = |name: &str, max_batch: usize, delay_ms: u64| -> Result<Arc<dyn RunStore>> {
            let options = SqliteOptions {
                max_batch,
                group_commit_delay: Duration::from_millis(delay_ms),
                ..SqliteOptions::default()
            };
            Ok(Arc::new(SqliteStore::open_with(dir.join(format!("{name}-{runs}.db")), options)?))
        };
        for key in &wanted {
            let (name, store): (&str, Arc<dyn RunStore>) = match key.as_str() {
                "memory" => ("memory", Arc::new(MemoryStore::new())),
                "single" => ("SQLite, a transaction per append", sqlite("single", 1, 0)?),
                "group" => ("SQLite, group commit", sqlite("group", 256, 0)?),
                "delay" => ("SQLite, group commit, 1 ms delay", sqlite("delay", 256, 1)?),
                "sqlite-defaults" => (
                    "SQLite, group commit, SQLite's default cache and checkpoints",
                    Arc::new(SqliteStore::open_with(
                        dir.join(format!("sqlite-defaults-{runs}.db")),
                        SqliteOptions {
                            cache_kib: 2_000,
                            checkpoint_interval: Duration::ZERO,
                            checkpoint_pages: 1_000,
                            ..SqliteOptions::default()
                        },
                    )?),
                ),
                "redis" => (
                    "Redis",
                    Arc::new(
                        RedisStore::connect_with(
                            &url,
                            RedisOptions::default().prefix(redis_prefix.clone()),
                        )
                        .await?,
                    ),
                ),
                other => return Err(format!("unknown store '{other}'").into()),
            };
            let m = measure(store, runs, appends).await?;
            println!(
                "| {name} | {runs} | {:.0} | {:.0} µs | {:.0} µs | {:.1} µs | {:.1} µs | {:.0} | {:.1} |",
                m.appends_per_s,
                m.p50.as_secs_f64() * 1e6,
                m.p99.as_secs_f64() * 1e6,
                m.cpu_per_append.as_secs_f64() * 1e6,
                m.writer_per_append.as_secs_f64() * 1e6,
                m.written_per_append,
                m.appends_per_commit
            );
        }
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
