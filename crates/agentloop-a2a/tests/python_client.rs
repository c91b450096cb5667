//! `A2aClient` against the official Python a2a-sdk server (scripts/a2a/py_agent.py), over
//! both bindings.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop_a2a::a2a::{
    self, ListTasksRequest, Message, Part, Role, SendMessageRequest, SendMessageResponse,
    StreamResponse, Task, TaskState,
};
use agentloop_a2a::{A2aClient, A2aClientError, Binding, TaskCollector, TaskOutcome};
use common::py_agent;
use futures::StreamExt;
use std::time::Duration;

const BOTH: [Binding; 2] = [Binding::JsonRpc, Binding::HttpJson];

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

fn follow_up(text: &str, task: &Task) -> SendMessageRequest {
    let mut request = request(text);
    request.message.task_id = Some(task.id.clone());
    request.message.context_id = Some(task.context_id.clone());
    request
}

fn artifact_text(task: &Task) -> String {
    let mut collector = TaskCollector::default();
    collector.apply_task(task);
    match collector.outcome() {
        TaskOutcome::Completed { text, .. } => text,
        other => panic!("not completed: {other:?}"),
    }
}

async fn send_task(client: &A2aClient, text: &str) -> Task {
    match client.send_message(&request(text)).await.unwrap() {
        SendMessageResponse::Task(task) => task,
        other => panic!("expected a task, got {other:?}"),
    }
}

#[tokio::test]
async fn the_card_is_resolved_and_json_rpc_preferred() {
    let Some(agent) = py_agent(&[]).await else { return };
    let client = A2aClient::resolve(&agent.base).await.unwrap();
    assert_eq!(client.binding(), Binding::JsonRpc);
    assert_eq!(client.url().as_str(), format!("{}/jsonrpc", agent.base));
    let card = client.card();
    assert_eq!(card.name, "Py Test Agent");
    assert_eq!(card.capabilities.streaming, Some(true));
    assert_eq!(card.skills.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["echo", "greet"]);

    // A card that lists HTTP+JSON only is served over HTTP+JSON.
    let Some(rest_only) = py_agent(&["HTTP+JSON"]).await else { return };
    let client = A2aClient::resolve(&rest_only.base).await.unwrap();
    assert_eq!(client.binding(), Binding::HttpJson);
    assert_eq!(client.url().as_str(), format!("{}/rest", rest_only.base));

    // The card URL itself works as well as the base URL.
    let card_url = format!("{}/.well-known/agent-card.json", agent.base);
    assert_eq!(A2aClient::resolve(&card_url).await.unwrap().card().name, "Py Test Agent");
    // No agent there: a transport error, not a panic.
    let error = A2aClient::builder()
        .timeout(Duration::from_secs(5))
        .resolve("http://127.0.0.1:9")
        .await
        .unwrap_err();
    assert!(matches!(error, A2aClientError::Transport(_)), "{error}");
}

#[tokio::test]
async fn send_get_and_list_on_both_bindings() {
    let Some(agent) = py_agent(&[]).await else { return };
    for binding in BOTH {
        let client = client(&agent.base, binding).await;
        let task = send_task(&client, "hello there").await;
        assert_eq!(task.status.state, TaskState::Completed, "{binding:?}");
        assert_eq!(artifact_text(&task), "echo: hello there");

        let got = client.get_task(&task.id, Some(10)).await.unwrap();
        assert_eq!((got.id.as_str(), &got.status.state), (task.id.as_str(), &TaskState::Completed));
        let history = got.history.unwrap_or_default();
        assert_eq!(history[0].text(), Some("hello there"), "{binding:?}");

        let listed = client
            .list_tasks(&ListTasksRequest {
                context_id: Some(task.context_id.clone()),
                status: None,
                page_size: Some(10),
                page_token: None,
                history_length: None,
                status_timestamp_after: None,
                include_artifacts: Some(true),
                tenant: None,
            })
            .await
            .unwrap();
        assert_eq!(
            listed.tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            [task.id.as_str()]
        );
        assert_eq!(listed.total_size, 1, "{binding:?}");

        // A message reply, no task.
        let reply = client.send_message(&request("message hi")).await.unwrap();
        let SendMessageResponse::Message(message) = reply else { panic!("{reply:?}") };
        assert_eq!(message.text(), Some("a message reply to: message hi"));
    }
}

#[tokio::test]
async fn streaming_delivers_every_event_in_order() {
    let Some(agent) = py_agent(&[]).await else { return };
    for binding in BOTH {
        let client = client(&agent.base, binding).await;
        let events: Vec<StreamResponse> = client
            .send_streaming_message(&request("stream three"))
            .await
            .unwrap()
            .map(|event| event.unwrap())
            .collect()
            .await;
        let kinds: Vec<&str> = events
            .iter()
            .map(|event| match event {
                StreamResponse::Task(_) => "task",
                StreamResponse::Message(_) => "message",
                StreamResponse::StatusUpdate(_) => "status",
                StreamResponse::ArtifactUpdate(_) => "artifact",
            })
            .collect();
        assert_eq!(
            kinds,
            ["task", "status", "artifact", "artifact", "artifact", "status"],
            "{binding:?}"
        );
        let mut collector = TaskCollector::default();
        events.iter().for_each(|event| collector.apply(event));
        assert_eq!(
            collector.outcome(),
            TaskOutcome::Completed {
                task_id: collector.task_id().map(str::to_owned),
                text: "chunk 1. chunk 2. chunk 3.\nall chunks sent".into()
            }
        );
    }
}

#[tokio::test]
async fn input_required_then_the_follow_up_completes_the_same_task() {
    let Some(agent) = py_agent(&[]).await else { return };
    for binding in BOTH {
        let client = client(&agent.base, binding).await;
        let task = send_task(&client, "ask me").await;
        assert_eq!(task.status.state, TaskState::InputRequired, "{binding:?}");
        let question = task.status.message.as_ref().and_then(Message::text);
        assert_eq!(question, Some("What is your name?"));

        let answer = match client.send_message(&follow_up("Ada", &task)).await.unwrap() {
            SendMessageResponse::Task(answer) => answer,
            other => panic!("{other:?}"),
        };
        assert_eq!(answer.id, task.id);
        assert_eq!(answer.status.state, TaskState::Completed);
        assert_eq!(artifact_text(&answer), "Hello, Ada!");
    }
}

#[tokio::test]
async fn failures_and_remote_errors_are_typed() {
    let Some(agent) = py_agent(&[]).await else { return };
    for binding in BOTH {
        let client = client(&agent.base, binding).await;
        let failed = send_task(&client, "fail now").await;
        assert_eq!(failed.status.state, TaskState::Failed, "{binding:?}");
        let reason = failed.status.message.as_ref().and_then(Message::text);
        assert_eq!(reason, Some("the remote agent failed on purpose"));

        let error = client.get_task("no-such-task", None).await.unwrap_err();
        assert_eq!(error.code(), Some(a2a::error_code::TASK_NOT_FOUND), "{binding:?}: {error}");
        assert!(error.is_task_not_found());
        let error = client.cancel_task("no-such-task").await.unwrap_err();
        assert!(error.is_task_not_found(), "{binding:?}: {error}");

        // A finished task cannot be cancelled.
        let error = client.cancel_task(&failed.id).await.unwrap_err();
        assert_eq!(
            error.code(),
            Some(a2a::error_code::TASK_NOT_CANCELABLE),
            "{binding:?}: {error}"
        );

        // A stream for an unknown task fails with the same code, on open or as its first item.
        let error = match client.subscribe_to_task("no-such-task").await {
            Err(error) => error,
            Ok(mut stream) => stream.next().await.expect("an item").unwrap_err(),
        };
        assert!(error.is_task_not_found(), "{binding:?}: {error}");
    }
}

#[tokio::test]
async fn cancel_and_subscribe_on_a_running_task() {
    let Some(agent) = py_agent(&[]).await else { return };
    for binding in BOTH {
        let client = client(&agent.base, binding).await;
        let mut stream = client.send_streaming_message(&request("slow work")).await.unwrap();
        let first = stream.next().await.unwrap().unwrap();
        let StreamResponse::Task(task) = first else { panic!("{first:?}") };
        // Wait until it works.
        loop {
            let event = stream.next().await.unwrap().unwrap();
            if matches!(&event, StreamResponse::StatusUpdate(u) if u.status.state == TaskState::Working)
            {
                break;
            }
        }
        let mut subscription = client.subscribe_to_task(&task.id).await.unwrap();

        let cancelled = client.cancel_task(&task.id).await.unwrap();
        assert_eq!(cancelled.status.state, TaskState::Canceled, "{binding:?}");
        assert_eq!(
            client.get_task(&task.id, None).await.unwrap().status.state,
            TaskState::Canceled
        );

        // Both the original stream and the subscription see the cancellation, then end.
        for events in [&mut stream, &mut subscription] {
            let mut last_state = None;
            let drained = tokio::time::timeout(Duration::from_secs(20), async {
                while let Some(event) = events.next().await {
                    match event.unwrap() {
                        StreamResponse::StatusUpdate(update) => {
                            last_state = Some(update.status.state)
                        }
                        StreamResponse::Task(task) => last_state = Some(task.status.state),
                        _ => {}
                    }
                }
            })
            .await;
            assert!(drained.is_ok(), "{binding:?}: the stream did not end");
            assert_eq!(last_state, Some(TaskState::Canceled), "{binding:?}");
        }
    }
}

#[tokio::test]
async fn configured_headers_reach_the_agent() {
    let Some(agent) = py_agent(&[]).await else { return };
    for binding in BOTH {
        let client = A2aClient::builder()
            .prefer([binding])
            .bearer_token("secret-token".into())
            .api_key("X-Api-Key", "k-123".into())
            .resolve(&agent.base)
            .await
            .unwrap();
        let task = send_task(&client, "auth check").await;
        assert_eq!(artifact_text(&task), "authorization: yes, api key: yes", "{binding:?}");

        let plain = client_without_headers(&agent.base, binding).await;
        let task = send_task(&plain, "auth check").await;
        assert_eq!(artifact_text(&task), "authorization: no, api key: no", "{binding:?}");
    }
}

async fn client_without_headers(base: &str, binding: Binding) -> A2aClient {
    client(base, binding).await
}

#[tokio::test]
async fn answers_over_the_size_limit_are_refused() {
    let Some(agent) = py_agent(&[]).await else { return };
    for binding in BOTH {
        let client = A2aClient::builder()
            .prefer([binding])
            .max_response_bytes(4096)
            .max_event_bytes(100)
            .resolve(&agent.base)
            .await
            .unwrap();
        let long = "x".repeat(5000);
        let error = client.send_message(&request(&long)).await.unwrap_err();
        assert!(matches!(error, A2aClientError::TooLarge(4096)), "{binding:?}: {error}");
        let mut stream = client.send_streaming_message(&request("stream")).await.unwrap();
        let error = stream.next().await.unwrap().unwrap_err();
        assert!(matches!(error, A2aClientError::TooLarge(100)), "{binding:?}: {error}");
        assert!(stream.next().await.is_none(), "the stream ends after an error");
    }
}
