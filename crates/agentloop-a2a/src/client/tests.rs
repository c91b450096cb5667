use super::builder::{card_url, pick_interface};
use super::http::{decode_jsonrpc, decode_stream_event, rest_error, status_error};
use super::*;
use crate::sse::SseEvent;
use a2a::{AgentCapabilities, AgentInterface, TaskState};
use serde_json::{json, Value};

fn card(interfaces: &[(&str, &str, &str)]) -> AgentCard {
    AgentCard {
        name: "Agent".into(),
        description: String::new(),
        version: "1".into(),
        supported_interfaces: interfaces
            .iter()
            .map(|(url, binding, version)| AgentInterface {
                url: (*url).into(),
                protocol_binding: (*binding).into(),
                protocol_version: (*version).into(),
                tenant: None,
            })
            .collect(),
        capabilities: AgentCapabilities::default(),
        default_input_modes: vec![],
        default_output_modes: vec![],
        skills: vec![],
        provider: None,
        documentation_url: None,
        icon_url: None,
        security_schemes: None,
        security_requirements: None,
        signatures: None,
    }
}

#[test]
fn the_card_url_is_under_the_base_or_the_url_itself() {
    let url = |base: &str| card_url(base).unwrap().to_string();
    assert_eq!(url("http://h:1"), "http://h:1/.well-known/agent-card.json");
    assert_eq!(url("http://h:1/"), "http://h:1/.well-known/agent-card.json");
    assert_eq!(url("https://h/a/b/"), "https://h/a/b/.well-known/agent-card.json");
    assert_eq!(url("http://h/x/card.json"), "http://h/x/card.json");
    assert!(matches!(card_url("ftp://h"), Err(A2aClientError::InvalidUrl(_))));
    assert!(matches!(card_url("not a url"), Err(A2aClientError::InvalidUrl(_))));
}

#[test]
fn json_rpc_is_preferred_and_versions_must_be_1_x() {
    let both = card(&[
        ("http://h/rest", "HTTP+JSON", "1.0"),
        ("http://h/rpc", "JSONRPC", "1.0"),
        ("http://h/grpc", "GRPC", "1.0"),
    ]);
    let prefer = [Binding::JsonRpc, Binding::HttpJson];
    let (binding, url) = pick_interface(&both, &prefer, None).unwrap();
    assert_eq!((binding, url.as_str()), (Binding::JsonRpc, "http://h/rpc"));
    let (binding, _) = pick_interface(&both, &[Binding::HttpJson], None).unwrap();
    assert_eq!(binding, Binding::HttpJson);

    let old = card(&[("http://h/rpc", "JSONRPC", "0.3"), ("http://h/rest", "HTTP+JSON", "")]);
    let (binding, _) = pick_interface(&old, &prefer, None).unwrap();
    assert_eq!(binding, Binding::HttpJson, "0.3 is skipped, no version is taken as 1.x");

    let none = card(&[("http://h/grpc", "GRPC", "1.0")]);
    let error = pick_interface(&none, &prefer, None).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the agent card lists no supported interface (offered: GRPC 1.0)"
    );
}

#[test]
fn a_relative_interface_url_is_joined_to_the_card_url() {
    let relative = card(&[("/rpc", "JSONRPC", "1.0")]);
    let base = reqwest::Url::parse("http://h:9/.well-known/agent-card.json").unwrap();
    let (_, url) = pick_interface(&relative, &[Binding::JsonRpc], Some(&base)).unwrap();
    assert_eq!(url.as_str(), "http://h:9/rpc");
    assert!(pick_interface(&relative, &[Binding::JsonRpc], None).is_err());
}

#[test]
fn json_rpc_results_and_errors() {
    let task = json!({"jsonrpc": "2.0", "id": 4, "result": {"id": "t", "contextId": "c",
        "status": {"state": "TASK_STATE_WORKING"}}});
    let decoded: Task = decode_jsonrpc(task.to_string().as_bytes(), Some(4)).unwrap();
    assert_eq!(decoded.status.state, TaskState::Working);

    let error = json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32001,
        "message": "Task not found", "data": [{"reason": "TASK_NOT_FOUND"}]}});
    let error = decode_jsonrpc::<Task>(error.to_string().as_bytes(), Some(4)).unwrap_err();
    assert!(error.is_task_not_found());
    assert_eq!(
        error.to_string(),
        "the A2A agent returned error -32001 (TASK_NOT_FOUND): Task not found"
    );

    let other_id = json!({"jsonrpc": "2.0", "id": 5, "result": {}});
    assert!(matches!(
        decode_jsonrpc::<Value>(other_id.to_string().as_bytes(), Some(4)),
        Err(A2aClientError::InvalidResponse(_))
    ));
    assert!(matches!(
        decode_jsonrpc::<Value>(b"<html>", Some(4)),
        Err(A2aClientError::InvalidResponse(_))
    ));
}

#[test]
fn rest_errors_take_their_code_from_the_error_info_reason() {
    let body = json!({"error": {"code": 404, "status": "NOT_FOUND", "message": "Task not found",
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org"}]}});
    let error = status_error(404, body.to_string().as_bytes());
    assert_eq!(error.code(), Some(a2a::error_code::TASK_NOT_FOUND));
    assert!(matches!(error, A2aClientError::Remote { http_status: Some(404), .. }));

    // No reason and no A2A code: the status and an excerpt.
    let error = status_error(502, b"bad gateway\x1b[2J");
    assert_eq!(error.to_string(), "the A2A agent answered HTTP 502: bad gateway\\u{1b}[2J");
    assert!(rest_error(&json!({"error": {"code": 500, "message": "x"}}), None).is_none());
    // A JSON-RPC error body with an HTTP error status.
    let error =
        status_error(400, br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32009,"message":"v"}}"#);
    assert_eq!(error.code(), Some(a2a::error_code::VERSION_NOT_SUPPORTED));
}

#[test]
fn remote_messages_are_sanitized() {
    let body = json!({"error": {"message": "evil\u{1b}]0;title\u{7}", "details": [{"reason": "INTERNAL_ERROR"}]}});
    let error = status_error(500, body.to_string().as_bytes());
    assert!(!error.to_string().contains('\u{1b}'), "{error}");
}

fn sse(event: &str, data: &str) -> SseEvent {
    SseEvent { event: event.into(), data: data.into(), id: None, retry: None }
}

#[test]
fn stream_events_of_both_bindings() {
    let update = json!({"statusUpdate": {"taskId": "t", "contextId": "c",
        "status": {"state": "TASK_STATE_COMPLETED"}}});
    let rpc = json!({"jsonrpc": "2.0", "id": 1, "result": update}).to_string();
    let event = decode_stream_event(Binding::JsonRpc, &sse("message", &rpc), Some(1)).unwrap();
    assert!(matches!(event, Some(StreamResponse::StatusUpdate(_))));
    let event =
        decode_stream_event(Binding::HttpJson, &sse("message", &update.to_string()), None).unwrap();
    assert!(matches!(event, Some(StreamResponse::StatusUpdate(_))));
    assert_eq!(decode_stream_event(Binding::HttpJson, &sse("message", " "), None).unwrap(), None);

    let rest_error = json!({"error": {"code": 404, "message": "gone",
        "details": [{"reason": "TASK_NOT_FOUND"}]}})
    .to_string();
    let error =
        decode_stream_event(Binding::HttpJson, &sse("error", &rest_error), None).unwrap_err();
    assert!(error.is_task_not_found());
    let rpc_error = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "x"}});
    let error =
        decode_stream_event(Binding::JsonRpc, &sse("message", &rpc_error.to_string()), Some(1))
            .unwrap_err();
    assert_eq!(error.code(), Some(-32603));
    let error = decode_stream_event(Binding::HttpJson, &sse("message", "{\"nope\":1}"), None);
    assert!(matches!(error, Err(A2aClientError::InvalidResponse(_))));
}

#[test]
fn list_queries_use_the_json_names() {
    let request = ListTasksRequest {
        context_id: Some("c 1".into()),
        status: Some(TaskState::Completed),
        page_size: Some(5),
        page_token: None,
        history_length: Some(0),
        status_timestamp_after: None,
        include_artifacts: Some(true),
        tenant: None,
    };
    let query = list_query(&request).unwrap();
    assert_eq!(
        query,
        vec![
            ("contextId", "c 1".to_owned()),
            ("status", "TASK_STATE_COMPLETED".to_owned()),
            ("pageSize", "5".to_owned()),
            ("historyLength", "0".to_owned()),
            ("includeArtifacts", "true".to_owned()),
        ]
    );
}

#[test]
fn the_debug_output_hides_secrets() {
    let client = A2aClient::builder()
        .bearer_token("s3cret-token".into())
        .api_key("X-Api-Key", "k-999".into())
        .connect(card(&[("http://h/rpc?key=abc", "JSONRPC", "1.0")]))
        .unwrap();
    let debug = format!("{client:?}");
    assert!(
        !debug.contains("s3cret") && !debug.contains("k-999") && !debug.contains("abc"),
        "{debug}"
    );
    assert!(debug.contains("Sensitive") || debug.contains("sensitive"), "{debug}");
}

#[test]
fn an_invalid_header_is_reported_by_name_only() {
    let error = A2aClient::builder()
        .secret_header("X-Key", "line\nbreak".into())
        .connect(card(&[("http://h/rpc", "JSONRPC", "1.0")]))
        .unwrap_err();
    assert_eq!(error.to_string(), "invalid header 'X-Key'");
}

#[test]
fn rest_urls_encode_task_ids() {
    let client =
        A2aClient::builder().connect(card(&[("http://h/base/", "HTTP+JSON", "1.0")])).unwrap();
    let url = client.rest_url(&["tasks", "a/b?c#d:cancel"]).unwrap();
    assert_eq!(url.as_str(), "http://h/base/tasks/a%2Fb%3Fc%23d:cancel");
}
