//! The JSON-RPC 2.0 binding: one `POST` endpoint; errors in the JSON-RPC error object with
//! the spec's codes (HTTP 200); the streaming methods answer with SSE, each event a JSON-RPC
//! response whose `result` is a stream update.

use super::ops;
use super::streams::Update;
use super::{admit, unauthorized, Rejection, State};
use a2a::jsonrpc::methods;
use a2a::{A2AError, JsonRpcId, JsonRpcResponse};
use axum::body::Bytes;
use axum::extract::State as Extract;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::stream::BoxStream;
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn reply(id: JsonRpcId, result: Result<Value, A2AError>) -> Response {
    let body = match result {
        Ok(value) => JsonRpcResponse::success(id, value),
        Err(error) => JsonRpcResponse::error(id, error.to_jsonrpc_error()),
    };
    Json(body).into_response()
}

fn params<T: DeserializeOwned>(params: Option<Value>) -> Result<T, A2AError> {
    let params = params.ok_or_else(|| A2AError::invalid_params("params are required"))?;
    if !params.is_object() {
        return Err(A2AError::invalid_params("params must be an object"));
    }
    serde_json::from_value(params)
        .map_err(|error| A2AError::invalid_params(format!("invalid params: {error}")))
}

fn to_value<T: serde::Serialize>(value: &T) -> Result<Value, A2AError> {
    serde_json::to_value(value).map_err(super::super::tasks::internal)
}

/// The request envelope, checked by hand so each fault gets its own code.
fn envelope(body: &[u8]) -> Result<(JsonRpcId, String, Option<Value>), (JsonRpcId, A2AError)> {
    let value: Value = serde_json::from_slice(body).map_err(|error| {
        (JsonRpcId::Null, A2AError::parse_error(format!("invalid JSON: {error}")))
    })?;
    let Value::Object(mut object) = value else {
        let what = if value.is_array() {
            "batch requests are not supported"
        } else {
            "the request must be an object"
        };
        return Err((JsonRpcId::Null, A2AError::invalid_request(what)));
    };
    let id = match object.remove("id") {
        None | Some(Value::Null) => JsonRpcId::Null,
        Some(Value::String(s)) if s.len() <= 256 => JsonRpcId::String(s),
        Some(Value::Number(n)) if n.as_i64().is_some() => {
            JsonRpcId::Number(n.as_i64().unwrap_or_default())
        }
        Some(_) => {
            return Err((
                JsonRpcId::Null,
                A2AError::invalid_request("id must be a string or an integer"),
            ))
        }
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((id, A2AError::invalid_request("jsonrpc must be \"2.0\"")));
    }
    let Some(Value::String(method)) = object.remove("method") else {
        return Err((id, A2AError::invalid_request("method must be a string")));
    };
    Ok((id, method, object.remove("params")))
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskIdParams {
    id: String,
    #[serde(default)]
    history_length: Option<i32>,
}

/// `POST /{agent}`.
pub(crate) async fn handle(
    Extract(state): Extract<State>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (id, method, raw) = match envelope(&body) {
        Ok(parts) => parts,
        Err((id, error)) => return reply(id, Err(error)),
    };
    match admit(&state, &headers) {
        Ok(()) => {}
        Err(Rejection::Unauthorized(challenge)) => return unauthorized(challenge),
        Err(Rejection::Protocol(error)) => return reply(id, Err(error)),
    }
    let last_event_id =
        headers.get("last-event-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let result = match method.as_str() {
        methods::SEND_MESSAGE => match params(raw) {
            Ok(request) => ops::send(&state, request, ops::trace_parent(&headers))
                .await
                .and_then(|r| to_value(&r)),
            Err(error) => Err(error),
        },
        methods::SEND_STREAMING_MESSAGE => {
            let stream = match params(raw) {
                Ok(request) => ops::stream(&state, request, ops::trace_parent(&headers)).await,
                Err(error) => Err(error),
            };
            return sse(&state, id, stream);
        }
        methods::SUBSCRIBE_TO_TASK => {
            let stream = match params::<TaskIdParams>(raw) {
                Ok(p) => match ops::task_id(&p.id) {
                    Ok(task_id) => ops::subscribe(&state, task_id, last_event_id.as_deref()).await,
                    Err(error) => Err(error),
                },
                Err(error) => Err(error),
            };
            return sse(&state, id, stream);
        }
        methods::GET_TASK => match params::<TaskIdParams>(raw) {
            Ok(p) => match ops::task_id(&p.id) {
                Ok(task_id) => {
                    state.host.get(task_id, p.history_length).await.and_then(|t| to_value(&t))
                }
                Err(error) => Err(error),
            },
            Err(error) => Err(error),
        },
        methods::LIST_TASKS => {
            let request =
                params::<a2a::ListTasksRequest>(raw.or(Some(Value::Object(Default::default()))));
            match request {
                Ok(request) => state.host.list(&request).await.and_then(|r| to_value(&r)),
                Err(error) => Err(error),
            }
        }
        methods::CANCEL_TASK => match params::<TaskIdParams>(raw) {
            Ok(p) => match ops::task_id(&p.id) {
                Ok(task_id) => state.host.cancel(task_id).await.and_then(|t| to_value(&t)),
                Err(error) => Err(error),
            },
            Err(error) => Err(error),
        },
        methods::CREATE_PUSH_CONFIG
        | methods::GET_PUSH_CONFIG
        | methods::LIST_PUSH_CONFIGS
        | methods::DELETE_PUSH_CONFIG => ops::push_config(&state, &method, raw).await,
        methods::GET_EXTENDED_AGENT_CARD => {
            Err(A2AError::unsupported_operation("this agent has no extended card"))
        }
        other => {
            let shown: String = other.chars().take(64).filter(|c| !c.is_control()).collect();
            Err(A2AError::method_not_found(&shown))
        }
    };
    reply(id, result)
}

/// An update stream as SSE of JSON-RPC responses (an error before the stream: one JSON-RPC
/// error response, not SSE).
fn sse(
    state: &State,
    id: JsonRpcId,
    stream: Result<BoxStream<'static, Update>, A2AError>,
) -> Response {
    let stream = match stream {
        Ok(stream) => stream,
        Err(error) => return reply(id, Err(error)),
    };
    let events = stream.map(move |update| {
        let (event_id, body) = match update {
            Ok((event_id, update)) => {
                let value = serde_json::to_value(&update).unwrap_or(Value::Null);
                (event_id, JsonRpcResponse::success(id.clone(), value))
            }
            Err(error) => {
                let error = super::super::tasks::internal(error);
                (None, JsonRpcResponse::error(id.clone(), error.to_jsonrpc_error()))
            }
        };
        let data = serde_json::to_string(&body).unwrap_or_default();
        let event = SseEvent::default().data(data);
        Ok::<_, std::convert::Infallible>(match event_id {
            Some(event_id) => event.id(event_id),
            None => event,
        })
    });
    Sse::new(events).keep_alive(KeepAlive::new().interval(state.config.keep_alive)).into_response()
}
