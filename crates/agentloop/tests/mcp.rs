//! MCP tool servers against the real reference servers from npm, installed by
//! `scripts/mcp-servers.sh`: `AGENTLOOP_MCP_EVERYTHING` and `AGENTLOOP_MCP_FILESYSTEM` name their
//! entry points (`node <path>`). Without them each test prints a skip notice and passes.
#![cfg(feature = "mcp")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::tool::mcp::{McpServerConfig, McpServerState, McpToolSet};
use agentloop::tool::{ToolContext, ToolError, ToolOutput, ToolSet};
use agentloop::Agent;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The entry point named by `var`, or `None` (with a notice) when it is not set.
fn server_entry(var: &str, test: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(path.is_file(), "{var} names {path:?}, which is not a file");
            Some(path)
        }
        None => {
            eprintln!(
                "skipping {test}: {var} is not set (run scripts/mcp-servers.sh and export its output)"
            );
            None
        }
    }
}

fn everything(test: &str) -> Option<PathBuf> {
    server_entry("AGENTLOOP_MCP_EVERYTHING", test)
}

fn everything_stdio(entry: &std::path::Path) -> McpServerConfig {
    McpServerConfig::stdio("everything", "node", [entry.to_str().unwrap(), "stdio"])
        .timeout_secs(20)
}

/// The official SDK, installed next to server-everything (the fixture server uses it).
fn sdk_dir(everything: &std::path::Path) -> PathBuf {
    let dir = everything.ancestors().nth(3).unwrap().join("sdk");
    assert!(dir.join("package.json").is_file(), "no @modelcontextprotocol/sdk at {dir:?}");
    dir
}

fn fixture_server(everything: &std::path::Path) -> McpServerConfig {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mcp/dynamic-tools.mjs");
    McpServerConfig::stdio("dyn", "node", [script, sdk_dir(everything).to_str().unwrap()])
        .timeout_secs(20)
}

async fn call(set: &McpToolSet, name: &str, args: Value) -> Result<ToolOutput, ToolError> {
    set.call(name, args, ToolContext::detached("call")).await
}

fn text(output: Result<ToolOutput, ToolError>) -> String {
    match output {
        Ok(ToolOutput::Value(Value::String(text))) => text,
        other => panic!("expected a text result, got {other:?}"),
    }
}

fn names(set: &McpToolSet) -> Vec<String> {
    set.specs().into_iter().map(|s| s.name).collect()
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn kill(pid: u32) {
    let status =
        std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    assert!(status.success(), "kill -9 {pid}");
}

#[tokio::test]
async fn everything_over_stdio_lists_and_calls_its_tools() {
    let Some(entry) = everything("everything_over_stdio_lists_and_calls_its_tools") else { return };
    let set = McpToolSet::connect([everything_stdio(&entry)]).await.unwrap();
    let names = names(&set);
    for expected in
        ["everything__echo", "everything__get-sum", "everything__trigger-long-running-operation"]
    {
        assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
    }
    for name in &names {
        assert!(name.starts_with("everything__") && name.len() <= 64, "{name}");
        assert!(
            name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "{name}"
        );
    }
    let echo = set.specs().into_iter().find(|s| s.name == "everything__echo").unwrap();
    assert_eq!(echo.description, "Echoes back the input string");
    assert_eq!(echo.parameters["properties"]["message"]["type"], "string");

    assert_eq!(text(call(&set, "everything__echo", json!({"message": "hi"})).await), "Echo: hi");
    assert_eq!(
        text(call(&set, "everything__get-sum", json!({"a": 2, "b": 3.5})).await),
        "The sum of 2 and 3.5 is 5.5."
    );
    let weather = call(&set, "everything__get-structured-content", json!({"location": "Chicago"}))
        .await
        .unwrap();
    let ToolOutput::Value(Value::Object(weather)) = weather else { panic!("{weather:?}") };
    assert!(weather["temperature"].is_number() && weather["humidity"].is_number(), "{weather:?}");

    // Its tools that fail answer with `isError`: a handler that throws, and input the server's
    // own validation refuses.
    let refused = call(
        &set,
        "everything__gzip-file-as-resource",
        json!({"name": "x.gz", "data": "ftp://example.test/file"}),
    )
    .await;
    let Err(ToolError::Failed(message)) = refused else { panic!("{refused:?}") };
    assert!(message.contains("Unsupported URL protocol"), "{message}");
    let invalid = call(&set, "everything__get-sum", json!({"a": "two", "b": 3})).await;
    let Err(ToolError::Failed(message)) = invalid else { panic!("{invalid:?}") };
    assert!(message.contains("Input validation error"), "{message}");

    assert_eq!(
        call(&set, "everything__nope", json!({})).await,
        Err(ToolError::UnknownTool("everything__nope".into()))
    );
    assert_eq!(set.status("everything").unwrap().state, McpServerState::Running);
    set.shutdown().await;
}

#[tokio::test]
async fn a_call_times_out_and_the_server_goes_on() {
    let Some(entry) = everything("a_call_times_out_and_the_server_goes_on") else { return };
    let set = McpToolSet::connect([everything_stdio(&entry).timeout_secs(1)]).await.unwrap();
    let name = "everything__trigger-long-running-operation";
    assert_eq!(set.timeout(name), Some(Duration::from_secs(2)), "the agent's limit leaves a grace");
    let started = Instant::now();
    let late = call(&set, name, json!({"duration": 5, "steps": 5})).await;
    assert_eq!(late, Err(ToolError::Timeout(1000)));
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(3), "{elapsed:?}");
    assert_eq!(
        text(call(&set, "everything__echo", json!({"message": "still here"})).await),
        "Echo: still here"
    );
}

#[tokio::test]
async fn cancellation_stops_the_call_and_tells_the_server() {
    let Some(entry) = everything("cancellation_stops_the_call_and_tells_the_server") else {
        return;
    };
    let set = McpToolSet::connect([fixture_server(&entry)]).await.unwrap();
    let ctx = ToolContext::detached("c");
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let result = set.call("dyn__wait", json!({"ms": 10_000}), ctx).await;
    assert_eq!(result, Err(ToolError::Cancelled));
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    // The server saw `notifications/cancelled` for the request (it counts aborted requests).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let count = text(call(&set, "dyn__cancellations", json!({})).await);
        if count == "1" {
            break;
        }
        assert!(Instant::now() < deadline, "the server never saw the cancellation ({count})");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(text(call(&set, "dyn__wait", json!({"ms": 10})).await), "waited 10 ms");
}

#[tokio::test]
async fn a_tool_list_change_refreshes_the_set() {
    let Some(entry) = everything("a_tool_list_change_refreshes_the_set") else { return };
    let set = McpToolSet::connect([fixture_server(&entry)]).await.unwrap();
    assert_eq!(
        names(&set),
        ["dyn__add_tool", "dyn__remove_tool", "dyn__wait", "dyn__cancellations"]
    );
    let before = set.revision();

    assert_eq!(text(call(&set, "dyn__add_tool", json!({"name": "greet"})).await), "add_tool greet");
    wait_until("the new tool is listed", || names(&set).iter().any(|n| n == "dyn__greet")).await;
    assert!(set.revision() > before, "the revision moved");
    assert_eq!(text(call(&set, "dyn__greet", json!({})).await), "hello from greet");

    let added = set.revision();
    assert_eq!(
        text(call(&set, "dyn__remove_tool", json!({"name": "greet"})).await),
        "remove_tool greet"
    );
    wait_until("the tool is gone", || !names(&set).iter().any(|n| n == "dyn__greet")).await;
    assert!(set.revision() > added);
    assert_eq!(
        call(&set, "dyn__greet", json!({})).await,
        Err(ToolError::UnknownTool("dyn__greet".into()))
    );
}

#[tokio::test]
async fn a_dead_server_is_reported_and_restarted_once() {
    let Some(entry) = everything("a_dead_server_is_reported_and_restarted_once") else { return };
    let dir = tempfile::tempdir().unwrap();
    // The second start waits 2 s, so that calls while the server is down can be seen.
    let script =
        r#"if [ -e "$MARKER" ]; then sleep 2; fi; touch "$MARKER"; exec node "$ENTRY" stdio"#;
    let config = McpServerConfig::stdio("everything", "sh", ["-c", script])
        .env("MARKER", dir.path().join("started").to_str().unwrap())
        .env("ENTRY", entry.to_str().unwrap())
        .timeout_secs(20);
    let set = Arc::new(McpToolSet::connect([config]).await.unwrap());
    let first = set.status("everything").unwrap();
    assert_eq!(
        (first.state, first.restarts, first.last_exit.clone()),
        (McpServerState::Running, 0, None)
    );
    let pid = first.pid.unwrap();

    // A call in flight when the process dies fails with the reason.
    let in_flight = tokio::spawn({
        let set = Arc::clone(&set);
        async move {
            call(
                &set,
                "everything__trigger-long-running-operation",
                json!({"duration": 10, "steps": 10}),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    kill(pid);
    let result = in_flight.await.unwrap();
    let Err(ToolError::Failed(message)) = result else { panic!("{result:?}") };
    assert!(message.contains("closed the connection during the call"), "{message}");

    wait_until("the server is restarting", || {
        set.status("everything").unwrap().state == McpServerState::Restarting
    })
    .await;
    let down = call(&set, "everything__echo", json!({"message": "x"})).await;
    let Err(ToolError::Failed(message)) = down else { panic!("{down:?}") };
    assert!(message.contains("is down") && message.contains("being restarted"), "{message}");
    assert!(message.contains("exited"), "names the cause: {message}");

    wait_until("the server runs again", || {
        set.status("everything").unwrap().state == McpServerState::Running
    })
    .await;
    let second = set.status("everything").unwrap();
    assert_eq!(second.restarts, 1);
    assert_ne!(second.pid, Some(pid), "a new process");
    assert!(second.last_exit.as_deref().unwrap().contains("exited"), "{second:?}");
    assert_eq!(
        text(call(&set, "everything__echo", json!({"message": "back"})).await),
        "Echo: back"
    );

    kill(second.pid.unwrap());
    wait_until("the server is stopped", || {
        set.status("everything").unwrap().state == McpServerState::Stopped
    })
    .await;
    let last = set.status("everything").unwrap();
    assert_eq!((last.restarts, last.pid), (1, None), "not restarted a second time");
    let gone = call(&set, "everything__echo", json!({"message": "x"})).await;
    let Err(ToolError::Failed(message)) = gone else { panic!("{gone:?}") };
    assert!(message.contains("down for good"), "{message}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(set.status("everything").unwrap().state, McpServerState::Stopped, "stays stopped");
}

/// A free TCP port on the loopback interface.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn everything_over_streamable_http() {
    let Some(entry) = everything("everything_over_streamable_http") else { return };
    let port = free_port();
    let mut server = tokio::process::Command::new("node")
        .arg(&entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(Instant::now() < deadline, "server-everything did not listen on {port}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let config = McpServerConfig::http("remote", format!("http://127.0.0.1:{port}/mcp"))
        .header("X-Agentloop-Test", "1")
        .timeout_secs(20);
    let set = McpToolSet::connect([config]).await.unwrap();
    let names = names(&set);
    assert!(names.iter().any(|n| n == "remote__echo"), "{names:?}");
    assert!(names.iter().any(|n| n == "remote__get-sum"), "{names:?}");
    assert_eq!(
        text(call(&set, "remote__echo", json!({"message": "over http"})).await),
        "Echo: over http"
    );
    assert_eq!(
        text(call(&set, "remote__get-sum", json!({"a": 40, "b": 2})).await),
        "The sum of 40 and 2 is 42."
    );
    assert_eq!(set.status("remote").unwrap().pid, None);
    set.shutdown().await;
    server.kill().await.unwrap();
}

#[tokio::test]
async fn filesystem_server_lists_reads_and_writes_in_a_temp_directory() {
    let Some(entry) = server_entry(
        "AGENTLOOP_MCP_FILESYSTEM",
        "filesystem_server_lists_reads_and_writes_in_a_temp_directory",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("hello.txt"), "hello from the test\n").unwrap();
    let config =
        McpServerConfig::stdio("fs", "node", [entry.to_str().unwrap(), root.to_str().unwrap()])
            .timeout_secs(20);
    let set = McpToolSet::connect([config]).await.unwrap();
    let names = names(&set);
    for expected in ["fs__read_text_file", "fs__write_file", "fs__list_directory"] {
        assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
    }

    let path = |name: &str| root.join(name).to_str().unwrap().to_owned();
    let read = call(&set, "fs__read_text_file", json!({"path": path("hello.txt")})).await.unwrap();
    assert!(read_text(&read).contains("hello from the test"), "{read:?}");

    let wrote = call(
        &set,
        "fs__write_file",
        json!({"path": path("new.txt"), "content": "written by agentloop"}),
    )
    .await
    .unwrap();
    assert!(read_text(&wrote).contains("Successfully wrote"), "{wrote:?}");
    assert_eq!(std::fs::read_to_string(root.join("new.txt")).unwrap(), "written by agentloop");

    let listing = call(&set, "fs__list_directory", json!({"path": path("")})).await.unwrap();
    let listing = read_text(&listing);
    assert!(
        listing.contains("[FILE] hello.txt") && listing.contains("[FILE] new.txt"),
        "{listing}"
    );

    let outside = call(&set, "fs__read_text_file", json!({"path": "/etc/hostname"})).await;
    let Err(ToolError::Failed(message)) = outside else { panic!("{outside:?}") };
    assert!(message.contains("Access denied"), "{message}");
}

/// The text of a result, whether it came as text or as structured content (`{content: …}`).
fn read_text(output: &ToolOutput) -> String {
    match output {
        ToolOutput::Value(Value::String(text)) => text.clone(),
        ToolOutput::Value(Value::Object(map)) => match map.get("content") {
            Some(Value::String(text)) => text.clone(),
            _ => Value::Object(map.clone()).to_string(),
        },
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_agent_calls_an_mcp_tool_and_answers() {
    let Some(entry) = everything("an_agent_calls_an_mcp_tool_and_answers") else { return };
    let set = Arc::new(McpToolSet::connect([everything_stdio(&entry)]).await.unwrap());
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("everything__get-sum", json!({"a": 17, "b": 25})),
        ScriptedTurn::text("17 + 25 = 42"),
    ]));
    let agent = Agent::builder(model.clone()).tool_set(set.clone()).build().unwrap();
    let outcome = agent.run("What is 17 + 25?").await.unwrap();
    assert_eq!(outcome.answer, "17 + 25 = 42");

    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].tools.iter().any(|t| t.name == "everything__get-sum"), "offered");
    let result = requests[1].messages.last().unwrap().tool_results_iter().next().cloned().unwrap();
    assert!(!result.is_error, "{result:?}");
    assert!(format!("{result:?}").contains("The sum of 17 and 25 is 42."), "{result:?}");
}

/// Every `tools/call` carries the call's idempotency key in `_meta`
/// (`agentloop/idempotencyKey`), and `idempotentHint` makes a tool safe to retry. The server
/// is `tests/fixtures/mcp/step_tools.py` (Python, no dependencies), which logs each call's key.
#[tokio::test]
async fn each_call_carries_its_idempotency_key_in_meta() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("executions.log");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mcp/step_tools.py");
    let config = McpServerConfig::stdio("steps", "python3", [script])
        .env("STEP_LOG", log.to_str().unwrap())
        .env("STEP_DELAY_MS", "0")
        .timeout_secs(20);
    let set = Arc::new(McpToolSet::connect([config]).await.unwrap());
    assert!(set.safe_to_retry("steps__step_a"));
    assert!(!set.safe_to_retry("steps__step_b"));
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("steps__step_b", json!({"n": 2})).with_call_id("call_b"),
        ScriptedTurn::text("done"),
    ]);
    let agent = Agent::builder(model).tool_set(set.clone()).build().unwrap();
    let outcome = agent
        .run_with(
            "go",
            agentloop::RunOptions { run_id: Some("run-meta".into()), ..Default::default() },
        )
        .await
        .unwrap();
    assert_eq!(outcome.answer, "done");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(logged, "step_b run-meta:call_b\n");
}
