//! Span and trace ids. Random, except for the first span of a run: its trace id (when the
//! run has no caller's trace) and its span id are derived from the run id, so that a
//! process that resumes the run from its journal — with nothing but the run id and the
//! journaled caller's `traceparent` — continues the same trace and links to that span.

use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use sha2::{Digest, Sha256};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;

/// The trace id of a run that has no caller's trace: the run id's 32 hex digits when it
/// is a `run_<uuid>` id (a UUIDv7: time-ordered, random low bits), else a hash of it.
pub(crate) fn run_trace_id(run_id: &str) -> TraceId {
    let hex = run_id.strip_prefix("run_").unwrap_or(run_id);
    if hex.len() == 32 {
        if let Ok(id) = TraceId::from_hex(hex) {
            if id != TraceId::INVALID {
                return id;
            }
        }
    }
    let digest = Sha256::digest(format!("agentloop.trace:{run_id}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    TraceId::from_bytes(bytes)
}

/// The span id of the first `invoke_agent` span of a run.
pub(crate) fn run_span_id(run_id: &str) -> SpanId {
    let digest = Sha256::digest(format!("agentloop.span:{run_id}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    let id = SpanId::from_bytes(bytes);
    if id == SpanId::INVALID {
        SpanId::from_bytes([0, 0, 0, 0, 0, 0, 0, 1])
    } else {
        id
    }
}

/// The ids the next span built on this thread takes.
#[derive(Debug, Clone, Copy)]
struct Planned {
    thread: ThreadId,
    trace: Option<TraceId>,
    span: Option<SpanId>,
}

/// Random ids, or the planned ones for the span being built under [`Ids::plan`].
#[derive(Debug, Default)]
pub(crate) struct Ids {
    random: RandomIdGenerator,
    /// Held while a planned span is built: one plan at a time.
    building: Mutex<()>,
    planned: Mutex<Option<Planned>>,
}

impl Ids {
    fn planned(&self) -> MutexGuard<'_, Option<Planned>> {
        self.planned.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Builds a span with `build`, giving it `span` (and `trace`, if it has no parent); an
    /// id not given is random. Spans built meanwhile on other threads get random ids.
    pub(crate) fn plan<T>(
        &self,
        trace: Option<TraceId>,
        span: Option<SpanId>,
        build: impl FnOnce() -> T,
    ) -> T {
        let _building = self.building.lock().unwrap_or_else(PoisonError::into_inner);
        *self.planned() = Some(Planned { thread: std::thread::current().id(), trace, span });
        let built = build();
        *self.planned() = None;
        built
    }

    fn take_mine(&self, take: impl FnOnce(&mut Planned) -> Option<u128>) -> Option<u128> {
        let mut planned = self.planned();
        let mine = planned.as_mut().filter(|p| p.thread == std::thread::current().id())?;
        take(mine)
    }
}

impl IdGenerator for Ids {
    fn new_trace_id(&self) -> TraceId {
        self.take_mine(|p| p.trace.take().map(|t| u128::from_be_bytes(t.to_bytes())))
            .map_or_else(|| self.random.new_trace_id(), |t| TraceId::from_bytes(t.to_be_bytes()))
    }

    fn new_span_id(&self) -> SpanId {
        // Only the first span built under the plan takes it.
        self.take_mine(|p| {
            p.span.take().map(|span| u128::from(u64::from_be_bytes(span.to_bytes())))
        })
        .map_or_else(|| self.random.new_span_id(), |s| SpanId::from_bytes((s as u64).to_be_bytes()))
    }
}

/// `Ids` shared with the tracer provider (which takes the generator by value).
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedIds(pub(crate) std::sync::Arc<Ids>);

impl IdGenerator for SharedIds {
    fn new_trace_id(&self) -> TraceId {
        self.0.new_trace_id()
    }

    fn new_span_id(&self) -> SpanId {
        self.0.new_span_id()
    }
}
