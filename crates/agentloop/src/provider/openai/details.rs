//! `reasoning_details`: signed reasoning as OpenRouter and other OpenAI-compatible gateways
//! send it beside (or instead of) `reasoning` — `reasoning.text` (text and, for Anthropic
//! models, a `signature` in the `anthropic-claude-v1` format), `reasoning.summary` and
//! `reasoning.encrypted` items. The gateways need them back, unchanged, with the assistant
//! turn for a tool loop with thinking to go on. Streamed, an item comes in fragments that share
//! its `index`: their texts add up, their other fields (the signature) are the last given.
//! Kept as the reasoning part's opaque value `{"reasoning_details": [...]}`; sent back only
//! by this family (another family's encoder ignores it).

use crate::message::{Message, Part};
use serde_json::{Map, Value};

/// The key of the reasoning part's opaque value that holds the items.
const KEY: &str = "reasoning_details";

/// The fields whose fragments add up.
const TEXTS: [&str; 3] = ["text", "summary", "data"];

/// Adds streamed `fragments` to the items so far (see the module docs).
pub(super) fn merge(items: &mut Vec<Value>, fragments: Vec<Value>) {
    for fragment in fragments {
        let Value::Object(fragment) = fragment else { continue };
        let same = |item: &&mut Value| {
            fragment.get("index").is_some()
                && item.get("index") == fragment.get("index")
                && item.get("type") == fragment.get("type")
        };
        match items.iter_mut().find(same) {
            Some(Value::Object(item)) => add(item, fragment),
            _ => items.push(Value::Object(fragment)),
        }
    }
}

fn add(item: &mut Map<String, Value>, fragment: Map<String, Value>) {
    for (key, value) in fragment {
        match (item.get_mut(&key), value) {
            (Some(Value::String(before)), Value::String(more)) if TEXTS.contains(&key.as_str()) => {
                before.push_str(&more);
            }
            (_, Value::Null) => {}
            (_, value) => {
                item.insert(key, value);
            }
        }
    }
}

/// The readable text of the items (`reasoning.text` texts and `reasoning.summary`
/// summaries), for a server that sends no `reasoning` string beside them.
pub(super) fn text(items: &[Value]) -> Option<String> {
    let text: String = items
        .iter()
        .filter_map(|item| item.get("text").or_else(|| item.get("summary")))
        .filter_map(Value::as_str)
        .collect();
    Some(text).filter(|text| !text.is_empty())
}

/// The opaque value of a reasoning part that keeps `items`.
pub(super) fn opaque(items: Vec<Value>) -> Option<Value> {
    (!items.is_empty()).then(|| Value::Object(Map::from_iter([(KEY.to_owned(), items.into())])))
}

/// The items an assistant message's reasoning parts keep, to send back.
pub(super) fn of(message: &Message) -> Vec<Value> {
    message
        .content
        .iter()
        .filter_map(|part| match part {
            Part::Reasoning(reasoning) => reasoning.opaque.as_ref()?.get(KEY)?.as_array(),
            _ => None,
        })
        .flatten()
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fragments_of_one_item_add_up_and_the_signature_is_the_last_given() {
        let mut items = Vec::new();
        let fragment = |text: &str, signature: Value| {
            json!([{"type": "reasoning.text", "text": text, "signature": signature,
                    "format": "anthropic-claude-v1", "index": 0}])
        };
        for (text, signature) in [("The user", Value::Null), (" asks.", json!("c2ln"))] {
            let Value::Array(fragments) = fragment(text, signature) else { unreachable!() };
            merge(&mut items, fragments);
        }
        merge(&mut items, vec![json!({"type": "reasoning.encrypted", "data": "ZW5j", "index": 1})]);
        assert_eq!(
            items,
            [
                json!({"type": "reasoning.text", "text": "The user asks.", "signature": "c2ln",
                       "format": "anthropic-claude-v1", "index": 0}),
                json!({"type": "reasoning.encrypted", "data": "ZW5j", "index": 1}),
            ]
        );
        assert_eq!(text(&items).as_deref(), Some("The user asks."));
    }
}
