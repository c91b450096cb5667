#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

#[test]
fn the_entry_schema_pins_the_version_and_defines_the_event() {
    let schema = journal_entry();
    let value = schema.as_value();
    assert_eq!(value["properties"]["schema_version"]["const"], SCHEMA_VERSION);
    assert!(value["$defs"]["Event"].is_object(), "{value:#}");
    let text = to_pretty_json(&schema).unwrap();
    assert!(text.ends_with("}\n"));
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), *value);
}

#[test]
fn f32_defaults_are_shown_as_serde_writes_them() {
    let text = to_pretty_json(&journal_entry()).unwrap();
    let written = serde_json::to_string(&crate::context::CompactionConfig::default()).unwrap();
    assert!(written.contains(r#""threshold":0.8"#), "{written}");
    assert!(text.contains(r#""default": 0.8,"#), "{text}");
    assert!(!text.contains("0.800000011920929"), "{text}");
}
