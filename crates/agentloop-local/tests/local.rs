//! The local provider on the real SmolLM2-135M-Instruct GGUF: streaming, usage and finish,
//! cancellation, and an agent that calls a tool. Skipped (with a notice) when the file is
//! missing: set `AGENTLOOP_LOCAL_MODEL` to its path.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use agentloop::message::{FinishReason, Message};
use agentloop::provider::{ModelRequest, Provider, StepToolChoice, StreamChunk, ToolChoice};
use agentloop::tool::builtin::Calculator;
use agentloop::{Agent, Event};
use agentloop_local::LocalModel;
use futures::StreamExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn model_path() -> Option<PathBuf> {
    let path = std::env::var_os("AGENTLOOP_LOCAL_MODEL").map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").map(|home| {
            PathBuf::from(home).join(".cache/agentloop/models/SmolLM2-135M-Instruct.Q4_1.gguf")
        })
    })?;
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipped: no model file at {} (set AGENTLOOP_LOCAL_MODEL)", path.display());
        None
    }
}

fn model() -> Option<LocalModel> {
    Some(LocalModel::builder(model_path()?).context_size(2048).build().unwrap())
}

fn ask(text: &str, max_tokens: u32) -> ModelRequest {
    ModelRequest::new(vec![Message::user(text)]).with_max_tokens(max_tokens)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_text_with_usage_and_finish() {
    let Some(model) = model() else { return };
    let mut stream = model.stream(ask("Write a long poem about the sea.", 8));
    let mut text = String::new();
    let mut usage = None;
    let mut finish = None;
    let mut deltas = 0;
    while let Some(chunk) = stream.next().await {
        match chunk.unwrap() {
            StreamChunk::TextDelta { text: piece } => {
                deltas += 1;
                text.push_str(&piece);
            }
            StreamChunk::Usage { usage: u } => usage = Some(u),
            StreamChunk::Finish { reason } => finish = Some(reason),
            other => panic!("unexpected chunk {other:?}"),
        }
    }
    let usage = usage.unwrap();
    assert!(deltas >= 2, "streamed in pieces: {deltas}");
    assert!(!text.trim().is_empty());
    assert!(usage.input > 20, "{usage:?}");
    assert_eq!(usage.output, 8, "a poem does not end in 8 tokens: {text:?}");
    assert_eq!(finish, Some(FinishReason::Length));

    // A short answer stops by itself.
    let response = model.complete(ask("Reply with just the word: yes", 64)).await.unwrap();
    assert_eq!(response.finish_reason, FinishReason::Stop, "{:?}", response.message.text());
    assert!(response.usage.output < 64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_seed_same_answer() {
    let Some(model) = model() else { return };
    let request = ask("Name three colors.", 16);
    let a = model.complete(request.clone()).await.unwrap();
    let b = model.complete(request).await.unwrap();
    assert_eq!(a.message.text(), b.message.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_stream_stops_generation() {
    let Some(model) = model() else { return };
    let mut stream = model.stream(ask("Write a very long story about a dragon.", 1000));
    let first = stream.next().await.unwrap().unwrap();
    assert!(matches!(first, StreamChunk::TextDelta { .. }), "{first:?}");
    assert_eq!(model.active_generations(), 1);
    drop(stream);
    let start = Instant::now();
    while model.active_generations() > 0 {
        assert!(start.elapsed() < Duration::from_secs(5), "the generation thread is still running");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_longer_than_the_context_is_a_context_error() {
    let Some(path) = model_path() else { return };
    let model = LocalModel::builder(path).context_size(64).build().unwrap();
    let error = model.complete(ask(&"word ".repeat(200), 8)).await.unwrap_err();
    assert!(
        matches!(error, agentloop::provider::ProviderError::ContextLengthExceeded { .. }),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_tool_choice_gives_a_well_formed_call() {
    let Some(model) = model() else { return };
    let mut request = ask("What is 17 multiplied by 23?", 64);
    request.tools = Arc::new(vec![agentloop::tool::ToolSpec {
        name: "calculator".into(),
        description: "Evaluate an arithmetic expression.".into(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"]
        }),
    }]);
    request.tool_choice = ToolChoice::Required;
    let response = model.complete(request).await.unwrap();
    assert_eq!(response.finish_reason, FinishReason::ToolCalls, "{:?}", response.message);
    let calls: Vec<_> = response.message.tool_calls().collect();
    assert_eq!(calls.len(), 1, "{:?}", response.message);
    assert_eq!(calls[0].name, "calculator");
    let arguments: serde_json::Value = serde_json::from_str(&calls[0].arguments).unwrap();
    assert!(arguments["expression"].is_string(), "{arguments}");
}

/// The acceptance test: an agent on the local model, a calculator, `required` on the first
/// step then `auto`: a well-formed call reaches the calculator and a final answer comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_calls_the_calculator_and_answers() {
    let Some(model) = model() else { return };
    let agent = Agent::builder(model)
        .instructions("You are a helpful assistant. Use the calculator for arithmetic.")
        .tool(Calculator)
        .step_tool_choice(StepToolChoice::required_first())
        .max_iterations(4)
        .max_tokens(128)
        .build()
        .unwrap();
    let mut events = agent.run_stream("What is 17 multiplied by 23?");
    let mut started = Vec::new();
    let mut completed = Vec::new();
    let mut outcome = None;
    while let Some(event) = events.next().await {
        match event {
            Event::ToolStarted { call, arguments } => started.push((call, arguments)),
            Event::ToolCompleted { name, result, .. } => completed.push((name, result)),
            Event::ToolFailed { name, error, .. } => panic!("{name} failed: {error}"),
            Event::RunFinished { outcome: o } => outcome = Some(o),
            Event::RunFailed { .. } | Event::RunCancelled { .. } => panic!("{event:?}"),
            _ => {}
        }
    }
    let outcome = outcome.unwrap();
    eprintln!("calls: {started:?}\nresults: {completed:?}\nanswer: {:?}", outcome.answer);
    let (call, arguments) = started.first().unwrap();
    assert_eq!(call.name, "calculator");
    let expression = arguments["expression"].as_str().unwrap();
    assert!(!expression.is_empty());
    assert_eq!(completed.first().unwrap().0, "calculator");
    assert!(outcome.is_success(), "{:?}", outcome.stop_reason);
    assert!(!outcome.answer.trim().is_empty());
}

/// A capital and its country.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct Capital {
    /// The city.
    city: String,
    /// Its country.
    country: String,
    /// How many people live there, roughly.
    population: u32,
}

/// Structured output on the local model: without tools the answer is decoded under a grammar
/// compiled from the schema, so even a 135M model's answer parses and validates at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_answer_is_decoded_under_the_schemas_grammar() {
    let Some(model) = model() else { return };
    let agent = Agent::builder(model).max_tokens(96).build().unwrap();
    let mut events = agent.run_stream_with(
        "What is the capital of France?",
        agentloop::RunOptions::default().output(agentloop::run::OutputSpec::of::<Capital>()),
    );
    let mut partials = 0;
    let mut outcome = None;
    while let Some(event) = events.next().await {
        match event {
            Event::OutputDelta { .. } => partials += 1,
            Event::RunFinished { outcome: o } => outcome = Some(o),
            Event::RunFailed { .. } | Event::RunCancelled { .. } => panic!("{event:?}"),
            _ => {}
        }
    }
    let outcome = outcome.unwrap();
    eprintln!("answer: {}", outcome.answer);
    assert_eq!(outcome.iterations, 1, "valid at the first try: no retry");
    assert!(partials >= 2, "{partials} partial values");
    let capital: Capital = serde_json::from_value(outcome.output.clone().unwrap()).unwrap();
    assert!(!capital.city.is_empty() && !capital.country.is_empty(), "{capital:?}");
    eprintln!("{} has {} people", capital.city, capital.population);
    // The same through `run_as`.
    let agent = Agent::builder(model_or_skip()).max_tokens(96).build().unwrap();
    let _: Capital = agent.run_as("What is the capital of Italy?").await.unwrap();
}

fn model_or_skip() -> LocalModel {
    model().expect("the model file was there a moment ago")
}
