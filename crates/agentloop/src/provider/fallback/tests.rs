#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::{Message, Usage};
use crate::provider::scripted::{ScriptedModel, ScriptedTurn};
use crate::provider::{collect, ModelRequest};

/// A scripted model under a name of its own, with a retry policy.
struct Named {
    inner: Arc<ScriptedModel>,
    name: &'static str,
    retry: Option<RetryPolicy>,
    streams: bool,
}

impl Provider for Named {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        self.inner.stream(request)
    }
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        self.inner.complete(request)
    }
    fn name(&self) -> &str {
        self.name
    }
    fn family(&self) -> &str {
        "test"
    }
    fn retry_policy(&self) -> Option<RetryPolicy> {
        self.retry.clone()
    }
    fn streams(&self) -> bool {
        self.streams
    }
}

fn quick_retries(attempts: u32) -> RetryPolicy {
    RetryPolicy::new()
        .with_base(Duration::from_millis(1))
        .with_max_attempts(attempts)
        .without_jitter()
}

fn model(turns: impl IntoIterator<Item = ScriptedTurn>) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(turns))
}

fn member(inner: &Arc<ScriptedModel>, name: &'static str) -> Member {
    Fallback::member(Named { inner: Arc::clone(inner), name, retry: None, streams: true })
}

fn rate_limited() -> ProviderError {
    ProviderError::RateLimited { message: "slow down".into(), retry_after_ms: None }
}

fn overloaded() -> ProviderError {
    ProviderError::Overloaded { message: "overloaded".into() }
}

fn ask() -> ModelRequest {
    ModelRequest::new(vec![Message::user("hi")])
}

async fn chunks(chain: &Fallback) -> Vec<Result<StreamChunk, ProviderError>> {
    chain.stream(ask()).collect().await
}

#[tokio::test]
async fn a_rate_limit_falls_back_once_the_members_retries_are_spent() {
    let first = model([ScriptedTurn::error(rate_limited()), ScriptedTurn::error(rate_limited())]);
    let second = model([ScriptedTurn::text("from the second")]);
    let retried = Named {
        inner: Arc::clone(&first),
        name: "first",
        retry: Some(quick_retries(2)),
        streams: true,
    };
    let chain = Fallback::new([Fallback::member(retried), member(&second, "second")]).unwrap();
    assert_eq!(chain.name(), "first,second");
    assert_eq!(chain.family(), "fallback");
    assert_eq!(chain.retry_policy(), None);
    let response = collect(chain.stream(ask())).await.unwrap();
    assert_eq!(first.request_count(), 2, "the first member is retried under its own policy");
    assert_eq!(second.request_count(), 1);
    assert_eq!(response.message.text(), "from the second");
    assert_eq!(response.provider.as_deref(), Some("test:second"));
    // The same request went to both.
    assert_eq!(first.requests()[0], second.requests()[0]);
}

#[tokio::test]
async fn the_answering_member_is_announced_before_its_content() {
    let first = model([ScriptedTurn::error(overloaded())]);
    let second = model([ScriptedTurn::text("ok")]);
    let chain = Fallback::new([member(&first, "first"), member(&second, "second")]).unwrap();
    let chunks = chunks(&chain).await;
    assert_eq!(
        chunks.first().unwrap().as_ref().unwrap(),
        &StreamChunk::Answered { provider: "test:second".into() }
    );
    // The primary answering is announced too: every call names its member.
    let only = model([ScriptedTurn::text("ok")]);
    let chain = Fallback::new([member(&only, "only")]).unwrap();
    let response = collect(chain.stream(ask())).await.unwrap();
    assert_eq!(response.provider.as_deref(), Some("test:only"));
}

#[tokio::test]
async fn no_fallback_once_content_has_streamed() {
    let first = model([ScriptedTurn::text("half an answer").with_error_after(1, overloaded())]);
    let second = model([ScriptedTurn::text("never")]);
    let chain = Fallback::new([member(&first, "first"), member(&second, "second")]).unwrap();
    let chunks = chunks(&chain).await;
    assert!(matches!(chunks.last(), Some(Err(ProviderError::Overloaded { .. }))), "{chunks:?}");
    assert_eq!(second.request_count(), 0);
}

#[tokio::test]
async fn an_error_the_policy_keeps_is_the_calls_error() {
    let invalid = ProviderError::InvalidRequest { message: "bad schema".into() };
    let first = model([ScriptedTurn::error(invalid.clone())]);
    let second = model([ScriptedTurn::text("never")]);
    let chain = Fallback::new([member(&first, "first"), member(&second, "second")]).unwrap();
    assert_eq!(collect(chain.stream(ask())).await.unwrap_err(), invalid);
    assert_eq!(second.request_count(), 0);
    // Refused credentials fall back only when the policy says so.
    let auth = ProviderError::Auth { status: 401, message: "revoked".into() };
    let first = model([ScriptedTurn::error(auth.clone()), ScriptedTurn::error(auth.clone())]);
    let second = model([ScriptedTurn::text("ok")]);
    let chain = Fallback::new([member(&first, "first"), member(&second, "second")]).unwrap();
    assert_eq!(collect(chain.stream(ask())).await.unwrap_err(), auth);
    let chain = chain.with_policy(FallbackPolicy::new().with_auth(true));
    assert_eq!(collect(chain.stream(ask())).await.unwrap().message.text(), "ok");
}

#[tokio::test]
async fn when_every_member_fails_the_error_is_the_lasts_naming_them_all() {
    let first = model([ScriptedTurn::error(rate_limited())]);
    let second = model([ScriptedTurn::error(ProviderError::Server {
        status: 503,
        message: "unavailable".into(),
    })]);
    let chain = Fallback::new([member(&first, "first"), member(&second, "second")]).unwrap();
    let error = collect(chain.stream(ask())).await.unwrap_err();
    let ProviderError::Server { status: 503, message } = &error else {
        panic!("not the last member's kind: {error:?}")
    };
    assert!(message.starts_with("every provider of the fallback chain failed"), "{message}");
    assert!(message.contains("test:first: ") && message.contains("slow down"), "{message}");
    assert!(message.contains("test:second: ") && message.contains("unavailable"), "{message}");
    assert!(error.is_retryable(), "still classified as the server error it is");
}

#[tokio::test]
async fn an_unreachable_member_is_not_retried_inside_the_chain() {
    let down = ProviderError::Unreachable { message: "connection refused".into() };
    let first = model([ScriptedTurn::error(down.clone()), ScriptedTurn::error(down)]);
    let second = model([ScriptedTurn::text("ok")]);
    let retried = Named {
        inner: Arc::clone(&first),
        name: "first",
        retry: Some(quick_retries(3)),
        streams: true,
    };
    let chain = Fallback::new([Fallback::member(retried), member(&second, "second")]).unwrap();
    assert_eq!(collect(chain.stream(ask())).await.unwrap().message.text(), "ok");
    assert_eq!(first.request_count(), 1);
}

#[tokio::test]
async fn a_content_filter_falls_back_only_when_configured() {
    let filtered = || ScriptedTurn::text("").with_finish(FinishReason::ContentFilter);
    let first = model([filtered(), filtered()]);
    let second = model([ScriptedTurn::text("answered")]);
    let chain = Fallback::new([member(&first, "first"), member(&second, "second")]).unwrap();
    let kept = collect(chain.stream(ask())).await.unwrap();
    assert_eq!(kept.finish_reason, FinishReason::ContentFilter);
    assert_eq!(kept.provider.as_deref(), Some("test:first"));
    let chain = chain.with_policy(FallbackPolicy::new().with_content_filter(true));
    let moved = collect(chain.stream(ask())).await.unwrap();
    assert_eq!(moved.message.text(), "answered");
    assert_eq!(moved.provider.as_deref(), Some("test:second"));
    // A refusal naming the filter (Azure's 400) too.
    assert!(chain.policy.falls_back(&ProviderError::InvalidRequest {
        message: "The response was filtered due to the prompt triggering Azure OpenAI's content management policy".into()
    }));
}

#[tokio::test]
async fn whole_responses_fall_back_the_same_way() {
    let first = model([ScriptedTurn::error(overloaded())]);
    let second = model([ScriptedTurn::text("whole")]);
    let whole = |inner: &Arc<ScriptedModel>, name| {
        Fallback::member(Named { inner: Arc::clone(inner), name, retry: None, streams: false })
    };
    let chain = Fallback::new([whole(&first, "first"), whole(&second, "second")]).unwrap();
    assert!(!chain.streams());
    let response = chain.complete(ask()).await.unwrap();
    assert_eq!(response.message.text(), "whole");
    assert_eq!(response.provider.as_deref(), Some("test:second"));
}

#[test]
fn a_chain_needs_members_with_distinct_labels() {
    assert_eq!(Fallback::new(Vec::<Member>::new()).unwrap_err(), FallbackError::Empty);
    let one = model([]);
    let error = Fallback::new([member(&one, "same"), member(&one, "same")]).unwrap_err();
    assert_eq!(error, FallbackError::Duplicate("test:same".into()));
    assert!(error.to_string().contains("'test:same'"));
}

#[tokio::test]
async fn a_run_journals_and_prices_the_member_that_answered_and_replays_it() {
    use crate::event::Event;
    use crate::terms::Price;
    let first = model([ScriptedTurn::error(overloaded())]);
    let second = model([ScriptedTurn::text("hello").with_usage(Usage {
        input: 1_000_000,
        output: 0,
        ..Usage::default()
    })]);
    let chain = Fallback::new([member(&first, "first"), member(&second, "second")]).unwrap();
    let agent = crate::Agent::builder(chain)
        .price(Price::per_million(10.0, 0.0))
        .provider_price("test:second", Price::per_million(1.0, 0.0))
        .build()
        .unwrap();
    let events: Vec<Event> = agent.run_stream("hi").collect().await;
    let answered: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::ModelResponded { provider, .. } => Some(provider.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(answered, [Some("test:second".into())]);
    let outcome = events.iter().find_map(Event::outcome).unwrap();
    assert!((outcome.metrics.cost_usd - 1.0).abs() < 1e-9, "{}", outcome.metrics.cost_usd);
    // The journal reads back with the member.
    let json = serde_json::to_string(
        events.iter().find(|e| matches!(e, Event::ModelResponded { .. })).unwrap(),
    )
    .unwrap();
    assert!(json.contains(r#""provider":"test:second""#), "{json}");
    // Replayed from its journal alone: the same member, the same cost.
    let durable: Vec<Event> = events.iter().filter(|e| e.is_durable()).cloned().collect();
    let replay = crate::agent::JournalReplay::from_journal(&durable).unwrap();
    let replayed: Vec<Event> = replay.run().unwrap().collect().await;
    let again = replayed.iter().find_map(|e| match e {
        Event::ModelResponded { provider, .. } => Some(provider.clone()),
        _ => None,
    });
    assert_eq!(again, Some(Some("test:second".into())));
    let outcome = replayed.iter().find_map(Event::outcome).unwrap();
    assert!((outcome.metrics.cost_usd - 1.0).abs() < 1e-9, "{}", outcome.metrics.cost_usd);
}
