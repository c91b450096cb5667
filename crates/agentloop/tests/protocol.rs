//! Envelopes: an executor's event stream numbered like the journal — journaled events with
//! their journal `seq`, stream-only events with the last journaled `seq` and a `sub`-index —
//! with a store and without one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::event::Event;
use agentloop::protocol::{envelopes, Envelope};
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::store::{MemoryStore, RunStore};
use agentloop::{Agent, RunOptions};
use common::Add;
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;

fn turns() -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::tool_call("add", json!({"a": 2, "b": 3})).with_text("Adding."),
        ScriptedTurn::text("2 + 3 = 5."),
    ]
}

/// Positions strictly increase, and every stream-only event follows the journaled event
/// whose `seq` it carries.
fn check_numbering(envelopes: &[Envelope]) {
    for pair in envelopes.windows(2) {
        assert!(pair[0].position() < pair[1].position(), "{:?} {:?}", pair[0], pair[1]);
    }
    for (index, envelope) in envelopes.iter().enumerate() {
        assert_eq!(envelope.is_journaled(), envelope.event.is_durable(), "{envelope:?}");
        if !envelope.is_journaled() && envelope.seq > 0 {
            let before = envelopes[..index].iter().rev().find(|e| e.is_journaled()).unwrap();
            assert_eq!(before.seq, envelope.seq);
        }
    }
}

#[tokio::test]
async fn a_journaled_stream_is_numbered_like_its_journal() {
    let store = Arc::new(MemoryStore::new());
    let agent =
        Agent::builder(ScriptedModel::new(turns())).tool(Add).store(store.clone()).build().unwrap();
    let options = RunOptions { run_id: Some("run_env".into()), ..RunOptions::default() };
    let stream = agent.run_stream_with("2+3?", options);
    let numbered: Vec<Envelope> = envelopes("run_env".into(), stream, 0).collect().await;
    check_numbering(&numbered);
    assert!(numbered.iter().all(|e| e.run_id == "run_env" && e.event.kind() != "checkpointed"));
    assert!(numbered.iter().any(|e| e.event.kind() == "text_delta"), "deltas are numbered too");
    let journal = store.load("run_env").await.unwrap();
    let journaled: Vec<(u64, Event)> =
        numbered.iter().filter(|e| e.is_journaled()).map(|e| (e.seq, e.event.clone())).collect();
    let expected: Vec<(u64, Event)> =
        journal.into_iter().map(|e| (e.seq, e.event.into_event())).collect();
    assert_eq!(journaled, expected);
    // As JSON: `sub` is left out for journaled events.
    let text = serde_json::to_string(&numbered[0]).unwrap();
    assert!(text.starts_with(r#"{"run_id":"run_env","seq":0,"at_ms":"#), "{text}");
    assert!(!text.contains("\"sub\""), "{text}");
    let back: Envelope = serde_json::from_str(&text).unwrap();
    assert_eq!(back, numbered[0]);
    // Every envelope, journaled or streamed, matches the committed schema.
    let validator = jsonschema::validator_for(agentloop::schema::envelope().as_value()).unwrap();
    for envelope in &numbered {
        let value = serde_json::to_value(envelope).unwrap();
        if let Err(error) = validator.validate(&value) {
            panic!("{}: {error}", envelope.event.kind());
        }
    }
}

#[tokio::test]
async fn without_a_store_durable_events_are_numbered_in_order() {
    let agent = Agent::builder(ScriptedModel::new(turns())).tool(Add).build().unwrap();
    let stream = agent.run_stream("2+3?");
    let numbered: Vec<Envelope> = envelopes("run_mem".into(), stream, 0).collect().await;
    check_numbering(&numbered);
    let seqs: Vec<u64> = numbered.iter().filter(|e| e.is_journaled()).map(|e| e.seq).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(numbered.last().unwrap().event.kind(), "run_finished");
}
