//! `bench-service`: the run service on SQLite (see `docs/PERFORMANCE.md`, "Run service").
//!
//! `cargo run --release -p agentloop-bench --bin bench-service [-- --store sqlite|redis --runs N
//! --subscribers N --cancels N]` (defaults sqlite, 100000, 1000, 50; `--smoke` runs tiny
//! numbers; Redis at `AGENTLOOP_REDIS_URL`, default `redis://127.0.0.1:6379`, under a key
//! prefix of its own that is emptied afterwards):
//!
//! - `list` over `--runs` finished runs: the newest 100, and 100 of one agent among ten;
//! - one run of 50 tool turns followed by `--subscribers` subscriptions at once, each on the
//!   service's store (one SQLite connection, polled; on Redis each subscription also has a
//!   pub/sub connection that wakes it on every append): entries delivered per second, and the
//!   resident memory each subscription adds;
//! - `--cancels` runs, each cancelled from a second connection while its tool hangs: the
//!   latency from `RunService::cancel` to the executor's `run_cancelled`, p50 and p99.

use agentloop::event::Event;
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::run::RunConfig;
use agentloop::service::RunService;
use agentloop::store::redis::{RedisOptions, RedisStore};
use agentloop::store::sqlite::SqliteStore;
use agentloop::store::{RunFilter, RunStore};
use futures::StreamExt;
use serde_json::json;
use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

struct Options {
    runs: usize,
    subscribers: usize,
    cancels: usize,
    redis: bool,
}

/// Where the runs are journaled: a SQLite file per part of the bench, or Redis under one key
/// prefix. Each `open` is a connection of its own, as another process would have.
enum Backend {
    Sqlite(std::path::PathBuf),
    Redis { url: String, prefix: String },
}

impl Backend {
    async fn open(&self, part: &str) -> Result<Arc<dyn RunStore>> {
        Ok(match self {
            Self::Sqlite(dir) => Arc::new(SqliteStore::open(dir.join(format!("{part}.db")))?),
            Self::Redis { url, prefix } => {
                let options = RedisOptions::default().prefix(format!("{prefix}{part}:"));
                Arc::new(RedisStore::connect_with(url, options).await?)
            }
        })
    }

    /// Deletes every run of `part` (Redis; the SQLite files go with their directory).
    async fn clean(&self, part: &str) -> Result<()> {
        if let Self::Redis { .. } = self {
            let store = self.open(part).await?;
            agentloop_bench::delete_all_runs(store.as_ref()).await?;
        }
        Ok(())
    }
}

/// Waits `ms` milliseconds (forever when 0).
#[tool]
async fn wait(ms: u64) -> std::result::Result<String, String> {
    if ms == 0 {
        std::future::pending::<()>().await;
    }
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok("waited".into())
}

fn parse() -> Result<Options> {
    let mut options = Options { runs: 100_000, subscribers: 1_000, cancels: 50, redis: false };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || -> Result<usize> {
            Ok(args.next().ok_or_else(|| format!("{arg} needs a value"))?.parse()?)
        };
        match arg.as_str() {
            "--runs" => options.runs = value()?,
            "--subscribers" => options.subscribers = value()?,
            "--cancels" => options.cancels = value()?,
            "--smoke" => {
                options = Options { runs: 200, subscribers: 20, cancels: 3, ..options };
            }
            "--store" => match args.next().as_deref() {
                Some("sqlite") => options.redis = false,
                Some("redis") => options.redis = true,
                other => return Err(format!("--store takes sqlite or redis, not {other:?}").into()),
            },
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(options)
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

async fn list(backend: &Backend, runs: usize) -> Result<()> {
    let store = backend.open("list").await?;
    let started = Instant::now();
    for n in 0..runs {
        let run_id = format!("run_{n:06}");
        let mut config = RunConfig::default();
        config.agent = Some(format!("agent_{}", n % 10));
        let mut run = agentloop::run::Run::new(&run_id, config, vec![Message::user("hi")]);
        let _ = run.next_step();
        let events: Vec<Event> = run.drain_events().filter(Event::is_durable).collect();
        store.append(&run_id, 0, &events).await?;
    }
    println!("- seeded {runs} runs in {:.1} s", started.elapsed().as_secs_f64());
    let service = RunService::new(store);
    for (what, filter, expected) in [
        ("the newest 100", RunFilter::all().limit(100), 100.min(runs)),
        (
            "100 of one agent of ten",
            RunFilter::all().agent("agent_3").limit(100),
            100.min(runs / 10),
        ),
    ] {
        let mut times = Vec::new();
        for _ in 0..20 {
            let started = Instant::now();
            let found = service.list(&filter).await?;
            times.push(started.elapsed());
            if found.len() != expected {
                return Err(format!("list {what}: {} runs", found.len()).into());
            }
        }
        times.sort();
        println!(
            "- list {what} over {runs} runs: p50 {:.2} ms, p99 {:.2} ms",
            percentile(&times, 0.5).as_secs_f64() * 1e3,
            percentile(&times, 0.99).as_secs_f64() * 1e3
        );
    }
    // Every run, page by page with cursors.
    let started = Instant::now();
    let (mut filter, mut seen, mut pages) = (RunFilter::all().limit(1_000), 0usize, 0usize);
    loop {
        let page = service.list(&filter).await?;
        let Some(last) = page.last() else { break };
        filter = filter.after(last.cursor());
        seen += page.len();
        pages += 1;
    }
    if seen != runs {
        return Err(format!("paging saw {seen} of {runs} runs").into());
    }
    println!(
        "- paged through all {runs} runs, 1,000 a page: {pages} pages in {:.0} ms ({:.2} ms a page)",
        started.elapsed().as_secs_f64() * 1e3,
        started.elapsed().as_secs_f64() * 1e3 / pages.max(1) as f64
    );
    Ok(())
}

async fn subscribers(backend: &Backend, count: usize) -> Result<()> {
    let turns: Vec<ScriptedTurn> = (0..50)
        .map(|_| ScriptedTurn::tool_call("wait", json!({"ms": 2})))
        .chain([ScriptedTurn::text("done")])
        .collect();
    let agent = Agent::builder(ScriptedModel::new(turns))
        .tool(Wait)
        .max_iterations(100)
        .store(backend.open("fanout").await?)
        .build()?;
    let service = RunService::new(backend.open("fanout").await?);
    let before = rss_kib();
    let started = Instant::now();
    let tasks: Vec<_> = (0..count)
        .map(|_| {
            let mut entries = service.subscribe("run_fanout", 0);
            tokio::spawn(async move {
                let mut n = 0usize;
                while let Some(entry) = entries.next().await {
                    entry.map_err(|e| e.to_string())?;
                    n += 1;
                }
                Ok::<usize, String>(n)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let during = rss_kib();
    let options = RunOptions { run_id: Some("run_fanout".into()), ..RunOptions::default() };
    let outcome = agentloop::agent::outcome_of(agent.run_stream_with("go", options)).await?;
    let run_done = started.elapsed();
    let mut delivered = 0usize;
    for task in tasks {
        delivered += task.await??;
    }
    let elapsed = started.elapsed();
    println!(
        "- {count} subscribers on one run ({} journal entries, run took {:.2} s, answer {:?}): {} entries delivered in {:.2} s = {:.0} entries/s; +{} KiB resident with the subscriptions open = {:.1} KiB each",
        delivered / count.max(1),
        run_done.as_secs_f64(),
        outcome.answer,
        delivered,
        elapsed.as_secs_f64(),
        delivered as f64 / elapsed.as_secs_f64(),
        during.saturating_sub(before),
        during.saturating_sub(before) as f64 / count.max(1) as f64
    );
    Ok(())
}

async fn cancels(backend: &Backend, count: usize) -> Result<()> {
    let service = RunService::new(backend.open("cancel").await?);
    let mut latencies = Vec::new();
    for n in 0..count {
        let agent =
            Agent::builder(ScriptedModel::new([ScriptedTurn::tool_call("wait", json!({"ms": 0}))]))
                .tool(Wait)
                .store(backend.open("cancel").await?)
                .build()?;
        let run_id = format!("run_cancel_{n}");
        let options = RunOptions { run_id: Some(run_id.clone()), ..RunOptions::default() };
        let mut events = agent.run_stream_with("wait", options);
        while let Some(event) = events.next().await {
            if event.kind() == "tool_started" {
                break;
            }
        }
        // The executor's stream is consumed all along, as a real executor's is.
        let executor = tokio::spawn(async move {
            while let Some(event) = events.next().await {
                if event.kind() == "run_cancelled" {
                    return Some(Instant::now());
                }
            }
            None
        });
        // A varying phase against the executor's poll.
        tokio::time::sleep(Duration::from_millis((n as u64 * 37) % 250)).await;
        let asked = Instant::now();
        service.cancel(&run_id, "bench").await?;
        if let Some(at) = executor.await? {
            latencies.push(at - asked);
        }
    }
    latencies.sort();
    println!(
        "- cross-connection cancel over {} runs: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        latencies.len(),
        percentile(&latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3
    );
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let options = parse()?;
    let dir = std::env::temp_dir().join(format!("agentloop-bench-service-{}", std::process::id()));
    let backend = if options.redis {
        let url = std::env::var("AGENTLOOP_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
        let prefix = format!("agentloop-bench-service:{}:", std::process::id());
        println!("store: Redis at {url}, keys under {prefix}");
        Backend::Redis { url, prefix }
    } else {
        std::fs::create_dir_all(&dir)?;
        println!("store: SQLite files in {}", dir.display());
        Backend::Sqlite(dir.clone())
    };
    let result = async {
        list(&backend, options.runs).await?;
        subscribers(&backend, options.subscribers).await?;
        cancels(&backend, options.cancels).await
    }
    .await;
    for part in ["list", "fanout", "cancel"] {
        backend.clean(part).await?;
    }
    if let Backend::Sqlite(dir) = &backend {
        std::fs::remove_dir_all(dir)?;
    }
    result
}
