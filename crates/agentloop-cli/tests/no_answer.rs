//! Runs that end without an answer are never silent: `run`, `run --json` and `chat` say why in
//! a sentence on stderr and exit with code 3 (the model's output limit, a `length` the run
//! cannot attribute, an empty answer, a limit reached before the wind-down wrote one, a cut-off
//! answer); `run --json` keeps stdout to the events, whose terminal one names the stop reason.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::{Event, StopReason};
use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::json;
use std::path::Path;

const NO_ANSWER: i32 = 3;

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

/// A mock OpenAI-compatible server whose model writes nothing and stops with `length` after
/// `output` tokens (as the small local model did at its 512-token default).
async fn truncating_server(output: u64) -> wiremock::MockServer {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    let chunk = |body: serde_json::Value| format!("data: {body}\n\n");
    let choice = |delta: serde_json::Value, finish: serde_json::Value| {
        json!({"id": "1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let body = chunk(choice(json!({"role": "assistant", "content": ""}), json!(null)))
        + &chunk(choice(json!({}), json!("length")))
        + &chunk(json!({"id": "1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                        "choices": [],
                        "usage": {"prompt_tokens": 40, "completion_tokens": output, "total_tokens": 40 + output}}))
        + "data: [DONE]\n\n";
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&server)
        .await;
    server
}

/// Runs the binary against `server` with these arguments (and stdin) off the async runtime.
async fn against(
    server: &wiremock::MockServer,
    args: &'static [&'static str],
    stdin: Option<&'static str>,
) -> (std::process::Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.uri());
    let path = dir.path().to_owned();
    let output = tokio::task::spawn_blocking(move || {
        let mut command = agentloop(&path);
        command.env("AGENTLOOP_BASE_URL", base).args(["--model", "m"]).args(args);
        if let Some(stdin) = stdin {
            command.write_stdin(stdin);
        }
        command.output().unwrap()
    })
    .await
    .unwrap();
    (output, dir)
}

const AT_THE_LIMIT: &str =
    "the model stopped at its 512-token limit without an answer; try --max-tokens or a larger model";

#[tokio::test]
async fn run_says_the_model_hit_its_output_limit_and_exits_non_zero() {
    let server = truncating_server(512).await;
    let (output, _dir) =
        against(&server, &["run", "--max-tokens", "512", "What is 12 times 12?"], None).await;
    let (stdout, stderr) =
        (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(NO_ANSWER), "{stdout}\n{stderr}");
    assert!(stderr.contains(&format!("no answer: {AT_THE_LIMIT}")), "{stderr}");
    assert!(stdout.contains("[output limit · 1 iteration · 0 tool calls"), "{stdout}");
    // The flag reached the request.
    let requests = server.received_requests().await.unwrap();
    let sent: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(sent["max_tokens"], 512, "{sent}");
}

#[tokio::test]
async fn run_json_keeps_stdout_to_the_events_and_the_terminal_one_says_why() {
    let server = truncating_server(512).await;
    let (output, _dir) =
        against(&server, &["run", "--json", "--max-tokens", "512", "What is 12 times 12?"], None)
            .await;
    assert_eq!(output.status.code(), Some(NO_ANSWER));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let events: Vec<Event> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect();
    let terminal = events.iter().rev().find(|e| e.outcome().is_some()).unwrap();
    assert_eq!(terminal.kind(), "run_finished");
    let outcome = terminal.outcome().unwrap();
    assert_eq!(outcome.stop_reason, StopReason::OutputLimit { max_tokens: 512 });
    assert!(!outcome.is_success() && !outcome.has_answer());
    assert!(stdout.contains(r#""stop_reason":{"kind":"output_limit","max_tokens":512}"#));
    assert!(String::from_utf8_lossy(&output.stderr).contains(AT_THE_LIMIT));
}

#[tokio::test]
async fn chat_says_it_too_and_exits_with_the_last_turns_code() {
    let server = truncating_server(512).await;
    let (output, _dir) = against(
        &server,
        &["chat", "--max-tokens", "512", "--session", "s"],
        Some("What is 12 times 12?\n/exit\n"),
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(NO_ANSWER), "{stderr}");
    assert!(stderr.contains(AT_THE_LIMIT), "{stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("[output limit ·"));
}

#[tokio::test]
async fn a_length_the_run_cannot_attribute_is_explained_too() {
    // No --max-tokens: the run cannot tell the output limit from a full context.
    let server = truncating_server(512).await;
    let (output, _dir) = against(&server, &["run", "What is 12 times 12?"], None).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(NO_ANSWER), "{stderr}");
    assert!(
        stderr.contains(
            "no answer: the model stopped after 512 output tokens without an answer \
             (finish reason `length`: it reached its output-token limit or filled its context \
             window"
        ),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("[context limit ·"));
}

#[test]
fn a_cut_off_answer_is_shown_once_and_called_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    // 20 characters: the scripted model reports 5 output tokens.
    let script = script(dir.path(), json!([{"text": "The answer is a long", "finish": "length"}]));
    agentloop(dir.path())
        .args(["--provider", "scripted", "--script", &script, "run", "--max-tokens", "5", "q"])
        .assert()
        .code(NO_ANSWER)
        .stdout(predicate::str::contains("The answer is a long").count(1))
        .stdout(predicate::str::contains("[output limit ·"))
        .stderr(predicate::str::contains(
            "incomplete answer: the model stopped at its 5-token limit before it finished",
        ));
}

#[test]
fn an_empty_answer_a_fallback_and_a_filtered_answer_are_no_answers() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            json!([{"text": ""}]),
            &[][..],
            "no answer: the model ended its turn without writing an answer",
        ),
        (
            json!([
                {"tool_calls": [{"name": "calculator", "arguments": {"expression": "12 * 12"}}]},
                {"text": ""}
            ]),
            &["--max-iterations", "1"][..],
            "no answer: the run reached its iteration limit before the model wrote an answer",
        ),
        (
            json!([{"text": "", "finish": "content_filter"}]),
            &[][..],
            "no answer: the provider filtered the model's output",
        ),
    ];
    for (turns, flags, message) in cases {
        let script = script(dir.path(), turns);
        agentloop(dir.path())
            .args(["--provider", "scripted", "--script", &script, "run"])
            .args(flags)
            .arg("What is 12 times 12?")
            .assert()
            .code(NO_ANSWER)
            .stderr(predicate::str::contains(message));
    }
}

#[test]
fn an_answer_still_exits_zero_without_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let script = script(dir.path(), json!([{"text": "144"}]));
    agentloop(dir.path())
        .args(["--provider", "scripted", "--script", &script, "run", "--max-tokens", "64", "q"])
        .assert()
        .success()
        .stdout(predicate::str::contains("144"))
        .stderr(predicate::str::contains("answer:").not());
}

#[test]
fn max_tokens_must_be_positive() {
    let dir = tempfile::tempdir().unwrap();
    agentloop(dir.path())
        .args(["--provider", "scripted", "run", "--max-tokens", "0", "q"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--max-tokens"));
}

/// A port nothing listens on.
fn closed_port() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// `run "What is 2 + 2?"` (with `extra` flags) against the OpenAI-compatible server at
/// `address`, in a fresh directory holding `config` as its agentloop.toml: the output and how
/// long it took.
fn ask(
    address: std::net::SocketAddr,
    config: &str,
    extra: &[&str],
) -> (std::process::Output, std::time::Duration) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("agentloop.toml"), config).unwrap();
    let url = format!("http://{address}/v1");
    let started = std::time::Instant::now();
    let output = agentloop(dir.path())
        .args(["run", "--provider", "openai-compatible", "--model", "m", "--base-url", &url])
        .args(extra)
        .arg("What is 2 + 2?")
        .output()
        .unwrap();
    (output, started.elapsed())
}

#[test]
fn a_model_that_cannot_be_reached_fails_fast_with_its_cause_not_an_answer() {
    let (output, elapsed) = ask(closed_port(), "", &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "a failure: {stderr}");
    assert!(stderr.contains("the model's server could not be reached"), "{stderr}");
    assert!(stderr.contains("Connection refused"), "the cause: {stderr}");
    assert!(stderr.contains("(3 requests in"), "what was tried: {stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!stdout.contains("limits"), "no canned text as an answer: {stdout}");
    // The default budget: 3 requests within 10 s (backoff 1-2 s, then 2-4 s).
    assert!(elapsed < std::time::Duration::from_secs(10), "{elapsed:?}");
}

#[test]
fn run_json_of_an_unreachable_model_ends_with_a_failure_whose_answer_is_empty() {
    let (output, _) = ask(closed_port(), "", &["--json"]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let events: Vec<Event> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let Some(Event::RunFailed { error, outcome }) =
        events.iter().rev().find(|e| e.outcome().is_some())
    else {
        panic!("a run_failed event: {stdout}")
    };
    assert_eq!(outcome.answer, "", "no fallback text as the answer");
    assert!(
        error.contains("could not be reached") && error.contains("Connection refused"),
        "{error}"
    );
    let retries = events.iter().filter(|e| e.kind() == "model_retrying").count();
    assert_eq!(retries, 2, "3 requests, not 5 attempts × 3 calls");
}

/// A server that answers with event-stream headers, then sends one byte a second and never
/// completes an event (for at most a minute).
fn trickling_server() -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut request = [0u8; 65536];
                let _ = stream.read(&mut request);
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";
                if stream.write_all(head.as_bytes()).is_err() {
                    return;
                }
                for _ in 0..60 {
                    if stream.write_all(b"d").and_then(|()| stream.flush()).is_err() {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_secs(1));
                }
            });
        }
    });
    address
}

#[test]
fn max_duration_is_a_deadline_even_for_a_server_that_trickles() {
    let (output, elapsed) = ask(trickling_server(), "[limits]\nmax_duration_secs = 3\n", &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Within max_duration + 5 s (the stream's idle timeout is 300 s).
    assert!(elapsed < std::time::Duration::from_secs(3 + 5), "{elapsed:?}: {stderr}");
    assert_eq!(output.status.code(), Some(NO_ANSWER), "{stderr}");
    assert!(stderr.contains("no answer: the run reached its time limit"), "{stderr}");
}

#[test]
fn the_stream_idle_timeout_is_set_in_the_provider_table() {
    let config = "[provider]\nidle_timeout_secs = 1\n[limits]\nmodel_retries = 0\n";
    let (output, elapsed) = ask(trickling_server(), config, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Three calls in a row time out after 1 s each; the run fails with the last error.
    assert!(elapsed < std::time::Duration::from_secs(10), "{elapsed:?}");
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("3 calls in a row") && stderr.contains("timeout"), "{stderr}");
}
