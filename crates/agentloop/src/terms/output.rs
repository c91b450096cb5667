//! Structured output: the [`OutputSpec`] a run's final answer must match, and how the model
//! is asked for it ([`OutputMode`]).

use crate::provider::OutputFormat;
use crate::tool::ToolSpec;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// The name of the final-answer tool (the output mode [`OutputMode::Tool`]).
pub const OUTPUT_TOOL: &str = "final_answer";

/// How many times, by default, the model is told what was wrong with its answer and asked
/// again before the run fails with [`StopReason::OutputInvalid`](super::StopReason).
pub const DEFAULT_OUTPUT_RETRIES: u32 = 2;

/// How the model is asked for a structured answer.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// [`Native`](Self::Native) where the provider has a structured-output mode that works
    /// with the run's tools ([`Provider::native_output`](crate::provider::Provider)),
    /// [`Tool`](Self::Tool) everywhere else. Decided when the run starts; its journal records
    /// the mode used.
    #[default]
    Auto,
    /// The provider's own structured-output mode (OpenAI `response_format` / `text.format`,
    /// Anthropic `output_config.format`, Gemini `responseSchema`, the local model's grammar):
    /// the answer is the model's text, parsed as JSON.
    Native,
    /// A final-answer tool ([`OUTPUT_TOOL`]) whose parameters are the schema: the model calls
    /// it, after any other tools, with the answer as its arguments. Works with every provider
    /// that calls tools, prompted tool calls included (the local model then writes the call
    /// under a grammar compiled from the schema).
    Tool,
}

/// The typed final answer a run must end with: a JSON Schema, how the model is asked for it,
/// and how many times a wrong answer is sent back with its errors. The answer is validated
/// against the schema whatever the mode; the valid value is the outcome's `output`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[non_exhaustive]
pub struct OutputSpec {
    /// A name for the schema (letters, digits, `_`, `-`; at most 64 characters).
    pub name: String,
    /// What the answer is, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of the answer, always an object schema (see
    /// [`wrapped`](Self::wrapped)).
    pub schema: Value,
    /// The schema asked for was not an object schema: the model answers
    /// `{"response": <value>}` (APIs and tools take object schemas only) and the output is
    /// the value.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wrapped: bool,
    /// How the model is asked.
    #[serde(default)]
    pub mode: OutputMode,
    /// How many times a wrong answer is sent back before the run fails.
    #[serde(default = "default_retries")]
    pub max_retries: u32,
}

fn default_retries() -> u32 {
    DEFAULT_OUTPUT_RETRIES
}

impl OutputSpec {
    /// An answer matching `schema` (a non-object schema is [wrapped](Self::wrapped)).
    pub fn new(name: impl AsRef<str>, schema: Value) -> Self {
        let (schema, wrapped) = wrap(schema);
        Self {
            name: schema_name(name.as_ref()),
            description: None,
            schema,
            wrapped,
            mode: OutputMode::Auto,
            max_retries: DEFAULT_OUTPUT_RETRIES,
        }
    }

    /// An answer of type `T`, its schema derived by schemars (its doc comment is the
    /// description).
    ///
    /// Integer formats schemars writes for Rust's integer types (`uint32`, `int8`, …) get the
    /// type's `minimum` and `maximum` where the schema has none, so that the schema says what
    /// the type accepts: an answer of 10¹⁴ for a `u32` is sent back with its error instead of
    /// failing to deserialize (and grammars bound by the schema stop there).
    pub fn of<T: schemars::JsonSchema>() -> Self {
        let mut schema = schemars::schema_for!(T).to_value();
        bound_integer_formats(&mut schema);
        let description = schema.get("description").and_then(Value::as_str).map(str::to_owned);
        let mut spec = Self::new(T::schema_name(), schema);
        spec.description = description;
        spec
    }

    /// With this mode.
    pub fn with_mode(mut self, mode: OutputMode) -> Self {
        self.mode = mode;
        self
    }

    /// With this many retries after a wrong answer.
    pub fn with_max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// With this description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Whether the schema is a valid JSON Schema (what a validator makes of it), so that a bad
    /// schema is refused before a run rather than failing it.
    pub fn check_schema(&self) -> Result<(), String> {
        jsonschema::validator_for(&self.schema).map(|_| ()).map_err(|error| error.to_string())
    }

    /// The schema for a provider's structured-output mode.
    pub fn format(&self) -> OutputFormat {
        OutputFormat {
            name: self.name.clone(),
            description: self.description.clone(),
            schema: self.schema.clone(),
        }
    }

    /// The final-answer tool.
    pub fn tool_spec(&self) -> ToolSpec {
        let mut parameters = self.schema.clone();
        if let Value::Object(map) = &mut parameters {
            map.remove("$schema");
            map.remove("title");
        }
        let what = self.description.as_deref().unwrap_or("the final answer");
        ToolSpec {
            name: OUTPUT_TOOL.into(),
            description: format!(
                "Call this once the task is done, with the final answer ({what}) as its \
                 arguments. Call other tools first if you need them; nothing after this call \
                 is run."
            ),
            parameters,
        }
    }

    /// The output for a valid answer: the value itself, or the wrapped one.
    pub fn unwrap_value(&self, mut answer: Value) -> Value {
        if self.wrapped {
            return answer.get_mut("response").map(Value::take).unwrap_or(Value::Null);
        }
        answer
    }
}

/// Adds the range of an integer format (`uint8` … `int64`, `uint`, `int`) to every schema
/// that has one and lacks the bound.
fn bound_integer_formats(node: &mut Value) {
    match node {
        Value::Object(map) => {
            let range: Option<(Value, Value)> = match map.get("format").and_then(Value::as_str) {
                Some("uint8") => Some((0.into(), u8::MAX.into())),
                Some("uint16") => Some((0.into(), u16::MAX.into())),
                Some("uint32") => Some((0.into(), u32::MAX.into())),
                Some("uint64" | "uint") => Some((0.into(), u64::MAX.into())),
                Some("int8") => Some((i8::MIN.into(), i8::MAX.into())),
                Some("int16") => Some((i16::MIN.into(), i16::MAX.into())),
                Some("int32") => Some((i32::MIN.into(), i32::MAX.into())),
                Some("int64" | "int") => Some((i64::MIN.into(), i64::MAX.into())),
                _ => None,
            };
            if let Some((low, high)) = range {
                map.entry("minimum").or_insert(low);
                map.entry("maximum").or_insert(high);
            }
            map.values_mut().for_each(bound_integer_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(bound_integer_formats),
        _ => {}
    }
}

/// A name APIs accept: other characters become `_`, at most 64 characters, never empty.
fn schema_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .take(64)
        .collect();
    if cleaned.is_empty() {
        "output".into()
    } else {
        cleaned
    }
}

/// An object schema as it is, any other wrapped in `{"response": …}` (its definitions moved
/// to the wrapper, where its `$ref`s point).
fn wrap(schema: Value) -> (Value, bool) {
    let is_object = schema.get("type").and_then(Value::as_str) == Some("object")
        && schema.get("properties").is_some();
    if is_object {
        return (schema, false);
    }
    let mut inner = match schema {
        Value::Object(map) => map,
        Value::Bool(true) => Map::new(),
        other => return (other, false),
    };
    let mut outer = Map::new();
    for key in ["$schema", "$defs", "definitions"] {
        if let Some(value) = inner.remove(key) {
            outer.insert(key.into(), value);
        }
    }
    outer.insert("type".into(), json!("object"));
    outer.insert("properties".into(), json!({ "response": Value::Object(inner) }));
    outer.insert("required".into(), json!(["response"]));
    (Value::Object(outer), true)
}
