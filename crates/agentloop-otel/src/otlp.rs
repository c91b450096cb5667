//! OTLP protobuf encoding of agentloop's spans: each [`SpanRecord`] encodes its fields as
//! they become known, its entry is written into the export queue's batch when it ends, and
//! a batch is framed as one `ExportTraceServiceRequest` (opentelemetry-proto
//! `collector/trace/v1`). The same bytes go out over HTTP/protobuf and gRPC.
//!
//! The field numbers are those of `opentelemetry/proto/trace/v1/trace.proto` and
//! `common/v1/common.proto`; the unit tests decode the output with the project's own
//! generated types (the `opentelemetry-proto` crate) and compare field by field.

use crate::span::{Kind, SpanContext, SpanId, SpanRecord, Status, Value};

const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;
const FIXED32: u32 = 5;

/// `Span.flags`: the low byte holds the W3C trace flags; these say whether the parent is
/// remote.
const FLAGS_HAS_IS_REMOTE: u32 = 0x100;
const FLAGS_IS_REMOTE: u32 = 0x200;

/// A protobuf writer over a reusable buffer.
pub(crate) struct Writer<'a> {
    buf: &'a mut Vec<u8>,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(buf: &'a mut Vec<u8>) -> Self {
        Self { buf }
    }

    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.buf.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.buf.push(value as u8);
    }

    fn key(&mut self, field: u32, wire: u32) {
        self.varint(u64::from(field << 3 | wire));
    }

    fn uint(&mut self, field: u32, value: u64) {
        self.key(field, VARINT);
        self.varint(value);
    }

    fn fixed64(&mut self, field: u32, value: u64) {
        self.key(field, FIXED64);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    fn fixed32(&mut self, field: u32, value: u32) {
        self.key(field, FIXED32);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    fn bytes(&mut self, field: u32, value: &[u8]) {
        self.key(field, LEN);
        self.varint(value.len() as u64);
        self.buf.extend_from_slice(value);
    }

    fn string(&mut self, field: u32, value: &str) {
        self.bytes(field, value.as_bytes());
    }

    /// A string field holding the concatenation of `parts`.
    fn string_parts(&mut self, field: u32, parts: &[&str]) {
        self.key(field, LEN);
        self.varint(parts.iter().map(|p| p.len()).sum::<usize>() as u64);
        for part in parts {
            self.buf.extend_from_slice(part.as_bytes());
        }
    }

    /// A nested message: written in place after a length of `room` bytes (the guess for
    /// its size), which is resized (the body moved) when the body turns out to need
    /// another.
    fn message(&mut self, field: u32, room: usize, body: impl FnOnce(&mut Self)) {
        self.key(field, LEN);
        let at = self.buf.len();
        self.buf.resize(at + room, 0);
        body(self);
        let len = self.buf.len() - at - room;
        let mut prefix = [0u8; 10];
        let mut n = 0;
        let mut rest = len as u64;
        while rest >= 0x80 {
            prefix[n] = (rest as u8) | 0x80;
            rest >>= 7;
            n += 1;
        }
        prefix[n] = rest as u8;
        n += 1;
        if n > room {
            self.buf.splice(at + room..at + room, std::iter::repeat_n(0u8, n - room));
        } else if n < room {
            self.buf.drain(at + n..at + room);
        }
        self.buf[at..at + n].copy_from_slice(&prefix[..n]);
    }

    /// A `KeyValue` in field `field`; its lengths are known before it is written, so it
    /// is written in one pass.
    fn key_value(&mut self, field: u32, key: &str, value: &Value<'_>) {
        let value_len = any_value_len(value);
        let len = 1 + varint_len(key.len()) + key.len() + 1 + varint_len(value_len) + value_len;
        if field < 16 && len < 128 {
            // Most attributes: every tag and length is one byte, and the value's bytes go
            // in with its header (a few appends, not a push a byte).
            self.buf.reserve(len + 2);
            let (tag, key_len) = ((field << 3 | LEN) as u8, key.len() as u8);
            self.buf.extend_from_slice(&[tag, len as u8, 1 << 3 | LEN as u8, key_len]);
            self.buf.extend_from_slice(key.as_bytes());
            let any = 2 << 3 | LEN as u8;
            match *value {
                Value::Text(text) => {
                    let header = [any, value_len as u8, 1 << 3 | LEN as u8, text.len() as u8];
                    self.buf.extend_from_slice(&header);
                    self.buf.extend_from_slice(text.as_bytes());
                }
                Value::Int(i) => {
                    let mut out = [0u8; 13];
                    out[..3].copy_from_slice(&[any, value_len as u8, 3 << 3 | VARINT as u8]);
                    let n = 3 + write_varint(&mut out[3..], i as u64);
                    self.buf.extend_from_slice(&out[..n]);
                }
                Value::Float(f) => {
                    let mut out = [0u8; 11];
                    out[..3].copy_from_slice(&[any, value_len as u8, 4 << 3 | FIXED64 as u8]);
                    out[3..].copy_from_slice(&f.to_bits().to_le_bytes());
                    self.buf.extend_from_slice(&out);
                }
                Value::Bool(b) => {
                    let b = u8::from(b);
                    self.buf.extend_from_slice(&[any, value_len as u8, 2 << 3 | VARINT as u8, b]);
                }
                Value::TextList(_) => {
                    self.buf.extend_from_slice(&[any, value_len as u8]);
                    self.value(value);
                }
            }
            return;
        }
        self.buf.reserve(len + 6);
        self.key(field, LEN);
        self.varint(len as u64);
        self.string(1, key);
        self.key(2, LEN);
        self.varint(value_len as u64);
        self.value(value);
    }

    /// The fields of an `AnyValue` holding `value`.
    fn value(&mut self, value: &Value<'_>) {
        match *value {
            Value::Text(text) => self.string(1, text),
            Value::Bool(b) => self.uint(2, u64::from(b)),
            Value::Int(i) => self.uint(3, i as u64),
            Value::Float(f) => self.fixed64(4, f.to_bits()),
            Value::TextList(text) => {
                // ArrayValue { values: [AnyValue { string_value }] }
                let inner = 1 + varint_len(text.len()) + text.len();
                self.key(5, LEN);
                self.varint((1 + varint_len(inner) + inner) as u64);
                self.key(1, LEN);
                self.varint(inner as u64);
                self.string(1, text);
            }
        }
    }

    fn attributes(&mut self, field: u32, attributes: &[(&str, Value<'_>)]) {
        for (key, value) in attributes {
            self.key_value(field, key, value);
        }
    }

    /// A span's attribute (`Span.attributes`).
    pub(crate) fn attribute(&mut self, key: &str, value: &Value<'_>) {
        self.key_value(9, key, value);
    }

    /// The fields of a span known when it starts: its name (the concatenation of `name`),
    /// kind, parent (its id, and whether it is in another process) and flags.
    pub(crate) fn span_start(
        &mut self,
        name: &[&str],
        kind: Kind,
        parent: Option<(SpanId, bool)>,
        context: &SpanContext,
    ) {
        if let Some((parent, _)) = &parent {
            self.bytes(4, parent);
        }
        self.string_parts(5, name);
        self.uint(6, kind as u64);
        let remote = if matches!(parent, Some((_, true))) { FLAGS_IS_REMOTE } else { 0 };
        self.fixed32(16, flags(context) | FLAGS_HAS_IS_REMOTE | remote);
    }

    /// A span event (`Span.events`) at `time`.
    pub(crate) fn event(&mut self, time: u64, name: &str, attributes: &[(&str, Value<'_>)]) {
        self.message(11, 2, |w| {
            w.fixed64(1, time);
            w.string(2, name);
            w.attributes(3, attributes);
        });
    }

    /// A link (`Span.links`) to a span of another process.
    pub(crate) fn link(&mut self, other: &SpanContext) {
        self.message(13, 1, |w| {
            w.bytes(1, &other.trace_id);
            w.bytes(2, &other.span_id);
            w.fixed32(6, flags(other) | FLAGS_HAS_IS_REMOTE);
        });
    }
}

/// The bytes of `value` as a varint.
pub(crate) fn varint_len(value: usize) -> usize {
    varint_len_u64(value as u64)
}

/// The encoded length of an `AnyValue` holding `value`.
fn any_value_len(value: &Value<'_>) -> usize {
    let string = |len: usize| 1 + varint_len(len) + len;
    match *value {
        Value::Text(text) => string(text.len()),
        Value::Bool(_) => 2,
        Value::Int(i) => 1 + varint_len_u64(i as u64),
        Value::Float(_) => 9,
        Value::TextList(text) => {
            let any = string(text.len());
            let array = 1 + varint_len(any) + any;
            1 + varint_len(array) + array
        }
    }
}

fn varint_len_u64(value: u64) -> usize {
    let bits = u64::BITS - (value | 1).leading_zeros();
    (bits as usize).div_ceil(7)
}

/// Writes `value` as a varint at the start of `out` (10 bytes hold any value); returns how
/// many bytes it took.
fn write_varint(out: &mut [u8], mut value: u64) -> usize {
    let mut n = 0;
    while value >= 0x80 && n + 1 < out.len() {
        out[n] = (value as u8) | 0x80;
        value >>= 7;
        n += 1;
    }
    if let Some(last) = out.get_mut(n) {
        *last = value as u8;
    }
    n + 1
}

fn flags(context: &SpanContext) -> u32 {
    u32::from(context.sampled)
}

/// The parts of a request that do not change: the resource and the instrumentation scope.
#[derive(Debug, Clone)]
pub(crate) struct Preamble {
    /// The encoded `Resource` message body.
    resource: Vec<u8>,
}

impl Preamble {
    /// From the resource's attributes (`service.name`, …).
    pub(crate) fn new(resource: &[(&str, Value<'_>)]) -> Self {
        let mut body = Vec::new();
        Writer::new(&mut body).attributes(1, resource);
        Self { resource: body }
    }
}

/// `attributes` encoded as a span's, for [`SpanRecord::set_encoded`].
pub(crate) fn attributes(attributes: &[(&str, Value<'_>)]) -> Vec<u8> {
    let mut buf = Vec::new();
    Writer::new(&mut buf).attributes(9, attributes);
    buf
}

/// Appends `span`, ended at `end`, to `out` as an entry of `ScopeSpans.spans` (field 2):
/// what [`frame`] turns into a request. Its ids, times and status go before the fields
/// it encoded as it went ([`SpanRecord::body`]).
pub(crate) fn span_entry(span: &SpanRecord, end: u64, out: &mut Vec<u8>) {
    let context = &span.context;
    // The `Status` message: its message (if any) and its code (one byte).
    let status = match &span.status {
        Status::Unset => None,
        Status::Ok => Some(("", 1)),
        Status::Error(message) => Some((message.as_str(), 2)),
    };
    let status_body = status.map(|(message, _)| match message.len() {
        0 => 2,
        n => 1 + varint_len(n) + n + 2,
    });
    let status_len = status_body.map_or(0, |body| 1 + varint_len(body) + body);
    // trace id (2 + 16), span id (2 + 8), start and end (2 × 9).
    let len = 18 + 10 + 18 + span.body.len() + status_len;
    out.reserve(len + 6);
    // The entry's tag and length, then trace id, span id, start and end: one append.
    let mut head = [0u8; 11 + 46];
    head[0] = 2 << 3 | LEN as u8;
    let n = 1 + write_varint(&mut head[1..11], len as u64);
    let fixed = &mut head[n..n + 46];
    fixed[0] = 1 << 3 | LEN as u8;
    fixed[1] = 16;
    fixed[2..18].copy_from_slice(&context.trace_id);
    fixed[18] = 2 << 3 | LEN as u8;
    fixed[19] = 8;
    fixed[20..28].copy_from_slice(&context.span_id);
    fixed[28] = 7 << 3 | FIXED64 as u8;
    fixed[29..37].copy_from_slice(&span.start.to_le_bytes());
    fixed[37] = 8 << 3 | FIXED64 as u8;
    fixed[38..46].copy_from_slice(&end.to_le_bytes());
    out.extend_from_slice(&head[..n + 46]);
    out.extend_from_slice(&span.body);
    let mut w = Writer::new(out);
    if let (Some((message, code)), Some(body)) = (status, status_body) {
        w.key(15, LEN);
        w.varint(body as u64);
        if !message.is_empty() {
            w.string(2, message);
        }
        w.uint(3, code);
    }
}

/// The scope every span is in (`InstrumentationScope { name: "agentloop" }`), encoded as
/// `ScopeSpans.scope` (field 1).
const SCOPE: &[u8] = b"\x0a\x0b\x0a\x09agentloop";

impl Preamble {
    /// The room a batch keeps in front of its span entries, in which [`frame`] writes the
    /// request's header: the most it can take (three fields' keys and lengths, the
    /// resource, the scope).
    pub(crate) fn head_room(&self) -> usize {
        self.resource.len() + SCOPE.len() + 3 * (1 + 5) + 5
    }
}

/// Frames the span entries (from [`span_entry`]) that follow the first
/// [`Preamble::head_room`] bytes of `buf` as one `ExportTraceServiceRequest`, in place: the
/// request's header is written just before the entries, which are not copied. Returns where
/// the request starts in `buf` (`None`: `buf` is shorter than the head room).
pub(crate) fn frame(preamble: &Preamble, buf: &mut [u8]) -> Option<usize> {
    let room = preamble.head_room();
    let entries = buf.len().checked_sub(room)?;
    let resource = preamble.resource.len();
    let scope_spans = SCOPE.len() + entries;
    let resource_spans =
        1 + varint_len(resource) + resource + 1 + varint_len(scope_spans) + scope_spans;
    let mut head = Vec::with_capacity(room);
    let mut w = Writer::new(&mut head);
    w.key(1, LEN);
    w.varint(resource_spans as u64);
    w.bytes(1, &preamble.resource);
    w.key(2, LEN);
    w.varint(scope_spans as u64);
    w.buf.extend_from_slice(SCOPE);
    let start = room.checked_sub(head.len())?;
    buf.get_mut(start..room)?.copy_from_slice(&head);
    Some(start)
}

/// Encodes `spans` (each with its end time) as one request (tests).
#[cfg(test)]
pub(crate) fn encode_spans(preamble: &Preamble, spans: &[(SpanRecord, u64)], out: &mut Vec<u8>) {
    let mut buf = vec![0; preamble.head_room()];
    for (span, end) in spans {
        span_entry(span, *end, &mut buf);
    }
    let start = frame(preamble, &mut buf).unwrap_or_default();
    out.clear();
    out.extend_from_slice(&buf[start..]);
}

#[cfg(test)]
mod tests;
