//! Errors of the agent API.

use crate::run::{Outcome, RunError};
use crate::store::StoreError;
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
    /// The run's journal could not be written (see `Event::JournalFailed`); the run stopped
    /// at its last checkpoint and can be resumed from the store.
    #[error("the run stopped because its journal could not be written: {error}")]
    Journal {
        /// What went wrong.
        error: String,
    },
}

impl AgentError {
    /// The outcome, when the run got far enough to have one.
    pub fn outcome(&self) -> Option<&Outcome> {
        match self {
            Self::Failed { outcome, .. } | Self::Cancelled { outcome, .. } => Some(outcome),
            Self::NoOutcome | Self::Journal { .. } => None,
        }
    }
}

/// A run could not be resumed from the store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeError {
    /// The agent has no run store (see `AgentBuilder::store`).
    #[error("the agent has no run store: build it with AgentBuilder::store")]
    NoStore,
    /// The store has no journal for the run.
    #[error("run '{0}' has no journal in the store")]
    NotFound(String),
    /// The store failed (or holds a journal of an unsupported schema version).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The journal does not fold into a run, or a decision does not fit it.
    #[error("the journal cannot be continued: {0}")]
    Run(#[from] RunError),
}

/// A turn of a multi-turn session could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The agent has no session store (see `AgentBuilder::session_store`).
    #[error("the agent has no session store: build it with AgentBuilder::session_store")]
    NoSessionStore,
    /// A turn is already running in this session.
    #[error("session '{context_id}' is busy with run '{run_id}': wait until its turn ends")]
    Busy {
        /// The session.
        context_id: String,
        /// The run of the turn in progress.
        run_id: String,
    },
    /// The session store failed.
    #[error(transparent)]
    Store(StoreError),
    /// The turn's run failed, was cancelled, or its journal could not be written.
    #[error(transparent)]
    Run(#[from] AgentError),
    /// The turn in progress could not be resumed.
    #[error(transparent)]
    Resume(#[from] ResumeError),
}

impl From<StoreError> for SessionError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::SessionBusy { context_id, run_id } => Self::Busy { context_id, run_id },
            other => Self::Store(other),
        }
    }
}
