#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use serde_json::json;

#[test]
fn events_are_tagged_snake_case() {
    let event = Event::ToolArgumentsDelta { call_id: "c".into(), delta: "{\"a\"".into() };
    assert_eq!(
        serde_json::to_value(&event).unwrap(),
        json!({"type": "tool_arguments_delta", "call_id": "c", "delta": "{\"a\""})
    );
    assert_eq!(event.kind(), "tool_arguments_delta");
    assert!(!event.is_durable());
    let limit =
        Event::LimitReached { limit: crate::run::LimitKind::ToolCallsOf { tool: "add".into() } };
    assert_eq!(
        serde_json::to_value(&limit).unwrap(),
        json!({"type": "limit_reached", "limit": {"kind": "tool_calls_of", "tool": "add"}})
    );
    assert!(limit.is_durable());
    assert_eq!(serde_json::to_value(Event::Resumed).unwrap(), json!({"type": "resumed"}));
}

#[test]
fn every_kind_matches_its_serde_tag() {
    let samples = [
        Event::Resumed,
        Event::Paused { reason: "r".into() },
        Event::IterationStarted { iteration: 1, at_ms: 0 },
        Event::IterationCompleted { iteration: 1, duration_ms: 0 },
        Event::TextDelta { delta: "x".into() },
        Event::StepStarted { call_id: "c".into(), name: "t".into() },
        Event::HookFailed {
            hook: "h".into(),
            point: "p".into(),
            error: "e".into(),
            critical: false,
        },
        Event::ContinuationRequested { prompt: "p".into() },
        Event::Checkpointed { seq: 3 },
        Event::JournalFailed { error: "disk full".into() },
        Event::Nested { call_id: "c".into(), run_id: None, event: Box::new(Event::Resumed) },
    ];
    for event in samples {
        assert_eq!(serde_json::to_value(&event).unwrap()["type"], event.kind());
    }
    assert!(!Event::Checkpointed { seq: 0 }.is_durable());
    assert!(!Event::JournalFailed { error: String::new() }.is_durable());
    // Stream-only whatever it holds.
    let nested =
        Event::Nested { call_id: "c".into(), run_id: None, event: Box::new(Event::Resumed) };
    assert!(Event::Resumed.is_durable() && !nested.is_durable());
}

/// Every event is moved through the stream several times: keep the enum small (large
/// payloads are boxed). A performance guard, not a timing. The bound is for serde_json's
/// usual 32-byte `Value`; with its `preserve_order` feature (which another crate of the build
/// may turn on) a `Value` is larger, and the events that hold one inline grow with it.
#[test]
fn events_stay_small() {
    let value_growth = std::mem::size_of::<serde_json::Value>().saturating_sub(32);
    let size = std::mem::size_of::<Event>();
    assert!(size <= 160 + value_growth, "Event is {size} bytes");
}

#[test]
fn a_journal_event_is_never_a_delta() {
    let delta = Event::TextDelta { delta: "Hel".into() };
    let refused = JournalEvent::new(delta.clone()).unwrap_err();
    assert_eq!(*refused.0, delta, "the event is given back");
    assert_eq!(
        refused.to_string(),
        "a text_delta event is stream-only: a run journal holds durable events"
    );
    // Read from JSON (a journal written by hand, or corrupted): refused as well.
    let json = serde_json::to_string(&delta).unwrap();
    let error = serde_json::from_str::<JournalEvent>(&json).unwrap_err();
    assert!(error.to_string().contains("stream-only"), "{error}");

    let resumed = JournalEvent::new(Event::Resumed).unwrap();
    assert_eq!(resumed, Event::Resumed);
    assert_eq!(resumed.kind(), "resumed", "it reads as its event");
    // Serialized as the event itself, and read back.
    assert_eq!(serde_json::to_value(&resumed).unwrap(), json!({"type": "resumed"}));
    let back: JournalEvent = serde_json::from_value(json!({"type": "resumed"})).unwrap();
    assert_eq!(back.into_event(), Event::Resumed);
}
