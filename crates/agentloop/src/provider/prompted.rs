//! Prompted tool calls, for models without native tool calling: the tool schemas and the call
//! format go into the instructions, calls and results in the history become text, and calls
//! are parsed out of the generated text as it streams ([`ToolCallParser`]).
//!
//! [`PromptedTools`] wraps any [`Provider`]; [`PromptedProtocol`] holds the pieces for providers
//! that build on them (the local GGUF provider).

mod parser;

pub use parser::{ToolCallParser, DEFAULT_MAX_CALL_BYTES, MALFORMED_CALL_NAME};

use super::{
    ChunkStream, ModelRequest, ModelResponse, Provider, ProviderError, RetryPolicy, StreamChunk,
    ToolChoice,
};
use crate::canonical;
use crate::message::{FinishReason, Message, Part, Role, ToolCall};
use crate::tool::ToolSpec;
use futures::future::BoxFuture;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// How tool calls are written in the generated text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallFormat {
    /// Hermes / Qwen: `<tool_call>{"name": …, "arguments": {…}}</tool_call>`, results in
    /// `<tool_response>…</tool_response>`.
    #[default]
    Hermes,
    /// Seed 003's XML calls: `<tool>{"server_name": …, "tool_name": …, "arguments": {…}}</tool>`,
    /// results in `<tool_result>…</tool_result>`.
    ServerTool,
}

/// Which tool-call protocol an agent uses with its provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "format")]
pub enum ToolProtocol {
    /// Native tool calling when the provider supports it ([`Provider::supports_tools`]),
    /// else prompted calls in the Hermes format.
    #[default]
    Auto,
    /// The provider's native tool calling, always.
    Native,
    /// Prompted calls in this format, always.
    Prompted(ToolCallFormat),
}

impl ToolProtocol {
    /// The prompted format to use with a provider, or `None` for native calls.
    pub fn prompted_format(self, provider: &dyn Provider) -> Option<ToolCallFormat> {
        match self {
            Self::Auto => (!provider.supports_tools()).then_some(ToolCallFormat::Hermes),
            Self::Native => None,
            Self::Prompted(format) => Some(format),
        }
    }
}

/// The prompted protocol: how tools are described, how calls and results are written, and how
/// calls are read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptedProtocol {
    format: ToolCallFormat,
    server_name: String,
    /// The longest call body read back ([`DEFAULT_MAX_CALL_BYTES`]).
    max_call_bytes: usize,
}

impl Default for PromptedProtocol {
    fn default() -> Self {
        Self::new(ToolCallFormat::Hermes)
    }
}

impl PromptedProtocol {
    /// The protocol in this format (server name `agentloop` for [`ToolCallFormat::ServerTool`]).
    pub fn new(format: ToolCallFormat) -> Self {
        Self { format, server_name: "agentloop".to_owned(), max_call_bytes: DEFAULT_MAX_CALL_BYTES }
    }

    /// Sets the longest call body read back (default [`DEFAULT_MAX_CALL_BYTES`], 8 MiB): a
    /// longer call without its closing tag ends the response with a protocol error.
    pub fn with_max_call_bytes(mut self, max: usize) -> Self {
        self.max_call_bytes = max;
        self
    }

    /// Sets the `server_name` written in [`ToolCallFormat::ServerTool`] calls.
    pub fn with_server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = name.into();
        self
    }

    /// The format.
    pub fn format(&self) -> ToolCallFormat {
        self.format
    }

    /// The opening and closing tags of a call.
    pub fn call_tags(&self) -> (&'static str, &'static str) {
        match self.format {
            ToolCallFormat::Hermes => ("<tool_call>", "</tool_call>"),
            ToolCallFormat::ServerTool => ("<tool>", "</tool>"),
        }
    }

    /// The JSON body of a call (without the tags), keys in the order the prompt shows them.
    /// Argument text that is not JSON is embedded as a string.
    pub fn call_body(&self, name: &str, arguments: &str) -> String {
        let arguments = match crate::tool::parse_arguments(arguments) {
            Ok(value) => canonical::to_string(&value),
            Err(_) => Value::String(arguments.to_owned()).to_string(),
        };
        format!("{}{arguments}}}", self.body_head(name))
    }

    /// The body of a call up to its arguments, e.g. `{"name": "add", "arguments": `.
    fn body_head(&self, name: &str) -> String {
        let name = Value::String(name.to_owned());
        match self.format {
            ToolCallFormat::Hermes => format!("{{\"name\": {name}, \"arguments\": "),
            ToolCallFormat::ServerTool => format!(
                "{{\"server_name\": {}, \"tool_name\": {name}, \"arguments\": ",
                Value::String(self.server_name.clone())
            ),
        }
    }

    /// The text of a call before its arguments (opening tag included): a call is
    /// `call_prefix(name)`, the argument JSON, then [`call_suffix`](Self::call_suffix).
    pub fn call_prefix(&self, name: &str) -> String {
        format!("{}\n{}", self.call_tags().0, self.body_head(name))
    }

    /// The text of a call after its arguments (closing tag included).
    pub fn call_suffix(&self) -> String {
        format!("}}\n{}", self.call_tags().1)
    }

    /// A whole call as the model writes it.
    pub fn call_text(&self, name: &str, arguments: &str) -> String {
        let (open, close) = self.call_tags();
        format!("{open}\n{}\n{close}", self.call_body(name, arguments))
    }

    /// The text that describes the tools and the call format (appended to the instructions).
    pub fn tools_prompt(&self, tools: &[ToolSpec], choice: &ToolChoice) -> String {
        let mut out = String::from(
            "# Tools\n\nYou may call one or more tools to assist with the user query.\n\n",
        );
        out.push_str(
            "You are provided with tool signatures within <tools></tools> XML tags:\n<tools>\n",
        );
        for tool in tools {
            let parameters = prompt_schema(&tool.parameters);
            let parameters = canonical::Sorted(&parameters);
            // The wrapper in the order the chat templates write it (type, then the function's
            // name, description and parameters); the schema's own keys sorted.
            let line = match self.format {
                ToolCallFormat::Hermes => serde_json::to_string(&HermesTool {
                    kind: "function",
                    function: HermesFunction {
                        name: &tool.name,
                        description: &tool.description,
                        parameters,
                    },
                }),
                ToolCallFormat::ServerTool => serde_json::to_string(&ServerToolLine {
                    server_name: &self.server_name,
                    tool_name: &tool.name,
                    description: &tool.description,
                    input_schema: parameters,
                }),
            };
            out.push_str(&line.unwrap_or_default());
            out.push('\n');
        }
        out.push_str("</tools>\n\n");
        let (open, close) = self.call_tags();
        let example = match self.format {
            ToolCallFormat::Hermes => {
                "{\"name\": <tool-name>, \"arguments\": <args-json-object>}".to_owned()
            }
            ToolCallFormat::ServerTool => format!(
                "{{\"server_name\": {}, \"tool_name\": <tool-name>, \"arguments\": <args-json-object>}}",
                Value::String(self.server_name.clone())
            ),
        };
        out.push_str(&format!(
            "For each tool call, return a json object with the tool name and arguments within {open}{close} XML tags:\n{open}\n{example}\n{close}"
        ));
        match choice {
            ToolChoice::Required => out.push_str("\n\nYou must call at least one tool now."),
            ToolChoice::Named(name) => {
                out.push_str(&format!("\n\nYou must call the tool \"{name}\" now."));
            }
            ToolChoice::Auto | ToolChoice::None => {}
        }
        out
    }

    /// The text of a tool result message for the model.
    pub fn result_text(&self, name: Option<&str>, content: &str, is_error: bool) -> String {
        let content = if is_error && !content.starts_with("Error") {
            format!("Error: {content}")
        } else {
            content.to_owned()
        };
        match self.format {
            ToolCallFormat::Hermes => format!("<tool_response>\n{content}\n</tool_response>"),
            ToolCallFormat::ServerTool => {
                let body = canonical::to_string(
                    &json!({"server_name": self.server_name, "tool_name": name, "content": content}),
                );
                format!("<tool_result>\n{body}\n</tool_result>")
            }
        }
    }

    /// The request for a model without tool support: the tools and the call format in the
    /// instructions (unless `tool_choice` is `none` or there are no tools), no `tools`, calls
    /// and results in the history as text (results as user messages), reasoning dropped.
    pub fn rewrite(&self, mut request: ModelRequest) -> ModelRequest {
        let tools = std::mem::take(&mut request.tools);
        if !tools.is_empty() && request.tool_choice != ToolChoice::None {
            let prompt = self.tools_prompt(&tools, &request.tool_choice);
            request.instructions = Some(match request.instructions.take() {
                Some(instructions) if !instructions.is_empty() => {
                    format!("{instructions}\n\n{prompt}")
                }
                _ => prompt,
            });
        }
        request.tool_choice = ToolChoice::None;
        if request.messages.iter().any(needs_rewrite) {
            request.messages = Arc::new(self.rewrite_messages(&request.messages));
        }
        request
    }

    /// The history with calls and results as text.
    pub fn rewrite_messages(&self, messages: &[Message]) -> Vec<Message> {
        let names: HashMap<&str, &str> = messages
            .iter()
            .flat_map(Message::tool_calls)
            .map(|call: &ToolCall| (call.id.as_str(), call.name.as_str()))
            .collect();
        messages
            .iter()
            .map(|message| {
                if !needs_rewrite(message) {
                    return message.clone();
                }
                let mut texts = Vec::new();
                let mut other = Vec::new();
                for part in &message.content {
                    match part {
                        Part::Text { text } => texts.push(text.clone()),
                        Part::ToolCall(call) => {
                            texts.push(self.call_text(&call.name, &call.arguments))
                        }
                        Part::ToolResult(result) => texts.push(self.result_text(
                            names.get(result.call_id.as_str()).copied(),
                            &result.content.to_text(),
                            result.is_error,
                        )),
                        Part::Reasoning(_) => {}
                        // The inner provider's encoder decides (its own kind goes back).
                        Part::Image { .. }
                        | Part::File { .. }
                        | Part::Opaque(_)
                        | Part::Citation(_) => other.push(part.clone()),
                    }
                }
                let role = if message.role == Role::Tool { Role::User } else { message.role };
                let mut content = other;
                content.insert(0, Part::text(texts.join("\n")));
                Message { role, content }
            })
            .collect()
    }

    /// Parses calls out of a text stream: text deltas go through a [`ToolCallParser`], other
    /// chunks pass; a turn with calls finishes with `tool_calls` (also when the model rambled on
    /// to the token limit after a complete call).
    pub fn parse_stream(&self, inner: ChunkStream) -> ChunkStream {
        let max_call_bytes = self.max_call_bytes;
        Box::pin(async_stream::stream! {
            let mut parser = ToolCallParser::new().with_max_call_bytes(max_call_bytes);
            let mut inner = inner;
            let mut out = Vec::new();
            let mut finished = false;
            while let Some(item) = inner.next().await {
                match item {
                    Ok(StreamChunk::TextDelta { text }) => {
                        parser.push(&text, &mut out);
                        if parser.overflowed() {
                            for chunk in out.drain(..) {
                                yield Ok(chunk);
                            }
                            yield Err(ProviderError::Protocol {
                                message: format!(
                                    "a prompted tool call is longer than {} bytes without its \
                                     closing tag (the model's output is not a call)",
                                    parser.max_call_bytes()
                                ),
                                excerpt: String::new(),
                            });
                            return;
                        }
                    }
                    Ok(StreamChunk::Finish { reason }) => {
                        let reason = finish_with(&mut parser, reason, &mut out);
                        out.push(StreamChunk::Finish { reason });
                        finished = true;
                    }
                    Ok(chunk) => out.push(chunk),
                    Err(error) => {
                        for chunk in out.drain(..) {
                            yield Ok(chunk);
                        }
                        yield Err(error);
                        return;
                    }
                }
                for chunk in out.drain(..) {
                    yield Ok(chunk);
                }
            }
            if !finished {
                parser.finish(true, &mut out);
                for chunk in out.drain(..) {
                    yield Ok(chunk);
                }
            }
        })
    }
}

/// Ends the parser for this finish reason and gives the reason to report.
fn finish_with(
    parser: &mut ToolCallParser,
    reason: FinishReason,
    out: &mut Vec<StreamChunk>,
) -> FinishReason {
    // A call cut by the token limit is dropped unless its body is whole JSON.
    parser.finish(reason != FinishReason::Length, out);
    if parser.calls() > 0
        && matches!(reason, FinishReason::Stop | FinishReason::Length | FinishReason::Other(_))
    {
        FinishReason::ToolCalls
    } else {
        reason
    }
}

/// Whether a message holds parts a tool-less model cannot take.
fn needs_rewrite(message: &Message) -> bool {
    message.role == Role::Tool
        || message.content.iter().any(|part| {
            matches!(part, Part::ToolCall(_) | Part::ToolResult(_) | Part::Reasoning(_))
        })
}

/// A tool's parameter schema as a small model should read it: the bookkeeping a schema
/// generator adds (`$schema`, `title`, the root `description` that repeats the tool's own, and
/// machine formats such as `int64` or `double` that the type already says) is left out; what
/// constrains a value (types, `enum`, `required`, bounds, `pattern`, nested objects) is kept.
pub fn prompt_schema(schema: &Value) -> Value {
    strip_schema(schema, true)
}

/// The longest `pattern` a prompt schema keeps.
const MAX_PROMPT_PATTERN: usize = 64;

fn strip_schema(schema: &Value, root: bool) -> Value {
    const MACHINE_FORMATS: &[&str] = &[
        "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float",
        "double",
    ];
    match schema {
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (key, value) in map {
                let drop = match key.as_str() {
                    "$schema" | "title" => true,
                    "description" => root,
                    "format" => value.as_str().is_some_and(|f| MACHINE_FORMATS.contains(&f)),
                    // A long pattern is for the validator (and a grammar), not for a model to
                    // read: it would cost hundreds of prompt tokens and say little.
                    "pattern" => value.as_str().is_some_and(|p| p.len() > MAX_PROMPT_PATTERN),
                    _ => false,
                };
                if drop {
                    continue;
                }
                let value = match key.as_str() {
                    // Maps from names to schemas.
                    "properties" | "$defs" | "definitions" | "patternProperties" => match value {
                        Value::Object(named) => Value::Object(
                            named
                                .iter()
                                .map(|(k, v)| (k.clone(), strip_schema(v, false)))
                                .collect(),
                        ),
                        other => other.clone(),
                    },
                    // Schemas, or lists of schemas.
                    "items"
                    | "additionalProperties"
                    | "anyOf"
                    | "oneOf"
                    | "allOf"
                    | "not"
                    | "prefixItems" => match value {
                        Value::Array(list) => {
                            Value::Array(list.iter().map(|v| strip_schema(v, false)).collect())
                        }
                        schema => strip_schema(schema, false),
                    },
                    // Values (`enum`, `default`, `examples`, …) stay as they are.
                    _ => value.clone(),
                };
                out.insert(key.clone(), value);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// A provider wrapper that gives any model tool calls through the prompt (see the module
/// documentation). It reports [`supports_tools`](Provider::supports_tools); both
/// [`stream`](Provider::stream) and [`complete`](Provider::complete) rewrite the request and
/// parse the calls out of the text (`complete` calls the inner provider's `complete`, so a
/// provider that does not stream is not made to); every other [`Provider`] method is the
/// inner provider's.
#[derive(Debug, Clone)]
pub struct PromptedTools<P> {
    inner: P,
    protocol: PromptedProtocol,
}

impl<P: Provider> PromptedTools<P> {
    /// Wraps `inner` with the Hermes format.
    pub fn new(inner: P) -> Self {
        Self { inner, protocol: PromptedProtocol::default() }
    }

    /// Wraps `inner` with this protocol.
    pub fn with_protocol(inner: P, protocol: PromptedProtocol) -> Self {
        Self { inner, protocol }
    }

    /// The protocol.
    pub fn protocol(&self) -> &PromptedProtocol {
        &self.protocol
    }

    /// The wrapped provider.
    pub fn into_inner(self) -> P {
        self.inner
    }
}

impl<P: Provider> Provider for PromptedTools<P> {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let request = self.protocol.rewrite(request);
        self.protocol.parse_stream(self.inner.stream(request))
    }

    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        let request = self.protocol.rewrite(request);
        let whole = self.inner.complete(request);
        // The whole response goes through the same parser as a stream would.
        let chunks: ChunkStream = Box::pin(futures::stream::once(whole).flat_map(|response| {
            futures::stream::iter(match response {
                Ok(response) => super::sse::response_chunks(response).into_iter().map(Ok).collect(),
                Err(error) => vec![Err(error)],
            })
        }));
        Box::pin(super::collect(self.protocol.parse_stream(chunks)))
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn streams(&self) -> bool {
        self.inner.streams()
    }

    fn retry_policy(&self) -> Option<RetryPolicy> {
        self.inner.retry_policy()
    }

    fn family(&self) -> &str {
        self.inner.family()
    }

    fn supports_tools(&self) -> bool {
        true
    }

    /// A constrained answer could not hold a prompted tool call: native output only for a
    /// request without tools.
    fn native_output(&self, with_tools: bool) -> bool {
        !with_tools && self.inner.native_output(false)
    }
    fn secrets(&self) -> super::secrets::Secrets {
        self.inner.secrets()
    }
}

/// A tool as the Hermes format lists it.
#[derive(serde::Serialize)]
struct HermesTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: HermesFunction<'a>,
}

#[derive(serde::Serialize)]
struct HermesFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: canonical::Sorted<'a>,
}

/// A tool as the server-tool format lists it.
#[derive(serde::Serialize)]
struct ServerToolLine<'a> {
    server_name: &'a str,
    tool_name: &'a str,
    description: &'a str,
    input_schema: canonical::Sorted<'a>,
}

#[cfg(test)]
mod tests;
