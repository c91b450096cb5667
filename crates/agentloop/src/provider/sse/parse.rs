//! A server-sent-events parser over bytes: the WHATWG rules (lines end with CRLF, LF or CR;
//! `:` starts a comment; `field: value` with one optional space; an empty line dispatches the
//! event; an event without data is dropped; a byte-order mark may open the stream), with no
//! allocation per line or event once its buffers have grown.

/// Events parsed from a byte stream pushed in pieces of any size.
#[derive(Debug, Default)]
pub(super) struct SseParser {
    /// Bytes received and not consumed yet, from `start` on.
    buffer: Vec<u8>,
    start: usize,
    /// The stream's first bytes were checked for a byte-order mark.
    started: bool,
    /// The event being read: its type and data buffers.
    type_buffer: String,
    data_buffer: String,
    /// The last dispatched event.
    name: String,
    payload: String,
}

/// A line that is not UTF-8: its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NotUtf8(pub(super) Vec<u8>);

const BOM: &[u8] = "\u{feff}".as_bytes();

impl SseParser {
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
    pub(super) fn next_event(&mut self) -> Option<Result<(), NotUtf8>> {
        if !self.started {
            return None;
        }
        loop {
            let rest = self.buffer.get(self.start..)?;
            // A vectorized search: scanning byte by byte was about 10k instructions per
            // streamed chat response.
            let end = memchr::memchr2(b'\n', b'\r', rest)?;
            let eol = match (rest[end], rest.get(end + 1)) {
                (b'\r', Some(b'\n')) => 2,
                // A CR that ends the bytes so far may be the first half of a CRLF.
                (b'\r', None) => return None,
                _ => 1,
            };
            let line = match std::str::from_utf8(&rest[..end]) {
                Ok(line) => line,
                Err(_) => return Some(Err(NotUtf8(rest[..end].to_vec()))),
            };
            self.start += end + eol;
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

    /// The stream ended: an unfinished line that is not UTF-8 is an error (an unfinished
    /// event is dropped).
    pub(super) fn finish(&mut self) -> Result<(), NotUtf8> {
        let rest = self.buffer.get(self.start..).unwrap_or_default();
        match std::str::from_utf8(rest) {
            Ok(_) => Ok(()),
            Err(_) => Err(NotUtf8(rest.to_vec())),
        }
    }
}
