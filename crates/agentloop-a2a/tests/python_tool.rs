//! `A2aAgentTool` inside agentloop runs (scripted model), calling the official Python
//! a2a-sdk server (scripts/a2a/py_agent.py).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::tool::{DynTool, ToolError};
use agentloop_a2a::a2a::TaskState;
use agentloop_a2a::{A2aAgentTool, A2aClient, Binding};
use common::py_agent;
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

async fn tool(base: &str, binding: Binding) -> A2aAgentTool {
    let client = A2aClient::builder().prefer([binding]).resolve(base).await.unwrap();
    A2aAgentTool::new(client)
}

fn agent(model: Arc<ScriptedModel>, tool: A2aAgentTool) -> Agent {
    Agent::builder(model).dyn_tool(Arc::new(tool)).build().unwrap()
}

async fn events(agent: &Agent, input: &str) -> Vec<Event> {
    agent.run_stream(input).collect().await
}

fn tool_result(events: &[Event]) -> String {
    events
        .iter()
        .find_map(|event| match event {
            Event::ToolCompleted { result, .. } => Some(result.content.to_text()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no tool_completed in {events:#?}"))
}

#[tokio::test]
async fn the_remote_agent_answers_as_a_tool_and_streams_nested_events() {
    let Some(agent_process) = py_agent(&[]).await else { return };
    let tool = tool(&agent_process.base, Binding::JsonRpc).await;
    let spec = tool.spec();
    assert_eq!(spec.name, "py_test_agent");
    assert!(spec.description.contains("- Echo: Repeats the message back. (e.g. \"echo hello\")"));

    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("py_test_agent", json!({"message": "stream please"}))
            .with_call_id("call_1"),
        ScriptedTurn::text("The agent streamed three chunks."),
    ]));
    let agent = agent(model.clone(), tool);
    let events = events(&agent, "Ask the remote agent to stream.").await;
    assert_eq!(tool_result(&events), "chunk 1. chunk 2. chunk 3.\nall chunks sent");
    let Some(Event::RunFinished { outcome }) = events.last() else { panic!("{events:#?}") };
    assert_eq!(outcome.answer, "The agent streamed three chunks.");
    // The model was offered the tool from the card.
    assert_eq!(model.requests()[0].tools[0].name, "py_test_agent");

    // The remote updates came as nested events of the call, between its start and result.
    let started = events.iter().position(|e| matches!(e, Event::ToolStarted { .. })).unwrap();
    let completed = events.iter().position(|e| matches!(e, Event::ToolCompleted { .. })).unwrap();
    let mut remote_task = None;
    let nested: Vec<String> = events
        .iter()
        .enumerate()
        .filter_map(|(i, event)| match event {
            Event::Nested { call_id, run_id, event } => {
                assert!(started < i && i < completed, "nested event outside the call");
                assert_eq!(call_id, "call_1");
                remote_task.get_or_insert_with(|| run_id.clone());
                assert_eq!(Some(run_id), remote_task.as_ref(), "one remote task");
                Some(match event.as_ref() {
                    Event::TextDelta { delta } => format!("delta:{delta}"),
                    Event::Text { text } => format!("text:{text}"),
                    other => panic!("unexpected nested {other:?}"),
                })
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        nested,
        [
            "text:streaming three chunks",
            "delta:chunk 1. ",
            "delta:chunk 2. ",
            "delta:chunk 3. ",
            "text:all chunks sent"
        ]
    );
    assert!(remote_task.flatten().is_some_and(|id| !id.is_empty()));
}

#[tokio::test]
async fn input_required_asks_the_user_and_the_task_id_continues_the_remote_task() {
    let Some(agent_process) = py_agent(&[]).await else { return };
    for binding in [Binding::HttpJson, Binding::JsonRpc] {
        let model = Arc::new(ScriptedModel::new([ScriptedTurn::tool_call(
            "py_test_agent",
            json!({"message": "ask for a name"}),
        )]));
        let first = agent(model, tool(&agent_process.base, binding).await);
        let error = first.run("Greet me.").await.unwrap_err();
        let AgentError::Suspended { outcome } = error else { panic!("{error}") };
        assert_eq!(outcome.stop_reason, StopReason::AwaitingInput { tool: "py_test_agent".into() });
        let question = outcome.answer;
        assert!(question.starts_with("What is your name?"), "{question}");
        let task_id = question
            .split("task_id \"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("no task id in {question}"))
            .to_owned();

        // The user's answer, and the model continues the remote task with its id.
        let model = Arc::new(ScriptedModel::new([
            ScriptedTurn::tool_call("py_test_agent", json!({"message": "Ada", "task_id": task_id})),
            ScriptedTurn::text("Greeted."),
        ]));
        let second = agent(model, tool(&agent_process.base, binding).await);
        let events = events(&second, "Ada").await;
        assert_eq!(tool_result(&events), "Hello, Ada!", "{binding:?}");

        // The finished task cannot be continued; an unknown one is not found.
        let tool = tool(&agent_process.base, binding).await;
        let ended = tool
            .call_json(json!({"message": "again", "task_id": task_id}), ToolContext::detached("c"))
            .await
            .unwrap_err();
        assert!(
            matches!(&ended, ToolError::Failed(text) if text.contains("has already ended (completed)")),
            "{ended}"
        );
        let unknown = tool
            .call_json(json!({"message": "x", "task_id": "nope"}), ToolContext::detached("c"))
            .await
            .unwrap_err();
        assert!(
            matches!(&unknown, ToolError::Failed(text) if text.contains("has no task 'nope'")),
            "{unknown}"
        );
    }
}

#[tokio::test]
async fn a_remote_failure_is_a_tool_error_the_model_sees() {
    let Some(agent_process) = py_agent(&[]).await else { return };
    for binding in [Binding::JsonRpc, Binding::HttpJson] {
        let model = Arc::new(ScriptedModel::new([
            ScriptedTurn::tool_call("py_test_agent", json!({"message": "fail please"})),
            ScriptedTurn::text("It failed."),
        ]));
        let agent = agent(model.clone(), tool(&agent_process.base, binding).await);
        let events = events(&agent, "Try it.").await;
        let error = events
            .iter()
            .find_map(|event| match event {
                Event::ToolFailed { error, .. } => Some((**error).clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no tool_failed in {events:#?}"));
        assert_eq!(
            error,
            ToolError::Failed(
                "the remote agent's task failed: the remote agent failed on purpose".into()
            )
        );
        // The failed remote task is journaled with the error; the Python server's card says
        // nowhere to look at it.
        let remote = events.iter().find_map(Event::remote).unwrap();
        assert_eq!(remote.agent, "Py Test Agent");
        assert_eq!((remote.state.as_deref(), remote.view_url.as_deref()), (Some("failed"), None));
        assert!(!remote.task_id.is_empty());
        // The model got the error as the call's result.
        let history = &model.requests()[1].messages;
        assert!(format!("{history:?}").contains("failed on purpose"));

        let rejected = tool(&agent_process.base, binding)
            .await
            .call_json(json!({"message": "reject this"}), ToolContext::detached("c"))
            .await
            .unwrap_err();
        assert!(
            matches!(&rejected, ToolError::Failed(t) if t.starts_with("the remote agent's task rejected")),
            "{rejected}"
        );
    }
}

async fn wait_for_state(client: &A2aClient, task_id: &str, state: TaskState) {
    for _ in 0..100 {
        if client.get_task(task_id, None).await.unwrap().status.state == state {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the remote task {task_id} never reached {state:?}");
}

/// The remote task id of the first nested event.
async fn remote_task_of(events: &mut agentloop::EventStream) -> String {
    while let Some(event) = events.next().await {
        if let Event::Nested { run_id: Some(task_id), .. } = event {
            return task_id;
        }
    }
    panic!("the run ended before the remote task started");
}

#[tokio::test]
async fn cancelling_the_run_cancels_the_remote_task() {
    let Some(agent_process) = py_agent(&[]).await else { return };
    for binding in [Binding::JsonRpc, Binding::HttpJson] {
        let tool = tool(&agent_process.base, binding).await;
        let client = tool.client().clone();
        let model = Arc::new(ScriptedModel::new([ScriptedTurn::tool_call(
            "py_test_agent",
            json!({"message": "slow job"}),
        )]));
        let agent = agent(model, tool);
        let (handle, mut events) = agent.start("Do the slow job.");
        let task_id = remote_task_of(&mut events).await;
        handle.cancel("the user stopped it");
        let rest: Vec<Event> = events.collect().await;
        assert!(matches!(rest.last(), Some(Event::RunCancelled { .. })), "{rest:#?}");
        wait_for_state(&client, &task_id, TaskState::Canceled).await;
    }
}

#[tokio::test]
async fn a_tool_timeout_cancels_the_remote_task_too() {
    let Some(agent_process) = py_agent(&[]).await else { return };
    let tool =
        tool(&agent_process.base, Binding::JsonRpc).await.with_timeout(Duration::from_secs(2));
    let client = tool.client().clone();
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("py_test_agent", json!({"message": "slow job"})),
        ScriptedTurn::text("It took too long."),
    ]));
    let agent = agent(model, tool);
    let (_handle, mut events) = agent.start("Do the slow job.");
    let task_id = remote_task_of(&mut events).await;
    let rest: Vec<Event> = events.collect().await;
    assert!(rest.iter().any(|e| matches!(e, Event::ToolTimedOut { .. })), "{rest:#?}");
    wait_for_state(&client, &task_id, TaskState::Canceled).await;
}

#[tokio::test]
async fn an_agent_that_does_not_stream_is_called_with_blocking_sends() {
    let Some(agent_process) = py_agent(&["--no-streaming"]).await else { return };
    for binding in [Binding::JsonRpc, Binding::HttpJson] {
        let tool = tool(&agent_process.base, binding).await;
        assert_eq!(tool.client().card().capabilities.streaming, Some(false));
        let call = |args| tool.call_json(args, ToolContext::detached("c"));
        let echo = call(json!({"message": "hi there"})).await.unwrap();
        assert_eq!(echo, ToolOutput::Value(json!("echo: hi there")), "{binding:?}");
        let reply = call(json!({"message": "message me"})).await.unwrap();
        assert_eq!(reply, ToolOutput::Value(json!("a message reply to: message me")));

        let ask = call(json!({"message": "ask"})).await.unwrap();
        let ToolOutput::AskUser(question) = ask else { panic!("{ask:?}") };
        let task_id = question.split("task_id \"").nth(1).unwrap().split('"').next().unwrap();
        let answer = call(json!({"message": "Grace", "task_id": task_id})).await.unwrap();
        assert_eq!(answer, ToolOutput::Value(json!("Hello, Grace!")), "{binding:?}");

        let failed = call(json!({"message": "fail"})).await.unwrap_err();
        assert!(
            matches!(&failed, ToolError::Failed(t) if t.contains("failed on purpose")),
            "{failed}"
        );
    }
}
