//! [`HttpProvider`]: the HTTP transport every wire format shares. It sends what a
//! [`WireFormat`] encodes, authenticates as the format asks, streams the response over SSE,
//! enforces the connect, request and stream-idle timeouts, and classifies HTTP errors.
//!
//! It does not retry: the driver does, with a [`RetryPolicy`], so that a retry can be
//! reported and a stream that already delivered content is not silently sent again (see
//! `docs/PROVIDERS.md`, "Retries").

mod classify;
mod transport;

pub(crate) use classify::error_object;
pub use classify::{classify_http_error, error_message, retry_after};

use super::secrets::Secrets;
use super::sse::{chunk_stream_with_timer, response_chunks, StreamLimits};
use super::wire::{AuthStyle, EncodedRequest, WireFormat};
use super::{ChunkStream, ModelRequest, ModelResponse, Provider, ProviderError, RetryPolicy};
use bytes::Bytes;
use futures::future::BoxFuture;
use http::header::{
    HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONNECTION, CONTENT_TYPE, USER_AGENT,
};
use http_body_util::BodyExt;
use secrecy::{ExposeSecret, SecretString};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Sleep;
use transport::{ResponseBody, Transport, TransportError};

/// Where and how to reach a provider over HTTP. Built with chained setters:
///
/// ```
/// use agentloop::provider::http::HttpConfig;
/// use std::time::Duration;
///
/// let config = HttpConfig::new("http://127.0.0.1:8080/v1", "local")
///     .api_key_env("LLAMA_API_KEY")
///     .header("x-team", "search")
///     .stream_idle_timeout(Duration::from_secs(30));
/// assert_eq!(config.model(), "local");
/// ```
#[derive(Debug, Clone)]
pub struct HttpConfig {
    base_url: String,
    model: String,
    api_key: Option<SecretString>,
    api_key_env: Option<String>,
    require_api_key: bool,
    /// The header the key goes in instead of the format's way ([`Self::api_key_header`]).
    api_key_header: Option<String>,
    headers: Vec<(String, String)>,
    /// Query parameters added to every request's URL, encoded (`name=value&…`).
    query: String,
    connect_timeout: Duration,
    request_timeout: Duration,
    stream_idle_timeout: Duration,
    stream_limits: StreamLimits,
    close_streamed_connections: bool,
    streaming: bool,
    retry: RetryPolicy,
    proxy: Option<String>,
}

impl HttpConfig {
    /// A configuration for the API at `base_url` (e.g. `https://host/v1`; request paths are
    /// appended to it) and the model id `model`. Defaults: no API key, connect timeout 10 s,
    /// request timeout 10 min, stream idle timeout 5 min, the default [`RetryPolicy`].
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            api_key_env: None,
            require_api_key: false,
            api_key_header: None,
            query: String::new(),
            headers: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(600),
            stream_idle_timeout: Duration::from_secs(300),
            stream_limits: StreamLimits::default(),
            close_streamed_connections: false,
            streaming: true,
            retry: RetryPolicy::default(),
            proxy: None,
        }
    }

    /// The base URL request paths are appended to.
    pub fn base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// The model id (also the provider's name in events).
    pub fn model_id(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// The API key. It takes precedence over [`api_key_env`](Self::api_key_env).
    pub fn api_key(mut self, key: impl Into<SecretString>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The name of an environment variable holding the API key, read when the provider is
    /// built. A missing variable is an error only when the key is
    /// [required](Self::require_api_key).
    pub fn api_key_env(mut self, name: impl Into<String>) -> Self {
        self.api_key_env = Some(name.into());
        self
    }

    /// Whether building the provider fails without an API key (default: no).
    pub fn require_api_key(mut self, required: bool) -> Self {
        self.require_api_key = required;
        self
    }

    /// Sends the API key as the value of header `name` (Azure OpenAI's `api-key`), whatever
    /// way the wire format has (`Authorization: Bearer` for the OpenAI formats).
    pub fn api_key_header(mut self, name: impl Into<String>) -> Self {
        self.api_key_header = Some(name.into());
        self
    }

    /// A query parameter added to every request's URL (Azure OpenAI's `api-version`),
    /// percent-encoded.
    pub fn query_param(mut self, name: &str, value: &str) -> Self {
        // The URL type's encoder, on a URL that holds only this query.
        if let Ok(mut url) = reqwest::Url::parse("http://query.invalid/") {
            url.query_pairs_mut().append_pair(name, value);
            if !self.query.is_empty() {
                self.query.push('&');
            }
            self.query.push_str(url.query().unwrap_or_default());
        }
        self
    }

    /// A header sent with every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// How long connecting may take (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a whole non-streamed request may take, and how long a streamed one may wait
    /// for the response headers (default 10 min).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long a streamed response may go without an event (default 5 min): bytes that do
    /// not complete an event (a trickle, keep-alive comments) do not reset it.
    pub fn stream_idle_timeout(mut self, timeout: Duration) -> Self {
        self.stream_idle_timeout = timeout;
        self
    }

    /// The size and duration limits of a streamed response (see [`StreamLimits`]).
    pub fn stream_limits(mut self, limits: StreamLimits) -> Self {
        self.stream_limits = limits;
        self
    }

    /// Streamed requests ask for `Connection: close`, so that their connection is not
    /// reused (default: no). For servers that close the connection after a streamed
    /// response while announcing keep-alive (llama.cpp's `llama-server` does), so that the
    /// next request is never sent on a connection the server is closing.
    pub fn close_streamed_connections(mut self, close: bool) -> Self {
        self.close_streamed_connections = close;
        self
    }

    /// Whether [`Provider::stream`] asks for a streamed (SSE) response (default: yes). With
    /// `false` it sends a non-streamed request and yields the decoded response as chunks
    /// once it is complete: no deltas arrive while the model writes, for servers or proxies
    /// that cannot stream, or when only the whole answer matters.
    pub fn streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    /// The retry policy the driver applies to this provider (the attempts of one model call;
    /// `docs/PROVIDERS.md`, "Retries", has how they compose with the run's re-asks).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Sends every request through the proxy at `url` (`http://` or `https://`,
    /// credentials in the URL). Without it, the `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and
    /// `NO_PROXY` environment variables (or their lower-case forms) decide, read when the
    /// provider is built.
    pub fn proxy(mut self, url: impl Into<String>) -> Self {
        self.proxy = Some(url.into());
        self
    }

    /// The model id.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The base URL.
    pub fn url(&self) -> &str {
        &self.base_url
    }
}

/// Building an [`HttpProvider`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HttpConfigError {
    /// The API key is required and neither given nor in the environment variable.
    #[error("no API key: set the environment variable {env} or pass a key")]
    MissingApiKey {
        /// The variable that was read (empty when none was configured).
        env: String,
    },
    /// The base URL is not an absolute http(s) URL.
    #[error("invalid base URL {url:?}: {reason}")]
    InvalidBaseUrl {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// A header name or value is not valid in HTTP.
    #[error("invalid header {name:?}")]
    InvalidHeader {
        /// The header's name.
        name: String,
    },
    /// The HTTP client could not be created.
    #[error("HTTP client: {0}")]
    Client(String),
}

/// A [`Provider`] that speaks the wire format `W` over HTTP. Cheap to clone: clones share
/// the connection pool.
pub struct HttpProvider<W: WireFormat> {
    shared: Arc<Shared<W>>,
}

impl<W: WireFormat> Clone for HttpProvider<W> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone() }
    }
}

struct Shared<W> {
    format: W,
    transport: Transport,
    base_url: String,
    model: String,
    /// Every header of a non-streamed request and of a streamed one, authentication
    /// included (marked sensitive), built once: a request clones its map whole.
    headers: RequestHeaders,
    request_timeout: Duration,
    stream_idle_timeout: Duration,
    stream_limits: StreamLimits,
    streaming: bool,
    retry: RetryPolicy,
    /// The API key and credential headers, redacted from every error this provider reports.
    secrets: Secrets,
    /// Query parameters added to every request's URL (encoded; empty: none).
    query: String,
    /// Request URIs already parsed, by path (a format uses one or two paths).
    uris: std::sync::Mutex<Vec<(String, http::Uri)>>,
}

impl<W: WireFormat> std::fmt::Debug for HttpProvider<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The headers are left out: they hold the API key.
        f.debug_struct("HttpProvider")
            .field("format", &self.shared.format.name())
            .field("base_url", &self.shared.base_url)
            .field("model", &self.shared.model)
            .finish_non_exhaustive()
    }
}

impl<W: WireFormat> HttpProvider<W> {
    /// A provider speaking `format` as configured by `config`. Reads the API key from the
    /// configured environment variable now.
    pub fn new(format: W, config: HttpConfig) -> Result<Self, HttpConfigError> {
        let base_url = config.base_url.trim_end_matches('/').to_owned();
        let parsed = reqwest::Url::parse(&base_url).map_err(|e| {
            HttpConfigError::InvalidBaseUrl { url: base_url.clone(), reason: e.to_string() }
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(HttpConfigError::InvalidBaseUrl {
                url: base_url,
                reason: "the scheme must be http or https".into(),
            });
        }
        let api_key = match (config.api_key, &config.api_key_env) {
            (Some(key), _) => Some(key),
            (None, Some(env)) => std::env::var(env)
                .ok()
                .filter(|k| !k.trim().is_empty())
                .map(|k| SecretString::from(k.trim().to_owned())),
            (None, None) => None,
        };
        if api_key.is_none() && config.require_api_key {
            return Err(HttpConfigError::MissingApiKey {
                env: config.api_key_env.unwrap_or_default(),
            });
        }
        let mut headers = HeaderMap::new();
        let mut secrets = Secrets::new();
        for (name, value) in &config.headers {
            secrets.add_header(name, value);
            let invalid = || HttpConfigError::InvalidHeader { name: name.clone() };
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?;
            headers.append(header, HeaderValue::from_str(value).map_err(|_| invalid())?);
        }
        if let Some(key) = api_key {
            secrets.add(key.expose_secret());
            let style = match &config.api_key_header {
                Some(name) => Err(name.as_str()),
                None => Ok(format.auth()),
            };
            let (name, value) = match style {
                Ok(AuthStyle::Bearer) => (AUTHORIZATION, format!("Bearer {}", key.expose_secret())),
                Err(name) | Ok(AuthStyle::Header(name)) => (
                    HeaderName::from_bytes(name.as_bytes())
                        .map_err(|_| HttpConfigError::InvalidHeader { name: name.to_owned() })?,
                    key.expose_secret().to_owned(),
                ),
            };
            let mut value = HeaderValue::from_str(&value)
                .map_err(|_| HttpConfigError::InvalidHeader { name: name.to_string() })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        // A configured `User-Agent` wins.
        headers.entry(USER_AGENT).or_insert(HeaderValue::from_static(USER_AGENT_VALUE));
        let base = base_url.parse::<http::Uri>().map_err(|e| HttpConfigError::InvalidBaseUrl {
            url: base_url.clone(),
            reason: e.to_string(),
        })?;
        let transport = Transport::new(&base, config.connect_timeout, config.proxy.as_deref())
            .map_err(HttpConfigError::Client)?;
        let headers = RequestHeaders::new(headers, config.close_streamed_connections);
        Ok(Self {
            shared: Arc::new(Shared {
                format,
                transport,
                base_url,
                model: config.model,
                headers,
                request_timeout: config.request_timeout,
                stream_idle_timeout: config.stream_idle_timeout,
                stream_limits: config.stream_limits,
                streaming: config.streaming,
                secrets,
                retry: config.retry,
                query: config.query,
                uris: std::sync::Mutex::new(Vec::new()),
            }),
        })
    }

    /// The wire format.
    pub fn format(&self) -> &W {
        &self.shared.format
    }

    /// The model id.
    pub fn model(&self) -> &str {
        &self.shared.model
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        &self.shared.base_url
    }

    /// The retry policy configured for this provider (the driver applies it).
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.shared.retry
    }

    /// Whether requests go through a proxy (configured, or from the environment).
    pub fn is_proxied(&self) -> bool {
        self.shared.transport.is_proxied()
    }
}

/// The `User-Agent` of every request.
const USER_AGENT_VALUE: &str = concat!("agentloop/", env!("CARGO_PKG_VERSION"));

/// The headers of the two kinds of request.
struct RequestHeaders {
    /// A non-streamed request's.
    whole: HeaderMap,
    /// A streamed request's.
    streamed: HeaderMap,
}

impl RequestHeaders {
    /// `configured` (the configuration's and the authentication) with the content type and
    /// what each kind of request accepts, which replace configured ones.
    fn new(configured: HeaderMap, close_streamed_connections: bool) -> Self {
        let with = |accept: &'static str| {
            let mut headers = configured.clone();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            headers.insert(ACCEPT, HeaderValue::from_static(accept));
            headers
        };
        let mut streamed = with("text/event-stream");
        if close_streamed_connections {
            streamed.insert(CONNECTION, HeaderValue::from_static("close"));
        }
        Self { whole: with("application/json"), streamed }
    }
}

impl<W: WireFormat> Shared<W> {
    /// The HTTP request for `wire`.
    fn request(
        &self,
        outgoing: Outgoing,
        stream: bool,
    ) -> Result<http::Request<Bytes>, ProviderError> {
        let Outgoing { wire, trace_parent } = outgoing;
        let uri = self.uri(&wire.path)?;
        let mut request = http::Request::new(Bytes::from(wire.body));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = uri;
        let headers = request.headers_mut();
        headers.clone_from(if stream { &self.headers.streamed } else { &self.headers.whole });
        for (name, value) in wire.headers {
            let invalid = || ProviderError::InvalidRequest {
                message: format!("the request header {name:?} is not valid in HTTP"),
            };
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?;
            let value = HeaderValue::from_str(&value).map_err(|_| invalid())?;
            // A header the configuration sets wins over the format's default for it.
            headers.entry(header).or_insert(value);
        }
        if let Some(trace_parent) = trace_parent {
            let value =
                HeaderValue::from_maybe_shared(Bytes::from(trace_parent)).map_err(|_| {
                    ProviderError::InvalidRequest {
                        message: "the request's traceparent is not valid in HTTP".into(),
                    }
                })?;
            headers.entry(TRACEPARENT).or_insert(value);
        }
        self.format.sign(&mut request)?;
        Ok(request)
    }

    /// The URI of `path` (appended to the base URL), parsed once per path.
    fn uri(&self, path: &str) -> Result<http::Uri, ProviderError> {
        let mut cache = self.uris.lock().map_err(|_| ProviderError::InvalidRequest {
            message: "the provider's URI cache is poisoned".into(),
        })?;
        if let Some((_, uri)) = cache.iter().find(|(cached, _)| cached == path) {
            return Ok(uri.clone());
        }
        let text = match (self.query.is_empty(), path.contains('?')) {
            (true, _) => format!("{}{}", self.base_url, path),
            (false, false) => format!("{}{}?{}", self.base_url, path, self.query),
            (false, true) => format!("{}{}&{}", self.base_url, path, self.query),
        };
        let uri = text.parse::<http::Uri>().map_err(|e| ProviderError::InvalidRequest {
            message: format!("invalid request URL {text:?}: {e}"),
        })?;
        if cache.len() < CACHED_URIS {
            cache.push((path.to_owned(), uri.clone()));
        }
        Ok(uri)
    }

    /// Sends `wire` and waits for the response headers; a non-success status becomes the
    /// classified error.
    async fn send(
        &self,
        wire: Outgoing,
        stream: bool,
    ) -> Result<http::Response<ResponseBody>, ProviderError> {
        tokio::time::timeout(self.request_timeout, self.send_untimed(wire, stream)).await.map_err(
            |_| ProviderError::Timeout {
                message: format!("no response within {:?}", self.request_timeout),
            },
        )?
    }

    /// [`send`](Self::send) for a streamed request, with the timer that timed it, for the
    /// stream's idle timeout to reuse. The timer is armed at the earlier of the request and
    /// the idle deadline and moved to the request deadline if it fires first, so that the
    /// idle timeout only ever moves it later: a new timer earlier than all the others makes
    /// tokio wake its driver through an eventfd (a `write` and an extra `epoll_wait` per
    /// request).
    async fn send_streamed(
        &self,
        wire: Outgoing,
    ) -> Result<(http::Response<ResponseBody>, Pin<Box<Sleep>>), ProviderError> {
        let now = tokio::time::Instant::now();
        let deadline = now + self.request_timeout;
        let mut timer =
            Box::pin(tokio::time::sleep_until(deadline.min(now + self.stream_idle_timeout)));
        let mut send = std::pin::pin!(self.send_untimed(wire, true));
        loop {
            tokio::select! {
                biased;
                sent = &mut send => return sent.map(|response| (response, timer)),
                () = timer.as_mut() => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(ProviderError::Timeout {
                            message: format!("no response within {:?}", self.request_timeout),
                        });
                    }
                    timer.as_mut().reset(deadline);
                }
            }
        }
    }

    /// [`send`](Self::send) without its timeout (the caller has one around it).
    async fn send_untimed(
        &self,
        outgoing: Outgoing,
        stream: bool,
    ) -> Result<http::Response<ResponseBody>, ProviderError> {
        let path = outgoing.wire.path.clone();
        let request = self.request(outgoing, stream)?;
        tracing::debug!(provider = self.format.name(), %path, stream, "sending model request");
        let response = self
            .transport
            .send(request)
            .await
            .map_err(|e| transport_error(&*e, "sending the request"))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let headers = response.headers().clone();
        let body = tokio::time::timeout(self.request_timeout, read_body(response))
            .await
            .ok()
            .and_then(Result::ok)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default();
        let generic = classify_http_error(status.as_u16(), &headers, &body);
        let error = self.format.classify_error(status.as_u16(), &body, generic);
        // Before it is logged: a server may echo the key it was sent.
        let error = self.secrets.redact_error(error);
        tracing::debug!(provider = self.format.name(), %path, status = status.as_u16(), %error, "model request failed");
        Err(error)
    }
}

/// Paths whose parsed URI a provider keeps.
const CACHED_URIS: usize = 8;

/// The whole body of `response`.
async fn read_body(response: http::Response<ResponseBody>) -> Result<Bytes, TransportError> {
    Ok(response.into_body().collect().await?.to_bytes())
}

/// A transport error as a [`ProviderError`]: a failure to connect (refused, DNS, TLS, a
/// connect timeout) → `Unreachable`, other timeouts → `Timeout`, anything else → `Network`
/// (with the causes, which the errors' own messages leave out).
pub(crate) fn transport_error(
    error: &(dyn std::error::Error + 'static),
    doing: &str,
) -> ProviderError {
    let mut message = format!("{doing}: {error}");
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    if transport::is_connect(error) {
        ProviderError::Unreachable { message }
    } else if transport::is_timeout(error) {
        ProviderError::Timeout { message }
    } else {
        ProviderError::Network { message }
    }
}

fn is_json(response: &http::Response<ResponseBody>) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// The W3C trace context header.
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// A request to send: the encoded request and its trace context (W3C `traceparent`), which
/// goes straight into the headers (no name to parse, no copy of the value).
struct Outgoing {
    wire: EncodedRequest,
    trace_parent: Option<String>,
}

impl Outgoing {
    fn new(wire: EncodedRequest, request: &mut ModelRequest) -> Self {
        Self { wire, trace_parent: request.trace_parent.take() }
    }
}

/// Sends a request and returns its chunks: the event stream, the chunks of a whole JSON
/// response (a non-streamed request, or a server that ignored `stream: true`), or the error.
async fn open_stream<W: WireFormat>(
    shared: Arc<Shared<W>>,
    mut request: ModelRequest,
) -> ChunkStream {
    let failed = |error| -> ChunkStream { Box::pin(futures::stream::iter([Err(error)])) };
    let streaming = shared.streaming;
    let wire = match shared.format.encode_json(&request, streaming) {
        Ok(wire) => Outgoing::new(wire, &mut request),
        Err(error) => return failed(error),
    };
    // The request (and the history it shares with the run) is not needed any more.
    drop(request);
    let sent = if streaming {
        shared.send_streamed(wire).await.map(|(response, timer)| (response, Some(timer)))
    } else {
        shared.send(wire, false).await.map(|response| (response, None))
    };
    let (response, timer) = match sent {
        Ok(sent) => sent,
        Err(error) => return failed(error),
    };
    let timer = match timer {
        Some(timer) if !is_json(&response) => timer,
        _ => {
            let body = tokio::time::timeout(shared.request_timeout, read_body(response)).await;
            let decoded = match body {
                Err(_) => Err(ProviderError::Timeout {
                    message: format!("response body not read within {:?}", shared.request_timeout),
                }),
                Ok(Err(e)) => Err(transport_error(&*e, "reading the response")),
                Ok(Ok(bytes)) => shared.format.decode_response(&bytes),
            };
            return match decoded {
                Ok(response) => {
                    Box::pin(futures::stream::iter(response_chunks(response).into_iter().map(Ok)))
                }
                Err(error) => failed(error),
            };
        }
    };
    let bytes = http_body_util::BodyDataStream::new(response.into_body());
    chunk_stream_with_timer(
        bytes,
        shared.stream_idle_timeout,
        shared.stream_limits,
        timer,
        shared.format.stream_decoder(),
        |e: TransportError| transport_error(&*e, "the stream broke off"),
    )
}

impl<W: WireFormat> Provider for HttpProvider<W> {
    fn retry_policy(&self) -> Option<RetryPolicy> {
        Some(HttpProvider::retry_policy(self).clone())
    }

    fn stream(&self, request: ModelRequest) -> ChunkStream {
        // The request is made in a future that returns the response's chunk stream, which
        // the caller then polls directly (the chunks pass through no generator).
        let stream = futures::StreamExt::flatten(futures::stream::once(open_stream(
            self.shared.clone(),
            request,
        )));
        if self.shared.secrets.is_empty() {
            return Box::pin(stream);
        }
        // Errors met while streaming (an error event, a decoding excerpt) lose the secrets too.
        let shared = self.shared.clone();
        Box::pin(futures::StreamExt::map(stream, move |item| {
            item.map_err(|error| shared.secrets.redact_error(error))
        }))
    }

    fn complete(
        &self,
        mut request: ModelRequest,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        let shared = self.shared.clone();
        // Encoded now: the boxed future holds the body, not the request (and the history it
        // shares with the run).
        let wire = shared
            .format
            .encode_json(&request, false)
            .map(|wire| Outgoing::new(wire, &mut request));
        drop(request);
        Box::pin(async move {
            let wire = wire?;
            let timeout = shared.request_timeout;
            let bytes = tokio::time::timeout(timeout, async {
                let response = shared.send_untimed(wire, false).await?;
                read_body(response).await.map_err(|e| transport_error(&*e, "reading the response"))
            })
            .await
            .map_err(|_| ProviderError::Timeout {
                message: format!("no complete response within {timeout:?}"),
            })??;
            shared.format.decode_response(&bytes).map_err(|e| shared.secrets.redact_error(e))
        })
    }

    fn name(&self) -> &str {
        &self.shared.model
    }

    fn family(&self) -> &str {
        self.shared.format.name()
    }

    fn streams(&self) -> bool {
        self.shared.streaming
    }

    fn native_output(&self, with_tools: bool) -> bool {
        self.shared.format.native_output(with_tools)
    }
    fn secrets(&self) -> Secrets {
        self.shared.secrets.clone()
    }
}

#[cfg(test)]
mod tests;
