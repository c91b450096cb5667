//! Classifying Anthropic error bodies (and the OpenAI-shaped ones llama.cpp sends on
//! `/v1/messages`).

use crate::provider::ProviderError;
use serde::Deserialize;

/// The error object of an `error` event or an error body.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ApiError {
    #[serde(rename = "type", default)]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) message: String,
}

/// Both shapes have an `error` object with `type` and `message`: Anthropic's
/// `{"type":"error","error":{"type":…,"message":…}}` and OpenAI's
/// `{"error":{"type":…,"message":…,"code":…}}`.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ApiError,
}

/// Whether a message says the prompt does not fit the context window.
pub(super) fn mentions_context_overflow(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    [
        "prompt is too long",
        "exceed context limit",
        "exceeds the available context size",
        "context length",
        "context window",
        "maximum context",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

/// The error an error `type` stands for; `None` for types this module does not know.
fn from_type(kind: &str, message: &str, status: Option<u16>) -> Option<ProviderError> {
    let message = message.to_owned();
    let error = match kind {
        "exceed_context_size_error" => ProviderError::ContextLengthExceeded { message },
        "invalid_request_error" if mentions_context_overflow(&message) => {
            ProviderError::ContextLengthExceeded { message }
        }
        "invalid_request_error" | "not_found_error" | "request_too_large" => {
            ProviderError::InvalidRequest { message }
        }
        "overloaded_error" => ProviderError::Overloaded { message },
        "rate_limit_error" => ProviderError::RateLimited { message, retry_after_ms: None },
        "authentication_error" => ProviderError::Auth { status: status.unwrap_or(401), message },
        "permission_error" => ProviderError::Auth { status: status.unwrap_or(403), message },
        "api_error" => ProviderError::Server { status: status.unwrap_or(500), message },
        "timeout_error" => ProviderError::Timeout { message },
        _ => return None,
    };
    Some(error)
}

/// The error of an `error` event in a stream (or an error object in a 200 body).
pub(super) fn stream_error(error: &ApiError) -> ProviderError {
    from_type(&error.kind, &error.message, None).unwrap_or_else(|| ProviderError::Other {
        message: format!("anthropic error {}: {}", error.kind, error.message),
    })
}

/// Refines the transport's `generic` classification of an error response with what the body
/// says. A rate limit keeps the delay the transport read from the headers.
pub(super) fn classify(status: u16, body: &str, generic: ProviderError) -> ProviderError {
    let Ok(ErrorBody { error }) = serde_json::from_str::<ErrorBody>(body) else {
        return generic;
    };
    if status == 529 {
        return ProviderError::Overloaded { message: error.message };
    }
    match from_type(&error.kind, &error.message, Some(status)) {
        Some(ProviderError::RateLimited { message, .. }) => {
            ProviderError::RateLimited { message, retry_after_ms: retry_after_ms(&generic) }
        }
        Some(specific) => specific,
        None if mentions_context_overflow(&error.message) => {
            ProviderError::ContextLengthExceeded { message: error.message }
        }
        None if error.message.is_empty() => generic,
        None => generic.with_message(error.message),
    }
}

fn retry_after_ms(error: &ProviderError) -> Option<u64> {
    match error {
        ProviderError::RateLimited { retry_after_ms, .. } => *retry_after_ms,
        _ => None,
    }
}
