//! The provider seam: one required method, [`Provider::stream`], that turns a canonical
//! [`ModelRequest`] into a stream of canonical [`StreamChunk`]s.

pub mod anthropic;
mod assemble;
#[cfg(feature = "bedrock")]
pub mod bedrock;
pub mod cache;
mod error;
pub mod fallback;
pub mod gemini;
pub mod http;
pub mod openai;
pub mod openai_responses;
mod output;
pub mod prompted;
pub mod replay;
mod retry;
#[cfg(any(test, feature = "test-util"))]
pub mod scripted;
pub mod secrets;
pub mod sse;
mod tool_choice;
pub mod wire;

pub use anthropic::Anthropic;
pub use assemble::ResponseAssembler;
pub use cache::{Breakpoints, CachePoint, CachePolicy};
pub use error::ProviderError;
pub use fallback::{Fallback, FallbackError, FallbackPolicy};
pub use gemini::Gemini;
pub use http::{HttpConfig, HttpConfigError, HttpProvider};
pub(crate) use output::drop_optional_nulls;
pub use output::OutputFormat;
pub use prompted::{PromptedProtocol, PromptedTools, ToolCallFormat, ToolProtocol};
pub use retry::RetryPolicy;
pub use tool_choice::{StepToolChoice, ToolChoicePolicy};

use crate::message::{FinishReason, Message, Usage};
use crate::tool::ToolSpec;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;

/// Whether and how the model must use tools.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// A call of this tool.
    Named(String),
}

/// One request to a model. Instructions are separate from the messages: they are injected by
/// the provider at call time in the form its API wants and never stored in the history.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelRequest {
    /// System / developer instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The conversation. Shared with the run (cloning a request is cheap, whatever the
    /// length of the history).
    pub messages: Arc<Vec<Message>>,
    /// Tools the model may call (shared the same way).
    #[serde(default, skip_serializing_if = "<[ToolSpec]>::is_empty")]
    pub tools: Arc<Vec<ToolSpec>>,
    /// Whether it must call them.
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Output token limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Free-form data for providers and hooks (e.g. a user id).
    #[serde(
        default,
        skip_serializing_if = "Map::is_empty",
        serialize_with = "crate::canonical::serialize_map"
    )]
    pub metadata: Map<String, Value>,
    /// The schema the answer must match, in the provider's own structured-output mode (set
    /// by a run whose output mode is native; `None`: free text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputFormat>,
    /// What to ask of the provider's prompt cache (`None`: the provider's own policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CachePolicy>,
    /// The W3C `traceparent` of the model call's span, when the run is traced: the HTTP
    /// providers send it as the `traceparent` header. Not part of the request's content.
    #[serde(skip)]
    pub trace_parent: Option<String>,
}

impl ModelRequest {
    /// A request with these messages (the other fields default: no instructions, no tools,
    /// `auto` tool choice, the provider's sampling).
    pub fn new(messages: impl Into<Arc<Vec<Message>>>) -> Self {
        Self { messages: messages.into(), ..Self::default() }
    }

    /// With this prompt-cache policy (over the provider's own).
    pub fn with_cache(mut self, cache: CachePolicy) -> Self {
        self.cache = Some(cache);
        self
    }

    /// With these instructions.
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// With these messages.
    pub fn with_messages(mut self, messages: impl Into<Arc<Vec<Message>>>) -> Self {
        self.messages = messages.into();
        self
    }

    /// With these tools.
    pub fn with_tools(mut self, tools: impl Into<Arc<Vec<ToolSpec>>>) -> Self {
        self.tools = tools.into();
        self
    }

    /// With this tool choice.
    pub fn with_tool_choice(mut self, tool_choice: ToolChoice) -> Self {
        self.tool_choice = tool_choice;
        self
    }

    /// With this sampling temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// With this output token limit.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// With this output schema (the provider's structured-output mode).
    pub fn with_output(mut self, output: OutputFormat) -> Self {
        self.output = Some(output);
        self
    }

    /// With one more metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: Value) -> Self {
        self.metadata.insert(key.into(), value);
        self
    }
}

/// One piece of a streamed model response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StreamChunk {
    /// The response's identity as the provider reports it (OpenTelemetry's
    /// `gen_ai.response.id` and `gen_ai.response.model`): its id, and the model that actually
    /// answered (which may name a snapshot of the requested one). A decoder sends each field
    /// once, when the wire data first carries it; the assembler keeps the first value of each.
    ResponseInfo {
        /// The response id (e.g. `chatcmpl-…`, `resp_…`, `msg_…`), if reported.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The model name the provider reports, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// More answer text.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// More reasoning text.
    ReasoningDelta {
        /// The new text.
        text: String,
    },
    /// The current reasoning block ended; `opaque` is provider data to send back next turn.
    ReasoningEnd {
        /// Signature / encrypted content.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            serialize_with = "crate::canonical::serialize_option"
        )]
        opaque: Option<Value>,
    },
    /// A tool call begins.
    ToolCallStart {
        /// The call id.
        id: String,
        /// The tool name.
        name: String,
    },
    /// More argument text of a started tool call.
    ToolCallDelta {
        /// The call id.
        id: String,
        /// The new argument text.
        delta: String,
    },
    /// A tool call's arguments are complete.
    ToolCallEnd {
        /// The call id.
        id: String,
    },
    /// Provider content without a type of its own, whole (see
    /// [`Opaque`](crate::message::Opaque)): it becomes a part of the message where it came.
    Opaque {
        /// The provider family.
        provider: String,
        /// Its type as the provider names it.
        kind: String,
        /// The item, block or part, verbatim.
        #[serde(serialize_with = "crate::canonical::serialize")]
        value: Value,
    },
    /// A source the text so far cites, as the provider wrote it (see
    /// [`Citation`](crate::message::Citation)).
    Citation {
        /// The provider family.
        provider: String,
        /// The citation object, verbatim.
        #[serde(serialize_with = "crate::canonical::serialize")]
        value: Value,
    },
    /// Which member of a fallback chain answers (`family:name`), sent by the chain before the
    /// member's own chunks; the assembler keeps the last one.
    Answered {
        /// The member.
        provider: String,
    },
    /// Usage so far (a cumulative snapshot: later chunks supersede earlier ones field by field).
    Usage {
        /// The usage.
        usage: Usage,
    },
    /// The turn ended.
    Finish {
        /// Why.
        reason: FinishReason,
    },
}

/// A whole model response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// The assistant message (text, reasoning, tool calls).
    pub message: Message,
    /// Why the turn ended.
    pub finish_reason: FinishReason,
    /// Tokens used.
    pub usage: Usage,
    /// The response id the provider reported, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The model name the provider reported as having answered, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Which member of a fallback chain answered (`family:name`); `None` from a provider that
    /// is not a chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// Collects a streamed response into a whole one.
pub async fn collect(mut stream: ChunkStream) -> Result<ModelResponse, ProviderError> {
    let mut assembler = ResponseAssembler::default();
    while let Some(chunk) = stream.next().await {
        assembler.push(chunk?)?;
    }
    Ok(assembler.finish())
}

/// The stream a provider returns.
pub type ChunkStream = BoxStream<'static, Result<StreamChunk, ProviderError>>;

/// A model provider. Implement [`stream`](Provider::stream); [`complete`](Provider::complete)
/// collects it.
pub trait Provider: Send + Sync {
    /// Sends the request and streams the response.
    fn stream(&self, request: ModelRequest) -> ChunkStream;

    /// Sends the request and waits for the whole response.
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        Box::pin(collect(self.stream(request)))
    }

    /// A short name for events and telemetry, e.g. the model id.
    fn name(&self) -> &str {
        "provider"
    }

    /// The provider family: the API the model is reached through — `openai` (Chat
    /// Completions, also for OpenAI-compatible servers), `openai-responses`, `anthropic`,
    /// `gemini`, `local`, `scripted`, `replay` — for a run's identity and telemetry.
    /// Default: `custom`.
    fn family(&self) -> &str {
        "custom"
    }

    /// Whether [`stream`](Provider::stream) really streams. A provider that only ever gets
    /// the whole response (e.g. an HTTP provider configured not to stream) says `false`:
    /// the driver then calls [`complete`](Provider::complete) and takes the response as it
    /// is, instead of taking it apart into chunks and assembling it again. The events are the
    /// same either way. Default: `true`.
    fn streams(&self) -> bool {
        true
    }

    /// How the driver retries this provider's failed calls (before any content arrived).
    /// `None`: no retries (the agent's own policy, if set, still applies). The provider itself
    /// never retries; how the driver's attempts compose with the run's re-asks:
    /// `docs/PROVIDERS.md`, "Retries".
    fn retry_policy(&self) -> Option<RetryPolicy> {
        None
    }

    /// Whether the model takes `tools` and answers with structured tool calls. A provider
    /// that says no gets tools through the prompt ([`PromptedTools`]) when an agent is built
    /// with the default [`ToolProtocol::Auto`].
    fn supports_tools(&self) -> bool {
        true
    }

    /// Whether the provider constrains the answer to [`ModelRequest::output`] itself (its
    /// API's structured-output mode), in a request with tools (`with_tools`) or without. A
    /// run whose output mode is `auto` uses it when it can, and a final-answer tool
    /// otherwise. Default: `false`.
    fn native_output(&self, with_tools: bool) -> bool {
        let _ = with_tools;
        false
    }

    /// The secrets this provider holds (its API key, its credential headers): an agent
    /// redacts them from every tool result and error ([`secrets`]). Default: none.
    fn secrets(&self) -> secrets::Secrets {
        secrets::Secrets::new()
    }
}

impl<P: Provider + ?Sized> Provider for Arc<P> {
    fn retry_policy(&self) -> Option<RetryPolicy> {
        (**self).retry_policy()
    }
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        (**self).stream(request)
    }
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        (**self).complete(request)
    }
    fn name(&self) -> &str {
        (**self).name()
    }
    fn family(&self) -> &str {
        (**self).family()
    }
    fn supports_tools(&self) -> bool {
        (**self).supports_tools()
    }
    fn streams(&self) -> bool {
        (**self).streams()
    }
    fn native_output(&self, with_tools: bool) -> bool {
        (**self).native_output(with_tools)
    }
    fn secrets(&self) -> secrets::Secrets {
        (**self).secrets()
    }
}

impl<P: Provider + ?Sized> Provider for Box<P> {
    fn retry_policy(&self) -> Option<RetryPolicy> {
        (**self).retry_policy()
    }
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        (**self).stream(request)
    }
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        (**self).complete(request)
    }
    fn name(&self) -> &str {
        (**self).name()
    }
    fn family(&self) -> &str {
        (**self).family()
    }
    fn supports_tools(&self) -> bool {
        (**self).supports_tools()
    }
    fn streams(&self) -> bool {
        (**self).streams()
    }
    fn native_output(&self, with_tools: bool) -> bool {
        (**self).native_output(with_tools)
    }
    fn secrets(&self) -> secrets::Secrets {
        (**self).secrets()
    }
}

#[cfg(test)]
mod tests;
