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
        if config.task_push_notification_config.is_some() {
            return Err(A2AError::push_notification_not_supported());
        }
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

/// SendMessage: starts or continues a task and waits until it completes, fails or asks for
/// input (or `send_wait` passes, or `returnImmediately`), then returns the task.
pub async fn send(
    state: &AgentState,
    request: SendMessageRequest,
) -> Result<SendMessageResponse, A2AError> {
    check_request(&request)?;
    let config = request.configuration.unwrap_or(a2a::SendMessageConfiguration {
        accepted_output_modes: None,
        task_push_notification_config: None,
        history_length: None,
        return_immediately: None,
    });
    let mut accepted = state.host.send(&request.message).await?;
    let task_id = accepted.task.id.clone();
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
) -> Result<BoxStream<'static, Update>, A2AError> {
    check_request(&request)?;
    let accepted = state.host.send(&request.message).await?;
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
