//! Where push configs are kept, with each config's delivery cursor and delivery lease:
//! [`PushStore`], and its in-memory implementation (the SQLite and Redis ones are in sibling
//! modules).

use a2a::TaskPushNotificationConfig;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A push store failed.
#[derive(Debug, thiserror::Error)]
pub enum PushStoreError {
    /// The backend failed.
    #[error("push store ({backend}): {message}")]
    Backend {
        /// Which backend.
        backend: &'static str,
        /// What it said.
        message: String,
    },
    /// A stored record cannot be read.
    #[error("push store: a stored config cannot be read: {0}")]
    Corrupt(String),
}

/// Where a config's delivery stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cursor {
    /// The next journal entry to deliver; `None`: not started (the first delivery is the
    /// task as it stands).
    pub next_seq: Option<u64>,
    /// The task ended and its last update was delivered (or given up on).
    pub done: bool,
}

/// A stored push config (its `Debug` shows neither the secrets nor the URL).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushRecord {
    /// The served agent whose task it is.
    pub agent: String,
    /// The config, with its id and task id (and its secrets).
    pub config: TaskPushNotificationConfig,
    /// When it was set (ms since the epoch).
    pub created_ms: u64,
    /// Where its delivery stands.
    #[serde(default)]
    pub cursor: Cursor,
}

impl std::fmt::Debug for PushRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushRecord")
            .field("agent", &self.agent)
            .field("task_id", &self.task_id())
            .field("id", &self.id())
            .field("created_ms", &self.created_ms)
            .field("cursor", &self.cursor)
            .finish_non_exhaustive()
    }
}

impl PushRecord {
    /// The config's id (empty if it has none, which a stored record never lacks).
    pub fn id(&self) -> &str {
        self.config.id.as_deref().unwrap_or_default()
    }

    /// The task's id.
    pub fn task_id(&self) -> &str {
        &self.config.task_id
    }
}

/// Push configs by task, with their delivery cursors and delivery leases; durable stores make
/// delivery resume after a restart, and servers sharing one store deliver each config once.
///
/// A config's **lease** names the one delivery that may deliver it: an owner (a string the
/// delivery chose, unique to it) and an expiry. A delivery claims it before it starts,
/// renews it while it runs and releases it when it ends; a lease not renewed expires, and
/// another delivery may claim it then. Saving a config again and deleting it drop its lease.
#[async_trait]
pub trait PushStore: Send + Sync + std::fmt::Debug {
    /// Saves `record`, replacing the one with the same task and id (cursor included; its
    /// lease dropped).
    async fn put(&self, record: &PushRecord) -> Result<(), PushStoreError>;

    /// The config `id` of `task_id`.
    async fn get(&self, task_id: &str, id: &str) -> Result<Option<PushRecord>, PushStoreError>;

    /// The configs of `task_id`, oldest first.
    async fn list(&self, task_id: &str) -> Result<Vec<PushRecord>, PushStoreError>;

    /// Deletes the config `id` of `task_id` (and its lease); whether there was one.
    async fn delete(&self, task_id: &str, id: &str) -> Result<bool, PushStoreError>;

    /// Moves the cursor of the config `id` of `task_id` (nothing if it is gone).
    async fn advance(&self, task_id: &str, id: &str, cursor: Cursor) -> Result<(), PushStoreError>;

    /// The configs whose delivery is not done, oldest first.
    async fn pending(&self) -> Result<Vec<PushRecord>, PushStoreError>;

    /// Takes the lease of the config `id` of `task_id` for `owner`, for `ttl` from now, when
    /// no other owner holds a live one (a lease `owner` holds is extended). Whether `owner`
    /// holds it now (never for a config that is not there).
    async fn claim(
        &self,
        task_id: &str,
        id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, PushStoreError>;

    /// Extends `owner`'s lease of the config `id` of `task_id` to `ttl` from now. False
    /// when the lease is no longer `owner`'s (it expired, was released, taken, or dropped).
    async fn renew(
        &self,
        task_id: &str,
        id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, PushStoreError>;

    /// Releases the lease of the config `id` of `task_id` if `owner` holds it (else
    /// nothing).
    async fn release(&self, task_id: &str, id: &str, owner: &str) -> Result<(), PushStoreError>;
}

/// Configs in memory: lost when the process ends. Servers in one process may share one
/// (through an `Arc`), leases included.
#[derive(Debug, Default)]
pub struct MemoryPushStore {
    state: Mutex<Memory>,
}

#[derive(Debug, Default)]
struct Memory {
    /// By (task id, config id).
    records: BTreeMap<(String, String), PushRecord>,
    /// The leases, by (task id, config id): owner and expiry.
    leases: HashMap<(String, String), (String, Instant)>,
}

impl Memory {
    /// The live lease of `key` held by `owner`, if there is one.
    fn held(&mut self, key: &(String, String), owner: &str) -> Option<&mut Instant> {
        self.leases
            .get_mut(key)
            .filter(|(held_by, expires)| held_by == owner && *expires > Instant::now())
            .map(|(_, expires)| expires)
    }
}

impl MemoryPushStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn key(task_id: &str, id: &str) -> (String, String) {
    (task_id.to_owned(), id.to_owned())
}

fn oldest_first(mut records: Vec<PushRecord>) -> Vec<PushRecord> {
    records.sort_by(|a, b| {
        (a.created_ms, a.task_id(), a.id()).cmp(&(b.created_ms, b.task_id(), b.id()))
    });
    records
}

#[async_trait]
impl PushStore for MemoryPushStore {
    async fn put(&self, record: &PushRecord) -> Result<(), PushStoreError> {
        let key = key(record.task_id(), record.id());
        let mut state = self.state();
        state.leases.remove(&key);
        state.records.insert(key, record.clone());
        Ok(())
    }

    async fn get(&self, task_id: &str, id: &str) -> Result<Option<PushRecord>, PushStoreError> {
        Ok(self.state().records.get(&key(task_id, id)).cloned())
    }

    async fn list(&self, task_id: &str) -> Result<Vec<PushRecord>, PushStoreError> {
        let state = self.state();
        let records = state.records.values().filter(|r| r.task_id() == task_id).cloned().collect();
        Ok(oldest_first(records))
    }

    async fn delete(&self, task_id: &str, id: &str) -> Result<bool, PushStoreError> {
        let key = key(task_id, id);
        let mut state = self.state();
        state.leases.remove(&key);
        Ok(state.records.remove(&key).is_some())
    }

    async fn advance(&self, task_id: &str, id: &str, cursor: Cursor) -> Result<(), PushStoreError> {
        if let Some(record) = self.state().records.get_mut(&key(task_id, id)) {
            record.cursor = cursor;
        }
        Ok(())
    }

    async fn pending(&self) -> Result<Vec<PushRecord>, PushStoreError> {
        let state = self.state();
        let records = state.records.values().filter(|r| !r.cursor.done).cloned().collect();
        Ok(oldest_first(records))
    }

    async fn claim(
        &self,
        task_id: &str,
        id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, PushStoreError> {
        let key = key(task_id, id);
        let mut state = self.state();
        if !state.records.contains_key(&key) {
            return Ok(false);
        }
        let now = Instant::now();
        let free = state
            .leases
            .get(&key)
            .is_none_or(|(held_by, expires)| held_by == owner || *expires <= now);
        if free {
            state.leases.insert(key, (owner.to_owned(), now + ttl));
        }
        Ok(free)
    }

    async fn renew(
        &self,
        task_id: &str,
        id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, PushStoreError> {
        let mut state = self.state();
        Ok(match state.held(&key(task_id, id), owner) {
            Some(expires) => {
                *expires = Instant::now() + ttl;
                true
            }
            None => false,
        })
    }

    async fn release(&self, task_id: &str, id: &str, owner: &str) -> Result<(), PushStoreError> {
        let key = key(task_id, id);
        let mut state = self.state();
        if state.leases.get(&key).is_some_and(|(held_by, _)| held_by == owner) {
            state.leases.remove(&key);
        }
        Ok(())
    }
}

/// Deletes the push configs of deleted runs (a task is a run: its id is the run's), for
/// [`RunService::on_deleted`](agentloop::service::RunService::on_deleted): `agentloop runs
/// delete | prune` and any program that deletes runs of a served agent give it the server's
/// push store, so no config is left for a task that is gone.
#[derive(Debug, Clone)]
pub struct DeletePushConfigs(pub std::sync::Arc<dyn PushStore>);

#[async_trait]
impl agentloop::service::RunsDeleted for DeletePushConfigs {
    async fn runs_deleted(&self, run_ids: &[String]) -> Result<(), String> {
        for run_id in run_ids {
            let configs = self.0.list(run_id).await.map_err(|e| e.to_string())?;
            for config in configs {
                self.0.delete(run_id, config.id()).await.map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }
}
