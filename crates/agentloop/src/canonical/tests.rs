#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use serde_json::json;
use std::sync::Arc;

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

fn samples() -> Vec<Value> {
    let every_ascii: String = (0u8..=0x7f).map(char::from).collect();
    vec![
        json!({"b": 2, "a": 1}),
        json!({"z": {"y": [3, {"d": null, "c": true}], "x": "é \u{1F600}"}, "a": [], "m": {}}),
        json!([1.5, -2, 1e300, 18446744073709551615u64, "q\"uote", "back\\slash"]),
        json!({ every_ascii.clone(): every_ascii }),
        json!("\u{7f}\u{80}\u{2028}"),
        json!(null),
        json!(false),
    ]
}

#[test]
fn to_string_sorts_keys_and_escapes_like_serde_json() {
    for value in samples() {
        assert_eq!(to_string(&value), reference(&value), "{value}");
    }
    assert_eq!(to_string(&json!({"b": 2, "a": 1})), r#"{"a":1,"b":2}"#);
}

#[test]
fn sorted_serializes_as_to_string_writes() {
    for value in samples() {
        assert_eq!(serde_json::to_string(&Sorted(&value)).unwrap(), to_string(&value));
    }
}

/// Keys inserted out of order (kept so under `preserve_order`) are written sorted; struct
/// fields keep their declaration order.
#[test]
fn fields_serialize_their_values_sorted_and_structs_keep_their_order() {
    #[derive(Serialize)]
    struct Holder {
        z: u8,
        #[serde(serialize_with = "serialize")]
        value: Value,
        #[serde(serialize_with = "serialize")]
        shared: Arc<Value>,
        #[serde(serialize_with = "serialize_option")]
        maybe: Option<Value>,
        #[serde(serialize_with = "serialize_map")]
        map: Map<String, Value>,
    }
    let mut map = Map::new();
    map.insert("y".into(), json!({"b": 1, "a": [{"d": 0, "c": 0}]}));
    map.insert("x".into(), json!(1));
    let holder = Holder {
        z: 0,
        value: json!({"b": 1, "a": 2}),
        shared: Arc::new(json!({"b": 1, "a": 2})),
        maybe: Some(json!({"b": 1, "a": 2})),
        map,
    };
    assert_eq!(
        serde_json::to_string(&holder).unwrap(),
        r#"{"z":0,"value":{"a":2,"b":1},"shared":{"a":2,"b":1},"maybe":{"a":2,"b":1},"map":{"x":1,"y":{"a":[{"c":0,"d":0}],"b":1}}}"#
    );
    let none = Holder { maybe: None, ..holder };
    assert!(serde_json::to_string(&none).unwrap().contains(r#""maybe":null"#));
}
