//! `A2aClient` and `A2aAgentTool` against our own server (`agentloop-server`, the echo
//! agent), in process on a loopback port, over both bindings.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::store::MemoryStore;
use agentloop::tool::{DynTool, ToolError};
use agentloop_a2a::a2a::{
    ListTasksRequest, Message, Part, PartContent, Role, SendMessageRequest, SendMessageResponse,
    StreamResponse, Task, TaskState,
};
use agentloop_a2a::{A2aAgentTool, A2aClient, Binding, TaskCollector, TaskOutcome};
use agentloop_server::{echo, Server, ServerConfig};
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

const BOTH: [Binding; 2] = [Binding::JsonRpc, Binding::HttpJson];

/// The echo agent served on a loopback port until dropped.
struct EchoServer {
    /// The agent's base URL (`http://127.0.0.1:PORT/echo`).
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn echo_server() -> EchoServer {
    let store = Arc::new(MemoryStore::new());
    let served = echo::served_echo(store.clone(), store).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let root = format!("http://{}", listener.local_addr().unwrap());
    let config = ServerConfig { public_url: root.clone(), ..ServerConfig::default() };
    let server = Server::new(vec![served], config).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async move {
        let _ = stopped.await;
    }));
    EchoServer { url: format!("{root}/echo"), stop: Some(stop) }
}

async fn client(base: &str, binding: Binding) -> A2aClient {
    let client = A2aClient::builder().prefer([binding]).resolve(base).await.unwrap();
    assert_eq!(client.binding(), binding);
    client
}

fn request(text: &str) -> SendMessageRequest {
    SendMessageRequest {
        message: Message::new(Role::User, vec![Part::text(text)]),
        configuration: None,
        metadata: None,
        tenant: None,
    }
}

fn follow_up(parts: Vec<Part>, task: &Task) -> SendMessageRequest {
    let mut message = Message::new(Role::User, parts);
    message.task_id = Some(task.id.clone());
    message.context_id = Some(task.context_id.clone());
    SendMessageRequest { message, configuration: None, metadata: None, tenant: None }
}

async fn send_task(client: &A2aClient, request: &SendMessageRequest) -> Task {
    match client.send_message(request).await.unwrap() {
        SendMessageResponse::Task(task) => task,
        other => panic!("expected a task, got {other:?}"),
    }
}

fn outcome(task: &Task) -> TaskOutcome {
    let mut collector = TaskCollector::default();
    collector.apply_task(task);
    collector.outcome()
}

/// A stream update in short: `task:STATE`, `status:STATE[:text]`, `chunk[+][!]:text`.
fn describe(update: &StreamResponse) -> String {
    match update {
        StreamResponse::Task(task) => format!("task:{:?}", task.status.state),
        StreamResponse::StatusUpdate(update) => {
            let text = update
                .status
                .message
                .as_ref()
                .map(|m| m.parts.iter().filter_map(|p| p.as_text()).collect::<String>());
            match text {
                Some(text) => format!("status:{:?}:{text}", update.status.state),
                None => format!("status:{:?}", update.status.state),
            }
        }
        StreamResponse::ArtifactUpdate(update) => format!(
            "chunk{}{}:{}",
            if update.append == Some(true) { "+" } else { "" },
            if update.last_chunk == Some(true) { "!" } else { "" },
            update.artifact.parts.iter().filter_map(|p| p.as_text()).collect::<String>()
        ),
        StreamResponse::Message(message) => format!("message:{message:?}"),
    }
}

fn list_all() -> ListTasksRequest {
    ListTasksRequest {
        context_id: None,
        status: None,
        page_size: None,
        page_token: None,
        history_length: None,
        status_timestamp_after: None,
        include_artifacts: None,
        tenant: None,
    }
}

async fn stream(client: &A2aClient, request: &SendMessageRequest) -> Vec<StreamResponse> {
    client
        .send_streaming_message(request)
        .await
        .unwrap()
        .map(|event| event.unwrap())
        .collect()
        .await
}

#[tokio::test]
async fn the_card_is_resolved_on_both_bindings() {
    let server = echo_server().await;
    for binding in BOTH {
        let client = client(&server.url, binding).await;
        assert_eq!(client.url().as_str(), server.url);
        let card = client.card();
        assert_eq!(card.name, "echo");
        assert!(card.description.contains("deterministic test agent"), "{}", card.description);
        assert_eq!(card.capabilities.streaming, Some(true));
        assert_eq!(card.skills.len(), 1);
        assert!(card.skills[0].tags.iter().any(|t| t == "ask_user"), "{:?}", card.skills);
    }
    // The card URL itself resolves too; JSON-RPC is preferred by default.
    let card_url = format!("{}/.well-known/agent-card.json", server.url);
    let client = A2aClient::resolve(&card_url).await.unwrap();
    assert_eq!(client.binding(), Binding::JsonRpc);
}

#[tokio::test]
async fn a_blocking_send_returns_the_completed_task_and_get_and_list_find_it() {
    let server = echo_server().await;
    for binding in BOTH {
        let client = client(&server.url, binding).await;
        let task = send_task(&client, &request("hello there, echo agent")).await;
        assert_eq!(task.status.state, TaskState::Completed, "{binding:?}");
        assert_eq!(
            outcome(&task),
            TaskOutcome::Completed {
                task_id: Some(task.id.clone()),
                text: "hello there, echo agent".into()
            }
        );

        // GetTask: the whole history (user, agent), or the last message only, or none.
        let full = client.get_task(&task.id, None).await.unwrap();
        let history = full.history.clone().unwrap();
        assert_eq!(history.len(), 2, "{binding:?}: {history:?}");
        assert_eq!((history[0].role.clone(), history[1].role.clone()), (Role::User, Role::Agent));
        let last = client.get_task(&task.id, Some(1)).await.unwrap();
        assert_eq!(last.history.unwrap(), history[1..].to_vec(), "{binding:?}");
        let none = client.get_task(&task.id, Some(0)).await.unwrap();
        assert!(none.history.is_none_or(|h| h.is_empty()), "{binding:?}");
        assert_eq!(none.status.state, TaskState::Completed);

        // ListTasks: the task is there, in its context.
        let list = client
            .list_tasks(&ListTasksRequest {
                context_id: Some(task.context_id.clone()),
                ..list_all()
            })
            .await
            .unwrap();
        let ids: Vec<&str> = list.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, [task.id.as_str()], "{binding:?}");
        let all = client.list_tasks(&list_all()).await.unwrap();
        assert!(all.tasks.iter().any(|t| t.id == task.id), "{binding:?}");
    }
}

#[tokio::test]
async fn a_stream_sends_the_task_then_working_then_chunks_then_completed() {
    let server = echo_server().await;
    for binding in BOTH {
        let client = client(&server.url, binding).await;
        let events = stream(&client, &request("stream 3")).await;
        let described: Vec<String> = events.iter().map(describe).collect();
        assert_eq!(
            described,
            [
                "task:Submitted",
                "status:Working",
                "chunk:chunk 1 ",
                "chunk+:chunk 2 ",
                "chunk+:chunk 3",
                "chunk!:chunk 1 chunk 2 chunk 3",
                "status:Completed",
            ],
            "{binding:?}"
        );
        // One task throughout, and the collector's answer is the whole text once.
        let mut collector = TaskCollector::default();
        for event in &events {
            collector.apply(event);
        }
        let TaskOutcome::Completed { task_id: Some(id), text } = collector.outcome() else {
            panic!("{:?}", collector.outcome())
        };
        assert_eq!(text, "chunk 1 chunk 2 chunk 3");
        assert_eq!(client.get_task(&id, Some(0)).await.unwrap().status.state, TaskState::Completed);

        // A tool call shows as working status messages before the answer.
        let events = stream(&client, &request("calc 6 * 7")).await;
        let described: Vec<String> = events.iter().map(describe).collect();
        assert!(
            described.contains(&"status:Working:Calling calculator".to_owned()),
            "{described:#?}"
        );
        assert!(
            described.contains(&"status:Working:calculator finished".to_owned()),
            "{described:#?}"
        );
        assert_eq!(described.last().map(String::as_str), Some("status:Completed"));
    }
}

#[tokio::test]
async fn a_slow_task_is_cancelled() {
    let server = echo_server().await;
    for binding in BOTH {
        let client = client(&server.url, binding).await;
        let mut events = client.send_streaming_message(&request("slow 30")).await.unwrap();
        let Some(Ok(StreamResponse::Task(task))) = events.next().await else {
            panic!("no task first")
        };
        let cancelled = client.cancel_task(&task.id).await.unwrap();
        assert_eq!(cancelled.id, task.id);
        // The stream ends with the cancellation, long before 30 s.
        let rest: Vec<String> = tokio::time::timeout(
            Duration::from_secs(10),
            events.map(|e| describe(&e.unwrap())).collect::<Vec<_>>(),
        )
        .await
        .unwrap();
        assert!(
            rest.last().is_some_and(|last| last.starts_with("status:Canceled")),
            "{binding:?}: {rest:#?}"
        );
        let got = client.get_task(&task.id, Some(0)).await.unwrap();
        assert_eq!(got.status.state, TaskState::Canceled, "{binding:?}");
        // A finished task cannot be cancelled again.
        let again = client.cancel_task(&task.id).await.unwrap_err();
        assert_eq!(
            again.code(),
            Some(agentloop_a2a::a2a::error_code::TASK_NOT_CANCELABLE),
            "{again}"
        );
    }
}

#[tokio::test]
async fn input_required_then_the_answer_on_the_same_task_completes_it() {
    let server = echo_server().await;
    for binding in BOTH {
        let client = client(&server.url, binding).await;
        // Blocking: the task comes back waiting, the question as its status message.
        let task = send_task(&client, &request("ask What is your name?")).await;
        assert_eq!(task.status.state, TaskState::InputRequired, "{binding:?}");
        assert_eq!(
            outcome(&task),
            TaskOutcome::InputRequired {
                task_id: task.id.clone(),
                question: "What is your name?".into()
            }
        );
        let done = send_task(&client, &follow_up(vec![Part::text("Ada")], &task)).await;
        assert_eq!(done.id, task.id);
        assert_eq!(done.status.state, TaskState::Completed, "{binding:?}");
        let TaskOutcome::Completed { text, .. } = outcome(&done) else { panic!("{done:?}") };
        assert_eq!(text, "Thank you. You answered: Ada");

        // Streaming: the stream ends at input-required; the answer streams the rest.
        let events = stream(&client, &request("ask Favourite colour?")).await;
        let last = events.last().map(describe).unwrap();
        assert_eq!(last, "status:InputRequired:Favourite colour?", "{binding:?}");
        let StreamResponse::Task(task) = &events[0] else { panic!("{events:?}") };
        let events = stream(&client, &follow_up(vec![Part::text("green")], task)).await;
        let described: Vec<String> = events.iter().map(describe).collect();
        assert_eq!(
            described.last().map(String::as_str),
            Some("status:Completed"),
            "{described:#?}"
        );
        assert!(
            described.contains(&"chunk!:Thank you. You answered: green".to_owned()),
            "{described:#?}"
        );
    }
}

#[tokio::test]
async fn an_approval_is_asked_for_and_a_data_part_approves_it() {
    let server = echo_server().await;
    for binding in BOTH {
        let client = client(&server.url, binding).await;
        let task = send_task(&client, &request("approve")).await;
        assert_eq!(task.status.state, TaskState::InputRequired, "{binding:?}");
        let message = task.status.message.clone().unwrap();
        let calls = message
            .parts
            .iter()
            .find_map(|p| match &p.content {
                PartContent::Data(data) => data.get("approvalRequired").cloned(),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no approvalRequired data part: {message:?}"));
        assert_eq!(calls[0]["tool"], "guarded_action", "{calls}");

        let decision = follow_up(vec![Part::data(json!({"decision": "approve"}))], &task);
        let done = send_task(&client, &decision).await;
        assert_eq!(done.status.state, TaskState::Completed, "{binding:?}");
        let TaskOutcome::Completed { text, .. } = outcome(&done) else { panic!("{done:?}") };
        assert_eq!(text, "Guarded action: the guarded action ran");
    }
}

#[tokio::test]
async fn a_failing_task_fails_and_an_unknown_task_is_not_found() {
    let server = echo_server().await;
    for binding in BOTH {
        let client = client(&server.url, binding).await;
        let task = send_task(&client, &request("fail")).await;
        assert_eq!(task.status.state, TaskState::Failed, "{binding:?}");
        let TaskOutcome::Ended { state, text, .. } = outcome(&task) else { panic!("{task:?}") };
        assert_eq!(state, TaskState::Failed);
        assert!(text.contains("the echo agent was asked to fail"), "{text}");

        let events = stream(&client, &request("fail")).await;
        let last = events.last().map(describe).unwrap();
        assert!(last.starts_with("status:Failed:"), "{binding:?}: {last}");

        for error in [
            client.get_task("no-such-task", None).await.unwrap_err(),
            client.cancel_task("no-such-task").await.unwrap_err(),
        ] {
            assert!(error.is_task_not_found(), "{binding:?}: {error}");
        }
        let subscribe = match client.subscribe_to_task("no-such-task").await {
            Ok(mut events) => events.next().await.unwrap().unwrap_err(),
            Err(error) => error,
        };
        assert!(subscribe.is_task_not_found(), "{binding:?}: {subscribe}");
    }
}

fn agent(model: Arc<ScriptedModel>, tool: A2aAgentTool) -> Agent {
    Agent::builder(model).dyn_tool(Arc::new(tool)).build().unwrap()
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
async fn the_server_and_the_client_name_the_same_runs_ui_extension() {
    assert_eq!(agentloop_server::card::RUNS_UI_EXTENSION, agentloop_a2a::RUNS_UI_EXTENSION);
    let server = echo_server().await;
    let client = client(&server.url, Binding::JsonRpc).await;
    let view = agentloop_a2a::task_view_url(client.card(), "run-1");
    let root = server.url.trim_end_matches("/echo");
    assert_eq!(view, Some(format!("{root}/ui/#/runs/run-1")));
}

#[tokio::test]
async fn the_echo_agent_as_a_tool_streams_nested_events_into_the_run() {
    let server = echo_server().await;
    for binding in BOTH {
        let tool = A2aAgentTool::new(client(&server.url, binding).await);
        assert_eq!(tool.spec().name, "echo");
        let model = Arc::new(ScriptedModel::new([
            ScriptedTurn::tool_call("echo", json!({"message": "stream 3"})).with_call_id("call_1"),
            ScriptedTurn::text("It streamed."),
        ]));
        let agent = agent(model.clone(), tool);
        let events: Vec<Event> = agent.run_stream("Stream three chunks.").collect().await;
        assert_eq!(tool_result(&events), "chunk 1 chunk 2 chunk 3", "{binding:?}");
        let Some(Event::RunFinished { outcome }) = events.last() else { panic!("{events:#?}") };
        assert_eq!(outcome.answer, "It streamed.");

        let nested: Vec<String> = events
            .iter()
            .filter_map(|event| match event {
                Event::Nested { call_id, run_id, event } => {
                    assert_eq!(call_id, "call_1");
                    assert!(run_id.as_ref().is_some_and(|id| !id.is_empty()));
                    Some(match event.as_ref() {
                        Event::TextDelta { delta } => format!("delta:{delta}"),
                        Event::Text { text } => format!("text:{text}"),
                        other => panic!("unexpected nested {other:?}"),
                    })
                }
                _ => None,
            })
            .collect();
        // The last chunk repeats the whole answer: it adds nothing to what was streamed.
        assert_eq!(nested, ["delta:chunk 1 ", "delta:chunk 2 ", "delta:chunk 3"], "{binding:?}");
        // The model saw the answer as the call's result.
        assert!(format!("{:?}", model.requests()[1].messages).contains("chunk 1 chunk 2 chunk 3"));

        // The remote task is journaled with the call's result, linked to the server's runs UI
        // (its card's runs-UI extension; a served task is a run of the same id).
        let remote = events.iter().find_map(Event::remote).expect("the remote task");
        let nested_run = events.iter().find_map(|event| match event {
            Event::Nested { run_id, .. } => run_id.clone(),
            _ => None,
        });
        assert_eq!(Some(remote.task_id.as_str()), nested_run.as_deref());
        assert_eq!((remote.agent.as_str(), remote.state.as_deref()), ("echo", Some("completed")));
        assert!(remote.url.starts_with(&server.url), "{binding:?}: {}", remote.url);
        assert!(remote.context_id.is_some());
        let root = server.url.trim_end_matches("/echo");
        assert_eq!(
            remote.view_url.as_deref(),
            Some(format!("{root}/ui/#/runs/{}", remote.task_id).as_str())
        );
    }
}

#[tokio::test]
async fn the_echo_agents_question_suspends_the_run_and_the_answer_continues_its_task() {
    let server = echo_server().await;
    for binding in BOTH {
        let model = Arc::new(ScriptedModel::new([ScriptedTurn::tool_call(
            "echo",
            json!({"message": "ask What is your name?"}),
        )]));
        let first = agent(model, A2aAgentTool::new(client(&server.url, binding).await));
        let error = first.run("Ask the echo agent.").await.unwrap_err();
        let AgentError::Suspended { outcome } = error else { panic!("{error}") };
        assert_eq!(outcome.stop_reason, StopReason::AwaitingInput { tool: "echo".into() });
        let question = outcome.answer;
        assert!(question.starts_with("What is your name?\n"), "{question}");
        let task_id = question
            .split("task_id \"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("no task id in {question}"))
            .to_owned();

        let model = Arc::new(ScriptedModel::new([
            ScriptedTurn::tool_call("echo", json!({"message": "Grace", "task_id": task_id})),
            ScriptedTurn::text("Answered."),
        ]));
        let tool = A2aAgentTool::new(client(&server.url, binding).await);
        let remote = tool.client().clone();
        let second = agent(model, tool);
        let events: Vec<Event> = second.run_stream("Grace").collect().await;
        assert_eq!(tool_result(&events), "Thank you. You answered: Grace", "{binding:?}");
        let task = remote.get_task(&task_id, Some(0)).await.unwrap();
        assert_eq!(task.status.state, TaskState::Completed);

        // A failing remote task is a tool error the model sees.
        let failing = A2aAgentTool::new(remote.clone());
        let error = failing
            .call_json(json!({"message": "fail"}), ToolContext::detached("c"))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, ToolError::Failed(t) if t.starts_with("the remote agent's task failed") && t.contains("asked to fail")),
            "{error}"
        );
    }
}
