//! The run's time limit (`max_duration`) is a deadline: it stops the model call or the tools
//! in flight when it passes, not only the next call; after tools the run winds down under the
//! wind-down call's own budget, after a model that stalled it ends at once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::{ProviderError, RetryPolicy};
use agentloop::run::{LimitKind, RunConfig};
use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_millis(300);

fn time_limit() -> StopReason {
    StopReason::LimitReached { limit: LimitKind::Duration }
}

fn finished(events: &[Event]) -> Outcome {
    match events.last() {
        Some(Event::RunFinished { outcome }) => (**outcome).clone(),
        other => panic!("the run finishes: {other:?} ({:?})", kinds(events)),
    }
}

/// Sleeps for a minute unless dropped, and says whether it was dropped.
struct Sleeper(Arc<AtomicBool>);

impl Tool for Sleeper {
    const NAME: &'static str = "sleep";
    type Args = serde_json::Value;
    type Output = String;
    type Error = String;
    fn description(&self) -> String {
        "Sleeps for a minute.".into()
    }
    async fn call(&self, _args: Self::Args, _ctx: ToolContext) -> Result<String, String> {
        let finished = self.0.clone();
        tokio::time::sleep(Duration::from_secs(60)).await;
        finished.store(true, Ordering::SeqCst);
        Ok("slept".into())
    }
}

#[tokio::test]
async fn a_model_that_stalls_is_cut_at_the_deadline_and_the_run_ends_without_a_wind_down() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::hang(), ScriptedTurn::text("late")]));
    let agent = Agent::builder(model.clone()).max_duration(LIMIT).build().unwrap();
    let started = Instant::now();
    let events = collect(agent.run_stream("hi")).await;
    let elapsed = started.elapsed();
    assert!(elapsed >= LIMIT && elapsed < LIMIT + Duration::from_secs(1), "{elapsed:?}");
    let outcome = finished(&events);
    assert_eq!(outcome.stop_reason, time_limit());
    assert_eq!(model.request_count(), 1, "no wind-down call to the model that stalled");
    assert_eq!(model.dropped_streams(), 1, "the stream in flight was dropped");
    let failed = events.iter().find_map(|e| match e {
        Event::ModelFailed { error: ProviderError::Timeout { message }, .. } => Some(message),
        _ => None,
    });
    assert_eq!(
        failed.map(String::as_str),
        Some("the run's time limit passed during the model call")
    );
    assert!(kinds(&events).contains(&"limit_reached"));
}

#[tokio::test]
async fn a_retry_backoff_does_not_outlast_the_deadline() {
    let busy = ProviderError::Server { status: 503, message: "busy".into() };
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::error(busy), ScriptedTurn::text("ok")]));
    let policy = RetryPolicy::new().without_jitter().with_base(Duration::from_secs(20));
    let agent = Agent::builder(model.clone())
        .retry_policy(Some(policy))
        .max_duration(LIMIT)
        .build()
        .unwrap();
    let started = Instant::now();
    let events = collect(agent.run_stream("hi")).await;
    assert!(started.elapsed() < LIMIT + Duration::from_secs(1), "{:?}", started.elapsed());
    assert_eq!(finished(&events).stop_reason, time_limit());
    assert_eq!(model.request_count(), 1, "the retry waiting 20 s was never sent");
}

#[tokio::test]
async fn tools_in_flight_are_stopped_at_the_deadline_and_the_run_winds_down() {
    let dropped = Arc::new(AtomicBool::new(false));
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("sleep", serde_json::json!({})),
        ScriptedTurn::text("I ran out of time while the tool slept."),
    ]));
    let agent = Agent::builder(model.clone())
        .tool(Sleeper(dropped.clone()))
        .max_duration(LIMIT)
        .build()
        .unwrap();
    let started = Instant::now();
    let events = collect(agent.run_stream("sleep")).await;
    assert!(started.elapsed() < LIMIT + Duration::from_secs(1), "{:?}", started.elapsed());
    let outcome = finished(&events);
    assert_eq!(outcome.stop_reason, time_limit());
    assert_eq!(outcome.answer, "I ran out of time while the tool slept.", "the wind-down's");
    let error = events.iter().find_map(|e| match e {
        Event::ToolFailed { error, .. } => Some(error.to_string()),
        _ => None,
    });
    let text = error.unwrap_or_default();
    assert!(text.contains("time limit passed while the tool ran"), "{text}");
    // The wind-down request has no tools and asks for the answer.
    let wind_down = &model.requests()[1];
    assert!(wind_down.tools.is_empty());
    assert!(!dropped.load(Ordering::SeqCst), "the tool never finished: it was stopped");
}

#[tokio::test]
async fn the_wind_down_call_has_a_budget_of_its_own() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("sleep", serde_json::json!({})),
        ScriptedTurn::hang(),
    ]));
    let agent = Agent::builder(model.clone())
        .tool(Sleeper(Arc::new(AtomicBool::new(false))))
        .max_duration(LIMIT)
        .wind_down_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let started = Instant::now();
    let events = collect(agent.run_stream("sleep")).await;
    let elapsed = started.elapsed();
    assert!(elapsed >= LIMIT + Duration::from_millis(200), "{elapsed:?}");
    assert!(elapsed < LIMIT + Duration::from_secs(1), "{elapsed:?}");
    let outcome = finished(&events);
    assert_eq!(outcome.stop_reason, time_limit());
    assert_eq!(outcome.answer, RunConfig::default().wind_down_fallback);
    assert_eq!(model.request_count(), 2);
}

#[tokio::test]
async fn a_run_within_its_time_limit_is_unchanged() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("add", serde_json::json!({"a": 2, "b": 3})),
        ScriptedTurn::text("5"),
    ]));
    let agent = Agent::builder(model.clone())
        .tool(Add)
        .max_duration(Duration::from_secs(60))
        .build()
        .unwrap();
    let events = collect(agent.run_stream("add")).await;
    let outcome = finished(&events);
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(outcome.answer, "5");
}
