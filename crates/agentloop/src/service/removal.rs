//! Deleting runs through the run service: [`RunService::delete`] (one run, with its sub-agent
//! runs) and [`RunService::prune`] (every run past an age, in batches), both with the store's
//! all-together removal (`RunStore::remove_runs`: one SQLite transaction, one Redis script per
//! batch), refusing or skipping runs whose lease is live. What lives outside the run store and
//! belongs to a run (an A2A server's push configs) is removed by the [`RunsDeleted`] listeners
//! the service is given, after the store's removal.

use super::{RunService, ServiceError};
use crate::store::{now_ms, Removal, RemovalRule, RunFilter, RunState};
use async_trait::async_trait;
use std::time::Duration;

/// Told of every run the service deleted, after the store removed it: for what a higher layer
/// keeps per run outside the run store (the A2A server's push notification configs).
#[async_trait]
pub trait RunsDeleted: Send + Sync {
    /// `run_ids` were removed from the store; remove what belongs to them. An error is
    /// reported by the deletion ([`ServiceError::Listener`]); the runs stay removed.
    async fn runs_deleted(&self, run_ids: &[String]) -> Result<(), String>;
}

/// What [`RunService::prune`] removes: runs whose last entry is older than `older_than`, in
/// one of `states` (by default the ended ones: finished, failed, cancelled), `batch` runs per
/// transaction or script.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PruneOptions {
    /// How old a run's last entry must be.
    pub older_than: Duration,
    /// The states a run must be in.
    pub states: Vec<RunState>,
    /// Runs removed per transaction (SQLite) or script call (Redis); default 500.
    pub batch: usize,
}

/// [`PruneOptions::batch`] by default.
pub const DEFAULT_PRUNE_BATCH: usize = 500;

impl PruneOptions {
    /// The ended runs (finished, failed, cancelled) whose last entry is older than
    /// `older_than`.
    pub fn older_than(older_than: Duration) -> Self {
        Self {
            older_than,
            states: vec![RunState::Finished, RunState::Failed, RunState::Cancelled],
            batch: DEFAULT_PRUNE_BATCH,
        }
    }

    /// Only runs in one of `states` (instead of the ended ones).
    pub fn states(mut self, states: impl IntoIterator<Item = RunState>) -> Self {
        self.states = states.into_iter().collect();
        self
    }

    /// Runs removed per transaction or script call (at least 1).
    pub fn batch(mut self, batch: usize) -> Self {
        self.batch = batch.max(1);
        self
    }
}

/// What [`RunService::prune`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PruneReport {
    /// Runs removed (sub-agent runs removed with their parent included).
    pub removed: u64,
    /// Runs kept because an executor holds their lease (or a sub-agent run's).
    pub skipped_live: u64,
    /// Runs kept because they changed between the listing and the removal (resumed).
    pub skipped_changed: u64,
    /// Transactions or script calls that removed them.
    pub batches: u64,
}

impl RunService {
    /// Deletes a run with everything it owns (journal, registry row, lease, control requests,
    /// artifacts and tool outputs, its session's reference to it) and with its sub-agent runs
    /// — every run whose parent leads to it, so no run is left naming a parent that is gone —
    /// all together. Refused while the run, or one of its sub-agent runs, has a live lease
    /// ([`ServiceError::LeaseLive`]). Gives the runs deleted, the run first.
    pub async fn delete(&self, run_id: &str) -> Result<Vec<String>, ServiceError> {
        let removals = self.store.remove_runs(&[run_id.to_owned()], &RemovalRule::any()).await?;
        match removals.into_iter().next() {
            Some(Removal::Removed { run_ids }) => {
                self.tell_deleted(&run_ids).await?;
                Ok(run_ids)
            }
            Some(Removal::LeaseLive { run_id: held, owner, expires_in_ms }) => {
                Err(ServiceError::LeaseLive {
                    run_id: run_id.to_owned(),
                    held,
                    owner,
                    expires_in_ms,
                })
            }
            Some(Removal::NotFound | Removal::NotMatching) | None => {
                Err(ServiceError::NotFound(run_id.to_owned()))
            }
        }
    }

    /// Deletes every run `options` names, as [`delete`](Self::delete) does, a batch at a time
    /// (the store's lock is held for one batch only), skipping runs with a live lease.
    pub async fn prune(&self, options: &PruneOptions) -> Result<PruneReport, ServiceError> {
        let cutoff = now_ms().saturating_sub(duration_ms(options.older_than));
        let rule = RemovalRule::any().states(options.states.clone()).updated_before(cutoff);
        let mut report = PruneReport::default();
        for state in &options.states {
            let base = RunFilter::all().state(*state).created_between(0, cutoff);
            let mut filter = base.clone().limit(options.batch);
            loop {
                let page = self.store.list_runs(&filter).await?;
                let Some(last) = page.last() else { break };
                filter = base.clone().limit(options.batch).after(last.cursor());
                let full = page.len() >= options.batch;
                let ids: Vec<String> = page
                    .into_iter()
                    .filter(|run| run.updated_ms < cutoff)
                    .map(|run| run.run_id)
                    .collect();
                if !ids.is_empty() {
                    self.prune_batch(&ids, &rule, &mut report).await?;
                }
                if !full {
                    break;
                }
            }
        }
        Ok(report)
    }

    async fn prune_batch(
        &self,
        ids: &[String],
        rule: &RemovalRule,
        report: &mut PruneReport,
    ) -> Result<(), ServiceError> {
        let removals = self.store.remove_runs(ids, rule).await?;
        report.batches += 1;
        let mut deleted = Vec::new();
        for removal in removals {
            match removal {
                Removal::Removed { run_ids } => deleted.extend(run_ids),
                Removal::LeaseLive { .. } => report.skipped_live += 1,
                Removal::NotMatching => report.skipped_changed += 1,
                // Removed already, with its parent.
                Removal::NotFound => {}
            }
        }
        report.removed += deleted.len() as u64;
        self.tell_deleted(&deleted).await
    }

    async fn tell_deleted(&self, run_ids: &[String]) -> Result<(), ServiceError> {
        if run_ids.is_empty() {
            return Ok(());
        }
        for listener in &self.deleted {
            listener
                .runs_deleted(run_ids)
                .await
                .map_err(|error| ServiceError::Listener { run_ids: run_ids.to_vec(), error })?;
        }
        Ok(())
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
