//! Structured output at the provider seam: the JSON Schema the model's answer must match,
//! carried by [`ModelRequest::output`](super::ModelRequest::output) when the run asks the
//! provider's own structured-output mode for it (the run's `OutputMode::Native`). Each wire
//! format writes it in its API's form: OpenAI chat `response_format: json_schema`, Responses
//! `text.format`, Anthropic `output_config.format`, Gemini `responseSchema`; the local model
//! constrains its decoding with a grammar compiled from it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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

    /// The closed schema when it meets OpenAI's strict mode (every object lists all its
    /// properties as required, and string formats are among those strict mode knows), so
    /// that the request can be strict; `None` otherwise (the request is sent not strict, and
    /// the answer is still validated).
    pub fn strict_schema(&self) -> Option<Value> {
        let schema = self.closed_schema();
        is_strict(&schema).then_some(schema)
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
