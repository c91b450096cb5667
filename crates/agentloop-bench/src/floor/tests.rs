#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::via_agentloop;

#[test]
fn the_floor_declares_the_tool_agentloop_sends() {
    let provider =
        via_agentloop::provider("http://127.0.0.1:1/v1", Script::new(1, 1, 0), false).unwrap();
    let agent = via_agentloop::agent(provider, Script::new(1, 1, 0)).unwrap();
    let spec = &agent.tools()[0];
    let declared = &add_tool_json()[0]["function"];
    assert_eq!(declared["name"], spec.name.as_str());
    assert_eq!(declared["description"], spec.description.as_str());
    assert_eq!(declared["parameters"], spec.parameters);
}

#[test]
fn chunks_assemble_parallel_calls_by_index() {
    let mut turn =
        Turn { text: None, calls: Vec::new(), finish: None, usage: WireUsage::default() };
    for data in [
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"add","arguments":""}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"add","arguments":"{\"a\":"}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"1,\"b\":2}"}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}"#,
    ] {
        apply_chunk(&mut turn, serde_json::from_str(data).unwrap()).unwrap();
    }
    assert_eq!(turn.calls.len(), 2);
    assert_eq!(turn.calls[1].id, "b");
    assert_eq!(turn.calls[1].function.arguments, r#"{"a":1,"b":2}"#);
    assert_eq!(turn.finish.as_deref(), Some("tool_calls"));
    assert_eq!(turn.usage.completion_tokens, 7);
    let bad = r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":5,"function":{"arguments":"x"}}]}}]}"#;
    assert!(apply_chunk(&mut turn, serde_json::from_str(bad).unwrap()).is_err());
}

#[test]
fn messages_serialize_as_the_chat_api_wants() {
    let messages = vec![
        Msg::User { content: "go".into() },
        Msg::Assistant {
            content: None,
            tool_calls: vec![Call {
                id: "c".into(),
                kind: function_type(),
                function: Function { name: "add".into(), arguments: "{}".into() },
            }],
        },
        Msg::Tool { tool_call_id: "c".into(), content: "3".into() },
    ];
    assert_eq!(
        serde_json::to_value(&messages).unwrap(),
        serde_json::json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "add", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "c", "content": "3"},
        ])
    );
}
