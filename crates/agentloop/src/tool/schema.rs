//! JSON Schemas for tool arguments, in the shape model APIs accept: one self-contained object
//! schema (subschemas inlined, no `$schema`, no root `title`).

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{Map, Value};

/// The JSON Schema of `T`, ready to send to a model as a tool's `parameters`.
pub fn schema_for<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft07()
        .with(|settings| {
            settings.meta_schema = None;
            settings.inline_subschemas = true;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Value::Object(map) = &mut schema {
        map.remove("title");
        // A tool always takes an object, even when it has no parameters, and model APIs
        // want `properties` on it.
        if !map.contains_key("type") && !map.contains_key("properties") {
            map.insert("type".into(), Value::String("object".into()));
        }
        if map.get("type").and_then(Value::as_str) == Some("object")
            && !map.contains_key("properties")
        {
            map.insert("properties".into(), Value::Object(Map::new()));
        }
    }
    schema
}
