//! What the stores offer for keeping a store in order: removing runs with everything they own
//! ([`RemovalRule`], [`Removal`]: `RunStore::remove_runs`), and the raw facts that
//! [`RunService::check`](crate::service::RunService::check) compares — every registry row with
//! its journal's length ([`RegistryRow`]), journals without a row ([`OrphanJournal`]).
//!
//! **What a run owns**, removed with it all together (one SQLite transaction, one Redis
//! script): its journal, its registry row (and its place in the listing indexes), its lease,
//! its control requests, its artifacts (tool outputs kept by reference among them), and its
//! sub-agent runs — every run whose `parent_run_id` leads to it — with all of theirs: a
//! removal never leaves a run naming a parent that is gone. A session whose turn in progress
//! (or last turn) was the run forgets the run (a busy session is ready again); the
//! conversation stays the session's.

use super::{RunState, RunSummary};

/// Which of the runs named to `RunStore::remove_runs` may go, checked in the removal's own
/// transaction or script (a run resumed since it was listed no longer matches a prune).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemovalRule {
    /// Only runs in one of these states (empty: any state).
    pub states: Vec<RunState>,
    /// Only runs whose last entry was appended before this time (ms since the Unix epoch).
    pub updated_before_ms: Option<u64>,
}

impl RemovalRule {
    /// Any run (whose lease is not live).
    pub fn any() -> Self {
        Self::default()
    }

    /// Only runs in one of `states`.
    pub fn states(mut self, states: impl IntoIterator<Item = RunState>) -> Self {
        self.states = states.into_iter().collect();
        self
    }

    /// Only runs whose last entry was appended before `ms`.
    pub fn updated_before(mut self, ms: u64) -> Self {
        self.updated_before_ms = Some(ms);
        self
    }

    /// Whether a run in `state`, last appended to at `updated_ms`, may go.
    pub fn allows(&self, state: RunState, updated_ms: u64) -> bool {
        (self.states.is_empty() || self.states.contains(&state))
            && self.updated_before_ms.is_none_or(|before| updated_ms < before)
    }
}

/// What became of one run named to `RunStore::remove_runs`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Removal {
    /// Removed with everything it owned: the run first, then its descendants.
    Removed {
        /// The runs removed.
        run_ids: Vec<String>,
    },
    /// The store has no registry row for it.
    NotFound,
    /// Kept: it, or one of its descendants, has a live lease (an executor runs it).
    LeaseLive {
        /// The run whose lease is live.
        run_id: String,
        /// Its holder.
        owner: String,
        /// How long the lease lasts unless renewed.
        expires_in_ms: u64,
    },
    /// Kept: it no longer matches the rule (it changed since it was listed).
    NotMatching,
}

/// One registry row as stored, whatever its journal holds, with its journal's length as the
/// store counts it (journal rows in SQLite, the list's length in Redis).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RegistryRow {
    /// The row, with the run's lease.
    pub summary: RunSummary,
    /// The journal entries stored for the run.
    pub journal_entries: u64,
}

/// A journal without a registry row.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OrphanJournal {
    /// The run it names (its `run_started`'s run id), if it can be read.
    pub run_id: Option<String>,
    /// Where the store keeps it (SQLite: the run key of its rows; Redis: the run id of its
    /// key): what `RunStore::adopt_journal` takes.
    pub locator: String,
    /// Its entries.
    pub entries: u64,
}

impl OrphanJournal {
    /// An orphan journal at `locator`.
    pub fn new(run_id: Option<String>, locator: impl Into<String>, entries: u64) -> Self {
        Self { run_id, locator: locator.into(), entries }
    }
}

/// A page of registry rows ([`RunStore::registry_rows`](super::RunStore::registry_rows)).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct RegistryPage {
    /// The rows.
    pub rows: Vec<RegistryRow>,
    /// Where the next page starts (`None`: this was the last).
    pub next: Option<String>,
}

impl RegistryPage {
    /// A page of `rows`, followed by the one at `next`.
    pub fn new(rows: Vec<RegistryRow>, next: Option<String>) -> Self {
        Self { rows, next }
    }
}

impl RegistryRow {
    /// A row with its journal's length.
    pub fn new(summary: RunSummary, journal_entries: u64) -> Self {
        Self { summary, journal_entries }
    }
}
