//! Content capture (opt-in): messages in the GenAI conventions' JSON shape
//! (`[{"role": …, "parts": [{"type": "text", "content": …}, …]}]`), each attribute cut to a
//! size. Images and files are named, never inlined; reasoning providers' opaque data (a
//! signature, encrypted content) is never recorded.

use agentloop::message::{MediaSource, Message, Part, Role};
use serde::Serialize;
use serde_json::Value;

/// `messages` as the conventions' JSON text, at most `max` bytes.
pub(crate) fn messages(messages: &[Message], max: usize) -> String {
    let out: Vec<MessageOut<'_>> = messages.iter().map(message).collect();
    cut(serde_json::to_string(&out).unwrap_or_default(), max)
}

/// `text`, at most `max` bytes: cut at a character boundary and marked `…[truncated N bytes]`.
pub(crate) fn cut(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    let dropped = text.len() - end;
    text.truncate(end);
    text.push_str(&format!("…[truncated {dropped} bytes]"));
    text
}

/// A message in the conventions' shape; the fields in the conventions' order whatever
/// serde_json's features (its maps sort their keys unless `preserve_order` is on).
#[derive(Serialize)]
struct MessageOut<'a> {
    role: &'static str,
    parts: Vec<PartOut<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum PartOut<'a> {
    Text {
        content: &'a str,
    },
    Image {
        source: Value,
    },
    File {
        source: Value,
        filename: Option<&'a str>,
    },
    ToolCall {
        id: &'a str,
        name: &'a str,
        arguments: Value,
    },
    ToolCallResponse {
        id: &'a str,
        response: String,
    },
    Reasoning {
        content: &'a str,
    },
    /// A provider's content without a type of agentloop's (the conventions' generic part,
    /// its type the provider's name for it).
    #[serde(untagged)]
    Generic {
        #[serde(rename = "type")]
        kind: &'a str,
        provider: &'a str,
    },
}

fn message(message: &Message) -> MessageOut<'_> {
    let role = match message.role {
        Role::System | Role::Developer => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    MessageOut { role, parts: message.content.iter().map(part).collect() }
}

fn part(part: &Part) -> PartOut<'_> {
    match part {
        Part::Text { text } => PartOut::Text { content: text },
        Part::Image { source } => PartOut::Image { source: source_name(source) },
        Part::File { source, filename } => {
            PartOut::File { source: source_name(source), filename: filename.as_deref() }
        }
        Part::ToolCall(call) => PartOut::ToolCall {
            id: &call.id,
            name: &call.name,
            arguments: serde_json::from_str::<Value>(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone())),
        },
        Part::ToolResult(result) => {
            PartOut::ToolCallResponse { id: &result.call_id, response: result.content.to_text() }
        }
        Part::Reasoning(reasoning) => PartOut::Reasoning { content: &reasoning.text },
        Part::Opaque(opaque) => PartOut::Generic { kind: &opaque.kind, provider: &opaque.provider },
        Part::Citation(citation) => {
            PartOut::Generic { kind: "citation", provider: &citation.provider }
        }
    }
}

/// An image's or file's origin without its bytes: the URL, or the kind of inline data.
fn source_name(source: &MediaSource) -> Value {
    match serde_json::to_value(source) {
        Ok(Value::Object(map)) => match map.get("url") {
            Some(url) => url.clone(),
            None => map.get("kind").cloned().unwrap_or(Value::Null),
        },
        _ => Value::Null,
    }
}
