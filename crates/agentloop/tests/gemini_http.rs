//! The Gemini provider over HTTP, against wiremock servers that play the SSE and JSON fixtures
//! of `tests/fixtures/gemini/` (written to the documented wire format): the request paths
//! (`:streamGenerateContent?alt=sse` and `:generateContent`), the `x-goog-api-key` header, the
//! exact request bodies (insta snapshots), streaming text, whole function calls, thought
//! signatures sent back byte for byte, usage, every error class, broken streams, and the whole
//! agent loop.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_support;

use agentloop::message::{FinishReason, Part, Reasoning, ToolCall, Usage};
use agentloop::prelude::*;
use agentloop::provider::gemini::{API_KEY_ENV, BASE_URL};
use agentloop::provider::Provider;
use agentloop::provider::ProviderError;
use agentloop::provider::StreamChunk;
use agentloop::provider::ToolChoice;
use agentloop::provider::{Gemini, HttpConfig, HttpConfigError, HttpProvider, RetryPolicy};
use http_support::*;
use serde_json::json;
use std::time::Duration;
use wiremock::matchers::{body_string_contains, header, method, path, path_regex, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const DIR: &str = "gemini";
const STREAM: &str = "/v1beta/models/gemini-2.5-flash:streamGenerateContent";
const GENERATE: &str = "/v1beta/models/gemini-2.5-flash:generateContent";

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
    // A leading `models/` is accepted.
    Gemini::config("models/gemini-2.5-flash")
        .base_url(base)
        .api_key("AIza-test-key")
        .stream_idle_timeout(Duration::from_millis(500))
}

fn provider(base: &str) -> HttpProvider<Gemini> {
    Gemini::with_config(config(base), Gemini::new("gemini-2.5-flash")).unwrap()
}

async fn serve(server: &MockServer, fixture_name: &str) {
    Mock::given(method("POST"))
        .and(path(STREAM))
        .and(query_param("alt", "sse"))
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
        .and(path(STREAM))
        .and(query_param("alt", "sse"))
        .and(header("x-goog-api-key", "AIza-test-key"))
        .and(header("accept", "text/event-stream"))
        .and(header("content-type", "application/json"))
        .respond_with(sse(fixture(DIR, "text_stream.sse")))
        .mount(&server)
        .await;
    let mut request = simple_request("Say a pangram.");
    request.temperature = Some(0.7);
    request.max_tokens = Some(100);
    let (chunks, error) = stream_all(&provider(&server.uri()), request).await;
    assert_eq!(error, None);
    assert_eq!(texts(&chunks), ["The quick", " brown fox jumps over the lazy dög 🦊", "."]);
    assert_eq!(chunks.last(), Some(&StreamChunk::Finish { reason: FinishReason::Stop }));
    let response = assemble(&chunks);
    assert_eq!(
        response.usage,
        Usage { input: 8, output: 12, cached_input: 4, reasoning: 0, cache_write_input: 0 }
    );
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests[0].url.query(), Some("alt=sse"), "the key is not in the URL");
    assert!(requests[0].headers.get("authorization").is_none());
    insta::assert_json_snapshot!("gemini_stream_request", bodies(&server).await[0]);
}

#[tokio::test]
async fn complete_posts_to_generate_content_and_decodes_the_body() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(GENERATE))
        .and(header("x-goog-api-key", "AIza-test-key"))
        .and(header("accept", "application/json"))
        .respond_with(json_response(200, fixture(DIR, "response_function_call.json")))
        .mount(&server)
        .await;
    let mut request = simple_request("Weather and time in Tokyo?");
    request.tool_choice = ToolChoice::Named("add".into());
    let response = provider(&server.uri()).complete(request).await.unwrap();
    assert_eq!(
        response.message.content,
        vec![
            Part::Reasoning(Reasoning { text: "**Planning the lookup**".into(), opaque: None }),
            Part::Reasoning(Reasoning {
                text: String::new(),
                opaque: Some(json!({"thoughtSignature": "CrsBAdHtim+whole/sig=="})),
            }),
            Part::ToolCall(ToolCall {
                id: "gemini_wHoLeReSpOnSe-1_x_0".into(),
                name: "get_weather".into(),
                arguments: r#"{"location":"Tokyo"}"#.into(),
            }),
            Part::ToolCall(ToolCall {
                id: "fc-issued-by-gemini-7".into(),
                name: "get_time".into(),
                arguments: "{}".into(),
            }),
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Usage { input: 1210, output: 120, cached_input: 1024, reasoning: 80, cache_write_input: 0 }
    );
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests[0].url.query(), None);
    insta::assert_json_snapshot!("gemini_complete_request", bodies(&server).await[0]);

    let text = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(GENERATE))
        .respond_with(json_response(200, fixture(DIR, "response_text.json")))
        .mount(&text)
        .await;
    let response = provider(&text.uri()).complete(simple_request("Hi")).await.unwrap();
    assert_eq!(response.message.text(), "Hello! How can I help you today?");
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(
        response.usage,
        Usage { input: 2, output: 9, cached_input: 0, reasoning: 0, cache_write_input: 0 }
    );
}

#[tokio::test]
async fn one_tool_call_streams_as_a_whole_part() {
    let (chunks, error) = stream_fixture("tool_call_stream.sse").await;
    assert_eq!(error, None);
    let id = "gemini_GFyKaOHqEauPz7IPxfDc4Qs_0";
    assert!(
        chunks.contains(&StreamChunk::ToolCallStart { id: id.into(), name: "get_weather".into() })
    );
    assert!(chunks.contains(&StreamChunk::ToolCallEnd { id: id.into() }));
    let response = assemble(&chunks);
    let call = response.message.tool_calls().next().unwrap();
    assert_eq!(call.arguments, r#"{"location":"Paris","unit":"celsius"}"#);
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Usage { input: 72, output: 70, cached_input: 0, reasoning: 52, cache_write_input: 0 }
    );
}

#[tokio::test]
async fn parallel_tool_calls_stream_over_several_chunks() {
    let (chunks, error) = stream_fixture("parallel_tools_stream.sse").await;
    assert_eq!(error, None);
    let response = assemble(&chunks);
    assert_eq!(response.message.text(), "Let me check both.");
    let calls: Vec<(&str, &str, &str)> = response
        .message
        .tool_calls()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("gemini_Zx3UaLi9Bv-xkdUP7ZmO8Ac_0", "get_weather", r#"{"location":"Paris"}"#),
            ("gemini_Zx3UaLi9Bv-xkdUP7ZmO8Ac_1", "get_time", r#"{"timezone":"Europe/Paris"}"#),
            ("gemini_Zx3UaLi9Bv-xkdUP7ZmO8Ac_2", "list_alarms", "{}"),
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Usage { input: 110, output: 36, cached_input: 0, reasoning: 0, cache_write_input: 0 }
    );
}

#[tokio::test]
async fn a_blocked_prompt_finishes_with_content_filter() {
    let (chunks, error) = stream_fixture("blocked_prompt.sse").await;
    assert_eq!(error, None);
    assert_eq!(chunks.last(), Some(&StreamChunk::Finish { reason: FinishReason::ContentFilter }));
}

#[tokio::test]
async fn the_agent_loop_runs_a_tool_and_sends_its_result_back() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(STREAM))
        .and(body_string_contains(r#""functionResponse""#))
        .respond_with(sse(fixture(DIR, "text_stream.sse")))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(STREAM))
        .respond_with(sse(fixture(DIR, "tool_call_stream.sse")))
        .with_priority(5)
        .mount(&server)
        .await;
    let agent = Agent::builder(provider(&server.uri()))
        .instructions("Use tools.")
        .tool(GetWeather)
        .build()
        .unwrap();
    let outcome = agent.run("Weather in Paris?").await.unwrap();
    assert_eq!(outcome.answer, "The quick brown fox jumps over the lazy dög 🦊.");
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(outcome.iterations, 2);
    assert_eq!(outcome.usage.input, 72 + 8);
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2);
    // The call goes back with its thought signature, and our tool's result answers it by name
    // (the made-up id is not sent).
    assert_eq!(
        sent[1]["contents"][1],
        json!({"role": "model", "parts": [{
            "functionCall": {"name": "get_weather", "args": {"location": "Paris", "unit": "celsius"}},
            "thoughtSignature": "CiwBVKhc7ohiDX0Ypn1+3mG3fzU8ZXMn8AHsJ0aWQ9DKb+Ekg==",
        }]})
    );
    assert_eq!(
        sent[1]["contents"][2],
        json!({"role": "user", "parts": [{"functionResponse": {
            "name": "get_weather",
            "response": {"output": "Paris: 18 degrees celsius"},
        }}]})
    );
    insta::assert_json_snapshot!("gemini_tool_round_trip_second_request", sent[1]);
}

#[tokio::test]
async fn thought_signatures_go_back_byte_for_byte() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_string_contains(r#""functionResponse""#))
        .respond_with(sse(fixture(DIR, "text_stream.sse")))
        .with_priority(1)
        .mount(&server)
        .await;
    serve(&server, "thinking_stream.sse").await;
    let provider =
        Gemini::with_config(config(&server.uri()), Gemini::new("ignored").with_thoughts(true))
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
        "**Working out the product**\n\nI need 27 times 453. That is 12231; I should confirm with the tool."
    );
    assert_eq!(
        events.last().and_then(Event::outcome).unwrap().answer,
        "The quick brown fox jumps over the lazy dög 🦊."
    );

    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].url.path(), STREAM, "the configuration's model is in the path");
    let raw = String::from_utf8(requests[1].body.clone()).unwrap();
    assert!(raw.contains(r#""thoughtSignature":"EqoBCqcBAdHtim9+sig/one==""#), "{raw}");
    assert!(raw.contains(r#""thoughtSignature":"EqoBCqcBAdHtim9+sig/two==""#), "{raw}");
    let sent = bodies(&server).await;
    assert_eq!(sent[0]["generationConfig"]["thinkingConfig"], json!({"includeThoughts": true}));
    let model = &sent[1]["contents"][1]["parts"];
    // Each signature is back on the part it came with; the unsigned thoughts are not sent.
    assert_eq!(
        model[0],
        json!({"text": "Checking with the calculator.", "thoughtSignature": "EqoBCqcBAdHtim9+sig/one=="})
    );
    assert_eq!(model[1]["thoughtSignature"], "EqoBCqcBAdHtim9+sig/two==");
    assert_eq!(model.as_array().unwrap().len(), 2);
    assert_eq!(
        sent[1]["contents"][2]["parts"][0]["functionResponse"]["response"],
        json!({"output": 12231}),
        "our tool ran"
    );
    insta::assert_json_snapshot!("gemini_thinking_round_trip_second_request", sent[1]);
}

#[tokio::test]
async fn every_error_class_is_classified() {
    let policy = RetryPolicy::default().without_jitter();
    let both = || {
        path_regex(r"^/v1beta/models/gemini-2\.5-flash:(streamGenerateContent|generateContent)$")
    };
    let error = |status: u16, name: &str| {
        let response = json_response(status, fixture(DIR, name));
        async move { error_for_matching(&provider, both(), response).await }
    };

    let bad_key = error(400, "error_api_key.json").await;
    assert_eq!(
        bad_key,
        ProviderError::Auth {
            status: 400,
            message: "API key not valid. Please pass a valid API key.".into()
        }
    );
    assert_eq!(policy.next_delay(1, &bad_key), None);
    let unauthenticated = error(401, "error_unauthenticated.json").await;
    assert!(
        matches!(unauthenticated, ProviderError::Auth { status: 401, .. }),
        "{unauthenticated:?}"
    );
    let permission = error(403, "error_permission.json").await;
    assert!(matches!(permission, ProviderError::Auth { status: 403, .. }), "{permission:?}");

    let invalid = error(400, "error_invalid_argument.json").await;
    assert_eq!(
        invalid,
        ProviderError::InvalidRequest {
            message: "* GenerateContentRequest.contents: contents is not specified\n".into()
        }
    );
    assert_eq!(policy.next_delay(1, &invalid), None);
    let not_found = error(404, "error_not_found.json").await;
    assert!(matches!(not_found, ProviderError::InvalidRequest { .. }), "{not_found:?}");

    let overflow = error(400, "error_context.json").await;
    assert_eq!(
        overflow,
        ProviderError::ContextLengthExceeded {
            message: "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).".into()
        }
    );
    assert_eq!(policy.next_delay(1, &overflow), None);

    // RESOURCE_EXHAUSTED: the body's RetryInfo says 39 s.
    let exhausted = error(429, "error_rate_limited.json").await;
    assert!(
        matches!(&exhausted, ProviderError::RateLimited { message, .. } if message.starts_with("You exceeded your current quota")),
        "{exhausted:?}"
    );
    assert_eq!(exhausted.retry_after(), Some(Duration::from_secs(39)));
    assert_eq!(policy.next_delay(1, &exhausted), Some(Duration::from_secs(39)));
    assert_eq!(
        RetryPolicy::default()
            .with_max_retry_after(Duration::from_secs(10))
            .next_delay(1, &exhausted),
        None,
        "a policy that waits at most 10 s gives up"
    );
    // A Retry-After header wins over the body.
    let limited = error_for_matching(
        &provider,
        both(),
        json_response(429, fixture(DIR, "error_rate_limited.json"))
            .insert_header("retry-after", "2"),
    )
    .await;
    assert_eq!(limited.retry_after(), Some(Duration::from_secs(2)));
    assert_eq!(policy.next_delay(1, &limited), Some(Duration::from_secs(2)));

    let internal = error(500, "error_internal.json").await;
    assert!(matches!(internal, ProviderError::Server { status: 500, .. }), "{internal:?}");
    assert_eq!(policy.next_delay(1, &internal), Some(Duration::from_secs(1)));
    assert_eq!(policy.next_delay(2, &internal), Some(Duration::from_secs(2)));

    let unavailable = error(503, "error_unavailable.json").await;
    assert_eq!(
        unavailable,
        ProviderError::Overloaded {
            message: "The model is overloaded. Please try again later.".into()
        }
    );
    assert_eq!(policy.next_delay(3, &unavailable), Some(Duration::from_secs(4)));
    let array = error(503, "error_array.json").await;
    assert_eq!(
        array,
        ProviderError::Overloaded { message: "The service is currently unavailable.".into() }
    );

    let deadline = error(504, "error_deadline.json").await;
    assert!(matches!(deadline, ProviderError::Timeout { .. }), "{deadline:?}");
    assert!(deadline.is_retryable());

    let gateway = error_for_matching(
        &provider,
        both(),
        ResponseTemplate::new(502).set_body_string("bad gateway"),
    )
    .await;
    assert_eq!(gateway, ProviderError::Server { status: 502, message: "bad gateway".into() });
    assert!(gateway.is_retryable());
}

#[tokio::test]
async fn an_error_chunk_ends_the_stream_after_what_it_delivered() {
    let (chunks, error) = stream_fixture("error_stream.sse").await;
    assert_eq!(texts(&chunks), ["Once upon"]);
    assert_eq!(
        error,
        Some(ProviderError::Overloaded {
            message: "The model is overloaded. Please try again later.".into()
        })
    );
}

#[tokio::test]
async fn a_malformed_stream_is_a_protocol_error_after_what_it_delivered() {
    let (chunks, error) = stream_fixture("malformed.sse").await;
    assert_eq!(texts(&chunks), ["Hel"]);
    let Some(ProviderError::Protocol { excerpt, .. }) = error else { panic!("{error:?}") };
    assert!(
        excerpt.starts_with(r#"{"candidates": [{"content": {"parts": [{"text": "lo"}]"#),
        "{excerpt}"
    );
}

#[tokio::test]
async fn a_stream_that_ends_without_a_finish_reason_is_a_network_error() {
    let (chunks, error) = stream_fixture("truncated_stream.sse").await;
    assert_eq!(texts(&chunks), ["Once upon a time", ", there was"]);
    assert!(
        matches!(&error, Some(ProviderError::Network { message }) if message.contains("finishReason")),
        "{error:?}"
    );
}

/// The first chunk of the text stream ("The quick"; the fixture's lines end in CRLF).
fn first_event() -> String {
    let events = fixture(DIR, "text_stream.sse");
    assert!(events.contains("\r\n\r\n"));
    events.split_inclusive("\r\n\r\n").take(1).collect()
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_a_network_error() {
    let raw = raw_sse_server(&first_event(), After::Close).await;
    let (chunks, error) = stream_all(&provider(&raw.url), simple_request("x")).await;
    assert_eq!(texts(&chunks), ["The quick"]);
    assert!(matches!(error, Some(ProviderError::Network { .. })), "{error:?}");
    assert!(error.unwrap().is_retryable());
}

#[tokio::test]
async fn an_idle_stream_hits_the_idle_timeout_and_dropping_it_closes_the_connection() {
    let raw = raw_sse_server(&first_event(), After::Hang).await;
    let started = std::time::Instant::now();
    let (chunks, error) = stream_all(&provider(&raw.url), simple_request("x")).await;
    assert_eq!(texts(&chunks), ["The quick"]);
    assert!(
        matches!(&error, Some(ProviderError::Timeout { message }) if message.contains("idle")),
        "{error:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(500));
    tokio::time::timeout(Duration::from_secs(5), raw.client_closed).await.unwrap().unwrap();
}

#[tokio::test]
async fn the_constructors_use_gemini_s_url_and_key_variable() {
    let config = Gemini::config("gemini-2.5-pro");
    assert_eq!(config.url(), BASE_URL);
    let keyed = Gemini::with_config(config.api_key("AIza-secret"), Gemini::new("x")).unwrap();
    assert_eq!(keyed.base_url(), BASE_URL);
    assert_eq!(keyed.format().model(), "gemini-2.5-pro");
    assert!(!format!("{keyed:?}").contains("AIza-secret"), "the key is never printed");
    if std::env::var(API_KEY_ENV).is_err() {
        assert_eq!(
            Gemini::provider("gemini-2.5-pro").unwrap_err(),
            HttpConfigError::MissingApiKey { env: API_KEY_ENV.into() }
        );
    }
}
