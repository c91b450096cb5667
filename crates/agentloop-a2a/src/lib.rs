//! # agentloop-a2a
//!
//! An [A2A 1.0](https://a2a-protocol.org) client, and a remote A2A agent as an agentloop tool.
//!
//! - [`A2aClient`]: a thin client over `reqwest` and the `a2a` protocol types (re-exported as
//!   [`a2a`]). [`A2aClient::resolve`] fetches the agent card and picks a binding (JSON-RPC
//!   preferred, HTTP+JSON supported); every A2A operation a caller of a remote agent needs is
//!   a method: send (blocking and streaming), get, list, cancel, subscribe. Remote errors come
//!   back typed with their A2A code ([`A2aClientError::code`]).
//! - [`A2aAgentTool`]: a [`DynTool`](agentloop::tool::DynTool) that sends the model's message
//!   to the remote agent and returns what it produced; a remote `input-required` becomes the
//!   run's ask-user flow, and cancelling the run cancels the remote task.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agentloop_a2a::A2aClientError> {
//! use agentloop_a2a::{A2aAgentTool, A2aClient};
//!
//! let client = A2aClient::builder().bearer_token("token".into()).resolve("http://127.0.0.1:41241").await?;
//! println!("{} via {:?}", client.card().name, client.binding());
//! let tool = A2aAgentTool::new(client);
//! # let _ = tool; Ok(()) }
//! ```

/// The A2A 1.0 protocol types (the `a2a-lf` crate, library `a2a`).
pub use ::a2a;

mod client;
mod error;
mod sse;
mod text;
mod tool;

pub use client::{A2aClient, A2aClientBuilder, Binding, EventStream, AGENT_CARD_PATH};
pub use error::A2aClientError;
pub use sse::{SseError, SseEvent, SseParser};
pub use tool::{
    state_name, task_view_url, A2aAgentArgs, A2aAgentTool, TaskCollector, TaskOutcome,
    RUNS_UI_EXTENSION,
};
