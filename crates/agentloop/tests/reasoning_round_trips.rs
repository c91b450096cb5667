//! Reasoning goes back as each API requires, on real recordings (vercel/ai's fixtures, recorded
//! from the providers' APIs, read from `../shared/fixtures/recorded/corpus/`; its `INDEX.tsv` gives
//! the sources and commits): the OpenAI Responses API's encrypted reasoning item
//! (`encrypted_content`) through a real four-request tool conversation (OpenAI's and Azure's
//! recordings of it), Gemini's `thoughtSignature` on the function call it came with, and
//! Anthropic's signed `thinking` block. DeepSeek's `reasoning_content` is tested in `recorded.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_support;
mod shared_fixtures;

use agentloop::message::{Message, Part};
use agentloop::prelude::*;
use agentloop::provider::anthropic::Anthropic;
use agentloop::provider::gemini::Gemini;
use agentloop::provider::http::HttpConfig;
use agentloop::provider::openai::{Dialect, OpenAi};
use agentloop::provider::ModelRequest;
use http_support::*;
use serde_json::{json, Value};
use shared_fixtures::recorded;
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer};

const DIR: &str = "corpus";

/// Runs an arithmetic operation.
#[tool]
async fn calculator(a: i64, b: i64, op: String) -> Result<i64, String> {
    match op.as_str() {
        "add" => a.checked_add(b).ok_or_else(|| "overflow".into()),
        "multiply" => a.checked_mul(b).ok_or_else(|| "overflow".into()),
        other => Err(format!("unknown operation {other}")),
    }
}

/// The streams of a recording that holds several requests' responses one after the other,
/// split where each response ends.
fn responses_of(file: &str) -> Vec<String> {
    let mut streams = vec![String::new()];
    for line in recorded(DIR, file).lines().filter(|l| !l.trim().is_empty()) {
        streams.last_mut().unwrap().push_str(&format!("{line}\n"));
        if line.contains(r#""type":"response.completed""#) {
            streams.push(String::new());
        }
    }
    streams.retain(|s| !s.is_empty());
    streams
}

/// A server that answers its n-th request with the n-th stream.
async fn serve_in_turn(server: &MockServer, api: &str, streams: &[String]) {
    for stream in streams {
        Mock::given(method("POST"))
            .and(path_regex(api))
            .respond_with(sse(as_sse(stream)))
            .up_to_n_times(1)
            .mount(server)
            .await;
    }
}

/// The recorded reasoning items (`output_item.done`), whole.
fn recorded_reasoning_items(stream: &str) -> Vec<Value> {
    stream
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|e| e["type"] == "response.output_item.done" && e["item"]["type"] == "reasoning")
        .map(|e| e["item"].clone())
        .collect()
}

async fn responses_reasoning_goes_back_through_the_whole_tool_conversation(file: &str) {
    let streams = responses_of(file);
    assert_eq!(streams.len(), 4, "{file}: four requests' responses");
    let server = MockServer::start().await;
    serve_in_turn(&server, "^/v1/responses$", &streams).await;
    let config = HttpConfig::new(format!("{}/v1", server.uri()), "gpt-5").api_key("sk-test");
    let provider = OpenAi::responses_with(config, Dialect::openai()).unwrap();
    let agent = Agent::builder(provider).tool(Calculator).build().unwrap();

    let outcome = agent.run("What is (12 + 7) * 3 * 10? Use the calculator.").await.unwrap();
    // The model's three calls ran (12 + 7 = 19, 19 * 3 = 57, 57 * 10 = 570), then it answered.
    assert_eq!(outcome.answer, "The final result is **570**.");
    assert_eq!(outcome.iterations, 4);

    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 4);
    // Encrypted reasoning is asked for, and nothing is stored at OpenAI.
    assert_eq!(sent[0]["store"], false);
    assert!(sent[0]["include"].to_string().contains("reasoning.encrypted_content"));
    let reasoning = recorded_reasoning_items(&streams[0]);
    assert_eq!(reasoning.len(), 1);
    assert!(reasoning[0]["encrypted_content"].as_str().is_some_and(|c| c.len() > 100));
    // Every later request carries the first turn's reasoning item as it came (its id, its
    // summary and its encrypted content), right before the call it led to, then that call's
    // output.
    for (n, body) in sent.iter().enumerate().skip(1) {
        let input = body["input"].as_array().unwrap();
        let at = input
            .iter()
            .position(|item| item["type"] == "reasoning")
            .unwrap_or_else(|| panic!("request {n} has no reasoning item: {body}"));
        for key in ["id", "encrypted_content", "summary"] {
            assert_eq!(input[at][key], reasoning[0][key], "request {n}: {key}");
        }
        assert_eq!(input[at + 1]["type"], "function_call", "request {n}");
        assert_eq!(input[at + 1]["arguments"], r#"{"a":12,"b":7,"op":"add"}"#);
        assert_eq!(input[at + 2]["type"], "function_call_output");
        assert_eq!(input[at + 2]["call_id"], input[at + 1]["call_id"]);
        assert_eq!(input[at + 2]["output"], "19");
    }
}

#[tokio::test]
async fn openai_encrypted_reasoning_goes_back_through_a_recorded_tool_conversation() {
    responses_reasoning_goes_back_through_the_whole_tool_conversation(
        "openai__openai-reasoning-encrypted-content.1.chunks.txt",
    )
    .await;
}

#[tokio::test]
async fn azure_encrypted_reasoning_goes_back_through_a_recorded_tool_conversation() {
    responses_reasoning_goes_back_through_the_whole_tool_conversation(
        "azure__azure-reasoning-encrypted-content.1.chunks.txt",
    )
    .await;
}

/// Looks up the weather.
#[tool]
async fn weather(location: String) -> String {
    format!("{location}: foggy, 14 °C")
}

#[tokio::test]
async fn gemini_thought_signatures_go_back_on_their_function_call() {
    // Gemini 3 signs its function call (`thoughtSignature` on the part); the request with the
    // call's result must send the call back with that signature, on the same part (the API
    // answers 400 without it).
    let first = recorded(DIR, "google__google-tool-call-gemini3.chunks.txt");
    let first_chunk: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    let recorded_part = first_chunk["candidates"][0]["content"]["parts"][0].clone();
    let signature = recorded_part["thoughtSignature"].as_str().unwrap().to_owned();
    let server = MockServer::start().await;
    let streams = [first, recorded(DIR, "google__google-text.chunks.txt")];
    serve_in_turn(&server, ":streamGenerateContent$", &streams).await;
    let config = Gemini::config("gemini-3-pro-preview").base_url(server.uri()).api_key("AIza-k");
    let provider = Gemini::with_config(config, Gemini::new("gemini-3-pro-preview")).unwrap();
    let agent = Agent::builder(provider).tool(Weather).build().unwrap();

    let outcome = agent.run("Weather in San Francisco?").await.unwrap();
    assert!(outcome.answer.starts_with("There are **3**"), "{}", outcome.answer);
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2);
    let contents = sent[1]["contents"].as_array().unwrap();
    let model = contents.iter().find(|c| c["role"] == "model").expect("the model's turn");
    let call = model["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p.get("functionCall").is_some())
        .expect("the function call goes back");
    assert_eq!(call["thoughtSignature"], signature.as_str());
    assert_eq!(call["functionCall"]["name"], recorded_part["functionCall"]["name"]);
    assert_eq!(call["functionCall"]["args"], recorded_part["functionCall"]["args"]);
    let answer = contents.last().unwrap();
    assert_eq!(
        answer["parts"][0]["functionResponse"]["name"], "weather",
        "the result follows: {answer}"
    );
}

#[tokio::test]
async fn anthropic_signed_thinking_goes_back_whole_on_the_next_turn() {
    // A real extended-thinking answer: a `thinking` block with its signature, then the text.
    // The next request sends the block back exactly (text and signature): the API checks
    // the signature, and needs the block in a tool loop.
    let file = "anthropic__anthropic-clear-thinking.1.chunks.txt";
    let events: Vec<Value> = recorded(DIR, file)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let thinking: String = events.iter().filter_map(|e| e["delta"]["thinking"].as_str()).collect();
    let signature: String =
        events.iter().filter_map(|e| e["delta"]["signature"].as_str()).collect();
    assert!(!thinking.is_empty() && signature.len() > 100);
    let server = MockServer::start().await;
    let streams = [recorded(DIR, file), recorded(DIR, "anthropic__anthropic-text.chunks.txt")];
    serve_in_turn(&server, "^/v1/messages$", &streams).await;
    let config = Anthropic::config("claude-sonnet-4-5").base_url(server.uri()).api_key("k");
    let model = Anthropic::messages("claude-sonnet-4-5").with_thinking(2048);
    let provider = Anthropic::with_config(config, model).unwrap();

    let (chunks, error) =
        stream_all(&provider, ModelRequest::new(vec![Message::user("925/5?")])).await;
    assert_eq!(error, None);
    let first = assemble(&chunks);
    assert!(matches!(first.message.content.first(), Some(Part::Reasoning(_))));
    assert_eq!(first.message.text(), "925 ÷ 5 = 185");
    let next = ModelRequest::new(vec![
        Message::user("925/5?"),
        first.message.clone(),
        Message::user("And 185 * 5?"),
    ]);
    let (_, error) = stream_all(&provider, next).await;
    assert_eq!(error, None);
    let sent = bodies(&server).await;
    assert_eq!(
        sent[1]["messages"][1]["content"][0],
        json!({"type": "thinking", "thinking": thinking, "signature": signature})
    );
    assert_eq!(sent[1]["messages"][1]["content"][1]["text"], "925 ÷ 5 = 185");
}
