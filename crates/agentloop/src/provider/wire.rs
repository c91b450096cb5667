//! The wire-format seam of HTTP providers. A provider module (OpenAI chat, OpenAI Responses,
//! Anthropic, Gemini) implements [`WireFormat`]: canonical request → HTTP body, SSE events →
//! [`StreamChunk`]s, response body → [`ModelResponse`], error body → [`ProviderError`]. It does
//! nothing else: transport, timeouts, authentication headers and retries are shared.

use super::{ModelRequest, ModelResponse, ProviderError, StreamChunk};
use crate::canonical::Sorted;
use serde_json::Value;

/// How a provider expects its API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthStyle {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// The key in a header of this name (e.g. `x-api-key`, `x-goog-api-key`).
    Header(&'static str),
}

/// One HTTP request to send, relative to the provider's base URL.
#[derive(Debug, Clone, PartialEq)]
pub struct WireRequest {
    /// Path appended to the base URL, e.g. `/chat/completions` (may carry a query string).
    pub path: String,
    /// The JSON body.
    pub body: Value,
    /// Extra headers this request needs (e.g. `anthropic-version`).
    pub headers: Vec<(String, String)>,
}

/// One HTTP request with its body already serialized to JSON (what the HTTP provider sends).
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedRequest {
    /// Path appended to the base URL, e.g. `/chat/completions` (may carry a query string).
    pub path: String,
    /// The JSON body, serialized.
    pub body: Vec<u8>,
    /// Extra headers this request needs (e.g. `anthropic-version`).
    pub headers: Vec<(String, String)>,
}

/// Decodes one streamed response, event by event. A fresh decoder serves each request.
pub trait StreamDecoder: Send {
    /// Decodes one server-sent event (`event` is its name, empty when the server sent none)
    /// into zero or more chunks.
    fn decode(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ProviderError>;

    /// The stream ended. Emits what is still pending, or fails when the stream was cut short
    /// (no terminal event).
    fn finish(&mut self, out: &mut Vec<StreamChunk>) -> Result<(), ProviderError>;

    /// For a stream that is not server-sent events (Bedrock's binary AWS event stream): decodes
    /// the bytes as they arrive, whatever their cuts. `None` (the default): the stream is SSE,
    /// parsed by the transport and handed to [`decode`](Self::decode) event by event.
    fn decode_bytes(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<StreamChunk>,
    ) -> Option<Result<(), ProviderError>> {
        let _ = (bytes, out);
        None
    }
}

/// A provider's wire format.
pub trait WireFormat: Send + Sync + 'static {
    /// A short name for errors and telemetry (`openai`, `anthropic`, …).
    fn name(&self) -> &'static str;

    /// How the API key is sent.
    fn auth(&self) -> AuthStyle {
        AuthStyle::Bearer
    }

    /// The request for `request`, streamed or not.
    fn encode(&self, request: &ModelRequest, stream: bool) -> Result<WireRequest, ProviderError>;

    /// The request for `request` with its body serialized: what the HTTP provider sends. The
    /// default serializes [`encode`](Self::encode)'s body, object keys sorted
    /// ([`crate::canonical`]); a format may override it to write the same JSON straight from
    /// the request, without building a `Value` tree first (whose allocations dominate the cost
    /// of long conversations).
    fn encode_json(
        &self,
        request: &ModelRequest,
        stream: bool,
    ) -> Result<EncodedRequest, ProviderError> {
        let wire = self.encode(request, stream)?;
        let body = serde_json::to_vec(&Sorted(&wire.body)).map_err(|e| ProviderError::Other {
            message: format!("could not serialize the request: {e}"),
        })?;
        Ok(EncodedRequest { path: wire.path, body, headers: wire.headers })
    }

    /// A decoder for one streamed response.
    fn stream_decoder(&self) -> Box<dyn StreamDecoder>;

    /// Decodes a whole (non-streamed) response body.
    fn decode_response(&self, body: &[u8]) -> Result<ModelResponse, ProviderError>;

    /// Refines an error response. `generic` is the classification from the status and headers
    /// alone (rate limits with their delay, auth, 5xx, …); a format recognises what only its
    /// body tells (context overflow, overload) and extracts the provider's message.
    fn classify_error(&self, status: u16, body: &str, generic: ProviderError) -> ProviderError {
        let _ = (status, body);
        generic
    }

    /// Signs the finished request (its method, URI, headers and body are final): AWS SigV4 for
    /// Bedrock. Default: nothing.
    fn sign(&self, request: &mut http::Request<bytes::Bytes>) -> Result<(), ProviderError> {
        let _ = request;
        Ok(())
    }

    /// Whether the API constrains the answer to a JSON Schema itself (see
    /// [`Provider::native_output`](super::Provider::native_output)). Default: `false`.
    fn native_output(&self, with_tools: bool) -> bool {
        let _ = with_tools;
        false
    }
}

/// What a decoder has reported of the response's id and model: each is sent once, in a
/// [`StreamChunk::ResponseInfo`], the first time the wire data carries it (some servers send
/// the id up front and the model only at the end).
#[derive(Debug, Default)]
pub(crate) struct ResponseInfoOnce {
    id: bool,
    model: bool,
}

impl ResponseInfoOnce {
    /// Reports what of `id` and `model` (empty strings do not count) was not reported yet.
    pub(crate) fn report(
        &mut self,
        id: Option<&str>,
        model: Option<&str>,
        out: &mut Vec<StreamChunk>,
    ) {
        let id = id.filter(|id| !self.id && !id.is_empty()).map(str::to_owned);
        let model = model.filter(|model| !self.model && !model.is_empty()).map(str::to_owned);
        if id.is_none() && model.is_none() {
            return;
        }
        self.id |= id.is_some();
        self.model |= model.is_some();
        out.push(StreamChunk::ResponseInfo { id, model });
    }
}
