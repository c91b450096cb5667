//! Where push configs are kept, with each config's delivery cursor: [`PushStore`], and its
//! in-memory implementation (the SQLite and Redis ones are in sibling modules).

use a2a::TaskPushNotificationConfig;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

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

/// Push configs by task, with their delivery cursors; durable stores make delivery resume
/// after a restart.
#[async_trait]
pub trait PushStore: Send + Sync + std::fmt::Debug {
    /// Saves `record`, replacing the one with the same task and id (cursor included).
    async fn put(&self, record: &PushRecord) -> Result<(), PushStoreError>;

    /// The config `id` of `task_id`.
    async fn get(&self, task_id: &str, id: &str) -> Result<Option<PushRecord>, PushStoreError>;

    /// The configs of `task_id`, oldest first.
    async fn list(&self, task_id: &str) -> Result<Vec<PushRecord>, PushStoreError>;

    /// Deletes the config `id` of `task_id`; whether there was one.
    async fn delete(&self, task_id: &str, id: &str) -> Result<bool, PushStoreError>;

    /// Moves the cursor of the config `id` of `task_id` (nothing if it is gone).
    async fn advance(&self, task_id: &str, id: &str, cursor: Cursor) -> Result<(), PushStoreError>;

    /// The configs whose delivery is not done, oldest first.
    async fn pending(&self) -> Result<Vec<PushRecord>, PushStoreError>;
}

/// Configs in memory: lost when the process ends.
#[derive(Debug, Default)]
pub struct MemoryPushStore {
    /// By (task id, config id).
    records: Mutex<BTreeMap<(String, String), PushRecord>>,
}

impl MemoryPushStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn records(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), PushRecord>> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }
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
        let key = (record.task_id().to_owned(), record.id().to_owned());
        self.records().insert(key, record.clone());
        Ok(())
    }

    async fn get(&self, task_id: &str, id: &str) -> Result<Option<PushRecord>, PushStoreError> {
        Ok(self.records().get(&(task_id.to_owned(), id.to_owned())).cloned())
    }

    async fn list(&self, task_id: &str) -> Result<Vec<PushRecord>, PushStoreError> {
        let records = self.records().values().filter(|r| r.task_id() == task_id).cloned().collect();
        Ok(oldest_first(records))
    }

    async fn delete(&self, task_id: &str, id: &str) -> Result<bool, PushStoreError> {
        Ok(self.records().remove(&(task_id.to_owned(), id.to_owned())).is_some())
    }

    async fn advance(&self, task_id: &str, id: &str, cursor: Cursor) -> Result<(), PushStoreError> {
        if let Some(record) = self.records().get_mut(&(task_id.to_owned(), id.to_owned())) {
            record.cursor = cursor;
        }
        Ok(())
    }

    async fn pending(&self) -> Result<Vec<PushRecord>, PushStoreError> {
        let records = self.records().values().filter(|r| !r.cursor.done).cloned().collect();
        Ok(oldest_first(records))
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
