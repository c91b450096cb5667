//! [`ToolCallParser`]: finds tool calls and thinking blocks in generated text, one chunk at a
//! time, and turns them into [`StreamChunk`]s.

use crate::provider::StreamChunk;
use serde_json::Value;

/// The name given to a call whose text could not be read (no JSON object with a tool name):
/// the executor answers it with an "unknown tool" error the model sees.
pub const MALFORMED_CALL_NAME: &str = "malformed_tool_call";

/// The longest call body the parser holds by default (8 MiB): a call block that grows past
/// it without its closing tag is dropped and the parser reports the overflow
/// ([`ToolCallParser::overflowed`]).
pub const DEFAULT_MAX_CALL_BYTES: usize = 8 << 20;

/// What an opening tag starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    /// `<tool_call>…</tool_call>` (Hermes / Qwen).
    HermesCall,
    /// `<tool>…</tool>` (seed 003).
    ServerCall,
    /// `<think>…</think>`.
    Think,
    /// `<thinking>…</thinking>`.
    Thinking,
}

/// Every opening tag with the block it starts. `<tool_call>` must come before `<tool>`, and
/// `<thinking>` before `<think>`: the longer tag wins when both match.
const OPENERS: [(&str, Block); 4] = [
    ("<tool_call>", Block::HermesCall),
    ("<tool>", Block::ServerCall),
    ("<thinking>", Block::Thinking),
    ("<think>", Block::Think),
];

impl Block {
    fn closer(self) -> &'static str {
        match self {
            Self::HermesCall => "</tool_call>",
            Self::ServerCall => "</tool>",
            Self::Think => "</think>",
            Self::Thinking => "</thinking>",
        }
    }

    fn is_call(self) -> bool {
        matches!(self, Self::HermesCall | Self::ServerCall)
    }
}

/// An incremental parser of prompted tool calls. Feed it the model's text with
/// [`push`](Self::push) in whatever pieces it arrives, then call [`finish`](Self::finish).
///
/// - Text outside tags streams out as `TextDelta`s as soon as it cannot be the start of a tag
///   (a tag split across chunks is held back until it is complete). Whitespace between blocks
///   is dropped.
/// - `<think>` / `<thinking>` blocks stream out as `ReasoningDelta`s and end with `ReasoningEnd`.
/// - `<tool_call>{"name", "arguments"}</tool_call>` and
///   `<tool>{"server_name", "tool_name", "arguments"}</tool>` become `ToolCallStart`,
///   `ToolCallDelta` (the argument JSON text) and `ToolCallEnd`, emitted when the closing tag
///   arrives (or at the end, if it never does and the body is a whole call).
/// - A call whose body is not JSON keeps its raw text as arguments (with the tool name when it
///   can be found, else [`MALFORMED_CALL_NAME`]), so the loop answers it with an error result
///   the model sees. The parser never fails and never panics.
#[derive(Debug)]
pub struct ToolCallParser {
    /// Text not yet emitted: a possible tag start, or the body of the open block.
    buffer: String,
    /// The block being read (`None`: plain text).
    block: Option<Block>,
    /// Whitespace held back until it is known whether text follows it.
    whitespace: String,
    /// At the start or next to a block: leading whitespace is dropped.
    at_edge: bool,
    /// Complete calls emitted so far.
    calls: usize,
    /// Call ids are `<prefix><index>`; `None`: random (`call_<uuid>`).
    id_prefix: Option<String>,
    /// In a call block: the buffer before this offset holds no start of the closing tag (the
    /// search resumes there, so a long call read in pieces is searched once).
    closer_from: usize,
    /// The longest call body held (see [`DEFAULT_MAX_CALL_BYTES`]).
    max_call_bytes: usize,
    /// A call block grew past `max_call_bytes`: the rest of the text is ignored.
    overflowed: bool,
}

impl Default for ToolCallParser {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolCallParser {
    /// A parser that gives calls random ids (`call_<uuid>`).
    pub fn new() -> Self {
        Self {
            buffer: String::new(),
            block: None,
            whitespace: String::new(),
            at_edge: true,
            calls: 0,
            id_prefix: None,
            closer_from: 0,
            max_call_bytes: DEFAULT_MAX_CALL_BYTES,
            overflowed: false,
        }
    }

    /// This parser with a limit on a call's body, in bytes.
    pub fn with_max_call_bytes(mut self, max: usize) -> Self {
        self.max_call_bytes = max;
        self
    }

    /// The limit on a call's body, in bytes.
    pub fn max_call_bytes(&self) -> usize {
        self.max_call_bytes
    }

    /// Whether a call block grew past the limit without its closing tag: the call and all
    /// text after it were dropped (a caller ends the response with an error).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// A parser whose call ids are `<prefix><index of the call>` (deterministic ids).
    pub fn with_id_prefix(prefix: impl Into<String>) -> Self {
        Self { id_prefix: Some(prefix.into()), ..Self::new() }
    }

    /// How many tool calls were emitted so far.
    pub fn calls(&self) -> usize {
        self.calls
    }

    /// Whether the parser is inside a tool-call block (its closing tag has not come yet).
    pub fn in_call(&self) -> bool {
        self.block.is_some_and(Block::is_call)
    }

    /// Reads the next piece of generated text; appends what it completes to `out`.
    pub fn push(&mut self, text: &str, out: &mut Vec<StreamChunk>) {
        if self.overflowed {
            return;
        }
        self.buffer.push_str(text);
        loop {
            let progressed = match self.block {
                None => self.scan_text(out),
                Some(block) => self.scan_block(block, out),
            };
            if !progressed {
                break;
            }
        }
    }

    /// Ends the text: emits what is held back. An unclosed thinking block ends; an unclosed
    /// call is emitted when `complete_calls` is true or its body is a whole JSON call (models
    /// often stop without the closing tag); otherwise its text is dropped (a cut-off call).
    pub fn finish(&mut self, complete_calls: bool, out: &mut Vec<StreamChunk>) {
        if self.overflowed {
            return;
        }
        let rest = std::mem::take(&mut self.buffer);
        match self.block.take() {
            None => self.text(&rest, out),
            Some(Block::Think | Block::Thinking) => {
                if !rest.is_empty() {
                    out.push(StreamChunk::ReasoningDelta { text: rest });
                }
                out.push(StreamChunk::ReasoningEnd { opaque: None });
            }
            Some(block) => {
                let whole = serde_json::from_str::<Value>(rest.trim()).is_ok();
                if complete_calls || whole {
                    self.call(block, &rest, out);
                }
            }
        }
        self.whitespace.clear();
    }

    /// Plain text: emits everything up to a possible tag. Returns whether a block opened.
    fn scan_text(&mut self, out: &mut Vec<StreamChunk>) -> bool {
        let mut from = 0;
        while let Some(offset) = self.buffer[from..].find('<') {
            let at = from + offset;
            let rest = &self.buffer[at..];
            if let Some((tag, block)) = OPENERS.iter().find(|(tag, _)| rest.starts_with(tag)) {
                let before = self.buffer[..at].to_owned();
                self.text(&before, out);
                self.whitespace.clear();
                self.at_edge = true;
                self.buffer.drain(..at + tag.len());
                self.block = Some(*block);
                return true;
            }
            if OPENERS.iter().any(|(tag, _)| tag.starts_with(rest)) {
                // Maybe a tag cut by the chunk boundary: wait for more text.
                let before = self.buffer[..at].to_owned();
                self.text(&before, out);
                self.buffer.drain(..at);
                return false;
            }
            from = at + 1;
        }
        let all = std::mem::take(&mut self.buffer);
        self.text(&all, out);
        false
    }

    /// Inside a block: looks for its closing tag. Returns whether the block closed.
    fn scan_block(&mut self, block: Block, out: &mut Vec<StreamChunk>) -> bool {
        let closer = block.closer();
        let from = self.closer_from.min(self.buffer.len());
        if let Some(at) = self.buffer[from..].find(closer).map(|offset| from + offset) {
            self.closer_from = 0;
            let body: String = self.buffer.drain(..at + closer.len()).collect();
            let body = &body[..at];
            if block.is_call() {
                self.call(block, body, out);
            } else {
                if !body.is_empty() {
                    out.push(StreamChunk::ReasoningDelta { text: body.to_owned() });
                }
                out.push(StreamChunk::ReasoningEnd { opaque: None });
            }
            self.block = None;
            self.at_edge = true;
            return true;
        }
        if block.is_call() {
            if self.buffer.len() > self.max_call_bytes {
                self.overflowed = true;
                self.buffer = String::new();
                self.block = None;
                return false;
            }
            // The closing tag may start in the last `closer.len() - 1` bytes.
            let mut from = self.buffer.len().saturating_sub(closer.len() - 1);
            while !self.buffer.is_char_boundary(from) {
                from -= 1;
            }
            self.closer_from = from;
        } else {
            // Stream reasoning, holding back what may be the start of the closing tag.
            let keep = partial_suffix(&self.buffer, closer);
            let cut = self.buffer.len() - keep;
            if cut > 0 {
                let text: String = self.buffer.drain(..cut).collect();
                out.push(StreamChunk::ReasoningDelta { text });
            }
        }
        false
    }

    /// Emits text, holding back trailing whitespace (emitted only if more text follows) and
    /// dropping whitespace next to a block.
    fn text(&mut self, text: &str, out: &mut Vec<StreamChunk>) {
        let text = if self.at_edge { text.trim_start() } else { text };
        if text.is_empty() {
            return;
        }
        let trimmed = text.trim_end();
        if trimmed.is_empty() {
            self.whitespace.push_str(text);
            return;
        }
        let mut piece = std::mem::take(&mut self.whitespace);
        piece.push_str(trimmed);
        self.whitespace.push_str(&text[trimmed.len()..]);
        self.at_edge = false;
        out.push(StreamChunk::TextDelta { text: piece });
    }

    /// Emits one call from the body of a call block.
    fn call(&mut self, block: Block, body: &str, out: &mut Vec<StreamChunk>) {
        let (name, arguments) = read_call(block, body);
        let id = match &self.id_prefix {
            Some(prefix) => format!("{prefix}{}", self.calls),
            None => format!("call_{}", uuid::Uuid::new_v4().simple()),
        };
        self.calls += 1;
        out.push(StreamChunk::ToolCallStart { id: id.clone(), name });
        if !arguments.is_empty() {
            out.push(StreamChunk::ToolCallDelta { id: id.clone(), delta: arguments });
        }
        out.push(StreamChunk::ToolCallEnd { id });
    }
}

/// The length of the longest suffix of `text` that is a proper prefix of `tag`.
fn partial_suffix(text: &str, tag: &str) -> usize {
    (1..tag.len().min(text.len() + 1))
        .rev()
        .find(|&n| text.is_char_boundary(text.len() - n) && text.ends_with(&tag[..n]))
        .unwrap_or(0)
}

/// The tool name and argument text of a call body.
fn read_call(block: Block, body: &str) -> (String, String) {
    let name_keys: &[&str] = match block {
        Block::ServerCall => &["tool_name", "name"],
        _ => &["name", "tool_name"],
    };
    let trimmed = body.trim();
    match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Object(object)) => {
            let name = name_keys.iter().find_map(|key| object.get(*key).and_then(Value::as_str));
            let arguments = ["arguments", "parameters", "input"]
                .iter()
                .find_map(|key| object.get(*key))
                .map(|value| match value {
                    // Some models send the arguments as a JSON string.
                    Value::String(text) => text.clone(),
                    other => crate::canonical::to_string(other),
                })
                .unwrap_or_else(|| "{}".to_owned());
            match name {
                Some(name) => (name.to_owned(), arguments),
                None => (MALFORMED_CALL_NAME.to_owned(), trimmed.to_owned()),
            }
        }
        _ => {
            let name = name_keys.iter().find_map(|key| find_string_field(trimmed, key));
            match name {
                // The executor reports the arguments as bad JSON to the model.
                Some(name) => (name, trimmed.to_owned()),
                None => (MALFORMED_CALL_NAME.to_owned(), trimmed.to_owned()),
            }
        }
    }
}

/// The value of `"key": "value"` in text that is not valid JSON, if it is there.
fn find_string_field(text: &str, key: &str) -> Option<String> {
    let quoted = format!("\"{key}\"");
    let after = &text[text.find(&quoted)? + quoted.len()..];
    let after = after.trim_start().strip_prefix(':')?.trim_start().strip_prefix('"')?;
    let end = after.find('"')?;
    let name = &after[..end];
    (!name.is_empty() && name.len() <= 128).then(|| name.to_owned())
}
