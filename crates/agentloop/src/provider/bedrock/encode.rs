//! Canonical request → Converse body.

use super::{Bedrock, FAMILY};
use crate::message::{MediaSource, Message, Part, Reasoning, Role, ToolCall, ToolResult};
use crate::provider::cache::{distinct_points, Breakpoints, CachePoint};
use crate::provider::{ModelRequest, ProviderError, ToolChoice};
use crate::tool::parse_arguments;
use serde_json::{json, Map, Value};

/// The Converse body of `request` for `format` (the same for `converse` and
/// `converse-stream`).
pub fn encode_body(format: &Bedrock, request: &ModelRequest) -> Result<Value, ProviderError> {
    let mut body = Map::new();
    let (mut messages, ends) = messages(&request.messages);
    let mut system = system_blocks(request);
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            let mut spec = json!({"name": tool.name, "inputSchema": {"json": tool.parameters}});
            // The API refuses an empty description.
            if let (false, Value::Object(map)) = (tool.description.is_empty(), &mut spec) {
                map.insert("description".into(), json!(tool.description));
            }
            json!({ "toolSpec": spec })
        })
        .collect();
    let policy = request.cache.as_ref().unwrap_or(&format.cache);
    let marks =
        marks(&policy.breakpoints, &ends, &messages, !system.is_empty(), !tools.is_empty())?;
    let point = || json!({"cachePoint": {"type": "default"}});
    for mark in marks.iter().rev() {
        match *mark {
            Mark::System => system.push(point()),
            Mark::Tools => tools.push(point()),
            Mark::After(turn, block) => {
                if let Some(Value::Array(content)) =
                    messages.get_mut(turn).map(|t| &mut t["content"])
                {
                    content.insert(block + 1, point());
                }
            }
        }
    }
    body.insert("messages".into(), Value::Array(messages));
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    if !request.tools.is_empty() {
        let mut config = Map::new();
        config.insert("tools".into(), Value::Array(tools));
        let choice = match &request.tool_choice {
            ToolChoice::Auto => Some(json!({"auto": {}})),
            ToolChoice::Required => Some(json!({"any": {}})),
            ToolChoice::Named(name) => Some(json!({"tool": {"name": name}})),
            ToolChoice::None => None,
        };
        if let Some(choice) = choice {
            config.insert("toolChoice".into(), choice);
        }
        body.insert("toolConfig".into(), Value::Object(config));
    }
    let mut inference = Map::new();
    if let Some(max_tokens) = request.max_tokens {
        inference.insert("maxTokens".into(), json!(max_tokens));
    }
    if let Some(temperature) = request.temperature {
        let value = temperature.to_string().parse::<f64>().map_or(Value::Null, |v| json!(v));
        inference.insert("temperature".into(), value);
    }
    if !inference.is_empty() {
        body.insert("inferenceConfig".into(), Value::Object(inference));
    }
    if let Some(fields) = &format.additional_fields {
        body.insert("additionalModelRequestFields".into(), fields.clone());
    }
    Ok(Value::Object(body))
}

/// Where one `cachePoint` goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    System,
    Tools,
    /// After this block of this message.
    After(usize, usize),
}

fn marks(
    breakpoints: &Breakpoints,
    ends: &[Option<(usize, usize)>],
    messages: &[Value],
    system: bool,
    tools: bool,
) -> Result<Vec<Mark>, ProviderError> {
    let last_of = |turn: usize| -> Option<Mark> {
        let blocks = messages.get(turn)?["content"].as_array()?;
        Some(Mark::After(turn, blocks.len().checked_sub(1)?))
    };
    let mut marks = Vec::new();
    match breakpoints {
        Breakpoints::Off => {}
        Breakpoints::Auto => {
            if system {
                marks.push(Mark::System);
            } else if tools {
                marks.push(Mark::Tools);
            }
            let mut users = messages.iter().enumerate().rev().filter(|(_, m)| m["role"] == "user");
            let last = users.next().map(|(at, _)| at);
            let previous = users.next().map(|(at, _)| at);
            marks.extend([previous, last].into_iter().flatten().filter_map(last_of));
        }
        Breakpoints::Explicit(points) => {
            for point in distinct_points(points, "Bedrock")? {
                let mark = match point {
                    CachePoint::Tools => tools.then_some(Mark::Tools),
                    CachePoint::Instructions => system.then_some(Mark::System),
                    CachePoint::Message(index) => {
                        ends.get(index).copied().flatten().map(|(t, b)| Mark::After(t, b))
                    }
                    CachePoint::LastMessage => messages.len().checked_sub(1).and_then(last_of),
                };
                marks.extend(mark);
            }
        }
    }
    marks.dedup();
    // Inserted from the last block back, so that earlier positions stay right.
    marks.sort_by_key(|mark| match mark {
        Mark::System | Mark::Tools => (0, 0),
        Mark::After(turn, block) => (turn + 1, *block),
    });
    marks.dedup();
    Ok(marks)
}

fn system_blocks(request: &ModelRequest) -> Vec<Value> {
    let mut blocks = Vec::new();
    if let Some(instructions) = request.instructions.as_deref().filter(|s| !s.is_empty()) {
        blocks.push(json!({"text": instructions}));
    }
    for message in request.messages.iter() {
        if matches!(message.role, Role::System | Role::Developer) {
            let text = message.text();
            if !text.is_empty() {
                blocks.push(json!({"text": text}));
            }
        }
    }
    blocks
}

/// The API messages, and for each request message where its last block is in them.
fn messages(messages: &[Message]) -> (Vec<Value>, Vec<Option<(usize, usize)>>) {
    // (role, results, blocks) per API message; results come first in a user message.
    let mut turns: Vec<(&'static str, Vec<Value>, Vec<Value>)> = Vec::new();
    let mut lasts: Vec<Option<(usize, bool, usize)>> = Vec::with_capacity(messages.len());
    for message in messages {
        lasts.push(None);
        let role = match message.role {
            Role::System | Role::Developer => continue,
            Role::User | Role::Tool => "user",
            Role::Assistant => "assistant",
        };
        let mut results = Vec::new();
        let mut blocks = Vec::new();
        for part in &message.content {
            match part {
                Part::ToolResult(result) => results.push(tool_result(result)),
                Part::Reasoning(reasoning) if message.role == Role::Assistant => {
                    blocks.extend(reasoning_block(reasoning));
                }
                other => blocks.extend(block(other)),
            }
        }
        if results.is_empty() && blocks.is_empty() {
            continue;
        }
        if !matches!(turns.last(), Some((r, _, _)) if *r == role) {
            turns.push((role, Vec::new(), Vec::new()));
        }
        let index = turns.len() - 1;
        if let Some((_, turn_results, turn_blocks)) = turns.last_mut() {
            let last = if blocks.is_empty() {
                (index, true, turn_results.len() + results.len() - 1)
            } else {
                (index, false, turn_blocks.len() + blocks.len() - 1)
            };
            turn_results.extend(results);
            turn_blocks.extend(blocks);
            if let Some(slot) = lasts.last_mut() {
                *slot = Some(last);
            }
        }
    }
    let ends = lasts
        .into_iter()
        .map(|last| {
            let (index, result, at) = last?;
            let results = turns.get(index)?.1.len();
            Some((index, if result { at } else { results + at }))
        })
        .collect();
    let turns = turns
        .into_iter()
        .map(|(role, mut results, blocks)| {
            results.extend(blocks);
            json!({"role": role, "content": results})
        })
        .collect();
    (turns, ends)
}

/// `png` of `image/png`, `pdf` of `application/pdf`, …
fn format_of(media_type: &str) -> &str {
    let subtype = media_type.rsplit('/').next().unwrap_or(media_type);
    match subtype {
        "jpg" => "jpeg",
        "plain" => "txt",
        "markdown" => "md",
        "vnd.openxmlformats-officedocument.wordprocessingml.document" => "docx",
        "vnd.openxmlformats-officedocument.spreadsheetml.sheet" => "xlsx",
        "msword" => "doc",
        "vnd.ms-excel" => "xls",
        other => other,
    }
}

fn source(source: &MediaSource) -> Option<(String, Value)> {
    match source {
        MediaSource::Base64 { media_type, data } => {
            Some((format_of(media_type).to_owned(), json!({"bytes": data})))
        }
        MediaSource::Url { url } if url.starts_with("s3://") => {
            let format = url.rsplit('.').next().unwrap_or_default().to_ascii_lowercase();
            Some((format, json!({"s3Location": {"uri": url}})))
        }
        // The API takes bytes or S3 locations only.
        MediaSource::Url { .. } => None,
    }
}

fn block(part: &Part) -> Option<Value> {
    match part {
        Part::Text { text } if text.is_empty() => None,
        Part::Text { text } => Some(json!({"text": text})),
        Part::Image { source: media } => {
            let (format, source) = source(media)?;
            Some(json!({"image": {"format": format, "source": source}}))
        }
        Part::File { source: media, filename } => {
            let (format, source) = source(media)?;
            let name = filename.clone().unwrap_or_else(|| "document".to_owned());
            Some(
                json!({"document": {"format": format, "name": document_name(&name), "source": source}}),
            )
        }
        Part::ToolCall(call) => Some(tool_use(call)),
        Part::ToolResult(result) => Some(tool_result(result)),
        Part::Reasoning(reasoning) => reasoning_block(reasoning),
        Part::Opaque(opaque) if opaque.provider == FAMILY && opaque.kind != "trace" => {
            Some(opaque.value.clone())
        }
        Part::Opaque(_) | Part::Citation(_) => None,
    }
}

/// A document name as the API accepts it: letters, digits, single spaces, hyphens,
/// parentheses and square brackets.
fn document_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() || matches!(c, '-' | '(' | ')' | '[' | ']') {
            c
        } else {
            ' '
        };
        if !(c == ' ' && out.ends_with(' ')) {
            out.push(c);
        }
    }
    let out = out.trim().to_owned();
    if out.is_empty() {
        "document".to_owned()
    } else {
        out
    }
}

fn tool_use(call: &ToolCall) -> Value {
    let input = match parse_arguments(&call.arguments) {
        Ok(Value::Object(map)) => Value::Object(map),
        _ => Value::Object(Map::new()),
    };
    json!({"toolUse": {"toolUseId": call.id, "name": call.name, "input": input}})
}

fn tool_result(result: &ToolResult) -> Value {
    let content = match &result.content {
        crate::message::ToolResultContent::Json(value) if value.is_object() => {
            json!([{"json": value}])
        }
        other => json!([{"text": other.to_text()}]),
    };
    // `status` only for an error: some models (Writer's) refuse the field.
    let mut inner = json!({"toolUseId": result.call_id, "content": content});
    if let (true, Value::Object(map)) = (result.is_error, &mut inner) {
        map.insert("status".into(), json!("error"));
    }
    json!({ "toolResult": inner })
}

/// The `reasoningContent` block of reasoning this format produced; `None` for another's.
fn reasoning_block(reasoning: &Reasoning) -> Option<Value> {
    let ours = reasoning.opaque.as_ref()?.get(FAMILY)?;
    if let Some(redacted) = ours.get("redactedContent") {
        return Some(json!({"reasoningContent": {"redactedContent": redacted}}));
    }
    let mut text = json!({"text": reasoning.text});
    if let (Some(signature), Value::Object(map)) = (ours.get("signature"), &mut text) {
        map.insert("signature".into(), signature.clone());
    }
    Some(json!({"reasoningContent": {"reasoningText": text}}))
}
