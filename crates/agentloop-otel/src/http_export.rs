//! OTLP/HTTP protobuf: the span exporter's HTTP client, driven on the export thread by a
//! current-thread runtime of its own (built there by the first export, and dropped there),
//! so that the export thread sends each request itself.
//!
//! Requests go through hyper's pooled client (HTTP/1.1, or HTTP/2 by ALPN; rustls on ring
//! with the webpki roots) directly, as the core's providers send theirs. reqwest, which
//! wraps the same client, cost the export thread 55–65 µs of CPU a request more on one
//! machine (by profile, much of it in its URL, redirect and proxy layers: docs/PERFORMANCE.md,
//! "An eighth machine"). When a proxy applies (`HTTP_PROXY` / `HTTPS_PROXY` / `ALL_PROXY` /
//! `NO_PROXY`, read as reqwest reads them) requests go through reqwest, which speaks to
//! proxies. Neither follows redirects.

use crate::export::SpanSink;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::time::Duration;

type Direct =
    hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The client requests are sent with.
pub(crate) enum Client {
    Direct(Box<Direct>),
    Proxied(reqwest::Client),
}

impl Client {
    /// A client for requests to `uri`: through reqwest if the environment's proxy settings
    /// send them to a proxy, else hyper's.
    pub(crate) fn new(uri: &http::Uri, tls: rustls::ClientConfig) -> Result<Self, String> {
        Self::with_proxies(uri, tls, &Matcher::from_env())
    }

    /// The same, with the proxy settings `proxies` deciding (reqwest reads the
    /// environment's itself).
    pub(crate) fn with_proxies(
        uri: &http::Uri,
        tls: rustls::ClientConfig,
        proxies: &Matcher,
    ) -> Result<Self, String> {
        if proxies.intercept(uri).is_some() {
            let client = reqwest::Client::builder()
                .tls_backend_preconfigured(tls)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| format!("the HTTP client could not be built: {e}"))?;
            return Ok(Self::Proxied(client));
        }
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        // The pool's timer evicts idle connections (checked while the thread sends).
        let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(https);
        Ok(Self::Direct(Box::new(client)))
    }

    /// Whether requests go through a proxy (and so through reqwest).
    #[cfg(test)]
    pub(crate) fn is_proxied(&self) -> bool {
        matches!(self, Self::Proxied(_))
    }

    /// Sends `request` and reads the whole answer (so that the connection is reused);
    /// returns its status.
    async fn send(&self, request: http::Request<Bytes>) -> Result<http::StatusCode, String> {
        match self {
            Self::Direct(client) => {
                let response =
                    client.request(request.map(Full::new)).await.map_err(|e| chain(&e))?;
                let status = response.status();
                let _body = response.into_body().collect().await;
                Ok(status)
            }
            Self::Proxied(client) => {
                let request =
                    reqwest::Request::try_from(request).map_err(|e| e.without_url().to_string())?;
                let response =
                    client.execute(request).await.map_err(|e| e.without_url().to_string())?;
                let status = response.status();
                let _body = response.bytes().await;
                Ok(status)
            }
        }
    }
}

/// The traces endpoint `url` parsed: an absolute `http` or `https` URI.
pub(crate) fn endpoint(url: &str) -> Result<http::Uri, String> {
    let invalid = |why: &str| format!("the traces endpoint {url:?} is not a URL: {why}");
    let uri: http::Uri = url.parse().map_err(|e: http::uri::InvalidUri| invalid(&e.to_string()))?;
    match (uri.scheme_str(), uri.authority()) {
        (Some("http" | "https"), Some(_)) => Ok(uri),
        _ => Err(invalid("it needs http:// or https:// and a host")),
    }
}

/// `error` and its causes, each after a colon.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    text
}

/// The span sink of OTLP/HTTP protobuf.
pub(crate) struct HttpSink {
    pub(crate) client: Client,
    /// The traces endpoint, parsed once.
    pub(crate) uri: http::Uri,
    /// The configured headers and the content type, built once.
    pub(crate) headers: http::HeaderMap,
    pub(crate) timeout: Duration,
    pub(crate) runtime: Option<tokio::runtime::Runtime>,
}

impl SpanSink for HttpSink {
    fn export(&mut self, request: &[u8], spans: usize) -> Result<(), String> {
        self.export_bytes(Bytes::copy_from_slice(request), spans)
    }

    fn export_bytes(&mut self, body: Bytes, _spans: usize) -> Result<(), String> {
        if self.runtime.is_none() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("the export thread's runtime: {e}"))?;
            self.runtime = Some(runtime);
        }
        let Some(runtime) = &self.runtime else { return Err("no runtime to send with".into()) };
        let mut request = http::Request::new(body);
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.clone();
        let uri = &self.uri;
        let status = runtime.block_on(async {
            match tokio::time::timeout(self.timeout, self.client.send(request)).await {
                Ok(sent) => sent.map_err(|e| format!("sending to {uri}: {e}")),
                Err(_) => Err(format!("sending to {uri}: no answer within {:?}", self.timeout)),
            }
        })?;
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("the collector at {uri} answered {status}"))
        }
    }
}

#[cfg(test)]
mod tests;
