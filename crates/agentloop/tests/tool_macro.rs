//! `#[tool]` on async functions.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::prelude::*;
use agentloop::tool::{DynTool, Tool};
use serde_json::json;

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
