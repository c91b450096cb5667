//! # agentloop
//!
//! A Rust agent runtime: it runs the loop *model → tool calls → model → … → answer* fast,
//! observably, and without losing work.
//!
//! The loop is a sans-IO state machine ([`run::Run`]) folded over a journal of [`Event`]s; a
//! thin async driver carries out its steps against a [`Provider`](provider::Provider) and
//! [`tool`]s and streams every event.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use agentloop::prelude::*;
//! use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
//! use serde_json::json;
//!
//! /// Adds two integers.
//! #[tool]
//! async fn add(a: i64, b: i64) -> Result<i64, String> {
//!     a.checked_add(b).ok_or_else(|| "overflow".to_string())
//! }
//!
//! let model = ScriptedModel::new([
//!     ScriptedTurn::tool_call("add", json!({"a": 2, "b": 3})),
//!     ScriptedTurn::text("2 + 3 = 5"),
//! ]);
//! let agent = Agent::builder(model).tool(Add).build()?;
//! let outcome = agent.run("What is 2 + 3?").await?;
//! assert_eq!(outcome.answer, "2 + 3 = 5");
//! # Ok(()) }
//! ```

// Lets `#[tool]` expand to `::agentloop::…` paths inside this crate too.
extern crate self as agentloop;

pub mod agent;
pub mod canonical;
pub mod context;
mod control;
mod driver;
pub mod error;
pub mod event;
pub mod hooks;
pub mod message;
pub mod observe;
pub mod prelude;
pub mod protocol;
pub mod provider;
pub mod run;
pub mod schema;
pub mod service;
pub mod session;
pub mod store;
mod terms;
pub mod tls;
pub mod tool;
#[cfg(feature = "redis")]
pub mod worker;

pub use agent::{Agent, AgentBuilder, ResumeOptions, RunAsError, RunInput, RunOptions};
pub use control::RunHandle;
pub use driver::EventStream;
pub use error::{AgentError, BuildError, ResumeError, SessionError};
pub use event::Event;
pub use run::{Outcome, StopReason};
pub use session::Session;

/// `#[tool]`: turns a documented `async fn` into a [`tool::Tool`].
pub use agentloop_macros::tool;

/// Compiles the README's example as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// Re-exports used by code that `#[tool]` generates. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use schemars;
    pub use serde;
    pub use serde_json;
}
