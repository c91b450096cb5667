//! Removing runs and reading the registry's raw rows in the memory store (its registry and
//! journals live in one record per run, so they cannot disagree).

use super::{Inner, MemoryStore};
use crate::store::{
    now_ms, RegistryRow, Removal, RemovalRule, RunState, SessionState, StoreError, SummaryUpdate,
};

/// `run_id` and every run whose parent leads to it, the run first.
pub(super) fn tree(inner: &Inner, run_id: &str) -> Vec<String> {
    let mut tree = vec![run_id.to_owned()];
    let mut next = 0;
    while let Some(parent) = tree.get(next).cloned() {
        let mut children: Vec<String> = inner
            .runs
            .values()
            .filter(|r| r.summary.parent_run_id.as_deref() == Some(parent.as_str()))
            .map(|r| r.summary.run_id.clone())
            .filter(|id| !tree.contains(id))
            .collect();
        children.sort();
        tree.extend(children);
        next += 1;
    }
    tree
}

impl MemoryStore {
    pub(super) fn remove(&self, run_ids: &[String], rule: &RemovalRule) -> Vec<Removal> {
        let mut inner = self.lock();
        let now = now_ms();
        run_ids
            .iter()
            .map(|run_id| {
                let Some(record) = inner.runs.get(run_id) else { return Removal::NotFound };
                if !rule.allows(record.summary.state, record.summary.updated_ms) {
                    return Removal::NotMatching;
                }
                let tree = tree(&inner, run_id);
                for id in &tree {
                    if let Some(lease) = inner.leases.get(id).filter(|l| l.is_live(now)) {
                        return Removal::LeaseLive {
                            run_id: id.clone(),
                            owner: lease.owner.clone(),
                            expires_in_ms: lease.expires_at_ms.saturating_sub(now),
                        };
                    }
                }
                for id in &tree {
                    inner.runs.remove(id);
                    inner.leases.remove(id);
                    inner.controls.remove(id);
                    inner.artifacts.retain(|_, a| &a.meta.run_id != id);
                    for session in inner.sessions.values_mut() {
                        if session.info.run_id.as_deref() == Some(id.as_str()) {
                            session.info.run_id = None;
                            if session.info.state == SessionState::Busy {
                                session.info.state = SessionState::Ready;
                            }
                        }
                    }
                }
                Removal::Removed { run_ids: tree }
            })
            .collect()
    }

    pub(super) fn rows(&self, after: Option<&str>, limit: usize) -> Vec<RegistryRow> {
        let inner = self.lock();
        let mut rows: Vec<RegistryRow> = inner
            .runs
            .values()
            .filter(|r| after.is_none_or(|after| r.summary.run_id.as_str() > after))
            .map(|r| RegistryRow::new(r.summary.clone(), r.entries.len() as u64))
            .collect();
        rows.sort_by(|a, b| a.summary.run_id.cmp(&b.summary.run_id));
        rows.truncate(limit);
        rows
    }

    /// The registry row of `run_id` again from its journal (they cannot disagree here, so
    /// this only recomputes it).
    pub(super) fn rebuild(&self, run_id: &str) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        let Some(record) = inner.runs.get_mut(run_id) else { return Ok(false) };
        let entries = record
            .entries
            .iter()
            .map(|s| {
                crate::store::decode_parts(
                    run_id,
                    s.seq,
                    s.at_ms,
                    s.schema_version,
                    s.event.clone(),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let Some(update) = SummaryUpdate::of(&entries) else { return Ok(false) };
        let summary = &mut record.summary;
        if let Some(started) = update.started {
            summary.agent = started.agent;
            summary.context_id = started.context_id;
            summary.parent_run_id = started.parent_run_id;
            record.price = started.price;
        }
        summary.state = if entries.is_empty() { RunState::Running } else { update.state };
        summary.created_ms = update.first_ms;
        summary.updated_ms = update.last_ms;
        summary.entries = entries.len() as u64;
        summary.usage = update.usage;
        summary.cost_usd = crate::store::cost_of(record.price.as_ref(), &summary.usage);
        Ok(true)
    }
}
