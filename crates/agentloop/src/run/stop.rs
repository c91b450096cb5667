//! When a run stops and why: finish reasons, done / loop-breaking tools, limits, the circuit
//! breaker, approvals.

use super::{PendingCall, Phase, Run};
use crate::event::ModelPurpose;
use crate::message::{
    Citation, FinishReason, Message, Part, Role, ToolCall, ToolResultContent, Usage,
};
use crate::provider::ProviderError;
use crate::terms::{
    LimitKind, Metrics, Outcome, Signal, StopReason, CONTEXT_LIMIT_TEXT, OUTPUT_TOOL,
};
use crate::tool::ToolOutput;
use std::sync::Arc;

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
            output: self.output.clone(),
            citations: self.answer_citations(),
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
            metrics: Metrics::default(),
            output: None,
            citations: Vec::new(),
        }
    }

    /// The citations of the last assistant message: the answer's sources.
    fn answer_citations(&self) -> Vec<Citation> {
        let last = self.history.iter().rev().find(|m| m.role == Role::Assistant);
        last.into_iter()
            .flat_map(|m| &m.content)
            .filter_map(|part| match part {
                Part::Citation(citation) => Some(citation.clone()),
                _ => None,
            })
            .collect()
    }

    fn failing(&self, error: String) -> Phase {
        self.failing_with(error.clone(), StopReason::ModelError { message: error })
    }

    fn last_text(&self) -> String {
        self.history.last().map(|m| m.text().trim().to_owned()).unwrap_or_default()
    }

    /// Removes the tool calls of the last (assistant) message: calls that will never run must
    /// not stay in the history unanswered. A message left empty is removed.
    pub(super) fn drop_unanswered_calls(&mut self) {
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
        // A new answer: an earlier one (sent back for a retry) is not the output.
        self.output = None;
        if let ModelPurpose::WindDown { limit } = purpose {
            // Tools were not offered; calls the model made anyway are not run.
            self.drop_unanswered_calls();
            self.wind_down_output(&text);
            let answer =
                if text.is_empty() { self.config.wind_down_fallback.clone() } else { text };
            return self.finishing(answer, StopReason::LimitReached { limit: limit.clone() });
        }
        if is_paused(finish) && !self.history.last().is_some_and(Message::has_tool_calls) {
            // The provider paused a long turn (Anthropic's `pause_turn`, server tools at
            // work): the turn, as it came, goes back last, and the model goes on with it. Each
            // continuation is an iteration, so the iteration limit bounds them.
            return Phase::NeedModel;
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
            return self.output_from_calls(calls);
        }
        let text = match self.output_from_text(text) {
            Ok(phase) => return phase,
            Err(text) => text,
        };
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

    /// What follows a failed model call: a non-retryable error, or a server that could not be
    /// reached, fails the run; a retryable one is tried again in a new iteration until
    /// `max_consecutive_model_errors`, where the run fails with the last error. This is the
    /// outer retry tier; the driver's attempts under the `RetryPolicy` ran before the call
    /// failed (`docs/PROVIDERS.md`, "Retries").
    pub(super) fn after_model_failure(
        &mut self,
        purpose: &ModelPurpose,
        error: &ProviderError,
    ) -> Phase {
        // The driver gives up on a server it cannot reach only once the run's budget for it
        // is spent (`RetryPolicy::with_unreachable_budget`): asking again would not help.
        if error.is_unreachable() {
            return self.failing(error.to_string());
        }
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
            let answer = format!("{CONTEXT_LIMIT_TEXT} ({message})");
            return self.finishing(answer, StopReason::ContextLimit);
        }
        if !error.is_retryable() {
            return self.failing(error.to_string());
        }
        if self.spent.consecutive_model_errors >= self.config.limits.max_consecutive_model_errors {
            // No answer was written, and none is made up: the run fails with the last error.
            let calls = self.spent.consecutive_model_errors;
            return self.failing_with(
                format!("the model failed {calls} calls in a row; the last: {error}"),
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
            // Another done tool (`task_complete`) of a run with an output: its answer is
            // taken as a text answer would be (valid, or sent back while retries are left).
            Some((tool, Signal::Done { answer })) if tool != OUTPUT_TOOL => {
                match self.output_from_text(answer) {
                    Ok(phase) => phase,
                    Err(answer) => self.finishing(answer, StopReason::DoneTool { tool }),
                }
            }
            Some((tool, Signal::Done { answer })) => {
                self.finishing(answer, StopReason::DoneTool { tool })
            }
            Some((tool, Signal::AskUser { question })) => {
                self.finishing(question, StopReason::AwaitingInput { tool })
            }
            None => Phase::NeedModel,
        }
    }

    /// The outcome of a run suspended for approvals — or for an operator, when a call waits
    /// because a crash left it in flight (`needs_attention`, which comes first).
    pub(super) fn suspended_outcome(&self) -> Option<Outcome> {
        let Phase::AwaitingTools { calls, .. } = &self.phase else { return None };
        if !calls.iter().all(|c| c.result.is_some() || c.is_waiting()) {
            return None;
        }
        let waiting = calls.iter().filter(|c| c.is_waiting());
        let attention: Vec<&PendingCall> =
            waiting.clone().filter(|c| c.attention.is_some()).collect();
        let stop_reason = match attention.first().and_then(|c| c.attention.clone()) {
            Some(reason) => {
                let calls = attention.iter().map(|c| ToolCall::clone(&c.call)).collect();
                StopReason::NeedsAttention { calls, reason }
            }
            None => {
                let calls: Vec<ToolCall> = waiting.map(|c| ToolCall::clone(&c.call)).collect();
                if calls.is_empty() {
                    return None;
                }
                StopReason::AwaitingApproval { calls }
            }
        };
        Some(self.outcome_with(String::new(), stop_reason))
    }
}

/// The finish reason of a turn the provider paused, to be continued (Anthropic's
/// `pause_turn`).
pub(crate) const PAUSE_TURN: &str = "pause_turn";

fn is_paused(finish: &FinishReason) -> bool {
    matches!(finish, FinishReason::Other(reason) if reason == PAUSE_TURN)
}
