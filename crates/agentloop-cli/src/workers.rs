//! `agentloop worker`: executes the runs of a queue in Redis Streams (`agentloop::worker`)
//! with the agents `agentloop serve` would serve, on the configured store, until SIGTERM or
//! Ctrl-C, then drains. `agentloop workers`: the queue's agents, their jobs and workers, and
//! the dead letters.

use crate::config::{Config, StoreSection};
use crate::runs::cell;
use crate::{AgentFlags, ProviderFlags};
use agentloop::worker::{Queue, QueueOptions, Worker, WorkerOptions, WorkerReport};
use anyhow::Context;
use clap::Args;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long connecting to the queue's Redis may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// `agentloop worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The queue: a Redis URL (its keys under `[store] prefix`, default `agentloop:`).
    #[arg(long, env = "AGENTLOOP_QUEUE", hide_env_values = true, value_name = "URL")]
    queue: String,
    /// Runs executed at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    concurrency: u32,
    /// How long a stopping worker lets its runs reach a safe point before it leaves them to
    /// be taken over by another worker.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    drain_secs: u64,
    /// Deliveries of a job before it goes to the dead letters and its run fails (a job that
    /// kills every worker that takes it).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    max_deliveries: u64,
    /// The worker's name in the consumer group (default: host, process id and a random
    /// suffix).
    #[arg(long, value_name = "CONSUMER")]
    name: Option<String>,
    /// Execute the runs of the deterministic test agent `echo` (as `serve --agent echo
    /// --queue` queues them) instead of the configured agents.
    #[arg(long = "agent", value_parser = ["echo"], value_name = "echo")]
    test_agent: Option<String>,
    #[command(flatten)]
    agent: AgentFlags,
}

/// `agentloop workers`.
#[derive(Debug, Args)]
pub struct WorkersArgs {
    /// The queue: a Redis URL.
    #[arg(long, env = "AGENTLOOP_QUEUE", hide_env_values = true, value_name = "URL")]
    queue: String,
    /// Also list the last N dead letters.
    #[arg(long, value_name = "N")]
    dead: Option<usize>,
    /// Limits how many runs of an agent the whole pool executes at once (`AGENT=N`;
    /// repeatable); workers apply it at their next claim.
    #[arg(long, value_name = "AGENT=N", value_parser = parse_limit)]
    limit: Vec<(String, u32)>,
    /// Lifts an agent's limit (repeatable).
    #[arg(long, value_name = "AGENT")]
    no_limit: Vec<String>,
}

/// `AGENT=N`, N ≥ 1.
fn parse_limit(text: &str) -> Result<(String, u32), String> {
    let expected = "expected AGENT=N, N a whole number of at least 1 (e.g. support=4)";
    let (agent, n) = text.split_once('=').ok_or_else(|| format!("'{text}': {expected}"))?;
    let n: u32 = n.trim().parse().map_err(|_| format!("'{text}': {expected}"))?;
    if agent.trim().is_empty() || n == 0 {
        return Err(format!("'{text}': {expected}"));
    }
    Ok((agent.trim().to_owned(), n))
}

/// Connects to the queue at `url` under the configured Redis prefix (`max_queued`: the
/// bound of each agent's queue for submissions).
pub async fn connect(
    url: &str,
    store: &StoreSection,
    max_queued: Option<u64>,
) -> anyhow::Result<Queue> {
    let options = QueueOptions::default().prefix(store.redis_prefix()).max_queued(max_queued);
    tokio::time::timeout(CONNECT_TIMEOUT, Queue::connect_with(url, options))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "connecting to the queue (--queue): no connection to Redis within {} s (is it \
                 running, and is the URL right?)",
                CONNECT_TIMEOUT.as_secs()
            )
        })?
        .context("connecting to the queue (--queue)")
}

/// Refuses a store the worker pool cannot share (`memory`: one process's own).
pub fn shared_store(store: &StoreSection) -> anyhow::Result<()> {
    if store.kind.as_deref() == Some("memory") {
        anyhow::bail!(
            "workers need a store the processes share: [store] kind = \"redis\", or \
             \"sqlite\" on a file they all open (\"memory\" is one process's own)"
        );
    }
    Ok(())
}

/// `agentloop worker`: serves until SIGTERM or Ctrl-C, drains, and reports on stderr.
pub async fn worker(
    args: WorkerArgs,
    config: &Config,
    provider: &ProviderFlags,
) -> anyhow::Result<i32> {
    crate::log::init()?;
    let config = crate::with_agent_flags(config, &args.agent);
    shared_store(&config.store)?;
    let stores = crate::runs::open(&config.store).await?;
    let queue = connect(&args.queue, &config.store, None).await?;
    let agents = if args.test_agent.is_some() {
        let echo = agentloop_server::echo::echo_agent(stores.runs.clone(), stores.sessions.clone())
            .context("building the echo agent")?;
        vec![crate::agents::Served { name: "echo".into(), agent: echo, description: None }]
    } else {
        crate::agents::served(&config, provider, &args.agent, None, &stores).await?
    };
    let options = WorkerOptions::default()
        .concurrency(args.concurrency as usize)
        .drain(Duration::from_secs(args.drain_secs))
        .max_deliveries(args.max_deliveries);
    let mut builder = Worker::builder(queue).options(options);
    for one in agents {
        builder = builder.agent(one.name, one.agent);
    }
    if let Some(name) = args.name {
        builder = builder.consumer(name);
    }
    if let Some(observer) = config.otel.worker_observer() {
        builder = builder.observer(observer);
    }
    let worker = builder.build().context("starting the worker")?;
    let consumer = cell(worker.consumer());
    let token = CancellationToken::new();
    let stop = token.clone();
    tokio::spawn(async move {
        crate::serve::shutdown().await;
        stop.cancel();
        // A second signal while draining: stop at once (the runs are taken over).
        crate::serve::shutdown().await;
        say("worker stopped without draining: its runs are taken over by other workers");
        std::process::exit(130);
    });
    let report = worker.run(token).await.context("running the worker")?;
    say(&format!("worker {consumer} stopped: {}", summary(&report)));
    Ok(0)
}

/// A line on stderr; nothing when stderr is gone (a worker whose log reader went away still
/// drains and exits 0).
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The one-line report of a worker that stopped.
fn summary(report: &WorkerReport) -> String {
    format!(
        "{} jobs ({} taken over): {} ended, {} suspended, {} handed over, {} refused, {} dead \
         letters, {} interrupted",
        report.jobs,
        report.takeovers,
        report.ended,
        report.suspended,
        report.handed_over,
        report.refused,
        report.dead_letters,
        report.interrupted
    )
}

/// `agentloop workers`: per agent its queue's depth and pending jobs, then each worker, then
/// the dead letters.
pub async fn workers(args: WorkersArgs, store: &StoreSection) -> anyhow::Result<i32> {
    let queue = connect(&args.queue, store, None).await?;
    for (agent, limit) in &args.limit {
        queue.set_limit(agent, Some(*limit)).await.context("setting a limit")?;
    }
    for agent in &args.no_limit {
        queue.set_limit(agent, None).await.context("lifting a limit")?;
    }
    let status = queue.status().await.context("reading the queue")?;
    let limits = queue.limits().await.context("reading the limits")?;
    if status.agents.is_empty() {
        println!("no agent has a queue");
    }
    for agent in &status.agents {
        println!(
            "agent {}: depth {}, pending {}, {} worker{}",
            cell(&agent.agent),
            agent.depth,
            agent.pending,
            agent.consumers.len(),
            if agent.consumers.len() == 1 { "" } else { "s" }
        );
        for (name, pending, idle_ms) in &agent.consumers {
            println!("  worker {}: pending {pending}, idle {}", cell(name), idle(*idle_ms));
        }
    }
    let mut limits: Vec<(String, u32)> = limits.into_iter().collect();
    limits.sort();
    for (agent, limit) in limits {
        let in_use = queue.slots_in_use(&agent).await.context("reading the limits")?;
        println!("limit of {}: {limit} runs at once across the pool ({in_use} now)", cell(&agent));
    }
    println!("dead letters: {}", status.dead_letters);
    if let Some(count) = args.dead.filter(|n| *n > 0 && status.dead_letters > 0) {
        // Oldest first: the last `count` of them all.
        let all = usize::try_from(status.dead_letters).unwrap_or(usize::MAX);
        let letters = queue.dead_letters(all).await.context("reading the dead letters")?;
        for letter in letters.iter().skip(letters.len().saturating_sub(count)) {
            println!(
                "  run {} (agent {}, {} deliveries): {}",
                cell(&letter.run_id),
                cell(&letter.agent),
                letter.deliveries,
                cell(&letter.reason)
            );
        }
    }
    Ok(0)
}

/// `1.2 s`, `3 min`, `250 ms`.
fn idle(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms} ms"),
        1_000..=119_999 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min", ms / 60_000),
    }
}
