//! Content capture (opt-in): messages in the GenAI conventions' JSON shape
//! (`[{"role": …, "parts": [{"type": "text", "content": …}, …]}]`), each attribute cut to a
//! size. Images and files are named, never inlined; reasoning providers' opaque data (a
//! signature, encrypted content) is never recorded.

use agentloop::message::{MediaSource, Message, Part, Role};
use serde_json::{json, Value};

/// `messages` as the conventions' JSON text, at most `max` bytes.
pub(crate) fn messages(messages: &[Message], max: usize) -> String {
    let value = Value::Array(messages.iter().map(message).collect());
    cut(value.to_string(), max)
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

fn message(message: &Message) -> Value {
    let role = match message.role {
        Role::System | Role::Developer => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let parts: Vec<Value> = message.content.iter().map(part).collect();
    json!({ "role": role, "parts": parts })
}

fn part(part: &Part) -> Value {
    match part {
        Part::Text { text } => json!({ "type": "text", "content": text }),
        Part::Image { source } => json!({ "type": "image", "source": source_name(source) }),
        Part::File { source, filename } => {
            json!({ "type": "file", "source": source_name(source), "filename": filename })
        }
        Part::ToolCall(call) => {
            let arguments = serde_json::from_str::<Value>(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone()));
            json!({ "type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments })
        }
        Part::ToolResult(result) => json!({
            "type": "tool_call_response",
            "id": result.call_id,
            "response": result.content.to_text(),
        }),
        Part::Reasoning(reasoning) => json!({ "type": "reasoning", "content": reasoning.text }),
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
