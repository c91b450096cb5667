#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use serde_json::json;

/// The names of a `required` array, sorted.
fn sorted(required: &Value) -> Vec<&str> {
    let mut names: Vec<&str> =
        required.as_array().unwrap().iter().filter_map(Value::as_str).collect();
    names.sort_unstable();
    names
}

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

    // A format strict mode does not know is left out (the answer is validated with it).
    let odd_format = format(json!({
        "type": "object",
        "properties": {"n": {"type": "integer", "format": "uint32", "minimum": 0}},
        "required": ["n"],
    }));
    let strict = odd_format.strict_schema().expect("strict");
    assert_eq!(strict["properties"]["n"], json!({"type": "integer", "minimum": 0}));

    let open_map = format(json!({
        "type": "object",
        "properties": {"m": {"type": "object", "additionalProperties": {"type": "string"}}},
        "required": ["m"],
    }));
    assert!(open_map.strict_schema().is_none());
}

#[test]
fn strict_rewriting_makes_optional_properties_required_and_nullable() {
    let f = format(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "count": {"type": "integer"},
            "colour": {"type": "string", "enum": ["red", "green"]},
            "note": {"type": ["string", "null"]},
            "inner": {"$ref": "#/$defs/Inner", "description": "More."},
            "choice": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": ["name"],
        "$defs": {"Inner": {"type": "object", "properties": {"x": {"type": "number"}}}},
    }));
    let strict = f.strict_schema().expect("strict");
    // The given ones first, then the rest in the properties' order (serde_json's map order:
    // sorted, or as written with `preserve_order`).
    assert_eq!(strict["required"][0], "name");
    assert_eq!(sorted(&strict["required"]), ["choice", "colour", "count", "inner", "name", "note"]);
    let properties = &strict["properties"];
    assert_eq!(properties["name"], json!({"type": "string"}));
    assert_eq!(properties["count"], json!({"type": ["integer", "null"]}));
    assert_eq!(
        properties["colour"],
        json!({"type": ["string", "null"], "enum": ["red", "green", null]})
    );
    // Nullable already: as it was.
    assert_eq!(properties["note"], json!({"type": ["string", "null"]}));
    assert_eq!(
        properties["inner"],
        json!({"anyOf": [{"$ref": "#/$defs/Inner", "description": "More."}, {"type": "null"}]})
    );
    assert_eq!(
        properties["choice"],
        json!({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]})
    );
    // Objects in definitions too.
    assert_eq!(strict["$defs"]["Inner"]["required"], json!(["x"]));
    assert_eq!(strict["$defs"]["Inner"]["properties"]["x"], json!({"type": ["number", "null"]}));
    assert_eq!(strict["$defs"]["Inner"]["additionalProperties"], false);
    // The rewritten schema is one a validator takes.
    jsonschema::validator_for(&strict).expect("a valid schema");
}

#[test]
fn the_nulls_of_optional_properties_are_dropped_and_nothing_else() {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "count": {"type": "integer"},
            "note": {"type": ["string", "null"]},
            "inner": {"$ref": "#/$defs/Inner"},
            "list": {"type": "array", "items": {"$ref": "#/$defs/Inner"}},
        },
        "required": ["name"],
        "$defs": {"Inner": {"type": "object", "properties": {"x": {"type": "number"}}}},
    });
    let mut answer = json!({
        "name": "a",
        "count": null,
        "note": null,
        "inner": {"x": null},
        "list": [{"x": 1}, {"x": null}],
        "unknown": null,
    });
    drop_optional_nulls(&schema, &mut answer);
    assert_eq!(
        answer,
        json!({
            "name": "a",
            "note": null,
            "inner": {},
            "list": [{"x": 1}, {}],
            "unknown": null,
        })
    );
    // A required property's null is the answer's: kept (and found wrong by the validator).
    let mut required_null = json!({"name": null});
    drop_optional_nulls(&schema, &mut required_null);
    assert_eq!(required_null, json!({"name": null}));
}

#[test]
fn the_walks_stop_at_recursive_references() {
    let schema = json!({
        "type": "object",
        "properties": {"next": {"$ref": "#"}, "v": {"type": "integer"}},
    });
    let mut answer = json!({"v": null, "next": {"v": null, "next": null}});
    drop_optional_nulls(&schema, &mut answer);
    assert_eq!(answer, json!({"next": {}}));
    let strict = format(schema).strict_schema().expect("strict");
    assert_eq!(sorted(&strict["required"]), ["next", "v"]);
}
