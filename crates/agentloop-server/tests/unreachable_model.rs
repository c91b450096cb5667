//! An agent whose model cannot be reached: its A2A task fails with the cause as its message,
//! within the run's small budget for an unreachable server, and no canned text is an answer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::prelude::*;
use agentloop::provider::openai::OpenAi;
use agentloop::provider::RetryPolicy;
use agentloop::store::sqlite::SqliteStore;
use agentloop_server::{ServedAgent, Server, ServerConfig};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_task_whose_model_cannot_be_reached_fails_with_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("runs.db")).unwrap());
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let provider = OpenAi::compatible_at(format!("http://{closed}/v1"), None, "m").unwrap();
    // Short delays so the test is quick; the budget is the default one (3 requests).
    let policy = RetryPolicy::new().without_jitter().with_base(Duration::from_millis(20));
    let agent = Agent::builder(provider)
        .name("remote")
        .retry_policy(Some(policy))
        .store(store.clone())
        .session_store(store)
        .build()
        .unwrap();
    let served = ServedAgent::new(agent, "An agent whose model is down.").unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let root = format!("http://{}", listener.local_addr().unwrap());
    let config = ServerConfig { public_url: root.clone(), ..ServerConfig::default() };
    let server = Server::new(vec![served], config).unwrap();
    tokio::spawn(server.serve(listener, std::future::pending::<()>()));

    let message = json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                      "params": {"message": message}});
    let started = Instant::now();
    let response: Value = agentloop::tls::http_client_builder()
        .unwrap()
        .build()
        .unwrap()
        .post(format!("{root}/remote"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    let task = &response["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{response}");
    let text = task["status"]["message"]["parts"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("could not be reached"), "{text}");
    assert!(text.contains("Connection refused"), "the cause: {text}");
    assert!(text.contains("3 requests"), "{text}");
    let artifacts = task["artifacts"].as_array().map_or(0, Vec::len);
    assert_eq!(artifacts, 0, "no answer artifact: {task}");
}
