//! Folding a chunk stream into a whole [`ModelResponse`].

use super::{ModelResponse, ProviderError, StreamChunk};
use crate::message::{
    Citation, FinishReason, Message, Opaque, Part, Reasoning, Role, ToolCall, Usage,
};

/// Builds a [`ModelResponse`] from [`StreamChunk`]s, in order. Text deltas join the current
/// text part, reasoning deltas the current reasoning block, argument deltas their call (by id);
/// the first reported response id and model are kept.
#[derive(Debug, Default)]
pub struct ResponseAssembler {
    parts: Vec<Part>,
    /// Index in `parts` of the reasoning block still receiving deltas.
    open_reasoning: Option<usize>,
    /// The index in `parts` of every tool call, in order.
    calls: Vec<usize>,
    usage: Usage,
    finish: Option<FinishReason>,
    /// The response id and model, as first reported.
    id: Option<String>,
    model: Option<String>,
    provider: Option<String>,
}

impl ResponseAssembler {
    /// Adds one chunk. A delta for a tool call that never started is a protocol error.
    pub fn push(&mut self, chunk: StreamChunk) -> Result<(), ProviderError> {
        match chunk {
            StreamChunk::ResponseInfo { id, model } => {
                if self.id.is_none() {
                    self.id = id;
                }
                if self.model.is_none() {
                    self.model = model;
                }
            }
            StreamChunk::Answered { provider } => self.provider = Some(provider),
            StreamChunk::TextDelta { text } => {
                self.open_reasoning = None;
                match self.parts.last_mut() {
                    Some(Part::Text { text: current }) => current.push_str(&text),
                    _ => self.parts.push(Part::Text { text }),
                }
            }
            StreamChunk::ReasoningDelta { text } => match self.open_reasoning {
                Some(index) => {
                    if let Some(Part::Reasoning(reasoning)) = self.parts.get_mut(index) {
                        reasoning.text.push_str(&text);
                    }
                }
                None => {
                    self.open_reasoning = Some(self.parts.len());
                    self.parts.push(Part::Reasoning(Reasoning { text, opaque: None }));
                }
            },
            StreamChunk::ReasoningEnd { opaque } => match self.open_reasoning.take() {
                Some(index) => {
                    if let Some(Part::Reasoning(reasoning)) = self.parts.get_mut(index) {
                        reasoning.opaque = opaque;
                    }
                }
                None => self.parts.push(Part::Reasoning(Reasoning { text: String::new(), opaque })),
            },
            StreamChunk::ToolCallStart { id, name } => {
                self.open_reasoning = None;
                self.calls.push(self.parts.len());
                self.parts.push(Part::ToolCall(ToolCall { id, name, arguments: String::new() }));
            }
            StreamChunk::ToolCallDelta { id, delta } => {
                let index = self.call_index(&id).ok_or_else(|| {
                    ProviderError::protocol("argument delta for unknown tool call", &id)
                })?;
                if let Some(Part::ToolCall(call)) = self.parts.get_mut(index) {
                    if call.arguments.is_empty() {
                        // Most calls arrive in one delta: keep its string.
                        call.arguments = delta;
                    } else {
                        call.arguments.push_str(&delta);
                    }
                }
            }
            StreamChunk::ToolCallEnd { id } => {
                if self.call_index(&id).is_none() {
                    return Err(ProviderError::protocol("end of unknown tool call", &id));
                }
            }
            StreamChunk::Opaque { provider, kind, value } => {
                self.open_reasoning = None;
                self.parts.push(Part::Opaque(Opaque { provider, kind, value }));
            }
            StreamChunk::Citation { provider, value } => {
                self.open_reasoning = None;
                self.parts.push(Part::Citation(Citation::from_value(provider, value)));
            }
            StreamChunk::Usage { usage } => self.usage = self.usage.max(usage),
            StreamChunk::Finish { reason } => self.finish = Some(reason),
        }
        Ok(())
    }

    fn call_index(&self, id: &str) -> Option<usize> {
        // Search from the end: deltas almost always belong to the newest call.
        self.calls.iter().rev().copied().find(
            |&index| matches!(self.parts.get(index), Some(Part::ToolCall(call)) if call.id == id),
        )
    }

    /// Whether any content (text, reasoning or tool call) has been received.
    pub fn has_content(&self) -> bool {
        !self.parts.is_empty()
    }

    /// The response. Without a finish chunk, the reason is `tool_calls` when there are calls
    /// and `stop` otherwise.
    pub fn finish(self) -> ModelResponse {
        let finish_reason = self.finish.unwrap_or(if self.calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });
        ModelResponse {
            message: Message { role: Role::Assistant, content: self.parts },
            finish_reason,
            usage: self.usage,
            id: self.id,
            model: self.model,
            provider: self.provider,
        }
    }
}
