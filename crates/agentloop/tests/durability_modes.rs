//! Durability modes: `checkpoint` journals the same entries as `sync` in fewer commits, each
//! commit ending at a checkpoint (so a crash leaves a journal that `sync` could have left too:
//! `durability.rs` resumes from every such cut); `off` journals nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::store::{Durability, MemoryStore, RunStore};
use common::*;
use serde_json::json;
use std::sync::Arc;

fn model() -> ScriptedModel {
    ScriptedModel::new([
        ScriptedTurn::tool_call("add", json!({"a": 1, "b": 2}))
            .with_call_id("call_a")
            .with_tool_call("add", json!({"a": 3, "b": 4}))
            .with_call_id("call_b"),
        ScriptedTurn::tool_call("add", json!({"a": 5, "b": 6})).with_call_id("call_c"),
        ScriptedTurn::text("3, 7 and 11."),
    ])
}

fn agent(store: &Arc<MemoryStore>, durability: Durability) -> Agent {
    Agent::builder(model()).tool(Add).store(store.clone()).durability(durability).build().unwrap()
}

/// The kinds of `run_id`'s journal entries.
async fn kinds(store: &MemoryStore, run_id: &str) -> Vec<&'static str> {
    let journal = store.load(run_id).await.unwrap_or_default();
    journal.iter().map(|entry| entry.event.kind()).collect()
}

/// The streamed events, the journal's kinds, and the commits (each a run of `checkpointed`
/// events, with the kind of the durable event it ends with).
async fn run(
    durability: Durability,
) -> (Vec<Event>, Vec<&'static str>, Vec<(usize, &'static str)>) {
    let store = Arc::new(MemoryStore::new());
    let agent = agent(&store, durability);
    let options = RunOptions { run_id: Some("run_modes".into()), ..RunOptions::default() };
    let events = collect(agent.run_stream_with("go", options)).await;
    let kinds = kinds(&store, "run_modes").await;
    let mut commits = Vec::new();
    let mut last_durable = "";
    let mut in_commit = 0;
    for event in &events {
        match event {
            Event::Checkpointed { .. } => in_commit += 1,
            other => {
                if in_commit > 0 {
                    commits.push((in_commit, last_durable));
                    in_commit = 0;
                }
                if other.is_durable() {
                    last_durable = other.kind();
                }
            }
        }
    }
    if in_commit > 0 {
        commits.push((in_commit, last_durable));
    }
    (events, kinds, commits)
}

#[tokio::test]
async fn checkpoint_journals_what_sync_journals_in_fewer_commits() {
    let (sync_events, sync_journal, sync_commits) = run(Durability::Sync).await;
    let (events, journal, commits) = run(Durability::Checkpoint).await;
    assert_eq!(outcome_of(&events).answer, "3, 7 and 11.");
    assert_eq!(outcome_of(&sync_events).answer, "3, 7 and 11.");
    assert_eq!(journal, sync_journal, "the same entries");
    assert!(sync_commits.iter().all(|(n, _)| *n == 1), "sync: a commit per event");
    assert_eq!(sync_commits.len(), sync_journal.len());
    // Checkpoint: a commit before each side effect, at each iteration's end and at the end.
    let ends: Vec<&str> = commits.iter().map(|(_, kind)| *kind).collect();
    assert!(
        ends.iter().all(|kind| {
            [
                "run_started",
                "model_requested",
                "tool_started",
                "iteration_completed",
                "run_finished",
            ]
            .contains(kind)
        }),
        "every commit ends at a checkpoint: {ends:?}"
    );
    assert_eq!(commits.iter().map(|(n, _)| n).sum::<usize>(), journal.len());
    // Sync reads as a commit per event (each followed by its own `checkpointed`, even where
    // the events made together share an append); Checkpoint commits 9 times: an iteration's
    // end and the next model request, made together, share one.
    assert_eq!((commits.len(), sync_commits.len()), (9, 20), "commits: checkpoint, sync");
    // The same events stream, in the same order (the `checkpointed` ones aside).
    let without = |events: &[Event]| -> Vec<&'static str> {
        events
            .iter()
            .filter(|e| !matches!(e, Event::Checkpointed { .. }))
            .map(Event::kind)
            .collect()
    };
    assert_eq!(without(&events), without(&sync_events));
}

/// `Agent::run`, which reads only the outcome, passes no `checkpointed` events on; its journal
/// is the one `run_stream` leaves, in either mode (the sequence numbers move on without them:
/// the store refuses an append at the wrong one).
#[tokio::test]
async fn a_run_for_its_outcome_journals_the_same() {
    for durability in [Durability::Sync, Durability::Checkpoint] {
        let (_, streamed, _) = run(durability).await;
        let store = Arc::new(MemoryStore::new());
        let options = RunOptions { run_id: Some("run_quiet".into()), ..RunOptions::default() };
        let outcome = agent(&store, durability).run_with("go", options).await.unwrap();
        assert_eq!(outcome.answer, "3, 7 and 11.");
        assert_eq!(kinds(&store, "run_quiet").await, streamed, "{durability:?}");
        assert_eq!(streamed.len(), 20);
    }
}

#[tokio::test]
async fn off_journals_nothing() {
    let (events, journal, commits) = run(Durability::Off).await;
    assert_eq!(outcome_of(&events).answer, "3, 7 and 11.");
    assert!(journal.is_empty());
    assert!(commits.is_empty());
}

fn outcome_of(events: &[Event]) -> Outcome {
    events
        .iter()
        .find_map(|event| match event {
            Event::RunFinished { outcome } => Some((**outcome).clone()),
            _ => None,
        })
        .unwrap()
}
