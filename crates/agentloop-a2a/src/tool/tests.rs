use super::*;
use a2a::{
    AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Artifact, StreamResponse, Task,
    TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use serde_json::json;

fn status(state: TaskState, text: Option<&str>) -> StreamResponse {
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: "t1".into(),
        context_id: "c1".into(),
        status: TaskStatus {
            state,
            message: text.map(|t| Message::new(Role::Agent, vec![Part::text(t)])),
            timestamp: None,
        },
        metadata: None,
    })
}

fn chunk(id: &str, text: &str, append: bool) -> StreamResponse {
    StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
        task_id: "t1".into(),
        context_id: "c1".into(),
        artifact: Artifact {
            artifact_id: id.into(),
            name: None,
            description: None,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: None,
        },
        append: append.then_some(true),
        last_chunk: None,
        metadata: None,
    })
}

fn task(state: TaskState) -> Task {
    Task {
        id: "t1".into(),
        context_id: "c1".into(),
        status: TaskStatus { state, message: None, timestamp: None },
        artifacts: None,
        history: None,
        metadata: None,
    }
}

fn collect(events: &[StreamResponse]) -> TaskCollector {
    let mut collector = TaskCollector::default();
    for event in events {
        collector.apply(event);
    }
    collector
}

#[test]
fn chunks_append_and_the_final_status_message_follows() {
    let collector = collect(&[
        StreamResponse::Task(task(TaskState::Submitted)),
        status(TaskState::Working, Some("working on it")),
        chunk("a", "one ", false),
        chunk("a", "two", true),
        chunk("b", "other", false),
        status(TaskState::Completed, Some("done")),
    ]);
    assert!(collector.is_settled());
    assert_eq!((collector.task_id(), collector.context_id()), (Some("t1"), Some("c1")));
    assert_eq!(
        collector.outcome(),
        TaskOutcome::Completed { task_id: Some("t1".into()), text: "one two\nother\ndone".into() }
    );
}

#[test]
fn a_chunk_without_append_replaces_the_artifact() {
    let collector = collect(&[
        chunk("a", "draft", false),
        chunk("a", "final", false),
        status(TaskState::Completed, None),
    ]);
    assert_eq!(
        collector.outcome(),
        TaskOutcome::Completed { task_id: Some("t1".into()), text: "final".into() }
    );
}

#[test]
fn working_is_not_settled_and_is_unfinished() {
    let collector = collect(&[status(TaskState::Working, Some("busy"))]);
    assert!(!collector.is_settled());
    assert_eq!(
        collector.outcome(),
        TaskOutcome::Unfinished { task_id: Some("t1".into()), state: Some(TaskState::Working) }
    );
    assert_eq!(
        TaskCollector::default().outcome(),
        TaskOutcome::Unfinished { task_id: None, state: None }
    );
}

#[test]
fn input_required_carries_the_question_and_the_task() {
    let collector = collect(&[status(TaskState::InputRequired, Some("Which city?"))]);
    assert!(collector.is_settled());
    assert_eq!(
        collector.outcome(),
        TaskOutcome::InputRequired { task_id: "t1".into(), question: "Which city?".into() }
    );
    let silent = collect(&[status(TaskState::InputRequired, None)]);
    let TaskOutcome::InputRequired { question, .. } = silent.outcome() else { panic!() };
    assert_eq!(question, "The remote agent needs more input.");
}

#[test]
fn failures_keep_their_state_and_text() {
    for state in [TaskState::Failed, TaskState::Rejected, TaskState::Canceled] {
        let collector = collect(&[status(state.clone(), Some("why"))]);
        assert!(collector.is_settled());
        assert_eq!(
            collector.outcome(),
            TaskOutcome::Ended { task_id: "t1".into(), state, text: "why".into() }
        );
    }
    let auth = collect(&[status(TaskState::AuthRequired, Some("log in"))]);
    assert_eq!(
        auth.outcome(),
        TaskOutcome::AuthRequired { task_id: "t1".into(), text: "log in".into() }
    );
}

#[test]
fn a_message_answer_completes_without_a_task() {
    let mut collector = TaskCollector::default();
    collector.apply_response(&a2a::SendMessageResponse::Message(Message::new(
        Role::Agent,
        vec![Part::text("hi "), Part::data(json!({"n": 1}))],
    )));
    assert!(collector.is_settled());
    assert_eq!(
        collector.outcome(),
        TaskOutcome::Completed { task_id: None, text: "hi {\"n\":1}".into() }
    );
    // A user message (an echo of ours) is not an answer.
    let mut collector = TaskCollector::default();
    collector.apply(&StreamResponse::Message(Message::new(Role::User, vec![Part::text("q")])));
    assert!(!collector.is_settled());
}

#[test]
fn a_whole_task_replaces_artifacts_and_falls_back_to_the_last_agent_message() {
    let mut done = task(TaskState::Completed);
    done.history = Some(vec![
        Message::new(Role::User, vec![Part::text("q")]),
        Message::new(Role::Agent, vec![Part::text("the answer")]),
    ]);
    let mut collector = collect(&[chunk("a", "stale", false)]);
    done.artifacts = Some(vec![]);
    collector.apply_task(&done);
    assert_eq!(
        collector.outcome(),
        TaskOutcome::Completed { task_id: Some("t1".into()), text: "the answer".into() }
    );
}

#[test]
fn files_are_described_not_inlined() {
    let parts = vec![
        Part::raw(vec![0; 10]).with_filename("a.png").with_media_type("image/png"),
        Part::url("https://x/y"),
    ];
    assert_eq!(
        collect::parts_text(&parts),
        "[file a.png (image/png), 10 bytes][file (unnamed): https://x/y]"
    );
}

#[test]
fn tool_names_are_safe() {
    assert_eq!(tool_name("Py Test Agent"), "py_test_agent");
    assert_eq!(tool_name("  Währung & Co. 2  "), "w_hrung_co_2");
    assert_eq!(tool_name("!!!"), "remote_agent");
    assert_eq!(tool_name("web-search"), "web-search");
    assert_eq!(tool_name(&"x".repeat(100)).len(), 64);
}

fn card() -> AgentCard {
    AgentCard {
        name: "Weather Bot".into(),
        description: "Forecasts.\u{1b}[31m".into(),
        version: "1".into(),
        supported_interfaces: vec![AgentInterface {
            url: "http://h/rpc".into(),
            protocol_binding: "JSONRPC".into(),
            protocol_version: "1.0".into(),
            tenant: None,
        }],
        capabilities: AgentCapabilities::default(),
        default_input_modes: vec![],
        default_output_modes: vec![],
        skills: vec![AgentSkill {
            id: "f".into(),
            name: "Forecast".into(),
            description: "Tomorrow's weather.".into(),
            tags: vec![],
            examples: Some(vec!["rain in Oslo?".into()]),
            input_modes: None,
            output_modes: None,
            security_requirements: None,
        }],
        provider: None,
        documentation_url: None,
        icon_url: None,
        security_schemes: None,
        security_requirements: None,
        signatures: None,
    }
}

#[test]
fn the_spec_comes_from_the_card() {
    let client = A2aClient::builder().connect(card()).unwrap();
    let spec = A2aAgentTool::new(client).spec();
    assert_eq!(spec.name, "weather_bot");
    assert!(
        spec.description.starts_with(
            "Sends a request to the remote agent 'Weather Bot': Forecasts.\\u{1b}[31m"
        ),
        "{}",
        spec.description
    );
    assert!(spec.description.contains("- Forecast: Tomorrow's weather. (e.g. \"rain in Oslo?\")"));
    assert!(spec.description.contains("call weather_bot again"));
    assert_eq!(spec.parameters["required"], json!(["message"]));
    assert!(spec.parameters["properties"]["task_id"].is_object());
}

#[test]
fn outputs_map_to_values_questions_and_errors() {
    let client = A2aClient::builder().connect(card()).unwrap();
    let tool = A2aAgentTool::new(client).with_name("weather").with_max_result_chars(5);
    let done = tool.output(TaskOutcome::Completed { task_id: None, text: "sunny all day".into() });
    assert_eq!(done, Ok(ToolOutput::Value(json!("sunny…"))));
    let empty = tool.output(TaskOutcome::Completed { task_id: None, text: " ".into() });
    assert_eq!(empty, Ok(ToolOutput::Value(json!("(the remote agent finished without output)"))));
    let ask =
        tool.output(TaskOutcome::InputRequired { task_id: "T-9".into(), question: "City?".into() });
    let Ok(ToolOutput::AskUser(question)) = ask else { panic!("{ask:?}") };
    assert!(question.starts_with("City?\n\n"), "{question}");
    assert!(
        question.contains("call weather again") && question.contains("task_id \"T-9\""),
        "{question}"
    );
    let failed = tool.output(TaskOutcome::Ended {
        task_id: "T".into(),
        state: TaskState::Rejected,
        text: "no".into(),
    });
    assert_eq!(failed, Err(ToolError::Failed("the remote agent's task rejected: no".into())));
    let unfinished = tool.output(TaskOutcome::Unfinished { task_id: None, state: None });
    assert!(
        matches!(unfinished, Err(ToolError::Failed(text)) if text.contains("(none)") && text.contains("unknown"))
    );
}

#[test]
fn remote_updates_become_nested_text_events() {
    use agentloop::Event;
    let mut mapper = nested::NestedMapper::default();
    let mut events = |update: &StreamResponse| mapper.map(update, 100);
    assert_eq!(
        events(&chunk("a", "part \u{1b}1", true)),
        vec![Event::TextDelta { delta: "part \\u{1b}1".into() }]
    );
    assert_eq!(
        events(&status(TaskState::Working, Some("thinking"))),
        vec![Event::Text { text: "thinking".into() }]
    );
    assert!(events(&status(TaskState::Working, None)).is_empty());
    assert!(events(&StreamResponse::Task(task(TaskState::Submitted))).is_empty());
    let reply = StreamResponse::Message(Message::new(Role::Agent, vec![Part::text("hi")]));
    assert_eq!(events(&reply), vec![Event::Text { text: "hi".into() }]);
    let echo = StreamResponse::Message(Message::new(Role::User, vec![Part::text("hi")]));
    assert!(events(&echo).is_empty());
    assert_eq!(nested::remote_task_id(&chunk("a", "x", false)), Some("t1"));
}

#[test]
fn a_last_chunk_that_repeats_the_answer_adds_only_what_is_new() {
    use agentloop::Event;
    let mut mapper = nested::NestedMapper::default();
    let mut deltas = |update: &StreamResponse| -> Vec<String> {
        mapper
            .map(update, 100)
            .into_iter()
            .map(|event| match event {
                Event::TextDelta { delta } => delta,
                other => panic!("{other:?}"),
            })
            .collect()
    };
    assert_eq!(deltas(&chunk("answer", "chunk 1 ", false)), ["chunk 1 "]);
    assert_eq!(deltas(&chunk("answer", "chunk 2", true)), ["chunk 2"]);
    // The whole answer as a replacing last chunk: nothing new.
    assert!(deltas(&chunk("answer", "chunk 1 chunk 2", false)).is_empty());
    // A longer version adds its end; a different text is shown whole.
    assert_eq!(deltas(&chunk("answer", "chunk 1 chunk 2!", false)), ["!"]);
    assert_eq!(deltas(&chunk("answer", "other", false)), ["other"]);
    // Another artifact is its own stream.
    assert_eq!(deltas(&chunk("notes", "chunk 1 ", false)), ["chunk 1 "]);
}

#[test]
fn continuing_a_task_ignores_the_first_snapshot_of_the_state_it_answers() {
    let mut answer = task(TaskState::InputRequired);
    answer.status.message = Some(Message::new(Role::Agent, vec![Part::text("Name?")]));
    let mut collector = TaskCollector::continuing();
    collector.apply(&StreamResponse::Task(answer.clone()));
    assert!(!collector.is_settled());
    collector.apply(&status(TaskState::Working, None));
    assert!(!collector.is_settled());
    collector.apply(&status(TaskState::InputRequired, Some("And your age?")));
    assert!(collector.is_settled());
    assert_eq!(
        collector.outcome(),
        TaskOutcome::InputRequired { task_id: "t1".into(), question: "And your age?".into() }
    );
    // A fresh GetTask counts; a new task's first snapshot counts as usual.
    let mut refreshed = TaskCollector::continuing();
    refreshed.apply(&StreamResponse::Task(answer.clone()));
    refreshed.apply_task(&answer);
    assert!(refreshed.is_settled());
    let mut fresh = TaskCollector::default();
    fresh.apply(&StreamResponse::Task(answer));
    assert!(fresh.is_settled());
}
