//! A remote task's updates as agentloop events, passed on as nested events of the call.

use super::collect::{message_text, parts_text};
use crate::text::sanitize;
use a2a::{Role, StreamResponse};
use agentloop::Event;

/// Maps a remote task's updates to agentloop events, remembering each artifact's text so
/// far: an artifact chunk becomes a [`Event::TextDelta`] of what it adds (chunks stream as
/// they come; a chunk that replaces the artifact with a longer version of the same text,
/// such as a whole answer sent as the last chunk, adds only its new end), a status message
/// or an agent message a whole [`Event::Text`]. Updates without text (a bare state change,
/// a task snapshot) give none. Text is sanitized and bounded to `max_chars`.
#[derive(Debug, Default)]
pub(crate) struct NestedMapper {
    /// Each artifact's text streamed so far, by artifact id.
    artifacts: Vec<(String, String)>,
}

impl NestedMapper {
    /// The events of one update.
    pub(crate) fn map(&mut self, update: &StreamResponse, max_chars: usize) -> Vec<Event> {
        if let StreamResponse::ArtifactUpdate(update) = update {
            let text = parts_text(&update.artifact.parts);
            let id = &update.artifact.artifact_id;
            let index = match self.artifacts.iter().position(|(known, _)| known == id) {
                Some(index) => index,
                None => {
                    self.artifacts.push((id.clone(), String::new()));
                    self.artifacts.len() - 1
                }
            };
            let streamed = &mut self.artifacts[index].1;
            let delta = if update.append == Some(true) {
                streamed.push_str(&text);
                text
            } else {
                let delta = match text.strip_prefix(streamed.as_str()) {
                    Some(rest) if !streamed.is_empty() => rest.to_owned(),
                    _ => text.clone(),
                };
                *streamed = text;
                delta
            };
            return if delta.is_empty() {
                Vec::new()
            } else {
                vec![Event::TextDelta { delta: sanitize(&delta, max_chars) }]
            };
        }
        nested_events(update, max_chars)
    }
}

/// The events of one update that is not an artifact chunk (see [`NestedMapper`]).
fn nested_events(update: &StreamResponse, max_chars: usize) -> Vec<Event> {
    let text = match update {
        StreamResponse::ArtifactUpdate(_) => return Vec::new(),
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
