//! The OpenAI Chat Completions provider against wiremock servers that play SSE fixtures
//! written to the documented wire format (and one recorded from a real llama.cpp server):
//! the exact request bodies (insta snapshots), streaming text, tool calls, reasoning, usage,
//! every error class, broken streams, and the whole agent loop.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_support;

use agentloop::message::{FinishReason, Part, ToolCall, Usage};
use agentloop::prelude::*;
use agentloop::provider::openai::{Compat, Dialect, OpenAi, OpenAiChat};
use agentloop::provider::Provider;
use agentloop::provider::ProviderError;
use agentloop::provider::StreamChunk;
use agentloop::provider::{HttpConfig, HttpProvider};
use http_support::*;
use std::time::Duration;
use wiremock::matchers::{body_partial_json, body_string_contains, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const DIR: &str = "openai";

/// The response id and model the streamed fixtures report, first of all chunks.
fn info() -> StreamChunk {
    StreamChunk::ResponseInfo {
        id: Some("chatcmpl-AbC123".into()),
        model: Some("gpt-4.1-2025-04-14".into()),
    }
}

fn provider(base: &str) -> HttpProvider<OpenAiChat> {
    let config = HttpConfig::new(format!("{base}/v1"), "gpt-4.1")
        .api_key("sk-test-key")
        .header("x-team", "agents")
        .stream_idle_timeout(Duration::from_millis(500));
    OpenAi::chat_with(config, Dialect::openai()).unwrap()
}

async fn serve(server: &MockServer, fixture_name: &str) {
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse(fixture(DIR, fixture_name)))
        .mount(server)
        .await;
}

#[tokio::test]
async fn streams_text_and_usage_and_sends_the_exact_request() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer sk-test-key"))
        .and(header("x-team", "agents"))
        .and(header("accept", "text/event-stream"))
        .and(header("content-type", "application/json"))
        .respond_with(sse(fixture(DIR, "text_stream.sse")))
        .mount(&server)
        .await;
    let mut request = simple_request("Capital of France?");
    request.temperature = Some(0.0);
    request.max_tokens = Some(100);
    let (chunks, error) = stream_all(&provider(&server.uri()), request).await;
    assert_eq!(error, None);
    let texts: Vec<&str> = chunks
        .iter()
        .filter_map(|c| match c {
            StreamChunk::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["The capital", " of France", " is Paris."]);
    assert_eq!(chunks.last(), Some(&StreamChunk::Finish { reason: FinishReason::Stop }));
    let response = assemble(&chunks);
    assert_eq!(response.message.text(), "The capital of France is Paris.");
    assert_eq!(
        response.usage,
        Usage { input: 19, output: 7, cached_input: 3, reasoning: 0, cache_write_input: 0 }
    );
    insta::assert_json_snapshot!("chat_stream_request", bodies(&server).await[0]);
}

#[tokio::test]
async fn complete_posts_without_streaming_and_decodes_the_body() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_partial_json(serde_json::json!({"stream": false})))
        .and(header("accept", "application/json"))
        .respond_with(json_response(200, fixture(DIR, "tool_call.json")))
        .mount(&server)
        .await;
    let response = provider(&server.uri()).complete(simple_request("Add 1 and 2.")).await.unwrap();
    assert_eq!(
        response.message.content,
        vec![Part::ToolCall(ToolCall {
            id: "call_N1".into(),
            name: "add".into(),
            arguments: r#"{"a":1,"b":2}"#.into()
        })]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Usage { input: 82, output: 18, cached_input: 0, reasoning: 0, cache_write_input: 0 }
    );
    insta::assert_json_snapshot!("chat_complete_request", bodies(&server).await[0]);
}

#[tokio::test]
async fn a_non_streaming_config_sends_stream_false_and_yields_the_whole_response() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_partial_json(serde_json::json!({"stream": false})))
        .and(header("accept", "application/json"))
        .respond_with(json_response(200, fixture(DIR, "tool_call.json")))
        .expect(1)
        .mount(&server)
        .await;
    let config = HttpConfig::new(format!("{}/v1", server.uri()), "gpt-4.1").streaming(false);
    let provider = OpenAi::chat_with(config, Dialect::openai()).unwrap();
    let (chunks, error) = stream_all(&provider, simple_request("Add 1 and 2.")).await;
    assert_eq!(error, None);
    assert_eq!(
        chunks,
        [
            StreamChunk::ResponseInfo {
                id: Some("chatcmpl-AbC124".into()),
                model: Some("gpt-4.1-2025-04-14".into()),
            },
            StreamChunk::ToolCallStart { id: "call_N1".into(), name: "add".into() },
            StreamChunk::ToolCallDelta { id: "call_N1".into(), delta: r#"{"a":1,"b":2}"#.into() },
            StreamChunk::ToolCallEnd { id: "call_N1".into() },
            StreamChunk::Usage {
                usage: Usage {
                    input: 82,
                    output: 18,
                    cached_input: 0,
                    reasoning: 0,
                    cache_write_input: 0
                }
            },
            StreamChunk::Finish { reason: FinishReason::ToolCalls },
        ]
    );
    let body = &bodies(&server).await[0];
    assert_eq!(body["stream"], false);
    assert!(body.get("stream_options").is_none(), "no stream options without streaming: {body}");
}

#[tokio::test]
async fn a_non_streaming_config_runs_the_agent_loop() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("\"role\":\"tool\""))
        .respond_with(json_response(200, fixture(DIR, "text.json")))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_partial_json(serde_json::json!({"stream": false})))
        .respond_with(json_response(200, fixture(DIR, "tool_call.json")))
        .mount(&server)
        .await;
    let config = HttpConfig::new(format!("{}/v1", server.uri()), "gpt-4.1").streaming(false);
    let agent = Agent::builder(OpenAi::chat_with(config, Dialect::openai()).unwrap())
        .tool(Add)
        .build()
        .unwrap();
    let outcome = agent.run("Add 1 and 2.").await.unwrap();
    assert_eq!(outcome.iterations, 2);
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    assert!(bodies.iter().all(|b| b["stream"] == false));
    assert_eq!(bodies[1]["messages"].as_array().unwrap().last().unwrap()["content"], "3");
}

#[tokio::test]
async fn one_tool_call_streams_in_pieces() {
    let server = MockServer::start().await;
    serve(&server, "tool_call_stream.sse").await;
    let (chunks, error) =
        stream_all(&provider(&server.uri()), simple_request("Add 1 and 2.")).await;
    assert_eq!(error, None);
    assert_eq!(chunks[0], info());
    assert_eq!(chunks[1], StreamChunk::ToolCallStart { id: "call_Qx1".into(), name: "add".into() });
    let deltas = chunks.iter().filter(|c| matches!(c, StreamChunk::ToolCallDelta { .. })).count();
    assert_eq!(deltas, 8, "every argument piece is forwarded");
    assert!(chunks.contains(&StreamChunk::ToolCallEnd { id: "call_Qx1".into() }));
    let response = assemble(&chunks);
    assert_eq!(response.message.tool_calls().next().unwrap().arguments, r#"{"a":1,"b":2}"#);
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn parallel_tool_calls_stream_interleaved_by_index() {
    let server = MockServer::start().await;
    serve(&server, "parallel_tool_calls_stream.sse").await;
    let (chunks, error) = stream_all(&provider(&server.uri()), simple_request("1+2 and 3+4")).await;
    assert_eq!(error, None);
    let response = assemble(&chunks);
    let calls: Vec<(&str, &str)> =
        response.message.tool_calls().map(|c| (c.id.as_str(), c.arguments.as_str())).collect();
    assert_eq!(calls, [("call_A", r#"{"a":1,"b":2}"#), ("call_B", r#"{"a":3,"b":4}"#)]);
    assert_eq!(response.usage.output, 40);
}

#[tokio::test]
async fn the_llama_cpp_recorded_streams_decode() {
    let server = MockServer::start().await;
    serve(&server, "llama_cpp_tool_call_stream.sse").await;
    let (chunks, error) = stream_all(&provider(&server.uri()), simple_request("x")).await;
    assert_eq!(error, None);
    let response = assemble(&chunks);
    let call = response.message.tool_calls().next().unwrap();
    assert_eq!(call.id, "RFxG5h1gSvYOxxE1ik2pVikIinn1ZPZ4");
    assert_eq!(call.name, "calculator");
    assert_eq!(call.arguments, r#"{"operation": "multiply", "a": 17, "b": 23}"#);
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);

    let whole = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_response(200, fixture(DIR, "llama_cpp_tool_call.json")))
        .mount(&whole)
        .await;
    let response = provider(&whole.uri()).complete(simple_request("x")).await.unwrap();
    assert_eq!(response.message.tool_calls().next().unwrap().name, "calculator");
    assert_eq!(
        response.usage,
        Usage { input: 315, output: 43, cached_input: 314, reasoning: 0, cache_write_input: 0 }
    );
}

#[tokio::test]
async fn a_json_answer_to_a_streamed_request_still_streams() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_response(200, fixture(DIR, "text.json")))
        .mount(&server)
        .await;
    let (chunks, error) = stream_all(&provider(&server.uri()), simple_request("x")).await;
    assert_eq!(error, None);
    assert_eq!(assemble(&chunks).message.text(), "The capital of France is Paris.");
}

#[tokio::test]
async fn the_agent_loop_runs_a_tool_and_sends_its_result_back() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains(r#""role":"tool""#))
        .respond_with(sse(fixture(DIR, "final_answer_stream.sse")))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse(fixture(DIR, "tool_call_stream.sse")))
        .with_priority(5)
        .mount(&server)
        .await;
    let agent = Agent::builder(provider(&server.uri()))
        .instructions("Use tools.")
        .tool(Add)
        .build()
        .unwrap();
    let outcome = agent.run("What is 1 + 2?").await.unwrap();
    assert_eq!(outcome.answer, "1 + 2 = 3.");
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(outcome.iterations, 2);
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2);
    // The tool ran: its result (3) answers the streamed call id.
    assert_eq!(
        sent[1]["messages"][3],
        serde_json::json!({"role": "tool", "tool_call_id": "call_Qx1", "content": "3"})
    );
    insta::assert_json_snapshot!("chat_tool_round_trip_second_request", sent[1]);
}

#[tokio::test]
async fn reasoning_streams_and_goes_back_with_the_turns_tool_calls() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_string_contains(r#""role":"tool""#))
        .respond_with(sse(fixture(DIR, "final_answer_stream.sse")))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(sse(fixture(DIR, "reasoning_tool_call_stream.sse")))
        .with_priority(5)
        .mount(&server)
        .await;
    let provider = OpenAi::compatible(
        Compat::deepseek().base_url(format!("{}/v1", server.uri())).require_api_key(false),
        "deepseek-reasoner",
    )
    .unwrap();
    let (chunks, _) = stream_all(&provider, simple_request("What is 1 + 2?")).await;
    let first = assemble(&chunks);
    assert_eq!(first.message.reasoning_text(), "The user wants a sum.");
    assert_eq!(first.message.text(), "Let me add.");
    assert_eq!(first.usage.reasoning, 12);

    let agent = Agent::builder(provider).instructions("Use tools.").tool(Add).build().unwrap();
    let events: Vec<Event> = futures::StreamExt::collect(agent.run_stream("What is 1 + 2?")).await;
    assert!(events.iter().any(|e| matches!(e, Event::ReasoningDelta { .. })));
    let outcome = events.last().and_then(Event::outcome).unwrap();
    assert_eq!(outcome.answer, "1 + 2 = 3.");
    let sent = bodies(&server).await;
    // DeepSeek's dialect: system instructions, max_tokens, and the reasoning of this turn's
    // tool call sent back as `reasoning_content` (its thinking mode requires it).
    assert_eq!(sent[2]["messages"][2]["reasoning_content"], "The user wants a sum.");
    insta::assert_json_snapshot!("chat_reasoning_round_trip_second_request", sent[2]);
}

#[tokio::test]
async fn every_error_class_is_classified() {
    check_error_classes(provider, "/v1/chat/completions", DIR).await;
    let llama = error_for(
        &provider,
        "/v1/chat/completions",
        json_response(401, fixture(DIR, "llama_cpp_401.json")),
    )
    .await;
    assert_eq!(llama, ProviderError::Auth { status: 401, message: "Invalid API Key".into() });
}

#[tokio::test]
async fn a_malformed_stream_is_a_protocol_error_after_what_it_delivered() {
    let server = MockServer::start().await;
    serve(&server, "malformed.sse").await;
    let (chunks, error) = stream_all(&provider(&server.uri()), simple_request("x")).await;
    assert_eq!(chunks, [info(), StreamChunk::TextDelta { text: "Hel".into() }]);
    let Some(ProviderError::Protocol { excerpt, .. }) = error else { panic!("{error:?}") };
    assert!(excerpt.starts_with(r#"{"id":"chatcmpl-AbC123","choices""#), "{excerpt}");
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_a_network_error() {
    let events = fixture(DIR, "text_stream.sse");
    let first_two: String = events.split_inclusive("\n\n").take(2).collect();
    let raw = raw_sse_server(&first_two, After::Close).await;
    let (chunks, error) = stream_all(&provider(&raw.url), simple_request("x")).await;
    assert_eq!(chunks, [info(), StreamChunk::TextDelta { text: "The capital".into() }]);
    assert!(matches!(error, Some(ProviderError::Network { .. })), "{error:?}");
    assert!(error.unwrap().is_retryable());
}

#[tokio::test]
async fn an_idle_stream_hits_the_idle_timeout_and_dropping_it_closes_the_connection() {
    let events = fixture(DIR, "text_stream.sse");
    let first_two: String = events.split_inclusive("\n\n").take(2).collect();
    let raw = raw_sse_server(&first_two, After::Hang).await;
    let started = std::time::Instant::now();
    let (chunks, error) = stream_all(&provider(&raw.url), simple_request("x")).await;
    assert_eq!(chunks, [info(), StreamChunk::TextDelta { text: "The capital".into() }]);
    assert!(
        matches!(&error, Some(ProviderError::Timeout { message }) if message.contains("idle")),
        "{error:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(500));
    // The stream was dropped: the server sees the connection close.
    tokio::time::timeout(Duration::from_secs(5), raw.client_closed).await.unwrap().unwrap();
}

#[tokio::test]
async fn dropping_a_stream_aborts_the_request() {
    let events = fixture(DIR, "text_stream.sse");
    let first_two: String = events.split_inclusive("\n\n").take(2).collect();
    let raw = raw_sse_server(&first_two, After::Hang).await;
    let provider =
        OpenAi::chat_with(HttpConfig::new(&raw.url, "m").api_key("k"), Dialect::openai()).unwrap();
    let mut stream = provider.stream(simple_request("x"));
    let first = futures::StreamExt::next(&mut stream).await.unwrap().unwrap();
    assert_eq!(first, info());
    let second = futures::StreamExt::next(&mut stream).await.unwrap().unwrap();
    assert_eq!(second, StreamChunk::TextDelta { text: "The capital".into() });
    drop(stream);
    tokio::time::timeout(Duration::from_secs(5), raw.client_closed).await.unwrap().unwrap();
}

#[tokio::test]
async fn a_slow_server_hits_the_request_timeout_and_a_closed_port_is_unreachable() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(3)))
        .mount(&server)
        .await;
    let config = HttpConfig::new(server.uri(), "m").request_timeout(Duration::from_millis(200));
    let slow = OpenAi::chat_with(config, Dialect::openai()).unwrap();
    let (_, error) = stream_all(&slow, simple_request("x")).await;
    assert!(matches!(error, Some(ProviderError::Timeout { .. })), "{error:?}");
    assert!(matches!(slow.complete(simple_request("x")).await, Err(ProviderError::Timeout { .. })));

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let nowhere = OpenAi::chat_with(HttpConfig::new(closed, "m"), Dialect::openai()).unwrap();
    let (_, error) = stream_all(&nowhere, simple_request("x")).await;
    assert!(matches!(error, Some(ProviderError::Unreachable { .. })), "{error:?}");
}

#[tokio::test]
async fn a_provider_without_a_key_sends_no_authorization() {
    let server = MockServer::start().await;
    serve(&server, "text_stream.sse").await;
    let local =
        OpenAi::compatible(Compat::ollama().base_url(format!("{}/v1", server.uri())), "llama3.2")
            .unwrap();
    let (_, error) = stream_all(&local, simple_request("x")).await;
    assert_eq!(error, None);
    let requests = server.received_requests().await.unwrap();
    assert!(requests[0].headers.get("authorization").is_none());
    let body: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(local.name(), "llama3.2");
}

#[tokio::test]
async fn a_configured_proxy_carries_the_requests() {
    // The mock plays the proxy: it receives the request in absolute form, for the model's
    // host, with the provider's headers, and answers it.
    let proxy = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("host", "model.invalid"))
        .and(header("authorization", "Bearer sk-test-key"))
        .respond_with(sse(fixture(DIR, "text_stream.sse")))
        .mount(&proxy)
        .await;
    let config = HttpConfig::new("http://model.invalid/v1", "gpt-4.1")
        .api_key("sk-test-key")
        .proxy(proxy.uri());
    let provider = OpenAi::chat_with(config, Dialect::openai()).unwrap();
    assert!(provider.is_proxied());
    let (chunks, error) = stream_all(&provider, simple_request("Capital of France?")).await;
    assert_eq!(error, None);
    assert_eq!(assemble(&chunks).message.text(), "The capital of France is Paris.");
    let received = proxy.received_requests().await.unwrap();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].url.as_str(), "http://model.invalid/v1/chat/completions");
}

#[tokio::test]
async fn a_redirect_is_an_error_not_followed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(307).insert_header("location", "http://elsewhere.invalid/v1"),
        )
        .mount(&server)
        .await;
    let error = provider(&server.uri()).complete(simple_request("x")).await.unwrap_err();
    assert!(
        matches!(&error, ProviderError::InvalidRequest { message }
            if message.contains("redirects to http://elsewhere.invalid/v1")),
        "{error:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn one_line_construction_sends_to_the_base_url_with_the_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer sk-one-line"))
        .and(header("accept", "text/event-stream"))
        .respond_with(sse(fixture(DIR, "text_stream.sse")))
        .expect(1)
        .mount(&server)
        .await;
    let provider =
        OpenAi::compatible_at(format!("{}/v1", server.uri()), Some("sk-one-line"), "local-model")
            .unwrap();
    assert_eq!(provider.base_url(), format!("{}/v1", server.uri()));
    assert!(provider.streams(), "streaming is the default");
    let agent = Agent::builder(provider).instructions("Be brief.").build().unwrap();
    let outcome = agent.run("Capital of France?").await.unwrap();
    assert_eq!(outcome.answer, "The capital of France is Paris.");
    let body = &bodies(&server).await[0];
    assert_eq!(body["model"], "local-model");
    assert_eq!(body["stream"], true);
    assert_eq!(
        body["messages"][0],
        serde_json::json!({"role": "system", "content": "Be brief."}),
        "instructions go out as a system message by default"
    );

    // Without a key: no authorization header.
    let keyless = MockServer::start().await;
    serve(&keyless, "text_stream.sse").await;
    let provider =
        OpenAi::compatible_at(format!("{}/v1", keyless.uri()), None, "local-model").unwrap();
    let (_, error) = stream_all(&provider, simple_request("x")).await;
    assert_eq!(error, None);
    let requests = keyless.received_requests().await.unwrap();
    assert!(requests[0].headers.get("authorization").is_none());
}

#[tokio::test]
async fn streaming_and_the_instructions_role_of_a_compatible_server_can_be_changed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer sk-custom"))
        .and(header("accept", "application/json"))
        .and(body_partial_json(serde_json::json!({"stream": false})))
        .respond_with(json_response(200, fixture(DIR, "text.json")))
        .expect(1)
        .mount(&server)
        .await;
    let custom = Compat::custom(format!("{}/v1", server.uri()))
        .api_key("sk-custom")
        .streaming(false)
        .developer_role(true);
    assert!(!custom.streaming);
    assert!(custom.dialect.developer_role);
    let provider = OpenAi::compatible(custom, "local-model").unwrap();
    assert!(!provider.streams());
    let agent = Agent::builder(provider).instructions("Be brief.").build().unwrap();
    let outcome = agent.run("Capital of France?").await.unwrap();
    assert!(outcome.has_answer(), "{outcome:?}");
    let body = &bodies(&server).await[0];
    assert_eq!(
        body["messages"][0],
        serde_json::json!({"role": "developer", "content": "Be brief."})
    );
}

/// Gives the model call a fixed trace context.
struct Traced;

impl agentloop::observe::Observer for Traced {
    fn observe(
        &self,
        _run: &agentloop::observe::ObservedRun<'_>,
    ) -> Option<std::sync::Arc<dyn agentloop::observe::RunObserver>> {
        Some(std::sync::Arc::new(Traced))
    }
}

impl agentloop::observe::RunObserver for Traced {
    fn on_event(&self, _event: &Event) {}
    fn trace_parent(&self, call_id: Option<&str>) -> Option<String> {
        call_id.is_none().then(|| TRACEPARENT.to_owned())
    }
}

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A server that answers `times` chat requests that carry `traceparent`, and no other.
async fn server_expecting(traceparent: &str, times: u64) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("traceparent", traceparent))
        .respond_with(sse(fixture(DIR, "text_stream.sse")))
        .expect(times)
        .mount(&server)
        .await;
    server
}

/// An agent whose model calls get [`TRACEPARENT`] from its observer.
fn traced(provider: impl Provider + 'static) -> Agent {
    Agent::builder(provider).observer(std::sync::Arc::new(Traced)).build().unwrap()
}

#[tokio::test]
async fn a_traced_run_sends_the_model_calls_traceparent() {
    let server = server_expecting(TRACEPARENT, 1).await;
    let outcome = traced(provider(&server.uri())).run("Capital of France?").await.unwrap();
    assert!(!outcome.answer.is_empty());
    // Untraced, no header: the request above would not match.
    let plain = Agent::builder(provider(&server.uri())).build().unwrap();
    assert!(plain.run("Capital of France?").await.is_err());
}

#[tokio::test]
async fn a_configured_traceparent_wins_over_the_observers() {
    const CONFIGURED: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let server = server_expecting(CONFIGURED, 2).await;
    let config = HttpConfig::new(format!("{}/v1", server.uri()), "gpt-4.1")
        .api_key("sk-test-key")
        .header("traceparent", CONFIGURED);
    let agent = traced(OpenAi::chat_with(config, Dialect::openai()).unwrap());
    for _ in 0..2 {
        let outcome = agent.run("Capital of France?").await.unwrap();
        assert!(!outcome.answer.is_empty());
    }
    let requests = server.received_requests().await.unwrap();
    for request in &requests {
        let values: Vec<_> = request.headers.get_all("traceparent").iter().collect();
        assert_eq!(values, [CONFIGURED], "one traceparent, the configured one");
    }
}

#[tokio::test]
async fn traced_requests_each_carry_one_traceparent() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse(fixture(DIR, "text_stream.sse")))
        .mount(&server)
        .await;
    let agent = traced(provider(&server.uri()));
    for _ in 0..2 {
        agent.run("Capital of France?").await.unwrap();
    }
    let plain = Agent::builder(provider(&server.uri())).build().unwrap();
    plain.run("Capital of France?").await.unwrap();
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 3);
    for request in &requests[..2] {
        let values: Vec<_> = request.headers.get_all("traceparent").iter().collect();
        assert_eq!(values, [TRACEPARENT]);
    }
    // An untraced request has none.
    assert!(requests[2].headers.get("traceparent").is_none());
}
