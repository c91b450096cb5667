//! Agents as tools (`Agent::as_tool`): the child's answer flows back as the call's result, the
//! child's run is its own (its own id, `parent_run_id`, its own journal), its events nest in
//! the parent's stream, its tokens and cost roll up into the parent's budgets (durably), and
//! cancelling the parent cancels it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::message::Usage;
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::run::{LimitKind, Price, Run};
use agentloop::store::{MemoryStore, RunFilter, RunState, RunStore};
use common::*;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn used(input: u64, output: u64) -> Usage {
    Usage { input, output, ..Usage::default() }
}

fn sum(a: Usage, b: Usage) -> Usage {
    let mut total = a;
    total += b;
    total
}

/// A child that adds with a tool, then answers; its two model calls use (30, 3) each.
fn child(store: Option<Arc<MemoryStore>>) -> Agent {
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("add", json!({"a": 2, "b": 3})).with_usage(used(30, 3)),
        ScriptedTurn::text("2 + 3 = 5").with_usage(used(30, 3)),
    ]);
    let builder = Agent::builder(model).name("adder").tool(Add);
    match store {
        Some(store) => builder.store(store).build().unwrap(),
        None => builder.build().unwrap(),
    }
}

/// A parent whose first turn calls the child (`call_1`) and whose second answers; (100, 10)
/// each.
fn parent_model() -> ScriptedModel {
    ScriptedModel::new(parent_turns())
}

fn parent_turns() -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::tool_call("adder", json!({"input": "What is 2 + 3?"}))
            .with_call_id("call_1")
            .with_usage(used(100, 10)),
        ScriptedTurn::text("The adder says 5.").with_usage(used(100, 10)),
    ]
}

fn tool_of(agent: &Agent) -> Arc<agentloop::agent::AgentTool> {
    Arc::new(agent.as_tool("adder", "Adds numbers; give it the whole question."))
}

#[tokio::test]
async fn the_childs_answer_flows_back_and_its_events_nest_between_the_calls_start_and_result() {
    let store = Arc::new(MemoryStore::new());
    let child = child(Some(store.clone()));
    let parent = Agent::builder(parent_model()).dyn_tool(tool_of(&child)).build().unwrap();
    let (handle, events) = parent.start("What is 2 + 3?");
    let events = collect(events).await;
    assert_eq!(outcome(&events).answer, "The adder says 5.");

    let started = events.iter().position(|e| matches!(e, Event::ToolStarted { .. })).unwrap();
    let completed = events.iter().position(|e| matches!(e, Event::ToolCompleted { .. })).unwrap();
    let Event::ToolCompleted { result, .. } = &events[completed] else { unreachable!() };
    assert_eq!(result.content.to_text(), "2 + 3 = 5");

    // Every event of the child's run, in order, tagged with the call and the child's run id.
    let mut child_run = None;
    let mut inner = Vec::new();
    for (index, event) in events.iter().enumerate() {
        let Event::Nested { call_id, run_id, event } = event else { continue };
        assert!(started < index && index < completed, "nested event at {index}");
        assert_eq!(call_id, "call_1");
        let run_id = run_id.clone().unwrap();
        assert_ne!(run_id, handle.run_id());
        assert_eq!(child_run.get_or_insert_with(|| run_id.clone()), &run_id);
        inner.push((**event).clone());
    }
    let child_run = child_run.unwrap();
    let Event::RunStarted { run_id, config, .. } = &inner[0] else { panic!("{:?}", inner[0]) };
    assert_eq!(run_id, &child_run);
    assert_eq!(config.parent_run_id.as_deref(), Some(handle.run_id()));
    assert_eq!(config.agent.as_deref(), Some("adder"));
    let kinds = compact_kinds(&inner);
    for kind in ["model_responded", "tool_started", "tool_completed", "text_delta"] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    // The child is journaled: its durable events come with their checkpoints.
    assert_eq!(&kinds[kinds.len() - 2..], ["run_finished", "checkpointed"]);
    let Some(Event::RunFinished { outcome }) =
        inner.iter().rev().find(|e| matches!(e, Event::RunFinished { .. }))
    else {
        unreachable!()
    };
    assert_eq!(outcome.answer, "2 + 3 = 5");

    // The child's run is its own, listed under its parent.
    let children = store.list_runs(&RunFilter::all().parent_run_id(handle.run_id())).await.unwrap();
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].run_id, child_run);
    assert_eq!(children[0].state, RunState::Finished);
    let journal = store.load(&child_run).await.unwrap();
    assert_eq!(journal.last().unwrap().event.kind(), "run_finished");
    assert!(store
        .list_runs(&RunFilter::all().parent_run_id("run_other"))
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn the_childs_tokens_and_cost_count_in_the_parents_usage_cost_and_journal() {
    let child_price = Price::per_million(10.0, 100.0);
    let child = Agent::builder(ScriptedModel::new([
        ScriptedTurn::tool_call("add", json!({"a": 2, "b": 3})).with_usage(used(30, 3)),
        ScriptedTurn::text("2 + 3 = 5").with_usage(used(30, 3)),
    ]))
    .tool(Add)
    .price(child_price)
    .build()
    .unwrap();
    let parent_price = Price::per_million(1.0, 2.0);
    let store = Arc::new(MemoryStore::new());
    let parent = Agent::builder(parent_model())
        .dyn_tool(tool_of(&child))
        .price(parent_price)
        .store(store.clone())
        .build()
        .unwrap();
    // `run` streams no transient events: the child runs quiet, its usage still rolls up.
    let outcome = parent.run("What is 2 + 3?").await.unwrap();
    let own = used(200, 20);
    let childs = used(60, 6);
    assert_eq!(outcome.usage, sum(own, childs));
    assert_eq!(outcome.metrics.usage, sum(own, childs));
    let cost = parent_price.cost(&own) + child_price.cost(&childs);
    assert!((outcome.metrics.cost_usd - cost).abs() < 1e-12, "{}", outcome.metrics.cost_usd);

    // Journaled with the call's result, so a fold of the journal has the same totals.
    let journal = store.load(&outcome.run_id).await.unwrap();
    let Some((usage, cost_usd)) = journal.iter().find_map(|e| match &*e.event {
        Event::ToolCompleted { usage, cost_usd, .. } => {
            Some((usage.as_deref().copied(), *cost_usd))
        }
        _ => None,
    }) else {
        panic!("no tool_completed")
    };
    assert_eq!(usage, Some(childs));
    assert_eq!(cost_usd, Some(child_price.cost(&childs)));
    let run = Run::from_journal(journal.iter().map(|e| &*e.event)).unwrap();
    assert_eq!(run.usage(), sum(own, childs));
    assert_eq!(run.spent().cost_usd, outcome.metrics.cost_usd);
}

#[tokio::test]
async fn the_childs_tokens_trip_the_parents_token_budget() {
    let child = Agent::builder(ScriptedModel::new([
        ScriptedTurn::text("a long answer").with_usage(used(500, 500))
    ]))
    .build()
    .unwrap();
    let parent = Agent::builder(ScriptedModel::new([
        ScriptedTurn::tool_call("adder", json!({"input": "go"})).with_usage(used(100, 10)),
        ScriptedTurn::text("wound down").with_usage(used(5, 5)),
    ]))
    .dyn_tool(tool_of(&child))
    .max_total_tokens(500)
    .build()
    .unwrap();
    let outcome = parent.run("go").await.unwrap();
    // 110 of its own would not reach 500; the child's 1,000 do.
    assert_eq!(outcome.stop_reason, StopReason::LimitReached { limit: LimitKind::TotalTokens });
    assert_eq!(outcome.answer, "wound down");
    assert_eq!(outcome.usage, used(605, 515));
}

#[tokio::test]
async fn a_resumed_parent_keeps_the_rolled_up_totals_and_does_not_run_the_child_again() {
    let store = Arc::new(MemoryStore::new());
    let child = child(None);
    let parent = Agent::builder(parent_model())
        .dyn_tool(tool_of(&child))
        .store(store.clone())
        .build()
        .unwrap();
    let options = RunOptions { run_id: Some("run_parent".into()), ..RunOptions::default() };
    let clean = agentloop::agent::outcome_of(parent.run_stream_with("go", options)).await.unwrap();
    assert_eq!(clean.usage, used(260, 26));
    let journal = store.load("run_parent").await.unwrap();

    // A crash right after the call's result was journaled.
    let cut = 1 + journal.iter().position(|e| e.event.kind() == "tool_completed").unwrap();
    let resumed_store = Arc::new(MemoryStore::new());
    resumed_store.append_entries("run_parent", 0, &journal[..cut]).await.unwrap();
    // A child with nothing to say: running it again would fail the call.
    let spent_child = Agent::builder(ScriptedModel::new([])).build().unwrap();
    let resumer = Agent::builder(ScriptedModel::new(parent_turns().into_iter().skip(1)))
        .dyn_tool(tool_of(&spent_child))
        .store(resumed_store.clone())
        .build()
        .unwrap();
    let events = collect(resumer.resume("run_parent").await.unwrap()).await;
    let resumed = outcome(&events[..events.len() - 1]);
    assert_eq!(resumed.answer, "The adder says 5.");
    assert_eq!(resumed.usage, clean.usage);
    assert_eq!(resumed.metrics.usage, clean.metrics.usage);
    assert!(!events.iter().any(|e| e.kind() == "nested" || e.kind() == "tool_started"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_parent_cancels_the_child_which_journals_its_cancellation() {
    let store = Arc::new(MemoryStore::new());
    let child_model = Arc::new(ScriptedModel::new([ScriptedTurn::hang()]));
    let child = Agent::builder(child_model.clone()).store(store.clone()).build().unwrap();
    let parent = Agent::builder(parent_model())
        .dyn_tool(tool_of(&child))
        .store(store.clone())
        .build()
        .unwrap();
    let (handle, events) = parent.start("go");
    let parent_id = handle.run_id().to_owned();
    let task = tokio::spawn(collect(events));
    let deadline = Instant::now() + Duration::from_secs(5);
    while child_model.request_count() == 0 {
        assert!(Instant::now() < deadline, "the child never called its model");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    handle.cancel("the user pressed stop");
    let events = task.await.unwrap();
    let terminal = events.iter().rev().find_map(Event::outcome).unwrap();
    assert!(matches!(terminal.stop_reason, StopReason::Cancelled { .. }), "{terminal:?}");

    // The child ends cancelled, in its own journal, even though the parent has moved on.
    let children = store.list_runs(&RunFilter::all().parent_run_id(&parent_id)).await.unwrap();
    assert_eq!(children.len(), 1);
    let child_id = children[0].run_id.clone();
    loop {
        let journal = store.load(&child_id).await.unwrap();
        if let Some(Event::RunCancelled { reason, .. }) = journal.last().map(|e| &*e.event) {
            let expected = format!(
                "its caller stopped: call call_1 of run {parent_id} was cancelled or timed out"
            );
            assert_eq!(reason, &expected);
            break;
        }
        assert!(Instant::now() < deadline, "the child's journal: {:?}", journal.last());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(child_model.dropped_streams(), 1);
}

#[tokio::test]
async fn a_failing_child_is_an_error_result_the_parent_model_sees_and_its_usage_counts() {
    let child = Agent::builder(ScriptedModel::new([
        ScriptedTurn::tool_call("add", json!({"a": 2, "b": 3})).with_usage(used(30, 3)),
        ScriptedTurn::error(agentloop::provider::ProviderError::Auth {
            status: 401,
            message: "bad key".into(),
        }),
    ]))
    .tool(Add)
    .retry_policy(None)
    .build()
    .unwrap();
    let parent_model = Arc::new(parent_model());
    let parent = Agent::builder(parent_model.clone()).dyn_tool(tool_of(&child)).build().unwrap();
    let events = collect(parent.run_stream("go")).await;
    let Some(Event::ToolFailed { result, usage, .. }) =
        events.iter().find(|e| e.kind() == "tool_failed")
    else {
        panic!("{:?}", kinds(&events))
    };
    let text = result.content.to_text();
    assert!(text.starts_with("Error: the agent's run failed"), "{text}");
    assert!(text.contains("bad key"), "{text}");
    assert_eq!(usage.as_deref(), Some(&used(30, 3)));
    let outcome = outcome(&events);
    assert_eq!(outcome.answer, "The adder says 5.");
    assert_eq!(outcome.usage, used(230, 23));
    // The model saw the error as the call's result.
    let seen = parent_model.requests()[1].messages.last().unwrap().clone();
    assert_eq!(seen.tool_results_iter().next().unwrap().content.to_text(), text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_times_out_cancels_its_child_and_counts_what_it_used() {
    let store = Arc::new(MemoryStore::new());
    let probe = Probe::default();
    let child_model = ScriptedModel::new([ScriptedTurn::tool_call(
        "probe",
        json!({"ms": 10_000, "tag": "slow"}),
    )
    .with_usage(used(30, 3))]);
    let child =
        Agent::builder(child_model).tool(probe.clone()).store(store.clone()).build().unwrap();
    let tool = child.as_tool("adder", "Adds.").with_timeout(Duration::from_millis(100));
    let parent = Agent::builder(parent_model()).dyn_tool(Arc::new(tool)).build().unwrap();
    let (handle, events) = parent.start("go");
    let events = collect(events).await;
    let Some(Event::ToolTimedOut { usage, .. }) =
        events.iter().find(|e| e.kind() == "tool_timed_out")
    else {
        panic!("{:?}", kinds(&events))
    };
    // The child's first model call was reported as it happened.
    assert_eq!(usage.as_deref(), Some(&used(30, 3)));
    let outcome = outcome(&events);
    assert_eq!(outcome.answer, "The adder says 5.");
    assert_eq!(outcome.usage, used(230, 23));

    let children = store.list_runs(&RunFilter::all().parent_run_id(handle.run_id())).await.unwrap();
    let child_id = children[0].run_id.clone();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let journal = store.load(&child_id).await.unwrap();
        if journal.last().is_some_and(|e| e.event.kind() == "run_cancelled") {
            break;
        }
        assert!(Instant::now() < deadline, "the child's journal: {:?}", journal.last());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // The child's own tool was stopped with it.
    assert_eq!((probe.calls(), probe.dropped()), (1, 1));
}

#[tokio::test]
async fn a_grandchild_rolls_up_through_its_parent_and_its_events_nest_twice() {
    let grandchild =
        Agent::builder(ScriptedModel::new([ScriptedTurn::text("5").with_usage(used(7, 1))]))
            .build()
            .unwrap();
    let child = Agent::builder(ScriptedModel::new([
        ScriptedTurn::tool_call("helper", json!({"input": "2 + 3"})).with_usage(used(30, 3)),
        ScriptedTurn::text("2 + 3 = 5").with_usage(used(30, 3)),
    ]))
    .dyn_tool(Arc::new(grandchild.as_tool("helper", "Helps.")))
    .build()
    .unwrap();
    let parent = Agent::builder(parent_model()).dyn_tool(tool_of(&child)).build().unwrap();
    let events = collect(parent.run_stream("go")).await;
    let outcome = outcome(&events);
    assert_eq!(outcome.answer, "The adder says 5.");
    assert_eq!(outcome.usage, used(267, 27));
    let twice = events.iter().any(|e| {
        matches!(e, Event::Nested { event, .. }
            if matches!(&**event, Event::Nested { event, .. } if event.kind() == "run_finished"))
    });
    assert!(twice, "the grandchild's events reach the parent's stream, nested twice");
}

#[tokio::test]
async fn a_replayed_parent_reports_the_childs_usage_again_and_has_the_same_journal() {
    let store = Arc::new(MemoryStore::new());
    let child = Agent::builder(ScriptedModel::new([
        ScriptedTurn::text("2 + 3 = 5").with_usage(used(30, 3))
    ]))
    .price(Price::per_million(10.0, 100.0))
    .build()
    .unwrap();
    let parent = Agent::builder(parent_model())
        .dyn_tool(tool_of(&child))
        .price(Price::per_million(1.0, 2.0))
        .store(store.clone())
        .build()
        .unwrap();
    let outcome = parent.run("go").await.unwrap();
    let journal: Vec<Event> = store
        .load(&outcome.run_id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event.into_event())
        .collect();
    let replay = agentloop::agent::JournalReplay::from_journal(&journal).unwrap();
    let events = collect(replay.run().unwrap()).await;
    let replayed = events.last().and_then(Event::outcome).cloned().unwrap();
    assert_eq!(replayed.usage, outcome.usage);
    assert_eq!(replayed.metrics.cost_usd, outcome.metrics.cost_usd);
    let durable: Vec<Event> = events.into_iter().filter(Event::is_durable).collect();
    let completed =
        |events: &[Event]| events.iter().find(|e| e.kind() == "tool_completed").cloned().unwrap();
    let Event::ToolCompleted { usage, cost_usd, .. } = completed(&durable) else { unreachable!() };
    assert_eq!(usage.as_deref(), Some(&used(30, 3)));
    let Event::ToolCompleted { usage: was, cost_usd: cost_was, .. } = completed(&journal) else {
        unreachable!()
    };
    assert_eq!((usage, cost_usd), (was, cost_was));
}

/// A parent that died after its child finished, but before the call's result was journaled,
/// is resumed: the call runs again and finds the child its first attempt started (the child's
/// id comes from the call), so the child's model is not asked again.
#[tokio::test]
async fn a_parent_resumed_after_a_crash_finds_its_child_instead_of_starting_another() {
    let store = Arc::new(MemoryStore::new());
    let parent_id = "run_parent";
    // The first attempt: the child ran to its end under the id of the parent's call…
    let first = child(Some(store.clone()));
    let child_id = agentloop::agent::child_run_id(parent_id, "call_1");
    assert_eq!(child_id, "run_parent.call_1");
    let options = RunOptions {
        run_id: Some(child_id.clone()),
        parent_run_id: Some(parent_id.into()),
        ..RunOptions::default()
    };
    assert_eq!(first.run_with("What is 2 + 3?", options).await.unwrap().answer, "2 + 3 = 5");
    // …and the parent died with the call in flight: its journal ends with `tool_started`.
    let parent_store: Arc<dyn RunStore> = Arc::new(MemoryStore::new());
    let parent = |model: ScriptedModel, tool| {
        let ttl = Duration::from_millis(50);
        Agent::builder(model)
            .store(parent_store.clone())
            .lease_ttl(ttl)
            .dyn_tool(tool)
            .build()
            .unwrap()
    };
    let crashed = parent(ScriptedModel::new(parent_turns()), tool_of(&child(Some(store.clone()))));
    let options = RunOptions { run_id: Some(parent_id.into()), ..RunOptions::default() };
    let mut events = crashed.run_stream_with("What is 2 + 3?", options);
    use futures::StreamExt;
    while let Some(event) = events.next().await {
        if matches!(event, Event::ToolStarted { .. }) {
            break;
        }
    }
    drop(events);
    // The dead parent's lease expires.
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The crashed call's child attempt was cancelled; the journal of the first child is
    // what a resumed parent finds. (Cancelling the second attempt journaled nothing: the
    // child's id was taken, so the call resumed the finished child.)
    let resumed_child = child(Some(store.clone()));
    let model = ScriptedModel::new(parent_turns().into_iter().skip(1));
    let resumed = parent(model, tool_of(&resumed_child));
    let events = collect(resumed.resume(parent_id).await.unwrap()).await;
    let answer = events.iter().rev().find_map(Event::outcome).unwrap().answer.clone();
    assert_eq!(answer, "The adder says 5.");
    let children = store.list_runs(&RunFilter::all().parent_run_id(parent_id)).await.unwrap();
    assert_eq!(children.len(), 1, "one child, not two: {children:?}");
    let journal = store.load(&child_id).await.unwrap();
    let responses = journal.iter().filter(|e| e.event.kind() == "model_responded").count();
    assert_eq!(responses, 2, "the child's model was asked twice in all, by the first attempt");
}
