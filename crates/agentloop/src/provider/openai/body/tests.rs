#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::super::{Dialect, OpenAiChat};
use crate::message::{MediaSource, Message, Part, Reasoning, Role, ToolCall, ToolResult};
use crate::provider::wire::WireFormat;
use crate::provider::{ModelRequest, ProviderError, ToolChoice};
use crate::tool::ToolSpec;
use serde_json::{json, Value};
use std::sync::Arc;

fn call(id: &str, arguments: &str) -> Part {
    Part::ToolCall(ToolCall { id: id.into(), name: "add".into(), arguments: arguments.into() })
}

/// A conversation with every message shape the chat encoding distinguishes.
fn every_shape() -> Vec<Message> {
    vec![
        Message::system("Be \"careful\".\nAlways."),
        Message::developer("dev note"),
        Message { role: Role::System, content: vec![Part::text("two"), Part::text("texts")] },
        Message::user("plain ünïcödé \u{1F600} text"),
        Message {
            role: Role::User,
            content: vec![
                Part::text("look"),
                Part::Image { source: MediaSource::Url { url: "https://x/y.png".into() } },
                Part::Image {
                    source: MediaSource::Base64 {
                        media_type: "image/png".into(),
                        data: "AAAA".into(),
                    },
                },
                Part::File {
                    source: MediaSource::Base64 {
                        media_type: "application/pdf".into(),
                        data: "JVBE".into(),
                    },
                    filename: Some("a.pdf".into()),
                },
                Part::File {
                    source: MediaSource::Base64 {
                        media_type: "text/plain".into(),
                        data: "aGk=".into(),
                    },
                    filename: None,
                },
            ],
        },
        Message { role: Role::User, content: vec![Part::text("a"), Part::text("b")] },
        Message { role: Role::User, content: vec![] },
        Message::assistant("just text"),
        Message {
            role: Role::Assistant,
            content: vec![call("c1", r#"{"a":1,"b":2}"#), call("c2", "  ")],
        },
        Message {
            role: Role::Assistant,
            content: vec![
                Part::Reasoning(Reasoning { text: "hmm".into(), opaque: Some(json!("sig")) }),
                Part::text("calling"),
                Part::text("twice"),
                call("c3", ""),
            ],
        },
        Message { role: Role::Assistant, content: vec![] },
        Message::tool_results([
            ToolResult::ok("c1", "3"),
            ToolResult::ok("c2", json!({"sum": 3, "note": "ok"})),
            ToolResult::error("c3", "bad \"args\""),
            ToolResult::ok("c5", json!({"q": "a\"b\n\u{fc}\u{1}", "n": [1.5, null]})),
        ]),
        // Tool results in a message of another role still become tool messages.
        Message {
            role: Role::User,
            content: vec![Part::text("and"), Part::ToolResult(ToolResult::ok("c4", json!(7)))],
        },
    ]
}

fn tools() -> Arc<Vec<ToolSpec>> {
    Arc::new(vec![
        ToolSpec {
            name: "add".into(),
            description: "Adds two integers.".into(),
            parameters: json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
        },
        ToolSpec {
            name: "noop".into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        },
    ])
}

fn dialects() -> Vec<Dialect> {
    vec![
        Dialect::openai(),
        Dialect::compatible(),
        Dialect::compatible().developer_role(true).stream_usage(false),
        Dialect::openai().max_tokens_field("a_first_field").tool_choice_required("any"),
        Dialect::openai().max_tokens_field("zz_last_field"),
        Dialect::compatible().reasoning_content_in_tool_loop(true),
        Dialect::compatible().json_schema_output(false),
    ]
}

/// The direct encoding parses to the `Value` encoding, and has its keys in the same order.
fn check(format: &OpenAiChat, request: &ModelRequest, stream: bool) {
    let slow = format.encode(request, stream).unwrap();
    let fast = format.encode_json(request, stream).unwrap();
    assert_eq!(fast.path, slow.path);
    assert_eq!(fast.headers, slow.headers);
    let parsed: Value = serde_json::from_slice(&fast.body).unwrap();
    assert_eq!(parsed, slow.body, "{}", String::from_utf8_lossy(&fast.body));
    assert_eq!(
        String::from_utf8(fast.body).unwrap(),
        crate::canonical::to_string(&slow.body),
        "the same bytes"
    );
}

#[test]
fn the_direct_body_is_the_value_body_for_every_shape_dialect_and_option() {
    let choices =
        [ToolChoice::Auto, ToolChoice::None, ToolChoice::Required, ToolChoice::Named("add".into())];
    for dialect in dialects() {
        let format = OpenAiChat::new("gpt-4.1", dialect);
        for choice in &choices {
            for (instructions, temperature, max_tokens) in [
                (None, None, None),
                (Some("Use tools."), Some(0.7f32), Some(256u32)),
                (Some(""), Some(0.0), None),
            ] {
                let request = ModelRequest {
                    instructions: instructions.map(str::to_owned),
                    messages: Arc::new(every_shape()),
                    tools: tools(),
                    tool_choice: choice.clone(),
                    temperature,
                    max_tokens,
                    ..ModelRequest::default()
                };
                check(&format, &request, false);
                check(&format, &request, true);
            }
        }
        let bare =
            ModelRequest { messages: Arc::new(vec![Message::user("hi")]), ..Default::default() };
        check(&format, &bare, true);
        // With an output schema: strict, not strict (json_object on a server without schemas).
        for schema in [
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
            json!({"type": "object", "properties": {"a": {"type": "string"}}}),
        ] {
            let output = crate::provider::OutputFormat {
                name: "answer".into(),
                description: Some("The answer.".into()),
                schema,
            };
            check(&format, &bare.clone().with_output(output), true);
        }
        check(&format, &ModelRequest::default(), false);
    }
}

#[test]
fn a_long_tool_loop_encodes_the_same() {
    let mut messages = vec![Message::user("go")];
    for i in 0..200 {
        messages.push(Message {
            role: Role::Assistant,
            content: vec![call(&format!("call_{i}"), r#"{"a":1,"b":2}"#)],
        });
        messages.push(Message::tool_results([ToolResult::ok(format!("call_{i}"), "3")]));
    }
    let request =
        ModelRequest { messages: Arc::new(messages), tools: tools(), ..Default::default() };
    check(&OpenAiChat::new("m", Dialect::openai()), &request, false);
}

#[test]
fn a_file_url_is_refused_as_before() {
    let request = ModelRequest {
        messages: Arc::new(vec![Message {
            role: Role::User,
            content: vec![Part::File {
                source: MediaSource::Url { url: "https://x/a.pdf".into() },
                filename: None,
            }],
        }]),
        ..Default::default()
    };
    let format = OpenAiChat::new("m", Dialect::openai());
    let fast = format.encode_json(&request, false).unwrap_err();
    assert!(matches!(fast, ProviderError::InvalidRequest { .. }));
    assert_eq!(fast, format.encode(&request, false).unwrap_err());
}
