//! The API key reaches no output of a run, wherever it comes from — a server that echoes it
//! in its error, a tool that reads it from a file: not stderr, not `--json` stdout, not the
//! journal on disk, not `runs show`, not the next request to the model.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::Event;
use assert_cmd::Command;
use serde_json::json;
use std::path::Path;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const KEY: &str = "sk-test-0123456789abcdefghijKLMN";

fn agentloop(dir: &Path) -> Command {
    let mut command = Command::cargo_bin("agentloop").unwrap();
    command.current_dir(dir).env("HOME", dir).env("XDG_CONFIG_HOME", dir).env("NO_COLOR", "1");
    for name in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "AGENTLOOP_BASE_URL"] {
        command.env_remove(name);
    }
    command.env("MY_KEY", KEY);
    command
}

/// Every file under `dir`, as bytes.
fn files(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
        }
    }
}

/// `agentloop.toml` for an OpenAI-compatible `server` whose key is in `MY_KEY`, then `extra`.
fn write_config(dir: &Path, server: &MockServer, extra: &str) {
    let config = format!(
        "[provider]\nkind = \"openai-compatible\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\n\
         api_key_env = \"MY_KEY\"\n\n{extra}",
        server.uri()
    );
    std::fs::write(dir.join("agentloop.toml"), config).unwrap();
}

/// The run id in `--json` output.
fn run_id_of(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|line| match serde_json::from_str::<Event>(line).ok()? {
            Event::RunStarted { run_id, .. } => Some(run_id),
            _ => None,
        })
        .unwrap()
}

/// No output holds the key (the files that hold it by design aside: the config, `.env`).
fn assert_no_key(outputs: &[(String, Vec<u8>)]) {
    for (name, bytes) in outputs {
        if name.ends_with("agentloop.toml") || name.ends_with(".env") {
            continue;
        }
        let found = bytes.windows(KEY.len()).any(|window| window == KEY.as_bytes());
        assert!(!found, "the key is in {name}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_echoed_api_key_reaches_no_output_of_a_failing_run() {
    let server = MockServer::start().await;
    let body = json!({"error": {"message": format!("Incorrect API key provided: {KEY}. You can \
        find your API key at your account page."), "type": "invalid_request_error",
        "code": "invalid_api_key"}});
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(401).set_body_json(body))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &server, "");
    let mut outputs = Vec::new();
    for json in [true, false] {
        let mut command = agentloop(dir.path());
        command.arg("run");
        if json {
            command.arg("--json");
        }
        let output = command.arg("Hello?").output().unwrap();
        assert!(!output.status.success(), "the run failed");
        outputs.push(("stdout".to_owned(), output.stdout));
        outputs.push(("stderr".to_owned(), output.stderr));
    }
    // The request did carry the key, and the error says what was wrong.
    let sent = server.received_requests().await.unwrap();
    assert!(sent[0].headers.get("authorization").unwrap().to_str().unwrap().ends_with(KEY));
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let stderr = text(&outputs[3].1);
    assert!(stderr.contains("Incorrect API key provided: sk-…KLMN"), "{stderr}");
    let run_id = run_id_of(&text(&outputs[0].1));
    let shown = agentloop(dir.path()).args(["runs", "show", &run_id]).output().unwrap();
    assert!(shown.status.success());
    outputs.push(("runs show".to_owned(), shown.stdout));
    outputs.push(("runs show (stderr)".to_owned(), shown.stderr));
    files(dir.path(), &mut outputs);
    let journaled = outputs.iter().any(|(name, _)| name.contains(".agentloop"));
    assert!(journaled, "the run was journaled on disk");
    assert_no_key(&outputs);
}

/// Asks for `read_file` of `.env`, then answers once the tool result came back.
struct ReadsTheEnvFile;

impl Respond for ReadsTheEnvFile {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        let answered = body["messages"].as_array().unwrap().iter().any(|m| m["role"] == "tool");
        let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
            let chunk = json!({"id": "1", "object": "chat.completion.chunk", "created": 1,
                "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            format!("data: {chunk}\n\n")
        };
        let body = if answered {
            chunk(json!({"role": "assistant", "content": "The file holds one key."}), json!(null))
                + &chunk(json!({}), json!("stop"))
        } else {
            let call = json!({"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\": \".env\"}"}});
            chunk(json!({"role": "assistant", "tool_calls": [call]}), json!(null))
                + &chunk(json!({}), json!("tool_calls"))
        } + "data: [DONE]\n\n";
        ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_a_tool_read_reaches_neither_the_model_nor_any_output() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ReadsTheEnvFile)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".env"), format!("OPENAI_API_KEY={KEY}\n")).unwrap();
    write_config(dir.path(), &server, "[tools]\nenabled = [\"read_file\"]\n");
    let output =
        agentloop(dir.path()).args(["run", "--json", "What is in .env?"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(stdout.contains("The file holds one key."), "{stdout}");
    // The tool's result, as the model got it: the key redacted.
    let sent = server.received_requests().await.unwrap();
    assert_eq!(sent.len(), 2);
    let second = String::from_utf8_lossy(&sent[1].body).into_owned();
    assert!(second.contains("OPENAI_API_KEY=sk-…KLMN"), "{second}");
    let run_id = run_id_of(&stdout);
    let shown = agentloop(dir.path()).args(["runs", "show", &run_id]).output().unwrap();
    assert!(shown.status.success());
    let mut outputs = vec![
        ("stdout".to_owned(), output.stdout),
        ("stderr".to_owned(), output.stderr),
        ("runs show".to_owned(), shown.stdout),
        ("the second request".to_owned(), sent[1].body.clone()),
    ];
    files(dir.path(), &mut outputs);
    assert_no_key(&outputs);
}
