#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::convert::{check_server_name, ToolTable};
use super::*;
use rmcp::model::{CallToolResult, ErrorCode, ErrorData};
use secrecy::ExposeSecret;
use serde_json::json;

fn valid_name(name: &str) -> bool {
    name.len() <= MAX_TOOL_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[test]
fn names_are_prefixed_sanitized_and_bounded() {
    assert_eq!(exposed_name("everything", "echo"), "everything__echo");
    assert_eq!(exposed_name("everything", "get-sum"), "everything__get-sum");
    assert_eq!(exposed_name("fs", "files.read/all"), "fs__files_read_all");
    assert_eq!(exposed_name("fs", "héllo"), "fs__h_llo");

    let long = "a".repeat(100);
    let name = exposed_name("server", &long);
    assert_eq!(name.len(), MAX_TOOL_NAME_LEN);
    assert!(valid_name(&name), "{name}");
    assert!(name.starts_with("server__aaaa"), "{name}");
    assert_eq!(name, exposed_name("server", &long), "stable");
    let other = exposed_name("server", &format!("{long}b"));
    assert_ne!(name, other, "long names that share a prefix stay distinct");
    assert_eq!(&name[..55], &other[..55]);
}

#[test]
fn server_names_are_checked() {
    for good in ["everything", "fs", "my_server", "a-b", "x1"] {
        assert_eq!(check_server_name(good), Ok(()), "{good}");
    }
    for bad in ["", "has space", "a__b", "_a", "a_", "dot.ted", &"n".repeat(33)] {
        assert!(check_server_name(bad).is_err(), "{bad:?}");
    }
}

fn tool(name: &str, schema: Value) -> rmcp::model::Tool {
    serde_json::from_value(
        json!({"name": name, "description": format!("does {name}"), "inputSchema": schema}),
    )
    .unwrap()
}

#[test]
fn the_table_maps_exposed_names_back_and_skips_invalid_schemas() {
    let object = json!({"type": "object", "properties": {"message": {"type": "string"}}});
    let table = ToolTable::new(
        "srv",
        vec![
            tool("echo", object.clone()),
            tool("a.b", object.clone()),
            tool("a_b", object.clone()),
            tool("broken", json!({"type": "object", "properties": {"x": {"type": 7}}})),
        ],
    );
    let names: Vec<&str> = table.specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(names[0], "srv__echo");
    assert_eq!(names[1], "srv__a_b");
    assert!(names[2].starts_with("srv__a_b-") && valid_name(names[2]), "{names:?}");
    assert_eq!(table.remote["srv__echo"], "echo");
    assert_eq!(table.remote["srv__a_b"], "a.b");
    assert_eq!(table.remote[names[2]], "a_b");
    assert_eq!(table.specs[0].description, "does echo");
    assert_eq!(table.specs[0].parameters, object);
}

fn result(value: Value) -> CallToolResult {
    serde_json::from_value(value).unwrap()
}

#[test]
fn results_map_to_outputs_and_errors() {
    let text = result(json!({"content": [{"type": "text", "text": "Echo: hi"}]}));
    assert_eq!(tool_output(text), Ok(ToolOutput::Value(json!("Echo: hi"))));

    let structured = result(json!({
        "content": [{"type": "text", "text": "{\"temperature\": 22}"}],
        "structuredContent": {"temperature": 22}
    }));
    assert_eq!(tool_output(structured), Ok(ToolOutput::Value(json!({"temperature": 22}))));

    let mixed = result(json!({"content": [
        {"type": "text", "text": "Here:"},
        {"type": "image", "data": "aGVsbG8h", "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "demo://a", "text": "inside"}},
        {"type": "resource_link", "uri": "demo://b", "name": "b"}
    ]}));
    assert_eq!(
        tool_output(mixed),
        Ok(ToolOutput::Value(json!(
            "Here:\n[image: image/png, 6 bytes]\n[resource demo://a]\ninside\n[resource link: b <demo://b>]"
        )))
    );

    let failed =
        result(json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}));
    assert_eq!(tool_output(failed), Err(ToolError::Failed("no such file".into())));
    let bare = result(json!({"content": [], "isError": true}));
    assert!(
        matches!(tool_output(bare), Err(ToolError::Failed(m)) if m.contains("without a message"))
    );
}

#[test]
fn request_errors_map_to_tool_errors() {
    let refused = convert::call_error(
        "srv",
        rmcp::ServiceError::McpError(ErrorData::new(ErrorCode(-32602), "Tool x not found", None)),
    );
    assert_eq!(
        refused,
        ToolError::Failed(
            "the MCP server 'srv' refused the call: Tool x not found (JSON-RPC error -32602)"
                .into()
        )
    );
    let late = convert::call_error(
        "srv",
        rmcp::ServiceError::Timeout { timeout: Duration::from_millis(1500) },
    );
    assert_eq!(late, ToolError::Timeout(1500));
}

#[test]
fn configs_deserialize_and_hide_secrets() {
    let config: McpServerConfig = serde_json::from_value(json!({
        "name": "everything",
        "timeout_secs": 20,
        "connect_timeout_secs": 60,
        "transport": {
            "type": "stdio",
            "command": "node",
            "args": ["index.js", "stdio"],
            "env": {"API_KEY": "sk-very-secret"},
            "cwd": "/tmp"
        }
    }))
    .unwrap();
    assert_eq!(config.name, "everything");
    assert_eq!(config.call_timeout(), Some(Duration::from_secs(20)));
    assert_eq!(config.setup_timeout(), Duration::from_secs(60));
    let McpTransport::Stdio { command, args, env, cwd } = &config.transport else {
        panic!("stdio expected")
    };
    assert_eq!(
        (command.as_str(), args.as_slice()),
        ("node", &["index.js".to_owned(), "stdio".to_owned()][..])
    );
    assert_eq!(env["API_KEY"].expose_secret(), "sk-very-secret");
    assert_eq!(cwd.as_deref(), Some(std::path::Path::new("/tmp")));
    let debug = format!("{config:?}");
    assert!(debug.contains("API_KEY") && !debug.contains("sk-very-secret"), "{debug}");
    assert_eq!(config.validate(), Ok(()));

    let http: McpServerConfig = serde_json::from_value(json!({
        "name": "remote",
        "transport": {"type": "http", "url": "https://example.test/mcp", "headers": {"Authorization": "Bearer tok-123"}}
    }))
    .unwrap();
    assert_eq!(http.timeout_secs, None);
    assert_eq!(http.setup_timeout(), DEFAULT_SETUP_TIMEOUT);
    let debug = format!("{http:?}");
    assert!(debug.contains("Authorization") && !debug.contains("tok-123"), "{debug}");
    let McpTransport::Http { url, headers } = &http.transport else { panic!("http expected") };
    assert_eq!(url, "https://example.test/mcp");
    assert_eq!(headers["Authorization"].expose_secret(), "Bearer tok-123");

    let minimal: McpServerConfig = serde_json::from_value(
        json!({"name": "fs", "transport": {"type": "stdio", "command": "mcp-fs"}}),
    )
    .unwrap();
    assert!(
        matches!(&minimal.transport, McpTransport::Stdio { args, env, cwd: None, .. } if args.is_empty() && env.is_empty())
    );
}

#[test]
fn bad_configs_are_refused_with_the_reason() {
    let unknown = serde_json::from_value::<McpServerConfig>(
        json!({"name": "x", "transport": {"type": "stdio", "command": "c", "argz": []}}),
    );
    assert!(unknown.unwrap_err().to_string().contains("argz"));
    let kind = serde_json::from_value::<McpServerConfig>(
        json!({"name": "x", "transport": {"type": "websocket", "url": "ws://x"}}),
    );
    assert!(kind.unwrap_err().to_string().contains("websocket"));

    let bad_name = McpServerConfig::stdio("a__b", "node", ["x"]).validate().unwrap_err();
    assert!(bad_name.to_string().contains("'__'"), "{bad_name}");
    let empty = McpServerConfig::stdio("a", " ", Vec::<String>::new()).validate().unwrap_err();
    assert!(empty.to_string().contains("command is empty"), "{empty}");
    let url = McpServerConfig::http("a", "ftp://x").validate().unwrap_err();
    assert!(url.to_string().contains("not an http"), "{url}");
    let zero = McpServerConfig::http("a", "http://x").timeout_secs(0).validate().unwrap_err();
    assert!(zero.to_string().contains("at least 1"), "{zero}");
}

#[tokio::test]
async fn connect_refuses_duplicates_and_reports_a_missing_program() {
    let one = McpServerConfig::stdio("same", "node", ["a.js"]);
    let error = McpToolSet::connect([one.clone(), one]).await.unwrap_err();
    assert_eq!(error, McpError::DuplicateServer("same".into()));

    let missing = McpServerConfig::stdio("ghost", "/nonexistent/agentloop-mcp-server", ["x"]);
    let error = McpToolSet::connect([missing]).await.unwrap_err();
    assert!(matches!(&error, McpError::Spawn { server, .. } if server == "ghost"), "{error}");
}

#[tokio::test]
async fn a_process_that_is_not_an_mcp_server_fails_to_connect_with_its_stderr() {
    // It reads the `initialize` request, complains and exits.
    let script = "echo 'not an MCP server' >&2; read -r request; exit 3";
    let liar = McpServerConfig::stdio("liar", "sh", ["-c", script]).timeout_secs(10);
    let error = McpToolSet::connect([liar]).await.unwrap_err();
    let McpError::Connect { server, message } = &error else { panic!("{error}") };
    assert_eq!(server, "liar");
    assert!(message.contains("connection closed"), "{message}");
    assert!(message.ends_with("; stderr: not an MCP server"), "{message}");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let mute = McpServerConfig::stdio("mute", "sh", ["-c", "sleep 30"]).connect_timeout_secs(1);
    let started = std::time::Instant::now();
    let error = McpToolSet::connect([mute]).await.unwrap_err();
    assert_eq!(error, McpError::Timeout { server: "mute".into(), what: "connect", secs: 1 });
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}
