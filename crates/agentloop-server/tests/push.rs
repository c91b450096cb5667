//! Push notifications over HTTP: the config methods on both bindings, the allowlist, and
//! deliveries to a local webhook (order, headers, retries, resuming after a restart).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::store::sqlite::SqliteStore;
use agentloop_server::push::sqlite::SqlitePushStore;
use agentloop_server::push::{DeliveryOptions, PushAllow};
use agentloop_server::{echo, Server, ServerConfig};
use common::hook::Hook;
use common::{message, start_with};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn loopback() -> PushAllow {
    PushAllow::parse(["127.0.0.1"]).unwrap()
}

fn fast(attempts: usize) -> DeliveryOptions {
    DeliveryOptions {
        timeout: Duration::from_secs(5),
        attempts,
        min_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(50),
        max_poll: Duration::from_millis(200),
        lease_ttl: Duration::from_secs(30),
    }
}

fn push_config(allow: PushAllow) -> ServerConfig {
    ServerConfig { push_allow: allow, push_delivery: fast(5), ..ServerConfig::default() }
}

fn error_code(response: &Value) -> i64 {
    response["error"]["code"].as_i64().unwrap_or_else(|| panic!("not an error: {response}"))
}

#[tokio::test]
async fn push_is_off_by_default() {
    let server = start_with(None, ServerConfig::default()).await;
    let card: Value = server
        .client
        .get(format!("{}/.well-known/agent-card.json", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["capabilities"]["pushNotifications"], json!(false));
    let task = server.send("hello", None).await;
    let id = task["id"].as_str().unwrap();
    let create = server
        .rpc(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": "https://example.com/hook"}),
        )
        .await;
    assert_eq!(error_code(&create), -32003);
    for method in ["GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"] {
        assert_eq!(error_code(&server.rpc(method, json!({"taskId": id, "id": "x"})).await), -32003);
    }
    let list = server.rpc("ListTaskPushNotificationConfigs", json!({"taskId": id})).await;
    assert_eq!(error_code(&list), -32003);
    let rest = server
        .client
        .get(format!("{}/tasks/{id}/pushNotificationConfigs", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 400);
    let body: Value = rest.json().await.unwrap();
    assert!(body.to_string().contains("PUSH_NOTIFICATION_NOT_SUPPORTED"), "{body}");
    let send = server
        .rpc(
            "SendMessage",
            json!({"message": message("hello", None),
                   "configuration": {"taskPushNotificationConfig": {"url": "https://example.com/h"}}}),
        )
        .await;
    assert_eq!(error_code(&send), -32003);
}

#[tokio::test]
async fn configs_are_set_read_listed_and_deleted_on_both_bindings() {
    let hook = Hook::start(|_| 200).await;
    let server = start_with(None, push_config(loopback())).await;
    let card: Value = server
        .client
        .get(format!("{}/.well-known/agent-card.json", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["capabilities"]["pushNotifications"], json!(true));
    let task = server.send("hello", None).await;
    let id = task["id"].as_str().unwrap();

    // JSON-RPC: the id is made.
    let created = server
        .result(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": hook.url, "token": "tok-1"}),
        )
        .await;
    let rpc_id = created["id"].as_str().unwrap().to_owned();
    assert!(!rpc_id.is_empty());
    assert_eq!(created["taskId"], json!(id));
    assert_eq!(created["token"], json!("tok-1"));
    let got =
        server.result("GetTaskPushNotificationConfig", json!({"taskId": id, "id": rpc_id})).await;
    assert_eq!(got, created);

    // HTTP+JSON: the client's id.
    let configs = format!("{}/tasks/{id}/pushNotificationConfigs", server.url);
    let response = server
        .client
        .post(&configs)
        .json(&json!({"id": "rest-1", "url": hook.url,
                      "authentication": {"scheme": "Bearer", "credentials": "c-1"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let rest_created: Value = response.json().await.unwrap();
    assert_eq!(rest_created["id"], json!("rest-1"));
    assert_eq!(rest_created["taskId"], json!(id));
    let one: Value =
        server.client.get(format!("{configs}/rest-1")).send().await.unwrap().json().await.unwrap();
    assert_eq!(one, rest_created);
    let listed: Value = server.client.get(&configs).send().await.unwrap().json().await.unwrap();
    let ids: Vec<&str> =
        listed["configs"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&"rest-1") && ids.contains(&rpc_id.as_str()));
    let rpc_listed = server.result("ListTaskPushNotificationConfigs", json!({"taskId": id})).await;
    assert_eq!(rpc_listed, listed);

    // Delete on both bindings; deleting again is fine.
    let deleted = server.client.delete(format!("{configs}/rest-1")).send().await.unwrap();
    assert_eq!(deleted.status(), 200);
    let deleted = server.client.delete(format!("{configs}/rest-1")).send().await.unwrap();
    assert_eq!(deleted.status(), 200);
    server.result("DeleteTaskPushNotificationConfig", json!({"taskId": id, "id": rpc_id})).await;
    let empty = server.result("ListTaskPushNotificationConfigs", json!({"taskId": id})).await;
    assert!(empty.get("configs").is_none_or(|c| c.as_array().unwrap().is_empty()), "{empty}");
    let gone =
        server.rpc("GetTaskPushNotificationConfig", json!({"taskId": id, "id": rpc_id})).await;
    assert_eq!(error_code(&gone), -32001);
    let gone = server.client.get(format!("{configs}/rest-1")).send().await.unwrap();
    assert_eq!(gone.status(), 404);

    // A task that is not there (or not this agent's).
    let missing = server
        .rpc("CreateTaskPushNotificationConfig", json!({"taskId": "no-such-task", "url": hook.url}))
        .await;
    assert_eq!(error_code(&missing), -32001);
    let missing = server
        .client
        .post(format!("{}/tasks/no-such-task/pushNotificationConfigs", server.url))
        .json(&json!({"url": hook.url}))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    // A body naming another task.
    let mismatch = server.client.post(&configs).json(&json!({"url": hook.url, "taskId": "x"}));
    assert_eq!(mismatch.send().await.unwrap().status(), 400);
}

#[tokio::test]
async fn addresses_the_operator_did_not_allow_are_refused_at_set_time() {
    let server = start_with(None, push_config(PushAllow::public())).await;
    let task = server.send("hello", None).await;
    let id = task["id"].as_str().unwrap();
    for url in [
        "http://127.0.0.1:9/hook",
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:9/",
        "http://localhost:9/hook",
    ] {
        let response =
            server.rpc("CreateTaskPushNotificationConfig", json!({"taskId": id, "url": url})).await;
        assert_eq!(error_code(&response), -32602, "{url}: {response}");
        let message = response["error"]["message"].as_str().unwrap();
        assert!(message.contains("does not allow"), "{url}: {message}");
    }
    let bad_scheme = server
        .rpc(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": "ftp://example.com/hook"}),
        )
        .await;
    assert_eq!(error_code(&bad_scheme), -32602);
    let rest = server
        .client
        .post(format!("{}/tasks/{id}/pushNotificationConfigs", server.url))
        .json(&json!({"url": "http://10.1.2.3/hook", "token": "s3cret"}))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 400);
    let body = rest.text().await.unwrap();
    assert!(body.contains("does not allow") && !body.contains("s3cret"), "{body}");

    // SendMessage with a refused config starts no task.
    let before = server.result("ListTasks", json!({})).await["totalSize"].clone();
    let send = server
        .rpc(
            "SendMessage",
            json!({"message": message("hello", None),
                   "configuration": {"taskPushNotificationConfig": {"url": "http://10.0.0.1/h"}}}),
        )
        .await;
    assert_eq!(error_code(&send), -32602);
    assert_eq!(server.result("ListTasks", json!({})).await["totalSize"], before);
}

fn states(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .map(|u| match common::state_of(u) {
            Some(state) if u.get("task").is_some() => format!("task:{state}"),
            Some(state) => state.to_owned(),
            None if u.get("artifactUpdate").is_some() => "artifact".to_owned(),
            None => format!("?{u}"),
        })
        .collect()
}

#[tokio::test]
async fn a_tasks_updates_are_delivered_in_order_with_the_token_and_credentials() {
    let hook = Hook::start(|_| 200).await;
    let server = start_with(None, push_config(loopback())).await;
    let task = server
        .result(
            "SendMessage",
            json!({"message": message("slow 0.5", None),
                   "configuration": {"returnImmediately": true, "taskPushNotificationConfig": {
                       "url": hook.url, "token": "tok-9",
                       "authentication": {"scheme": "Bearer", "credentials": "cred-9"}}}}),
        )
        .await["task"]
        .clone();
    let id = task["id"].as_str().unwrap();
    let delivered = hook.until_completed().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(hook.delivered().len(), delivered.len(), "nothing after the final status");
    let seen = states(&delivered);
    assert!(seen[0].starts_with("task:"), "{seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some("TASK_STATE_COMPLETED"), "{seen:?}");
    assert_eq!(seen[seen.len() - 2], "artifact", "{seen:?}");
    assert!(
        seen[1..seen.len() - 2].iter().all(|s| s == "TASK_STATE_WORKING"),
        "only working statuses in between: {seen:?}"
    );
    let artifact = &delivered[delivered.len() - 2]["artifactUpdate"];
    assert_eq!(artifact["taskId"], json!(id));
    assert!(artifact["artifact"]["parts"][0]["text"].as_str().unwrap().contains("Done after"));
    for got in hook.got() {
        assert_eq!(got.headers["x-a2a-notification-token"], "tok-9");
        assert_eq!(got.headers["authorization"], "Bearer cred-9");
        assert_eq!(got.headers["content-type"], "application/a2a+json");
    }
    // The config is the task's, as set.
    let listed = server.result("ListTaskPushNotificationConfigs", json!({"taskId": id})).await;
    assert_eq!(listed["configs"][0]["token"], json!("tok-9"));
}

#[tokio::test]
async fn a_webhook_that_fails_twice_gets_the_updates_on_retry() {
    let hook = Hook::start(|n| if n < 2 { 503 } else { 200 }).await;
    let server = start_with(None, push_config(loopback())).await;
    server
        .result(
            "SendMessage",
            json!({"message": message("slow 0.3", None),
                   "configuration": {"taskPushNotificationConfig": {"url": hook.url}}}),
        )
        .await;
    let delivered = hook.until_completed().await;
    let got = hook.got();
    assert_eq!(got[0].status, 503);
    assert_eq!(got[1].status, 503);
    assert_eq!(got[2].status, 200);
    assert_eq!(got[2].body, got[0].body, "the same update, retried");
    assert!(got[0].body.get("task").is_some());
    let seen = states(&delivered);
    assert_eq!(seen.last().map(String::as_str), Some("TASK_STATE_COMPLETED"), "{seen:?}");
    assert_eq!(seen.iter().filter(|s| s.starts_with("task:")).count(), 1, "{seen:?}");
}

/// A server of the echo agent on `dir/runs.db`, configs in the same file.
async fn serve(
    dir: &Path,
    delivery: DeliveryOptions,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let store = Arc::new(SqliteStore::open(dir.join("runs.db")).unwrap());
    let push = Arc::new(SqlitePushStore::open(dir.join("runs.db")).unwrap());
    let served = echo::served_echo(store.clone(), store).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let root = format!("http://{}", listener.local_addr().unwrap());
    let config = ServerConfig {
        public_url: root.clone(),
        push_allow: loopback(),
        push_store: Some(push),
        push_delivery: delivery,
        recovery_interval: Duration::from_millis(200),
        ..ServerConfig::default()
    };
    let server = Server::new(vec![served], config).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async move {
        let _ = stopped.await;
    }));
    (format!("{root}/echo"), stop)
}

#[tokio::test]
async fn delivery_resumes_after_a_restart_from_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    // The first server's webhook takes the first update, then fails until the server stops.
    let hook = Hook::start(|n| if n == 0 { 200 } else { 503 }).await;
    let (url, stop) = serve(dir.path(), fast(10_000)).await;
    let client = agentloop::tls::http_client_builder().unwrap().build().unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": message("slow 0.3", None),
        "configuration": {"taskPushNotificationConfig": {"url": hook.url, "token": "t"}}}});
    let response: Value = client.post(&url).json(&body).send().await.unwrap().json().await.unwrap();
    let task = &response["result"]["task"];
    assert_eq!(task["status"]["state"], json!("TASK_STATE_COMPLETED"), "{response}");
    while hook.got().len() < 4 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = hook.got().len();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(hook.got().len(), before, "a stopped server delivers nothing");
    assert_eq!(hook.delivered().len(), 1);
    let first_failed = hook.got()[1].body.clone();

    hook.set_plan(|_| 200);
    let (_url, _stop) = serve(dir.path(), fast(5)).await;
    let delivered = hook.until_completed().await;
    let seen = states(&delivered);
    assert_eq!(
        seen.iter().filter(|s| s.starts_with("task:")).count(),
        1,
        "not from scratch: {seen:?}"
    );
    assert_eq!(delivered[1], first_failed, "resumed at the update that was not delivered");
    assert_eq!(seen.last().map(String::as_str), Some("TASK_STATE_COMPLETED"), "{seen:?}");
    assert!(hook.got()[before..].iter().all(|g| g.headers["x-a2a-notification-token"] == "t"));
}

#[tokio::test]
async fn a_task_that_waits_for_input_keeps_its_delivery_until_it_ends() {
    let hook = Hook::start(|_| 200).await;
    let server = start_with(None, push_config(loopback())).await;
    let task = server
        .result(
            "SendMessage",
            json!({"message": message("ask What is your name?", None),
                   "configuration": {"taskPushNotificationConfig": {"url": hook.url}}}),
        )
        .await["task"]
        .clone();
    assert_eq!(task["status"]["state"], json!("TASK_STATE_INPUT_REQUIRED"));
    let id = task["id"].as_str().unwrap();
    for _ in 0..200 {
        let seen = states(&hook.delivered());
        if seen.iter().any(|s| s.ends_with("TASK_STATE_INPUT_REQUIRED")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let seen = states(&hook.delivered());
    assert!(seen.iter().any(|s| s.ends_with("TASK_STATE_INPUT_REQUIRED")), "{seen:?}");
    assert!(!seen.iter().any(|s| s.ends_with("TASK_STATE_COMPLETED")), "{seen:?}");

    let answered = server.send("Ada", Some(id)).await;
    assert_eq!(answered["status"]["state"], json!("TASK_STATE_COMPLETED"));
    let delivered = hook.until_completed().await;
    let seen = states(&delivered);
    let waiting = seen.iter().position(|s| s.ends_with("TASK_STATE_INPUT_REQUIRED")).unwrap();
    assert!(seen[waiting + 1..].iter().any(|s| s == "TASK_STATE_WORKING"), "{seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some("TASK_STATE_COMPLETED"), "{seen:?}");
    let artifact = delivered.iter().find_map(|u| u.get("artifactUpdate")).unwrap();
    assert!(artifact["artifact"]["parts"][0]["text"].as_str().unwrap().contains("Ada"));
}

#[tokio::test]
async fn a_deleted_config_gets_no_more_updates() {
    let hook = Hook::start(|_| 200).await;
    let server = start_with(None, push_config(loopback())).await;
    let task = server
        .result(
            "SendMessage",
            json!({"message": message("slow 0.8", None),
                   "configuration": {"returnImmediately": true, "taskPushNotificationConfig": {
                       "url": hook.url, "id": "gone"}}}),
        )
        .await["task"]
        .clone();
    let id = task["id"].as_str().unwrap();
    // A task just accepted may not be readable yet (its first journal entry is on its way).
    while server.rpc("GetTask", json!({"id": id})).await.get("error").is_some() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.result("DeleteTaskPushNotificationConfig", json!({"taskId": id, "id": "gone"})).await;
    let done = server.result("GetTask", json!({"id": id})).await;
    assert_ne!(done["status"]["state"], json!("TASK_STATE_COMPLETED"), "deleted in time");
    for _ in 0..100 {
        let task = server.result("GetTask", json!({"id": id})).await;
        if task["status"]["state"] == json!("TASK_STATE_COMPLETED") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = states(&hook.delivered());
    assert!(seen.len() <= 1, "at most the task, delivered before the delete: {seen:?}");
    assert!(!seen.iter().any(|s| s.ends_with("TASK_STATE_COMPLETED")), "{seen:?}");
}
