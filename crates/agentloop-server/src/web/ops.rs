//! The A2A operations, shared by both bindings: typed request in, typed response (or
//! update stream) out.

use super::streams::{self, Update};
use super::AgentState;
use a2a::{A2AError, SendMessageRequest, SendMessageResponse};
use futures::stream::BoxStream;
use futures::StreamExt;

/// The most messages of history a request may ask for.
const MAX_HISTORY: i32 = 1000;

fn check_request(request: &SendMessageRequest) -> Result<(), A2AError> {
    if request.message.message_id.is_empty() {
        return Err(A2AError::invalid_params("message.messageId is required"));
    }
    if let Some(config) = &request.configuration {
        if config.history_length.is_some_and(|n| !(0..=MAX_HISTORY).contains(&n)) {
            return Err(A2AError::invalid_params(format!(
                "historyLength must be in 0-{MAX_HISTORY}"
            )));
        }
        if let Some(modes) = &config.accepted_output_modes {
            let text = modes.is_empty()
                || modes.iter().any(|m| m == "text/plain" || m == "text/*" || m == "*/*");
            if !text {
                return Err(A2AError::content_type_not_supported());
            }
        }
    }
    Ok(())
}

/// The caller's W3C trace context (`traceparent`), if the request has a well-formed one:
/// a new task's run joins the caller's trace under it.
pub fn trace_parent(headers: &http::HeaderMap) -> Option<String> {
    let value = headers.get("traceparent")?.to_str().ok()?.trim();
    // version-traceid-spanid-flags, lowercase hex (W3C Trace Context); the all-zero ids
    // are invalid.
    let parts: Vec<&str> = value.split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let valid = parts.len() >= 4
        && hex(parts[0], 2)
        && parts[0] != "ff"
        && hex(parts[1], 32)
        && parts[1].bytes().any(|b| b != b'0')
        && hex(parts[2], 16)
        && parts[2].bytes().any(|b| b != b'0')
        && hex(parts[3], 2)
        && (parts[0] != "00" || parts.len() == 4);
    valid.then(|| value.to_owned())
}

/// SendMessage: starts or continues a task and waits until it completes, fails or asks for
/// input (or `send_wait` passes, or `returnImmediately`), then returns the task.
pub async fn send(
    state: &AgentState,
    request: SendMessageRequest,
    trace_parent: Option<String>,
) -> Result<SendMessageResponse, A2AError> {
    check_request(&request)?;
    let push = state.push.check_send(request.configuration.as_ref()).await?;
    let config = request.configuration.unwrap_or(a2a::SendMessageConfiguration {
        accepted_output_modes: None,
        task_push_notification_config: None,
        history_length: None,
        return_immediately: None,
    });
    let mut accepted = state.host.send(&request.message, trace_parent).await?;
    let task_id = accepted.task.id.clone();
    if let Some(push) = push {
        state.push.register(&state.host, &task_id, push).await?;
    }
    if config.return_immediately == Some(true) {
        return Ok(SendMessageResponse::Task(accepted.task));
    }
    let _ = tokio::time::timeout(state.config.send_wait, async {
        while let Some(envelope) = accepted.events.recv().await {
            if envelope.is_journaled() && envelope.event.outcome().is_some() {
                break;
            }
        }
    })
    .await;
    Ok(SendMessageResponse::Task(state.host.get(&task_id, config.history_length).await?))
}

/// SendStreamingMessage: starts or continues a task and streams its updates.
pub async fn stream(
    state: &AgentState,
    request: SendMessageRequest,
    trace_parent: Option<String>,
) -> Result<BoxStream<'static, Update>, A2AError> {
    check_request(&request)?;
    let push = state.push.check_send(request.configuration.as_ref()).await?;
    let accepted = state.host.send(&request.message, trace_parent).await?;
    if let Some(push) = push {
        state.push.register(&state.host, &accepted.task.id, push).await?;
    }
    Ok(streams::accepted(accepted).boxed())
}

/// SubscribeToTask (`last_event_id`: the SSE header of a client that reconnects).
pub async fn subscribe(
    state: &AgentState,
    task_id: &str,
    last_event_id: Option<&str>,
) -> Result<BoxStream<'static, Update>, A2AError> {
    let after = last_event_id.and_then(streams::last_seq);
    let (fold, journal) = state.host.subscribe(task_id, after).await?;
    Ok(streams::subscribed(fold, journal, after.is_some()).boxed())
}

/// Checks a task id from a request.
pub fn task_id(id: &str) -> Result<&str, A2AError> {
    if id.is_empty() || id.len() > 128 || id.chars().any(|c| c.is_control() || c == '/') {
        return Err(A2AError::invalid_params("the task id is not valid"));
    }
    Ok(id)
}

/// The push-config methods of the JSON-RPC binding (`method`, its `params`).
pub async fn push_config(
    state: &AgentState,
    method: &str,
    params: Option<serde_json::Value>,
) -> Result<serde_json::Value, A2AError> {
    use a2a::jsonrpc::methods;
    fn parse<T: serde::de::DeserializeOwned>(
        params: Option<serde_json::Value>,
    ) -> Result<T, A2AError> {
        let params = params
            .filter(serde_json::Value::is_object)
            .ok_or_else(|| A2AError::invalid_params("params must be an object"))?;
        serde_json::from_value(params)
            .map_err(|error| A2AError::invalid_params(format!("invalid params: {error}")))
    }
    fn json<T: serde::Serialize>(
        value: Result<T, A2AError>,
    ) -> Result<serde_json::Value, A2AError> {
        value.and_then(|v| serde_json::to_value(v).map_err(crate::tasks::internal))
    }
    let push = &state.push;
    if !push.enabled() {
        return Err(A2AError::push_notification_not_supported());
    }
    match method {
        methods::CREATE_PUSH_CONFIG => {
            let config: a2a::TaskPushNotificationConfig = parse(params)?;
            let task = task_id(&config.task_id)?.to_owned();
            json(push.create(&state.host, &task, config).await)
        }
        methods::GET_PUSH_CONFIG => {
            let request: a2a::GetTaskPushNotificationConfigRequest = parse(params)?;
            json(push.get(&state.host, task_id(&request.task_id)?, &request.id).await)
        }
        methods::LIST_PUSH_CONFIGS => {
            let request: a2a::ListTaskPushNotificationConfigsRequest = parse(params)?;
            json(push.list(&state.host, task_id(&request.task_id)?).await)
        }
        _ => {
            let request: a2a::DeleteTaskPushNotificationConfigRequest = parse(params)?;
            push.delete(&state.host, task_id(&request.task_id)?, &request.id).await?;
            Ok(serde_json::json!({}))
        }
    }
}
