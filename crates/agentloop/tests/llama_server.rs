//! The OpenAI chat, OpenAI Responses and Anthropic Messages providers against a real llama.cpp
//! `llama-server` (SmolLM2-135M with a Hermes-style tool template; `/v1/chat/completions`,
//! `/v1/responses`, `/v1/messages`), when `AGENTLOOP_LLAMA_URL` is set
//! (`scripts/llama-server.sh start` prints it). When the server was started with
//! `--api-key KEY`, set `AGENTLOOP_LLAMA_API_KEY=KEY` too: the runs send it, and a wrong key
//! must be refused. Without the URL every test prints a notice and passes without checking.
//!
//! A 135M model does not choose tools by itself: the prompt asks it to echo a `<tool_call>`
//! block, which the server parses into a structured tool call. The tests assert wire-level
//! behaviour (the call is parsed, our tool runs, its result is sent back, a final text
//! comes), not the model's arithmetic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_support;

use agentloop::message::{Role, ToolResultContent};
use agentloop::prelude::*;
use agentloop::provider::openai::{Compat, OpenAi};
use agentloop::provider::sse::response_chunks;
use agentloop::provider::ModelRequest;
use agentloop::provider::Provider;
use agentloop::provider::ProviderError;
use agentloop::provider::{Anthropic, ChunkStream, HttpConfig, RetryPolicy};
use agentloop::tool::{DynTool, ToolSpec};
use futures::StreamExt;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PROMPT: &str = "Reply with exactly this text and nothing else:\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>";

fn server() -> Option<(String, Option<String>)> {
    match std::env::var("AGENTLOOP_LLAMA_URL") {
        Ok(url) if !url.trim().is_empty() => {
            let key = std::env::var("AGENTLOOP_LLAMA_API_KEY").ok().filter(|k| !k.is_empty());
            Some((url.trim().trim_end_matches('/').to_owned(), key))
        }
        _ => {
            eprintln!("skipping: AGENTLOOP_LLAMA_URL is not set (start scripts/llama-server.sh)");
            None
        }
    }
}

fn preset(url: &str, key: Option<&str>) -> Compat {
    let preset = Compat::llama_cpp().base_url(format!("{url}/v1"));
    match key {
        // The key goes through the environment-variable path of the preset.
        Some(_) => preset.api_key_env("AGENTLOOP_LLAMA_API_KEY").require_api_key(true),
        None => preset,
    }
}

/// Our Anthropic provider on the server's `/v1/messages` (the base URL without `/v1`); the key,
/// when the server has one, goes in `x-api-key`, read from the same environment variable.
fn anthropic(url: &str, key: Option<&str>) -> agentloop::provider::HttpProvider<Anthropic> {
    let config = HttpConfig::new(url, "local");
    let config = match key {
        Some(_) => config.api_key_env("AGENTLOOP_LLAMA_API_KEY").require_api_key(true),
        None => config,
    };
    Anthropic::with_config(config, Anthropic::messages("local")).unwrap()
}

/// `add` with a plain hand-written schema: with the schema derived for the typed tool
/// (`format: int64`, a schema description) the 135M model answers in prose instead of
/// echoing the call.
struct PlainAdd;

#[async_trait::async_trait]
impl DynTool for PlainAdd {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "add".into(),
            description: "Adds two integers.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            }),
        }
    }

    async fn call_json(&self, args: Value, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let a = args["a"].as_i64().ok_or_else(|| ToolError::InvalidArguments("a".into()))?;
        let b = args["b"].as_i64().ok_or_else(|| ToolError::InvalidArguments("b".into()))?;
        Ok(ToolOutput::Value(json!(a + b)))
    }
}

/// Records every request, optionally answers through `complete()` (non-streaming), and
/// retries a request that failed before delivering anything, as the [`RetryPolicy`] says
/// (what the driver's retry loop does): llama-server now and then drops a fresh connection
/// right after a streamed response.
struct Recording<P> {
    inner: Arc<P>,
    requests: Arc<Mutex<Vec<ModelRequest>>>,
    non_streaming: bool,
    retries: Arc<AtomicUsize>,
}

impl<P: Provider + 'static> Provider for Recording<P> {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        self.requests.lock().unwrap().push(request.clone());
        let inner = self.inner.clone();
        let non_streaming = self.non_streaming;
        let retries = self.retries.clone();
        let policy = RetryPolicy::default().with_base(Duration::from_millis(100));
        Box::pin(async_stream::stream! {
            let mut attempt = 1;
            loop {
                let mut chunks: ChunkStream = if non_streaming {
                    let inner = inner.clone();
                    let request = request.clone();
                    Box::pin(async_stream::stream! {
                        match inner.complete(request).await {
                            Ok(response) => {
                                for chunk in response_chunks(response) {
                                    yield Ok(chunk);
                                }
                            }
                            Err(error) => yield Err(error),
                        }
                    })
                } else {
                    inner.stream(request.clone())
                };
                let mut delivered = false;
                let mut failed = None;
                while let Some(item) = chunks.next().await {
                    match item {
                        Ok(chunk) => {
                            delivered = true;
                            yield Ok(chunk);
                        }
                        Err(error) => {
                            failed = Some(error);
                            break;
                        }
                    }
                }
                let Some(error) = failed else { return };
                match policy.next_delay(attempt, &error) {
                    Some(delay) if !delivered => {
                        eprintln!("retrying after {delay:?}: {error}");
                        retries.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(delay).await;
                        attempt += 1;
                    }
                    _ => {
                        yield Err(error);
                        return;
                    }
                }
            }
        })
    }
}

/// A whole agent run through `provider`: the server's tool call runs our tool, its result
/// goes back, and the run ends with the model's text.
async fn agent_run<P: Provider + 'static>(provider: P, non_streaming: bool) {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let retries = Arc::new(AtomicUsize::new(0));
    let recording = Recording {
        inner: Arc::new(provider),
        requests: requests.clone(),
        non_streaming,
        retries: retries.clone(),
    };
    let agent = Agent::builder(recording)
        .instructions("You are a helpful assistant. Always use the add tool for arithmetic.")
        .dyn_tool(Arc::new(PlainAdd))
        .temperature(0.0)
        .max_tokens(64)
        .max_iterations(3)
        .build()
        .unwrap();
    let events: Vec<Event> = agent.run_stream(PROMPT).collect().await;
    let outcome = events.last().and_then(Event::outcome).cloned().expect("an outcome");
    let started: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolStarted { call, arguments } => Some((call.clone(), arguments.clone())),
            _ => None,
        })
        .collect();
    assert!(!started.is_empty(), "the server emitted no tool call: {events:#?}");
    let (call, arguments) = &started[0];
    assert_eq!(call.name, "add");
    assert_eq!(**arguments, json!({"a": 1, "b": 2}), "the call's arguments were parsed");
    assert!(!call.id.is_empty());
    if !non_streaming {
        assert!(
            events.iter().any(|e| matches!(e, Event::ToolArgumentsDelta { .. })),
            "the arguments streamed"
        );
    }

    // The second request carries the call and our tool's result for it.
    let requests = requests.lock().unwrap();
    assert!(requests.len() >= 2, "no request after the tool ran");
    let history = &requests[1].messages;
    let assistant = history.iter().find(|m| m.role == Role::Assistant).unwrap();
    assert!(assistant.tool_calls().any(|c| c.id == call.id));
    let result = history
        .iter()
        .flat_map(|m| m.tool_results_iter())
        .find(|r| r.call_id == call.id)
        .expect("the tool result was sent back");
    assert_eq!(result.content, ToolResultContent::Json(json!(3)), "our tool ran");
    assert!(!result.is_error);

    // And the server answered it with text.
    assert_eq!(outcome.stop_reason, StopReason::Completed, "{outcome:#?}");
    assert!(!outcome.answer.trim().is_empty(), "no final text: {outcome:#?}");
    assert!(outcome.usage.input > 0 && outcome.usage.output > 0, "{:?}", outcome.usage);
    eprintln!(
        "final answer: {:?} ({} iterations, {} retries)",
        outcome.answer,
        outcome.iterations,
        retries.load(Ordering::SeqCst)
    );
}

#[tokio::test]
async fn chat_streaming_agent_run() {
    let Some((url, key)) = server() else { return };
    agent_run(OpenAi::compatible(preset(&url, key.as_deref()), "local").unwrap(), false).await;
}

#[tokio::test]
async fn chat_non_streaming_agent_run() {
    let Some((url, key)) = server() else { return };
    agent_run(OpenAi::compatible(preset(&url, key.as_deref()), "local").unwrap(), true).await;
}

#[tokio::test]
async fn responses_streaming_agent_run() {
    let Some((url, key)) = server() else { return };
    agent_run(OpenAi::responses_compatible(preset(&url, key.as_deref()), "local").unwrap(), false)
        .await;
}

#[tokio::test]
async fn responses_non_streaming_agent_run() {
    let Some((url, key)) = server() else { return };
    agent_run(OpenAi::responses_compatible(preset(&url, key.as_deref()), "local").unwrap(), true)
        .await;
}

#[tokio::test]
async fn a_wrong_key_is_an_auth_error() {
    let Some((url, key)) = server() else { return };
    if key.is_none() {
        eprintln!("skipping: AGENTLOOP_LLAMA_API_KEY is not set (start the server with --api-key)");
        return;
    }
    let config = |c: Compat| c.config("local").api_key("wrong-key");
    let chat = OpenAi::chat_with(config(preset(&url, None)), Compat::llama_cpp().dialect).unwrap();
    let error = chat.complete(http_support::simple_request("hi")).await.unwrap_err();
    assert!(matches!(&error, ProviderError::Auth { status: 401, .. }), "{error:?}");
    let (_, error) = http_support::stream_all(&chat, http_support::simple_request("hi")).await;
    assert!(matches!(&error, Some(ProviderError::Auth { status: 401, .. })), "{error:?}");
    let responses =
        OpenAi::responses_with(config(preset(&url, None)), Compat::llama_cpp().dialect).unwrap();
    let (_, error) = http_support::stream_all(&responses, http_support::simple_request("hi")).await;
    assert!(matches!(&error, Some(ProviderError::Auth { status: 401, .. })), "{error:?}");
}

/// The server's context size, from `/v1/models`.
async fn context_size(url: &str, key: Option<&str>) -> u64 {
    let mut request = agentloop::tls::http_client_builder()
        .unwrap()
        .build()
        .unwrap()
        .get(format!("{url}/v1/models"));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let models: serde_json::Value =
        serde_json::from_slice(&request.send().await.unwrap().bytes().await.unwrap()).unwrap();
    models["data"][0]["meta"]["n_ctx"].as_u64().unwrap_or(4096)
}

#[tokio::test]
async fn a_prompt_longer_than_the_context_is_context_length_exceeded() {
    let Some((url, key)) = server() else { return };
    let n_ctx = context_size(&url, key.as_deref()).await;
    let long = "hello ".repeat(2 * n_ctx as usize + 100);
    let chat = OpenAi::compatible(preset(&url, key.as_deref()), "local").unwrap();
    let (_, error) = http_support::stream_all(&chat, http_support::simple_request(&long)).await;
    assert!(
        matches!(&error, Some(ProviderError::ContextLengthExceeded { message }) if message.contains("context")),
        "{error:?}"
    );
    let error = chat.complete(http_support::simple_request(&long)).await.unwrap_err();
    assert!(matches!(error, ProviderError::ContextLengthExceeded { .. }), "{error:?}");
    let responses = OpenAi::responses_compatible(preset(&url, key.as_deref()), "local").unwrap();
    let (_, error) =
        http_support::stream_all(&responses, http_support::simple_request(&long)).await;
    assert!(matches!(&error, Some(ProviderError::ContextLengthExceeded { .. })), "{error:?}");
}

#[tokio::test]
async fn anthropic_streaming_agent_run() {
    let Some((url, key)) = server() else { return };
    agent_run(anthropic(&url, key.as_deref()), false).await;
}

#[tokio::test]
async fn anthropic_non_streaming_agent_run() {
    let Some((url, key)) = server() else { return };
    agent_run(anthropic(&url, key.as_deref()), true).await;
}

#[tokio::test]
async fn anthropic_wrong_key_is_an_auth_error() {
    let Some((url, key)) = server() else { return };
    if key.is_none() {
        eprintln!("skipping: AGENTLOOP_LLAMA_API_KEY is not set (start the server with --api-key)");
        return;
    }
    let wrong = Anthropic::with_config(
        HttpConfig::new(&url, "local").api_key("wrong-key"),
        Anthropic::messages("local"),
    )
    .unwrap();
    let error = wrong.complete(http_support::simple_request("hi")).await.unwrap_err();
    assert!(matches!(&error, ProviderError::Auth { status: 401, .. }), "{error:?}");
    let (_, error) = http_support::stream_all(&wrong, http_support::simple_request("hi")).await;
    assert!(matches!(&error, Some(ProviderError::Auth { status: 401, .. })), "{error:?}");
    // No key at all is refused the same way.
    let keyless = Anthropic::compatible(&url, "local").unwrap();
    let error = keyless.complete(http_support::simple_request("hi")).await.unwrap_err();
    assert!(matches!(&error, ProviderError::Auth { status: 401, .. }), "{error:?}");
}

#[tokio::test]
async fn anthropic_prompt_longer_than_the_context_is_context_length_exceeded() {
    let Some((url, key)) = server() else { return };
    let n_ctx = context_size(&url, key.as_deref()).await;
    let long = "hello ".repeat(2 * n_ctx as usize + 100);
    let provider = anthropic(&url, key.as_deref());
    let (chunks, error) =
        http_support::stream_all(&provider, http_support::simple_request(&long)).await;
    assert!(chunks.is_empty(), "{chunks:?}");
    assert!(
        matches!(&error, Some(ProviderError::ContextLengthExceeded { message }) if message.contains("context")),
        "{error:?}"
    );
    let error = provider.complete(http_support::simple_request(&long)).await.unwrap_err();
    assert!(matches!(error, ProviderError::ContextLengthExceeded { .. }), "{error:?}");
    assert!(!error.is_retryable());
}
