//! Malformed requests, each with the error the spec gives it — never a panic, never a 500.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{message, start};
use serde_json::{json, Value};

fn rpc(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string()
}

fn send_with(edit: impl FnOnce(&mut Value)) -> String {
    let mut params = json!({"message": message("hi", None)});
    edit(&mut params);
    rpc("SendMessage", params)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_rpc_requests_get_their_codes() {
    let server = start(None).await;
    let big = "x".repeat(600 * 1024);
    // (what, body, an extra header, the expected code)
    type Case<'a> = (&'a str, String, Option<(&'a str, &'a str)>, i64);
    let cases: Vec<Case> = vec![
        ("not JSON", "not json".into(), None, -32700),
        ("empty body", String::new(), None, -32700),
        ("truncated JSON", r#"{"jsonrpc": "2.0", "id": 1, "method": "#.into(), None, -32700),
        ("a batch", "[]".into(), None, -32600),
        ("a string", "\"GetTask\"".into(), None, -32600),
        (
            "wrong jsonrpc version",
            r#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#.into(),
            None,
            -32600,
        ),
        ("no method", r#"{"jsonrpc":"2.0","id":1}"#.into(), None, -32600),
        ("a numeric method", r#"{"jsonrpc":"2.0","id":1,"method":5}"#.into(), None, -32600),
        ("an object id", r#"{"jsonrpc":"2.0","id":{},"method":"GetTask"}"#.into(), None, -32600),
        ("an unknown method", rpc("DoSomething", json!({})), None, -32601),
        (
            "GetTask without params",
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask"}"#.into(),
            None,
            -32602,
        ),
        ("GetTask with array params", rpc("GetTask", json!(["x"])), None, -32602),
        ("GetTask with a numeric id", rpc("GetTask", json!({"id": 5})), None, -32602),
        ("GetTask of an unknown task", rpc("GetTask", json!({"id": "run_unknown"})), None, -32001),
        (
            "GetTask with a negative historyLength",
            rpc("GetTask", json!({"id": "run_x", "historyLength": -1})),
            None,
            -32602,
        ),
        ("GetTask with a slash in the id", rpc("GetTask", json!({"id": "a/b"})), None, -32602),
        ("SendMessage without a message", rpc("SendMessage", json!({})), None, -32602),
        (
            "SendMessage from the agent role",
            send_with(|p| p["message"]["role"] = json!("ROLE_AGENT")),
            None,
            -32602,
        ),
        (
            "SendMessage with an unknown role",
            send_with(|p| p["message"]["role"] = json!("ROBOT")),
            None,
            -32602,
        ),
        (
            "SendMessage without parts",
            send_with(|p| p["message"]["parts"] = json!([])),
            None,
            -32602,
        ),
        (
            "SendMessage without a messageId",
            send_with(|p| p["message"]["messageId"] = json!("")),
            None,
            -32602,
        ),
        (
            "SendMessage with a part of no kind",
            send_with(|p| p["message"]["parts"] = json!([{"foo": 1}])),
            None,
            -32602,
        ),
        (
            "SendMessage with a text part of the wrong type",
            send_with(|p| p["message"]["parts"] = json!([{"text": 5}])),
            None,
            -32602,
        ),
        (
            "SendMessage with an image the agent does not take",
            send_with(|p| {
                p["message"]["parts"] = json!([{"raw": "iVBORw0KGgo=", "mediaType": "image/png"}])
            }),
            None,
            -32005,
        ),
        (
            "SendMessage with a URL part without a media type",
            send_with(|p| p["message"]["parts"] = json!([{"url": "https://example.test/a.txt"}])),
            None,
            -32602,
        ),
        (
            "SendMessage with an oversized part",
            send_with(|p| p["message"]["parts"] = json!([{"text": big}])),
            None,
            -32602,
        ),
        (
            "SendMessage to an unknown task",
            send_with(|p| p["message"]["taskId"] = json!("run_unknown")),
            None,
            -32001,
        ),
        (
            "SendMessage with a context id too long",
            send_with(|p| p["message"]["contextId"] = json!("c".repeat(200))),
            None,
            -32602,
        ),
        (
            "SendMessage with a push config",
            send_with(|p| {
                p["configuration"] =
                    json!({"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}})
            }),
            None,
            -32003,
        ),
        (
            "SendMessage accepting only images",
            send_with(|p| p["configuration"] = json!({"acceptedOutputModes": ["image/png"]})),
            None,
            -32005,
        ),
        (
            "SendMessage with a huge historyLength",
            send_with(|p| p["configuration"] = json!({"historyLength": 100000})),
            None,
            -32602,
        ),
        (
            "CancelTask of an unknown task",
            rpc("CancelTask", json!({"id": "run_unknown"})),
            None,
            -32001,
        ),
        (
            "SubscribeToTask of an unknown task",
            rpc("SubscribeToTask", json!({"id": "run_unknown"})),
            None,
            -32001,
        ),
        ("ListTasks with pageSize 1000", rpc("ListTasks", json!({"pageSize": 1000})), None, -32602),
        (
            "ListTasks with a forged pageToken",
            rpc("ListTasks", json!({"pageToken": "garbage"})),
            None,
            -32602,
        ),
        (
            "ListTasks with an unknown status",
            rpc("ListTasks", json!({"status": "TASK_STATE_BOGUS"})),
            None,
            -32602,
        ),
        (
            "ListTasks with the auth-required status",
            rpc("ListTasks", json!({"status": "TASK_STATE_AUTH_REQUIRED"})),
            None,
            -32602,
        ),
        (
            "CreateTaskPushNotificationConfig",
            rpc(
                "CreateTaskPushNotificationConfig",
                json!({"taskId": "t", "url": "http://127.0.0.1:9"}),
            ),
            None,
            -32003,
        ),
        ("GetExtendedAgentCard", rpc("GetExtendedAgentCard", json!({})), None, -32004),
        ("protocol version 0.3", rpc("ListTasks", json!({})), Some(("A2A-Version", "0.3")), -32009),
        ("protocol version 2.0", rpc("ListTasks", json!({})), Some(("A2A-Version", "2.0")), -32009),
    ];
    assert!(cases.len() >= 30);
    for (name, body, header, code) in cases {
        let mut request =
            server.client.post(&server.url).header("content-type", "application/json").body(body);
        if let Some((key, value)) = header {
            request = request.header(key, value);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200, "{name}");
        let reply: Value = response.json().await.unwrap();
        assert_eq!(reply["error"]["code"], code, "{name}: {reply}");
        assert_eq!(reply["jsonrpc"], "2.0", "{name}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(!message.contains("panicked") && message.len() < 600, "{name}: {message}");
    }
    // The server is still well.
    assert_eq!(server.send("still here", None).await["status"]["state"], "TASK_STATE_COMPLETED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_rest_requests_get_their_statuses() {
    let server = start(None).await;
    let url = &server.url;
    let send = format!("{url}/message:send");
    let client = &server.client;
    let cases: Vec<(&str, reqwest::RequestBuilder, u16, &str)> = vec![
        (
            "invalid JSON",
            client.post(&send).header("content-type", "application/json").body("{"),
            400,
            "PARSE_ERROR",
        ),
        (
            "a text body",
            client.post(&send).header("content-type", "text/plain").body("hi"),
            400,
            "CONTENT_TYPE_NOT_SUPPORTED",
        ),
        ("an array body", client.post(&send).json(&json!([1])), 400, "INVALID_PARAMS"),
        ("no message", client.post(&send).json(&json!({})), 400, "INVALID_PARAMS"),
        (
            "a non-integer pageSize",
            client.get(format!("{url}/tasks?pageSize=abc")),
            400,
            "INVALID_PARAMS",
        ),
        (
            "a bad includeArtifacts",
            client.get(format!("{url}/tasks?includeArtifacts=maybe")),
            400,
            "INVALID_PARAMS",
        ),
        (
            "a bad timestamp",
            client.get(format!("{url}/tasks?statusTimestampAfter=yesterday")),
            400,
            "INVALID_PARAMS",
        ),
        (
            "bad percent-encoding",
            client.get(format!("{url}/tasks?contextId=%zz")),
            400,
            "INVALID_PARAMS",
        ),
        ("an unknown task", client.get(format!("{url}/tasks/run_unknown")), 404, "TASK_NOT_FOUND"),
        (
            "an unknown verb",
            client.post(format!("{url}/tasks/run_x:explode")),
            501,
            "METHOD_NOT_FOUND",
        ),
        (
            "push configs",
            client.get(format!("{url}/tasks/run_x/pushNotificationConfigs")),
            400,
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
        ),
        (
            "an unknown task to cancel",
            client.post(format!("{url}/tasks/run_unknown:cancel")),
            404,
            "TASK_NOT_FOUND",
        ),
    ];
    for (name, request, status, reason) in cases {
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{name}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["details"][0]["reason"], reason, "{name}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_gets_413() {
    let server = start(None).await;
    let huge = json!({"message": message(&"y".repeat(1024 * 1024 + 10), None)}).to_string();
    for url in [server.url.clone(), format!("{}/message:send", server.url)] {
        let response = server
            .client
            .post(&url)
            .header("content-type", "application/json")
            .body(huge.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 413, "{url}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_or_stalled_connection_is_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let config = agentloop_server::ServerConfig {
        idle_timeout: std::time::Duration::from_millis(300),
        ..agentloop_server::ServerConfig::default()
    };
    let server = common::start_with(None, config).await;
    let address = server.root.trim_start_matches("http://").to_owned();
    // Half a request, then silence: the server closes the connection.
    let mut stalled = tokio::net::TcpStream::connect(&address).await.unwrap();
    stalled
        .write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    let read =
        tokio::time::timeout(std::time::Duration::from_secs(5), stalled.read_to_end(&mut rest))
            .await;
    assert!(read.is_ok(), "the stalled connection was not closed");
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    // A stream outlives the idle timeout: its keep-alives and events are traffic.
    let events = server
        .rpc_stream(
            "SendStreamingMessage",
            serde_json::json!({"message": message("stream 30", None)}),
            None,
        )
        .await;
    assert_eq!(common::state_of(&events.last().unwrap().1["result"]), Some("TASK_STATE_COMPLETED"));
}
