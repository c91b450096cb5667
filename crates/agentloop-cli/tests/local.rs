//! The README's first command, for real: `agentloop run` with no provider configured uses the
//! embedded local model (SmolLM2-135M from the model cache), which calls the calculator and
//! answers. Skipped with a notice when the model is not in the cache (`agentloop model fetch`
//! or `.ci/run` puts it there).
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
