#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use serde_json::json;

/// The straightforward definition: keys sorted, every piece formatted on its own.
fn reference(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let inner: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{}:{}", Value::String((*k).clone()), reference(v)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => {
            format!("[{}]", items.iter().map(reference).collect::<Vec<_>>().join(","))
        }
        other => other.to_string(),
    }
}

#[test]
fn canonical_json_sorts_keys_and_escapes_like_serde_json() {
    let every_ascii: String = (0u8..=0x7f).map(char::from).collect();
    let values = [
        json!({"b": 2, "a": 1}),
        json!({"z": {"y": [3, {"d": null, "c": true}], "x": "é \u{1F600}"}, "a": [], "m": {}}),
        json!([1.5, -2, 1e300, 18446744073709551615u64, "q\"uote", "back\\slash"]),
        json!({ every_ascii.clone(): every_ascii }),
        json!("\u{7f}\u{80}\u{2028}"),
        json!(null),
        json!(false),
    ];
    for value in values {
        assert_eq!(canonical_json(&value, 0), reference(&value), "{value}");
    }
    assert_eq!(canonical_json(&json!({"b": 2, "a": 1}), 0), r#"{"a":1,"b":2}"#);
}

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
