//! OpenAI Chat Completions (`/chat/completions`), for OpenAI and every OpenAI-compatible
//! server, plus the constructors of the OpenAI providers ([`OpenAi`]).
//!
//! ```no_run
//! use agentloop::provider::openai::{Compat, OpenAi};
//!
//! let openai = OpenAi::chat("gpt-4.1")?; // OPENAI_API_KEY
//! let responses = OpenAi::responses("gpt-5")?;
//! let local = OpenAi::compatible(Compat::ollama(), "llama3.2")?;
//! let any = OpenAi::compatible_at("http://localhost:8080/v1", Some("sk-…"), "qwen2.5")?;
//! # Ok::<(), agentloop::provider::http::HttpConfigError>(())
//! ```

mod body;
mod compat;
mod details;
mod stream;

pub use compat::{Compat, Dialect};

use super::http::{error_object, HttpConfig, HttpConfigError, HttpProvider};
use super::wire::{EncodedRequest, StreamDecoder, WireFormat, WireRequest};
use super::{ModelRequest, ModelResponse, OutputFormat, ProviderError, ToolChoice};
use crate::message::{
    Citation, FinishReason, MediaSource, Message, Part, Reasoning, Role, ToolCall, Usage,
};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// Constructors of the OpenAI providers.
#[derive(Debug, Clone, Copy)]
pub struct OpenAi;

impl OpenAi {
    /// OpenAI Chat Completions with `model`; the key comes from `OPENAI_API_KEY`.
    pub fn chat(model: impl Into<String>) -> Result<HttpProvider<OpenAiChat>, HttpConfigError> {
        Self::compatible(Compat::openai(), model)
    }

    /// Chat Completions on the OpenAI-compatible server at `base_url` (request paths such as
    /// `/chat/completions` are appended to it, so it usually ends in `/v1`), with `api_key`
    /// sent as `Authorization: Bearer <key>` (`None`: no key), for `model`. In one line:
    ///
    /// ```
    /// use agentloop::provider::openai::OpenAi;
    ///
    /// let provider = OpenAi::compatible_at("http://localhost:8080/v1", Some("sk-…"), "qwen2.5")?;
    /// # Ok::<(), agentloop::provider::http::HttpConfigError>(())
    /// ```
    ///
    /// Requests stream (SSE), and instructions go out as `system` messages (what most
    /// compatible servers take; OpenAI's own API wants `developer`): the
    /// [`Compat::custom`] defaults. To change either (or anything else), build from the
    /// server description instead:
    /// `OpenAi::compatible(Compat::custom(url).api_key(key).streaming(false).developer_role(true), model)`.
    pub fn compatible_at(
        base_url: impl Into<String>,
        api_key: Option<&str>,
        model: impl Into<String>,
    ) -> Result<HttpProvider<OpenAiChat>, HttpConfigError> {
        let mut server = Compat::custom(base_url);
        if let Some(key) = api_key {
            server = server.api_key(key);
        }
        Self::compatible(server, model)
    }

    /// Chat Completions on an OpenAI-compatible server.
    pub fn compatible(
        server: Compat,
        model: impl Into<String>,
    ) -> Result<HttpProvider<OpenAiChat>, HttpConfigError> {
        Self::chat_with(server.config(model), server.dialect)
    }

    /// Chat Completions with a full HTTP configuration (see [`Compat::config`]).
    pub fn chat_with(
        config: HttpConfig,
        dialect: Dialect,
    ) -> Result<HttpProvider<OpenAiChat>, HttpConfigError> {
        let format = OpenAiChat::new(config.model(), dialect);
        HttpProvider::new(format, config)
    }
}

/// The Chat Completions wire format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiChat {
    model: String,
    dialect: Dialect,
}

impl OpenAiChat {
    /// The format for `model` in `dialect`.
    pub fn new(model: impl Into<String>, dialect: Dialect) -> Self {
        Self { model: model.into(), dialect }
    }

    /// The dialect.
    pub fn dialect(&self) -> &Dialect {
        &self.dialect
    }

    fn messages(&self, request: &ModelRequest) -> Result<Vec<Value>, ProviderError> {
        let instructions_role = if self.dialect.developer_role { "developer" } else { "system" };
        let mut out = Vec::with_capacity(request.messages.len() + 1);
        if let Some(instructions) = request.instructions.as_deref().filter(|i| !i.is_empty()) {
            out.push(json!({"role": instructions_role, "content": instructions}));
        }
        let turn = current_turn(request, &self.dialect);
        for (index, message) in request.messages.iter().enumerate() {
            match message.role {
                Role::System => out.push(json!({"role": "system", "content": message.text()})),
                Role::Developer => {
                    out.push(json!({"role": instructions_role, "content": message.text()}))
                }
                Role::User => out.push(user_message(message)?),
                Role::Assistant => out.push(assistant_message(message, index >= turn)),
                Role::Tool => {}
            }
            // Tool results become one `tool` message each, whatever message holds them.
            for result in message.tool_results_iter() {
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": result.call_id,
                    "content": result.content.to_text(),
                }));
            }
        }
        Ok(out)
    }
}

/// A user message: a plain string when it is one text, content parts otherwise.
fn user_message(message: &Message) -> Result<Value, ProviderError> {
    let mut parts = Vec::new();
    for part in &message.content {
        match part {
            Part::Text { text } => parts.push(json!({"type": "text", "text": text})),
            Part::Image { source } => {
                parts.push(json!({"type": "image_url", "image_url": {"url": media_url(source)}}))
            }
            Part::File { source: MediaSource::Base64 { media_type, data }, filename } => parts
                .push(json!({"type": "file", "file": {
                    "filename": filename.as_deref().unwrap_or("file"),
                    "file_data": format!("data:{media_type};base64,{data}"),
                }})),
            Part::File { source: MediaSource::Url { .. }, .. } => {
                return Err(ProviderError::InvalidRequest {
                    message: "the chat completions API takes files as base64 data, not URLs".into(),
                })
            }
            Part::ToolCall(_)
            | Part::ToolResult(_)
            | Part::Reasoning(_)
            | Part::Opaque(_)
            | Part::Citation(_) => {}
        }
    }
    let content = match parts.as_slice() {
        [single] if single["type"] == "text" => single["text"].clone(),
        _ => Value::Array(parts),
    };
    Ok(json!({"role": "user", "content": content}))
}

/// An image or file source as a URL (inline data as a `data:` URL).
pub(crate) fn media_url(source: &MediaSource) -> String {
    match source {
        MediaSource::Url { url } => url.clone(),
        MediaSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
    }
}

/// The index of the first message of the current turn (after the last user message that is
/// not only tool results) when the dialect sends reasoning back within a turn; past the end
/// otherwise.
pub(crate) fn current_turn(request: &ModelRequest, dialect: &Dialect) -> usize {
    if !dialect.reasoning_content_in_tool_loop {
        return usize::MAX;
    }
    let asked = |m: &Message| {
        m.role == Role::User && m.content.iter().any(|p| !matches!(p, Part::ToolResult(_)))
    };
    request.messages.iter().rposition(asked).map_or(0, |i| i + 1)
}

/// The reasoning text of an assistant message with tool calls, to send back as
/// `reasoning_content` (`send`: it is in the current turn of a dialect that wants it).
pub(crate) fn reasoning_content(message: &Message, send: bool) -> Option<String> {
    if !send || !message.has_tool_calls() {
        return None;
    }
    Some(message.reasoning_text()).filter(|text| !text.is_empty())
}

/// An assistant message: its text (`null` when it only calls tools), its tool calls and,
/// `in_turn` of a dialect that wants it, its reasoning as `reasoning_content`
/// ([`reasoning_content`]). Otherwise reasoning is not sent back: OpenAI's chat API has no
/// field for it.
fn assistant_message(message: &Message, in_turn: bool) -> Value {
    let text = message.text();
    let calls: Vec<Value> = message
        .tool_calls()
        .map(|call| {
            let arguments = if call.arguments.trim().is_empty() { "{}" } else { &call.arguments };
            json!({
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": arguments},
            })
        })
        .collect();
    let mut out = Map::new();
    out.insert("role".into(), json!("assistant"));
    out.insert(
        "content".into(),
        if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) },
    );
    if !calls.is_empty() {
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(reasoning) = reasoning_content(message, in_turn) {
        out.insert("reasoning_content".into(), json!(reasoning));
    }
    // Signed reasoning a gateway sent goes back as it came.
    let details = details::of(message);
    if !details.is_empty() {
        out.insert("reasoning_details".into(), Value::Array(details));
    }
    Value::Object(out)
}

impl OpenAiChat {
    /// `response_format` for an output schema: `json_schema`, strict when the schema allows
    /// it ([`OutputFormat::strict_schema`]); `json_object` on a server without `json_schema`.
    pub(super) fn response_format(&self, output: &OutputFormat) -> Value {
        if !self.dialect.json_schema_output {
            return json!({"type": "json_object"});
        }
        let (schema, strict) = match output.strict_schema() {
            Some(schema) => (schema, true),
            None => (output.wire_schema(), false),
        };
        let mut spec = json!({"name": output.name, "schema": schema, "strict": strict});
        if let Some(description) = &output.description {
            spec["description"] = json!(description);
        }
        json!({"type": "json_schema", "json_schema": spec})
    }
}

impl WireFormat for OpenAiChat {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn native_output(&self, _with_tools: bool) -> bool {
        self.dialect.json_schema_output
    }

    fn encode(&self, request: &ModelRequest, stream: bool) -> Result<WireRequest, ProviderError> {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        body.insert("messages".into(), Value::Array(self.messages(request)?));
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .map(|tool| {
                    json!({"type": "function", "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    }})
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
            let choice = match &request.tool_choice {
                ToolChoice::Auto => None,
                ToolChoice::None => Some(json!("none")),
                ToolChoice::Required => Some(json!(self.dialect.tool_choice_required)),
                ToolChoice::Named(name) => {
                    Some(json!({"type": "function", "function": {"name": name}}))
                }
            };
            if let Some(choice) = choice {
                body.insert("tool_choice".into(), choice);
            }
        }
        if let Some(temperature) = request.temperature {
            body.insert("temperature".into(), f32_json(temperature));
        }
        if let Some(max_tokens) = request.max_tokens {
            body.insert(self.dialect.max_tokens_field.into(), json!(max_tokens));
        }
        if let Some(output) = &request.output {
            body.insert("response_format".into(), self.response_format(output));
        }
        if let Some(key) = cache_key(request) {
            body.insert("prompt_cache_key".into(), json!(key));
        }
        body.insert("stream".into(), json!(stream));
        if stream && self.dialect.stream_usage {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        Ok(WireRequest {
            path: "/chat/completions".into(),
            body: Value::Object(body),
            headers: vec![],
        })
    }

    fn encode_json(
        &self,
        request: &ModelRequest,
        stream: bool,
    ) -> Result<EncodedRequest, ProviderError> {
        Ok(EncodedRequest {
            path: "/chat/completions".into(),
            body: body::encode_body(self, request, stream)?,
            headers: vec![],
        })
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(stream::ChatDecoder::default())
    }

    fn decode_response(&self, body: &[u8]) -> Result<ModelResponse, ProviderError> {
        // The body as text, for error excerpts only (decoding it is not free).
        let text = || String::from_utf8_lossy(body);
        let response: ChatResponse = serde_json::from_slice(body).map_err(|e| {
            ProviderError::protocol(format!("invalid chat completion: {e}"), &text())
        })?;
        if let Some(error) = response.error {
            return Err(stream_error(&error));
        }
        let choice = response
            .choices
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.index.unwrap_or(0) == 0)
            .ok_or_else(|| ProviderError::protocol("a chat completion without choices", &text()))?;
        let message = choice.message.unwrap_or_default();
        let mut content = Vec::new();
        let parts = message.content.as_ref().map(ContentParts::of).unwrap_or_default();
        let reasoning = message.reasoning_text().or(parts.reasoning);
        let opaque = details::opaque(message.reasoning_details.clone().unwrap_or_default());
        if reasoning.is_some() || opaque.is_some() {
            let text = reasoning.unwrap_or_default();
            content.push(Part::Reasoning(Reasoning { text, opaque }));
        }
        let answer = parts.text;
        let answer =
            if answer.is_empty() { message.refusal.clone().unwrap_or_default() } else { answer };
        if !answer.is_empty() {
            content.push(Part::text(answer));
        }
        let annotations = message.annotations.unwrap_or_default().into_iter();
        for value in annotations
            .map(annotation_citation)
            .chain(sources(response.citations, response.search_results))
        {
            content.push(Part::Citation(Citation::from_value(FAMILY, value)));
        }
        for (index, call) in message.tool_calls.unwrap_or_default().into_iter().enumerate() {
            let function = call.function.unwrap_or_default();
            let name = function
                .name
                .filter(|n| !n.is_empty())
                .ok_or_else(|| ProviderError::protocol("a tool call without a name", &text()))?;
            content.push(Part::ToolCall(ToolCall {
                id: call.id.filter(|id| !id.is_empty()).unwrap_or_else(|| format!("call_{index}")),
                name,
                arguments: match function.arguments {
                    Some(Value::String(arguments)) => arguments,
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                },
            }));
        }
        let has_calls = content.iter().any(|p| matches!(p, Part::ToolCall(_)));
        Ok(ModelResponse {
            message: Message { role: Role::Assistant, content },
            finish_reason: finish_reason(choice.finish_reason.as_deref(), has_calls),
            usage: response.usage.map(WireUsage::into_usage).unwrap_or_default(),
            id: response.id.filter(|id| !id.is_empty()),
            model: response.model.filter(|model| !model.is_empty()),
            provider: None,
        })
    }

    fn classify_error(&self, status: u16, body: &str, generic: ProviderError) -> ProviderError {
        classify_openai_error(status, body, generic)
    }
}

/// An `f32` as the JSON number it reads as (`0.7`, not `0.699999988079071`).
pub(crate) fn f32_json(value: f32) -> Value {
    value.to_string().parse::<f64>().map(|v| json!(v)).unwrap_or(Value::Null)
}

/// A message's (or a delta's) `content`: a string, or an array of content parts as Mistral's
/// reasoning models send it, `[{"type": "thinking", "thinking": [{"type": "text", "text":
/// …}]}, {"type": "text", "text": …}]`: the thinking parts are reasoning, the others' texts
/// the answer.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ContentParts {
    pub(crate) reasoning: Option<String>,
    pub(crate) text: String,
}

impl ContentParts {
    pub(crate) fn of(content: &Value) -> Self {
        let mut out = Self::default();
        match content {
            Value::String(text) => out.text.clone_from(text),
            Value::Array(parts) => {
                for part in parts {
                    match part.get("type").and_then(Value::as_str) {
                        Some("thinking") => {
                            let thinking = part.get("thinking").map(thinking_text);
                            if let Some(text) = thinking.filter(|t| !t.is_empty()) {
                                out.reasoning.get_or_insert_with(String::new).push_str(&text);
                            }
                        }
                        _ => {
                            if let Some(text) = part.get("text").and_then(Value::as_str) {
                                out.text.push_str(text);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        out
    }
}

/// The text of a `thinking` part's `thinking`: a string, or text chunks.
fn thinking_text(thinking: &Value) -> String {
    match thinking {
        Value::String(text) => text.clone(),
        Value::Array(chunks) => {
            chunks.iter().filter_map(|c| c.get("text").and_then(Value::as_str)).collect()
        }
        _ => String::new(),
    }
}

/// A chat finish reason; a turn with tool calls that says `stop` (as some servers do) is a
/// `tool_calls` turn. Together says `eos` (the model's end-of-sequence token) for a stop.
pub(crate) fn finish_reason(reason: Option<&str>, has_calls: bool) -> FinishReason {
    match reason {
        Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
        Some("stop" | "eos") | None if has_calls => FinishReason::ToolCalls,
        Some("stop" | "eos") | None => FinishReason::Stop,
        Some("length") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_owned()),
    }
}

/// Refines an OpenAI-style error response: context overflow (OpenAI's
/// `context_length_exceeded`, llama.cpp's `exceed_context_size_error`, vLLM's "maximum
/// context length" message), and an exhausted quota, which a retry does not fix.
pub(crate) fn classify_openai_error(
    status: u16,
    body: &str,
    generic: ProviderError,
) -> ProviderError {
    let Some(error) = error_object(body) else { return generic };
    let message = generic_message(&generic);
    if matches!(status, 400 | 413 | 422) && is_context_overflow(&error) {
        return ProviderError::ContextLengthExceeded { message };
    }
    if status == 429
        && field(&error, "code").or(field(&error, "type")) == Some("insufficient_quota")
    {
        return ProviderError::Other { message: format!("insufficient quota: {message}") };
    }
    generic
}

fn generic_message(error: &ProviderError) -> String {
    match error {
        ProviderError::InvalidRequest { message }
        | ProviderError::Auth { message, .. }
        | ProviderError::RateLimited { message, .. }
        | ProviderError::Server { message, .. }
        | ProviderError::Overloaded { message }
        | ProviderError::ContextLengthExceeded { message }
        | ProviderError::Other { message } => message.clone(),
        other => other.to_string(),
    }
}

fn field<'a>(error: &'a Value, name: &str) -> Option<&'a str> {
    error.get(name).and_then(Value::as_str)
}

/// Whether an OpenAI-style error object says the prompt does not fit the context window.
pub(crate) fn is_context_overflow(error: &Value) -> bool {
    let code = field(error, "code").unwrap_or_default();
    let kind = field(error, "type").unwrap_or_default();
    if matches!(code, "context_length_exceeded") || kind == "exceed_context_size_error" {
        return true;
    }
    let message = field(error, "message").unwrap_or_default().to_ascii_lowercase();
    [
        "maximum context length",
        "context length exceeded",
        "context_length_exceeded",
        "exceeds the available context size",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

/// An error object sent inside a response or a stream (no HTTP status to go by).
pub(crate) fn stream_error(error: &Value) -> ProviderError {
    let message = field(error, "message")
        .map(str::to_owned)
        .unwrap_or_else(|| crate::canonical::to_string(error));
    if is_context_overflow(error) {
        return ProviderError::ContextLengthExceeded { message };
    }
    let status = error.get("code").and_then(Value::as_u64).and_then(|c| u16::try_from(c).ok());
    if let Some(status) = status.filter(|s| (400..600).contains(s)) {
        let body = crate::canonical::to_string(&json!({ "error": error }));
        return super::http::classify_http_error(status, &Default::default(), &body);
    }
    let code = field(error, "code").or(field(error, "type")).unwrap_or_default();
    match code {
        c if c.contains("rate_limit") => {
            ProviderError::RateLimited { message, retry_after_ms: None }
        }
        c if c.contains("overloaded") || c == "slow_down" => ProviderError::Overloaded { message },
        "server_error" | "internal_error" | "api_error" | "internal_server_error" => {
            ProviderError::Server { status: 500, message }
        }
        "invalid_request_error" | "invalid_prompt" | "invalid_request" => {
            ProviderError::InvalidRequest { message }
        }
        "authentication_error" | "invalid_api_key" => ProviderError::Auth { status: 401, message },
        _ => ProviderError::Other { message },
    }
}

/// A chat completion (non-streamed), read leniently: servers leave out or null many fields.
#[derive(Debug, Deserialize)]
struct ChatResponse {
    /// The completion's id (`chatcmpl-…`).
    id: Option<String>,
    /// The model that answered.
    model: Option<String>,
    choices: Option<Vec<ChatChoice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
    /// Perplexity's sources (see [`sources`]).
    citations: Option<Vec<Value>>,
    search_results: Option<Vec<Value>>,
}

/// The chat family's name on the citations it decodes.
pub(crate) const FAMILY: &str = "openai-chat";

/// The sources a chat completion cites, as servers send them beside the choices: Perplexity's
/// `search_results` (title, URL, date), or only their URLs in `citations`, numbered as the
/// text's `[1]`, `[2]` refer to them — as citation objects (`search_results` when given).
fn sources(citations: Option<Vec<Value>>, search_results: Option<Vec<Value>>) -> Vec<Value> {
    match (search_results, citations) {
        (Some(results), _) if !results.is_empty() => results,
        (_, Some(urls)) => urls
            .into_iter()
            .map(|url| match url {
                Value::String(url) => serde_json::json!({"url": url}),
                other => other,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A message annotation (OpenAI's `url_citation`, with its fields under the type's name) as
/// one flat citation object, the shape the Responses API gives it.
fn annotation_citation(annotation: Value) -> Value {
    let kind = annotation.get("type").and_then(Value::as_str).map(str::to_owned);
    match (kind, annotation) {
        (Some(kind), Value::Object(mut fields)) => match fields.remove(&kind) {
            Some(Value::Object(inner)) => {
                let mut flat = serde_json::Map::with_capacity(inner.len() + 1);
                flat.insert("type".into(), Value::String(kind));
                flat.extend(inner);
                Value::Object(flat)
            }
            Some(other) => {
                fields.insert(kind, other);
                Value::Object(fields)
            }
            None => Value::Object(fields),
        },
        (_, annotation) => annotation,
    }
}

#[derive(Debug, Deserialize)]
struct ChatChoice {
    index: Option<u32>,
    message: Option<ChatMessage>,
    finish_reason: Option<String>,
}

/// A choice's message, or a streamed delta.
#[derive(Debug, Default, Deserialize)]
struct ChatMessage {
    content: Option<Value>,
    reasoning_content: Option<Value>,
    reasoning: Option<Value>,
    /// Signed reasoning (OpenRouter and other gateways; see [`details`]).
    reasoning_details: Option<Vec<Value>>,
    refusal: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
    /// Citations of the text (OpenAI's `url_citation`s with web search).
    annotations: Option<Vec<Value>>,
}

impl ChatMessage {
    /// `reasoning_content` (DeepSeek, llama.cpp, vLLM) or `reasoning` (OpenRouter, Groq), or
    /// else the text of `reasoning_details`.
    fn reasoning_text(&self) -> Option<String> {
        [&self.reasoning_content, &self.reasoning]
            .into_iter()
            .find_map(|r| r.as_ref().and_then(Value::as_str).filter(|t| !t.is_empty()))
            .map(str::to_owned)
            .or_else(|| details::text(self.reasoning_details.as_deref()?))
    }
}

#[derive(Debug, Deserialize)]
struct WireToolCall {
    index: Option<u32>,
    id: Option<String>,
    function: Option<WireFunction>,
}

#[derive(Debug, Default, Deserialize)]
struct WireFunction {
    name: Option<String>,
    arguments: Option<Value>,
}

/// The request's cache routing key (`prompt_cache_key`), if its cache policy names one.
pub(crate) fn cache_key(request: &ModelRequest) -> Option<&str> {
    request.cache.as_ref()?.key.as_deref()
}

/// Token usage as OpenAI-style servers report it.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    total_tokens: Option<u64>,
    prompt_tokens_details: Option<TokenDetails>,
    completion_tokens_details: Option<TokenDetails>,
    /// DeepSeek's cache hits, when it sends no `prompt_tokens_details`.
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct TokenDetails {
    cached_tokens: Option<u64>,
    reasoning_tokens: Option<u64>,
    /// Tokens written to the cache (gateways in front of Anthropic and Bedrock).
    cache_write_tokens: Option<u64>,
}

impl WireUsage {
    /// `output` counts reasoning tokens too, as OpenAI's `completion_tokens` does. Some
    /// servers (xAI's chat API) leave reasoning out of `completion_tokens`, which shows in a
    /// `total_tokens` of prompt + completion + reasoning: their reasoning is added back, or the
    /// output (and its cost) would be counted short.
    fn into_usage(self) -> Usage {
        let input = self.prompt_tokens.unwrap_or(0);
        let completion = self.completion_tokens.unwrap_or(0);
        let reasoning =
            self.completion_tokens_details.and_then(|d| d.reasoning_tokens).unwrap_or(0);
        let apart = reasoning > 0
            && self.total_tokens
                == Some(input.saturating_add(completion).saturating_add(reasoning));
        let prompt = self.prompt_tokens_details.unwrap_or_default();
        Usage {
            input,
            output: if apart { completion.saturating_add(reasoning) } else { completion },
            cached_input: prompt.cached_tokens.or(self.prompt_cache_hit_tokens).unwrap_or(0),
            reasoning,
            cache_write_input: prompt.cache_write_tokens.unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests;
