//! The A2A server with a worker pool (`ServerConfig::queue`; `AGENTLOOP_REDIS_URL`, skipped
//! without it): the server queues its tasks and a worker executes them, on one Redis store
//! under a prefix of the test's own (deleted at its end). Send, stream, an answer, an
//! approval, a second turn in the same context, cancel — each as the in-process server does
//! it — and a full queue refused with a retry hint (JSON-RPC) or 503 and `Retry-After` (REST).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::store::redis::{RedisOptions, RedisStore};
use agentloop::store::SessionStore;
use agentloop::worker::{Queue, QueueOptions, Worker, WorkerOptions};
use agentloop_server::{echo, ServerConfig};
use common::{message, state_of};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Deletes every key of the test's prefix when it ends (passed or not).
struct Keys {
    url: String,
    prefix: String,
}

impl Drop for Keys {
    fn drop(&mut self) {
        let Ok(mut conn) = redis::Client::open(self.url.as_str()).and_then(|c| c.get_connection())
        else {
            return;
        };
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}*", self.prefix))
            .query(&mut conn)
            .unwrap_or_default();
        if !keys.is_empty() {
            let _: Result<i64, _> = redis::cmd("DEL").arg(&keys).query(&mut conn);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_pool_executes_the_servers_tasks() {
    let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") else {
        eprintln!("skipped: AGENTLOOP_REDIS_URL is not set");
        return;
    };
    let keys = Keys {
        url: url.clone(),
        prefix: format!("agentloop-test:pool-{}:", uuid::Uuid::new_v4().simple()),
    };
    let prefix = keys.prefix.clone();
    let store = Arc::new(
        RedisStore::connect_with(&url, RedisOptions::default().prefix(prefix.clone()))
            .await
            .unwrap(),
    );
    let queue =
        Queue::connect_with(&url, QueueOptions::default().prefix(prefix.clone())).await.unwrap();
    let agent = echo::echo_agent(store.clone(), store.clone()).unwrap();
    let options = WorkerOptions::default().block(Duration::from_millis(200));
    let worker =
        Worker::builder(queue.clone()).agent("echo", agent).options(options).build().unwrap();
    let stop = CancellationToken::new();
    let working = tokio::spawn({
        let stop = stop.clone();
        async move { worker.run(stop).await }
    });
    let config = ServerConfig { queue: Some(queue.clone()), ..ServerConfig::default() };
    let dir = tempfile::tempdir().unwrap();
    let server = common::start_on(store.clone(), store.clone(), None, config, dir).await;

    // A blocking send waits for the worker's answer.
    let task = server.send("hello pool", None).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "hello pool");
    let context = task["contextId"].as_str().unwrap().to_owned();

    // A stream: the task, then the journaled updates in order, ending completed.
    let events = server
        .rpc_stream("SendStreamingMessage", json!({"message": message("calc 6 * 7", None)}), None)
        .await;
    assert!(events[0].1["result"].get("task").is_some(), "{events:?}");
    let ids: Vec<u64> = events.iter().filter_map(|(id, _)| id.as_deref()?.parse().ok()).collect();
    // One journal entry may carry two updates (the answer's artifact and the final status).
    assert!(ids.windows(2).all(|w| w[0] <= w[1]), "ids not in order: {ids:?}");
    let last = &events.last().unwrap().1["result"];
    assert_eq!(state_of(last), Some("TASK_STATE_COMPLETED"), "{events:?}");

    // A second turn in the first task's context: the worker ended the first turn with its
    // messages, so the conversation holds both.
    let mut again = message("hello again", None);
    again["contextId"] = json!(context);
    let second = server.result("SendMessage", json!({"message": again})).await["task"].clone();
    assert_eq!(second["status"]["state"], "TASK_STATE_COMPLETED", "{second}");
    assert_eq!(second["contextId"], context.as_str());
    let sessions: &dyn SessionStore = store.as_ref();
    let history = sessions.session_messages(&format!("a2a/echo/{context}")).await.unwrap();
    assert_eq!(history.len(), 4, "two turns of a user message and an answer: {history:?}");

    // An answer: the service records it and queues the continuation.
    let asked = server.send("ask Which city?", None).await;
    assert_eq!(asked["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{asked}");
    let answered = server.send("Lyon", asked["id"].as_str()).await;
    assert_eq!(answered["status"]["state"], "TASK_STATE_COMPLETED", "{answered}");
    assert_eq!(answered["artifacts"][0]["parts"][0]["text"], "Thank you. You answered: Lyon");

    // An approval.
    let task = server.send("approve", None).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{task}");
    let mut decision = message("", task["id"].as_str());
    decision["parts"] = json!([{"data": {"decision": "approve"}}]);
    let done = server.result("SendMessage", json!({"message": decision})).await["task"].clone();
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(done["artifacts"][0]["parts"][0]["text"], "Guarded action: the guarded action ran");

    // A cancel reaches the worker that holds the run.
    let params =
        json!({"message": message("slow 30", None), "configuration": {"returnImmediately": true}});
    let slow = server.result("SendMessage", params).await["task"]["id"].clone();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cancelled = server.result("CancelTask", json!({"id": slow})).await;
    assert_eq!(cancelled["status"]["state"], "TASK_STATE_CANCELED", "{cancelled}");

    // The pool stops; a queue bounded at one job refuses the second task.
    stop.cancel();
    let report = working.await.unwrap().unwrap();
    assert!(report.ended >= 6, "{report:?}");
    drop(server);
    let bounded = Queue::connect_with(
        &url,
        QueueOptions::default().prefix(prefix.clone()).max_queued(Some(1)),
    )
    .await
    .unwrap();
    let config = ServerConfig { queue: Some(bounded), ..ServerConfig::default() };
    let dir = tempfile::tempdir().unwrap();
    let server = common::start_on(store.clone(), store.clone(), None, config, dir).await;
    let params =
        json!({"message": message("first", None), "configuration": {"returnImmediately": true}});
    let first = server.result("SendMessage", params.clone()).await["task"].clone();
    assert_eq!(first["status"]["state"], "TASK_STATE_SUBMITTED", "{first}");
    let refused = server.rpc("SendMessage", params).await;
    let error = &refused["error"];
    assert_eq!(error["code"], agentloop_server::tasks::QUEUE_FULL, "{refused}");
    assert!(error["message"].as_str().unwrap().contains("retry in 5 s"), "{refused}");
    let retry = error["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["@type"] == "type.googleapis.com/google.rpc.RetryInfo")
        .unwrap_or_else(|| panic!("no RetryInfo: {refused}"));
    assert_eq!(retry["retryDelay"], "5s");
    let rest = server
        .client
        .post(format!("{}/message:send", server.url))
        .json(&json!({"message": message("third", None)}))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 503);
    assert_eq!(rest.headers()["retry-after"], "5");
    // Refused tasks leave nothing behind: one task (the first) is listed.
    let listed = server.result("ListTasks", json!({"status": "TASK_STATE_SUBMITTED"})).await;
    assert_eq!(listed["totalSize"], 1, "{listed}");
}
