//! `agentloop serve`: the configured agent (or the deterministic test agent, `--agent
//! echo`) over A2A 1.0, on the configured store. Binds 127.0.0.1 unless told otherwise;
//! with `--token` (or `AGENTLOOP_SERVE_TOKEN`) every method needs `Authorization: Bearer`.
//! Prints `listening on URL` once it accepts connections; Ctrl-C or SIGTERM stops it
//! (runs in flight stay in the store, and the next server continues them).

use agentloop::Agent;
use agentloop_server::{echo, Auth, ServedAgent, Server, ServerConfig};
use anyhow::Context;
use secrecy::SecretString;
use std::net::SocketAddr;
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
}

/// The agents to serve: the echo agent, or the configured one.
pub enum Served {
    /// `--agent echo`.
    Echo(crate::runs::Stores),
    /// The configured agents (`[agent]`, or each `[[serve]]`), with their descriptions.
    Configured(Vec<(Agent, Option<String>)>),
}

/// Serves until Ctrl-C or SIGTERM.
pub async fn serve(served: Served, options: ServeOptions) -> anyhow::Result<i32> {
    let agents = match served {
        Served::Echo(stores) => vec![echo::served_echo(stores.runs, stores.sessions)?],
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
    let config = ServerConfig {
        public_url: public_url.clone(),
        auth,
        body_limit: options.body_limit,
        ..ServerConfig::default()
    };
    let names: Vec<String> = agents.iter().map(|agent| agent.name().to_owned()).collect();
    let server = Server::new(agents, config)?;
    for name in &names {
        println!(
            "listening on {public_url}/{name} (card: {public_url}/{name}/.well-known/agent-card.json)"
        );
    }
    server.serve(listener, shutdown()).await.context("serving")?;
    Ok(0)
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown() {
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
