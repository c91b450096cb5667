//! Helpers of the HTTP provider tests: fixtures, wiremock responses, a raw TCP server for
//! broken connections, and the error-class checks every provider runs.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::prelude::*;
use agentloop::provider::ModelRequest;
use agentloop::provider::ModelResponse;
use agentloop::provider::Provider;
use agentloop::provider::ProviderError;
use agentloop::provider::StreamChunk;
use agentloop::provider::{ResponseAssembler, RetryPolicy};
use futures::StreamExt;
use serde_json::Value;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Adds two integers.
#[tool]
pub async fn add(a: i64, b: i64) -> Result<i64, String> {
    a.checked_add(b).ok_or_else(|| "overflow".to_string())
}

/// A fixture file of `tests/fixtures/<dir>/`.
pub fn fixture(dir: &str, name: &str) -> String {
    let path = format!("{}/tests/fixtures/{dir}/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A 200 SSE response with this body.
pub fn sse(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

/// Recorded chunks, one JSON document a line, as the SSE events they arrived in.
pub fn as_sse(lines: &str) -> String {
    lines.lines().filter(|l| !l.trim().is_empty()).map(|l| format!("data: {l}\n\n")).collect()
}

/// A JSON response.
pub fn json_response(status: u16, body: String) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(body, "application/json")
}

/// The JSON bodies of every request the server received, in order.
pub async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// A request with instructions, one user message and the `add` tool.
pub fn simple_request(text: &str) -> ModelRequest {
    let agent = Agent::builder(agentloop::provider::scripted::ScriptedModel::new([]))
        .tool(Add)
        .build()
        .unwrap();
    ModelRequest::default()
        .with_instructions("Be brief.")
        .with_messages(vec![Message::user(text)])
        .with_tools(agent.tools().to_vec())
}

/// Streams the request: every chunk, and the error that ended the stream, if any.
pub async fn stream_all(
    provider: &impl Provider,
    request: ModelRequest,
) -> (Vec<StreamChunk>, Option<ProviderError>) {
    let mut stream = provider.stream(request);
    let mut chunks = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(chunk) => chunks.push(chunk),
            Err(error) => {
                assert!(stream.next().await.is_none(), "the stream ends after an error");
                return (chunks, Some(error));
            }
        }
    }
    (chunks, None)
}

/// Folds chunks into a response.
pub fn assemble(chunks: &[StreamChunk]) -> ModelResponse {
    let mut assembler = ResponseAssembler::default();
    for chunk in chunks {
        assembler.push(chunk.clone()).unwrap();
    }
    assembler.finish()
}

/// The error of a request the server answers with `response`.
pub async fn error_for<P: Provider>(
    make: &impl Fn(&str) -> P,
    path: &str,
    response: ResponseTemplate,
) -> ProviderError {
    error_for_matching(make, wiremock::matchers::path(path), response).await
}

/// The error of a request that `matcher` accepts and the server answers with `response`
/// (for providers whose streamed and whole requests go to different paths).
pub async fn error_for_matching<P: Provider>(
    make: &impl Fn(&str) -> P,
    matcher: impl wiremock::Match + 'static,
    response: ResponseTemplate,
) -> ProviderError {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("POST"))
        .and(matcher)
        .respond_with(response)
        .mount(&server)
        .await;
    let provider = make(&server.uri());
    let (chunks, error) = stream_all(&provider, simple_request("hi")).await;
    assert!(chunks.is_empty(), "{chunks:?}");
    let error = error.expect("the request fails");
    // `complete()` classifies the same way.
    let whole = provider.complete(simple_request("hi")).await.unwrap_err();
    assert_eq!(whole, error);
    error
}

/// Every HTTP error class, with the fixtures of `dir` (401, 400, context overflow, 429 with
/// Retry-After, 500, 529, 503) and the retry policy's verdict.
pub async fn check_error_classes<P: Provider>(make: impl Fn(&str) -> P, path: &str, dir: &str) {
    let policy = RetryPolicy::default().without_jitter();

    let auth = error_for(&make, path, json_response(401, fixture(dir, "error_401.json"))).await;
    assert!(
        matches!(&auth, ProviderError::Auth { status: 401, message } if message.starts_with("Incorrect API key")),
        "{auth:?}"
    );
    assert_eq!(policy.next_delay(1, &auth), None);

    let invalid = error_for(&make, path, json_response(400, fixture(dir, "error_400.json"))).await;
    assert!(
        matches!(&invalid, ProviderError::InvalidRequest { message } if message.starts_with("Invalid value for 'tool_choice'")),
        "{invalid:?}"
    );
    assert_eq!(policy.next_delay(1, &invalid), None);

    let overflow =
        error_for(&make, path, json_response(400, fixture(dir, "context_overflow.json"))).await;
    assert!(
        matches!(&overflow, ProviderError::ContextLengthExceeded { message } if message.contains("maximum context length")),
        "{overflow:?}"
    );
    let llama =
        error_for(&make, path, json_response(400, fixture(dir, "llama_cpp_context_overflow.json")))
            .await;
    assert_eq!(
        llama,
        ProviderError::ContextLengthExceeded {
            message: "request (3032 tokens) exceeds the available context size (2048 tokens), try increasing it".into()
        }
    );
    assert_eq!(policy.next_delay(1, &llama), None);

    let limited = error_for(
        &make,
        path,
        json_response(429, fixture(dir, "error_429.json")).insert_header("retry-after", "2"),
    )
    .await;
    assert!(
        matches!(&limited, ProviderError::RateLimited { message, .. } if message.starts_with("Rate limit reached")),
        "{limited:?}"
    );
    assert_eq!(limited.retry_after(), Some(Duration::from_secs(2)));
    assert_eq!(policy.next_delay(1, &limited), Some(Duration::from_secs(2)));
    let reset = error_for(
        &make,
        path,
        json_response(429, fixture(dir, "error_429.json"))
            .insert_header("x-ratelimit-remaining-tokens", "0")
            .insert_header("x-ratelimit-reset-tokens", "1.5s")
            .insert_header("x-ratelimit-reset-requests", "20ms"),
    )
    .await;
    assert_eq!(reset.retry_after(), Some(Duration::from_millis(1500)));
    assert_eq!(policy.next_delay(2, &reset), Some(Duration::from_millis(1500)));

    let server = error_for(&make, path, json_response(500, fixture(dir, "error_500.json"))).await;
    assert!(
        matches!(&server, ProviderError::Server { status: 500, message } if message.starts_with("The server had an error")),
        "{server:?}"
    );
    assert_eq!(policy.next_delay(1, &server), Some(Duration::from_secs(1)));
    assert_eq!(policy.next_delay(2, &server), Some(Duration::from_secs(2)));

    let overloaded =
        error_for(&make, path, json_response(529, fixture(dir, "error_529.json"))).await;
    assert_eq!(overloaded, ProviderError::Overloaded { message: "Overloaded".into() });
    assert_eq!(policy.next_delay(3, &overloaded), Some(Duration::from_secs(4)));

    let unavailable = error_for(
        &make,
        path,
        ResponseTemplate::new(503).set_body_string("upstream connect error"),
    )
    .await;
    assert_eq!(
        unavailable,
        ProviderError::Server { status: 503, message: "upstream connect error".into() }
    );
    assert!(unavailable.is_retryable());
}

/// What the raw server does after sending its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Closes the connection (mid-body when the body is chunked and unfinished).
    Close,
    /// Keeps the connection open and silent until the client closes it.
    Hang,
}

/// A one-connection HTTP server that answers with raw bytes.
pub struct RawServer {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// Fires when the client closed the connection (in [`After::Hang`] mode).
    pub client_closed: oneshot::Receiver<()>,
}

/// Starts a raw server that sends an SSE response head, then `events` as one chunk of a
/// chunked body that never ends, then does `after`.
pub async fn raw_sse_server(events: &str, after: After) -> RawServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (closed_tx, closed_rx) = oneshot::channel();
    let mut response =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec();
    response.extend_from_slice(format!("{:x}\r\n{events}\r\n", events.len()).as_bytes());
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else { return };
        // Read the request head and its body.
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = socket.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            request.extend_from_slice(&buf[..n]);
            if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if request.len() >= end + 4 + length {
                    break;
                }
            }
        }
        socket.write_all(&response).await.unwrap();
        socket.flush().await.unwrap();
        match after {
            After::Close => drop(socket),
            After::Hang => {
                // Wait (at most 30 s) for the client to close.
                let read =
                    tokio::time::timeout(Duration::from_secs(30), socket.read(&mut buf)).await;
                if matches!(read, Ok(Ok(0)) | Ok(Err(_))) {
                    let _ = closed_tx.send(());
                }
            }
        }
    });
    RawServer { url, client_closed: closed_rx }
}
