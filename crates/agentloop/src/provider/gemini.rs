//! The Gemini API wire format (`POST /v1beta/models/{model}:generateContent` and
//! `:streamGenerateContent?alt=sse`).
//!
//! [`Gemini`] implements [`WireFormat`] (pure conversion, no I/O) and builds the HTTP
//! providers that speak it over the shared transport ([`HttpProvider`]); the key goes in the
//! `x-goog-api-key` header, never in the URL.
//!
//! ```no_run
//! use agentloop::provider::Gemini;
//!
//! let flash = Gemini::provider("gemini-2.5-flash")?; // GEMINI_API_KEY
//! let thinking = Gemini::with_config(
//!     Gemini::config("gemini-2.5-pro"),
//!     Gemini::new("gemini-2.5-pro").with_thoughts(true),
//! )?;
//! # Ok::<(), agentloop::provider::http::HttpConfigError>(())
//! ```
//!
//! # Mapping
//! - Instructions and every `System` / `Developer` message of the history become the parts of
//!   `systemInstruction`, in order.
//! - `User` and `Tool` messages become `user` contents, `Assistant` messages `model` contents;
//!   consecutive ones of one role are merged, and `functionResponse` parts come first in a user
//!   content (the responses of a turn right after its calls).
//! - Text → `text` parts; images and files → `inlineData` (base64) or `fileData` (URL, with a
//!   `mimeType` guessed from the extension when it is a known one).
//! - **Streamed arguments.** A call may also arrive in pieces (`streamFunctionCallArguments`):
//!   `{name, willContinue: true}`, then `partialArgs` (a JSON path and a value each; a string
//!   continues over pieces that say `willContinue`), then a part without `willContinue`. The
//!   decoder builds the arguments by path and ends the call with them (`partial.rs`).
//! - **Call ids.** Gemini sends whole calls (`functionCall {name, args}`), usually without an
//!   id. The decoder gives each call the id `gemini_<responseId>_<n>` (`n` counts the calls of
//!   the response from 0; a random id stands in for a missing `responseId`), so ids are stable
//!   for the whole stream and unique across turns. A call that came with its own `id` keeps
//!   it. When encoding, `functionCall.id` / `functionResponse.id` are sent only for ids that
//!   Gemini issued (not for `gemini_…` ones), and a `functionResponse` takes its `name` from the
//!   call with the result's `call_id` earlier in the history (a result without such a call is
//!   an `InvalidRequest` error). Its `response` is `{"output": <value or text>}`, or
//!   `{"error": <text>}` for an error result, as the API documents.
//! - Tool schemas are converted to Gemini's OpenAPI subset by [`to_gemini_schema`]:
//!   local `$ref`s are inlined, `oneOf` becomes `anyOf`, `null` types become `nullable`, and
//!   keywords Gemini does not accept are dropped.
//! - **Thought signatures.** A part's `thoughtSignature` becomes `Part::Reasoning { opaque:
//!   {"thoughtSignature": …} }`: on a thought part (`thought: true`) with the thought's text; on
//!   any other part as an empty-text reasoning placed right before that part. Encoding does the
//!   reverse: a signature with text goes back as a thought part, an empty-text one is attached
//!   to the next part of the message (or sent as an empty text part when none follows).
//!   Reasoning without a signature (including Gemini's own unsigned thoughts) is not sent back.
//! - Usage: `input` = `promptTokenCount` + `toolUsePromptTokenCount`, `output` =
//!   `candidatesTokenCount` + `thoughtsTokenCount`, `cached_input` =
//!   `cachedContentTokenCount`, `reasoning` = `thoughtsTokenCount`.
//! - Gemini reports `STOP` also when the model called functions: the finish reason is then
//!   `ToolCalls`.

mod decode;
mod error;
mod partial;
mod schema;

#[cfg(test)]
mod tests;

use super::http::{HttpConfig, HttpConfigError, HttpProvider};
use super::wire::{AuthStyle, StreamDecoder, WireFormat, WireRequest};
use super::{ModelRequest, ModelResponse, ProviderError, ToolChoice};
use crate::message::{MediaSource, Message, Part, Role, ToolCall, ToolResult, ToolResultContent};
use crate::tool::parse_arguments;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

pub use schema::to_gemini_schema;

/// Prefix of the call ids this module makes up for calls Gemini sent without one.
pub const SYNTHETIC_ID_PREFIX: &str = "gemini_";

/// The base URL of the Gemini API (request paths such as
/// `/v1beta/models/{model}:generateContent` are appended).
pub const BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// The environment variable [`Gemini::provider`] reads the API key from.
pub const API_KEY_ENV: &str = "GEMINI_API_KEY";

/// The Gemini `generateContent` wire format for one model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gemini {
    model: String,
    include_thoughts: bool,
    thinking_budget: Option<u32>,
}

impl Gemini {
    /// The API for `model` (e.g. `gemini-2.5-flash`; a leading `models/` is accepted).
    pub fn new(model: impl Into<String>) -> Self {
        let model = model.into();
        let model = model.strip_prefix("models/").map(str::to_owned).unwrap_or(model);
        Self { model, include_thoughts: false, thinking_budget: None }
    }

    /// Asks for thought summaries (`thinkingConfig.includeThoughts`), streamed as reasoning.
    pub fn with_thoughts(mut self, include: bool) -> Self {
        self.include_thoughts = include;
        self
    }

    /// Sets the thinking token budget (`thinkingConfig.thinkingBudget`).
    pub fn with_thinking_budget(mut self, tokens: u32) -> Self {
        self.thinking_budget = Some(tokens);
        self
    }

    /// The model id in the request path.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The Gemini API with `model`: the key comes from `GEMINI_API_KEY` (required), the other
    /// settings are [`config`](Self::config)'s.
    pub fn provider(model: impl Into<String>) -> Result<HttpProvider<Gemini>, HttpConfigError> {
        let model = model.into();
        Self::with_config(Self::config(model.clone()), Self::new(model))
    }

    /// The HTTP configuration of the Gemini API for `model`, to adjust (an explicit key,
    /// timeouts, headers, the retry policy) before building with
    /// [`with_config`](Self::with_config): base URL [`BASE_URL`], the key from
    /// [`API_KEY_ENV`] (required).
    pub fn config(model: impl Into<String>) -> HttpConfig {
        HttpConfig::new(BASE_URL, model).api_key_env(API_KEY_ENV).require_api_key(true)
    }

    /// A provider speaking `format` (its thinking settings) as `config` says. The model id is
    /// the configuration's (a leading `models/` is dropped): it replaces the format's, so the
    /// two never disagree.
    pub fn with_config(
        config: HttpConfig,
        format: Gemini,
    ) -> Result<HttpProvider<Gemini>, HttpConfigError> {
        let format = Self { model: Self::new(config.model()).model, ..format };
        HttpProvider::new(format, config)
    }

    fn generation_config(&self, request: &ModelRequest) -> Map<String, Value> {
        let mut config = Map::new();
        if let Some(temperature) = request.temperature {
            config.insert("temperature".into(), json_f32(temperature));
        }
        if let Some(max_tokens) = request.max_tokens {
            config.insert("maxOutputTokens".into(), json!(max_tokens));
        }
        if let Some(output) = &request.output {
            config.insert("responseMimeType".into(), json!("application/json"));
            if let Some(schema) = schema::to_gemini_schema(&output.schema) {
                config.insert("responseSchema".into(), schema);
            }
        }
        if self.include_thoughts || self.thinking_budget.is_some() {
            let mut thinking = Map::new();
            if self.include_thoughts {
                thinking.insert("includeThoughts".into(), Value::Bool(true));
            }
            if let Some(budget) = self.thinking_budget {
                thinking.insert("thinkingBudget".into(), json!(budget));
            }
            config.insert("thinkingConfig".into(), Value::Object(thinking));
        }
        config
    }
}

/// The family name of this API (its [`WireFormat::name`]), on its opaque parts.
pub(crate) const FAMILY: &str = "gemini";

impl WireFormat for Gemini {
    fn name(&self) -> &'static str {
        FAMILY
    }

    /// `responseSchema` with function calling is refused by the Gemini 2 models: native
    /// output only without tools.
    fn native_output(&self, with_tools: bool) -> bool {
        !with_tools
    }

    fn auth(&self) -> AuthStyle {
        AuthStyle::Header("x-goog-api-key")
    }

    fn encode(&self, request: &ModelRequest, stream: bool) -> Result<WireRequest, ProviderError> {
        let mut body = Map::new();
        // A cache created ahead holds the system instruction and the tools: the API refuses a
        // request that sets them again.
        let cached = request.cache.as_ref().and_then(|c| c.cached_content.as_deref());
        if let Some(name) = cached {
            body.insert("cachedContent".into(), json!(name));
        }
        let system = system_parts(request);
        if !system.is_empty() && cached.is_none() {
            body.insert("systemInstruction".into(), json!({ "parts": system }));
        }
        body.insert("contents".into(), Value::Array(encode_contents(&request.messages)?));
        if !request.tools.is_empty() && cached.is_none() {
            let declarations: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    let mut declaration = Map::new();
                    declaration.insert("name".into(), json!(tool.name));
                    declaration.insert("description".into(), json!(tool.description));
                    if let Some(parameters) = to_gemini_schema(&tool.parameters) {
                        declaration.insert("parameters".into(), parameters);
                    }
                    Value::Object(declaration)
                })
                .collect();
            body.insert("tools".into(), json!([{ "functionDeclarations": declarations }]));
            let config = match &request.tool_choice {
                ToolChoice::Auto => json!({"mode": "AUTO"}),
                ToolChoice::None => json!({"mode": "NONE"}),
                ToolChoice::Required => json!({"mode": "ANY"}),
                ToolChoice::Named(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
            };
            body.insert("toolConfig".into(), json!({ "functionCallingConfig": config }));
        }
        let generation = self.generation_config(request);
        if !generation.is_empty() {
            body.insert("generationConfig".into(), Value::Object(generation));
        }
        let method = if stream { "streamGenerateContent?alt=sse" } else { "generateContent" };
        Ok(WireRequest {
            path: format!("/v1beta/models/{}:{method}", self.model),
            body: Value::Object(body),
            headers: Vec::new(),
        })
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(decode::GeminiDecoder::default())
    }

    fn decode_response(&self, body: &[u8]) -> Result<ModelResponse, ProviderError> {
        decode::decode_response(body)
    }

    fn classify_error(&self, status: u16, body: &str, generic: ProviderError) -> ProviderError {
        error::classify(status, body, generic)
    }
}

/// A float as JSON without `f32 → f64` noise (`0.7`, not `0.699999988079071`).
fn json_f32(value: f32) -> Value {
    value.to_string().parse::<f64>().map_or(Value::Null, |v| json!(v))
}

fn system_parts(request: &ModelRequest) -> Vec<Value> {
    let mut parts = Vec::new();
    if let Some(instructions) = request.instructions.as_deref().filter(|s| !s.is_empty()) {
        parts.push(json!({ "text": instructions }));
    }
    for message in request.messages.iter() {
        if matches!(message.role, Role::System | Role::Developer) {
            let text = message.text();
            if !text.is_empty() {
                parts.push(json!({ "text": text }));
            }
        }
    }
    parts
}

/// One content under construction: function responses are kept apart so that they come first.
struct Turn {
    role: &'static str,
    responses: Vec<Value>,
    parts: Vec<Value>,
}

fn encode_contents(messages: &[Message]) -> Result<Vec<Value>, ProviderError> {
    // The name of every call so far, by id, for the function responses.
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut turns: Vec<Turn> = Vec::new();
    for message in messages {
        let role = match message.role {
            Role::System | Role::Developer => continue,
            Role::User | Role::Tool => "user",
            Role::Assistant => "model",
        };
        let mut responses = Vec::new();
        let mut parts = Vec::new();
        // A signature waiting for the part it belongs to.
        let mut signature: Option<&str> = None;
        for part in &message.content {
            match part {
                Part::ToolResult(result) => {
                    let name = names.get(result.call_id.as_str()).ok_or_else(|| {
                        ProviderError::InvalidRequest {
                            message: format!(
                                "tool result for call id {:?}, which no earlier tool call has",
                                result.call_id
                            ),
                        }
                    })?;
                    responses.push(function_response(result, name));
                    continue;
                }
                Part::Reasoning(reasoning) => {
                    let Some(sig) = thought_signature(reasoning.opaque.as_ref()) else {
                        continue;
                    };
                    if message.role != Role::Assistant {
                        continue;
                    }
                    if let Some(pending) = signature.take() {
                        parts.push(json!({"text": "", "thoughtSignature": pending}));
                    }
                    if reasoning.text.is_empty() {
                        signature = Some(sig);
                    } else {
                        parts.push(
                            json!({"text": reasoning.text, "thought": true, "thoughtSignature": sig}),
                        );
                    }
                    continue;
                }
                Part::ToolCall(call) => {
                    names.insert(&call.id, &call.name);
                }
                _ => {}
            }
            if let Some(mut value) = content_part(part) {
                if let (Some(sig), Value::Object(map)) = (signature.take(), &mut value) {
                    map.insert("thoughtSignature".into(), json!(sig));
                }
                parts.push(value);
            }
        }
        if let Some(pending) = signature.take() {
            parts.push(json!({"text": "", "thoughtSignature": pending}));
        }
        if responses.is_empty() && parts.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(turn) if turn.role == role => {
                turn.responses.extend(responses);
                turn.parts.extend(parts);
            }
            _ => turns.push(Turn { role, responses, parts }),
        }
    }
    Ok(turns
        .into_iter()
        .map(|turn| {
            let mut parts = turn.responses;
            parts.extend(turn.parts);
            json!({"role": turn.role, "parts": parts})
        })
        .collect())
}

/// The signature in a reasoning's opaque data, when Gemini produced it.
fn thought_signature(opaque: Option<&Value>) -> Option<&str> {
    opaque?.get("thoughtSignature")?.as_str()
}

/// The part for text, media and tool calls (`None` for empty text and the kinds handled
/// elsewhere).
fn content_part(part: &Part) -> Option<Value> {
    match part {
        Part::Text { text } if text.is_empty() => None,
        Part::Text { text } => Some(json!({ "text": text })),
        Part::Image { source } | Part::File { source, .. } => Some(media_part(source)),
        Part::ToolCall(call) => Some(function_call(call)),
        // This API's parts without a type of ours (code it ran and its result), as they came;
        // another provider's are left out.
        Part::Opaque(opaque) if opaque.provider == FAMILY => Some(opaque.value.clone()),
        Part::ToolResult(_) | Part::Reasoning(_) | Part::Opaque(_) | Part::Citation(_) => None,
    }
}

fn media_part(source: &MediaSource) -> Value {
    match source {
        MediaSource::Base64 { media_type, data } => {
            json!({"inlineData": {"mimeType": media_type, "data": data}})
        }
        MediaSource::Url { url } => match guess_mime_type(url) {
            Some(mime) => json!({"fileData": {"mimeType": mime, "fileUri": url}}),
            None => json!({"fileData": {"fileUri": url}}),
        },
    }
}

/// The MIME type of a URL's file extension, for the common image and document types.
fn guess_mime_type(url: &str) -> Option<&'static str> {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let (_, extension) = path.rsplit_once('.')?;
    let mime = match extension.to_ascii_lowercase().as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "heic" => "image/heic",
        "heif" => "image/heif",
        "pdf" => "application/pdf",
        _ => return None,
    };
    Some(mime)
}

/// Whether `id` came from Gemini (and so is sent back), rather than from this module.
fn is_gemini_id(id: &str) -> bool {
    !id.is_empty() && !id.starts_with(SYNTHETIC_ID_PREFIX)
}

fn function_call(call: &ToolCall) -> Value {
    let args = match parse_arguments(&call.arguments) {
        Ok(Value::Object(map)) => Value::Object(map),
        _ => Value::Object(Map::new()),
    };
    let mut body = json!({"name": call.name, "args": args});
    if let (true, Value::Object(map)) = (is_gemini_id(&call.id), &mut body) {
        map.insert("id".into(), json!(call.id));
    }
    json!({ "functionCall": body })
}

fn function_response(result: &ToolResult, name: &str) -> Value {
    let response = match (&result.content, result.is_error) {
        (content, true) => json!({ "error": content.to_text() }),
        (ToolResultContent::Text(text), false) => json!({ "output": text }),
        (ToolResultContent::Json(value), false) => json!({ "output": value }),
        (stored @ ToolResultContent::Stored(_), false) => json!({ "output": stored.to_text() }),
    };
    let mut body = json!({"name": name, "response": response});
    if let (true, Value::Object(map)) = (is_gemini_id(&result.call_id), &mut body) {
        map.insert("id".into(), json!(result.call_id));
    }
    json!({ "functionResponse": body })
}
