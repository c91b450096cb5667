//! The scripted task through agentloop: an [`Agent`] with the OpenAI chat provider (retries
//! off, streamed or not) and one `add` tool, exactly as a user would write it.

use crate::measure;
use crate::scenario::Script;
use agentloop::context::ContextConfig;
use agentloop::prelude::*;
use agentloop::provider::openai::{Dialect, OpenAi, OpenAiChat};
use agentloop::provider::wire::WireFormat;
use agentloop::provider::{HttpConfig, HttpProvider, ModelRequest, RetryPolicy};
use futures::future::BoxFuture;
use futures::StreamExt;
use std::sync::Mutex;
use std::time::Duration;

/// Adds two integers.
#[tool]
pub async fn add(a: i64, b: i64) -> Result<i64, String> {
    a.checked_add(b).ok_or_else(|| "overflow".to_string())
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
    let config = HttpConfig::new(base_url, script.model_name())
        .retry_policy(RetryPolicy::never())
        .streaming(stream);
    Ok(OpenAi::chat_with(config, Dialect::openai())?)
}

/// An agent on `provider` with the `add` tool, allowed enough iterations for `script`, and
/// no message window (every request holds the whole conversation, as the floor's do).
pub fn agent(provider: impl Provider + 'static, script: Script) -> Result<Agent, SetupError> {
    let iterations = u32::try_from(script.requests_per_run() + 1).unwrap_or(u32::MAX);
    let context = ContextConfig { max_input_messages: None, ..ContextConfig::default() };
    Ok(Agent::builder(provider).tool(Add).max_iterations(iterations).context(context).build()?)
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
        Some(Event::RunFailed { error, outcome }) => Err(AgentError::Failed { error, outcome }),
        Some(Event::RunCancelled { reason, outcome }) => {
            Err(AgentError::Cancelled { reason, outcome })
        }
        _ => Err(AgentError::NoOutcome),
    }
}

/// A provider that keeps a copy of the requests of chosen rounds (1-based), for the encode-only
/// measurement of the history scenario. Its copies make the run copy its history, so a run
/// through it is never the measured one.
pub struct Capture<P> {
    inner: P,
    wanted: Vec<usize>,
    seen: Mutex<(usize, Vec<(usize, ModelRequest)>)>,
}

impl<P> Capture<P> {
    /// Wraps `inner`, keeping the requests of the rounds in `wanted`.
    pub fn new(inner: P, wanted: Vec<usize>) -> Self {
        Self { inner, wanted, seen: Mutex::new((0, Vec::new())) }
    }

    /// The requests kept, with their round.
    pub fn take(&self) -> Vec<(usize, ModelRequest)> {
        self.seen.lock().map(|mut seen| std::mem::take(&mut seen.1)).unwrap_or_default()
    }
}

impl<P: Provider> Provider for Capture<P> {
    fn stream(&self, request: ModelRequest) -> agentloop::provider::ChunkStream {
        if let Ok(mut seen) = self.seen.lock() {
            seen.0 += 1;
            let round = seen.0;
            if self.wanted.contains(&round) {
                seen.1.push((round, request.clone()));
            }
        }
        self.inner.stream(request)
    }

    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<
        'static,
        Result<agentloop::provider::ModelResponse, agentloop::provider::ProviderError>,
    > {
        self.inner.complete(request)
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn retry_policy(&self) -> Option<RetryPolicy> {
        self.inner.retry_policy()
    }
}

/// The time it takes to encode `request` into the JSON request body, as the HTTP provider
/// does (the wire format's `encode`, then `serde_json::to_vec`): the mean of `reps` encodings.
pub fn encode_time(
    format: &OpenAiChat,
    request: &ModelRequest,
    stream: bool,
    reps: u32,
) -> Duration {
    let reps = reps.max(1);
    let cpu = measure::thread_cpu();
    let mut bytes = 0usize;
    for _ in 0..reps {
        if let Ok(wire) = format.encode(request, stream) {
            bytes += serde_json::to_vec(&wire.body).map(|b| b.len()).unwrap_or(0);
        }
    }
    std::hint::black_box(bytes);
    (measure::thread_cpu() - cpu) / reps
}
