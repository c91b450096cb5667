//! [`Event`]: everything that happens in a run. Durable events form the run journal (the
//! [`Run`](crate::run::Run) is a fold over them); the others (deltas, derived notices) are only
//! streamed.

use crate::message::{FinishReason, Message, ToolCall, ToolResult, Usage};
use crate::provider::ProviderError;
use crate::terms::{Outcome, RunConfig};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

/// Why a model was called.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelPurpose {
    /// A regular loop iteration.
    #[default]
    Iteration,
    /// The one tool-less call that writes a final answer after a limit was reached.
    WindDown {
        /// The limit that was reached.
        limit: crate::terms::LimitKind,
    },
}

/// How a tool step ended, for [`Event::StepCompleted`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// The tool returned a value or a control signal.
    Ok,
    /// The tool (or its arguments) failed.
    Error,
}

/// Something that happened in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    // ---- durable: the journal ----
    /// The run began. Holds everything needed to rebuild it.
    RunStarted {
        /// The run's id.
        run_id: String,
        /// The configuration it runs with (instructions, tool specs, limits, …).
        config: Box<RunConfig>,
        /// The conversation it starts from (history plus the new user input).
        input: Vec<Message>,
    },
    /// An iteration (one model call and its tools) began.
    IterationStarted {
        /// 1-based iteration number.
        iteration: u32,
        /// Milliseconds since the run started.
        at_ms: u64,
    },
    /// An iteration ended.
    IterationCompleted {
        /// 1-based iteration number.
        iteration: u32,
        /// Its wall time.
        duration_ms: u64,
    },
    /// A model call was issued.
    ModelRequested {
        /// The iteration it belongs to.
        iteration: u32,
        /// Why.
        purpose: ModelPurpose,
    },
    /// The model answered.
    ModelResponded {
        /// The iteration it belongs to.
        iteration: u32,
        /// The assistant message.
        message: Message,
        /// Why the turn ended.
        finish_reason: FinishReason,
        /// Tokens used by this call (boxed: the event stays small).
        usage: Box<Usage>,
        /// Wall time of the call.
        duration_ms: u64,
        /// The response id the provider reported (OpenTelemetry's `gen_ai.response.id`), if
        /// any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response_id: Option<String>,
        /// The model the provider reported as having answered (OpenTelemetry's
        /// `gen_ai.response.model`), if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response_model: Option<String>,
        /// Which member of a fallback chain answered (`family:name`, e.g.
        /// `anthropic:claude-sonnet-4-5`); `None` when the agent's provider is not a chain.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
    },
    /// The model call failed.
    ModelFailed {
        /// The iteration it belongs to.
        iteration: u32,
        /// What went wrong.
        error: ProviderError,
    },
    /// A limit was reached; the run winds down.
    LimitReached {
        /// Which limit.
        limit: crate::terms::LimitKind,
    },
    /// A tool call waits for a human decision (an approval hook deferred it).
    ApprovalRequested {
        /// The call (shared with the run's pending call; serialized as the call itself).
        call: Arc<ToolCall>,
        /// Its arguments (shared with the audit entry; serialized as the value itself).
        #[serde(serialize_with = "crate::canonical::serialize")]
        arguments: Arc<Value>,
    },
    /// A call a crash left in flight (started, no result journaled) is not run again: its
    /// tool is not declared safe to retry ([`Tool::safe_to_retry`](crate::tool::Tool)). The
    /// call waits for an operator, as a deferred call waits for approval: retry it
    /// ([`Decision::Approve`](crate::terms::Decision)), supply its result
    /// (`Decision::SetResult`) or fail it (`Decision::Reject`); once every other call of the
    /// iteration is done the run suspends with the stop reason `needs_attention`.
    AttentionNeeded {
        /// The call.
        call_id: String,
        /// Why it was not run again.
        reason: String,
    },
    /// A human decided on a deferred call.
    ApprovalDecided {
        /// The call.
        call_id: String,
        /// The decision.
        decision: crate::terms::Decision,
        /// Who decided, as the channel that brought the decision names them (`None`: not
        /// said): `cli:alice` (`agentloop runs approve`), `ui:alice` (the runs UI), an A2A
        /// client's `by` (or `a2a`). Recorded as given, not authenticated.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// The same call was repeated with identical arguments.
    StallDetected {
        /// The tool.
        tool: String,
        /// How many times in a row.
        count: u32,
        /// What the run does about it.
        action: crate::terms::StallAction,
    },
    /// The run paused at a safe point.
    Paused {
        /// Why.
        reason: String,
    },
    /// The run resumed.
    Resumed,
    /// A hook asked the model to continue instead of ending the run.
    ContinuationRequested {
        /// The user message added.
        prompt: String,
    },
    /// The user answered the question the run stopped to ask (an ask-user tool; the run had
    /// finished with `awaiting_input`): the answer joins the history as the user's message
    /// and the same run goes on, with the budgets it has left.
    InputProvided {
        /// The user's message.
        message: Message,
    },
    /// A compaction began: the history before `cut` is being summarised.
    CompactionStarted {
        /// Why.
        reason: crate::context::CompactionReason,
        /// Where the kept history begins.
        cut: usize,
        /// Estimated input tokens before.
        tokens_before: u64,
    },
    /// A compaction finished: the model's view shows `summary` instead of the history before
    /// `cut` (which stays in the journal).
    CompactionCompleted {
        /// Where the kept history begins.
        cut: usize,
        /// The summary.
        summary: String,
        /// Estimated input tokens before.
        tokens_before: u64,
        /// Estimated input tokens after.
        tokens_after: u64,
        /// Tokens the summarisation call used.
        usage: Usage,
    },
    /// A compaction failed.
    CompactionFailed {
        /// What went wrong.
        error: String,
    },
    /// A tool call began.
    ToolStarted {
        /// The call (shared with the run's pending call and the driver; serialized as the
        /// call itself).
        call: Arc<ToolCall>,
        /// The parsed arguments, or `{"_raw": "<text>"}` when they were not JSON (shared with
        /// the audit entry; serialized as the value itself).
        #[serde(serialize_with = "crate::canonical::serialize")]
        arguments: Arc<Value>,
    },
    /// A tool call returned a value or a control signal.
    ToolCompleted {
        /// The tool.
        name: String,
        /// The result that goes into the history.
        result: ToolResult,
        /// How long it ran.
        duration_ms: u64,
        /// `done` / `ask_user` when the tool ended the loop (boxed: it is rare, and events
        /// stay small).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        control: Option<Box<crate::terms::Signal>>,
        /// Tokens used by work the call started (a sub-agent's run), as the tool reported
        /// them ([`ToolContext::report_usage`](crate::tool::ToolContext::report_usage)): the
        /// run adds them to its usage, so they count against its token budgets. (Boxed: it is
        /// rare, and events stay small.)
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Box<Usage>>,
        /// What that work cost in USD (at its own price): added to the run's cost, so it
        /// counts against `max_cost_usd`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        /// The remote agent's task the call ran as, as the tool reported it
        /// ([`ToolContext::report_remote`](crate::tool::ToolContext::report_remote)): who
        /// ran it, its state and where to look at it. (Boxed, as `usage`.)
        #[serde(default, skip_serializing_if = "Option::is_none")]
        remote: Option<Box<crate::tool::RemoteTask>>,
    },
    /// A tool call failed (unknown tool, bad arguments, error, panic).
    ToolFailed {
        /// The tool.
        name: String,
        /// The error result that goes into the history.
        result: ToolResult,
        /// The error (boxed: a failure is rare, and events stay small).
        error: Box<crate::tool::ToolError>,
        /// How long it ran.
        duration_ms: u64,
        /// Tokens used by work the call started before it failed (as in `tool_completed`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Box<Usage>>,
        /// What that work cost in USD (as in `tool_completed`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        /// The remote agent's task the call ran as (as in `tool_completed`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        remote: Option<Box<crate::tool::RemoteTask>>,
    },
    /// A tool call ran out of time.
    ToolTimedOut {
        /// The tool.
        name: String,
        /// The error result that goes into the history.
        result: ToolResult,
        /// The timeout that expired.
        timeout_ms: u64,
        /// Tokens used by work the call started, as reported before it timed out (as in
        /// `tool_completed`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Box<Usage>>,
        /// What that work cost in USD (as in `tool_completed`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        /// The remote agent's task the call ran as (as in `tool_completed`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        remote: Option<Box<crate::tool::RemoteTask>>,
    },
    /// The run ended with an outcome.
    RunFinished {
        /// The outcome.
        outcome: Box<Outcome>,
    },
    /// The run ended in failure.
    RunFailed {
        /// What went wrong.
        error: String,
        /// The outcome (its stop reason says why).
        outcome: Box<Outcome>,
    },
    /// The run stopped to wait for approval decisions; it continues with
    /// `Agent::resume_with_decisions`.
    RunSuspended {
        /// The outcome (stop reason `awaiting_approval`).
        outcome: Box<Outcome>,
    },
    /// The run was cancelled.
    RunCancelled {
        /// Why.
        reason: String,
        /// The outcome.
        outcome: Box<Outcome>,
    },

    // ---- transient: streamed, not journaled ----
    /// Answer text as it streams.
    TextDelta {
        /// The new text.
        delta: String,
    },
    /// Reasoning text as it streams.
    ReasoningDelta {
        /// The new text.
        delta: String,
    },
    /// A tool call's name as soon as the model starts it.
    ToolCallStreamStarted {
        /// The call id.
        call_id: String,
        /// The tool.
        name: String,
    },
    /// A tool call's argument text as it streams.
    ToolArgumentsDelta {
        /// The call id.
        call_id: String,
        /// The new text.
        delta: String,
    },
    /// Provider content without a type of ours arrived — a server tool's call or result
    /// (web search, code execution), a compaction item, an output item of a newer kind: it is
    /// kept in the assistant message as a [`Part::Opaque`](crate::message::Part) and sent
    /// back to the same provider on the next turn, never dropped.
    OpaqueContent {
        /// The content, verbatim.
        part: crate::message::Opaque,
    },
    /// The text so far cites a source (a web page, a document passage): it is kept in the
    /// assistant message as a [`Part::Citation`](crate::message::Part) after the text, and in
    /// the outcome's `citations` when the message is the answer.
    Citation {
        /// The citation.
        citation: crate::message::Citation,
    },
    /// The structured answer so far, as it streams (a run with an output schema): the JSON
    /// text so far — the answer's text in native mode, the final-answer tool's arguments in
    /// tool mode — parsed as far as it goes (open objects and arrays closed, an unfinished
    /// string kept as far as it goes, an unfinished number or key left out). Each differs
    /// from the one before. Only a guide for a UI: the run's `output` is the validated value.
    OutputDelta {
        /// The value so far.
        partial: Value,
    },
    /// The reasoning of a model turn, whole.
    Reasoning {
        /// The text.
        text: String,
    },
    /// The text of a model turn that is not the final answer (the final answer is in
    /// [`Event::RunFinished`] only).
    Text {
        /// The text.
        text: String,
    },
    /// The model asked for these tool calls.
    ToolDetected {
        /// The calls, in order (shared with the run's pending calls; serialized as the calls
        /// themselves).
        calls: Vec<Arc<ToolCall>>,
    },
    /// A tool step begins (before [`Event::ToolStarted`]).
    StepStarted {
        /// The call id.
        call_id: String,
        /// The tool.
        name: String,
    },
    /// A tool step ended (after its result event).
    StepCompleted {
        /// The call id.
        call_id: String,
        /// How it ended.
        status: StepStatus,
    },
    /// A failed model call is retried after `delay_ms`.
    ModelRetrying {
        /// The attempt that failed (1-based).
        attempt: u32,
        /// The wait before the next attempt.
        delay_ms: u64,
        /// Why it failed.
        error: ProviderError,
    },
    /// A hook failed or timed out.
    HookFailed {
        /// The hook's name.
        hook: String,
        /// Which hook point (`before_model`, …).
        point: String,
        /// What went wrong.
        error: String,
        /// Whether the hook is critical (the run then fails).
        critical: bool,
    },
    /// The durable event just before this one was appended to the run's store at `seq`
    /// (journaled runs only: an agent with a store, see [`crate::store`]).
    Checkpointed {
        /// Its 0-based sequence number in the journal.
        seq: u64,
    },
    /// An event of work a tool call started while it ran: a sub-agent's run
    /// ([`Agent::as_tool`](crate::Agent::as_tool)), a remote agent's updates mapped into
    /// events. It comes between the call's `tool_started` and its result event, in the order
    /// the tool emitted it ([`ToolContext::emit_nested`](crate::tool::ToolContext::emit_nested)).
    /// Stream-only, whatever it holds: the work's own journal (a sub-agent's run in its
    /// store) is where its durable events are kept.
    Nested {
        /// The tool call that started the work.
        call_id: String,
        /// The run the event belongs to (a sub-agent's run id), if the work is a run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<String>,
        /// The event.
        event: Box<Event>,
    },
    /// The run is a fork: its journal before this entry is another run's up to `at_seq`
    /// (with this run's id in `run_started`), and `edit` changes what the run goes on from.
    RunForked {
        /// The run it was forked from.
        origin_run_id: String,
        /// The last entry of the origin's journal it holds.
        at_seq: u64,
        /// The change made at the fork point, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        edit: Option<ForkEdit>,
    },
    /// Appending to the run's store failed: the run stopped at the last checkpoint (the
    /// event that could not be journaled is not passed on, and the driver is dropped, which
    /// cancels the model call and running tools). Resume it from the store once the store
    /// is healthy again.
    JournalFailed {
        /// What went wrong.
        error: String,
    },
}

/// What a fork changes at its fork point ([`Event::RunForked`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ForkEdit {
    /// The result of a call the model has not seen yet (the fork point is after the call's
    /// result and before the next model call): the model sees `result` instead.
    ToolResult {
        /// The call.
        call_id: String,
        /// Its result as the fork has it (a string is text, anything else JSON).
        result: Value,
    },
    /// A user message after the fork point, between model calls or after the run's end: the
    /// run goes on with it (a run that had finished is open again).
    UserMessage {
        /// The message's text.
        text: String,
    },
    /// The model's last answer, at a point after the run's end (a run that finished with a
    /// completed answer): the fork finishes with `text` instead (its journal closes with a
    /// `run_finished` of its own), and goes on from there as any finished run does (a next
    /// user message). A typed output the answer had is dropped: the edited text is not
    /// validated against the output schema.
    ModelAnswer {
        /// The answer as the fork has it.
        text: String,
    },
}

impl Event {
    /// Whether the event belongs in the journal (the rest is only streamed).
    pub fn is_durable(&self) -> bool {
        matches!(
            self,
            Self::RunStarted { .. }
                | Self::IterationStarted { .. }
                | Self::IterationCompleted { .. }
                | Self::ModelRequested { .. }
                | Self::ModelResponded { .. }
                | Self::ModelFailed { .. }
                | Self::ToolStarted { .. }
                | Self::ToolCompleted { .. }
                | Self::ToolFailed { .. }
                | Self::ToolTimedOut { .. }
                | Self::LimitReached { .. }
                | Self::ApprovalRequested { .. }
                | Self::ApprovalDecided { .. }
                | Self::AttentionNeeded { .. }
                | Self::StallDetected { .. }
                | Self::Paused { .. }
                | Self::Resumed
                | Self::ContinuationRequested { .. }
                | Self::InputProvided { .. }
                | Self::CompactionStarted { .. }
                | Self::CompactionCompleted { .. }
                | Self::CompactionFailed { .. }
                | Self::RunFinished { .. }
                | Self::RunFailed { .. }
                | Self::RunSuspended { .. }
                | Self::RunCancelled { .. }
                | Self::RunForked { .. }
        )
    }

    /// The outcome, when this event ends the run.
    pub fn outcome(&self) -> Option<&Outcome> {
        match self {
            Self::RunFinished { outcome }
            | Self::RunFailed { outcome, .. }
            | Self::RunSuspended { outcome }
            | Self::RunCancelled { outcome, .. } => Some(outcome),
            _ => None,
        }
    }

    /// The remote agent's task a tool call ran as, on the call's result event.
    pub fn remote(&self) -> Option<&crate::tool::RemoteTask> {
        match self {
            Self::ToolCompleted { remote, .. }
            | Self::ToolFailed { remote, .. }
            | Self::ToolTimedOut { remote, .. } => remote.as_deref(),
            _ => None,
        }
    }

    /// The serde tag of the event (`"run_started"`, `"text_delta"`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::RunStarted { .. } => "run_started",
            Self::IterationStarted { .. } => "iteration_started",
            Self::ModelRequested { .. } => "model_requested",
            Self::ModelResponded { .. } => "model_responded",
            Self::ModelFailed { .. } => "model_failed",
            Self::ToolStarted { .. } => "tool_started",
            Self::ToolCompleted { .. } => "tool_completed",
            Self::ToolFailed { .. } => "tool_failed",
            Self::ToolTimedOut { .. } => "tool_timed_out",
            Self::RunFinished { .. } => "run_finished",
            Self::RunFailed { .. } => "run_failed",
            Self::RunSuspended { .. } => "run_suspended",
            Self::RunCancelled { .. } => "run_cancelled",
            Self::LimitReached { .. } => "limit_reached",
            Self::ApprovalRequested { .. } => "approval_requested",
            Self::ApprovalDecided { .. } => "approval_decided",
            Self::AttentionNeeded { .. } => "attention_needed",
            Self::StallDetected { .. } => "stall_detected",
            Self::Paused { .. } => "paused",
            Self::Resumed => "resumed",
            Self::ContinuationRequested { .. } => "continuation_requested",
            Self::InputProvided { .. } => "input_provided",
            Self::ModelRetrying { .. } => "model_retrying",
            Self::CompactionStarted { .. } => "compaction_started",
            Self::CompactionCompleted { .. } => "compaction_completed",
            Self::CompactionFailed { .. } => "compaction_failed",
            Self::HookFailed { .. } => "hook_failed",
            Self::TextDelta { .. } => "text_delta",
            Self::ReasoningDelta { .. } => "reasoning_delta",
            Self::ToolCallStreamStarted { .. } => "tool_call_stream_started",
            Self::ToolArgumentsDelta { .. } => "tool_arguments_delta",
            Self::OutputDelta { .. } => "output_delta",
            Self::OpaqueContent { .. } => "opaque_content",
            Self::Citation { .. } => "citation",
            Self::Reasoning { .. } => "reasoning",
            Self::Text { .. } => "text",
            Self::ToolDetected { .. } => "tool_detected",
            Self::StepStarted { .. } => "step_started",
            Self::StepCompleted { .. } => "step_completed",
            Self::IterationCompleted { .. } => "iteration_completed",
            Self::Checkpointed { .. } => "checkpointed",
            Self::JournalFailed { .. } => "journal_failed",
            Self::Nested { .. } => "nested",
            Self::RunForked { .. } => "run_forked",
        }
    }
}

mod journal;
mod nested;
pub use journal::{JournalEvent, StreamOnly};
pub(crate) use nested::unerase;

#[cfg(test)]
mod tests;
