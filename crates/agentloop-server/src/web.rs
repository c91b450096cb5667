//! The HTTP surface: per served agent, its card, the JSON-RPC 2.0 binding (`POST /{name}`)
//! and the HTTP+JSON binding (`/{name}/message:send`, `/{name}/tasks/…`), both streaming
//! over SSE; the first agent is also served at `/`. Credentials (when configured) are
//! checked on every method, never on the card; bodies over the limit get 413; a request
//! that names a protocol version other than 1.x gets the spec's version error. The browser
//! UI of runs ([`crate::ui`]) is at `/ui`.

use crate::auth::Auth;
use crate::card::agent_card;
use crate::push::{DeliveryOptions, MemoryPushStore, PushAllow, PushStore, Pusher};
use crate::tasks::Host;
use a2a::{A2AError, AgentCard};
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::sync::Arc;
use std::time::Duration;

pub mod idle;
mod jsonrpc;
mod ops;
mod rest;
pub mod streams;

/// How the server behaves.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The URL clients reach the server at (cards name `{public_url}/{agent}`), without a
    /// trailing slash.
    pub public_url: String,
    /// Credentials every method requires (none: open; bind to loopback then).
    pub auth: Option<Auth>,
    /// The largest request body (bytes): 413 beyond. Default 1 MiB.
    pub body_limit: usize,
    /// How long a request may take before the server answers 408 (streams excepted: they
    /// last as long as their task). Default 5 minutes.
    pub request_timeout: Duration,
    /// How long a blocking SendMessage waits for its task to complete or ask for input
    /// before it returns the task as it stands. Default 4 minutes.
    pub send_wait: Duration,
    /// The interval of SSE keep-alive comments. Default 15 s.
    pub keep_alive: Duration,
    /// How often the server looks for runs whose executor died, to continue them.
    /// Default 5 s.
    pub recovery_interval: Duration,
    /// A connection with no byte either way for this long is closed (a client that sends
    /// nothing, stops halfway, or leaves a connection unused). Longer than `send_wait`, which
    /// a blocking SendMessage may spend silent. Default 5 minutes.
    pub idle_timeout: Duration,
    /// Where push notifications may go (see [`PushAllow`]): empty (the default) turns
    /// them off and the card says so.
    pub push_allow: PushAllow,
    /// Where push configs and their delivery cursors are kept: `None` (the default) keeps
    /// them in memory (lost on restart); a [`SqlitePushStore`](crate::push::sqlite::SqlitePushStore)
    /// (the run store's file will do) or a [`RedisPushStore`](crate::push::redis::RedisPushStore)
    /// makes deliveries resume after a restart.
    pub push_store: Option<Arc<dyn PushStore>>,
    /// How webhooks are called (timeout, retries).
    pub push_delivery: DeliveryOptions,
    /// The worker pool that executes the tasks (`agentloop::worker`; see
    /// [`Host::queued`]): `None` (the default) executes them in this process.
    pub queue: Option<agentloop::worker::Queue>,
    /// The runs UI's link to a run's trace in a tracing backend: a URL in which
    /// `{trace_id}` is replaced by the run's trace id. `None`: the id is shown, unlinked.
    pub trace_url: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            public_url: "http://127.0.0.1:8080".to_owned(),
            auth: None,
            body_limit: 1024 * 1024,
            request_timeout: Duration::from_secs(300),
            send_wait: Duration::from_secs(240),
            keep_alive: Duration::from_secs(15),
            recovery_interval: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(300),
            push_allow: PushAllow::none(),
            push_store: None,
            push_delivery: DeliveryOptions::default(),
            queue: None,
            trace_url: None,
        }
    }
}

/// What each handler of one agent shares.
pub(crate) struct AgentState {
    pub(crate) host: Arc<Host>,
    pub(crate) config: Arc<ServerConfig>,
    pub(crate) card: AgentCard,
    pub(crate) push: Arc<Pusher>,
}

pub(crate) type State = Arc<AgentState>;

/// The push notifications `config` asks for.
pub(crate) fn pusher(config: &ServerConfig) -> Pusher {
    let store: Arc<dyn PushStore> = match &config.push_store {
        Some(store) => store.clone(),
        None => Arc::new(MemoryPushStore::new()),
    };
    Pusher::new(config.push_allow.clone(), store, config.push_delivery.clone())
}

/// The router of `hosts` (the first also at `/`), with push notifications of its own
/// ([`crate::Server::router`] shares the server's).
pub fn router(hosts: &[Arc<Host>], config: Arc<ServerConfig>) -> Router {
    let push = Arc::new(pusher(&config));
    router_with(hosts, config, push)
}

/// The router of `hosts` with the push notifications `push`.
pub(crate) fn router_with(
    hosts: &[Arc<Host>],
    config: Arc<ServerConfig>,
    push: Arc<Pusher>,
) -> Router {
    let mut app = Router::new();
    app = app.merge(crate::ui::router(hosts, &config));
    for (index, host) in hosts.iter().enumerate() {
        let name = host.served().name().to_owned();
        let url = format!("{}/{name}", config.public_url.trim_end_matches('/'));
        let mut card = agent_card(host.served(), &url, config.auth.as_ref());
        card.capabilities.push_notifications = Some(push.enabled());
        card.capabilities
            .extensions
            .get_or_insert_with(Vec::new)
            .push(crate::card::runs_ui_extension(&config.public_url));
        let state = Arc::new(AgentState {
            host: host.clone(),
            config: config.clone(),
            card,
            push: push.clone(),
        });
        app = app.merge(agent_router(&format!("/{name}"), state.clone()));
        if index == 0 {
            app = app.merge(agent_router("", state));
        }
    }
    app.layer(DefaultBodyLimit::max(config.body_limit)).layer(
        tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            config.request_timeout,
        ),
    )
}

fn agent_router(prefix: &str, state: State) -> Router {
    let mut router = Router::new()
        .route(&format!("{prefix}/.well-known/agent-card.json"), get(card))
        .route(&format!("{prefix}/"), post(jsonrpc::handle))
        .route(&format!("{prefix}/message:send"), post(rest::send))
        .route(&format!("{prefix}/message:stream"), post(rest::stream))
        .route(&format!("{prefix}/tasks"), get(rest::list))
        .route(
            &format!("{prefix}/tasks/{{*rest}}"),
            get(rest::task_get).post(rest::task_post).delete(rest::task_delete),
        )
        .route(&format!("{prefix}/extendedAgentCard"), get(rest::extended_card));
    if !prefix.is_empty() {
        router = router.route(prefix, post(jsonrpc::handle));
    }
    router.with_state(state)
}

async fn card(axum::extract::State(state): axum::extract::State<State>) -> Response {
    let mut response = Json(&state.card).into_response();
    response.headers_mut().insert("access-control-allow-origin", HeaderValue::from_static("*"));
    response
}

/// Refuses a request without valid credentials (401) or for another protocol version.
pub(crate) fn admit(state: &AgentState, headers: &HeaderMap) -> Result<(), Rejection> {
    if let Some(auth) = &state.config.auth {
        if !auth.allows(headers) {
            return Err(Rejection::Unauthorized(auth.challenge()));
        }
    }
    if let Some(version) = headers.get(a2a::SVC_PARAM_VERSION) {
        let version = version.to_str().unwrap_or_default().trim();
        if !(version.is_empty() || version == "1" || version.starts_with("1.")) {
            let shown: String = version.chars().take(16).filter(|c| !c.is_control()).collect();
            return Err(Rejection::Protocol(A2AError::version_not_supported(&shown)));
        }
    }
    Ok(())
}

/// A request refused before its method ran.
pub(crate) enum Rejection {
    /// 401, with the challenge.
    Unauthorized(&'static str),
    /// A protocol error (rendered by the binding).
    Protocol(A2AError),
}

pub(crate) fn unauthorized(challenge: &'static str) -> Response {
    let body = serde_json::json!({"error": {"code": 401, "status": "UNAUTHENTICATED",
        "message": "credentials required"}});
    let mut response = (StatusCode::UNAUTHORIZED, Json(body)).into_response();
    response
        .headers_mut()
        .insert(http::header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    response
}
