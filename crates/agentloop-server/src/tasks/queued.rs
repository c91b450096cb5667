//! Tasks executed by a worker pool (`agentloop::worker`): a host with a queue journals a new
//! task's start as a turn of its session and adds the run's job to the agent's queue; a
//! message that answers or decides is recorded through the run service, which queues the
//! run's continuation; a cancel reaches the worker that holds the run. The worker ends the
//! session's turn when the run stops. Streams follow the run's journal (journaled events
//! only: the answer arrives whole), whichever worker executes it.

use super::{decided_by, parse_decisions, Accepted, Host};
use crate::mapping::TaskFold;
use a2a::A2AError;
use agentloop::message::Message;
use agentloop::protocol::Envelope;
use agentloop::worker::{JobKind, Queue, WorkerError};
use agentloop::{RunOptions, SessionError};
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// The JSON-RPC code of a refusal because the agent's queue is full (an
/// implementation-defined server error; the REST binding answers 503 with `Retry-After`).
pub const QUEUE_FULL: i32 = -32050;

/// How long a client refused by a full queue is told to wait.
pub const QUEUE_FULL_RETRY_SECS: u64 = 5;

/// The refusal of a full queue, with its retry hint (`google.rpc.RetryInfo` and an
/// `ErrorInfo` of reason `QUEUE_FULL`).
pub fn queue_full(error: &WorkerError) -> A2AError {
    let retry = format!("{QUEUE_FULL_RETRY_SECS}s");
    let info = a2a::errordetails::TypedDetail::error_info(
        "QUEUE_FULL",
        "agentloop",
        Some(HashMap::from([("retryAfterSeconds".to_owned(), QUEUE_FULL_RETRY_SECS.to_string())])),
    );
    let retry_info = a2a::errordetails::TypedDetail::new(
        "type.googleapis.com/google.rpc.RetryInfo",
        HashMap::from([("retryDelay".to_owned(), serde_json::Value::String(retry))]),
    );
    A2AError::new(QUEUE_FULL, format!("{error}; retry in {QUEUE_FULL_RETRY_SECS} s"))
        .with_details(vec![info, retry_info])
}

impl Host {
    /// Starts a task for the pool: its run's start journaled as the session's turn, its job
    /// queued.
    pub(super) async fn start_queued(
        self: &Arc<Self>,
        queue: &Queue,
        context_id: &str,
        user: Message,
        options: RunOptions,
    ) -> Result<Accepted, A2AError> {
        let run_id = agentloop::agent::new_run_id();
        let options = RunOptions { run_id: Some(run_id.clone()), ..options };
        let session = self
            .served
            .agent
            .session(self.session_id(context_id))
            .await
            .map_err(|e| self.session_error(e))?;
        let created = match session.create_turn(user.clone(), options.clone()).await {
            // The worker of the session's last run may not have ended its turn yet.
            Err(SessionError::Busy { run_id: busy, .. }) if self.settle(&busy).await => {
                session.create_turn(user.clone(), options).await
            }
            other => other,
        };
        created.map_err(|e| self.session_error(e))?;
        let name = self.served.name();
        match queue.enqueue(name, &run_id, JobKind::Start).await {
            Ok(_) => {}
            Err(full @ WorkerError::QueueFull { .. }) => {
                // Refused: nothing of the task is left.
                if let Err(error) = session.release_turn(&run_id).await {
                    tracing::warn!(%error, run_id, "a2a: a refused task's turn could not end");
                }
                if let Err(error) = self.service.store().delete_run(&run_id).await {
                    tracing::warn!(%error, run_id, "a2a: a refused task stays journaled");
                }
                return Err(queue_full(&full));
            }
            // Journaled: a worker's sweep queues it.
            Err(error) => {
                tracing::warn!(%error, run_id, "a2a: a task's job could not be queued; a sweep queues it")
            }
        }
        let task = super::fold_start(&run_id, context_id, user);
        Ok(Accepted { task, events: self.follow(run_id, 0) })
    }

    /// Continues a task that waits for input for the pool: the decisions or the answer are
    /// recorded through the run service, which queues the run's continuation.
    pub(super) async fn continue_queued(
        self: &Arc<Self>,
        task_id: &str,
        fold: &TaskFold,
        message: &a2a::Message,
        user: Message,
    ) -> Result<Accepted, A2AError> {
        let next_seq = fold.last_seq().map_or(0, |seq| seq + 1);
        if fold.awaits_approval() {
            let decisions = parse_decisions(message, fold.awaiting_approval())?;
            let by = decided_by(message);
            for (call_id, decision) in decisions {
                self.service
                    .decide_by(task_id, &call_id, decision, Some(by.clone()))
                    .await
                    .map_err(|e| A2AError::invalid_params(e.to_string()))?;
            }
        } else {
            let session = self
                .served
                .agent
                .session(self.session_id(fold.context_id()))
                .await
                .map_err(|e| self.session_error(e))?;
            session.begin_answer(task_id).await.map_err(|e| self.session_error(e))?;
            if let Err(error) = self.service.send_input(task_id, user.text()).await {
                if let Err(error) = session.release_turn(task_id).await {
                    tracing::warn!(%error, task_id, "a2a: an answer's turn could not end");
                }
                return Err(A2AError::invalid_params(error.to_string()));
            }
        }
        let task = super::working_again(fold);
        Ok(Accepted { task, events: self.follow(task_id.to_owned(), next_seq) })
    }

    /// Ends the session turn of `run_id` if the run has stopped (its worker had not yet):
    /// whether it did.
    async fn settle(&self, run_id: &str) -> bool {
        match self.served.agent.settle_turn(run_id).await {
            Ok(settled) => settled,
            Err(error) => {
                tracing::warn!(%error, run_id, "a2a: a stopped run's turn could not end");
                false
            }
        }
    }

    /// The run's journaled events from `from_seq`, as a worker writes them, until the run
    /// stops or the listener goes away. A continued run's journal ends, until the worker
    /// takes it, with the entry that stopped it: its next entries are waited for here (the
    /// service's subscription would see the run stopped and end). The session's turn ends
    /// before the event that stops the run is passed on (as a turn driven here does), so a
    /// client that saw it can send the context's next message at once.
    fn follow(
        self: &Arc<Self>,
        run_id: String,
        from_seq: u64,
    ) -> mpsc::UnboundedReceiver<Envelope> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let service = self.service.clone();
        let host = self.clone();
        tokio::spawn(async move {
            let mut next = from_seq;
            let mut wait = Duration::from_millis(20);
            loop {
                if sender.is_closed() {
                    return;
                }
                let entries = match service.store().load_from(&run_id, next).await {
                    Ok(entries) => entries,
                    Err(error) => {
                        tracing::warn!(%error, run_id, "a2a: the task's journal cannot be read");
                        return;
                    }
                };
                if entries.is_empty() {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_millis(250));
                    continue;
                }
                for entry in entries {
                    next = entry.seq + 1;
                    let ended = entry.event.outcome().is_some();
                    if ended {
                        host.settle(&run_id).await;
                    }
                    if sender.send(Envelope::from_entry(&run_id, entry)).is_err() || ended {
                        return;
                    }
                }
                break;
            }
            let mut journal = service.subscribe(&run_id, next);
            while let Some(envelope) = journal.next().await {
                let envelope = match envelope {
                    Ok(envelope) => envelope,
                    Err(error) => {
                        tracing::warn!(%error, run_id, "a2a: the task's journal cannot be read");
                        break;
                    }
                };
                if envelope.event.outcome().is_some() {
                    host.settle(&run_id).await;
                }
                if sender.send(envelope).is_err() {
                    break;
                }
            }
        });
        receiver
    }
}
