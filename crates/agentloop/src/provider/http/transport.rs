//! The HTTP client under [`HttpProvider`](super::HttpProvider).
//!
//! Requests go through hyper's pooled client (HTTP/1.1 and HTTP/2, rustls with the ring
//! provider and the webpki roots) directly. reqwest, which wraps the same client, parses the
//! request URL again twice per request (its redirect policy and its response), which cost
//! about 14k instructions of a 110k-instruction round trip in the overhead benchmark. When a
//! proxy applies (the `HTTP_PROXY` / `HTTPS_PROXY` / `ALL_PROXY` / `NO_PROXY` variables, read
//! as reqwest reads them, or [`HttpConfig::proxy`](super::HttpConfig::proxy)), requests go
//! through reqwest, which speaks to proxies (CONNECT tunnels, proxy credentials).
//!
//! Neither follows redirects: a redirected POST would have to be sent again with its body and
//! its credentials, possibly to another host; a redirect is an error response instead.

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::Full;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// An error of the transport (connecting, sending, reading), with its causes.
pub(crate) type TransportError = Box<dyn std::error::Error + Send + Sync>;

type Direct = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The client a provider sends its requests with. Cheap to clone (clones share the pool).
#[derive(Clone)]
pub(crate) struct Transport {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    Direct(Box<Direct>),
    Proxied(reqwest::Client),
}

impl Transport {
    /// A client for requests to `base` (an absolute http(s) URI). `proxy` is an explicit
    /// proxy URL; without one, the environment's proxy variables decide.
    pub(crate) fn new(
        base: &http::Uri,
        connect_timeout: Duration,
        proxy: Option<&str>,
    ) -> Result<Self, String> {
        let inner = match proxy {
            Some(proxy) => Inner::Proxied(proxied(connect_timeout, Some(proxy))?),
            None if proxy_applies(&Matcher::from_env(), base) => {
                Inner::Proxied(proxied(connect_timeout, None)?)
            }
            None => Inner::Direct(Box::new(direct(connect_timeout)?)),
        };
        Ok(Self { inner })
    }

    /// Whether requests go through a proxy (and so through reqwest).
    pub(crate) fn is_proxied(&self) -> bool {
        matches!(self.inner, Inner::Proxied(_))
    }

    /// Sends `request` (with an absolute URI) and waits for the response headers.
    pub(crate) async fn send(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<ResponseBody>, TransportError> {
        match &self.inner {
            Inner::Direct(client) => {
                let response = client.request(request.map(Full::new)).await?;
                Ok(response.map(ResponseBody::Direct))
            }
            Inner::Proxied(client) => {
                let request = reqwest::Request::try_from(request)?;
                let response = client.execute(request).await?;
                Ok(http::Response::from(response).map(ResponseBody::Proxied))
            }
        }
    }
}

/// Whether the environment's proxy settings (`matcher`) send requests to `base` through a
/// proxy.
pub(crate) fn proxy_applies(matcher: &Matcher, base: &http::Uri) -> bool {
    matcher.intercept(base).is_some()
}

/// hyper's pooled client over rustls, as reqwest sets it up (no Nagle delay, HTTP/2 by ALPN,
/// idle connections kept 90 s).
fn direct(connect_timeout: Duration) -> Result<Direct, String> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(crate::tls::client_config().map_err(|e| format!("TLS setup failed: {e}"))?)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    // The pool's timer evicts idle connections after 90 s (without one they would only be
    // found expired at the next checkout); HTTP/2 uses the other for its keep-alive pings.
    Ok(Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .build(https))
}

/// reqwest for requests through a proxy: the environment's, or `proxy`.
fn proxied(connect_timeout: Duration, proxy: Option<&str>) -> Result<reqwest::Client, String> {
    let mut builder = crate::tls::http_client_builder()
        .map_err(|e| format!("TLS setup failed: {e}"))?
        .connect_timeout(connect_timeout);
    if let Some(proxy) = proxy {
        let proxy = reqwest::Proxy::all(proxy).map_err(|e| format!("invalid proxy: {e}"))?;
        builder = builder.proxy(proxy);
    }
    builder.build().map_err(|e| e.to_string())
}

/// The body of a response, from either client.
pub(crate) enum ResponseBody {
    Direct(hyper::body::Incoming),
    Proxied(reqwest::Body),
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = TransportError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, TransportError>>> {
        match self.get_mut() {
            Self::Direct(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
            Self::Proxied(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Direct(body) => body.is_end_stream(),
            Self::Proxied(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            Self::Direct(body) => body.size_hint(),
            Self::Proxied(body) => body.size_hint(),
        }
    }
}

/// Whether `error` (or one of its causes) is a failure to connect: the connection refused, a
/// name that did not resolve, a TLS handshake that failed, a connect timeout — nothing of the
/// request was sent.
pub(crate) fn is_connect(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error.downcast_ref::<hyper_util::client::legacy::Error>().is_some_and(|e| e.is_connect())
            || error.downcast_ref::<reqwest::Error>().is_some_and(reqwest::Error::is_connect)
        {
            return true;
        }
        next = error.source();
    }
    false
}

/// Whether `error` (or one of its causes) is a timeout.
pub(crate) fn is_timeout(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::TimedOut {
                return true;
            }
        }
        if error.downcast_ref::<reqwest::Error>().is_some_and(reqwest::Error::is_timeout) {
            return true;
        }
        next = error.source();
    }
    false
}
