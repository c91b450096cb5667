//! [`ProviderError`]: what went wrong talking to a model, classified so that callers know what
//! to do about it (retry, wait, compact, give up).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// An error from a model provider.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProviderError {
    /// Too many requests; wait `retry_after_ms` when the provider said how long.
    #[error("rate limited: {message}")]
    RateLimited {
        /// What the provider said.
        message: String,
        /// How long to wait, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
    },
    /// The credentials were refused (401/403).
    #[error("authentication failed ({status}): {message}")]
    Auth {
        /// HTTP status.
        status: u16,
        /// What the provider said.
        message: String,
    },
    /// The request was rejected as invalid (400).
    #[error("invalid request: {message}")]
    InvalidRequest {
        /// What the provider said.
        message: String,
    },
    /// The prompt does not fit the model's context window.
    #[error("context length exceeded: {message}")]
    ContextLengthExceeded {
        /// What the provider said.
        message: String,
    },
    /// The provider is overloaded (e.g. Anthropic 529).
    #[error("provider overloaded: {message}")]
    Overloaded {
        /// What the provider said.
        message: String,
    },
    /// A server error (5xx), or a 409 conflict that a retry may resolve.
    #[error("server error ({status}): {message}")]
    Server {
        /// HTTP status.
        status: u16,
        /// What the provider said.
        message: String,
    },
    /// The model's server could not be reached at all: the connection was refused, the
    /// host name did not resolve, the TLS handshake failed, or connecting timed out. Nothing
    /// was sent, so a retry is safe, but it is not the passing fault other retries are for:
    /// the driver gives these a small budget of their own for the whole run (see
    /// [`RetryPolicy::with_unreachable_budget`](super::RetryPolicy::with_unreachable_budget))
    /// and the run fails when it is spent.
    #[error("the model's server could not be reached: {message}")]
    Unreachable {
        /// What failed, with its causes.
        message: String,
    },
    /// The connection failed or dropped.
    #[error("network error: {message}")]
    Network {
        /// What failed.
        message: String,
    },
    /// A connect, request or stream-idle timeout.
    #[error("timeout: {message}")]
    Timeout {
        /// Which timeout.
        message: String,
    },
    /// The provider sent something we could not parse.
    #[error("protocol error: {message} (near: {excerpt:?})")]
    Protocol {
        /// What was wrong.
        message: String,
        /// An excerpt of the offending bytes.
        excerpt: String,
    },
    /// The request was cancelled by the caller.
    #[error("cancelled")]
    Cancelled,
    /// Anything else.
    #[error("{message}")]
    Other {
        /// Description.
        message: String,
    },
}

impl ProviderError {
    /// A protocol error with an excerpt (at most 200 bytes) of the input.
    pub fn protocol(message: impl Into<String>, input: &str) -> Self {
        let mut end = input.len().min(200);
        while !input.is_char_boundary(end) {
            end -= 1;
        }
        Self::Protocol { message: message.into(), excerpt: input[..end].to_owned() }
    }

    /// Whether retrying the same request may succeed: rate limits (429), overload (529),
    /// network errors, an unreachable server (under its own budget), timeouts (including HTTP
    /// 408), and server errors with status 408, 409, 500, 502, 503, 504 or 529.
    /// [`RetryPolicy`](super::RetryPolicy) retries exactly these (and the run asks again
    /// after them, but not after an unreachable server: `docs/PROVIDERS.md`, "Retries").
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::RateLimited { .. }
            | Self::Overloaded { .. }
            | Self::Network { .. }
            | Self::Unreachable { .. }
            | Self::Timeout { .. } => true,
            Self::Server { status, .. } => {
                matches!(status, 408 | 409 | 500 | 502 | 503 | 504 | 529)
            }
            _ => false,
        }
    }

    /// The same error with the provider's `message` instead of the one it has (a protocol
    /// error and a cancellation are kept as they are).
    pub(crate) fn with_message(self, message: String) -> Self {
        match self {
            Self::RateLimited { retry_after_ms, .. } => {
                Self::RateLimited { message, retry_after_ms }
            }
            Self::Auth { status, .. } => Self::Auth { status, message },
            Self::InvalidRequest { .. } => Self::InvalidRequest { message },
            Self::ContextLengthExceeded { .. } => Self::ContextLengthExceeded { message },
            Self::Overloaded { .. } => Self::Overloaded { message },
            Self::Server { status, .. } => Self::Server { status, message },
            Self::Unreachable { .. } => Self::Unreachable { message },
            Self::Network { .. } => Self::Network { message },
            Self::Timeout { .. } => Self::Timeout { message },
            Self::Other { .. } => Self::Other { message },
            other @ (Self::Protocol { .. } | Self::Cancelled) => other,
        }
    }

    /// Whether the server could not be reached at all ([`ProviderError::Unreachable`]).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Self::Unreachable { .. })
    }

    /// The HTTP status this error stands for, when it has one: the status it carries, 429
    /// for a rate limit, 529 for an overload.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Auth { status, .. } | Self::Server { status, .. } => Some(*status),
            Self::RateLimited { .. } => Some(429),
            Self::Overloaded { .. } => Some(529),
            _ => None,
        }
    }

    /// How long the provider asked us to wait before retrying.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after_ms: Some(ms), .. } => Some(Duration::from_millis(*ms)),
            _ => None,
        }
    }
}
