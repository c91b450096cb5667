//! [`MemoryStore`]: every store in memory, for tests and single-process use. Entries are kept
//! as the JSON a durable store would write, so the memory store reads and rejects schema
//! versions exactly like the others.

use super::lease::{lost, ttl_ms, LeaseRecord};
use super::stats::WriteCounters;
use super::{
    check_batch, check_dense, cost_of, decode_parts, now_ms, Artifact, ArtifactMeta, ArtifactStore,
    ControlRequest, JournalEntry, Lease, NewArtifact, RemoteControl, RunFilter, RunState, RunStore,
    RunSummary, SessionInfo, SessionState, SessionStore, StoreError, SummaryUpdate,
};
use crate::message::{Message, Usage};
use crate::run::Price;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

mod admin;

/// A stored entry: its header and its event as JSON.
struct Stored {
    seq: u64,
    at_ms: u64,
    schema_version: u32,
    event: serde_json::Value,
}

struct RunRecord {
    /// Its summary, without its lease (read from `Inner::leases` when listed).
    summary: RunSummary,
    /// Its price (from `run_started`), for `summary.cost_usd`.
    price: Option<Price>,
    entries: Vec<Stored>,
}

struct SessionRecord {
    info: SessionInfo,
    messages: Vec<Message>,
}

#[derive(Default)]
struct Inner {
    runs: HashMap<String, RunRecord>,
    sessions: HashMap<String, SessionRecord>,
    artifacts: HashMap<String, Artifact>,
    leases: HashMap<String, LeaseRecord>,
    controls: HashMap<String, RemoteControl>,
}

/// Runs, sessions and artifacts in memory (lost with the process).
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    counters: WriteCounters,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("MemoryStore")
            .field("runs", &inner.runs.len())
            .field("sessions", &inner.sessions.len())
            .field("artifacts", &inner.artifacts.len())
            .finish()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl MemoryStore {
    /// An append, fenced by `lease` when given.
    fn append(
        &self,
        run_id: &str,
        expected_seq: u64,
        entries: &[JournalEntry],
        fence: Option<&Lease>,
    ) -> Result<u64, StoreError> {
        check_batch(expected_seq, entries)?;
        let mut stored = Vec::with_capacity(entries.len());
        for entry in entries {
            let event = serde_json::to_value(&entry.event)
                .map_err(|e| StoreError::Invalid(format!("event not serializable: {e}")))?;
            stored.push(Stored {
                seq: entry.seq,
                at_ms: entry.at_ms,
                schema_version: entry.schema_version,
                event,
            });
        }
        let mut inner = self.lock();
        if let Some(lease) = fence {
            let record = inner.leases.get(run_id).cloned().unwrap_or_default();
            if !record.holds(lease) {
                return Err(lost(lease, &record));
            }
        }
        let actual = inner.runs.get(run_id).map_or(0, |r| r.summary.entries);
        if actual != expected_seq {
            return Err(StoreError::Conflict {
                run_id: run_id.to_owned(),
                expected: expected_seq,
                actual,
            });
        }
        let Some(update) = SummaryUpdate::of(entries) else { return Ok(expected_seq) };
        let record = inner.runs.entry(run_id.to_owned()).or_insert_with(|| RunRecord {
            summary: RunSummary {
                run_id: run_id.to_owned(),
                agent: None,
                context_id: None,
                parent_run_id: None,
                origin_run_id: None,
                input: None,
                answer: None,
                state: RunState::Running,
                created_ms: update.first_ms,
                updated_ms: update.first_ms,
                entries: 0,
                owner: None,
                lease_expires_at_ms: None,
                usage: Usage::default(),
                cost_usd: 0.0,
            },
            price: None,
            entries: Vec::new(),
        });
        record.entries.extend(stored);
        let summary = &mut record.summary;
        if let Some(started) = update.started {
            summary.agent = started.agent;
            summary.context_id = started.context_id;
            summary.parent_run_id = started.parent_run_id;
            record.price = started.price;
        }
        if let Some(origin) = update.origin_run_id {
            summary.origin_run_id = Some(origin);
        }
        if let Some(input) = update.input {
            summary.input = Some(input).filter(|text| !text.is_empty());
        }
        if let Some(answer) = update.answer {
            summary.answer = Some(answer).filter(|text| !text.is_empty());
        }
        summary.usage += update.usage;
        summary.cost_usd = cost_of(record.price.as_ref(), &summary.usage);
        summary.state = update.state;
        summary.updated_ms = update.last_ms;
        summary.entries = record.entries.len() as u64;
        self.counters.committed(1, entries.len() as u64);
        Ok(summary.entries)
    }
}

#[async_trait]
impl RunStore for MemoryStore {
    async fn append_entries(
        &self,
        run_id: &str,
        expected_seq: u64,
        entries: &[JournalEntry],
    ) -> Result<u64, StoreError> {
        self.append(run_id, expected_seq, entries, None)
    }

    async fn append_fenced(
        &self,
        lease: &Lease,
        expected_seq: u64,
        entries: &[JournalEntry],
    ) -> Result<u64, StoreError> {
        self.append(&lease.run_id, expected_seq, entries, Some(lease))
    }

    async fn claim(&self, run_id: &str, owner: &str, ttl: Duration) -> Result<Lease, StoreError> {
        let mut inner = self.lock();
        let record = inner.leases.entry(run_id.to_owned()).or_default();
        let lease = record.claim(run_id, owner, now_ms(), ttl)?;
        *record = LeaseRecord::of(&lease);
        Ok(lease)
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        let mut inner = self.lock();
        let record = inner.leases.entry(lease.run_id.clone()).or_default();
        if !record.holds(lease) {
            return Err(lost(lease, record));
        }
        record.expires_at_ms = now_ms().saturating_add(ttl_ms(ttl));
        Ok(Lease { expires_at_ms: record.expires_at_ms, ..lease.clone() })
    }

    async fn request_control(
        &self,
        run_id: &str,
        request: ControlRequest,
    ) -> Result<RemoteControl, StoreError> {
        let mut inner = self.lock();
        let control = inner.controls.entry(run_id.to_owned()).or_default();
        *control = std::mem::take(control).apply(request);
        Ok(control.clone())
    }

    async fn remote_control(&self, run_id: &str) -> Result<RemoteControl, StoreError> {
        Ok(self.lock().controls.get(run_id).cloned().unwrap_or_default())
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let mut inner = self.lock();
        if let Some(record) = inner.leases.get_mut(&lease.run_id).filter(|r| r.holds(lease)) {
            record.owner.clear();
            record.expires_at_ms = 0;
        }
        Ok(())
    }

    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        let inner = self.lock();
        let Some(record) = inner.runs.get(run_id) else { return Ok(Vec::new()) };
        let entries = record
            .entries
            .iter()
            .map(|s| decode_parts(run_id, s.seq, s.at_ms, s.schema_version, s.event.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        check_dense(run_id, &entries)?;
        Ok(entries)
    }

    async fn next_seq(&self, run_id: &str) -> Result<u64, StoreError> {
        Ok(self.lock().runs.get(run_id).map_or(0, |r| r.summary.entries))
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        let inner = self.lock();
        let mut runs: Vec<RunSummary> = inner
            .runs
            .values()
            .map(|r| &r.summary)
            .filter(|s| filter.matches(s))
            .map(|s| {
                let mut summary = s.clone();
                if let Some(lease) = inner.leases.get(&s.run_id) {
                    summary.set_lease(Some(lease.owner.clone()), lease.expires_at_ms);
                }
                summary
            })
            .collect();
        runs.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then_with(|| b.run_id.cmp(&a.run_id)));
        runs.truncate(filter.limit.unwrap_or(usize::MAX));
        Ok(runs)
    }

    async fn delete_run(&self, run_id: &str) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        inner.controls.remove(run_id);
        Ok(inner.runs.remove(run_id).is_some())
    }

    async fn remove_runs(
        &self,
        run_ids: &[String],
        rule: &super::RemovalRule,
    ) -> Result<Vec<super::Removal>, StoreError> {
        Ok(self.remove(run_ids, rule))
    }

    async fn registry_rows(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<super::RegistryPage, StoreError> {
        let rows = self.rows(after, limit);
        let next = rows.last().filter(|_| rows.len() == limit).map(|r| r.summary.run_id.clone());
        Ok(super::RegistryPage::new(rows, next))
    }

    async fn orphan_journals(&self) -> Result<Vec<super::OrphanJournal>, StoreError> {
        Ok(Vec::new())
    }

    async fn rebuild_registry(&self, run_id: &str) -> Result<bool, StoreError> {
        self.rebuild(run_id)
    }

    async fn adopt_journal(
        &self,
        _orphan: &super::OrphanJournal,
    ) -> Result<Option<String>, StoreError> {
        Ok(None)
    }

    fn write_stats(&self) -> Option<super::WriteStats> {
        Some(self.counters.snapshot())
    }
}

fn session<'a>(inner: &'a mut Inner, context_id: &str) -> &'a mut SessionRecord {
    inner
        .sessions
        .entry(context_id.to_owned())
        .or_insert_with(|| SessionRecord { info: SessionInfo::new(context_id), messages: vec![] })
}

#[async_trait]
impl SessionStore for MemoryStore {
    async fn open_session(&self, context_id: &str) -> Result<SessionInfo, StoreError> {
        Ok(session(&mut self.lock(), context_id).info.clone())
    }

    async fn get_session(&self, context_id: &str) -> Result<Option<SessionInfo>, StoreError> {
        Ok(self.lock().sessions.get(context_id).map(|s| s.info.clone()))
    }

    async fn begin_turn(&self, context_id: &str, run_id: &str) -> Result<Vec<Message>, StoreError> {
        let mut inner = self.lock();
        let record = session(&mut inner, context_id);
        if record.info.state == SessionState::Busy {
            return Err(StoreError::SessionBusy {
                context_id: context_id.to_owned(),
                run_id: record.info.run_id.clone().unwrap_or_default(),
            });
        }
        record.info.state = SessionState::Busy;
        record.info.run_id = Some(run_id.to_owned());
        record.info.updated_ms = now_ms();
        Ok(record.messages.clone())
    }

    async fn end_turn(
        &self,
        context_id: &str,
        run_id: &str,
        new_messages: &[Message],
    ) -> Result<SessionInfo, StoreError> {
        let mut inner = self.lock();
        let record = inner
            .sessions
            .get_mut(context_id)
            .ok_or_else(|| StoreError::NotFound { what: "session", id: context_id.to_owned() })?;
        let info = &mut record.info;
        if info.state != SessionState::Busy || info.run_id.as_deref() != Some(run_id) {
            return Err(StoreError::NotInTurn {
                context_id: context_id.to_owned(),
                run_id: run_id.to_owned(),
                state: info.state,
            });
        }
        record.messages.extend_from_slice(new_messages);
        info.state = SessionState::Ready;
        info.turns += 1;
        info.messages = record.messages.len() as u64;
        info.updated_ms = now_ms();
        Ok(info.clone())
    }

    async fn session_messages(&self, context_id: &str) -> Result<Vec<Message>, StoreError> {
        Ok(self.lock().sessions.get(context_id).map(|s| s.messages.clone()).unwrap_or_default())
    }

    async fn delete_session(&self, context_id: &str) -> Result<bool, StoreError> {
        Ok(self.lock().sessions.remove(context_id).is_some())
    }
}

#[async_trait]
impl ArtifactStore for MemoryStore {
    async fn create_artifact(&self, artifact: NewArtifact<'_>) -> Result<ArtifactMeta, StoreError> {
        let meta = artifact.meta(now_ms());
        let stored = Artifact { meta: meta.clone(), data: artifact.data.to_vec() };
        self.lock().artifacts.insert(meta.id.clone(), stored);
        Ok(meta)
    }

    async fn append_chunk(&self, id: &str, chunk: &[u8]) -> Result<ArtifactMeta, StoreError> {
        let mut inner = self.lock();
        let artifact = inner
            .artifacts
            .get_mut(id)
            .ok_or_else(|| StoreError::NotFound { what: "artifact", id: id.to_owned() })?;
        artifact.data.extend_from_slice(chunk);
        artifact.meta.size = artifact.data.len() as u64;
        artifact.meta.chunks += 1;
        artifact.meta.updated_ms = now_ms();
        Ok(artifact.meta.clone())
    }

    async fn get_artifact(&self, id: &str) -> Result<Option<Artifact>, StoreError> {
        Ok(self.lock().artifacts.get(id).cloned())
    }

    async fn list_artifacts(&self, run_id: &str) -> Result<Vec<ArtifactMeta>, StoreError> {
        let inner = self.lock();
        let mut metas: Vec<ArtifactMeta> = inner
            .artifacts
            .values()
            .filter(|a| a.meta.run_id == run_id)
            .map(|a| a.meta.clone())
            .collect();
        metas.sort_by(|a, b| a.created_ms.cmp(&b.created_ms).then_with(|| a.id.cmp(&b.id)));
        Ok(metas)
    }

    async fn delete_artifact(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.lock().artifacts.remove(id).is_some())
    }
}
