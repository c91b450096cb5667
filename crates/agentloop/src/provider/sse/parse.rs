//! A server-sent-events parser over bytes: the WHATWG rules (lines end with CRLF, LF or CR;
//! `:` starts a comment; `field: value` with one optional space; an empty line dispatches the
//! event; an event without data is dropped; a byte-order mark may open the stream), with no
//! allocation per line or event once its buffers have grown.
//!
//! Linear in the bytes: a line that arrives in many pieces is searched for its end once (the
//! search resumes where it stopped), and a line or an event larger than its limit is an error
//! as soon as it is, not after it was buffered whole.

/// Events parsed from a byte stream pushed in pieces of any size.
#[derive(Debug)]
pub(super) struct SseParser {
    /// Bytes received and not consumed yet, from `start` on.
    buffer: Vec<u8>,
    start: usize,
    /// Bytes after `start` already searched for a line end (none there).
    scanned: usize,
    /// The stream ended: a CR at the very end is a line end (no LF can follow).
    ended: bool,
    max_line: usize,
    max_event: usize,
    /// The stream's first bytes were checked for a byte-order mark.
    started: bool,
    /// The event being read: its type and data buffers.
    type_buffer: String,
    data_buffer: String,
    /// The last dispatched event.
    name: String,
    payload: String,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new(usize::MAX, usize::MAX)
    }
}

/// What is wrong with the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SseError {
    /// A line that is not UTF-8: its bytes.
    NotUtf8(Vec<u8>),
    /// A line longer than the limit (bytes so far).
    LineTooLong(usize),
    /// An event's data larger than the limit (bytes so far).
    EventTooLarge(usize),
}

const BOM: &[u8] = "\u{feff}".as_bytes();

impl SseParser {
    /// A parser that refuses lines over `max_line` bytes and events over `max_event`.
    pub(super) fn new(max_line: usize, max_event: usize) -> Self {
        Self {
            buffer: Vec::new(),
            start: 0,
            scanned: 0,
            ended: false,
            max_line,
            max_event,
            started: false,
            type_buffer: String::new(),
            data_buffer: String::new(),
            name: String::new(),
            payload: String::new(),
        }
    }

    /// Adds received bytes.
    pub(super) fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        self.buffer.extend_from_slice(bytes);
        if !self.started {
            if self.buffer.starts_with(BOM) {
                self.buffer.drain(..BOM.len());
                self.started = true;
            } else if !BOM.starts_with(&self.buffer) {
                // Not a (partial) byte-order mark.
                self.started = true;
            }
        }
    }

    /// Reads lines until an event is complete: `Some(Ok(()))` when one is (see
    /// [`name`](Self::name) and [`data`](Self::data)), `None` when more bytes are needed.
    pub(super) fn next_event(&mut self) -> Option<Result<(), SseError>> {
        if !self.started {
            return None;
        }
        loop {
            let rest = self.buffer.get(self.start..)?;
            // A vectorized search, from where the last one stopped: scanning byte by byte
            // was about 10k instructions per streamed chat response, and searching a long
            // line again with each piece of it was quadratic.
            let from = self.scanned.min(rest.len());
            let Some(found) = memchr::memchr2(b'\n', b'\r', &rest[from..]) else {
                self.scanned = rest.len();
                if rest.len() > self.max_line {
                    return Some(Err(SseError::LineTooLong(rest.len())));
                }
                return None;
            };
            let end = from + found;
            let eol = match (rest[end], rest.get(end + 1)) {
                (b'\r', Some(b'\n')) => 2,
                // A CR that ends the bytes so far may be the first half of a CRLF.
                (b'\r', None) if !self.ended => {
                    self.scanned = end;
                    return None;
                }
                _ => 1,
            };
            if end > self.max_line {
                return Some(Err(SseError::LineTooLong(end)));
            }
            let line = match std::str::from_utf8(&rest[..end]) {
                Ok(line) => line,
                Err(_) => return Some(Err(SseError::NotUtf8(rest[..end].to_vec()))),
            };
            self.start += end + eol;
            self.scanned = 0;
            if line.is_empty() {
                if self.dispatch() {
                    return Some(Ok(()));
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (line, ""),
            };
            match field {
                "event" => {
                    self.type_buffer.clear();
                    self.type_buffer.push_str(value);
                }
                "data" => {
                    let size = self.data_buffer.len() + value.len() + 1;
                    if size > self.max_event {
                        return Some(Err(SseError::EventTooLarge(size)));
                    }
                    // One allocation for the value and its newline while the buffer grows.
                    self.data_buffer.reserve(value.len() + 1);
                    self.data_buffer.push_str(value);
                    self.data_buffer.push('\n');
                }
                // `id` and `retry` are for reconnecting, which a model call never does.
                _ => {}
            }
        }
    }

    /// Ends the event being read: `true` when it has data (an event to deliver).
    fn dispatch(&mut self) -> bool {
        if self.data_buffer.is_empty() {
            self.type_buffer.clear();
            return false;
        }
        if self.data_buffer.ends_with('\n') {
            self.data_buffer.pop();
        }
        std::mem::swap(&mut self.payload, &mut self.data_buffer);
        std::mem::swap(&mut self.name, &mut self.type_buffer);
        self.data_buffer.clear();
        self.type_buffer.clear();
        true
    }

    /// The type of the last event (`""` when it had none, or `message`, the default).
    pub(super) fn name(&self) -> &str {
        if self.name == "message" {
            ""
        } else {
            &self.name
        }
    }

    /// The data of the last event.
    pub(super) fn data(&self) -> &str {
        &self.payload
    }

    /// The stream ended: a CR that ends it ends its line (a CR-only stream's last empty
    /// line dispatches its last event: call [`next_event`](Self::next_event) again); an
    /// unfinished line that is not UTF-8 is an error (an unfinished event is dropped).
    pub(super) fn finish(&mut self) -> Result<(), SseError> {
        self.ended = true;
        self.started = true;
        let rest = self.buffer.get(self.start..).unwrap_or_default();
        let unfinished = match memchr::memrchr2(b'\n', b'\r', rest) {
            Some(end) => &rest[end + 1..],
            None => rest,
        };
        match std::str::from_utf8(unfinished) {
            Ok(_) => Ok(()),
            Err(_) => Err(SseError::NotUtf8(unfinished.to_vec())),
        }
    }
}
