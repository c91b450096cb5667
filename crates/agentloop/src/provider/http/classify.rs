//! The generic classification of HTTP error responses into [`ProviderError`]s, from the
//! status, the headers (rate-limit delays) and the JSON error body (the provider's message).

use crate::provider::ProviderError;
use http::header::HeaderMap;
use serde_json::Value;
use std::time::{Duration, SystemTime};

/// The longest message kept from an error body that is not JSON.
const MAX_RAW_MESSAGE: usize = 500;

/// Classifies an error response from its status, headers and body: 401/403 → `Auth`,
/// 408 → `Timeout`, 409 and 5xx → `Server`, 429 → `RateLimited` (with the delay the headers
/// ask for), 529 → `Overloaded`, other 4xx → `InvalidRequest`, anything else → `Other`.
/// The message is the provider's, taken from the JSON error body when there is one.
pub fn classify_http_error(status: u16, headers: &HeaderMap, body: &str) -> ProviderError {
    classify_at(status, headers, body, SystemTime::now())
}

/// [`classify_http_error`] with the current time given (HTTP-date and RFC 3339 delays are
/// relative to it).
pub(crate) fn classify_at(
    status: u16,
    headers: &HeaderMap,
    body: &str,
    now: SystemTime,
) -> ProviderError {
    let message = error_message(body).unwrap_or_else(|| raw_message(status, body));
    match status {
        401 | 403 => ProviderError::Auth { status, message },
        400 => ProviderError::InvalidRequest { message },
        408 => ProviderError::Timeout { message: format!("HTTP 408: {message}") },
        429 => ProviderError::RateLimited {
            message,
            retry_after_ms: retry_after(headers, now).map(|d| d.as_millis() as u64),
        },
        529 => ProviderError::Overloaded { message },
        409 | 500..=599 => ProviderError::Server { status, message },
        402..=499 => ProviderError::InvalidRequest { message: format!("HTTP {status}: {message}") },
        // Redirects are not followed (a POST would be sent again, with its credentials).
        300..=399 => {
            let location = headers.get("location").and_then(|v| v.to_str().ok()).unwrap_or("?");
            ProviderError::InvalidRequest {
                message: format!(
                    "HTTP {status}: the server redirects to {location}; redirects are not \
                     followed, use the new address as the base URL"
                ),
            }
        }
        _ => {
            ProviderError::Other { message: format!("unexpected HTTP status {status}: {message}") }
        }
    }
}

/// The message of a JSON error body, in any of the shapes providers use:
/// `{"error": {"message": …}}` (OpenAI, llama.cpp, Anthropic, Gemini), `{"error": "…"}`
/// (Ollama), `{"message": …}` (Mistral), `{"detail": …}` (FastAPI servers).
pub fn error_message(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
    let error = value.get("error");
    error
        .and_then(|e| e.get("message"))
        .and_then(text)
        .or_else(|| error.and_then(text))
        .or_else(|| value.get("message").and_then(text))
        .or_else(|| match value.get("detail") {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(detail @ (Value::Array(_) | Value::Object(_))) => {
                Some(crate::canonical::to_string(detail))
            }
            _ => None,
        })
}

/// The error object of a JSON error body (`{"error": {…}}`), or the body itself.
pub(crate) fn error_object(body: &str) -> Option<Value> {
    let value: Value = serde_json::from_str(body).ok()?;
    match value.get("error") {
        Some(error @ Value::Object(_)) => Some(error.clone()),
        _ => Some(value),
    }
}

fn raw_message(status: u16, body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        return http::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("no message")
            .to_owned();
    }
    let mut end = body.len().min(MAX_RAW_MESSAGE);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    body[..end].to_owned()
}

/// How long the response's headers ask to wait: `retry-after-ms`, then `Retry-After`
/// (seconds or an HTTP date), then the providers' rate-limit reset headers
/// (`x-ratelimit-reset-requests` / `-tokens` as durations like `1s` or `6m0s`,
/// `anthropic-ratelimit-*-reset` as RFC 3339 times). Of the reset headers, those of an
/// exhausted limit (its `remaining` header is `0`) win; the longest of them is used.
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    if let Some(value) = header("retry-after") {
        if let Ok(seconds) = value.parse::<f64>() {
            if seconds.is_finite() && seconds >= 0.0 {
                return Some(Duration::from_secs_f64(seconds));
            }
        }
        if let Ok(date) = httpdate::parse_http_date(value) {
            return Some(date.duration_since(now).unwrap_or(Duration::ZERO));
        }
    }
    // (reset header, remaining header, how the reset is written)
    const RESETS: [(&str, &str, bool); 6] = [
        ("x-ratelimit-reset-requests", "x-ratelimit-remaining-requests", false),
        ("x-ratelimit-reset-tokens", "x-ratelimit-remaining-tokens", false),
        ("anthropic-ratelimit-requests-reset", "anthropic-ratelimit-requests-remaining", true),
        ("anthropic-ratelimit-tokens-reset", "anthropic-ratelimit-tokens-remaining", true),
        (
            "anthropic-ratelimit-input-tokens-reset",
            "anthropic-ratelimit-input-tokens-remaining",
            true,
        ),
        (
            "anthropic-ratelimit-output-tokens-reset",
            "anthropic-ratelimit-output-tokens-remaining",
            true,
        ),
    ];
    let mut exhausted: Option<Duration> = None;
    let mut any: Option<Duration> = None;
    for (reset, remaining, rfc3339) in RESETS {
        let Some(value) = header(reset) else { continue };
        let delay = if rfc3339 {
            humantime::parse_rfc3339_weak(value)
                .ok()
                .map(|at| at.duration_since(now).unwrap_or(Duration::ZERO))
        } else {
            parse_reset_duration(value)
        };
        let Some(delay) = delay else { continue };
        any = any.max(Some(delay));
        if header(remaining) == Some("0") {
            exhausted = exhausted.max(Some(delay));
        }
    }
    exhausted.or(any)
}

/// A reset duration as OpenAI-style servers write it: `1s`, `6m0s`, `20ms`, `1.5s`, or plain
/// seconds.
fn parse_reset_duration(value: &str) -> Option<Duration> {
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    humantime::parse_duration(value).ok()
}
