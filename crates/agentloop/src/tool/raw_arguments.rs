//! The one rule for argument text that is not JSON.
//!
//! A model's tool-call arguments are text ([`ToolCall::arguments`]). Where the runtime needs
//! them as a JSON value — the `tool_started` and `approval_requested` events, the audit trail,
//! the view `before_tool` and approval hooks get — text that does not parse (with
//! [`parse_arguments`]) is shown as the object `{"_raw": "<the text>"}`: [`wrap`] builds it,
//! [`unwrap`] recognises it, [`KEY`] is its one key. The tool itself never receives that
//! object: a call whose text is not JSON is answered with an error instead of running.
//!
//! ```
//! use agentloop::tool::raw_arguments;
//! use serde_json::json;
//!
//! assert_eq!(raw_arguments::wrap("{\"a\": "), json!({"_raw": "{\"a\": "}));
//! assert_eq!(raw_arguments::unwrap(&json!({"_raw": "oops"})), Some("oops"));
//! assert_eq!(raw_arguments::unwrap(&json!({"a": 1})), None);
//! // Parsed when it is JSON, wrapped when it is not.
//! assert_eq!(raw_arguments::parse_or_wrap("{\"a\":1}"), json!({"a": 1}));
//! assert_eq!(raw_arguments::parse_or_wrap("oops"), json!({"_raw": "oops"}));
//! ```
//!
//! [`ToolCall::arguments`]: crate::message::ToolCall::arguments

use super::parse_arguments;
use serde_json::{Map, Value};

/// The key of the object that carries argument text that is not JSON.
pub const KEY: &str = "_raw";

/// The JSON value that stands for argument text that is not JSON: `{"_raw": text}`.
pub fn wrap(text: impl Into<String>) -> Value {
    let mut object = Map::with_capacity(1);
    object.insert(KEY.to_owned(), Value::String(text.into()));
    Value::Object(object)
}

/// The argument text inside a value [`wrap`] built: `Some(text)` for an object whose only key
/// is `"_raw"` with a string value, `None` for anything else.
pub fn unwrap(value: &Value) -> Option<&str> {
    match value {
        Value::Object(object) if object.len() == 1 => object.get(KEY)?.as_str(),
        _ => None,
    }
}

/// Whether `value` is the stand-in for argument text that is not JSON.
pub fn is_raw(value: &Value) -> bool {
    unwrap(value).is_some()
}

/// The argument text as a JSON value: parsed with [`parse_arguments`] (empty text is `{}`),
/// or [`wrap`]ped when it is not JSON.
pub fn parse_or_wrap(text: &str) -> Value {
    parse_arguments(text).unwrap_or_else(|_| wrap(text))
}

/// A parse result as a JSON value: the parsed arguments, or `text` [`wrap`]ped when the
/// parse failed (for callers that parsed already).
pub fn or_wrap(parsed: Option<Value>, text: &str) -> Value {
    parsed.unwrap_or_else(|| wrap(text))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use serde_json::json;

    #[test]
    fn wrap_builds_the_one_key_object() {
        assert_eq!(wrap("{\"a\": "), json!({"_raw": "{\"a\": "}));
        assert_eq!(wrap(String::new()), json!({"_raw": ""}));
        assert_eq!(KEY, "_raw");
    }

    #[test]
    fn unwrap_recognises_only_what_wrap_builds() {
        for text in ["oops", "", "{\"a\": ", "\u{1F600} ünïcode"] {
            assert_eq!(unwrap(&wrap(text)), Some(text));
            assert!(is_raw(&wrap(text)));
        }
        for other in [
            json!({"_raw": 1}),
            json!({"_raw": "x", "b": 2}),
            json!({"raw": "x"}),
            json!({}),
            json!("_raw"),
            json!(["_raw", "x"]),
            Value::Null,
        ] {
            assert_eq!(unwrap(&other), None, "{other}");
            assert!(!is_raw(&other));
        }
    }

    #[test]
    fn parse_or_wrap_parses_json_and_wraps_the_rest() {
        assert_eq!(parse_or_wrap("{\"a\":1}"), json!({"a": 1}));
        assert_eq!(parse_or_wrap("  "), json!({}));
        assert_eq!(parse_or_wrap("[1]"), json!([1]));
        assert_eq!(parse_or_wrap("{\"a\": "), json!({"_raw": "{\"a\": "}));
        assert_eq!(parse_or_wrap("oops"), wrap("oops"));
    }

    #[test]
    fn or_wrap_keeps_a_parse_and_wraps_a_failure() {
        assert_eq!(or_wrap(Some(json!({"a": 1})), "ignored"), json!({"a": 1}));
        assert_eq!(or_wrap(None, "oops"), json!({"_raw": "oops"}));
    }

    #[test]
    fn a_wrapped_value_serializes_as_the_journal_shows_it() {
        assert_eq!(crate::canonical::to_string(&wrap("a\"b")), r#"{"_raw":"a\"b"}"#);
    }
}
