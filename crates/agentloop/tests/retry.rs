//! Retries: the driver's attempts inside a model call (before any content, with the policy's
//! backoff or the provider's Retry-After, an event per retry; never after content reached the
//! caller), and how they compose with the run's re-asks (`max_consecutive_model_errors`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::Provider;
use agentloop::provider::ProviderError;
use agentloop::provider::RetryPolicy;
use agentloop::run::LimitKind;
use agentloop::run::Limits;
use agentloop::run::RunConfig;
use agentloop::store::MemoryStore;
use agentloop::store::RunStore;
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

// The composition of the two tiers (docs/PROVIDERS.md, "Retries"): the driver's attempts
// under the `RetryPolicy` inside one model call, the run's re-asks under
// `max_consecutive_model_errors` across calls.

/// A policy of `attempts` attempts in all, 1 ms apart.
fn attempts(attempts: u32) -> Option<RetryPolicy> {
    Some(
        RetryPolicy::new()
            .without_jitter()
            .with_base(Duration::from_millis(1))
            .with_max_attempts(attempts),
    )
}

fn busy() -> ScriptedTurn {
    ScriptedTurn::error(ProviderError::Server { status: 503, message: "busy".into() })
}

/// The kinds of the journal of `run_id` in `store`.
async fn journaled(store: &MemoryStore, run_id: &str) -> Vec<&'static str> {
    store.load(run_id).await.unwrap().iter().map(|entry| entry.event.kind()).collect()
}

fn count(kinds: &[&str], kind: &str) -> usize {
    kinds.iter().filter(|k| **k == kind).count()
}

#[tokio::test]
async fn a_provider_that_keeps_failing_gets_attempts_times_calls_requests_then_the_run_gives_up() {
    // 3 attempts per call, 2 failed calls in a row end the run: 6 requests in all.
    let mut turns: Vec<ScriptedTurn> = (0..6).map(|_| busy()).collect();
    turns.push(ScriptedTurn::text("never asked"));
    let model = Arc::new(ScriptedModel::new(turns));
    let store = Arc::new(MemoryStore::new());
    let agent = Agent::builder(model.clone())
        .retry_policy(attempts(3))
        .limits(Limits { max_consecutive_model_errors: 2, ..Limits::default() })
        .store(store.clone())
        .build()
        .unwrap();
    let options = RunOptions { run_id: Some("gives_up".into()), ..RunOptions::default() };
    let events = collect(agent.run_stream_with("hi", options)).await;

    assert_eq!(model.request_count(), 6, "attempts (3) × failed calls (2); no wind-down call");
    let retried: Vec<u32> = retries(&events).iter().map(|(attempt, ..)| *attempt).collect();
    assert_eq!(retried, vec![1, 2, 1, 2], "two retries within each call, streamed");
    let journal = journaled(&store, "gives_up").await;
    assert_eq!(count(&journal, "model_failed"), 2, "one per call, after its last attempt");
    assert_eq!(count(&journal, "model_retrying"), 0, "retries are not journaled");
    assert_eq!(count(&journal, "model_requested"), 2, "one per call, not per attempt");
    // With a store the terminal event is followed by its `checkpointed`.
    let outcome = events.iter().rev().find_map(Event::outcome).cloned().unwrap();
    assert_eq!(
        outcome.stop_reason,
        StopReason::LimitReached { limit: LimitKind::ConsecutiveModelErrors }
    );
    assert_eq!(outcome.answer, "", "no answer is made up");
    let Some(Event::RunFailed { error, .. }) = events.iter().rev().find(|e| e.outcome().is_some())
    else {
        panic!("the run fails: {:?}", kinds(&events))
    };
    assert!(error.contains("2 calls in a row") && error.contains("busy"), "{error}");
    assert_ne!(outcome.answer, RunConfig::default().wind_down_fallback);
    assert_eq!(outcome.iterations, 2, "each re-ask is a new iteration");
    assert_eq!(outcome.metrics.model_errors, 2);
    assert_eq!(outcome.metrics.model_calls, 2);
}

#[tokio::test]
async fn a_response_resets_the_count_of_failed_calls() {
    // Call 1 fails (3 attempts), call 2 answers with a tool call, call 3 fails, call 4
    // answers: with a limit of 2 failed calls in a row, the run completes.
    let mut turns: Vec<ScriptedTurn> = (0..3).map(|_| busy()).collect();
    turns.push(ScriptedTurn::tool_call("add", serde_json::json!({"a": 1, "b": 2})));
    turns.extend((0..3).map(|_| busy()));
    turns.push(ScriptedTurn::text("3"));
    let model = Arc::new(ScriptedModel::new(turns));
    let agent = Agent::builder(model.clone())
        .tool(Add)
        .retry_policy(attempts(3))
        .limits(Limits { max_consecutive_model_errors: 2, ..Limits::default() })
        .build()
        .unwrap();
    let events = collect(agent.run_stream("add")).await;
    assert_eq!(model.request_count(), 8);
    assert_eq!(count(&kinds(&events), "model_failed"), 2);
    assert_eq!(retries(&events).len(), 4);
    let outcome = outcome(&events);
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(outcome.answer, "3");
}

#[tokio::test]
async fn a_retry_after_beyond_the_policy_fails_the_call_and_the_run_asks_again_at_once() {
    // The policy does not wait 120 s (its longest Retry-After is 60 s): no retry, the call
    // fails, and the run's own re-ask does not wait either (it has no backoff).
    let limited =
        ProviderError::RateLimited { message: "later".into(), retry_after_ms: Some(120_000) };
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::error(limited.clone()),
        ScriptedTurn::error(limited),
        ScriptedTurn::text("ok"),
    ]));
    let agent = Agent::builder(model.clone()).retry_policy(attempts(5)).build().unwrap();
    let started = Instant::now();
    let events = collect(agent.run_stream("hi")).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(retries(&events).is_empty());
    assert_eq!(count(&kinds(&events), "model_failed"), 2);
    assert_eq!(model.request_count(), 3);
    assert_eq!(outcome(&events).answer, "ok");
}

#[tokio::test]
async fn over_http_the_transport_adds_no_attempts_of_its_own() {
    use agentloop::provider::openai::{Dialect, OpenAi};
    use agentloop::provider::HttpConfig;
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(503).set_body_string("busy"))
        .mount(&server)
        .await;
    // The provider's own policy (3 attempts) is the one the driver applies.
    let config = HttpConfig::new(format!("{}/v1", server.uri()), "gpt-4.1")
        .retry_policy(attempts(3).unwrap());
    let provider = OpenAi::chat_with(config, Dialect::openai()).unwrap();
    assert_eq!(Provider::retry_policy(&provider), attempts(3));
    let agent = Agent::builder(provider)
        .limits(Limits { max_consecutive_model_errors: 2, ..Limits::default() })
        .build()
        .unwrap();
    let events = collect(agent.run_stream("hi")).await;
    let requests = server.received_requests().await.unwrap_or_default();
    assert_eq!(requests.len(), 6, "attempts (3) × failed calls (2), nothing more");
    assert_eq!(retries(&events).len(), 4);
    assert_eq!(count(&kinds(&events), "model_failed"), 2);
    assert_eq!(
        outcome(&events).stop_reason,
        StopReason::LimitReached { limit: LimitKind::ConsecutiveModelErrors }
    );
}

fn unreachable() -> ScriptedTurn {
    ScriptedTurn::error(ProviderError::Unreachable {
        message: "sending the request: tcp connect error: Connection refused".into(),
    })
}

#[tokio::test]
async fn an_unreachable_model_gets_a_small_budget_for_the_whole_run_then_the_run_fails() {
    // 5 attempts a call and 3 failed calls in a row would be 15 requests: an unreachable
    // server gets 3 requests for the whole run, then the run fails with the cause.
    let model = Arc::new(ScriptedModel::new((0..20).map(|_| unreachable())));
    let policy = RetryPolicy::new().without_jitter().with_base(Duration::from_millis(10));
    let agent = Agent::builder(model.clone()).retry_policy(Some(policy)).build().unwrap();
    let started = Instant::now();
    let events = collect(agent.run_stream("hi")).await;
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert_eq!(model.request_count(), 3, "the unreachable budget, not attempts × calls");
    assert_eq!(retries(&events).len(), 2);
    assert_eq!(count(&kinds(&events), "model_failed"), 1, "one call, never asked again");
    let Some(Event::RunFailed { error, outcome }) = events.last() else {
        panic!("the run fails: {:?}", kinds(&events))
    };
    assert_eq!(outcome.answer, "", "no fallback text as an answer");
    assert!(matches!(outcome.stop_reason, StopReason::ModelError { .. }));
    assert!(error.contains("could not be reached"), "{error}");
    assert!(error.contains("Connection refused"), "the cause: {error}");
    assert!(error.contains("(3 requests in"), "how much was tried: {error}");
}

#[tokio::test]
async fn the_unreachable_budget_has_a_deadline_and_is_renewed_once_the_server_answers() {
    // A budget of 10 requests but 50 ms: the backoff (40, 80 ms…) runs past the deadline
    // after two requests.
    let model = Arc::new(ScriptedModel::new((0..20).map(|_| unreachable())));
    let policy = RetryPolicy::new()
        .without_jitter()
        .with_base(Duration::from_millis(40))
        .with_unreachable_budget(10, Duration::from_millis(50));
    let agent = Agent::builder(model.clone()).retry_policy(Some(policy)).build().unwrap();
    let events = collect(agent.run_stream("hi")).await;
    assert_eq!(model.request_count(), 2, "the second retry would start after the deadline");
    assert!(matches!(events.last(), Some(Event::RunFailed { .. })));

    // Two failures, an answer (a tool call), two failures, an answer: with a budget of 3
    // requests the run completes, since reaching the server renews the budget.
    let model = Arc::new(ScriptedModel::new([
        unreachable(),
        unreachable(),
        ScriptedTurn::tool_call("add", serde_json::json!({"a": 1, "b": 2})),
        unreachable(),
        unreachable(),
        ScriptedTurn::text("3"),
    ]));
    let policy = RetryPolicy::new().without_jitter().with_base(Duration::from_millis(5));
    let agent = Agent::builder(model.clone()).tool(Add).retry_policy(Some(policy)).build().unwrap();
    let events = collect(agent.run_stream("add")).await;
    assert_eq!(outcome(&events).answer, "3");
    assert_eq!(model.request_count(), 6);
}

#[tokio::test]
async fn a_closed_port_is_unreachable_and_fails_the_run_within_its_budget() {
    use agentloop::provider::openai::OpenAi;
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let provider = OpenAi::compatible_at(format!("http://{closed}/v1"), None, "m").unwrap();
    let agent = Agent::builder(provider).build().unwrap();
    let started = Instant::now();
    let events = collect(agent.run_stream("hi")).await;
    let elapsed = started.elapsed();
    // The default budget: 3 requests, backoff 1-2 s then 2-4 s (with jitter), within 10 s.
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    let failed: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::ModelRetrying { error, .. } => Some(error.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 2, "3 requests: 2 retries");
    assert!(failed.iter().all(ProviderError::is_unreachable), "{failed:?}");
    let Some(Event::RunFailed { error, outcome }) = events.last() else {
        panic!("the run fails: {:?}", kinds(&events))
    };
    assert!(outcome.answer.is_empty());
    assert!(error.contains("Connection refused") && error.contains("3 requests"), "{error}");
}

#[tokio::test]
async fn a_failed_tls_handshake_is_unreachable_too() {
    use agentloop::provider::openai::{Dialect, OpenAi};
    use agentloop::provider::HttpConfig;
    use std::io::Write;
    // A plain-text server where the client expects TLS.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(4) {
            let Ok(mut stream) = stream else { return };
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let config =
        HttpConfig::new(format!("https://{address}/v1"), "m").retry_policy(RetryPolicy::never());
    let provider = OpenAi::chat_with(config, Dialect::openai()).unwrap();
    let agent = Agent::builder(provider).build().unwrap();
    let events = collect(agent.run_stream("hi")).await;
    let Some(Event::RunFailed { error, .. }) = events.last() else {
        panic!("the run fails: {:?}", kinds(&events))
    };
    assert!(error.contains("could not be reached"), "{error}");
    assert_eq!(count(&kinds(&events), "model_failed"), 1, "not asked again");
}
