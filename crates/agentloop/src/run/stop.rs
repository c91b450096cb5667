//! When a run stops and why: finish reasons, done / loop-breaking tools, limits, the circuit
//! breaker, approvals.

use super::{LimitKind, PendingCall, Phase, Run};
use crate::event::ModelPurpose;
use crate::message::{FinishReason, Message, Part, ToolCall, ToolResultContent, Usage};
use crate::provider::ProviderError;
use crate::run::metrics::Metrics;
use crate::tool::ToolOutput;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

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
pub enum Decision {
    /// Run the call.
    Approve,
    /// Do not run it; the model sees the reason as the call's error result.
    Reject {
        /// Why.
        reason: String,
    },
}

/// Whether a tool error ends the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolFailureMode {
    /// Errors become error results the model sees; the loop goes on.
    #[default]
    Continue,
    /// The first tool error ends the run.
    Fail,
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
}

impl Outcome {
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

    /// Whether a failure ended the run (the model, a tool in `fail` mode, the breaker, a
    /// critical hook, or the runtime).
    pub fn is_failure(&self) -> bool {
        matches!(
            self.stop_reason,
            StopReason::ModelError { .. }
                | StopReason::ToolFailed { .. }
                | StopReason::CircuitOpen { .. }
                | StopReason::Stalled { .. }
                | StopReason::HookFailed { .. }
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
                StopReason::LimitReached { .. } => {
                    answer != super::DEFAULT_WIND_DOWN_FALLBACK.trim()
                }
                _ => false,
            }
    }

    /// Whether a token limit cut the run's last model turn off: its output hit `max_tokens`
    /// ([`StopReason::OutputLimit`]) or the context was full ([`StopReason::ContextLimit`]).
    pub fn is_token_limited(&self) -> bool {
        matches!(self.stop_reason, StopReason::OutputLimit { .. } | StopReason::ContextLimit)
    }
}

/// The result content and control signal of a tool's output.
pub(super) fn tool_output(output: ToolOutput) -> (ToolResultContent, Option<Signal>) {
    match output {
        ToolOutput::Value(value) => (ToolResultContent::from(value), None),
        ToolOutput::Done(answer) => {
            (ToolResultContent::Text(answer.clone()), Some(Signal::Done { answer }))
        }
        ToolOutput::AskUser(question) => {
            (ToolResultContent::Text(question.clone()), Some(Signal::AskUser { question }))
        }
    }
}

impl Run {
    pub(super) fn outcome_with(&self, answer: String, stop_reason: StopReason) -> Outcome {
        let mut metrics = self.metrics.clone();
        metrics.usage = self.spent.usage;
        metrics.cost_usd = self.spent.cost_usd;
        Outcome {
            run_id: self.run_id.clone(),
            answer,
            stop_reason,
            iterations: self.iteration,
            usage: self.spent.usage,
            metrics,
        }
    }

    pub(super) fn finishing(&self, answer: String, stop_reason: StopReason) -> Phase {
        Phase::Finishing { outcome: self.decided(answer, stop_reason), error: None }
    }

    /// A failing end: the run fails with `error` and this stop reason.
    pub(super) fn failing_with(&self, error: String, stop_reason: StopReason) -> Phase {
        Phase::Finishing { outcome: self.decided(String::new(), stop_reason), error: Some(error) }
    }

    /// The outcome a finishing run holds until [`Run::next_step`] builds the real one with
    /// [`outcome_with`](Self::outcome_with): only its answer and stop reason are read, so the
    /// metrics (the whole audit trail) are not copied into it.
    fn decided(&self, answer: String, stop_reason: StopReason) -> Outcome {
        Outcome {
            run_id: self.run_id.clone(),
            answer,
            stop_reason,
            iterations: self.iteration,
            usage: self.spent.usage,
            metrics: super::Metrics::default(),
        }
    }

    fn failing(&self, error: String) -> Phase {
        self.failing_with(error.clone(), StopReason::ModelError { message: error })
    }

    fn last_text(&self) -> String {
        self.history.last().map(|m| m.text().trim().to_owned()).unwrap_or_default()
    }

    /// Removes the tool calls of the last (assistant) message: calls that will never run must
    /// not stay in the history unanswered. A message left empty is removed.
    fn drop_unanswered_calls(&mut self) {
        if !self.history.last().is_some_and(Message::has_tool_calls) {
            return;
        }
        self.invalidate_from(self.history.len() - 1);
        let history = self.history_mut();
        if let Some(last) = history.last_mut() {
            last.content.retain(|part| !matches!(part, Part::ToolCall(_)));
            if last.content.is_empty() {
                history.pop();
            }
        }
    }

    /// What follows a model response (already appended to the history).
    pub(super) fn after_response(
        &mut self,
        purpose: &ModelPurpose,
        finish: &FinishReason,
        usage: &Usage,
    ) -> Phase {
        let text = self.last_text();
        if let ModelPurpose::WindDown { limit } = purpose {
            // Tools were not offered; calls the model made anyway are not run.
            self.drop_unanswered_calls();
            let answer =
                if text.is_empty() { self.config.wind_down_fallback.clone() } else { text };
            return self.finishing(answer, StopReason::LimitReached { limit: limit.clone() });
        }
        if *finish == FinishReason::Length {
            if let Some(max_tokens) = self.output_limit(usage) {
                // Compaction cannot help an output limit: the run ends with what was written.
                // A journal written before this rule may go on with the compaction the old
                // rule started: remember where the cut-off message was (see the fold).
                if self.can_compact_after_popping() {
                    self.context.legacy_length_cut = Some(self.history.len() - 1);
                }
                self.drop_unanswered_calls();
                return self.finishing(text, StopReason::OutputLimit { max_tokens });
            }
        }
        if *finish == FinishReason::Length && self.can_compact_after_popping() {
            // Forced compaction: the cut-off answer leaves the history (it stays in the
            // journal), the history is compacted, and the same request is sent again.
            let last = self.history.len() - 1;
            self.invalidate_from(last);
            self.history_mut().pop();
            self.context.pending_compaction = Some(crate::context::CompactionReason::Length);
            return Phase::NeedModel;
        }
        let terminal = match finish {
            FinishReason::Error => {
                Some(self.failing("the model finished with reason 'error'".into()))
            }
            FinishReason::ContentFilter => {
                Some(self.finishing(text.clone(), StopReason::ContentFiltered))
            }
            FinishReason::Length => Some(self.finishing(text.clone(), StopReason::ContextLimit)),
            _ => None,
        };
        if let Some(phase) = terminal {
            // A cut-off or filtered turn's calls are not run (their arguments may be cut).
            self.drop_unanswered_calls();
            return phase;
        }
        let calls: Vec<PendingCall> = self
            .history
            .last()
            .map(|m| m.tool_calls().map(|c| PendingCall::new(Arc::new(c.clone()))).collect())
            .unwrap_or_default();
        if !calls.is_empty() {
            return Phase::AwaitingTools { calls, suspended: false };
        }
        if self.config.require_done_tool {
            if let Some(nudge) = &self.config.done_tool_nudge {
                let nudge = Message::user(nudge.clone());
                self.history_mut().push(nudge);
            }
            return Phase::NeedModel;
        }
        self.finishing(text, StopReason::Completed)
    }

    /// The rule for a `length` finish: it is the output limit (`Some(max_tokens)`) when the
    /// run's requests carry a `max_tokens` and the response's reported output tokens reach
    /// it; otherwise (no `max_tokens`, or fewer output tokens — the context ran out first —
    /// or no usage reported) it is taken for a full context.
    fn output_limit(&self, usage: &Usage) -> Option<u32> {
        let max_tokens = self.config.max_tokens?;
        (usage.output > 0 && usage.output >= u64::from(max_tokens)).then_some(max_tokens)
    }

    /// Whether a compaction could help once the last (cut-off) message is set aside.
    fn can_compact_after_popping(&self) -> bool {
        let len = self.history.len().saturating_sub(1);
        self.can_compact_in(&self.history[..len])
    }

    /// What follows a failed model call: a non-retryable error fails the run; a retryable
    /// one is tried again in a new iteration until `max_consecutive_model_errors`. This is the
    /// outer retry tier; the driver's attempts under the `RetryPolicy` ran before the call
    /// failed (`docs/PROVIDERS.md`, "Retries").
    pub(super) fn after_model_failure(
        &mut self,
        purpose: &ModelPurpose,
        error: &ProviderError,
    ) -> Phase {
        if let ModelPurpose::WindDown { limit } = purpose {
            return self.finishing(
                self.config.wind_down_fallback.clone(),
                StopReason::LimitReached { limit: limit.clone() },
            );
        }
        if let ProviderError::ContextLengthExceeded { message } = error {
            if self.can_compact() {
                self.context.pending_compaction =
                    Some(crate::context::CompactionReason::ContextLengthExceeded);
                return Phase::NeedModel;
            }
            let answer = format!("{} ({message})", super::CONTEXT_LIMIT_TEXT);
            return self.finishing(answer, StopReason::ContextLimit);
        }
        if !error.is_retryable() {
            return self.failing(error.to_string());
        }
        if self.spent.consecutive_model_errors >= self.config.limits.max_consecutive_model_errors {
            return self.finishing(
                self.config.wind_down_fallback.clone(),
                StopReason::LimitReached { limit: LimitKind::ConsecutiveModelErrors },
            );
        }
        Phase::NeedModel
    }

    /// What follows once every tool call of the iteration has a result: the results join
    /// the history in call order, then the first control signal (in call order) decides.
    pub(super) fn after_tools(&mut self) -> Phase {
        // The phase is replaced by what this returns: take the results instead of copying.
        let Phase::AwaitingTools { calls, .. } = &mut self.phase else {
            return Phase::NeedModel;
        };
        let results: Vec<_> = calls.iter_mut().filter_map(|c| c.result.take()).collect();
        let signal = calls
            .iter_mut()
            .find_map(|c| c.signal.take().map(|signal| (c.call.name.clone(), signal)));
        self.history_mut().push(Message::tool_results(results));
        match signal {
            Some((tool, Signal::Done { answer })) => {
                self.finishing(answer, StopReason::DoneTool { tool })
            }
            Some((tool, Signal::AskUser { question })) => {
                self.finishing(question, StopReason::AwaitingInput { tool })
            }
            None => Phase::NeedModel,
        }
    }

    /// The outcome of a run suspended for approvals.
    pub(super) fn suspended_outcome(&self) -> Option<Outcome> {
        let Phase::AwaitingTools { calls, .. } = &self.phase else { return None };
        let deferred: Vec<ToolCall> =
            calls.iter().filter(|c| c.is_waiting()).map(|c| ToolCall::clone(&c.call)).collect();
        (!deferred.is_empty() && calls.iter().all(|c| c.result.is_some() || c.is_waiting())).then(
            || self.outcome_with(String::new(), StopReason::AwaitingApproval { calls: deferred }),
        )
    }
}
