//! What the crash tests share: the store a child opens by name, and a store that reports
//! each journal append to the parent (through the child's stdout).
#![allow(dead_code)]

use agentloop::store::{
    ControlRequest, JournalEntry, Lease, RemoteControl, RunFilter, RunStore, RunSummary, StoreError,
};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

/// The store named by `spec`: `sqlite:<path>` or `redis:<url> <prefix>`.
pub async fn open_store(spec: &str) -> Arc<dyn RunStore> {
    if let Some(path) = spec.strip_prefix("sqlite:") {
        return Arc::new(agentloop::store::sqlite::SqliteStore::open(path).unwrap());
    }
    #[cfg(feature = "redis")]
    if let Some(rest) = spec.strip_prefix("redis:") {
        use agentloop::store::redis::{RedisOptions, RedisStore};
        let (url, prefix) = rest.split_once(' ').unwrap();
        let options = RedisOptions::default().prefix(prefix);
        return Arc::new(RedisStore::connect_with(url, options).await.unwrap());
    }
    panic!("unknown store {spec}")
}

/// What happens around each append (fenced or not) of a [`Tapped`] store.
#[async_trait]
pub trait AppendTap: Send + Sync + 'static {
    /// Before the append of `_count` entries from `_expected_seq` on is written.
    async fn before(&self, _run_id: &str, _expected_seq: u64, _count: usize) {}
    /// After the store acknowledged it (`next`: the journal's new length).
    async fn after(&self, _run_id: &str, _expected_seq: u64, _next: u64) {}
}

/// A store that calls its tap around every append and passes everything else on.
pub struct Tapped<T>(pub Arc<dyn RunStore>, pub T);

#[async_trait]
impl<T: AppendTap> RunStore for Tapped<T> {
    async fn append_entries(
        &self,
        run_id: &str,
        expected_seq: u64,
        entries: &[JournalEntry],
    ) -> Result<u64, StoreError> {
        self.1.before(run_id, expected_seq, entries.len()).await;
        let next = self.0.append_entries(run_id, expected_seq, entries).await?;
        self.1.after(run_id, expected_seq, next).await;
        Ok(next)
    }
    async fn append_fenced(
        &self,
        lease: &Lease,
        expected_seq: u64,
        entries: &[JournalEntry],
    ) -> Result<u64, StoreError> {
        self.1.before(&lease.run_id, expected_seq, entries.len()).await;
        let next = self.0.append_fenced(lease, expected_seq, entries).await?;
        self.1.after(&lease.run_id, expected_seq, next).await;
        Ok(next)
    }
    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        self.0.load(run_id).await
    }
    async fn next_seq(&self, run_id: &str) -> Result<u64, StoreError> {
        self.0.next_seq(run_id).await
    }
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        self.0.list_runs(filter).await
    }
    async fn delete_run(&self, run_id: &str) -> Result<bool, StoreError> {
        self.0.delete_run(run_id).await
    }
    async fn claim(&self, run_id: &str, owner: &str, ttl: Duration) -> Result<Lease, StoreError> {
        self.0.claim(run_id, owner, ttl).await
    }
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        self.0.renew(lease, ttl).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.0.release(lease).await
    }
    async fn request_control(
        &self,
        run_id: &str,
        request: ControlRequest,
    ) -> Result<RemoteControl, StoreError> {
        self.0.request_control(run_id, request).await
    }
    async fn remote_control(&self, run_id: &str) -> Result<RemoteControl, StoreError> {
        self.0.remote_control(run_id).await
    }
}
