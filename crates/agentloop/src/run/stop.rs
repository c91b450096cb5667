//! When a run stops and why: finish reasons, done / loop-breaking tools, limits.

use super::{LimitKind, PendingCall, Phase, Run};
use crate::event::ModelPurpose;
use crate::message::{FinishReason, Message, Part, ToolResultContent, Usage};
use crate::provider::ProviderError;
use crate::tool::ToolOutput;
use serde::{Deserialize, Serialize};

/// A control signal a tool returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// Why a run stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// A limit was reached; the answer was written by the wind-down call (or is the fallback).
    LimitReached {
        /// Which limit.
        limit: LimitKind,
    },
    /// The model ran out of context (finish reason `length`).
    ContextLimit,
    /// The provider filtered the output.
    ContentFiltered,
    /// The model failed (provider error, or finish reason `error`).
    ModelError {
        /// What went wrong.
        message: String,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The run.
    pub run_id: String,
    /// The final answer (or the question, for [`StopReason::AwaitingInput`]; the partial
    /// text for a filtered or truncated answer; empty after a failure or cancellation).
    pub answer: String,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Iterations run.
    pub iterations: u32,
    /// Tokens used by every model call of the run.
    pub usage: Usage,
}

impl Outcome {
    /// Whether the run produced what it was asked for: an answer, a done tool, or a question
    /// for the user.
    pub fn is_success(&self) -> bool {
        matches!(
            self.stop_reason,
            StopReason::Completed | StopReason::DoneTool { .. } | StopReason::AwaitingInput { .. }
        )
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
        Outcome {
            run_id: self.run_id.clone(),
            answer,
            stop_reason,
            iterations: self.iteration,
            usage: self.usage,
        }
    }

    fn finishing(&self, answer: String, stop_reason: StopReason) -> Phase {
        Phase::Finishing { outcome: self.outcome_with(answer, stop_reason), error: None }
    }

    fn failing(&self, error: String) -> Phase {
        Phase::Finishing {
            outcome: self
                .outcome_with(String::new(), StopReason::ModelError { message: error.clone() }),
            error: Some(error),
        }
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
        let history = self.history_mut();
        if let Some(last) = history.last_mut() {
            if last.has_tool_calls() {
                last.content.retain(|part| !matches!(part, Part::ToolCall(_)));
                if last.content.is_empty() {
                    history.pop();
                }
            }
        }
    }

    /// What follows a model response (already appended to the history).
    pub(super) fn after_response(&mut self, purpose: ModelPurpose, finish: &FinishReason) -> Phase {
        let text = self.last_text();
        if let ModelPurpose::WindDown { limit } = purpose {
            // Tools were not offered; calls the model made anyway are not run.
            self.drop_unanswered_calls();
            let answer =
                if text.is_empty() { self.config.wind_down_fallback.clone() } else { text };
            return self.finishing(answer, StopReason::LimitReached { limit });
        }
        let terminal = match finish {
            FinishReason::Error => {
                Some(self.failing("the model finished with reason 'error'".into()))
            }
            FinishReason::ContentFilter => {
                Some(self.finishing(text.clone(), StopReason::ContentFiltered))
            }
            // Compaction (forced on `length`) plugs in here; until then the run ends.
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
            .map(|m| m.tool_calls().cloned().collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .map(|call| PendingCall { call, started: false, result: None, signal: None })
            .collect();
        if !calls.is_empty() {
            return Phase::AwaitingTools { calls };
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

    /// What follows a failed model call.
    pub(super) fn after_model_failure(
        &self,
        purpose: ModelPurpose,
        error: &ProviderError,
    ) -> Phase {
        match purpose {
            ModelPurpose::WindDown { limit } => self.finishing(
                self.config.wind_down_fallback.clone(),
                StopReason::LimitReached { limit },
            ),
            ModelPurpose::Iteration => self.failing(error.to_string()),
        }
    }

    /// What follows once every tool call of the iteration has a result: the results join
    /// the history in call order, then the first control signal (in call order) decides.
    pub(super) fn after_tools(&mut self) -> Phase {
        let Phase::AwaitingTools { calls } = &self.phase else {
            return Phase::NeedModel;
        };
        let results: Vec<_> = calls.iter().filter_map(|c| c.result.clone()).collect();
        let signal =
            calls.iter().find_map(|c| c.signal.clone().map(|signal| (c.call.name.clone(), signal)));
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
}
