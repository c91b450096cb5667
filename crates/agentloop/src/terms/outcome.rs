//! How a run ends: the [`Outcome`] and its [`StopReason`], and what decides it — the control
//! [`Signal`]s tools return and the human [`Decision`]s on deferred calls.

use super::config::DEFAULT_WIND_DOWN_FALLBACK;
use super::limits::LimitKind;
use super::metrics::Metrics;
use crate::message::{Citation, ToolCall, Usage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The answer of a run that ran out of context and could not compact its way back.
pub const CONTEXT_LIMIT_TEXT: &str = "The conversation no longer fits the model's context window, \
and compaction could not make it fit.";

/// A control signal a tool returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Signal {
    /// The task is complete with this answer.
    Done {
        /// The answer.
        answer: String,
    },
    /// The turn ends with a question for the user.
    AskUser {
        /// The question.
        question: String,
    },
}

/// A human's decision on a deferred tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Decision {
    /// Run the call.
    Approve,
    /// Do not run it; the model sees the reason as the call's error result.
    Reject {
        /// Why.
        reason: String,
    },
    /// Do not run it; this is its result (an operator supplies what a call left in flight by
    /// a crash returned: see `needs_attention`).
    SetResult {
        /// The result the model sees (a JSON string is a text result).
        result: serde_json::Value,
    },
}

/// Why a run stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// The model answered without calling tools.
    Completed,
    /// A done tool ended the run.
    DoneTool {
        /// The tool.
        tool: String,
    },
    /// A tool asked the user a question; the run waits for input.
    AwaitingInput {
        /// The tool.
        tool: String,
    },
    /// Tool calls wait for a human decision; continue with `Agent::resume_with_decisions`.
    AwaitingApproval {
        /// The deferred calls.
        calls: Vec<ToolCall>,
    },
    /// Calls a crash left in flight wait for an operator: their tools are not safe to run
    /// twice (`attention_needed`). Resolve each with a decision — retry (`approve`), supply
    /// its result (`set_result`) or fail it (`reject`) — and continue the run.
    NeedsAttention {
        /// The calls.
        calls: Vec<ToolCall>,
        /// Why (the first call's reason).
        reason: String,
    },
    /// A limit was reached; the answer was written by the wind-down call (or is the fallback).
    LimitReached {
        /// Which limit.
        limit: LimitKind,
    },
    /// The conversation no longer fits the model's context window: the request could not be
    /// made to fit, the provider refused it as too long, or a model turn finished with
    /// `length` that is not an [`OutputLimit`](Self::OutputLimit) — in each case after
    /// compaction was tried and could not help. After a `length` finish the answer is the
    /// cut-off text (possibly empty) and the turn's tool calls are not run; otherwise it is
    /// [`CONTEXT_LIMIT_TEXT`](super::CONTEXT_LIMIT_TEXT) and the cause.
    ///
    /// A `length` finish counts as an output limit only when the run can tell (see
    /// [`OutputLimit`](Self::OutputLimit)); one it cannot attribute — no `max_tokens` on the
    /// request, or no output tokens reported — is taken for a full context, as before
    /// `OutputLimit` existed, so that compaction gets its chance.
    ContextLimit,
    /// The provider filtered the output.
    ContentFiltered,
    /// The model's output hit the request's `max_tokens`: the turn finished with `length`
    /// and its output tokens (as the provider reported them) reached the run's configured
    /// `max_tokens`. Compaction cannot help (the output, not the input, ran out), so none is
    /// tried. The answer is the text written until then — often empty, when the budget went
    /// to reasoning or to a tool call — and the turn's tool calls are not run (their
    /// arguments may be cut). Not a success: see [`Outcome::has_answer`].
    OutputLimit {
        /// The `max_tokens` of the request.
        max_tokens: u32,
    },
    /// The model failed (provider error, or finish reason `error`).
    ModelError {
        /// What went wrong.
        message: String,
    },
    /// A tool failed and the run's tool failure mode is `fail`.
    ToolFailed {
        /// The tool.
        tool: String,
        /// Its error.
        error: String,
    },
    /// The same tool failed with the same error too many times in a row.
    CircuitOpen {
        /// The tool.
        tool: String,
        /// The repeated error.
        error: String,
        /// How many times in a row.
        count: u32,
    },
    /// The model repeated the same call and the stall action is `stop`.
    Stalled {
        /// The tool.
        tool: String,
        /// How many times in a row.
        count: u32,
    },
    /// A critical hook failed.
    HookFailed {
        /// The hook.
        hook: String,
        /// What went wrong.
        error: String,
    },
    /// The model's answer did not match the run's output schema, after every retry.
    OutputInvalid {
        /// What was wrong with the last answer.
        errors: String,
    },
    /// The runtime failed (a bug or an inconsistent journal), not the model.
    Internal {
        /// What went wrong.
        message: String,
    },
    /// The run was cancelled.
    Cancelled {
        /// Why.
        reason: String,
    },
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct Outcome {
    /// The run.
    pub run_id: String,
    /// The final answer (or the question, for [`StopReason::AwaitingInput`]; the wind-down
    /// answer or fallback for [`StopReason::LimitReached`]; the partial text — possibly
    /// empty — for a filtered answer or one cut off by `length`
    /// ([`StopReason::OutputLimit`], [`StopReason::ContextLimit`]); empty after a failure or
    /// cancellation). It may be empty even for a completed run (a model that said nothing):
    /// check [`has_answer`](Self::has_answer) rather than assume it holds one.
    pub answer: String,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Iterations run.
    pub iterations: u32,
    /// Tokens used by every model call of the run.
    pub usage: Usage,
    /// Latencies, counts, cost and the audit trail of every tool call.
    #[serde(default)]
    pub metrics: Metrics,
    /// The typed answer, validated against the run's output schema, when the run has one
    /// (`RunConfig::output`) and ended with a valid answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    /// The sources the answer cites: the citations of the run's last assistant message
    /// (web search results, document passages), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub citations: Vec<Citation>,
}

impl Outcome {
    /// An outcome with these essentials (no iterations, usage or metrics yet: a run builds
    /// its own; this is for tests, hooks and providers that make one up).
    pub fn new(
        run_id: impl Into<String>,
        answer: impl Into<String>,
        stop_reason: StopReason,
    ) -> Self {
        Self {
            run_id: run_id.into(),
            answer: answer.into(),
            stop_reason,
            iterations: 0,
            usage: Usage::default(),
            metrics: Metrics::default(),
            output: None,
            citations: Vec::new(),
        }
    }

    /// Whether the run produced what it was asked for: an answer, a done tool, or a question
    /// for the user. A run cut off by a token limit ([`StopReason::OutputLimit`],
    /// [`StopReason::ContextLimit`]) is never a success, with or without partial text. A
    /// completed run whose model wrote nothing still counts here: use
    /// [`has_answer`](Self::has_answer) to know whether there is an answer to show.
    pub fn is_success(&self) -> bool {
        matches!(
            self.stop_reason,
            StopReason::Completed | StopReason::DoneTool { .. } | StopReason::AwaitingInput { .. }
        )
    }

    /// Whether a failure ended the run (the model, an answer that never matched the output
    /// schema, a tool in `fail` mode, the breaker, a critical hook, or the runtime).
    pub fn is_failure(&self) -> bool {
        matches!(
            self.stop_reason,
            StopReason::ModelError { .. }
                | StopReason::ToolFailed { .. }
                | StopReason::CircuitOpen { .. }
                | StopReason::Stalled { .. }
                | StopReason::HookFailed { .. }
                | StopReason::OutputInvalid { .. }
                | StopReason::Internal { .. }
        )
    }

    /// Whether the run ended with a complete, non-empty answer for the user: the model's
    /// answer ([`StopReason::Completed`]), a done tool's ([`StopReason::DoneTool`]), or the
    /// wind-down answer of a limit ([`StopReason::LimitReached`]) — unless that is the
    /// default fallback ([`DEFAULT_WIND_DOWN_FALLBACK`](super::DEFAULT_WIND_DOWN_FALLBACK)),
    /// written when the wind-down call produced nothing (a custom fallback cannot be told
    /// from an answer here). Partial text cut off by a limit or a filter, a question for the
    /// user, a suspension, a failure and a cancellation are not answers.
    pub fn has_answer(&self) -> bool {
        let answer = self.answer.trim();
        !answer.is_empty()
            && match &self.stop_reason {
                StopReason::Completed | StopReason::DoneTool { .. } => true,
                StopReason::LimitReached { .. } => answer != DEFAULT_WIND_DOWN_FALLBACK.trim(),
                _ => false,
            }
    }

    /// Whether a token limit cut the run's last model turn off: its output hit `max_tokens`
    /// ([`StopReason::OutputLimit`]) or the context was full ([`StopReason::ContextLimit`]).
    pub fn is_token_limited(&self) -> bool {
        matches!(self.stop_reason, StopReason::OutputLimit { .. } | StopReason::ContextLimit)
    }
}
