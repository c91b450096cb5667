//! A whole Converse response → [`ModelResponse`]; error bodies and exception events →
//! classified [`ProviderError`]s; the pieces the stream decoder shares.

use super::FAMILY;
use crate::message::{FinishReason, Message, Opaque, Part, Reasoning, Role, ToolCall, Usage};
use crate::provider::{ModelResponse, ProviderError};
use serde_json::{json, Value};

/// Decodes a whole `converse` response body.
pub fn decode_response(body: &[u8]) -> Result<ModelResponse, ProviderError> {
    let text = || String::from_utf8_lossy(body);
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ProviderError::protocol(format!("invalid Converse response: {e}"), &text()))?;
    let Some(content) = value.pointer("/output/message/content").and_then(Value::as_array) else {
        return Err(ProviderError::protocol("a Converse response without output.message", &text()));
    };
    let mut parts = Vec::with_capacity(content.len());
    for block in content {
        parts.extend(part(block)?);
    }
    let trace = extras(&value);
    parts.extend(trace);
    Ok(ModelResponse {
        message: Message { role: Role::Assistant, content: parts },
        finish_reason: finish_reason(value["stopReason"].as_str().unwrap_or("end_turn")),
        usage: value.get("usage").map(usage).unwrap_or_default(),
        id: None,
        model: None,
        provider: None,
    })
}

/// The part of one whole content block.
fn part(block: &Value) -> Result<Option<Part>, ProviderError> {
    if let Some(text) = block.get("text").and_then(Value::as_str) {
        return Ok((!text.is_empty()).then(|| Part::text(text)));
    }
    if let Some(call) = block.get("toolUse") {
        let (Some(id), Some(name)) = (call["toolUseId"].as_str(), call["name"].as_str()) else {
            return Err(ProviderError::protocol(
                "a toolUse block without id or name",
                &call.to_string(),
            ));
        };
        let arguments = match call.get("input") {
            Some(Value::Null) | None => "{}".to_owned(),
            Some(input) => input.to_string(),
        };
        return Ok(Some(Part::ToolCall(ToolCall { id: id.into(), name: name.into(), arguments })));
    }
    if let Some(reasoning) = block.get("reasoningContent") {
        if let Some(redacted) = reasoning.get("redactedContent") {
            return Ok(Some(redacted_part(redacted.clone())));
        }
        let text = reasoning.pointer("/reasoningText/text").and_then(Value::as_str).unwrap_or("");
        let signature = reasoning.pointer("/reasoningText/signature").cloned();
        return Ok(Some(reasoning_part(text.to_owned(), signature)));
    }
    // Anything else (a guard content, a citations block, a server tool's blocks), whole.
    let kind = block.as_object().and_then(|m| m.keys().next().cloned()).unwrap_or_default();
    Ok(Some(Part::Opaque(Opaque::new(FAMILY, kind, block.clone()))))
}

/// Reasoning with its signature (if any) to send back.
pub(super) fn reasoning_part(text: String, signature: Option<Value>) -> Part {
    let opaque = match signature {
        Some(signature) => json!({FAMILY: {"signature": signature}}),
        None => json!({FAMILY: {}}),
    };
    Part::Reasoning(Reasoning { text, opaque: Some(opaque) })
}

/// Redacted reasoning, to send back as it came.
pub(super) fn redacted_part(data: Value) -> Part {
    Part::Reasoning(Reasoning {
        text: String::new(),
        opaque: Some(json!({FAMILY: {"redactedContent": data}})),
    })
}

/// A guardrail's `trace` and `additionalModelResponseFields`, whole, as opaque parts (never
/// sent back).
pub(super) fn extras(value: &Value) -> Vec<Part> {
    ["trace", "additionalModelResponseFields"]
        .into_iter()
        .filter_map(|key| {
            let extra = value.get(key).filter(|v| !v.is_null())?;
            Some(Part::Opaque(Opaque::new(FAMILY, "trace", json!({key: extra}))))
        })
        .collect()
}

pub(super) fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "guardrail_intervened" | "content_filtered" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Canonical usage: the prompt total includes cache reads and writes.
pub(super) fn usage(usage: &Value) -> Usage {
    let count = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
    let (read, written) = (count("cacheReadInputTokens"), count("cacheWriteInputTokens"));
    Usage {
        input: count("inputTokens").saturating_add(read).saturating_add(written),
        output: count("outputTokens"),
        cached_input: read,
        reasoning: 0,
        cache_write_input: written,
    }
}

/// An exception (`:exception-type` of a stream's event, or the `x-amzn-errortype` / `__type`
/// of an error response) with its message, classified.
pub fn classify(kind: &str, message: &str, status: Option<u16>) -> ProviderError {
    // `ThrottlingException:http://internal.amazon.com/…` and `com.amazon…#ThrottlingException`.
    let kind = kind.split(':').next().unwrap_or(kind);
    let kind = kind.rsplit('#').next().unwrap_or(kind);
    let message = message.to_owned();
    match kind.to_ascii_lowercase().as_str() {
        "throttlingexception" => ProviderError::RateLimited { message, retry_after_ms: None },
        "servicequotaexceededexception" => {
            ProviderError::RateLimited { message, retry_after_ms: None }
        }
        "modeltimeoutexception" => ProviderError::Timeout { message },
        "modelnotreadyexception" | "serviceunavailableexception" => {
            ProviderError::Server { status: 503, message }
        }
        "internalserverexception" => ProviderError::Server { status: 500, message },
        "modelstreamerrorexception" | "modelerrorexception" => {
            ProviderError::Server { status: status.unwrap_or(424), message }
        }
        "accessdeniedexception" | "unrecognizedclientexception" | "expiredtokenexception" => {
            ProviderError::Auth { status: status.unwrap_or(403), message }
        }
        "validationexception" if too_long(&message) => {
            ProviderError::ContextLengthExceeded { message }
        }
        "validationexception" | "resourcenotfoundexception" => {
            ProviderError::InvalidRequest { message }
        }
        _ => match status {
            Some(429) => ProviderError::RateLimited { message, retry_after_ms: None },
            Some(401 | 403) => ProviderError::Auth { status: status.unwrap_or(403), message },
            Some(status) if status >= 500 => ProviderError::Server { status, message },
            Some(_) => ProviderError::InvalidRequest { message },
            None => ProviderError::Other { message: format!("{kind}: {message}") },
        },
    }
}

/// Whether a validation message says the prompt does not fit.
fn too_long(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    ["too long", "too many input tokens", "context length", "prompt is too long", "context window"]
        .iter()
        .any(|needle| message.contains(needle))
}
