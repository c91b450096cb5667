//! `bench-workers`: how the worker pool (`agentloop::worker`, Redis Streams) scales with its
//! worker processes (see `docs/PERFORMANCE.md`, "Worker pool").
//!
//! ```sh
//! cargo build --release -p agentloop-bench
//! target/release/bench-workers            # 2,000 runs, K = 5, 50 ms, 1, 2 and 4 workers × 64
//! target/release/bench-workers --smoke    # 200 runs, 1 and 2 workers × 16
//! # --runs N --k K --latency-ms L --workers 1,2,4 --concurrency C --window N --poll-ms 5
//! # --redis URL (default AGENTLOOP_REDIS_URL or redis://127.0.0.1:6379) --mock URL
//! # --no-in-process --max-seconds 900
//! ```
//!
//! The mock model is a `mockllm` process (started from this binary's directory unless
//! `--mock` names one), answering after `--latency-ms`; a run is K tool rounds of the `add`
//! tool and a final answer (K + 1 model calls, the "rounds"). For each worker count N:
//!
//! - **in process**: one process (this one) runs the agent in N × C tasks, each one run
//!   after another, until the runs are done;
//! - **queue**: N worker processes (this binary re-executed as `bench-workers worker`), each
//!   executing C runs at once; this process submits the runs (`Queue::submit`), keeping N × C
//!   (`--window`) submitted and not finished: it reads the stream's length every `--poll-ms`
//!   and submits as many as have finished.
//!
//! Throughput is runs (and model calls) per second from the first run's start to the last
//! run's end; a run's latency is from its start (`run_started` journaled: the submission) to
//! its end (its last entry), both from the run registry. The Redis server's commands
//! (`INFO commandstats`) and CPU (`INFO cpu`) are diffed over each phase; the processes' CPU
//! comes from `/proc`. Every run is checked finished and the model's request count exact.
//! Everything is under a key prefix of this process's own, deleted after each phase.

mod phases;
mod redis_info;
mod report;
mod setup;
mod worker;

use agentloop_bench::Script;
use anyhow::Context as _;
use phases::{Bench, Mock, Settings};
use setup::Target;
use std::time::Duration;

struct Options {
    settings: Settings,
    k: u32,
    latency_ms: u64,
    workers: Vec<usize>,
    redis: String,
    mock: Option<String>,
    in_process: bool,
}

fn parse(args: impl Iterator<Item = String>) -> anyhow::Result<Options> {
    let mut options = Options {
        settings: Settings {
            runs: 2_000,
            concurrency: 64,
            window: None,
            poll: Duration::from_millis(5),
            max_seconds: 900,
        },
        k: 5,
        latency_ms: 50,
        workers: vec![1, 2, 4],
        redis: std::env::var("AGENTLOOP_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".into()),
        mock: None,
        in_process: true,
    };
    let mut args = args;
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--runs" => options.settings.runs = value()?.parse()?,
            "--k" => options.k = value()?.parse()?,
            "--latency-ms" => options.latency_ms = value()?.parse()?,
            "--concurrency" => options.settings.concurrency = value()?.parse::<usize>()?.max(1),
            "--window" => options.settings.window = Some(value()?.parse()?),
            "--poll-ms" => options.settings.poll = Duration::from_millis(value()?.parse()?),
            "--max-seconds" => options.settings.max_seconds = value()?.parse()?,
            "--redis" => options.redis = value()?,
            "--mock" => options.mock = Some(value()?),
            "--no-in-process" => options.in_process = false,
            "--workers" => {
                options.workers = value()?
                    .split(',')
                    .map(|n| n.trim().parse::<usize>().map(|n| n.max(1)))
                    .collect::<Result<_, _>>()?;
            }
            "--smoke" => {
                options.settings.runs = 200;
                options.settings.concurrency = 16;
                options.workers = vec![1, 2];
            }
            other => {
                anyhow::bail!("unknown argument {other} (see the doc comment of bench-workers)")
            }
        }
    }
    Ok(options)
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':').map(|(_, m)| m.trim()))
        .unwrap_or("unknown CPU")
        .to_owned();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cores} cores, {model}")
}

async fn bench(options: Options) -> anyhow::Result<()> {
    let mut conn = redis_info::connect(&options.redis).await?;
    let prefix = format!("agentloop-bench-workers:{}:", std::process::id());
    let version: String = redis::cmd("INFO").arg("server").query_async(&mut conn).await?;
    let version = version
        .lines()
        .find_map(|l| l.trim().strip_prefix("redis_version:"))
        .unwrap_or("?")
        .to_owned();
    let mock = match options.mock {
        Some(url) => Mock::at(url)?,
        None => {
            let bin_dir = std::env::current_exe()?
                .parent()
                .context("this binary has no directory")?
                .to_owned();
            Mock::start(&bin_dir, options.settings.max_seconds * 4).await?
        }
    };
    let script = Script::new(options.k, 1, options.latency_ms);
    println!(
        "machine: {}; Redis {version} at {}, keys under {prefix}; mock model at {} ({script})",
        machine(),
        options.redis,
        mock.url
    );
    println!(
        "{} runs per phase, K = {} tool rounds ({} model calls per run), {} ms per model call, {} runs per worker, submission window {}",
        options.settings.runs,
        options.k,
        script.requests_per_run(),
        options.latency_ms,
        options.settings.concurrency,
        options.settings.window.map_or("workers × concurrency".to_owned(), |w| w.to_string()),
    );
    let target = Target { redis: options.redis.clone(), prefix, mock: mock.url.clone(), script };
    let mut bench = Bench { target, settings: options.settings.clone(), mock, conn };
    let mut rows = Vec::new();
    for &workers in &options.workers {
        let concurrency = (workers * options.settings.concurrency) as u64;
        let in_process = if options.in_process {
            let measured = bench.in_process(concurrency).await?;
            eprintln!("in process, C = {concurrency}: {:.0} runs/s", measured.runs_per_s());
            Some(measured)
        } else {
            None
        };
        let queued = bench.queued(workers).await?;
        eprintln!("{workers} worker(s): {:.0} runs/s", queued.runs_per_s());
        rows.push(report::Row { workers, in_process, queued });
    }
    let left = redis_info::delete_prefix(&mut bench.conn, &bench.target.prefix).await?;
    report::print(&rows);
    println!("\n(keys left under the prefix and deleted at the end: {left})");
    Ok(())
}

fn main() -> anyhow::Result<()> {
    agentloop_bench::measure::raise_open_files_limit();
    // Two runtime threads, as `agentloop worker`'s.
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("worker") {
        args.next();
        let worker = worker::parse(args)?;
        return runtime.block_on(worker::serve(worker));
    }
    runtime.block_on(bench(parse(args)?))
}
