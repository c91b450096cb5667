//! A run seen as an A2A task (docs/A2A.md has the table): the task is the run (same id),
//! its context the run's session; [`TaskFold`] folds a run's journaled events into the
//! [`Task`] that GetTask returns, and [`EventMapper`] turns a run's events — live, with the
//! text deltas, or read back from the journal — into the stream's status and artifact
//! updates.
//!
//! | run | task |
//! |---|---|
//! | started, running | `TASK_STATE_WORKING` |
//! | finished (`completed`, `done_tool`, a limit, …) | `TASK_STATE_COMPLETED`, the answer as the artifact `answer` (a data part: the typed answer, when the agent has an output schema); the stop reason (and limit) in the status metadata |
//! | finished with `content_filtered` | `TASK_STATE_REJECTED` |
//! | finished with `awaiting_input` (an ask-user tool) | `TASK_STATE_INPUT_REQUIRED`, the question as the status message |
//! | suspended for approval | `TASK_STATE_INPUT_REQUIRED`, the calls as a data part `{"approvalRequired": [...]}` |
//! | failed | `TASK_STATE_FAILED`, the error as the status message |
//! | cancelled | `TASK_STATE_CANCELED` |

use crate::convert::{agent_text, to_a2a_message};
use a2a::{
    Artifact, Part as A2aPart, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState,
    TaskStatus, TaskStatusUpdateEvent,
};
use agentloop::event::Event;
use agentloop::message::{Message, Role};
use agentloop::run::{Outcome, StopReason};
use serde_json::{json, Value};
use std::collections::HashMap;

/// The id of the artifact that holds a run's answer.
pub const ANSWER_ARTIFACT: &str = "answer";

/// The metadata key under which agentloop's own facts travel (stop reason, limit, tool).
pub const METADATA_KEY: &str = "agentloop";

/// Milliseconds since the Unix epoch as an A2A timestamp.
pub fn timestamp(at_ms: u64) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp_millis(i64::try_from(at_ms).ok()?)
}

fn metadata(value: Value) -> Option<HashMap<String, Value>> {
    Some(HashMap::from([(METADATA_KEY.to_owned(), value)]))
}

/// A task state, with its status message and metadata.
pub type Status = (TaskState, Option<a2a::Message>, Option<HashMap<String, Value>>);

/// The task status a run's terminal event stands for, with its message and metadata.
pub fn terminal_status(event: &Event, task_id: &str, context_id: &str, seq: u64) -> Option<Status> {
    let message_id = format!("{task_id}-{seq}");
    let text = |text: String| Some(agent_text(text, message_id.clone(), task_id, context_id));
    Some(match event {
        Event::RunFinished { outcome } => match &outcome.stop_reason {
            StopReason::AwaitingInput { tool } => (
                TaskState::InputRequired,
                text(outcome.answer.clone()),
                metadata(json!({"inputRequired": "answer", "tool": tool})),
            ),
            StopReason::ContentFiltered => {
                (TaskState::Rejected, None, metadata(stop_metadata(outcome)))
            }
            _ => (TaskState::Completed, None, metadata(stop_metadata(outcome))),
        },
        Event::RunSuspended { outcome } => {
            let calls: Vec<Value> = match &outcome.stop_reason {
                StopReason::AwaitingApproval { calls } => calls
                    .iter()
                    .map(|call| {
                        let arguments = serde_json::from_str::<Value>(&call.arguments)
                            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
                        json!({"callId": call.id, "tool": call.name, "arguments": arguments})
                    })
                    .collect(),
                _ => Vec::new(),
            };
            let names: Vec<&str> =
                calls.iter().filter_map(|c| c.get("tool").and_then(Value::as_str)).collect();
            let mut message = agent_text(
                format!(
                    "Approval required for: {}. Reply with a data part \
                     {{\"decision\": \"approve\"}} or {{\"decision\": \"reject\", \"reason\": \"…\"}} \
                     (optionally with \"callId\").",
                    names.join(", ")
                ),
                message_id.clone(),
                task_id,
                context_id,
            );
            message.parts.push(A2aPart::data(json!({ "approvalRequired": calls })));
            (
                TaskState::InputRequired,
                Some(message),
                metadata(json!({"inputRequired": "approval"})),
            )
        }
        Event::RunFailed { error, outcome } => {
            (TaskState::Failed, text(error.clone()), metadata(stop_metadata(outcome)))
        }
        Event::RunCancelled { reason, .. } => (
            TaskState::Canceled,
            text(format!("cancelled: {reason}")),
            metadata(json!({"stopReason": "cancelled"})),
        ),
        _ => return None,
    })
}

fn stop_metadata(outcome: &Outcome) -> Value {
    let mut value = serde_json::to_value(&outcome.stop_reason).unwrap_or(Value::Null);
    let kind = value.get("kind").cloned().unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        map.remove("kind");
    }
    json!({
        "stopReason": kind,
        "detail": value,
        "iterations": outcome.iterations,
        "usage": usage_metadata(&outcome.usage),
    })
}

/// A run's token counts in task metadata: input and output, and where the provider reported
/// them, the input its cache served (`cacheReadInputTokens`) and took
/// (`cacheWriteInputTokens`), and the output spent on reasoning (`reasoningTokens`).
fn usage_metadata(usage: &agentloop::message::Usage) -> Value {
    let mut map = serde_json::Map::new();
    map.insert("inputTokens".into(), json!(usage.input));
    map.insert("outputTokens".into(), json!(usage.output));
    let details = [
        ("cacheReadInputTokens", usage.cached_input),
        ("cacheWriteInputTokens", usage.cache_write_input),
        ("reasoningTokens", usage.reasoning),
    ];
    for (name, count) in details.into_iter().filter(|(_, count)| *count > 0) {
        map.insert(name.into(), json!(count));
    }
    Value::Object(map)
}

/// The answer artifact: the typed answer as a data part when the run has one (an agent with
/// an output schema), else `text`.
pub fn answer_artifact(text: impl Into<String>, output: Option<&Value>) -> Artifact {
    let part = match output {
        Some(value) => A2aPart::data(value.clone()),
        None => A2aPart::text(text),
    };
    Artifact {
        artifact_id: ANSWER_ARTIFACT.to_owned(),
        name: Some("answer".to_owned()),
        description: None,
        parts: vec![part],
        metadata: None,
        extensions: None,
    }
}

/// The messages of a run's input that are this task's own: those after the last
/// non-user message (the rest is the session's earlier conversation).
fn own_input(input: &[Message]) -> &[Message] {
    let start = input.iter().rposition(|m| m.role != Role::User).map_or(0, |i| i + 1);
    &input[start..]
}

/// A run's journal folded into its task.
#[derive(Debug, Clone)]
pub struct TaskFold {
    task_id: String,
    context_id: String,
    agent: Option<String>,
    state: TaskState,
    status_message: Option<a2a::Message>,
    status_metadata: Option<HashMap<String, Value>>,
    updated_ms: u64,
    history: Vec<a2a::Message>,
    answer: Option<String>,
    /// The typed answer, when the run has an output schema.
    output: Option<Value>,
    /// The last journaled entry.
    last_seq: Option<u64>,
    /// The calls a suspended run waits for decisions on (`run_suspended`, less those
    /// decided since).
    awaiting: Vec<String>,
    /// What the runs' session ids start with before the A2A `contextId` (see
    /// [`with_namespace`](Self::with_namespace)).
    namespace: String,
}

impl TaskFold {
    /// An empty fold of run `task_id` (state submitted until its first entry).
    pub fn new(task_id: &str) -> Self {
        Self {
            task_id: task_id.to_owned(),
            context_id: String::new(),
            agent: None,
            state: TaskState::Submitted,
            status_message: None,
            status_metadata: None,
            updated_ms: 0,
            history: Vec::new(),
            answer: None,
            output: None,
            last_seq: None,
            awaiting: Vec::new(),
            namespace: String::new(),
        }
    }

    /// A fold whose run's session id is `namespace` followed by the task's `contextId`: a
    /// served agent keeps its contexts apart from other agents' sessions on the same store.
    pub fn with_namespace(task_id: &str, namespace: &str) -> Self {
        Self { namespace: namespace.to_owned(), ..Self::new(task_id) }
    }

    /// Folds the next journaled event (`seq`, appended at `at_ms`).
    pub fn apply(&mut self, seq: u64, at_ms: u64, event: &Event) {
        self.last_seq = Some(seq);
        self.updated_ms = at_ms;
        let message_id = format!("{}-{seq}", self.task_id);
        match event {
            Event::RunStarted { config, input, .. } => {
                self.context_id = match &config.context_id {
                    Some(session) => {
                        session.strip_prefix(self.namespace.as_str()).unwrap_or(session).to_owned()
                    }
                    None => self.task_id.clone(),
                };
                self.agent = config.agent.clone();
                self.state = TaskState::Working;
                for (i, message) in own_input(input).iter().enumerate() {
                    let id = format!("{message_id}-{i}");
                    self.push_history(message, id);
                }
            }
            Event::ModelResponded { message, .. } => self.push_history(message, message_id),
            Event::InputProvided { message } => {
                self.push_history(message, message_id);
                self.reopen();
            }
            Event::ApprovalDecided { call_id, .. } => {
                self.awaiting.retain(|id| id != call_id);
                self.reopen();
            }
            Event::Resumed => self.reopen(),
            _ => {
                if let Some((state, message, metadata)) =
                    terminal_status(event, &self.task_id, &self.context_id, seq)
                {
                    if let Event::RunFinished { outcome } = event {
                        if state != TaskState::InputRequired {
                            self.answer = Some(outcome.answer.clone());
                            self.output = outcome.output.clone();
                        }
                    }
                    self.awaiting = match event.outcome().map(|o| &o.stop_reason) {
                        Some(StopReason::AwaitingApproval { calls })
                            if matches!(event, Event::RunSuspended { .. }) =>
                        {
                            calls.iter().map(|call| call.id.clone()).collect()
                        }
                        _ => Vec::new(),
                    };
                    self.state = state;
                    self.status_message = message;
                    self.status_metadata = metadata;
                }
            }
        }
    }

    fn reopen(&mut self) {
        if self.state == TaskState::InputRequired {
            self.state = TaskState::Working;
            self.status_message = None;
            self.status_metadata = None;
        }
    }

    fn push_history(&mut self, message: &Message, message_id: String) {
        if let Some(message) = to_a2a_message(message, message_id, &self.task_id, &self.context_id)
        {
            self.history.push(message);
        }
    }

    /// The run's agent (`RunConfig::agent`).
    pub fn agent(&self) -> Option<&str> {
        self.agent.as_deref()
    }

    /// The task's context (the run's session).
    pub fn context_id(&self) -> &str {
        &self.context_id
    }

    /// Where the task stands.
    pub fn state(&self) -> &TaskState {
        &self.state
    }

    /// The last journaled entry folded.
    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    /// Whether the run waits for approval decisions (rather than an answer).
    pub fn awaits_approval(&self) -> bool {
        self.state == TaskState::InputRequired && !self.awaiting.is_empty()
    }

    /// The ids of the calls the run waits for decisions on.
    pub fn awaiting_approval(&self) -> &[String] {
        &self.awaiting
    }

    /// The task: its last `history_length` messages (all with `None`; none with 0) and,
    /// with `artifacts`, the answer.
    pub fn task(&self, history_length: Option<usize>, artifacts: bool) -> Task {
        let history = match history_length {
            Some(0) => None,
            Some(n) => Some(self.history[self.history.len().saturating_sub(n)..].to_vec()),
            None => Some(self.history.clone()),
        };
        let artifacts = self
            .answer
            .as_ref()
            .filter(|answer| artifacts && !answer.is_empty())
            .map(|answer| vec![answer_artifact(answer.clone(), self.output.as_ref())]);
        Task {
            id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            status: TaskStatus {
                state: self.state.clone(),
                message: self.status_message.clone(),
                timestamp: timestamp(self.updated_ms),
            },
            artifacts,
            history,
            metadata: self.status_metadata.clone(),
        }
    }
}

/// Turns a run's events into stream updates (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct EventMapper {
    task_id: String,
    context_id: String,
    /// Answer chunks sent in the current model turn.
    chunks: usize,
}

impl EventMapper {
    /// The mapper of task `task_id` in `context_id`.
    pub fn new(task_id: &str, context_id: &str) -> Self {
        Self { task_id: task_id.to_owned(), context_id: context_id.to_owned(), chunks: 0 }
    }

    fn status(
        &self,
        state: TaskState,
        message: Option<a2a::Message>,
        metadata: Option<HashMap<String, Value>>,
        at_ms: u64,
    ) -> StreamResponse {
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            status: TaskStatus { state, message, timestamp: timestamp(at_ms) },
            metadata,
        })
    }

    fn artifact(
        &self,
        text: String,
        output: Option<&Value>,
        append: bool,
        last_chunk: bool,
    ) -> StreamResponse {
        StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            artifact: answer_artifact(text, output),
            append: Some(append),
            last_chunk: Some(last_chunk),
            metadata: None,
        })
    }

    fn tool_status(&self, seq: u64, at_ms: u64, text: String, detail: Value) -> StreamResponse {
        let message = agent_text(
            text,
            format!("{}-{seq}-tool", self.task_id),
            &self.task_id,
            &self.context_id,
        );
        self.status(TaskState::Working, Some(message), metadata(detail), at_ms)
    }

    /// A status update for an event of work a tool call started (a sub-agent's run, a
    /// remote agent): its tool activity, texts and end, each as a working status whose
    /// metadata names the call and the run (deltas are left out).
    fn nested(
        &self,
        seq: u64,
        at_ms: u64,
        call_id: &str,
        run_id: Option<&str>,
        event: &Event,
    ) -> Option<StreamResponse> {
        let text = match event {
            Event::ToolStarted { call, .. } => format!("Calling {}", call.name),
            Event::ToolCompleted { name, .. } => format!("{name} finished"),
            Event::ToolFailed { name, error, .. } => format!("{name} failed: {error}"),
            Event::Text { text } => text.clone(),
            Event::RunFinished { outcome } => outcome.answer.clone(),
            Event::RunFailed { error, .. } => format!("failed: {error}"),
            _ => return None,
        };
        let detail =
            json!({"event": "nested", "kind": event.kind(), "callId": call_id, "runId": run_id});
        Some(self.tool_status(seq, at_ms, text, detail))
    }

    /// The updates of one event (`seq`: the journal entry, or the last one before a
    /// stream-only event). A text delta is a chunk of the answer artifact (`append` after
    /// the turn's first); a turn that turns out to call tools was not the answer, so the
    /// next turn's first chunk replaces it; the finished run sends the whole answer as the
    /// last chunk (replacing the chunks) before its status.
    pub fn map(&mut self, seq: u64, at_ms: u64, event: &Event) -> Vec<StreamResponse> {
        match event {
            Event::RunStarted { .. } | Event::InputProvided { .. } | Event::Resumed => {
                vec![self.status(TaskState::Working, None, None, at_ms)]
            }
            Event::ApprovalDecided { call_id, decision, by } => vec![self.status(
                TaskState::Working,
                None,
                metadata(json!({
                    "event": "approval_decided", "callId": call_id, "decision": decision, "by": by,
                })),
                at_ms,
            )],
            Event::TextDelta { delta } => {
                let append = self.chunks > 0;
                self.chunks += 1;
                vec![self.artifact(delta.clone(), None, append, false)]
            }
            Event::ModelResponded { message, .. } if message.has_tool_calls() => {
                self.chunks = 0;
                Vec::new()
            }
            Event::ToolStarted { call, .. } => vec![self.tool_status(
                seq,
                at_ms,
                format!("Calling {}", call.name),
                json!({"event": "tool_started", "tool": call.name, "callId": call.id}),
            )],
            Event::ToolCompleted { name, result, duration_ms, .. } => vec![self.tool_status(
                seq,
                at_ms,
                format!("{name} finished"),
                json!({"event": "tool_completed", "tool": name, "callId": result.call_id,
                       "durationMs": duration_ms}),
            )],
            Event::ToolFailed { name, result, error, .. } => vec![self.tool_status(
                seq,
                at_ms,
                format!("{name} failed: {error}"),
                json!({"event": "tool_failed", "tool": name, "callId": result.call_id}),
            )],
            Event::ToolTimedOut { name, result, timeout_ms, .. } => vec![self.tool_status(
                seq,
                at_ms,
                format!("{name} timed out after {timeout_ms} ms"),
                json!({"event": "tool_timed_out", "tool": name, "callId": result.call_id}),
            )],
            Event::Nested { call_id, run_id, event } => {
                self.nested(seq, at_ms, call_id, run_id.as_deref(), event).into_iter().collect()
            }
            Event::Paused { reason } => vec![self.status(
                TaskState::Working,
                None,
                metadata(json!({"event": "paused", "reason": reason})),
                at_ms,
            )],
            _ => {
                let Some((state, message, meta)) =
                    terminal_status(event, &self.task_id, &self.context_id, seq)
                else {
                    return Vec::new();
                };
                let mut updates = Vec::with_capacity(2);
                if let Event::RunFinished { outcome } = event {
                    if state != TaskState::InputRequired && !outcome.answer.is_empty() {
                        let output = outcome.output.as_ref();
                        updates.push(self.artifact(outcome.answer.clone(), output, false, true));
                    }
                }
                self.chunks = 0;
                updates.push(self.status(state, message, meta, at_ms));
                updates
            }
        }
    }
}

/// Whether an update ends a stream: a status that is terminal or waits for the client.
pub fn ends_stream(update: &StreamResponse) -> bool {
    match update {
        StreamResponse::StatusUpdate(update) => {
            update.status.state.is_terminal() || update.status.state == TaskState::InputRequired
        }
        StreamResponse::Task(task) => {
            task.status.state.is_terminal() || task.status.state == TaskState::InputRequired
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
