//! The JSON Schemas of the journal format (`docs/schema/`): the committed files are what the
//! types generate today (byte for byte), real journals validate against them, and readers
//! ignore fields they do not know.
//!
//! After a change of the journal or event types, regenerate the files with
//! `AGENTLOOP_REGENERATE_SCHEMA=1 cargo test -p agentloop --test schema` and commit them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::AskHuman;

use agentloop::message::Usage;
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::ProviderError;
use agentloop::run::Price;
use agentloop::run::SCHEMA_VERSION;
use agentloop::store::JournalEntry;
use agentloop::store::MemoryStore;
use agentloop::store::RunStore;
use common::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const REGENERATE: &str = "AGENTLOOP_REGENERATE_SCHEMA";

fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema")
}

/// The committed schema files and what generates them.
fn schemas() -> [(&'static str, schemars::Schema); 3] {
    [
        ("journal-entry.schema.json", agentloop::schema::journal_entry()),
        ("event.schema.json", agentloop::schema::event()),
        ("envelope.schema.json", agentloop::schema::envelope()),
    ]
}

#[test]
fn the_committed_schemas_are_current() {
    let regenerate = std::env::var_os(REGENERATE).is_some_and(|v| !v.is_empty() && v != "0");
    let mut stale = Vec::new();
    for (name, schema) in schemas() {
        let path = schema_dir().join(name);
        let generated = agentloop::schema::to_pretty_json(&schema).unwrap();
        if regenerate {
            std::fs::create_dir_all(schema_dir()).unwrap();
            std::fs::write(&path, &generated).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed != generated {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "the committed JSON Schemas are not what the types generate: {stale:?}. If the change \
         of the journal format is intended, regenerate them with `{REGENERATE}=1 cargo test -p \
         agentloop --test schema`, review the diff (a removed or renamed field or event kind \
         needs a new run::SCHEMA_VERSION, see docs/schema/README.md) and commit them"
    );
}

fn validator(schema: &schemars::Schema) -> jsonschema::Validator {
    jsonschema::validator_for(schema.as_value()).unwrap()
}

fn assert_valid(validator: &jsonschema::Validator, instance: &Value, what: &str) {
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| format!("{} (at '{}')", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what} does not match the schema: {errors:#?}\n{instance:#}");
}

/// Validates entries as the stores write them (each entry as JSON), and their events.
fn assert_entries_valid(entries: &[Value], what: &str) {
    let entry_schema = validator(&agentloop::schema::journal_entry());
    let event_schema = validator(&agentloop::schema::event());
    for (index, entry) in entries.iter().enumerate() {
        assert_valid(&entry_schema, entry, &format!("{what}, entry {index}"));
        assert_valid(&event_schema, &entry["event"], &format!("{what}, event {index}"));
    }
}

fn golden_journals() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_golden_journal_entry_validates() {
    let files = golden_journals();
    assert!(files.len() >= 2, "the golden journals are missing: {files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let entries: Vec<Value> =
            text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        assert!(!entries.is_empty(), "{} is empty", file.display());
        assert_entries_valid(&entries, &file.display().to_string());
    }
}

#[test]
fn the_schema_rejects_what_no_build_writes() {
    let schema = validator(&agentloop::schema::journal_entry());
    let good = json!({"seq": 1, "at_ms": 5, "schema_version": SCHEMA_VERSION, "event": {"type": "resumed"}});
    assert_valid(&schema, &good, "a resumed entry");
    let mut bad = Vec::new();
    for (pointer, value) in [
        ("/seq", json!("one")),
        ("/schema_version", json!(SCHEMA_VERSION + 1)),
        ("/event", json!({"type": "no_such_event"})),
        ("/event", json!({"type": "tool_started", "arguments": {}})),
        ("/event", json!({"type": "limit_reached", "limit": {"kind": "patience"}})),
    ] {
        let mut entry = good.clone();
        *entry.pointer_mut(pointer).unwrap() = value;
        if schema.is_valid(&entry) {
            bad.push(entry);
        }
    }
    let mut missing = good.clone();
    missing.as_object_mut().unwrap().remove("at_ms");
    if schema.is_valid(&missing) {
        bad.push(missing);
    }
    assert!(bad.is_empty(), "the schema accepts entries no build writes: {bad:#?}");
}

/// The journal of `run_id` in `store`, each entry as the stores write it.
async fn journal_json(store: &MemoryStore, run_id: &str) -> Vec<Value> {
    let entries = store.load(run_id).await.unwrap();
    assert!(!entries.is_empty(), "run {run_id} has no journal");
    entries.iter().map(|entry| serde_json::to_value(entry).unwrap()).collect()
}

#[tokio::test]
async fn a_fresh_journal_and_its_stream_validate() {
    let store = Arc::new(MemoryStore::new());
    let event_schema = validator(&agentloop::schema::event());
    let mut kinds_seen = BTreeSet::new();

    // Tools that work, fail and get bad arguments, reasoning and text, metadata and a price,
    // then the iteration limit and the wind-down answer; then a model call that fails.
    let limited = ScriptedModel::new([
        ScriptedTurn::tool_call("add", json!({"a": 2, "b": 3}))
            .with_tool_call("nope", json!({}))
            .with_raw_tool_call("add", "{not json")
            .with_reasoning("Add first.")
            .with_text("Adding.")
            .with_usage(Usage {
                input: 40,
                output: 9,
                cached_input: 8,
                reasoning: 3,
                cache_write_input: 0,
            }),
        ScriptedTurn::tool_call("add", json!({"a": 5, "b": 5})),
        ScriptedTurn::text("2 + 3 = 5, and 5 + 5 = 10."),
    ]);
    let failing = ScriptedModel::new([ScriptedTurn::error(ProviderError::InvalidRequest {
        message: "bad request".into(),
    })]);
    for (run_id, model) in [("schema_limited", limited), ("schema_failed", failing)] {
        let agent = Agent::builder(model)
            .name("schema")
            .instructions("Add numbers.")
            .tool(Add)
            .metadata("tenant", json!({"name": "acme", "id": 7}))
            .price(Price::per_million(1.0, 4.0).with_cached_input(0.5))
            .max_iterations(2)
            .temperature(0.5)
            .store(store.clone())
            .build()
            .unwrap();
        let options = RunOptions { run_id: Some(run_id.into()), ..RunOptions::default() };
        let events = collect(agent.run_stream_with("What is 2 + 3?", options)).await;
        for (index, event) in events.iter().enumerate() {
            let value = serde_json::to_value(event).unwrap();
            assert_valid(&event_schema, &value, &format!("{run_id}: streamed event {index}"));
            kinds_seen.insert(event.kind());
        }
        assert_entries_valid(&journal_json(&store, run_id).await, run_id);
    }

    // A deferred call, a suspended run and the human decisions.
    let probe = Probe::default();
    let approvals = |model: ScriptedModel| {
        Agent::builder(model)
            .name("schema")
            .tool(probe.clone())
            .hook(AskHuman)
            .store(store.clone())
            .build()
            .unwrap()
    };
    let model =
        ScriptedModel::new([ScriptedTurn::tool_call("probe", json!({"ms": 0, "tag": "a"}))
            .with_tool_call("probe", json!({"ms": 0, "tag": "b"}))]);
    let options = RunOptions { run_id: Some("schema_approvals".into()), ..RunOptions::default() };
    let events = collect(approvals(model).run_stream_with("Probe twice.", options)).await;
    let model = ScriptedModel::new([ScriptedTurn::text("Probed a; b was rejected.")]);
    let decisions = [
        ("call_0_0".to_string(), Decision::Approve),
        ("call_0_1".to_string(), Decision::Reject { reason: "not b".into() }),
    ];
    let decided =
        collect(approvals(model).decide("schema_approvals", decisions).await.unwrap()).await;
    // With a store, the last event is the checkpoint of the outcome's event.
    let answer = decided.iter().rev().find_map(Event::outcome).map(|o| o.answer.as_str());
    assert_eq!(answer, Some("Probed a; b was rejected."));
    for (index, event) in events.iter().chain(&decided).enumerate() {
        let value = serde_json::to_value(event).unwrap();
        assert_valid(&event_schema, &value, &format!("streamed event {index} (approvals)"));
        kinds_seen.insert(event.kind());
    }
    assert_entries_valid(&journal_json(&store, "schema_approvals").await, "the approved run");

    for kind in [
        "run_started",
        "model_requested",
        "model_responded",
        "model_failed",
        "tool_started",
        "tool_completed",
        "tool_failed",
        "limit_reached",
        "approval_requested",
        "approval_decided",
        "run_suspended",
        "run_finished",
        "run_failed",
        "text_delta",
        "tool_detected",
        "checkpointed",
    ] {
        assert!(kinds_seen.contains(kind), "the runs should cover {kind}: {kinds_seen:?}");
    }
}

/// An entry written by a newer build of the same format: unknown fields at the top level, in
/// the event, and in a struct inside it.
fn entry_with_unknown_fields() -> Value {
    json!({
        "seq": 0,
        "at_ms": 1_700_000_000_000_u64,
        "schema_version": SCHEMA_VERSION,
        "written_by": "agentloop 9.9",
        "event": {
            "type": "model_responded",
            "iteration": 1,
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Hello.", "lang": "en"}],
                "name": "helper"
            },
            "finish_reason": "stop",
            "usage": {"input": 3, "output": 2, "cached_input": 0, "reasoning": 0, "audio": 1},
            "duration_ms": 12,
            "trace_id": "abc"
        }
    })
}

#[tokio::test]
async fn readers_ignore_unknown_fields() {
    let with_unknown = entry_with_unknown_fields();
    let mut plain = with_unknown.clone();
    plain.as_object_mut().unwrap().remove("written_by");
    let event = plain["event"].as_object_mut().unwrap();
    event.remove("trace_id");
    event["message"].as_object_mut().unwrap().remove("name");
    event["message"]["content"][0].as_object_mut().unwrap().remove("lang");
    event["usage"].as_object_mut().unwrap().remove("audio");

    let read: JournalEntry = serde_json::from_value(with_unknown.clone()).unwrap();
    let expected: JournalEntry = serde_json::from_value(plain).unwrap();
    assert_eq!(read, expected, "the unknown fields are ignored");
    assert_eq!(read.event.kind(), "model_responded");

    // Through a store: appended and loaded back.
    let store = MemoryStore::new();
    store.append_entries("unknown_fields", 0, std::slice::from_ref(&read)).await.unwrap();
    assert_eq!(store.load("unknown_fields").await.unwrap(), [expected]);

    // The schemas allow them too (they describe what this build writes, not all it reads).
    assert_entries_valid(&[with_unknown], "an entry with unknown fields");
}
