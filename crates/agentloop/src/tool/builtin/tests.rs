#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::tool::{DynTool, ToolContext, ToolError, ToolOutput};
use serde_json::json;
use std::time::Duration;

fn ctx() -> ToolContext {
    ToolContext::detached("c")
}

#[test]
fn the_calculator_evaluates_expressions_exactly() {
    assert_eq!(evaluate("17 * 23"), Ok(391.0));
    assert_eq!(evaluate("(2 + 3) ^ 2 / 4"), Ok(6.25));
    assert_eq!(evaluate("-2 ^ 2"), Ok(4.0), "unary minus binds tighter than ^ here");
    assert_eq!(evaluate("2 ^ 3 ^ 2"), Ok(512.0), "^ is right-associative");
    assert_eq!(evaluate("6 ** 3"), Ok(216.0), "** is ^");
    assert_eq!(evaluate("2 * 3 ** 2"), Ok(18.0));
    assert_eq!(evaluate("sqrt(16) + abs(-3) + 10 % 4"), Ok(9.0));
    assert_eq!(evaluate("1_000 * 1.5"), Ok(1500.0));
    assert_eq!(evaluate("1 / 0"), Err("division by zero".into()));
    assert_eq!(evaluate("2 +"), Err("the expression ended too early".into()));
    assert_eq!(evaluate("2 $ 3"), Err("unexpected '$' at position 3".into()));
    assert_eq!(evaluate("sqrt(-1)"), Err("sqrt of a negative number".into()));
    assert_eq!(evaluate("foo(1)"), Err("unknown function 'foo'".into()));
    assert!(
        evaluate(&"(".repeat(10_000)).is_err(),
        "deep nesting is refused, not a stack overflow"
    );
}

#[tokio::test]
async fn the_calculator_tool() {
    assert_eq!(
        Calculator.call_json(json!({"expression": "17*23"}), ctx()).await,
        Ok(ToolOutput::Value(json!(391)))
    );
    assert_eq!(
        Calculator.call_json(json!({"expression": "7 / 2"}), ctx()).await,
        Ok(ToolOutput::Value(json!(3.5)))
    );
    assert_eq!(number(1e300), Ok(serde_json::Number::from_f64(1e300).unwrap()));
    assert!(matches!(
        Calculator.call_json(json!({"expression": "1/0"}), ctx()).await,
        Err(ToolError::Failed(_))
    ));
}

struct Sandbox {
    _dir: tempfile::TempDir,
    workspace: Workspace,
    outside: std::path::PathBuf,
}

fn sandbox() -> Sandbox {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("notes.txt"), "hello").unwrap();
    std::fs::write(root.join("sub/deep.txt"), "deep").unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("link_to_secret")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("link_to_outside")).unwrap();
    std::os::unix::fs::symlink(root.join("notes.txt"), root.join("link_inside")).unwrap();
    Sandbox { workspace: Workspace::new(&root).unwrap(), outside, _dir: dir }
}

async fn read(workspace: &Workspace, path: &str) -> Result<ToolOutput, ToolError> {
    ReadFile(workspace.clone()).call_json(json!({"path": path}), ctx()).await
}

#[tokio::test]
async fn read_file_stays_in_the_workspace() {
    let s = sandbox();
    assert_eq!(read(&s.workspace, "notes.txt").await, Ok(ToolOutput::Value(json!("hello"))));
    assert_eq!(
        read(&s.workspace, "./sub/../sub/deep.txt").await,
        Ok(ToolOutput::Value(json!("deep")))
    );
    assert_eq!(
        read(&s.workspace, "link_inside").await,
        Ok(ToolOutput::Value(json!("hello"))),
        "a symlink inside is fine"
    );
    for (path, expected) in [
        ("../outside/secret.txt", "is outside the workspace"),
        ("sub/../../outside/secret.txt", "is outside the workspace"),
        ("link_to_secret", "is outside the workspace"),
        ("link_to_outside/secret.txt", "is outside the workspace"),
        ("/etc/passwd", "absolute paths are not allowed"),
    ] {
        let Err(ToolError::Failed(message)) = read(&s.workspace, path).await else {
            panic!("{path} was read")
        };
        assert!(message.contains(expected), "{path}: {message}");
    }
    let Err(ToolError::Failed(message)) = read(&s.workspace, "missing.txt").await else { panic!() };
    assert!(message.contains("missing.txt"));
}

#[tokio::test]
async fn list_dir_lists_and_refuses_escapes() {
    let s = sandbox();
    let listed = ListDir(s.workspace.clone()).call_json(json!({}), ctx()).await.unwrap();
    assert_eq!(
        listed,
        ToolOutput::Value(json!([
            "link_inside@",
            "link_to_outside@",
            "link_to_secret@",
            "notes.txt",
            "sub/"
        ]))
    );
    assert!(ListDir(s.workspace.clone()).call_json(json!({"path": ".."}), ctx()).await.is_err());
    assert!(ListDir(s.workspace.clone())
        .call_json(json!({"path": "link_to_outside"}), ctx())
        .await
        .is_err());
}

#[tokio::test]
async fn write_file_creates_inside_and_refuses_outside() {
    let s = sandbox();
    let tool = WriteFile(s.workspace.clone());
    let write = |path: &str, content: &str| {
        tool.call_json(json!({"path": path, "content": content}), ctx())
    };
    assert!(write("new/dir/file.txt", "x").await.is_ok());
    assert_eq!(std::fs::read_to_string(s.workspace.root().join("new/dir/file.txt")).unwrap(), "x");
    let appended = WriteFile(s.workspace.clone())
        .call_json(json!({"path": "new/dir/file.txt", "content": "y", "append": true}), ctx())
        .await;
    assert!(appended.is_ok());
    assert_eq!(std::fs::read_to_string(s.workspace.root().join("new/dir/file.txt")).unwrap(), "xy");
    for path in
        ["../outside/evil.txt", "link_to_secret", "link_to_outside/evil.txt", "/tmp/evil.txt", "."]
    {
        assert!(write(path, "evil").await.is_err(), "{path} was written");
    }
    assert_eq!(
        std::fs::read_to_string(s.outside.join("secret.txt")).unwrap(),
        "secret",
        "untouched"
    );
    assert!(!s.outside.join("evil.txt").exists());
}

#[tokio::test]
async fn http_get_fetches_allowed_hosts_only() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("GET"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_string("x".repeat(100)))
        .mount(&server)
        .await;
    let tool = HttpGet::new(["127.0.0.1"]).max_bytes(10);
    let ok = tool.call_json(json!({"url": format!("{}/page", server.uri())}), ctx()).await.unwrap();
    let ToolOutput::Value(text) = ok else { panic!() };
    let text = text.as_str().unwrap().to_owned();
    assert!(text.starts_with("HTTP 200\nxxxxxxxxxx\n[… body cut at 10 bytes]"), "{text}");
    let refused = tool.call_json(json!({"url": "https://example.com/"}), ctx()).await;
    assert!(
        matches!(refused, Err(ToolError::Failed(m)) if m.contains("host 'example.com' is not allowed"))
    );
    let scheme = tool.call_json(json!({"url": "file:///etc/passwd"}), ctx()).await;
    assert!(matches!(scheme, Err(ToolError::Failed(m)) if m.contains("only http and https")));
    let subdomains = HttpGet::new([".example.com"]);
    assert!(
        subdomains.allowed("api.example.com")
            && subdomains.allowed("example.com")
            && !subdomains.allowed("evilexample.com")
    );
}

#[tokio::test]
async fn shell_runs_with_a_timeout_and_an_output_limit() {
    let s = sandbox();
    let shell = Shell::new(s.workspace.root()).max_output(5);
    let out = shell
        .call_json(json!({"command": "echo hello world; echo oops >&2; exit 3"}), ctx())
        .await
        .unwrap();
    let ToolOutput::Value(text) = out else { panic!() };
    assert_eq!(text, json!("exit code: 3\nstdout:\nhello\n[… 7 more bytes cut]\nstderr:\noops\n"));
    // The executor enforces the tool's own timeout and the child is killed.
    let mut registry = crate::tool::ToolRegistry::new();
    registry.register(Shell::new(s.workspace.root()).timeout(Duration::from_millis(100))).unwrap();
    let executor = crate::tool::ToolExecutor::new(
        vec![std::sync::Arc::new(registry)],
        Duration::from_secs(30),
    )
    .unwrap();
    let marker = s.workspace.root().join("finished");
    let command = format!("sleep 2; touch {}", marker.display());
    let started = std::time::Instant::now();
    let result = executor.execute("shell", Ok(json!({"command": command})), ctx()).await;
    assert_eq!(result.result, Err(ToolError::Timeout(100)));
    assert!(started.elapsed() < Duration::from_secs(1));
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(!marker.exists(), "the killed command did not finish");
}

#[tokio::test]
async fn shell_kills_the_commands_whole_process_group() {
    let s = sandbox();
    let root = s.workspace.root();
    let shell = Shell::new(root);
    // A timeout (the executor drops the call) kills `sh`'s children too: the subshell that
    // would touch the marker after sleeping dies with `sh`.
    let timed_out = root.join("after-timeout");
    let command = format!("(sleep 2; touch {}) & wait", timed_out.display());
    let call = shell.call_json(json!({"command": command}), ctx());
    assert!(tokio::time::timeout(Duration::from_millis(300), call).await.is_err());
    // What the command leaves running when `sh` exits is stopped, and not waited for.
    let left = root.join("left-running");
    let command = format!("(sleep 2; touch {}) & echo started", left.display());
    let started = std::time::Instant::now();
    let out = shell.call_json(json!({"command": command}), ctx()).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    let ToolOutput::Value(text) = out else { panic!() };
    assert_eq!(text, json!("exit code: 0\nstdout:\nstarted\n\nstderr:\n"));
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(!timed_out.exists(), "a child of the timed-out command ran on");
    assert!(!left.exists(), "a background process of the command ran on");
}

#[test]
fn the_expression_pattern_takes_what_the_parser_takes_and_nothing_half_written() {
    let schema = crate::tool::schema::schema_for::<CalculatorArgs>();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let valid =
        |expression: &str| validator.is_valid(&serde_json::json!({ "expression": expression }));
    for good in [
        "17 * 23",
        "sqrt(144)",
        "(3 + 4) * 5",
        "2 ** 10",
        "-3 + 4",
        "((1+2)*(3+4))",
        "abs(-3)",
        "20 / 100 * 150",
        "2.5 * 4",
        "999999999999999 + 0.123456",
    ] {
        assert!(valid(good), "{good}");
        assert!(evaluate(good).is_ok(), "{good}");
    }
    let long = "1".repeat(16);
    for bad in ["256 *", "sqrt(144", "(3 + 4", "2 ^", "", "1..2", "((((1))))", "seventeen", &long] {
        assert!(!valid(bad), "{bad}");
    }
}
