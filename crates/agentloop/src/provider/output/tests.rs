#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use serde_json::json;

fn format(schema: Value) -> OutputFormat {
    OutputFormat { name: "answer".into(), description: None, schema }
}

#[test]
fn the_wire_schema_has_no_dollar_schema() {
    let f = format(json!({"$schema": "x", "type": "object", "properties": {}}));
    assert_eq!(f.wire_schema(), json!({"type": "object", "properties": {}}));
}

#[test]
fn closing_sets_additional_properties_on_every_object_but_not_on_data() {
    let f = format(json!({
        "type": "object",
        "properties": {
            "inner": {"type": "object", "properties": {"a": {"type": "string"}}},
            "list": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
            "open": {"type": "object", "additionalProperties": {"type": "string"}},
            "properties": {"type": "string", "default": {"type": "object"}},
        },
        "$defs": {"Item": {"type": "object", "properties": {"b": {"type": "integer"}}}},
    }));
    let closed = f.closed_schema();
    assert_eq!(closed["additionalProperties"], false);
    assert_eq!(closed["properties"]["inner"]["additionalProperties"], false);
    assert_eq!(closed["$defs"]["Item"]["additionalProperties"], false);
    // Set already: kept.
    assert_eq!(closed["properties"]["open"]["additionalProperties"], json!({"type": "string"}));
    // A property named `properties` is a schema like any other; a default is data.
    assert!(closed["properties"]["properties"].get("additionalProperties").is_none());
    assert_eq!(closed["properties"]["properties"]["default"], json!({"type": "object"}));
}

#[test]
fn strict_needs_every_property_required_and_known_formats() {
    let all_required = format(json!({
        "type": "object",
        "properties": {"a": {"type": "string", "format": "date"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }));
    let strict = all_required.strict_schema().expect("strict");
    assert_eq!(strict["additionalProperties"], false);

    let optional = format(json!({
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["a"],
    }));
    assert!(optional.strict_schema().is_none());

    let odd_format = format(json!({
        "type": "object",
        "properties": {"n": {"type": "integer", "format": "uint32"}},
        "required": ["n"],
    }));
    assert!(odd_format.strict_schema().is_none());

    let open_map = format(json!({
        "type": "object",
        "properties": {"m": {"type": "object", "additionalProperties": {"type": "string"}}},
        "required": ["m"],
    }));
    assert!(open_map.strict_schema().is_none());
}
