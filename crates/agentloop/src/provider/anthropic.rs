//! The Anthropic Messages wire format (`POST /v1/messages`), as spoken by Anthropic and by
//! compatible servers (llama.cpp's `llama-server` serves it too).
//!
//! [`Anthropic`] implements [`WireFormat`] (pure conversion, no I/O) and builds the HTTP
//! providers that speak it over the shared transport ([`HttpProvider`]):
//!
//! ```no_run
//! use agentloop::provider::http::HttpConfig;
//! use agentloop::provider::Anthropic;
//!
//! let claude = Anthropic::provider("claude-sonnet-4-5")?; // ANTHROPIC_API_KEY
//! let thinking = Anthropic::with_config(
//!     Anthropic::config("claude-sonnet-4-5"),
//!     Anthropic::messages("claude-sonnet-4-5").with_thinking(2048),
//! )?;
//! // llama.cpp's `llama-server` serves the Messages API at `/v1/messages`:
//! let local = Anthropic::compatible("http://127.0.0.1:8080", "local")?;
//! # Ok::<(), agentloop::provider::http::HttpConfigError>(())
//! ```
//!
//! # Mapping
//! - Instructions and every `System` / `Developer` message of the history (in order, joined by
//!   a blank line) become the top-level `system` string: the API has no system role.
//! - `User` and `Tool` messages become `user` messages, `Assistant` messages `assistant`
//!   messages; consecutive messages of one role are merged into one (the API wants roles to
//!   alternate), and in a user message all `tool_result` blocks come first (the API wants the
//!   results of a turn right after the turn, in one user message).
//! - Text → `text` blocks (empty ones are left out: the API rejects them); images → `image`
//!   blocks with a `base64` or `url` source; files → `document` blocks (PDF) with the same
//!   sources; tool calls → `tool_use` blocks whose `input` is the parsed argument text (text that
//!   is not a JSON object is sent as `{}`: the model was already told, in the tool result, that
//!   its arguments were invalid); tool results → `tool_result` blocks with `is_error`.
//! - Thinking: a `thinking` block becomes `Part::Reasoning { text, opaque:
//!   {"type":"thinking","signature":…} }`, a `redacted_thinking` block `Part::Reasoning { text:
//!   "", opaque: {"type":"redacted_thinking","data":…} }`; both are sent back exactly so on the
//!   next turn. Reasoning without such an opaque value (e.g. from another provider) is not sent.
//! - Usage: `input` = `input_tokens` + `cache_read_input_tokens` +
//!   `cache_creation_input_tokens` (Anthropic's `input_tokens` counts only the uncached rest of
//!   the prompt), `cached_input` = `cache_read_input_tokens`, `cache_write_input` =
//!   `cache_creation_input_tokens`. Anthropic does not report thinking tokens apart, so
//!   `reasoning` stays 0 (they are part of `output`).
//! - Prompt caching: `cache_control` breakpoints as the request's (else the format's)
//!   [`CachePolicy`] places them (`anthropic/cache.rs`; `docs/PROVIDERS.md`, "Prompt caching").

mod cache;
mod decode;
mod error;

#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod testutil;

use super::http::{HttpConfig, HttpConfigError, HttpProvider};
use super::wire::{AuthStyle, StreamDecoder, WireFormat, WireRequest};
use super::{CachePolicy, ModelRequest, ModelResponse, ProviderError, ToolChoice};
use crate::message::{MediaSource, Message, Part, Reasoning, Role, ToolCall, ToolResult};
use crate::tool::parse_arguments;
use serde_json::{json, Map, Value};

/// The `anthropic-version` header value this format speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `max_tokens` sent when the request sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The base URL of Anthropic's API (request paths such as `/v1/messages` are appended).
pub const BASE_URL: &str = "https://api.anthropic.com";

/// The environment variable [`Anthropic::provider`] reads the API key from.
pub const API_KEY_ENV: &str = "ANTHROPIC_API_KEY";

/// The Anthropic Messages wire format for one model: what to send to `/v1/messages` and how
/// to read what comes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anthropic {
    model: String,
    default_max_tokens: u32,
    thinking_budget: Option<u32>,
    cache: CachePolicy,
}

impl Anthropic {
    /// The Messages API for `model` (e.g. `claude-sonnet-4-5`), caching with automatic
    /// breakpoints ([`CachePolicy::auto`]).
    pub fn messages(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            default_max_tokens: DEFAULT_MAX_TOKENS,
            thinking_budget: None,
            cache: CachePolicy::auto(),
        }
    }

    /// Sets the prompt-cache policy of requests that carry none of their own (an agent's
    /// [`cache`](crate::agent::AgentBuilder::cache) wins). Default: automatic breakpoints;
    /// [`compatible`](Self::compatible) servers: off.
    pub fn with_cache(mut self, policy: CachePolicy) -> Self {
        self.cache = policy;
        self
    }

    /// Sets the `max_tokens` sent when a request has none (default [`DEFAULT_MAX_TOKENS`]).
    pub fn with_default_max_tokens(mut self, max_tokens: u32) -> Self {
        self.default_max_tokens = max_tokens;
        self
    }

    /// Turns on extended thinking with this token budget (`thinking: {type: "enabled",
    /// budget_tokens}`). A request without `max_tokens` then gets the budget plus the default
    /// `max_tokens`, since the API wants the budget below `max_tokens`.
    pub fn with_thinking(mut self, budget_tokens: u32) -> Self {
        self.thinking_budget = Some(budget_tokens);
        self
    }

    /// The model id sent in every request.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Anthropic's API with `model`: the key comes from `ANTHROPIC_API_KEY` (required), the
    /// other settings are [`config`](Self::config)'s.
    pub fn provider(model: impl Into<String>) -> Result<HttpProvider<Anthropic>, HttpConfigError> {
        let model = model.into();
        Self::with_config(Self::config(model.clone()), Self::messages(model))
    }

    /// The HTTP configuration of Anthropic's API for `model`, to adjust (an explicit key,
    /// timeouts, headers such as `anthropic-beta`, the retry policy) before building with
    /// [`with_config`](Self::with_config): base URL [`BASE_URL`], the key from
    /// [`API_KEY_ENV`] (required).
    pub fn config(model: impl Into<String>) -> HttpConfig {
        HttpConfig::new(BASE_URL, model).api_key_env(API_KEY_ENV).require_api_key(true)
    }

    /// An Anthropic-compatible server at `base_url`, the URL that `/v1/messages` is appended to
    /// (e.g. `http://127.0.0.1:8080` for llama.cpp's `llama-server`), with no API key. For a
    /// key, build with [`with_config`](Self::with_config) and
    /// [`HttpConfig::api_key_env`] or [`HttpConfig::api_key`] (sent as `x-api-key`).
    pub fn compatible(
        base_url: impl Into<String>,
        model: impl Into<String>,
    ) -> Result<HttpProvider<Anthropic>, HttpConfigError> {
        let model = model.into();
        let format = Self::messages(model.clone()).with_cache(CachePolicy::off());
        Self::with_config(HttpConfig::new(base_url, model), format)
    }

    /// A provider speaking `format` (its thinking budget and default `max_tokens`) as
    /// `config` says. The model id is the configuration's: it replaces the format's, so the
    /// two never disagree.
    pub fn with_config(
        config: HttpConfig,
        format: Anthropic,
    ) -> Result<HttpProvider<Anthropic>, HttpConfigError> {
        let format = Self { model: config.model().to_owned(), ..format };
        HttpProvider::new(format, config)
    }

    fn max_tokens(&self, request: &ModelRequest) -> u32 {
        request.max_tokens.unwrap_or(match self.thinking_budget {
            Some(budget) => budget.saturating_add(self.default_max_tokens),
            None => self.default_max_tokens,
        })
    }
}

/// The family name of this API (its [`WireFormat::name`]), on its opaque blocks.
pub(crate) const FAMILY: &str = "anthropic";

impl WireFormat for Anthropic {
    fn name(&self) -> &'static str {
        FAMILY
    }

    fn native_output(&self, _with_tools: bool) -> bool {
        true
    }

    fn auth(&self) -> AuthStyle {
        AuthStyle::Header("x-api-key")
    }

    fn encode(&self, request: &ModelRequest, stream: bool) -> Result<WireRequest, ProviderError> {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        body.insert("max_tokens".into(), json!(self.max_tokens(request)));
        if let Some(system) = system_text(request) {
            body.insert("system".into(), Value::String(system));
        }
        let (messages, ends) = encode_messages(&request.messages);
        body.insert("messages".into(), Value::Array(messages));
        if let Some(temperature) = request.temperature {
            body.insert("temperature".into(), json_f32(temperature));
        }
        if let Some(budget) = self.thinking_budget {
            body.insert("thinking".into(), json!({"type": "enabled", "budget_tokens": budget}));
        }
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "name": tool.name,
                        "description": tool.description,
                        "input_schema": tool.parameters,
                    })
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
            let choice = match &request.tool_choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Required => json!({"type": "any"}),
                ToolChoice::Named(name) => json!({"type": "tool", "name": name}),
            };
            body.insert("tool_choice".into(), choice);
        }
        if let Some(output) = &request.output {
            // Structured outputs (GA): every object closed, as the API requires.
            let format = json!({"type": "json_schema", "schema": output.closed_schema()});
            body.insert("output_config".into(), json!({ "format": format }));
        }
        cache::mark(request.cache.as_ref().unwrap_or(&self.cache), &ends, &mut body)?;
        if stream {
            body.insert("stream".into(), Value::Bool(true));
        }
        Ok(WireRequest {
            path: "/v1/messages".into(),
            body: Value::Object(body),
            headers: vec![("anthropic-version".into(), ANTHROPIC_VERSION.into())],
        })
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(decode::AnthropicDecoder::default())
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

/// Instructions plus the text of every system / developer message, joined by blank lines.
fn system_text(request: &ModelRequest) -> Option<String> {
    let mut pieces: Vec<String> = Vec::new();
    if let Some(instructions) = request.instructions.as_deref().filter(|s| !s.is_empty()) {
        pieces.push(instructions.to_owned());
    }
    for message in request.messages.iter() {
        if matches!(message.role, Role::System | Role::Developer) {
            let text = message.text();
            if !text.is_empty() {
                pieces.push(text);
            }
        }
    }
    (!pieces.is_empty()).then(|| pieces.join("\n\n"))
}

/// One API message under construction: tool results are kept apart so that they come first.
struct Turn {
    role: &'static str,
    results: Vec<Value>,
    blocks: Vec<Value>,
}

/// Where a message's last block went in its turn under construction.
#[derive(Clone, Copy)]
enum Last {
    Result(usize),
    Block(usize),
}

/// The API messages, and for each of `messages` where its last block is in them (the API
/// message's index and the block's), for cache breakpoints; `None` for a message that sends
/// nothing.
fn encode_messages(messages: &[Message]) -> (Vec<Value>, Vec<Option<(usize, usize)>>) {
    let mut turns: Vec<Turn> = Vec::new();
    let mut lasts: Vec<Option<(usize, Last)>> = Vec::with_capacity(messages.len());
    for message in messages {
        lasts.push(None);
        let role = match message.role {
            Role::System | Role::Developer => continue,
            Role::User | Role::Tool => "user",
            Role::Assistant => "assistant",
        };
        let mut results = Vec::new();
        let mut blocks: Vec<Value> = Vec::new();
        for part in &message.content {
            match part {
                Part::ToolResult(result) => results.push(tool_result_block(result)),
                // This API's citations go back on the text block they follow.
                Part::Citation(citation) if citation.provider == FAMILY => {
                    let text = blocks.iter_mut().rev().find(|b| b["type"] == "text");
                    if let Some(Value::Object(block)) = text {
                        let list = block.entry("citations").or_insert_with(|| json!([]));
                        if let Value::Array(list) = list {
                            list.push(citation.value.clone());
                        }
                    }
                }
                Part::Reasoning(reasoning) if message.role == Role::Assistant => {
                    blocks.extend(reasoning_block(reasoning));
                }
                Part::Reasoning(_) => {}
                other => blocks.extend(content_block(other)),
            }
        }
        if results.is_empty() && blocks.is_empty() {
            continue;
        }
        if !matches!(turns.last(), Some(turn) if turn.role == role) {
            turns.push(Turn { role, results: Vec::new(), blocks: Vec::new() });
        }
        let index = turns.len() - 1;
        if let Some(turn) = turns.last_mut() {
            let last = if blocks.is_empty() {
                Last::Result(turn.results.len() + results.len() - 1)
            } else {
                Last::Block(turn.blocks.len() + blocks.len() - 1)
            };
            turn.results.extend(results);
            turn.blocks.extend(blocks);
            if let Some(slot) = lasts.last_mut() {
                *slot = Some((index, last));
            }
        }
    }
    let ends = lasts
        .into_iter()
        .map(|last| {
            let (index, last) = last?;
            let turn = turns.get(index)?;
            Some(match last {
                Last::Result(at) => (index, at),
                Last::Block(at) => (index, turn.results.len() + at),
            })
        })
        .collect();
    let turns = turns
        .into_iter()
        .map(|turn| {
            let mut content = turn.results;
            content.extend(turn.blocks);
            json!({"role": turn.role, "content": content})
        })
        .collect();
    (turns, ends)
}

/// The block for a text, media or tool-call part (`None` for empty text).
fn content_block(part: &Part) -> Option<Value> {
    match part {
        Part::Text { text } if text.is_empty() => None,
        Part::Text { text } => Some(json!({"type": "text", "text": text})),
        Part::Image { source } => Some(json!({"type": "image", "source": media_source(source)})),
        Part::File { source, filename } => {
            let mut block = json!({"type": "document", "source": media_source(source)});
            if let (Some(name), Value::Object(map)) = (filename, &mut block) {
                map.insert("title".into(), json!(name));
            }
            Some(block)
        }
        Part::ToolCall(call) => Some(tool_use_block(call)),
        Part::ToolResult(result) => Some(tool_result_block(result)),
        Part::Reasoning(reasoning) => reasoning_block(reasoning),
        // This API's blocks without a type of ours (a server tool's call and result), as they
        // came; another provider's are left out.
        Part::Opaque(opaque) => (opaque.provider == FAMILY).then(|| opaque.value.clone()),
        // Attached to the text block before it (see `encode_messages`).
        Part::Citation(_) => None,
    }
}

fn media_source(source: &MediaSource) -> Value {
    match source {
        MediaSource::Url { url } => json!({"type": "url", "url": url}),
        MediaSource::Base64 { media_type, data } => {
            json!({"type": "base64", "media_type": media_type, "data": data})
        }
    }
}

fn tool_use_block(call: &ToolCall) -> Value {
    let input = match parse_arguments(&call.arguments) {
        Ok(Value::Object(map)) => Value::Object(map),
        _ => Value::Object(Map::new()),
    };
    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
}

fn tool_result_block(result: &ToolResult) -> Value {
    let mut block = json!({
        "type": "tool_result",
        "tool_use_id": result.call_id,
        "content": result.content.to_text(),
    });
    if let (true, Value::Object(map)) = (result.is_error, &mut block) {
        map.insert("is_error".into(), Value::Bool(true));
    }
    block
}

/// The `thinking` / `redacted_thinking` block for reasoning this format produced; `None` for
/// reasoning without an Anthropic signature, which the API would reject.
fn reasoning_block(reasoning: &Reasoning) -> Option<Value> {
    let opaque = reasoning.opaque.as_ref()?.as_object()?;
    match opaque.get("type")?.as_str()? {
        "thinking" => {
            let signature = opaque.get("signature")?.as_str()?;
            Some(json!({"type": "thinking", "thinking": reasoning.text, "signature": signature}))
        }
        "redacted_thinking" => {
            let data = opaque.get("data")?.as_str()?;
            Some(json!({"type": "redacted_thinking", "data": data}))
        }
        _ => None,
    }
}
