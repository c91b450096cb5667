#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

#[test]
fn call_keys_ignore_key_order_and_spacing() {
    let call = |arguments: &str| ToolCall {
        id: "c".into(),
        name: "add".into(),
        arguments: arguments.into(),
    };
    assert_eq!(call_key(&call(r#"{"a":1,"b":2}"#)), call_key(&call(r#"{ "b": 2, "a": 1 }"#)));
    assert_ne!(call_key(&call(r#"{"a":1}"#)), call_key(&call(r#"{"a":2}"#)));
    assert_eq!(call_key(&call("not json")), "not json");
}
