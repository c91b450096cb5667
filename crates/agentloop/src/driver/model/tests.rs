#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::{FinishReason, Reasoning, ToolCall, ToolResult, Usage};
use crate::provider::sse::response_chunks;
use crate::provider::ResponseAssembler;
use serde_json::json;

fn call(id: &str, arguments: &str) -> Part {
    Part::ToolCall(ToolCall { id: id.into(), name: "add".into(), arguments: arguments.into() })
}

fn text(text: &str) -> Part {
    Part::Text { text: text.into() }
}

/// What the chunk path makes of a response: its delta events and the reassembled response.
fn through_chunks(response: ModelResponse) -> (Vec<Event>, ModelResponse) {
    let mut assembler = ResponseAssembler::default();
    let mut events = Vec::new();
    for chunk in response_chunks(response) {
        events.extend(delta_event(&chunk));
        assembler.push(chunk).unwrap();
    }
    (events, assembler.finish())
}

#[test]
fn a_whole_response_gives_what_its_chunks_would() {
    let reasoning = |text: &str, opaque: Option<serde_json::Value>| {
        Part::Reasoning(Reasoning { text: text.into(), opaque })
    };
    let contents = vec![
        vec![text("3")],
        vec![call("c1", r#"{"a":1,"b":2}"#)],
        vec![text("let me add"), call("c1", "{}"), call("c2", "")],
        vec![text("a"), text("b"), call("c", "{}"), text("c"), text("")],
        vec![reasoning("think", Some(json!("sig"))), reasoning("", Some(json!(1))), text("x")],
        vec![reasoning("", None), text(""), call("d", "{}"), call("d", "{\"x\":1}")],
        vec![
            text("a"),
            Part::ToolResult(ToolResult::ok("z", "r")),
            text("b"),
            reasoning("r", None),
            reasoning("s", None),
        ],
        vec![],
    ];
    for content in contents {
        for (role, finish_reason) in [
            (Role::Assistant, FinishReason::Stop),
            (Role::User, FinishReason::ToolCalls),
            (Role::Assistant, FinishReason::Other("x".into())),
        ] {
            let response = ModelResponse {
                message: Message { role, content: content.clone() },
                finish_reason,
                usage: Usage { input: 3, output: 2, cached_input: 1, reasoning: 0 },
            };
            let (expected_events, expected) = through_chunks(response.clone());
            let mut events = Vec::new();
            let got = as_streamed(response.clone(), Some(&mut events));
            assert_eq!(got, expected);
            assert_eq!(events, expected_events);
            // Quiet: the same response, no events built.
            assert_eq!(as_streamed(response, None), expected);
        }
    }
}
