//! [`TaskCollector`]: folds a remote task's events into what the tool returns.

use crate::text::sanitize;
use a2a::{Message, Part, PartContent, Role, SendMessageResponse, StreamResponse, Task, TaskState};

/// What a remote task came to, as far as the events seen tell.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TaskOutcome {
    /// The task completed (or the agent answered with a message, and there is no task).
    Completed {
        /// The task, if there is one.
        task_id: Option<String>,
        /// Its artifacts' text, then its final status message.
        text: String,
    },
    /// The agent needs more input on the task.
    InputRequired {
        /// The task to continue.
        task_id: String,
        /// The agent's question (its status message).
        question: String,
    },
    /// The agent needs authentication it did not get.
    AuthRequired {
        /// The task.
        task_id: String,
        /// The agent's status message.
        text: String,
    },
    /// The task failed, was rejected or was cancelled.
    Ended {
        /// The task.
        task_id: String,
        /// Which of the three.
        state: TaskState,
        /// The agent's status message and any artifacts' text.
        text: String,
    },
    /// No terminal or interrupted state yet.
    Unfinished {
        /// The task, if one was announced.
        task_id: Option<String>,
        /// Its last state.
        state: Option<TaskState>,
    },
}

/// Folds the events of one remote task (a stream, or the answer of a blocking send and
/// later `GetTask`s) into its state, its artifacts (chunks appended in order) and its
/// latest status message. Sans IO: the mapping is tested without a server.
#[derive(Debug, Clone, Default)]
pub struct TaskCollector {
    task_id: Option<String>,
    context_id: Option<String>,
    state: Option<TaskState>,
    status_message: Option<String>,
    artifacts: Vec<(String, String)>,
    reply: Option<String>,
    last_agent_message: Option<String>,
    /// Continuing a task: no update seen yet.
    continuing: bool,
    /// The state known is the interruption the message sent answers (a stream's first
    /// task snapshot), not news.
    stale: bool,
}

impl TaskCollector {
    /// A collector for a message sent to an existing task (an answer to its question, an
    /// approval): a stream's first event may be the task as it stood before the message
    /// (still `input-required`); that state is not taken as the outcome, so the collector
    /// is not settled until a later update says where the task went (or a
    /// [`apply_task`](Self::apply_task) of a fresh `GetTask` does).
    pub fn continuing() -> Self {
        Self { continuing: true, ..Self::default() }
    }

    /// Takes one streamed event.
    pub fn apply(&mut self, event: &StreamResponse) {
        let first_of_continued = std::mem::take(&mut self.continuing);
        match event {
            StreamResponse::Task(task) => {
                self.apply_task(task);
                self.stale = first_of_continued && is_interrupted(&task.status.state);
            }
            StreamResponse::Message(message) => self.apply_message(message),
            StreamResponse::StatusUpdate(update) => {
                self.stale = false;
                self.task_id = Some(update.task_id.clone());
                self.context_id = Some(update.context_id.clone());
                self.state = Some(update.status.state.clone());
                self.status_message = update.status.message.as_ref().map(message_text);
            }
            StreamResponse::ArtifactUpdate(update) => {
                self.stale = false;
                self.task_id = Some(update.task_id.clone());
                self.context_id = Some(update.context_id.clone());
                let text = parts_text(&update.artifact.parts);
                let id = &update.artifact.artifact_id;
                match self.artifacts.iter_mut().find(|(known, _)| known == id) {
                    Some((_, existing)) if update.append == Some(true) => existing.push_str(&text),
                    Some((_, existing)) => *existing = text,
                    None => self.artifacts.push((id.clone(), text)),
                }
            }
        }
    }

    /// Takes the answer of a blocking `SendMessage`.
    pub fn apply_response(&mut self, response: &SendMessageResponse) {
        match response {
            SendMessageResponse::Task(task) => self.apply_task(task),
            SendMessageResponse::Message(message) => self.apply_message(message),
        }
    }

    /// Takes a whole task (the first event of a stream, or a `GetTask` answer): its state,
    /// status message and artifacts replace what was known.
    pub fn apply_task(&mut self, task: &Task) {
        self.stale = false;
        self.task_id = Some(task.id.clone());
        self.context_id = Some(task.context_id.clone());
        self.state = Some(task.status.state.clone());
        self.status_message = task.status.message.as_ref().map(message_text);
        if let Some(artifacts) = &task.artifacts {
            self.artifacts =
                artifacts.iter().map(|a| (a.artifact_id.clone(), parts_text(&a.parts))).collect();
        }
        if let Some(history) = &task.history {
            if let Some(last) = history.iter().rev().find(|m| m.role == Role::Agent) {
                self.last_agent_message = Some(message_text(last));
            }
        }
    }

    fn apply_message(&mut self, message: &Message) {
        if message.role != Role::Agent {
            return;
        }
        if self.task_id.is_none() {
            self.task_id.clone_from(&message.task_id);
        }
        self.reply = Some(message_text(message));
    }

    /// The remote task's id, once announced.
    pub fn task_id(&self) -> Option<&str> {
        self.task_id.as_deref()
    }

    /// The remote task's context id, once announced.
    pub fn context_id(&self) -> Option<&str> {
        self.context_id.as_deref()
    }

    /// The task's last state.
    pub fn state(&self) -> Option<&TaskState> {
        self.state.as_ref()
    }

    /// True once nothing more will come without us: a terminal or interrupted state, or a
    /// message answer with no task.
    pub fn is_settled(&self) -> bool {
        if self.stale {
            return false;
        }
        match &self.state {
            Some(state) => state.is_terminal() || is_interrupted(state),
            None => self.reply.is_some(),
        }
    }

    /// What the task came to.
    pub fn outcome(&self) -> TaskOutcome {
        let status = self.status_message.clone().filter(|t| !t.trim().is_empty());
        let fallback = || self.last_agent_message.clone().filter(|t| !t.trim().is_empty());
        let task_id = self.task_id.clone().unwrap_or_default();
        match &self.state {
            None => match &self.reply {
                Some(reply) => {
                    TaskOutcome::Completed { task_id: self.task_id.clone(), text: reply.clone() }
                }
                None => TaskOutcome::Unfinished { task_id: None, state: None },
            },
            Some(TaskState::Completed) => {
                let mut text = self.artifact_text();
                if let Some(status) = status.or_else(|| text.is_empty().then(fallback).flatten()) {
                    if text.trim() != status.trim() {
                        push_paragraph(&mut text, &status);
                    }
                }
                if text.is_empty() {
                    text.clone_from(self.reply.as_ref().unwrap_or(&String::new()));
                }
                TaskOutcome::Completed { task_id: self.task_id.clone(), text }
            }
            Some(TaskState::InputRequired) => TaskOutcome::InputRequired {
                task_id,
                question: status
                    .or_else(fallback)
                    .unwrap_or_else(|| "The remote agent needs more input.".to_owned()),
            },
            Some(TaskState::AuthRequired) => {
                TaskOutcome::AuthRequired { task_id, text: status.unwrap_or_default() }
            }
            Some(state @ (TaskState::Failed | TaskState::Rejected | TaskState::Canceled)) => {
                let mut text = status.or_else(fallback).unwrap_or_default();
                let artifacts = self.artifact_text();
                if !artifacts.is_empty() {
                    push_paragraph(&mut text, &artifacts);
                }
                TaskOutcome::Ended { task_id, state: state.clone(), text }
            }
            Some(state) => TaskOutcome::Unfinished {
                task_id: self.task_id.clone(),
                state: Some(state.clone()),
            },
        }
    }

    fn artifact_text(&self) -> String {
        let mut text = String::new();
        for (_, artifact) in &self.artifacts {
            if !artifact.trim().is_empty() {
                push_paragraph(&mut text, artifact.trim_end());
            }
        }
        text
    }
}

/// Whether `state` waits for the client (`input-required`, `auth-required`).
fn is_interrupted(state: &TaskState) -> bool {
    matches!(state, TaskState::InputRequired | TaskState::AuthRequired)
}

fn push_paragraph(text: &mut String, more: &str) {
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(more);
}

/// The text of a message's parts.
pub(crate) fn message_text(message: &Message) -> String {
    parts_text(&message.parts)
}

/// Parts as text: text as is, data as JSON, files by name, type and size or URL (never
/// their bytes). Concatenated, so streamed chunks join up.
pub(crate) fn parts_text(parts: &[Part]) -> String {
    let mut text = String::new();
    for part in parts {
        match &part.content {
            PartContent::Text(t) => text.push_str(t),
            PartContent::Data(value) => text.push_str(&value.to_string()),
            PartContent::Url(url) => {
                text.push_str(&format!("[file {}: {url}]", file_label(part)));
            }
            PartContent::Raw(bytes) => {
                text.push_str(&format!("[file {}, {} bytes]", file_label(part), bytes.len()));
            }
        }
    }
    text
}

fn file_label(part: &Part) -> String {
    let name = part.filename.as_deref().filter(|n| !n.is_empty()).unwrap_or("(unnamed)");
    match part.media_type.as_deref().filter(|m| !m.is_empty()) {
        Some(media) => sanitize(&format!("{name} ({media})"), 200),
        None => sanitize(name, 200),
    }
}

/// A state's name as the protocol's docs write it (`input-required`, …).
pub fn state_name(state: &TaskState) -> &'static str {
    match state {
        TaskState::Unspecified => "unspecified",
        TaskState::Submitted => "submitted",
        TaskState::Working => "working",
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Canceled => "canceled",
        TaskState::InputRequired => "input-required",
        TaskState::Rejected => "rejected",
        TaskState::AuthRequired => "auth-required",
    }
}
