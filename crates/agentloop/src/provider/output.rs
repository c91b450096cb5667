//! Structured output at the provider seam: the JSON Schema the model's answer must match,
//! carried by [`ModelRequest::output`](super::ModelRequest::output) when the run asks the
//! provider's own structured-output mode for it (the run's `OutputMode::Native`). Each wire
//! format writes it in its API's form: OpenAI chat `response_format: json_schema`, Responses
//! `text.format`, Anthropic `output_config.format`, Gemini `responseSchema`; the local model
//! constrains its decoding with a grammar compiled from it.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// The schema a model's answer must match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputFormat {
    /// A name for the schema (letters, digits, `_` and `-`, at most 64: what OpenAI accepts).
    pub name: String,
    /// What the answer is, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema (an object schema).
    pub schema: Value,
}

/// String formats OpenAI's strict mode accepts.
const STRICT_FORMATS: &[&str] =
    &["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

impl OutputFormat {
    /// The schema as sent: without `$schema` (an API that does not know the keyword may
    /// refuse it).
    pub fn wire_schema(&self) -> Value {
        let mut schema = self.schema.clone();
        if let Value::Object(map) = &mut schema {
            map.remove("$schema");
        }
        schema
    }

    /// The schema with every object closed (`additionalProperties: false` where it is not
    /// set), as Anthropic's structured outputs require. Closing does not change what the
    /// run accepts: the answer is validated against the schema as given.
    pub fn closed_schema(&self) -> Value {
        let mut schema = self.wire_schema();
        close_objects(&mut schema);
        schema
    }

    /// The schema rewritten for OpenAI's strict mode, when it can be: closed, every optional
    /// property made required and nullable (`null` stands for "left out": see
    /// [`drop_optional_nulls`]), and string formats strict mode does not know (schemars's
    /// `uint32`, `double`, …) left out — the answer is still validated against the schema as
    /// given, bounds and formats included. `None` when strict mode cannot express the schema
    /// (a map with open `additionalProperties`, say): the request is then sent not strict.
    pub fn strict_schema(&self) -> Option<Value> {
        let mut schema = self.closed_schema();
        make_strict(&mut schema, 0);
        is_strict(&schema).then_some(schema)
    }
}

/// How deep the schema walks go: deeper schemas are left as they are (and then fail the strict
/// check, or are not rewritten).
const MAX_DEPTH: usize = 64;

/// Makes every optional property of every object required and nullable, and leaves out
/// formats strict mode does not know (see [`OutputFormat::strict_schema`]).
fn make_strict(node: &mut Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match node {
        Value::Object(map) => {
            if map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| !STRICT_FORMATS.contains(&f))
            {
                map.remove("format");
            }
            if map.get("properties").is_some_and(Value::is_object) {
                let mut required = map_required(map);
                if let Some(Value::Object(properties)) = map.get_mut("properties") {
                    for (key, property) in properties.iter_mut() {
                        if !required.contains(key) {
                            make_nullable(property);
                            required.push(key.clone());
                        }
                    }
                }
                let required = required.into_iter().map(Value::String).collect();
                map.insert("required".into(), Value::Array(required));
            }
            for (key, value) in map.iter_mut() {
                if matches!(key.as_str(), "enum" | "const" | "default" | "examples") {
                    continue;
                }
                if matches!(key.as_str(), "properties" | "$defs" | "definitions") {
                    if let Value::Object(children) = value {
                        children.values_mut().for_each(|child| make_strict(child, depth + 1));
                    }
                    continue;
                }
                make_strict(value, depth + 1);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| make_strict(item, depth + 1)),
        _ => {}
    }
}

/// The names an object schema lists as required.
fn map_required(schema: &Map<String, Value>) -> Vec<String> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// A schema that also accepts `null`: `null` added to its type (and enum), or the schema as
/// one branch of an `anyOf` beside `{"type": "null"}`.
fn make_nullable(schema: &mut Value) {
    if accepts_null(schema) {
        return;
    }
    let Value::Object(map) = schema else { return };
    if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
        branches.push(json!({"type": "null"}));
        return;
    }
    match map.get_mut("type") {
        Some(Value::String(kind)) => {
            let kind = std::mem::take(kind);
            map.insert("type".into(), Value::Array(vec![Value::String(kind), "null".into()]));
        }
        Some(Value::Array(kinds)) => kinds.push("null".into()),
        _ => {
            let branch = std::mem::take(map);
            map.insert(
                "anyOf".into(),
                Value::Array(vec![Value::Object(branch), json!({"type": "null"})]),
            );
            return;
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.push(Value::Null);
    }
}

/// Whether a schema accepts `null` as far as its own keywords tell (`type`, `enum`, `const`,
/// `anyOf`/`oneOf` branches); a schema that constrains nothing accepts it, a `$ref` or an
/// `allOf` is taken not to.
fn accepts_null(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else { return schema == &Value::Bool(true) };
    if let Some(values) = map.get("enum").and_then(Value::as_array) {
        return values.contains(&Value::Null);
    }
    if let Some(value) = map.get("const") {
        return value.is_null();
    }
    for branches in ["anyOf", "oneOf"] {
        if let Some(branches) = map.get(branches).and_then(Value::as_array) {
            return branches.iter().any(accepts_null);
        }
    }
    match map.get("type") {
        Some(Value::String(kind)) => kind == "null",
        Some(Value::Array(kinds)) => kinds.iter().any(|k| k == "null"),
        _ => !map.contains_key("$ref") && !map.contains_key("allOf"),
    }
}

/// The answer to a strict request, as the schema it was written for means it: a property the
/// schema leaves optional, whose schema does not accept `null`, and that the answer sets to
/// `null` is left out — strict mode makes the model write every property, and `null` is how
/// it says "none" (see [`OutputFormat::strict_schema`]). `$ref`s to `#/…` are followed; other
/// values are left as they are.
pub(crate) fn drop_optional_nulls(schema: &Value, value: &mut Value) {
    drop_nulls(schema, schema, value, 0);
}

fn drop_nulls(root: &Value, schema: &Value, value: &mut Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let Some(map) = schema.as_object() else { return };
    if let Some(target) = map.get("$ref").and_then(Value::as_str) {
        if let Some(resolved) = target.strip_prefix('#').and_then(|pointer| root.pointer(pointer)) {
            drop_nulls(root, resolved, value, depth + 1);
        }
    }
    for branches in ["allOf", "anyOf", "oneOf"] {
        for branch in map.get(branches).and_then(Value::as_array).into_iter().flatten() {
            drop_nulls(root, branch, value, depth + 1);
        }
    }
    match value {
        Value::Object(fields) => {
            let Some(properties) = map.get("properties").and_then(Value::as_object) else {
                return;
            };
            let required = map_required(map);
            fields.retain(|key, field| {
                !(field.is_null()
                    && !required.contains(key)
                    && properties.get(key).is_some_and(|p| !accepts_null(p)))
            });
            for (key, field) in fields.iter_mut() {
                if let Some(property) = properties.get(key) {
                    drop_nulls(root, property, field, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = map.get("items") {
                items.iter_mut().for_each(|value| drop_nulls(root, item, value, depth + 1));
            }
        }
        _ => {}
    }
}

/// Sets `additionalProperties: false` on every object schema that does not set it.
fn close_objects(node: &mut Value) {
    match node {
        Value::Object(map) => {
            let is_object = map.get("type").is_some_and(|t| {
                t == "object" || t.as_array().is_some_and(|a| a.iter().any(|t| t == "object"))
            }) || map.contains_key("properties");
            if is_object && !map.contains_key("additionalProperties") {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            for (key, value) in map.iter_mut() {
                // Property names and enum values are data, not schemas.
                if key == "enum" || key == "const" || key == "default" || key == "examples" {
                    continue;
                }
                if key == "properties" || key == "$defs" || key == "definitions" {
                    if let Value::Object(children) = value {
                        children.values_mut().for_each(close_objects);
                    }
                    continue;
                }
                close_objects(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(close_objects),
        _ => {}
    }
}

/// Whether a closed schema meets OpenAI's strict-mode rules (see
/// [`OutputFormat::strict_schema`]).
fn is_strict(node: &Value) -> bool {
    match node {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = map.get("properties") {
                if !all_required(map, properties) {
                    return false;
                }
            }
            if map.get("additionalProperties").is_some_and(|v| v != &Value::Bool(false)) {
                return false;
            }
            if let Some(format) = map.get("format").and_then(Value::as_str) {
                if !STRICT_FORMATS.contains(&format) {
                    return false;
                }
            }
            map.iter().all(|(key, value)| match key.as_str() {
                "enum" | "const" | "default" | "examples" | "description" | "title" => true,
                "properties" | "$defs" | "definitions" => {
                    value.as_object().is_none_or(|children| children.values().all(is_strict))
                }
                _ => is_strict(value),
            })
        }
        Value::Array(items) => items.iter().all(is_strict),
        _ => true,
    }
}

fn all_required(schema: &Map<String, Value>, properties: &Map<String, Value>) -> bool {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    properties.keys().all(|key| required.contains(&key.as_str()))
}

#[cfg(test)]
mod tests;
