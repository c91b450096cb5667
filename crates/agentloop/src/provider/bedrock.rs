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
//!   last; the last user turn), at most four; by default only on the models Bedrock caches for
//!   ([`caches_prompts`]).
//! - Usage: `input` = `inputTokens` + `cacheReadInputTokens` + `cacheWriteInputTokens`
//!   (Bedrock's `inputTokens` is the uncached rest), `cached_input` = reads,
//!   `cache_write_input` = writes.
//! - Stop reasons: `end_turn`, `stop_sequence` → `Stop`; `tool_use` → `ToolCalls`;
//!   `max_tokens`, `model_context_window_exceeded` → `Length`; `guardrail_intervened`,
//!   `content_filtered` → `ContentFilter`; others `Other(name)`.
//! - A guardrail's `trace` (and `additionalModelResponseFields`) is kept whole as an opaque part.

mod aws;
mod decode;
mod encode;
mod stream;

#[cfg(test)]
mod tests;

pub use aws::{AwsCredentials, AwsEnvironment};
pub use decode::{classify, decode_response};
pub use encode::encode_body;
pub use stream::EventStreamDecoder;

use super::http::{HttpConfig, HttpConfigError, HttpProvider};
use super::wire::{AuthStyle, StreamDecoder, WireFormat, WireRequest};
use super::{CachePolicy, ModelRequest, ModelResponse, ProviderError, StreamChunk};

/// The environment variable of a Bedrock API key (sent as a bearer token instead of a
/// signature).
pub const API_KEY_ENV: &str = "AWS_BEARER_TOKEN_BEDROCK";

/// Why a Bedrock provider could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BedrockError {
    /// No region in `AWS_REGION`, `AWS_DEFAULT_REGION` or the profile.
    #[error("no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION, or region in the profile)")]
    NoRegion,
    /// Neither an API key nor credentials.
    #[error(
        "no AWS credentials: set AWS_BEARER_TOKEN_BEDROCK, or AWS_ACCESS_KEY_ID and \
         AWS_SECRET_ACCESS_KEY, or a profile in ~/.aws/credentials (AWS_PROFILE)"
    )]
    NoCredentials,
    /// A credentials or config file could not be read.
    #[error("{0}")]
    Files(String),
    /// The HTTP configuration.
    #[error(transparent)]
    Http(#[from] HttpConfigError),
}

/// Whether Bedrock caches prompts for `model` (a model id, an inference profile such as
/// `us.anthropic.claude-…`, or an ARN naming one): Anthropic's Claude and Amazon Nova models.
pub fn caches_prompts(model: &str) -> bool {
    let model = model.to_ascii_lowercase();
    model.contains("anthropic.claude") || model.contains("amazon.nova")
}

/// The family name of this API, on its opaque values.
pub const FAMILY: &str = "bedrock";

/// The Converse wire format for one model (a model id or an inference profile, e.g.
/// `us.anthropic.claude-sonnet-4-5-20250929-v1:0`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Bedrock {
    /// The model id.
    pub model: String,
    /// Prompt-cache breakpoints of requests that carry no policy of their own.
    pub cache: CachePolicy,
    /// Sent as `additionalModelRequestFields` (e.g. `{"thinking": {"type": "enabled",
    /// "budget_tokens": 1024}}` for Claude); `None`: left out.
    pub additional_fields: Option<serde_json::Value>,
    /// The region requests are signed for.
    pub region: String,
    /// What requests are signed with (`None`: only an API key, sent as a bearer token).
    credentials: Option<AwsCredentials>,
}

impl Bedrock {
    /// The Converse API for `model` (no region or credentials yet: see
    /// [`provider`](Self::provider) and [`with_credentials`](Self::with_credentials)), caching
    /// with automatic breakpoints on the models Bedrock caches for (Anthropic's Claude, Amazon
    /// Nova: [`caches_prompts`]) and with none on the others, which refuse `cachePoint` blocks.
    pub fn converse(model: impl Into<String>) -> Self {
        let model = model.into();
        let cache = if caches_prompts(&model) { CachePolicy::auto() } else { CachePolicy::off() };
        Self { model, cache, additional_fields: None, region: String::new(), credentials: None }
    }

    /// Requests signed with `credentials` for `region`.
    pub fn with_credentials(
        mut self,
        region: impl Into<String>,
        credentials: AwsCredentials,
    ) -> Self {
        self.region = region.into();
        self.credentials = Some(credentials);
        self
    }

    /// Bedrock Runtime for `model` (a model id or inference profile) as the standard AWS
    /// settings say: the region and credentials of [`AwsEnvironment`] (the process's
    /// environment and `~/.aws`), or an API key in `AWS_BEARER_TOKEN_BEDROCK` (sent as a bearer
    /// token; no signature).
    pub fn provider(model: impl Into<String>) -> Result<HttpProvider<Bedrock>, BedrockError> {
        let read = |name: &str| std::env::var(name).ok();
        let aws = AwsEnvironment::new(&read);
        let region = aws.region().map_err(BedrockError::Files)?.ok_or(BedrockError::NoRegion)?;
        let model = model.into();
        let config = HttpConfig::new(
            format!("https://bedrock-runtime.{region}.amazonaws.com"),
            model.clone(),
        )
        .api_key_env(API_KEY_ENV);
        let mut format = Self::converse(model);
        format.region = region;
        if read(API_KEY_ENV).is_none_or(|key| key.trim().is_empty()) {
            let credentials = aws.credentials().map_err(BedrockError::Files)?;
            format.credentials = Some(credentials.ok_or(BedrockError::NoCredentials)?);
        }
        Ok(Self::with_config(config, format)?)
    }

    /// A provider speaking `format` as `config` says (its model id replaces the format's).
    pub fn with_config(
        config: HttpConfig,
        format: Bedrock,
    ) -> Result<HttpProvider<Bedrock>, HttpConfigError> {
        let format = Self { model: config.model().to_owned(), ..format };
        HttpProvider::new(format, config)
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

impl StreamDecoder for EventStreamDecoder {
    fn decode(
        &mut self,
        _event: &str,
        data: &str,
        _out: &mut Vec<StreamChunk>,
    ) -> Result<(), ProviderError> {
        Err(ProviderError::protocol(
            "Bedrock streams are AWS event streams, not server-sent events",
            data,
        ))
    }

    fn finish(&mut self, out: &mut Vec<StreamChunk>) -> Result<(), ProviderError> {
        EventStreamDecoder::finish(self, out)
    }

    fn decode_bytes(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<StreamChunk>,
    ) -> Option<Result<(), ProviderError>> {
        Some(self.push(bytes, out))
    }
}

impl WireFormat for Bedrock {
    fn name(&self) -> &'static str {
        FAMILY
    }

    /// An API key (`AWS_BEARER_TOKEN_BEDROCK`) is a bearer token; without one, requests are
    /// signed ([`sign`](WireFormat::sign)).
    fn auth(&self) -> AuthStyle {
        AuthStyle::Bearer
    }

    fn encode(&self, request: &ModelRequest, stream: bool) -> Result<WireRequest, ProviderError> {
        Ok(WireRequest {
            path: self.path(stream),
            body: encode_body(self, request)?,
            headers: Vec::new(),
        })
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(EventStreamDecoder::new())
    }

    fn decode_response(&self, body: &[u8]) -> Result<ModelResponse, ProviderError> {
        decode_response(body)
    }

    /// Bedrock's error body is `{"message": …}` (its type in the `x-amzn-errortype` header,
    /// which the status stands for here); a validation error that says the prompt does not
    /// fit is a context overflow.
    fn classify_error(&self, status: u16, body: &str, generic: ProviderError) -> ProviderError {
        let value: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let said = value.get("message").or_else(|| value.get("Message")).and_then(|m| m.as_str());
        let Some(message) = said else { return generic };
        match classify("validationException", message, Some(status)) {
            overflow @ ProviderError::ContextLengthExceeded { .. } if status == 400 => overflow,
            _ => generic.with_message(message.to_owned()),
        }
    }

    /// SigV4 (service `bedrock`), unless the request carries an API key.
    fn sign(&self, request: &mut http::Request<bytes::Bytes>) -> Result<(), ProviderError> {
        if request.headers().contains_key(http::header::AUTHORIZATION) {
            return Ok(());
        }
        let Some(credentials) = &self.credentials else {
            return Err(ProviderError::Auth {
                status: 0,
                message: "no AWS credentials or Bedrock API key to sign the request with".into(),
            });
        };
        aws::sign(request, credentials, &self.region, std::time::SystemTime::now())
    }
}
