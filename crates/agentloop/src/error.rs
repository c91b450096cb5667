//! Errors of the agent API.

use crate::run::Outcome;
use crate::tool::ToolSetupError;

/// Building an [`Agent`](crate::Agent) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The tools could not be indexed (duplicate names, invalid schemas).
    #[error(transparent)]
    Tools(#[from] ToolSetupError),
    /// A setting is out of range.
    #[error("invalid setting: {0}")]
    InvalidSetting(String),
}

/// A run did not finish with an answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The run failed (the model failed, or an internal error); the outcome says more.
    #[error("run failed: {error}")]
    Failed {
        /// What went wrong.
        error: String,
        /// The outcome.
        outcome: Box<Outcome>,
    },
    /// The run was cancelled.
    #[error("run cancelled: {reason}")]
    Cancelled {
        /// Why.
        reason: String,
        /// The outcome.
        outcome: Box<Outcome>,
    },
    /// The event stream ended without a terminal event.
    #[error("the run ended without an outcome")]
    NoOutcome,
}

impl AgentError {
    /// The outcome, when the run got far enough to have one.
    pub fn outcome(&self) -> Option<&Outcome> {
        match self {
            Self::Failed { outcome, .. } | Self::Cancelled { outcome, .. } => Some(outcome),
            Self::NoOutcome => None,
        }
    }
}
