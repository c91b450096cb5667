//! Counts what becomes of the spans: ended, exported, lost. A span is lost when the export
//! queue is full (or shut) as it ends, or when the export that carries it fails (collector
//! down, refused, timed out); both are counted, so "spans lost" is exact once the queue has
//! been flushed.

use std::sync::atomic::{AtomicU64, Ordering};

/// What became of the spans so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpanStats {
    /// Spans ended (handed to the export queue).
    pub ended: u64,
    /// Spans the collector accepted.
    pub exported: u64,
    /// Spans in exports that failed (collector down, refused, timed out).
    pub failed: u64,
    /// Spans that never reached the collector: failed exports plus those dropped because
    /// the queue was full. Exact after [`Telemetry::shutdown`](crate::Telemetry::shutdown)
    /// (or a flush); before, spans still queued are not counted.
    pub dropped: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    ended: AtomicU64,
    exported: AtomicU64,
    failed: AtomicU64,
    /// Dropped as they ended: the queue was full or shut.
    rejected: AtomicU64,
}

impl Counters {
    pub(crate) fn ended(&self) {
        self.ended.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn exported(&self, spans: usize) {
        self.exported.fetch_add(spans as u64, Ordering::Relaxed);
    }

    pub(crate) fn failed(&self, spans: usize) {
        self.failed.fetch_add(spans as u64, Ordering::Relaxed);
    }

    /// The stats; `settled`: nothing is queued any more (after a flush or shutdown), so the
    /// spans neither exported, failed nor rejected were lost (a flush that timed out).
    pub(crate) fn stats(&self, settled: bool) -> SpanStats {
        let ended = self.ended.load(Ordering::Relaxed);
        let exported = self.exported.load(Ordering::Relaxed);
        let failed = self.failed.load(Ordering::Relaxed);
        let rejected = self.rejected.load(Ordering::Relaxed);
        let unsettled = ended.saturating_sub(exported + failed + rejected);
        let dropped = failed + rejected + if settled { unsettled } else { 0 };
        SpanStats { ended, exported, failed, dropped }
    }
}
