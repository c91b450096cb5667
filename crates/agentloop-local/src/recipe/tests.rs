use super::*;
use agentloop::provider::scripted::ScriptedModel;
use agentloop::tool::builtin::Calculator;
use agentloop::Agent;

#[test]
fn examples_are_only_for_the_tools_present() {
    let text = instructions(&["calculator", "task_complete"]);
    assert!(text.contains("\"name\": \"calculator\""), "{text}");
    assert!(text.contains("\"name\": \"task_complete\""), "{text}");
    assert!(text.contains("'A squared' is A ^ 2"), "{text}");
    assert!(!text.contains("read_file"), "{text}");
    let files = instructions(&["read_file", "task_complete"]);
    assert!(files.contains("\"name\": \"read_file\""), "{files}");
    assert!(!files.contains("\"name\": \"calculator\""), "{files}");
    assert!(!files.contains("A squared"), "{files}");
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
    assert_eq!(step_tool_choice().first, ToolChoice::Required);
    assert_eq!(step_tool_choice().then, ToolChoice::Named("task_complete".into()));
}
