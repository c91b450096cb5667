//! [`Session`]: a multi-turn conversation (`context_id`) whose history lives in a
//! [`SessionStore`], so an [`Agent`] keeps it across `run` calls, processes and restarts.
//!
//! A turn's input is the stored conversation plus the new user message; the instructions are
//! not stored (they are injected at every model call). When the turn's run finishes, its new
//! messages (the user message, the assistant turns, the tool results) are appended. A turn
//! that fails or is cancelled appends nothing. The session is `busy` while a turn runs, and
//! a second turn fails at once with [`SessionError::Busy`]; a turn suspended for approval
//! keeps the session busy until [`Session::decide`] ends it.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use agentloop::prelude::*;
//! use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
//! use agentloop::store::MemoryStore;
//! use std::sync::Arc;
//!
//! let model = ScriptedModel::new([ScriptedTurn::text("Hi Ada!"), ScriptedTurn::text("Ada.")]);
//! let agent = Agent::builder(model).session_store(Arc::new(MemoryStore::new())).build()?;
//! let session = agent.session("chat-1").await?;
//! session.run("I am Ada.").await?;
//! let outcome = session.run("What is my name?").await?; // the model sees the first turn
//! assert_eq!(outcome.answer, "Ada.");
//! assert_eq!(session.history().await?.len(), 4);
//! # Ok(()) }
//! ```

use crate::agent::{new_run_id, outcome_of, Agent, RunInput, RunOptions};
use crate::driver::EventStream;
use crate::error::{ResumeError, SessionError};
use crate::event::Event;
use crate::message::Message;
use crate::run::{Decision, Outcome, Run};
use crate::store::{SessionInfo, SessionState, SessionStore, StoreError};
use futures::StreamExt;
use std::sync::Arc;

mod elsewhere;

/// A multi-turn session of an agent. Get one with [`Agent::session`].
#[derive(Clone)]
pub struct Session {
    agent: Agent,
    store: Arc<dyn SessionStore>,
    context_id: String,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("context_id", &self.context_id).finish()
    }
}

impl Agent {
    /// Opens (creating it if needed) the multi-turn session `context_id`: its runs share the
    /// conversation kept in the agent's session store.
    pub async fn session(&self, context_id: impl Into<String>) -> Result<Session, SessionError> {
        let store = self.session_store().cloned().ok_or(SessionError::NoSessionStore)?;
        let context_id = context_id.into();
        let agent = self.in_context(&context_id);
        Session::open(agent, store, context_id).await
    }
}

impl Session {
    async fn open(
        agent: Agent,
        store: Arc<dyn SessionStore>,
        context_id: String,
    ) -> Result<Self, SessionError> {
        store.open_session(&context_id).await?;
        Ok(Self { agent, store, context_id })
    }

    /// The session's id (the `context_id` of its runs).
    pub fn context_id(&self) -> &str {
        &self.context_id
    }

    /// Its state and counters.
    pub async fn info(&self) -> Result<SessionInfo, SessionError> {
        Ok(self.store.open_session(&self.context_id).await?)
    }

    /// The conversation so far.
    pub async fn history(&self) -> Result<Vec<Message>, SessionError> {
        Ok(self.store.session_messages(&self.context_id).await?)
    }

    /// Runs one turn to its end and returns the outcome.
    pub async fn run(&self, input: impl Into<RunInput>) -> Result<Outcome, SessionError> {
        let events = self.run_stream(input).await?;
        Ok(outcome_of(events).await?)
    }

    /// Starts one turn and streams its events. Fails with [`SessionError::Busy`] while
    /// another turn runs. The turn ends (and the session is ready again) before the run's
    /// terminal event is streamed; dropping the stream cancels the run and ends the turn.
    pub async fn run_stream(
        &self,
        input: impl Into<RunInput>,
    ) -> Result<EventStream, SessionError> {
        self.run_stream_with(input, RunOptions::default()).await
    }

    /// [`run_stream`](Self::run_stream) with options.
    pub async fn run_stream_with(
        &self,
        input: impl Into<RunInput>,
        mut options: RunOptions,
    ) -> Result<EventStream, SessionError> {
        let run_id = options.run_id.get_or_insert_with(new_run_id).clone();
        let mut messages = self.store.begin_turn(&self.context_id, &run_id).await?;
        let stored = messages.len();
        messages.extend(input.into().0);
        let events = self.agent.run_stream_with(messages, options);
        Ok(self.turn(events, run_id, stored, None))
    }

    /// Continues the turn in progress after a crash or a restart (the session is `busy` with
    /// a run no process drives any more): resumes its run from the agent's run store and ends
    /// the turn with it. If the run never reached the store, the turn is ended without new
    /// messages and [`ResumeError::NotFound`](crate::ResumeError::NotFound) is returned.
    pub async fn resume_turn(&self) -> Result<EventStream, SessionError> {
        let (run_id, stored) = self.turn_in_progress().await?;
        let (run, next_seq, last, lease) = match self.agent.load_run(&run_id, true).await {
            Ok(loaded) => loaded,
            Err(error) => {
                if matches!(error, ResumeError::NotFound(_)) {
                    self.store.end_turn(&self.context_id, &run_id, &[]).await?;
                }
                return Err(error.into());
            }
        };
        let base = run.clone();
        let (_, events) = self.agent.continue_loaded(run, next_seq, last, lease, None).await;
        Ok(self.turn(events, run_id, stored, Some(base)))
    }

    /// Continues a turn suspended for approval with the human decisions (the run is loaded
    /// from the agent's run store: see [`Agent::decide`]).
    pub async fn decide(
        &self,
        decisions: impl IntoIterator<Item = (String, Decision)>,
    ) -> Result<EventStream, SessionError> {
        self.decide_by(decisions, None).await
    }

    /// [`decide`](Self::decide), journaling who made the decisions (see [`Agent::decide_by`]).
    pub async fn decide_by(
        &self,
        decisions: impl IntoIterator<Item = (String, Decision)>,
        by: Option<String>,
    ) -> Result<EventStream, SessionError> {
        let (run_id, stored) = self.turn_in_progress().await?;
        let (base, _, _) = self.agent.fold_stored(&run_id).await?;
        let events = self.agent.decide_by(&run_id, decisions, by).await?;
        Ok(self.turn(events, run_id, stored, Some(base)))
    }

    /// Answers the question the session's last turn stopped to ask (its run finished with
    /// the stop reason `awaiting_input`): the same run goes on with `message` as the user's
    /// (see [`Agent::answer`]), as a new turn of the session whose new messages — the answer
    /// and what follows — are appended when it ends. Refused unless the session is ready and
    /// its last turn was `run_id`: after a later turn the run's history and the session's
    /// would differ.
    pub async fn answer(
        &self,
        run_id: &str,
        message: Message,
    ) -> Result<EventStream, SessionError> {
        let (base, stored) = self.begin_answer_turn(run_id).await?;
        match self.agent.answer(run_id, message).await {
            Ok(events) => Ok(self.turn(events, run_id.to_owned(), stored, Some(base))),
            Err(error) => {
                self.store.end_turn(&self.context_id, run_id, &[]).await?;
                Err(error.into())
            }
        }
    }

    /// Begins the turn of an answer to the question the session's last turn (`run_id`)
    /// stopped to ask: the run and the number of stored messages. Refused unless the session
    /// is ready and its last turn was `run_id` with the run's whole history.
    async fn begin_answer_turn(&self, run_id: &str) -> Result<(Run, usize), SessionError> {
        let info = self.store.open_session(&self.context_id).await?;
        let not_last = || StoreError::NotInTurn {
            context_id: self.context_id.clone(),
            run_id: run_id.to_owned(),
            state: info.state,
        };
        if info.state == SessionState::Busy || info.run_id.as_deref() != Some(run_id) {
            return Err(not_last().into());
        }
        let (base, _, _) = self.agent.fold_stored(run_id).await?;
        let stored = self.store.begin_turn(&self.context_id, run_id).await?.len();
        if base.history().len() != stored {
            self.store.end_turn(&self.context_id, run_id, &[]).await?;
            return Err(not_last().into());
        }
        Ok((base, stored))
    }

    /// The run of the busy turn and the number of stored messages.
    async fn turn_in_progress(&self) -> Result<(String, usize), SessionError> {
        let info = self.store.open_session(&self.context_id).await?;
        match (info.state, info.run_id) {
            (SessionState::Busy, Some(run_id)) => {
                Ok((run_id, usize::try_from(info.messages).unwrap_or(usize::MAX)))
            }
            (state, run_id) => Err(StoreError::NotInTurn {
                context_id: self.context_id.clone(),
                run_id: run_id.unwrap_or_default(),
                state,
            }
            .into()),
        }
    }

    /// Wraps a turn's events: folds the durable ones to know the run's history, ends the
    /// turn before the terminal event is passed on, and releases it if the stream ends (or
    /// is dropped) without one.
    fn turn(
        &self,
        events: EventStream,
        run_id: String,
        stored: usize,
        base: Option<Run>,
    ) -> EventStream {
        let mut guard = TurnGuard {
            store: self.store.clone(),
            context_id: self.context_id.clone(),
            run_id,
            open: true,
        };
        Box::pin(async_stream::stream! {
            let mut events = events;
            let mut run = base;
            while let Some(event) = events.next().await {
                if event.is_durable() {
                    match &mut run {
                        Some(run) => {
                            if let Err(error) = run.apply(&event) {
                                tracing::warn!(%error, "session: a journal event did not fold");
                            }
                        }
                        None => run = Run::from_journal([&event]).ok(),
                    }
                }
                let new_messages: Option<&[Message]> = match &event {
                    Event::RunFinished { .. } => {
                        Some(run.as_ref().and_then(|r| r.history().get(stored..)).unwrap_or(&[]))
                    }
                    Event::RunFailed { .. } | Event::RunCancelled { .. } => Some(&[]),
                    // Suspended: the turn goes on with `decide`.
                    Event::RunSuspended { .. } => {
                        guard.open = false;
                        None
                    }
                    _ => None,
                };
                if let Some(new_messages) = new_messages {
                    let ended = guard.end(new_messages).await;
                    yield event;
                    if let Err(error) = ended {
                        yield Event::JournalFailed {
                            error: format!("the session's turn could not be saved: {error}"),
                        };
                    }
                } else {
                    yield event;
                }
            }
            if guard.open {
                let _ = guard.end(&[]).await;
            }
        })
    }
}

/// Ends a turn: explicitly, or (dropped while still open) in a background task.
struct TurnGuard {
    store: Arc<dyn SessionStore>,
    context_id: String,
    run_id: String,
    open: bool,
}

impl TurnGuard {
    async fn end(&mut self, new_messages: &[Message]) -> Result<(), StoreError> {
        if !self.open {
            return Ok(());
        }
        self.open = false;
        let ended = self.store.end_turn(&self.context_id, &self.run_id, new_messages).await;
        if let Err(error) = &ended {
            tracing::error!(%error, context_id = self.context_id, "session: the turn could not end");
        }
        ended.map(drop)
    }
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        let (store, context_id, run_id) =
            (self.store.clone(), self.context_id.clone(), self.run_id.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Err(error) = store.end_turn(&context_id, &run_id, &[]).await {
                        tracing::error!(%error, context_id, "session: a dropped turn could not end");
                    }
                });
            }
            Err(_) => tracing::error!(
                context_id = self.context_id,
                "session: a turn was dropped outside a runtime and stays busy"
            ),
        }
    }
}
