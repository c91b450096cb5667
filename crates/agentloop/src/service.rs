//! The run service: runs seen and controlled from any process, through the store they are
//! journaled in. An executor (an [`Agent`](crate::Agent) with a store) journals its run, holds
//! the run's lease and reads what is requested of it; a [`RunService`] on the same store — in
//! the same process or another one — lists runs, follows a run's journal as it grows, and asks
//! its executor to cancel, pause or go on, decides on the calls a run deferred for approval
//! and answers the question a run asked.
//!
//! A decision or an answer is recorded in the store ([`RemoteControl`]); the run takes it
//! when it is continued — by [`Agent::resume`](crate::Agent::resume) in any process with the
//! agent (`agentloop runs resume`), which applies what was requested before going on, or, by
//! a service that continues runs ([`RunService::continue_with`]: a worker pool's queue), at
//! once by a worker.
//!
//! ```no_run
//! # async fn demo(store: std::sync::Arc<dyn agentloop::store::RunStore>) -> Result<(), Box<dyn std::error::Error>> {
//! use agentloop::service::RunService;
//! use futures::StreamExt;
//! let service = RunService::new(store);
//! let mut events = service.subscribe("run_0193…", 0);
//! while let Some(envelope) = events.next().await {
//!     let envelope = envelope?;
//!     println!("{} {}", envelope.seq, envelope.event.kind());
//! }
//! service.cancel("run_0194…", "the user closed the tab").await?;
//! # Ok(()) }
//! ```

use crate::protocol::Envelope;
use crate::run::{Decision, Run, RunError};
use crate::store::{
    ControlRequest, InputAnswer, JournalEntry, RemoteControl, RunFilter, RunStore, RunSummary,
    StoreError,
};
use futures::stream::BoxStream;
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;

mod check;
mod fork;
mod removal;

pub use check::{CheckReport, Disagreement, Problem, Repair};
pub use removal::{PruneOptions, PruneReport, RunsDeleted, DEFAULT_PRUNE_BATCH};

/// Why the run service refused a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store has no such run.
    #[error("no run '{0}'")]
    NotFound(String),
    /// The run has no call of this id waiting for a decision.
    #[error("run '{run_id}' has no call '{call_id}' waiting for approval")]
    NotAwaitingApproval {
        /// The run.
        run_id: String,
        /// The call.
        call_id: String,
    },
    /// The run did not stop to ask a question (or it was answered).
    #[error("run '{0}' is not waiting for an answer")]
    NotAwaitingInput(String),
    /// The run, or one of its sub-agent runs (`held`), has a live lease: an executor runs it.
    #[error(
        "run '{run_id}' cannot be deleted: run '{held}' is being executed by '{owner}' (its \
         lease expires in {expires_in_ms} ms unless renewed; if that process died, try again \
         then)"
    )]
    LeaseLive {
        /// The run asked for.
        run_id: String,
        /// The run whose lease is live (the run itself or a sub-agent run of it).
        held: String,
        /// The lease's holder.
        owner: String,
        /// How long the lease lasts unless renewed.
        expires_in_ms: u64,
    },
    /// The runs were deleted, but a [`RunsDeleted`] listener failed.
    #[error(
        "runs {run_ids:?} were deleted, but what they own outside the run store was not: {error}"
    )]
    Listener {
        /// The runs deleted.
        run_ids: Vec<String>,
        /// What the listener said.
        error: String,
    },
    /// The request was recorded, but the run could not be given to a worker to continue.
    #[error("recorded for run '{run_id}', but it could not be queued to continue: {error}")]
    Continuation {
        /// The run.
        run_id: String,
        /// What the queue said.
        error: String,
    },
    /// The run's journal does not fold into a run.
    #[error("run '{run_id}': {error}")]
    Journal {
        /// The run.
        run_id: String,
        /// Why.
        error: RunError,
    },
    /// A fork was asked for at a point where it cannot be made ([`RunService::fork`]).
    #[error("run '{run_id}' cannot be forked at entry {at_seq}: {reason}")]
    ForkPoint {
        /// The run.
        run_id: String,
        /// The fork point asked for.
        at_seq: u64,
        /// Why.
        reason: String,
    },
}

/// How often a subscription reads the journal when the store pushes appends
/// ([`RunStore::watch`]): only to make up for a lost message.
pub const PUSH_FALLBACK: Duration = Duration::from_secs(1);

/// How often a subscription reads the journal for new entries, by default.
pub const DEFAULT_POLL: Duration = Duration::from_millis(25);

/// Runs in a store, seen and controlled from any process (see the [module docs](self)).
#[derive(Clone)]
pub struct RunService {
    store: Arc<dyn RunStore>,
    poll: Duration,
    /// Told of the runs [`delete`](Self::delete) and [`prune`](Self::prune) removed.
    deleted: Vec<Arc<dyn RunsDeleted>>,
    /// Told of the runs a decision, an answer or a cancel was recorded for.
    continuations: Option<Arc<dyn ContinueRun>>,
}

/// Continues runs that something was requested of (a decision on a call, an answer, a
/// cancel): with a worker pool, a job for the run (`agentloop::worker::Queue`), so that a
/// run suspended for a human goes on by itself once the human decided.
#[async_trait::async_trait]
pub trait ContinueRun: Send + Sync {
    /// A request for `run_id` was recorded: have it continued. An error is reported by the
    /// request ([`ServiceError::Continuation`]); the request stays recorded.
    async fn continue_run(&self, run_id: &str) -> Result<(), String>;
}

impl std::fmt::Debug for RunService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunService").field("poll", &self.poll).finish_non_exhaustive()
    }
}

impl RunService {
    /// The service over `store`.
    pub fn new(store: Arc<dyn RunStore>) -> Self {
        Self { store, poll: DEFAULT_POLL, deleted: Vec::new(), continuations: None }
    }

    /// Tells `listener` of every run this service deletes (after the store removed it): for
    /// what a higher layer keeps per run outside the run store, such as the A2A server's push
    /// notification configs.
    pub fn on_deleted(mut self, listener: Arc<dyn RunsDeleted>) -> Self {
        self.deleted.push(listener);
        self
    }

    /// Has every run that a decision, an answer or a cancel is recorded for continued by
    /// `continuation` (a worker pool's queue).
    pub fn continue_with(mut self, continuation: Arc<dyn ContinueRun>) -> Self {
        self.continuations = Some(continuation);
        self
    }

    /// Has the run continued, when the service continues runs.
    async fn continued(
        &self,
        run_id: &str,
        recorded: RemoteControl,
    ) -> Result<RemoteControl, ServiceError> {
        if let Some(continuation) = &self.continuations {
            continuation
                .continue_run(run_id)
                .await
                .map_err(|error| ServiceError::Continuation { run_id: run_id.to_owned(), error })?;
        }
        Ok(recorded)
    }

    /// How often a subscription looks for new entries (default [`DEFAULT_POLL`]).
    pub fn poll_interval(mut self, poll: Duration) -> Self {
        self.poll = poll.max(Duration::from_millis(1));
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn RunStore> {
        &self.store
    }

    /// Runs matching `filter`, newest first.
    pub async fn list(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        self.store.list_runs(filter).await
    }

    /// The run's journal from `from_seq` on, as [`Envelope`]s (`sub` 0, the entry's `seq`,
    /// `at_ms` and format): the entries already written, then each new one
    /// as the executor appends it (read when the store's push channel says the journal grew —
    /// Redis — or else every poll interval: SQLite, memory), in order, without
    /// gaps or duplicates — a subscriber that reconnects passes the `seq` after the last entry
    /// it saw. The subscription ends after an entry whose event ends the run (finished,
    /// failed, cancelled, or suspended for approval: a suspended run that is continued later
    /// can be subscribed to again), or, when it starts past such an entry, at once. It ends
    /// with an error when the store fails. Journaled events only: text, argument and
    /// reasoning deltas reach only the executor's own event stream.
    pub fn subscribe(
        &self,
        run_id: &str,
        from_seq: u64,
    ) -> BoxStream<'static, Result<Envelope, StoreError>> {
        let (store, poll, run_id) = (self.store.clone(), self.poll, run_id.to_owned());
        Box::pin(async_stream::stream! {
            // The store's push channel, if it has one, opened before the first read: an
            // append after that read wakes the loop. Without one (or once it is lost), poll.
            let mut wake = match store.watch(&run_id).await {
                Ok(wake) => wake,
                Err(error) => {
                    tracing::warn!(%error, run_id, "subscription: no push channel, polling");
                    None
                }
            };
            // From the entry before `from_seq`, to know whether the run already ended there.
            let mut next = from_seq.saturating_sub(1);
            let mut skip_first = from_seq > 0;
            loop {
                let entries = match store.load_from(&run_id, next).await {
                    Ok(entries) => entries,
                    Err(error) => {
                        yield Err(error);
                        return;
                    }
                };
                let fresh = entries.len() > usize::from(skip_first);
                for entry in entries {
                    next = entry.seq + 1;
                    let ended = entry.event.outcome().is_some();
                    if std::mem::take(&mut skip_first) {
                        if ended {
                            return;
                        }
                        continue;
                    }
                    yield Ok(Envelope::from_entry(&run_id, entry));
                    if ended {
                        return;
                    }
                }
                if !fresh {
                    match &mut wake {
                        Some(channel) => {
                            // Woken by an append; a read every PUSH_FALLBACK besides, in case
                            // a message was lost (pub/sub delivers at most once).
                            tokio::select! {
                                woken = channel.next() => if woken.is_none() { wake = None },
                                () = tokio::time::sleep(PUSH_FALLBACK) => {}
                            }
                        }
                        None => tokio::time::sleep(poll).await,
                    }
                }
            }
        })
    }

    /// Asks the run's executor, wherever it runs, to cancel the run (as
    /// [`RunHandle::cancel`](crate::RunHandle::cancel) does in its process): it reads the
    /// request within [`REMOTE_CONTROL_POLL`](crate::store::REMOTE_CONTROL_POLL) and cancels
    /// the model request and the running tools at once. A run that no executor holds now is
    /// cancelled by the next one that resumes it.
    pub async fn cancel(
        &self,
        run_id: &str,
        reason: impl Into<String>,
    ) -> Result<RemoteControl, ServiceError> {
        let recorded =
            self.store.request_control(run_id, ControlRequest::Cancel(reason.into())).await?;
        self.continued(run_id, recorded).await
    }

    /// Asks the run's executor to pause at its next safe point (as
    /// [`RunHandle::pause_with`](crate::RunHandle::pause_with)).
    pub async fn pause(
        &self,
        run_id: &str,
        reason: impl Into<String>,
    ) -> Result<RemoteControl, StoreError> {
        self.store.request_control(run_id, ControlRequest::Pause(reason.into())).await
    }

    /// Asks the run's executor to go on after a pause requested with [`pause`](Self::pause).
    pub async fn resume(&self, run_id: &str) -> Result<RemoteControl, StoreError> {
        self.store.request_control(run_id, ControlRequest::Resume).await
    }

    /// Approves a call the run deferred for approval. The run runs it when it is continued
    /// (see the [module docs](self)).
    pub async fn approve(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> Result<RemoteControl, ServiceError> {
        self.decide(run_id, call_id, Decision::Approve).await
    }

    /// Rejects a call the run deferred for approval: the model sees `reason` as the call's
    /// error result when the run is continued.
    pub async fn reject(
        &self,
        run_id: &str,
        call_id: &str,
        reason: impl Into<String>,
    ) -> Result<RemoteControl, ServiceError> {
        self.decide(run_id, call_id, Decision::Reject { reason: reason.into() }).await
    }

    /// Runs again a call that waits for an operator (the run's state is `needs_attention`: a
    /// crash left the call in flight and its tool is not safe to retry), with the same
    /// idempotency key, when the run is continued. The same as [`approve`](Self::approve).
    pub async fn retry_call(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> Result<RemoteControl, ServiceError> {
        self.decide(run_id, call_id, Decision::Approve).await
    }

    /// Supplies the result of a call that waits for a decision (an operator who checked what
    /// a call left in flight by a crash did): the model sees `result` as the call's result
    /// when the run is continued, and the call does not run.
    pub async fn set_result(
        &self,
        run_id: &str,
        call_id: &str,
        result: serde_json::Value,
    ) -> Result<RemoteControl, ServiceError> {
        self.decide(run_id, call_id, Decision::SetResult { result }).await
    }

    /// Fails a call that waits for a decision: the model sees `reason` as its error result
    /// when the run is continued (as [`reject`](Self::reject)).
    pub async fn fail_call(
        &self,
        run_id: &str,
        call_id: &str,
        reason: impl Into<String>,
    ) -> Result<RemoteControl, ServiceError> {
        self.reject(run_id, call_id, reason).await
    }

    /// Records a decision on a call the run deferred for approval (refused unless the call
    /// waits for one). A later decision on the same call, before the run takes it, wins.
    pub async fn decide(
        &self,
        run_id: &str,
        call_id: &str,
        decision: Decision,
    ) -> Result<RemoteControl, ServiceError> {
        self.decide_by(run_id, call_id, decision, None).await
    }

    /// [`decide`](Self::decide), naming who decided (`by`, as the caller names them; the
    /// run journals it with the decision: [`Event::ApprovalDecided`](crate::Event)'s `by`).
    pub async fn decide_by(
        &self,
        run_id: &str,
        call_id: &str,
        decision: Decision,
        by: Option<String>,
    ) -> Result<RemoteControl, ServiceError> {
        let (run, _) = self.fold(run_id).await?;
        if !run.awaiting_approval().iter().any(|call| call.id == call_id) {
            return Err(ServiceError::NotAwaitingApproval {
                run_id: run_id.to_owned(),
                call_id: call_id.to_owned(),
            });
        }
        let request = ControlRequest::Decide { call_id: call_id.to_owned(), decision, by };
        let recorded = self.store.request_control(run_id, request).await?;
        self.continued(run_id, recorded).await
    }

    /// Answers the question the run stopped to ask (an ask-user tool; the run finished with
    /// the stop reason `awaiting_input`, and its state is `suspended`): when the run is
    /// continued, `text` joins its history as the user's message and the same run goes on.
    /// Refused when the run does not wait for an answer. The answer holds for this question
    /// only: it is ignored once the run has gone on.
    pub async fn send_input(
        &self,
        run_id: &str,
        text: impl Into<String>,
    ) -> Result<RemoteControl, ServiceError> {
        let (run, last_seq) = self.fold(run_id).await?;
        if run.awaiting_input().is_none() {
            return Err(ServiceError::NotAwaitingInput(run_id.to_owned()));
        }
        let answer = InputAnswer { for_seq: last_seq, text: text.into() };
        let recorded = self.store.request_control(run_id, ControlRequest::Input(answer)).await?;
        self.continued(run_id, recorded).await
    }

    /// The run folded from its journal, and the sequence number of its last entry.
    async fn fold(&self, run_id: &str) -> Result<(Run, u64), ServiceError> {
        let entries = self.store.load(run_id).await?;
        let Some(last_seq) = entries.last().map(|entry| entry.seq) else {
            return Err(ServiceError::NotFound(run_id.to_owned()));
        };
        let run = Run::from_journal(entries.iter().map(|entry: &JournalEntry| &*entry.event))
            .map_err(|error| ServiceError::Journal { run_id: run_id.to_owned(), error })?;
        Ok((run, last_seq))
    }
}
