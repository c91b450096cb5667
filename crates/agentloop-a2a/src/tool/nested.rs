//! A remote task's updates as agentloop events, passed on as nested events of the call.

use super::collect::{message_text, parts_text};
use crate::text::sanitize;
use a2a::{Role, StreamResponse};
use agentloop::Event;

/// The agentloop events for one remote update: an artifact chunk's text becomes a
/// [`Event::TextDelta`] (chunks stream as they come), a status message or an agent message
/// a whole [`Event::Text`]. Updates without text (a bare state change, a task snapshot)
/// give none. Text is sanitized and bounded to `max_chars`.
pub(crate) fn nested_events(update: &StreamResponse, max_chars: usize) -> Vec<Event> {
    let text = match update {
        StreamResponse::ArtifactUpdate(update) => {
            let delta = parts_text(&update.artifact.parts);
            return if delta.is_empty() {
                Vec::new()
            } else {
                vec![Event::TextDelta { delta: sanitize(&delta, max_chars) }]
            };
        }
        StreamResponse::StatusUpdate(update) => update.status.message.as_ref().map(message_text),
        StreamResponse::Message(message) if message.role == Role::Agent => {
            Some(message_text(message))
        }
        StreamResponse::Message(_) | StreamResponse::Task(_) => None,
    };
    match text {
        Some(text) if !text.trim().is_empty() => {
            vec![Event::Text { text: sanitize(&text, max_chars) }]
        }
        _ => Vec::new(),
    }
}

/// The id the nested events carry as their `run_id`: the remote task's.
pub(crate) fn remote_task_id(update: &StreamResponse) -> Option<&str> {
    match update {
        StreamResponse::Task(task) => Some(&task.id),
        StreamResponse::StatusUpdate(update) => Some(&update.task_id),
        StreamResponse::ArtifactUpdate(update) => Some(&update.task_id),
        StreamResponse::Message(message) => message.task_id.as_deref(),
    }
}
