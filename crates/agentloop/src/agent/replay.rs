//! [`JournalReplay`]: a run replayed from its journal alone, without calling the model or the
//! tools: the model's journaled responses and the tools' journaled results are served back.
//! Hooks and human decisions are not replayed; their effects are in the results, and the
//! usage a call reported for work it started (a sub-agent's run) is reported again with its
//! result, so the totals are the original's. (Recording
//! and replaying a provider's calls, cassettes, is [`provider::replay`](crate::provider::replay).)

use super::Agent;
use crate::driver::EventStream;
use crate::error::BuildError;
use crate::event::Event;
use crate::message::{Message, Part, ToolResultContent, Usage};
use crate::provider::replay::{ReplayError, ReplayProvider};
use crate::provider::{ProviderError, StreamChunk};
use crate::run::{Run, RunConfig, Signal};
use crate::tool::{ToolContext, ToolError, ToolOutput, ToolSet, ToolSpec};
use async_trait::async_trait;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// A run's journal, ready to be replayed without the model or the tools.
#[derive(Debug, Clone)]
pub struct JournalReplay {
    run_id: String,
    config: RunConfig,
    input: Vec<Message>,
    responses: Arc<Vec<Result<Vec<StreamChunk>, ProviderError>>>,
    results: Arc<HashMap<String, Answer>>,
}

/// A call's journaled result and the usage it reported (`tool_completed`'s `usage` and
/// `cost_usd`, …).
#[derive(Debug, Clone)]
struct Answer {
    result: Result<ToolOutput, ToolError>,
    used: Option<(Usage, f64)>,
}

impl Answer {
    fn new(
        result: Result<ToolOutput, ToolError>,
        usage: Option<&Usage>,
        cost: Option<f64>,
    ) -> Self {
        let used = (usage.is_some() || cost.is_some())
            .then(|| (usage.copied().unwrap_or_default(), cost.unwrap_or(0.0)));
        Self { result, used }
    }
}

impl JournalReplay {
    /// Reads a journal (durable events in order; others are ignored).
    pub fn from_journal<'a>(
        journal: impl IntoIterator<Item = &'a Event>,
    ) -> Result<Self, ReplayError> {
        let mut start = None;
        let mut responses = Vec::new();
        let mut results = HashMap::new();
        for event in journal {
            match event {
                Event::RunStarted { run_id, config, input } => {
                    start = Some((run_id.clone(), (**config).clone(), input.clone()));
                }
                Event::ModelResponded {
                    message,
                    finish_reason,
                    usage,
                    response_id,
                    response_model,
                    provider,
                    ..
                } => {
                    let mut chunks = Vec::new();
                    if let Some(provider) = provider {
                        chunks.push(StreamChunk::Answered { provider: provider.clone() });
                    }
                    if response_id.is_some() || response_model.is_some() {
                        chunks.push(StreamChunk::ResponseInfo {
                            id: response_id.clone(),
                            model: response_model.clone(),
                        });
                    }
                    chunks.extend(message_chunks(message)?);
                    chunks.push(StreamChunk::Usage { usage: **usage });
                    chunks.push(StreamChunk::Finish { reason: finish_reason.clone() });
                    responses.push(Ok(chunks));
                }
                Event::ModelFailed { error, .. } => responses.push(Err(error.clone())),
                Event::ToolCompleted { result, control, usage, cost_usd, .. } => {
                    let output = match control.as_deref() {
                        Some(Signal::Done { answer }) => ToolOutput::Done(answer.clone()),
                        Some(Signal::AskUser { question }) => ToolOutput::AskUser(question.clone()),
                        None => ToolOutput::Value(match &result.content {
                            ToolResultContent::Text(text) => Value::String(text.clone()),
                            ToolResultContent::Json(value) => value.clone(),
                            stored @ ToolResultContent::Stored(_) => {
                                Value::String(stored.to_text())
                            }
                        }),
                    };
                    let answer = Answer::new(Ok(output), usage.as_deref(), *cost_usd);
                    results.insert(result.call_id.clone(), answer);
                }
                Event::ToolFailed { result, error, usage, cost_usd, .. } => {
                    let answer = Answer::new(Err((**error).clone()), usage.as_deref(), *cost_usd);
                    results.insert(result.call_id.clone(), answer);
                }
                Event::ToolTimedOut { result, timeout_ms, usage, cost_usd, .. } => {
                    let timeout = Err(ToolError::Timeout(*timeout_ms));
                    let answer = Answer::new(timeout, usage.as_deref(), *cost_usd);
                    results.insert(result.call_id.clone(), answer);
                }
                _ => {}
            }
        }
        let (run_id, config, input) = start
            .ok_or_else(|| ReplayError::Journal("it does not begin with run_started".into()))?;
        Ok(Self {
            run_id,
            config,
            input,
            responses: Arc::new(responses),
            results: Arc::new(results),
        })
    }

    /// A provider that serves the journal's model responses (and failures) in order.
    pub fn provider(&self) -> ReplayProvider {
        ReplayProvider::responses(&self.responses)
    }

    /// A tool set that offers the run's tools and answers each call with its journaled
    /// result (by call id), without running anything (reporting the usage the call reported).
    pub fn tools(&self) -> Arc<dyn ToolSet> {
        Arc::new(JournalTools { specs: self.config.tools.to_vec(), results: self.results.clone() })
    }

    /// An agent on the replaying provider and tools.
    pub fn agent(&self) -> Result<Agent, BuildError> {
        Agent::builder(self.provider()).tool_set(self.tools()).build()
    }

    /// Replays the run: the same run id, configuration and input, driven again against the
    /// journaled responses and results. Its events (and outcome) are the original run's.
    pub fn run(&self) -> Result<EventStream, BuildError> {
        let run = Run::new(self.run_id.clone(), self.config.clone(), self.input.clone());
        Ok(self.agent()?.continue_run(run, None))
    }
}

/// The chunks that rebuild an assistant message.
fn message_chunks(message: &Message) -> Result<Vec<StreamChunk>, ReplayError> {
    let mut chunks = Vec::new();
    for part in &message.content {
        match part {
            Part::Text { text } => chunks.push(StreamChunk::TextDelta { text: text.clone() }),
            Part::Reasoning(reasoning) => {
                if !reasoning.text.is_empty() {
                    chunks.push(StreamChunk::ReasoningDelta { text: reasoning.text.clone() });
                }
                chunks.push(StreamChunk::ReasoningEnd { opaque: reasoning.opaque.clone() });
            }
            Part::ToolCall(call) => {
                chunks.push(StreamChunk::ToolCallStart {
                    id: call.id.clone(),
                    name: call.name.clone(),
                });
                if !call.arguments.is_empty() {
                    chunks.push(StreamChunk::ToolCallDelta {
                        id: call.id.clone(),
                        delta: call.arguments.clone(),
                    });
                }
                chunks.push(StreamChunk::ToolCallEnd { id: call.id.clone() });
            }
            Part::Opaque(opaque) => chunks.push(StreamChunk::Opaque {
                provider: opaque.provider.clone(),
                kind: opaque.kind.clone(),
                value: opaque.value.clone(),
            }),
            Part::Citation(citation) => chunks.push(StreamChunk::Citation {
                provider: citation.provider.clone(),
                value: citation.value.clone(),
            }),
            Part::Image { .. } | Part::File { .. } | Part::ToolResult(_) => {
                return Err(ReplayError::Journal(
                    "a model response holds an image, file or tool result part".into(),
                ))
            }
        }
    }
    Ok(chunks)
}

/// Answers tool calls from a journal.
struct JournalTools {
    specs: Vec<ToolSpec>,
    results: Arc<HashMap<String, Answer>>,
}

#[async_trait]
impl ToolSet for JournalTools {
    fn specs(&self) -> Vec<ToolSpec> {
        self.specs.clone()
    }

    async fn call(
        &self,
        name: &str,
        _args: Value,
        ctx: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(answer) = self.results.get(&ctx.call_id) else {
            return Err(ToolError::Failed(format!(
                "replay: the journal has no result for call '{}' of '{name}'",
                ctx.call_id
            )));
        };
        if let Some((usage, cost_usd)) = answer.used {
            ctx.report_usage(usage, cost_usd);
        }
        answer.result.clone()
    }
}
