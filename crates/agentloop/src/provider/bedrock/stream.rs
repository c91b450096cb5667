//! The binary AWS event stream of `converse-stream` → [`StreamChunk`]s. Frames (prelude, headers,
//! payload, CRCs) are read by `aws-smithy-eventstream`; a bad frame (a wrong CRC, a length past
//! the limit, broken headers) is a protocol error, never a panic, and ends the stream.

use super::decode::{classify, extras, finish_reason, usage};
use super::FAMILY;
use crate::provider::{ProviderError, StreamChunk};
use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::{HeaderValue, Message};
use bytes::BytesMut;
use serde_json::{json, Value};
use std::collections::HashMap;

/// The largest frame accepted (the event-stream format's own limit is 16 MiB).
const MAX_BUFFERED: usize = 24 * 1024 * 1024;

/// What an open content block is.
enum Block {
    Text,
    Tool(String),
    Reasoning { signature: Option<Value>, redacted: Option<Value> },
}

/// Decodes one `converse-stream` response, fed its bytes as they arrive.
#[derive(Default)]
pub struct EventStreamDecoder {
    frames: MessageFrameDecoder,
    buffer: BytesMut,
    blocks: HashMap<u64, Block>,
    stopped: bool,
    usage_seen: bool,
    failed: bool,
}

impl std::fmt::Debug for EventStreamDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStreamDecoder")
            .field("buffered", &self.buffer.len())
            .finish_non_exhaustive()
    }
}

fn header<'a>(message: &'a Message, name: &str) -> Option<&'a str> {
    message.headers().iter().find(|h| h.name().as_str() == name).and_then(|h| match h.value() {
        HeaderValue::String(value) => Some(value.as_str()),
        _ => None,
    })
}

impl EventStreamDecoder {
    /// A decoder for one response.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes what `bytes` completes; chunks go to `out`. After an error the decoder refuses
    /// more input.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<StreamChunk>) -> Result<(), ProviderError> {
        if self.failed {
            return Err(ProviderError::protocol("the event stream already failed", ""));
        }
        self.buffer.extend_from_slice(bytes);
        let result = self.drain(out);
        if result.is_err() {
            self.failed = true;
        }
        result
    }

    fn drain(&mut self, out: &mut Vec<StreamChunk>) -> Result<(), ProviderError> {
        loop {
            let frame = self.frames.decode_frame(&mut self.buffer).map_err(|e| {
                ProviderError::protocol(format!("a bad event-stream frame: {e}"), "")
            })?;
            match frame {
                DecodedFrame::Incomplete => {
                    if self.buffer.len() > MAX_BUFFERED {
                        return Err(ProviderError::protocol(
                            format!("an event-stream frame larger than {MAX_BUFFERED} bytes"),
                            "",
                        ));
                    }
                    return Ok(());
                }
                DecodedFrame::Complete(message) => self.message(&message, out)?,
            }
        }
    }

    fn message(
        &mut self,
        message: &Message,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ProviderError> {
        let payload = message.payload();
        let text = || String::from_utf8_lossy(payload).into_owned();
        match header(message, ":message-type") {
            Some("event") | None => {}
            Some("exception") => {
                let kind = header(message, ":exception-type").unwrap_or("exception");
                let value: Value = serde_json::from_slice(payload).unwrap_or(Value::Null);
                let said = value.get("message").or_else(|| value.get("Message"));
                let said = said.and_then(Value::as_str).map_or_else(text, str::to_owned);
                return Err(classify(kind, &said, None));
            }
            Some(other) => {
                let code = header(message, ":error-code").unwrap_or(other);
                let said = header(message, ":error-message").map_or_else(text, str::to_owned);
                return Err(classify(code, &said, None));
            }
        }
        let event = header(message, ":event-type").unwrap_or_default().to_owned();
        let value: Value = serde_json::from_slice(payload)
            .map_err(|e| ProviderError::protocol(format!("invalid {event} event: {e}"), &text()))?;
        self.event(&event, &value, out)
    }

    fn event(
        &mut self,
        event: &str,
        value: &Value,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ProviderError> {
        let index = value["contentBlockIndex"].as_u64().unwrap_or(0);
        match event {
            "messageStart" => {}
            "contentBlockStart" => {
                if let Some(tool) = value.pointer("/start/toolUse") {
                    let (Some(id), Some(name)) =
                        (tool["toolUseId"].as_str(), tool["name"].as_str())
                    else {
                        return Err(ProviderError::protocol(
                            "a toolUse start without id or name",
                            &value.to_string(),
                        ));
                    };
                    self.blocks.insert(index, Block::Tool(id.to_owned()));
                    out.push(StreamChunk::ToolCallStart { id: id.into(), name: name.into() });
                }
            }
            "contentBlockDelta" => self.delta(index, &value["delta"], out)?,
            "contentBlockStop" => self.stop(index, out),
            "messageStop" => {
                for index in self.blocks.keys().copied().collect::<Vec<_>>() {
                    self.stop(index, out);
                }
                self.stopped = true;
                for part in extras(value) {
                    if let crate::message::Part::Opaque(opaque) = part {
                        out.push(StreamChunk::Opaque {
                            provider: FAMILY.into(),
                            kind: opaque.kind,
                            value: opaque.value,
                        });
                    }
                }
                let reason = value["stopReason"].as_str().unwrap_or("end_turn");
                out.push(StreamChunk::Finish { reason: finish_reason(reason) });
            }
            "metadata" => {
                if let Some(used) = value.get("usage") {
                    self.usage_seen = true;
                    out.push(StreamChunk::Usage { usage: usage(used) });
                }
                if let Some(trace) = value.get("trace").filter(|t| !t.is_null()) {
                    out.push(StreamChunk::Opaque {
                        provider: FAMILY.into(),
                        kind: "trace".into(),
                        value: json!({"trace": trace}),
                    });
                }
            }
            // A new kind of event: skipped, as the other formats skip theirs.
            _ => {}
        }
        Ok(())
    }

    fn delta(
        &mut self,
        index: u64,
        delta: &Value,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ProviderError> {
        if let Some(text) = delta.get("text").and_then(Value::as_str) {
            self.blocks.entry(index).or_insert(Block::Text);
            if !text.is_empty() {
                out.push(StreamChunk::TextDelta { text: text.into() });
            }
        } else if let Some(input) = delta.pointer("/toolUse/input").and_then(Value::as_str) {
            let Some(Block::Tool(id)) = self.blocks.get(&index) else {
                return Err(ProviderError::protocol(
                    "tool input for a block that is no tool call",
                    &delta.to_string(),
                ));
            };
            if !input.is_empty() {
                out.push(StreamChunk::ToolCallDelta { id: id.clone(), delta: input.into() });
            }
        } else if let Some(reasoning) = delta.get("reasoningContent") {
            let block = self
                .blocks
                .entry(index)
                .or_insert(Block::Reasoning { signature: None, redacted: None });
            let Block::Reasoning { signature, redacted } = block else {
                return Err(ProviderError::protocol(
                    "reasoning in a block that is no reasoning",
                    &delta.to_string(),
                ));
            };
            if let Some(text) = reasoning.get("text").and_then(Value::as_str) {
                if !text.is_empty() {
                    out.push(StreamChunk::ReasoningDelta { text: text.into() });
                }
            }
            if let Some(value) = reasoning.get("signature") {
                *signature = Some(value.clone());
            }
            if let Some(value) = reasoning.get("redactedContent") {
                *redacted = Some(value.clone());
            }
        }
        Ok(())
    }

    fn stop(&mut self, index: u64, out: &mut Vec<StreamChunk>) {
        match self.blocks.remove(&index) {
            Some(Block::Tool(id)) => out.push(StreamChunk::ToolCallEnd { id }),
            Some(Block::Reasoning { redacted: Some(data), .. }) => {
                out.push(StreamChunk::ReasoningEnd {
                    opaque: Some(json!({FAMILY: {"redactedContent": data}})),
                });
            }
            Some(Block::Reasoning { signature, .. }) => {
                let opaque = match signature {
                    Some(signature) => json!({FAMILY: {"signature": signature}}),
                    None => json!({FAMILY: {}}),
                };
                out.push(StreamChunk::ReasoningEnd { opaque: Some(opaque) });
            }
            Some(Block::Text) | None => {}
        }
    }

    /// The stream ended: an error when it was cut before `messageStop`, or when bytes of an
    /// unfinished frame are left.
    pub fn finish(&mut self, out: &mut Vec<StreamChunk>) -> Result<(), ProviderError> {
        let _ = out;
        if !self.buffer.is_empty() {
            return Err(ProviderError::Network {
                message: format!(
                    "the event stream ended inside a frame ({} bytes left)",
                    self.buffer.len()
                ),
            });
        }
        if !self.stopped {
            return Err(ProviderError::Network {
                message: "the event stream ended before messageStop".into(),
            });
        }
        Ok(())
    }
}
