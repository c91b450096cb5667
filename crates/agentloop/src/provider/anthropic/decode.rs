//! Reading Anthropic responses: the streamed events and the whole-message body.

use super::error::{stream_error, ApiError};
use crate::message::{
    Citation, FinishReason, Message, Opaque, Part, Reasoning, Role, ToolCall, Usage,
};
use crate::provider::wire::{ResponseInfoOnce, StreamDecoder};
use crate::provider::{ModelResponse, ProviderError, StreamChunk};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

/// Token counts as Anthropic reports them. Every field is optional: a `message_delta` carries
/// only what changed.
#[derive(Debug, Default, Clone, Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    /// With server-side context compaction, one entry per sampling iteration of the response
    /// (the compaction, then the message); the top-level counts are the last iteration's
    /// only, so the response's usage is the sum of these.
    #[serde(default)]
    iterations: Option<Vec<IterationUsage>>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(super) struct IterationUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
}

impl WireUsage {
    /// Takes every field `newer` reports (the API's counts are cumulative).
    fn merge(&mut self, newer: WireUsage) {
        self.input_tokens = newer.input_tokens.or(self.input_tokens);
        self.output_tokens = newer.output_tokens.or(self.output_tokens);
        self.cache_read_input_tokens =
            newer.cache_read_input_tokens.or(self.cache_read_input_tokens);
        self.cache_creation_input_tokens =
            newer.cache_creation_input_tokens.or(self.cache_creation_input_tokens);
        if newer.iterations.is_some() {
            self.iterations = newer.iterations;
        }
    }

    /// Canonical usage: the prompt total includes cache reads and cache writes; with
    /// iterations, the sum over them (every iteration was billed).
    fn to_usage(&self) -> Usage {
        let usage = |input: u64, output: u64, read: u64, written: u64| Usage {
            input: input.saturating_add(read).saturating_add(written),
            output,
            cached_input: read,
            reasoning: 0,
            cache_write_input: written,
        };
        match self.iterations.as_deref() {
            Some(iterations) if !iterations.is_empty() => {
                iterations.iter().fold(Usage::default(), |total, i| {
                    let one = usage(
                        i.input_tokens,
                        i.output_tokens,
                        i.cache_read_input_tokens,
                        i.cache_creation_input_tokens,
                    );
                    Usage {
                        input: total.input.saturating_add(one.input),
                        output: total.output.saturating_add(one.output),
                        cached_input: total.cached_input.saturating_add(one.cached_input),
                        reasoning: 0,
                        cache_write_input: total
                            .cache_write_input
                            .saturating_add(one.cache_write_input),
                    }
                })
            }
            _ => usage(
                self.input_tokens.unwrap_or(0),
                self.output_tokens.unwrap_or(0),
                self.cache_read_input_tokens.unwrap_or(0),
                self.cache_creation_input_tokens.unwrap_or(0),
            ),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartedMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: BlockStart,
    },
    ContentBlockDelta {
        index: u64,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: u64,
    },
    MessageDelta {
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: ApiError,
    },
    /// Event types added to the API later are skipped, as the API's versioning policy asks.
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Deserialize)]
struct StartedMessage {
    /// The message id (`msg_…`).
    #[serde(default)]
    id: Option<String>,
    /// The model that answers.
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockStart {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        /// `{}` from Anthropic; absent from llama.cpp.
        #[serde(default)]
        input: Option<Value>,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: Option<String>,
    },
    RedactedThinking {
        data: String,
    },
    /// Server tools, citations and other blocks this runtime does not use.
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    CitationsDelta {
        citation: Value,
    },
    /// The summary of a `compaction` block, streamed.
    CompactionDelta {
        #[serde(default)]
        content: Option<String>,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

/// A content block between its start and stop events.
#[derive(Debug)]
enum OpenBlock {
    /// Its citations come as deltas, and are passed on after its text.
    Text {
        citations: Vec<Value>,
    },
    /// `received_json`: whether any argument text has streamed.
    Tool {
        id: String,
        received_json: bool,
        start_input: Option<Value>,
    },
    Thinking {
        signature: String,
    },
    Redacted {
        data: String,
    },
    /// A block without a type of ours (a server tool's call or result, …), kept whole; the
    /// input of a `server_tool_use` streams as JSON deltas.
    Opaque {
        block: Value,
        json: String,
    },
}

/// Decodes one streamed Messages response.
#[derive(Debug, Default)]
pub(crate) struct AnthropicDecoder {
    /// Open blocks by index (the API opens one at a time; the list stays tiny).
    blocks: Vec<(u64, OpenBlock)>,
    usage: WireUsage,
    stopped: bool,
    /// The message's id and model, reported once.
    info: ResponseInfoOnce,
}

/// Parses one JSON document, or explains what was wrong with an excerpt.
pub(super) fn parse<T: DeserializeOwned>(what: &str, text: &str) -> Result<T, ProviderError> {
    serde_json::from_str(text).map_err(|error| {
        ProviderError::protocol(format!("malformed anthropic {what}: {error}"), text)
    })
}

/// The canonical finish reason for a `stop_reason`.
pub(super) fn finish_reason(stop_reason: &str) -> FinishReason {
    match stop_reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

fn thinking_opaque(signature: &str) -> Option<Value> {
    (!signature.is_empty()).then(|| json!({"type": "thinking", "signature": signature}))
}

fn redacted_opaque(data: &str) -> Value {
    json!({"type": "redacted_thinking", "data": data})
}

impl AnthropicDecoder {
    fn block_mut(&mut self, index: u64, data: &str) -> Result<&mut OpenBlock, ProviderError> {
        self.blocks.iter_mut().find(|(i, _)| *i == index).map(|(_, block)| block).ok_or_else(|| {
            ProviderError::protocol("event for a content block that is not open", data)
        })
    }

    fn start_block(
        &mut self,
        index: u64,
        start: BlockStart,
        data: &str,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ProviderError> {
        if self.blocks.iter().any(|(i, _)| *i == index) {
            return Err(ProviderError::protocol("content block started twice", data));
        }
        let block = match start {
            BlockStart::Text { text } => {
                if !text.is_empty() {
                    out.push(StreamChunk::TextDelta { text });
                }
                OpenBlock::Text { citations: Vec::new() }
            }
            BlockStart::ToolUse { id, name, input } => {
                out.push(StreamChunk::ToolCallStart { id: id.clone(), name });
                OpenBlock::Tool { id, received_json: false, start_input: input }
            }
            BlockStart::Thinking { thinking, signature } => {
                if !thinking.is_empty() {
                    out.push(StreamChunk::ReasoningDelta { text: thinking });
                }
                OpenBlock::Thinking { signature: signature.unwrap_or_default() }
            }
            BlockStart::RedactedThinking { data } => OpenBlock::Redacted { data },
            BlockStart::Other => {
                // Parsed again for the whole block (rare: server tools).
                let mut event: Value = parse("event", data)?;
                let block = event.get_mut("content_block").map(Value::take).unwrap_or_default();
                OpenBlock::Opaque { block, json: String::new() }
            }
        };
        self.blocks.push((index, block));
        Ok(())
    }

    fn delta(
        &mut self,
        index: u64,
        delta: BlockDelta,
        data: &str,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ProviderError> {
        let block = self.block_mut(index, data)?;
        match (block, delta) {
            (_, BlockDelta::Other) => {}
            (OpenBlock::Opaque { json, .. }, BlockDelta::InputJsonDelta { partial_json }) => {
                json.push_str(&partial_json);
            }
            (OpenBlock::Opaque { block, .. }, BlockDelta::CompactionDelta { content }) => {
                // Appended to the block's `content`, as the whole block holds it.
                if let (Some(fields), Some(more)) = (block.as_object_mut(), content) {
                    let text = match fields.get("content").and_then(Value::as_str) {
                        Some(before) => format!("{before}{more}"),
                        None => more,
                    };
                    fields.insert("content".into(), Value::String(text));
                }
            }
            (OpenBlock::Opaque { .. }, _) => {}
            (OpenBlock::Text { citations }, BlockDelta::CitationsDelta { citation }) => {
                citations.push(citation);
            }
            (OpenBlock::Text { .. }, BlockDelta::TextDelta { text }) => {
                if !text.is_empty() {
                    out.push(StreamChunk::TextDelta { text });
                }
            }
            (
                OpenBlock::Tool { id, received_json, .. },
                BlockDelta::InputJsonDelta { partial_json },
            ) => {
                if !partial_json.is_empty() {
                    *received_json = true;
                    out.push(StreamChunk::ToolCallDelta { id: id.clone(), delta: partial_json });
                }
            }
            (OpenBlock::Thinking { .. }, BlockDelta::ThinkingDelta { thinking }) => {
                if !thinking.is_empty() {
                    out.push(StreamChunk::ReasoningDelta { text: thinking });
                }
            }
            (OpenBlock::Thinking { signature }, BlockDelta::SignatureDelta { signature: more }) => {
                signature.push_str(&more);
            }
            _ => {
                return Err(ProviderError::protocol("delta does not match its content block", data))
            }
        }
        Ok(())
    }

    fn stop_block(
        &mut self,
        index: u64,
        data: &str,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ProviderError> {
        let position = self.blocks.iter().position(|(i, _)| *i == index).ok_or_else(|| {
            ProviderError::protocol("stop of a content block that is not open", data)
        })?;
        let (_, block) = self.blocks.remove(position);
        match block {
            OpenBlock::Tool { id, received_json, start_input } => {
                // No argument text streamed: the input of the start block (servers that send
                // it whole there), else `{}` (a call without arguments), as a whole response
                // would have it.
                if !received_json {
                    let delta = match start_input {
                        Some(Value::Object(input)) if !input.is_empty() => {
                            crate::canonical::to_string(&Value::Object(input))
                        }
                        _ => "{}".to_owned(),
                    };
                    out.push(StreamChunk::ToolCallDelta { id: id.clone(), delta });
                }
                out.push(StreamChunk::ToolCallEnd { id });
            }
            OpenBlock::Thinking { signature } => {
                out.push(StreamChunk::ReasoningEnd { opaque: thinking_opaque(&signature) });
            }
            OpenBlock::Redacted { data } => {
                out.push(StreamChunk::ReasoningEnd { opaque: Some(redacted_opaque(&data)) });
            }
            OpenBlock::Opaque { mut block, json } => {
                if !json.trim().is_empty() {
                    let input: Value = parse("server tool input", &json)?;
                    if let Value::Object(fields) = &mut block {
                        fields.insert("input".into(), input);
                    }
                }
                let kind = block.get("type").and_then(Value::as_str).unwrap_or("unknown");
                out.push(StreamChunk::Opaque {
                    provider: super::FAMILY.into(),
                    kind: kind.to_owned(),
                    value: block,
                });
            }
            OpenBlock::Text { citations } => {
                for value in citations {
                    out.push(StreamChunk::Citation { provider: super::FAMILY.into(), value });
                }
            }
        }
        Ok(())
    }
}

impl StreamDecoder for AnthropicDecoder {
    fn decode(
        &mut self,
        _event: &str,
        data: &str,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ProviderError> {
        // The `type` in the data names the event (it always equals the SSE event name).
        if data.trim().is_empty() || self.stopped {
            return Ok(());
        }
        match parse::<Event>("event", data)? {
            Event::MessageStart { message } => {
                self.info.report(message.id.as_deref(), message.model.as_deref(), out);
                if let Some(usage) = message.usage {
                    self.usage.merge(usage);
                    out.push(StreamChunk::Usage { usage: self.usage.to_usage() });
                }
            }
            Event::ContentBlockStart { index, content_block } => {
                self.start_block(index, content_block, data, out)?;
            }
            Event::ContentBlockDelta { index, delta } => self.delta(index, delta, data, out)?,
            Event::ContentBlockStop { index } => self.stop_block(index, data, out)?,
            Event::MessageDelta { delta, usage } => {
                if let Some(usage) = usage {
                    self.usage.merge(usage);
                    out.push(StreamChunk::Usage { usage: self.usage.to_usage() });
                }
                if let Some(reason) = delta.stop_reason {
                    out.push(StreamChunk::Finish { reason: finish_reason(&reason) });
                }
            }
            Event::MessageStop => self.stopped = true,
            Event::Ping | Event::Unknown => {}
            Event::Error { error } => return Err(stream_error(&error)),
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<StreamChunk>) -> Result<(), ProviderError> {
        if self.stopped {
            Ok(())
        } else {
            Err(ProviderError::Network {
                message: "anthropic stream ended before message_stop".into(),
            })
        }
    }
}

/// A whole (non-streamed) response body: a message, or an error object.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Body {
    Message {
        /// The message id (`msg_…`).
        #[serde(default)]
        id: Option<String>,
        /// The model that answered.
        #[serde(default)]
        model: Option<String>,
        /// Blocks as JSON: those without a type of ours are kept whole.
        content: Vec<Value>,
        #[serde(default)]
        stop_reason: Option<String>,
        #[serde(default)]
        usage: WireUsage,
    },
    Error {
        error: ApiError,
    },
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResponseBlock {
    Text {
        text: String,
        #[serde(default)]
        citations: Option<Vec<Value>>,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Option<Value>,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    #[serde(other)]
    Other,
}

/// Decodes the body of a non-streamed `/v1/messages` response.
pub(super) fn decode_response(body: &[u8]) -> Result<ModelResponse, ProviderError> {
    let text = String::from_utf8_lossy(body);
    let (id, model, content, stop_reason, usage) = match parse::<Body>("response", &text)? {
        Body::Message { id, model, content, stop_reason, usage } => {
            (id, model, content, stop_reason, usage)
        }
        Body::Error { error } => return Err(stream_error(&error)),
    };
    let mut parts = Vec::with_capacity(content.len());
    for value in content {
        let block = ResponseBlock::deserialize(&value).map_err(|error| {
            ProviderError::protocol(format!("malformed anthropic content block: {error}"), &text)
        })?;
        match block {
            ResponseBlock::Text { text, citations } => {
                // Text blocks one after another are one text, as when streamed.
                match parts.last_mut() {
                    Some(Part::Text { text: before }) => before.push_str(&text),
                    _ => parts.push(Part::Text { text }),
                }
                for value in citations.unwrap_or_default() {
                    parts.push(Part::Citation(Citation::from_value(super::FAMILY, value)));
                }
            }
            ResponseBlock::ToolUse { id, name, input } => {
                let arguments = match input {
                    Some(input) => crate::canonical::to_string(&input),
                    None => "{}".to_owned(),
                };
                parts.push(Part::ToolCall(ToolCall { id, name, arguments }));
            }
            ResponseBlock::Thinking { thinking, signature } => {
                parts.push(Part::Reasoning(Reasoning {
                    text: thinking,
                    opaque: thinking_opaque(&signature),
                }));
            }
            ResponseBlock::RedactedThinking { data } => parts.push(Part::Reasoning(Reasoning {
                text: String::new(),
                opaque: Some(redacted_opaque(&data)),
            })),
            ResponseBlock::Other => {
                let kind = value.get("type").and_then(Value::as_str).unwrap_or("unknown");
                parts.push(Part::Opaque(Opaque::new(super::FAMILY, kind.to_owned(), value)));
            }
        }
    }
    let has_calls = parts.iter().any(|p| matches!(p, Part::ToolCall(_)));
    let finish_reason = match stop_reason.as_deref() {
        Some(reason) => finish_reason(reason),
        None if has_calls => FinishReason::ToolCalls,
        None => FinishReason::Stop,
    };
    Ok(ModelResponse {
        message: Message { role: Role::Assistant, content: parts },
        finish_reason,
        usage: usage.to_usage(),
        id: id.filter(|id| !id.is_empty()),
        model: model.filter(|model| !model.is_empty()),
        provider: None,
    })
}
