//! The driver's retry of failed model calls: before any content, with the policy's backoff or
//! the provider's Retry-After, an event per retry; never after content reached the caller.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::RetryPolicy;
use common::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn fast() -> Option<RetryPolicy> {
    Some(
        RetryPolicy::new()
            .without_jitter()
            .with_base(Duration::from_millis(10))
            .with_max_attempts(3),
    )
}

fn retries(events: &[Event]) -> Vec<(u32, u64, ProviderError)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ModelRetrying { attempt, delay_ms, error } => {
                Some((*attempt, *delay_ms, error.clone()))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_failure_before_any_content_is_retried_with_backoff_and_an_event() {
    let busy = ProviderError::Server { status: 503, message: "busy".into() };
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::error(busy.clone()),
        ScriptedTurn::error(busy.clone()),
        ScriptedTurn::text("ok"),
    ]));
    let agent = Agent::builder(model.clone()).retry_policy(fast()).build().unwrap();
    let events = collect(agent.run_stream("hi")).await;
    assert_eq!(retries(&events), vec![(1, 10, busy.clone()), (2, 20, busy)]);
    assert_eq!(outcome(&events).answer, "ok");
    assert_eq!(outcome(&events).iterations, 1, "retries stay within the iteration");
    assert!(!kinds(&events).contains(&"model_failed"));
    assert_eq!(model.request_count(), 3);
    assert_eq!(model.requests()[2], model.requests()[0], "the same request is sent again");
}

#[tokio::test]
async fn retry_after_from_the_provider_is_honoured() {
    let limited =
        ProviderError::RateLimited { message: "slow down".into(), retry_after_ms: Some(60) };
    let model =
        Arc::new(ScriptedModel::new([ScriptedTurn::error(limited), ScriptedTurn::text("ok")]));
    let agent = Agent::builder(model).retry_policy(fast()).build().unwrap();
    let started = Instant::now();
    let events = collect(agent.run_stream("hi")).await;
    assert!(started.elapsed() >= Duration::from_millis(60));
    assert_eq!(retries(&events)[0].1, 60);
    assert_eq!(outcome(&events).answer, "ok");
}

#[tokio::test]
async fn a_stream_that_already_delivered_content_is_not_resent() {
    let reset = ProviderError::Network { message: "reset".into() };
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::text("partial answer that breaks").with_error_after(2, reset),
        ScriptedTurn::text("full answer"),
    ]));
    let agent = Agent::builder(model).retry_policy(fast()).build().unwrap();
    let events = collect(agent.run_stream("hi")).await;
    assert!(retries(&events).is_empty(), "no silent re-send");
    assert!(kinds(&events).contains(&"model_failed"), "the error surfaces to the run");
    let outcome = outcome(&events);
    assert_eq!(outcome.answer, "full answer");
    assert_eq!(outcome.iterations, 2, "the run decided to try again in a new iteration");
}

#[tokio::test]
async fn non_retryable_errors_and_exhausted_attempts_fail() {
    let auth = ProviderError::Auth { status: 401, message: "bad key".into() };
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::error(auth)]));
    let agent = Agent::builder(model.clone()).retry_policy(fast()).build().unwrap();
    let events = collect(agent.run_stream("hi")).await;
    assert!(retries(&events).is_empty());
    assert_eq!(events.last().unwrap().kind(), "run_failed");
    assert_eq!(model.request_count(), 1);

    let busy = || {
        ScriptedTurn::error(ProviderError::Server { status: 502, message: "bad gateway".into() })
    };
    let model = Arc::new(ScriptedModel::new([busy(), busy(), busy(), ScriptedTurn::text("late")]));
    let agent = Agent::builder(model.clone())
        .retry_policy(fast())
        .limits(Limits { max_consecutive_model_errors: 1, ..Limits::default() })
        .build()
        .unwrap();
    let events = collect(agent.run_stream("hi")).await;
    assert_eq!(retries(&events).len(), 2, "three attempts in all");
    assert_eq!(model.request_count(), 3);
    assert!(kinds(&events).contains(&"model_failed"));
}

#[tokio::test]
async fn cancel_interrupts_the_backoff() {
    let busy = ProviderError::Server { status: 503, message: "busy".into() };
    let model =
        Arc::new(ScriptedModel::new([ScriptedTurn::error(busy), ScriptedTurn::text("never")]));
    let slow = RetryPolicy::new().without_jitter().with_base(Duration::from_secs(30));
    let agent = Agent::builder(model.clone()).retry_policy(Some(slow)).build().unwrap();
    let (handle, events) = agent.start("hi");
    let task = tokio::spawn(collect(events));
    tokio::time::sleep(Duration::from_millis(30)).await;
    let cancelled = Instant::now();
    handle.cancel("stop");
    let events = task.await.unwrap();
    assert!(cancelled.elapsed() < Duration::from_millis(100));
    assert_eq!(events.last().unwrap().kind(), "run_cancelled");
    assert_eq!(model.request_count(), 1);
}

#[tokio::test]
async fn no_policy_means_no_driver_retries() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::error(ProviderError::Server { status: 503, message: "busy".into() }),
        ScriptedTurn::text("ok"),
    ]));
    // The scripted model has no policy of its own.
    let agent = Agent::builder(model).build().unwrap();
    let events = collect(agent.run_stream("hi")).await;
    assert!(retries(&events).is_empty());
    assert_eq!(outcome(&events).iterations, 2, "the run's own retry in a new iteration");
}
