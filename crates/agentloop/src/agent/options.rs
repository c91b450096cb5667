//! What a run is given besides the agent: its input ([`RunInput`]) and per-run options
//! ([`RunOptions`]).

use crate::message::Message;
use tokio_util::sync::CancellationToken;

/// The input of a run: the conversation so far, ending with the new user message.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunInput(pub Vec<Message>);

impl From<&str> for RunInput {
    fn from(text: &str) -> Self {
        Self(vec![Message::user(text)])
    }
}

impl From<String> for RunInput {
    fn from(text: String) -> Self {
        Self(vec![Message::user(text)])
    }
}

impl From<Message> for RunInput {
    fn from(message: Message) -> Self {
        Self(vec![message])
    }
}

impl From<Vec<Message>> for RunInput {
    fn from(messages: Vec<Message>) -> Self {
        Self(messages)
    }
}

/// Per-run options.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The run's id (default: a new time-ordered id).
    pub run_id: Option<String>,
    /// Cancels the run when cancelled.
    pub cancel: Option<CancellationToken>,
    /// The run that started this one (journaled as `RunConfig::parent_run_id`; stores list
    /// a run's children with `RunFilter::parent_run_id`).
    pub parent_run_id: Option<String>,
    /// The W3C `traceparent` of the caller's span (an incoming A2A request's, a calling
    /// tool's): the run's trace hangs under it. Journaled as `RunConfig::trace_parent`, so a
    /// run resumed in another process stays in the same trace.
    pub trace_parent: Option<String>,
    /// The typed final answer this run must end with, instead of the agent's
    /// ([`AgentBuilder::output`](super::AgentBuilder::output)); see
    /// [`Agent::run_as`](super::Agent::run_as).
    pub output: Option<crate::run::OutputSpec>,
}

impl RunOptions {
    /// Asks this run for a typed final answer matching `spec`.
    pub fn output(mut self, spec: crate::run::OutputSpec) -> Self {
        self.output = Some(spec);
        self
    }

    /// Hangs the run's trace under the caller's span (a W3C `traceparent`).
    pub fn trace_parent(mut self, trace_parent: impl Into<String>) -> Self {
        self.trace_parent = Some(trace_parent.into());
        self
    }

    /// Marks the run as started by `parent_run_id` (a sub-agent's run).
    pub fn parent_run_id(mut self, parent_run_id: impl Into<String>) -> Self {
        self.parent_run_id = Some(parent_run_id.into());
        self
    }
}
