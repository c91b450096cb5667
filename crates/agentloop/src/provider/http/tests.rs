#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::classify::classify_at;
use super::*;
use crate::provider::wire::{EncodedRequest, WireRequest};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

fn now() -> SystemTime {
    // Sat, 21 Nov 2026 22:00:00 GMT
    UNIX_EPOCH + Duration::from_secs(1_795_298_400)
}

#[test]
fn statuses_map_to_error_classes_with_the_providers_message() {
    let body =
        r#"{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}"#;
    let none = HeaderMap::new();
    assert_eq!(
        classify_at(401, &none, body, now()),
        ProviderError::Auth { status: 401, message: "Invalid API Key".into() }
    );
    assert!(matches!(
        classify_at(403, &none, body, now()),
        ProviderError::Auth { status: 403, .. }
    ));
    let bad = r#"{"error":{"code":400,"message":"Expected 'messages' to be an array","type":"invalid_request_error"}}"#;
    assert_eq!(
        classify_at(400, &none, bad, now()),
        ProviderError::InvalidRequest { message: "Expected 'messages' to be an array".into() }
    );
    assert_eq!(
        classify_at(404, &none, r#"{"error":"model 'x' not found"}"#, now()),
        ProviderError::InvalidRequest { message: "HTTP 404: model 'x' not found".into() }
    );
    assert!(matches!(classify_at(408, &none, "", now()), ProviderError::Timeout { .. }));
    assert!(matches!(
        classify_at(409, &none, "", now()),
        ProviderError::Server { status: 409, .. }
    ));
    assert_eq!(
        classify_at(500, &none, "", now()),
        ProviderError::Server { status: 500, message: "Internal Server Error".into() }
    );
    assert_eq!(
        classify_at(
            529,
            &none,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            now()
        ),
        ProviderError::Overloaded { message: "Overloaded".into() }
    );
    assert_eq!(
        classify_at(502, &none, "<html>bad gateway</html>", now()),
        ProviderError::Server { status: 502, message: "<html>bad gateway</html>".into() }
    );
    // Redirects are not followed: the error names the new address.
    let moved = headers(&[("location", "https://api.example.com/v2")]);
    assert!(matches!(
        classify_at(302, &moved, "", now()),
        ProviderError::InvalidRequest { message } if message.contains("redirects to https://api.example.com/v2")
    ));
    assert!(matches!(classify_at(101, &none, "", now()), ProviderError::Other { .. }));
}

#[test]
fn messages_come_from_every_error_body_shape() {
    assert_eq!(error_message(r#"{"error":{"message":"a"}}"#).as_deref(), Some("a"));
    assert_eq!(error_message(r#"{"error":"b"}"#).as_deref(), Some("b"));
    assert_eq!(error_message(r#"{"object":"error","message":"c"}"#).as_deref(), Some("c"));
    assert_eq!(error_message(r#"{"detail":"d"}"#).as_deref(), Some("d"));
    assert_eq!(error_message("not json"), None);
    let long = "x".repeat(2000);
    let ProviderError::Server { message, .. } = classify_at(500, &HeaderMap::new(), &long, now())
    else {
        panic!()
    };
    assert_eq!(message.len(), 500);
}

fn delay(pairs: &[(&str, &str)]) -> Option<Duration> {
    retry_after(&headers(pairs), now())
}

#[test]
fn retry_after_reads_seconds_milliseconds_and_http_dates() {
    assert_eq!(delay(&[("retry-after", "7")]), Some(Duration::from_secs(7)));
    assert_eq!(delay(&[("retry-after", "1.5")]), Some(Duration::from_millis(1500)));
    assert_eq!(
        delay(&[("retry-after-ms", "250"), ("retry-after", "7")]),
        Some(Duration::from_millis(250))
    );
    assert_eq!(
        delay(&[("retry-after", "Sat, 21 Nov 2026 22:00:30 GMT")]),
        Some(Duration::from_secs(30))
    );
    assert_eq!(delay(&[("retry-after", "Sat, 21 Nov 2026 21:00:00 GMT")]), Some(Duration::ZERO));
    assert_eq!(delay(&[("retry-after", "soon")]), None);
    assert_eq!(delay(&[]), None);
}

#[test]
fn retry_after_falls_back_to_rate_limit_reset_headers() {
    assert_eq!(delay(&[("x-ratelimit-reset-requests", "1s")]), Some(Duration::from_secs(1)));
    assert_eq!(delay(&[("x-ratelimit-reset-tokens", "6m0s")]), Some(Duration::from_secs(360)));
    assert_eq!(delay(&[("x-ratelimit-reset-tokens", "20ms")]), Some(Duration::from_millis(20)));
    assert_eq!(delay(&[("x-ratelimit-reset-tokens", "1.5s")]), Some(Duration::from_millis(1500)));
    // The exhausted limit's reset wins over a longer one that is not exhausted.
    assert_eq!(
        delay(&[
            ("x-ratelimit-reset-requests", "2s"),
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-tokens", "6m0s"),
            ("x-ratelimit-remaining-tokens", "5000"),
        ]),
        Some(Duration::from_secs(2))
    );
    // Nothing says which: the longest.
    assert_eq!(
        delay(&[("x-ratelimit-reset-requests", "2s"), ("x-ratelimit-reset-tokens", "3s")]),
        Some(Duration::from_secs(3))
    );
    assert_eq!(
        delay(&[
            ("anthropic-ratelimit-tokens-reset", "2026-11-21T22:00:45Z"),
            ("anthropic-ratelimit-tokens-remaining", "0"),
        ]),
        Some(Duration::from_secs(45))
    );
    // Retry-After wins over reset headers.
    assert_eq!(
        delay(&[("retry-after", "3"), ("x-ratelimit-reset-tokens", "6m0s")]),
        Some(Duration::from_secs(3))
    );
}

#[test]
fn a_429_carries_its_delay() {
    let error = classify_at(
        429,
        &headers(&[("retry-after", "2")]),
        r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
        now(),
    );
    assert_eq!(
        error,
        ProviderError::RateLimited {
            message: "Rate limit reached".into(),
            retry_after_ms: Some(2000)
        }
    );
    assert_eq!(error.retry_after(), Some(Duration::from_secs(2)));
}

struct Dummy;

impl WireFormat for Dummy {
    fn name(&self) -> &'static str {
        "dummy"
    }
    fn auth(&self) -> AuthStyle {
        AuthStyle::Header("x-api-key")
    }
    fn encode(&self, _: &ModelRequest, _: bool) -> Result<WireRequest, ProviderError> {
        Err(ProviderError::Other { message: "unused".into() })
    }
    fn stream_decoder(&self) -> Box<dyn crate::provider::wire::StreamDecoder> {
        unreachable!()
    }
    fn decode_response(&self, _: &[u8]) -> Result<ModelResponse, ProviderError> {
        unreachable!()
    }
}

#[test]
fn building_checks_the_url_headers_and_required_key() {
    let ok = HttpProvider::new(Dummy, HttpConfig::new("http://127.0.0.1:1/v1/", "m").api_key("k"));
    let provider = ok.unwrap();
    assert_eq!(provider.base_url(), "http://127.0.0.1:1/v1");
    assert_eq!(provider.name(), "m");
    assert!(matches!(
        HttpProvider::new(Dummy, HttpConfig::new("ftp://x", "m")),
        Err(HttpConfigError::InvalidBaseUrl { .. })
    ));
    assert!(matches!(
        HttpProvider::new(Dummy, HttpConfig::new("not a url", "m")),
        Err(HttpConfigError::InvalidBaseUrl { .. })
    ));
    assert!(matches!(
        HttpProvider::new(Dummy, HttpConfig::new("http://x", "m").header("bad header", "v")),
        Err(HttpConfigError::InvalidHeader { .. })
    ));
    let missing = HttpConfig::new("http://x", "m")
        .api_key_env("AGENTLOOP_TEST_SURELY_UNSET_KEY")
        .require_api_key(true);
    assert_eq!(
        HttpProvider::new(Dummy, missing).unwrap_err(),
        HttpConfigError::MissingApiKey { env: "AGENTLOOP_TEST_SURELY_UNSET_KEY".into() }
    );
    // Optional keys may be absent.
    let optional = HttpConfig::new("http://x", "m").api_key_env("AGENTLOOP_TEST_SURELY_UNSET_KEY");
    assert!(HttpProvider::new(Dummy, optional).is_ok());
}

#[test]
fn the_config_debug_output_hides_the_key() {
    let config = HttpConfig::new("http://x", "m").api_key("sk-very-secret");
    let debug = format!("{config:?}");
    assert!(!debug.contains("sk-very-secret"), "{debug}");
    let provider = HttpProvider::new(Dummy, config).unwrap();
    assert!(!format!("{provider:?}").contains("sk-very-secret"));
}

#[test]
fn request_uris_are_parsed_once_per_path() {
    let provider =
        HttpProvider::new(Dummy, HttpConfig::new("http://127.0.0.1:1/v1/", "m")).unwrap();
    let shared = &provider.shared;
    let uri = shared.uri("/chat/completions").unwrap();
    assert_eq!(uri.to_string(), "http://127.0.0.1:1/v1/chat/completions");
    assert_eq!(shared.uri("/chat/completions").unwrap(), uri);
    let query = shared.uri("/models/m:streamGenerateContent?alt=sse").unwrap();
    assert_eq!(query.to_string(), "http://127.0.0.1:1/v1/models/m:streamGenerateContent?alt=sse");
    assert_eq!(shared.uris.lock().unwrap().len(), 2);
    for i in 0..20 {
        assert_eq!(shared.uri(&format!("/p{i}")).unwrap().path(), format!("/v1/p{i}"));
    }
    assert_eq!(shared.uris.lock().unwrap().len(), CACHED_URIS);
    assert!(matches!(shared.uri("/a b"), Err(ProviderError::InvalidRequest { .. })));
    // Built with the cached URI, a request goes where the path says, with the provider's
    // headers and the format's.
    let wire = EncodedRequest {
        path: "/chat/completions".into(),
        body: b"{}".to_vec(),
        headers: vec![("anthropic-version".into(), "2023-06-01".into())],
    };
    let request = shared.request(Outgoing { wire, trace_parent: None }, true).unwrap();
    assert_eq!(request.method(), http::Method::POST);
    assert_eq!(request.uri(), &uri);
    assert_eq!(request.body().as_ref(), b"{}");
    let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
    assert_eq!(header("content-type"), Some("application/json"));
    assert_eq!(header("accept"), Some("text/event-stream"));
    assert_eq!(header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(header("user-agent"), Some(USER_AGENT_VALUE));
    // Configured headers win over the format's and over the default `User-Agent`.
    let config = HttpConfig::new("http://127.0.0.1:1/v1", "m")
        .header("anthropic-version", "2024-01-01")
        .header("user-agent", "my-app/2");
    let custom = HttpProvider::new(Dummy, config).unwrap();
    let wire = EncodedRequest {
        path: "/messages".into(),
        body: Vec::new(),
        headers: vec![("anthropic-version".into(), "2023-06-01".into())],
    };
    let request = custom.shared.request(Outgoing { wire, trace_parent: None }, false).unwrap();
    let values = |name: &str| -> Vec<&str> {
        request.headers().get_all(name).iter().map(|v| v.to_str().unwrap()).collect()
    };
    assert_eq!(values("anthropic-version"), ["2024-01-01"]);
    assert_eq!(values("user-agent"), ["my-app/2"]);
    assert_eq!(values("accept"), ["application/json"]);
    let bad = EncodedRequest {
        path: "/x".into(),
        body: Vec::new(),
        headers: vec![("bad header".into(), "v".into())],
    };
    let bad = Outgoing { wire: bad, trace_parent: None };
    assert!(matches!(shared.request(bad, false), Err(ProviderError::InvalidRequest { .. })));
    // The trace context goes into `traceparent`, unless the configuration sets the header;
    // one that is not a valid header value is refused.
    let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let traced = |trace_parent: &str| Outgoing {
        wire: EncodedRequest { path: "/x".into(), body: Vec::new(), headers: Vec::new() },
        trace_parent: Some(trace_parent.into()),
    };
    let request = shared.request(traced(tp), true).unwrap();
    assert_eq!(request.headers().get_all("traceparent").iter().collect::<Vec<_>>(), [tp]);
    let config = HttpConfig::new("http://127.0.0.1:1/v1", "m").header("traceparent", "fixed");
    let fixed = HttpProvider::new(Dummy, config).unwrap();
    let request = fixed.shared.request(traced(tp), true).unwrap();
    assert_eq!(request.headers().get_all("traceparent").iter().collect::<Vec<_>>(), ["fixed"]);
    let bad = shared.request(traced("00-\n-01"), true);
    assert!(matches!(bad, Err(ProviderError::InvalidRequest { .. })));
}

#[test]
fn each_kind_of_request_has_its_own_accept_and_connection_headers() {
    let wire = || Outgoing {
        wire: EncodedRequest { path: "/x".into(), body: Vec::new(), headers: Vec::new() },
        trace_parent: None,
    };
    // A configured `Accept` is replaced by what each kind of request takes.
    let config = HttpConfig::new("http://127.0.0.1:1/v1", "m")
        .header("accept", "text/plain")
        .api_key("sk-test")
        .close_streamed_connections(true);
    let provider = HttpProvider::new(Dummy, config).unwrap();
    for (stream, accept, connection) in
        [(false, "application/json", None), (true, "text/event-stream", Some("close"))]
    {
        let request = provider.shared.request(wire(), stream).unwrap();
        let values = |name: &str| -> Vec<&str> {
            request.headers().get_all(name).iter().map(|v| v.to_str().unwrap()).collect()
        };
        assert_eq!(values("accept"), [accept]);
        assert_eq!(values("content-type"), ["application/json"]);
        assert_eq!(values("connection").first().copied(), connection);
        assert_eq!(values("x-api-key"), ["sk-test"]);
        assert!(request.headers()["x-api-key"].is_sensitive());
    }
    // Without the option, streamed requests keep their connection.
    let plain = HttpProvider::new(Dummy, HttpConfig::new("http://127.0.0.1:1/v1", "m")).unwrap();
    let request = plain.shared.request(wire(), true).unwrap();
    assert!(request.headers().get("connection").is_none());
}

#[test]
fn a_proxy_from_the_environment_applies_unless_no_proxy_names_the_host() {
    use hyper_util::client::proxy::matcher::Matcher;
    let matcher = Matcher::builder().all("http://proxy.internal:3128").no("localhost").build();
    let remote: http::Uri = "https://api.example.com/v1".parse().unwrap();
    let local: http::Uri = "http://localhost:8080/v1".parse().unwrap();
    assert!(transport::proxy_applies(&matcher, &remote));
    assert!(!transport::proxy_applies(&matcher, &local));
    assert!(!transport::proxy_applies(&Matcher::builder().build(), &remote));
    // An explicit proxy is used whatever the environment says; an invalid one is refused.
    let proxied = HttpConfig::new("http://127.0.0.1:1/v1", "m").proxy("http://127.0.0.1:2");
    assert!(HttpProvider::new(Dummy, proxied).unwrap().is_proxied());
    let invalid = HttpConfig::new("http://127.0.0.1:1/v1", "m").proxy("not a proxy url");
    assert!(matches!(HttpProvider::new(Dummy, invalid), Err(HttpConfigError::Client(_))));
}

#[test]
fn timeouts_are_found_among_the_causes() {
    #[derive(Debug, thiserror::Error)]
    #[error("client error (Connect)")]
    struct Outer(#[source] std::io::Error);
    let timed_out = Outer(std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timeout"));
    assert!(matches!(
        transport_error(&timed_out, "sending the request"),
        ProviderError::Timeout { message } if message == "sending the request: client error (Connect): connect timeout"
    ));
    let refused = Outer(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
    assert!(matches!(
        transport_error(&refused, "sending the request"),
        ProviderError::Network { .. }
    ));
}
