//! The client's error type.

use crate::text::sanitize;
use serde_json::Value;

/// Why an A2A call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum A2aClientError {
    /// A URL could not be parsed or joined.
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    /// A configured header name or value is not valid HTTP (the value is never shown).
    #[error("invalid header '{0}'")]
    InvalidHeader(String),
    /// The agent card lists no interface this client speaks (JSON-RPC or HTTP+JSON, 1.x).
    #[error("the agent card lists no supported interface (offered: {0})")]
    NoSupportedInterface(String),
    /// The request did not reach the agent, or the connection broke.
    #[error("request to the A2A agent failed: {0}")]
    Transport(String),
    /// No answer (or, on a stream, no byte) within the configured time.
    #[error("the A2A agent did not answer within {0} ms")]
    Timeout(u64),
    /// The agent answered with an A2A error (JSON-RPC `error`, or a REST error body).
    #[error("the A2A agent returned error {code} ({reason}): {message}")]
    Remote {
        /// The A2A / JSON-RPC error code (`a2a::error_code`), e.g. -32001 task not found.
        code: i32,
        /// The code's reason, e.g. `TASK_NOT_FOUND`.
        reason: String,
        /// The agent's message (sanitized, bounded).
        message: String,
        /// The error's details, as sent (boxed: a JSON value is large, and errors travel
        /// in every `Result`).
        data: Option<Box<Value>>,
        /// The HTTP status, for the HTTP+JSON binding.
        http_status: Option<u16>,
    },
    /// The agent answered with an HTTP error status and no A2A error body.
    #[error("the A2A agent answered HTTP {status}: {body}")]
    HttpStatus {
        /// The status code.
        status: u16,
        /// An excerpt of the body (sanitized).
        body: String,
    },
    /// The answer is not what the protocol says (not JSON, wrong shape, not SSE).
    #[error("invalid answer from the A2A agent: {0}")]
    InvalidResponse(String),
    /// The answer (or one streamed event) is larger than the configured limit.
    #[error("the A2A agent's answer exceeds the limit of {0} bytes")]
    TooLarge(usize),
}

impl A2aClientError {
    /// The A2A error code, for [`Remote`](Self::Remote) errors.
    pub fn code(&self) -> Option<i32> {
        match self {
            Self::Remote { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// True for the A2A "task not found" error (-32001).
    pub fn is_task_not_found(&self) -> bool {
        self.code() == Some(a2a::error_code::TASK_NOT_FOUND)
    }

    pub(crate) fn remote(code: i32, message: &str, data: Option<Value>, http: Option<u16>) -> Self {
        Self::Remote {
            code,
            reason: a2a::error_reason(code).to_owned(),
            message: sanitize(message, 500),
            data: data.map(Box::new),
            http_status: http,
        }
    }

    pub(crate) fn invalid(what: impl std::fmt::Display) -> Self {
        Self::InvalidResponse(sanitize(&what.to_string(), 500))
    }

    /// From a reqwest error: timeouts apart, the text without the URL (a URL may carry a
    /// key in its query).
    pub(crate) fn from_reqwest(error: reqwest::Error, timeout: std::time::Duration) -> Self {
        if error.is_timeout() {
            return Self::Timeout(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
        }
        let error = error.without_url();
        let mut text = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        Self::Transport(sanitize(&text, 500))
    }
}
