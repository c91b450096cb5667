//! `#[tool]` on async functions.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::tool::Control;
use agentloop::tool::{DynTool, Tool};
use serde_json::json;
use std::sync::Arc;

/// Multiplies two numbers.
///
/// Use it for products.
#[tool]
async fn multiply(a: f64, b: f64) -> f64 {
    a * b
}

/// Looks up a user.
#[tool(name = "get_user")]
pub async fn lookup(
    #[schemars(description = "The user's id.")] id: u32,
    #[serde(default)] verbose: bool,
    ctx: ToolContext,
) -> Result<serde_json::Value, String> {
    if id == 0 {
        return Err(format!("no user 0 (call {})", ctx.call_id));
    }
    Ok(json!({"id": id, "verbose": verbose}))
}

#[tool(description = "Finishes the task.")]
async fn finish(answer: String) -> Control {
    Control(ToolOutput::Done(answer))
}

/// Ends the task with its answer (the output type is `ToolOutput` itself, not `Control`).
#[tool]
async fn conclude(answer: String) -> ToolOutput {
    ToolOutput::Done(answer)
}

/// Asks the user, or fails.
#[tool]
async fn clarify(question: String) -> Result<ToolOutput, String> {
    if question.is_empty() {
        return Err("no question".into());
    }
    Ok(ToolOutput::AskUser(question))
}

/// Takes nothing.
#[tool]
fn ping() -> &'static str {
    "pong"
}

#[test]
fn the_doc_comment_is_the_description_and_parameters_the_schema() {
    let spec = Multiply.spec();
    assert_eq!(spec.name, "multiply");
    assert_eq!(spec.description, "Multiplies two numbers.\n\nUse it for products.");
    assert_eq!(spec.parameters["type"], "object");
    assert_eq!(spec.parameters["required"], json!(["a", "b"]));
    assert_eq!(spec.parameters["properties"]["a"]["type"], "number");
}

#[test]
fn names_descriptions_and_parameter_attributes_can_be_set() {
    let spec = Lookup.spec();
    assert_eq!(spec.name, "get_user");
    assert_eq!(<Lookup as Tool>::NAME, "get_user");
    assert_eq!(spec.parameters["properties"]["id"]["description"], "The user's id.");
    assert_eq!(
        spec.parameters["required"],
        json!(["id"]),
        "defaulted and context parameters are not required"
    );
    assert!(spec.parameters["properties"].get("ctx").is_none());
    assert_eq!(Finish.spec().description, "Finishes the task.");
    assert_eq!(Ping.spec().parameters["properties"], json!({}));
}

#[tokio::test]
async fn calls_return_values_errors_and_control_signals() {
    let ctx = || ToolContext::detached("c7");
    assert_eq!(
        Multiply.call_json(json!({"a": 6, "b": 7}), ctx()).await,
        Ok(ToolOutput::Value(json!(42.0)))
    );
    assert_eq!(
        Lookup.call_json(json!({"id": 3}), ctx()).await,
        Ok(ToolOutput::Value(json!({"id": 3, "verbose": false})))
    );
    assert_eq!(
        Lookup.call_json(json!({"id": 0}), ctx()).await,
        Err(ToolError::Failed("no user 0 (call c7)".into()))
    );
    assert_eq!(
        Finish.call_json(json!({"answer": "ok"}), ctx()).await,
        Ok(ToolOutput::Done("ok".into()))
    );
    assert_eq!(Ping.call_json(json!({}), ctx()).await, Ok(ToolOutput::Value(json!("pong"))));
    // The function itself stays callable.
    assert_eq!(multiply(2.0, 3.0).await, 6.0);
}

#[tokio::test]
async fn a_tool_returning_tool_output_done_ends_the_run_as_the_done_tool_does() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("multiply", json!({"a": 6, "b": 7})),
        ScriptedTurn::tool_call("conclude", json!({"answer": "The product is 42."})),
        ScriptedTurn::text("never asked for"),
    ]));
    let agent =
        Agent::builder(model.clone()).tool(Multiply).tool(Conclude).tool(Clarify).build().unwrap();
    let outcome = agent.run("6 times 7?").await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::DoneTool { tool: "conclude".into() });
    assert_eq!(outcome.answer, "The product is 42.");
    assert!(outcome.has_answer());
    assert_eq!(model.request_count(), 2, "the done output ends the run: no third model call");
    assert_eq!(model.remaining(), 1);
}

#[tokio::test]
async fn a_tool_returning_tool_output_ask_user_ends_the_turn_with_its_question() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("clarify", json!({"question": "Which city?"})),
        ScriptedTurn::text("never asked for"),
    ]));
    let agent = Agent::builder(model.clone()).tool(Clarify).build().unwrap();
    let mut events = agent.run_stream("Weather?");
    let mut last = None;
    let mut completed = 0;
    while let Some(event) = futures::StreamExt::next(&mut events).await {
        if let Event::ToolCompleted { result, control, .. } = &event {
            // The history holds the question as the call's text result, not a JSON value.
            assert_eq!(result.content.to_text(), "Which city?");
            assert!(control.is_some(), "the completion carries the control signal");
            completed += 1;
        }
        last = Some(event);
    }
    assert_eq!(completed, 1);
    let Some(Event::RunFinished { outcome }) = last else { panic!("{last:?}") };
    assert_eq!(outcome.stop_reason, StopReason::AwaitingInput { tool: "clarify".into() });
    assert_eq!(outcome.answer, "Which city?");
    assert_eq!(model.request_count(), 1);
}
