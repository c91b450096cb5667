//! Streamed function-call arguments (`streamFunctionCallArguments`): a call opens with its
//! name and `willContinue: true`, its arguments arrive as `partialArgs` (a JSON path and a
//! value each; a string may continue in the next piece for the same path), and a part without
//! `willContinue` (often an empty `functionCall: {}`) closes it.

use serde::Deserialize;
use serde_json::{Map, Value};

/// One piece of a streamed call's arguments.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PartialArg {
    json_path: String,
    #[serde(default)]
    string_value: Option<String>,
    #[serde(default)]
    number_value: Option<serde_json::Number>,
    #[serde(default)]
    bool_value: Option<bool>,
    #[serde(default)]
    null_value: Option<Value>,
    /// The string value continues in the next piece for this path.
    #[serde(default)]
    will_continue: Option<bool>,
}

/// A call whose arguments are still streaming.
#[derive(Debug)]
pub(super) struct OpenCall {
    pub(super) id: String,
    args: Value,
    /// The path whose string value the next piece continues.
    continuing: Option<String>,
}

impl OpenCall {
    pub(super) fn new(id: String) -> Self {
        Self { id, args: Value::Object(Map::new()), continuing: None }
    }

    /// Applies pieces; an error names a path that is not a JSON path agentloop can follow.
    pub(super) fn apply(&mut self, pieces: Vec<PartialArg>) -> Result<(), String> {
        for piece in pieces {
            let continues = self.continuing.take().is_some_and(|p| p == piece.json_path);
            let slot = slot(&mut self.args, &piece.json_path)?;
            if let Some(text) = piece.string_value {
                match slot {
                    Value::String(existing) if continues => existing.push_str(&text),
                    other => *other = Value::String(text),
                }
            } else if let Some(number) = piece.number_value {
                *slot = Value::Number(number);
            } else if let Some(flag) = piece.bool_value {
                *slot = Value::Bool(flag);
            } else if piece.null_value.is_some() {
                *slot = Value::Null;
            }
            if piece.will_continue == Some(true) {
                self.continuing = Some(piece.json_path);
            }
        }
        Ok(())
    }

    /// The arguments assembled so far, as JSON text.
    pub(super) fn arguments(&self) -> String {
        crate::canonical::to_string(&self.args)
    }
}

/// The value at `path` (`$.a.b[0]`, `$['a b']`), made (with objects, arrays and nulls on the
/// way) if absent.
fn slot<'a>(root: &'a mut Value, path: &str) -> Result<&'a mut Value, String> {
    let bad = || format!("unsupported JSON path {path:?} in streamed arguments");
    let mut rest = path.strip_prefix('$').ok_or_else(bad)?;
    let mut here = root;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let (key, next) = after.split_at(end);
            if key.is_empty() {
                return Err(bad());
            }
            here = field(here, key);
            rest = next;
        } else if let Some(after) = rest.strip_prefix("['").or_else(|| rest.strip_prefix("[\"")) {
            let quote = if rest.starts_with("['") { "']" } else { "\"]" };
            let end = after.find(quote).ok_or_else(bad)?;
            here = field(here, &after[..end]);
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').ok_or_else(bad)?;
            let index: usize = after[..end].parse().map_err(|_| bad())?;
            if !here.is_array() {
                *here = Value::Array(Vec::new());
            }
            let Value::Array(items) = here else { return Err(bad()) };
            if items.len() <= index {
                items.resize(index + 1, Value::Null);
            }
            here = &mut items[index];
            rest = &after[end + 1..];
        } else {
            return Err(bad());
        }
    }
    Ok(here)
}

fn field<'a>(value: &'a mut Value, key: &str) -> &'a mut Value {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    match value {
        Value::Object(map) => map.entry(key.to_owned()).or_insert(Value::Null),
        // Made an object just above.
        other => other,
    }
}

#[cfg(test)]
mod tests;
