#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use serde_json::json;

fn done(answer: &str, stop_reason: StopReason) -> Result<Outcome, AgentError> {
    Ok(Outcome::new("run_child", answer, stop_reason))
}

#[test]
fn an_answer_is_the_result_and_a_question_comes_back_as_one() {
    let completed = answer("run_child", done("42", StopReason::Completed));
    assert_eq!(completed, Ok(ToolOutput::Value(json!("42"))));
    let done_tool = answer("run_child", done("ok", StopReason::DoneTool { tool: "t".into() }));
    assert_eq!(done_tool, Ok(ToolOutput::Value(json!("ok"))));
    let asks = StopReason::AwaitingInput { tool: "ask_user".into() };
    let question = answer("run_child", done("Which city?", asks));
    assert_eq!(question, Ok(ToolOutput::Value(json!("The agent needs more input: Which city?"))));
}

#[test]
fn a_failed_cancelled_or_suspended_child_is_an_error_result() {
    let outcome = Box::new(Outcome::new("run_child", "", StopReason::Completed));
    let cancelled = AgentError::Cancelled { reason: "stop".into(), outcome: outcome.clone() };
    assert_eq!(
        answer("run_child", Err(cancelled)),
        Err(ToolError::Failed("the agent's run was cancelled: stop".into()))
    );
    let failed = answer("run_child", Err(AgentError::NoOutcome)).unwrap_err();
    assert_eq!(
        failed,
        ToolError::Failed("the agent's run failed: the run ended without an outcome".into())
    );
    let waiting = answer("run_child", done("", StopReason::AwaitingApproval { calls: vec![] }));
    let Err(ToolError::Failed(text)) = waiting else { panic!("{waiting:?}") };
    assert!(text.contains("run_child") && text.contains("approval"), "{text}");
}

#[test]
fn the_arguments_are_one_input_string() {
    let tool = crate::Agent::builder(crate::provider::scripted::ScriptedModel::new([]))
        .build()
        .unwrap()
        .as_tool("helper", "Helps.");
    let spec = tool.spec();
    assert_eq!((spec.name.as_str(), spec.description.as_str()), ("helper", "Helps."));
    assert_eq!(spec.parameters["required"], json!(["input"]));
    assert_eq!(spec.parameters["properties"]["input"]["type"], json!("string"));
    assert_eq!(DynTool::timeout(&tool), None);
    let tool = tool.with_timeout(Duration::from_secs(300));
    assert_eq!(DynTool::timeout(&tool), Some(Duration::from_secs(300)));
}
