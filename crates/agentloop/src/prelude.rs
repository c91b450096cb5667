//! The names most programs need: `use agentloop::prelude::*;`.

pub use crate::agent::{Agent, AgentBuilder, RunInput, RunOptions};
pub use crate::error::{AgentError, BuildError};
pub use crate::event::Event;
pub use crate::message::{FinishReason, Message, Part, Role, ToolCall, ToolResult, Usage};
pub use crate::provider::{
    ModelRequest, ModelResponse, Provider, ProviderError, StreamChunk, ToolChoice,
};
pub use crate::run::{Outcome, Run, RunConfig, Step, StopReason};
pub use crate::tool::{Control, Tool, ToolContext, ToolError, ToolOutput};
pub use agentloop_macros::tool;
