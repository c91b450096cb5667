//! [`Run`]: the sans-IO agent loop. It is a fold over the run journal: every decision (what to
//! do next, when to stop, why) is made here, without I/O, so it can be tested without async or
//! mocks, serialized, and rebuilt after a crash from the journal alone.
//!
//! The driver asks [`Run::next_step`] what to do, does it, and feeds the results back
//! ([`Run::model_responded`], [`Run::tool_finished`], …). Each of those records events; the
//! driver drains them with [`Run::drain_events`], journals the durable ones and streams all.

mod config;
mod limits;
mod stop;

pub use config::RunConfig;
pub use limits::{LimitKind, Limits};
pub use stop::{Outcome, Signal, StopReason};

use crate::event::{Event, ModelPurpose, StepStatus};
use crate::message::{Message, ToolCall, ToolResult, Usage};
use crate::provider::{ModelRequest, ModelResponse, ProviderError, ToolChoice};
use crate::tool::{ToolError, ToolOutput};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The version of the journal and snapshot format this build writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Call the model with this request, then call [`Run::model_responded`] or
    /// [`Run::model_failed`].
    CallModel(ModelRequest),
    /// Run these calls (each with [`Run::tool_started`] then [`Run::tool_finished`]).
    CallTools(Vec<ToolCall>),
    /// The run is over.
    Finish(Outcome),
}

/// A command that does not fit the run's state, or a journal that does not fold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The journal does not begin with `run_started`.
    #[error("the journal does not begin with run_started")]
    NotStarted,
    /// An event or command arrived in a state where it makes no sense.
    #[error("unexpected {what} while the run is {phase}")]
    Unexpected {
        /// The event or command.
        what: &'static str,
        /// The run's phase.
        phase: &'static str,
    },
    /// A tool event names a call the model did not make (or one already answered).
    #[error("no pending tool call with id '{0}'")]
    UnknownCall(String),
    /// A snapshot of a version this build does not know.
    #[error("unsupported schema version {found} (this build reads {supported})")]
    UnsupportedVersion {
        /// The version found.
        found: u32,
        /// The version supported.
        supported: u32,
    },
    /// A snapshot that is not a valid run.
    #[error("invalid run snapshot: {0}")]
    InvalidSnapshot(String),
}

/// A pending tool call of the current iteration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct PendingCall {
    call: ToolCall,
    started: bool,
    result: Option<ToolResult>,
    signal: Option<Signal>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
enum Phase {
    /// Nothing has happened yet (before `run_started`).
    New,
    /// The next step is a model call.
    NeedModel,
    /// A model call was issued and has no answer yet.
    AwaitingModel { purpose: ModelPurpose },
    /// Tool calls of the current iteration are running.
    AwaitingTools { calls: Vec<PendingCall> },
    /// The outcome is decided; the terminal event is not yet recorded.
    Finishing { outcome: Outcome, error: Option<String> },
    /// Over.
    Finished { outcome: Outcome },
}

impl Phase {
    fn name(&self) -> &'static str {
        match self {
            Self::New => "new",
            Self::NeedModel => "ready for a model call",
            Self::AwaitingModel { .. } => "awaiting the model",
            Self::AwaitingTools { .. } => "awaiting tools",
            Self::Finishing { .. } => "finishing",
            Self::Finished { .. } => "finished",
        }
    }
}

/// The agent loop as a state machine. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    schema_version: u32,
    run_id: String,
    config: RunConfig,
    /// Shared with in-flight requests; appends copy only while a request still holds it.
    history: Arc<Vec<Message>>,
    iteration: u32,
    usage: Usage,
    phase: Phase,
    #[serde(skip)]
    outbox: Vec<Event>,
}

impl Run {
    /// Starts a run over `input` (earlier history plus the new user message).
    pub fn new(run_id: impl Into<String>, config: RunConfig, input: Vec<Message>) -> Self {
        let mut run = Self::empty();
        run.record(Event::RunStarted { run_id: run_id.into(), config: Box::new(config), input });
        run
    }

    fn empty() -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            run_id: String::new(),
            config: RunConfig::default(),
            history: Arc::default(),
            iteration: 0,
            usage: Usage::default(),
            phase: Phase::New,
            outbox: Vec::new(),
        }
    }

    /// Rebuilds a run from its journal (the durable events, in order; transient ones are
    /// ignored). The result is in the same state as the run that wrote the journal.
    pub fn from_journal<'a>(events: impl IntoIterator<Item = &'a Event>) -> Result<Self, RunError> {
        let mut run = Self::empty();
        for event in events {
            run.apply(event)?;
        }
        if matches!(run.phase, Phase::New) {
            return Err(RunError::NotStarted);
        }
        Ok(run)
    }

    /// Restores a run from a JSON snapshot (`serde_json::to_value(&run)`), checking its
    /// schema version.
    pub fn from_snapshot(snapshot: Value) -> Result<Self, RunError> {
        let version = snapshot.get("schema_version").and_then(Value::as_u64).unwrap_or(0);
        if version != u64::from(SCHEMA_VERSION) {
            return Err(RunError::UnsupportedVersion {
                found: u32::try_from(version).unwrap_or(u32::MAX),
                supported: SCHEMA_VERSION,
            });
        }
        serde_json::from_value(snapshot).map_err(|e| RunError::InvalidSnapshot(e.to_string()))
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Its configuration.
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// The whole conversation so far (input, assistant turns, tool results).
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// Iterations started so far.
    pub fn iteration(&self) -> u32 {
        self.iteration
    }

    /// Tokens used so far.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// The outcome, once the run is over.
    pub fn outcome(&self) -> Option<&Outcome> {
        match &self.phase {
            Phase::Finished { outcome } => Some(outcome),
            _ => None,
        }
    }

    /// Whether the run is over.
    pub fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Finished { .. })
    }

    /// Takes the events recorded since the last call, in order.
    pub fn drain_events(&mut self) -> std::vec::Drain<'_, Event> {
        self.outbox.drain(..)
    }

    /// Whether events are waiting to be drained.
    pub fn has_events(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// Decides the next step. Calling it again without feeding a result returns the same
    /// step (which is how a resumed run repeats an unanswered model call or unfinished tools).
    pub fn next_step(&mut self) -> Step {
        match &self.phase {
            Phase::New | Phase::NeedModel => {
                let next = self.iteration + 1;
                let purpose = match self.config.limits.before_iteration(next) {
                    Some(limit) => ModelPurpose::WindDown { limit },
                    None => {
                        self.record(Event::IterationStarted { iteration: next });
                        ModelPurpose::Iteration
                    }
                };
                self.record(Event::ModelRequested { iteration: self.iteration, purpose });
                Step::CallModel(self.request(purpose))
            }
            Phase::AwaitingModel { purpose } => Step::CallModel(self.request(*purpose)),
            Phase::AwaitingTools { calls } => Step::CallTools(
                calls.iter().filter(|c| c.result.is_none()).map(|c| c.call.clone()).collect(),
            ),
            Phase::Finishing { outcome, error } => {
                let outcome = outcome.clone();
                let event = match error {
                    Some(error) => {
                        Event::RunFailed { error: error.clone(), outcome: outcome.clone() }
                    }
                    None => Event::RunFinished { outcome: outcome.clone() },
                };
                self.record(event);
                Step::Finish(outcome)
            }
            Phase::Finished { outcome } => Step::Finish(outcome.clone()),
        }
    }

    /// The request for a model call of this purpose.
    fn request(&self, purpose: ModelPurpose) -> ModelRequest {
        let config = &self.config;
        let mut request = ModelRequest {
            instructions: config.instructions.clone(),
            messages: Arc::clone(&self.history),
            tools: config.tools.clone(),
            tool_choice: config.tool_choice.clone(),
            temperature: config.temperature,
            max_tokens: config.max_tokens,
            metadata: config.metadata.clone(),
        };
        if let ModelPurpose::WindDown { .. } = purpose {
            // A temporary copy of the history plus the summary request; no tools.
            Arc::make_mut(&mut request.messages)
                .push(Message::user(config.wind_down_prompt.clone()));
            request.tools = Arc::default();
            request.tool_choice = ToolChoice::None;
        }
        request
    }

    /// Feeds the model's response.
    pub fn model_responded(
        &mut self,
        response: ModelResponse,
        duration: Duration,
    ) -> Result<(), RunError> {
        self.expect_awaiting_model("model_responded")?;
        let message = response.message;
        let reasoning = message.reasoning_text();
        let text = message.text();
        self.record(Event::ModelResponded {
            iteration: self.iteration,
            message,
            finish_reason: response.finish_reason,
            usage: response.usage,
            duration_ms: millis(duration),
        });
        if !reasoning.is_empty() {
            self.outbox.push(Event::Reasoning { text: reasoning });
        }
        match &self.phase {
            Phase::AwaitingTools { calls } => {
                if !text.trim().is_empty() {
                    self.outbox.push(Event::Text { text });
                }
                let calls = calls.iter().map(|c| c.call.clone()).collect();
                self.outbox.push(Event::ToolDetected { calls });
            }
            Phase::NeedModel => {
                if !text.trim().is_empty() {
                    self.outbox.push(Event::Text { text });
                }
                self.outbox.push(Event::IterationCompleted { iteration: self.iteration });
            }
            _ => self.outbox.push(Event::IterationCompleted { iteration: self.iteration }),
        }
        Ok(())
    }

    /// Feeds a failed model call (after the driver's retries).
    pub fn model_failed(&mut self, error: ProviderError) -> Result<(), RunError> {
        self.expect_awaiting_model("model_failed")?;
        self.record(Event::ModelFailed { iteration: self.iteration, error });
        Ok(())
    }

    /// Records that a tool call starts. `arguments` is the parsed argument JSON, or `None`
    /// when the argument text was not JSON (the event then carries `{"_raw": text}`).
    pub fn tool_started(
        &mut self,
        call_id: &str,
        arguments: Option<Value>,
    ) -> Result<(), RunError> {
        let call = self.pending(call_id)?.call.clone();
        let arguments =
            arguments.unwrap_or_else(|| serde_json::json!({ "_raw": call.arguments.clone() }));
        self.outbox.push(Event::StepStarted { call_id: call.id.clone(), name: call.name.clone() });
        self.record(Event::ToolStarted { call, arguments });
        Ok(())
    }

    /// Feeds a tool call's result.
    pub fn tool_finished(
        &mut self,
        call_id: &str,
        result: Result<ToolOutput, ToolError>,
        duration: Duration,
    ) -> Result<(), RunError> {
        let name = self.pending(call_id)?.call.name.clone();
        let duration_ms = millis(duration);
        let (event, status) = match result {
            Ok(output) => {
                let (content, signal) = stop::tool_output(output);
                let result = ToolResult::ok(call_id, content);
                (
                    Event::ToolCompleted { name, result, duration_ms, control: signal },
                    StepStatus::Ok,
                )
            }
            Err(ToolError::Timeout(timeout_ms)) => {
                let result =
                    ToolResult::error(call_id, ToolError::Timeout(timeout_ms).to_model_text());
                (Event::ToolTimedOut { name, result, timeout_ms }, StepStatus::Error)
            }
            Err(error) => {
                let result = ToolResult::error(call_id, error.to_model_text());
                (Event::ToolFailed { name, result, error, duration_ms }, StepStatus::Error)
            }
        };
        self.record(event);
        self.outbox.push(Event::StepCompleted { call_id: call_id.to_owned(), status });
        if !matches!(self.phase, Phase::AwaitingTools { .. }) {
            self.outbox.push(Event::IterationCompleted { iteration: self.iteration });
        }
        Ok(())
    }

    /// Cancels the run. Pending tool calls get error results, so the history stays valid
    /// for a later turn. Does nothing once the run is finished.
    pub fn cancel(&mut self, reason: impl Into<String>) {
        if let Phase::Finished { .. } = self.phase {
            return;
        }
        let reason = reason.into();
        let outcome =
            self.outcome_with(String::new(), StopReason::Cancelled { reason: reason.clone() });
        self.record(Event::RunCancelled { reason, outcome });
    }

    /// Ends the run with a failure the driver detected. Does nothing once it is finished.
    pub fn fail(&mut self, error: impl Into<String>) {
        if let Phase::Finished { .. } = self.phase {
            return;
        }
        let error = error.into();
        let outcome =
            self.outcome_with(String::new(), StopReason::Internal { message: error.clone() });
        self.record(Event::RunFailed { error, outcome });
    }

    fn expect_awaiting_model(&self, what: &'static str) -> Result<(), RunError> {
        match self.phase {
            Phase::AwaitingModel { .. } => Ok(()),
            _ => Err(RunError::Unexpected { what, phase: self.phase.name() }),
        }
    }

    /// The index of the open call `call_id` among the current iteration's calls.
    fn pending_index(&self, call_id: &str) -> Result<usize, RunError> {
        match &self.phase {
            Phase::AwaitingTools { calls } => calls
                .iter()
                .position(|c| c.call.id == call_id && c.result.is_none())
                .ok_or_else(|| RunError::UnknownCall(call_id.to_owned())),
            other => Err(RunError::Unexpected { what: "tool event", phase: other.name() }),
        }
    }

    fn pending(&self, call_id: &str) -> Result<&PendingCall, RunError> {
        let index = self.pending_index(call_id)?;
        match &self.phase {
            Phase::AwaitingTools { calls } => {
                calls.get(index).ok_or_else(|| RunError::UnknownCall(call_id.to_owned()))
            }
            other => Err(RunError::Unexpected { what: "tool event", phase: other.name() }),
        }
    }

    /// Applies an event to the state and queues it for the driver.
    fn record(&mut self, event: Event) {
        // Commands check their preconditions before recording, so applying cannot fail here;
        // if it ever did, the event is still streamed and the state is left as it was.
        if let Err(error) = self.apply(&event) {
            tracing::error!(%error, kind = event.kind(), "run: recorded event did not apply");
        }
        self.outbox.push(event);
    }

    /// The fold: applies one journal event. Transient events are ignored.
    pub fn apply(&mut self, event: &Event) -> Result<(), RunError> {
        let unexpected = |what, phase: &Phase| RunError::Unexpected { what, phase: phase.name() };
        match event {
            Event::RunStarted { run_id, config, input } => {
                if !matches!(self.phase, Phase::New) {
                    return Err(unexpected("run_started", &self.phase));
                }
                self.run_id.clone_from(run_id);
                self.config = (**config).clone();
                self.history = Arc::new(input.clone());
                self.phase = Phase::NeedModel;
            }
            Event::IterationStarted { iteration } => match self.phase {
                Phase::NeedModel => self.iteration = *iteration,
                _ => return Err(unexpected("iteration_started", &self.phase)),
            },
            Event::ModelRequested { purpose, .. } => match self.phase {
                Phase::NeedModel => self.phase = Phase::AwaitingModel { purpose: *purpose },
                _ => return Err(unexpected("model_requested", &self.phase)),
            },
            Event::ModelResponded { message, finish_reason, usage, .. } => {
                let Phase::AwaitingModel { purpose } = self.phase else {
                    return Err(unexpected("model_responded", &self.phase));
                };
                self.usage += *usage;
                self.history_mut().push(message.clone());
                self.phase = self.after_response(purpose, finish_reason);
            }
            Event::ModelFailed { error, .. } => {
                let Phase::AwaitingModel { purpose } = self.phase else {
                    return Err(unexpected("model_failed", &self.phase));
                };
                self.phase = self.after_model_failure(purpose, error);
            }
            Event::ToolStarted { call, .. } => self.pending_mut(&call.id)?.started = true,
            Event::ToolCompleted { result, control, .. } => {
                self.tool_result(result.clone(), control.clone())?;
            }
            Event::ToolFailed { result, .. } | Event::ToolTimedOut { result, .. } => {
                self.tool_result(result.clone(), None)?;
            }
            Event::RunFinished { outcome }
            | Event::RunFailed { outcome, .. }
            | Event::RunCancelled { outcome, .. } => {
                if let Phase::AwaitingTools { calls } = &self.phase {
                    // Answer every open call so the history stays valid for a later turn.
                    let results = calls.iter().map(|c| {
                        c.result.clone().unwrap_or_else(|| {
                            ToolResult::error(
                                &c.call.id,
                                "Error: the run ended before this call finished",
                            )
                        })
                    });
                    let results = Message::tool_results(results.collect::<Vec<_>>());
                    self.history_mut().push(results);
                }
                self.phase = Phase::Finished { outcome: outcome.clone() };
            }
            _ => {}
        }
        Ok(())
    }

    /// The history for appending (copies it only if a request still shares it).
    pub(super) fn history_mut(&mut self) -> &mut Vec<Message> {
        Arc::make_mut(&mut self.history)
    }

    fn pending_mut(&mut self, call_id: &str) -> Result<&mut PendingCall, RunError> {
        let index = self.pending_index(call_id)?;
        match &mut self.phase {
            Phase::AwaitingTools { calls } => {
                calls.get_mut(index).ok_or_else(|| RunError::UnknownCall(call_id.to_owned()))
            }
            _ => Err(RunError::UnknownCall(call_id.to_owned())),
        }
    }

    fn tool_result(&mut self, result: ToolResult, signal: Option<Signal>) -> Result<(), RunError> {
        let pending = self.pending_mut(&result.call_id)?;
        pending.result = Some(result);
        pending.signal = signal;
        if let Phase::AwaitingTools { calls } = &self.phase {
            if calls.iter().all(|c| c.result.is_some()) {
                self.phase = self.after_tools();
            }
        }
        Ok(())
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
