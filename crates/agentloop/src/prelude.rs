//! The names most programs need: `use agentloop::prelude::*;`.

pub use crate::agent::{Agent, AgentBuilder, RunInput, RunOptions};
pub use crate::control::RunHandle;
pub use crate::error::{AgentError, BuildError, ResumeError, SessionError};
pub use crate::event::Event;
pub use crate::hooks::{
    AfterRun, AfterTool, Approval, BeforeModel, BeforeRun, BeforeTool, HookContext, HookResult,
    Hooks, PauseCheck,
};
pub use crate::message::{FinishReason, Message, Part, Role, ToolCall, ToolResult, Usage};
pub use crate::provider::{
    ModelRequest, ModelResponse, Provider, ProviderError, StreamChunk, ToolChoice,
};
pub use crate::run::{Decision, Limits, Outcome, Price, Run, RunConfig, Step, StopReason};
pub use crate::session::Session;
pub use crate::store::{ArtifactStore, MemoryStore, RunStore, SessionStore, StoreError};
pub use crate::tool::{Control, Tool, ToolContext, ToolError, ToolOutput};
pub use agentloop_macros::tool;
