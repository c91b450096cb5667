//! Real A2A peers from PyPI against our server: the official Python client (a2a-sdk 1.x,
//! `scripts/a2a/client_suite.py`, push notifications to its webhook included) and the
//! a2a-proof conformance runner (`scripts/a2a/echo-proof.yaml`, push delivery included),
//! over both bindings. They come from
//! `scripts/a2a/install.sh`, which prints `AGENTLOOP_A2A_PYTHON`; without it these tests
//! are skipped (and fail when `AGENTLOOP_A2A_REQUIRED=1`, as in CI).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn python() -> Option<PathBuf> {
    match std::env::var_os("AGENTLOOP_A2A_PYTHON") {
        Some(python) => Some(PathBuf::from(python)),
        None if std::env::var("AGENTLOOP_A2A_REQUIRED").as_deref() == Ok("1") => {
            panic!("AGENTLOOP_A2A_REQUIRED=1 but AGENTLOOP_A2A_PYTHON is not set: run scripts/a2a/install.sh")
        }
        None => {
            eprintln!("skipped: AGENTLOOP_A2A_PYTHON is not set (scripts/a2a/install.sh)");
            None
        }
    }
}

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/a2a")
}

/// Runs a command off the runtime and returns whether it succeeded, printing its output.
async fn run(mut command: Command) -> bool {
    let output = tokio::task::spawn_blocking(move || command.output()).await.unwrap().unwrap();
    println!("{}", String::from_utf8_lossy(&output.stdout));
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    output.status.success()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_client_drives_every_method_on_both_bindings() {
    let Some(python) = python() else { return };
    // Webhooks on loopback allowed, for the push scenario.
    let push_allow = agentloop_server::push::PushAllow::parse(["127.0.0.1"]).unwrap();
    let config =
        agentloop_server::ServerConfig { push_allow, ..agentloop_server::ServerConfig::default() };
    let server = common::start_with(None, config).await;
    for binding in ["JSONRPC", "HTTP+JSON"] {
        let mut command = Command::new(&python);
        command.arg(scripts().join("client_suite.py")).arg(&server.url).args([
            "--binding",
            binding,
            "--push",
        ]);
        assert!(run(command).await, "client_suite.py failed on {binding}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_proof_passes_on_both_bindings() {
    let Some(python) = python() else { return };
    let push_allow = agentloop_server::push::PushAllow::parse(["127.0.0.1"]).unwrap();
    let config =
        agentloop_server::ServerConfig { push_allow, ..agentloop_server::ServerConfig::default() };
    let server = common::start_with(None, config).await;
    let contract = std::fs::read_to_string(scripts().join("echo-proof.yaml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a2a-proof.yaml");
    std::fs::write(&path, contract.replace("http://127.0.0.1:8080/echo", &server.url)).unwrap();
    let proof = python.parent().unwrap().join("a2a-proof");
    for binding in ["JSONRPC", "HTTP+JSON"] {
        let mut command = Command::new(&proof);
        command.arg("run").arg(&path).args(["--transport", binding]).current_dir(dir.path());
        assert!(run(command).await, "a2a-proof failed on {binding}");
    }
}
