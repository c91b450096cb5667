#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod approvals;
mod budget;
mod journal_json;
mod length;
mod loop_rules;

pub(super) use super::*;
pub(super) use crate::message::{FinishReason, Part, Role, ToolResultContent};
pub(super) use crate::provider::{ModelResponse, ProviderError};
pub(super) use crate::tool::ToolSpec;
pub(super) use crate::tool::{ToolError, ToolOutput};
pub(super) use serde_json::json;

pub(super) fn config() -> RunConfig {
    RunConfig {
        instructions: Some("be brief".into()),
        tools: Arc::new(vec![ToolSpec {
            name: "add".into(),
            description: "adds".into(),
            parameters: json!({"type": "object"}),
        }]),
        ..RunConfig::default()
    }
}

pub(super) fn text_response(text: &str) -> ModelResponse {
    ModelResponse {
        message: Message::assistant(text),
        finish_reason: FinishReason::Stop,
        usage: Usage { input: 10, output: 2, ..Usage::default() },
        id: None,
        model: None,
        provider: None,
    }
}

pub(super) fn calls_response(calls: &[(&str, &str, &str)]) -> ModelResponse {
    let content = calls
        .iter()
        .map(|(id, name, args)| {
            Part::ToolCall(ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*args).into(),
            })
        })
        .collect();
    ModelResponse {
        message: Message { role: Role::Assistant, content },
        finish_reason: FinishReason::ToolCalls,
        usage: Usage { input: 10, output: 5, ..Usage::default() },
        id: None,
        model: None,
        provider: None,
    }
}

pub(super) fn kinds(run: &mut Run) -> Vec<&'static str> {
    run.drain_events().map(|e| e.kind()).collect()
}

pub(super) fn expect_model(run: &mut Run) -> ModelRequest {
    match run.next_step() {
        Step::CallModel(request) => request,
        other => panic!("expected a model call, got {other:?}"),
    }
}

pub(super) fn expect_finish(run: &mut Run) -> Outcome {
    match run.next_step() {
        Step::Finish(outcome) => {
            if run.is_finishing() {
                run.finish(outcome.clone());
            }
            outcome
        }
        other => panic!("expected the end, got {other:?}"),
    }
}

pub(super) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Every assistant tool call in the history has a result right after it.
pub(super) fn assert_history_answered(history: &[Message]) {
    for (i, message) in history.iter().enumerate() {
        let calls: Vec<&str> = message.tool_calls().map(|c| c.id.as_str()).collect();
        if !calls.is_empty() {
            let next = history.get(i + 1).expect("a tool message follows");
            let results: Vec<&str> = next.tool_results_iter().map(|r| r.call_id.as_str()).collect();
            assert_eq!(results, calls);
        }
    }
}
