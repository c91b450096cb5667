//! A [`RunStore`] that times the calls a run makes on its store as the run sees them: from
//! the call to the moment the run's task has the answer, so a call's time includes waiting
//! for the store's writer, the commit, and waiting to be polled again after it. `bench-driver`
//! reports it per kind of call, to tell where a durable round's added latency goes.

use agentloop::store::{
    ControlRequest, JournalEntry, Lease, RemoteControl, RunFilter, RunStore, RunSummary,
    StoreError, WriteStats,
};
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The calls a run makes that are timed.
const TIMED: [&str; 6] = ["append", "claim", "release", "next_seq", "remote_control", "renew"];

/// `inner`, with its run-time calls timed (see the module's documentation).
pub struct TimedStore {
    inner: Arc<dyn RunStore>,
    times: Mutex<BTreeMap<&'static str, Vec<u32>>>,
}

/// The times of one kind of call.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CallTimes {
    /// The call (`append`, `claim`, …).
    pub call: String,
    /// How many were made.
    pub count: u64,
    /// Median, µs.
    pub p50_us: u32,
    /// 99th percentile, µs.
    pub p99_us: u32,
    /// Their sum, ms.
    pub total_ms: f64,
}

impl TimedStore {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn RunStore>) -> Self {
        Self { inner, times: Mutex::new(BTreeMap::new()) }
    }

    /// Forgets the times so far (the warm-up's).
    pub fn reset(&self) {
        self.times.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// The times so far, per kind of call, in [`TIMED`]'s order.
    pub fn times(&self) -> Vec<CallTimes> {
        let mut times = self.times.lock().unwrap_or_else(PoisonError::into_inner);
        TIMED
            .iter()
            .filter_map(|call| {
                let values = times.get_mut(call)?;
                values.sort_unstable();
                let at = |q| crate::measure::quantile(values, q).unwrap_or(0);
                Some(CallTimes {
                    call: (*call).to_owned(),
                    count: values.len() as u64,
                    p50_us: at(0.5),
                    p99_us: at(0.99),
                    total_ms: values.iter().map(|v| f64::from(*v)).sum::<f64>() / 1e3,
                })
            })
            .collect()
    }

    async fn timed<T>(&self, call: &'static str, work: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let result = work.await;
        let took = u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX);
        self.times
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(call)
            .or_default()
            .push(took);
        result
    }
}

#[async_trait]
impl RunStore for TimedStore {
    async fn append_entries(
        &self,
        run_id: &str,
        expected_seq: u64,
        entries: &[JournalEntry],
    ) -> Result<u64, StoreError> {
        self.timed("append", self.inner.append_entries(run_id, expected_seq, entries)).await
    }

    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        self.inner.load(run_id).await
    }

    async fn next_seq(&self, run_id: &str) -> Result<u64, StoreError> {
        self.timed("next_seq", self.inner.next_seq(run_id)).await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        self.inner.list_runs(filter).await
    }

    async fn delete_run(&self, run_id: &str) -> Result<bool, StoreError> {
        self.inner.delete_run(run_id).await
    }

    async fn claim(&self, run_id: &str, owner: &str, ttl: Duration) -> Result<Lease, StoreError> {
        self.timed("claim", self.inner.claim(run_id, owner, ttl)).await
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        self.timed("renew", self.inner.renew(lease, ttl)).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.timed("release", self.inner.release(lease)).await
    }

    async fn load_from(
        &self,
        run_id: &str,
        from_seq: u64,
    ) -> Result<Vec<JournalEntry>, StoreError> {
        self.inner.load_from(run_id, from_seq).await
    }

    async fn watch(
        &self,
        run_id: &str,
    ) -> Result<Option<futures::stream::BoxStream<'static, ()>>, StoreError> {
        self.inner.watch(run_id).await
    }

    async fn request_control(
        &self,
        run_id: &str,
        request: ControlRequest,
    ) -> Result<RemoteControl, StoreError> {
        self.inner.request_control(run_id, request).await
    }

    async fn remote_control(&self, run_id: &str) -> Result<RemoteControl, StoreError> {
        self.timed("remote_control", self.inner.remote_control(run_id)).await
    }

    async fn remote_controls(
        &self,
        run_ids: &[String],
    ) -> Result<Vec<(String, RemoteControl)>, StoreError> {
        self.inner.remote_controls(run_ids).await
    }

    async fn append_fenced(
        &self,
        lease: &Lease,
        expected_seq: u64,
        entries: &[JournalEntry],
    ) -> Result<u64, StoreError> {
        self.timed("append", self.inner.append_fenced(lease, expected_seq, entries)).await
    }

    fn write_stats(&self) -> Option<WriteStats> {
        self.inner.write_stats()
    }
}

#[cfg(test)]
mod tests;
