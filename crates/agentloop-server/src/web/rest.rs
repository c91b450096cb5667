//! The HTTP+JSON binding: `POST /message:send`, `POST /message:stream` (SSE),
//! `GET /tasks`, `GET /tasks/{id}`, `POST /tasks/{id}:cancel`, `GET|POST /tasks/{id}:subscribe`
//! (SSE). Errors are `{"error": {"code", "status", "message", "details"}}` (google.rpc.Status,
//! the details holding the A2A ErrorInfo) with the HTTP status of the A2A error (503 with
//! `Retry-After` when a worker pool's queue is full).

use super::ops;
use super::streams::Update;
use super::{admit, unauthorized, Rejection, State};
use a2a::{A2AError, ListTasksRequest, SendMessageRequest, TaskState};
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State as Extract};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::stream::BoxStream;
use futures::StreamExt;
use serde_json::{json, Value};
use std::collections::HashMap;

/// The google.rpc status name of an HTTP status.
fn status_name(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        404 => "NOT_FOUND",
        409 => "FAILED_PRECONDITION",
        413 => "RESOURCE_EXHAUSTED",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}

fn error_response(error: &A2AError) -> Response {
    // A full worker queue: 503, and when to try again.
    let full = error.code == crate::tasks::QUEUE_FULL;
    let status = if full { 503 } else { error.http_status_code() };
    let details = error.to_jsonrpc_error().data.unwrap_or(Value::Array(Vec::new()));
    let body = json!({"error": {
        "code": status,
        "status": status_name(status),
        "message": error.message,
        "details": details,
    }});
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if full {
        let retry = [(http::header::RETRY_AFTER, crate::tasks::QUEUE_FULL_RETRY_SECS.to_string())];
        return (status, retry, Json(body)).into_response();
    }
    (status, Json(body)).into_response()
}

fn respond<T: serde::Serialize>(result: Result<T, A2AError>) -> Response {
    match result {
        Ok(value) => Json(value).into_response(),
        Err(error) => error_response(&error),
    }
}

/// The response that refuses a request without credentials or for another version.
fn refusal(state: &State, headers: &HeaderMap) -> Option<Response> {
    match admit(state, headers) {
        Ok(()) => None,
        Err(Rejection::Unauthorized(challenge)) => Some(unauthorized(challenge)),
        Err(Rejection::Protocol(error)) => Some(error_response(&error)),
    }
}

fn body<T: serde::de::DeserializeOwned>(headers: &HeaderMap, body: &[u8]) -> Result<T, A2AError> {
    let json = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|v| v.starts_with("application/json") || v.starts_with("application/a2a+json"));
    if !json {
        return Err(A2AError::content_type_not_supported());
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| A2AError::parse_error(format!("invalid JSON: {error}")))?;
    if !value.is_object() {
        return Err(A2AError::invalid_params("the body must be an object"));
    }
    serde_json::from_value(value)
        .map_err(|error| A2AError::invalid_params(format!("invalid request: {error}")))
}

/// `POST /message:send`.
pub(crate) async fn send(
    Extract(state): Extract<State>,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    if let Some(response) = refusal(&state, &headers) {
        return response;
    }
    match body::<SendMessageRequest>(&headers, &raw) {
        Ok(request) => respond(ops::send(&state, request, ops::trace_parent(&headers)).await),
        Err(error) => error_response(&error),
    }
}

/// `POST /message:stream`.
pub(crate) async fn stream(
    Extract(state): Extract<State>,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    if let Some(response) = refusal(&state, &headers) {
        return response;
    }
    let stream = match body::<SendMessageRequest>(&headers, &raw) {
        Ok(request) => ops::stream(&state, request, ops::trace_parent(&headers)).await,
        Err(error) => Err(error),
    };
    sse(&state, stream)
}

fn query_map(query: Option<&str>) -> Result<HashMap<String, String>, A2AError> {
    let mut map = HashMap::new();
    for pair in query.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decode = |s: &str| {
            percent_decode(s)
                .ok_or_else(|| A2AError::invalid_params("the query is not valid percent-encoding"))
        };
        map.insert(decode(key)?, decode(value)?);
    }
    Ok(map)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

fn int(map: &HashMap<String, String>, key: &str) -> Result<Option<i32>, A2AError> {
    map.get(key)
        .map(|v| {
            v.parse::<i32>()
                .map_err(|_| A2AError::invalid_params(format!("{key} must be an integer")))
        })
        .transpose()
}

fn list_request(map: &HashMap<String, String>) -> Result<ListTasksRequest, A2AError> {
    let status = match map.get("status") {
        Some(s) => Some(
            serde_json::from_value::<TaskState>(Value::String(s.clone()))
                .map_err(|_| A2AError::invalid_params("status is not a task state"))?,
        ),
        None => None,
    };
    let status_timestamp_after = match map.get("statusTimestampAfter") {
        Some(t) => Some(serde_json::from_value(Value::String(t.clone())).map_err(|_| {
            A2AError::invalid_params("statusTimestampAfter is not an RFC 3339 time")
        })?),
        None => None,
    };
    let include_artifacts = match map.get("includeArtifacts").map(String::as_str) {
        None => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(_) => return Err(A2AError::invalid_params("includeArtifacts must be true or false")),
    };
    Ok(ListTasksRequest {
        context_id: map.get("contextId").cloned(),
        status,
        page_size: int(map, "pageSize")?,
        page_token: map.get("pageToken").cloned(),
        history_length: int(map, "historyLength")?,
        status_timestamp_after,
        include_artifacts,
        tenant: None,
    })
}

/// `GET /tasks`.
pub(crate) async fn list(
    Extract(state): Extract<State>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    if let Some(response) = refusal(&state, &headers) {
        return response;
    }
    let request = query_map(query.as_deref()).and_then(|map| list_request(&map));
    match request {
        Ok(request) => respond(state.host.list(&request).await),
        Err(error) => error_response(&error),
    }
}

/// What `/tasks/{rest}` names.
enum TaskRoute<'a> {
    Task(&'a str),
    Cancel(&'a str),
    Subscribe(&'a str),
    /// `/tasks/{id}/pushNotificationConfigs[/{configId}]`.
    PushConfigs(&'a str, Option<&'a str>),
}

fn route(rest: &str) -> Option<TaskRoute<'_>> {
    if let Some((id, configs)) = rest.split_once("/pushNotificationConfigs") {
        let config = match configs {
            "" | "/" => None,
            _ => Some(configs.strip_prefix('/').filter(|c| !c.is_empty() && !c.contains('/'))?),
        };
        return Some(TaskRoute::PushConfigs(id, config));
    }
    let route = match rest.rsplit_once(':') {
        Some((id, "cancel")) => TaskRoute::Cancel(id),
        Some((id, "subscribe")) => TaskRoute::Subscribe(id),
        Some(_) => return None,
        None => TaskRoute::Task(rest),
    };
    Some(route)
}

fn not_found() -> Response {
    error_response(&A2AError::method_not_found("no such route"))
}

/// `GET /tasks/{id}`, `GET /tasks/{id}:subscribe`.
pub(crate) async fn task_get(
    Extract(state): Extract<State>,
    Path(rest): Path<String>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    if let Some(response) = refusal(&state, &headers) {
        return response;
    }
    match route(&rest) {
        Some(TaskRoute::Task(id)) => {
            let request = ops::task_id(id).and_then(|id| {
                let map = query_map(query.as_deref())?;
                Ok((id, int(&map, "historyLength")?))
            });
            match request {
                Ok((id, history_length)) => respond(state.host.get(id, history_length).await),
                Err(error) => error_response(&error),
            }
        }
        Some(TaskRoute::Subscribe(id)) => subscribe(&state, id, &headers).await,
        Some(TaskRoute::PushConfigs(id, None)) => match push_gate(&state, id) {
            Ok(task) => respond(state.push.list(&state.host, task).await),
            Err(error) => error_response(&error),
        },
        Some(TaskRoute::PushConfigs(id, Some(config))) => match push_gate(&state, id) {
            Ok(task) => respond(state.push.get(&state.host, task, config).await),
            Err(error) => error_response(&error),
        },
        _ => not_found(),
    }
}

/// The task of a push-config route: refused when push is off or the id is not valid.
fn push_gate<'a>(state: &State, id: &'a str) -> Result<&'a str, A2AError> {
    if !state.push.enabled() {
        return Err(A2AError::push_notification_not_supported());
    }
    ops::task_id(id)
}

/// `DELETE /tasks/{id}/pushNotificationConfigs/{configId}`.
pub(crate) async fn task_delete(
    Extract(state): Extract<State>,
    Path(rest): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(response) = refusal(&state, &headers) {
        return response;
    }
    match route(&rest) {
        Some(TaskRoute::PushConfigs(id, Some(config))) => match push_gate(&state, id) {
            Ok(task) => {
                respond(state.push.delete(&state.host, task, config).await.map(|()| json!({})))
            }
            Err(error) => error_response(&error),
        },
        _ => not_found(),
    }
}

/// `POST /tasks/{id}:cancel`, `POST /tasks/{id}:subscribe`,
/// `POST /tasks/{id}/pushNotificationConfigs`.
pub(crate) async fn task_post(
    Extract(state): Extract<State>,
    Path(rest): Path<String>,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    if let Some(response) = refusal(&state, &headers) {
        return response;
    }
    match route(&rest) {
        Some(TaskRoute::Cancel(id)) => match ops::task_id(id) {
            Ok(id) => respond(state.host.cancel(id).await),
            Err(error) => error_response(&error),
        },
        Some(TaskRoute::Subscribe(id)) => subscribe(&state, id, &headers).await,
        Some(TaskRoute::PushConfigs(id, None)) => match push_gate(&state, id) {
            Ok(task) => match body::<a2a::TaskPushNotificationConfig>(&headers, &raw) {
                Ok(config) => respond(state.push.create(&state.host, task, config).await),
                Err(error) => error_response(&error),
            },
            Err(error) => error_response(&error),
        },
        _ => not_found(),
    }
}

async fn subscribe(state: &State, id: &str, headers: &HeaderMap) -> Response {
    let last_event_id = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let stream = match ops::task_id(id) {
        Ok(id) => ops::subscribe(state, id, last_event_id).await,
        Err(error) => Err(error),
    };
    sse(state, stream)
}

/// `GET /extendedAgentCard`.
pub(crate) async fn extended_card(Extract(state): Extract<State>, headers: HeaderMap) -> Response {
    if let Some(response) = refusal(&state, &headers) {
        return response;
    }
    error_response(&A2AError::unsupported_operation("this agent has no extended card"))
}

fn sse(state: &State, stream: Result<BoxStream<'static, Update>, A2AError>) -> Response {
    let stream = match stream {
        Ok(stream) => stream,
        Err(error) => return error_response(&error),
    };
    let events = stream.map(|update| {
        let (event_id, data) = match update {
            Ok((event_id, update)) => {
                (event_id, serde_json::to_string(&update).unwrap_or_default())
            }
            Err(error) => {
                let error = crate::tasks::internal(error);
                (
                    None,
                    json!({"error": {"code": 500, "status": "INTERNAL", "message": error.message}})
                        .to_string(),
                )
            }
        };
        let event = SseEvent::default().data(data);
        Ok::<_, std::convert::Infallible>(match event_id {
            Some(event_id) => event.id(event_id),
            None => event,
        })
    });
    Sse::new(events).keep_alive(KeepAlive::new().interval(state.config.keep_alive)).into_response()
}
