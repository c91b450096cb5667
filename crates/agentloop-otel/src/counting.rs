//! Counts what becomes of the spans: ended, exported, lost. The SDK's batch processor drops
//! a span when its queue is full and an export fails when the collector is down, and keeps
//! its own count private; these wrappers count both, so that "spans lost" is exact once the
//! queue has been flushed.

use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use opentelemetry_sdk::Resource;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    /// Spans sent to the exporter (exported or failed).
    attempted: AtomicU64,
}

impl Counters {
    /// The stats; `settled`: nothing is queued any more (after a flush or shutdown), so the
    /// spans not attempted were dropped by the full queue.
    pub(crate) fn stats(&self, settled: bool) -> SpanStats {
        let ended = self.ended.load(Ordering::Relaxed);
        let exported = self.exported.load(Ordering::Relaxed);
        let failed = self.failed.load(Ordering::Relaxed);
        let attempted = self.attempted.load(Ordering::Relaxed);
        let queued_or_dropped = ended.saturating_sub(attempted);
        let dropped = failed + if settled { queued_or_dropped } else { 0 };
        SpanStats { ended, exported, failed, dropped }
    }
}

/// An exporter that counts the spans of its exports.
#[derive(Debug)]
pub(crate) struct CountingExporter<E> {
    pub(crate) inner: E,
    pub(crate) counters: Arc<Counters>,
}

impl<E: SpanExporter> SpanExporter for CountingExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let count = batch.len() as u64;
        let result = self.inner.export(batch).await;
        self.counters.attempted.fetch_add(count, Ordering::Relaxed);
        match &result {
            Ok(()) => self.counters.exported.fetch_add(count, Ordering::Relaxed),
            Err(error) => {
                tracing::debug!(%error, spans = count, "otel: an export failed");
                self.counters.failed.fetch_add(count, Ordering::Relaxed)
            }
        };
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// A processor that counts the spans that end, in front of the batch processor.
#[derive(Debug)]
pub(crate) struct CountingProcessor<P> {
    pub(crate) inner: P,
    pub(crate) counters: Arc<Counters>,
}

impl<P: SpanProcessor> SpanProcessor for CountingProcessor<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        self.counters.ended.fetch_add(1, Ordering::Relaxed);
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
