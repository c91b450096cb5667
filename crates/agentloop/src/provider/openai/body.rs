//! The chat request body written straight to JSON from the canonical request, without
//! building a `serde_json::Value` tree first: the tree costs a map, its keys and a copy of
//! every string per message, built and dropped on every request, which dominates the cost
//! of a request once the conversation is long. The JSON is the same as serializing
//! [`OpenAiChat::encode`](super::OpenAiChat)'s body canonically (same keys, same values, keys
//! in the same sorted order, see [`crate::canonical`]); the tests hold the two to that for
//! every part kind and dialect.

use super::{f32_json, user_message, OpenAiChat};
use crate::canonical::{self, Sorted};
use crate::message::{Message, Part, Role, ToolResultContent};
use crate::provider::{ModelRequest, ProviderError, ToolChoice};
use crate::tool::ToolSpec;
use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{json, Value};
use std::borrow::Cow;
use std::cell::Cell;

/// One message of the `messages` array.
enum Entry<'a> {
    /// `{"content": text, "role": role}`: instructions, system, developer and plain user text.
    Text { role: &'static str, content: Cow<'a, str> },
    /// A user message with images or files, in the generic encoding.
    Value(Value),
    /// An assistant message: its text, tool calls and (a current-turn tool call of a dialect
    /// that wants it) its reasoning.
    Assistant(&'a Message, Option<String>),
    /// One tool result (a JSON result is sent as its JSON text).
    Tool { call_id: &'a str, content: &'a ToolResultContent },
}

/// A top-level field's value.
enum Field<'a> {
    Messages(Messages<'a>),
    Str(&'a str),
    Tools(&'a [ToolSpec]),
    Value(Value),
    U32(u32),
    Bool(bool),
}

/// The request body for `request`, serialized.
pub(super) fn encode_body(
    format: &OpenAiChat,
    request: &ModelRequest,
    stream: bool,
) -> Result<Vec<u8>, ProviderError> {
    // A user message that cannot be encoded stops the serialization; its error is kept here.
    let failed = Cell::new(None);
    let messages = Messages { format, request, failed: &failed };
    let mut fields: Vec<(&str, Field<'_>)> = Vec::with_capacity(8);
    fields.push(("model", Field::Str(&format.model)));
    fields.push(("messages", Field::Messages(messages)));
    if !request.tools.is_empty() {
        fields.push(("tools", Field::Tools(&request.tools)));
        let choice = match &request.tool_choice {
            ToolChoice::Auto => None,
            ToolChoice::None => Some(json!("none")),
            ToolChoice::Required => Some(json!(format.dialect.tool_choice_required)),
            ToolChoice::Named(name) => {
                Some(json!({"type": "function", "function": {"name": name}}))
            }
        };
        if let Some(choice) = choice {
            fields.push(("tool_choice", Field::Value(choice)));
        }
    }
    if let Some(temperature) = request.temperature {
        fields.push(("temperature", Field::Value(f32_json(temperature))));
    }
    if let Some(max_tokens) = request.max_tokens {
        fields.push((format.dialect.max_tokens_field, Field::U32(max_tokens)));
    }
    if let Some(output) = &request.output {
        fields.push(("response_format", Field::Value(format.response_format(output))));
    }
    if let Some(key) = super::cache_key(request) {
        fields.push(("prompt_cache_key", Field::Str(key)));
    }
    fields.push(("stream", Field::Bool(stream)));
    if stream && format.dialect.stream_usage {
        fields.push(("stream_options", Field::Value(json!({"include_usage": true}))));
    }
    // The order a `Value` object serializes in.
    fields.sort_by(|a, b| a.0.cmp(b.0));
    // Sized up front: growing the buffer as it fills copies the body again and again.
    let mut body = Vec::with_capacity(size_hint(request));
    match serde_json::to_writer(&mut body, &Body(&fields)) {
        Ok(()) => Ok(body),
        Err(e) => Err(failed.take().unwrap_or_else(|| ProviderError::Other {
            message: format!("could not serialize the request: {e}"),
        })),
    }
}

/// About how many bytes the body of `request` takes (a little more for plain text, less
/// when strings need escaping or tool schemas are large).
fn size_hint(request: &ModelRequest) -> usize {
    let parts = |message: &Message| -> usize {
        message
            .content
            .iter()
            .map(|part| match part {
                Part::Text { text } => text.len() + 16,
                Part::ToolCall(call) => call.id.len() + call.name.len() + call.arguments.len() + 80,
                Part::ToolResult(result) => match &result.content {
                    ToolResultContent::Text(text) => result.call_id.len() + text.len() + 64,
                    ToolResultContent::Json(_) | ToolResultContent::Stored(_) => {
                        result.call_id.len() + 96
                    }
                },
                _ => 64,
            })
            .sum()
    };
    let messages: usize = request.messages.iter().map(|m| 32 + parts(m)).sum();
    let instructions = request.instructions.as_ref().map_or(0, |i| i.len() + 48);
    256 + instructions + messages + request.tools.len() * 512
}

/// The `messages` array as [`OpenAiChat::messages`](super::OpenAiChat) makes it, written
/// entry by entry as the request's messages are read (no list of entries is built).
struct Messages<'a> {
    format: &'a OpenAiChat,
    request: &'a ModelRequest,
    /// Where the error of a user message that cannot be encoded goes.
    failed: &'a Cell<Option<ProviderError>>,
}

impl Serialize for Messages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let instructions_role =
            if self.format.dialect.developer_role { "developer" } else { "system" };
        let mut seq = serializer.serialize_seq(None)?;
        let instructions = self.request.instructions.as_deref().filter(|i| !i.is_empty());
        if let Some(instructions) = instructions {
            let content = Cow::Borrowed(instructions);
            seq.serialize_element(&Entry::Text { role: instructions_role, content })?;
        }
        let turn = super::current_turn(self.request, &self.format.dialect);
        for (index, message) in self.request.messages.iter().enumerate() {
            let entry = match message.role {
                Role::System => Some(Entry::Text { role: "system", content: text(message) }),
                Role::Developer => {
                    Some(Entry::Text { role: instructions_role, content: text(message) })
                }
                Role::User => match single_text(message) {
                    Some(content) => {
                        Some(Entry::Text { role: "user", content: Cow::Borrowed(content) })
                    }
                    None => match user_message(message) {
                        Ok(value) => Some(Entry::Value(value)),
                        Err(error) => {
                            self.failed.set(Some(error));
                            return Err(S::Error::custom("a user message cannot be encoded"));
                        }
                    },
                },
                Role::Assistant => Some(Entry::Assistant(
                    message,
                    super::reasoning_content(message, index >= turn),
                )),
                Role::Tool => None,
            };
            if let Some(entry) = entry {
                seq.serialize_element(&entry)?;
            }
            for result in message.tool_results_iter() {
                let content = &result.content;
                seq.serialize_element(&Entry::Tool { call_id: &result.call_id, content })?;
            }
        }
        seq.end()
    }
}

/// [`Message::text`], borrowed when the message has one text part.
fn text(message: &Message) -> Cow<'_, str> {
    let mut texts = message.content.iter().filter_map(|p| match p {
        Part::Text { text } => Some(text.as_str()),
        _ => None,
    });
    match (texts.next(), texts.next()) {
        (None, _) => Cow::Borrowed(""),
        (Some(only), None) => Cow::Borrowed(only),
        _ => Cow::Owned(message.text()),
    }
}

/// The text of a user message that is exactly one text part (besides tool parts), which the
/// chat API takes as a plain string.
fn single_text(message: &Message) -> Option<&str> {
    let mut content = message
        .content
        .iter()
        .filter(|p| !matches!(p, Part::ToolCall(_) | Part::ToolResult(_) | Part::Reasoning(_)));
    match (content.next(), content.next()) {
        (Some(Part::Text { text }), None) => Some(text),
        _ => None,
    }
}

struct Body<'a>(&'a [(&'a str, Field<'a>)]);

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in self.0 {
            match value {
                Field::Messages(messages) => map.serialize_entry(key, messages)?,
                Field::Str(text) => map.serialize_entry(key, text)?,
                Field::Tools(tools) => map.serialize_entry(key, &Tools(tools))?,
                Field::Value(value) => map.serialize_entry(key, &Sorted(value))?,
                Field::U32(n) => map.serialize_entry(key, n)?,
                Field::Bool(b) => map.serialize_entry(key, b)?,
            }
        }
        map.end()
    }
}

impl Serialize for Entry<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Entry::Text { role, content } => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("content", content)?;
                map.serialize_entry("role", role)?;
                map.end()
            }
            Entry::Value(value) => Sorted(value).serialize(serializer),
            Entry::Assistant(message, reasoning) => {
                let text = text(message);
                let has_calls = message.has_tool_calls();
                let fields = 2 + usize::from(has_calls) + usize::from(reasoning.is_some());
                let mut map = serializer.serialize_map(Some(fields))?;
                if text.is_empty() && has_calls {
                    map.serialize_entry("content", &())?;
                } else {
                    map.serialize_entry("content", &text)?;
                }
                if let Some(reasoning) = reasoning {
                    map.serialize_entry("reasoning_content", reasoning)?;
                }
                map.serialize_entry("role", "assistant")?;
                if has_calls {
                    map.serialize_entry("tool_calls", &Calls(message))?;
                }
                map.end()
            }
            Entry::Tool { call_id, content } => {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("content", &ToolContent(content))?;
                map.serialize_entry("role", "tool")?;
                map.serialize_entry("tool_call_id", call_id)?;
                map.end()
            }
        }
    }
}

/// A tool result's content as a JSON string: the text, or the JSON text of a value
/// ([`ToolResultContent::to_text`]), written without an intermediate `String`.
struct ToolContent<'a>(&'a ToolResultContent);

impl Serialize for ToolContent<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            ToolResultContent::Text(text) => serializer.serialize_str(text),
            ToolResultContent::Json(value) => {
                serializer.serialize_str(&canonical::to_string(value))
            }
            ToolResultContent::Stored(stored) => serializer.serialize_str(&stored.note()),
        }
    }
}

/// An assistant message's `tool_calls`.
struct Calls<'a>(&'a Message);

impl Serialize for Calls<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        for call in self.0.tool_calls() {
            let arguments = if call.arguments.trim().is_empty() { "{}" } else { &call.arguments };
            seq.serialize_element(&Call { id: &call.id, name: &call.name, arguments })?;
        }
        seq.end()
    }
}

/// `{"function": {"arguments", "name"}, "id", "type": "function"}`.
struct Call<'a> {
    id: &'a str,
    name: &'a str,
    arguments: &'a str,
}

impl Serialize for Call<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Function<'a>(&'a Call<'a>);
        impl Serialize for Function<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("arguments", self.0.arguments)?;
                map.serialize_entry("name", self.0.name)?;
                map.end()
            }
        }
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("function", &Function(self))?;
        map.serialize_entry("id", self.id)?;
        map.serialize_entry("type", "function")?;
        map.end()
    }
}

/// `tools`: `{"function": {"description", "name", "parameters"}, "type": "function"}` each.
struct Tools<'a>(&'a [ToolSpec]);

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Function<'a>(&'a ToolSpec);
        impl Serialize for Function<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("description", &self.0.description)?;
                map.serialize_entry("name", &self.0.name)?;
                map.serialize_entry("parameters", &Sorted(&self.0.parameters))?;
                map.end()
            }
        }
        struct Tool<'a>(&'a ToolSpec);
        impl Serialize for Tool<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("function", &Function(self.0))?;
                map.serialize_entry("type", "function")?;
                map.end()
            }
        }
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for tool in self.0 {
            seq.serialize_element(&Tool(tool))?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests;
