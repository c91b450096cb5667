//! The floor: the scripted task as a raw reqwest loop with no framework. It does what any
//! agent loop must do and nothing more: serialize the conversation, POST it, parse the
//! response (one JSON body, or server-sent events assembled by tool-call index), run `add`
//! on the parsed arguments, append the assistant message and the tool results, and send
//! again until the model answers with text.

use crate::measure;
use crate::scenario::Script;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// A floor run failed.
#[derive(Debug, thiserror::Error)]
pub enum FloorError {
    /// The HTTP request failed.
    #[error("HTTP: {0}")]
    Http(#[from] reqwest::Error),
    /// The server answered with an error status.
    #[error("HTTP status {0}")]
    Status(u16),
    /// The response was not a chat completion.
    #[error("invalid response: {0}")]
    Json(#[from] serde_json::Error),
    /// The response made no sense (no choice, a call without a name, bad SSE).
    #[error("protocol: {0}")]
    Protocol(String),
}

/// A message of the conversation, as the chat API wants it.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Msg {
    User {
        content: String,
    },
    Assistant {
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<Call>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Call {
    id: String,
    #[serde(rename = "type", default = "function_type")]
    kind: String,
    function: Function,
}

fn function_type() -> String {
    "function".to_owned()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Function {
    name: String,
    arguments: String,
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: &'a [Msg],
    tools: &'a Value,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Deserialize)]
struct Completion {
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ResponseMessage,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ResponseMessage {
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<Call>,
}

#[derive(Deserialize, Clone, Copy, Default)]
struct WireUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Delta,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<CallDelta>,
}

#[derive(Deserialize)]
struct CallDelta {
    index: usize,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct AddArgs {
    a: i64,
    b: i64,
}

/// One model turn, whole.
struct Turn {
    text: Option<String>,
    calls: Vec<Call>,
    finish: Option<String>,
    usage: WireUsage,
}

/// What a floor run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FloorRun {
    /// The final answer.
    pub answer: String,
    /// Model round trips.
    pub rounds: u32,
    /// Tool calls run.
    pub tool_calls: u32,
    /// Tokens the server reported, input and output.
    pub tokens: u64,
}

/// Per-round measurements of a recorded run (for the history-growth scenario).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Round {
    /// Process CPU time when the round started (before the request body was encoded).
    pub cpu_at_start: Duration,
    /// CPU time spent encoding the request body of this round.
    pub encode: Duration,
}

/// The floor driver: a reqwest client and the request it repeats.
#[derive(Debug, Clone)]
pub struct Floor {
    client: reqwest::Client,
    url: String,
    model: String,
    tools: Value,
    stream: bool,
}

/// The `add` tool as the chat API declares it (the schema agentloop derives for it).
pub fn add_tool_json() -> Value {
    serde_json::json!([{
        "type": "function",
        "function": {
            "name": "add",
            "description": "Adds two integers.",
            "parameters": {
                "description": "Arguments of the `add` tool.",
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "format": "int64"},
                    "b": {"type": "integer", "format": "int64"}
                },
                "required": ["a", "b"]
            }
        }
    }])
}

impl Floor {
    /// A floor driver for the server at `base_url` (`http://host:port/v1`) and `script`.
    pub fn new(client: reqwest::Client, base_url: &str, script: Script, stream: bool) -> Self {
        Self {
            client,
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            model: script.model_name(),
            tools: add_tool_json(),
            stream,
        }
    }

    /// One run of the scripted task.
    pub async fn run(&self) -> Result<FloorRun, FloorError> {
        self.run_recorded(None).await
    }

    /// One run; with `rounds`, records the CPU time at the start of each round and the time
    /// spent encoding its request body.
    pub async fn run_recorded(
        &self,
        mut rounds: Option<&mut Vec<Round>>,
    ) -> Result<FloorRun, FloorError> {
        let mut messages = vec![Msg::User { content: "go".to_owned() }];
        let mut run = FloorRun::default();
        loop {
            let start = rounds.as_ref().map(|_| measure::process_cpu());
            let body = Body {
                model: &self.model,
                messages: &messages,
                tools: &self.tools,
                stream: self.stream,
                stream_options: self.stream.then_some(StreamOptions { include_usage: true }),
            };
            let body = serde_json::to_vec(&body)?;
            if let (Some(rounds), Some(start)) = (rounds.as_deref_mut(), start) {
                rounds.push(Round { cpu_at_start: start, encode: measure::process_cpu() - start });
            }
            let response = self
                .client
                .post(&self.url)
                .header("content-type", "application/json")
                .header(
                    "accept",
                    if self.stream { "text/event-stream" } else { "application/json" },
                )
                .body(body)
                .send()
                .await?;
            if !response.status().is_success() {
                return Err(FloorError::Status(response.status().as_u16()));
            }
            let turn =
                if self.stream { read_sse(response).await? } else { read_json(response).await? };
            run.rounds += 1;
            run.tokens += turn.usage.prompt_tokens + turn.usage.completion_tokens;
            if turn.calls.is_empty() || turn.finish.as_deref() != Some("tool_calls") {
                run.answer = turn.text.unwrap_or_default();
                return Ok(run);
            }
            let results: Vec<Msg> = turn
                .calls
                .iter()
                .map(|call| {
                    let content = match serde_json::from_str::<AddArgs>(&call.function.arguments) {
                        Ok(args) => match args.a.checked_add(args.b) {
                            Some(sum) => sum.to_string(),
                            None => "error: overflow".to_owned(),
                        },
                        Err(e) => format!("error: {e}"),
                    };
                    Msg::Tool { tool_call_id: call.id.clone(), content }
                })
                .collect();
            run.tool_calls += results.len() as u32;
            messages.push(Msg::Assistant { content: turn.text, tool_calls: turn.calls });
            messages.extend(results);
        }
    }
}

async fn read_json(response: reqwest::Response) -> Result<Turn, FloorError> {
    let bytes = response.bytes().await?;
    let completion: Completion = serde_json::from_slice(&bytes)?;
    let choice = completion
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| FloorError::Protocol("no choice".into()))?;
    Ok(Turn {
        text: choice.message.content,
        calls: choice.message.tool_calls,
        finish: choice.finish_reason,
        usage: completion.usage.unwrap_or_default(),
    })
}

async fn read_sse(response: reqwest::Response) -> Result<Turn, FloorError> {
    let mut turn =
        Turn { text: None, calls: Vec::new(), finish: None, usage: WireUsage::default() };
    let mut buffer: Vec<u8> = Vec::new();
    let mut bytes = response.bytes_stream();
    let mut done = false;
    while let Some(piece) = bytes.next().await {
        buffer.extend_from_slice(&piece?);
        // Events end with a blank line; `data:` lines carry the JSON. The complete events are
        // handled in place, and what is left of the buffer moves to its front once per read.
        let mut start = 0;
        while let Some(end) = find(&buffer[start..], b"\n\n") {
            for line in buffer[start..start + end].split(|&b| b == b'\n') {
                let Some(data) = line.strip_prefix(b"data:") else { continue };
                let data = data.strip_prefix(b" ").unwrap_or(data);
                if data == b"[DONE]" {
                    done = true;
                    continue;
                }
                apply_chunk(&mut turn, serde_json::from_slice(data)?)?;
            }
            start += end + 2;
        }
        buffer.drain(..start);
    }
    if !done {
        return Err(FloorError::Protocol("the stream ended without [DONE]".into()));
    }
    Ok(turn)
}

fn apply_chunk(turn: &mut Turn, chunk: Chunk) -> Result<(), FloorError> {
    if let Some(usage) = chunk.usage {
        turn.usage = usage;
    }
    for choice in chunk.choices {
        if let Some(text) = choice.delta.content {
            turn.text.get_or_insert_with(String::new).push_str(&text);
        }
        for delta in choice.delta.tool_calls {
            if delta.index == turn.calls.len() {
                turn.calls.push(Call {
                    id: String::new(),
                    kind: function_type(),
                    function: Function { name: String::new(), arguments: String::new() },
                });
            }
            let call = turn
                .calls
                .get_mut(delta.index)
                .ok_or_else(|| FloorError::Protocol(format!("tool call index {}", delta.index)))?;
            if let Some(id) = delta.id {
                call.id = id;
            }
            if let Some(function) = delta.function {
                if let Some(name) = function.name {
                    call.function.name.push_str(&name);
                }
                if let Some(arguments) = function.arguments {
                    call.function.arguments.push_str(&arguments);
                }
            }
        }
        if choice.finish_reason.is_some() {
            turn.finish = choice.finish_reason;
        }
    }
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

#[cfg(test)]
mod tests;
