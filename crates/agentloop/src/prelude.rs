//! The names most programs need: `use agentloop::prelude::*;` — twenty of them, what a user
//! writes daily: build an agent and run it, write tools and hooks, read what happened.
//!
//! Everything else is one path away:
//! - configuring a run ([`AgentBuilder`](crate::AgentBuilder)'s methods take these):
//!   [`agentloop::run`](crate::run) — `Limits`, `LimitKind`, `BreakerConfig`,
//!   `ToolFailureMode`, `StallAction`, `Price`, `RunConfig`; the sans-IO machine itself
//!   (`Run`, `Step`) is there too;
//! - messages and usage: [`agentloop::message`](crate::message); the rest of the provider
//!   API: [`agentloop::provider`](crate::provider); stores: [`agentloop::store`](crate::store);
//!   the remaining hooks' types: [`agentloop::hooks`](crate::hooks).

pub use crate::agent::{Agent, RunOptions};
pub use crate::control::RunHandle;
pub use crate::error::AgentError;
pub use crate::event::Event;
pub use crate::hooks::{Approval, HookContext, HookResult, Hooks};
pub use crate::message::Message;
pub use crate::provider::Provider;
pub use crate::run::{Decision, Outcome, StopReason};
pub use crate::session::Session;
pub use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};
pub use agentloop_macros::tool;
