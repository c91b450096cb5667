//! Canonical JSON: what this crate writes does not depend on serde_json's `preserve_order`
//! feature.
//!
//! A [`serde_json::Map`] keeps its keys sorted, unless `preserve_order` is on (another crate
//! of the build may turn it on: cargo unifies features), when it keeps them in insertion
//! order. So a [`Value`] built by `json!`, parsed from a model's text or converted from a
//! struct writes its object keys in an order that depends on the build. Everything the crate
//! writes from a `Value` — journal entries, events, snapshots, request bodies, tool results as
//! text, the tools prompt — goes through this module instead, and writes every object's keys
//! sorted: the bytes are those of a build without `preserve_order`. Structs still write their
//! fields in declaration order; only `Value` objects are sorted.
//!
//! - [`to_string`]: a `Value` as compact canonical JSON text.
//! - [`Sorted`]: a `Value` wrapped to serialize canonically with any serializer.
//! - [`serialize`], [`serialize_option`], [`serialize_map`]: for `#[serde(serialize_with)]`
//!   on fields that hold a `Value` (or an `Arc<Value>`), an `Option<Value>` or a `Map`.

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};
use std::borrow::Borrow;

/// `value` as compact JSON text with every object's keys sorted.
pub fn to_string(value: &Value) -> String {
    to_string_with_capacity(value, 0)
}

/// [`to_string`] into a buffer of `capacity` bytes (about the length of the text, e.g. the
/// length of the text the value was parsed from).
pub(crate) fn to_string_with_capacity(value: &Value, capacity: usize) -> String {
    let mut out = String::with_capacity(capacity);
    write_value(value, &mut out);
    out
}

/// A `Value` that serializes with every object's keys sorted (with any serializer).
#[derive(Debug, Clone, Copy)]
pub struct Sorted<'a>(pub &'a Value);

impl Serialize for Sorted<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => serialize_map(map, serializer),
            Value::Array(items) => serializer.collect_seq(items.iter().map(Sorted)),
            other => other.serialize(serializer),
        }
    }
}

/// Serializes a `Value` (or an `Arc<Value>`) canonically: `#[serde(serialize_with =
/// "crate::canonical::serialize")]`.
pub fn serialize<V: Borrow<Value>, S: Serializer>(
    value: &V,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    Sorted(value.borrow()).serialize(serializer)
}

/// Serializes an `Option<Value>` canonically.
pub fn serialize_option<S: Serializer>(
    value: &Option<Value>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => serializer.serialize_some(&Sorted(value)),
        None => serializer.serialize_none(),
    }
}

/// Serializes a `Map` canonically (keys sorted, and so are the objects inside).
pub fn serialize_map<S: Serializer>(
    map: &Map<String, Value>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    if keys_are_sorted(map) {
        // Always so without `preserve_order`: no list to sort.
        serializer.collect_map(map.iter().map(|(key, value)| (key, Sorted(value))))
    } else {
        serializer
            .collect_map(sorted_entries(map).into_iter().map(|(key, value)| (key, Sorted(value))))
    }
}

fn keys_are_sorted(map: &Map<String, Value>) -> bool {
    map.keys().zip(map.keys().skip(1)).all(|(a, b)| a < b)
}

fn sorted_entries(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    entries
}

/// Appends `value` as canonical JSON to `out`, in one buffer (no string per key or item).
fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            out.push('{');
            if keys_are_sorted(map) {
                write_entries(map.iter(), out);
            } else {
                write_entries(sorted_entries(map).into_iter(), out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out);
            }
            out.push(']');
        }
        Value::String(text) => write_json_string(text, out),
        other => {
            use std::fmt::Write as _;
            let _ = write!(out, "{other}");
        }
    }
}

fn write_entries<'a>(entries: impl Iterator<Item = (&'a String, &'a Value)>, out: &mut String) {
    for (i, (key, value)) in entries.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_json_string(key, out);
        out.push(':');
        write_value(value, out);
    }
}

/// Appends `text` as a JSON string literal, escaped as `serde_json` escapes it.
fn write_json_string(text: &str, out: &mut String) {
    out.push('"');
    let mut start = 0;
    for (i, byte) in text.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

#[cfg(test)]
mod tests;
