//! OpenAI's Responses API (`/responses`), stateless: every request carries the whole
//! history as `input` items and never a `previous_response_id`. Reasoning items come back
//! as [`Part::Reasoning`] with the item as `opaque`, and are sent back as they came.
//! Build a provider with [`OpenAi::responses`](super::openai::OpenAi::responses).

mod stream;

use super::http::{HttpConfig, HttpConfigError, HttpProvider};
use super::openai::{
    classify_openai_error, f32_json, media_url, stream_error, Compat, Dialect, OpenAi,
};
use super::wire::{StreamDecoder, WireFormat, WireRequest};
use super::{ModelRequest, ModelResponse, ProviderError, ToolChoice};
use crate::message::{
    Citation, FinishReason, MediaSource, Message, Opaque, Part, Reasoning, Role, ToolCall, Usage,
};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// The Responses API's constructors, beside the format they build (the Chat Completions ones
/// are in [`openai`](super::openai)).
impl OpenAi {
    /// OpenAI's Responses API with `model`; the key comes from `OPENAI_API_KEY`.
    pub fn responses(
        model: impl Into<String>,
    ) -> Result<HttpProvider<OpenAiResponses>, HttpConfigError> {
        Self::responses_compatible(Compat::openai(), model)
    }

    /// The Responses API on an OpenAI-compatible server (e.g. llama.cpp's `/v1/responses`).
    pub fn responses_compatible(
        server: Compat,
        model: impl Into<String>,
    ) -> Result<HttpProvider<OpenAiResponses>, HttpConfigError> {
        Self::responses_with(server.config(model), server.dialect)
    }

    /// The Responses API with a full HTTP configuration (see [`Compat::config`]).
    pub fn responses_with(
        config: HttpConfig,
        dialect: Dialect,
    ) -> Result<HttpProvider<OpenAiResponses>, HttpConfigError> {
        let format = OpenAiResponses::new(config.model(), dialect);
        HttpProvider::new(format, config)
    }
}

/// The Responses wire format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiResponses {
    model: String,
    dialect: Dialect,
}

impl OpenAiResponses {
    /// The format for `model` in `dialect` (see [`Dialect::responses_store`] and
    /// [`Dialect::responses_encrypted_reasoning`]).
    pub fn new(model: impl Into<String>, dialect: Dialect) -> Self {
        Self { model: model.into(), dialect }
    }

    /// The dialect.
    pub fn dialect(&self) -> &Dialect {
        &self.dialect
    }

    fn input(&self, messages: &[Message]) -> Result<Vec<Value>, ProviderError> {
        let mut items = Vec::new();
        for message in messages {
            match message.role {
                Role::System | Role::Developer => {
                    let role = match message.role {
                        Role::Developer if self.dialect.developer_role => "developer",
                        _ => "system",
                    };
                    items.push(json!({"type": "message", "role": role, "content": message.text()}));
                }
                Role::User => items.push(user_item(message)?),
                Role::Assistant => assistant_items(message, &mut items),
                Role::Tool => {}
            }
            for result in message.tool_results_iter() {
                items.push(json!({
                    "type": "function_call_output",
                    "call_id": result.call_id,
                    "output": result.content.to_text(),
                }));
            }
        }
        Ok(items)
    }
}

fn user_item(message: &Message) -> Result<Value, ProviderError> {
    let mut parts = Vec::new();
    for part in &message.content {
        match part {
            Part::Text { text } => parts.push(json!({"type": "input_text", "text": text})),
            Part::Image { source } => parts.push(json!({
                "type": "input_image",
                "image_url": media_url(source),
                "detail": "auto",
            })),
            Part::File { source, filename } => {
                let mut file = json!({"type": "input_file"});
                match source {
                    MediaSource::Url { url } => file["file_url"] = json!(url),
                    MediaSource::Base64 { .. } => file["file_data"] = json!(media_url(source)),
                }
                if let Some(name) = filename {
                    file["filename"] = json!(name);
                }
                parts.push(file);
            }
            Part::ToolCall(_)
            | Part::ToolResult(_)
            | Part::Reasoning(_)
            | Part::Opaque(_)
            | Part::Citation(_) => {}
        }
    }
    let content = match parts.as_slice() {
        [single] if single["type"] == "input_text" => single["text"].clone(),
        _ => Value::Array(parts),
    };
    Ok(json!({"type": "message", "role": "user", "content": content}))
}

/// An assistant message as items, in order: reasoning items (those this API produced,
/// sent back as they came), output text messages, function calls.
fn assistant_items(message: &Message, items: &mut Vec<Value>) {
    let mut text = String::new();
    // This API's citations of the text so far, sent back as its annotations.
    let mut annotations: Vec<Value> = Vec::new();
    // Whether the part before was a phase marker: the next message's text then starts with
    // the separator the decoder put between the two, which is not the model's.
    let mut after_marker = false;
    let flush = |text: &mut String, annotations: &mut Vec<Value>, items: &mut Vec<Value>| {
        flush_message(json!({"type": "message", "role": "assistant"}), text, annotations, items);
    };
    for part in &message.content {
        let marker = std::mem::replace(&mut after_marker, false);
        match part {
            Part::Text { text: more } if marker && text.is_empty() => {
                text.push_str(more.strip_prefix(TEXT_SEPARATOR).unwrap_or(more));
            }
            Part::Text { text: more } => text.push_str(more),
            Part::Citation(citation) if citation.provider == FAMILY => {
                annotations.push(citation.value.clone());
            }
            // The message the text so far belongs to, with its phase.
            part if is_phase_marker(part) => {
                if let Part::Opaque(opaque) = part {
                    flush_message(opaque.value.clone(), &mut text, &mut annotations, items);
                }
                after_marker = true;
            }
            Part::Reasoning(Reasoning { opaque: Some(item), .. })
                if item.get("type").and_then(Value::as_str) == Some("reasoning") =>
            {
                flush(&mut text, &mut annotations, items);
                let mut item = item.clone();
                if let Some(fields) = item.as_object_mut() {
                    fields.remove("status");
                }
                items.push(item);
            }
            // Items of this API without a type of ours (a web search, a compaction), as they
            // came.
            Part::Opaque(opaque) if opaque.provider == FAMILY => {
                flush(&mut text, &mut annotations, items);
                items.push(opaque.value.clone());
            }
            Part::ToolCall(call) => {
                flush(&mut text, &mut annotations, items);
                let arguments =
                    if call.arguments.trim().is_empty() { "{}" } else { &call.arguments };
                items.push(json!({
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": arguments,
                }));
            }
            // Reasoning from another provider (no item to send back), media, results.
            _ => {}
        }
    }
    flush(&mut text, &mut annotations, items);
}

/// The text so far (with its annotations) as an output message `item` — unless there is no
/// text.
fn flush_message(
    mut item: Value,
    text: &mut String,
    annotations: &mut Vec<Value>,
    items: &mut Vec<Value>,
) {
    if !text.is_empty() {
        let mut output = json!({"type": "output_text", "text": std::mem::take(text)});
        if !annotations.is_empty() {
            output["annotations"] = Value::Array(std::mem::take(annotations));
        }
        item["content"] = json!([output]);
        items.push(item);
    }
    annotations.clear();
}

/// The family name of this API (its [`WireFormat::name`]), on its opaque items.
pub(super) const FAMILY: &str = "openai-responses";

impl WireFormat for OpenAiResponses {
    fn name(&self) -> &'static str {
        FAMILY
    }

    fn native_output(&self, _with_tools: bool) -> bool {
        self.dialect.json_schema_output
    }

    fn encode(&self, request: &ModelRequest, stream: bool) -> Result<WireRequest, ProviderError> {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        if let Some(instructions) = request.instructions.as_deref().filter(|i| !i.is_empty()) {
            body.insert("instructions".into(), json!(instructions));
        }
        body.insert("input".into(), Value::Array(self.input(&request.messages)?));
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "type": "function",
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                        // The API's default is strict schemas, which our schemas need not
                        // satisfy (every property required, no additional properties).
                        "strict": false,
                    })
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
            let choice = match &request.tool_choice {
                ToolChoice::Auto => None,
                ToolChoice::None => Some(json!("none")),
                ToolChoice::Required => Some(json!("required")),
                ToolChoice::Named(name) => Some(json!({"type": "function", "name": name})),
            };
            if let Some(choice) = choice {
                body.insert("tool_choice".into(), choice);
            }
        }
        if let Some(temperature) = request.temperature {
            body.insert("temperature".into(), f32_json(temperature));
        }
        if let Some(max_tokens) = request.max_tokens {
            body.insert("max_output_tokens".into(), json!(max_tokens));
        }
        if let Some(key) = super::openai::cache_key(request) {
            body.insert("prompt_cache_key".into(), json!(key));
        }
        if let Some(output) = &request.output {
            // Strict when the schema allows it, as for chat.
            let (schema, strict) = match output.strict_schema() {
                Some(schema) => (schema, true),
                None => (output.wire_schema(), false),
            };
            let mut format = json!({"type": "json_schema", "name": output.name, "schema": schema, "strict": strict});
            if let Some(description) = &output.description {
                format["description"] = json!(description);
            }
            body.insert("text".into(), json!({ "format": format }));
        }
        if let Some(store) = self.dialect.responses_store {
            body.insert("store".into(), json!(store));
        }
        if self.dialect.responses_encrypted_reasoning {
            body.insert("include".into(), json!(["reasoning.encrypted_content"]));
        }
        body.insert("stream".into(), json!(stream));
        Ok(WireRequest { path: "/responses".into(), body: Value::Object(body), headers: vec![] })
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(stream::ResponsesDecoder::default())
    }

    fn decode_response(&self, body: &[u8]) -> Result<ModelResponse, ProviderError> {
        let text = String::from_utf8_lossy(body);
        let response: WireResponse = serde_json::from_slice(body)
            .map_err(|e| ProviderError::protocol(format!("invalid response object: {e}"), &text))?;
        response.into_model_response(&text)
    }

    fn classify_error(&self, status: u16, body: &str, generic: ProviderError) -> ProviderError {
        classify_openai_error(status, body, generic)
    }
}

/// A response object (the body of a non-streamed response, and of `response.completed`).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireResponse {
    /// The response id (`resp_…`).
    id: Option<String>,
    /// The model that answered.
    model: Option<String>,
    status: Option<String>,
    output: Option<Vec<Value>>,
    usage: Option<ResponsesUsage>,
    error: Option<Value>,
    incomplete_details: Option<Value>,
}

impl WireResponse {
    /// The finish reason of a finished response (`status` and `incomplete_details`).
    fn finish_reason(&self, has_calls: bool) -> FinishReason {
        match self.status.as_deref() {
            Some("incomplete") => {
                let reason = self
                    .incomplete_details
                    .as_ref()
                    .and_then(|d| d.get("reason"))
                    .and_then(Value::as_str)
                    .unwrap_or("incomplete");
                match reason {
                    "max_output_tokens" => FinishReason::Length,
                    "content_filter" => FinishReason::ContentFilter,
                    other => FinishReason::Other(other.to_owned()),
                }
            }
            _ if has_calls => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        }
    }

    fn into_model_response(self, raw: &str) -> Result<ModelResponse, ProviderError> {
        if self.status.as_deref() == Some("failed")
            || self.error.as_ref().is_some_and(|e| !e.is_null())
        {
            return Err(self
                .error
                .as_ref()
                .map(stream_error)
                .unwrap_or(ProviderError::Other { message: "the response failed".into() }));
        }
        let mut content = Vec::new();
        for item in self.output.iter().flatten() {
            if let Some(error) = client_side_item(item) {
                return Err(error);
            }
            match item.get("type").and_then(Value::as_str) {
                Some("message") => {
                    let text = message_text(item);
                    if !text.is_empty() {
                        // A second message's text is a new paragraph, as streamed: of the same
                        // part, or of the next one after a phase marker.
                        let text_before = content
                            .iter()
                            .rev()
                            .find(|part| !is_phase_marker(part))
                            .is_some_and(|part| matches!(part, Part::Text { .. }));
                        match content.last_mut() {
                            Some(Part::Text { text: last }) => {
                                last.push_str(TEXT_SEPARATOR);
                                last.push_str(&text);
                            }
                            _ if text_before => {
                                content.push(Part::text(TEXT_SEPARATOR.to_owned() + &text))
                            }
                            _ => content.push(Part::text(text)),
                        }
                    }
                    for value in message_annotations(item) {
                        content.push(Part::Citation(Citation::from_value(FAMILY, value)));
                    }
                    if let Some(marker) = phase_marker(item) {
                        content.push(Part::Opaque(marker));
                    }
                }
                Some("function_call") => content.push(Part::ToolCall(function_call(item, raw)?)),
                Some("reasoning") => content.push(Part::Reasoning(Reasoning {
                    text: reasoning_text(item),
                    opaque: Some(item.clone()),
                })),
                Some(kind) => content.push(Part::Opaque(Opaque::new(FAMILY, kind, item.clone()))),
                None => {}
            }
        }
        let has_calls = content.iter().any(|p| matches!(p, Part::ToolCall(_)));
        Ok(ModelResponse {
            finish_reason: self.finish_reason(has_calls),
            message: Message { role: Role::Assistant, content },
            usage: self.usage.map(ResponsesUsage::into_usage).unwrap_or_default(),
            id: self.id.filter(|id| !id.is_empty()),
            model: self.model.filter(|model| !model.is_empty()),
            provider: None,
        })
    }
}

/// The texts (and refusals) of an output message item, a blank line between two.
fn message_text(item: &Value) -> String {
    let texts: Vec<&str> = item
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("text").or_else(|| c.get("refusal")).and_then(Value::as_str))
        .filter(|text| !text.is_empty())
        .collect();
    texts.join(TEXT_SEPARATOR)
}

/// The annotations (citations) of an output message item's texts, in order.
fn message_annotations(item: &Value) -> Vec<Value> {
    item.get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("annotations").and_then(Value::as_array))
        .flatten()
        .filter(|a| a.is_object())
        .cloned()
        .collect()
}

/// The phase marker of a message item that has a `phase` (`commentary`, `final_answer`: what
/// gpt-5.3-codex and later write, and must get back): the item without its content, kept after
/// the message's text (and citations) as an opaque part of kind `message`, so that the encoder
/// sends that text back as this message, phase and id included.
fn phase_marker(item: &Value) -> Option<Opaque> {
    item.get("phase").and_then(Value::as_str)?;
    let mut marker = item.clone();
    if let Some(fields) = marker.as_object_mut() {
        fields.remove("content");
        fields.remove("status");
    }
    Some(Opaque::new(FAMILY, "message", marker))
}

/// Whether a part is a [`phase_marker`].
fn is_phase_marker(part: &Part) -> bool {
    matches!(part, Part::Opaque(opaque) if opaque.provider == FAMILY && opaque.kind == "message")
}

/// Between two texts of a response (two content parts, two message items): they are separate
/// paragraphs, not one run-on sentence.
pub(super) const TEXT_SEPARATOR: &str = "\n\n";

/// The summary (or, from open models, the raw reasoning) text of a reasoning item.
fn reasoning_text(item: &Value) -> String {
    let texts = |field: &str| -> Vec<&str> {
        item.get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.get("text").and_then(Value::as_str))
            .collect()
    };
    let summary = texts("summary");
    if summary.is_empty() {
        texts("content").join("")
    } else {
        summary.join("\n\n")
    }
}

/// The output items the client must execute: a custom (freeform) tool call, a shell command
/// (outside a hosted container) or a local shell command, a patch to apply, a computer
/// action — and any item marked `"execution": "client"` (a client-side `tool_search_call`).
/// agentloop runs function tools only, so such an item ends the turn with an error that
/// names it, never a quiet stop.
const CLIENT_SIDE_ITEMS: [&str; 5] =
    ["custom_tool_call", "shell_call", "local_shell_call", "apply_patch_call", "computer_call"];

/// The error for an output item the client would have to execute (see [`CLIENT_SIDE_ITEMS`]).
pub(super) fn client_side_item(item: &Value) -> Option<ProviderError> {
    let kind = item.get("type").and_then(Value::as_str)?;
    let for_the_client = item.get("execution").and_then(Value::as_str) == Some("client");
    if !CLIENT_SIDE_ITEMS.contains(&kind) && !for_the_client {
        return None;
    }
    // A shell call in a container (`environment.type` `container_auto`, `container_reference`)
    // is run by the API, which sends its `shell_call_output`: nothing for the client to do.
    let environment = item.get("environment").and_then(|e| e.get("type")).and_then(Value::as_str);
    if environment.is_some_and(|e| e.starts_with("container")) {
        return None;
    }
    let named = item
        .get("name")
        .and_then(Value::as_str)
        // A tool name is an identifier: anything else in it is dropped, not printed.
        .map(|name| {
            let name: String = name
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
                .take(64)
                .collect();
            format!(" (`{name}`)")
        })
        .unwrap_or_default();
    Some(ProviderError::Other {
        message: format!(
            "the model asked the client to run an item of type `{kind}`{named}, which agentloop \
             does not run (it runs function tools only); the turn is not complete"
        ),
    })
}

/// A `function_call` item as a tool call (its `call_id` is the id results refer to).
fn function_call(item: &Value, raw: &str) -> Result<ToolCall, ProviderError> {
    let text = |field: &str| item.get(field).and_then(Value::as_str).filter(|s| !s.is_empty());
    let id = text("call_id")
        .or(text("id"))
        .ok_or_else(|| ProviderError::protocol("a function call without a call_id", raw))?;
    let name = text("name")
        .ok_or_else(|| ProviderError::protocol("a function call without a name", raw))?;
    Ok(ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: item.get("arguments").and_then(Value::as_str).unwrap_or_default().to_owned(),
    })
}

/// Usage as the Responses API reports it.
#[derive(Debug, Default, Deserialize)]
struct ResponsesUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    input_tokens_details: Option<Value>,
    output_tokens_details: Option<Value>,
}

impl ResponsesUsage {
    fn into_usage(self) -> Usage {
        let detail = |details: &Option<Value>, name: &str| {
            details.as_ref().and_then(|d| d.get(name)).and_then(Value::as_u64).unwrap_or(0)
        };
        Usage {
            input: self.input_tokens.unwrap_or(0),
            output: self.output_tokens.unwrap_or(0),
            cached_input: detail(&self.input_tokens_details, "cached_tokens"),
            reasoning: detail(&self.output_tokens_details, "reasoning_tokens"),
            cache_write_input: detail(&self.input_tokens_details, "cache_write_tokens"),
        }
    }
}

#[cfg(test)]
mod tests;
