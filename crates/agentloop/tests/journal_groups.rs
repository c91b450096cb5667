//! The journal appends the events the driver made together in one store call, and passes
//! none of them on before that call committed.
#![cfg(feature = "sqlite")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod crash_support;

use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::store::{Durability, MemoryStore, RunStore};
use async_trait::async_trait;
use common::*;
use crash_support::{AppendTap, Tapped};
use futures::StreamExt;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Records each append (its first seq and its length) and the journal's committed length.
#[derive(Clone, Default)]
struct Recording {
    appends: Arc<Mutex<Vec<(u64, usize)>>>,
    committed: Arc<AtomicU64>,
}

#[async_trait]
impl AppendTap for Recording {
    async fn before(&self, _run_id: &str, expected_seq: u64, count: usize) {
        self.appends.lock().unwrap().push((expected_seq, count));
        // Give the driver every chance to go on (it must not) while the append is pending.
        tokio::task::yield_now().await;
    }
    async fn after(&self, _run_id: &str, _expected_seq: u64, next: u64) {
        self.committed.store(next, Ordering::SeqCst);
    }
}

fn turns() -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::tool_call("probe", json!({"ms": 1, "tag": "a"}))
            .with_call_id("call_a")
            .with_tool_call("add", json!({"a": 1, "b": 2}))
            .with_call_id("call_b"),
        ScriptedTurn::tool_call("probe", json!({"ms": 1, "tag": "c"})).with_call_id("call_c"),
        ScriptedTurn::text("a, 3 and c."),
    ]
}

async fn check(durability: Durability) {
    let recording = Recording::default();
    let memory = Arc::new(MemoryStore::new());
    let store: Arc<dyn RunStore> = Arc::new(Tapped(memory.clone(), recording.clone()));
    let probe = Probe::default();
    let agent = Agent::builder(ScriptedModel::new(turns()))
        .tool(Add)
        .tool(probe.clone())
        .store(store)
        .durability(durability)
        .build()
        .unwrap();
    let options = RunOptions { run_id: Some("grouped".into()), ..RunOptions::default() };
    let mut events = agent.run_stream_with("go", options);
    let (mut durable, mut checkpointed, mut passed_on) = (0u64, 0u64, Vec::new());
    while let Some(event) = events.next().await {
        let committed = recording.committed.load(Ordering::SeqCst);
        match &event {
            Event::Checkpointed { seq } => {
                assert_eq!(*seq, checkpointed, "checkpointed in order");
                assert!(*seq < committed, "checkpointed {seq} before the commit ({committed})");
                checkpointed += 1;
            }
            event if event.is_durable() => {
                if durability == Durability::Sync {
                    assert!(durable < committed, "{} passed on before its commit", event.kind());
                }
                durable += 1;
            }
            _ => {}
        }
        passed_on.push(event);
    }
    let outcome = passed_on.iter().rev().find_map(Event::outcome).unwrap();
    assert_eq!(outcome.answer, "a, 3 and c.");
    let journal = memory.load("grouped").await.unwrap();
    assert_eq!((durable, checkpointed), (journal.len() as u64, journal.len() as u64));
    let appends = recording.appends.lock().unwrap().clone();
    // Dense: each append starts where the one before ended.
    let mut next = 0;
    for (first, count) in &appends {
        assert_eq!(*first, next, "appends {appends:?}");
        next += *count as u64;
    }
    assert_eq!(next, journal.len() as u64);
    assert!(
        appends.iter().any(|(_, count)| *count > 1),
        "no two events appended together: {appends:?}"
    );
    if durability == Durability::Sync {
        // Every durable event is followed by its `checkpointed` (as with an append each).
        for (index, event) in passed_on.iter().enumerate() {
            if event.is_durable() {
                assert!(
                    matches!(passed_on.get(index + 1), Some(Event::Checkpointed { .. })),
                    "{} not followed by its checkpoint",
                    event.kind()
                );
            }
        }
    }
}

#[tokio::test]
async fn sync_appends_the_events_made_together_in_one_call() {
    check(Durability::Sync).await;
}

#[tokio::test]
async fn checkpoint_mode_groups_too() {
    check(Durability::Checkpoint).await;
}
