//! One job: its run resumed under the run's lease and driven to a stop; what to do with the
//! job afterwards (done, handed back, refused, dead-lettered, left for a takeover).

use super::queue::{Job, Queue};
use super::WorkerOptions;
use crate::agent::{Agent, ResumeOptions};
use crate::error::ResumeError;
use crate::event::Event;
use crate::run::Run;
use crate::store::lease::new_owner_id;
use crate::store::{JournalEntry, RunState, StoreError};
use futures::StreamExt;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How a job ends here: the run ended (the job is done), waits for a human or an operator
/// (done: a decision adds the next job), was handed back while draining (a new job continues
/// it), was refused (requeued with one more refusal) or dead-lettered; or the job stays
/// pending, for a takeover: the journal could not be written, or the run could not start
/// (its lease stayed held, the store stayed down, the worker drained).
pub(super) type JobEnd = super::JobOutcome;

/// What a job's task needs of its worker.
pub(super) struct Context {
    pub(super) queue: Queue,
    pub(super) agents: Arc<BTreeMap<String, Agent>>,
    pub(super) options: WorkerOptions,
    pub(super) takeover: Duration,
    pub(super) draining: CancellationToken,
}

impl Context {
    /// Executes `job`; never fails: what went wrong is logged, and the job is left in the
    /// state that gets the run going again.
    pub(super) async fn execute(&self, job: Job) -> JobEnd {
        let end = match self.take_slot(&job).await {
            Ok(true) => self.try_execute(&job).await,
            Ok(false) => {
                self.queue.finish(&job, Some(job.refusals)).await.map(|()| JobEnd::HandedOver)
            }
            Err(error) => Err(error),
        };
        if let Err(error) = self.queue.release(&job).await {
            tracing::debug!(%error, job = job.id, "worker: could not give the job's slot back");
        }
        match end {
            Ok(end) => end,
            Err(error) => {
                tracing::warn!(%error, job = job.id, run_id = ?job.run_id, "worker: job left pending");
                JobEnd::Interrupted
            }
        }
    }

    /// Waits for one of the agent's slots when the pool limits it ([`Queue::set_limit`]);
    /// `false` when the worker drains first (the job is handed back).
    async fn take_slot(&self, job: &Job) -> Result<bool, super::WorkerError> {
        let Some(&limit) = self.queue.limits().await?.get(&job.agent) else { return Ok(true) };
        while !self.queue.acquire(job, limit, self.takeover).await? {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
                () = self.draining.cancelled() => return Ok(false),
            }
        }
        Ok(true)
    }

    async fn try_execute(&self, job: &Job) -> Result<JobEnd, super::WorkerError> {
        let run_id = match &job.run_id {
            Ok(run_id) => run_id.clone(),
            Err(why) => {
                let reason = format!("malformed job: {why}");
                tracing::error!(job = job.id, agent = job.agent, reason, "worker: dead letter");
                self.queue.dead_letter(job, &reason).await?;
                return Ok(JobEnd::DeadLettered);
            }
        };
        let Some(agent) = self.agents.get(&job.agent) else {
            // Not read: a worker reads only its agents' streams.
            return Ok(JobEnd::Interrupted);
        };
        if job.deliveries > self.options.max_deliveries {
            let reason = format!(
                "the job was delivered {} times: each worker that took it stopped before the \
                 run did (it may crash its worker); at most {} deliveries",
                job.deliveries, self.options.max_deliveries
            );
            fail_run(agent, &run_id, &reason).await?;
            tracing::error!(job = job.id, run_id, reason, "worker: dead letter");
            self.queue.dead_letter(job, &reason).await?;
            return Ok(JobEnd::DeadLettered);
        }
        let options = ResumeOptions { hold_unsafe_in_flight: true, ..ResumeOptions::default() };
        let give_up = tokio::time::Instant::now() + self.takeover * 3;
        let mut wait = Duration::from_millis(100);
        let (handle, mut events) = loop {
            let error = match agent.resume_with(&run_id, options.clone()).await {
                Ok(resumed) => break resumed,
                Err(error) => error,
            };
            match error {
                ResumeError::IdentityChanged { differences, .. } => {
                    let reason = format!(
                        "this worker's agent '{}' differs from the run's: {}",
                        job.agent,
                        differences.join("; ")
                    );
                    if job.refusals + 1 >= self.options.max_refusals {
                        tracing::error!(job = job.id, run_id, reason, "worker: dead letter");
                        self.queue.dead_letter(job, &reason).await?;
                        return Ok(JobEnd::DeadLettered);
                    }
                    tracing::warn!(job = job.id, run_id, reason, "worker: job refused");
                    self.queue.refuse(job).await?;
                    return Ok(JobEnd::Refused);
                }
                ResumeError::NotFound(_) => {
                    let reason = format!("no run '{run_id}' in the store");
                    self.queue.dead_letter(job, &reason).await?;
                    return Ok(JobEnd::DeadLettered);
                }
                ResumeError::Run(error) => {
                    let reason = format!("the run's journal cannot be continued: {error}");
                    self.queue.dead_letter(job, &reason).await?;
                    return Ok(JobEnd::DeadLettered);
                }
                error => {
                    // The lease is held (a worker that died has not reached its expiry; an
                    // operator's `runs resume`), or the store is down: wait and try again.
                    let lease_held =
                        matches!(error, ResumeError::Store(StoreError::LeaseHeld { .. }));
                    if self.draining.is_cancelled() || tokio::time::Instant::now() >= give_up {
                        tracing::warn!(%error, run_id, "worker: cannot start the run; job left pending");
                        return Ok(JobEnd::Interrupted);
                    }
                    if !lease_held {
                        tracing::warn!(%error, run_id, "worker: cannot start the run; retrying");
                    }
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = self.draining.cancelled() => {}
                    }
                    wait = (wait * 2).min(Duration::from_secs(1));
                }
            }
        };
        let mut state = None;
        let mut interrupted = None;
        let mut stopping = false;
        loop {
            tokio::select! {
                event = events.next() => match event {
                    None => break,
                    Some(Event::JournalFailed { error }) => interrupted = Some(error),
                    Some(event) => {
                        if event.outcome().is_some() {
                            state = Some(RunState::after(&event));
                        }
                    }
                },
                () = self.draining.cancelled(), if !stopping => {
                    stopping = true;
                    handle.stop_at_safe_point();
                }
            }
        }
        Ok(match (state, interrupted) {
            (Some(state), _) => {
                // A run of a session turn ends the turn here (before the job is done: a
                // worker that dies in between leaves the job to a takeover, which does it).
                if let Err(error) = agent.settle_turn(&run_id).await {
                    tracing::warn!(%error, run_id, "worker: the run's session turn could not end");
                }
                self.queue.finish(job, None).await?;
                match state {
                    RunState::Suspended => JobEnd::Suspended,
                    RunState::NeedsAttention => JobEnd::NeedsAttention,
                    _ => JobEnd::Ended,
                }
            }
            (None, Some(error)) => {
                tracing::warn!(
                    error,
                    run_id,
                    "worker: the run's journal failed; job left for a takeover"
                );
                JobEnd::Interrupted
            }
            (None, None) => {
                // Stopped at a safe point (draining): the next worker continues it.
                self.queue.finish(job, Some(job.refusals)).await?;
                JobEnd::HandedOver
            }
        })
    }
}

/// Ends a run with `run_failed` (unless it is over already), under its lease.
async fn fail_run(agent: &Agent, run_id: &str, reason: &str) -> Result<(), super::WorkerError> {
    let Some(store) = agent.store() else { return Ok(()) };
    let lease = store.claim(run_id, &new_owner_id(), agent.lease_ttl()).await?;
    let failed = async {
        let entries = store.load(run_id).await?;
        if entries.is_empty() {
            return Ok(());
        }
        let mut run = Run::from_journal(entries.iter().map(|entry| &*entry.event))
            .map_err(|error| StoreError::Invalid(error.to_string()))?;
        if run.is_finished() {
            return Ok(());
        }
        run.fail(reason);
        let next = entries.len() as u64;
        let new: Vec<JournalEntry> = (next..)
            .zip(run.drain_events().filter(Event::is_durable))
            .map(|(seq, event)| JournalEntry::of(seq, event))
            .collect::<Result<_, _>>()?;
        store.append_fenced(&lease, next, &new).await.map(|_| ())
    };
    let result: Result<(), StoreError> = failed.await;
    let _ = store.release(&lease).await;
    Ok(result?)
}
