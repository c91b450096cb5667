use super::*;
use agentloop::provider::scripted::ScriptedModel;
use agentloop::tool::builtin::Calculator;
use agentloop::Agent;

fn spec(name: &str) -> ToolSpec {
    ToolSpec { name: name.into(), description: String::new(), parameters: serde_json::json!({}) }
}

#[test]
fn examples_are_only_for_the_tools_present() {
    let text = instructions(&["calculator", "task_complete"]);
    assert!(text.contains("'A squared' is A ^ 2"), "{text}");
    let files = instructions(&["read_file", "task_complete"]);
    assert!(!files.contains("A squared"), "{files}");
    let turns = examples(&[spec("calculator"), spec("task_complete")]);
    let names: Vec<&str> =
        turns.iter().flat_map(|m| m.tool_calls()).map(|c| c.name.as_str()).collect();
    assert!(names.contains(&"calculator") && names.contains(&"task_complete"), "{names:?}");
    assert!(!names.contains(&"read_file"), "{names:?}");
    // Every call but the done tool's is answered, as in a real conversation.
    let results: Vec<String> =
        turns.iter().flat_map(|m| m.tool_results_iter()).map(|r| r.call_id.clone()).collect();
    for call in turns.iter().flat_map(|m| m.tool_calls()).filter(|c| c.name != "task_complete") {
        assert!(results.contains(&call.id), "{call:?}");
    }
    assert!(examples(&[spec("other")]).is_empty());
}

#[test]
fn configure_adds_the_done_tool_and_the_step_policy() {
    let builder = Agent::builder(ScriptedModel::new(Vec::new())).tool(Calculator);
    let agent = configure(builder, &["calculator"], None).build().unwrap();
    let names: Vec<String> = agent.tools().iter().map(|t| t.name.clone()).collect();
    assert!(names.contains(&"task_complete".to_owned()), "{names:?}");
    let own =
        configure(Agent::builder(ScriptedModel::new(Vec::new())), &[], Some("Be brief.".into()))
            .build()
            .unwrap();
    assert_eq!(own.config().instructions.as_deref(), Some("Be brief."));
    let calculator = step_tool_choice(&["calculator", "task_complete"]);
    assert_eq!(calculator.first, ToolChoice::Named("task_complete".into()));
    assert_eq!(calculator.first_with_digits, Some(ToolChoice::Named("calculator".into())));
    let files = step_tool_choice(&["list_dir", "read_file", "task_complete"]);
    assert_eq!(files.first, ToolChoice::Required);
    assert_eq!(files.then, ToolChoice::Named("task_complete".into()));
}
