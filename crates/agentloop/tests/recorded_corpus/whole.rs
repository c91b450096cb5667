//! The whole (non-streamed) response a recorded stream stands for, built from the stream's
//! events at the JSON level, the way each API documents its stream: Anthropic's events
//! applied to `message_start`'s message, OpenAI chat chunks merged into one choice, Gemini
//! chunks' parts put together, and for the Responses API the recording's own whole response
//! (the `response` of its final `response.completed` event). None of this uses agentloop's
//! decoders, so a decoder that streams differently from how it decodes a whole body shows.

use serde_json::{json, Map, Value};

/// The events of a recording, one JSON value a line.
pub fn events(text: &str) -> Vec<Value> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The whole response for a recording in `format`, or `None` (with why) when the API has no
/// whole form of what the stream holds.
pub fn whole(format: &str, events: &[Value]) -> Result<Value, &'static str> {
    match format {
        "anthropic" => anthropic(events),
        "chat" => Ok(chat(events)),
        "gemini" => gemini(events),
        "responses" => responses(events),
        _ => Err("unknown format"),
    }
}

fn anthropic(events: &[Value]) -> Result<Value, &'static str> {
    let mut message: Option<Value> = None;
    let mut inputs: Vec<String> = Vec::new();
    for event in events {
        match event["type"].as_str().unwrap_or("") {
            "message_start" => message = Some(event["message"].clone()),
            "content_block_start" => {
                let message = message.as_mut().ok_or("a block before message_start")?;
                let index = event["index"].as_u64().ok_or("no index")? as usize;
                let content = message["content"].as_array_mut().ok_or("no content")?;
                if index != content.len() {
                    return Err("blocks out of order");
                }
                content.push(event["content_block"].clone());
                inputs.push(String::new());
            }
            "content_block_delta" => {
                let message = message.as_mut().ok_or("a delta before message_start")?;
                let index = event["index"].as_u64().ok_or("no index")? as usize;
                let block = message["content"].get_mut(index).ok_or("a delta to no block")?;
                let delta = &event["delta"];
                match delta["type"].as_str().unwrap_or("") {
                    "text_delta" => append(block, "text", &delta["text"]),
                    "thinking_delta" => append(block, "thinking", &delta["thinking"]),
                    "compaction_delta" => append(block, "content", &delta["content"]),
                    "signature_delta" => block["signature"] = delta["signature"].clone(),
                    "input_json_delta" => {
                        inputs[index].push_str(delta["partial_json"].as_str().unwrap_or(""))
                    }
                    "citations_delta" => {
                        let citations = &mut block["citations"];
                        if !citations.is_array() {
                            *citations = json!([]);
                        }
                        if let Some(list) = citations.as_array_mut() {
                            list.push(delta["citation"].clone());
                        }
                    }
                    _ => return Err("a delta of an unknown type"),
                }
            }
            "content_block_stop" => {
                let message = message.as_mut().ok_or("a stop before message_start")?;
                let index = event["index"].as_u64().ok_or("no index")? as usize;
                if !inputs[index].is_empty() {
                    message["content"][index]["input"] =
                        serde_json::from_str(&inputs[index]).map_err(|_| "tool input not JSON")?;
                }
            }
            "message_delta" => {
                let message = message.as_mut().ok_or("a delta before message_start")?;
                for (key, value) in event["delta"].as_object().into_iter().flatten() {
                    message[key] = value.clone();
                }
                if let Some(usage) = event["usage"].as_object() {
                    for (key, value) in usage.iter().filter(|(_, v)| !v.is_null()) {
                        message["usage"][key] = value.clone();
                    }
                }
                if !event["context_management"].is_null() {
                    message["context_management"] = event["context_management"].clone();
                }
            }
            // One stream is one message: some recordings hold the next request's after it.
            "message_stop" => break,
            "ping" => {}
            "error" => return Err("the stream is the API's error"),
            _ => return Err("an event of an unknown type"),
        }
    }
    message.ok_or("no message_start")
}

fn append(block: &mut Value, key: &str, more: &Value) {
    let text = format!("{}{}", block[key].as_str().unwrap_or(""), more.as_str().unwrap_or(""));
    block[key] = Value::String(text);
}

fn chat(events: &[Value]) -> Value {
    let mut top = Map::new();
    let mut message = json!({"role": "assistant"});
    let mut calls: Vec<Value> = Vec::new();
    let mut finish = Value::Null;
    for event in events {
        for (key, value) in event.as_object().into_iter().flatten() {
            if key != "choices" && !value.is_null() {
                top.insert(key.clone(), value.clone());
            }
        }
        let Some(choice) = event["choices"].get(0) else {
            continue;
        };
        if !choice["finish_reason"].is_null() {
            finish = choice["finish_reason"].clone();
        }
        let delta = &choice["delta"];
        for key in ["reasoning_content", "reasoning", "refusal"] {
            if delta[key].is_string() {
                append(&mut message, key, &delta[key]);
            }
        }
        match &delta["content"] {
            Value::String(text) if message["content"].is_array() && !text.is_empty() => {
                push_part(&mut message["content"], &json!({"type": "text", "text": text}));
            }
            Value::String(_) if message["content"].is_array() => {}
            Value::String(_) => append(&mut message, "content", &delta["content"]),
            Value::Array(parts) => {
                for part in parts {
                    push_part(&mut message["content"], part);
                }
            }
            _ => {}
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = match call["index"].as_u64() {
                Some(index) => index as usize,
                None => calls.len(),
            };
            if index == calls.len() {
                calls.push(json!({"type": "function", "function": {"name": "", "arguments": ""}}));
            }
            let entry = &mut calls[index];
            if call["id"].as_str().is_some_and(|id| !id.is_empty()) {
                entry["id"] = call["id"].clone();
            }
            if call["function"]["name"].as_str().is_some_and(|n| !n.is_empty()) {
                entry["function"]["name"] = call["function"]["name"].clone();
            }
            append(&mut entry["function"], "arguments", &call["function"]["arguments"]);
        }
    }
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    top.insert("object".into(), json!("chat.completion"));
    top.insert(
        "choices".into(),
        json!([{"index": 0, "message": message, "finish_reason": finish}]),
    );
    Value::Object(top)
}

/// Appends a content part, merged into the last one when both are text or both thinking.
fn push_part(content: &mut Value, part: &Value) {
    if !content.is_array() {
        let text = content.as_str().unwrap_or("").to_owned();
        *content =
            if text.is_empty() { json!([]) } else { json!([{"type": "text", "text": text}]) };
    }
    let Some(parts) = content.as_array_mut() else {
        return;
    };
    let kind = part["type"].as_str().unwrap_or("");
    if let Some(last) = parts.last_mut().filter(|last| last["type"] == kind) {
        match kind {
            "text" => return append(last, "text", &part["text"]),
            "thinking" => {
                if let (Some(into), Some(more)) =
                    (last["thinking"].as_array_mut(), part["thinking"].as_array())
                {
                    into.extend(more.iter().cloned());
                    return;
                }
            }
            _ => {}
        }
    }
    parts.push(part.clone());
}

fn gemini(events: &[Value]) -> Result<Value, &'static str> {
    let mut top = Map::new();
    let mut candidate = Map::new();
    let mut parts: Vec<Value> = Vec::new();
    for event in events {
        if event.to_string().contains("\"partialArgs\"") {
            return Err("streamed function-call arguments have no whole form");
        }
        for (key, value) in event.as_object().into_iter().flatten() {
            if key != "candidates" {
                top.insert(key.clone(), value.clone());
            }
        }
        let Some(one) = event["candidates"].get(0) else {
            continue;
        };
        for (key, value) in one.as_object().into_iter().flatten() {
            if key != "content" {
                candidate.insert(key.clone(), value.clone());
            }
        }
        parts.extend(one["content"]["parts"].as_array().into_iter().flatten().cloned());
    }
    candidate.insert("content".into(), json!({"role": "model", "parts": parts}));
    top.insert("candidates".into(), json!([candidate]));
    Ok(Value::Object(top))
}

/// The first response's: two recordings hold two requests' streams one after the other.
fn responses(events: &[Value]) -> Result<Value, &'static str> {
    events
        .iter()
        .find(|event| {
            matches!(event["type"].as_str(), Some("response.completed" | "response.incomplete"))
        })
        .map(|event| event["response"].clone())
        .ok_or("the stream ends without a whole response")
}
