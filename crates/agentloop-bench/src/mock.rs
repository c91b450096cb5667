//! `mockllm`: an OpenAI-compatible `/v1/chat/completions` server on hyper, scripted by the
//! model name ([`Script`]). It answers non-streamed requests with one JSON body and
//! `stream: true` requests with server-sent events (`chat.completion.chunk` events, a usage
//! chunk and `[DONE]`), with `usage` in every response. `GET /stats` returns the counters
//! (`{"requests":N,"errors":N}`) so a runner can check that a driver did all its work.
//!
//! It keeps no per-conversation state: the next turn follows from the tool results in the
//! request, so any number of concurrent conversations can share it.
//!
//! The model [`RECORDED_MODEL`] replays, byte for byte, two turns a real llama.cpp server
//! streamed: a `calculator` call streamed token by token (the provider tests' recording),
//! then, once the request holds a tool result, a prose answer (`fixtures/llama-server/`; its
//! README says where both come from).

use crate::scenario::{Script, FINAL_ANSWER};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The server's counters.
#[derive(Debug, Default)]
pub struct Stats {
    /// Chat completion requests answered with a model turn.
    pub requests: AtomicU64,
    /// Requests refused (bad JSON, unknown model, unknown path).
    pub errors: AtomicU64,
}

impl Stats {
    /// The counters as JSON.
    pub fn to_json(&self) -> String {
        format!(
            r#"{{"requests":{},"errors":{}}}"#,
            self.requests.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed)
        )
    }
}

/// The part of a chat request the mock reads.
#[derive(Deserialize)]
struct ChatRequest<'a> {
    #[serde(borrow)]
    model: Cow<'a, str>,
    #[serde(default)]
    stream: bool,
    messages: Vec<RequestMessage<'a>>,
}

#[derive(Deserialize)]
struct RequestMessage<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
}

/// The model whose turns are the recorded ones.
pub const RECORDED_MODEL: &str = "bench-recorded";

/// A `calculator` call as llama.cpp streamed it (22 events, the arguments a token each): the
/// provider tests' recording.
pub const RECORDED_TOOL_CALL: &str =
    include_str!("../../agentloop/tests/fixtures/openai/llama_cpp_tool_call_stream.sse");

/// A prose answer as llama.cpp streamed it (16 events, a token each, `finish_reason: stop`).
pub const RECORDED_ANSWER: &str = include_str!("../fixtures/llama-server/answer.sse");

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turns {
    /// Turns of a [`Script`].
    Script(Script),
    /// The recorded turns ([`RECORDED_MODEL`]; streamed only).
    Recorded,
}

/// The arguments of every scripted call.
const ARGUMENTS: &str = r#"{\"a\":1,\"b\":2}"#;

/// Serves connections accepted on `listener` until the task is dropped.
pub async fn serve(listener: tokio::net::TcpListener, stats: Arc<Stats>) -> std::io::Result<()> {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of file descriptors or a connection reset before accept: go on.
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let stats = stats.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let stats = stats.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(request, &stats).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Binds a listener with a deep accept backlog (thousands of agents connect at once).
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(16_384)
}

async fn handle(request: Request<Incoming>, stats: &Stats) -> Response<Full<Bytes>> {
    match (request.method(), request.uri().path()) {
        (&Method::POST, "/v1/chat/completions") => {
            let body = match request.into_body().collect().await {
                Ok(body) => body.to_bytes(),
                Err(e) => return refuse(stats, StatusCode::BAD_REQUEST, &e.to_string()),
            };
            let (turns, stream, results, body_len) = match read_request(&body) {
                Ok(read) => read,
                Err(message) => return refuse(stats, StatusCode::BAD_REQUEST, &message),
            };
            let script = match turns {
                Turns::Script(script) => script,
                Turns::Recorded if stream => {
                    stats.requests.fetch_add(1, Ordering::Relaxed);
                    let turn = Bytes::from_static(recorded_turn(results).as_bytes());
                    return respond("text/event-stream", turn);
                }
                Turns::Recorded => {
                    let message = "the recorded turns are streamed only";
                    return refuse(stats, StatusCode::BAD_REQUEST, message);
                }
            };
            if !script.latency.is_zero() {
                tokio::time::sleep(script.latency).await;
            }
            let n = stats.requests.fetch_add(1, Ordering::Relaxed);
            let calls = script.calls_after(results);
            let usage = Usage { prompt: body_len / 4, completion: 10 + 20 * u64::from(calls) };
            let model = script.model_name();
            let (content_type, body) = if stream {
                ("text/event-stream", sse_body(n, &model, calls, usage))
            } else {
                ("application/json", json_body(n, &model, calls, usage))
            };
            respond(content_type, Bytes::from(body))
        }
        (&Method::GET, "/stats") => respond("application/json", Bytes::from(stats.to_json())),
        _ => refuse(stats, StatusCode::NOT_FOUND, "no such route"),
    }
}

/// The recorded turn that follows `results` tool results: the call, then the answer.
fn recorded_turn(results: u32) -> &'static str {
    if results == 0 {
        RECORDED_TOOL_CALL
    } else {
        RECORDED_ANSWER
    }
}

/// A `200 OK` of `body`.
fn respond(content_type: &str, body: Bytes) -> Response<Full<Bytes>> {
    Response::builder()
        .header("content-type", content_type)
        .body(Full::new(body))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

/// The turns asked for, whether to stream, the tool results so far and the body's size.
fn read_request(body: &[u8]) -> Result<(Turns, bool, u32, u64), String> {
    let request: ChatRequest<'_> =
        serde_json::from_slice(body).map_err(|e| format!("invalid chat request: {e}"))?;
    let turns = match request.model.as_ref() {
        RECORDED_MODEL => Turns::Recorded,
        model => Turns::Script(Script::parse(model).map_err(|e| e.to_string())?),
    };
    let results = request.messages.iter().filter(|m| m.role == "tool").count();
    let results = u32::try_from(results).unwrap_or(u32::MAX);
    Ok((turns, request.stream, results, body.len() as u64))
}

fn refuse(stats: &Stats, status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    stats.errors.fetch_add(1, Ordering::Relaxed);
    let body = serde_json::json!({"error": {"message": message, "type": "invalid_request_error"}});
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

#[derive(Debug, Clone, Copy)]
struct Usage {
    prompt: u64,
    completion: u64,
}

fn usage_json(out: &mut String, usage: Usage) {
    let _ = write!(
        out,
        r#""usage":{{"prompt_tokens":{},"completion_tokens":{},"total_tokens":{}}}"#,
        usage.prompt,
        usage.completion,
        usage.prompt + usage.completion
    );
}

/// A whole chat completion: `calls` calls of `add`, or the final text when 0.
fn json_body(n: u64, model: &str, calls: u32, usage: Usage) -> String {
    let mut out = String::with_capacity(256 + 120 * calls as usize);
    let _ = write!(
        out,
        r#"{{"id":"chatcmpl-{n}","object":"chat.completion","created":0,"model":"{model}","choices":[{{"index":0,"message":{{"role":"assistant","#
    );
    if calls == 0 {
        let _ = write!(out, r#""content":"{FINAL_ANSWER}"}},"finish_reason":"stop"}}],"#);
    } else {
        out.push_str(r#""content":null,"tool_calls":["#);
        for i in 0..calls {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(
                out,
                r#"{{"id":"call_{n}_{i}","type":"function","function":{{"name":"add","arguments":"{ARGUMENTS}"}}}}"#
            );
        }
        out.push_str(r#"]},"finish_reason":"tool_calls"}],"#);
    }
    usage_json(&mut out, usage);
    out.push('}');
    out
}

/// The same turn as server-sent events: a role chunk, per call a start chunk (id, name) and
/// an arguments chunk, the finish chunk, the usage chunk and `[DONE]`.
fn sse_body(n: u64, model: &str, calls: u32, usage: Usage) -> String {
    let mut out = String::with_capacity(512 + 400 * calls as usize);
    let head = format!(
        r#"data: {{"id":"chatcmpl-{n}","object":"chat.completion.chunk","created":0,"model":"{model}","choices":["#
    );
    let _ = write!(
        out,
        r#"{head}{{"index":0,"delta":{{"role":"assistant","content":{}}},"finish_reason":null}}]}}"#,
        if calls == 0 { format!("\"{FINAL_ANSWER}\"") } else { "null".to_owned() }
    );
    out.push_str("\n\n");
    for i in 0..calls {
        let _ = write!(
            out,
            r#"{head}{{"index":0,"delta":{{"tool_calls":[{{"index":{i},"id":"call_{n}_{i}","type":"function","function":{{"name":"add","arguments":""}}}}]}},"finish_reason":null}}]}}"#
        );
        out.push_str("\n\n");
        let _ = write!(
            out,
            r#"{head}{{"index":0,"delta":{{"tool_calls":[{{"index":{i},"function":{{"arguments":"{ARGUMENTS}"}}}}]}},"finish_reason":null}}]}}"#
        );
        out.push_str("\n\n");
    }
    let reason = if calls == 0 { "stop" } else { "tool_calls" };
    let _ = write!(out, r#"{head}{{"index":0,"delta":{{}},"finish_reason":"{reason}"}}]}}"#);
    out.push_str("\n\n");
    let _ = write!(out, "{head}],");
    usage_json(&mut out, usage);
    out.push_str("}\n\ndata: [DONE]\n\n");
    out
}

#[cfg(test)]
mod tests;
