//! The export queue: a span is encoded as OTLP protobuf as it goes (`SpanRecord`) and
//! written into the batch being filled as it ends, on the thread that handles its run's
//! events (`Inner::drain`, which this thread also calls every export delay), and its
//! bytes wait here in batches (bounded: a full queue drops the span and counts
//! it) until one thread of its own frames each batch as a request and hands it to a
//! [`SpanSink`]: HTTP/protobuf, gRPC, or a sink of the caller's. A run never waits for it.
//! A batch's buffer is its request: it keeps room in front of its spans for the request's
//! header, which the export thread writes there (the spans are not copied again). Only
//! whole buffers cross between the threads, and they are reused: a request's buffer goes
//! to the HTTP client as shared bytes and comes back, when the client drops it, to a small
//! pool from which the next batches take theirs.

use crate::config::TelemetryConfig;
use crate::counting::Counters;
use crate::otlp::{self, Preamble};
use crate::span::SpanRecord;
use bytes::Bytes;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where encoded spans go: each call gets one OTLP `ExportTraceServiceRequest` (protobuf)
/// holding `spans` spans. Called on the export thread, one batch at a time.
pub trait SpanSink: Send + 'static {
    /// Delivers one request; an error counts its spans as failed (they are not retried).
    fn export(&mut self, request: &[u8], spans: usize) -> Result<(), String>;

    /// The same, given the request as shared bytes (a sink that hands the bytes to a
    /// client takes them without a copy). The buffer goes back to the exporter for the next
    /// request when the last clone of `request` is dropped.
    fn export_bytes(&mut self, request: Bytes, spans: usize) -> Result<(), String> {
        self.export(&request, spans)
    }
}

/// Request buffers that came back from the sink, for the next batches: a buffer the HTTP
/// client dropped on its own thread is reused, not freed there and allocated afresh (a
/// new buffer of a batch's size costs its pages' faults and zeroing on every request).
pub(crate) type Pool = Arc<Mutex<Vec<Vec<u8>>>>;

/// Buffers the pool keeps for the next batches, at most.
pub(crate) const POOLED_REQUESTS: usize = 4;

/// A request's buffer, which returns to its pool when dropped.
pub(crate) struct Pooled {
    pub(crate) buf: Vec<u8>,
    pub(crate) pool: Pool,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        if pool.len() < POOLED_REQUESTS {
            pool.push(std::mem::take(&mut self.buf));
        }
    }
}

/// A batch: the room for the request's header, then span entries (`otlp::span_entry`);
/// and how many.
struct Batch {
    buf: Vec<u8>,
    spans: usize,
}

impl Batch {
    /// An empty batch in `buf` (a buffer to reuse), `head_room` bytes kept in front.
    fn new(mut buf: Vec<u8>, head_room: usize) -> Self {
        buf.clear();
        buf.resize(head_room, 0);
        Self { buf, spans: 0 }
    }
}

struct State {
    /// The batch being filled.
    current: Batch,
    /// Full batches, oldest first.
    full: Vec<Batch>,
    /// Spans in `current` and `full`.
    queued: usize,
    /// Flushes asked for and done (a flush waits until `flushed` reaches its number).
    flush_asked: u64,
    flushed: u64,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the export thread.
    work: Condvar,
    /// Wakes those waiting for a flush.
    done: Condvar,
    capacity: usize,
    batch: usize,
    /// A batch whose encoded spans reach this many bytes is sent without waiting for more.
    batch_bytes: usize,
    /// The room every batch keeps for the request's header (`Preamble::head_room`).
    head_room: usize,
    /// The buffers the sink is done with, for the next batches.
    pool: Pool,
    counters: Arc<Counters>,
    /// Called by the export thread every export delay, before it looks for spans: ends the
    /// spans of the events waiting to be handled (`Inner::drain`).
    collect: Mutex<Option<Collect>>,
}

/// What the export thread calls before it looks for spans.
pub(crate) type Collect = Box<dyn Fn() + Send + Sync>;

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new batch to fill, in a buffer back from the sink if there is one.
    fn next_batch(&self) -> Batch {
        let buf = self.pool.lock().unwrap_or_else(PoisonError::into_inner).pop();
        Batch::new(buf.unwrap_or_default(), self.head_room)
    }
}

/// The queue and its export thread.
pub(crate) struct Queue {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Queue {
    /// Starts the export thread.
    pub(crate) fn start(
        sink: Box<dyn SpanSink>,
        preamble: Preamble,
        config: &TelemetryConfig,
        counters: Arc<Counters>,
    ) -> Self {
        let capacity = config.queue_size.max(1);
        let delay = config.export_delay;
        let head_room = preamble.head_room();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                current: Batch::new(Vec::new(), head_room),
                full: Vec::new(),
                queued: 0,
                flush_asked: 0,
                flushed: 0,
                shutdown: false,
            }),
            work: Condvar::new(),
            done: Condvar::new(),
            capacity,
            batch: config.max_export_batch.clamp(1, capacity),
            batch_bytes: config.max_export_bytes.max(1),
            head_room,
            pool: Pool::default(),
            counters,
            collect: Mutex::new(None),
        });
        let worker = Worker { shared: shared.clone(), sink, preamble, delay };
        let thread = std::thread::Builder::new()
            .name("agentloop-otel-export".into())
            .spawn(move || worker.run());
        let thread = match thread {
            Ok(handle) => Some(handle),
            Err(error) => {
                // Without the thread nothing is exported: every span is counted as dropped.
                tracing::warn!(%error, "otel: cannot start the export thread");
                shared.lock().shutdown = true;
                None
            }
        };
        Self { shared, thread: Mutex::new(thread) }
    }

    /// Sets what the export thread calls every export delay before it looks for spans.
    pub(crate) fn set_collect(&self, collect: Collect) {
        *self.shared.collect.lock().unwrap_or_else(PoisonError::into_inner) = Some(collect);
    }

    /// Queues `span`, ended at `end`: encoded straight into the batch being filled (or
    /// dropped, counted, when the queue is full or shut).
    pub(crate) fn end(&self, span: &SpanRecord, end: u64) {
        self.shared.counters.ended();
        let mut state = self.shared.lock();
        if state.shutdown || state.queued >= self.shared.capacity {
            drop(state);
            self.shared.counters.rejected();
            return;
        }
        state.queued += 1;
        otlp::span_entry(span, end, &mut state.current.buf);
        state.current.spans += 1;
        let bytes = state.current.buf.len().saturating_sub(self.shared.head_room);
        if state.current.spans >= self.shared.batch || bytes >= self.shared.batch_bytes {
            let fresh = self.shared.next_batch();
            let full = std::mem::replace(&mut state.current, fresh);
            state.full.push(full);
            self.shared.work.notify_one();
        }
    }

    /// Exports what is queued now; waits at most `timeout`. True if it was done in time.
    pub(crate) fn flush(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        state.flush_asked += 1;
        let goal = state.flush_asked;
        self.shared.work.notify_one();
        while state.flushed < goal {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = match self.shared.done.wait_timeout(state, left) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        true
    }

    /// Exports what is queued and stops the thread (waits at most `timeout`); spans ended
    /// later are dropped.
    pub(crate) fn shutdown(&self, timeout: Duration) {
        let flushed = self.flush(timeout);
        self.shared.lock().shutdown = true;
        self.shared.work.notify_one();
        let thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let (true, Some(thread)) = (flushed, thread) {
            if thread.join().is_err() {
                tracing::warn!("otel: the export thread panicked");
            }
        }
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // Lets the thread end; what is queued is not exported (call `shutdown` for that).
        self.shared.lock().shutdown = true;
        self.shared.work.notify_one();
    }
}

struct Worker {
    shared: Arc<Shared>,
    sink: Box<dyn SpanSink>,
    preamble: Preamble,
    delay: Duration,
}

impl Worker {
    fn run(mut self) {
        let mut batches: Vec<Batch> = Vec::new();
        let mut next = Instant::now() + self.delay;
        loop {
            {
                let mut state = self.shared.lock();
                loop {
                    if state.shutdown
                        || state.flush_asked > state.flushed
                        || !state.full.is_empty()
                        || Instant::now() >= next
                    {
                        break;
                    }
                    let left = next.saturating_duration_since(Instant::now());
                    state = match self.shared.work.wait_timeout(state, left) {
                        Ok((state, _)) => state,
                        Err(poisoned) => poisoned.into_inner().0,
                    };
                }
            }
            if Instant::now() >= next {
                // The events waiting end their spans (outside the queue's lock: ending a
                // span takes it).
                let collect = self.shared.collect.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(collect) = collect.as_ref() {
                    collect();
                }
            }
            let (goal, stop) = {
                let mut state = self.shared.lock();
                let flushing = state.shutdown || state.flush_asked > state.flushed;
                std::mem::swap(&mut batches, &mut state.full);
                if (flushing || Instant::now() >= next) && state.current.spans > 0 {
                    let fresh = self.shared.next_batch();
                    batches.push(std::mem::replace(&mut state.current, fresh));
                }
                state.queued -= batches.iter().map(|b| b.spans).sum::<usize>();
                (state.flush_asked, state.shutdown)
            };
            for batch in batches.drain(..) {
                self.export(batch);
            }
            next = Instant::now() + self.delay;
            // Every span queued before flush `goal` was asked for was in this swap.
            let mut state = self.shared.lock();
            state.flushed = state.flushed.max(goal);
            self.shared.done.notify_all();
            if stop {
                break;
            }
        }
    }

    fn export(&mut self, mut batch: Batch) {
        let counters = &self.shared.counters;
        let Some(start) = otlp::frame(&self.preamble, &mut batch.buf) else {
            // Not reached: every batch keeps its head room.
            counters.failed(batch.spans);
            return;
        };
        let request = Bytes::from_owner(Pooled { buf: batch.buf, pool: self.shared.pool.clone() });
        match self.sink.export_bytes(request.slice(start..), batch.spans) {
            Ok(()) => counters.exported(batch.spans),
            Err(error) => {
                tracing::debug!(%error, spans = batch.spans, "otel: an export failed");
                counters.failed(batch.spans);
            }
        }
    }
}
