//! The wire: bounded bodies, A2A errors out of JSON-RPC and REST answers, SSE streams.

use super::{Binding, EventStream};
use crate::error::A2aClientError;
use crate::sse::{SseEvent, SseParser};
use crate::text::sanitize;
use a2a::{JsonRpcId, JsonRpcResponse, StreamResponse};
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::Duration;

/// The body of `response`, refused past `max` bytes, within `timeout` of now.
pub(crate) async fn read_bounded(
    response: reqwest::Response,
    max: usize,
    timeout: Duration,
) -> Result<Vec<u8>, A2aClientError> {
    if response.content_length().is_some_and(|len| len > max as u64) {
        return Err(A2aClientError::TooLarge(max));
    }
    let read = async {
        let mut body = Vec::new();
        let mut chunks = response.bytes_stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| A2aClientError::from_reqwest(e, timeout))?;
            if body.len() + chunk.len() > max {
                return Err(A2aClientError::TooLarge(max));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    };
    tokio::time::timeout(timeout, read).await.map_err(|_| timeout_error(timeout))?
}

pub(crate) fn timeout_error(timeout: Duration) -> A2aClientError {
    A2aClientError::Timeout(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX))
}

/// The error for an HTTP error status: the A2A error in the body (REST or JSON-RPC shape)
/// when there is one, the status and an excerpt otherwise.
pub(crate) fn status_error(status: u16, body: &[u8]) -> A2aClientError {
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        if let Some(error) = rest_error(&value, Some(status)) {
            return error;
        }
        if let Some(error) = jsonrpc_error(&value) {
            return error;
        }
    }
    A2aClientError::HttpStatus { status, body: sanitize(&String::from_utf8_lossy(body), 300) }
}

/// A REST (google.rpc style) error body: `{"error": {"code", "status", "message",
/// "details": [{"@type": "…ErrorInfo", "reason": "TASK_NOT_FOUND", …}]}}`. The A2A code
/// comes from the `ErrorInfo` reason.
pub(crate) fn rest_error(value: &Value, http: Option<u16>) -> Option<A2aClientError> {
    let error = value.get("error")?;
    let message = error.get("message").and_then(Value::as_str).unwrap_or("");
    let details = error.get("details");
    let reason = details.and_then(Value::as_array).and_then(|details| {
        details.iter().find_map(|detail| detail.get("reason").and_then(Value::as_str))
    });
    let code = match reason.and_then(a2a::reason_to_error_code) {
        Some(code) => code,
        // A JSON-RPC style error object with a numeric code in the A2A range.
        None => match error.get("code").and_then(Value::as_i64) {
            Some(code) if code < 0 => i32::try_from(code).ok()?,
            _ => return None,
        },
    };
    Some(A2aClientError::remote(code, message, details.cloned(), http))
}

/// The `error` member of a JSON-RPC response, if it has one.
fn jsonrpc_error(value: &Value) -> Option<A2aClientError> {
    let error = value.get("error")?;
    let code = i32::try_from(error.get("code")?.as_i64()?).ok()?;
    let message = error.get("message").and_then(Value::as_str).unwrap_or("");
    Some(A2aClientError::remote(code, message, error.get("data").cloned(), None))
}

/// The `result` of a JSON-RPC response to the request `id`, or its error.
pub(crate) fn decode_jsonrpc<T: DeserializeOwned>(
    body: &[u8],
    id: Option<i64>,
) -> Result<T, A2aClientError> {
    let response: JsonRpcResponse = serde_json::from_slice(body)
        .map_err(|e| A2aClientError::invalid(format!("not a JSON-RPC response: {e}")))?;
    if let Some(error) = response.error {
        return Err(A2aClientError::remote(error.code, &error.message, error.data, None));
    }
    if let Some(id) = id {
        if response.id != JsonRpcId::Number(id) && response.id != JsonRpcId::Null {
            return Err(A2aClientError::invalid("the JSON-RPC response has another request's id"));
        }
    }
    let result = response.result.ok_or_else(|| {
        A2aClientError::invalid("a JSON-RPC response with neither result nor error")
    })?;
    serde_json::from_value(result).map_err(A2aClientError::invalid)
}

/// A JSON body (REST) as `T`.
pub(crate) fn decode_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, A2aClientError> {
    serde_json::from_slice(body).map_err(A2aClientError::invalid)
}

/// One SSE event of a stream as a [`StreamResponse`]; `None` for an event without data.
/// JSON-RPC: every `data` is a JSON-RPC response. HTTP+JSON: `data` is the
/// `StreamResponse` itself, and an `error` event carries a REST error body.
pub(crate) fn decode_stream_event(
    binding: Binding,
    event: &SseEvent,
    id: Option<i64>,
) -> Result<Option<StreamResponse>, A2aClientError> {
    if event.data.trim().is_empty() {
        return Ok(None);
    }
    match binding {
        Binding::JsonRpc => decode_jsonrpc(event.data.as_bytes(), id).map(Some),
        Binding::HttpJson => {
            let value: Value =
                serde_json::from_str(&event.data).map_err(A2aClientError::invalid)?;
            if event.event == "error" || value.get("error").is_some() {
                return Err(rest_error(&value, None).unwrap_or_else(|| {
                    A2aClientError::invalid(format!("error event: {}", event.data))
                }));
            }
            serde_json::from_value(value).map(Some).map_err(A2aClientError::invalid)
        }
    }
}

/// The events of an SSE response. Ends after the first error, on a silence longer than
/// `idle`, or when the agent closes the stream.
pub(crate) fn sse_stream(
    response: reqwest::Response,
    binding: Binding,
    id: Option<i64>,
    max_event_bytes: usize,
    idle: Duration,
) -> EventStream {
    Box::pin(async_stream::stream! {
        let mut bytes = response.bytes_stream();
        let mut parser = SseParser::new(max_event_bytes);
        'read: loop {
            let chunk = match tokio::time::timeout(idle, bytes.next()).await {
                Err(_) => {
                    yield Err(timeout_error(idle));
                    break 'read;
                }
                Ok(None) => break 'read,
                Ok(Some(Err(e))) => {
                    yield Err(A2aClientError::from_reqwest(e, idle));
                    break 'read;
                }
                Ok(Some(Ok(chunk))) => chunk,
            };
            let events = match parser.push(&chunk) {
                Ok(events) => events,
                Err(crate::sse::SseError::TooLarge(max)) => {
                    yield Err(A2aClientError::TooLarge(max));
                    break 'read;
                }
                Err(e) => {
                    yield Err(A2aClientError::invalid(e));
                    break 'read;
                }
            };
            for event in &events {
                match decode_stream_event(binding, event, id) {
                    Ok(Some(response)) => yield Ok(response),
                    Ok(None) => {}
                    Err(e) => {
                        yield Err(e);
                        break 'read;
                    }
                }
            }
        }
    })
}
