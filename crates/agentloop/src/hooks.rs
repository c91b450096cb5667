//! Hooks: control points the driver calls around the run. Every method has a no-op default
//! and returns an action; hooks run in registration order and each sees the previous one's
//! changes. Each call runs under a timeout; a hook that fails, panics or times out emits a
//! `hook_failed` event and the run goes on, unless the hook was registered as critical (the
//! run then fails).

use crate::event::Event;
use crate::message::ToolCall;
use crate::provider::{ModelRequest, ModelResponse};
use crate::run::{Outcome, RunConfig};
use crate::tool::{ToolError, ToolOutput};
use async_trait::async_trait;
use futures::FutureExt;
use serde_json::{Map, Value};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

/// Why a hook failed; shown in the `hook_failed` event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HookError(pub String);

impl From<String> for HookError {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<&str> for HookError {
    fn from(message: &str) -> Self {
        Self(message.to_owned())
    }
}

/// What a hook returns.
pub type HookResult<T> = Result<T, HookError>;

/// What a hook knows about the run it serves.
#[derive(Debug, Clone)]
pub struct HookContext {
    /// The run.
    pub run_id: Arc<str>,
    /// The current iteration (0 before the first).
    pub iteration: u32,
    /// The run's metadata.
    pub metadata: Arc<Map<String, Value>>,
}

/// `before_run`: go on, or change the run's configuration.
#[derive(Debug, Clone, PartialEq)]
pub enum BeforeRun {
    /// Go on.
    Continue,
    /// Run with this configuration instead.
    Rewrite(Box<RunConfig>),
}

/// `after_run`: keep the outcome or replace it.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterRun {
    /// Keep it.
    Continue,
    /// Use this outcome instead.
    Rewrite(Box<Outcome>),
}

/// `before_model`: go on, change the request, or answer without calling the model.
#[derive(Debug, Clone, PartialEq)]
pub enum BeforeModel {
    /// Go on.
    Continue,
    /// Send this request instead (e.g. other tools or instructions).
    Rewrite(Box<ModelRequest>),
    /// Do not call the model: use this response.
    Skip(Box<ModelResponse>),
}

/// `before_tool`: go on, change the arguments, skip the call, or answer it with a mock.
#[derive(Debug, Clone, PartialEq)]
pub enum BeforeTool {
    /// Go on.
    Continue,
    /// Run with these arguments instead.
    Rewrite(Value),
    /// Do not run it; the model sees an error result with this reason.
    Skip(String),
    /// Do not run it; use this output as its result.
    Mock(ToolOutput),
}

/// `after_tool`: keep the result or replace it.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterTool {
    /// Keep it.
    Continue,
    /// Use this result instead.
    Rewrite(Result<ToolOutput, ToolError>),
}

/// `approve_tool`: approve, reject (the model sees the reason as the call's error result), or
/// defer to a human (the run suspends with `awaiting_approval`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Run it.
    Approve,
    /// Do not run it.
    Reject(String),
    /// Ask a human; the run suspends until `Agent::resume_with_decisions`.
    Defer,
}

/// `pause_check`: go on, or pause the run with a reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PauseCheck {
    /// Go on.
    Continue,
    /// Pause until the run's handle resumes it.
    Pause(String),
}

/// Control points around a run. Implement the ones you need.
#[async_trait]
pub trait Hooks: Send + Sync {
    /// The hook's name in `hook_failed` events.
    fn name(&self) -> &str {
        std::any::type_name::<Self>()
    }

    /// Before the run starts; may change its configuration.
    async fn before_run(&self, _config: &RunConfig) -> HookResult<BeforeRun> {
        Ok(BeforeRun::Continue)
    }

    /// When the run is about to end; may change its outcome.
    async fn after_run(&self, _ctx: &HookContext, _outcome: &Outcome) -> HookResult<AfterRun> {
        Ok(AfterRun::Continue)
    }

    /// Before each model call.
    async fn before_model(
        &self,
        _ctx: &HookContext,
        _request: &ModelRequest,
    ) -> HookResult<BeforeModel> {
        Ok(BeforeModel::Continue)
    }

    /// After each model response (observe).
    async fn after_model(&self, _ctx: &HookContext, _response: &ModelResponse) -> HookResult<()> {
        Ok(())
    }

    /// Before each tool call. `arguments` are the parsed arguments, or, when the model's text
    /// is not JSON, that text [wrapped](crate::tool::raw_arguments) as `{"_raw": text}`
    /// (returning it unchanged keeps the call's parse error).
    async fn before_tool(
        &self,
        _ctx: &HookContext,
        _call: &ToolCall,
        _arguments: &Value,
    ) -> HookResult<BeforeTool> {
        Ok(BeforeTool::Continue)
    }

    /// After each tool call.
    async fn after_tool(
        &self,
        _ctx: &HookContext,
        _call: &ToolCall,
        _result: &Result<ToolOutput, ToolError>,
    ) -> HookResult<AfterTool> {
        Ok(AfterTool::Continue)
    }

    /// Whether a tool call may run. `arguments` as for [`before_tool`](Self::before_tool)
    /// (after its rewrites).
    async fn approve_tool(
        &self,
        _ctx: &HookContext,
        _call: &ToolCall,
        _arguments: &Value,
    ) -> HookResult<Approval> {
        Ok(Approval::Approve)
    }

    /// Checked before each iteration.
    async fn pause_check(&self, _ctx: &HookContext) -> HookResult<PauseCheck> {
        Ok(PauseCheck::Continue)
    }

    /// Before the run ends with an answer: a prompt here is added as a user message and the
    /// model continues (at most `max_continuations` times per run).
    async fn on_incomplete_work(
        &self,
        _ctx: &HookContext,
        _outcome: &Outcome,
    ) -> HookResult<Option<String>> {
        Ok(None)
    }
}

/// A permission check installed with `AgentBuilder::can_execute_tool`.
pub(crate) struct PermissionHook<F>(pub F);

#[async_trait]
impl<F> Hooks for PermissionHook<F>
where
    F: Fn(&ToolCall, &Value) -> Result<(), String> + Send + Sync,
{
    fn name(&self) -> &str {
        "can_execute_tool"
    }

    async fn approve_tool(
        &self,
        _ctx: &HookContext,
        call: &ToolCall,
        arguments: &Value,
    ) -> HookResult<Approval> {
        Ok(match (self.0)(call, arguments) {
            Ok(()) => Approval::Approve,
            Err(reason) => Approval::Reject(reason),
        })
    }
}

#[derive(Clone)]
struct Registered {
    hook: Arc<dyn Hooks>,
    critical: bool,
}

/// A critical hook failed: the run must fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CriticalFailure {
    pub(crate) hook: String,
    pub(crate) error: String,
}

/// The registered hooks, called in order under a timeout.
#[derive(Clone, Default)]
pub(crate) struct HookSet {
    hooks: Vec<Registered>,
    timeout: Duration,
}

impl std::fmt::Debug for HookSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.hooks.iter().map(|h| h.hook.name()).collect();
        f.debug_struct("HookSet").field("hooks", &names).field("timeout", &self.timeout).finish()
    }
}

/// What a hook point returns: the (possibly changed) value, and events for hooks that failed.
pub(crate) type Called<T> = Result<T, CriticalFailure>;

impl HookSet {
    pub(crate) fn new(timeout: Duration) -> Self {
        Self { hooks: Vec::new(), timeout }
    }

    pub(crate) fn push(&mut self, hook: Arc<dyn Hooks>, critical: bool) {
        self.hooks.push(Registered { hook, critical });
    }

    pub(crate) fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Runs one hook call under the timeout. `Ok(None)`: a non-critical failure (reported in
    /// `events`); `Err`: a critical one.
    async fn guard<T>(
        &self,
        entry: &Registered,
        point: &'static str,
        call: impl Future<Output = HookResult<T>>,
        events: &mut Vec<Event>,
    ) -> Result<Option<T>, CriticalFailure> {
        let error = match tokio::time::timeout(self.timeout, AssertUnwindSafe(call).catch_unwind())
            .await
        {
            Ok(Ok(Ok(value))) => return Ok(Some(value)),
            Ok(Ok(Err(error))) => error.0,
            Ok(Err(_panic)) => "the hook panicked".to_owned(),
            Err(_elapsed) => format!("the hook timed out after {} ms", self.timeout.as_millis()),
        };
        let hook = entry.hook.name().to_owned();
        events.push(Event::HookFailed {
            hook: hook.clone(),
            point: point.into(),
            error: error.clone(),
            critical: entry.critical,
        });
        if entry.critical {
            Err(CriticalFailure { hook, error })
        } else {
            Ok(None)
        }
    }

    pub(crate) async fn before_run(
        &self,
        mut config: RunConfig,
        events: &mut Vec<Event>,
    ) -> Called<RunConfig> {
        for entry in &self.hooks {
            if let Some(BeforeRun::Rewrite(new)) =
                self.guard(entry, "before_run", entry.hook.before_run(&config), events).await?
            {
                config = *new;
            }
        }
        Ok(config)
    }

    pub(crate) async fn after_run(
        &self,
        ctx: &HookContext,
        mut outcome: Outcome,
        events: &mut Vec<Event>,
    ) -> Called<Outcome> {
        for entry in &self.hooks {
            if let Some(AfterRun::Rewrite(new)) =
                self.guard(entry, "after_run", entry.hook.after_run(ctx, &outcome), events).await?
            {
                outcome = *new;
            }
        }
        Ok(outcome)
    }

    /// The request to send, or the response to use instead of calling the model.
    pub(crate) async fn before_model(
        &self,
        ctx: &HookContext,
        mut request: ModelRequest,
        events: &mut Vec<Event>,
    ) -> Called<Result<ModelRequest, ModelResponse>> {
        for entry in &self.hooks {
            match self
                .guard(entry, "before_model", entry.hook.before_model(ctx, &request), events)
                .await?
            {
                Some(BeforeModel::Rewrite(new)) => request = *new,
                Some(BeforeModel::Skip(response)) => return Ok(Err(*response)),
                Some(BeforeModel::Continue) | None => {}
            }
        }
        Ok(Ok(request))
    }

    pub(crate) async fn after_model(
        &self,
        ctx: &HookContext,
        response: &ModelResponse,
        events: &mut Vec<Event>,
    ) -> Called<()> {
        for entry in &self.hooks {
            self.guard(entry, "after_model", entry.hook.after_model(ctx, response), events).await?;
        }
        Ok(())
    }

    /// The arguments to run with, or the result to use instead of running the tool.
    pub(crate) async fn before_tool(
        &self,
        ctx: &HookContext,
        call: &ToolCall,
        mut arguments: Value,
        events: &mut Vec<Event>,
    ) -> Called<Result<Value, Result<ToolOutput, ToolError>>> {
        for entry in &self.hooks {
            match self
                .guard(entry, "before_tool", entry.hook.before_tool(ctx, call, &arguments), events)
                .await?
            {
                Some(BeforeTool::Rewrite(new)) => arguments = new,
                Some(BeforeTool::Skip(reason)) => return Ok(Err(Err(ToolError::Skipped(reason)))),
                Some(BeforeTool::Mock(output)) => return Ok(Err(Ok(output))),
                Some(BeforeTool::Continue) | None => {}
            }
        }
        Ok(Ok(arguments))
    }

    pub(crate) async fn after_tool(
        &self,
        ctx: &HookContext,
        call: &ToolCall,
        mut result: Result<ToolOutput, ToolError>,
        events: &mut Vec<Event>,
    ) -> Called<Result<ToolOutput, ToolError>> {
        for entry in &self.hooks {
            if let Some(AfterTool::Rewrite(new)) = self
                .guard(entry, "after_tool", entry.hook.after_tool(ctx, call, &result), events)
                .await?
            {
                result = new;
            }
        }
        Ok(result)
    }

    /// The first hook that does not approve decides; a failed hook does not approve.
    pub(crate) async fn approve_tool(
        &self,
        ctx: &HookContext,
        call: &ToolCall,
        arguments: &Value,
        events: &mut Vec<Event>,
    ) -> Called<Approval> {
        for entry in &self.hooks {
            match self
                .guard(entry, "approve_tool", entry.hook.approve_tool(ctx, call, arguments), events)
                .await?
            {
                Some(Approval::Approve) => {}
                Some(other) => return Ok(other),
                None => {
                    return Ok(Approval::Reject(format!(
                        "the approval hook '{}' failed",
                        entry.hook.name()
                    )))
                }
            }
        }
        Ok(Approval::Approve)
    }

    pub(crate) async fn pause_check(
        &self,
        ctx: &HookContext,
        events: &mut Vec<Event>,
    ) -> Called<Option<String>> {
        for entry in &self.hooks {
            if let Some(PauseCheck::Pause(reason)) =
                self.guard(entry, "pause_check", entry.hook.pause_check(ctx), events).await?
            {
                return Ok(Some(reason));
            }
        }
        Ok(None)
    }

    pub(crate) async fn on_incomplete_work(
        &self,
        ctx: &HookContext,
        outcome: &Outcome,
        events: &mut Vec<Event>,
    ) -> Called<Option<String>> {
        for entry in &self.hooks {
            if let Some(Some(prompt)) = self
                .guard(
                    entry,
                    "on_incomplete_work",
                    entry.hook.on_incomplete_work(ctx, outcome),
                    events,
                )
                .await?
            {
                return Ok(Some(prompt));
            }
        }
        Ok(None)
    }
}
