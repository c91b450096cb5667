#![allow(clippy::unwrap_used)]

use super::*;
use serde_json::json;

fn piece(path: &str, value: Value, more: bool) -> PartialArg {
    let mut p: PartialArg =
        serde_json::from_value(json!({ "jsonPath": path, "willContinue": more })).unwrap();
    match value {
        Value::String(s) => p.string_value = Some(s),
        Value::Number(n) => p.number_value = Some(n),
        Value::Bool(b) => p.bool_value = Some(b),
        _ => p.null_value = Some(Value::Null),
    }
    p
}

#[test]
fn pieces_build_nested_arguments_and_strings_continue() {
    let mut call = OpenCall::new("c".into());
    call.apply(vec![
        piece("$.city", json!("San "), true),
        piece("$.city", json!("Francisco"), false),
        piece("$.days", json!(3), false),
        piece("$.opts.metric", json!(true), false),
        piece("$.tags[1]", json!("b"), false),
        piece("$['odd key']", Value::Null, false),
        piece("$.city2", json!("x"), false),
        piece("$.city2", json!("y"), false),
    ])
    .unwrap();
    assert_eq!(
        call.args,
        json!({"city": "San Francisco", "days": 3, "opts": {"metric": true},
               "tags": [null, "b"], "odd key": null, "city2": "y"})
    );
    assert!(OpenCall::new("c".into()).apply(vec![piece("city", json!(1), false)]).is_err());
    assert!(OpenCall::new("c".into()).apply(vec![piece("$.a[x]", json!(1), false)]).is_err());
}
