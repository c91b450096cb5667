#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::{Message, Part, Role, ToolCall, ToolResult};
use crate::provider::{CachePoint, ModelRequest, ProviderError};
use serde_json::json;

#[test]
fn the_model_id_is_percent_encoded_in_the_path() {
    let format = Bedrock::converse("us.anthropic.claude-sonnet-4-5-20250929-v1:0");
    assert_eq!(
        format.path(true),
        "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    );
    assert!(Bedrock::converse("arn:aws:bedrock:us-east-1:1:x/y")
        .path(false)
        .ends_with("%2Fy/converse"));
}

#[test]
fn more_cache_points_than_the_api_allows_is_a_clear_error() {
    let policy = CachePolicy::explicit([
        CachePoint::Tools,
        CachePoint::Instructions,
        CachePoint::Message(0),
        CachePoint::Message(1),
        CachePoint::LastMessage,
    ]);
    let request = ModelRequest::new(vec![Message::user("hi")]).with_cache(policy);
    let error = encode_body(&Bedrock::converse("m"), &request).unwrap_err();
    assert!(
        matches!(&error, ProviderError::InvalidRequest { message } if message.contains("Bedrock allows at most 4")),
        "{error:?}"
    );
}

#[test]
fn a_tool_loop_gets_cache_points_after_the_system_prompt_and_the_last_two_user_turns() {
    let call =
        ToolCall { id: "t1".into(), name: "search".into(), arguments: r#"{"q":"x"}"#.into() };
    let request = ModelRequest::new(vec![
        Message::user("q"),
        Message { role: Role::Assistant, content: vec![Part::ToolCall(call)] },
        Message::tool_results([ToolResult::ok("t1", "found")]),
    ])
    .with_instructions("sys");
    let claude = Bedrock::converse("us.anthropic.claude-sonnet-4-5-20250929-v1:0");
    let body = encode_body(&claude, &request).unwrap();
    assert_eq!(body["system"], json!([{"text": "sys"}, {"cachePoint": {"type": "default"}}]));
    assert_eq!(
        body["messages"][0]["content"],
        json!([{"text": "q"}, {"cachePoint": {"type": "default"}}])
    );
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"toolUse": {"toolUseId": "t1", "name": "search", "input": {"q": "x"}}}])
    );
    assert_eq!(
        body["messages"][2]["content"],
        json!([{"toolResult": {"toolUseId": "t1", "content": [{"text": "found"}]}},
               {"cachePoint": {"type": "default"}}])
    );
    let off =
        encode_body(&Bedrock::converse("m").with_cache(CachePolicy::off()), &request).unwrap();
    assert!(!off.to_string().contains("cachePoint"));
}
