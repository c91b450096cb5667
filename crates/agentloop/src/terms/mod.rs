//! The terms of a run: what it is given — its [`RunConfig`], with the budget ([`Limits`],
//! [`Price`]) and the breaker's settings ([`BreakerConfig`]) — and what it ends with — an
//! [`Outcome`], its [`StopReason`] and [`Metrics`] — with the [`Signal`]s and [`Decision`]s that
//! lead there. Events carry these values ([`crate::event`]) and the run folds them
//! ([`crate::run`]), so they lie below both; their public paths are the run's
//! (`agentloop::run::Outcome`, …), which re-exports them.

mod breaker;
mod config;
mod limits;
mod metrics;
mod outcome;
mod output;

pub use breaker::{BreakerConfig, StallAction, ToolFailureMode, DEFAULT_STALL_NOTE};
pub use config::{
    RunConfig, RunIdentity, DEFAULT_DONE_TOOL_NUDGE, DEFAULT_WIND_DOWN_FALLBACK,
    DEFAULT_WIND_DOWN_PROMPT,
};
pub use limits::{LimitKind, Limits, Price, PriceTable, Spent};
pub use metrics::{ApprovalRecord, AuditEntry, IterationMetrics, Metrics};
pub use outcome::{Decision, Outcome, Signal, StopReason, CONTEXT_LIMIT_TEXT};
pub use output::{OutputMode, OutputSpec, DEFAULT_OUTPUT_RETRIES, OUTPUT_TOOL};

/// Creates a new time-ordered run id.
pub fn new_run_id() -> String {
    format!("run_{}", uuid::Uuid::now_v7().simple())
}
