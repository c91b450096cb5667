//! `agentloop serve`: the configured agent (or the deterministic test agent, `--agent
//! echo`) over A2A 1.0, on the configured store. Binds 127.0.0.1 unless told otherwise;
//! with `--token` (or `AGENTLOOP_SERVE_TOKEN`) every method needs `Authorization: Bearer`.
//! Prints `listening on URL (card: …; runs UI: …/ui)` once it accepts connections
//! (`agentloop ui` prints `open URL/ui` first); Ctrl-C or SIGTERM stops it
//! (runs in flight stay in the store, and the next server continues them).

use crate::config::StoreSection;
use agentloop::store::sqlite::DEFAULT_PATH;
use agentloop::Agent;
use agentloop_server::push::redis::RedisPushStore;
use agentloop_server::push::sqlite::SqlitePushStore;
use agentloop_server::push::{PushAllow, PushStore};
use agentloop_server::{echo, Auth, ServedAgent, Server, ServerConfig};
use anyhow::Context;
use secrecy::SecretString;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// What `serve` was asked for.
pub struct ServeOptions {
    /// Where to listen.
    pub bind: SocketAddr,
    /// The URL clients reach it at (default `http://{bound address}`).
    pub public_url: Option<String>,
    /// Bearer tokens, comma separated.
    pub tokens: Option<String>,
    /// The largest request body.
    pub body_limit: usize,
    /// Where push notifications may go (comma separated `PushAllow` entries; none: off).
    pub push_allow: Option<String>,
    /// The worker pool that executes the tasks (none: this process does).
    pub queue: Option<agentloop::worker::Queue>,
    /// Asked for as `agentloop ui`: the page's address comes first.
    pub ui: bool,
    /// The runs UI's link to a run's trace (`{trace_id}` replaced).
    pub trace_url: Option<String>,
}

/// Where push configs and their delivery cursors are kept: beside the runs (the SQLite
/// file, or Redis under `{[store] prefix}a2a-push:`), so deliveries resume after a restart.
pub(crate) async fn push_store(store: &StoreSection) -> anyhow::Result<Option<Arc<dyn PushStore>>> {
    Ok(match store.kind.as_deref().unwrap_or("sqlite") {
        "sqlite" => {
            let path = store.path.clone().unwrap_or_else(|| DEFAULT_PATH.into());
            let push = SqlitePushStore::open(&path)
                .with_context(|| format!("opening the push store in {}", path.display()))?;
            Some(Arc::new(push))
        }
        "redis" => {
            let url = store.url.as_deref().unwrap_or_default();
            let prefix = format!("{}a2a-push:", store.redis_prefix());
            let push = RedisPushStore::connect(url, prefix)
                .await
                .context("connecting the push store to Redis")?;
            Some(Arc::new(push))
        }
        _ => None,
    })
}

/// The agents to serve: the echo agent, or the configured one.
pub enum Served {
    /// `--agent echo`.
    Echo(Echo),
    /// The configured agents (`[agent]`, or each `[[serve]]`), with their descriptions.
    Configured(Vec<(Agent, Option<String>)>),
}

/// The echo agent's parts: its stores, the telemetry observer (if on) and the configured
/// remote agents (`[[a2a]]`, its `remote NAME TASK` command), with their tokens to redact.
pub struct Echo {
    /// Its run and session stores.
    pub stores: crate::runs::Stores,
    /// The telemetry observer.
    pub observer: Option<std::sync::Arc<dyn agentloop::observe::Observer>>,
    /// The remote agents, as tools.
    pub remotes: Vec<std::sync::Arc<dyn agentloop::tool::DynTool>>,
    /// Their tokens.
    pub secrets: agentloop::provider::secrets::Secrets,
}

/// Serves until Ctrl-C or SIGTERM.
pub async fn serve(
    served: Served,
    options: ServeOptions,
    store: &StoreSection,
) -> anyhow::Result<i32> {
    let agents = match served {
        Served::Echo(Echo { stores, observer, remotes, secrets }) => {
            let mut builder = echo::echo_builder(stores.runs, stores.sessions)?;
            if let Some(observer) = observer {
                builder = builder.observer(observer);
            }
            for remote in remotes {
                builder = builder.dyn_tool(remote);
            }
            builder = builder.secrets(&secrets);
            vec![ServedAgent::new(builder.build()?, echo::ECHO_DESCRIPTION)?]
        }
        Served::Configured(agents) => agents
            .into_iter()
            .map(|(agent, description)| {
                let description = description.unwrap_or_else(|| "An agentloop agent.".to_owned());
                ServedAgent::new(agent, description)
            })
            .collect::<Result<_, _>>()?,
    };
    let listener = tokio::net::TcpListener::bind(options.bind)
        .await
        .with_context(|| format!("binding {}", options.bind))?;
    let bound = listener.local_addr().context("reading the bound address")?;
    let public_url = options.public_url.clone().unwrap_or_else(|| format!("http://{bound}"));
    let auth = options.tokens.as_deref().map(|tokens| {
        Auth::Bearer(
            tokens
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(|t| SecretString::from(t.to_owned()))
                .collect(),
        )
    });
    if !bound.ip().is_loopback() && auth.is_none() {
        eprintln!("warning: serving on {bound} without credentials (--token)");
    }
    let push_allow = match options.push_allow.as_deref() {
        Some(entries) => {
            PushAllow::parse(entries.split(',').map(str::trim).filter(|e| !e.is_empty()))
                .map_err(|error| anyhow::anyhow!("--push-allow: {error}"))?
        }
        None => PushAllow::none(),
    };
    let push_store = if push_allow.is_empty() { None } else { push_store(store).await? };
    let config = ServerConfig {
        public_url: public_url.clone(),
        auth,
        body_limit: options.body_limit,
        push_allow,
        push_store,
        queue: options.queue,
        trace_url: options.trace_url,
        ..ServerConfig::default()
    };
    let names: Vec<String> = agents.iter().map(|agent| agent.name().to_owned()).collect();
    if config.queue.is_some() {
        println!("tasks are queued to the worker pool (`agentloop worker` executes them)");
    }
    let server = Server::new(agents, config)?;
    if options.ui {
        println!("open {public_url}/ui");
    }
    // One line per agent (a reader may stop after the first): the page's address in it.
    for name in &names {
        println!(
            "listening on {public_url}/{name} (card: {public_url}/{name}/.well-known/agent-card.json; runs UI: {public_url}/ui)"
        );
    }
    server.serve(listener, shutdown()).await.context("serving")?;
    Ok(0)
}

/// Completes on Ctrl-C or SIGTERM.
pub(crate) async fn shutdown() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    // Give streams a moment to send their last event.
    tokio::time::sleep(Duration::from_millis(50)).await;
}
