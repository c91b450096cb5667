//! Nothing silently dropped, on real recordings (vercel/ai's fixtures, recorded from the providers'
//! APIs, read from `../shared/fixtures/recorded/corpus/`; its `INDEX.tsv` gives the sources and
//! commits): server-side tools' calls and results and compaction items become `Part::Opaque` parts,
//! reported as `opaque_content` events, and go back verbatim to the same API on the next turn;
//! texts of several messages (Responses `phase`: commentary, then the final answer) stay apart.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_support;
mod shared_fixtures;

use agentloop::event::Event;
use agentloop::message::{Message, Opaque, Part};
use agentloop::prelude::*;
use agentloop::provider::anthropic::Anthropic;
use agentloop::provider::openai::{Compat, Dialect, OpenAi};
use agentloop::provider::openai_responses::OpenAiResponses;
use agentloop::provider::wire::WireFormat;
use agentloop::provider::{ModelRequest, ModelResponse, StreamChunk};
use futures::StreamExt;
use http_support::*;
use serde_json::Value;
use shared_fixtures::recorded;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer};

const DIR: &str = "corpus";

/// A server that plays a recorded stream to every request at `api`.
async fn serve(api: &str, file: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(api))
        .respond_with(sse(as_sse(&recorded(DIR, file))))
        .mount(&server)
        .await;
    server
}

/// The response a provider makes of a recorded stream.
async fn replayed<P: Provider>(
    api: &str,
    file: &str,
    provider: impl Fn(&str) -> P,
) -> ModelResponse {
    let server = serve(api, file).await;
    let (chunks, error) = stream_all(&provider(&server.uri()), simple_request("Go on.")).await;
    assert_eq!(error, None, "{file}");
    assemble(&chunks)
}

fn responses(base: &str) -> impl Provider {
    let compat = Compat::openai().base_url(format!("{base}/v1")).api_key("k");
    OpenAi::responses_compatible(compat, "gpt-5").unwrap()
}

fn anthropic(base: &str) -> impl Provider {
    let config = Anthropic::config("claude-sonnet-4-5").base_url(base).api_key("k");
    Anthropic::with_config(config, Anthropic::messages("claude-sonnet-4-5")).unwrap()
}

fn opaque(response: &ModelResponse) -> Vec<&Opaque> {
    response
        .message
        .content
        .iter()
        .filter_map(|part| match part {
            Part::Opaque(opaque) => Some(opaque),
            _ => None,
        })
        .collect()
}

/// The next turn's request: the recorded answer in the history, then a new question.
fn next_turn(response: &ModelResponse) -> ModelRequest {
    ModelRequest::new(vec![
        Message::user("Go on."),
        response.message.clone(),
        Message::user("And then?"),
    ])
}

#[tokio::test]
async fn responses_web_search_calls_are_kept_and_sent_back() {
    let response =
        replayed("/v1/responses", "openai__openai-web-search-tool.1.chunks.txt", responses).await;
    let kept = opaque(&response);
    assert!(kept.len() >= 2, "{kept:?}");
    assert!(kept.iter().all(|o| o.provider == "openai-responses" && o.kind == "web_search_call"));
    assert!(kept.iter().all(|o| o.value["status"] == "completed" && o.value["action"].is_object()));
    assert!(!response.message.text().is_empty());
    // Sent back as they came, in their place among the reasoning items.
    let format = OpenAiResponses::new("gpt-5", Dialect::openai());
    let body = format.encode(&next_turn(&response), true).unwrap().body;
    let input = body["input"].as_array().unwrap();
    for item in &kept {
        assert!(input.contains(&item.value), "{} sent back", item.value["id"]);
    }
    // Chat completions cannot take them: left out there.
    let chat = agentloop::provider::openai::OpenAiChat::new("gpt-5", Dialect::openai());
    let body = chat.encode(&next_turn(&response), true).unwrap().body.to_string();
    assert!(!body.contains("web_search_call"));
}

#[tokio::test]
async fn responses_compaction_items_are_kept_and_sent_back() {
    let response =
        replayed("/v1/responses", "openai__openai-compaction.1.chunks.txt", responses).await;
    let kept = opaque(&response);
    let compaction = kept.iter().find(|o| o.kind == "compaction").expect("the compaction item");
    assert!(compaction.value.get("encrypted_content").is_some(), "{}", compaction.value);
    let format = OpenAiResponses::new("gpt-5", Dialect::openai());
    let body = format.encode(&next_turn(&response), true).unwrap().body;
    assert!(body["input"].as_array().unwrap().contains(&compaction.value));
}

#[tokio::test]
async fn responses_commentary_and_final_answer_stay_apart_and_go_back_with_their_phase() {
    let response = replayed("/v1/responses", "openai__openai-phase.1.chunks.txt", responses).await;
    let texts: Vec<&str> = response
        .message
        .content
        .iter()
        .filter_map(|part| match part {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts[0].starts_with("Got it"), "{texts:?}");
    // A new paragraph: the decoder's separator, not the model's.
    assert!(texts[1].starts_with("\n\nHere are a"), "{texts:?}");
    // Each message's phase marker after its text.
    let markers: Vec<&Opaque> = opaque(&response);
    let phases: Vec<&str> = markers.iter().map(|m| m.value["phase"].as_str().unwrap()).collect();
    assert_eq!(phases, ["commentary", "final_answer"]);
    assert!(markers.iter().all(|m| m.kind == "message" && m.value.get("content").is_none()));
    // Sent back as the two messages they were, with phase and id, their texts as the model
    // wrote them.
    let format = OpenAiResponses::new("gpt-5", Dialect::openai());
    let body = format.encode(&next_turn(&response), true).unwrap().body;
    let sent: Vec<&Value> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["role"] == "assistant")
        .collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    for ((item, marker), text) in sent.iter().zip(&markers).zip(["Got it", "Here are a"]) {
        assert_eq!(item["type"], "message");
        assert_eq!(item["phase"], marker.value["phase"]);
        assert_eq!(item["id"], marker.value["id"]);
        let output = item["content"][0]["text"].as_str().unwrap();
        assert!(output.starts_with(text), "{output:?}");
    }
    assert!(sent[0]["id"].as_str().unwrap().starts_with("msg_"));
}

#[tokio::test]
async fn anthropic_server_tool_blocks_are_kept_with_their_streamed_input_and_sent_back() {
    let response =
        replayed("/v1/messages", "anthropic__anthropic-web-search-tool.1.chunks.txt", anthropic)
            .await;
    let kept = opaque(&response);
    let kinds: Vec<&str> = kept.iter().map(|o| o.kind.as_str()).collect();
    assert!(kinds.contains(&"server_tool_use"), "{kinds:?}");
    assert!(kinds.contains(&"web_search_tool_result"), "{kinds:?}");
    let call = kept.iter().find(|o| o.kind == "server_tool_use").unwrap();
    assert!(call.value["input"]["query"].is_string(), "the streamed input: {}", call.value);
    let result = kept.iter().find(|o| o.kind == "web_search_tool_result").unwrap();
    assert!(result.value["content"].is_array(), "{}", result.value);
    let body =
        Anthropic::messages("claude-sonnet-4-5").encode(&next_turn(&response), true).unwrap().body;
    let assistant = &body["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    let content = assistant["content"].as_array().unwrap();
    for block in &kept {
        assert!(content.contains(&block.value), "{} sent back", block.kind);
    }
}

#[tokio::test]
async fn anthropic_compaction_blocks_keep_their_streamed_summary_and_go_back() {
    let response =
        replayed("/v1/messages", "anthropic__anthropic-compaction.1.chunks.txt", anthropic).await;
    let kept = opaque(&response);
    let compaction = kept.iter().find(|o| o.kind == "compaction").expect("the compaction block");
    // The summary arrives as `compaction_delta`s: all of it is in the block.
    let summary = compaction.value["content"].as_str().unwrap_or_default();
    assert!(summary.starts_with("## Summary of Conversation"), "{}", compaction.value);
    assert!(summary.contains("### Pending Response Needed"), "{summary}");
    let body =
        Anthropic::messages("claude-sonnet-4-5").encode(&next_turn(&response), true).unwrap().body;
    let content = body["messages"][1]["content"].as_array().unwrap();
    assert!(content.contains(&compaction.value), "the compaction block goes back whole");
}

#[tokio::test]
async fn anthropic_code_execution_results_are_kept() {
    let response = replayed(
        "/v1/messages",
        "anthropic__anthropic-code-execution-20250825.1.chunks.txt",
        anthropic,
    )
    .await;
    let kinds: Vec<String> = opaque(&response).iter().map(|o| o.kind.clone()).collect();
    assert!(kinds.iter().any(|k| k == "server_tool_use"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k.ends_with("_tool_result")), "{kinds:?}");
}

#[tokio::test]
async fn an_agent_reports_opaque_content_and_keeps_it_in_the_history() {
    let server = serve("/v1/responses", "openai__openai-web-search-tool.1.chunks.txt").await;
    let agent = Agent::builder(responses(&server.uri())).build().unwrap();
    let mut events = agent.run_stream("What happened in San Francisco last week?");
    let mut reported = Vec::new();
    let mut journaled = None;
    while let Some(event) = events.next().await {
        match event {
            Event::OpaqueContent { part } => reported.push(part.kind),
            Event::ModelResponded { message, .. } => journaled = Some(message),
            _ => {}
        }
    }
    assert!(reported.len() >= 2 && reported.iter().all(|k| k == "web_search_call"), "{reported:?}");
    let message = journaled.unwrap();
    let kept = message.content.iter().filter(|p| matches!(p, Part::Opaque(_))).count();
    assert_eq!(kept, reported.len(), "the journaled message holds what was reported");
}

fn citations(response: &ModelResponse) -> Vec<&agentloop::message::Citation> {
    response
        .message
        .content
        .iter()
        .filter_map(|part| match part {
            Part::Citation(citation) => Some(citation),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn anthropic_text_split_around_citations_reads_as_it_was_streamed() {
    // The API sends a text block per cited span: "…at 10 a.m. JST." (cited), " ", "Opened in
    // 2003…" (cited). The answer joins them as the deltas stream them, without a line break
    // inside the sentence (`tests/recorded_corpus.rs` checks the whole response reads alike).
    let server = serve("/v1/messages", "anthropic__anthropic-web-search-tool.1.chunks.txt").await;
    let (chunks, error) = stream_all(&anthropic(&server.uri()), simple_request("Go on.")).await;
    assert_eq!(error, None);
    let streamed: String = chunks
        .iter()
        .filter_map(|chunk| match chunk {
            StreamChunk::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let text = assemble(&chunks).message.text();
    assert_eq!(text, streamed);
    assert!(text.contains("at 10 a.m. JST. Opened in 2003 as Apple's first store"), "{text}");
}

#[tokio::test]
async fn anthropic_citations_are_typed_and_go_back_on_their_text_block() {
    let response =
        replayed("/v1/messages", "anthropic__anthropic-web-search-tool.1.chunks.txt", anthropic)
            .await;
    let found = citations(&response);
    assert!(found.len() >= 2, "{found:?}");
    for citation in &found {
        assert!(citation.url.as_deref().is_some_and(|u| u.starts_with("https://")), "{citation:?}");
        assert!(citation.title.is_some() && citation.cited_text.is_some(), "{citation:?}");
        assert_eq!(citation.value["type"], "web_search_result_location");
    }
    // Each follows the text it belongs to, and goes back in that text block's `citations`.
    let body =
        Anthropic::messages("claude-sonnet-4-5").encode(&next_turn(&response), true).unwrap().body;
    let sent: Vec<Value> = body["messages"][1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "text")
        .flat_map(|b| b["citations"].as_array().cloned().unwrap_or_default())
        .collect();
    let expected: Vec<Value> = found.iter().map(|c| c.value.clone()).collect();
    assert_eq!(sent, expected);
}

#[tokio::test]
async fn responses_url_citations_are_typed_reported_and_sent_back_as_annotations() {
    let response =
        replayed("/v1/responses", "openai__openai-web-search-tool.1.chunks.txt", responses).await;
    let found = citations(&response);
    assert!(!found.is_empty());
    for citation in &found {
        assert_eq!(citation.value["type"], "url_citation");
        assert!(citation.url.is_some() && citation.title.is_some(), "{citation:?}");
        let (start, end) = (citation.start.unwrap(), citation.end.unwrap());
        assert!(start < end, "{citation:?}");
    }
    let format = OpenAiResponses::new("gpt-5", Dialect::openai());
    let body = format.encode(&next_turn(&response), true).unwrap().body;
    let sent: Vec<Value> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "message" && item["role"] == "assistant")
        .flat_map(|m| m["content"][0]["annotations"].as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(sent, found.iter().map(|c| c.value.clone()).collect::<Vec<_>>());

    // Through an agent: reported as they come, and the answer's sources in the outcome.
    let server = serve("/v1/responses", "openai__openai-web-search-tool.1.chunks.txt").await;
    let agent = Agent::builder(responses(&server.uri())).build().unwrap();
    let mut events = agent.run_stream("News?");
    let mut reported = 0;
    let mut outcome = None;
    while let Some(event) = events.next().await {
        match event {
            Event::Citation { .. } => reported += 1,
            Event::RunFinished { outcome: o } => outcome = Some(o),
            _ => {}
        }
    }
    let outcome = outcome.unwrap();
    assert_eq!(reported, found.len());
    assert_eq!(outcome.citations.len(), found.len());
    assert_eq!(outcome.citations[0].url, found[0].url);
}
