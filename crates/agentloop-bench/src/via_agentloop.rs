//! The scripted task through agentloop: an [`Agent`] with the OpenAI chat provider (retries
//! off, streamed or not) and one `add` tool, exactly as a user would write it.

use crate::measure;
use crate::scenario::Script;
use agentloop::context::ContextConfig;
use agentloop::error::BuildError;
use agentloop::prelude::*;
use agentloop::provider::openai::{Dialect, OpenAi, OpenAiChat};
use agentloop::provider::wire::{
    AuthStyle, EncodedRequest, StreamDecoder, WireFormat, WireRequest,
};
use agentloop::provider::Provider;
use agentloop::provider::{
    HttpConfig, HttpProvider, ModelRequest, ModelResponse, ProviderError, RetryPolicy,
};
use futures::StreamExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Adds two integers.
#[tool]
pub async fn add(a: i64, b: i64) -> Result<i64, String> {
    a.checked_add(b).ok_or_else(|| "overflow".to_string())
}

/// Performs one arithmetic operation (`add`, `subtract`, `multiply`, `divide`) on two
/// numbers: the tool the recorded llama.cpp turns call (`mock::RECORDED_MODEL`).
#[tool]
pub async fn calculator(operation: String, a: f64, b: f64) -> Result<f64, String> {
    match operation.as_str() {
        "add" => Ok(a + b),
        "subtract" => Ok(a - b),
        "multiply" => Ok(a * b),
        "divide" if b != 0.0 => Ok(a / b),
        "divide" => Err("division by zero".to_owned()),
        other => Err(format!("unknown operation {other:?}")),
    }
}

/// Setting up the agent failed.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The provider's configuration was refused.
    #[error(transparent)]
    Provider(#[from] agentloop::provider::HttpConfigError),
    /// The agent's configuration was refused.
    #[error(transparent)]
    Agent(#[from] BuildError),
}

/// The OpenAI chat provider for the mock at `base_url` (`http://host:port/v1`), retries off.
pub fn provider(
    base_url: &str,
    script: Script,
    stream: bool,
) -> Result<HttpProvider<OpenAiChat>, SetupError> {
    provider_for(base_url, &script.model_name(), stream)
}

/// The same for the mock's model `model` (a script's name, or `mock::RECORDED_MODEL`).
pub fn provider_for(
    base_url: &str,
    model: &str,
    stream: bool,
) -> Result<HttpProvider<OpenAiChat>, SetupError> {
    let config =
        HttpConfig::new(base_url, model).retry_policy(RetryPolicy::never()).streaming(stream);
    Ok(OpenAi::chat_with(config, Dialect::openai())?)
}

/// An agent on `provider` with the `add` tool, allowed enough iterations for `script`, and
/// no message window (every request holds the whole conversation, as the floor's do).
pub fn agent(provider: impl Provider + 'static, script: Script) -> Result<Agent, SetupError> {
    agent_with_store(provider, script, None)
}

/// [`agent`], journaling its runs in `store` with its durability mode, if given.
pub fn agent_with_store(
    provider: impl Provider + 'static,
    script: Script,
    store: Option<(Arc<dyn agentloop::store::RunStore>, agentloop::store::Durability)>,
) -> Result<Agent, SetupError> {
    let mut builder = builder(provider, script);
    if let Some((store, durability)) = store {
        builder = builder.store(store).durability(durability);
    }
    Ok(builder.build()?)
}

/// The builder of [`agent`]: the `add` tool, enough iterations for `script`, no message
/// window; to be given a name, a store or more.
pub fn builder(provider: impl Provider + 'static, script: Script) -> agentloop::AgentBuilder {
    let iterations = u32::try_from(script.requests_per_run() + 1).unwrap_or(u32::MAX);
    let context = ContextConfig { max_input_messages: None, ..ContextConfig::default() };
    Agent::builder(provider).tool(Add).max_iterations(iterations).context(context)
}

/// Runs the task once: the outcome (whose `iterations` are the model round trips).
pub async fn run(agent: &Agent) -> Result<Outcome, AgentError> {
    agent.run("go").await
}

/// Runs the task once, recording the process CPU time at each `model_requested` event (the
/// start of each round, before the request is encoded).
pub async fn run_recorded(
    agent: &Agent,
    rounds: &mut Vec<Duration>,
) -> Result<Outcome, AgentError> {
    let mut events = agent.run_stream("go");
    let mut last = None;
    while let Some(event) = events.next().await {
        match event {
            Event::ModelRequested { .. } => rounds.push(measure::process_cpu()),
            Event::RunFinished { .. } | Event::RunFailed { .. } | Event::RunCancelled { .. } => {
                last = Some(event)
            }
            _ => {}
        }
    }
    match last {
        Some(Event::RunFinished { outcome }) => Ok(*outcome),
        Some(Event::RunFailed { error, outcome }) => {
            Err(AgentError::Failed { error, provider_error: None, outcome })
        }
        Some(Event::RunCancelled { reason, outcome }) => {
            Err(AgentError::Cancelled { reason, outcome })
        }
        _ => Err(AgentError::NoOutcome),
    }
}

/// Where a [`TimedFormat`] records encode times.
pub type Encodings = Arc<Mutex<Vec<Duration>>>;

/// The OpenAI chat format with a timer around the request-body encoding
/// ([`WireFormat::encode_json`], all the HTTP provider encodes): the thread CPU time of each
/// encoding, in request order, for the history scenario.
pub struct TimedFormat {
    inner: OpenAiChat,
    encodings: Encodings,
}

impl TimedFormat {
    /// Wraps `inner`; the encode times go to the returned list.
    pub fn new(inner: OpenAiChat) -> (Self, Encodings) {
        let encodings = Arc::new(Mutex::new(Vec::new()));
        (Self { inner, encodings: encodings.clone() }, encodings)
    }
}

impl WireFormat for TimedFormat {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn auth(&self) -> AuthStyle {
        self.inner.auth()
    }

    fn encode(&self, request: &ModelRequest, stream: bool) -> Result<WireRequest, ProviderError> {
        self.inner.encode(request, stream)
    }

    fn encode_json(
        &self,
        request: &ModelRequest,
        stream: bool,
    ) -> Result<EncodedRequest, ProviderError> {
        let started = measure::thread_cpu();
        let encoded = self.inner.encode_json(request, stream);
        let took = measure::thread_cpu() - started;
        if let Ok(mut encodings) = self.encodings.lock() {
            encodings.push(took);
        }
        encoded
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        self.inner.stream_decoder()
    }

    fn decode_response(&self, body: &[u8]) -> Result<ModelResponse, ProviderError> {
        self.inner.decode_response(body)
    }

    fn classify_error(&self, status: u16, body: &str, generic: ProviderError) -> ProviderError {
        self.inner.classify_error(status, body, generic)
    }
}

/// [`provider`] with the encoding timed ([`TimedFormat`]).
pub fn timed_provider(
    base_url: &str,
    script: Script,
    stream: bool,
) -> Result<(HttpProvider<TimedFormat>, Encodings), SetupError> {
    let config = HttpConfig::new(base_url, script.model_name())
        .retry_policy(RetryPolicy::never())
        .streaming(stream);
    let (format, encodings) = TimedFormat::new(OpenAiChat::new(config.model(), Dialect::openai()));
    Ok((HttpProvider::new(format, config)?, encodings))
}
