//! Errors of the agent API.

use crate::provider::ProviderError;
use crate::run::{Outcome, RunError, StopReason};
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
        /// The provider's error, classified, when the model call failed and ended the run
        /// (an authentication error, an invalid request, …): match on its class rather than on
        /// the text. `None` for other failures (and when only the run's last event was seen,
        /// e.g. a finished run resumed from a store). See also
        /// [`AgentError::provider_error`].
        provider_error: Option<ProviderError>,
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
    /// The run stopped to wait — for a human's approval of tool calls
    /// ([`StopReason::AwaitingApproval`](crate::StopReason)) or for the user's answer to an
    /// ask-user tool's question ([`StopReason::AwaitingInput`](crate::StopReason), the
    /// question in the outcome's `answer`) — so it has no answer yet. Continue it with
    /// `Agent::decide` / `resume_with_decisions`, or a new turn with the user's answer.
    /// Only [`Agent::run`](crate::Agent::run) returns it; streams and sessions see the
    /// terminal event.
    #[error("the run is waiting for {}", waiting_for(outcome))]
    Suspended {
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
    /// [`AgentError::Failed`] for a run that failed with `error`: `last_model_error` (the
    /// error of the run's last `model_failed` event, if any) is kept as its
    /// [`provider_error`](Self::provider_error) when it is what ended the run.
    pub(crate) fn failed(
        error: String,
        outcome: Box<Outcome>,
        last_model_error: Option<ProviderError>,
    ) -> Self {
        // A provider error ends a run with its own text as the run's error; any other
        // failure (a hook, a tool in `fail` mode, the runtime) has a text of its own.
        // (or ends with it, after what led to it: "the model failed 3 calls in a row; the
        // last: …").
        let provider_error = last_model_error.filter(|model| error.ends_with(&model.to_string()));
        Self::Failed { error, provider_error, outcome }
    }

    /// The provider's error (its class: rate limit, authentication, context length, …) when a
    /// failed model call ended the run.
    ///
    /// ```
    /// use agentloop::prelude::*;
    /// use agentloop::provider::ProviderError;
    ///
    /// fn advice(error: &AgentError) -> &'static str {
    ///     match error.provider_error() {
    ///         Some(ProviderError::Auth { .. }) => "check the API key",
    ///         Some(ProviderError::RateLimited { .. }) => "try again later",
    ///         Some(ProviderError::ContextLengthExceeded { .. }) => "shorten the conversation",
    ///         _ => "see the error",
    ///     }
    /// }
    /// ```
    pub fn provider_error(&self) -> Option<&ProviderError> {
        match self {
            Self::Failed { provider_error, .. } => provider_error.as_ref(),
            Self::Cancelled { .. }
            | Self::Suspended { .. }
            | Self::NoOutcome
            | Self::Journal { .. } => None,
        }
    }

    /// The outcome, when the run got far enough to have one.
    pub fn outcome(&self) -> Option<&Outcome> {
        match self {
            Self::Failed { outcome, .. }
            | Self::Cancelled { outcome, .. }
            | Self::Suspended { outcome } => Some(outcome),
            Self::NoOutcome | Self::Journal { .. } => None,
        }
    }
}

/// What a suspended run waits for, for [`AgentError::Suspended`]'s text.
fn waiting_for(outcome: &Outcome) -> String {
    match &outcome.stop_reason {
        StopReason::AwaitingApproval { calls } => {
            let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
            format!("approval of {} tool call(s): {}", calls.len(), names.join(", "))
        }
        StopReason::AwaitingInput { .. } => {
            format!("the user's answer to: {}", outcome.answer)
        }
        other => format!("{other:?}"),
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
    /// The agent is not the one the run was started with (another model, tool protocol,
    /// per-step tool choice or configuration); resume with
    /// `ResumeOptions::allow_identity_change` to continue it anyway.
    #[error(
        "run '{run_id}' was started by an agent of another identity ({}); to continue it \
         with this agent anyway, allow the change (ResumeOptions::allow_identity_change, \
         `agentloop runs resume --allow-changes`)",
        differences.join("; ")
    )]
    IdentityChanged {
        /// The run.
        run_id: String,
        /// What differs, one item each.
        differences: Vec<String>,
    },
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
