//! A server of the echo agent on a loopback port, small JSON-RPC / REST / SSE clients, and a
//! webhook ([`hook`]).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod hook;

use agentloop::store::sqlite::SqliteStore;
use agentloop::store::{RunStore, SessionStore};
use agentloop_server::{echo, Auth, Server, ServerConfig};
use futures::StreamExt;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

pub struct TestServer {
    /// The echo agent's base URL (`http://127.0.0.1:PORT/echo`).
    pub url: String,
    /// The server's root.
    pub root: String,
    pub store: Arc<dyn RunStore>,
    pub client: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

pub async fn start(auth: Option<Auth>) -> TestServer {
    start_with(auth, ServerConfig::default()).await
}

pub async fn start_with(auth: Option<Auth>, config: ServerConfig) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("runs.db")).unwrap());
    start_on(store.clone(), store, auth, config, dir).await
}

/// A server of the echo agent on `runs` and `sessions`.
pub async fn start_on(
    runs: Arc<dyn RunStore>,
    sessions: Arc<dyn SessionStore>,
    auth: Option<Auth>,
    config: ServerConfig,
    dir: tempfile::TempDir,
) -> TestServer {
    let served = echo::served_echo(runs.clone(), sessions).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let root = format!("http://{}", listener.local_addr().unwrap());
    let config = ServerConfig { public_url: root.clone(), auth, ..config };
    let server = Server::new(vec![served], config).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async move {
        let _ = stopped.await;
    }));
    TestServer {
        url: format!("{root}/echo"),
        root,
        store: runs,
        client: agentloop::tls::http_client_builder()
            .unwrap()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap(),
        stop: Some(stop),
        _dir: dir,
    }
}

/// A user message (text parts), optionally to a task.
pub fn message(text: &str, task_id: Option<&str>) -> Value {
    let mut m = json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "parts": [{"text": text}]});
    if let Some(task_id) = task_id {
        m["taskId"] = json!(task_id);
    }
    m
}

impl TestServer {
    /// A JSON-RPC call; the whole response object.
    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.client.post(&self.url).json(&body).send().await.unwrap().json().await.unwrap()
    }

    /// A JSON-RPC call's result (panics on an error).
    pub async fn result(&self, method: &str, params: Value) -> Value {
        let response = self.rpc(method, params).await;
        assert!(response.get("error").is_none(), "{method}: {response}");
        response["result"].clone()
    }

    /// SendMessage of `text`: the task.
    pub async fn send(&self, text: &str, task_id: Option<&str>) -> Value {
        self.result("SendMessage", json!({"message": message(text, task_id)})).await["task"].clone()
    }

    /// A streaming JSON-RPC call: every SSE event's `(id, data)`.
    pub async fn rpc_stream(
        &self,
        method: &str,
        params: Value,
        last_event_id: Option<&str>,
    ) -> Vec<(Option<String>, Value)> {
        let body = json!({"jsonrpc": "2.0", "id": "s", "method": method, "params": params});
        let mut request = self.client.post(&self.url).json(&body);
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        sse_events(request.send().await.unwrap()).await
    }
}

/// The SSE events of a response, until it ends.
pub async fn sse_events(response: reqwest::Response) -> Vec<(Option<String>, Value)> {
    let mut events = Vec::new();
    let mut buffer = String::new();
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let (mut id, mut data) = (None, String::new());
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().to_owned());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            if !data.is_empty() {
                events.push((id, serde_json::from_str(&data).unwrap()));
            }
        }
    }
    events
}

/// The state of a stream update or task.
pub fn state_of(update: &Value) -> Option<&str> {
    update
        .get("statusUpdate")
        .map(|u| &u["status"]["state"])
        .or_else(|| update.get("task").map(|t| &t["status"]["state"]))
        .and_then(Value::as_str)
}
