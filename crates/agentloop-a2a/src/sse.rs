//! A server-sent events parser (the WHATWG event-stream format), sans IO: push bytes as they
//! arrive, take complete events out.
//!
//! Handles `\n`, `\r\n` and `\r` line ends (also split across pushes), a leading byte-order
//! mark, comments (`:` lines, the usual keep-alives), multi-line `data`, `event` names, `id`
//! (remembered across events, as the spec says) and `retry`. Each event is bounded in size.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field, `message` when absent.
    pub event: String,
    /// The `data` lines joined by `\n`.
    pub data: String,
    /// The last event id seen so far (the `id` field of this or an earlier event).
    pub id: Option<String>,
    /// The `retry` field of this event, in milliseconds.
    pub retry: Option<u64>,
}

/// Why a byte stream is not a valid event stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// One event (or one line) is larger than the parser's limit.
    #[error("a server-sent event exceeds the limit of {0} bytes")]
    TooLarge(usize),
    /// A line is not UTF-8.
    #[error("a server-sent event line is not UTF-8")]
    NotUtf8,
}

/// The parser. Feed it with [`push`](Self::push).
#[derive(Debug)]
pub struct SseParser {
    max_event_bytes: usize,
    line: Vec<u8>,
    skip_lf: bool,
    first_line: bool,
    data: String,
    has_data: bool,
    event: String,
    retry: Option<u64>,
    last_id: Option<String>,
}

impl SseParser {
    /// A parser that rejects an event whose lines add up to more than `max_event_bytes`.
    pub fn new(max_event_bytes: usize) -> Self {
        Self {
            max_event_bytes,
            line: Vec::new(),
            skip_lf: false,
            first_line: true,
            data: String::new(),
            has_data: false,
            event: String::new(),
            retry: None,
            last_id: None,
        }
    }

    /// The id of the last event (for a reconnect's `Last-Event-ID`).
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// Takes `bytes`; returns the events they complete. After an error the parser should
    /// not be used again.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut events = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            if self.skip_lf {
                self.skip_lf = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    continue;
                }
            }
            match rest.iter().position(|b| *b == b'\n' || *b == b'\r') {
                Some(end) => {
                    self.extend_line(&rest[..end])?;
                    self.skip_lf = rest[end] == b'\r';
                    rest = &rest[end + 1..];
                    if let Some(event) = self.end_line()? {
                        events.push(event);
                    }
                }
                None => {
                    self.extend_line(rest)?;
                    rest = &[];
                }
            }
        }
        Ok(events)
    }

    fn extend_line(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.data.len() + self.line.len() + bytes.len() > self.max_event_bytes {
            return Err(SseError::TooLarge(self.max_event_bytes));
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self) -> Result<Option<SseEvent>, SseError> {
        let raw = std::mem::take(&mut self.line);
        let mut line = String::from_utf8(raw).map_err(|_| SseError::NotUtf8)?;
        if std::mem::take(&mut self.first_line) && line.starts_with('\u{feff}') {
            line.remove(0);
        }
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_str(), ""),
        };
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => value.clone_into(&mut self.event),
            "id" if !value.contains('\0') => self.last_id = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok();
            }
            _ => {}
        }
        Ok(None)
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        let retry = self.retry.take();
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        Some(SseEvent {
            event: if event.is_empty() { "message".to_owned() } else { event },
            data,
            id: self.last_id.clone(),
            retry,
        })
    }
}

#[cfg(test)]
mod tests;
