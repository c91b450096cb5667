//! Reading Gemini responses: each streamed event and the non-streamed body are one
//! `GenerateContentResponse`.

use super::error::{from_api_error, ApiError};
use super::partial::{OpenCall, PartialArg};
use super::SYNTHETIC_ID_PREFIX;
use crate::message::{FinishReason, Usage};
use crate::provider::wire::{ResponseInfoOnce, StreamDecoder};
use crate::provider::{ModelResponse, ProviderError, ResponseAssembler, StreamChunk};
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk {
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    response_id: Option<String>,
    /// The model that answers (e.g. `gemini-2.5-flash`).
    #[serde(default)]
    model_version: Option<String>,
    #[serde(default)]
    error: Option<ApiError>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    index: Option<u64>,
    /// The sources of a grounded answer (Google Search, Vertex AI Search, Maps).
    #[serde(default)]
    grounding_metadata: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Content {
    #[serde(default)]
    parts: Vec<WirePart>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePart {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(default)]
    thought_signature: Option<String>,
    #[serde(default)]
    function_call: Option<FunctionCall>,
    /// Every other field: a part of a kind without a type of ours (`executableCode`,
    /// `codeExecutionResult`, `inlineData` from an image model, …) is kept whole.
    #[serde(flatten)]
    other: serde_json::Map<String, Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FunctionCall {
    #[serde(default)]
    id: Option<String>,
    /// Absent in the pieces of a streamed call after its first.
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    args: Option<Value>,
    /// Streamed arguments (`streamFunctionCallArguments`).
    #[serde(default)]
    partial_args: Option<Vec<PartialArg>>,
    /// More of this call follows.
    #[serde(default)]
    will_continue: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    #[serde(default)]
    cached_content_token_count: u64,
    #[serde(default)]
    thoughts_token_count: u64,
    #[serde(default)]
    tool_use_prompt_token_count: u64,
}

impl UsageMetadata {
    fn to_usage(&self) -> Usage {
        Usage {
            input: self.prompt_token_count.saturating_add(self.tool_use_prompt_token_count),
            output: self.candidates_token_count.saturating_add(self.thoughts_token_count),
            cached_input: self.cached_content_token_count,
            reasoning: self.thoughts_token_count,
            cache_write_input: 0,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

/// The canonical finish reason for a `finishReason` (`STOP` stays `Stop` here; the decoder
/// turns it into `ToolCalls` when the model called functions).
pub(super) fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            FinishReason::ContentFilter
        }
        "MALFORMED_FUNCTION_CALL" => FinishReason::Error,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Decodes one streamed response (also used, with one chunk, for non-streamed bodies).
#[derive(Debug, Default)]
pub(crate) struct GeminiDecoder {
    /// The response id the synthetic call ids are made of (a random one when Gemini sent none).
    response_id: Option<String>,
    /// Calls seen so far.
    calls: usize,
    /// Whether thought text is streaming (a reasoning block is open).
    thinking: bool,
    finished: bool,
    /// The response's id (`responseId`, as sent) and model (`modelVersion`), reported once.
    info: ResponseInfoOnce,
    /// A call whose arguments are streaming.
    open: Option<OpenCall>,
    /// The latest grounding metadata, turned into citations when the answer ends.
    grounding: Option<Value>,
    /// The latest usage: each chunk's `usageMetadata` is the response's so far (its prompt
    /// count can go down from one chunk to the next), so the last one before the answer
    /// ends is the response's usage, reported with its end.
    usage: Option<Usage>,
}

impl GeminiDecoder {
    fn call_id(&mut self, given: Option<String>) -> String {
        let n = self.calls;
        self.calls += 1;
        if let Some(id) = given.filter(|id| !id.is_empty()) {
            return id;
        }
        let response =
            self.response_id.get_or_insert_with(|| uuid::Uuid::new_v4().simple().to_string());
        format!("{SYNTHETIC_ID_PREFIX}{response}_{n}")
    }

    fn end_thinking(&mut self, out: &mut Vec<StreamChunk>) {
        if std::mem::take(&mut self.thinking) {
            out.push(StreamChunk::ReasoningEnd { opaque: None });
        }
    }

    fn signature(&mut self, signature: Option<String>, out: &mut Vec<StreamChunk>) {
        if let Some(signature) = signature {
            self.end_thinking(out);
            out.push(StreamChunk::ReasoningEnd {
                opaque: Some(json!({ "thoughtSignature": signature })),
            });
        }
    }

    /// Ends the streamed call, if one is open: its arguments as assembled.
    fn close_call(&mut self, out: &mut Vec<StreamChunk>) {
        if let Some(call) = self.open.take() {
            out.push(StreamChunk::ToolCallDelta { id: call.id.clone(), delta: call.arguments() });
            out.push(StreamChunk::ToolCallEnd { id: call.id });
        }
    }

    fn function_call(
        &mut self,
        call: FunctionCall,
        signature: Option<String>,
        out: &mut Vec<StreamChunk>,
        raw: &str,
    ) -> Result<(), ProviderError> {
        self.signature(signature, out);
        self.end_thinking(out);
        let more = call.will_continue == Some(true);
        match call.name.filter(|n| !n.is_empty()) {
            Some(name) => {
                self.close_call(out);
                let id = self.call_id(call.id);
                out.push(StreamChunk::ToolCallStart { id: id.clone(), name });
                let mut open = OpenCall::new(id);
                if let Some(pieces) = call.partial_args {
                    open.apply(pieces).map_err(|e| ProviderError::protocol(e, raw))?;
                }
                if more {
                    self.open = Some(open);
                } else {
                    let arguments = match call.args {
                        Some(args @ Value::Object(_)) => crate::canonical::to_string(&args),
                        _ if call.args.is_none() => open.arguments(),
                        _ => "{}".to_owned(),
                    };
                    out.push(StreamChunk::ToolCallDelta { id: open.id.clone(), delta: arguments });
                    out.push(StreamChunk::ToolCallEnd { id: open.id });
                }
            }
            None => {
                let Some(open) = self.open.as_mut() else {
                    if call.partial_args.is_some() || call.args.is_some() {
                        return Err(ProviderError::protocol(
                            "a function call without a name (and no streamed call open)",
                            raw,
                        ));
                    }
                    // The closing part of a call already closed: nothing to do.
                    return Ok(());
                };
                if let Some(pieces) = call.partial_args {
                    open.apply(pieces).map_err(|e| ProviderError::protocol(e, raw))?;
                }
                if !more {
                    self.close_call(out);
                }
            }
        }
        Ok(())
    }

    fn part(
        &mut self,
        part: WirePart,
        out: &mut Vec<StreamChunk>,
        raw: &str,
    ) -> Result<(), ProviderError> {
        if let Some(call) = part.function_call {
            self.function_call(call, part.thought_signature, out, raw)?;
        } else if part.thought == Some(true) {
            let text = part.text.unwrap_or_default();
            if !text.is_empty() {
                self.thinking = true;
                out.push(StreamChunk::ReasoningDelta { text });
            }
            if let Some(signature) = part.thought_signature {
                // The signature of this thought: it closes the thought's reasoning block.
                self.thinking = false;
                out.push(StreamChunk::ReasoningEnd {
                    opaque: Some(json!({ "thoughtSignature": signature })),
                });
            }
        } else if part.text.is_none() && !part.other.is_empty() {
            self.end_thinking(out);
            self.close_call(out);
            let kind = part.other.keys().next().cloned().unwrap_or_default();
            let mut value = part.other;
            if let Some(signature) = part.thought_signature {
                value.insert("thoughtSignature".into(), Value::String(signature));
            }
            out.push(StreamChunk::Opaque {
                provider: super::FAMILY.into(),
                kind,
                value: Value::Object(value),
            });
        } else {
            self.signature(part.thought_signature, out);
            self.end_thinking(out);
            if let Some(text) = part.text.filter(|t| !t.is_empty()) {
                self.close_call(out);
                out.push(StreamChunk::TextDelta { text });
            }
        }
        Ok(())
    }

    fn chunk(
        &mut self,
        chunk: Chunk,
        out: &mut Vec<StreamChunk>,
        raw: &str,
    ) -> Result<(), ProviderError> {
        if let Some(error) = chunk.error {
            return Err(from_api_error(&error, None));
        }
        self.info.report(chunk.response_id.as_deref(), chunk.model_version.as_deref(), out);
        if self.response_id.is_none() {
            self.response_id =
                chunk.response_id.map(|id| sanitize(&id)).filter(|id| !id.is_empty());
        }
        // One candidate is requested; others (if any) are ignored.
        let candidate = chunk.candidates.into_iter().find(|c| c.index.unwrap_or(0) == 0);
        let mut finish = None;
        if let Some(candidate) = candidate {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                self.part(part, out, raw)?;
            }
            if candidate.grounding_metadata.is_some() {
                self.grounding = candidate.grounding_metadata;
            }
            finish = candidate.finish_reason.as_deref().map(finish_reason);
        } else if chunk.prompt_feedback.and_then(|f| f.block_reason).is_some() {
            // The prompt itself was blocked: no candidate at all.
            finish = Some(FinishReason::ContentFilter);
        }
        if let Some(usage) = chunk.usage_metadata {
            if self.finished {
                // Sent after the end (not seen from Gemini): reported as it comes.
                out.push(StreamChunk::Usage { usage: usage.to_usage() });
            } else {
                self.usage = Some(usage.to_usage());
            }
        }
        if let Some(reason) = finish {
            if let Some(usage) = self.usage.take() {
                out.push(StreamChunk::Usage { usage });
            }
            self.end_thinking(out);
            // A call still streaming when the answer ends has all it will get.
            self.close_call(out);
            for value in self.grounding.take().map(grounding_citations).unwrap_or_default() {
                out.push(StreamChunk::Citation { provider: super::FAMILY.into(), value });
            }
            let reason = match reason {
                FinishReason::Stop if self.calls > 0 => FinishReason::ToolCalls,
                other => other,
            };
            out.push(StreamChunk::Finish { reason });
            self.finished = true;
        }
        Ok(())
    }
}

/// The citations of a grounded answer: one for each source a span of the text rests on
/// (`groundingSupports`: the span's text and byte offsets, the source's URL and title from
/// `groundingChunks`), then one for each source no span names. The value keeps the support's
/// `segment` and the source's chunk as Gemini sent them.
fn grounding_citations(metadata: Value) -> Vec<Value> {
    let sources = metadata.get("groundingChunks").and_then(Value::as_array);
    let source = |index: u64| sources.and_then(|all| all.get(usize::try_from(index).ok()?));
    // A chunk's one field names its kind: `web`, `retrievedContext`, `maps`, ….
    let inner = |chunk: &Value| chunk.as_object().and_then(|o| o.values().next()).cloned();
    let mut cited = vec![false; sources.map_or(0, Vec::len)];
    let mut out = Vec::new();
    let supports = metadata.get("groundingSupports").and_then(Value::as_array);
    for support in supports.into_iter().flatten() {
        let segment = support.get("segment").cloned().unwrap_or(Value::Null);
        let indices = support.get("groundingChunkIndices").and_then(Value::as_array);
        for index in indices.into_iter().flatten().filter_map(Value::as_u64) {
            let Some(chunk) = source(index) else { continue };
            if let Some(seen) = cited.get_mut(index as usize) {
                *seen = true;
            }
            let found = inner(chunk).unwrap_or(Value::Null);
            out.push(json!({
                "url": found.get("uri"),
                "title": found.get("title"),
                "cited_text": segment.get("text"),
                "start_index": segment.get("startIndex").and_then(Value::as_u64).unwrap_or(0),
                "end_index": segment.get("endIndex"),
                "segment": segment,
                "grounding_chunk": chunk,
            }));
        }
    }
    for (chunk, _) in sources.into_iter().flatten().zip(&cited).filter(|(_, seen)| !**seen) {
        let found = inner(chunk).unwrap_or(Value::Null);
        out.push(
            json!({"url": found.get("uri"), "title": found.get("title"), "grounding_chunk": chunk}),
        );
    }
    out
}

/// Keeps the characters every provider accepts in a call id (`[A-Za-z0-9_-]`).
fn sanitize(id: &str) -> String {
    id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-').collect()
}

fn parse(what: &str, text: &str) -> Result<Chunk, ProviderError> {
    // serde would also read a JSON array into the struct, field by field.
    if !text.trim_start().starts_with('{') {
        return Err(ProviderError::protocol(
            format!("malformed gemini {what}: not a JSON object"),
            text,
        ));
    }
    serde_json::from_str(text)
        .map_err(|error| ProviderError::protocol(format!("malformed gemini {what}: {error}"), text))
}

impl StreamDecoder for GeminiDecoder {
    fn decode(
        &mut self,
        _event: &str,
        data: &str,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ProviderError> {
        if data.trim().is_empty() {
            return Ok(());
        }
        let chunk = parse("stream chunk", data)?;
        self.chunk(chunk, out, data)
    }

    fn finish(&mut self, out: &mut Vec<StreamChunk>) -> Result<(), ProviderError> {
        self.end_thinking(out);
        if let Some(usage) = self.usage.take() {
            out.push(StreamChunk::Usage { usage });
        }
        if self.finished {
            Ok(())
        } else {
            Err(ProviderError::Network {
                message: "gemini stream ended before a finishReason".into(),
            })
        }
    }
}

/// Decodes the body of a non-streamed `generateContent` response.
pub(super) fn decode_response(body: &[u8]) -> Result<ModelResponse, ProviderError> {
    let text = String::from_utf8_lossy(body);
    let chunk = parse("response", &text)?;
    let mut decoder = GeminiDecoder::default();
    let mut chunks = Vec::new();
    decoder.chunk(chunk, &mut chunks, &text)?;
    decoder.end_thinking(&mut chunks);
    decoder.close_call(&mut chunks);
    if let Some(usage) = decoder.usage.take() {
        chunks.push(StreamChunk::Usage { usage });
    }
    let mut assembler = ResponseAssembler::default();
    for chunk in chunks {
        assembler.push(chunk)?;
    }
    Ok(assembler.finish())
}
