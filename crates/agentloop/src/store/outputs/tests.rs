#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::event::Event;
use crate::message::ToolResult;
use serde_json::json;
use std::collections::HashMap;

fn completed(seq: u64, call_id: &str, content: ToolResultContent) -> JournalEntry {
    let event = Event::ToolCompleted {
        name: "t".into(),
        result: ToolResult { call_id: call_id.into(), content, is_error: false },
        duration_ms: 1,
        control: None,
        usage: None,
        cost_usd: None,
        remote: None,
    };
    JournalEntry::of(seq, event).unwrap()
}

fn content_of(entry: &JournalEntry) -> &ToolResultContent {
    match entry.event.tool_result() {
        Some(result) => &result.content,
        None => panic!("not a tool event"),
    }
}

/// The artifacts of a split, by id.
fn by_id(artifacts: &[OutputArtifact]) -> HashMap<String, Vec<u8>> {
    artifacts.iter().map(|a| (a.meta.id.clone(), a.data.clone())).collect()
}

#[test]
fn outputs_under_the_limit_or_without_one_are_left_in_place() {
    let entries = [completed(0, "c1", ToolResultContent::Text("x".repeat(99)))];
    assert!(by_reference("r", &entries, Some(100)).is_none());
    assert!(by_reference("r", &entries, None).is_none());
    let json = [completed(0, "c1", ToolResultContent::Json(json!({"k": "v"})))];
    // `{"k":"v"}` is 9 bytes.
    assert!(by_reference("r", &json, Some(10)).is_none());
    assert!(by_reference("r", &json, Some(9)).is_some());
}

#[test]
fn large_outputs_become_references_and_come_back_whole() {
    let text = "é line\n".repeat(50);
    let value = json!({"b": [1, 2, 3], "a": "x".repeat(200)});
    let entries = [
        completed(0, "small", ToolResultContent::Text("ok".into())),
        completed(1, "text", ToolResultContent::Text(text.clone())),
        completed(2, "json", ToolResultContent::Json(value.clone())),
    ];
    let Some((stored, artifacts)) = by_reference("run-1", &entries, Some(100)) else {
        panic!("two outputs are over the limit")
    };
    assert_eq!(stored[0], entries[0]);
    assert_eq!(artifacts.len(), 2);
    let text_ref = match content_of(&stored[1]) {
        ToolResultContent::Stored(stored) => (**stored).clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(text_ref.bytes, text.len() as u64);
    assert!(!text_ref.json);
    assert_eq!(artifacts[0].data, text.as_bytes());
    assert_eq!(artifacts[0].meta.media_type, TEXT_MEDIA_TYPE);
    assert_eq!(artifacts[0].meta.run_id, "run-1");
    assert_eq!(artifacts[0].meta.name, "tool-output-text");
    assert_eq!(artifacts[0].meta.created_ms, entries[1].at_ms);
    assert_eq!(artifacts[1].meta.media_type, JSON_MEDIA_TYPE);
    assert_eq!(artifacts[1].data, crate::canonical::to_string(&value).as_bytes());
    // Serialized, a reference is small and names its artifact.
    let json = serde_json::to_string(&stored[1].event).unwrap();
    assert!(json.len() < 300, "{json}");
    assert!(json.contains(&text_ref.artifact), "{json}");
    assert_eq!(referenced(&stored), [artifacts[0].meta.id.clone(), artifacts[1].meta.id.clone()]);

    let data = by_id(&artifacts);
    let mut loaded = stored.clone();
    restore("run-1", &mut loaded, |id| Ok(data.get(id).cloned())).unwrap();
    assert_eq!(loaded, entries, "text and JSON come back as they were");
    // A journal that holds a reference already keeps it.
    assert!(by_reference("run-1", &stored[1..2], Some(1)).is_none());
}

#[test]
fn a_missing_or_damaged_artifact_is_a_corrupt_journal() {
    let entries = [completed(4, "c", ToolResultContent::Text("y".repeat(64)))];
    let Some((stored, artifacts)) = by_reference("run-2", &entries, Some(8)) else {
        panic!("over the limit")
    };
    let id = artifacts[0].meta.id.clone();
    let cases: [(Option<Vec<u8>>, &str); 3] = [
        (None, "is missing"),
        (Some(b"short".to_vec()), "has 5 bytes, but the journal says 64"),
        (Some(vec![0xff; 64]), "is not UTF-8"),
    ];
    for (data, why) in cases {
        let mut loaded = stored.clone();
        let error = restore("run-2", &mut loaded, |_| Ok(data.clone()));
        match error {
            Err(StoreError::Corrupt(message)) => {
                assert!(message.contains("run 'run-2', entry 4"), "{message}");
                assert!(message.contains(&id), "{message}");
                assert!(message.contains(why), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
    // A store error while reading is passed on as it is.
    let mut loaded = stored;
    let error = restore("run-2", &mut loaded, |_| Err(StoreError::Invalid("down".into())));
    assert_eq!(error, Err(StoreError::Invalid("down".into())));
}
