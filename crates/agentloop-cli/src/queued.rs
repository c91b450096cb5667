//! `agentloop run --queue URL`: the run is submitted to the worker queue instead of executed
//! here — journaled in the configured store, its job added to its agent's queue — and its
//! events are followed from the store as a worker executes it, shown as `run` shows them
//! (journaled events only: the answer arrives whole, not streamed). Ctrl-C asks the worker to
//! cancel the run; a second Ctrl-C stops following.

use crate::config::Config;
use crate::render::{Ending, Renderer};
use crate::runs::cell;
use crate::safe::escape;
use crate::{AgentFlags, ProviderFlags};
use agentloop::service::RunService;
use agentloop::RunOptions;
use anyhow::Context;
use clap::Args;
use futures::StreamExt;

/// The flags of `run` for the worker queue.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// Submit the run to this worker queue (a Redis URL) instead of executing it here, and
    /// follow it as a worker executes it.
    #[arg(long, env = "AGENTLOOP_QUEUE", hide_env_values = true, value_name = "URL")]
    pub queue: Option<String>,
    /// With --queue: the agent to run, by its served name (a `[[serve]]` table's; default:
    /// the first one, else the `[agent]`).
    #[arg(long = "agent", value_name = "NAME", requires = "queue")]
    pub agent: Option<String>,
    /// With --queue: refuse the run when its agent's queue already holds this many jobs.
    #[arg(long, value_name = "N", requires = "queue")]
    pub max_queued: Option<u64>,
    /// With --queue: print the run's id and exit instead of following the run.
    #[arg(long, requires = "queue")]
    pub detach: bool,
}

/// The run to submit.
pub struct QueuedRun {
    /// The request.
    pub prompt: String,
    /// Every event as a JSON line.
    pub json: bool,
    /// Its options (a typed answer).
    pub options: RunOptions,
}

/// Submits `run` and follows it; the exit code of `run`.
pub async fn submit(
    config: &Config,
    provider: &ProviderFlags,
    flags: &AgentFlags,
    args: SubmitArgs,
    run: QueuedRun,
) -> anyhow::Result<i32> {
    let Some(url) = &args.queue else { anyhow::bail!("--queue: no queue given") };
    crate::workers::shared_store(&config.store)?;
    let stores = crate::runs::open(&config.store).await?;
    let store = stores.runs.clone();
    let agents = crate::agents::served(config, provider, flags, None, &stores).await?;
    let names: Vec<String> = agents.iter().map(|one| cell(&one.name)).collect();
    let wanted = args.agent.as_deref();
    let Some(one) = agents.into_iter().find(|one| wanted.is_none_or(|name| one.name == name))
    else {
        anyhow::bail!(
            "--agent: no agent '{}' is served (the configuration serves {})",
            cell(wanted.unwrap_or_default()),
            names.join(", ")
        )
    };
    let queue = crate::workers::connect(url, &config.store, args.max_queued).await?;
    // The run's start is journaled, then its job added: a full queue refuses the run (and
    // nothing is left); a job that cannot be added otherwise leaves the run to a worker's
    // sweep, as the error says.
    let run_id = queue
        .submit(&one.name, &one.agent, run.prompt, run.options)
        .await
        .context("queueing the run")?;
    if args.detach {
        println!("{}", cell(&run_id));
        return Ok(0);
    }
    eprintln!(
        "queued run {} for agent {}: a worker executes it (Ctrl-C cancels it)",
        cell(&run_id),
        cell(&one.name)
    );
    follow(queue.service(store), &run_id, run.json).await
}

/// Shows the run's events until it ends (or suspends); the exit code of `run`.
async fn follow(service: RunService, run_id: &str, json: bool) -> anyhow::Result<i32> {
    let mut events = service.subscribe(run_id, 0);
    let mut renderer = Renderer::new(json);
    let mut ending = Ending::Unknown;
    let mut interrupted = false;
    loop {
        tokio::select! {
            next = events.next() => match next {
                Some(Ok(envelope)) => {
                    if let Some(end) = renderer.show(&envelope.event) {
                        ending = end;
                    }
                }
                Some(Err(error)) => {
                    eprintln!(
                        "error: following run {}: {}; the run goes on (`agentloop runs show {}`)",
                        cell(run_id),
                        escape(&error.to_string()),
                        cell(run_id)
                    );
                    return Ok(Ending::Unknown.code());
                }
                None => break,
            },
            _ = tokio::signal::ctrl_c() => {
                if interrupted {
                    eprintln!(
                        "stopped following run {} (`agentloop runs show {}` shows how it ends)",
                        cell(run_id),
                        cell(run_id)
                    );
                    return Ok(Ending::Cancelled.code());
                }
                interrupted = true;
                service
                    .cancel(run_id, "interrupted (Ctrl-C)")
                    .await
                    .with_context(|| format!("cancelling run {}", cell(run_id)))?;
                eprintln!(
                    "cancelling run {}: its worker stops it within a second (Ctrl-C again \
                     stops following)",
                    cell(run_id)
                );
            }
        }
    }
    Ok(ending.code())
}
