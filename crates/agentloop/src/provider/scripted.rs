//! [`ScriptedModel`]: a deterministic model that plays a list of turns, for tests, examples and
//! benchmarks. It splits each turn into realistic stream chunks and records every request.

use super::{ChunkStream, ModelRequest, Provider, ProviderError, StreamChunk};
use crate::message::{FinishReason, Part, Role, Usage};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// One scripted model turn.
#[derive(Debug, Clone, Default)]
pub struct ScriptedTurn {
    reasoning: Option<String>,
    text: Option<String>,
    tool_calls: Vec<ScriptedCall>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    error: Option<ProviderError>,
    error_after: Option<(usize, ProviderError)>,
    chunk_delay: Option<Duration>,
    first_delay: Option<Duration>,
    hang: bool,
}

#[derive(Debug, Clone)]
struct ScriptedCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

impl ScriptedTurn {
    /// A turn that answers with text.
    pub fn text(text: impl Into<String>) -> Self {
        Self { text: Some(text.into()), ..Self::default() }
    }

    /// A turn that calls one tool with JSON arguments.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Self::default().with_tool_call(name, arguments)
    }

    /// A turn that fails with this error before sending anything.
    pub fn error(error: ProviderError) -> Self {
        Self { error: Some(error), ..Self::default() }
    }

    /// A turn whose stream never yields (until it is dropped).
    pub fn hang() -> Self {
        Self { hang: true, ..Self::default() }
    }

    /// Adds a tool call with JSON arguments.
    pub fn with_tool_call(self, name: impl Into<String>, arguments: Value) -> Self {
        self.with_raw_tool_call(name, crate::canonical::to_string(&arguments))
    }

    /// Adds a tool call whose argument text is given verbatim (it need not be JSON).
    pub fn with_raw_tool_call(
        mut self,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        self.tool_calls.push(ScriptedCall {
            id: None,
            name: name.into(),
            arguments: arguments.into(),
        });
        self
    }

    /// Sets the id of the last added tool call (default `call_<turn>_<index>`).
    pub fn with_call_id(mut self, id: impl Into<String>) -> Self {
        if let Some(call) = self.tool_calls.last_mut() {
            call.id = Some(id.into());
        }
        self
    }

    /// Adds text before the tool calls.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Adds reasoning before everything else.
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// Sets the finish reason (default: `tool_calls` with calls, else `stop`).
    pub fn with_finish(mut self, reason: FinishReason) -> Self {
        self.finish = Some(reason);
        self
    }

    /// Sets the reported usage (default: 1 input token per 4 request characters, 1 output
    /// token per 4 generated characters).
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Waits this long before every chunk.
    pub fn with_chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = Some(delay);
        self
    }

    /// Waits this long before the first chunk.
    pub fn with_first_chunk_delay(mut self, delay: Duration) -> Self {
        self.first_delay = Some(delay);
        self
    }

    /// Fails with `error` after `chunks` chunks were sent.
    pub fn with_error_after(mut self, chunks: usize, error: ProviderError) -> Self {
        self.error_after = Some((chunks, error));
        self
    }

    fn chunks(&self, turn: usize, chunk_chars: usize, input_chars: usize) -> Vec<StreamChunk> {
        let mut out = Vec::new();
        let mut generated = 0;
        if let Some(reasoning) = &self.reasoning {
            generated += reasoning.len();
            out.extend(
                split(reasoning, chunk_chars).map(|text| StreamChunk::ReasoningDelta { text }),
            );
            out.push(StreamChunk::ReasoningEnd { opaque: None });
        }
        if let Some(text) = &self.text {
            generated += text.len();
            out.extend(split(text, chunk_chars).map(|text| StreamChunk::TextDelta { text }));
        }
        for (index, call) in self.tool_calls.iter().enumerate() {
            let id = call.id.clone().unwrap_or_else(|| format!("call_{turn}_{index}"));
            generated += call.name.len() + call.arguments.len();
            out.push(StreamChunk::ToolCallStart { id: id.clone(), name: call.name.clone() });
            out.extend(
                split(&call.arguments, chunk_chars)
                    .map(|delta| StreamChunk::ToolCallDelta { id: id.clone(), delta }),
            );
            out.push(StreamChunk::ToolCallEnd { id });
        }
        let usage = self.usage.unwrap_or(Usage {
            input: (input_chars / 4) as u64,
            output: generated.div_ceil(4) as u64,
            ..Usage::default()
        });
        out.push(StreamChunk::Usage { usage });
        let reason = self.finish.clone().unwrap_or(if self.tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });
        out.push(StreamChunk::Finish { reason });
        out
    }
}

/// Splits text into pieces of at most `size` characters (never inside a character).
fn split(text: &str, size: usize) -> impl Iterator<Item = String> + '_ {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest.char_indices().nth(size).map_or(rest.len(), |(i, _)| i);
        let (head, tail) = rest.split_at(end);
        rest = tail;
        Some(head.to_owned())
    })
}

/// The characters of a request's text, arguments and results: a cheap stand-in for tokens.
fn estimate_chars(request: &ModelRequest) -> usize {
    let parts = request.messages.iter().flat_map(|m| m.content.iter());
    let content: usize = parts
        .map(|part| match part {
            Part::Text { text } => text.len(),
            Part::ToolCall(call) => call.name.len() + call.arguments.len(),
            Part::ToolResult(result) => result.content.to_text().len(),
            Part::Reasoning(reasoning) => reasoning.text.len(),
            Part::Opaque(opaque) => opaque.value.to_string().len(),
            Part::Citation(citation) => citation.value.to_string().len(),
            Part::Image { .. } | Part::File { .. } => 1_000,
        })
        .sum();
    content + request.instructions.as_ref().map_or(0, String::len)
}

/// Counts a response stream dropped before it ended.
struct DropGuard {
    dropped: Arc<std::sync::atomic::AtomicUsize>,
    finished: bool,
}

impl DropGuard {
    fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.dropped.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// A model that plays scripted turns in order and records every request it receives.
/// When the script runs out, it answers with a [`ProviderError::Other`].
#[derive(Debug)]
pub struct ScriptedModel {
    turns: Mutex<VecDeque<ScriptedTurn>>,
    requests: Mutex<Vec<ModelRequest>>,
    request_count: std::sync::atomic::AtomicUsize,
    dropped: Arc<std::sync::atomic::AtomicUsize>,
    record: bool,
    chunk_chars: usize,
    follow_history: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ScriptedModel {
    /// A model that plays these turns.
    pub fn new(turns: impl IntoIterator<Item = ScriptedTurn>) -> Self {
        Self {
            turns: Mutex::new(turns.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
            request_count: std::sync::atomic::AtomicUsize::new(0),
            dropped: Arc::default(),
            record: true,
            chunk_chars: 8,
            follow_history: false,
        }
    }

    /// Plays, for each request, the turn at the position of the number of assistant turns
    /// since the request's last user message, instead of the next turn in order: the script
    /// is then a function of the conversation, so any process plays a run the same turns (a
    /// run resumed elsewhere goes on where it stopped). The turns are kept; past the last
    /// one, the script is exhausted.
    pub fn following_history(mut self) -> Self {
        self.follow_history = true;
        self
    }

    /// Stops recording requests (benchmarks: a recorded request keeps its history alive).
    /// [`request_count`](Self::request_count) still counts them.
    pub fn without_recording(mut self) -> Self {
        self.record = false;
        self
    }

    /// Sets how many characters each text / argument chunk carries (default 8).
    pub fn with_chunk_chars(mut self, chars: usize) -> Self {
        self.chunk_chars = chars.max(1);
        self
    }

    /// Appends more turns to the script.
    pub fn push(&self, turn: ScriptedTurn) {
        lock(&self.turns).push_back(turn);
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        lock(&self.requests).clone()
    }

    /// The number of requests received so far.
    pub fn request_count(&self) -> usize {
        self.request_count.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many response streams were dropped before they ended (cancelled requests).
    pub fn dropped_streams(&self) -> usize {
        self.dropped.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many turns are left.
    pub fn remaining(&self) -> usize {
        lock(&self.turns).len()
    }
}

impl Provider for ScriptedModel {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let position = self.follow_history.then(|| {
            let last_user = request.messages.iter().rposition(|m| m.role == Role::User);
            let since = last_user.map_or(&request.messages[..], |i| &request.messages[i + 1..]);
            since.iter().filter(|m| m.role == Role::Assistant).count()
        });
        let turn = match position {
            Some(position) => lock(&self.turns).get(position).cloned(),
            None => lock(&self.turns).pop_front(),
        };
        // Scripted usage needs no estimate (and benchmarks must not pay for one).
        let input_chars = match &turn {
            Some(turn) if turn.usage.is_none() => estimate_chars(&request),
            _ => 0,
        };
        let counted = self.request_count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let turn_index = position.unwrap_or(counted);
        if self.record {
            lock(&self.requests).push(request);
        }
        let chunk_chars = self.chunk_chars;
        let mut guard = DropGuard { dropped: self.dropped.clone(), finished: false };
        Box::pin(async_stream::stream! {
            let Some(turn) = turn else {
                guard.finish();
                yield Err(ProviderError::Other { message: "scripted model: script exhausted".into() });
                return;
            };
            if let Some(delay) = turn.first_delay {
                tokio::time::sleep(delay).await;
            }
            if turn.hang {
                futures::future::pending::<()>().await;
            }
            if let Some(error) = turn.error.clone() {
                guard.finish();
                yield Err(error);
                return;
            }
            for (sent, chunk) in turn.chunks(turn_index, chunk_chars, input_chars).into_iter().enumerate() {
                if let Some((after, error)) = &turn.error_after {
                    if sent == *after {
                        guard.finish();
                        yield Err(error.clone());
                        return;
                    }
                }
                if let Some(delay) = turn.chunk_delay {
                    tokio::time::sleep(delay).await;
                }
                yield Ok(chunk);
            }
            guard.finish();
        })
    }

    fn family(&self) -> &str {
        "scripted"
    }

    fn name(&self) -> &str {
        "scripted"
    }
}
