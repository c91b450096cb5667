#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

//! The JSON of every event a tool round trip records (durable and streamed) and of the run's
//! snapshot, compared byte for byte with a golden file: the journal format must not change
//! when the in-memory payloads do (shared `Arc`s serialize as their contents).

use super::*;

const GOLDEN: &str = include_str!("journal.golden.jsonl");

/// Each event as one JSON line, then the serialized run mid-way (calls pending) and at the end.
fn lines() -> String {
    let mut out = Vec::new();
    let push = |run: &mut Run, out: &mut Vec<String>| {
        out.extend(run.drain_events().map(|e| serde_json::to_string(&e).unwrap()));
    };
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    let mut response =
        calls_response(&[("a", "add", r#"{"x":1}"#), ("b", "add", "oops"), ("c", "add", "{}")]);
    response.message.content.insert(0, Part::text("thinking aloud"));
    run.model_responded(response, ms(3)).unwrap();
    push(&mut run, &mut out);
    out.push(serde_json::to_string(&run).unwrap());
    run.set_elapsed(ms(5));
    assert_eq!(run.gate_tool("a").unwrap(), Gate::Run);
    run.tool_started("a", Some(json!({"x": 1}))).unwrap();
    run.tool_started("b", None).unwrap();
    run.tool_deferred("c", json!({"_approve": true})).unwrap();
    run.tool_finished("a", Ok(ToolOutput::Value(json!({"sum": 2}))), ms(7)).unwrap();
    run.tool_finished("b", Err(ToolError::Failed("bad arguments".into())), ms(1)).unwrap();
    push(&mut run, &mut out);
    let Step::Finish(_) = run.next_step() else { panic!("expected suspension") };
    push(&mut run, &mut out);
    run.decide("c", Decision::Approve).unwrap();
    let Step::CallTools(calls) = run.next_step() else { panic!("expected the approved call") };
    assert_eq!(calls.len(), 1);
    run.tool_started("c", Some(json!({}))).unwrap();
    run.tool_finished("c", Err(ToolError::Timeout(20)), ms(20)).unwrap();
    push(&mut run, &mut out);
    let _ = expect_model(&mut run);
    run.model_responded(text_response("done"), ms(4)).unwrap();
    let _ = expect_finish(&mut run);
    push(&mut run, &mut out);
    out.push(serde_json::to_string(&run).unwrap());
    let mut text = out.join("\n");
    text.push('\n');
    text
}

#[test]
fn the_journal_json_is_unchanged() {
    let text = lines();
    if std::env::var_os("AGENTLOOP_UPDATE_GOLDEN").is_some() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/run/tests/journal.golden.jsonl");
        std::fs::write(path, &text).unwrap();
        return;
    }
    for (i, (got, want)) in text.lines().zip(GOLDEN.lines()).enumerate() {
        assert_eq!(got, want, "line {}", i + 1);
    }
    assert_eq!(text, GOLDEN);
}

#[test]
fn every_event_reads_back_to_the_same_json() {
    let text = lines();
    let mut durable = Vec::new();
    for line in text.lines().filter(|line| line.starts_with(r#"{"type""#)) {
        let event: Event = serde_json::from_str(line).unwrap();
        assert_eq!(serde_json::to_string(&event).unwrap(), line);
        if event.is_durable() {
            durable.push(event);
        }
    }
    let run = Run::from_journal(&durable).unwrap();
    assert!(run.is_finished());
}

#[test]
fn the_response_id_and_model_are_journaled_when_reported() {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    let response = ModelResponse {
        id: Some("chatcmpl-1".into()),
        model: Some("gpt-test-2025".into()),
        provider: None,
        ..text_response("done")
    };
    run.model_responded(response, ms(2)).unwrap();
    let responded = run
        .drain_events()
        .find(|e| matches!(e, Event::ModelResponded { .. }))
        .expect("a model_responded event");
    let Event::ModelResponded { response_id, response_model, .. } = &responded else {
        panic!("not model_responded: {responded:?}")
    };
    assert_eq!(response_id.as_deref(), Some("chatcmpl-1"));
    assert_eq!(response_model.as_deref(), Some("gpt-test-2025"));
    let json = serde_json::to_value(&responded).unwrap();
    assert_eq!(json["response_id"], "chatcmpl-1");
    assert_eq!(json["response_model"], "gpt-test-2025");
    let read: Event = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(read, responded);

    // Without them (a provider that does not report them, a journal written before): no
    // keys, and the old JSON reads back with none.
    let mut old = json;
    let object = old.as_object_mut().unwrap();
    object.remove("response_id");
    object.remove("response_model");
    let read: Event = serde_json::from_value(old.clone()).unwrap();
    assert!(matches!(&read, Event::ModelResponded { response_id: None, response_model: None, .. }));
    assert_eq!(serde_json::to_value(&read).unwrap(), old);
}
