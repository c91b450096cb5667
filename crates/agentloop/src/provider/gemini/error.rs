//! Classifying Gemini error bodies: `{"error":{"code":…,"message":…,"status":…,"details":[…]}}`
//! (the streaming endpoint may wrap it in a one-element array).

use crate::provider::ProviderError;
use serde::Deserialize;
use serde_json::Value;

/// Google's error object.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ApiError {
    #[serde(default)]
    code: Option<i64>,
    #[serde(default)]
    message: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    details: Vec<Value>,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ApiError,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Body {
    // First: serde would also read `[{"error": …}]` into the struct, field by field.
    Many(Vec<ErrorBody>),
    One(ErrorBody),
}

/// Whether a message says the prompt does not fit the context window.
fn mentions_context_overflow(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    [
        "exceeds the maximum number of tokens",
        "input token count",
        "too many tokens",
        "context length",
        "context window",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

impl ApiError {
    /// The `reason` of the `ErrorInfo` detail, e.g. `API_KEY_INVALID`.
    fn reason(&self) -> Option<&str> {
        self.details.iter().find_map(|detail| detail.get("reason")?.as_str())
    }

    /// The `retryDelay` of the `RetryInfo` detail (`"39s"`, `"1.5s"`), in milliseconds.
    fn retry_delay_ms(&self) -> Option<u64> {
        let delay = self.details.iter().find_map(|detail| detail.get("retryDelay")?.as_str())?;
        let seconds: f64 = delay.strip_suffix('s')?.trim().parse().ok()?;
        (seconds.is_finite() && seconds >= 0.0).then(|| (seconds * 1000.0).round() as u64)
    }

    fn http_status(&self, status: Option<u16>) -> u16 {
        status.or_else(|| self.code.and_then(|code| u16::try_from(code).ok())).unwrap_or(500)
    }
}

/// The error a Google error object stands for. `status` is the HTTP status when known (an
/// error inside a stream has none; the body's `code` stands in).
pub(super) fn from_api_error(error: &ApiError, status: Option<u16>) -> ProviderError {
    let message = error.message.clone();
    let api_key_invalid =
        error.reason() == Some("API_KEY_INVALID") || message.contains("API key not valid");
    match error.status.as_str() {
        _ if api_key_invalid => ProviderError::Auth { status: error.http_status(status), message },
        "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE"
            if mentions_context_overflow(&message) =>
        {
            ProviderError::ContextLengthExceeded { message }
        }
        "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "NOT_FOUND" | "OUT_OF_RANGE" => {
            ProviderError::InvalidRequest { message }
        }
        "RESOURCE_EXHAUSTED" => {
            ProviderError::RateLimited { message, retry_after_ms: error.retry_delay_ms() }
        }
        "UNAVAILABLE" => ProviderError::Overloaded { message },
        "UNAUTHENTICATED" => ProviderError::Auth { status: error.http_status(status), message },
        "PERMISSION_DENIED" => ProviderError::Auth { status: error.http_status(status), message },
        "DEADLINE_EXCEEDED" => ProviderError::Timeout { message },
        "INTERNAL" | "UNKNOWN" | "DATA_LOSS" => {
            ProviderError::Server { status: error.http_status(status), message }
        }
        "CANCELLED" => ProviderError::Cancelled,
        other => ProviderError::Other { message: format!("gemini error {other}: {message}") },
    }
}

/// Refines the transport's `generic` classification of an error response with what the body
/// says. A rate limit prefers the delay the transport read from the headers, then the body's
/// `RetryInfo`.
pub(super) fn classify(status: u16, body: &str, generic: ProviderError) -> ProviderError {
    let error = match serde_json::from_str::<Body>(body) {
        Ok(Body::One(body)) => body.error,
        Ok(Body::Many(bodies)) => match bodies.into_iter().next() {
            Some(body) => body.error,
            None => return generic,
        },
        Err(_) => return generic,
    };
    if error.message.is_empty() && error.status.is_empty() {
        return generic;
    }
    match from_api_error(&error, Some(status)) {
        ProviderError::RateLimited { message, retry_after_ms } => ProviderError::RateLimited {
            message,
            retry_after_ms: generic.retry_after().map(|d| d.as_millis() as u64).or(retry_after_ms),
        },
        // A status this module does not know: the transport's class, Google's message.
        ProviderError::Other { .. } if !error.message.is_empty() => {
            generic.with_message(error.message)
        }
        specific => specific,
    }
}
