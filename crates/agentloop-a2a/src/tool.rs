//! [`A2aAgentTool`]: a remote A2A agent as a tool of an agentloop agent.

mod collect;
mod nested;
mod remote;

pub use collect::{state_name, TaskCollector, TaskOutcome};
pub use remote::{task_view_url, RUNS_UI_EXTENSION};

use crate::client::A2aClient;
use crate::error::A2aClientError;
use crate::text::sanitize;
use a2a::{Message, Part, Role, SendMessageRequest};
use agentloop::tool::{schema_for, DynTool, ToolContext, ToolError, ToolOutput, ToolSpec};
use async_trait::async_trait;

use futures::StreamExt;
use nested::{remote_task_id, NestedMapper};
use remote::RemoteReporter;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;

/// The arguments the model gives an [`A2aAgentTool`].
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct A2aAgentArgs {
    /// The request for the remote agent, self-contained (it does not see this conversation).
    pub message: String,
    /// To continue a remote task that asked a question: its id (given with the question).
    /// Leave it out to start a new task.
    #[serde(default)]
    pub task_id: Option<String>,
}

/// A remote A2A agent as a tool: the model sends it a message, the tool returns what the
/// agent produced.
///
/// - The tool's name and description come from the agent card (name, description, skills
///   and their examples); [`with_name`](Self::with_name) and
///   [`with_description`](Self::with_description) override them.
/// - A call sends `message` (streaming when the card says the agent streams, a blocking
///   `SendMessage` otherwise) and returns the task's artifacts' text and its final status
///   message.
/// - `input-required`: the call ends the turn with [`ToolOutput::AskUser`]; the question
///   names the remote task id. The model continues the same remote task by calling the
///   tool again with the user's answer as `message` and that id as `task_id` (the tool
///   looks the task up, checks it is still open and sends the answer into it).
/// - `failed`, `rejected`, `canceled` and `auth-required` are tool errors the model sees.
/// - The call reports the remote task it runs as
///   ([`ToolContext::report_remote`](agentloop::tool::ToolContext::report_remote)): the run
///   journals the agent, the task's id, context and state — and the page that shows the
///   task, when the agent's card says where ([`RUNS_UI_EXTENSION`]) — with the call's result.
/// - Cancelling the run (or the call's timeout) cancels the remote task: a `CancelTask`
///   is sent in the background when the call is dropped before the task settled.
pub struct A2aAgentTool {
    client: A2aClient,
    name: String,
    description: String,
    timeout: Option<Duration>,
    max_result_chars: usize,
}

impl std::fmt::Debug for A2aAgentTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("A2aAgentTool")
            .field("name", &self.name)
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl A2aAgentTool {
    /// The tool for the agent `client` talks to (its card gives name and description).
    pub fn new(client: A2aClient) -> Self {
        let name = tool_name(&client.card().name);
        let description = describe(client.card(), &name);
        Self { client, name, description, timeout: None, max_result_chars: 64 * 1024 }
    }

    /// Resolves the agent at `base_url` with a default client, then [`new`](Self::new).
    /// For headers (auth) or other settings, build the client with [`A2aClient::builder`].
    pub async fn connect(base_url: &str) -> Result<Self, A2aClientError> {
        Ok(Self::new(A2aClient::resolve(base_url).await?))
    }

    /// Another tool name (letters, digits, `_` and `-`; other characters become `_`).
    pub fn with_name(mut self, name: &str) -> Self {
        self.name = tool_name(name);
        self.description = describe(self.client.card(), &self.name);
        self
    }

    /// Another description for the model.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// The call's timeout, instead of the run's default tool timeout (remote agents are
    /// often slower than local tools).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The longest result handed to the model, in characters (default 65,536).
    pub fn with_max_result_chars(mut self, chars: usize) -> Self {
        self.max_result_chars = chars;
        self
    }

    /// The client.
    pub fn client(&self) -> &A2aClient {
        &self.client
    }

    fn failed(&self, error: &A2aClientError) -> ToolError {
        ToolError::Failed(format!("the remote agent '{}': {error}", self.name))
    }

    async fn call_remote(
        &self,
        args: A2aAgentArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        // The remote agent's work joins the call's trace.
        let trace_parent = ctx.trace_parent();
        let client = self.client.traced(trace_parent.as_deref());
        if args.message.trim().is_empty() {
            return Err(ToolError::InvalidArguments("`message` is empty".into()));
        }
        let mut message = Message::new(Role::User, vec![Part::text(args.message)]);
        if let Some(task_id) = args.task_id.filter(|id| !id.trim().is_empty()) {
            let task = client.get_task(&task_id, Some(0)).await.map_err(|e| {
                if e.is_task_not_found() {
                    ToolError::Failed(format!(
                        "the remote agent has no task '{}'; leave task_id out to start a new one",
                        sanitize(&task_id, 100)
                    ))
                } else {
                    self.failed(&e)
                }
            })?;
            if task.status.state.is_terminal() {
                return Err(ToolError::Failed(format!(
                    "the remote task '{}' has already ended ({}); leave task_id out to start a new one",
                    sanitize(&task_id, 100),
                    state_name(&task.status.state)
                )));
            }
            message.task_id = Some(task.id);
            message.context_id = Some(task.context_id);
        }
        let continuing = message.task_id.is_some();
        let request =
            SendMessageRequest { message, configuration: None, metadata: None, tenant: None };

        // Armed until the task settles: dropping the call before (cancel, timeout) cancels
        // the remote task.
        let mut guard = CancelOnDrop { client: client.clone(), task_id: None };
        let mut collector =
            if continuing { TaskCollector::continuing() } else { TaskCollector::default() };
        let mut nested = NestedMapper::default();
        let mut reporter = RemoteReporter::new(&client);
        let card = client.card();
        if card.capabilities.streaming == Some(true) {
            let mut events =
                client.send_streaming_message(&request).await.map_err(|e| self.failed(&e))?;
            while let Some(event) = events.next().await {
                let event = event.map_err(|e| self.failed(&e))?;
                collector.apply(&event);
                reporter.report(ctx, card, &collector);
                guard.task_id = collector.task_id().map(str::to_owned);
                if ctx.takes_nested_events() {
                    for nested in nested.map(&event, self.max_result_chars) {
                        ctx.emit_nested(remote_task_id(&event), nested).await;
                    }
                }
                if collector.is_settled() {
                    break;
                }
            }
        } else {
            let response = client.send_message(&request).await.map_err(|e| self.failed(&e))?;
            collector.apply_response(&response);
            reporter.report(ctx, card, &collector);
            guard.task_id = collector.task_id().map(str::to_owned);
        }
        if !collector.is_settled() {
            // The stream ended early (or a blocking send came back early): ask once.
            if let Some(id) = collector.task_id().map(str::to_owned) {
                let task = client.get_task(&id, Some(1)).await.map_err(|e| self.failed(&e))?;
                collector.apply_task(&task);
                reporter.report(ctx, card, &collector);
            }
        }
        if collector.is_settled() {
            guard.task_id = None;
        }
        self.output(collector.outcome())
    }

    fn output(&self, outcome: TaskOutcome) -> Result<ToolOutput, ToolError> {
        let max = self.max_result_chars;
        match outcome {
            TaskOutcome::Completed { text, .. } => {
                let text = if text.trim().is_empty() {
                    "(the remote agent finished without output)".to_owned()
                } else {
                    sanitize(&text, max)
                };
                Ok(ToolOutput::Value(Value::String(text)))
            }
            TaskOutcome::InputRequired { task_id, question } => Ok(ToolOutput::AskUser(format!(
                "{}\n\n(The remote agent '{}' asks this for its task {}: to answer, call {} again \
                 with the answer as `message` and task_id \"{}\".)",
                sanitize(&question, max),
                self.name,
                sanitize(&task_id, 100),
                self.name,
                sanitize(&task_id, 100),
            ))),
            TaskOutcome::AuthRequired { text, .. } => Err(ToolError::Failed(format!(
                "the remote agent '{}' needs authentication it was not given (auth-required){}",
                self.name,
                suffix(&sanitize(&text, max))
            ))),
            TaskOutcome::Ended { state, text, .. } => Err(ToolError::Failed(format!(
                "the remote agent's task {}{}",
                state_name(&state),
                suffix(&sanitize(&text, max))
            ))),
            TaskOutcome::Unfinished { task_id, state } => Err(ToolError::Failed(format!(
                "the remote agent stopped answering before its task {} finished (state {})",
                sanitize(task_id.as_deref().unwrap_or("(none)"), 100),
                state.as_ref().map_or("unknown", state_name)
            ))),
        }
    }
}

fn suffix(text: &str) -> String {
    if text.trim().is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

#[async_trait]
impl DynTool for A2aAgentTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: schema_for::<A2aAgentArgs>(),
        }
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    async fn call_json(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: A2aAgentArgs =
            serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        let cancel = ctx.cancel.clone();
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(ToolError::Cancelled),
            output = self.call_remote(args, &ctx) => output,
        }
    }
}

/// Sends `CancelTask` for `task_id` in the background when dropped with one set.
struct CancelOnDrop {
    client: A2aClient,
    task_id: Option<String>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(task_id) = self.task_id.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let client = self.client.clone();
        runtime.spawn(async move {
            match tokio::time::timeout(Duration::from_secs(10), client.cancel_task(&task_id)).await
            {
                Ok(Ok(_)) => {
                    tracing::debug!(task_id = %sanitize(&task_id, 100), "remote A2A task cancelled")
                }
                Ok(Err(error)) => tracing::debug!(%error, "cancelling the remote A2A task failed"),
                Err(_) => tracing::debug!("cancelling the remote A2A task timed out"),
            }
        });
    }
}

/// A tool name from an agent name: `[A-Za-z0-9_-]`, at most 64 characters.
pub(crate) fn tool_name(agent: &str) -> String {
    let mut name = String::new();
    for c in agent.trim().chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' { c.to_ascii_lowercase() } else { '_' };
        if c == '_' && (name.is_empty() || name.ends_with('_')) {
            continue;
        }
        name.push(c);
    }
    let mut name: String = name.trim_end_matches('_').chars().take(64).collect();
    if name.is_empty() {
        name = "remote_agent".to_owned();
    }
    name
}

/// The tool's description from the card.
pub(crate) fn describe(card: &a2a::AgentCard, tool: &str) -> String {
    let mut text = format!("Sends a request to the remote agent '{}'", sanitize(&card.name, 100));
    if card.description.trim().is_empty() {
        text.push('.');
    } else {
        text.push_str(&format!(": {}", sanitize(card.description.trim(), 1000)));
    }
    if !card.skills.is_empty() {
        text.push_str("\nSkills:");
        for skill in card.skills.iter().take(20) {
            text.push_str(&format!(
                "\n- {}: {}",
                sanitize(&skill.name, 100),
                sanitize(skill.description.trim(), 300)
            ));
            let examples: Vec<String> = skill
                .examples
                .iter()
                .flatten()
                .take(3)
                .map(|e| format!("\"{}\"", sanitize(e, 100)))
                .collect();
            if !examples.is_empty() {
                text.push_str(&format!(" (e.g. {})", examples.join(", ")));
            }
        }
    }
    text.push_str(&format!(
        "\nThe agent does not see this conversation: make `message` self-contained. If it \
         asks a question, the user answers it; then call {tool} again with the answer as \
         `message` and the task_id given with the question."
    ));
    text
}

#[cfg(test)]
mod tests;
