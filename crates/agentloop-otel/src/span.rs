//! Spans as agentloop builds them: records that encode each field to OTLP protobuf
//! ([`crate::otlp`]) as it becomes known, ended into the export queue. No SDK span
//! machinery sits between an event and its bytes: that is what made telemetry cost more
//! than the loop it observes (docs/PERFORMANCE.md).

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A trace id (16 bytes, never all zero).
pub(crate) type TraceId = [u8; 16];
/// A span id (8 bytes, never all zero).
pub(crate) type SpanId = [u8; 8];

/// OTLP's span kinds (the protobuf enum's numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Internal = 1,
    Client = 3,
}

/// An attribute's value, borrowed: it is encoded as it is set
/// ([`SpanRecord::set`]), so nothing of it is kept.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value<'a> {
    Text(&'a str),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A one-element string array (`gen_ai.response.finish_reasons`).
    TextList(&'a str),
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(value: &'a str) -> Self {
        Self::Text(value)
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(value: &'a String) -> Self {
        Self::Text(value)
    }
}

impl From<i64> for Value<'_> {
    fn from(value: i64) -> Self {
        Self::Int(value)
    }
}

impl From<f64> for Value<'_> {
    fn from(value: f64) -> Self {
        Self::Float(value)
    }
}

impl From<bool> for Value<'_> {
    fn from(value: bool) -> Self {
        Self::Bool(value)
    }
}

/// A span's status.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Status {
    #[default]
    Unset,
    Ok,
    Error(String),
}

/// The context of a span: what a child or a `traceparent` needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SpanContext {
    pub(crate) trace_id: TraceId,
    pub(crate) span_id: SpanId,
    pub(crate) sampled: bool,
}

impl SpanContext {
    /// Its W3C `traceparent`.
    pub(crate) fn traceparent(&self) -> String {
        let mut out = [0u8; 55];
        out[..3].copy_from_slice(b"00-");
        hex_into(&mut out[3..35], &self.trace_id);
        out[35] = b'-';
        hex_into(&mut out[36..52], &self.span_id);
        out[52..].copy_from_slice(if self.sampled { b"-01" } else { b"-00" });
        std::str::from_utf8(&out).unwrap_or_default().to_owned()
    }

    /// A W3C `traceparent` (version 00, or a later version read as 00 does), or `None` if it
    /// is malformed or names an invalid (all-zero) id.
    pub(crate) fn parse(traceparent: &str) -> Option<Self> {
        let mut parts = traceparent.trim().split('-');
        let version = parts.next()?;
        let (trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?);
        if version.len() != 2 || version.eq_ignore_ascii_case("ff") {
            return None;
        }
        if version == "00" && parts.next().is_some() {
            return None;
        }
        let trace_id: TraceId = unhex(trace)?;
        let span_id: SpanId = unhex(span)?;
        let [flags] = unhex::<1>(flags)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Self { trace_id, span_id, sampled: flags & 1 == 1 })
    }
}

/// `bytes` as lower-case hex, appended to `out`.
pub(crate) fn hex(out: &mut String, bytes: &[u8]) {
    let mut digits = vec![0u8; bytes.len() * 2];
    hex_into(&mut digits, bytes);
    out.push_str(std::str::from_utf8(&digits).unwrap_or_default());
}

/// `bytes` as lower-case hex into `out` (twice as long).
fn hex_into(out: &mut [u8], bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, byte) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 15)];
    }
}

/// `N` bytes from exactly `2N` hex digits (lower-case, as W3C requires).
pub(crate) fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let value = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        out[i] = value(pair[0])? << 4 | value(pair[1])?;
    }
    Some(out)
}

/// One span, open while its owner holds it; [`crate::export::Queue::end`] takes it.
///
/// What is known of the span as it goes — its name, kind, parent and flags, then each
/// attribute, event and link as it is set — is encoded at once as OTLP protobuf `Span`
/// fields into `body` (protobuf lets a message's fields come in any order), so a span
/// holds no attribute values, clones no strings and allocates nothing but its body, which
/// its owner reuses. Its ids, times and status are written when it ends
/// ([`crate::otlp::span_entry`]). An unsampled span records nothing.
#[derive(Debug, Clone)]
pub(crate) struct SpanRecord {
    pub(crate) context: SpanContext,
    pub(crate) start: u64,
    pub(crate) status: Status,
    pub(crate) body: Vec<u8>,
}

impl SpanRecord {
    /// A span of `context` named by the concatenation of `name`, under `parent` (the span
    /// id, and whether it is in another process), started now, its fields encoded into
    /// `body` (cleared first: a buffer to reuse).
    pub(crate) fn new(
        context: SpanContext,
        name: &[&str],
        kind: Kind,
        parent: Option<(SpanId, bool)>,
        body: Vec<u8>,
    ) -> Self {
        Self::started_at(now(), context, name, kind, parent, body)
    }

    /// The same, started at `start` (nanoseconds since the Unix epoch).
    pub(crate) fn started_at(
        start: u64,
        context: SpanContext,
        name: &[&str],
        kind: Kind,
        parent: Option<(SpanId, bool)>,
        mut body: Vec<u8>,
    ) -> Self {
        body.clear();
        if context.sampled {
            crate::otlp::Writer::new(&mut body).span_start(name, kind, parent, &context);
        }
        Self { context, start, status: Status::Unset, body }
    }

    /// A span that only holds `context` (it is never ended).
    pub(crate) fn placeholder(context: SpanContext) -> Self {
        Self { context, start: 0, status: Status::Unset, body: Vec::new() }
    }

    fn writer(&mut self) -> Option<crate::otlp::Writer<'_>> {
        self.context.sampled.then(|| crate::otlp::Writer::new(&mut self.body))
    }

    /// Sets attribute `key`.
    pub(crate) fn set<'a>(&mut self, key: &str, value: impl Into<Value<'a>>) {
        if let Some(mut w) = self.writer() {
            w.attribute(key, &value.into());
        }
    }

    /// Adds attributes already encoded (`otlp::attributes`).
    pub(crate) fn set_encoded(&mut self, attributes: &[u8]) {
        if self.context.sampled {
            self.body.extend_from_slice(attributes);
        }
    }

    /// Adds an event, now.
    #[cfg(test)]
    pub(crate) fn event(&mut self, name: &str, attributes: &[(&str, Value<'_>)]) {
        self.event_at(now(), name, attributes);
    }

    /// Adds an event that happened at `time`.
    pub(crate) fn event_at(&mut self, time: u64, name: &str, attributes: &[(&str, Value<'_>)]) {
        if let Some(mut w) = self.writer() {
            w.event(time, name, attributes);
        }
    }

    /// Links the span to `other` (a span of another process: the one this continues).
    pub(crate) fn link(&mut self, other: &SpanContext) {
        if let Some(mut w) = self.writer() {
            w.link(other);
        }
    }

    /// Marks the span failed: `error.type` and an error status.
    pub(crate) fn fail(&mut self, kind: &str, message: impl Into<String>) {
        self.set(crate::semconv::ERROR_TYPE, kind);
        self.status = Status::Error(message.into());
    }
}

/// Nanoseconds since the Unix epoch, now.
pub(crate) fn now() -> u64 {
    nanos(SystemTime::now())
}

pub(crate) fn nanos(time: SystemTime) -> u64 {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
}

/// Random span and trace ids: a counter from a random start through SplitMix64 (a
/// bijection, so no id repeats within a process), keyed by the process's random hash seed.
#[derive(Debug)]
pub(crate) struct IdSource {
    key: u64,
    next: AtomicU64,
}

impl Default for IdSource {
    fn default() -> Self {
        let seed = |salt: u64| {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u64(salt);
            hasher.write_u64(now());
            hasher.write_u32(std::process::id());
            hasher.finish()
        };
        Self { key: seed(1), next: AtomicU64::new(seed(2)) }
    }
}

impl IdSource {
    fn next(&self) -> u64 {
        loop {
            let n = splitmix(self.next.fetch_add(1, Ordering::Relaxed) ^ self.key);
            if n != 0 {
                return n;
            }
        }
    }

    pub(crate) fn span_id(&self) -> SpanId {
        self.next().to_be_bytes()
    }

    pub(crate) fn trace_id(&self) -> TraceId {
        let id = (u128::from(self.next()) << 64) | u128::from(self.next());
        id.to_be_bytes()
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
