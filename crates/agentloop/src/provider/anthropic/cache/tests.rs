#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::message::{Message, Part, Reasoning, Role, ToolCall, ToolResult};
use crate::provider::wire::WireFormat;
use crate::provider::{Anthropic, CachePoint, CachePolicy, ModelRequest, ProviderError};
use crate::tool::ToolSpec;
use serde_json::{json, Value};
use std::sync::Arc;

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("the {name} tool"),
        parameters: json!({"type": "object"}),
    }
}

fn call(id: &str) -> Message {
    let call = ToolCall { id: id.into(), name: "search".into(), arguments: "{}".into() };
    Message { role: Role::Assistant, content: vec![Part::ToolCall(call)] }
}

/// A tool loop two iterations in: question, call, result, call, result.
fn tool_loop() -> ModelRequest {
    ModelRequest::new(vec![
        Message::user("find the release date"),
        call("c1"),
        Message::tool_results([ToolResult::ok("c1", "page one")]),
        call("c2"),
        Message::tool_results([ToolResult::ok("c2", "page two")]),
    ])
    .with_instructions("You are a research agent.")
    .with_tools(vec![tool("search"), tool("fetch")])
}

fn encode(format: &Anthropic, request: &ModelRequest) -> Value {
    format.encode(request, false).unwrap().body
}

/// Every path (`system`, `tools/N`, `messages/T/content/B`) that carries a mark.
fn marks(body: &Value) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(system) = body["system"].as_array() {
        for (i, block) in system.iter().enumerate() {
            if block.get("cache_control").is_some() {
                found.push(format!("system/{i}"));
            }
        }
    }
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if tool.get("cache_control").is_some() {
            found.push(format!("tools/{i}"));
        }
    }
    for (t, turn) in body["messages"].as_array().into_iter().flatten().enumerate() {
        for (b, block) in turn["content"].as_array().into_iter().flatten().enumerate() {
            if let Some(control) = block.get("cache_control") {
                assert_eq!(control, &json!({"type": "ephemeral"}));
                found.push(format!("messages/{t}/content/{b}"));
            }
        }
    }
    found
}

#[test]
fn auto_marks_the_system_prompt_the_previous_turn_and_the_last_message() {
    let body = encode(&Anthropic::messages("m"), &tool_loop());
    // The system prompt becomes one text block carrying the mark.
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "You are a research agent.",
                "cache_control": {"type": "ephemeral"}}])
    );
    // Turns: 0 user, 1 assistant, 2 user (result c1), 3 assistant, 4 user (result c2). The
    // previous call ended at turn 2 (and wrote it); this one reads it and writes turn 4.
    assert_eq!(marks(&body), ["system/0", "messages/2/content/0", "messages/4/content/0"]);
}

#[test]
fn auto_marks_the_tools_when_there_is_no_system_prompt_and_the_next_call_reads_what_this_one_wrote()
{
    let mut request = tool_loop();
    request.instructions = None;
    let first =
        ModelRequest { messages: Arc::new(request.messages[..3].to_vec()), ..request.clone() };
    let format = Anthropic::messages("m");
    let first = encode(&format, &first);
    let second = encode(&format, &request);
    assert_eq!(marks(&first), ["tools/1", "messages/0/content/0", "messages/2/content/0"]);
    assert_eq!(marks(&second), ["tools/1", "messages/2/content/0", "messages/4/content/0"]);
    // The prefix the first call marked last is, block for block, the one the second marks
    // in the middle: an exact cache hit.
    assert_eq!(first["messages"][2], second["messages"][2]);
}

#[test]
fn a_first_call_marks_the_static_prefix_and_the_question() {
    let request = ModelRequest::new(vec![Message::user("hi")]).with_instructions("Be brief.");
    let body = encode(&Anthropic::messages("m"), &request);
    assert_eq!(marks(&body), ["system/0", "messages/0/content/0"]);
}

#[test]
fn off_sends_no_marks_and_keeps_the_system_prompt_a_string() {
    let format = Anthropic::messages("m").with_cache(CachePolicy::off());
    let body = encode(&format, &tool_loop());
    assert!(marks(&body).is_empty());
    assert_eq!(body["system"], json!("You are a research agent."));
    assert!(!body.to_string().contains("cache_control"));
}

#[test]
fn compatible_servers_are_sent_no_marks() {
    // llama.cpp's server and other Messages-compatible servers: no cache_control by default.
    let provider = Anthropic::compatible("http://127.0.0.1:1", "local").unwrap();
    let body = provider.format().encode(&tool_loop(), false).unwrap().body;
    assert!(marks(&body).is_empty());
}

#[test]
fn the_request_policy_wins_over_the_formats() {
    let format = Anthropic::messages("m").with_cache(CachePolicy::off());
    let request = tool_loop().with_cache(CachePolicy::auto());
    assert_eq!(marks(&encode(&format, &request)).len(), 3);
    let format = Anthropic::messages("m");
    let request = tool_loop().with_cache(CachePolicy::off());
    assert!(marks(&encode(&format, &request)).is_empty());
}

#[test]
fn explicit_points_go_where_asked_including_merged_turns() {
    // Message 2 (a tool result) and a user note (message 3) merge into one user turn, where
    // results come first: the point after message 2 marks the result, not the turn's end.
    let request = ModelRequest::new(vec![
        Message::user("q"),
        call("c1"),
        Message::tool_results([ToolResult::ok("c1", "r")]),
        Message::user("also check the changelog"),
    ])
    .with_instructions("sys")
    .with_tools(vec![tool("search")])
    .with_cache(CachePolicy::explicit([
        CachePoint::Tools,
        CachePoint::Message(2),
        CachePoint::Message(0),
        CachePoint::Message(2),
    ]));
    let body = encode(&Anthropic::messages("m"), &request);
    assert_eq!(body["messages"][2]["content"][0]["type"], "tool_result");
    assert_eq!(marks(&body), ["tools/0", "messages/0/content/0", "messages/2/content/0"]);
    // Instructions and the last message.
    let request = request.with_cache(CachePolicy::explicit([
        CachePoint::Instructions,
        CachePoint::LastMessage,
        CachePoint::Message(99),
    ]));
    let body = encode(&Anthropic::messages("m"), &request);
    assert_eq!(marks(&body), ["system/0", "messages/2/content/1"]);
}

#[test]
fn more_points_than_the_api_allows_is_a_clear_error_before_sending() {
    let policy = CachePolicy::explicit([
        CachePoint::Tools,
        CachePoint::Instructions,
        CachePoint::Message(0),
        CachePoint::Message(1),
        CachePoint::LastMessage,
    ]);
    // Even on a conversation where some points would mark nothing: the policy is wrong.
    let request = ModelRequest::new(vec![Message::user("hi")]).with_cache(policy);
    let error = Anthropic::messages("m").encode(&request, true).unwrap_err();
    match &error {
        ProviderError::InvalidRequest { message } => {
            assert!(message.contains("asks for 5 cache breakpoints"), "{message}");
            assert!(message.contains("at most 4"), "{message}");
        }
        other => panic!("not an invalid request: {other:?}"),
    }
    assert!(!error.is_retryable());
}

#[test]
fn a_mark_never_lands_on_a_thinking_block() {
    let thinking = Part::Reasoning(Reasoning {
        text: "let me think".into(),
        opaque: Some(json!({"type": "thinking", "signature": "sig"})),
    });
    let answer = Message {
        role: Role::Assistant,
        content: vec![Part::Text { text: "first".into() }, thinking.clone()],
    };
    let only_thinking = Message { role: Role::Assistant, content: vec![thinking] };
    let request = ModelRequest::new(vec![Message::user("q"), answer])
        .with_cache(CachePolicy::explicit([CachePoint::LastMessage]));
    let body = encode(&Anthropic::messages("m"), &request);
    assert_eq!(body["messages"][1]["content"][1]["type"], "thinking");
    assert_eq!(marks(&body), ["messages/1/content/0"]);
    let request = ModelRequest::new(vec![Message::user("q"), only_thinking])
        .with_cache(CachePolicy::explicit([CachePoint::LastMessage]));
    assert!(marks(&encode(&Anthropic::messages("m"), &request)).is_empty());
}

#[test]
fn a_paused_assistant_turn_goes_back_unmarked() {
    // `pause_turn`: the paused assistant turn is sent back last, as it came.
    let paused = Message {
        role: Role::Assistant,
        content: vec![Part::Text { text: "I'll search.".into() }],
    };
    let request = ModelRequest::new(vec![Message::user("q"), paused]);
    let body = encode(&Anthropic::messages("m"), &request);
    assert_eq!(marks(&body), ["messages/0/content/0"]);
    assert_eq!(body["messages"][1]["content"][0], json!({"type": "text", "text": "I'll search."}));
}
