//! Tools: the typed [`Tool`] trait, its object-safe twin [`DynTool`], sources of tools
//! ([`ToolSet`]), the local [`ToolRegistry`] and the executor the driver uses.

pub mod builtin;
mod exec;
mod link;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod raw_arguments;
mod registry;
mod report;
mod schema;

pub use builtin::{
    AskUser, AskUserArgs, Calculator, HttpGet, ListDir, ReadFile, Shell, TaskComplete,
    TaskCompleteArgs, Workspace, WorkspaceError, WriteFile,
};
pub(crate) use exec::violations;
pub use exec::{ToolExecution, ToolExecutor, ToolSetupError};
pub use link::NESTED_EVENT_BUFFER;
pub(crate) use link::{CallLink, CallReports, Erased};
pub use registry::ToolRegistry;
pub use report::{is_web_url, CallReport, RemoteTask, REMOTE_FIELD_CHARS};
pub use schema::schema_for;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What the model is told about a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does and when to use it.
    pub description: String,
    /// JSON Schema of its arguments (an object schema).
    #[serde(serialize_with = "crate::canonical::serialize")]
    pub parameters: Value,
}

/// What a tool returns to the loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum ToolOutput {
    /// A value shown to the model (a JSON string becomes a text result).
    Value(#[serde(serialize_with = "crate::canonical::serialize")] Value),
    /// The task is complete: end the run with this answer. The call's result (the answer)
    /// stays in the history.
    Done(String),
    /// End the turn and wait for the user to answer this question.
    AskUser(String),
}

/// Conversion of a tool's return value into a [`ToolOutput`]: any `Serialize` value becomes
/// [`ToolOutput::Value`], and a `ToolOutput` (or a [`Control`]) stays itself, so a tool whose
/// output type is `ToolOutput` controls the run: [`ToolOutput::Done`] ends it with its answer
/// (stop reason `done_tool`, as `task_complete` does), [`ToolOutput::AskUser`] ends the turn
/// with its question (stop reason `awaiting_input`), and [`ToolOutput::Value`] is the value
/// itself (not `{"kind": "value", …}`).
///
/// ```
/// use agentloop::prelude::*;
///
/// /// Ends the task with the answer.
/// #[tool]
/// async fn finish(answer: String) -> ToolOutput {
///     ToolOutput::Done(answer)
/// }
/// ```
pub trait IntoToolOutput {
    /// Converts; fails only if the value cannot be serialized.
    fn into_tool_output(self) -> Result<ToolOutput, serde_json::Error>;
}

impl<T: Serialize + 'static> IntoToolOutput for T {
    fn into_tool_output(self) -> Result<ToolOutput, serde_json::Error> {
        // `ToolOutput` is `Serialize` too (it is journaled), so the blanket impl covers it:
        // recognise it by type (no allocation, no serialization) instead of turning a control
        // signal into a JSON value.
        let mut slot = Some(self);
        let control = (&mut slot as &mut dyn std::any::Any)
            .downcast_mut::<Option<ToolOutput>>()
            .and_then(Option::take);
        match (control, slot) {
            (Some(output), _) => Ok(output),
            (None, Some(value)) => serde_json::to_value(value).map(ToolOutput::Value),
            // Only a `ToolOutput` is taken out of the slot, and it returned above.
            (None, None) => Ok(ToolOutput::Value(Value::Null)),
        }
    }
}

/// A control signal instead of a value: `Ok(Control(ToolOutput::Done(answer)))`. A typed tool
/// may as well return the [`ToolOutput`] itself (see [`IntoToolOutput`]); `Control` makes the
/// intent explicit in a signature.
#[derive(Debug, Clone, PartialEq)]
pub struct Control(pub ToolOutput);

/// Why a tool call produced no value. Every variant becomes an error result that the model
/// sees; the loop goes on (unless the run's tool failure mode says otherwise).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", content = "message", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolError {
    /// No tool of that name.
    #[error("Unknown tool '{0}'")]
    UnknownTool(String),
    /// The arguments were not JSON.
    #[error(
        "the arguments are not valid JSON ({0}); send a JSON object that matches the tool's schema"
    )]
    BadJson(String),
    /// The arguments did not match the schema.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
    /// The tool took longer than its timeout.
    #[error("the tool timed out after {0} ms")]
    Timeout(u64),
    /// The tool panicked.
    #[error("the tool crashed: {0}")]
    Panicked(String),
    /// The run was cancelled while the tool ran.
    #[error("cancelled")]
    Cancelled,
    /// An approval hook or a human rejected the call.
    #[error("the call was rejected: {0}")]
    Rejected(String),
    /// A hook skipped the call.
    #[error("the call was skipped: {0}")]
    Skipped(String),
    /// The run refused the call (a limit was reached).
    #[error("the call was not run: {0}")]
    NotRun(String),
}

impl ToolError {
    /// The text the model sees in the error result.
    pub fn to_model_text(&self) -> String {
        format!("Error: {self}")
    }
}

/// What a tool knows about the call it is serving, and its line back to the run: the events of
/// work the call starts (a sub-agent's run, a remote agent's updates) go into the run's event
/// stream with `emit_nested` (see [`Event::Nested`](crate::event::Event::Nested)), the tokens
/// and cost that work used into the run's budgets with
/// [`report_usage`](Self::report_usage), the remote agent's task it ran as into the journal
/// with [`report_remote`](Self::report_remote).
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The run.
    pub run_id: Arc<str>,
    /// The call.
    pub call_id: String,
    /// `run_id:call_id`: stable across a resume, so side effects can be deduplicated.
    pub idempotency_key: String,
    /// Cancelled when the run is cancelled (or the call times out).
    pub cancel: CancellationToken,
    /// The run's metadata.
    pub metadata: Arc<Map<String, Value>>,
    /// The run's observer, asked for the call's trace context.
    pub(crate) trace: TraceLink,
    /// The call's line back to the run: its nested events and usage reports.
    pub(crate) link: CallLink,
}

impl ToolContext {
    /// A context for a call outside a run (tests, direct calls).
    pub fn detached(call_id: impl Into<String>) -> Self {
        let call_id = call_id.into();
        Self {
            run_id: Arc::from("detached"),
            idempotency_key: format!("detached:{call_id}"),
            call_id,
            cancel: CancellationToken::new(),
            metadata: Arc::new(Map::new()),
            trace: TraceLink::default(),
            link: CallLink::default(),
        }
    }

    /// The W3C `traceparent` of the call's span, when the run is traced (an observer such
    /// as `agentloop-otel` is set): work the call starts outside the run (a sub-agent's
    /// run, an A2A request) hangs under it.
    pub fn trace_parent(&self) -> Option<String> {
        self.trace.0.as_ref()?.trace_parent(&self.call_id)
    }

    /// Whether the run passes nested events on: `false` for a detached context and for a run
    /// that streams no transient events (such as [`Agent::run`](crate::Agent::run)'s), whose
    /// `emit_nested` drops them. A tool may then skip building them.
    pub fn takes_nested_events(&self) -> bool {
        self.link.takes_nested()
    }

    /// Reports tokens and cost that work this call started used (a sub-agent's model calls,
    /// priced at its own price; `cost_usd` 0 when unknown). The run journals them with the
    /// call's result (`usage` and `cost_usd` of its `tool_completed`, `tool_failed` or
    /// `tool_timed_out`) and adds
    /// them to its own usage and cost: they count against its token and cost budgets and
    /// appear in its metrics and outcome, also after a resume. Reports add up, so work can be
    /// reported as it goes: what was reported when the call ends counts, whether it returned,
    /// failed or timed out (a call cancelled with its run counts nothing: the run ends).
    /// Outside a run (a detached context) a report goes nowhere.
    pub fn report_usage(&self, usage: crate::message::Usage, cost_usd: f64) {
        self.link.report_usage(&self.call_id, usage, cost_usd);
    }

    /// Reports the task of a remote agent this call ran as (an A2A agent's task, say): the
    /// run journals it with the call's result (`remote` of its `tool_completed`,
    /// `tool_failed` or `tool_timed_out`), so a timeline shows the remote agent under the call
    /// and links to it. Report it as soon as the task is known, and again as it changes: the
    /// last report when the call ends counts. Outside a run (a detached context) a report goes
    /// nowhere.
    pub fn report_remote(&self, remote: RemoteTask) {
        self.link.report_remote(&self.call_id, remote);
    }
}

/// A typed tool. Implement this (or use `#[tool]` on an `async fn`); the loop uses it through
/// the blanket [`DynTool`] impl.
///
/// ```
/// use agentloop::tool::{Tool, ToolContext};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// struct Add;
/// #[derive(Deserialize, JsonSchema)]
/// struct AddArgs { a: i64, b: i64 }
///
/// impl Tool for Add {
///     const NAME: &'static str = "add";
///     type Args = AddArgs;
///     type Output = i64;
///     type Error = std::convert::Infallible;
///     fn description(&self) -> String { "Adds two integers.".into() }
///     async fn call(&self, args: AddArgs, _ctx: ToolContext) -> Result<i64, Self::Error> {
///         Ok(args.a + args.b)
///     }
/// }
/// ```
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls it by.
    const NAME: &'static str;
    /// Its arguments; the JSON Schema given to the model is derived from this type.
    type Args: DeserializeOwned + JsonSchema + Send;
    /// What it returns: any `Serialize` value, or a [`ToolOutput`] (or [`Control`]) for a
    /// control signal (see [`IntoToolOutput`]).
    type Output: IntoToolOutput + Send;
    /// How it fails; the text is shown to the model.
    type Error: std::fmt::Display + Send;

    /// What it does, for the model.
    fn description(&self) -> String;

    /// Its own timeout, overriding the run's default.
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// Whether a call may run again after a crash left it in flight (started, no result
    /// journaled): the tool is idempotent, or honours the call's idempotency key
    /// ([`ToolContext::idempotency_key`]). Default `false`: a run taken over by another
    /// worker stops in `needs_attention` instead of running such a call twice (see
    /// `docs/DURABILITY.md`).
    fn safe_to_retry(&self) -> bool {
        false
    }

    /// Runs the tool.
    fn call(
        &self,
        args: Self::Args,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<Self::Output, Self::Error>> + Send;
}

impl IntoToolOutput for Control {
    fn into_tool_output(self) -> Result<ToolOutput, serde_json::Error> {
        Ok(self.0)
    }
}

/// An object-safe tool: JSON in, [`ToolOutput`] out. Every [`Tool`] is one; implement it
/// directly for tools whose schema is only known at run time (MCP, remote agents).
#[async_trait]
pub trait DynTool: Send + Sync {
    /// What the model is told about it.
    fn spec(&self) -> ToolSpec;

    /// Its own timeout, overriding the run's default.
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// Whether a call left in flight by a crash may run again ([`Tool::safe_to_retry`]).
    fn safe_to_retry(&self) -> bool {
        false
    }

    /// Runs the tool on JSON arguments (already validated against the schema).
    async fn call_json(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError>;

    /// [`call_json`](Self::call_json) on arguments the caller keeps (the run journals
    /// them). The default copies them; a tool that reads them in place overrides it.
    async fn call_json_ref(&self, args: &Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        self.call_json(args.clone(), ctx).await
    }
}

#[async_trait]
impl<T: Tool> DynTool for T {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: T::NAME.to_owned(),
            description: self.description(),
            parameters: schema_for::<T::Args>(),
        }
    }

    fn timeout(&self) -> Option<Duration> {
        Tool::timeout(self)
    }

    fn safe_to_retry(&self) -> bool {
        Tool::safe_to_retry(self)
    }

    async fn call_json(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: T::Args =
            serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        call_typed(self, args, ctx).await
    }

    async fn call_json_ref(&self, args: &Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args =
            T::Args::deserialize(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        call_typed(self, args, ctx).await
    }
}

/// Runs a typed tool and turns what it returned into a [`ToolOutput`].
async fn call_typed<T: Tool>(
    tool: &T,
    args: T::Args,
    ctx: ToolContext,
) -> Result<ToolOutput, ToolError> {
    match tool.call(args, ctx).await {
        Ok(output) => output.into_tool_output().map_err(|e| {
            ToolError::Failed(format!("the tool's output could not be serialized: {e}"))
        }),
        Err(error) => Err(ToolError::Failed(error.to_string())),
    }
}

/// A source of tools: a local registry, an MCP server, a remote agent, client-provided tools.
#[async_trait]
pub trait ToolSet: Send + Sync {
    /// The tools it offers.
    fn specs(&self) -> Vec<ToolSpec>;

    /// The timeout of one of its tools, if it sets one.
    fn timeout(&self, _name: &str) -> Option<Duration> {
        None
    }

    /// Whether a call of one of its tools left in flight by a crash may run again
    /// ([`Tool::safe_to_retry`]; default `false`).
    fn safe_to_retry(&self, _name: &str) -> bool {
        false
    }

    /// A number that changes whenever the set's tools change (default: never). An agent
    /// reads [`specs`](Self::specs) again before its next run when it moved.
    fn revision(&self) -> u64 {
        0
    }

    /// Runs one of its tools on validated JSON arguments.
    async fn call(
        &self,
        name: &str,
        args: Value,
        ctx: ToolContext,
    ) -> Result<ToolOutput, ToolError>;

    /// [`call`](Self::call) on arguments the caller keeps a share of (the run journals
    /// them). The default copies them if they are shared; a set that can read them in place
    /// overrides it.
    async fn call_shared(
        &self,
        name: &str,
        args: Arc<Value>,
        ctx: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.call(name, Arc::unwrap_or_clone(args), ctx).await
    }
}

/// Parses a model's argument text. Empty or whitespace-only text means "no arguments" (`{}`),
/// which models commonly send for parameterless tools. Where text that is not JSON must still
/// be shown as a value, [`raw_arguments`] says how.
pub fn parse_arguments(raw: &str) -> Result<Value, String> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    serde_json::from_str(raw).map_err(|e| e.to_string())
}

/// Where a call's trace context comes from (the run's observer, which the driver wraps:
/// the tools lie below the observers).
pub(crate) trait CallTrace: Send + Sync {
    /// The W3C `traceparent` of the span of call `call_id`.
    fn trace_parent(&self, call_id: &str) -> Option<String>;
}

/// The run's observer, for a call's trace context ([`ToolContext::trace_parent`]).
#[derive(Clone, Default)]
pub(crate) struct TraceLink(pub(crate) Option<Arc<dyn CallTrace>>);

impl std::fmt::Debug for TraceLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "TraceLink(observed)" } else { "TraceLink(none)" })
    }
}

#[cfg(test)]
mod tests;
