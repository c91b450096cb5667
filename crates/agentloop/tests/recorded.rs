//! Real recorded provider responses (public SDK repositories' fixtures, recorded from the
//! providers' APIs; each file's source and commit are in `fixtures/recorded/README.md`),
//! replayed through the providers twice: streamed (the recorded chunks, one SSE event each)
//! and whole (`stream: false`, the recorded completion). Both must give the same message,
//! usage and finish reason, and what the recording holds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_support;

use agentloop::message::{FinishReason, Part, Usage};
use agentloop::provider::openai::{Dialect, OpenAi};
use agentloop::provider::{HttpConfig, ModelResponse};
use http_support::*;
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer};

const DIR: &str = "recorded";

/// Recorded chunks, one JSON document a line, as the SSE events they arrived in.
fn as_sse(lines: &str) -> String {
    lines.lines().filter(|l| !l.trim().is_empty()).map(|l| format!("data: {l}\n\n")).collect()
}

/// The OpenAI-compatible chat provider (`dialect`) against a server that plays the recorded
/// stream and the recorded completion: (streamed, whole).
async fn chat_both_ways(
    dialect: Dialect,
    chunks: &str,
    completion: &str,
) -> (ModelResponse, ModelResponse) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_partial_json(serde_json::json!({"stream": true})))
        .respond_with(sse(as_sse(&fixture(DIR, chunks))))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_partial_json(serde_json::json!({"stream": false})))
        .respond_with(json_response(200, fixture(DIR, completion)))
        .mount(&server)
        .await;
    let mut whole = Vec::new();
    for streaming in [true, false] {
        let config = HttpConfig::new(format!("{}/v1", server.uri()), "model").streaming(streaming);
        let provider = OpenAi::chat_with(config, dialect.clone()).unwrap();
        let (chunks, error) = stream_all(&provider, simple_request("What is 2+2?")).await;
        assert_eq!(error, None, "streaming {streaming}");
        whole.push(assemble(&chunks));
    }
    let complete = whole.pop().unwrap();
    (whole.pop().unwrap(), complete)
}

fn reasoning(response: &ModelResponse) -> String {
    response
        .message
        .content
        .iter()
        .filter_map(|p| match p {
            Part::Reasoning(r) => Some(r.text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn magistral_thinking_and_text_parts_stream_and_complete_alike() {
    let (streamed, complete) = chat_both_ways(
        // As `Compat::mistral()` configures it.
        Dialect::compatible().stream_usage(false).tool_choice_required("any"),
        "mistral/magistral-reasoning.chunks.txt",
        "mistral/magistral-reasoning.json",
    )
    .await;
    for response in [&streamed, &complete] {
        assert_eq!(response.message.text(), "2 + 2 = 4");
        assert_eq!(
            reasoning(response),
            "The user is asking for 2+2. This is basic arithmetic. 2+2=4."
        );
        assert_eq!(response.finish_reason, FinishReason::Stop);
        assert_eq!(response.usage, Usage { input: 10, output: 46, cached_input: 0, reasoning: 0 });
        assert_eq!(response.model.as_deref(), Some("magistral-medium-2507"));
        assert_eq!(response.id.as_deref(), Some("a4e29c5b82f94d67b23e108a7c9df6e1"));
    }
    assert_eq!(streamed.message, complete.message);
}
