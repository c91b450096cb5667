//! `agentloop serve`: agents reachable by any A2A 1.0 client — JSON-RPC 2.0 and HTTP+JSON,
//! streaming over SSE — on the run service, so a task is a durable run: GetTask, ListTasks
//! and SubscribeToTask read the store, a task outlives the client that started it and the
//! server process that ran it (a restarted server continues the runs whose executor died).
//! docs/A2A.md maps runs to tasks and lists what is supported; the browser UI of runs is at
//! `/ui` (docs/UI.md).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use agentloop_server::{echo, Server, ServerConfig};
//! use std::sync::Arc;
//! let store = Arc::new(agentloop::store::sqlite::SqliteStore::open("runs.db")?);
//! let served = echo::served_echo(store.clone(), store)?;
//! let server = Server::new(vec![served], ServerConfig::default())?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! server.serve(listener, std::future::pending()).await?;
//! # Ok(()) }
//! ```

pub mod auth;
pub mod card;
pub mod convert;
pub mod echo;
pub mod mapping;
pub mod push;
pub mod tasks;
pub mod ui;
pub mod web;

pub use auth::Auth;
pub use tasks::{Host, ServeError, ServedAgent};
pub use web::ServerConfig;

use std::future::Future;
use std::sync::Arc;

/// A server of one or more agents (see the [crate docs](crate)).
#[derive(Debug)]
pub struct Server {
    hosts: Vec<Arc<Host>>,
    config: Arc<ServerConfig>,
    push: Arc<push::Pusher>,
}

impl Server {
    /// A server of `agents` (the first is also served at `/`). Refused when an agent cannot
    /// be served or two share a name.
    pub fn new(agents: Vec<ServedAgent>, config: ServerConfig) -> Result<Self, ServeError> {
        let mut hosts: Vec<Arc<Host>> = Vec::with_capacity(agents.len());
        for served in agents {
            if served.name() == "ui" {
                return Err(ServeError::ReservedName(served.name().to_owned()));
            }
            if hosts.iter().any(|host| host.served().name() == served.name()) {
                return Err(ServeError::DuplicateName(served.name().to_owned()));
            }
            let host = Host::new(served, config.send_wait)?;
            hosts.push(Arc::new(match &config.queue {
                Some(queue) => host.queued(queue.clone()),
                None => host,
            }));
        }
        if hosts.is_empty() {
            return Err(ServeError::NoAgents);
        }
        let push = Arc::new(web::pusher(&config));
        Ok(Self { hosts, config: Arc::new(config), push })
    }

    /// The agents' hosts.
    pub fn hosts(&self) -> &[Arc<Host>] {
        &self.hosts
    }

    /// The HTTP router (to mount in an application of your own).
    pub fn router(&self) -> axum::Router {
        web::router_with(&self.hosts, self.config.clone(), self.push.clone())
    }

    /// The push notifications (configs and their deliveries).
    pub fn push(&self) -> &Arc<push::Pusher> {
        &self.push
    }

    /// Continues, once, the runs whose executor died (see [`Host::recover`]) and the push
    /// deliveries that are not done (for a router mounted in your own application; `serve`
    /// does this every `recovery_interval`). Returns how many runs were resumed.
    pub async fn recover(&self) -> usize {
        let mut resumed = 0;
        for host in &self.hosts {
            resumed += host.recover().await;
        }
        self.push.recover(&self.hosts).await;
        resumed
    }

    /// Serves on `listener` until `shutdown` completes, continuing the runs whose
    /// executor died — and the push deliveries that are not done — every
    /// `recovery_interval` (at once on start). Push deliveries stop with the server.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let router = self.router();
        let (hosts, every) = (self.hosts.clone(), self.config.recovery_interval);
        let push = self.push.clone();
        let recovery = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every.max(std::time::Duration::from_millis(100)));
            loop {
                tick.tick().await;
                for host in &hosts {
                    host.recover().await;
                }
                push.recover(&hosts).await;
            }
        });
        let listener = web::idle::IdleListener::new(listener, self.config.idle_timeout);
        let push = self.push.clone();
        let shutdown = async move {
            shutdown.await;
            push.stop();
        };
        let served = axum::serve(listener, router).with_graceful_shutdown(shutdown).await;
        recovery.abort();
        self.push.stop();
        served
    }
}
