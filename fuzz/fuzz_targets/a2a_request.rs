//! Requests to the A2A server (JSON-RPC and HTTP+JSON bindings) of the echo agent, in
//! memory: never a panic, and always an answer (no request holds the server).
//!
//! Input: a byte choosing the endpoint, then (for the REST task and list endpoints) a path
//! or query line, then the body.
#![no_main]

use agentloop::store::MemoryStore;
use agentloop_server::{echo, Server, ServerConfig};
use axum::body::Body;
use axum::http::{Method, Request};
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tower::ServiceExt;

struct Harness {
    runtime: tokio::runtime::Runtime,
    router: axum::Router,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let router = runtime.block_on(async {
            let store = Arc::new(MemoryStore::new());
            let served = echo::served_echo(store.clone(), store).unwrap();
            let config = ServerConfig {
                send_wait: Duration::from_millis(100),
                request_timeout: Duration::from_secs(1),
                ..ServerConfig::default()
            };
            Server::new(vec![served], config).unwrap().router()
        });
        Harness { runtime, router }
    })
}

fuzz_target!(|data: &[u8]| {
    let [selector, rest @ ..] = data else { return };
    let (line, body) = match rest.iter().position(|&b| b == b'\n') {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (&rest[..0], rest),
    };
    let line = String::from_utf8_lossy(line);
    let (method, uri) = match selector % 5 {
        0 => (Method::POST, "/echo".to_owned()),
        1 => (Method::POST, "/echo/message:send".to_owned()),
        2 => (Method::POST, format!("/echo/tasks/{line}")),
        3 => (Method::GET, format!("/echo/tasks/{line}")),
        _ => (Method::GET, format!("/echo/tasks?{line}")),
    };
    let Ok(request) = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(Body::from(body.to_vec()))
    else {
        return;
    };
    let harness = harness();
    harness.runtime.block_on(async {
        let answer = tokio::time::timeout(Duration::from_secs(5), async {
            let response = harness.router.clone().oneshot(request).await.unwrap();
            // A stream may go on: its first second is enough.
            let body = response.into_body();
            let _ =
                tokio::time::timeout(Duration::from_secs(1), axum::body::to_bytes(body, 1 << 24))
                    .await;
        })
        .await;
        assert!(answer.is_ok(), "the server did not answer in 5 s");
    });
});
