//! The Anthropic Messages provider over HTTP, against wiremock servers that play the SSE and
//! JSON fixtures of `tests/fixtures/anthropic/` (written to the documented wire format, some
//! recorded from a real llama.cpp server): the exact request bodies (insta snapshots),
//! headers, streaming text, tool calls, thinking blocks sent back byte for byte, usage, every
//! error class, broken streams, and the whole agent loop.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_support;

use agentloop::message::{FinishReason, Part, Reasoning, ToolCall, Usage};
use agentloop::prelude::*;
use agentloop::provider::anthropic::{API_KEY_ENV, BASE_URL};
use agentloop::provider::Provider;
use agentloop::provider::ProviderError;
use agentloop::provider::StreamChunk;
use agentloop::provider::ToolChoice;
use agentloop::provider::{Anthropic, HttpConfig, HttpConfigError, HttpProvider, RetryPolicy};
use http_support::*;
use serde_json::json;
use std::time::Duration;
use wiremock::matchers::{body_string_contains, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const DIR: &str = "anthropic";
const MESSAGES: &str = "/v1/messages";

/// Looks up the weather.
#[tool]
async fn get_weather(location: String, #[serde(default)] unit: Option<String>) -> String {
    format!("{location}: 18 degrees {}", unit.unwrap_or_else(|| "celsius".into()))
}

/// Runs an arithmetic operation.
#[tool]
async fn calculator(operation: String, a: i64, b: i64) -> Result<i64, String> {
    match operation.as_str() {
        "multiply" => a.checked_mul(b).ok_or_else(|| "overflow".into()),
        "add" => a.checked_add(b).ok_or_else(|| "overflow".into()),
        other => Err(format!("unknown operation {other}")),
    }
}

fn config(base: &str) -> HttpConfig {
    Anthropic::config("claude-sonnet-4-5")
        .base_url(base)
        .api_key("sk-ant-test-key")
        .header("anthropic-beta", "fine-grained-tool-streaming-2025-05-14")
        .stream_idle_timeout(Duration::from_millis(500))
}

fn provider(base: &str) -> HttpProvider<Anthropic> {
    Anthropic::with_config(config(base), Anthropic::messages("claude-sonnet-4-5")).unwrap()
}

async fn serve(server: &MockServer, fixture_name: &str) {
    Mock::given(method("POST"))
        .and(path(MESSAGES))
        .respond_with(sse(fixture(DIR, fixture_name)))
        .mount(server)
        .await;
}

async fn stream_fixture(fixture_name: &str) -> (Vec<StreamChunk>, Option<ProviderError>) {
    let server = MockServer::start().await;
    serve(&server, fixture_name).await;
    stream_all(&provider(&server.uri()), simple_request("x")).await
}

fn texts(chunks: &[StreamChunk]) -> Vec<&str> {
    chunks
        .iter()
        .filter_map(|c| match c {
            StreamChunk::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn streams_text_and_usage_and_sends_the_exact_request() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(MESSAGES))
        .and(header("x-api-key", "sk-ant-test-key"))
        .and(header("anthropic-version", "2023-06-01"))
        .and(header("anthropic-beta", "fine-grained-tool-streaming-2025-05-14"))
        .and(header("accept", "text/event-stream"))
        .and(header("content-type", "application/json"))
        .respond_with(sse(fixture(DIR, "text_stream.sse")))
        .mount(&server)
        .await;
    let mut request = simple_request("Say hello.");
    request.temperature = Some(0.0);
    request.max_tokens = Some(100);
    let (chunks, error) = stream_all(&provider(&server.uri()), request).await;
    assert_eq!(error, None);
    assert_eq!(texts(&chunks), ["Hello", ", wörld", "! 👋"]);
    assert_eq!(chunks.last(), Some(&StreamChunk::Finish { reason: FinishReason::Stop }));
    let response = assemble(&chunks);
    assert_eq!(response.message.text(), "Hello, wörld! 👋");
    // input = uncached 12 + cache write 100 + cache read 2048.
    assert_eq!(
        response.usage,
        Usage { input: 2160, output: 15, cached_input: 2048, reasoning: 0, cache_write_input: 100 }
    );
    let requests = server.received_requests().await.unwrap();
    assert!(requests[0].headers.get("authorization").is_none(), "the key goes in x-api-key");
    insta::assert_json_snapshot!("anthropic_stream_request", bodies(&server).await[0]);
}

#[tokio::test]
async fn complete_posts_without_streaming_and_decodes_the_body() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(MESSAGES))
        .and(header("accept", "application/json"))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(json_response(200, fixture(DIR, "response_tool_use.json")))
        .mount(&server)
        .await;
    let mut request = simple_request("Weather and time in San Francisco?");
    request.tool_choice = ToolChoice::Required;
    let response = provider(&server.uri()).complete(request).await.unwrap();
    assert_eq!(
        response.message.content,
        vec![
            Part::text("I'll check both."),
            Part::ToolCall(ToolCall {
                id: "toolu_01A09q90qw90lq917835lq9".into(),
                name: "get_weather".into(),
                arguments: r#"{"location":"San Francisco, CA","unit":"celsius"}"#.into(),
            }),
            Part::ToolCall(ToolCall {
                id: "toolu_01B19r91rx91mr928946mr0".into(),
                name: "get_time".into(),
                arguments: r#"{"timezone":"America/Los_Angeles"}"#.into(),
            }),
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Usage { input: 390, output: 98, cached_input: 0, reasoning: 0, cache_write_input: 0 }
    );
    let sent = bodies(&server).await;
    assert!(sent[0].get("stream").is_none(), "{}", sent[0]);
    insta::assert_json_snapshot!("anthropic_complete_request", sent[0]);
}

#[tokio::test]
async fn complete_keeps_thinking_blocks_and_cache_usage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_string_contains("thinking"))
        .respond_with(json_response(200, fixture(DIR, "response_thinking.json")))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(json_response(200, fixture(DIR, "response_text.json")))
        .with_priority(5)
        .mount(&server)
        .await;
    let thinking = Anthropic::with_config(
        config(&server.uri()),
        Anthropic::messages("ignored").with_thinking(1024),
    )
    .unwrap();
    let response = thinking.complete(simple_request("Infinitely many primes?")).await.unwrap();
    assert_eq!(
        response.message.content[..2],
        [
            Part::Reasoning(Reasoning {
                text: "To approach this, let's think about what we know about prime numbers..."
                    .into(),
                opaque: Some(
                    json!({"type": "thinking", "signature": "zbbJhbGciOiJFU8zI1NiIsImtakcjsu38219c0+/Sig=="})
                ),
            }),
            Part::Reasoning(Reasoning {
                text: String::new(),
                opaque: Some(
                    json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP+/Redacted=="})
                ),
            }),
        ]
    );
    assert_eq!(
        response.usage,
        Usage { input: 50, output: 412, cached_input: 0, reasoning: 0, cache_write_input: 0 }
    );
    let sent = bodies(&server).await;
    assert_eq!(sent[0]["model"], "claude-sonnet-4-5", "the configuration's model wins");
    assert_eq!(sent[0]["thinking"], json!({"type": "enabled", "budget_tokens": 1024}));
    assert_eq!(sent[0]["max_tokens"], 1024 + 4096);

    let plain = provider(&server.uri()).complete(simple_request("Who are you?")).await.unwrap();
    assert_eq!(plain.message.text(), "Hi! My name is Claude.");
    assert_eq!(
        plain.usage,
        Usage { input: 3895, output: 503, cached_input: 1800, reasoning: 0, cache_write_input: 0 }
    );
}

#[tokio::test]
async fn one_tool_call_streams_in_pieces() {
    let (chunks, error) = stream_fixture("tool_use_stream.sse").await;
    assert_eq!(error, None);
    assert_eq!(texts(&chunks), ["Okay, let me check", " the weather."]);
    let id = "toolu_01T1x1fJ34qAmk2tNTrN7Up6";
    assert!(
        chunks.contains(&StreamChunk::ToolCallStart { id: id.into(), name: "get_weather".into() })
    );
    let deltas: Vec<&str> = chunks
        .iter()
        .filter_map(|c| match c {
            StreamChunk::ToolCallDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas.len(), 4, "every non-empty input_json_delta is forwarded: {deltas:?}");
    assert!(chunks.contains(&StreamChunk::ToolCallEnd { id: id.into() }));
    let response = assemble(&chunks);
    assert_eq!(
        response.message.tool_calls().next().unwrap().arguments,
        r#"{"location": "San Francisco, CA", "unit": "fahrenheit"}"#
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Usage { input: 472, output: 89, cached_input: 0, reasoning: 0, cache_write_input: 0 }
    );
}

#[tokio::test]
async fn parallel_tool_calls_stream_block_by_block() {
    let (chunks, error) = stream_fixture("parallel_tools_stream.sse").await;
    assert_eq!(error, None);
    let response = assemble(&chunks);
    let calls: Vec<(&str, &str, &str)> = response
        .message
        .tool_calls()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("toolu_01A09q90qw90lq917835lq9", "get_weather", r#"{"location": "Paris"}"#),
            ("toolu_01B19r91rx91mr928946mr0", "get_time", r#"{"timezone": "Europe/Paris"}"#),
            ("toolu_01C29s92sy92ns939057ns1", "list_alarms", "{}"),
        ]
    );
    assert_eq!(
        response.usage,
        Usage { input: 610, output: 121, cached_input: 0, reasoning: 0, cache_write_input: 0 }
    );
}

#[tokio::test]
async fn the_llama_cpp_recorded_responses_decode_over_http() {
    let (chunks, error) = stream_fixture("llama_tool_use_stream.sse").await;
    assert_eq!(error, None);
    let response = assemble(&chunks);
    let call = response.message.tool_calls().next().unwrap();
    assert_eq!(call.id, "UX8QBKfcwCpb00WOwEQ8WKyWD2fTgGw6");
    assert_eq!(call.arguments, r#"{"operation": "multiply", "a": 17, "b": 23}"#);
    assert_eq!(
        response.usage,
        Usage { input: 315, output: 43, cached_input: 314, reasoning: 0, cache_write_input: 0 }
    );

    let (chunks, error) = stream_fixture("llama_text_stream.sse").await;
    assert_eq!(error, None);
    assert_eq!(
        assemble(&chunks).message.text(),
        "Hello, I'm here to help with any creative writing project."
    );

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_response(200, fixture(DIR, "llama_response_tool_use.json")))
        .mount(&server)
        .await;
    let local = Anthropic::compatible(server.uri(), "local").unwrap();
    let response = local.complete(simple_request("x")).await.unwrap();
    assert_eq!(response.message.tool_calls().next().unwrap().name, "calculator");
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    let requests = server.received_requests().await.unwrap();
    assert!(requests[0].headers.get("x-api-key").is_none(), "no key configured, none sent");
    assert_eq!(requests[0].url.path(), MESSAGES);
}

#[tokio::test]
async fn the_agent_loop_runs_a_tool_and_sends_its_result_back() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(MESSAGES))
        .and(body_string_contains(r#""type":"tool_result""#))
        .respond_with(sse(fixture(DIR, "text_stream.sse")))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(MESSAGES))
        .respond_with(sse(fixture(DIR, "tool_use_stream.sse")))
        .with_priority(5)
        .mount(&server)
        .await;
    let agent = Agent::builder(provider(&server.uri()))
        .instructions("Use tools.")
        .tool(GetWeather)
        .build()
        .unwrap();
    let events: Vec<Event> =
        futures::StreamExt::collect(agent.run_stream("Weather in San Francisco?")).await;
    assert!(events.iter().any(|e| matches!(e, Event::ToolArgumentsDelta { .. })));
    let outcome = events.last().and_then(Event::outcome).unwrap();
    assert_eq!(outcome.answer, "Hello, wörld! 👋");
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(outcome.iterations, 2);
    assert_eq!(outcome.usage.output, 89 + 15);
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2);
    // The tool ran: its result answers the streamed call id, in the next user message,
    // which carries the cache breakpoint the next call reads (the default policy, `auto`).
    assert_eq!(
        sent[1]["messages"][2],
        json!({"role": "user", "content": [{
            "type": "tool_result",
            "tool_use_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "content": "San Francisco, CA: 18 degrees fahrenheit",
            "cache_control": {"type": "ephemeral"},
        }]})
    );
    insta::assert_json_snapshot!("anthropic_tool_round_trip_second_request", sent[1]);
}

#[tokio::test]
async fn thinking_blocks_go_back_byte_for_byte() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_string_contains(r#""type":"tool_result""#))
        .respond_with(sse(fixture(DIR, "text_stream.sse")))
        .with_priority(1)
        .mount(&server)
        .await;
    serve(&server, "thinking_stream.sse").await;
    let provider = Anthropic::with_config(
        config(&server.uri()),
        Anthropic::messages("claude-sonnet-4-5").with_thinking(2048),
    )
    .unwrap();
    let agent = Agent::builder(provider).tool(Calculator).build().unwrap();
    let events: Vec<Event> =
        futures::StreamExt::collect(agent.run_stream("What is 27 * 453?")).await;
    let reasoning: String = events
        .iter()
        .filter_map(|e| match e {
            Event::ReasoningDelta { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasoning,
        "Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3"
    );
    assert_eq!(events.last().and_then(Event::outcome).unwrap().answer, "Hello, wörld! 👋");

    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    let raw = String::from_utf8(requests[1].body.clone()).unwrap();
    // The signature and the redacted data, exactly as they streamed in.
    assert!(
        raw.contains(
            r#""signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/aZ0==""#
        ),
        "{raw}"
    );
    assert!(
        raw.contains(r#""data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP+/Redacted==""#),
        "{raw}"
    );
    let sent = bodies(&server).await;
    let assistant = &sent[1]["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][0]["type"], "thinking");
    assert_eq!(assistant["content"][1]["type"], "redacted_thinking");
    assert_eq!(
        assistant["content"][3]["input"],
        json!({"operation": "multiply", "a": 27, "b": 453})
    );
    assert_eq!(sent[1]["messages"][2]["content"][0]["content"], "12231", "our tool ran");
    insta::assert_json_snapshot!("anthropic_thinking_round_trip_second_request", sent[1]);
}

#[tokio::test]
async fn every_error_class_is_classified() {
    let policy = RetryPolicy::default().without_jitter();
    let error = |status: u16, name: &str| {
        let response = json_response(status, fixture(DIR, name));
        async move { error_for(&provider, MESSAGES, response).await }
    };

    let auth = error(401, "error_authentication.json").await;
    assert_eq!(auth, ProviderError::Auth { status: 401, message: "invalid x-api-key".into() });
    assert_eq!(policy.next_delay(1, &auth), None);
    let permission = error(403, "error_permission.json").await;
    assert!(matches!(permission, ProviderError::Auth { status: 403, .. }), "{permission:?}");
    let llama_auth = error(401, "llama_error_auth.json").await;
    assert_eq!(llama_auth, ProviderError::Auth { status: 401, message: "Invalid API Key".into() });

    let invalid = error(400, "error_invalid_request.json").await;
    assert_eq!(
        invalid,
        ProviderError::InvalidRequest { message: "max_tokens: Field required".into() }
    );
    assert_eq!(policy.next_delay(1, &invalid), None);
    let llama_invalid = error(400, "llama_error_bad_request.json").await;
    assert_eq!(
        llama_invalid,
        ProviderError::InvalidRequest { message: "Expected 'messages' to be an array".into() }
    );
    let not_found = error(404, "error_not_found.json").await;
    assert_eq!(
        not_found,
        ProviderError::InvalidRequest { message: "model: claude-nonexistent".into() }
    );
    let too_large = error(413, "error_request_too_large.json").await;
    assert!(matches!(too_large, ProviderError::InvalidRequest { .. }), "{too_large:?}");

    let overflow = error(400, "error_context.json").await;
    assert_eq!(
        overflow,
        ProviderError::ContextLengthExceeded {
            message: "prompt is too long: 208310 tokens > 200000 maximum".into()
        }
    );
    assert_eq!(policy.next_delay(1, &overflow), None);
    let llama_overflow = error(400, "llama_error_context.json").await;
    assert!(
        matches!(&llama_overflow, ProviderError::ContextLengthExceeded { message } if message.contains("exceeds the available context size")),
        "{llama_overflow:?}"
    );

    let limited = error_for(
        &provider,
        MESSAGES,
        json_response(429, fixture(DIR, "error_rate_limit.json")).insert_header("retry-after", "2"),
    )
    .await;
    assert!(
        matches!(&limited, ProviderError::RateLimited { message, .. } if message.starts_with("Number of request tokens")),
        "{limited:?}"
    );
    assert_eq!(limited.retry_after(), Some(Duration::from_secs(2)));
    assert_eq!(policy.next_delay(1, &limited), Some(Duration::from_secs(2)));
    let without_header = error(429, "error_rate_limit.json").await;
    assert_eq!(without_header.retry_after(), None);
    assert_eq!(policy.next_delay(2, &without_header), Some(Duration::from_secs(2)), "backoff");

    let server = error(500, "error_api.json").await;
    assert_eq!(
        server,
        ProviderError::Server { status: 500, message: "Internal server error".into() }
    );
    assert_eq!(policy.next_delay(1, &server), Some(Duration::from_secs(1)));
    assert_eq!(policy.next_delay(2, &server), Some(Duration::from_secs(2)));

    let overloaded = error(529, "error_overloaded.json").await;
    assert_eq!(overloaded, ProviderError::Overloaded { message: "Overloaded".into() });
    assert_eq!(policy.next_delay(3, &overloaded), Some(Duration::from_secs(4)));
    assert_eq!(policy.next_delay(5, &overloaded), None, "the attempts are used up");

    let unavailable = error_for(
        &provider,
        MESSAGES,
        ResponseTemplate::new(503).set_body_string("no healthy upstream"),
    )
    .await;
    assert_eq!(
        unavailable,
        ProviderError::Server { status: 503, message: "no healthy upstream".into() }
    );
    assert!(unavailable.is_retryable());
}

#[tokio::test]
async fn an_error_event_ends_the_stream_after_what_it_delivered() {
    let (chunks, error) = stream_fixture("error_stream.sse").await;
    assert_eq!(texts(&chunks), ["Once upon"]);
    assert_eq!(error, Some(ProviderError::Overloaded { message: "Overloaded".into() }));
}

#[tokio::test]
async fn a_malformed_stream_is_a_protocol_error_after_what_it_delivered() {
    let (chunks, error) = stream_fixture("malformed.sse").await;
    assert_eq!(texts(&chunks), ["Hel"]);
    let Some(ProviderError::Protocol { excerpt, .. }) = error else { panic!("{error:?}") };
    assert!(excerpt.starts_with(r#"{"type":"content_block_delta","index":0"#), "{excerpt}");
}

#[tokio::test]
async fn a_stream_that_ends_before_message_stop_is_a_network_error() {
    let (chunks, error) = stream_fixture("truncated_stream.sse").await;
    assert!(chunks.contains(&StreamChunk::ToolCallDelta {
        id: "toolu_01VBJJyXx4hRdrLKcuvkLdCf".into(),
        delta: r#"{"location": "Par"#.into()
    }));
    assert!(
        matches!(&error, Some(ProviderError::Network { message }) if message.contains("message_stop")),
        "{error:?}"
    );
}

/// The first four events of the text stream: message_start, the text block, a ping, "Hello".
fn first_events() -> String {
    fixture(DIR, "text_stream.sse").split_inclusive("\n\n").take(4).collect()
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_a_network_error() {
    let raw = raw_sse_server(&first_events(), After::Close).await;
    let (chunks, error) = stream_all(&provider(&raw.url), simple_request("x")).await;
    assert_eq!(texts(&chunks), ["Hello"]);
    assert!(matches!(error, Some(ProviderError::Network { .. })), "{error:?}");
    assert!(error.unwrap().is_retryable());
}

#[tokio::test]
async fn an_idle_stream_hits_the_idle_timeout_and_dropping_it_closes_the_connection() {
    let raw = raw_sse_server(&first_events(), After::Hang).await;
    let started = std::time::Instant::now();
    let (chunks, error) = stream_all(&provider(&raw.url), simple_request("x")).await;
    assert_eq!(texts(&chunks), ["Hello"]);
    assert!(
        matches!(&error, Some(ProviderError::Timeout { message }) if message.contains("idle")),
        "{error:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(500));
    tokio::time::timeout(Duration::from_secs(5), raw.client_closed).await.unwrap().unwrap();
}

#[tokio::test]
async fn the_constructors_use_anthropic_s_url_and_key_variable() {
    let config = Anthropic::config("claude-haiku-4-5");
    assert_eq!(config.url(), BASE_URL);
    assert_eq!(config.model(), "claude-haiku-4-5");
    let keyed =
        Anthropic::with_config(config.api_key("sk-ant-secret"), Anthropic::messages("x")).unwrap();
    assert_eq!(keyed.base_url(), BASE_URL);
    assert_eq!(keyed.format().model(), "claude-haiku-4-5");
    assert_eq!(keyed.name(), "claude-haiku-4-5");
    assert!(!format!("{keyed:?}").contains("sk-ant-secret"), "the key is never printed");
    // Without a key in the environment, `provider()` refuses to build.
    if std::env::var(API_KEY_ENV).is_err() {
        assert_eq!(
            Anthropic::provider("claude-haiku-4-5").unwrap_err(),
            HttpConfigError::MissingApiKey { env: API_KEY_ENV.into() }
        );
    }
}

#[tokio::test]
async fn a_paused_turn_goes_back_as_it_came_and_the_model_goes_on() {
    // `stop_reason: "pause_turn"` (the documented shape, `pause_turn_stream.sse`): the API
    // paused a long server-tool turn. The next request sends the paused assistant turn back
    // as it came, last, and the model goes on with it; the run does not end on the partial
    // text.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(MESSAGES))
        .respond_with(sse(fixture(DIR, "pause_turn_stream.sse")))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    serve(&server, "text_stream.sse").await;
    let agent = Agent::builder(provider(&server.uri())).build().unwrap();
    let outcome = agent.run("What is the latest agentloop release?").await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(outcome.answer, "Hello, wörld! 👋");
    assert_eq!(outcome.iterations, 2);
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2);
    let messages = sent[1]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{messages:#?}");
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "I'll search for the latest release."},
            {"type": "server_tool_use", "id": "srvtoolu_01PauseSearch", "name": "web_search",
             "input": {"query": "agentloop latest release"}},
        ]})
    );
}

#[tokio::test]
async fn a_turn_paused_again_and_again_stops_at_the_iteration_limit() {
    let server = MockServer::start().await;
    serve(&server, "pause_turn_stream.sse").await;
    let agent = Agent::builder(provider(&server.uri())).max_iterations(3).build().unwrap();
    let outcome = agent.run("Search for ever.").await.unwrap();
    assert!(
        matches!(outcome.stop_reason, StopReason::LimitReached { .. }),
        "{:?}",
        outcome.stop_reason
    );
    // Three iterations, then the wind-down call.
    assert_eq!(bodies(&server).await.len(), 4);
}
