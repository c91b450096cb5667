//! Real recorded provider responses (public SDK repositories' fixtures, recorded from the
//! providers' APIs, read from `../shared/fixtures/recorded/` beside the repository; its
//! `README.md` gives each file's source and commit), replayed through the providers twice:
//! streamed (the recorded chunks, one SSE event each) and whole (`stream: false`, the recorded
//! completion). Both must give the same message, usage and finish reason, and what the
//! recording holds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_support;
mod shared_fixtures;

use agentloop::message::{FinishReason, Message, Part, ToolCall, ToolResult, Usage};
use agentloop::provider::anthropic::Anthropic;
use agentloop::provider::gemini::Gemini;
use agentloop::provider::openai::{Compat, Dialect, OpenAi};
use agentloop::provider::{HttpConfig, ModelResponse, Provider, ProviderError, StreamChunk};
use http_support::*;
use shared_fixtures::recorded;
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer};

/// The recorded responses' folder: `../shared/fixtures/recorded/` itself.
const DIR: &str = "";

/// What one request gave: its chunks, and the error that ended it, if any.
type Replayed = (Vec<StreamChunk>, Option<ProviderError>);

/// Serves `api` from a mock server: the recorded stream (`chunks`) to streamed requests and
/// the recorded whole response (`whole`), if any, to the others (every request, without). Asks `provider(base_url,
/// streaming)` once streamed and (with `whole`) once not: the results in that order.
async fn replay<P: Provider>(
    api: &str,
    chunks: &str,
    whole: Option<&str>,
    provider: impl Fn(&str, bool) -> P,
) -> Vec<Replayed> {
    let server = MockServer::start().await;
    let streamed = Mock::given(method("POST")).and(path(api));
    // With a whole response too, streamed requests are told apart by their `stream: true`
    // (Gemini's say it in the URL: it is served streamed only).
    let streamed = match whole {
        Some(_) => streamed.and(body_partial_json(serde_json::json!({"stream": true}))),
        None => streamed,
    };
    streamed
        .respond_with(sse(as_sse(&recorded(DIR, chunks))))
        .with_priority(1)
        .mount(&server)
        .await;
    if let Some(whole) = whole {
        Mock::given(method("POST"))
            .and(path(api))
            .respond_with(json_response(200, recorded(DIR, whole)))
            .with_priority(5)
            .mount(&server)
            .await;
    }
    let mut results = Vec::new();
    let modes: &[bool] = if whole.is_some() { &[true, false] } else { &[true] };
    for &streaming in modes {
        let provider = provider(&server.uri(), streaming);
        results.push(stream_all(&provider, simple_request("Go on.")).await);
    }
    results
}

/// The responses of a replay that must not fail: (streamed, whole).
fn both_ok(mut results: Vec<Replayed>) -> (ModelResponse, ModelResponse) {
    for (n, (_, error)) in results.iter().enumerate() {
        assert_eq!(*error, None, "request {n}");
    }
    let complete = assemble(&results.pop().unwrap().0);
    (assemble(&results.pop().unwrap().0), complete)
}

/// The OpenAI-compatible chat provider (`dialect`) against a server that plays the recorded
/// stream and the recorded completion: (streamed, whole).
async fn chat_both_ways(
    dialect: Dialect,
    chunks: &str,
    completion: &str,
) -> (ModelResponse, ModelResponse) {
    both_ok(
        replay("/v1/chat/completions", chunks, Some(completion), |base, streaming| {
            let config = HttpConfig::new(format!("{base}/v1"), "model").streaming(streaming);
            OpenAi::chat_with(config, dialect.clone()).unwrap()
        })
        .await,
    )
}

fn reasoning(response: &ModelResponse) -> String {
    response.message.reasoning_text()
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
        assert_eq!(
            response.usage,
            Usage { input: 10, output: 46, cached_input: 0, reasoning: 0, cache_write_input: 0 }
        );
        assert_eq!(response.model.as_deref(), Some("magistral-medium-2507"));
        assert_eq!(response.id.as_deref(), Some("a4e29c5b82f94d67b23e108a7c9df6e1"));
    }
    assert_eq!(streamed.message, complete.message);
}

#[tokio::test]
async fn gemini_streamed_function_call_arguments_assemble_into_two_calls() {
    let mut results = replay(
        "/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent",
        "gemini/stream-tool-call-arguments.chunks.txt",
        None,
        |base, _| {
            let config = Gemini::config("gemini-3.1-pro-preview").base_url(base).api_key("k");
            Gemini::with_config(config, Gemini::new("gemini-3.1-pro-preview")).unwrap()
        },
    )
    .await;
    let (chunks, error) = results.pop().unwrap();
    assert_eq!(error, None);
    let response = assemble(&chunks);
    let calls: Vec<&ToolCall> = response
        .message
        .content
        .iter()
        .filter_map(|p| match p {
            Part::ToolCall(call) => Some(call),
            _ => None,
        })
        .collect();
    let named: Vec<(&str, &str)> =
        calls.iter().map(|c| (c.name.as_str(), c.arguments.as_str())).collect();
    assert_eq!(
        named,
        [
            ("getWeather", r#"{"location":"Boston"}"#),
            ("getWeather", r#"{"location":"San Francisco"}"#)
        ]
    );
    assert_ne!(calls[0].id, calls[1].id);
    // The thought signature before the first call is kept (sent back with it).
    let signed = chunks.iter().any(|c| {
        matches!(c, StreamChunk::ReasoningEnd { opaque: Some(o) } if o["thoughtSignature"]
            .as_str()
            .is_some_and(|s| s.starts_with("CiMBjz1rX25K")))
    });
    assert!(signed, "{chunks:?}");
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Usage { input: 26, output: 155, cached_input: 0, reasoning: 132, cache_write_input: 0 }
    );
    assert_eq!(response.model.as_deref(), Some("gemini-3.1-pro-preview"));
}

/// The Anthropic Messages provider against a server that plays a recorded stream and a
/// recorded whole message: (streamed, whole).
async fn anthropic_both_ways(chunks: &str, message: &str) -> (ModelResponse, ModelResponse) {
    both_ok(
        replay("/v1/messages", chunks, Some(message), |base, streaming| {
            let config = Anthropic::config("claude-opus-4-6")
                .base_url(base)
                .api_key("k")
                .streaming(streaming);
            Anthropic::with_config(config, Anthropic::messages("claude-opus-4-6")).unwrap()
        })
        .await,
    )
}

#[tokio::test]
async fn anthropic_usage_with_compaction_is_the_sum_of_its_iterations() {
    // Two recordings (the stream and the whole message are separate requests): each one's
    // usage is the sum of its iterations (the compaction, then the message), not the last
    // iteration's counts the top level reports.
    let (streamed, complete) = anthropic_both_ways(
        "anthropic/anthropic-compaction.1.chunks.txt",
        "anthropic/anthropic-compaction.1.json",
    )
    .await;
    assert!(streamed.message.text().starts_with("Based on the conversation history, you asked"));
    assert_eq!(
        streamed.usage,
        Usage {
            input: 60_385 + 612,
            output: 522 + 2_819,
            cached_input: 0,
            reasoning: 0,
            cache_write_input: 0
        }
    );
    assert_eq!(streamed.finish_reason, FinishReason::Stop);
    assert!(complete.message.text().starts_with("Based on our conversation history, you had"));
    assert_eq!(
        complete.usage,
        Usage {
            input: 60_385 + 682,
            output: 592 + 1_320,
            cached_input: 0,
            reasoning: 0,
            cache_write_input: 0
        }
    );
    assert_eq!(complete.finish_reason, FinishReason::Stop);
}

#[tokio::test]
async fn responses_through_github_copilot_keep_one_text_when_the_item_id_rotates() {
    // Every event of the recording names another item id for the same message (same output
    // index): one text, not one per id.
    let mut results = replay(
        "/v1/responses",
        "openai_responses/github-copilot-id-rotation.1.chunks.txt",
        None,
        |base, _| {
            let config = HttpConfig::new(format!("{base}/v1"), "gpt-5.3-codex");
            OpenAi::responses_with(config, Dialect::openai()).unwrap()
        },
    )
    .await;
    let (chunks, error) = results.pop().unwrap();
    assert_eq!(error, None);
    let response = assemble(&chunks);
    assert_eq!(
        response.message.text(),
        "There are **3** letter **\u{201c}r\u{201d}**s in **\u{201c}strawberry.\u{201d}**\n\n\
         Breakdown: **s t r a w b e r r y**  \nYou can see **r** at positions **3, 8, and 9**."
    );
    assert_eq!(reasoning(&response), "**Counting character occurrences**");
    assert_eq!(response.finish_reason, FinishReason::Stop);
}

#[tokio::test]
async fn deepseek_thinking_mode_gets_its_reasoning_back_within_a_tool_loop() {
    // The first turn is DeepSeek's real answer (reasoning, then a `weather` call); the
    // request that carries the tool's result must send that reasoning back as
    // `reasoning_content` (the API answers 400 without it), and an earlier turn's must not.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse(as_sse(&recorded(DIR, "deepseek/deepseek-tool-call.chunks.txt"))))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse(as_sse(&recorded(DIR, "deepseek/deepseek-text.chunks.txt"))))
        .mount(&server)
        .await;
    let preset = Compat::deepseek().base_url(format!("{}/v1", server.uri())).api_key("k");
    let provider = OpenAi::compatible(preset, "deepseek-reasoner").unwrap();
    let recorded_reasoning = "The user is asking for the weather in San Francisco. I need to use \
        the weather tool to get this information. Let me invoke the weather tool with the \
        location parameter set to \"San Francisco\".";

    let (chunks, error) = stream_all(&provider, simple_request("Weather in San Francisco?")).await;
    assert_eq!(error, None);
    let first = assemble(&chunks);
    assert_eq!(reasoning(&first), recorded_reasoning);
    assert_eq!(first.finish_reason, FinishReason::ToolCalls);
    let call = first.message.tool_calls().next().unwrap().clone();
    assert_eq!(
        (call.name.as_str(), call.arguments.as_str()),
        ("weather", r#"{"location": "San Francisco"}"#)
    );

    // An earlier turn (its reasoning must stay out), then this turn's call and its result.
    let earlier = first.message.clone();
    let earlier_result = Message::tool_results([ToolResult::ok(call.id.clone(), "sunny")]);
    let request = simple_request("Weather in San Francisco?").with_messages(vec![
        Message::user("Weather in Paris?"),
        earlier,
        earlier_result,
        Message::user("And in San Francisco?"),
        first.message.clone(),
        Message::tool_results([ToolResult::ok(call.id.clone(), "foggy, 14 °C")]),
    ]);
    let (_, error) = stream_all(&provider, request).await;
    assert_eq!(error, None);
    let sent = bodies(&server).await;
    let messages = sent[1]["messages"].as_array().unwrap();
    let assistants: Vec<&serde_json::Value> =
        messages.iter().filter(|m| m["role"] == "assistant").collect();
    assert_eq!(assistants.len(), 2, "{messages:#?}");
    assert_eq!(assistants[0].get("reasoning_content"), None, "an earlier turn's reasoning");
    assert_eq!(assistants[1]["reasoning_content"], recorded_reasoning);
    assert_eq!(assistants[1]["tool_calls"][0]["function"]["name"], "weather");
}

#[tokio::test]
async fn responses_items_the_client_must_run_end_the_turn_with_an_error_not_a_stop() {
    // Real responses that ask the client to run a shell command, a local shell command, a
    // patch and a custom (freeform) tool: agentloop runs function tools only, so each one,
    // streamed and whole, is an error that names the item, never an answer that stops.
    for (name, kind) in [
        ("openai-shell-tool.1", "shell_call"),
        ("openai-local-shell-tool.1", "local_shell_call"),
        ("openai-apply-patch-tool.1", "apply_patch_call"),
        ("openai-custom-tool.1", "custom_tool_call` (`write_sql"),
    ] {
        let chunks = format!("openai_responses/{name}.chunks.txt");
        let whole = format!("openai_responses/{name}.json");
        let results = replay("/v1/responses", &chunks, Some(&whole), |base, streaming| {
            let config = HttpConfig::new(format!("{base}/v1"), "gpt-5").streaming(streaming);
            OpenAi::responses_with(config, Dialect::openai()).unwrap()
        })
        .await;
        for ((chunks, error), streaming) in results.into_iter().zip([true, false]) {
            let error =
                error.unwrap_or_else(|| panic!("{name} (streaming {streaming}): {chunks:?}"));
            let message = error.to_string();
            assert!(
                message.contains(&format!("`{kind}`")) && message.contains("does not run"),
                "{name} (streaming {streaming}): {message}"
            );
            assert!(!error.is_retryable(), "{name}");
            assert!(!chunks.iter().any(|c| matches!(c, StreamChunk::Finish { .. })), "{name}");
        }
    }
}

#[tokio::test]
async fn groq_streamed_usage_is_read_from_x_groq_when_the_standard_field_is_absent() {
    // Groq's real stream (`corpus/groq__groq-text`) carries the usage twice in its last chunk:
    // in `x_groq.usage` and in the standard `usage`. Groq sent only the former before; played
    // without the standard field, the usage comes from `x_groq`.
    let recording = recorded("corpus", "groq__groq-text.chunks.txt");
    let mut stripped = 0;
    let lines: Vec<String> = recording
        .lines()
        .map(|line| match serde_json::from_str::<serde_json::Value>(line) {
            Ok(mut chunk) if chunk.get("x_groq").is_some() => {
                stripped += usize::from(chunk.as_object_mut().unwrap().remove("usage").is_some());
                chunk.to_string()
            }
            _ => line.to_owned(),
        })
        .collect();
    assert_eq!(stripped, 1, "the recording's last chunk has both");
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse(as_sse(&lines.join("\n"))))
        .mount(&server)
        .await;
    let preset = Compat::groq().base_url(format!("{}/v1", server.uri())).api_key("k");
    let provider = OpenAi::compatible(preset, "llama-3.3-70b-versatile").unwrap();
    let (chunks, error) = stream_all(&provider, simple_request("Go on.")).await;
    assert_eq!(error, None);
    let response = assemble(&chunks);
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!((response.usage.input, response.usage.output), (45, 662));
}
