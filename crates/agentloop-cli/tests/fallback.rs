//! `[[fallback]]` chains and `[agent] cache` from the config file, end to end: the first
//! provider cannot be reached, the next one answers, the journal and `runs show` name it and
//! its own price is the run's cost; a broken member is named with its file and line.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::Event;
use common::cli as agentloop;
use predicates::prelude::*;
use serde_json::json;

/// A port on 127.0.0.1 that nothing listens on (bound, then closed).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn an_unreachable_provider_falls_back_and_the_member_is_journaled_shown_and_priced() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("script.json"),
        json!([{"text": "from the fallback"}]).to_string(),
    )
    .unwrap();
    let port = closed_port();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        format!(
            r#"[agent]
cache = "off"
cache_key = "support-bot"

[provider]
kind = "openai-compatible"
base_url = "http://127.0.0.1:{port}/v1"
model = "primary-model"

[limits]
input_price_per_mtok = 100.0
output_price_per_mtok = 100.0

[[fallback]]
kind = "scripted"
script = "script.json"
input_price_per_mtok = 1000000.0
output_price_per_mtok = 0.0
"#
        ),
    )
    .unwrap();
    let output = agentloop(dir.path()).args(["run", "--json", "hello there"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let events: Vec<Event> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let run_id = events
        .iter()
        .find_map(|e| match e {
            Event::RunStarted { run_id, config, .. } => {
                // The agent's cache policy is the run's.
                let cache = serde_json::to_value(&config.cache).unwrap();
                assert_eq!(cache, json!({"breakpoints": "off", "key": "support-bot"}));
                Some(run_id.clone())
            }
            _ => None,
        })
        .unwrap();
    let answered: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::ModelResponded { provider, .. } => Some(provider.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(answered, [Some("scripted:scripted".to_owned())]);
    let outcome = events.iter().find_map(Event::outcome).unwrap();
    assert_eq!(outcome.answer, "from the fallback");
    // Priced at the member's price: the scripted model counts ~a token per 4 characters of
    // the prompt, each at $1 here (the run's own price would make it 10 000 times less).
    let input = outcome.usage.input as f64;
    assert!(input > 0.0);
    assert!((outcome.metrics.cost_usd - input).abs() < 1e-6, "{}", outcome.metrics.cost_usd);
    agentloop(dir.path())
        .args(["runs", "show", &run_id])
        .assert()
        .success()
        .stdout(predicate::str::contains("model (scripted:scripted): "));
}

#[test]
fn a_broken_fallback_member_is_named_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        "[provider]\nkind = \"scripted\"\nscript = \"s.json\"\n\n[[fallback]]\nkind = \"scripted\"\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("s.json"), "[]").unwrap();
    agentloop(dir.path())
        .args(["run", "hi"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("agentloop.toml:5: [[fallback]]"))
        .stderr(predicate::str::contains("--script"));
    // An unknown key in a member is refused with its line, as everywhere in the file.
    std::fs::write(
        dir.path().join("agentloop.toml"),
        "[[fallback]]\nkind = \"openai\"\nmodle = \"gpt-4o\"\n",
    )
    .unwrap();
    agentloop(dir.path())
        .args(["run", "hi"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("agentloop.toml:3"))
        .stderr(predicate::str::contains("modle"));
}
