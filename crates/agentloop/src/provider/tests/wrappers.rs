//! Every provider wrapper forwards every [`Provider`] method it does not deliberately change.
//!
//! A probe provider answers each trait method with a value that no default gives; each
//! wrapper is put around it and every method is called through the wrapper. The list of the
//! trait's methods is read from the trait's source, so **a new `Provider` method fails
//! [`every_trait_method_is_probed`] until it is added to [`Probe`] and checked in
//! [`check_forwarding`]** — and then every wrapper that forgets it fails.

use super::*;
use crate::message::Message;
use crate::tool::ToolSpec;
use replay::{RecordingProvider, ReplayProvider};
use std::collections::BTreeSet;
use std::sync::Mutex;

/// The retry policy the probe asks for (no default policy has 7 attempts).
fn probe_policy() -> RetryPolicy {
    RetryPolicy::never().with_max_attempts(7).without_jitter()
}

/// A provider whose every method answers something a default would not.
#[derive(Default)]
struct Probe {
    /// Which method the wrapper called (`stream` / `complete`), with the tool choice the
    /// request had when it arrived.
    calls: Mutex<Vec<(&'static str, ToolChoice)>>,
}

impl Probe {
    fn calls(&self) -> Vec<(&'static str, ToolChoice)> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

impl Provider for Probe {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        self.calls.lock().unwrap().push(("stream", request.tool_choice));
        Box::pin(futures::stream::iter([
            Ok(StreamChunk::TextDelta { text: "streamed".into() }),
            Ok(StreamChunk::Finish { reason: FinishReason::Stop }),
        ]))
    }

    // Not the default (which collects `stream`): a wrapper that forgets to forward it answers
    // "streamed".
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        self.calls.lock().unwrap().push(("complete", request.tool_choice));
        Box::pin(futures::future::ready(Ok(ModelResponse {
            message: Message::assistant("completed"),
            finish_reason: FinishReason::Stop,
            usage: Usage { input: 7, output: 1, ..Usage::default() },
            id: None,
            model: None,
            provider: None,
        })))
    }

    fn name(&self) -> &str {
        "probe-model"
    }

    fn family(&self) -> &str {
        "probe-family"
    }

    fn streams(&self) -> bool {
        false
    }

    fn retry_policy(&self) -> Option<RetryPolicy> {
        Some(probe_policy())
    }

    fn supports_tools(&self) -> bool {
        false
    }

    fn native_output(&self, _with_tools: bool) -> bool {
        true
    }

    fn secrets(&self) -> crate::provider::secrets::Secrets {
        let mut secrets = crate::provider::secrets::Secrets::new();
        secrets.add(PROBE_SECRET);
        secrets
    }
}

/// The probe's secret.
const PROBE_SECRET: &str = "probe-secret-0123456789";

/// What a wrapper changes on purpose.
#[derive(Default)]
struct Deliberate {
    /// It reports this instead of the inner provider's answer.
    supports_tools: Option<bool>,
    /// The inner provider gets requests with this tool choice.
    tool_choice: Option<ToolChoice>,
    /// It reports this as native output with tools instead of the inner provider's answer.
    native_output_with_tools: Option<bool>,
}

fn request() -> ModelRequest {
    ModelRequest {
        messages: Arc::new(vec![Message::user("hi")]),
        tools: Arc::new(vec![ToolSpec {
            name: "t".into(),
            description: "A tool.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }]),
        ..ModelRequest::default()
    }
}

/// Calls every [`Provider`] method through `wrapper` and checks that the probe's answer comes
/// through (or the wrapper's deliberate change). Returns the methods it checked.
async fn check_forwarding(
    label: &str,
    wrapper: &dyn Provider,
    probe: &Probe,
    deliberate: &Deliberate,
) -> BTreeSet<&'static str> {
    let mut checked = BTreeSet::new();
    let choice = |seen: &ToolChoice| {
        if let Some(expected) = &deliberate.tool_choice {
            assert_eq!(seen, expected, "{label}: the tool choice the inner provider got");
        }
    };

    let response = collect(wrapper.stream(request())).await.unwrap();
    assert_eq!(response.message.text(), "streamed", "{label}: stream");
    let calls = probe.calls();
    assert_eq!(calls.len(), 1, "{label}: stream calls the inner stream once: {calls:?}");
    assert_eq!(calls[0].0, "stream", "{label}: stream");
    choice(&calls[0].1);
    checked.insert("stream");

    let response = wrapper.complete(request()).await.unwrap();
    assert_eq!(response.message.text(), "completed", "{label}: complete");
    assert_eq!(response.usage.input, 7, "{label}: complete");
    let calls = probe.calls();
    assert_eq!(calls.len(), 1, "{label}: complete calls the inner complete once: {calls:?}");
    assert_eq!(calls[0].0, "complete", "{label}: complete");
    choice(&calls[0].1);
    checked.insert("complete");

    assert_eq!(wrapper.name(), "probe-model", "{label}: name");
    checked.insert("name");
    assert_eq!(wrapper.family(), "probe-family", "{label}: family");
    checked.insert("family");

    assert!(!wrapper.streams(), "{label}: streams");
    checked.insert("streams");

    assert_eq!(wrapper.retry_policy(), Some(probe_policy()), "{label}: retry_policy");
    checked.insert("retry_policy");

    assert_eq!(
        wrapper.supports_tools(),
        deliberate.supports_tools.unwrap_or(false),
        "{label}: supports_tools"
    );
    checked.insert("supports_tools");

    assert!(wrapper.native_output(false), "{label}: native_output without tools");
    assert_eq!(
        wrapper.native_output(true),
        deliberate.native_output_with_tools.unwrap_or(true),
        "{label}: native_output with tools"
    );
    checked.insert("native_output");

    let redacted = wrapper.secrets().redact(PROBE_SECRET).into_owned();
    assert_eq!(redacted, "pro…6789", "{label}: secrets");
    checked.insert("secrets");

    checked
}

/// The methods of `pub trait Provider`, read from its source.
fn trait_methods() -> BTreeSet<String> {
    let source = include_str!("../mod.rs");
    let start = source.find("pub trait Provider: ").expect("the trait");
    let body = &source[start..];
    let end = body.find("\n}\n").expect("the end of the trait");
    body[..end]
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("fn "))
        .map(|rest| rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect())
        .collect()
}

#[tokio::test]
async fn every_trait_method_is_probed() {
    // If this fails, `Provider` gained (or lost) a method: answer it in `Probe` with a value
    // no default gives, and check it in `check_forwarding`.
    let probe = Probe::default();
    let checked = check_forwarding("probe", &probe, &probe, &Deliberate::default()).await;
    let checked: BTreeSet<String> = checked.into_iter().map(str::to_owned).collect();
    assert_eq!(checked, trait_methods());
}

#[tokio::test]
async fn every_wrapper_forwards_every_method() {
    let probe = Arc::new(Probe::default());
    let inner = || Arc::clone(&probe);
    let plain = Deliberate::default();
    let expected = trait_methods();
    let done = |checked: BTreeSet<&'static str>| {
        let checked: BTreeSet<String> = checked.into_iter().map(str::to_owned).collect();
        assert_eq!(checked, expected);
    };

    done(check_forwarding("Arc", &inner(), &probe, &plain).await);
    done(check_forwarding("Box", &Box::new(inner()), &probe, &plain).await);
    let boxed: Box<dyn Provider> = Box::new(inner());
    done(check_forwarding("Box<dyn Provider>", &boxed, &probe, &plain).await);

    let policy = ToolChoicePolicy::new(inner(), StepToolChoice::required_first());
    let required = Deliberate { tool_choice: Some(ToolChoice::Required), ..Deliberate::default() };
    done(check_forwarding("ToolChoicePolicy", &policy, &probe, &required).await);

    let prompted = PromptedTools::new(inner());
    // Prompted calls are text: an answer constrained to a schema could not hold one.
    let tools = Deliberate {
        supports_tools: Some(true),
        native_output_with_tools: Some(false),
        ..Deliberate::default()
    };
    done(check_forwarding("PromptedTools", &prompted, &probe, &tools).await);

    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("cassette.jsonl");
    let recording = RecordingProvider::create(inner(), &cassette).unwrap();
    done(check_forwarding("RecordingProvider", &recording, &probe, &plain).await);
    // Both calls were recorded, and replay as they were answered.
    let replay = ReplayProvider::from_file(&cassette).unwrap();
    assert_eq!(replay.interactions().len(), 2);
    assert!(replay.interactions().iter().all(|i| i.complete));
    assert_eq!(collect(replay.stream(request())).await.unwrap().message.text(), "streamed");
    let replayed = collect(replay.stream(request())).await.unwrap();
    assert_eq!(replayed.message.text(), "completed");
    assert_eq!(replayed.usage.input, 7);
}

#[tokio::test]
async fn prompted_complete_parses_calls_out_of_the_whole_text() {
    /// A provider that only answers whole responses, with a prompted call in the text.
    struct Whole;
    impl Provider for Whole {
        fn stream(&self, _request: ModelRequest) -> ChunkStream {
            Box::pin(futures::stream::iter([Err(ProviderError::Other {
                message: "not streamed".into(),
            })]))
        }
        fn complete(
            &self,
            _request: ModelRequest,
        ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
            let text = r#"<tool_call>{"name": "t", "arguments": {"x": 1}}</tool_call>"#;
            Box::pin(futures::future::ready(Ok(ModelResponse {
                message: Message::assistant(text),
                finish_reason: FinishReason::Stop,
                usage: Usage::default(),
                id: None,
                model: None,
                provider: None,
            })))
        }
        fn streams(&self) -> bool {
            false
        }
    }
    let response = PromptedTools::new(Whole).complete(request()).await.unwrap();
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    let calls: Vec<_> = response.message.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "t");
    assert_eq!(serde_json::from_str::<Value>(&calls[0].arguments).unwrap(), json!({"x": 1}));
}
