//! [`Run`]: the sans-IO agent loop. It is a fold over the run journal: every decision (what to
//! do next, when to stop, why) is made here, without I/O, so it can be tested without async or
//! mocks, serialized, and rebuilt after a crash from the journal alone.
//!
//! The driver asks [`Run::next_step`] what to do, does it, and feeds the results back
//! ([`Run::model_responded`], [`Run::tool_finished`], …). Each of those records events; the
//! driver drains them with [`Run::drain_events`], journals the durable ones and streams all.
//! Decisions that depend on something outside the journal (a wall-clock limit, a hook, a
//! human) are recorded as events, so the fold never needs the outside world.

mod breaker;
mod commands;
mod context;
mod fold;
mod output;
mod stop;

pub use commands::Gate;
// The run's terms (what it is given, how it ends) lie below the events that carry them; they
// are the run's API all the same.
pub use crate::terms::{
    ApprovalRecord, AuditEntry, BreakerConfig, Decision, IterationMetrics, LimitKind, Limits,
    Metrics, Outcome, OutputMode, OutputSpec, Price, PriceTable, RunConfig, RunIdentity, Signal,
    Spent, StallAction, StopReason, ToolFailureMode, CONTEXT_LIMIT_TEXT, DEFAULT_DONE_TOOL_NUDGE,
    DEFAULT_OUTPUT_RETRIES, DEFAULT_STALL_NOTE, DEFAULT_WIND_DOWN_FALLBACK,
    DEFAULT_WIND_DOWN_PROMPT, OUTPUT_TOOL,
};

use crate::event::{Event, ModelPurpose};
use crate::message::{Message, ToolCall, ToolResult, Usage};
use crate::provider::{ModelRequest, ToolChoice};
use breaker::BreakerState;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The version of the journal and snapshot format this build writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

/// A tool call to carry out.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInvocation {
    /// The call (shared with the run's pending call and the tool events).
    pub call: Arc<ToolCall>,
    /// A human already approved it (skip the approval hooks).
    pub approved: bool,
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Step {
    /// Call the model with this request, then call [`Run::model_responded`] or
    /// [`Run::model_failed`].
    CallModel(ModelRequest),
    /// Carry out these calls: for each, [`Run::gate_tool`], then [`Run::tool_started`] and
    /// [`Run::tool_finished`] (or [`Run::tool_deferred`] for a human decision).
    CallTools(Vec<ToolInvocation>),
    /// Summarise the history with this request (no tools), then call [`Run::compacted`]
    /// with the summary or [`Run::compaction_failed`].
    Compact(ModelRequest),
    /// The run is paused at a safe point (a pause was requested:
    /// [`Run::request_pause`]; `paused` is journaled). Wait until the request changes, pass
    /// it on with [`Run::request_pause`], and ask for the next step (which journals
    /// `resumed` once the request is withdrawn).
    Paused(String),
    /// The run wants to end with this outcome. If [`Run::is_finishing`], confirm with
    /// [`Run::finish`] (possibly with a changed outcome) or continue with
    /// [`Run::continue_with`]; otherwise it is over (or suspended) already.
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
    /// A tool output journaled by reference that was not put back: the journal was read
    /// without its store (a store's `load` puts such outputs back).
    #[error(
        "the output of tool call '{call_id}' is kept in artifact '{artifact}' and was not \
         loaded: read the journal through its store"
    )]
    UnloadedOutput {
        /// The call.
        call_id: String,
        /// The artifact holding its output.
        artifact: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum CallApproval {
    /// No human decision needed (or not asked yet).
    Automatic,
    /// Waiting for a human.
    Deferred,
    /// A human approved it.
    Approved,
}

/// A tool call of the current iteration.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PendingCall {
    call: Arc<ToolCall>,
    /// What the stall rule compares ([`breaker::call_key`]), computed once, when first
    /// needed (empty until then).
    #[serde(default)]
    key: String,
    started: bool,
    result: Option<ToolResult>,
    signal: Option<Signal>,
    approval: CallApproval,
    /// Why the call waits for an operator (`attention_needed`: a crash left it in flight and
    /// its tool is not safe to retry), until a decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    attention: Option<String>,
}

impl PartialEq for PendingCall {
    /// The stall key is derived from the call (and computed when needed): not compared.
    fn eq(&self, other: &Self) -> bool {
        self.call == other.call
            && self.started == other.started
            && self.result == other.result
            && self.signal == other.signal
            && self.approval == other.approval
            && self.attention == other.attention
    }
}

impl PendingCall {
    fn new(call: Arc<ToolCall>) -> Self {
        Self {
            call,
            key: String::new(),
            started: false,
            result: None,
            signal: None,
            approval: CallApproval::Automatic,
            attention: None,
        }
    }

    /// Computes the stall key if it is not known yet; `parsed` is the call's argument text
    /// parsed with [`crate::tool::parse_arguments`] when the caller has it (it saves a parse).
    fn ensure_key(&mut self, parsed: Option<&Value>) {
        if self.key.is_empty() {
            self.key = match parsed {
                Some(value) => {
                    crate::canonical::to_string_with_capacity(value, self.call.arguments.len())
                }
                None => breaker::call_key(&self.call),
            };
        }
    }

    /// Deferred and not decided yet.
    fn is_waiting(&self) -> bool {
        self.result.is_none() && self.approval == CallApproval::Deferred
    }

    fn is_runnable(&self) -> bool {
        self.result.is_none() && self.approval != CallApproval::Deferred
    }
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
    /// A compaction was started; the summary has not come back yet.
    Compacting { reason: crate::context::CompactionReason, cut: usize, tokens_before: u64 },
    /// Tool calls of the current iteration are open; `suspended` once `run_suspended` is
    /// recorded for the deferred ones.
    AwaitingTools { calls: Vec<PendingCall>, suspended: bool },
    /// The outcome is decided; the terminal event waits for [`Run::finish`].
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
            Self::Compacting { .. } => "compacting",
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
    phase: Phase,
    spent: Spent,
    breaker: BreakerState,
    metrics: Metrics,
    /// Milliseconds since the run started, as last told by the driver.
    elapsed_ms: u64,
    /// When the open iteration started (`None`: no iteration is open).
    iteration_started_ms: Option<u64>,
    /// The open iteration's model call is not requested yet (only in a journal cut between
    /// `iteration_started` and `model_requested`, by a crash).
    #[serde(default)]
    awaiting_request: bool,
    /// A limit was reached: the next model call is the wind-down.
    wind_down: Option<LimitKind>,
    /// A note for the next request only (stall detection).
    note: Option<String>,
    /// Why the run is paused, while it is.
    paused: Option<String>,
    /// The pause the driver asks for (not journaled: the run journals `paused` when it
    /// reaches a safe point with it, `resumed` when it is withdrawn; not in a snapshot).
    #[serde(skip)]
    pause_request: Option<String>,
    /// Continuations requested by hooks so far.
    continuations: u32,
    /// The valid structured answer, once the model gave one (see `run/output.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
    /// Answers sent back for not matching the output schema so far.
    #[serde(default, skip_serializing_if = "is_zero")]
    output_retries: u32,
    /// Context management state.
    #[serde(default)]
    context: context::ContextState,
    #[serde(skip)]
    cache: context::ContextCache,
    #[serde(skip)]
    outbox: Vec<Event>,
    /// Leaves out the transient events (notices such as `text`, `tool_detected`,
    /// `step_started`): for a caller that only wants the outcome.
    #[serde(skip)]
    quiet: bool,
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
            phase: Phase::New,
            spent: Spent::default(),
            breaker: BreakerState::default(),
            metrics: Metrics::default(),
            elapsed_ms: 0,
            iteration_started_ms: None,
            awaiting_request: false,
            wind_down: None,
            note: None,
            paused: None,
            pause_request: None,
            continuations: 0,
            output: None,
            output_retries: 0,
            context: context::ContextState::default(),
            cache: context::ContextCache::default(),
            outbox: Vec::new(),
            quiet: false,
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
        self.spent.usage
    }

    /// What the budget has used so far.
    pub fn spent(&self) -> &Spent {
        &self.spent
    }

    /// Latencies, counts and the audit trail so far.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Milliseconds since the run started, as last told by the driver.
    pub fn elapsed_ms(&self) -> u64 {
        self.elapsed_ms
    }

    /// Tells the run how long it has been running (the driver calls this before each step;
    /// the time limit and iteration durations use it).
    pub fn set_elapsed(&mut self, elapsed: Duration) {
        self.elapsed_ms = millis(elapsed);
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

    /// Whether the outcome is decided and waits for [`finish`](Self::finish).
    pub fn is_finishing(&self) -> bool {
        matches!(self.phase, Phase::Finishing { .. })
    }

    /// Whether the run is finishing or finished: nothing more should be started.
    pub fn is_ending(&self) -> bool {
        matches!(self.phase, Phase::Finishing { .. } | Phase::Finished { .. })
    }

    /// Whether the model call the run waits for is the wind-down (the tool-less answer after
    /// a limit).
    pub fn is_winding_down(&self) -> bool {
        matches!(self.phase, Phase::AwaitingModel { purpose: ModelPurpose::WindDown { .. } })
    }

    /// The tool calls of the iteration that started and have no result yet.
    pub fn running_calls(&self) -> Vec<Arc<ToolCall>> {
        match &self.phase {
            Phase::AwaitingTools { calls, .. } => calls
                .iter()
                .filter(|c| c.started && c.result.is_none())
                .map(|c| Arc::clone(&c.call))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The calls that wait for an operator because a crash left them in flight
    /// (`attention_needed`), with why.
    pub fn needing_attention(&self) -> Vec<(&ToolCall, &str)> {
        match &self.phase {
            Phase::AwaitingTools { calls, .. } => calls
                .iter()
                .filter(|c| c.is_waiting())
                .filter_map(|c| Some((&*c.call, c.attention.as_deref()?)))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether the next step starts an iteration (a safe point for pausing).
    pub fn is_between_iterations(&self) -> bool {
        matches!(self.phase, Phase::NeedModel)
    }

    /// Whether the run waits for approval decisions.
    pub fn is_suspended(&self) -> bool {
        matches!(self.phase, Phase::AwaitingTools { suspended: true, .. })
    }

    /// The question the run stopped to ask (it finished with
    /// [`StopReason::AwaitingInput`]), until an answer is given with
    /// [`provide_input`](Self::provide_input).
    pub fn awaiting_input(&self) -> Option<&str> {
        match &self.phase {
            Phase::Finished { outcome }
                if matches!(outcome.stop_reason, StopReason::AwaitingInput { .. }) =>
            {
                Some(&outcome.answer)
            }
            _ => None,
        }
    }

    /// Why the run is paused, while it is.
    pub fn paused(&self) -> Option<&str> {
        self.paused.as_deref()
    }

    /// The calls waiting for a human decision.
    pub fn awaiting_approval(&self) -> Vec<&ToolCall> {
        match &self.phase {
            Phase::AwaitingTools { calls, .. } => {
                calls.iter().filter(|c| c.is_waiting()).map(|c| &*c.call).collect()
            }
            _ => Vec::new(),
        }
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
        // A run rebuilt from a journal cut by a crash between two events of one step: an
        // iteration whose last result has no `iteration_completed` is closed first; an
        // iteration started without its model request gets the request.
        if matches!(self.phase, Phase::NeedModel | Phase::Finishing { .. })
            && !self.awaiting_request
        {
            self.close_iteration();
        }
        // Between iterations: the safe point where a requested pause takes effect.
        if matches!(self.phase, Phase::NeedModel) && self.pause_point() {
            return Step::Paused(self.paused.clone().unwrap_or_default());
        }
        match &self.phase {
            Phase::NeedModel if self.awaiting_request => {
                let purpose = ModelPurpose::Iteration;
                let request = match self.request(&purpose) {
                    Ok(request) => request,
                    Err(error) => return self.out_of_context(error),
                };
                self.record(Event::ModelRequested { iteration: self.iteration, purpose });
                Step::CallModel(request)
            }
            Phase::New | Phase::NeedModel => {
                if let Some(reason) = self.context.pending_compaction {
                    if let Some(step) = self.begin_compaction(reason) {
                        return step;
                    }
                }
                let next = self.iteration + 1;
                let redo = self.context.redo_iteration;
                let limit = match &self.wind_down {
                    Some(limit) => Some(limit.clone()),
                    None if redo => None,
                    None => {
                        let limit = self.config.limits.before_model_call(
                            next,
                            &self.spent,
                            self.elapsed_ms,
                        );
                        if let Some(limit) = &limit {
                            self.record(Event::LimitReached { limit: limit.clone() });
                        }
                        limit
                    }
                };
                if limit.is_none() && !redo && self.over_threshold().is_some() && self.can_compact()
                {
                    if let Some(step) =
                        self.begin_compaction(crate::context::CompactionReason::Threshold)
                    {
                        return step;
                    }
                }
                let purpose = match limit {
                    Some(limit) => ModelPurpose::WindDown { limit },
                    None if redo => ModelPurpose::Iteration,
                    None => {
                        self.record(Event::IterationStarted {
                            iteration: next,
                            at_ms: self.elapsed_ms,
                        });
                        ModelPurpose::Iteration
                    }
                };
                let request = match self.request(&purpose) {
                    Ok(request) => request,
                    Err(error) => return self.out_of_context(error),
                };
                self.record(Event::ModelRequested { iteration: self.iteration, purpose });
                Step::CallModel(request)
            }
            Phase::Compacting { cut, .. } => Step::Compact(self.compaction_request(*cut)),
            Phase::AwaitingModel { purpose } => {
                let purpose = purpose.clone();
                match self.request(&purpose) {
                    Ok(request) => Step::CallModel(request),
                    Err(error) => self.out_of_context(error),
                }
            }
            Phase::AwaitingTools { calls, suspended } => {
                let runnable: Vec<ToolInvocation> = calls
                    .iter()
                    .filter(|c| c.is_runnable())
                    .map(|c| ToolInvocation {
                        call: c.call.clone(),
                        approved: c.approval == CallApproval::Approved,
                    })
                    .collect();
                if !runnable.is_empty() {
                    return Step::CallTools(runnable);
                }
                let suspended = *suspended;
                match self.suspended_outcome() {
                    Some(outcome) => {
                        if !suspended {
                            self.close_iteration();
                            self.record(Event::RunSuspended { outcome: Box::new(outcome.clone()) });
                        }
                        Step::Finish(outcome)
                    }
                    None => {
                        // Every call has a result, so the fold should have moved on.
                        self.fail("internal error: tools phase with nothing left to do");
                        self.next_step()
                    }
                }
            }
            Phase::Finishing { outcome, .. } => {
                // Counters may have moved since the outcome was decided (the iteration closed).
                let outcome =
                    self.outcome_with(outcome.answer.clone(), outcome.stop_reason.clone());
                Step::Finish(outcome)
            }
            Phase::Finished { outcome } => Step::Finish(outcome.clone()),
        }
    }

    /// The request for a model call of this purpose: the window of the history (see
    /// `run/context.rs`), the tools, and for a wind-down the summary request.
    fn request(
        &mut self,
        purpose: &ModelPurpose,
    ) -> Result<ModelRequest, crate::context::window::WindowError> {
        let plan = self.plan()?;
        let messages = self.view(&plan);
        let tools = self.request_tools();
        let config = &self.config;
        let mut request = ModelRequest {
            instructions: config.instructions.clone(),
            messages,
            tools,
            tool_choice: config.tool_choice.clone(),
            temperature: config.temperature,
            max_tokens: config.max_tokens,
            metadata: config.metadata.clone(),
            output: None,
            cache: config.cache.clone(),
            trace_parent: None,
        };
        self.add_output(&mut request);
        if let Some(note) = &self.note {
            // For this request only: a temporary copy of the history plus the note.
            Arc::make_mut(&mut request.messages).push(Message::user(note.clone()));
        }
        if let ModelPurpose::WindDown { .. } = purpose {
            // A temporary copy of the history plus the summary request; no tools.
            Arc::make_mut(&mut request.messages)
                .push(Message::user(config.wind_down_prompt.clone()));
            request.tools = Arc::default();
            request.tool_choice = ToolChoice::None;
        }
        Ok(request)
    }

    /// The required messages do not fit: compact if that can help, else end.
    fn out_of_context(&mut self, error: crate::context::window::WindowError) -> Step {
        if self.can_compact() {
            if let Some(step) = self.begin_compaction(crate::context::CompactionReason::Threshold) {
                return step;
            }
        }
        let answer = format!("{CONTEXT_LIMIT_TEXT} ({error})");
        self.phase = self.finishing(answer, StopReason::ContextLimit);
        self.next_step()
    }

    /// The history for appending (copies it only if a request still shares it).
    fn history_mut(&mut self) -> &mut Vec<Message> {
        Arc::make_mut(&mut self.history)
    }

    /// Leaves out the transient events from now on (`quiet`), or emits them again. The
    /// journal (the durable events) is the same either way.
    pub(crate) fn set_quiet(&mut self, quiet: bool) {
        self.quiet = quiet;
    }

    /// Queues a transient event built by `event`, unless the run is quiet (then it is not
    /// even built).
    fn notice(&mut self, event: impl FnOnce() -> Event) {
        if !self.quiet {
            self.outbox.push(event());
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

    /// Records `iteration_completed` when an iteration is open and no longer running.
    fn close_iteration(&mut self) {
        if let Some(started) = self.iteration_started_ms {
            if !matches!(self.phase, Phase::AwaitingModel { .. })
                && !matches!(&self.phase, Phase::AwaitingTools { calls, .. } if calls.iter().any(PendingCall::is_runnable))
            {
                let duration_ms = self.elapsed_ms.saturating_sub(started);
                self.record(Event::IterationCompleted { iteration: self.iteration, duration_ms });
            }
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Milliseconds of a duration, saturating.
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
