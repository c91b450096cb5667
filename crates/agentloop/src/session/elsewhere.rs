//! Turns whose run another process executes (a worker pool, `agentloop::worker`): the turn
//! begins here with the run's start journaled, and whoever sees the run stop ends it
//! ([`Agent::settle_turn`]) — the worker that executed it, or the next turn's caller.

use super::Session;
use crate::agent::{new_run_id, Agent, RunInput, RunOptions};
use crate::error::SessionError;
use crate::event::Event;
use crate::store::SessionState;

impl Session {
    /// Begins a turn whose run another process executes: the session becomes busy with the
    /// run, whose start — the stored conversation and `input`, under the agent's
    /// configuration in this session — is journaled in the agent's run store
    /// ([`Agent::create_run`]) and not executed. The executor continues it like any stored
    /// run, and the turn ends when it stops ([`Agent::settle_turn`]). Fails with
    /// [`SessionError::Busy`] while another turn runs. Returns the run's id.
    pub async fn create_turn(
        &self,
        input: impl Into<RunInput>,
        mut options: RunOptions,
    ) -> Result<String, SessionError> {
        let run_id = options.run_id.get_or_insert_with(new_run_id).clone();
        let mut messages = self.store.begin_turn(&self.context_id, &run_id).await?;
        messages.extend(input.into().0);
        match self.agent.create_run(messages, options).await {
            Ok(run_id) => Ok(run_id),
            Err(error) => {
                self.store.end_turn(&self.context_id, &run_id, &[]).await?;
                Err(error.into())
            }
        }
    }

    /// Begins the turn of an answer to the question the session's last turn (`run_id`)
    /// stopped to ask, for an answer given to another process through the run service
    /// ([`RunService::send_input`](crate::service::RunService::send_input)): the executor
    /// that continues the run ends the turn. Refused as [`answer`](Self::answer) is; should
    /// the answer not be recorded, [`release_turn`](Self::release_turn) gives the session back.
    pub async fn begin_answer(&self, run_id: &str) -> Result<(), SessionError> {
        self.begin_answer_turn(run_id).await.map(drop)
    }

    /// Ends the session's turn of `run_id` without new messages (a turn begun for a run that
    /// was then not started or not continued). Nothing when the session is not busy with it.
    pub async fn release_turn(&self, run_id: &str) -> Result<(), SessionError> {
        let info = self.store.open_session(&self.context_id).await?;
        if info.state == SessionState::Busy && info.run_id.as_deref() == Some(run_id) {
            self.store.end_turn(&self.context_id, run_id, &[]).await?;
        }
        Ok(())
    }
}

impl Agent {
    /// Ends the session turn of a run that stopped when no [`Session`] in this process drove
    /// it (a worker executed it): a run that finished appends its new messages to its
    /// session (the same as a turn driven here), one that failed or was cancelled appends
    /// nothing. Nothing happens when the run has no session, is still going or waits for a
    /// decision (the turn goes on), or its session's turn is not its (ended already).
    /// Returns whether it ended the turn.
    pub async fn settle_turn(&self, run_id: &str) -> Result<bool, SessionError> {
        let Some(sessions) = self.session_store() else { return Ok(false) };
        let (run, _, last) = self.fold_stored(run_id).await?;
        let Some(context_id) = run.config().context_id.as_deref() else { return Ok(false) };
        let info = sessions.open_session(context_id).await?;
        if info.state != SessionState::Busy || info.run_id.as_deref() != Some(run_id) {
            return Ok(false);
        }
        let stored = usize::try_from(info.messages).unwrap_or(usize::MAX);
        let new_messages = match last {
            Some(Event::RunFinished { .. }) => run.history().get(stored..).unwrap_or(&[]),
            Some(Event::RunFailed { .. } | Event::RunCancelled { .. }) => &[],
            _ => return Ok(false),
        };
        match sessions.end_turn(context_id, run_id, new_messages).await {
            Ok(_) => Ok(true),
            // Another process ended it first.
            Err(crate::store::StoreError::NotInTurn { .. }) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }
}
