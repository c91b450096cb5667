//! The browser UI of runs at `/ui`: one page (HTML, JavaScript, CSS and an icon embedded in the
//! binary, no build step) and the JSON API it reads and acts through, under `/ui/api/`, over
//! the run service of the first served agent and the served agents' hosts. docs/UI.md
//! describes the page and the API.
//!
//! Every response carries a Content-Security-Policy that allows scripts and styles from the
//! server only (no inline script) and `X-Content-Type-Options: nosniff`. The API requires
//! the server's credentials when it has some; the page itself holds no data and is public.
//! Nothing changes on a GET; an action is a POST with a JSON body, refused from another
//! origin (see [`act`]).

use crate::auth::Auth;
use crate::tasks::Host;
use crate::ServerConfig;
use agentloop::service::RunService;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::sync::Arc;
use std::time::Duration;

mod act;
mod api;

/// The page's Content-Security-Policy.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("ui/assets/index.html");
const APP_JS: &str = include_str!("ui/assets/app.js");
const ACT_JS: &str = include_str!("ui/assets/act.js");
const WATERFALL_JS: &str = include_str!("ui/assets/waterfall.js");
const APP_CSS: &str = include_str!("ui/assets/app.css");
const FAVICON: &str = include_str!("ui/assets/favicon.svg");
const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";

/// What the UI's handlers share.
pub(crate) struct UiState {
    /// The runs.
    pub(crate) service: RunService,
    /// The served agents, which continue the runs an action is for.
    pub(crate) hosts: Vec<Arc<Host>>,
    /// The credentials the API requires.
    pub(crate) auth: Option<Auth>,
    /// The interval of SSE keep-alive comments.
    pub(crate) keep_alive: Duration,
    /// The link to a run's trace (`{trace_id}` replaced).
    pub(crate) trace_url: Option<String>,
}

/// The UI's routes: the page at `/ui` and `/ui/`, its assets, and the API, over the run
/// service of the first of `hosts`.
pub(crate) fn router(hosts: &[Arc<Host>], config: &ServerConfig) -> Router {
    let Some(first) = hosts.first() else { return Router::new() };
    let state = Arc::new(UiState {
        service: first.service().clone(),
        hosts: hosts.to_vec(),
        auth: config.auth.clone(),
        keep_alive: config.keep_alive,
        trace_url: config.trace_url.clone(),
    });
    Router::new()
        .route("/ui", get(|| async { asset(HTML, INDEX_HTML) }))
        .route("/ui/", get(|| async { asset(HTML, INDEX_HTML) }))
        .route("/ui/app.js", get(|| async { asset(JS, APP_JS) }))
        .route("/ui/act.js", get(|| async { asset(JS, ACT_JS) }))
        .route("/ui/waterfall.js", get(|| async { asset(JS, WATERFALL_JS) }))
        .route("/ui/app.css", get(|| async { asset("text/css; charset=utf-8", APP_CSS) }))
        .route("/ui/favicon.svg", get(|| async { asset("image/svg+xml", FAVICON) }))
        .route("/ui/api/runs", get(api::list))
        .route("/ui/api/runs/{id}", get(api::run))
        .route("/ui/api/runs/{id}/events", get(api::events))
        .route("/ui/api/agents", get(act::agents))
        .route("/ui/api/chat", post(act::chat))
        .route("/ui/api/runs/{id}/cancel", post(act::cancel))
        .route("/ui/api/runs/{id}/pause", post(act::pause))
        .route("/ui/api/runs/{id}/resume", post(act::resume))
        .route("/ui/api/runs/{id}/decide", post(act::decide))
        .route("/ui/api/runs/{id}/answer", post(act::answer))
        .route("/ui/api/runs/{id}/fork", post(act::fork))
        .route("/ui/api/{*rest}", get(api::not_found))
        .with_state(state)
        .layer(axum::middleware::map_response(secure))
}

/// The security headers of every UI response.
async fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// An API error: a status and a message, answered as
/// `{"error": {"status": 400, "message": "…"}}`.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self { status: StatusCode::BAD_REQUEST, message: message.into() }
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self { status: StatusCode::NOT_FOUND, message: message.into() }
    }

    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }

    /// The store failed: logged, answered without its details.
    pub(crate) fn store(error: &agentloop::store::StoreError) -> Self {
        tracing::warn!(%error, "ui api: the store failed");
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: "the run store failed (see the server's log)".to_owned(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"status": self.status.as_u16(),
            "message": self.message}});
        let mut response = (self.status, Json(body)).into_response();
        response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

/// The refusal of a request without the server's credentials: 401 with the challenge, and
/// the scheme and header the page must send (`{"error": {…, "scheme": "bearer", "header":
/// "Authorization"}}`). `None`: admitted.
pub(crate) fn refusal(state: &UiState, headers: &http::HeaderMap) -> Option<Response> {
    let auth = state.auth.as_ref()?;
    if auth.allows(headers) {
        return None;
    }
    let (scheme, header_name) = match auth {
        Auth::Bearer(_) => ("bearer", "Authorization".to_owned()),
        Auth::ApiKey { header, .. } => ("apiKey", header.clone()),
    };
    let body = serde_json::json!({"error": {"status": 401, "message": "credentials required",
        "scheme": scheme, "header": header_name}});
    let mut response = (StatusCode::UNAUTHORIZED, Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(auth.challenge()));
    Some(response)
}
