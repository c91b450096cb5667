//! Decoding a streamed chat completion: `chat.completion.chunk` events until `[DONE]`.

use super::{
    annotation_citation, finish_reason, sources, stream_error, ChatMessage, ContentParts,
    WireUsage, FAMILY,
};
use crate::message::FinishReason;
use crate::provider::wire::{ResponseInfoOnce, StreamDecoder};
use crate::provider::{ProviderError, StreamChunk};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;

#[derive(Debug, Deserialize)]
struct ChatChunk<'a> {
    /// The completion's id (`chatcmpl-…`), repeated in every chunk.
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    /// The model that answers, repeated in every chunk.
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    choices: Option<Vec<ChunkChoice>>,
    usage: Option<WireUsage>,
    /// Groq's request facts; its `usage` stands for the standard field where that is absent
    /// (Groq streamed usage only there before it sent the standard field too).
    x_groq: Option<XGroq>,
    error: Option<Value>,
    /// Perplexity's sources (see [`sources`](super::sources)).
    citations: Option<Vec<Value>>,
    search_results: Option<Vec<Value>>,
}

#[derive(Debug, Deserialize)]
struct XGroq {
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct ChunkChoice {
    index: Option<u32>,
    delta: Option<ChatMessage>,
    finish_reason: Option<String>,
}

/// One streamed tool call. Its arguments arrive as deltas keyed by `index`; it starts (is
/// announced) once its name is known.
#[derive(Debug)]
struct Call {
    index: u32,
    id: String,
    /// The name, once known and until the call starts (it moves into the start chunk).
    name: Option<String>,
    /// Argument text received before the call could start.
    pending: String,
    started: bool,
}

/// The chat stream decoder: maps tool-call `index` to call ids, turns `reasoning_content`
/// into reasoning deltas, and emits the finish after the usage chunk, at `[DONE]`.
#[derive(Debug, Default)]
pub(super) struct ChatDecoder {
    calls: Vec<Call>,
    reasoning_open: bool,
    /// The finish reason, once a choice reported one.
    finish: Option<String>,
    /// Tool calls and reasoning were closed (at the finish reason).
    closed: bool,
    done: bool,
    /// The completion's id and model, reported once.
    info: ResponseInfoOnce,
    /// Citations of the text, passed on after it at the end: annotations as they came, and
    /// the sources the last chunk that named any named (servers repeat them in every chunk).
    annotations: Vec<Value>,
    sources: Vec<Value>,
    /// The open reasoning's `reasoning_details` so far (see [`super::details`]).
    details: Vec<Value>,
}

impl ChatDecoder {
    fn close_reasoning(&mut self, out: &mut Vec<StreamChunk>) {
        if self.reasoning_open {
            self.reasoning_open = false;
            let opaque = super::details::opaque(std::mem::take(&mut self.details));
            out.push(StreamChunk::ReasoningEnd { opaque });
        }
    }

    /// Ends reasoning and every tool call (their arguments are complete).
    fn close(&mut self, out: &mut Vec<StreamChunk>) -> Result<(), ProviderError> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.close_reasoning(out);
        for call in &self.calls {
            if !call.started {
                return Err(ProviderError::protocol(
                    "a streamed tool call without a name",
                    &format!("index {}: {}", call.index, call.pending),
                ));
            }
            out.push(StreamChunk::ToolCallEnd { id: call.id.clone() });
        }
        Ok(())
    }

    fn end(&mut self, out: &mut Vec<StreamChunk>) -> Result<(), ProviderError> {
        self.close(out)?;
        let annotations = std::mem::take(&mut self.annotations).into_iter();
        for value in annotations.map(annotation_citation).chain(std::mem::take(&mut self.sources)) {
            out.push(StreamChunk::Citation { provider: FAMILY.into(), value });
        }
        let reason: FinishReason = finish_reason(self.finish.as_deref(), !self.calls.is_empty());
        out.push(StreamChunk::Finish { reason });
        Ok(())
    }

    fn tool_call(
        &mut self,
        position: usize,
        delta: super::WireToolCall,
        out: &mut Vec<StreamChunk>,
    ) {
        let id = delta.id.filter(|id| !id.is_empty());
        let slot = match (delta.index, id.as_deref()) {
            (Some(index), _) => self.calls.iter().position(|c| c.index == index),
            // Servers that leave out `index`: match by id, else continue the last call.
            (None, Some(id)) => self.calls.iter().position(|c| c.id == id),
            (None, None) => self.calls.len().checked_sub(1),
        };
        let slot = match slot {
            Some(slot) => slot,
            None => {
                let index = delta.index.unwrap_or_else(|| {
                    self.calls.iter().map(|c| c.index + 1).max().unwrap_or(position as u32)
                });
                self.calls.push(Call {
                    index,
                    id: String::new(),
                    name: None,
                    pending: String::new(),
                    started: false,
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[slot];
        if call.id.is_empty() {
            if let Some(id) = id {
                call.id = id;
            }
        }
        let (name, arguments) = delta.function.map_or((None, None), |f| (f.name, f.arguments));
        if !call.started && call.name.is_none() {
            call.name = name.filter(|n| !n.is_empty());
        }
        let arguments = match arguments {
            Some(Value::String(text)) => text,
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        if call.started {
            if !arguments.is_empty() {
                out.push(StreamChunk::ToolCallDelta { id: call.id.clone(), delta: arguments });
            }
            return;
        }
        call.pending.push_str(&arguments);
        if let Some(name) = call.name.take() {
            if call.id.is_empty() {
                call.id = format!("call_{}", call.index);
            }
            call.started = true;
            out.push(StreamChunk::ToolCallStart { id: call.id.clone(), name });
            if !call.pending.is_empty() {
                let delta = std::mem::take(&mut call.pending);
                out.push(StreamChunk::ToolCallDelta { id: call.id.clone(), delta });
            }
        }
    }
}

impl StreamDecoder for ChatDecoder {
    fn decode(
        &mut self,
        _event: &str,
        data: &str,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ProviderError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            if !self.done {
                self.done = true;
                self.end(out)?;
            }
            return Ok(());
        }
        let chunk: ChatChunk = serde_json::from_str(data).map_err(|e| {
            ProviderError::protocol(format!("invalid chat completion chunk: {e}"), data)
        })?;
        if let Some(error) = chunk.error {
            return Err(stream_error(&error));
        }
        self.info.report(chunk.id.as_deref(), chunk.model.as_deref(), out);
        let sources = sources(chunk.citations, chunk.search_results);
        if !sources.is_empty() {
            self.sources = sources;
        }
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(mut delta) = choice.delta {
                // A string, or (Mistral's reasoning models) thinking and text parts.
                let parts = match delta.content.take() {
                    Some(Value::String(text)) => ContentParts { reasoning: None, text },
                    Some(other) => ContentParts::of(&other),
                    None => ContentParts::default(),
                };
                if let Some(text) = delta.reasoning_text().or(parts.reasoning) {
                    self.reasoning_open = true;
                    out.push(StreamChunk::ReasoningDelta { text });
                }
                if let Some(fragments) = delta.reasoning_details.take().filter(|d| !d.is_empty()) {
                    self.reasoning_open = true;
                    super::details::merge(&mut self.details, fragments);
                }
                let text = Some(parts.text)
                    .filter(|t| !t.is_empty())
                    .or(delta.refusal.take().filter(|t| !t.is_empty()));
                if let Some(text) = text {
                    self.close_reasoning(out);
                    out.push(StreamChunk::TextDelta { text });
                }
                self.annotations.extend(delta.annotations.take().into_iter().flatten());
                for (position, call) in delta.tool_calls.take().into_iter().flatten().enumerate() {
                    self.close_reasoning(out);
                    self.tool_call(position, call, out);
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish = Some(reason);
                self.close(out)?;
            }
        }
        if let Some(usage) = chunk.usage.or_else(|| chunk.x_groq.and_then(|groq| groq.usage)) {
            out.push(StreamChunk::Usage { usage: usage.into_usage() });
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<StreamChunk>) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        if self.finish.is_some() {
            // A finish reason but no `[DONE]`: the answer is complete; accept it.
            self.done = true;
            return self.end(out);
        }
        Err(ProviderError::Network {
            message: "the stream ended before the response was complete (no finish reason, \
                      no [DONE])"
                .into(),
        })
    }
}
