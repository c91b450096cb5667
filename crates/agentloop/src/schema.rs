//! JSON Schemas of what a run writes: a journal entry ([`JournalEntry`], the unit of every
//! store's journal) and an event ([`Event`], what `run_stream` yields and a journal entry
//! holds). They are generated from the types with schemars, so they describe exactly what
//! serde writes (the same field names, tags and optional fields), and are committed under
//! `docs/schema/` (`journal-entry.schema.json`, `event.schema.json`), where a test keeps them
//! current: `AGENTLOOP_REGENERATE_SCHEMA=1 cargo test -p agentloop --test schema` rewrites
//! them after a change of the types.
//!
//! The format's version is [`SCHEMA_VERSION`], written in each entry's `schema_version`
//! (the journal-entry schema holds it as a constant). Readers ignore fields they do not know,
//! and the schemas allow them: adding an event kind or a field is a compatible change;
//! removing or renaming one takes a new [`SCHEMA_VERSION`].

use crate::event::Event;
use crate::run::SCHEMA_VERSION;
use crate::store::JournalEntry;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::Schema;
use serde_json::Value;

/// The JSON Schema (draft 2020-12) of one journal entry as the stores write it: `seq`,
/// `at_ms`, `schema_version` (this build's [`SCHEMA_VERSION`]) and the event, with every
/// type it uses in `$defs`.
pub fn journal_entry() -> Schema {
    let mut schema = generator().into_root_schema_for::<JournalEntry>();
    let version = schema
        .get_mut("properties")
        .and_then(Value::as_object_mut)
        .and_then(|properties| properties.get_mut("schema_version"))
        .and_then(Value::as_object_mut);
    if let Some(version) = version {
        version.insert("const".into(), Value::from(SCHEMA_VERSION));
    }
    schema
}

/// The JSON Schema (draft 2020-12) of one [`Event`] as serialized (an object tagged by
/// `type`): the durable events a journal holds and the transient ones only streamed.
pub fn event() -> Schema {
    generator().into_root_schema_for::<Event>()
}

/// The JSON Schema (draft 2020-12) of one [`Envelope`](crate::protocol::Envelope): an event
/// of a run with its `run_id`, `seq`, `sub`, `at_ms` and `format` (this build's
/// [`SCHEMA_VERSION`]).
pub fn envelope() -> Schema {
    let mut schema = generator().into_root_schema_for::<crate::protocol::Envelope>();
    let format = schema
        .get_mut("properties")
        .and_then(Value::as_object_mut)
        .and_then(|properties| properties.get_mut("format"))
        .and_then(Value::as_object_mut);
    if let Some(format) = format {
        format.insert("const".into(), Value::from(SCHEMA_VERSION));
    }
    schema
}

/// Draft 2020-12, describing what serde writes (a field always written is required; one
/// skipped when empty is not).
fn generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12().for_serialize().with_transform(f32_as_written).into_generator()
}

/// Writes the `f32` numbers of a schema (the `default` of an `f32` field, alone or inside a
/// struct's default) as serde writes the field: schemars widens them to `f64` first, which
/// shows `0.8` as `0.800000011920929`. Only non-integer numbers that are exactly an `f32`
/// change, to that `f32`'s shortest form.
fn f32_as_written(schema: &mut Schema) {
    if let Some(object) = schema.as_object_mut() {
        for value in object.values_mut() {
            shorten_f32(value);
        }
    }
}

fn shorten_f32(value: &mut Value) {
    match value {
        Value::Number(number) if number.is_f64() => {
            let Some(wide) = number.as_f64() else { return };
            #[allow(clippy::cast_possible_truncation)]
            let narrow = wide as f32;
            if f64::from(narrow) == wide {
                let written = narrow.to_string().parse::<f64>().ok();
                if let Some(short) = written.and_then(serde_json::Number::from_f64) {
                    *number = short;
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(shorten_f32),
        Value::Object(map) => map.values_mut().for_each(shorten_f32),
        _ => {}
    }
}

/// A schema as the committed files hold it: pretty-printed JSON with every object's keys
/// sorted (whatever serde_json's `preserve_order`), ending with a newline.
pub fn to_pretty_json(schema: &Schema) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(&crate::canonical::Sorted(schema.as_value()))?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests;
