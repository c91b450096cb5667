//! `bench-workers worker …`: one worker process. It serves the bench agent from the queue
//! until its standard input is closed (the parent's signal to stop) or `--max-seconds`
//! passed, drains, and prints its report as one JSON line.

use crate::setup::{Target, AGENT};
use agentloop::worker::{Worker, WorkerOptions};
use agentloop_bench::Script;
use anyhow::Context as _;
use std::io::Write as _;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What a worker process is given.
pub struct Args {
    target: Target,
    concurrency: usize,
    max_seconds: u64,
}

/// Reads `--redis URL --prefix P --mock URL --k K --latency-ms L --concurrency C
/// --max-seconds S`.
pub fn parse(args: impl Iterator<Item = String>) -> anyhow::Result<Args> {
    let mut args = args;
    let (mut redis, mut prefix, mut mock) = (None, None, None);
    let (mut k, mut latency, mut concurrency, mut max_seconds) = (5u32, 50u64, 64usize, 600u64);
    while let Some(arg) = args.next() {
        let value = args.next().with_context(|| format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--redis" => redis = Some(value),
            "--prefix" => prefix = Some(value),
            "--mock" => mock = Some(value),
            "--k" => k = value.parse()?,
            "--latency-ms" => latency = value.parse()?,
            "--concurrency" => concurrency = value.parse()?,
            "--max-seconds" => max_seconds = value.parse()?,
            other => anyhow::bail!("worker: unknown argument {other}"),
        }
    }
    let target = Target {
        redis: redis.context("worker: --redis is required")?,
        prefix: prefix.context("worker: --prefix is required")?,
        mock: mock.context("worker: --mock is required")?,
        script: Script::new(k, 1, latency),
    };
    Ok(Args { target, concurrency, max_seconds })
}

/// Serves until told to stop; prints `ready <consumer>` once built, then the report.
pub async fn serve(args: Args) -> anyhow::Result<()> {
    let agent = args.target.agent().await?;
    let queue = args.target.queue().await?;
    let options = WorkerOptions::default().concurrency(args.concurrency);
    let worker = Worker::builder(queue).agent(AGENT, agent).options(options).build()?;
    let token = CancellationToken::new();
    let stop = token.clone();
    // Standard input closed (the parent stopped us, or died): drain and stop.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        stop.cancel();
    });
    let deadline = token.clone();
    let lifetime = Duration::from_secs(args.max_seconds);
    tokio::spawn(async move {
        tokio::time::sleep(lifetime).await;
        deadline.cancel();
    });
    let mut stdout = std::io::stdout();
    writeln!(stdout, "ready {}", worker.consumer())?;
    stdout.flush()?;
    let report = worker.run(token).await?;
    let line = serde_json::json!({
        "consumer": worker.consumer(),
        "jobs": report.jobs,
        "takeovers": report.takeovers,
        "ended": report.ended,
        "suspended": report.suspended,
        "handed_over": report.handed_over,
        "refused": report.refused,
        "dead_letters": report.dead_letters,
        "interrupted": report.interrupted,
        "cpu_s": agentloop_bench::measure::process_cpu().as_secs_f64(),
    });
    writeln!(stdout, "{line}")?;
    stdout.flush()?;
    Ok(())
}
