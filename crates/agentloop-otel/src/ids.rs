//! The ids of a run's first span. Span and trace ids are random (`span::IdSource`), except
//! for the first `invoke_agent` span of a run: its trace id (when the run has no caller's
//! trace) and its span id are derived from the run id, so that a process that resumes the
//! run from its journal — with nothing but the run id and the journaled caller's
//! `traceparent` — continues the same trace and links to that span.

use crate::span::{unhex, SpanId, TraceId};
use sha2::{Digest, Sha256};

/// The ids of a run's first span: the trace id of a run that has no caller's trace and the
/// span id of its first `invoke_agent` span (the run id read once for both).
///
/// The trace id is the run id's 32 hex digits when it is a `run_<uuid>` id (a UUIDv7:
/// time-ordered, random low bits), else a hash of it. The span id is the random low half
/// of such an id (mixed with a constant, so that it does not repeat the trace id's digits),
/// else a hash of the id.
pub(crate) fn run_ids(run_id: &str) -> (TraceId, SpanId) {
    let hex = run_id.strip_prefix("run_").unwrap_or(run_id);
    let uuid = unhex::<16>(hex);
    let trace = match uuid.filter(|id| *id != [0; 16]) {
        Some(id) => id,
        None => {
            let digest = Sha256::digest(format!("agentloop.trace:{run_id}").as_bytes());
            let mut bytes = [0u8; 16];
            bytes.copy_from_slice(&digest[..16]);
            bytes
        }
    };
    let span = uuid
        .map(|id| {
            let mut low = [0u8; 8];
            low.copy_from_slice(&id[8..]);
            (u64::from_be_bytes(low) ^ 0x5bd1_e995_9e37_79b9).to_be_bytes()
        })
        .filter(|span| *span != [0; 8]);
    let span = span.unwrap_or_else(|| {
        let digest = Sha256::digest(format!("agentloop.span:{run_id}").as_bytes());
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&digest[..8]);
        if bytes == [0; 8] {
            [0, 0, 0, 0, 0, 0, 0, 1]
        } else {
            bytes
        }
    });
    (trace, span)
}

/// The trace id of a run that has no caller's trace ([`run_ids`]).
pub(crate) fn run_trace_id(run_id: &str) -> TraceId {
    run_ids(run_id).0
}

/// The span id of the first `invoke_agent` span of a run ([`run_ids`]).
#[cfg(test)]
pub(crate) fn run_span_id(run_id: &str) -> SpanId {
    run_ids(run_id).1
}
