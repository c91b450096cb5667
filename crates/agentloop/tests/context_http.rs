//! Context management on the wire: the exact OpenAI chat request bodies after a tool output
//! was trimmed and after a compaction (insta snapshots), against a wiremock server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_support;

use agentloop::context::{CompactionConfig, ContextConfig};
use agentloop::prelude::*;
use agentloop::provider::openai::{Dialect, OpenAi, OpenAiChat};
use agentloop::provider::{HttpConfig, HttpProvider};
use http_support::*;
use serde_json::json;
use std::collections::VecDeque;
use std::sync::Mutex;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Returns `n` bytes of numbered lines.
#[tool]
async fn big(n: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < n {
        out.push_str(&format!("row {i:05}: value {}\n", i * 7));
        i += 1;
    }
    out.truncate(n);
    out
}

/// Plays SSE bodies in order, one per request.
struct Sequence(Mutex<VecDeque<String>>);

impl Respond for Sequence {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        match self.0.lock().unwrap().pop_front() {
            Some(body) => sse(body),
            None => ResponseTemplate::new(500).set_body_string("no more scripted responses"),
        }
    }
}

fn chunk(delta: serde_json::Value, finish: Option<&str>) -> String {
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    });
    format!("data: {body}\n\n")
}

fn tool_call(id: &str, arguments: serde_json::Value) -> String {
    let call = json!([{"index": 0, "id": id, "type": "function", "function": {"name": "big", "arguments": arguments.to_string()}}]);
    chunk(json!({"role": "assistant", "content": null, "tool_calls": call}), None)
        + &chunk(json!({}), Some("tool_calls"))
        + "data: [DONE]\n\n"
}

fn text(content: &str, finish: &str) -> String {
    chunk(json!({"role": "assistant", "content": content}), None)
        + &chunk(json!({}), Some(finish))
        + "data: [DONE]\n\n"
}

async fn server(bodies: Vec<String>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Sequence(Mutex::new(bodies.into())))
        .mount(&server)
        .await;
    server
}

fn provider(base: &str) -> HttpProvider<OpenAiChat> {
    OpenAi::chat_with(
        HttpConfig::new(format!("{base}/v1"), "gpt-4.1").api_key("sk-test"),
        Dialect::openai(),
    )
    .unwrap()
}

#[tokio::test]
async fn the_request_after_a_trimmed_output_carries_the_excerpt_and_the_paging_tool() {
    let server = server(vec![
        tool_call("call_big", json!({"n": 20000})),
        text("The table has 20000 bytes.", "stop"),
    ])
    .await;
    let agent = Agent::builder(provider(&server.uri()))
        .instructions("Use tools.")
        .tool(Big)
        .build()
        .unwrap();
    let outcome = agent.run("How big is the table?").await.unwrap();
    assert_eq!(outcome.answer, "The table has 20000 bytes.");
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2);
    let tool_message = &sent[1]["messages"][3];
    assert_eq!(tool_message["role"], "tool");
    assert!(tool_message["content"]
        .as_str()
        .unwrap()
        .starts_with("[This output was trimmed: 20000 bytes"));
    insta::assert_json_snapshot!("request_after_trimming", sent[1]);
}

#[tokio::test]
async fn the_requests_of_a_forced_compaction() {
    let server = server(vec![
        tool_call("call_1", json!({"n": 300})),
        tool_call("call_2", json!({"n": 300})),
        text("The first rows are", "length"),
        text("The user asked for two tables; both were read (300 bytes each).", "stop"),
        text("Both tables are read.", "stop"),
    ])
    .await;
    let context = ContextConfig {
        compaction: CompactionConfig { keep_recent_messages: 2, ..CompactionConfig::default() },
        ..ContextConfig::default()
    };
    let agent = Agent::builder(provider(&server.uri()))
        .instructions("Use tools.")
        .tool(Big)
        .context(context)
        .build()
        .unwrap();
    let events: Vec<Event> =
        futures::StreamExt::collect(agent.run_stream("Read two tables.")).await;
    let outcome = events.last().and_then(Event::outcome).unwrap();
    assert_eq!(outcome.answer, "Both tables are read.");
    assert!(events.iter().any(|e| matches!(e, Event::CompactionCompleted { cut: 3, .. })));
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 5);
    // The summarisation call: no tools, the history before the cut, the prompt.
    assert!(sent[3].get("tools").is_none());
    insta::assert_json_snapshot!("compaction_request", sent[3]);
    // The same request again, now with the summary in place of the compacted history.
    insta::assert_json_snapshot!("request_after_compaction", sent[4]);
}
