//! Cancellation, dropping the stream, and continuing a run from its journal.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::run::Run;
use agentloop::EventStream;
use common::*;
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Runs the stream in a task; returns the task and the instant cancel was called.
async fn cancel_after(
    stream: EventStream,
    token: CancellationToken,
    wait: Duration,
) -> (Vec<Event>, Duration) {
    let task = tokio::spawn(collect(stream));
    tokio::time::sleep(wait).await;
    let cancelled = Instant::now();
    token.cancel();
    let events = task.await.unwrap();
    (events, cancelled.elapsed())
}

#[tokio::test]
async fn cancel_drops_a_hanging_model_stream() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::hang()]));
    let agent = Agent::builder(model).build().unwrap();
    let token = CancellationToken::new();
    let stream = agent
        .run_stream_with("hi", RunOptions { cancel: Some(token.clone()), ..RunOptions::default() });
    let (events, took) = cancel_after(stream, token, Duration::from_millis(30)).await;
    assert!(took < Duration::from_millis(50), "took {took:?}");
    let Some(Event::RunCancelled { outcome, .. }) = events.last() else { panic!("{events:?}") };
    assert!(matches!(outcome.stop_reason, StopReason::Cancelled { .. }));
}

#[tokio::test]
async fn cancel_drops_running_tools_and_answers_their_calls() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::tool_call(
        "probe",
        json!({"ms": 60_000, "tag": "x"}),
    )
    .with_tool_call("probe", json!({"ms": 60_000, "tag": "y"}))]));
    let probe = Probe::default();
    let agent = Agent::builder(model).tool(probe.clone()).build().unwrap();
    let token = CancellationToken::new();
    let stream = agent
        .run_stream_with("hi", RunOptions { cancel: Some(token.clone()), ..RunOptions::default() });
    let (events, took) = cancel_after(stream, token, Duration::from_millis(30)).await;
    assert!(took < Duration::from_millis(50), "took {took:?}");
    assert_eq!(probe.dropped(), 2);
    let journal: Vec<Event> = events.iter().filter(|e| e.is_durable()).cloned().collect();
    assert_eq!(journal.last().unwrap().kind(), "run_cancelled");
    let run = Run::from_journal(&journal).unwrap();
    assert_valid_history(run.history());
}

#[tokio::test]
async fn dropping_the_stream_drops_the_tools() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::tool_call(
        "probe",
        json!({"ms": 60_000, "tag": "x"}),
    )]));
    let probe = Probe::default();
    let agent = Agent::builder(model).tool(probe.clone()).build().unwrap();
    let mut stream = agent.run_stream("hi");
    while let Some(event) = stream.next().await {
        if event.kind() == "tool_started" {
            break;
        }
    }
    // Poll once more so the tool is running, then drop the stream.
    let _ = tokio::time::timeout(Duration::from_millis(10), stream.next()).await;
    assert_eq!(probe.calls(), 1);
    drop(stream);
    assert_eq!(probe.dropped(), 1);
}

#[tokio::test]
async fn a_run_continues_from_its_journal_without_rerunning_finished_tools() {
    let first = || {
        ScriptedTurn::tool_call("probe", json!({"ms": 0, "tag": "a"}))
            .with_tool_call("probe", json!({"ms": 0, "tag": "b"}))
    };
    let model = Arc::new(ScriptedModel::new([first(), ScriptedTurn::text("a and b")]));
    let probe = Probe::default();
    let agent = Agent::builder(model).tool(probe.clone()).tool_concurrency(1).build().unwrap();
    let options = RunOptions { run_id: Some("run_resume".into()), ..RunOptions::default() };
    let events = collect(agent.run_stream_with("go", options)).await;
    let journal: Vec<Event> = events.iter().filter(|e| e.is_durable()).cloned().collect();
    assert_eq!(probe.calls(), 2);

    // "Crash" right after the first tool finished and the second started.
    let cut = journal.iter().position(|e| e.kind() == "tool_completed").unwrap() + 2;
    assert_eq!(journal[cut - 1].kind(), "tool_started");
    let run = Run::from_journal(&journal[..cut]).unwrap();
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("a and b")]));
    let probe_after = Probe::default();
    let agent = Agent::builder(model.clone()).tool(probe_after.clone()).build().unwrap();
    let resumed = collect(agent.continue_run(run, None)).await;
    assert_eq!(outcome(&resumed).answer, "a and b");
    assert_eq!(probe_after.calls(), 1, "only the unfinished call runs again");
    assert_eq!(
        *probe_after.keys.lock().unwrap(),
        ["run_resume:call_0_1"],
        "with the same idempotency key"
    );
    assert_eq!(model.requests()[0].messages.len(), 3);
    assert_valid_history(&model.requests()[0].messages);
    // The resumed journal continues the old one without repeating anything.
    let tail: Vec<&str> = resumed.iter().filter(|e| e.is_durable()).map(Event::kind).collect();
    assert_eq!(
        tail,
        [
            "tool_started",
            "tool_completed",
            "iteration_completed",
            "iteration_started",
            "model_requested",
            "model_responded",
            "iteration_completed",
            "run_finished"
        ]
    );
}
