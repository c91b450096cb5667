//! [`A2aClient`]: the A2A 1.0 operations over JSON-RPC or HTTP+JSON.

mod builder;
mod http;

pub use builder::{A2aClientBuilder, AGENT_CARD_PATH};

use crate::error::A2aClientError;
use a2a::{
    methods, AgentCard, CancelTaskRequest, GetTaskRequest, JsonRpcId, JsonRpcRequest,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task,
};
use futures::stream::BoxStream;
use http::{decode_json, decode_jsonrpc, read_bounded, sse_stream, status_error, timeout_error};
use reqwest::header::{HeaderMap, ACCEPT};
use reqwest::{Method, Url};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A stream of a task's events (`SendStreamingMessage`, `SubscribeToTask`).
pub type EventStream = BoxStream<'static, Result<StreamResponse, A2aClientError>>;

/// An A2A protocol binding this client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Binding {
    /// JSON-RPC 2.0 over HTTP (`JSONRPC`).
    JsonRpc,
    /// HTTP+JSON, the REST binding (`HTTP+JSON`).
    HttpJson,
}

impl Binding {
    /// The name an agent card uses for it (`protocolBinding`).
    pub fn protocol_name(self) -> &'static str {
        match self {
            Self::JsonRpc => a2a::TRANSPORT_PROTOCOL_JSONRPC,
            Self::HttpJson => a2a::TRANSPORT_PROTOCOL_HTTP_JSON,
        }
    }
}

/// A client of one remote A2A agent (cheap to clone: clones share the connection pool).
///
/// Every request carries `A2A-Version: 1.0` and the builder's headers. Unary calls are
/// bounded in time and size; streams in the size of each event and the silence between
/// bytes.
#[derive(Clone)]
pub struct A2aClient {
    inner: Arc<Inner>,
    /// The W3C `traceparent` this handle's requests carry ([`traced`](Self::traced)).
    trace_parent: Option<reqwest::header::HeaderValue>,
}

struct Inner {
    http: reqwest::Client,
    card: AgentCard,
    binding: Binding,
    url: Url,
    headers: HeaderMap,
    timeout: Duration,
    stream_idle_timeout: Duration,
    max_response_bytes: usize,
    max_event_bytes: usize,
    next_id: AtomicI64,
}

impl std::fmt::Debug for A2aClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL without its query (which may carry a key); header values are marked
        // sensitive and shown redacted.
        let mut url = self.inner.url.clone();
        url.set_query(None);
        f.debug_struct("A2aClient")
            .field("agent", &self.inner.card.name)
            .field("binding", &self.inner.binding)
            .field("url", &url.as_str())
            .field("headers", &self.inner.headers)
            .finish_non_exhaustive()
    }
}

/// `ListTasksResponse` as ProtoJSON may send it: zero and empty fields left out.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireListTasksResponse {
    #[serde(default)]
    tasks: Vec<Task>,
    #[serde(default)]
    next_page_token: String,
    #[serde(default)]
    page_size: i32,
    #[serde(default)]
    total_size: i32,
}

impl A2aClient {
    /// A builder: headers, timeouts, limits, then [`resolve`](A2aClientBuilder::resolve).
    pub fn builder() -> A2aClientBuilder {
        A2aClientBuilder::default()
    }

    /// A client with default settings for the agent at `base_url`: fetches its card.
    pub async fn resolve(base_url: &str) -> Result<Self, A2aClientError> {
        Self::builder().resolve(base_url).await
    }

    /// The agent's card.
    pub fn card(&self) -> &AgentCard {
        &self.inner.card
    }

    /// The binding in use.
    pub fn binding(&self) -> Binding {
        self.inner.binding
    }

    /// The URL of the interface in use.
    pub fn url(&self) -> &Url {
        &self.inner.url
    }

    /// Sends a message and waits for the agent's answer: a [`Task`] (in a terminal or
    /// interrupted state, unless the request asked to return immediately) or a message.
    pub async fn send_message(
        &self,
        request: &SendMessageRequest,
    ) -> Result<SendMessageResponse, A2aClientError> {
        match self.inner.binding {
            Binding::JsonRpc => self.rpc(methods::SEND_MESSAGE, request).await,
            Binding::HttpJson => {
                self.rest(Method::POST, &["message:send"], &[], Some(request)).await
            }
        }
    }

    /// Sends a message and streams the task's events until the agent ends the stream (after a
    /// terminal or interrupted state).
    pub async fn send_streaming_message(
        &self,
        request: &SendMessageRequest,
    ) -> Result<EventStream, A2aClientError> {
        match self.inner.binding {
            Binding::JsonRpc => self.rpc_stream(methods::SEND_STREAMING_MESSAGE, request).await,
            Binding::HttpJson => {
                self.rest_stream(Method::POST, &["message:stream"], Some(request)).await
            }
        }
    }

    /// The task `id`, with at most `history_length` messages of its history.
    pub async fn get_task(
        &self,
        id: &str,
        history_length: Option<i32>,
    ) -> Result<Task, A2aClientError> {
        match self.inner.binding {
            Binding::JsonRpc => {
                let request = GetTaskRequest { id: id.to_owned(), history_length, tenant: None };
                self.rpc(methods::GET_TASK, &request).await
            }
            Binding::HttpJson => {
                let query: Vec<(&str, String)> =
                    history_length.map(|n| ("historyLength", n.to_string())).into_iter().collect();
                self.rest(Method::GET, &["tasks", id], &query, None::<&()>).await
            }
        }
    }

    /// The agent's tasks that match `request`, one page.
    pub async fn list_tasks(
        &self,
        request: &ListTasksRequest,
    ) -> Result<ListTasksResponse, A2aClientError> {
        let wire: WireListTasksResponse = match self.inner.binding {
            Binding::JsonRpc => self.rpc(methods::LIST_TASKS, request).await?,
            Binding::HttpJson => {
                let query = list_query(request)?;
                self.rest(Method::GET, &["tasks"], &query, None::<&()>).await?
            }
        };
        Ok(ListTasksResponse {
            tasks: wire.tasks,
            next_page_token: wire.next_page_token,
            page_size: wire.page_size,
            total_size: wire.total_size,
        })
    }

    /// Asks the agent to cancel the task `id`; returns the task as the agent has it after.
    pub async fn cancel_task(&self, id: &str) -> Result<Task, A2aClientError> {
        let request = CancelTaskRequest { id: id.to_owned(), metadata: None, tenant: None };
        match self.inner.binding {
            Binding::JsonRpc => self.rpc(methods::CANCEL_TASK, &request).await,
            Binding::HttpJson => {
                let segment = format!("{id}:cancel");
                let body = serde_json::json!({});
                self.rest(Method::POST, &["tasks", &segment], &[], Some(&body)).await
            }
        }
    }

    /// Streams the events of the (running) task `id`.
    pub async fn subscribe_to_task(&self, id: &str) -> Result<EventStream, A2aClientError> {
        match self.inner.binding {
            Binding::JsonRpc => {
                let request = SubscribeToTaskRequest { id: id.to_owned(), tenant: None };
                self.rpc_stream(methods::SUBSCRIBE_TO_TASK, &request).await
            }
            Binding::HttpJson => {
                let segment = format!("{id}:subscribe");
                self.rest_stream(Method::GET, &["tasks", &segment], None::<&()>).await
            }
        }
    }

    /// This client, with requests that carry the caller's trace context (a W3C
    /// `traceparent`, e.g. a tool call's [`ToolContext::trace_parent`](agentloop::tool::ToolContext::trace_parent)):
    /// the remote agent's work joins the caller's trace. A malformed value is left out.
    pub fn traced(&self, trace_parent: Option<&str>) -> Self {
        let trace_parent =
            trace_parent.and_then(|tp| reqwest::header::HeaderValue::from_str(tp).ok());
        Self { inner: self.inner.clone(), trace_parent }
    }

    fn request(&self, method: Method, url: Url) -> reqwest::RequestBuilder {
        let request = self
            .inner
            .http
            .request(method, url)
            .headers(self.inner.headers.clone())
            .header(a2a::SVC_PARAM_VERSION, a2a::VERSION);
        match &self.trace_parent {
            Some(trace_parent) => request.header("traceparent", trace_parent.clone()),
            None => request,
        }
    }

    fn jsonrpc_body(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Result<(i64, JsonRpcRequest), A2aClientError> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let params = serde_json::to_value(params).map_err(|e| {
            A2aClientError::InvalidResponse(format!("request not serializable: {e}"))
        })?;
        Ok((id, JsonRpcRequest::new(JsonRpcId::Number(id), method, Some(params))))
    }

    async fn rpc<T: DeserializeOwned>(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Result<T, A2aClientError> {
        let (id, body) = self.jsonrpc_body(method, params)?;
        let request = self
            .request(Method::POST, self.inner.url.clone())
            .header(ACCEPT, "application/json")
            .json(&body);
        let (status, body) = self.send_unary(request).await?;
        match decode_jsonrpc(&body, Some(id)) {
            Err(A2aClientError::InvalidResponse(_)) if !(200..300).contains(&status) => {
                Err(status_error(status, &body))
            }
            other => other,
        }
    }

    async fn rest<T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&impl Serialize>,
    ) -> Result<T, A2aClientError> {
        let mut url = self.rest_url(segments)?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let mut request = self.request(method, url).header(ACCEPT, "application/json");
        if let Some(body) = body {
            request = request.json(body);
        }
        let (status, body) = self.send_unary(request).await?;
        if !(200..300).contains(&status) {
            return Err(status_error(status, &body));
        }
        decode_json(&body)
    }

    async fn send_unary(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<(u16, Vec<u8>), A2aClientError> {
        let timeout = self.inner.timeout;
        let response = request
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| A2aClientError::from_reqwest(e, timeout))?;
        let status = response.status().as_u16();
        let body = read_bounded(response, self.inner.max_response_bytes, timeout).await?;
        Ok((status, body))
    }

    fn rest_url(&self, segments: &[&str]) -> Result<Url, A2aClientError> {
        let mut url = self.inner.url.clone();
        url.path_segments_mut()
            .map_err(|()| {
                A2aClientError::InvalidUrl("the interface URL cannot have a path".into())
            })?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    async fn rpc_stream(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Result<EventStream, A2aClientError> {
        let (id, body) = self.jsonrpc_body(method, params)?;
        let request = self.request(Method::POST, self.inner.url.clone()).json(&body);
        self.open_stream(request, Binding::JsonRpc, Some(id)).await
    }

    async fn rest_stream(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<&impl Serialize>,
    ) -> Result<EventStream, A2aClientError> {
        let mut request = self.request(method, self.rest_url(segments)?);
        if let Some(body) = body {
            request = request.json(body);
        }
        self.open_stream(request, Binding::HttpJson, None).await
    }

    /// Sends a streaming request. An SSE answer becomes the stream; an error status becomes
    /// the error; a plain JSON answer (an agent that does not stream) becomes its one event,
    /// or its error.
    async fn open_stream(
        &self,
        request: reqwest::RequestBuilder,
        binding: Binding,
        id: Option<i64>,
    ) -> Result<EventStream, A2aClientError> {
        let timeout = self.inner.timeout;
        let send = request.header(ACCEPT, "text/event-stream").send();
        let response = tokio::time::timeout(timeout, send)
            .await
            .map_err(|_| timeout_error(timeout))?
            .map_err(|e| A2aClientError::from_reqwest(e, timeout))?;
        let status = response.status().as_u16();
        let is_sse = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("text/event-stream"));
        if (200..300).contains(&status) && is_sse {
            return Ok(sse_stream(
                response,
                binding,
                id,
                self.inner.max_event_bytes,
                self.inner.stream_idle_timeout,
            ));
        }
        let body = read_bounded(response, self.inner.max_response_bytes, timeout).await?;
        if !(200..300).contains(&status) {
            return Err(status_error(status, &body));
        }
        let single: StreamResponse = match binding {
            Binding::JsonRpc => decode_jsonrpc(&body, id)?,
            Binding::HttpJson => decode_json(&body)?,
        };
        Ok(Box::pin(futures::stream::iter([Ok(single)])))
    }
}

/// The query of a REST `ListTasks`: the request's fields by their JSON names.
fn list_query(request: &ListTasksRequest) -> Result<Vec<(&'static str, String)>, A2aClientError> {
    let value = serde_json::to_value(request)
        .map_err(|e| A2aClientError::InvalidResponse(format!("request not serializable: {e}")))?;
    let mut query = Vec::new();
    for name in [
        "contextId",
        "status",
        "pageSize",
        "pageToken",
        "historyLength",
        "statusTimestampAfter",
        "includeArtifacts",
    ] {
        match value.get(name) {
            Some(serde_json::Value::String(text)) => query.push((name, text.clone())),
            Some(serde_json::Value::Null) | None => {}
            Some(other) => query.push((name, other.to_string())),
        }
    }
    Ok(query)
}

#[cfg(test)]
mod tests;
