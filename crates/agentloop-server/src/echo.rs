//! The test agent (`agentloop serve --agent echo`): deterministic, no model, its behaviour
//! chosen by the incoming message — so a conformance suite, a client's tests or a UI can
//! drive every task state. The first word of the user's latest message decides:
//!
//! | message | what happens | task ends |
//! |---|---|---|
//! | `stream N` | N answer chunks, 20 ms apart | completed |
//! | `calc EXPR` | calls the calculator tool, answers with the result | completed |
//! | `ask QUESTION` | asks the user (the `ask_user` tool); the next message to the task is the answer, echoed | input-required, then completed |
//! | `approve` | calls `guarded_action`, which waits for approval; approved it runs, rejected the model sees why | input-required, then completed |
//! | `slow SECONDS` | answers after that long (at most 600 s): time to cancel it | completed (or canceled) |
//! | `steps N SECONDS` | calls the calculator N times (at most 50; the iteration limit of 4 allows 3), SECONDS (at most 60) before each call, then answers: a long task that journals its progress (to stop its worker midway) | completed |
//! | `loop` | calls the calculator until the iteration limit ends the run | completed, limit in the metadata |
//! | `fail` | the model call fails (not retried) | failed |
//! | `delegate TASK` | hands TASK to the `helper` tool: a sub-agent (`echo-helper`, the echo model with the calculator) whose run is the call's child run, then answers with its answer | completed |
//! | `remote NAME TASK` | sends TASK to the tool NAME — a remote A2A agent given to the echo agent (`[[a2a]]` with `serve --agent echo`) — then answers with what it returned | completed |
//! | anything else | the message itself, in a few chunks — or, when the run asks for a typed answer in tool mode (an A2A message's `agentloop.output`), the `final_answer` call with the message as its arguments (parsed as JSON, else `{"response": message}`) | completed |

use crate::tasks::{ServeError, ServedAgent};
use agentloop::hooks::{Approval, HookContext, HookResult, Hooks};
use agentloop::message::{FinishReason, Message, Role, ToolCall, Usage};
use agentloop::provider::{ChunkStream, ModelRequest, Provider, ProviderError, StreamChunk};
use agentloop::run::OUTPUT_TOOL;
use agentloop::store::{RunStore, SessionStore};
use agentloop::tool::builtin::{AskUser, Calculator};
use agentloop::{tool, Agent};
use futures::StreamExt;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// The echo model (see the [module docs](self)).
#[derive(Debug, Clone, Default)]
pub struct EchoModel;

/// A step of the echo model.
enum Reply {
    Text { chunks: Vec<String>, delay: Duration, first_delay: Duration },
    Call { name: String, arguments: Value, delay: Duration },
    Fail(String),
}

fn call(name: &str, arguments: Value) -> Reply {
    Reply::Call { name: name.to_owned(), arguments, delay: Duration::ZERO }
}

fn text(answer: impl Into<String>) -> Reply {
    let answer: String = answer.into();
    // A few chunks, split at spaces where possible.
    let mut chunks = Vec::new();
    let mut rest = answer.as_str();
    while !rest.is_empty() {
        let cut = rest
            .char_indices()
            .map(|(i, c)| i + c.len_utf8())
            .find(|&i| i >= 8 && rest[..i].ends_with(' '))
            .unwrap_or(rest.len());
        chunks.push(rest[..cut].to_owned());
        rest = &rest[cut..];
    }
    Reply::Text { chunks, delay: Duration::ZERO, first_delay: Duration::ZERO }
}

/// What the echo model does next, given the conversation and the names of the tools the run
/// offers.
fn decide(messages: &[Message], tools: &[&str]) -> Reply {
    let answer_tool = tools.contains(&OUTPUT_TOOL);
    let Some(last_user) = messages.iter().rposition(|m| m.role == Role::User) else {
        return text("Send me a message.");
    };
    let said = messages[last_user].text();
    // An answer to the question the run asked: the turn before it called `ask_user`.
    let answered = messages[..last_user]
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant)
        .is_some_and(|m| m.tool_calls().any(|c| c.name == "ask_user"));
    if answered {
        return text(format!("Thank you. You answered: {said}"));
    }
    let results: Vec<String> = messages[last_user + 1..]
        .iter()
        .flat_map(|m| m.tool_results_iter())
        .map(|r| r.content.to_text())
        .collect();
    let mut words = said.trim().splitn(2, char::is_whitespace);
    let command = words.next().unwrap_or_default().to_ascii_lowercase();
    let rest = words.next().unwrap_or_default().trim().to_owned();
    match (command.as_str(), results.last()) {
        ("stream", None) => {
            let n = rest.parse::<usize>().unwrap_or(5).clamp(1, 1000);
            let chunks =
                (1..=n).map(|i| format!("chunk {i}{}", if i < n { " " } else { "" })).collect();
            Reply::Text { chunks, delay: Duration::from_millis(20), first_delay: Duration::ZERO }
        }
        ("calc", None) => call("calculator", json!({"expression": rest})),
        ("calc", Some(result)) => text(format!("The result is {result}.")),
        ("ask", None) => {
            let question = if rest.is_empty() { "What is your answer?".to_owned() } else { rest };
            call("ask_user", json!({"question": question}))
        }
        ("approve", None) => call("guarded_action", json!({"what": "the guarded action"})),
        ("approve", Some(result)) => text(format!("Guarded action: {result}")),
        ("loop", _) => call("calculator", json!({"expression": "1 + 1"})),
        ("slow", None) => {
            let seconds = rest.parse::<f64>().unwrap_or(5.0).clamp(0.0, 600.0);
            let Reply::Text { chunks, delay, .. } = text(format!("Done after {seconds} s.")) else {
                return text("");
            };
            Reply::Text { chunks, delay, first_delay: Duration::from_secs_f64(seconds) }
        }
        ("steps", done) => {
            let mut words = rest.split_whitespace();
            let n = words.next().and_then(|n| n.parse::<usize>().ok()).unwrap_or(3).clamp(1, 50);
            let seconds = words.next().and_then(|s| s.parse::<f64>().ok()).unwrap_or(1.0);
            let step = results.len();
            if step >= n {
                return text(format!(
                    "Done: {n} steps, the last said {}.",
                    done.map_or("", String::as_str)
                ));
            }
            let arguments = json!({"expression": format!("{step} + 1")});
            let delay = Duration::from_secs_f64(seconds.clamp(0.0, 60.0));
            Reply::Call { name: "calculator".to_owned(), arguments, delay }
        }
        ("fail", _) => Reply::Fail("the echo agent was asked to fail".to_owned()),
        ("delegate", None) => call("helper", json!({"input": rest})),
        ("delegate", Some(result)) => text(format!("The helper answered: {result}")),
        ("remote", None) => {
            let (name, task) = rest.split_once(char::is_whitespace).unwrap_or((&rest, ""));
            if tools.contains(&name) && !task.trim().is_empty() {
                call(name, json!({"message": task.trim()}))
            } else {
                text(format!("No remote agent '{name}' to ask: `remote NAME TASK`, NAME one of the [[a2a]] agents."))
            }
        }
        ("remote", Some(result)) => text(format!("The remote agent answered: {result}")),
        (_, Some(result)) => text(format!("The tool said: {result}")),
        _ if answer_tool => {
            let arguments = serde_json::from_str::<Value>(&said)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({"response": said}));
            call(OUTPUT_TOOL, arguments)
        }
        _ => text(said),
    }
}

fn usage_of(request: &ModelRequest, output: usize) -> Usage {
    let input: usize = request.messages.iter().map(|m| m.text().len()).sum();
    Usage { input: (input / 4 + 1) as u64, output: (output / 4 + 1) as u64, ..Usage::default() }
}

impl Provider for EchoModel {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let tools: Vec<&str> = request.tools.iter().map(|tool| tool.name.as_str()).collect();
        let reply = decide(&request.messages, &tools);
        Box::pin(async_stream::stream! {
            match reply {
                Reply::Fail(message) => {
                    yield Err(ProviderError::InvalidRequest { message });
                }
                Reply::Call { name, arguments, delay } => {
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    let id = format!("call_{}", uuid::Uuid::now_v7().simple());
                    yield Ok(StreamChunk::ToolCallStart { id: id.clone(), name });
                    yield Ok(StreamChunk::ToolCallDelta { id: id.clone(), delta: arguments.to_string() });
                    yield Ok(StreamChunk::ToolCallEnd { id });
                    yield Ok(StreamChunk::Usage { usage: usage_of(&request, 16) });
                    yield Ok(StreamChunk::Finish { reason: FinishReason::ToolCalls });
                }
                Reply::Text { chunks, delay, first_delay } => {
                    if !first_delay.is_zero() {
                        tokio::time::sleep(first_delay).await;
                    }
                    let mut output = 0;
                    for (i, chunk) in chunks.into_iter().enumerate() {
                        if i > 0 && !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        output += chunk.len();
                        yield Ok(StreamChunk::TextDelta { text: chunk });
                    }
                    yield Ok(StreamChunk::Usage { usage: usage_of(&request, output) });
                    yield Ok(StreamChunk::Finish { reason: FinishReason::Stop });
                }
            }
        }.boxed())
    }

    fn name(&self) -> &str {
        "echo"
    }

    fn family(&self) -> &str {
        "echo"
    }
}

/// Does something that needs a human's approval first.
#[tool]
async fn guarded_action(what: String) -> Result<String, String> {
    Ok(format!("{what} ran"))
}

/// Defers `guarded_action` for a human decision.
struct GuardedApproval;

#[async_trait::async_trait]
impl Hooks for GuardedApproval {
    async fn approve_tool(
        &self,
        _ctx: &HookContext,
        call: &ToolCall,
        _arguments: &Value,
    ) -> HookResult<Approval> {
        Ok(if call.name == "guarded_action" { Approval::Defer } else { Approval::Approve })
    }
}

/// The echo agent (named `echo`), journaled in `store` with its sessions in `sessions`.
pub fn echo_agent(
    store: Arc<dyn RunStore>,
    sessions: Arc<dyn SessionStore>,
) -> Result<Agent, agentloop::error::BuildError> {
    echo_builder(store, sessions)?.build()
}

/// The echo agent's sub-agent (`echo-helper`, the `helper` tool): the echo model with the
/// calculator, journaled in `store`.
pub fn echo_helper(store: Arc<dyn RunStore>) -> Result<Agent, agentloop::error::BuildError> {
    Agent::builder(EchoModel)
        .name("echo-helper")
        .instructions("Echo the task; `calc EXPR` computes.")
        .tool(Calculator)
        .max_iterations(4)
        .store(store)
        .build()
}

/// The echo agent's builder (to add an observer, say), journaled in `store`.
pub fn echo_builder(
    store: Arc<dyn RunStore>,
    sessions: Arc<dyn SessionStore>,
) -> Result<agentloop::AgentBuilder, agentloop::error::BuildError> {
    let helper = echo_helper(store.clone())?
        .as_tool("helper", "A sub-agent that echoes its task and computes `calc EXPR`.");
    Ok(Agent::builder(EchoModel)
        .name("echo")
        .instructions("Echo the user; follow the test commands.")
        .tool(Calculator)
        .tool(AskUser)
        .tool(GuardedAction)
        .hook(GuardedApproval)
        .dyn_tool(Arc::new(helper))
        .max_iterations(4)
        .store(store)
        .session_store(sessions))
}

/// What the echo agent's card says it does.
pub const ECHO_DESCRIPTION: &str = "A deterministic test agent: echoes messages; `stream N`, \
`calc EXPR`, `ask Q`, `approve`, `slow S`, `steps N S`, `loop`, `fail`, `delegate TASK` \
(to a sub-agent) and `remote NAME TASK` (to a remote agent) drive every task state.";

/// The echo agent, ready to serve.
pub fn served_echo(
    store: Arc<dyn RunStore>,
    sessions: Arc<dyn SessionStore>,
) -> Result<ServedAgent, ServeError> {
    let agent =
        echo_agent(store, sessions).map_err(|error| ServeError::Agent(error.to_string()))?;
    ServedAgent::new(agent, ECHO_DESCRIPTION)
}

#[cfg(test)]
mod tests;
