//! The A2A server with its tasks in Redis (`AGENTLOOP_REDIS_URL`; skipped without it): send,
//! stream, an input-required round trip, cancel and list, then every key of the test's prefix
//! is deleted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::store::redis::{RedisOptions, RedisStore};
use agentloop::store::SessionStore;
use agentloop_server::ServerConfig;
use common::{message, state_of};
use serde_json::json;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_live_in_redis() {
    let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") else {
        eprintln!("skipped: AGENTLOOP_REDIS_URL is not set");
        return;
    };
    let prefix = format!("agentloop-test:{}:", uuid::Uuid::new_v4().simple());
    let store = Arc::new(
        RedisStore::connect_with(&url, RedisOptions::default().prefix(prefix.clone()))
            .await
            .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let server =
        common::start_on(store.clone(), store.clone(), None, ServerConfig::default(), dir).await;

    let task = server.send("hello redis", None).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    // The context's conversation is a session in the agent's namespace, apart from any
    // other agent's (or a CLI chat's) session of the same name.
    let context = task["contextId"].as_str().unwrap();
    let sessions: &dyn SessionStore = store.as_ref();
    assert!(sessions.get_session(&format!("a2a/echo/{context}")).await.unwrap().is_some());
    assert!(sessions.get_session(context).await.unwrap().is_none());
    let events = server
        .rpc_stream("SendStreamingMessage", json!({"message": message("stream 3", None)}), None)
        .await;
    assert_eq!(state_of(&events.last().unwrap().1["result"]), Some("TASK_STATE_COMPLETED"));
    let asked = server.send("ask Which city?", None).await;
    assert_eq!(asked["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let answered = server.send("Lyon", asked["id"].as_str()).await;
    assert_eq!(answered["artifacts"][0]["parts"][0]["text"], "Thank you. You answered: Lyon");
    let params =
        json!({"message": message("slow 30", None), "configuration": {"returnImmediately": true}});
    let slow = server.result("SendMessage", params).await["task"]["id"].clone();
    let cancelled = server.result("CancelTask", json!({"id": slow})).await;
    assert_eq!(cancelled["status"]["state"], "TASK_STATE_CANCELED");
    let listed = server.result("ListTasks", json!({})).await;
    assert_eq!(listed["totalSize"], 4);
    drop(server);

    // Leave no key behind.
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> =
        redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(&mut conn).await.unwrap();
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL").arg(&keys).query_async(&mut conn).await.unwrap();
    }
}
