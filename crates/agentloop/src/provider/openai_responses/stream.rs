//! Decoding a streamed Responses API response: semantic events until `response.completed`,
//! `response.incomplete` or `response.failed`.

use super::{
    client_side_item, function_call, message_annotations, message_text, phase_marker,
    reasoning_text, stream_error, WireResponse, FAMILY, TEXT_SEPARATOR,
};
use crate::provider::wire::{ResponseInfoOnce, StreamDecoder};
use crate::provider::{ProviderError, StreamChunk};
use serde_json::Value;
use std::collections::HashSet;

/// Where a text delta comes from: its output index and content index (either may be missing).
type TextSource = (Option<u64>, Option<u64>);

/// A function call being streamed.
#[derive(Debug)]
struct Call {
    item_id: String,
    call_id: String,
    output_index: Option<u64>,
    /// The argument text sent so far.
    arguments: String,
    ended: bool,
}

/// The reasoning item being streamed.
#[derive(Debug)]
struct OpenReasoning {
    streamed: bool,
    summary_index: Option<u64>,
}

/// The Responses stream decoder. It does not need `function_call_arguments.done` (which
/// llama.cpp never sends): `output_item.done` also ends a call.
#[derive(Debug, Default)]
pub(super) struct ResponsesDecoder {
    calls: Vec<Call>,
    reasoning: Option<OpenReasoning>,
    /// Message items whose text arrived as deltas.
    text_items: HashSet<String>,
    /// The output indexes of those items: some servers (GitHub Copilot) send another item id
    /// with every event of one message, but keep its output index.
    text_outputs: HashSet<u64>,
    /// Where the last text came from, once text came (see [`text`](Self::text)): text from
    /// another place starts after a [`TEXT_SEPARATOR`].
    last_text: Option<Option<TextSource>>,
    /// Annotations (citations) of the message being streamed, passed on after its text when
    /// the message is done.
    annotations: Vec<Value>,
    terminal: bool,
    /// The response's id and model, reported once.
    info: ResponseInfoOnce,
}

fn str_field<'a>(value: &'a Value, name: &str) -> Option<&'a str> {
    value.get(name).and_then(Value::as_str)
}

impl ResponsesDecoder {
    /// Text from `from` (a delta's output and content index; `None`: a whole message item):
    /// after text from elsewhere, a separator first.
    fn text(&mut self, mut text: String, from: Option<TextSource>, out: &mut Vec<StreamChunk>) {
        let separate = match (self.last_text, from) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(last), Some(from)) => last != Some(from),
        };
        if separate {
            text.insert_str(0, TEXT_SEPARATOR);
        }
        self.last_text = Some(from);
        out.push(StreamChunk::TextDelta { text });
    }

    fn call_index(&self, event: &Value) -> Option<usize> {
        let item_id = str_field(event, "item_id");
        let output_index = event.get("output_index").and_then(Value::as_u64);
        self.calls.iter().position(|c| item_id.is_some_and(|id| c.item_id == id)).or_else(|| {
            output_index.and_then(|i| self.calls.iter().position(|c| c.output_index == Some(i)))
        })
    }

    fn start_call(
        &mut self,
        item: &Value,
        output_index: Option<u64>,
        data: &str,
        out: &mut Vec<StreamChunk>,
    ) -> Result<usize, ProviderError> {
        let call = function_call(item, data)?;
        out.push(StreamChunk::ToolCallStart { id: call.id.clone(), name: call.name });
        if !call.arguments.is_empty() {
            out.push(StreamChunk::ToolCallDelta {
                id: call.id.clone(),
                delta: call.arguments.clone(),
            });
        }
        self.calls.push(Call {
            item_id: str_field(item, "id").unwrap_or_default().to_owned(),
            call_id: call.id,
            output_index,
            arguments: call.arguments,
            ended: false,
        });
        Ok(self.calls.len() - 1)
    }

    /// Completes a call's arguments with the full text (sending what the deltas missed) and
    /// ends it.
    fn end_call(&mut self, index: usize, full: Option<&str>, out: &mut Vec<StreamChunk>) {
        let call = &mut self.calls[index];
        if call.ended {
            return;
        }
        if let Some(rest) = full.and_then(|full| full.strip_prefix(call.arguments.as_str())) {
            if !rest.is_empty() {
                out.push(StreamChunk::ToolCallDelta {
                    id: call.call_id.clone(),
                    delta: rest.into(),
                });
                call.arguments.push_str(rest);
            }
        }
        call.ended = true;
        out.push(StreamChunk::ToolCallEnd { id: call.call_id.clone() });
    }

    fn finished(&mut self, event: &Value, out: &mut Vec<StreamChunk>) -> Result<(), ProviderError> {
        self.terminal = true;
        for index in 0..self.calls.len() {
            self.end_call(index, None, out);
        }
        let mut response: WireResponse = event
            .get("response")
            .map(|r| serde_json::from_value(r.clone()))
            .transpose()
            .map_err(|e| {
                ProviderError::protocol(
                    format!("invalid response: {e}"),
                    &crate::canonical::to_string(event),
                )
            })?
            .unwrap_or_default();
        self.info.report(response.id.as_deref(), response.model.as_deref(), out);
        if let Some(usage) = response.usage.take() {
            out.push(StreamChunk::Usage { usage: usage.into_usage() });
        }
        let reason = response.finish_reason(!self.calls.is_empty());
        out.push(StreamChunk::Finish { reason });
        Ok(())
    }
}

impl StreamDecoder for ResponsesDecoder {
    fn decode(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ProviderError> {
        let before = out.len();
        let decoded = self.decode_event(event, data, out);
        // Text after other content (a call, reasoning, an item, a citation) starts a part of
        // its own, without a separator — as a whole response gives it.
        let new = out.get(before..).unwrap_or_default();
        if let Some(last) = new.iter().rev().find(|chunk| is_content(chunk) && !is_marker(chunk)) {
            if !matches!(last, StreamChunk::TextDelta { .. }) {
                self.last_text = None;
            }
        }
        decoded
    }

    fn finish(&mut self, _out: &mut Vec<StreamChunk>) -> Result<(), ProviderError> {
        if self.terminal {
            return Ok(());
        }
        Err(ProviderError::Network {
            message: "the stream ended before the response was complete (no \
                      response.completed)"
                .into(),
        })
    }
}

/// Whether a chunk is a message's phase marker (see [`phase_marker`]): the text of the next
/// message is still a new paragraph after it.
fn is_marker(chunk: &StreamChunk) -> bool {
    matches!(chunk, StreamChunk::Opaque { provider, kind, .. } if provider == FAMILY && kind == "message")
}

/// Whether a chunk is content of the message (not its id, usage or finish).
fn is_content(chunk: &StreamChunk) -> bool {
    !matches!(
        chunk,
        StreamChunk::ResponseInfo { .. } | StreamChunk::Usage { .. } | StreamChunk::Finish { .. }
    )
}

impl ResponsesDecoder {
    fn decode_event(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ProviderError> {
        let data = data.trim();
        // One stream is one response: nothing after its end is part of it.
        if data.is_empty() || data == "[DONE]" || self.terminal {
            return Ok(());
        }
        let value: Value = serde_json::from_str(data)
            .map_err(|e| ProviderError::protocol(format!("invalid Responses event: {e}"), data))?;
        let kind = str_field(&value, "type").unwrap_or(event);
        let output_index = value.get("output_index").and_then(Value::as_u64);
        match kind {
            // The response object up front: its id (and, from OpenAI, its model; llama.cpp
            // names the model only in `response.completed`).
            "response.created" | "response.in_progress" => {
                if let Some(response) = value.get("response") {
                    let id = str_field(response, "id");
                    self.info.report(id, str_field(response, "model"), out);
                }
            }
            "response.output_item.added" => {
                let item = value.get("item").unwrap_or(&Value::Null);
                if let Some(error) = client_side_item(item) {
                    self.terminal = true;
                    return Err(error);
                }
                match str_field(item, "type") {
                    Some("function_call") => {
                        self.start_call(item, output_index, data, out)?;
                    }
                    Some("reasoning") => {
                        self.reasoning =
                            Some(OpenReasoning { streamed: false, summary_index: None });
                    }
                    _ => {}
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(item_id) = str_field(&value, "item_id") {
                    self.text_items.insert(item_id.to_owned());
                }
                if let Some(index) = output_index {
                    self.text_outputs.insert(index);
                }
                if let Some(text) = str_field(&value, "delta").filter(|t| !t.is_empty()) {
                    let from = (output_index, value.get("content_index").and_then(Value::as_u64));
                    self.text(text.to_owned(), Some(from), out);
                }
            }
            "response.output_text.annotation.added" => {
                if let Some(annotation) = value.get("annotation").filter(|a| a.is_object()) {
                    self.annotations.push(annotation.clone());
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let Some(text) = str_field(&value, "delta").filter(|t| !t.is_empty()) else {
                    return Ok(());
                };
                let reasoning = self
                    .reasoning
                    .get_or_insert(OpenReasoning { streamed: false, summary_index: None });
                let index = value.get("summary_index").and_then(Value::as_u64);
                let mut text = text.to_owned();
                if reasoning.streamed && index.is_some() && index != reasoning.summary_index {
                    text.insert_str(0, "\n\n");
                }
                reasoning.streamed = true;
                reasoning.summary_index = index;
                out.push(StreamChunk::ReasoningDelta { text });
            }
            "response.function_call_arguments.delta" => {
                let index = self.call_index(&value).ok_or_else(|| {
                    ProviderError::protocol(
                        "arguments for a function call that never started",
                        data,
                    )
                })?;
                let delta = str_field(&value, "delta").unwrap_or_default();
                let call = &mut self.calls[index];
                if !delta.is_empty() && !call.ended {
                    call.arguments.push_str(delta);
                    out.push(StreamChunk::ToolCallDelta {
                        id: call.call_id.clone(),
                        delta: delta.into(),
                    });
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(index) = self.call_index(&value) {
                    self.end_call(index, str_field(&value, "arguments"), out);
                }
            }
            "response.output_item.done" => {
                let item = value.get("item").unwrap_or(&Value::Null);
                match str_field(item, "type") {
                    Some("function_call") => {
                        let item_id = str_field(item, "id");
                        let call_id = str_field(item, "call_id");
                        let found = self.calls.iter().position(|c| {
                            item_id.is_some_and(|id| c.item_id == id)
                                || call_id.is_some_and(|id| c.call_id == id)
                        });
                        let index = match found {
                            Some(index) => index,
                            None => {
                                // Never announced: start and end it at once.
                                let index = self.start_call(item, output_index, data, out)?;
                                self.end_call(index, None, out);
                                return Ok(());
                            }
                        };
                        self.end_call(index, str_field(item, "arguments"), out);
                    }
                    Some("reasoning") => {
                        let open = self.reasoning.take();
                        if !open.is_some_and(|r| r.streamed) {
                            let text = reasoning_text(item);
                            if !text.is_empty() {
                                out.push(StreamChunk::ReasoningDelta { text });
                            }
                        }
                        out.push(StreamChunk::ReasoningEnd { opaque: Some(item.clone()) });
                    }
                    Some("message") => {
                        let id = str_field(item, "id").unwrap_or_default();
                        let streamed = self.text_items.contains(id)
                            || output_index.is_some_and(|i| self.text_outputs.contains(&i));
                        if !streamed {
                            let text = message_text(item);
                            if !text.is_empty() {
                                self.text(text, None, out);
                            }
                        }
                        // Streamed annotations, else the done item's.
                        let annotations = match std::mem::take(&mut self.annotations) {
                            streamed if !streamed.is_empty() => streamed,
                            _ => message_annotations(item),
                        };
                        for value in annotations {
                            out.push(StreamChunk::Citation { provider: FAMILY.into(), value });
                        }
                        if let Some(marker) = phase_marker(item) {
                            out.push(StreamChunk::Opaque {
                                provider: marker.provider,
                                kind: marker.kind,
                                value: marker.value,
                            });
                        }
                    }
                    // Items the client must run ended the stream when they were added.
                    Some(kind) => out.push(StreamChunk::Opaque {
                        provider: FAMILY.into(),
                        kind: kind.to_owned(),
                        value: item.clone(),
                    }),
                    None => {}
                }
            }
            "response.completed" | "response.incomplete" => self.finished(&value, out)?,
            "response.failed" => {
                self.terminal = true;
                let error = value.get("response").and_then(|r| r.get("error"));
                return Err(match error.filter(|e| !e.is_null()) {
                    Some(error) => stream_error(error),
                    None => ProviderError::Other { message: "the response failed".into() },
                });
            }
            "error" => {
                self.terminal = true;
                let error = match value.get("error") {
                    Some(inner @ Value::Object(_)) => inner,
                    _ => &value,
                };
                return Err(stream_error(error));
            }
            _ => {}
        }
        Ok(())
    }
}
