#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::terms::OutputSpec;
use serde_json::json;

#[test]
fn every_prefix_of_a_document_parses_to_what_is_known_so_far() {
    let text = r#"{"city": "Ly\u00f6n \"x\"", "tags": [1, 2.5, true, null], "n": {"a": -12}}"#;
    let cases = [
        ("", None),
        ("{", Some(json!({}))),
        (r#"{"ci"#, Some(json!({}))),
        (r#"{"city""#, Some(json!({}))),
        (r#"{"city": "#, Some(json!({}))),
        (r#"{"city": "Ly"#, Some(json!({"city": "Ly"}))),
        (r#"{"city": "Ly\u00"#, Some(json!({"city": "Ly"}))),
        (r#"{"city": "Ly\u00f6n \"#, Some(json!({"city": "Lyön "}))),
        (
            r#"{"city": "Ly\u00f6n \"x\"", "tags": [1, 2."#,
            Some(json!({"city": "Lyön \"x\"", "tags": [1]})),
        ),
        (r#"{"city": "", "tags": [1, tr"#, Some(json!({"city": "", "tags": [1]}))),
        (
            r#"{"city": "", "tags": [true, null], "n": {"a": -1"#,
            Some(json!({"city": "", "tags": [true, null], "n": {}})),
        ),
    ];
    for (prefix, expected) in cases {
        assert_eq!(parse_partial(prefix), expected, "prefix {prefix:?}");
    }
    assert_eq!(parse_partial(text), Some(serde_json::from_str(text).unwrap()));
    // Every prefix of the document parses without an error.
    for end in (0..=text.len()).filter(|end| text.is_char_boundary(*end)) {
        if end > 0 {
            assert!(parse_partial(&text[..end]).is_some(), "prefix {:?}", &text[..end]);
        }
    }
}

#[test]
fn text_that_is_not_json_gives_nothing() {
    assert_eq!(parse_partial("The answer is"), None);
    assert_eq!(parse_partial("{\"a\": x"), None);
    assert_eq!(parse_partial("[1 2]"), None);
    assert_eq!(parse_partial(&"[".repeat(1000)), None, "too deep");
}

#[test]
fn a_follower_emits_each_new_value_from_text_in_native_mode() {
    let spec = OutputSpec::new("a", json!({"type": "object", "properties": {}}))
        .with_mode(OutputMode::Native);
    let mut follower = PartialOutput::new(Some(&spec)).unwrap();
    let mut seen = Vec::new();
    for piece in ["```json\n{\"ci", "ty\": \"Ly", "on\"", ", \"n\": 4", "2}", "\n```"] {
        let chunk = StreamChunk::TextDelta { text: piece.into() };
        if let Some(Event::OutputDelta { partial }) = follower.push(&chunk) {
            seen.push(partial);
        }
    }
    assert_eq!(
        seen,
        [
            json!({}),
            json!({"city": "Ly"}),
            json!({"city": "Lyon"}),
            json!({"city": "Lyon", "n": 42})
        ]
    );
}

#[test]
fn a_follower_reads_the_final_answer_tools_arguments_in_tool_mode() {
    let spec = OutputSpec::new("a", json!({"type": "array"})).with_mode(OutputMode::Tool);
    let mut follower = PartialOutput::new(Some(&spec)).unwrap();
    let chunks = [
        StreamChunk::TextDelta { text: "{\"ignored\": 1}".into() },
        StreamChunk::ToolCallStart { id: "other".into(), name: "search".into() },
        StreamChunk::ToolCallDelta { id: "other".into(), delta: "{\"q\": 1}".into() },
        StreamChunk::ToolCallStart { id: "f".into(), name: OUTPUT_TOOL.into() },
        StreamChunk::ToolCallDelta { id: "f".into(), delta: "{\"response\": [1,".into() },
        StreamChunk::ToolCallDelta { id: "f".into(), delta: " 2]}".into() },
    ];
    let seen: Vec<Value> = chunks
        .iter()
        .filter_map(|c| match follower.push(c) {
            Some(Event::OutputDelta { partial }) => Some(partial),
            _ => None,
        })
        .collect();
    // Wrapped: the value inside `response`.
    assert_eq!(seen, [json!([1]), json!([1, 2])]);
}

#[test]
fn a_long_answer_is_parsed_a_bounded_number_of_times() {
    let spec = OutputSpec::new("a", json!({"type": "object", "properties": {}}))
        .with_mode(OutputMode::Native);
    let mut follower = PartialOutput::new(Some(&spec)).unwrap();
    let mut events = 0;
    let _ = follower.push(&StreamChunk::TextDelta { text: "{\"text\": \"".into() });
    for _ in 0..100_000 {
        if follower.push(&StreamChunk::TextDelta { text: "ab".into() }).is_some() {
            events += 1;
        }
    }
    // Growth by a sixteenth each time: about 16 · ln(200 000 / 16) + 16 parses.
    assert!(events < 200, "{events} parses");
    // The end of the stream parses what came after the last parse.
    let _ = follower.push(&StreamChunk::TextDelta { text: "c\"}".into() });
    let Some(Event::OutputDelta { partial }) = follower.finish() else { panic!("the last value") };
    assert_eq!(partial["text"].as_str().map(str::len), Some(200_001));
    assert!(follower.finish().is_none(), "nothing new");
}
