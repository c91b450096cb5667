#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use serde_json::json;

#[test]
fn parts_serialize_with_a_type_tag() {
    let message = Message {
        role: Role::Assistant,
        content: vec![
            Part::text("hi"),
            Part::ToolCall(ToolCall {
                id: "c1".into(),
                name: "add".into(),
                arguments: "{\"a\":1}".into(),
            }),
            Part::Reasoning(Reasoning {
                text: "hmm".into(),
                opaque: Some(json!({"signature": "s"})),
            }),
            Part::Image { source: MediaSource::Url { url: "https://example.com/a.png".into() } },
        ],
    };
    let value = serde_json::to_value(&message).unwrap();
    assert_eq!(
        value,
        json!({
            "role": "assistant",
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "tool_call", "id": "c1", "name": "add", "arguments": "{\"a\":1}"},
                {"type": "reasoning", "text": "hmm", "opaque": {"signature": "s"}},
                {"type": "image", "source": {"kind": "url", "url": "https://example.com/a.png"}}
            ]
        })
    );
    assert_eq!(serde_json::from_value::<Message>(value).unwrap(), message);
}

#[test]
fn tool_results_keep_text_and_json_apart() {
    let text = ToolResult::ok("c", "5");
    let data = ToolResult::ok("c", json!({"sum": 5}));
    assert_eq!(
        serde_json::to_value(&text).unwrap(),
        json!({"call_id": "c", "content": {"text": "5"}})
    );
    assert_eq!(
        serde_json::to_value(&data).unwrap(),
        json!({"call_id": "c", "content": {"json": {"sum": 5}}})
    );
    assert_eq!(ToolResultContent::from(json!("x")), ToolResultContent::Text("x".into()));
    let error = ToolResult::error("c", "boom");
    assert!(error.is_error);
    assert_eq!(
        serde_json::from_value::<ToolResult>(serde_json::to_value(&error).unwrap()).unwrap(),
        error
    );
}

#[test]
fn finish_reasons_are_snake_case_strings() {
    for (reason, name) in [
        (FinishReason::Stop, "stop"),
        (FinishReason::ToolCalls, "tool_calls"),
        (FinishReason::Length, "length"),
        (FinishReason::ContentFilter, "content_filter"),
        (FinishReason::Error, "error"),
        (FinishReason::Other("end_turn".into()), "end_turn"),
    ] {
        assert_eq!(serde_json::to_value(&reason).unwrap(), json!(name));
        assert_eq!(serde_json::from_value::<FinishReason>(json!(name)).unwrap(), reason);
    }
}

#[test]
fn message_helpers() {
    let message = Message {
        role: Role::Assistant,
        content: vec![
            Part::text("a"),
            Part::ToolCall(ToolCall { id: "1".into(), name: "t".into(), arguments: String::new() }),
            Part::text("b"),
        ],
    };
    assert_eq!(message.text(), "a\nb");
    assert!(message.has_tool_calls());
    assert_eq!(message.tool_calls().count(), 1);
    assert!(!Message::user("x").has_tool_calls());
}

#[test]
fn usage_adds_and_merges_snapshots() {
    let mut total =
        Usage { input: 1, output: 2, cached_input: 0, reasoning: 1, cache_write_input: 0 };
    total += Usage { input: 10, output: 20, cached_input: 5, reasoning: 0, cache_write_input: 0 };
    assert_eq!(
        total,
        Usage { input: 11, output: 22, cached_input: 5, reasoning: 1, cache_write_input: 0 }
    );
    assert_eq!(total.total(), 33);
    let merged =
        Usage { input: 100, ..Usage::default() }.max(Usage { output: 7, ..Usage::default() });
    assert_eq!(merged, Usage { input: 100, output: 7, ..Usage::default() });
}

#[test]
fn text_split_by_citations_is_joined_as_streamed() {
    let cite = || Part::Citation(Citation::from_value("anthropic", serde_json::json!({})));
    let message = Message {
        role: Role::Assistant,
        content: vec![
            Part::text("It opens at 10 a.m."),
            cite(),
            cite(),
            Part::text(" "),
            Part::text("Second part."),
            Part::Opaque(Opaque {
                provider: "anthropic".into(),
                kind: "server_tool_use".into(),
                value: serde_json::json!({}),
            }),
            cite(),
            Part::text("After a tool."),
        ],
    };
    // Citations between texts: nothing inserted; texts one after another, or after another
    // part: a line break.
    assert_eq!(message.text(), "It opens at 10 a.m. \nSecond part.\nAfter a tool.");
}
