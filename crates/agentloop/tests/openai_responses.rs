//! The OpenAI Responses provider against wiremock servers that play SSE fixtures written to
//! the documented event stream (and recorded from a real llama.cpp server): the exact request
//! bodies (insta snapshots), text, tool calls, reasoning items sent back, usage, finish
//! reasons, every error class, broken streams, and the whole agent loop.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_support;

use agentloop::message::{FinishReason, Part, Reasoning, ToolCall, Usage};
use agentloop::prelude::*;
use agentloop::provider::openai::{Compat, Dialect, OpenAi};
use agentloop::provider::openai_responses::OpenAiResponses;
use agentloop::provider::Provider;
use agentloop::provider::ProviderError;
use agentloop::provider::StreamChunk;
use agentloop::provider::ToolChoice;
use agentloop::provider::{HttpConfig, HttpProvider};
use http_support::*;
use serde_json::json;
use std::time::Duration;
use wiremock::matchers::{body_partial_json, body_string_contains, header, method, path};
use wiremock::{Mock, MockServer};

const DIR: &str = "openai_responses";

/// The response id and model the streamed fixtures report, first of all chunks.
fn info() -> StreamChunk {
    StreamChunk::ResponseInfo {
        id: Some("resp_68a1".into()),
        model: Some("gpt-5-2025-08-07".into()),
    }
}

fn provider(base: &str) -> HttpProvider<OpenAiResponses> {
    let config = HttpConfig::new(format!("{base}/v1"), "gpt-5")
        .api_key("sk-test-key")
        .stream_idle_timeout(Duration::from_millis(500));
    OpenAi::responses_with(config, Dialect::openai()).unwrap()
}

async fn serve(server: &MockServer, fixture_name: &str) {
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(sse(fixture(DIR, fixture_name)))
        .mount(server)
        .await;
}

async fn stream_fixture(fixture_name: &str) -> (Vec<StreamChunk>, Option<ProviderError>) {
    let server = MockServer::start().await;
    serve(&server, fixture_name).await;
    stream_all(&provider(&server.uri()), simple_request("x")).await
}

#[tokio::test]
async fn streams_text_and_usage_and_sends_the_exact_request() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(header("authorization", "Bearer sk-test-key"))
        .and(header("accept", "text/event-stream"))
        .respond_with(sse(fixture(DIR, "text_stream.sse")))
        .mount(&server)
        .await;
    let mut request = simple_request("Capital of France?");
    request.max_tokens = Some(100);
    request.tool_choice = ToolChoice::Named("add".into());
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
    let response = assemble(&chunks);
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(
        response.usage,
        Usage { input: 19, output: 7, cached_input: 3, reasoning: 0, cache_write_input: 0 }
    );
    let sent = bodies(&server).await;
    assert!(sent[0].get("previous_response_id").is_none());
    insta::assert_json_snapshot!("responses_stream_request", sent[0]);
}

#[tokio::test]
async fn complete_posts_without_streaming_and_keeps_the_reasoning_item() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(body_partial_json(json!({"stream": false})))
        .respond_with(json_response(200, fixture(DIR, "tool_call.json")))
        .mount(&server)
        .await;
    let response = provider(&server.uri()).complete(simple_request("Add 1 and 2.")).await.unwrap();
    let Part::Reasoning(Reasoning { text, opaque: Some(item) }) = &response.message.content[0]
    else {
        panic!("{:?}", response.message.content)
    };
    assert_eq!(text, "**Adding**\n\nThe user wants a sum.");
    assert_eq!(item["encrypted_content"], "gAAAAABo-ENCRYPTED-REASONING==");
    assert_eq!(
        response.message.content[1],
        Part::ToolCall(ToolCall {
            id: "call_N1".into(),
            name: "add".into(),
            arguments: r#"{"a":1,"b":2}"#.into()
        })
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Usage { input: 82, output: 18, cached_input: 0, reasoning: 12, cache_write_input: 0 }
    );
    insta::assert_json_snapshot!("responses_complete_request", bodies(&server).await[0]);
}

#[tokio::test]
async fn one_tool_call_streams_in_pieces() {
    let (chunks, error) = stream_fixture("tool_call_stream.sse").await;
    assert_eq!(error, None);
    assert_eq!(chunks[0], info());
    assert_eq!(chunks[1], StreamChunk::ToolCallStart { id: "call_Qx1".into(), name: "add".into() });
    assert_eq!(chunks.iter().filter(|c| matches!(c, StreamChunk::ToolCallDelta { .. })).count(), 8);
    let ends = chunks.iter().filter(|c| matches!(c, StreamChunk::ToolCallEnd { .. })).count();
    assert_eq!(ends, 1, "arguments.done and output_item.done end the call once");
    let response = assemble(&chunks);
    assert_eq!(response.message.tool_calls().next().unwrap().arguments, r#"{"a":1,"b":2}"#);
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn parallel_tool_calls_stream_in_pieces() {
    let (chunks, error) = stream_fixture("parallel_tool_calls_stream.sse").await;
    assert_eq!(error, None);
    let response = assemble(&chunks);
    let calls: Vec<(&str, &str)> =
        response.message.tool_calls().map(|c| (c.id.as_str(), c.arguments.as_str())).collect();
    assert_eq!(calls, [("call_A", r#"{"a":1,"b":2}"#), ("call_B", r#"{"a":3,"b":4}"#)]);
}

#[tokio::test]
async fn the_llama_cpp_recorded_streams_decode() {
    // No `function_call_arguments.done`, deltas keyed by `item_id` only.
    let (chunks, error) = stream_fixture("llama_cpp_tool_call_stream.sse").await;
    assert_eq!(error, None);
    let response = assemble(&chunks);
    let call = response.message.tool_calls().next().unwrap();
    assert_eq!(call.id, "call_0bUuoaBdanPSyXTy2uOFjPEbi1kDF9kb");
    assert_eq!(call.arguments, r#"{"operation": "multiply", "a": 17, "b": 23}"#);
    assert_eq!(
        response.usage,
        Usage { input: 315, output: 43, cached_input: 314, reasoning: 0, cache_write_input: 0 }
    );

    let (chunks, error) = stream_fixture("llama_cpp_text_stream.sse").await;
    assert_eq!(error, None);
    assert!(assemble(&chunks).message.text().starts_with("I'm glad you're enjoying the chat."));

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_response(200, fixture(DIR, "llama_cpp_tool_call.json")))
        .mount(&server)
        .await;
    let response = provider(&server.uri()).complete(simple_request("x")).await.unwrap();
    assert_eq!(response.message.tool_calls().next().unwrap().name, "calculator");
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn the_agent_loop_runs_a_tool_and_sends_its_result_back() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(body_string_contains(r#""type":"function_call_output""#))
        .respond_with(sse(fixture(DIR, "final_answer_stream.sse")))
        .with_priority(1)
        .mount(&server)
        .await;
    serve(&server, "tool_call_stream.sse").await;
    let agent = Agent::builder(provider(&server.uri()))
        .instructions("Use tools.")
        .tool(Add)
        .build()
        .unwrap();
    let outcome = agent.run("What is 1 + 2?").await.unwrap();
    assert_eq!(outcome.answer, "1 + 2 = 3.");
    assert_eq!(outcome.iterations, 2);
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[1]["input"][2],
        json!({"type": "function_call_output", "call_id": "call_Qx1", "output": "3"})
    );
    insta::assert_json_snapshot!("responses_tool_round_trip_second_request", sent[1]);
}

#[tokio::test]
async fn reasoning_items_are_kept_and_sent_back_on_the_next_turn() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_string_contains(r#""type":"function_call_output""#))
        .respond_with(sse(fixture(DIR, "final_answer_stream.sse")))
        .with_priority(1)
        .mount(&server)
        .await;
    serve(&server, "reasoning_tool_call_stream.sse").await;
    let agent = Agent::builder(provider(&server.uri()))
        .instructions("Use tools.")
        .tool(Add)
        .build()
        .unwrap();
    let events: Vec<Event> = futures::StreamExt::collect(agent.run_stream("What is 1 + 2?")).await;
    let reasoning: String = events
        .iter()
        .filter_map(|e| match e {
            Event::ReasoningDelta { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, "**Adding**\n\nThe user wants a sum.");
    assert_eq!(events.last().and_then(Event::outcome).unwrap().answer, "1 + 2 = 3.");
    let sent = bodies(&server).await;
    assert_eq!(sent[1]["input"][1]["encrypted_content"], "gAAAAABo-ENCRYPTED-REASONING==");
    insta::assert_json_snapshot!("responses_reasoning_round_trip_second_request", sent[1]);
}

#[tokio::test]
async fn incomplete_failed_and_error_events_end_the_turn() {
    let (chunks, error) = stream_fixture("incomplete_stream.sse").await;
    assert_eq!(error, None);
    let response = assemble(&chunks);
    assert_eq!(response.finish_reason, FinishReason::Length);
    assert_eq!(response.message.text(), "The capital of");

    let (_, error) = stream_fixture("failed_stream.sse").await;
    assert!(
        matches!(&error, Some(ProviderError::Server { status: 500, message }) if message.starts_with("The server had an error")),
        "{error:?}"
    );
    let (_, error) = stream_fixture("error_event_stream.sse").await;
    assert!(matches!(&error, Some(ProviderError::RateLimited { .. })), "{error:?}");
}

#[tokio::test]
async fn every_error_class_is_classified() {
    // The Responses API answers errors in the same shape as chat completions.
    check_error_classes(provider, "/v1/responses", "openai").await;
    let stateful = error_for(
        &provider,
        "/v1/responses",
        json_response(400, fixture(DIR, "llama_cpp_previous_response_id.json")),
    )
    .await;
    assert_eq!(
        stateful,
        ProviderError::InvalidRequest {
            message: "llama.cpp does not support 'previous_response_id'.".into()
        }
    );
}

#[tokio::test]
async fn a_malformed_stream_is_a_protocol_error_after_what_it_delivered() {
    let (chunks, error) = stream_fixture("malformed.sse").await;
    assert_eq!(chunks, [info(), StreamChunk::TextDelta { text: "Hel".into() }]);
    let Some(ProviderError::Protocol { excerpt, .. }) = error else { panic!("{error:?}") };
    assert!(excerpt.starts_with(r#"{"type":"response.output_text.delta""#), "{excerpt}");
}

fn first_events(count: usize) -> String {
    fixture(DIR, "text_stream.sse").split_inclusive("\n\n").take(count).collect()
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_a_network_error() {
    let raw = raw_sse_server(&first_events(5), After::Close).await;
    let (chunks, error) = stream_all(&provider(&raw.url), simple_request("x")).await;
    assert_eq!(chunks, [info(), StreamChunk::TextDelta { text: "The capital".into() }]);
    assert!(matches!(error, Some(ProviderError::Network { .. })), "{error:?}");
}

#[tokio::test]
async fn an_idle_stream_hits_the_idle_timeout() {
    let raw = raw_sse_server(&first_events(5), After::Hang).await;
    let (chunks, error) = stream_all(&provider(&raw.url), simple_request("x")).await;
    assert_eq!(chunks, [info(), StreamChunk::TextDelta { text: "The capital".into() }]);
    assert!(
        matches!(&error, Some(ProviderError::Timeout { message }) if message.contains("idle")),
        "{error:?}"
    );
    tokio::time::timeout(Duration::from_secs(5), raw.client_closed).await.unwrap().unwrap();
}

#[tokio::test]
async fn the_llama_cpp_preset_sends_a_plain_stateless_request() {
    let server = MockServer::start().await;
    serve(&server, "llama_cpp_tool_call_stream.sse").await;
    let llama = OpenAi::responses_compatible(
        Compat::llama_cpp().base_url(format!("{}/v1", server.uri())),
        "local",
    )
    .unwrap();
    let (_, error) = stream_all(&llama, simple_request("x")).await;
    assert_eq!(error, None);
    insta::assert_json_snapshot!("responses_llama_cpp_request", bodies(&server).await[0]);
}
