//! [`AgentTool`]: an agent used as a tool of another ([`Agent::as_tool`]), a sub-agent.
//!
//! Each call is a run of the agent of its own: its id derived from the call
//! ([`child_run_id`]: a caller resumed after a crash finds its child), `parent_run_id` the
//! calling run's (journaled in the agent's store, if it has one, so
//! [`RunFilter::parent_run_id`](crate::store::RunFilter::parent_run_id) lists it), its events
//! passed on as the call's nested events, its tokens and cost counted in the caller's
//! budgets, and cancelled with the call.

use super::{Agent, OutcomeReader, ResumeOptions, RunOptions};
use crate::control::RunHandle;
use crate::driver::EventStream;
use crate::error::AgentError;
use crate::event::Event;
use crate::message::Usage;
use crate::run::{Outcome, RunConfig, StopReason};
use crate::tool::{schema_for, DynTool, ToolContext, ToolError, ToolOutput, ToolSpec};
use async_trait::async_trait;
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;

/// The arguments of an agent used as a tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
pub struct AgentToolArgs {
    /// The task for the agent, complete: it sees nothing else of this conversation.
    pub input: String,
}

/// An agent used as a tool of another: [`Agent::as_tool`]. Register it with
/// [`AgentBuilder::dyn_tool`](crate::AgentBuilder::dyn_tool).
///
/// A call (arguments `{"input": "<task>"}`, [`AgentToolArgs`]) runs the agent on the input:
///
/// - **Its own run**: its id is [`child_run_id`] (the caller's run id and the call id),
///   started by the calling run (`parent_run_id`; with a store, the child's journal lists
///   under
///   [`RunFilter::parent_run_id`](crate::store::RunFilter::parent_run_id)). It does not see
///   the caller's conversation, only the input.
/// - **Events nest**: each event of the child's run is passed on as an
///   [`Event::Nested`](crate::Event::Nested) of the call (`run_id` the child's), between
///   the call's `tool_started` and its result. A caller that streams no transient events
///   ([`Agent::run`]) gets none, and the child builds none either.
/// - **Budgets roll up**: the child's tokens and cost are reported
///   ([`ToolContext::report_usage`]) as its journal goes — each `model_responded` and
///   `compaction_completed` at the child's price, and the usage its own tool calls reported
///   (its sub-agents') — so in the end they are its outcome's `usage` and `metrics.cost_usd`,
///   and a call that times out still counts what the child used so far. They are journaled
///   with the call's result and count in the caller's usage, cost and budgets
///   (`max_total_tokens`, `max_cost_usd`, …), also after the caller is resumed. The child's
///   own limits apply to the child.
/// - **Cancel propagates**: cancelling the caller (the call's
///   [`cancel`](crate::tool::ToolContext::cancel) token), the call timing out, or dropping the
///   call cancels the child, which ends `run_cancelled` with the reason "its caller stopped:
///   call … of run … was cancelled or timed out" (journaled, with a store). The child is
///   driven by a task of its own, so it records its end even after the caller has moved on.
///
/// The result: the child's answer (a value shown to the model). A child that failed or was
/// cancelled on its own is an error result the model sees (its usage still counts). A child
/// that stopped to ask the user ([`StopReason::AwaitingInput`]) gives its question back as
/// the result, `"The agent needs more input: <question>"`, for the caller's model to answer
/// in a new call (with the missing details in the input) or to put to its own user; the
/// child's run stays awaiting input in its store. A child that waits for approval of its own
/// tool calls ([`StopReason::AwaitingApproval`]) is an error result: approvals belong to the
/// child's run, which stays suspended in its store.
///
/// The call's timeout is the caller's default tool timeout unless set with
/// [`with_timeout`](Self::with_timeout): a sub-agent often needs longer.
#[derive(Debug, Clone)]
pub struct AgentTool {
    agent: Agent,
    name: String,
    description: String,
    timeout: Option<Duration>,
}

impl Agent {
    /// This agent as a tool of another agent (a sub-agent): see [`AgentTool`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use agentloop::message::Usage;
    /// use agentloop::prelude::*;
    /// use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
    /// use serde_json::json;
    /// use std::sync::Arc;
    ///
    /// let used = |input, output| Usage { input, output, ..Usage::default() };
    /// let researcher = Agent::builder(ScriptedModel::new([
    ///     ScriptedTurn::text("May 2015.").with_usage(used(50, 5)),
    /// ]))
    /// .name("researcher")
    /// .instructions("Answer from your notes.")
    /// .build()?;
    /// let lead = Agent::builder(ScriptedModel::new([
    ///     ScriptedTurn::tool_call("research", json!({"input": "When did Rust 1.0 come out?"}))
    ///         .with_usage(used(100, 10)),
    ///     ScriptedTurn::text("Rust 1.0 came out in May 2015.").with_usage(used(100, 10)),
    /// ]))
    /// .dyn_tool(Arc::new(researcher.as_tool("research", "Looks facts up; give it the whole question.")))
    /// .build()?;
    ///
    /// let outcome = lead.run("When did Rust 1.0 come out?").await?;
    /// assert_eq!(outcome.answer, "Rust 1.0 came out in May 2015.");
    /// // The researcher's tokens count in the lead's usage (and budgets).
    /// assert_eq!(outcome.usage.total(), 220 + 55);
    /// # Ok(()) }
    /// ```
    pub fn as_tool(&self, name: impl Into<String>, description: impl Into<String>) -> AgentTool {
        AgentTool {
            agent: self.clone(),
            name: name.into(),
            description: description.into(),
            timeout: None,
        }
    }
}

impl AgentTool {
    /// The call's timeout (default: the caller's default tool timeout). When it expires, the
    /// child run is cancelled.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The agent it runs.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }
}

#[async_trait]
impl DynTool for AgentTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: schema_for::<AgentToolArgs>(),
        }
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// With a store, a call runs again safely: it continues the child its first attempt
    /// started (the child's id comes from the call), whose own calls keep their rules.
    fn safe_to_retry(&self) -> bool {
        self.agent.store().is_some()
    }

    async fn call_json(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args = AgentToolArgs::deserialize(args)
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        // The child's id comes from the call (unique in its run): a caller resumed after a
        // crash finds the child its call started, instead of starting a second one.
        let child_id = child_run_id(&ctx.run_id, &ctx.call_id);
        let started = match self.agent.store() {
            Some(store) => {
                store.next_seq(&child_id).await.map_err(|e| {
                    ToolError::Failed(format!("cannot read the agent's run {child_id}: {e}"))
                })? > 0
            }
            None => false,
        };
        let (handle, events) = if started {
            // Resumed where it was (a finished child gives its outcome again), its calls in
            // flight held for an operator unless safe to retry, as a taken-over run's.
            let options = ResumeOptions { hold_unsafe_in_flight: true, ..ResumeOptions::default() };
            self.agent.resume_with(&child_id, options).await.map_err(|e| {
                ToolError::Failed(format!("the agent's run {child_id} cannot go on: {e}"))
            })?
        } else {
            let options = RunOptions {
                run_id: Some(child_id),
                cancel: None,
                parent_run_id: Some(ctx.run_id.to_string()),
                trace_parent: ctx.trace_parent(),
                output: None,
            };
            let quiet = !ctx.takes_nested_events();
            self.agent.start_inner(args.input, options, quiet)
        };
        let run_id = handle.run_id().to_owned();
        // The child stops when the call does: dropped (the caller was cancelled or dropped,
        // the call timed out) or cancelled; its task then drives it to `run_cancelled`.
        let reason = format!(
            "its caller stopped: call {} of run {} was cancelled or timed out",
            ctx.call_id, ctx.run_id
        );
        let mut guard = CancelOnDrop { handle, reason: Some(reason) };
        let mut task = tokio::spawn(drive(events, ctx.clone(), run_id.clone()));
        let finished = tokio::select! {
            biased;
            finished = &mut task => finished,
            () = ctx.cancel.cancelled() => {
                guard.cancel();
                task.await
            }
        };
        guard.reason = None;
        let result = finished.map_err(|e| ToolError::Panicked(e.to_string()))?;
        answer(&run_id, result)
    }
}

/// The id of the run a call of an agent tool starts: the caller's run id and the call's id.
pub fn child_run_id(parent_run_id: &str, call_id: &str) -> String {
    format!("{parent_run_id}.{call_id}")
}

/// Cancels the child's run with `reason` when dropped before the call ends.
struct CancelOnDrop {
    handle: RunHandle,
    /// `None` once the call has ended.
    reason: Option<String>,
}

impl CancelOnDrop {
    fn cancel(&mut self) {
        if let Some(reason) = self.reason.take() {
            self.handle.cancel(reason);
        }
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// Reads the child's events to its end, reporting what it used and passing each event on as
/// a nested event of the call.
async fn drive(
    mut events: EventStream,
    ctx: ToolContext,
    run_id: String,
) -> Result<Outcome, AgentError> {
    let mut reader = OutcomeReader::default();
    let mut config = None;
    while let Some(event) = events.next().await {
        report_usage(&ctx, &mut config, &event);
        if !ctx.takes_nested_events() {
            reader.read(event);
            continue;
        }
        if OutcomeReader::wants(&event) {
            reader.read(event.clone());
        }
        ctx.emit_nested(Some(&run_id), event).await;
    }
    reader.outcome()
}

/// Reports what a journal event of the child says it used, as the child's own fold counts it
/// (priced as the child's configuration, from its `run_started`, says).
fn report_usage(ctx: &ToolContext, config: &mut Option<Box<RunConfig>>, event: &Event) {
    let cost = |provider: Option<&str>, usage: &Usage| {
        let price = config.as_ref().and_then(|c| c.price_of(provider));
        price.map_or(0.0, |p| p.cost(usage))
    };
    match event {
        Event::RunStarted { config: started, .. } => *config = Some(started.clone()),
        Event::ModelResponded { usage, provider, .. } => {
            ctx.report_usage(**usage, cost(provider.as_deref(), usage));
        }
        Event::CompactionCompleted { usage, .. } => ctx.report_usage(*usage, cost(None, usage)),
        Event::ToolCompleted { usage, cost_usd, .. }
        | Event::ToolFailed { usage, cost_usd, .. }
        | Event::ToolTimedOut { usage, cost_usd, .. }
            if usage.is_some() || cost_usd.is_some() =>
        {
            let usage = usage.as_deref().copied().unwrap_or_default();
            ctx.report_usage(usage, cost_usd.unwrap_or(0.0));
        }
        _ => {}
    }
}

/// The call's result from the child's outcome (see [`AgentTool`]).
fn answer(run_id: &str, result: Result<Outcome, AgentError>) -> Result<ToolOutput, ToolError> {
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(AgentError::Cancelled { reason, .. }) => {
            return Err(ToolError::Failed(format!("the agent's run was cancelled: {reason}")))
        }
        Err(error) => return Err(ToolError::Failed(format!("the agent's run failed: {error}"))),
    };
    match outcome.stop_reason {
        StopReason::AwaitingInput { .. } => Ok(ToolOutput::Value(Value::String(format!(
            "The agent needs more input: {}",
            outcome.answer
        )))),
        StopReason::AwaitingApproval { .. } => Err(ToolError::Failed(format!(
            "the agent's run {run_id} waits for approval of its own tool calls"
        ))),
        StopReason::NeedsAttention { reason, .. } => Err(ToolError::Failed(format!(
            "the agent's run {run_id} waits for an operator: {reason}"
        ))),
        _ => Ok(ToolOutput::Value(Value::String(outcome.answer))),
    }
}

#[cfg(test)]
mod tests;
