//! Amazon Bedrock's Converse API (`POST /model/{modelId}/converse` and `/converse-stream`): the
//! wire format — canonical request → Converse body, the whole response and the binary AWS event
//! stream of `converse-stream` → canonical chunks, exceptions → classified errors.
//!
//! # Mapping
//! - Instructions and every `System` / `Developer` message become `system` text blocks; `User`
//!   and `Tool` messages `user` messages, `Assistant` messages `assistant` ones, consecutive
//!   messages of one role merged (the API wants roles to alternate), tool results first.
//! - Text → `text`; images → `image` (`format` from the media type, `source.bytes`); files →
//!   `document` (`format` from the media type, a `name`); tool calls → `toolUse` (`input` the
//!   parsed arguments, `{}` when they are not an object); results → `toolResult` (`json` for
//!   a JSON result, else `text`; `status: "error"` for an error only).
//! - Reasoning: `reasoningContent.reasoningText` (text and signature) becomes
//!   `Part::Reasoning { opaque: {"bedrock": {"signature": …}} }`, `redactedContent`
//!   `{"bedrock": {"redactedContent": …}}`; both go back as they came. Reasoning of another
//!   family is not sent.
//! - Tools → `toolConfig.tools[].toolSpec` (`inputSchema.json`); `auto` → `{"auto": {}}`,
//!   `required` → `{"any": {}}`, a named tool → `{"tool": {"name"}}`; `none` sends the tools
//!   without a choice (the API has none; it wants the tools when the history uses them).
//! - Prompt caching: `cachePoint` blocks after what the [`CachePolicy`] marks (the same places
//!   as Anthropic's breakpoints: the system prompt, else the tools; the user turn before the
//!   last; the last user turn), at most four.
//! - Usage: `input` = `inputTokens` + `cacheReadInputTokens` + `cacheWriteInputTokens`
//!   (Bedrock's `inputTokens` is the uncached rest), `cached_input` = reads,
//!   `cache_write_input` = writes.
//! - Stop reasons: `end_turn`, `stop_sequence` → `Stop`; `tool_use` → `ToolCalls`;
//!   `max_tokens`, `model_context_window_exceeded` → `Length`; `guardrail_intervened`,
//!   `content_filtered` → `ContentFilter`; others `Other(name)`.
//! - A guardrail's `trace` (and `additionalModelResponseFields`) is kept whole as an opaque part.

mod decode;
mod encode;
mod stream;

#[cfg(test)]
mod tests;

pub use decode::{classify, decode_response};
pub use encode::encode_body;
pub use stream::EventStreamDecoder;

use super::CachePolicy;

/// The family name of this API, on its opaque values.
pub const FAMILY: &str = "bedrock";

/// The Converse wire format for one model (a model id or an inference profile, e.g.
/// `us.anthropic.claude-sonnet-4-5-20250929-v1:0`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Bedrock {
    /// The model id.
    pub model: String,
    /// Prompt-cache breakpoints of requests that carry no policy of their own.
    pub cache: CachePolicy,
    /// Sent as `additionalModelRequestFields` (e.g. `{"thinking": {"type": "enabled",
    /// "budget_tokens": 1024}}` for Claude); `None`: left out.
    pub additional_fields: Option<serde_json::Value>,
}

impl Bedrock {
    /// The Converse API for `model`, caching with automatic breakpoints.
    pub fn converse(model: impl Into<String>) -> Self {
        Self { model: model.into(), cache: CachePolicy::auto(), additional_fields: None }
    }

    /// With this cache policy for requests without one.
    pub fn with_cache(mut self, policy: CachePolicy) -> Self {
        self.cache = policy;
        self
    }

    /// With these `additionalModelRequestFields`.
    pub fn with_additional_fields(mut self, fields: serde_json::Value) -> Self {
        self.additional_fields = Some(fields);
        self
    }

    /// The request path: `/model/{model}/converse` or `/converse-stream`, the model id
    /// percent-encoded (`:` and `/` of ARNs and versions included).
    pub fn path(&self, stream: bool) -> String {
        let mut model = String::with_capacity(self.model.len());
        for byte in self.model.bytes() {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
                model.push(char::from(byte));
            } else {
                model.push_str(&format!("%{byte:02X}"));
            }
        }
        let action = if stream { "converse-stream" } else { "converse" };
        format!("/model/{model}/{action}")
    }
}
