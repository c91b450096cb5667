//! A server that echoes the API key in its error: the key reaches no output of a failing run —
//! not stderr, not `--json` stdout, not the journal on disk, not `runs show`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::Event;
use assert_cmd::Command;
use serde_json::json;
use std::path::Path;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

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
    std::fs::write(
        dir.path().join("agentloop.toml"),
        format!(
            "[provider]\nkind = \"openai-compatible\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\n\
             api_key_env = \"MY_KEY\"\n",
            server.uri()
        ),
    )
    .unwrap();
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
    let run_id = text(&outputs[0].1)
        .lines()
        .find_map(|line| match serde_json::from_str::<Event>(line).ok()? {
            Event::RunStarted { run_id, .. } => Some(run_id),
            _ => None,
        })
        .unwrap();
    let shown = agentloop(dir.path()).args(["runs", "show", &run_id]).output().unwrap();
    assert!(shown.status.success());
    outputs.push(("runs show".to_owned(), shown.stdout));
    outputs.push(("runs show (stderr)".to_owned(), shown.stderr));
    files(dir.path(), &mut outputs);
    let journaled = outputs.iter().any(|(name, _)| name.contains(".agentloop"));
    assert!(journaled, "the run was journaled on disk");
    for (name, bytes) in &outputs {
        if name.ends_with("agentloop.toml") {
            continue;
        }
        let found = bytes.windows(KEY.len()).any(|window| window == KEY.as_bytes());
        assert!(!found, "the key is in {name}");
    }
}
