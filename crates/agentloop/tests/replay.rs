//! Record and replay: a cassette of model calls, replayed (and refused when the request
//! changed), and a run replayed from its journal without the model or the tools.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::agent::JournalReplay;
use agentloop::prelude::*;
use agentloop::provider::replay::{json_diff, Recorded, RecordingProvider, ReplayProvider};
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::Provider;
use agentloop::provider::StreamChunk;
use agentloop::run::Run;
use agentloop::store::MemoryStore;
use agentloop::store::RunStore;
use common::*;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn turns() -> Vec<ScriptedTurn> {
    let slow = Duration::from_millis(3);
    vec![
        ScriptedTurn::tool_call("probe", json!({"ms": 0, "tag": "x"}))
            .with_reasoning("I should probe.")
            .with_chunk_delay(slow),
        ScriptedTurn::text("The probe said x.").with_chunk_delay(slow),
    ]
}

fn agent(provider: impl Provider + 'static, instructions: &str, probe: &Probe) -> Agent {
    Agent::builder(provider).instructions(instructions).tool(probe.clone()).build().unwrap()
}

#[tokio::test]
async fn a_recorded_run_replays_offline_and_refuses_a_changed_request() {
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("run.jsonl");
    let probe = Probe::default();
    let recorder = RecordingProvider::create(ScriptedModel::new(turns()), &cassette).unwrap();
    let recorded = agent(recorder, "Be brief.", &probe).run("probe it").await.unwrap();
    assert_eq!(recorded.answer, "The probe said x.");

    // One line per model call, each chunk with its time.
    let replay = ReplayProvider::from_file(&cassette).unwrap();
    assert_eq!(replay.interactions().len(), 2);
    let first = &replay.interactions()[0];
    assert!(first.complete);
    assert_eq!(first.request.instructions.as_deref(), Some("Be brief."));
    assert!(first
        .chunks
        .iter()
        .any(|c| matches!(&c.item, Recorded::Chunk(StreamChunk::ToolCallStart { .. }))));
    assert!(first.chunks.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
    assert!(first.chunks.last().unwrap().at_ms >= 3, "chunk times are recorded");

    // Replayed: same outcome, no model; the tools still run (only the model is replayed).
    let started = Instant::now();
    let replayed = agent(replay, "Be brief.", &probe).run("probe it").await.unwrap();
    assert_eq!(replayed.answer, recorded.answer);
    assert_eq!(replayed.stop_reason, recorded.stop_reason);
    assert!(started.elapsed() < Duration::from_millis(500));

    // With timing, the replay takes as long as the recording did.
    let slow = ReplayProvider::from_file(&cassette).unwrap().with_timing(true);
    let recorded_ms: u64 = slow.interactions().iter().map(|i| i.chunks.last().unwrap().at_ms).sum();
    let started = Instant::now();
    agent(slow, "Be brief.", &probe).run("probe it").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(recorded_ms));

    // A changed prompt: the replay fails loudly, saying what changed.
    let replay = ReplayProvider::from_file(&cassette).unwrap();
    let error = agent(replay, "Be verbose.", &probe).run("probe it").await.unwrap_err();
    let AgentError::Failed { error, .. } = &error else { panic!("{error}") };
    assert!(error.contains("request 1 differs from the cassette"), "{error}");
    assert!(
        error.contains(r#"/instructions: recorded "Be brief." ≠ now "Be verbose.""#),
        "{error}"
    );

    // More calls than recorded.
    let replay = ReplayProvider::from_jsonl(&std::fs::read_to_string(&cassette).unwrap()).unwrap();
    let model_calls = Arc::new(replay);
    let extra = Agent::builder(model_calls.clone())
        .tool(probe.clone())
        .instructions("Be brief.")
        .build()
        .unwrap();
    extra.run("probe it").await.unwrap();
    assert_eq!(model_calls.remaining(), 0);
    let error = extra.run("probe it").await.unwrap_err();
    assert!(error.to_string().contains("run failed"), "{error}");
    let outcome = error.outcome().unwrap();
    assert!(
        matches!(&outcome.stop_reason, StopReason::ModelError { message } if message.contains("was not recorded")),
        "{:?}",
        outcome.stop_reason
    );
}

#[test]
fn a_cassette_with_a_bad_line_names_it() {
    let error = ReplayProvider::from_jsonl("\n{\"nope\": 1}\n").unwrap_err();
    assert!(error.to_string().starts_with("cassette line 2:"), "{error}");
}

#[test]
fn the_diff_lists_changed_added_and_removed_fields() {
    let recorded = json!({"a": 1, "list": [1, 2], "gone": true, "same": "s"});
    let now = json!({"a": 2, "list": [1], "new": null, "same": "s"});
    assert_eq!(
        json_diff(&recorded, &now),
        [
            "/a: recorded 1 ≠ now 2",
            "/gone: recorded true ≠ now (missing)",
            "/list/1: recorded 2 ≠ now (missing)",
            "/new: recorded (missing) ≠ now null",
        ]
    );
    let many: Vec<serde_json::Value> = (0..30).map(|i| json!(i)).collect();
    let diff = json_diff(&json!(many), &json!([]));
    assert_eq!(diff.len(), 21);
    assert_eq!(diff[20], "… and 10 more differences");
}

#[tokio::test]
async fn a_run_replays_from_its_journal_without_the_model_or_the_tools() {
    let store = Arc::new(MemoryStore::new());
    let probe = Probe::default();
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("probe", json!({"ms": 0, "tag": "x"}))
            .with_tool_call("add", json!({"a": 2, "b": 40}))
            .with_reasoning("Two calls."),
        ScriptedTurn::tool_call("crash", json!({})),
        ScriptedTurn::text("x and 42; the crash tool crashed."),
    ]);
    let original = Agent::builder(model)
        .instructions("Use tools.")
        .tool(probe.clone())
        .tool(Add)
        .tool(Crash)
        .store(store.clone())
        .build()
        .unwrap();
    let outcome = original.run("go").await.unwrap();
    assert_eq!(probe.calls(), 1);
    let journal: Vec<Event> = store
        .load(&outcome.run_id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event.into_event())
        .collect();

    let replay = JournalReplay::from_journal(&journal).unwrap();
    let events = collect(replay.run().unwrap()).await;
    let replayed = events.last().and_then(Event::outcome).cloned().unwrap();
    assert_eq!(replayed.answer, outcome.answer);
    assert_eq!(replayed.run_id, outcome.run_id);
    assert_eq!(probe.calls(), 1, "no tool ran");
    let durable: Vec<Event> = events.into_iter().filter(Event::is_durable).collect();
    let (a, b) = (Run::from_journal(&journal).unwrap(), Run::from_journal(&durable).unwrap());
    assert_eq!(a.history(), b.history(), "the same conversation, results included");
    assert_eq!(
        durable.iter().map(Event::kind).collect::<Vec<_>>(),
        journal.iter().map(Event::kind).collect::<Vec<_>>()
    );
    assert!(matches!(
        JournalReplay::from_journal(&journal[1..]),
        Err(agentloop::provider::replay::ReplayError::Journal(_))
    ));
}
