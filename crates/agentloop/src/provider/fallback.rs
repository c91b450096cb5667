//! Fallback chains: one [`Provider`] made of several, each asked in turn when the one before
//! it fails in a way the [`FallbackPolicy`] says another provider may not.
//!
//! ```no_run
//! use agentloop::provider::openai::OpenAi;
//! use agentloop::provider::{Anthropic, Fallback};
//!
//! let chain = Fallback::new([
//!     Fallback::member(Anthropic::provider("claude-sonnet-4-5")?),
//!     Fallback::member(OpenAi::chat("gpt-4o")?),
//! ])?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! - Each member is first retried under its own [`RetryPolicy`] (a rate limit is a fallback
//!   only once its retries are spent); then, when the error is one the policy falls back on,
//!   the same request goes to the next member. The chain itself has no retry policy: the
//!   driver does not retry the whole chain.
//! - A member falls back only before any of its content arrived. Once text or a tool call
//!   has streamed, an error is the call's error (the run's re-ask rule judges it).
//! - The chain sends [`StreamChunk::Answered`] before the answering member's content: the
//!   run journals the member (`family:name`) on `model_responded`, so a resumed or replayed
//!   run, its cost (the member's price, `AgentBuilder::provider_price`) and its telemetry
//!   know which provider answered each call.
//! - What one member produced is sent to another in the shape that member accepts: each wire
//!   format leaves out reasoning and provider-only content of another family (signed
//!   thinking, encrypted reasoning, server-tool blocks); text, tool calls and tool results go
//!   to every family.
//! - When every member fails, the error is the last member's, of its kind, its message naming
//!   every member's failure.

use super::secrets::Secrets;
use super::StreamChunk;
use super::{ChunkStream, ModelRequest, ModelResponse, Provider, ProviderError, RetryPolicy};
use crate::message::FinishReason;
use futures::future::BoxFuture;
use futures::StreamExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which errors send a request on to the next member of a chain.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FallbackPolicy {
    /// Rate limits (once the member's retries are spent). Default: yes.
    pub rate_limited: bool,
    /// Overload (Anthropic's 529 and the like). Default: yes.
    pub overloaded: bool,
    /// Server errors (5xx) and dropped connections. Default: yes.
    pub server: bool,
    /// Timeouts, and servers that could not be reached. Default: yes.
    pub timeout: bool,
    /// A prompt too long for this member's model. Default: yes.
    pub context_length: bool,
    /// Refused credentials (a revoked key). Default: no: a configuration error should show.
    pub auth: bool,
    /// A content filter: a request refused for its content (an error naming the filter), or
    /// an answer that is nothing but a content-filter stop. Default: no.
    pub content_filter: bool,
}

impl Default for FallbackPolicy {
    fn default() -> Self {
        Self {
            rate_limited: true,
            overloaded: true,
            server: true,
            timeout: true,
            context_length: true,
            auth: false,
            content_filter: false,
        }
    }
}

impl FallbackPolicy {
    /// The default policy (see the fields).
    pub fn new() -> Self {
        Self::default()
    }

    /// Also falls back on a content filter.
    pub fn with_content_filter(mut self, on: bool) -> Self {
        self.content_filter = on;
        self
    }

    /// Also falls back on refused credentials.
    pub fn with_auth(mut self, on: bool) -> Self {
        self.auth = on;
        self
    }

    /// Whether `error` sends the request on to the next member.
    pub fn falls_back(&self, error: &ProviderError) -> bool {
        match error {
            ProviderError::RateLimited { .. } => self.rate_limited,
            ProviderError::Overloaded { .. } => self.overloaded,
            ProviderError::Server { .. } | ProviderError::Network { .. } => self.server,
            ProviderError::Timeout { .. } | ProviderError::Unreachable { .. } => self.timeout,
            ProviderError::ContextLengthExceeded { .. } => self.context_length,
            ProviderError::Auth { .. } => self.auth,
            ProviderError::InvalidRequest { message } => {
                self.content_filter && names_a_content_filter(message)
            }
            ProviderError::Protocol { .. }
            | ProviderError::Cancelled
            | ProviderError::Other { .. } => false,
        }
    }
}

/// Whether a refusal's message is a content filter's (Azure's `content_filter` code,
/// OpenAI's and Azure's "content management policy", Gemini's safety blocks).
fn names_a_content_filter(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    ["content_filter", "content filter", "content management policy", "safety"]
        .iter()
        .any(|needle| message.contains(needle))
}

/// One member of a chain: a provider and the label it is journaled under.
#[derive(Clone)]
pub struct Member {
    provider: Arc<dyn Provider>,
    label: String,
    retry: Option<RetryPolicy>,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member").field("label", &self.label).finish_non_exhaustive()
    }
}

impl Member {
    /// The label the member is journaled under: `family:name`.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// With this retry policy instead of the provider's own.
    pub fn with_retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }
}

/// Why a chain could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FallbackError {
    /// A chain needs at least one member.
    #[error("a fallback chain needs at least one provider")]
    Empty,
    /// Two members have the same label: the journal could not tell them apart.
    #[error(
        "two members of the fallback chain are both '{0}': the journal could not tell them apart"
    )]
    Duplicate(String),
}

/// A fallback chain (see the module docs).
#[derive(Debug, Clone)]
pub struct Fallback {
    members: Arc<Vec<Member>>,
    policy: FallbackPolicy,
    name: String,
}

impl Fallback {
    /// A member: `provider`, labelled `family:name`, retried under its own policy.
    pub fn member(provider: impl Provider + 'static) -> Member {
        let label = format!("{}:{}", provider.family(), provider.name());
        let retry = provider.retry_policy();
        Member { provider: Arc::new(provider), label, retry }
    }

    /// A chain of these members, first to last, with the default [`FallbackPolicy`].
    pub fn new(members: impl IntoIterator<Item = Member>) -> Result<Self, FallbackError> {
        let members: Vec<Member> = members.into_iter().collect();
        if members.is_empty() {
            return Err(FallbackError::Empty);
        }
        for (i, member) in members.iter().enumerate() {
            if members[..i].iter().any(|m| m.label == member.label) {
                return Err(FallbackError::Duplicate(member.label.clone()));
            }
        }
        let name = members.iter().map(|m| m.provider.name()).collect::<Vec<_>>().join(",");
        Ok(Self { members: Arc::new(members), policy: FallbackPolicy::default(), name })
    }

    /// With this policy.
    pub fn with_policy(mut self, policy: FallbackPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The members' labels, first to last.
    pub fn labels(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(Member::label)
    }
}

/// The failures so far, for the error when every member failed.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn push(&mut self, member: &Member, error: &ProviderError) {
        self.0.push(format!("{}: {error}", member.label));
    }

    /// `last`, of its kind, its message naming every failure.
    fn into_error(mut self, member: &Member, last: ProviderError) -> ProviderError {
        if self.0.is_empty() {
            return last;
        }
        self.push(member, &last);
        let message = format!("every provider of the fallback chain failed: {}", self.0.join("; "));
        last.with_message(message)
    }
}

/// How one member's attempt at a streamed call ended before any content.
enum Start {
    /// Content came: these chunks so far, and the rest of the stream.
    Content(Vec<StreamChunk>, ChunkStream),
    /// The member failed before any content.
    Failed(ProviderError),
    /// The answer is a content-filter stop and nothing else (these chunks).
    Filtered(Vec<StreamChunk>),
}

/// Reads `stream` up to its first content (or its end, or an error).
async fn start(mut stream: ChunkStream) -> Start {
    let mut held = Vec::new();
    while let Some(next) = stream.next().await {
        match next {
            Err(error) => return Start::Failed(error),
            Ok(chunk) => {
                let content = !matches!(
                    chunk,
                    StreamChunk::ResponseInfo { .. }
                        | StreamChunk::Usage { .. }
                        | StreamChunk::Answered { .. }
                        | StreamChunk::Finish { .. }
                );
                let filtered =
                    matches!(chunk, StreamChunk::Finish { reason: FinishReason::ContentFilter });
                held.push(chunk);
                if content {
                    return Start::Content(held, stream);
                }
                if filtered {
                    // Whatever follows (usage) belongs to the refused answer.
                    while let Some(Ok(chunk)) = stream.next().await {
                        held.push(chunk);
                    }
                    return Start::Filtered(held);
                }
            }
        }
    }
    Start::Content(held, futures::stream::empty().boxed())
}

/// The wait before `member`'s next attempt after `error`, if it retries: never for a server
/// that could not be reached (the next member is asked at once).
fn retry_delay(
    member: &Member,
    attempt: u32,
    error: &ProviderError,
    since: Instant,
) -> Option<Duration> {
    if error.is_unreachable() {
        return None;
    }
    member.retry.as_ref()?.next_delay_within(attempt, error, since.elapsed())
}

impl Provider for Fallback {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let members = Arc::clone(&self.members);
        let policy = self.policy.clone();
        Box::pin(async_stream::stream! {
            let mut failures = Failures::default();
            let count = members.len();
            for (index, member) in members.iter().enumerate() {
                let last = index + 1 == count;
                let (mut attempt, since) = (1u32, Instant::now());
                let outcome = loop {
                    match start(member.provider.stream(request.clone())).await {
                        Start::Failed(error) => match retry_delay(member, attempt, &error, since) {
                            Some(delay) => {
                                tokio::time::sleep(delay).await;
                                attempt += 1;
                            }
                            None => break Err(error),
                        },
                        Start::Filtered(held) if policy.content_filter && !last => {
                            let error = ProviderError::InvalidRequest {
                                message: "the answer was withheld by a content filter".into(),
                            };
                            drop(held);
                            break Err(error);
                        }
                        Start::Filtered(held) => break Ok((held, None)),
                        Start::Content(held, rest) => break Ok((held, Some(rest))),
                    }
                };
                match outcome {
                    Ok((held, rest)) => {
                        yield Ok(StreamChunk::Answered { provider: member.label.clone() });
                        for chunk in held {
                            yield Ok(chunk);
                        }
                        if let Some(mut rest) = rest {
                            while let Some(next) = rest.next().await {
                                yield next;
                            }
                        }
                        return;
                    }
                    Err(error) if !last && policy.falls_back(&error) => {
                        failures.push(member, &error);
                    }
                    Err(error) => {
                        yield Err(failures.into_error(member, error));
                        return;
                    }
                }
            }
        })
    }

    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        let members = Arc::clone(&self.members);
        let policy = self.policy.clone();
        Box::pin(async move {
            let mut failures = Failures::default();
            let count = members.len();
            for (index, member) in members.iter().enumerate() {
                let last = index + 1 == count;
                let (mut attempt, since) = (1u32, Instant::now());
                let outcome = loop {
                    match member.provider.complete(request.clone()).await {
                        Err(error) => match retry_delay(member, attempt, &error, since) {
                            Some(delay) => {
                                tokio::time::sleep(delay).await;
                                attempt += 1;
                            }
                            None => break Err(error),
                        },
                        Ok(response)
                            if policy.content_filter
                                && !last
                                && response.finish_reason == FinishReason::ContentFilter
                                && response.message.content.is_empty() =>
                        {
                            break Err(ProviderError::InvalidRequest {
                                message: "the answer was withheld by a content filter".into(),
                            });
                        }
                        Ok(response) => break Ok(response),
                    }
                };
                match outcome {
                    Ok(mut response) => {
                        response.provider = Some(member.label.clone());
                        return Ok(response);
                    }
                    Err(error) if !last && policy.falls_back(&error) => {
                        failures.push(member, &error);
                    }
                    Err(error) => return Err(failures.into_error(member, error)),
                }
            }
            Err(ProviderError::Other {
                message: "a fallback chain needs at least one provider".into(),
            })
        })
    }

    /// The members' names, first to last, joined by commas: a run's identity changes with
    /// the chain.
    fn name(&self) -> &str {
        &self.name
    }

    fn family(&self) -> &str {
        "fallback"
    }

    /// Whether every member streams (the driver otherwise asks for whole responses).
    fn streams(&self) -> bool {
        self.members.iter().all(|m| m.provider.streams())
    }

    /// `None`: each member retries under its own policy inside the chain.
    fn retry_policy(&self) -> Option<RetryPolicy> {
        None
    }

    fn supports_tools(&self) -> bool {
        self.members.iter().all(|m| m.provider.supports_tools())
    }

    fn native_output(&self, with_tools: bool) -> bool {
        self.members.iter().all(|m| m.provider.native_output(with_tools))
    }

    fn secrets(&self) -> Secrets {
        let mut secrets = Secrets::new();
        for member in self.members.iter() {
            secrets.extend(&member.provider.secrets());
        }
        secrets
    }
}

#[cfg(test)]
mod tests;
