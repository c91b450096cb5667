//! Spans as agentloop builds them: plain records with static attribute keys and shared
//! string values, ended into the export queue and encoded straight to OTLP protobuf
//! ([`crate::otlp`]). No SDK span machinery sits between an event and its bytes: that is
//! what made telemetry cost more than the loop it observes (docs/PERFORMANCE.md).

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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

/// A string value: a literal, shared (the model, the provider, the run id, which many spans
/// name), or owned.
#[derive(Debug, Clone)]
pub(crate) enum Text {
    Static(&'static str),
    Shared(Arc<str>),
    Owned(String),
}

impl Text {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Self::Static(s) => s,
            Self::Shared(s) => s,
            Self::Owned(s) => s,
        }
    }
}

impl From<&'static str> for Text {
    fn from(value: &'static str) -> Self {
        Self::Static(value)
    }
}

impl From<String> for Text {
    fn from(value: String) -> Self {
        Self::Owned(value)
    }
}

impl From<Arc<str>> for Text {
    fn from(value: Arc<str>) -> Self {
        Self::Shared(value)
    }
}

impl From<std::borrow::Cow<'static, str>> for Text {
    fn from(value: std::borrow::Cow<'static, str>) -> Self {
        match value {
            std::borrow::Cow::Borrowed(s) => Self::Static(s),
            std::borrow::Cow::Owned(s) => Self::Owned(s),
        }
    }
}

/// An attribute's value.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    Text(Text),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A one-element string array (`gen_ai.response.finish_reasons`).
    TextList(Text),
}

impl From<&'static str> for Value {
    fn from(value: &'static str) -> Self {
        Self::Text(Text::Static(value))
    }
}

impl From<String> for Value {
    fn from(value: String) -> Self {
        Self::Text(Text::Owned(value))
    }
}

impl From<Text> for Value {
    fn from(value: Text) -> Self {
        Self::Text(value)
    }
}

impl From<i64> for Value {
    fn from(value: i64) -> Self {
        Self::Int(value)
    }
}

impl From<f64> for Value {
    fn from(value: f64) -> Self {
        Self::Float(value)
    }
}

impl From<bool> for Value {
    fn from(value: bool) -> Self {
        Self::Bool(value)
    }
}

/// One attribute. Every key agentloop writes is a literal.
#[derive(Debug, Clone)]
pub(crate) struct Attr {
    pub(crate) key: &'static str,
    pub(crate) value: Value,
}

pub(crate) fn attr(key: &'static str, value: impl Into<Value>) -> Attr {
    Attr { key, value: value.into() }
}

/// A span event.
#[derive(Debug, Clone)]
pub(crate) struct SpanEvent {
    pub(crate) name: &'static str,
    pub(crate) time: u64,
    pub(crate) attributes: Vec<Attr>,
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
        String::from_utf8(out.to_vec()).unwrap_or_default()
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
#[derive(Debug, Clone)]
pub(crate) struct SpanRecord {
    pub(crate) context: SpanContext,
    pub(crate) parent: Option<SpanId>,
    /// The parent is in another process (the caller's `traceparent`).
    pub(crate) remote_parent: bool,
    pub(crate) name: Text,
    pub(crate) kind: Kind,
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// Attributes already encoded (`otlp::attributes`: those many spans share), written
    /// before `attributes`.
    pub(crate) encoded: Arc<[u8]>,
    pub(crate) attributes: Vec<Attr>,
    pub(crate) events: Vec<SpanEvent>,
    /// Spans this one continues (a resumed run's first span).
    pub(crate) links: Vec<SpanContext>,
    pub(crate) status: Status,
}

impl SpanRecord {
    /// A span of `context` with nothing in it yet, started now.
    pub(crate) fn new(context: SpanContext, name: Text, kind: Kind) -> Self {
        Self {
            context,
            parent: None,
            remote_parent: false,
            name,
            kind,
            start: now(),
            end: 0,
            encoded: Arc::from([]),
            attributes: Vec::new(),
            events: Vec::new(),
            links: Vec::new(),
            status: Status::Unset,
        }
    }

    pub(crate) fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        self.attributes.push(attr(key, value));
    }

    pub(crate) fn event(&mut self, name: &'static str, attributes: Vec<Attr>) {
        self.events.push(SpanEvent { name, time: now(), attributes });
    }

    /// Marks the span failed: `error.type` and an error status.
    pub(crate) fn fail(&mut self, kind: impl Into<Text>, message: impl Into<String>) {
        self.attributes.push(attr(crate::semconv::ERROR_TYPE, Value::Text(kind.into())));
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
