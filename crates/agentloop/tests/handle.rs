//! `RunHandle` (cancel, pause, resume), human approval across time, and the budget and
//! circuit breaker through the driver.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::AskHuman;

use agentloop::hooks::PauseCheck;
use agentloop::message::ToolResult;
use agentloop::message::Usage;
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::ToolChoice;
use agentloop::run::LimitKind;
use agentloop::run::Price;
use agentloop::run::Run;
use agentloop::store::MemoryStore;
use async_trait::async_trait;
use common::*;
use futures::StreamExt;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn model(turns: impl IntoIterator<Item = ScriptedTurn>) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(turns))
}

/// Consumes events in a task until `until` is seen; returns the task's events once it ends.
fn spawn_collect(events: agentloop::EventStream) -> tokio::task::JoinHandle<Vec<Event>> {
    tokio::spawn(collect(events))
}

async fn wait_for(flag: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !flag() {
        assert!(Instant::now() < deadline, "condition not reached in 5 s");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn cancel_drops_the_model_stream_within_50_ms() {
    let model = model([ScriptedTurn::hang()]);
    let agent = Agent::builder(model.clone()).build().unwrap();
    let (handle, events) = agent.start("hi");
    let task = spawn_collect(events);
    wait_for(|| model.request_count() == 1).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let cancelled = Instant::now();
    handle.cancel("user pressed stop");
    wait_for(|| model.dropped_streams() == 1).await;
    let took = cancelled.elapsed();
    let events = task.await.unwrap();
    assert!(took < Duration::from_millis(50), "the model stream was dropped after {took:?}");
    let Some(Event::RunCancelled { reason, outcome }) = events.last() else {
        panic!("{:?}", kinds(&events))
    };
    assert_eq!(reason, "user pressed stop");
    assert_eq!(outcome.stop_reason, StopReason::Cancelled { reason: "user pressed stop".into() });
    assert!(handle.is_cancelled());
}

#[tokio::test]
async fn cancel_drops_a_slow_tool_within_50_ms_and_keeps_the_journal_whole() {
    let model = model([ScriptedTurn::tool_call("probe", json!({"ms": 60_000, "tag": "slow"}))]);
    let probe = Probe::default();
    let agent = Agent::builder(model).tool(probe.clone()).build().unwrap();
    let (handle, events) = agent.start("hi");
    let task = spawn_collect(events);
    wait_for(|| probe.calls() == 1).await;
    let cancelled = Instant::now();
    handle.cancel("shutdown");
    wait_for(|| probe.dropped() == 1).await;
    let took = cancelled.elapsed();
    assert!(took < Duration::from_millis(50), "the tool was dropped after {took:?}");
    let events = task.await.unwrap();
    let journal: Vec<Event> = events.iter().filter(|e| e.is_durable()).cloned().collect();
    assert_eq!(journal.last().unwrap().kind(), "run_cancelled");
    let run = Run::from_journal(&journal).unwrap();
    assert!(run.is_finished());
    assert_valid_history(run.history());
}

#[tokio::test]
async fn pause_waits_at_the_next_safe_point_and_resume_continues() {
    let model = model([
        ScriptedTurn::tool_call("probe", json!({"ms": 50, "tag": "first"})),
        ScriptedTurn::text("done"),
    ]);
    let probe = Probe::default();
    let agent = Agent::builder(model.clone()).tool(probe.clone()).build().unwrap();
    let (handle, mut events) = agent.start("go");
    let mut seen = Vec::new();
    // Pause while the tool runs: it finishes, then the run stops before the next model call.
    while let Some(event) = events.next().await {
        let kind = event.kind();
        seen.push(event);
        if kind == "tool_started" {
            handle.pause_with("operator review");
        }
        if kind == "paused" {
            break;
        }
    }
    assert_eq!(model.request_count(), 1);
    assert!(seen.contains(&Event::Paused { reason: "operator review".into() }));
    assert!(seen.iter().any(|e| e.kind() == "tool_completed"), "the running tool finished");
    // Nothing happens while paused.
    let idle = tokio::time::timeout(Duration::from_millis(100), events.next()).await;
    assert!(idle.is_err(), "no event while paused");
    assert_eq!(model.request_count(), 1);
    handle.resume();
    let rest: Vec<Event> = events.collect().await;
    assert_eq!(rest.first(), Some(&Event::Resumed));
    assert_eq!(outcome(&rest).answer, "done");
    assert_eq!(model.request_count(), 2);
}

#[tokio::test]
async fn stop_at_a_safe_point_ends_the_stream_without_an_end_and_a_resume_goes_on() {
    let turns = [
        ScriptedTurn::tool_call("probe", json!({"ms": 50, "tag": "first"})),
        ScriptedTurn::text("done"),
    ];
    let store = Arc::new(MemoryStore::new());
    let probe = Probe::default();
    let agent =
        Agent::builder(model(turns)).tool(probe.clone()).store(store.clone()).build().unwrap();
    let (handle, mut events) = agent.start("go");
    let mut seen = Vec::new();
    // Asked while the tool runs: it finishes, then the run stops before the next model call.
    while let Some(event) = events.next().await {
        if event.kind() == "tool_started" {
            handle.stop_at_safe_point();
        }
        seen.push(event);
    }
    assert!(seen.iter().any(|e| e.kind() == "tool_completed"), "the running tool finished");
    assert!(seen.iter().all(|e| e.outcome().is_none() && e.kind() != "paused"), "{seen:?}");
    assert_eq!(probe.calls(), 1);
    let journal = agentloop::store::RunStore::load(store.as_ref(), handle.run_id()).await.unwrap();
    assert!(journal.iter().all(|e| e.event.outcome().is_none()), "nothing journaled for the stop");
    // The lease was released: another executor continues at once, and the tool does not run
    // again.
    let model = model([ScriptedTurn::text("done")]);
    let other = Agent::builder(model).tool(probe.clone()).store(store.clone()).build().unwrap();
    let rest = collect(other.resume(handle.run_id()).await.unwrap()).await;
    assert_eq!(rest.iter().rev().find_map(Event::outcome).unwrap().answer, "done");
    assert_eq!(probe.calls(), 1);
}

/// Pauses once, on its first check.
struct PauseOnce(AtomicBool);

#[async_trait]
impl Hooks for PauseOnce {
    async fn pause_check(&self, _ctx: &HookContext) -> HookResult<PauseCheck> {
        Ok(if self.0.swap(false, Ordering::SeqCst) {
            PauseCheck::Pause("budget review".into())
        } else {
            PauseCheck::Continue
        })
    }
}

#[tokio::test]
async fn a_pause_check_hook_pauses_until_the_handle_resumes() {
    let model = model([ScriptedTurn::text("done")]);
    let agent =
        Agent::builder(model.clone()).hook(PauseOnce(AtomicBool::new(true))).build().unwrap();
    let (handle, events) = agent.start("go");
    let task = spawn_collect(events);
    wait_for(|| handle.is_paused()).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(model.request_count(), 0);
    handle.resume();
    let events = task.await.unwrap();
    assert!(events.contains(&Event::Paused { reason: "budget review".into() }));
    assert_eq!(outcome(&events).answer, "done");
}

#[tokio::test]
async fn deferred_approval_survives_a_serialized_journal() {
    let turns = || {
        [
            ScriptedTurn::tool_call("probe", json!({"ms": 0, "tag": "deploy"}))
                .with_tool_call("add", json!({"a": 1, "b": 2}))
                .with_tool_call("probe", json!({"ms": 0, "tag": "delete"})),
            ScriptedTurn::text("Deployed; deletion was refused."),
        ]
    };
    let probe = Probe::default();
    let first = model(turns());
    let agent =
        Agent::builder(first.clone()).tool(Add).tool(probe.clone()).hook(AskHuman).build().unwrap();
    let events = collect(agent.run_stream("ship it")).await;
    let suspended = outcome(&events);
    let StopReason::AwaitingApproval { calls } = &suspended.stop_reason else {
        panic!("{:?}", suspended.stop_reason)
    };
    assert_eq!(calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["call_0_0", "call_0_2"]);
    assert_eq!(probe.calls(), 0, "nothing deferred ran");
    assert_eq!(events.last().unwrap().kind(), "run_suspended");
    assert_eq!(
        agentloop::agent::outcome_of(Box::pin(futures::stream::iter(events.clone())))
            .await
            .unwrap(),
        suspended
    );

    // The journal leaves the process as JSON; the agent and the run are gone.
    let journal: Vec<Event> = events.into_iter().filter(Event::is_durable).collect();
    let stored = serde_json::to_string(&journal).unwrap();
    drop(agent);

    let journal: Vec<Event> = serde_json::from_str(&stored).unwrap();
    let second = model([ScriptedTurn::text("Deployed; deletion was refused.")]);
    let agent = Agent::builder(second.clone())
        .tool(Add)
        .tool(probe.clone())
        .hook(AskHuman)
        .build()
        .unwrap();
    let decisions = [
        ("call_0_0".to_string(), Decision::Approve),
        ("call_0_2".to_string(), Decision::Reject { reason: "never delete".into() }),
    ];
    let events = collect(agent.resume_with_decisions(&journal, decisions).unwrap()).await;
    assert_eq!(outcome(&events).answer, "Deployed; deletion was refused.");
    assert_eq!(
        *probe.keys.lock().unwrap(),
        [format!("{}:call_0_0", suspended.run_id)],
        "only the approved call ran"
    );
    let results: Vec<ToolResult> =
        second.requests()[0].messages[2].tool_results_iter().cloned().collect();
    assert_eq!(results[0], ToolResult::ok("call_0_0", "deploy"));
    assert_eq!(results[1], ToolResult::ok("call_0_1", json!(3)));
    assert_eq!(
        results[2],
        ToolResult::error("call_0_2", "Error: the call was rejected: never delete")
    );
}

#[tokio::test]
async fn a_tool_call_limit_winds_down_with_a_final_answer() {
    let call = |i: i64| ScriptedTurn::tool_call("add", json!({"a": i, "b": 1}));
    let model = model([call(1), call(2), ScriptedTurn::text("I added 1+1; the limit stopped me.")]);
    let agent = Agent::builder(model.clone()).tool(Add).max_tool_calls(1).build().unwrap();
    let events = collect(agent.run_stream("add things")).await;
    assert!(events.contains(&Event::LimitReached { limit: LimitKind::ToolCalls }));
    let outcome = outcome(&events);
    assert_eq!(outcome.stop_reason, StopReason::LimitReached { limit: LimitKind::ToolCalls });
    assert_eq!(outcome.answer, "I added 1+1; the limit stopped me.");
    let last = &model.requests()[2];
    assert!(last.tools.is_empty() && last.tool_choice == ToolChoice::None);
    assert_valid_history(&last.messages);
}

#[tokio::test]
async fn a_time_limit_winds_down() {
    let slow = || ScriptedTurn::tool_call("probe", json!({"ms": 40, "tag": "x"}));
    // Two 40 ms iterations pass 60 ms; the third call is the wind-down (the time limit is
    // also checked before each tool call, so a slow machine refuses the second call instead
    // and winds down at the same request).
    let model = model([slow(), slow(), ScriptedTurn::text("Out of time.")]);
    let agent = Agent::builder(model.clone())
        .tool(Probe::default())
        .max_duration(Duration::from_millis(60))
        .build()
        .unwrap();
    let outcome = agent.run("go").await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::LimitReached { limit: LimitKind::Duration });
    assert_eq!(outcome.answer, "Out of time.");
    assert_eq!(model.request_count(), 3);
    assert!(model.requests()[2].tools.is_empty(), "the third request is the wind-down");
}

#[tokio::test]
async fn the_breaker_opens_after_three_identical_failures_through_the_driver() {
    let overflow = |i: i64| ScriptedTurn::tool_call("add", json!({"a": i64::MAX, "b": i}));
    let model = model([overflow(1), overflow(2), overflow(3), ScriptedTurn::text("never")]);
    let agent = Agent::builder(model.clone()).tool(Add).build().unwrap();
    let error = agent.run("overflow").await.unwrap_err();
    let outcome = error.outcome().unwrap();
    assert_eq!(
        outcome.stop_reason,
        StopReason::CircuitOpen { tool: "add".into(), error: "overflow".into(), count: 3 }
    );
    assert_eq!(model.request_count(), 3);
    assert_eq!(outcome.metrics.tool_errors, 3);
}

#[tokio::test]
async fn repeated_identical_calls_add_a_note_to_the_next_request() {
    let same = || ScriptedTurn::tool_call("add", json!({"a": 2, "b": 2}));
    let model = model([same(), same(), same(), ScriptedTurn::text("4")]);
    let breaker = agentloop::run::BreakerConfig {
        stall_action: agentloop::run::StallAction::Note,
        ..agentloop::run::BreakerConfig::default()
    };
    let agent = Agent::builder(model.clone()).tool(Add).breaker(breaker).build().unwrap();
    let events = collect(agent.run_stream("2+2")).await;
    assert!(events.iter().any(|e| matches!(e, Event::StallDetected { count: 3, .. })));
    let note = Message::user(agentloop::run::DEFAULT_STALL_NOTE);
    assert_eq!(model.requests()[3].messages.last(), Some(&note));
    assert!(model.requests()[2].messages.last() != Some(&note));
    assert_eq!(outcome(&events).answer, "4");
}

#[tokio::test]
async fn fail_mode_ends_the_run_on_the_first_tool_error() {
    let model = model([ScriptedTurn::tool_call("crash", json!({})), ScriptedTurn::text("never")]);
    let agent = Agent::builder(model.clone())
        .tool(Crash)
        .tool_failure_mode(agentloop::run::ToolFailureMode::Fail)
        .build()
        .unwrap();
    let error = agent.run("go").await.unwrap_err();
    assert!(matches!(error.outcome().unwrap().stop_reason, StopReason::ToolFailed { .. }));
    assert_eq!(model.request_count(), 1);
}

#[tokio::test]
async fn the_outcome_carries_metrics_and_an_audit_trail() {
    let model = model([
        ScriptedTurn::tool_call("add", json!({"a": 1, "b": 2})).with_usage(Usage {
            input: 100,
            output: 10,
            ..Usage::default()
        }),
        ScriptedTurn::text("3").with_usage(Usage {
            input: 120,
            output: 5,
            cached_input: 100,
            ..Usage::default()
        }),
    ]);
    let agent = Agent::builder(model)
        .tool(Add)
        .price(Price::per_million(2.0, 10.0).with_cached_input(1.0))
        .build()
        .unwrap();
    let outcome = agent.run("1+2").await.unwrap();
    let m = &outcome.metrics;
    assert_eq!(m.model_calls, 2);
    assert_eq!(m.tool_calls, 1);
    assert_eq!(m.iterations.len(), 2);
    assert_eq!(
        m.usage,
        Usage { input: 220, output: 15, cached_input: 100, reasoning: 0, cache_write_input: 0 }
    );
    // (100 + 20) uncached at $2, 100 cached at $1, 15 output at $10, per million.
    assert!((m.cost_usd - (120.0 * 2.0 + 100.0 * 1.0 + 15.0 * 10.0) / 1e6).abs() < 1e-12);
    assert_eq!(m.audit.len(), 1);
    assert_eq!(m.audit[0].tool, "add");
    assert_eq!(*m.audit[0].arguments, json!({"a": 1, "b": 2}));
    assert_eq!(m.audit[0].result, Some(agentloop::message::ToolResultContent::Json(json!(3))));
}

/// What `Agent::run_stream` documents about its last event.
#[tokio::test]
async fn the_stream_ends_with_the_terminal_event_or_with_its_checkpoint_in_a_store() {
    let answer = || [ScriptedTurn::text("Paris.")];
    let suspending = || [ScriptedTurn::tool_call("probe", json!({"ms": 0, "tag": "deploy"}))];
    let build = |turns: Vec<ScriptedTurn>, store: Option<Arc<MemoryStore>>| {
        let builder = Agent::builder(model(turns)).tool(Probe::default()).hook(AskHuman);
        match store {
            Some(store) => builder.store(store).build().unwrap(),
            None => builder.build().unwrap(),
        }
    };

    // Without a store: the terminal event is the last one.
    for (turns, terminal) in
        [(answer().to_vec(), "run_finished"), (suspending().to_vec(), "run_suspended")]
    {
        let events = collect(build(turns, None).run_stream("go")).await;
        assert_eq!(events.last().unwrap().kind(), terminal);
        assert!(events.iter().all(|e| !matches!(e, Event::Checkpointed { .. })));
    }

    // With a store: the terminal event, then its checkpoint.
    for (turns, terminal) in
        [(answer().to_vec(), "run_finished"), (suspending().to_vec(), "run_suspended")]
    {
        let store = Arc::new(MemoryStore::new());
        let events = collect(build(turns, Some(store.clone())).run_stream("go")).await;
        let [.., before, last] = events.as_slice() else { panic!("{events:?}") };
        assert_eq!(before.kind(), terminal);
        let durable = events.iter().filter(|e| e.is_durable()).count() as u64;
        assert!(matches!(last, Event::Checkpointed { seq } if *seq == durable - 1), "{last:?}");
    }
}
