//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::message::Role;
use agentloop::message::ToolCall;
use agentloop::prelude::*;
use agentloop::EventStream;
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Adds two integers.
#[tool]
pub async fn add(a: i64, b: i64) -> Result<i64, String> {
    a.checked_add(b).ok_or_else(|| "overflow".to_string())
}

pub async fn collect(stream: EventStream) -> Vec<Event> {
    stream.collect().await
}

pub fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::kind).collect()
}

/// Kinds with runs of the same delta kind collapsed into one entry.
pub fn compact_kinds(events: &[Event]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for kind in kinds(events) {
        if kind.ends_with("_delta") && out.last() == Some(&kind) {
            continue;
        }
        out.push(kind);
    }
    out
}

pub fn outcome(events: &[Event]) -> Outcome {
    events.last().and_then(Event::outcome).cloned().expect("the last event carries the outcome")
}

/// The history rules every provider needs: each tool result answers a call made earlier;
/// every call is answered by the tool message right after its assistant message, in order;
/// nothing else sits between them.
pub fn assert_valid_history(messages: &[Message]) {
    let mut answered = HashSet::new();
    for (index, message) in messages.iter().enumerate() {
        let calls: Vec<&ToolCall> = message.tool_calls().collect();
        if message.role == Role::Tool {
            let previous = index.checked_sub(1).map(|i| &messages[i]);
            let expected: Vec<&str> = previous
                .map(|p| p.tool_calls().map(|c| c.id.as_str()).collect())
                .unwrap_or_default();
            let got: Vec<&str> = message.tool_results_iter().map(|r| r.call_id.as_str()).collect();
            assert_eq!(
                got, expected,
                "tool message {index} must answer the calls just before it, in order"
            );
            for id in got {
                assert!(answered.insert(id.to_owned()), "call {id} answered twice");
            }
        } else {
            assert!(
                message.tool_results_iter().next().is_none(),
                "tool results outside a tool message"
            );
        }
        if !calls.is_empty() {
            let next = messages.get(index + 1);
            assert!(
                next.is_some_and(|n| n.role == Role::Tool),
                "assistant message {index} has calls but no tool message follows"
            );
        }
    }
}

/// A tool that records how many of its calls run at once and whether a call was dropped.
#[derive(Clone, Default)]
pub struct Probe {
    pub current: Arc<AtomicUsize>,
    pub max: Arc<AtomicUsize>,
    pub calls: Arc<AtomicUsize>,
    pub dropped: Arc<AtomicUsize>,
    pub keys: Arc<std::sync::Mutex<Vec<String>>>,
}

#[derive(Deserialize, JsonSchema)]
pub struct ProbeArgs {
    /// How long to sleep.
    pub ms: u64,
    /// What to return.
    pub tag: String,
}

struct Guard {
    probe: Probe,
    finished: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.probe.current.fetch_sub(1, Ordering::SeqCst);
        if !self.finished {
            self.probe.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Tool for Probe {
    const NAME: &'static str = "probe";
    type Args = ProbeArgs;
    type Output = String;
    type Error = String;

    fn description(&self) -> String {
        "Sleeps, then returns its tag.".into()
    }

    async fn call(&self, args: ProbeArgs, ctx: ToolContext) -> Result<String, String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.keys.lock().unwrap().push(ctx.idempotency_key.clone());
        let now = self.current.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        let mut guard = Guard { probe: self.clone(), finished: false };
        tokio::time::sleep(Duration::from_millis(args.ms)).await;
        guard.finished = true;
        Ok(args.tag)
    }
}

impl Probe {
    pub fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }
}

/// A tool that panics.
pub struct Crash;

impl Tool for Crash {
    const NAME: &'static str = "crash";
    type Args = serde_json::Map<String, serde_json::Value>;
    type Output = String;
    type Error = String;

    fn description(&self) -> String {
        "Always panics.".into()
    }

    #[allow(clippy::panic)]
    async fn call(&self, _args: Self::Args, _ctx: ToolContext) -> Result<String, String> {
        panic!("the crash tool crashed")
    }
}

/// Defers every call of `probe` to a human.
pub struct AskHuman;

#[async_trait::async_trait]
impl Hooks for AskHuman {
    async fn approve_tool(
        &self,
        _ctx: &agentloop::hooks::HookContext,
        call: &ToolCall,
        _arguments: &serde_json::Value,
    ) -> HookResult<Approval> {
        Ok(if call.name == "probe" { Approval::Defer } else { Approval::Approve })
    }
}
