#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::{Message, ToolResult};
use crate::provider::scripted::{ScriptedModel, ScriptedTurn};
use crate::tool::ToolSpec;
use crate::Agent;
use serde_json::json;
use std::sync::Arc;

fn request(messages: Vec<Message>, choice: ToolChoice) -> ModelRequest {
    ModelRequest {
        messages: Arc::new(messages),
        tools: Arc::new(vec![ToolSpec {
            name: "t".into(),
            description: String::new(),
            parameters: json!({}),
        }]),
        tool_choice: choice,
        ..ModelRequest::default()
    }
}

#[test]
fn required_first_then_auto() {
    let policy = StepToolChoice::required_first();
    let first = request(vec![Message::user("hi")], ToolChoice::Auto);
    assert_eq!(policy.choose(&first), ToolChoice::Required);
    let after = request(
        vec![
            Message::user("hi"),
            Message::assistant("calling"),
            Message::tool_results([ToolResult::ok("c", "ok")]),
        ],
        ToolChoice::Auto,
    );
    assert_eq!(policy.choose(&after), ToolChoice::Auto);
    // A new user message starts a new turn.
    let mut next = (*after.messages).clone();
    next.push(Message::user("again"));
    assert_eq!(policy.choose(&request(next, ToolChoice::Auto)), ToolChoice::Required);
    // The wind-down answer and requests without tools keep theirs.
    assert_eq!(
        policy.choose(&request(vec![Message::user("hi")], ToolChoice::None)),
        ToolChoice::None
    );
    let mut toolless = first.clone();
    toolless.tools = Arc::default();
    assert_eq!(policy.choose(&toolless), ToolChoice::Auto);
}

/// Echoes a string.
#[crate::tool]
async fn echo(text: String) -> Result<String, String> {
    Ok(text)
}

#[tokio::test]
async fn agent_applies_the_policy_per_step() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("echo", json!({"text": "x"})),
        ScriptedTurn::text("done"),
    ]));
    let agent = Agent::builder(model.clone())
        .tool(Echo)
        .step_tool_choice(StepToolChoice::required_first())
        .build()
        .unwrap();
    assert_eq!(agent.run("go").await.unwrap().answer, "done");
    let choices: Vec<ToolChoice> = model.requests().into_iter().map(|r| r.tool_choice).collect();
    assert_eq!(choices, vec![ToolChoice::Required, ToolChoice::Auto]);
}

#[test]
fn a_question_with_a_digit_gets_its_own_first_choice() {
    let policy = StepToolChoice {
        first_with_digits: Some(ToolChoice::Named("t".into())),
        ..StepToolChoice::required_first()
    };
    let numbers = request(vec![Message::user("what is 2+2?")], ToolChoice::Auto);
    assert_eq!(policy.choose(&numbers), ToolChoice::Named("t".into()));
    let words = request(vec![Message::user("capital of France?")], ToolChoice::Auto);
    assert_eq!(policy.choose(&words), ToolChoice::Required);
    // Not offered: the usual first choice.
    let other = StepToolChoice {
        first_with_digits: Some(ToolChoice::Named("calculator".into())),
        ..StepToolChoice::required_first()
    };
    assert_eq!(other.choose(&numbers), ToolChoice::Required);
    // After a tool result: `then`.
    let after = request(
        vec![
            Message::user("what is 2+2?"),
            Message::assistant("calling"),
            Message::tool_results([ToolResult::ok("c", "4")]),
        ],
        ToolChoice::Auto,
    );
    assert_eq!(policy.choose(&after), ToolChoice::Auto);
}
