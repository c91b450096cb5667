//! Partial structured output while it streams: the JSON text so far (the answer's text in
//! native mode, the final-answer tool's arguments in tool mode) parsed as far as it goes into
//! the value it is becoming, for `output_delta` events.
//!
//! [`parse_partial`] reads a prefix of a JSON text in one pass: open objects and arrays are
//! closed, an unfinished string is kept as far as it goes (an unfinished escape left out), and
//! what cannot be known yet — a number that may still grow, a `tru` of `true`, a key without
//! its value — is left out. Re-parsing grows geometrically ([`PartialOutput`]), so a long
//! answer costs linear time overall.

use crate::event::Event;
use crate::message::Part;
use crate::provider::{ModelResponse, StreamChunk};
use crate::terms::{OutputMode, OutputSpec, OUTPUT_TOOL};
use serde_json::{Map, Number, Value};

/// Deeper nesting than this is not parsed (the value so far stops there).
const MAX_DEPTH: usize = 128;

/// Follows one model call's stream and yields the partial output as it grows.
pub(super) struct PartialOutput {
    /// Text mode (native) or the final-answer tool's call.
    from_text: bool,
    /// The final-answer call being streamed, in tool mode.
    call_id: Option<String>,
    text: String,
    /// The length of `text` when it was last parsed.
    parsed_at: usize,
    last: Option<Value>,
    wrapped: bool,
}

impl PartialOutput {
    /// A follower for a run with this output (`None`: no output, nothing to follow).
    pub(super) fn new(spec: Option<&OutputSpec>) -> Option<Self> {
        let spec = spec?;
        Some(Self {
            from_text: spec.mode == OutputMode::Native,
            call_id: None,
            text: String::new(),
            parsed_at: 0,
            last: None,
            wrapped: spec.wrapped,
        })
    }

    /// The event for this chunk, when the value so far changed.
    pub(super) fn push(&mut self, chunk: &StreamChunk) -> Option<Event> {
        match chunk {
            StreamChunk::TextDelta { text } if self.from_text => self.text.push_str(text),
            StreamChunk::ToolCallStart { id, name } if !self.from_text && name == OUTPUT_TOOL => {
                if self.call_id.is_none() {
                    self.call_id = Some(id.clone());
                }
                return None;
            }
            StreamChunk::ToolCallDelta { id, delta } if self.call_id.as_ref() == Some(id) => {
                self.text.push_str(delta);
            }
            _ => return None,
        }
        // Parse again once the text has grown by a sixteenth since the last parse: a few
        // dozen parses for any length ([`finish`](Self::finish) parses the rest).
        let grown = self.text.len() - self.parsed_at;
        if grown == 0 || grown < self.parsed_at / 16 {
            return None;
        }
        self.parse()
    }

    /// The value of a whole (not streamed) response, as one event: a provider that does not
    /// stream still shows the typed answer before the run validates it.
    pub(super) fn of_whole(spec: Option<&OutputSpec>, response: &ModelResponse) -> Option<Event> {
        let mut partial = Self::new(spec)?;
        let mut last = None;
        for part in &response.message.content {
            let chunks = match part {
                Part::Text { text } => vec![StreamChunk::TextDelta { text: text.clone() }],
                Part::ToolCall(call) if call.name == OUTPUT_TOOL => vec![
                    StreamChunk::ToolCallStart { id: call.id.clone(), name: call.name.clone() },
                    StreamChunk::ToolCallDelta {
                        id: call.id.clone(),
                        delta: call.arguments.clone(),
                    },
                ],
                _ => continue,
            };
            for chunk in &chunks {
                last = partial.push(chunk).or(last);
            }
        }
        partial.finish().or(last)
    }

    /// The event for the whole text, when the stream ended after the last parse.
    pub(super) fn finish(&mut self) -> Option<Event> {
        (self.parsed_at < self.text.len()).then(|| self.parse()).flatten()
    }

    fn parse(&mut self) -> Option<Event> {
        self.parsed_at = self.text.len();
        let mut value = parse_partial(strip_fence(&self.text))?;
        if self.wrapped {
            value = value.get_mut("response").map(Value::take)?;
        }
        if self.last.as_ref() == Some(&value) {
            return None;
        }
        self.last = Some(value.clone());
        Some(Event::OutputDelta { partial: value })
    }
}

/// The text after an opening code fence (```` ```json ````), if it has one.
fn strip_fence(text: &str) -> &str {
    let trimmed = text.trim_start();
    match trimmed.strip_prefix("```") {
        Some(rest) => rest.trim_start_matches(|c: char| c.is_ascii_alphabetic()),
        None => trimmed,
    }
}

/// The value a prefix of a JSON text is becoming (see the [module docs](self)); `None` when
/// nothing is known yet, or the text is not JSON.
pub(crate) fn parse_partial(text: &str) -> Option<Value> {
    let mut parser = Parser { bytes: text.as_bytes(), text, at: 0 };
    match parser.value(0) {
        Ok(Some((value, _))) => Some(value),
        _ => None,
    }
}

/// Not JSON.
struct Invalid;

struct Parser<'a> {
    bytes: &'a [u8],
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    /// The value at the cursor and whether it is complete; `None`: nothing usable yet (the
    /// text ends in it).
    fn value(&mut self, depth: usize) -> Result<Option<(Value, bool)>, Invalid> {
        self.skip_ws();
        let Some(&byte) = self.bytes.get(self.at) else { return Ok(None) };
        if depth > MAX_DEPTH {
            return Err(Invalid);
        }
        match byte {
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' => Ok(self.string()?.map(|(s, done)| (Value::String(s), done))),
            b't' => self.literal("true", Value::Bool(true)),
            b'f' => self.literal("false", Value::Bool(false)),
            b'n' => self.literal("null", Value::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(Invalid),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Option<(Value, bool)>, Invalid> {
        self.at += 1;
        let mut map = Map::new();
        loop {
            self.skip_ws();
            match self.bytes.get(self.at) {
                None => return Ok(Some((Value::Object(map), false))),
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Some((Value::Object(map), true)));
                }
                Some(b'"') => {}
                Some(_) => return Err(Invalid),
            }
            let Some((key, true)) = self.string()? else {
                return Ok(Some((Value::Object(map), false)));
            };
            self.skip_ws();
            match self.bytes.get(self.at) {
                None => return Ok(Some((Value::Object(map), false))),
                Some(b':') => self.at += 1,
                Some(_) => return Err(Invalid),
            }
            match self.value(depth + 1)? {
                None => return Ok(Some((Value::Object(map), false))),
                Some((value, done)) => {
                    map.insert(key, value);
                    if !done {
                        return Ok(Some((Value::Object(map), false)));
                    }
                }
            }
            self.skip_ws();
            match self.bytes.get(self.at) {
                None => return Ok(Some((Value::Object(map), false))),
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Some((Value::Object(map), true)));
                }
                Some(_) => return Err(Invalid),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Option<(Value, bool)>, Invalid> {
        self.at += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            match self.bytes.get(self.at) {
                None => return Ok(Some((Value::Array(items), false))),
                Some(b']') => {
                    self.at += 1;
                    return Ok(Some((Value::Array(items), true)));
                }
                Some(_) => {}
            }
            match self.value(depth + 1)? {
                None => return Ok(Some((Value::Array(items), false))),
                Some((value, done)) => {
                    items.push(value);
                    if !done {
                        return Ok(Some((Value::Array(items), false)));
                    }
                }
            }
            self.skip_ws();
            match self.bytes.get(self.at) {
                None => return Ok(Some((Value::Array(items), false))),
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Some((Value::Array(items), true)));
                }
                Some(_) => return Err(Invalid),
            }
        }
    }

    /// A string (the cursor on its opening quote): as far as it goes, and whether it closed.
    fn string(&mut self) -> Result<Option<(String, bool)>, Invalid> {
        self.at += 1;
        let mut out = String::new();
        loop {
            // Copy the run of plain characters up to the next quote or backslash at once.
            let start = self.at;
            while self.bytes.get(self.at).is_some_and(|b| *b != b'"' && *b != b'\\') {
                self.at += 1;
            }
            out.push_str(self.text.get(start..self.at).ok_or(Invalid)?);
            match self.bytes.get(self.at) {
                None => return Ok(Some((out, false))),
                Some(b'"') => {
                    self.at += 1;
                    return Ok(Some((out, true)));
                }
                Some(_) => {
                    // An escape; one cut off by the end of the text is left out.
                    let Some(&kind) = self.bytes.get(self.at + 1) else {
                        return Ok(Some((out, false)));
                    };
                    let simple = match kind {
                        b'"' => Some('"'),
                        b'\\' => Some('\\'),
                        b'/' => Some('/'),
                        b'b' => Some('\u{8}'),
                        b'f' => Some('\u{c}'),
                        b'n' => Some('\n'),
                        b'r' => Some('\r'),
                        b't' => Some('\t'),
                        b'u' => None,
                        _ => return Err(Invalid),
                    };
                    if let Some(c) = simple {
                        out.push(c);
                        self.at += 2;
                        continue;
                    }
                    match self.unicode_escape()? {
                        Some(c) => out.push(c),
                        None => return Ok(Some((out, false))),
                    }
                }
            }
        }
    }

    /// `\uXXXX` (and a surrogate pair's second half) at the cursor; `None` when the text
    /// ends inside it.
    fn unicode_escape(&mut self) -> Result<Option<char>, Invalid> {
        let Some(high) = self.hex4(self.at + 2)? else { return Ok(None) };
        self.at += 6;
        if !(0xD800..0xDC00).contains(&high) {
            return Ok(Some(char::from_u32(high).unwrap_or('\u{FFFD}')));
        }
        if self.bytes.len() < self.at + 2 {
            return Ok(None);
        }
        if self.bytes.get(self.at..self.at + 2) != Some(b"\\u") {
            return Ok(Some('\u{FFFD}'));
        }
        let Some(low) = self.hex4(self.at + 2)? else { return Ok(None) };
        self.at += 6;
        let code = 0x10000 + ((high - 0xD800) << 10) + (low.wrapping_sub(0xDC00) & 0x3FF);
        Ok(Some(char::from_u32(code).unwrap_or('\u{FFFD}')))
    }

    fn hex4(&self, at: usize) -> Result<Option<u32>, Invalid> {
        let Some(digits) = self.text.get(at..(at + 4).min(self.text.len())) else {
            return Err(Invalid);
        };
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Invalid);
        }
        if digits.len() < 4 {
            return Ok(None);
        }
        u32::from_str_radix(digits, 16).map(Some).map_err(|_| Invalid)
    }

    fn literal(&mut self, word: &str, value: Value) -> Result<Option<(Value, bool)>, Invalid> {
        let rest = &self.bytes[self.at..];
        let n = rest.len().min(word.len());
        if rest[..n] != word.as_bytes()[..n] {
            return Err(Invalid);
        }
        if n < word.len() {
            self.at += n;
            return Ok(None);
        }
        self.at += n;
        Ok(Some((value, true)))
    }

    /// A number; one the text ends in may still grow, so it is not known yet.
    fn number(&mut self) -> Result<Option<(Value, bool)>, Invalid> {
        let start = self.at;
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
        {
            self.at += 1;
        }
        if self.at == self.bytes.len() {
            return Ok(None);
        }
        let text = self.text.get(start..self.at).ok_or(Invalid)?;
        let number: Number = serde_json::from_str(text).map_err(|_| Invalid)?;
        Ok(Some((Value::Number(number), true)))
    }
}

#[cfg(test)]
mod tests;
