//! The fold: how each journal event changes the run. Everything here is deterministic: the
//! same journal always gives the same run.

use super::breaker::Verdict;
use super::{
    CallApproval, Decision, Phase, Run, RunError, StallAction, StopReason, ToolFailureMode,
};
use crate::event::{Event, ForkEdit};
use crate::message::{Message, ToolResult, ToolResultContent};
use crate::run::Signal;
use crate::terms::{ApprovalRecord, AuditEntry};
use crate::tool::ToolError;
use serde_json::Value;
use std::sync::Arc;

impl Run {
    /// Applies one journal event. Transient events are ignored.
    pub fn apply(&mut self, event: &Event) -> Result<(), RunError> {
        let unexpected = |what, phase: &Phase| RunError::Unexpected { what, phase: phase.name() };
        match event {
            Event::RunStarted { run_id, config, input } => {
                if !matches!(self.phase, Phase::New) {
                    return Err(unexpected("run_started", &self.phase));
                }
                self.run_id.clone_from(run_id);
                self.config = (**config).clone();
                self.context.pinned = Run::pinned_of(input);
                self.history = Arc::new(input.clone());
                self.phase = Phase::NeedModel;
            }
            Event::IterationStarted { iteration, at_ms } => match self.phase {
                Phase::NeedModel => {
                    self.iteration = *iteration;
                    self.iteration_started_ms = Some(*at_ms);
                    self.awaiting_request = true;
                }
                _ => return Err(unexpected("iteration_started", &self.phase)),
            },
            Event::IterationCompleted { iteration, duration_ms } => {
                self.iteration_started_ms = None;
                let metrics =
                    super::IterationMetrics { iteration: *iteration, duration_ms: *duration_ms };
                self.metrics.iterations.push(metrics);
            }
            Event::LimitReached { limit } => self.wind_down = Some(limit.clone()),
            Event::ModelRequested { purpose, .. } => match self.phase {
                Phase::NeedModel => {
                    self.context.redo_iteration = false;
                    self.awaiting_request = false;
                    self.phase = Phase::AwaitingModel { purpose: purpose.clone() };
                }
                _ => return Err(unexpected("model_requested", &self.phase)),
            },
            Event::ModelResponded {
                message, finish_reason, usage, duration_ms, provider, ..
            } => {
                let Phase::AwaitingModel { purpose } = &self.phase else {
                    return Err(unexpected("model_responded", &self.phase));
                };
                let purpose = purpose.clone();
                self.spent.usage += **usage;
                if let Some(price) = self.config.price_of(provider.as_deref()) {
                    self.spent.cost_usd += price.cost(usage);
                }
                self.spent.consecutive_model_errors = 0;
                self.metrics.model_calls += 1;
                self.metrics.model_time_ms += duration_ms;
                self.note = None;
                self.history_mut().push(message.clone());
                self.phase = self.after_response(&purpose, finish_reason, usage);
            }
            Event::ModelFailed { error, .. } => {
                let Phase::AwaitingModel { purpose } = &self.phase else {
                    return Err(unexpected("model_failed", &self.phase));
                };
                let purpose = purpose.clone();
                self.metrics.model_calls += 1;
                self.metrics.model_errors += 1;
                self.spent.consecutive_model_errors += 1;
                self.phase = self.after_model_failure(&purpose, error);
            }
            Event::ApprovalRequested { call, arguments } => {
                self.pending_mut(&call.id)?.approval = CallApproval::Deferred;
                let entry = self.audit_entry(&call.id, &call.name, || Arc::clone(arguments));
                entry.approval = ApprovalRecord::Pending;
            }
            Event::AttentionNeeded { call_id, reason } => {
                let pending = self.pending_mut(call_id)?;
                if !pending.started || pending.result.is_some() {
                    return Err(RunError::UnknownCall(call_id.clone()));
                }
                pending.approval = CallApproval::Deferred;
                pending.attention = Some(reason.clone());
            }
            Event::ApprovalDecided { call_id, decision, .. } => {
                let pending = self.pending_mut(call_id)?;
                pending.attention = None;
                let name = pending.call.name.clone();
                match decision {
                    Decision::Approve => {
                        pending.approval = CallApproval::Approved;
                        self.audit_entry(call_id, &name, Arc::default).approval =
                            ApprovalRecord::Approved;
                    }
                    Decision::Reject { reason } => {
                        let error = ToolError::Rejected(reason.clone());
                        let result = ToolResult::error(call_id, error.to_model_text());
                        self.on_tool_result(&name, &result, 0, Some(&error), None)?;
                    }
                    Decision::SetResult { result } => {
                        let output = crate::tool::ToolOutput::Value(result.clone());
                        let (content, _) = super::stop::tool_output(output);
                        let result = ToolResult::ok(call_id, content);
                        self.on_tool_result(&name, &result, 0, None, None)?;
                    }
                }
                if let Phase::AwaitingTools { suspended, .. } = &mut self.phase {
                    *suspended = false;
                }
            }
            Event::StallDetected { tool, count, action } => {
                match action {
                    StallAction::Warn => {}
                    StallAction::Note => self.note = Some(self.config.breaker.stall_note.clone()),
                    StallAction::Stop => {
                        let error = format!("the model called '{tool}' with the same arguments {count} times in a row");
                        self.halt(error, StopReason::Stalled { tool: tool.clone(), count: *count });
                    }
                }
            }
            Event::ToolStarted { call, arguments } => {
                let pending = self.pending_mut(&call.id)?;
                // Started before: the process died during the call and a resumed run runs it
                // again (with the same idempotency key). It counts once, against every budget
                // and for the breaker.
                let again = pending.started;
                pending.started = true;
                let approved = pending.approval == CallApproval::Approved;
                if !again {
                    pending.ensure_key(None);
                    // The call starts once: its key moves to the breaker.
                    let key = std::mem::take(&mut pending.key);
                    self.spent.tool_calls += 1;
                    count(&mut self.spent.tool_calls_by_name, &call.name);
                    self.metrics.tool_calls += 1;
                    count(&mut self.metrics.tool_calls_by_name, &call.name);
                    self.breaker.on_call(&self.config.breaker, &call.name, key);
                }
                let entry = self.audit_entry(&call.id, &call.name, Arc::default);
                entry.arguments = Arc::clone(arguments);
                entry.approval =
                    if approved { ApprovalRecord::Approved } else { ApprovalRecord::Automatic };
            }
            Event::ToolCompleted {
                name, result, duration_ms, control, usage, cost_usd, ..
            } => {
                self.spend(usage.as_deref(), *cost_usd);
                self.on_tool_result(name, result, *duration_ms, None, control.as_deref().cloned())?;
            }
            Event::ToolFailed { name, result, error, duration_ms, usage, cost_usd, .. } => {
                self.spend(usage.as_deref(), *cost_usd);
                self.on_tool_result(name, result, *duration_ms, Some(&**error), None)?;
            }
            Event::ToolTimedOut { name, result, timeout_ms, usage, cost_usd, .. } => {
                self.spend(usage.as_deref(), *cost_usd);
                let error = ToolError::Timeout(*timeout_ms);
                self.on_tool_result(name, result, *timeout_ms, Some(&error), None)?;
            }
            Event::CompactionStarted { reason, cut, tokens_before } => {
                match (&self.phase, self.context.legacy_length_cut.take()) {
                    (Phase::NeedModel, _) => {}
                    (Phase::Finishing { .. }, Some(index)) => {
                        // A journal written before `OutputLimit`: that build compacted after
                        // an output-limit `length`, without the cut-off message. Follow it.
                        self.invalidate_from(index);
                        self.history_mut().truncate(index);
                    }
                    _ => return Err(unexpected("compaction_started", &self.phase)),
                }
                self.context.compactions += 1;
                self.context.pending_compaction = None;
                self.phase =
                    Phase::Compacting { reason: *reason, cut: *cut, tokens_before: *tokens_before };
            }
            Event::CompactionCompleted { cut, summary, usage, .. } => {
                let Phase::Compacting { reason, .. } = self.phase else {
                    return Err(unexpected("compaction_completed", &self.phase));
                };
                self.spent.usage += *usage;
                if let Some(price) = &self.config.price {
                    self.spent.cost_usd += price.cost(usage);
                }
                self.context.compaction =
                    Some(crate::context::Compaction { cut: *cut, summary: summary.clone() });
                self.context.redo_iteration = reason != crate::context::CompactionReason::Threshold;
                self.invalidate_from(self.history.len());
                self.phase = Phase::NeedModel;
            }
            Event::CompactionFailed { error } => {
                let Phase::Compacting { reason, .. } = self.phase else {
                    return Err(unexpected("compaction_failed", &self.phase));
                };
                self.phase = match reason {
                    // Going on without the compaction is still possible.
                    crate::context::CompactionReason::Threshold => Phase::NeedModel,
                    _ => {
                        let answer =
                            format!("{} (compaction failed: {error})", super::CONTEXT_LIMIT_TEXT);
                        self.finishing(answer, StopReason::ContextLimit)
                    }
                };
            }
            Event::Paused { reason } => self.paused = Some(reason.clone()),
            Event::Resumed => self.paused = None,
            Event::ContinuationRequested { prompt } => {
                if !matches!(self.phase, Phase::Finishing { .. }) {
                    return Err(unexpected("continuation_requested", &self.phase));
                }
                self.context.legacy_length_cut = None;
                self.continuations += 1;
                self.history_mut().push(Message::user(prompt.clone()));
                self.phase = Phase::NeedModel;
            }
            Event::InputProvided { message } => {
                if self.awaiting_input().is_none() {
                    return Err(unexpected("input_provided", &self.phase));
                }
                self.history_mut().push(message.clone());
                self.phase = Phase::NeedModel;
            }
            Event::RunForked { edit, .. } => match edit {
                None => {}
                Some(ForkEdit::ToolResult { call_id, result }) => {
                    self.fork_tool_result(call_id, result)?;
                }
                Some(ForkEdit::UserMessage { text }) => self.fork_user_message(text)?,
                Some(ForkEdit::ModelAnswer { text }) => self.fork_model_answer(text)?,
            },
            Event::RunSuspended { .. } => match &mut self.phase {
                Phase::AwaitingTools { suspended, .. } => *suspended = true,
                other => return Err(unexpected("run_suspended", other)),
            },
            Event::RunFinished { outcome }
            | Event::RunFailed { outcome, .. }
            | Event::RunCancelled { outcome, .. } => {
                self.context.legacy_length_cut = None;
                self.answer_open_calls();
                self.phase = Phase::Finished { outcome: (**outcome).clone() };
            }
            _ => {}
        }
        Ok(())
    }

    /// The audit entry of a call of the current iteration (created on first sight). Entries
    /// are in iteration order, so only the current iteration's tail is searched.
    fn audit_entry(
        &mut self,
        call_id: &str,
        tool: &str,
        arguments: impl FnOnce() -> Arc<Value>,
    ) -> &mut AuditEntry {
        // Copies the trail only if an outcome still shares it (a resumed suspended run).
        let audit = Arc::make_mut(&mut self.metrics.audit);
        let iteration = self.iteration;
        let found = audit
            .iter()
            .rev()
            .take_while(|e| e.iteration == iteration)
            .position(|e| e.call_id == call_id)
            .map(|from_end| audit.len() - 1 - from_end);
        let index = match found {
            Some(index) => index,
            None => {
                audit.push(AuditEntry {
                    iteration,
                    call_id: call_id.to_owned(),
                    tool: tool.to_owned(),
                    arguments: arguments(),
                    result: None,
                    is_error: false,
                    duration_ms: 0,
                    approval: ApprovalRecord::Automatic,
                });
                audit.len() - 1
            }
        };
        &mut audit[index]
    }

    /// One tool result: stores it, updates audit and metrics, applies the breaker and the
    /// failure mode, and moves on once every call of the iteration has its result.
    fn on_tool_result(
        &mut self,
        name: &str,
        result: &ToolResult,
        duration_ms: u64,
        error: Option<&ToolError>,
        signal: Option<Signal>,
    ) -> Result<(), RunError> {
        if self.is_ending() {
            // A halt already answered this iteration's calls.
            return Ok(());
        }
        if let ToolResultContent::Stored(stored) = &result.content {
            return Err(RunError::UnloadedOutput {
                call_id: result.call_id.clone(),
                artifact: stored.artifact.clone(),
            });
        }
        let pending = self.pending_mut(&result.call_id)?;
        let started = pending.started;
        // A call that started has its audit entry already; others (refused, skipped,
        // rejected) are audited with the arguments the model sent (wrapped when not JSON, as
        // a started call's are).
        let raw = (!started).then(|| pending.call.arguments.clone());
        let trimmed = self.trim_result(name, result.clone());
        let (content, is_error) = (trimmed.content.clone(), trimmed.is_error);
        let pending = self.pending_mut(&result.call_id)?;
        pending.result = Some(trimmed);
        pending.signal = signal;

        let arguments = || {
            Arc::new(
                raw.map(|raw| crate::tool::raw_arguments::parse_or_wrap(&raw)).unwrap_or_default(),
            )
        };
        let entry = self.audit_entry(&result.call_id, name, arguments);
        entry.result = Some(content);
        entry.is_error = is_error;
        entry.duration_ms = duration_ms;
        if let Some(ToolError::Rejected(reason)) = error {
            entry.approval = ApprovalRecord::Rejected { reason: reason.clone() };
        }
        self.metrics.tool_time_ms += duration_ms;
        if is_error {
            self.metrics.tool_errors += 1;
        }
        // Only calls that really ran count for the breaker and the failure mode.
        if started {
            let error_text = error.map(ToString::to_string);
            let verdict = self.breaker.on_result(&self.config.breaker, name, error_text.as_deref());
            if let Verdict::Open { error, count } = verdict {
                let message = format!("tool '{name}' failed {count} times in a row with: {error}");
                self.halt(message, StopReason::CircuitOpen { tool: name.to_owned(), error, count });
            } else if let (Some(error), ToolFailureMode::Fail) =
                (error_text, self.config.breaker.tool_failure_mode)
            {
                let message = format!("tool '{name}' failed: {error}");
                self.halt(message, StopReason::ToolFailed { tool: name.to_owned(), error });
            }
        }
        if let Phase::AwaitingTools { calls, .. } = &self.phase {
            if calls.iter().all(|c| c.result.is_some()) {
                self.phase = self.after_tools();
            }
        }
        Ok(())
    }

    /// Adds what the work of a tool call used (a sub-agent's run, priced at its own price) to
    /// the run's usage and cost: it counts against the budgets like the run's own calls.
    fn spend(&mut self, usage: Option<&crate::message::Usage>, cost_usd: Option<f64>) {
        if let Some(usage) = usage {
            self.spent.usage += *usage;
        }
        if let Some(cost) = cost_usd.filter(|cost| cost.is_finite()) {
            self.spent.cost_usd += cost;
        }
    }

    /// Ends the run with a failure decided by the fold (breaker, failure mode, stall).
    fn halt(&mut self, error: String, stop_reason: StopReason) {
        if self.is_ending() {
            return;
        }
        self.answer_open_calls();
        self.phase = self.failing_with(error, stop_reason);
    }
}

/// Adds one to a per-name counter (allocating the name only the first time).
fn count(counts: &mut std::collections::BTreeMap<String, u32>, name: &str) {
    match counts.get_mut(name) {
        Some(n) => *n += 1,
        None => {
            counts.insert(name.to_owned(), 1);
        }
    }
}

impl Run {
    /// A fork's new result for a call the model has not seen: between the call's result and
    /// the next model call.
    fn fork_tool_result(&mut self, call_id: &str, result: &Value) -> Result<(), RunError> {
        if !matches!(self.phase, Phase::NeedModel) {
            return Err(RunError::Unexpected {
                what: "a fork's tool result",
                phase: self.phase.name(),
            });
        }
        let last_assistant =
            self.history.iter().rposition(|m| m.role == crate::message::Role::Assistant);
        let from = last_assistant.map_or(0, |i| i + 1);
        let found = self.history[from..]
            .iter()
            .position(|m| m.tool_results_iter().any(|r| r.call_id == call_id));
        let Some(offset) = found else { return Err(RunError::UnknownCall(call_id.to_owned())) };
        let index = from + offset;
        let content = match result {
            Value::String(text) => ToolResultContent::Text(text.clone()),
            other => ToolResultContent::Json(other.clone()),
        };
        for part in &mut self.history_mut()[index].content {
            if let crate::message::Part::ToolResult(tool_result) = part {
                if tool_result.call_id == call_id {
                    *tool_result = ToolResult {
                        call_id: call_id.to_owned(),
                        content: content.clone(),
                        is_error: false,
                    };
                }
            }
        }
        self.invalidate_from(index);
        Ok(())
    }

    /// A fork's user message: between model calls, or after the run's end (it is open again).
    fn fork_user_message(&mut self, text: &str) -> Result<(), RunError> {
        match self.phase {
            Phase::NeedModel | Phase::Finished { .. } => {
                self.history_mut().push(Message::user(text));
                self.wind_down = None;
                self.phase = Phase::NeedModel;
                Ok(())
            }
            _ => Err(RunError::Unexpected {
                what: "a fork's user message",
                phase: self.phase.name(),
            }),
        }
    }

    /// A fork's model answer: after a run that finished with the model's answer, which it
    /// replaces (in the history the model sees next and in the outcome).
    fn fork_model_answer(&mut self, text: &str) -> Result<(), RunError> {
        let unexpected = |phase: &Phase| RunError::Unexpected {
            what: "a fork's model answer (only after a run that finished with one)",
            phase: phase.name(),
        };
        let completed = matches!(
            &self.phase,
            Phase::Finished { outcome } if outcome.stop_reason == StopReason::Completed
        );
        let last = self.history.len().checked_sub(1);
        let answered = last.and_then(|i| self.history.get(i)).is_some_and(|message| {
            message.role == crate::message::Role::Assistant && !message.has_tool_calls()
        });
        let (true, true, Some(index)) = (completed, answered, last) else {
            return Err(unexpected(&self.phase));
        };
        self.history_mut()[index] = Message::assistant(text);
        self.invalidate_from(index);
        if let Phase::Finished { outcome } = &mut self.phase {
            outcome.answer = text.to_owned();
            outcome.output = None;
            outcome.citations.clear();
        }
        Ok(())
    }
}
