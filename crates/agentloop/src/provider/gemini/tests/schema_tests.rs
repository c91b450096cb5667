//! JSON Schema → Gemini schema conversion.

use super::*;
use schemars::JsonSchema;
use std::collections::HashMap;

/// A booking.
#[allow(dead_code)]
#[derive(JsonSchema)]
struct Booking {
    /// Guest name.
    name: String,
    /// Number of nights.
    nights: u32,
    /// A note for the front desk.
    note: Option<String>,
    room: Room,
    extras: Vec<Extra>,
    address: Option<Address>,
    tags: HashMap<String, String>,
    price: f64,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
enum Room {
    Single,
    Double,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
#[serde(tag = "kind")]
enum Extra {
    Breakfast,
    Parking { spots: u8 },
}

/// A postal address.
#[allow(dead_code)]
#[derive(JsonSchema)]
struct Address {
    street: String,
    city: String,
}

const FORBIDDEN: &[&str] = &[
    "$schema",
    "$ref",
    "$defs",
    "definitions",
    "additionalProperties",
    "oneOf",
    "allOf",
    "const",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "examples",
    "uniqueItems",
];

/// Checks every subschema: no unsupported keyword, upper-case types, known formats only.
fn assert_gemini_subset(schema: &Value, path: &str) {
    let Value::Object(map) = schema else { return };
    for key in FORBIDDEN {
        assert!(!map.contains_key(*key), "{path} keeps {key}: {schema}");
    }
    if let Some(kind) = map.get("type") {
        let kind = kind.as_str().unwrap_or_else(|| panic!("{path}: type {kind}"));
        assert!(
            ["STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"].contains(&kind),
            "{path}: type {kind}"
        );
    }
    if let Some(format) = map.get("format") {
        assert!(["date-time", "enum", "int32", "int64", "float", "double"]
            .contains(&format.as_str().unwrap()));
    }
    for (key, value) in map {
        match (key.as_str(), value) {
            ("properties", Value::Object(properties)) => {
                for (name, property) in properties {
                    assert_gemini_subset(property, &format!("{path}.{name}"));
                }
            }
            ("items", item) => assert_gemini_subset(item, &format!("{path}[]")),
            ("anyOf", Value::Array(members)) => {
                for member in members {
                    assert_gemini_subset(member, &format!("{path}|"));
                }
            }
            _ => {}
        }
    }
}

#[test]
fn a_derived_schema_converts_to_the_gemini_subset() {
    let schema = crate::tool::schema_for::<Booking>();
    let converted = to_gemini_schema(&schema).unwrap();
    assert_gemini_subset(&converted, "$");
    let both = json!({"json_schema": schema, "gemini": converted});
    insta::assert_json_snapshot!("derived_schema", crate::canonical::Sorted(&both));
}

#[test]
fn refs_alternatives_and_unsupported_keywords() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "tree": {"$ref": "#/$defs/Node", "description": "The root."},
            "missing": {"$ref": "#/$defs/Nope", "type": "string"},
            "choice": {"oneOf": [{"type": "string"}, {"type": "integer", "format": "uint8", "minimum": 0}]},
            "either": {"type": ["string", "integer", "null"]},
            "fixed": {"const": "v1"},
            "level": {"type": "integer", "enum": [1, 2, 3], "exclusiveMinimum": 0},
            "wrapped": {"allOf": [{"type": "boolean"}]},
            "pair": {"type": "array", "items": [{"type": "string"}], "uniqueItems": true},
            "when": {"type": "string", "format": "date-time"},
            "site": {"type": "string", "format": "uri"},
            "free": {"type": "object", "properties": {}, "additionalProperties": true}
        },
        "required": ["tree", 7],
        "additionalProperties": false,
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"value": {"type": "number"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}
            }
        }
    });
    let converted = to_gemini_schema(&schema).unwrap();
    assert_gemini_subset(&converted, "$");
    let properties = &converted["properties"];
    // A local ref is inlined; its sibling description is kept; recursion is cut off.
    assert_eq!(properties["tree"]["description"], json!("The root."));
    assert_eq!(properties["tree"]["properties"]["value"], json!({"type": "NUMBER"}));
    let mut depth = 0;
    let mut node = &properties["tree"];
    while let Some(child) = node.get("properties").and_then(|p| p.get("children")) {
        node = &child["items"];
        depth += 1;
    }
    assert!((7..=9).contains(&depth), "recursion depth {depth}");
    assert_eq!(properties["missing"], json!({"type": "STRING"}));
    assert_eq!(
        properties["choice"],
        json!({"anyOf": [{"type": "STRING"}, {"type": "INTEGER", "minimum": 0}]})
    );
    assert_eq!(
        properties["either"],
        json!({"nullable": true, "anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]})
    );
    assert_eq!(properties["fixed"], json!({"type": "STRING", "enum": ["v1"]}));
    assert_eq!(properties["level"], json!({"type": "INTEGER"}));
    assert_eq!(properties["wrapped"], json!({"type": "BOOLEAN"}));
    assert_eq!(properties["pair"], json!({"type": "ARRAY"}));
    assert_eq!(properties["when"], json!({"type": "STRING", "format": "date-time"}));
    assert_eq!(properties["site"], json!({"type": "STRING"}));
    assert_eq!(properties["free"], json!({"type": "OBJECT"}));
    assert_eq!(converted["required"], json!(["tree"]));
}

#[test]
fn nullable_enums_and_empty_schemas() {
    let schema = json!({"type": "object", "properties": {"unit": {"type": ["string", "null"], "enum": ["c", "f", null]}}});
    assert_eq!(
        to_gemini_schema(&schema).unwrap(),
        json!({"type": "OBJECT", "properties": {"unit": {"type": "STRING", "nullable": true, "enum": ["c", "f"]}}})
    );
    assert_eq!(to_gemini_schema(&json!({"type": "object"})), None);
    assert_eq!(to_gemini_schema(&json!({})), None);
    assert_eq!(to_gemini_schema(&json!(true)), None);
}
