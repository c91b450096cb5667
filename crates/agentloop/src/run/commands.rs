//! The commands the driver feeds the run: results of I/O, hook decisions, human decisions,
//! control. Each checks that it fits the state, then records events.

use super::{
    millis, CallApproval, Decision, Outcome, PendingCall, Phase, Run, RunError, StopReason,
};
use crate::event::{Event, StepStatus};
use crate::message::{Message, Part, ToolResult, Usage};
use crate::provider::{ModelResponse, ProviderError};
use crate::run::breaker::Verdict;
use crate::run::StallAction;
use crate::tool::{CallReport, ToolError, ToolOutput};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Whether a tool call may run (the answer of [`Run::gate_tool`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Run it.
    Run,
    /// Do not: the run handled it. A limit or the stall rule refused it (the call has an
    /// error result, or the run is ending), or it is a run-internal tool (`read_tool_output`)
    /// that the run answered itself.
    Handled,
}

impl Run {
    /// Feeds the model's response.
    pub fn model_responded(
        &mut self,
        response: ModelResponse,
        duration: Duration,
    ) -> Result<(), RunError> {
        self.expect_awaiting_model("model_responded")?;
        self.calibrate(response.usage.input);
        let mut message = response.message;
        self.make_call_ids_unique(&mut message);
        let notices = (!self.quiet).then(|| (message.reasoning_text(), message.text()));
        self.record(Event::ModelResponded {
            iteration: self.iteration,
            message,
            finish_reason: response.finish_reason,
            usage: Box::new(response.usage),
            duration_ms: millis(duration),
            response_id: response.id,
            response_model: response.model,
            provider: response.provider,
        });
        if let Some((reasoning, text)) = notices {
            if !reasoning.is_empty() {
                self.outbox.push(Event::Reasoning { text: reasoning });
            }
            let continues = matches!(self.phase, Phase::AwaitingTools { .. } | Phase::NeedModel);
            if continues && !text.trim().is_empty() {
                self.outbox.push(Event::Text { text });
            }
            if let Phase::AwaitingTools { calls, .. } = &self.phase {
                let calls = calls.iter().map(|c| Arc::clone(&c.call)).collect();
                self.outbox.push(Event::ToolDetected { calls });
            }
        }
        self.close_iteration();
        Ok(())
    }

    /// Gives each tool call of `message` an id no other call of the run has. A server that
    /// sends no ids gets `call_0`, `call_1`, … in every response (and some servers repeat
    /// their own): a repeated id would give two calls one idempotency key (`run_id:call_id`)
    /// and the model two results under one id. A repeated id gets a suffix (`call_0.2`),
    /// before the response is journaled, so the journal, the history and a resumed run all
    /// have the new one. Ids that are already unique (every real provider's) stay as they are.
    /// The run's calls are its audit trail (every call that started, was deferred or was
    /// refused; rebuilt when the run is folded from its journal, kept through compaction).
    fn make_call_ids_unique(&self, message: &mut Message) {
        if !message.has_tool_calls() {
            return;
        }
        let audit = &self.metrics.audit;
        let content = &mut message.content;
        for index in 0..content.len() {
            let (earlier, rest) = content.split_at_mut(index);
            let Some(Part::ToolCall(call)) = rest.first_mut() else { continue };
            let taken = |id: &str| {
                earlier.iter().any(|part| matches!(part, Part::ToolCall(c) if c.id == id))
                    || audit.iter().any(|entry| entry.call_id == id)
            };
            if taken(&call.id) {
                let mut n = 2_u32;
                let mut candidate = format!("{}.{n}", call.id);
                while taken(&candidate) {
                    n += 1;
                    candidate = format!("{}.{n}", call.id);
                }
                call.id = candidate;
            }
        }
    }

    /// Feeds the summary of a compaction (see [`Step::Compact`](super::Step::Compact)).
    pub fn compacted(&mut self, response: ModelResponse) -> Result<(), RunError> {
        let Phase::Compacting { cut, tokens_before, .. } = self.phase else {
            return Err(RunError::Unexpected { what: "compacted", phase: self.phase.name() });
        };
        let summary = response.message.text().trim().to_owned();
        if summary.is_empty() {
            return self.compaction_failed("the summarisation call returned no text".into());
        }
        let tokens_after = self.estimate_after(cut, &summary);
        self.record(Event::CompactionCompleted {
            cut,
            summary,
            tokens_before,
            tokens_after,
            usage: response.usage,
        });
        Ok(())
    }

    /// Feeds a failed compaction.
    pub fn compaction_failed(&mut self, error: String) -> Result<(), RunError> {
        if !matches!(self.phase, Phase::Compacting { .. }) {
            return Err(RunError::Unexpected {
                what: "compaction_failed",
                phase: self.phase.name(),
            });
        }
        self.record(Event::CompactionFailed { error });
        Ok(())
    }

    /// Feeds a failed model call (after the driver's retries).
    pub fn model_failed(&mut self, error: ProviderError) -> Result<(), RunError> {
        self.expect_awaiting_model("model_failed")?;
        self.record(Event::ModelFailed { iteration: self.iteration, error });
        self.close_iteration();
        Ok(())
    }

    /// Feeds a model call that its deadline cut off: the call fails with a timeout. A
    /// wind-down call past its budget ends the run with the fallback answer, as any failed
    /// wind-down does. Any other call was cut by the run's time limit: the run ends at that
    /// limit at once, without a wind-down call — the model is what stalled, and a wind-down
    /// would wait on it again.
    pub fn time_limit_passed(&mut self) -> Result<(), RunError> {
        self.expect_awaiting_model("time_limit_passed")?;
        let winding_down = self.is_winding_down();
        let message = if winding_down {
            format!(
                "the wind-down call took longer than its {} s",
                self.config.wind_down_timeout().as_secs_f64()
            )
        } else {
            "the run's time limit passed during the model call".to_owned()
        };
        self.model_failed(ProviderError::Timeout { message })?;
        if !winding_down && !self.is_ending() {
            let limit = crate::run::LimitKind::Duration;
            if self.wind_down.is_none() {
                self.record(Event::LimitReached { limit: limit.clone() });
            }
            let answer = self.config.wind_down_fallback.clone();
            self.phase = self.finishing(answer, StopReason::LimitReached { limit });
        }
        Ok(())
    }

    /// Checks the budget and the stall rule before a tool call. A refused call gets its
    /// error result (or the run ends) here; the driver then skips it.
    pub fn gate_tool(&mut self, call_id: &str) -> Result<Gate, RunError> {
        self.gate_tool_with(call_id, None)
    }

    /// [`gate_tool`](Self::gate_tool) with the call's argument text already parsed by
    /// [`crate::tool::parse_arguments`] (`None`: not parsed, or not JSON), so that the stall
    /// rule does not parse it again.
    pub(crate) fn gate_tool_with(
        &mut self,
        call_id: &str,
        parsed: Option<&Value>,
    ) -> Result<Gate, RunError> {
        let pending = self.pending(call_id)?;
        if self.is_internal_tool(&pending.call.name) {
            let call = Arc::clone(&pending.call);
            let arguments = crate::tool::parse_arguments(&call.arguments).ok();
            self.tool_started(call_id, arguments)?;
            let result = self
                .read_tool_output(&call.arguments)
                .map(|page| ToolOutput::Value(page.into()))
                .map_err(ToolError::Failed);
            self.tool_finished(call_id, result, Duration::ZERO)?;
            return Ok(Gate::Handled);
        }
        if pending.started {
            // Interrupted by a crash and run again after a resume: it was gated (and counted)
            // when it first started.
            return Ok(Gate::Run);
        }
        let name = &pending.call.name;
        if let Some(limit) = self.config.limits.before_tool_call(name, &self.spent, self.elapsed_ms)
        {
            if self.wind_down.is_none() {
                self.record(Event::LimitReached { limit: limit.clone() });
            }
            let error = ToolError::NotRun(format!("the run reached its {limit}"));
            self.tool_finished(call_id, Err(error), Duration::ZERO)?;
            return Ok(Gate::Handled);
        }
        // Peek: the breaker records the call only when it starts.
        let breaker = &self.config.breaker;
        if breaker.max_repeated_calls == 0 {
            // The rule is off: nothing to compare.
            return Ok(Gate::Run);
        }
        self.pending_mut(call_id)?.ensure_key(parsed);
        let pending = self.pending(call_id)?;
        let (name, key) = (&pending.call.name, &pending.key);
        let breaker = &self.config.breaker;
        if let Verdict::Stalled { count } = self.breaker.would_stall(breaker, name, key) {
            let action = breaker.stall_action;
            let tool = name.clone();
            self.record(Event::StallDetected { tool, count, action });
            if action == StallAction::Stop {
                return Ok(Gate::Handled);
            }
        }
        Ok(Gate::Run)
    }

    /// Records that a tool call starts. `arguments` is the argument JSON it runs with (after
    /// hooks), or `None` when the argument text was not JSON (the event then carries it
    /// [wrapped](crate::tool::raw_arguments::wrap)). Returns the arguments as journaled (shared
    /// with the event).
    pub fn tool_started(
        &mut self,
        call_id: &str,
        arguments: Option<Value>,
    ) -> Result<Arc<Value>, RunError> {
        let call = Arc::clone(&self.pending(call_id)?.call);
        let arguments = Arc::new(crate::tool::raw_arguments::or_wrap(arguments, &call.arguments));
        self.notice(|| Event::StepStarted { call_id: call.id.clone(), name: call.name.clone() });
        self.record(Event::ToolStarted { call, arguments: Arc::clone(&arguments) });
        Ok(arguments)
    }

    /// Records that an approval hook deferred the call to a human. Once every other call of
    /// the iteration is done, the run suspends with `awaiting_approval`.
    pub fn tool_deferred(&mut self, call_id: &str, arguments: Value) -> Result<(), RunError> {
        let call = Arc::clone(&self.pending(call_id)?.call);
        self.record(Event::ApprovalRequested { call, arguments: Arc::new(arguments) });
        Ok(())
    }

    /// Holds a call a crash left in flight (started, no result) for an operator instead of
    /// running it again (`attention_needed`): its tool is not safe to retry. The run then
    /// suspends with [`StopReason::NeedsAttention`] once its other calls are done.
    pub fn hold_for_attention(
        &mut self,
        call_id: &str,
        reason: impl Into<String>,
    ) -> Result<(), RunError> {
        let pending = self.pending(call_id)?;
        if !pending.started || pending.result.is_some() || pending.is_waiting() {
            return Err(RunError::UnknownCall(call_id.to_owned()));
        }
        let (call_id, reason) = (call_id.to_owned(), reason.into());
        self.record(Event::AttentionNeeded { call_id, reason });
        Ok(())
    }

    /// Records a human's decision on a deferred call. After the decisions, the driver
    /// continues the run: approved calls run, rejected ones have their error result.
    pub fn decide(&mut self, call_id: &str, decision: Decision) -> Result<(), RunError> {
        self.decide_by(call_id, decision, None)
    }

    /// [`decide`](Self::decide), recording who decided (`by`, as the caller names them).
    pub fn decide_by(
        &mut self,
        call_id: &str,
        decision: Decision,
        by: Option<String>,
    ) -> Result<(), RunError> {
        if !self.pending(call_id)?.is_waiting() {
            return Err(RunError::UnknownCall(call_id.to_owned()));
        }
        self.record(Event::ApprovalDecided { call_id: call_id.to_owned(), decision, by });
        self.close_iteration();
        Ok(())
    }

    /// Feeds a tool call's result.
    pub fn tool_finished(
        &mut self,
        call_id: &str,
        result: Result<ToolOutput, ToolError>,
        duration: Duration,
    ) -> Result<(), RunError> {
        self.tool_finished_reporting(call_id, result, duration, CallReport::default())
    }

    /// [`tool_finished`](Self::tool_finished), with what the call reported of the work it
    /// started: the tokens and cost it used (a sub-agent's run; see
    /// [`ToolContext::report_usage`](crate::tool::ToolContext::report_usage)), journaled with
    /// the result and added to the run's usage and cost, and the remote task it ran as
    /// ([`ToolContext::report_remote`](crate::tool::ToolContext::report_remote)), journaled with
    /// the result.
    pub fn tool_finished_reporting(
        &mut self,
        call_id: &str,
        result: Result<ToolOutput, ToolError>,
        duration: Duration,
        report: CallReport,
    ) -> Result<(), RunError> {
        let name = self.pending(call_id)?.call.name.clone();
        let duration_ms = millis(duration);
        let CallReport { usage, cost_usd, remote, .. } = report;
        let usage = Some(usage).filter(|usage| *usage != Usage::default()).map(Box::new);
        let cost_usd = Some(cost_usd).filter(|cost| *cost != 0.0);
        let remote = remote.map(Box::new);
        let (event, status) = match result {
            Ok(output) => {
                let (content, signal) = super::stop::tool_output(output);
                let result = ToolResult::ok(call_id, content);
                let control = signal.map(Box::new);
                let event = Event::ToolCompleted {
                    name,
                    result,
                    duration_ms,
                    control,
                    usage,
                    cost_usd,
                    remote,
                };
                (event, StepStatus::Ok)
            }
            Err(ToolError::Timeout(timeout_ms)) => {
                let result =
                    ToolResult::error(call_id, ToolError::Timeout(timeout_ms).to_model_text());
                let event =
                    Event::ToolTimedOut { name, result, timeout_ms, usage, cost_usd, remote };
                (event, StepStatus::Error)
            }
            Err(error) => {
                let result = ToolResult::error(call_id, error.to_model_text());
                let error = Box::new(error);
                let event =
                    Event::ToolFailed { name, result, error, duration_ms, usage, cost_usd, remote };
                (event, StepStatus::Error)
            }
        };
        self.record(event);
        self.notice(|| Event::StepCompleted { call_id: call_id.to_owned(), status });
        self.close_iteration();
        Ok(())
    }

    /// Asks the run to pause (`Some(reason)`) or to go on (`None`). The run decides where:
    /// [`next_step`](Self::next_step) pauses between iterations ([`Step::Paused`]), and
    /// between tool calls the driver asks [`pause_point`](Self::pause_point) before it would
    /// start the next one. Journals nothing by itself.
    ///
    /// [`Step::Paused`]: super::Step::Paused
    pub fn request_pause(&mut self, reason: Option<String>) {
        self.pause_request = reason;
    }

    /// Whether a pause is requested: a driver starts no further tool call of the iteration.
    pub fn pause_requested(&self) -> bool {
        self.pause_request.is_some()
    }

    /// A safe point: journals `paused` when a pause is requested (unless the run is ending),
    /// `resumed` when the request was withdrawn from a paused run. Whether the run is paused
    /// now (the driver then waits for the request to change).
    pub fn pause_point(&mut self) -> bool {
        match (&self.pause_request, &self.paused) {
            (Some(reason), None) if !self.is_ending() => {
                let reason = reason.clone();
                self.record(Event::Paused { reason });
            }
            (None, Some(_)) => self.record(Event::Resumed),
            _ => {}
        }
        self.paused.is_some()
    }

    /// Pauses the run now (the caller knows it is at a safe point): requests the pause and
    /// journals `paused`. Does nothing if it is paused already or ending.
    pub fn pause(&mut self, reason: impl Into<String>) {
        self.request_pause(Some(reason.into()));
        self.pause_point();
    }

    /// Resumes a paused run now: withdraws the request and journals `resumed`. Does nothing
    /// if it is not paused.
    pub fn resume(&mut self) {
        self.request_pause(None);
        self.pause_point();
    }

    /// Instead of ending, continues with `prompt` as a new user message (a hook found work
    /// left). Returns `false` (and does nothing) when the run is not finishing with an answer
    /// or the continuation budget (`max_continuations`) is spent.
    pub fn continue_with(&mut self, prompt: impl Into<String>) -> bool {
        let answered = matches!(
            &self.phase,
            Phase::Finishing { outcome, error: None }
                if matches!(outcome.stop_reason, StopReason::Completed | StopReason::DoneTool { .. })
        );
        if !answered || self.continuations >= self.config.max_continuations {
            return false;
        }
        self.record(Event::ContinuationRequested { prompt: prompt.into() });
        true
    }

    /// Answers the question the run stopped to ask ([`awaiting_input`](Self::awaiting_input)):
    /// `message` joins the history as the user's and the run goes on — the same run, with
    /// the budgets it has left. Refused when the run does not wait for an answer.
    pub fn provide_input(&mut self, message: Message) -> Result<(), RunError> {
        if self.awaiting_input().is_none() {
            return Err(RunError::Unexpected { what: "input_provided", phase: self.phase.name() });
        }
        self.record(Event::InputProvided { message });
        Ok(())
    }

    /// Records the end of a finishing run with `outcome` (the decided one, or a hook's
    /// rewrite). Does nothing unless the run is finishing.
    pub fn finish(&mut self, outcome: Outcome) {
        let Phase::Finishing { error, .. } = &self.phase else { return };
        let event = match error.clone() {
            Some(error) => Event::RunFailed { error, outcome: Box::new(outcome) },
            None => Event::RunFinished { outcome: Box::new(outcome) },
        };
        self.record(event);
    }

    /// Cancels the run. Open tool calls get error results, so the history stays valid for a
    /// later turn. Does nothing once the run is finished — unless it finished waiting for
    /// the user's answer (`awaiting_input`): that run is cancelled, and will not go on.
    pub fn cancel(&mut self, reason: impl Into<String>) {
        if self.is_finished() && self.awaiting_input().is_none() {
            return;
        }
        let reason = reason.into();
        self.close_iteration();
        let outcome =
            self.outcome_with(String::new(), StopReason::Cancelled { reason: reason.clone() });
        self.record(Event::RunCancelled { reason, outcome: Box::new(outcome) });
    }

    /// Ends the run with a failure the driver detected. Does nothing once it is finished.
    pub fn fail(&mut self, error: impl Into<String>) {
        let error = error.into();
        self.fail_with(error.clone(), StopReason::Internal { message: error });
    }

    /// Ends the run because a critical hook failed.
    pub fn fail_hook(&mut self, hook: impl Into<String>, error: impl Into<String>) {
        let (hook, error) = (hook.into(), error.into());
        self.fail_with(
            format!("hook '{hook}' failed: {error}"),
            StopReason::HookFailed { hook, error },
        );
    }

    fn fail_with(&mut self, error: String, stop_reason: StopReason) {
        if self.is_finished() {
            return;
        }
        self.close_iteration();
        let outcome = self.outcome_with(String::new(), stop_reason);
        self.record(Event::RunFailed { error, outcome: Box::new(outcome) });
    }

    pub(super) fn expect_awaiting_model(&self, what: &'static str) -> Result<(), RunError> {
        match self.phase {
            Phase::AwaitingModel { .. } => Ok(()),
            _ => Err(RunError::Unexpected { what, phase: self.phase.name() }),
        }
    }

    /// The index of the open call `call_id` among the current iteration's calls.
    fn pending_index(&self, call_id: &str) -> Result<usize, RunError> {
        match &self.phase {
            Phase::AwaitingTools { calls, .. } => calls
                .iter()
                .position(|c| c.call.id == call_id && c.result.is_none())
                .ok_or_else(|| RunError::UnknownCall(call_id.to_owned())),
            other => Err(RunError::Unexpected { what: "tool event", phase: other.name() }),
        }
    }

    pub(super) fn pending(&self, call_id: &str) -> Result<&PendingCall, RunError> {
        let index = self.pending_index(call_id)?;
        match &self.phase {
            Phase::AwaitingTools { calls, .. } => {
                calls.get(index).ok_or_else(|| RunError::UnknownCall(call_id.to_owned()))
            }
            other => Err(RunError::Unexpected { what: "tool event", phase: other.name() }),
        }
    }

    pub(super) fn pending_mut(&mut self, call_id: &str) -> Result<&mut PendingCall, RunError> {
        let index = self.pending_index(call_id)?;
        match &mut self.phase {
            Phase::AwaitingTools { calls, .. } => {
                calls.get_mut(index).ok_or_else(|| RunError::UnknownCall(call_id.to_owned()))
            }
            _ => Err(RunError::UnknownCall(call_id.to_owned())),
        }
    }

    /// Leaving the tools phase early (cancel, halt): the iteration's results join the
    /// history, open calls answered with an error, so the history stays valid for a later
    /// turn.
    pub(super) fn answer_open_calls(&mut self) {
        let Phase::AwaitingTools { calls, .. } = &self.phase else { return };
        let results: Vec<ToolResult> = calls
            .iter()
            .map(|c: &PendingCall| {
                c.result.clone().unwrap_or_else(|| {
                    let text = match c.approval {
                        CallApproval::Deferred => {
                            "Error: the run ended before this call was approved"
                        }
                        _ => "Error: the run ended before this call finished",
                    };
                    ToolResult::error(&c.call.id, text)
                })
            })
            .collect();
        self.history_mut().push(Message::tool_results(results));
    }
}
