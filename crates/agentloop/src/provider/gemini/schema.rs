//! JSON Schema → Gemini's `Schema` (a subset of OpenAPI 3.0's schema object).
//!
//! Gemini rejects keywords it does not know, so the conversion keeps only these, converting
//! each subschema recursively:
//!
//! | JSON Schema | Gemini |
//! | --- | --- |
//! | `type: "string"` (any case) | `type: "STRING"` (upper case) |
//! | `type: ["string", "null"]` | `type: "STRING", nullable: true` (several non-null types → `anyOf`) |
//! | `anyOf` / `oneOf` | `anyOf`; a `{"type": "null"}` member becomes `nullable: true`, a single member left is inlined |
//! | `allOf` with one member | that member inlined (more members: dropped) |
//! | `$ref: "#/…"` | the referenced schema, inlined (depth-limited: recursive types are cut off) |
//! | `enum` of strings | `enum` (a `null` member becomes `nullable: true`; other non-string enums are dropped) |
//! | `const: "x"` | `enum: ["x"]` |
//! | `format` | kept only where Gemini knows it: `date-time`, `enum` (strings), `int32`, `int64` (integers), `float`, `double` (numbers) |
//! | `properties`, `items`, `required` | converted; empty `properties` left out (Gemini rejects an empty object) |
//! | `description`, `title`, `default`, `example`, `minimum`, `maximum`, `minItems`, `maxItems`, `minLength`, `maxLength`, `pattern`, `minProperties`, `maxProperties`, `nullable`, `propertyOrdering` | kept |
//!
//! Everything else is dropped, notably `$schema`, `$id`, `$defs`, `definitions`, `$comment`,
//! `additionalProperties`, `patternProperties`, `unevaluatedProperties`, `propertyNames`,
//! `not`, `if` / `then` / `else`, `examples`, `exclusiveMinimum`, `exclusiveMaximum`,
//! `multipleOf`, `uniqueItems`, `contains`, `prefixItems`, `readOnly`, `writeOnly`,
//! `deprecated` and tuple-form `items`.

use serde_json::{json, Map, Value};

/// How deep `$ref`s are followed before a (recursive) reference is cut off.
const MAX_REF_DEPTH: usize = 8;

/// Keywords copied unchanged.
const KEPT: &[&str] = &[
    "description",
    "title",
    "default",
    "example",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "minProperties",
    "maxProperties",
    "nullable",
    "propertyOrdering",
];

/// A tool's parameter schema in Gemini's form, or `None` when the tool takes no parameters
/// (Gemini rejects an object schema without properties as `parameters`).
pub fn to_gemini_schema(schema: &Value) -> Option<Value> {
    let converted = convert(schema, schema, 0);
    let is_empty_object = converted.get("type").and_then(Value::as_str) == Some("OBJECT")
        && converted.get("properties").is_none();
    let is_empty = converted.as_object().is_some_and(Map::is_empty);
    (!is_empty_object && !is_empty).then_some(converted)
}

fn convert(node: &Value, root: &Value, depth: usize) -> Value {
    let Value::Object(schema) = node else {
        return Value::Object(Map::new());
    };
    let mut out = Map::new();

    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let target = reference.strip_prefix('#').and_then(|pointer| root.pointer(pointer));
        if let (Some(target), true) = (target, depth < MAX_REF_DEPTH) {
            if let Value::Object(resolved) = convert(target, root, depth + 1) {
                out = resolved;
            }
        }
    }

    for key in KEPT {
        if let Some(value) = schema.get(*key) {
            out.insert((*key).to_owned(), value.clone());
        }
    }

    match schema.get("type") {
        Some(Value::String(kind)) if kind == "null" => {
            out.insert("nullable".into(), Value::Bool(true));
        }
        Some(Value::String(kind)) => {
            out.insert("type".into(), json!(kind.to_ascii_uppercase()));
        }
        Some(Value::Array(kinds)) => {
            let mut types: Vec<String> = Vec::new();
            for kind in kinds.iter().filter_map(Value::as_str) {
                if kind == "null" {
                    out.insert("nullable".into(), Value::Bool(true));
                } else {
                    types.push(kind.to_ascii_uppercase());
                }
            }
            match types.as_slice() {
                [] => {}
                [one] => {
                    out.insert("type".into(), json!(one));
                }
                many => {
                    let members = many.iter().map(|t| json!({ "type": t })).collect();
                    out.insert("anyOf".into(), Value::Array(members));
                }
            }
        }
        _ => {}
    }

    let alternatives = schema.get("anyOf").or_else(|| schema.get("oneOf"));
    if let Some(Value::Array(members)) = alternatives {
        let mut kept = Vec::new();
        for member in members {
            if member.get("type").and_then(Value::as_str) == Some("null") {
                out.insert("nullable".into(), Value::Bool(true));
            } else {
                kept.push(convert(member, root, depth));
            }
        }
        match kept.len() {
            0 => {}
            1 => merge(&mut out, kept.pop()),
            _ => {
                out.insert("anyOf".into(), Value::Array(kept));
            }
        }
    }
    if let Some(Value::Array(members)) = schema.get("allOf") {
        if let [only] = members.as_slice() {
            merge(&mut out, Some(convert(only, root, depth)));
        }
    }

    convert_enum(schema, &mut out);
    convert_format(schema, &mut out);

    if let Some(Value::Object(properties)) = schema.get("properties") {
        let converted: Map<String, Value> = properties
            .iter()
            .map(|(name, property)| (name.clone(), convert(property, root, depth)))
            .collect();
        if !converted.is_empty() {
            out.insert("properties".into(), Value::Object(converted));
        }
    }
    if let Some(items @ Value::Object(_)) = schema.get("items") {
        out.insert("items".into(), convert(items, root, depth));
    }
    if let Some(Value::Array(required)) = schema.get("required") {
        let names: Vec<Value> = required.iter().filter(|v| v.is_string()).cloned().collect();
        if !names.is_empty() {
            out.insert("required".into(), Value::Array(names));
        }
    }
    Value::Object(out)
}

/// Adds the keys of `other` that `out` does not have yet.
fn merge(out: &mut Map<String, Value>, other: Option<Value>) {
    if let Some(Value::Object(other)) = other {
        for (key, value) in other {
            out.entry(key).or_insert(value);
        }
    }
}

fn convert_enum(schema: &Map<String, Value>, out: &mut Map<String, Value>) {
    let values: Vec<Value> = match (schema.get("enum"), schema.get("const")) {
        (Some(Value::Array(values)), _) => values.clone(),
        (None, Some(constant)) => vec![constant.clone()],
        _ => return,
    };
    let mut strings = Vec::new();
    for value in values {
        match value {
            Value::Null => {
                out.insert("nullable".into(), Value::Bool(true));
            }
            Value::String(_) => strings.push(value),
            // Gemini's enums are string-only: a schema with other values keeps its type alone.
            _ => return,
        }
    }
    if !strings.is_empty() {
        out.entry("type").or_insert_with(|| json!("STRING"));
        out.insert("enum".into(), Value::Array(strings));
    }
}

fn convert_format(schema: &Map<String, Value>, out: &mut Map<String, Value>) {
    let Some(format) = schema.get("format").and_then(Value::as_str) else {
        return;
    };
    let supported = match out.get("type").and_then(Value::as_str) {
        Some("STRING") => matches!(format, "date-time" | "enum"),
        Some("INTEGER") => matches!(format, "int32" | "int64"),
        Some("NUMBER") => matches!(format, "float" | "double"),
        _ => false,
    };
    if supported {
        out.insert("format".into(), json!(format));
    }
}
