//! Whether the run registry agrees with the journals: [`RunService::check`] compares every
//! registry row with its run's journal (and finds journals without a row);
//! [`RunService::repair`] puts right what it can — a row rebuilt from its journal, a row
//! without a journal removed, a journal without a row given one.

use super::{RunService, ServiceError};
use crate::store::{
    now_ms, OrphanJournal, RegistryRow, Removal, RemovalRule, RunState, SummaryUpdate,
};
use std::collections::HashSet;

/// Registry rows read per store call.
const PAGE: usize = 1_000;

/// One field on which a registry row and its journal disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Disagreement {
    /// The field (`state`, `entries`, `created_ms`, `updated_ms`, `agent`, `context_id`,
    /// `parent_run_id`, `usage`).
    pub field: &'static str,
    /// What the registry row says.
    pub registry: String,
    /// What the journal says.
    pub journal: String,
}

/// A disagreement between the run registry and the journals.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// A registry row whose run has no journal (listings leave it out; `show` finds no run).
    RowWithoutJournal {
        /// The run.
        run_id: String,
        /// Its sub-agent runs (rows naming it as their parent).
        children: usize,
    },
    /// A journal without a registry row (no listing shows it).
    JournalWithoutRow(OrphanJournal),
    /// A row whose state, length, times, names or usage differ from its journal's.
    Disagrees {
        /// The run.
        run_id: String,
        /// Where they differ.
        fields: Vec<Disagreement>,
    },
    /// A journal that does not load (a gap, an entry that does not parse, a missing output).
    Unreadable {
        /// The run.
        run_id: String,
        /// Why.
        error: String,
    },
    /// A row naming a parent run that has no row.
    MissingParent {
        /// The run.
        run_id: String,
        /// The parent it names.
        parent_run_id: String,
    },
}

/// What [`RunService::check`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckReport {
    /// Registry rows compared with their journals.
    pub checked: u64,
    /// Rows not compared because an executor holds the run's lease (it is being written).
    pub live: u64,
    /// What disagrees.
    pub problems: Vec<Problem>,
}

impl CheckReport {
    /// Whether the registry and the journals agree.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// What [`RunService::repair`] did about one problem.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Repair {
    /// The row was written again from the journal.
    Rebuilt(String),
    /// The row without a journal was removed (with its lease, controls and artifacts).
    Removed(String),
    /// The journal without a row was given one, under this run id.
    Adopted(String),
    /// The journal without a row named no run it could be given to, and was removed.
    Dropped(String),
    /// Nothing was done, and why.
    Left {
        /// The problem.
        problem: Problem,
        /// Why it was left.
        why: String,
    },
}

impl Repair {
    /// Whether the problem is gone.
    pub fn is_fixed(&self) -> bool {
        !matches!(self, Self::Left { .. })
    }
}

impl RunService {
    /// Compares every registry row with its run's journal, and finds journals without a row.
    /// Reads every journal: a store-wide pass, for maintenance. Runs whose lease is live are
    /// not compared (their executor is writing them).
    pub async fn check(&self) -> Result<CheckReport, ServiceError> {
        let mut report = CheckReport::default();
        let mut rows: Vec<RegistryRow> = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self.store.registry_rows(cursor.as_deref(), PAGE).await?;
            rows.extend(page.rows);
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        let ids: HashSet<&str> = rows.iter().map(|r| r.summary.run_id.as_str()).collect();
        let now = now_ms();
        for row in &rows {
            let summary = &row.summary;
            let run_id = summary.run_id.clone();
            if let Some(parent) = summary.parent_run_id.as_deref().filter(|p| !ids.contains(p)) {
                let parent_run_id = parent.to_owned();
                report
                    .problems
                    .push(Problem::MissingParent { run_id: run_id.clone(), parent_run_id });
            }
            if summary.lease_is_live(now) {
                report.live += 1;
                continue;
            }
            report.checked += 1;
            if row.journal_entries == 0 {
                let children = rows
                    .iter()
                    .filter(|r| r.summary.parent_run_id.as_deref() == Some(run_id.as_str()))
                    .count();
                report.problems.push(Problem::RowWithoutJournal { run_id, children });
                continue;
            }
            match self.store.load(&run_id).await {
                Err(error) => {
                    report.problems.push(Problem::Unreadable { run_id, error: error.to_string() });
                }
                Ok(entries) => {
                    let fields = disagreements(row, &entries);
                    if !fields.is_empty() {
                        report.problems.push(Problem::Disagrees { run_id, fields });
                    }
                }
            }
        }
        for orphan in self.store.orphan_journals().await? {
            report.problems.push(Problem::JournalWithoutRow(orphan));
        }
        Ok(report)
    }

    /// Puts right what `report` found, where it can: a row that disagrees with its journal is
    /// written again from it; a row without a journal (and without sub-agent runs) is
    /// removed; a journal without a row is given the row it describes (or removed, when it
    /// names no run that could have it). An unreadable journal and a missing parent are
    /// left (`runs delete` removes a run with its sub-agent runs).
    pub async fn repair(&self, report: &CheckReport) -> Result<Vec<Repair>, ServiceError> {
        let mut repairs = Vec::with_capacity(report.problems.len());
        for problem in &report.problems {
            let left = |why: &str| Repair::Left { problem: problem.clone(), why: why.to_owned() };
            repairs.push(match problem {
                Problem::Disagrees { run_id, .. } => {
                    if self.store.rebuild_registry(run_id).await? {
                        Repair::Rebuilt(run_id.clone())
                    } else {
                        left("its journal is gone")
                    }
                }
                Problem::RowWithoutJournal { children: 0, run_id } => {
                    let any = RemovalRule::any();
                    let removal = self.store.remove_runs(std::slice::from_ref(run_id), &any);
                    match removal.await?.into_iter().next() {
                        Some(Removal::Removed { .. } | Removal::NotFound) => {
                            Repair::Removed(run_id.clone())
                        }
                        _ => left("an executor holds its lease"),
                    }
                }
                Problem::RowWithoutJournal { .. } => {
                    left("it has sub-agent runs: `runs delete` removes it with them")
                }
                Problem::JournalWithoutRow(orphan) => {
                    match self.store.adopt_journal(orphan).await? {
                        Some(run_id) => Repair::Adopted(run_id),
                        None => Repair::Dropped(orphan.locator.clone()),
                    }
                }
                Problem::Unreadable { .. } => left("its journal does not load"),
                Problem::MissingParent { .. } => {
                    left("its parent is gone: `runs delete` removes the run")
                }
            });
        }
        Ok(repairs)
    }
}

/// Where `row` differs from what `entries` (its journal) say.
fn disagreements(row: &RegistryRow, entries: &[crate::store::JournalEntry]) -> Vec<Disagreement> {
    let summary = &row.summary;
    let mut fields = Vec::new();
    let mut differ = |field: &'static str, registry: String, journal: String| {
        if registry != journal {
            fields.push(Disagreement { field, registry, journal });
        }
    };
    let length = entries.len() as u64;
    differ("entries", summary.entries.to_string(), length.to_string());
    if row.journal_entries != length {
        differ("stored entries", row.journal_entries.to_string(), length.to_string());
    }
    let Some(update) = SummaryUpdate::of(entries) else { return fields };
    let state = if entries.is_empty() { RunState::Running } else { update.state };
    differ("state", summary.state.to_string(), state.to_string());
    differ("created_ms", summary.created_ms.to_string(), update.first_ms.to_string());
    differ("updated_ms", summary.updated_ms.to_string(), update.last_ms.to_string());
    let started = update.started.unwrap_or_default();
    let name = |n: &Option<String>| n.clone().unwrap_or_else(|| "-".into());
    differ("agent", name(&summary.agent), name(&started.agent));
    differ("context_id", name(&summary.context_id), name(&started.context_id));
    differ("parent_run_id", name(&summary.parent_run_id), name(&started.parent_run_id));
    let usage = |u: &crate::message::Usage| {
        format!("{}/{}/{}/{}", u.input, u.output, u.cached_input, u.reasoning)
    };
    differ("usage", usage(&summary.usage), usage(&update.usage));
    fields
}
