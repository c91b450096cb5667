//! The benchmark's smoke run: `bench-overhead --smoke` starts `mockllm` on a free port and
//! runs the trivial client, the floor and agentloop drivers (non-streaming and streaming,
//! sequential, concurrent, the history scenario) with tiny parameters; the runner fails when
//! the server did not see exactly the requests each driver had to make.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn every_driver_does_the_expected_work() {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_bench-overhead"))
        .args(["--smoke", "--no-pin"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "smoke run failed:\n{stdout}\n{stderr}");
    assert!(!stderr.contains("INVALID"), "{stderr}");
    for scenario in [
        "sequential, K=3, latency 0, 3 runs, non-streaming",
        "sequential, K=3, latency 0, 3 runs, streaming",
        "C=20 concurrent agents",
        "C=50 concurrent agents",
        "history growth: one agent, 30 tool rounds",
    ] {
        assert!(stdout.contains(scenario), "no row for {scenario}:\n{stdout}");
    }
    // Each driver process logs its round trips: 2 sequential modes x 2 drivers x 3 runs x 4
    // rounds, and the concurrent and history runs.
    let log: Vec<&str> =
        stdout.lines().filter(|l| l.starts_with("floor ") || l.starts_with("agentloop ")).collect();
    assert_eq!(log.len(), 10, "{stdout}");
    assert_eq!(log.iter().filter(|l| l.contains("c=1 k=3 rounds=12 ")).count(), 4, "{stdout}");
    assert_eq!(log.iter().filter(|l| l.contains("c=20 k=2 rounds=60 ")).count(), 2, "{stdout}");
    assert_eq!(log.iter().filter(|l| l.contains("c=50 k=2 rounds=150 ")).count(), 2, "{stdout}");
    assert_eq!(log.iter().filter(|l| l.contains("c=1 k=30 rounds=31 ")).count(), 2, "{stdout}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the smoke run took {:?}",
        started.elapsed()
    );
}
