//! `agentloop a2a card|send` and `[[a2a]]` remote agents as tools, against our own A2A
//! server (the echo agent) running in the test process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::store::MemoryStore;
use agentloop_server::{echo, Auth, Server, ServerConfig};
use secrecy::SecretString;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Output;
use std::sync::Arc;

/// The echo agent on a loopback port until dropped.
struct EchoServer {
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn echo_server(auth: Option<Auth>) -> EchoServer {
    let store = Arc::new(MemoryStore::new());
    let served = echo::served_echo(store.clone(), store).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let root = format!("http://{}", listener.local_addr().unwrap());
    let config = ServerConfig { public_url: root.clone(), auth, ..ServerConfig::default() };
    let server = Server::new(vec![served], config).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async move {
        let _ = stopped.await;
    }));
    EchoServer { url: format!("{root}/echo"), stop: Some(stop) }
}

/// Runs the binary (off the runtime's threads) in a clean directory.
async fn agentloop(dir: &Path, args: &[&str]) -> Output {
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"));
    command.args(args).current_dir(dir).env("HOME", dir).env("XDG_CONFIG_HOME", dir);
    command.env("NO_COLOR", "1");
    for name in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "AGENTLOOP_PROVIDER",
        "AGENTLOOP_CONFIG",
        "AGENTLOOP_A2A_TOKEN",
        "ECHO_TOKEN",
    ] {
        command.env_remove(name);
    }
    tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `(exit code, stdout, stderr)`.
async fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let output = agentloop(dir, args).await;
    (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
}

/// The lines of `text` that start with `[`, the state lines, in order.
fn states(text: &str) -> Vec<&str> {
    text.lines().filter(|line| line.starts_with('[')).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn card_shows_the_agent_and_json_prints_it_whole() {
    let server = echo_server(None).await;
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run(dir.path(), &["a2a", "card", &server.url]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("name: echo\ndescription: A deterministic test agent"), "{out}");
    assert!(out.contains("\nversion: "), "{out}");
    assert!(
        out.contains(&format!(
            "interfaces:\n  JSONRPC 1.0  {}\n  HTTP+JSON 1.0  {}\n",
            server.url, server.url
        )),
        "{out}"
    );
    assert!(out.contains("capabilities: streaming yes, push notifications no"), "{out}");
    assert!(out.contains("skills:\n  - echo (echo): A deterministic test agent"), "{out}");
    assert!(out.contains("tags: calculator, ask_user, guarded_action"), "{out}");

    let (code, out, _) = run(dir.path(), &["a2a", "card", &server.url, "--json"]).await;
    assert_eq!(code, 0);
    let card: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(card["name"], "echo");
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["supportedInterfaces"][0]["url"], server.url.as_str());

    // Nothing there: exit code 2 and a sentence, not a panic.
    let (code, _, err) = run(dir.path(), &["a2a", "card", "http://127.0.0.1:9/x"]).await;
    assert_eq!(code, 2);
    assert!(err.starts_with("error: reading the agent card at http://127.0.0.1:9/x"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_streams_states_tool_activity_and_the_answer_once() {
    let server = echo_server(None).await;
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run(dir.path(), &["a2a", "send", &server.url, "stream 3"]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("task run_"), "{out}");
    assert_eq!(states(&out), ["[submitted]", "[working]", "[completed]"], "{out}");
    // The chunks as they came, and the whole answer (the last chunk) not again.
    assert!(out.contains("[working]\nchunk 1 chunk 2 chunk 3\n[completed]\n"), "{out}");

    let (code, out, _) = run(dir.path(), &["a2a", "send", &server.url, "calc 2 + 3"]).await;
    assert_eq!(code, 0);
    assert_eq!(
        states(&out),
        [
            "[submitted]",
            "[working]",
            "[working] Calling calculator",
            "[working] calculator finished",
            "[completed]"
        ],
        "{out}"
    );
    assert!(out.contains("The result is 5.\n"), "{out}");

    // A blocking send prints the answer and the state.
    let (code, out, _) =
        run(dir.path(), &["a2a", "send", &server.url, "hello there", "--no-stream"]).await;
    assert_eq!(code, 0);
    assert!(out.ends_with("hello there\n[completed]\n"), "{out}");

    // Escape sequences from the agent are shown escaped, never sent to the terminal.
    let (code, out, _) =
        run(dir.path(), &["a2a", "send", &server.url, "red \u{1b}[31m alert \u{202e}x"]).await;
    assert_eq!(code, 0);
    assert!(!out.contains('\u{1b}') && !out.contains('\u{202e}'), "{out:?}");
    assert!(out.contains("red \\u{1b}[31m alert \\u{202e}x"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_required_exits_3_with_the_task_and_task_answers_it() {
    let server = echo_server(None).await;
    let dir = tempfile::tempdir().unwrap();
    for stream in [true, false] {
        let mut args = vec!["a2a", "send", &server.url, "ask What is your name?"];
        if !stream {
            args.push("--no-stream");
        }
        let (code, out, err) = run(dir.path(), &args).await;
        assert_eq!(code, 3, "{out}{err}");
        assert_eq!(states(&out).last(), Some(&"[input-required] What is your name?"), "{out}");
        let task_id = out.strip_prefix("task ").unwrap().split(' ').next().unwrap().to_owned();
        assert!(
            err.contains(&format!(
                "agentloop a2a send {} \"<answer>\" --task {task_id}",
                server.url
            )),
            "{err}"
        );

        let mut args = vec!["a2a", "send", &server.url, "Ada", "--task", &task_id];
        if !stream {
            args.push("--no-stream");
        }
        let (code, out, err) = run(dir.path(), &args).await;
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("Thank you. You answered: Ada\n[completed]\n"), "{out}");
        // The snapshot of the state it answered is not shown as news.
        assert!(!out.contains("[input-required]"), "{out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_task_exits_1_and_json_prints_every_update() {
    let server = echo_server(None).await;
    let dir = tempfile::tempdir().unwrap();
    let (code, out, _) = run(dir.path(), &["a2a", "send", &server.url, "fail"]).await;
    assert_eq!(code, 1, "{out}");
    let last = *states(&out).last().unwrap();
    assert!(last.starts_with("[failed] ") && last.contains("asked to fail"), "{out}");

    let (code, out, _) = run(dir.path(), &["a2a", "send", &server.url, "stream 2", "--json"]).await;
    assert_eq!(code, 0);
    let updates: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(updates[0]["task"]["id"].is_string(), "{out}");
    assert_eq!(updates.last().unwrap()["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");
    let chunks = updates.iter().filter(|u| u.get("artifactUpdate").is_some()).count();
    assert_eq!(chunks, 3, "two chunks and the whole answer: {out}");

    // Unknown task: the agent's error, exit code 2.
    let (code, _, err) =
        run(dir.path(), &["a2a", "send", &server.url, "hi", "--task", "nope"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("-32001"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_reaches_the_agent_and_is_never_shown() {
    let token = "s3cret-token-value";
    let server = echo_server(Some(Auth::Bearer(vec![SecretString::from(token)]))).await;
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run(dir.path(), &["a2a", "send", &server.url, "hi"]).await;
    assert_eq!(code, 2, "{out}");
    assert!(err.contains("401"), "{err}");
    let output = agentloop(dir.path(), &["a2a", "send", &server.url, "hi", "--token", token]).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let all = text(&output.stdout) + &text(&output.stderr);
    assert!(!all.contains(token));
}

/// An `agentloop.toml` in `dir` with `tables` (the `[[a2a]]` tables), a memory store and
/// the scripted provider playing `turns`.
fn config_with(dir: &Path, tables: &str, turns: Value) {
    let script = dir.join("script.json");
    std::fs::write(&script, turns.to_string()).unwrap();
    let text = format!(
        "[provider]\nkind = \"scripted\"\nscript = \"{}\"\n\n[store]\nkind = \"memory\"\n\n{tables}",
        script.display()
    );
    std::fs::write(dir.join("agentloop.toml"), text).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_agent_in_the_config_is_a_tool_of_the_run() {
    let server = echo_server(Some(Auth::Bearer(vec![SecretString::from("tok-123")]))).await;
    let dir = tempfile::tempdir().unwrap();
    let tables = format!(
        "[[a2a]]\nurl = \"{}\"\nname = \"echo_agent\"\ntoken_env = \"ECHO_TOKEN\"\ntimeout_secs = 30\n",
        server.url
    );
    config_with(
        dir.path(),
        &tables,
        json!([
            {"text": "", "tool_calls": [{"name": "echo_agent", "arguments": {"message": "calc 6 * 7"}}]},
            {"text": "The echo agent says 42."}
        ]),
    );

    // Without the token's variable: the table's file and line, not a connection attempt.
    let (code, _, err) = run(dir.path(), &["tools", "list", "--tools", "calculator"]).await;
    assert_eq!(code, 2);
    assert_eq!(
        err.trim(),
        "error: agentloop.toml:8: [[a2a]] token_env: the variable ECHO_TOKEN is not set"
    );

    let with_token = |args: &[&str]| {
        let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"));
        command.args(args).current_dir(dir.path()).env("HOME", dir.path());
        command.env("XDG_CONFIG_HOME", dir.path()).env("NO_COLOR", "1");
        command.env_remove("AGENTLOOP_PROVIDER").env_remove("AGENTLOOP_CONFIG");
        command.env("ECHO_TOKEN", "tok-123");
        async move {
            let output =
                tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
            (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
        }
    };
    let (code, out, err) = with_token(&["tools", "list", "--tools", "calculator"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\necho_agent\n  Sends a request to the remote agent 'echo'"), "{out}");

    let (code, out, err) = with_token(&["run", "Ask the echo agent for 6 * 7."]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("← echo_agent: The result is 42."), "{out}");
    assert!(out.contains("The echo agent says 42."), "{out}");
    assert!(!out.contains("tok-123") && !err.contains("tok-123"));

    // A remote agent that is not there: the table's line and the reason.
    config_with(dir.path(), "[[a2a]]\nurl = \"http://127.0.0.1:9/nothing\"\n", json!([]));
    let (code, _, err) = run(dir.path(), &["tools", "list"]).await;
    assert_eq!(code, 2);
    assert!(
        err.starts_with(
            "error: agentloop.toml:8: [[a2a]] the agent at http://127.0.0.1:9/nothing: "
        ),
        "{err}"
    );
}
