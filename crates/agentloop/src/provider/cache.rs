//! Prompt caching: what a request asks of the provider's cache ([`CachePolicy`]).
//!
//! An agent loop resends a growing prefix (instructions, tools, the history so far) on every
//! iteration; a provider that caches that prefix bills it at a fraction of the input price.
//! Providers cache in one of two ways:
//!
//! - **By breakpoints** (Anthropic's `cache_control`, Bedrock's `cachePoint`): the request
//!   marks where a cacheable prefix ends, at most [`MAX_BREAKPOINTS`] marks per request. With
//!   [`Breakpoints::Auto`] (the default) the provider marks the end of the static prefix (the
//!   instructions, or the tools when there are none), the end of the previous turn (the prefix
//!   the previous call wrote, read back now) and the end of the last message (written now, read
//!   by the next call): three marks. [`Breakpoints::Explicit`] puts them where the caller says;
//!   [`Breakpoints::Off`] sends none.
//! - **Automatically** (OpenAI, Gemini's implicit cache): nothing to mark; a request may name a
//!   cache routing key ([`CachePolicy::key`], OpenAI's `prompt_cache_key`) or a cache the
//!   caller created ([`CachePolicy::cached_content`], Gemini's `cachedContent`).
//!
//! What a call read from and wrote to the cache comes back in its
//! [`Usage`](crate::message::Usage) (`cached_input`, `cache_write_input`).

use serde::{Deserialize, Serialize};

/// The most cache breakpoints one request may carry (Anthropic's and Bedrock's limit).
pub const MAX_BREAKPOINTS: usize = 4;

/// What a request asks of the provider's prompt cache. Set per agent
/// (`AgentBuilder::cache`) or per provider (e.g. `Anthropic::with_cache`); the agent's wins.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
#[non_exhaustive]
pub struct CachePolicy {
    /// Where breakpoint-caching providers mark cacheable prefixes.
    pub breakpoints: Breakpoints,
    /// A cache routing key (OpenAI's `prompt_cache_key`): requests sharing a long prefix and a
    /// key land on the same cache. Left out when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// A cache the caller created ahead (Gemini's `cachedContent`, e.g.
    /// `cachedContents/abc123`). Left out when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_content: Option<String>,
}

impl CachePolicy {
    /// Breakpoints placed by the provider ([`Breakpoints::Auto`]), no key.
    pub fn auto() -> Self {
        Self::default()
    }

    /// No breakpoints, no key: the provider caches only what it caches by itself.
    pub fn off() -> Self {
        Self { breakpoints: Breakpoints::Off, ..Self::default() }
    }

    /// Breakpoints exactly at these points (at most [`MAX_BREAKPOINTS`]; a request asking
    /// for more fails with a clear error before it is sent).
    pub fn explicit(points: impl IntoIterator<Item = CachePoint>) -> Self {
        Self { breakpoints: Breakpoints::Explicit(points.into_iter().collect()), ..Self::default() }
    }

    /// With a cache routing key (OpenAI's `prompt_cache_key`).
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// With a cache created ahead (Gemini's `cachedContent` resource name).
    pub fn with_cached_content(mut self, name: impl Into<String>) -> Self {
        self.cached_content = Some(name.into());
        self
    }

    /// Whether breakpoints are off.
    pub fn is_off(&self) -> bool {
        self.breakpoints == Breakpoints::Off
    }
}

/// Where breakpoint-caching providers mark cacheable prefixes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Breakpoints {
    /// The static prefix, the previous turn and the last message (see the module docs).
    #[default]
    Auto,
    /// None.
    Off,
    /// At these points.
    Explicit(Vec<CachePoint>),
}

/// One place a breakpoint may go: the prefix up to and including it is cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CachePoint {
    /// After the tool definitions.
    Tools,
    /// After the instructions (the system prompt).
    Instructions,
    /// After the message at this index of the request's messages (one that sends nothing,
    /// such as an empty one, marks nothing).
    Message(usize),
    /// After the last message.
    LastMessage,
}

/// The distinct `points`, in order; more than [`MAX_BREAKPOINTS`] is an `InvalidRequest`
/// naming `provider` (whatever the conversation, so that a wrong policy fails on the first
/// call).
pub(crate) fn distinct_points(
    points: &[CachePoint],
    provider: &str,
) -> Result<Vec<CachePoint>, super::ProviderError> {
    let mut asked: Vec<CachePoint> = Vec::new();
    for point in points {
        if !asked.contains(point) {
            asked.push(*point);
        }
    }
    if asked.len() > MAX_BREAKPOINTS {
        return Err(super::ProviderError::InvalidRequest {
            message: format!(
                "the cache policy asks for {} cache breakpoints; {provider} allows at most \
                 {MAX_BREAKPOINTS} per request",
                asked.len()
            ),
        });
    }
    Ok(asked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_read_and_write_as_json() {
        let policy = CachePolicy::explicit([CachePoint::Tools, CachePoint::Message(3)])
            .with_key("support-bot");
        let json = serde_json::to_value(&policy).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({
                "breakpoints": {"explicit": ["tools", {"message": 3}]},
                "key": "support-bot"
            })
        );
        let back: CachePolicy = serde_json::from_value(json).unwrap_or_default();
        assert_eq!(back, policy);
        let off: CachePolicy =
            serde_json::from_value(serde_json::json!({"breakpoints": "off"})).unwrap_or_default();
        assert!(off.is_off());
        assert_eq!(serde_json::from_str::<CachePolicy>("{}").ok(), Some(CachePolicy::auto()));
    }
}
