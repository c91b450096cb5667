//! `bench-otel`'s command line: `--help` prints the options; a misspelt option or one
//! without its value is refused before anything is measured (it would otherwise measure
//! the defaults and look like a result).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bench-otel"))
        .args(args)
        .env_remove("AGENTLOOP_OTEL_PYTHON")
        .output()
        .unwrap()
}

#[test]
fn help_lists_every_option() {
    let output = bench(&["--help"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    for option in [
        "--http",
        "--recorded",
        "--runs",
        "--warmup",
        "--reps",
        "--variants",
        "--endpoint",
        "--queue",
        "--batch",
        "--export-cpu",
        "--block",
        "--json",
        "--smoke",
    ] {
        assert!(stdout.contains(option), "{option} missing from:\n{stdout}");
    }
}

#[test]
fn a_misspelt_option_is_refused() {
    let output = bench(&["--run", "100", "--variants", "off"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(r#"unknown option "--run""#), "{stderr}");
    assert!(!stderr.contains("rep 0"), "it measured: {stderr}");
}

#[test]
fn an_option_without_its_value_is_refused() {
    let output = bench(&["--variants", "off", "--runs"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--runs needs a value"), "{stderr}");
}
