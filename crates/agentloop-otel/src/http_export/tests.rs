use super::*;
use crate::telemetry::tls_config;
use wiremock::matchers::{body_bytes, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A sink sending to `url` with header `x-api-key: k`, through hyper's client.
fn sink(url: &str, timeout: Duration) -> HttpSink {
    sink_with(url, timeout, &Matcher::builder().build())
}

/// The same, with the proxy settings `proxies`.
fn sink_with(url: &str, timeout: Duration, proxies: &Matcher) -> HttpSink {
    let uri = endpoint(url).unwrap();
    let mut headers = http::HeaderMap::new();
    headers.insert("x-api-key", http::HeaderValue::from_static("k"));
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/x-protobuf"),
    );
    let client = Client::with_proxies(&uri, tls_config().unwrap(), proxies);
    HttpSink { client: client.unwrap(), uri, headers, timeout, runtime: None }
}

/// Exports `bodies` on a thread of their own (the sink drives a runtime of its own, as the
/// export thread does).
async fn export(mut sink: HttpSink, bodies: Vec<&'static [u8]>) -> Vec<Result<(), String>> {
    let sent = std::thread::spawn(move || {
        bodies.into_iter().map(|body| sink.export_bytes(Bytes::from_static(body), 1)).collect()
    });
    tokio::task::spawn_blocking(move || sent.join().unwrap()).await.unwrap()
}

/// A collector that answers 200 (with an `ExportTraceServiceResponse`) to exactly
/// `times` requests of `spans` with the sink's headers.
async fn collector(times: u64) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .and(header("content-type", "application/x-protobuf"))
        .and(header("x-api-key", "k"))
        .and(body_bytes(b"spans".to_vec()))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(b"\x0a\x00".to_vec()))
        .expect(times)
        .mount(&server)
        .await;
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_carry_the_body_and_headers() {
    let server = collector(3).await;
    let url = format!("{}/v1/traces", server.uri());
    let sink = sink(&url, Duration::from_secs(5));
    assert!(!sink.client.is_proxied());
    let results = export(sink, vec![b"spans", b"spans", b"spans"]).await;
    assert_eq!(results, vec![Ok(()), Ok(()), Ok(())]);
    server.verify().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_reqwest_requests_carry_the_body_and_headers_too() {
    let server = collector(2).await;
    let url = format!("{}/v1/traces", server.uri());
    // Settings that send every request to a proxy choose reqwest; reqwest reads the
    // environment's settings, which (in the tests) send it straight to the server.
    let proxied = Matcher::builder().all("http://127.0.0.1:3128").build();
    let sink = sink_with(&url, Duration::from_secs(5), &proxied);
    assert!(sink.client.is_proxied());
    let results = export(sink, vec![b"spans", b"spans"]).await;
    assert_eq!(results, vec![Ok(()), Ok(())]);
    server.verify().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_status_fails_the_request() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(503)).mount(&server).await;
    let url = format!("{}/v1/traces", server.uri());
    let results = export(sink(&url, Duration::from_secs(5)), vec![b"spans"]).await;
    let error = results[0].as_ref().unwrap_err();
    assert!(error.contains("answered 503"), "{error}");
    assert!(error.contains(&url), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_does_not_answer_in_time_fails_the_request() {
    let server = MockServer::start().await;
    let slow = ResponseTemplate::new(200).set_delay(Duration::from_secs(3));
    Mock::given(method("POST")).respond_with(slow).mount(&server).await;
    let url = format!("{}/v1/traces", server.uri());
    let started = std::time::Instant::now();
    let results = export(sink(&url, Duration::from_millis(200)), vec![b"spans"]).await;
    let error = results[0].as_ref().unwrap_err();
    assert!(error.contains("no answer within 200ms"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_fails_the_request_and_the_next_one_too() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/v1/traces");
    let results = export(sink(&url, Duration::from_secs(5)), vec![b"spans", b"spans"]).await;
    for result in results {
        let error = result.unwrap_err();
        assert!(error.starts_with(&format!("sending to {url}: ")), "{error}");
    }
}

#[test]
fn a_proxy_that_applies_sends_through_reqwest() {
    let uri = endpoint("http://collector.example:4318/v1/traces").unwrap();
    let proxied = Matcher::builder().all("http://127.0.0.1:3128").build();
    let client = Client::with_proxies(&uri, tls_config().unwrap(), &proxied).unwrap();
    assert!(client.is_proxied());
    let bypassed = Matcher::builder().all("http://127.0.0.1:3128").no("collector.example").build();
    let client = Client::with_proxies(&uri, tls_config().unwrap(), &bypassed).unwrap();
    assert!(!client.is_proxied());
}

#[test]
fn the_endpoint_must_be_an_http_url() {
    assert!(endpoint("http://127.0.0.1:4318/v1/traces").is_ok());
    assert!(endpoint("https://collector.example/v1/traces").is_ok());
    for bad in ["::bad::", "ftp://collector.example/v1/traces", "/v1/traces", ""] {
        let error = endpoint(bad).unwrap_err();
        assert!(error.starts_with("the traces endpoint"), "{bad:?}: {error}");
    }
}
