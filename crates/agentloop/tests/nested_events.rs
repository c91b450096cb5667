//! What a tool call reports to its run besides its result. Nested events: what a call emits
//! while it runs (`ToolContext::emit_nested`) comes in the run's stream between the call's
//! `tool_started` and its result, in order; it is stream-only; a run without transient events
//! and a detached context drop it. Usage (`ToolContext::report_usage`): journaled with the
//! result, counted in the run's usage, cost and budgets. A remote task (`ToolContext::report_remote`):
//! journaled with the result, the last report counting.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::event::JournalEvent;
use agentloop::message::Usage;
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::store::{MemoryStore, RunStore};
use agentloop::tool::{DynTool, RemoteTask, ToolError, ToolSpec, NESTED_EVENT_BUFFER};
use async_trait::async_trait;
use common::*;
use futures::StreamExt;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Emits `count` nested `text` events ("0", "1", …) of run `child`, then returns "done".
/// `wait`: emits with `emit_nested` (waits for room), else with `try_emit_nested` in one go.
#[derive(Clone, Default)]
struct Chatter {
    wait: bool,
    accepted: Arc<AtomicUsize>,
    takes: Arc<AtomicBool>,
}

#[async_trait]
impl DynTool for Chatter {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "chatter".into(),
            description: "Emits nested events.".into(),
            parameters: json!({"type": "object", "properties": {"count": {"type": "integer"}}}),
        }
    }

    async fn call_json(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        self.takes.store(ctx.takes_nested_events(), Ordering::SeqCst);
        let count = args["count"].as_u64().unwrap();
        for i in 0..count {
            let event = Event::Text { text: i.to_string() };
            let accepted = if self.wait {
                ctx.emit_nested(Some("child"), event).await
            } else {
                ctx.try_emit_nested(Some("child"), event)
            };
            if accepted {
                self.accepted.fetch_add(1, Ordering::SeqCst);
            }
        }
        Ok(ToolOutput::Value(json!("done")))
    }
}

fn agent(tool: Chatter, count: usize) -> Agent {
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("chatter", json!({ "count": count })).with_call_id("call_1"),
        ScriptedTurn::text("finished"),
    ]);
    Agent::builder(model).dyn_tool(Arc::new(tool)).build().unwrap()
}

/// The texts of the nested events of `call_1` (run `child`), checking where they are.
fn nested_texts(events: &[Event]) -> Vec<String> {
    let started = events.iter().position(|e| matches!(e, Event::ToolStarted { .. })).unwrap();
    let completed = events.iter().position(|e| matches!(e, Event::ToolCompleted { .. })).unwrap();
    let mut texts = Vec::new();
    for (index, event) in events.iter().enumerate() {
        if let Event::Nested { call_id, run_id, event } = event {
            assert!(
                started < index && index < completed,
                "nested event at {index} of {:?}",
                kinds(events)
            );
            assert_eq!(call_id, "call_1");
            assert_eq!(run_id.as_deref(), Some("child"));
            let Event::Text { text } = &**event else { panic!("{event:?}") };
            texts.push(text.clone());
        }
    }
    texts
}

#[tokio::test]
async fn nested_events_come_between_the_calls_start_and_result_in_order_and_none_is_lost() {
    // More than the buffer holds: the tool waits for the consumer and nothing is dropped.
    let count = NESTED_EVENT_BUFFER * 3 + 7;
    let tool = Chatter { wait: true, ..Chatter::default() };
    let events = collect(agent(tool.clone(), count).run_stream("go")).await;
    let expected: Vec<String> = (0..count).map(|i| i.to_string()).collect();
    assert_eq!(nested_texts(&events), expected);
    assert_eq!(tool.accepted.load(Ordering::SeqCst), count);
    assert!(tool.takes.load(Ordering::SeqCst));
    assert_eq!(outcome(&events).answer, "finished");
}

#[tokio::test]
async fn try_emit_nested_drops_what_does_not_fit_the_buffer() {
    // The tool emits without yielding, so the driver cannot take any before it returns.
    let count = NESTED_EVENT_BUFFER + 50;
    let tool = Chatter { wait: false, ..Chatter::default() };
    let events = collect(agent(tool.clone(), count).run_stream("go")).await;
    let expected: Vec<String> = (0..NESTED_EVENT_BUFFER).map(|i| i.to_string()).collect();
    assert_eq!(nested_texts(&events), expected);
    assert_eq!(tool.accepted.load(Ordering::SeqCst), NESTED_EVENT_BUFFER);
}

#[tokio::test]
async fn a_run_without_transient_events_and_a_detached_context_drop_nested_events() {
    let tool = Chatter { wait: true, ..Chatter::default() };
    let outcome = agent(tool.clone(), 3).run("go").await.unwrap();
    assert_eq!(outcome.answer, "finished");
    assert!(!tool.takes.load(Ordering::SeqCst));
    assert_eq!(tool.accepted.load(Ordering::SeqCst), 0);

    let ctx = ToolContext::detached("c");
    assert!(!ctx.takes_nested_events());
    assert!(!ctx.emit_nested(None, Event::Resumed).await);
    assert!(!ctx.try_emit_nested(None, Event::Resumed));
}

/// Emits one nested event from a task of its own, then waits until the run's consumer has
/// seen it: the run must pass nested events on while the call is still running.
struct Handshake {
    seen: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl DynTool for Handshake {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "handshake".into(),
            description: "Waits until its nested event was seen.".into(),
            parameters: json!({"type": "object"}),
        }
    }

    async fn call_json(&self, _args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let emitter = ctx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            emitter.emit_nested(None, Event::Text { text: "hello".into() }).await
        });
        tokio::time::timeout(Duration::from_secs(5), self.seen.notified())
            .await
            .map_err(|_| ToolError::Failed("the nested event was not passed on".into()))?;
        Ok(ToolOutput::Value(json!("seen")))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_events_are_streamed_while_the_call_runs_and_are_not_journaled() {
    let seen = Arc::new(tokio::sync::Notify::new());
    let store = Arc::new(MemoryStore::new());
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("handshake", json!({})),
        ScriptedTurn::text("finished"),
    ]);
    let agent = Agent::builder(model)
        .dyn_tool(Arc::new(Handshake { seen: seen.clone() }))
        .store(store.clone())
        .build()
        .unwrap();
    let (handle, mut stream) = agent.start("go");
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        if let Event::Nested { run_id: None, event, .. } = &event {
            assert_eq!(**event, Event::Text { text: "hello".into() });
            seen.notify_one();
        }
        events.push(event);
    }
    let completed = events.iter().find_map(|e| match e {
        Event::ToolCompleted { result, .. } => Some(result.content.clone()),
        _ => None,
    });
    assert_eq!(completed.unwrap().to_text(), "seen");
    let journal = store.load(handle.run_id()).await.unwrap();
    assert!(journal.iter().all(|entry| entry.event.kind() != "nested"));
    let nested = events.iter().find(|e| e.kind() == "nested").unwrap().clone();
    assert!(!nested.is_durable());
    assert!(JournalEvent::new(nested).is_err());
}

#[test]
fn a_nested_event_serializes_with_its_call_run_and_event() {
    let event = Event::Nested {
        call_id: "call_1".into(),
        run_id: Some("run_child".into()),
        event: Box::new(Event::TextDelta { delta: "hi".into() }),
    };
    let json = serde_json::to_value(&event).unwrap();
    assert_eq!(
        json,
        json!({"type": "nested", "call_id": "call_1", "run_id": "run_child",
               "event": {"type": "text_delta", "delta": "hi"}})
    );
    for schema in [agentloop::schema::event(), agentloop::schema::envelope()] {
        let validator = jsonschema::validator_for(schema.as_value()).unwrap();
        let instance = if schema.as_value()["properties"].get("run_id").is_some() {
            json!({"run_id": "run_parent", "seq": 3, "sub": 1, "at_ms": 0, "format": 1, "event": json})
        } else {
            json.clone()
        };
        assert!(validator.is_valid(&instance), "{instance}");
        let mut wrong = instance.clone();
        let inner = if wrong.get("seq").is_some() { &mut wrong["event"] } else { &mut wrong };
        inner["event"] = json!({"type": "no_such_event"});
        assert!(!validator.is_valid(&wrong), "{wrong}");
    }
    assert_eq!(serde_json::from_value::<Event>(json).unwrap(), event);
    let without_run = json!({"type": "nested", "call_id": "c", "event": {"type": "resumed"}});
    let Event::Nested { run_id, .. } = serde_json::from_value(without_run).unwrap() else {
        panic!()
    };
    assert_eq!(run_id, None);
}

/// Reports that its work used (40, 10) tokens twice, at 0.25 USD each time.
struct Spender;

#[async_trait]
impl DynTool for Spender {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "spender".into(),
            description: "Uses tokens elsewhere.".into(),
            parameters: json!({"type": "object"}),
        }
    }

    async fn call_json(&self, _args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        for _ in 0..2 {
            ctx.report_usage(Usage { input: 40, output: 10, ..Usage::default() }, 0.25);
        }
        Ok(ToolOutput::Value(json!("spent")))
    }
}

#[tokio::test]
async fn reported_usage_is_journaled_with_the_result_and_counts_against_the_budgets() {
    let used = |input, output| Usage { input, output, ..Usage::default() };
    let store = Arc::new(MemoryStore::new());
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("spender", json!({})).with_usage(used(10, 1)),
        ScriptedTurn::text("wound down").with_usage(used(10, 1)),
    ]);
    let agent = Agent::builder(model)
        .dyn_tool(Arc::new(Spender))
        .price(agentloop::run::Price::per_million(0.0, 0.0))
        .max_cost_usd(0.5)
        .store(store.clone())
        .build()
        .unwrap();
    // `run`: no transient events, the usage still counts.
    let outcome = agent.run("go").await.unwrap();
    // The call's 0.5 USD reach the budget: the next model call is the wind-down.
    assert_eq!(
        outcome.stop_reason,
        StopReason::LimitReached { limit: agentloop::run::LimitKind::Cost }
    );
    assert_eq!(outcome.usage, used(100, 22));
    assert_eq!(outcome.answer, "wound down");
    assert_eq!(outcome.metrics.cost_usd, 0.5);
    let journal = store.load(&outcome.run_id).await.unwrap();
    let reported: Vec<_> = journal
        .iter()
        .filter_map(|e| match &*e.event {
            Event::ToolCompleted { usage, cost_usd, .. } => {
                Some((usage.as_deref().copied(), *cost_usd))
            }
            _ => None,
        })
        .collect();
    assert_eq!(reported, [(Some(used(80, 20)), Some(0.5))]);
    let run = agentloop::run::Run::from_journal(journal.iter().map(|e| &*e.event)).unwrap();
    assert_eq!((run.usage(), run.spent().cost_usd), (used(100, 22), 0.5));

    // Outside a run a report goes nowhere.
    ToolContext::detached("c").report_usage(used(1, 1), 1.0);
}

#[tokio::test]
async fn concurrent_calls_nested_events_each_come_between_their_own_calls_start_and_result() {
    let count = NESTED_EVENT_BUFFER + 44;
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("chatter", json!({ "count": count }))
            .with_call_id("call_a")
            .with_tool_call("chatter", json!({ "count": count }))
            .with_call_id("call_b"),
        ScriptedTurn::text("finished"),
    ]);
    let tool = Chatter { wait: true, ..Chatter::default() };
    let agent = Agent::builder(model).dyn_tool(Arc::new(tool)).tool_concurrency(2).build().unwrap();
    let events = collect(agent.run_stream("go")).await;
    for id in ["call_a", "call_b"] {
        let started = events
            .iter()
            .position(|e| matches!(e, Event::ToolStarted { call, .. } if call.id == id))
            .unwrap();
        let completed = events
            .iter()
            .position(|e| matches!(e, Event::ToolCompleted { result, .. } if result.call_id == id))
            .unwrap();
        let mut texts = Vec::new();
        for (index, event) in events.iter().enumerate() {
            if let Event::Nested { call_id, event, .. } = event {
                if call_id == id {
                    assert!(started < index && index < completed, "{id}: nested at {index}");
                    let Event::Text { text } = &**event else { panic!("{event:?}") };
                    texts.push(text.clone());
                }
            }
        }
        let expected: Vec<String> = (0..count).map(|i| i.to_string()).collect();
        assert_eq!(texts, expected, "{id}");
    }
}

/// Reports a remote task (working, then settled as `args.end`), then ends as `args.end`
/// says: `completed` returns, `failed` fails, `hang` waits for its timeout.
struct Remoter;

#[async_trait]
impl DynTool for Remoter {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "remoter".into(),
            description: "Runs as a remote task.".into(),
            parameters: json!({"type": "object", "properties": {"end": {"type": "string"}}}),
        }
    }

    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_millis(200))
    }

    async fn call_json(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let end = args["end"].as_str().unwrap().to_owned();
        let task = RemoteTask::new("weather", "http://h/rpc", &format!("task-{end}"));
        ctx.report_remote(task.clone().with_state("working"));
        ctx.report_remote(
            task.with_context_id("ctx-1")
                .with_state(&end)
                .with_view_url(&format!("http://h/ui/#/runs/task-{end}")),
        );
        match end.as_str() {
            "completed" => Ok(ToolOutput::Value(json!("sunny"))),
            "failed" => Err(ToolError::Failed("the remote task failed".into())),
            _ => std::future::pending().await,
        }
    }
}

#[tokio::test]
async fn a_reported_remote_task_is_journaled_with_the_result_whatever_it_is() {
    let store = Arc::new(MemoryStore::new());
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("remoter", json!({"end": "completed"}))
            .with_tool_call("remoter", json!({"end": "failed"}))
            .with_tool_call("remoter", json!({"end": "hang"})),
        ScriptedTurn::text("done"),
    ]);
    let agent = Agent::builder(model)
        .dyn_tool(Arc::new(Remoter))
        .tool_concurrency(3)
        .store(store.clone())
        .build()
        .unwrap();
    let outcome = agent.run("go").await.unwrap();
    let journal = store.load(&outcome.run_id).await.unwrap();
    let mut remotes: Vec<(&str, RemoteTask)> =
        journal.iter().filter_map(|e| Some((e.event.kind(), e.event.remote()?.clone()))).collect();
    remotes.sort_by(|a, b| a.1.task_id.cmp(&b.1.task_id));
    let kinds: Vec<_> = remotes.iter().map(|(kind, r)| (*kind, r.task_id.as_str())).collect();
    assert_eq!(
        kinds,
        [
            ("tool_completed", "task-completed"),
            ("tool_failed", "task-failed"),
            ("tool_timed_out", "task-hang")
        ]
    );
    // The last report counts.
    let (_, completed) = &remotes[0];
    assert_eq!(completed.state.as_deref(), Some("completed"));
    assert_eq!(completed.context_id.as_deref(), Some("ctx-1"));
    assert_eq!(completed.view_url.as_deref(), Some("http://h/ui/#/runs/task-completed"));
    assert_eq!((completed.agent.as_str(), completed.url.as_str()), ("weather", "http://h/rpc"));
    // A journal that has it folds (a resume reads it) and round-trips.
    agentloop::run::Run::from_journal(journal.iter().map(|e| &*e.event)).unwrap();
    let line =
        serde_json::to_value(&*journal.iter().find(|e| e.event.remote().is_some()).unwrap().event)
            .unwrap();
    assert_eq!(line["remote"]["task_id"], "task-completed");
    // Outside a run a report goes nowhere.
    ToolContext::detached("c").report_remote(RemoteTask::new("a", "http://h", "t"));
}
