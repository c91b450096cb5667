//! Starts `scripts/a2a/py_agent.py` (the official Python a2a-sdk server framework) on a free
//! 127.0.0.1 port. Without `AGENTLOOP_A2A_PYTHON` (see scripts/a2a/install.sh) a test is
//! skipped with a printed reason, unless `AGENTLOOP_A2A_REQUIRED=1`, which makes it fail.

#![allow(dead_code, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A running Python agent; killed when dropped.
pub struct PyAgent {
    _child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
}

/// The Python agent, or `None` (skip) when no Python peer is configured. `options`: a
/// binding name (`JSONRPC`, `HTTP+JSON`; the card lists those given, in order; none: both,
/// JSON-RPC first) or `--no-streaming`.
pub async fn py_agent(options: &[&str]) -> Option<PyAgent> {
    let python = match std::env::var("AGENTLOOP_A2A_PYTHON") {
        Ok(python) if !python.trim().is_empty() => python,
        _ => {
            assert!(
                std::env::var("AGENTLOOP_A2A_REQUIRED").as_deref() != Ok("1"),
                "AGENTLOOP_A2A_REQUIRED=1 but AGENTLOOP_A2A_PYTHON is not set: run \
                 scripts/a2a/install.sh and export what it prints"
            );
            eprintln!(
                "skipped: AGENTLOOP_A2A_PYTHON is not set (run scripts/a2a/install.sh and export \
                 what it prints to test against the Python a2a-sdk server)"
            );
            return None;
        }
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/a2a/py_agent.py");
    let mut command = Command::new(python);
    command.arg(script).args(["--host", "127.0.0.1", "--port", "0"]);
    for option in options {
        if option.starts_with("--") {
            command.arg(option);
        } else {
            command.args(["--binding", option]);
        }
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start py_agent.py");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("py_agent.py did not start within 60 s")
        .expect("read py_agent.py output")
        .expect("py_agent.py exited before it was ready");
    let base = ready.strip_prefix("READY ").expect("READY line").trim().to_owned();
    // Keep reading its stdout so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Some(PyAgent { _child: child, base })
}
