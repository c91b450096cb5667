//! Test support shared by the wire-format tests: reading fixture files, splitting an SSE
//! stream into its events and driving a [`StreamDecoder`] over them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::provider::wire::StreamDecoder;
use crate::provider::{ModelResponse, ProviderError, ResponseAssembler, StreamChunk};

/// The text of `tests/fixtures/<dir>/<name>`.
pub(crate) fn fixture(dir: &str, name: &str) -> String {
    let path = format!("{}/tests/fixtures/{dir}/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// Splits an SSE stream into `(event name, data)` pairs as the SSE spec dispatches them: one
/// event per blank line, `data:` lines joined with `\n`, comments and other fields ignored.
pub(crate) fn sse_events(text: &str) -> Vec<(String, String)> {
    let mut events = Vec::new();
    let mut event = String::new();
    let mut data: Option<String> = None;
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if let Some(data) = data.take() {
                events.push((std::mem::take(&mut event), data));
            }
            event.clear();
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => event = value.to_owned(),
            "data" => match &mut data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
    events
}

/// Feeds every event to `decoder`, then `finish()`; returns all chunks, or the first error.
pub(crate) fn decode_chunks(
    mut decoder: Box<dyn StreamDecoder>,
    sse: &str,
) -> Result<Vec<StreamChunk>, ProviderError> {
    let mut out = Vec::new();
    for (event, data) in sse_events(sse) {
        decoder.decode(&event, &data, &mut out)?;
    }
    decoder.finish(&mut out)?;
    Ok(out)
}

/// Folds chunks into a response with the [`ResponseAssembler`].
pub(crate) fn assemble(chunks: Vec<StreamChunk>) -> Result<ModelResponse, ProviderError> {
    let mut assembler = ResponseAssembler::default();
    for chunk in chunks {
        assembler.push(chunk)?;
    }
    Ok(assembler.finish())
}

/// Decodes a whole SSE stream into the response the transport would return.
pub(crate) fn decode_sse(
    decoder: Box<dyn StreamDecoder>,
    sse: &str,
) -> Result<ModelResponse, ProviderError> {
    assemble(decode_chunks(decoder, sse)?)
}

/// Feeds arbitrary input to a decoder (for the never-panics property tests).
pub(crate) fn feed(decoder: &mut dyn StreamDecoder, event: &str, data: &str) {
    let mut out = Vec::new();
    let _ = decoder.decode(event, data, &mut out);
    let _ = decoder.finish(&mut out);
}

/// Arbitrary JSON values, a few levels deep, with the key names the decoders look at so that
/// random documents reach past the first field check.
pub(crate) fn arb_json() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    use serde_json::Value;
    const KEYS: &[&str] = &[
        "type",
        "index",
        "delta",
        "message",
        "usage",
        "content_block",
        "text",
        "partial_json",
        "thinking",
        "signature",
        "data",
        "id",
        "name",
        "input",
        "stop_reason",
        "error",
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "candidates",
        "content",
        "parts",
        "thought",
        "thoughtSignature",
        "functionCall",
        "args",
        "finishReason",
        "usageMetadata",
        "promptTokenCount",
        "promptFeedback",
        "blockReason",
        "responseId",
        "code",
        "status",
        "details",
        "retryDelay",
        "reason",
    ];
    const WORDS: &[&str] = &[
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
        "text",
        "tool_use",
        "thinking",
        "redacted_thinking",
        "text_delta",
        "input_json_delta",
        "thinking_delta",
        "signature_delta",
        "end_turn",
        "tool_use",
        "STOP",
        "SAFETY",
        "overloaded_error",
        "RESOURCE_EXHAUSTED",
        "1.5s",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        proptest::sample::select(WORDS).prop_map(|w| Value::String(w.to_owned())),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((proptest::sample::select(KEYS), inner), 0..6).prop_map(
                |fields| {
                    Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                }
            ),
        ]
    })
}
