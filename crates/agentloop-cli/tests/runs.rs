//! `agentloop runs list | show | resume | replay` on the SQLite store: a run killed mid-stream
//! is listed as running, resumes without running its finished tool again, and replays from its
//! journal without the model or the tools.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::Event;
use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

fn agentloop(dir: &Path) -> Command {
    let mut command = Command::cargo_bin("agentloop").unwrap();
    command.current_dir(dir).env("HOME", dir).env("XDG_CONFIG_HOME", dir).env("NO_COLOR", "1");
    for name in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "AGENTLOOP_BASE_URL",
        "AGENTLOOP_PROVIDER",
        "AGENTLOOP_CONFIG",
    ] {
        command.env_remove(name);
    }
    command
}

#[test]
fn a_killed_run_is_listed_resumed_shown_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.json");
    std::fs::write(
        &first,
        json!([
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]},
            {"text": "This final answer streams very slowly and will be cut off by the kill.", "chunk_delay_ms": 300}
        ])
        .to_string(),
    )
    .unwrap();
    // Start a run and kill it with SIGKILL while the final answer streams.
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"))
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path())
        .env_remove("AGENTLOOP_CONFIG")
        .args(["--provider", "scripted", "--script"])
        .arg(&first)
        .args(["run", "--json", "What is 6 times 7?"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut run_id = String::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let event: Event = serde_json::from_str(&line.unwrap()).unwrap();
        if let Event::RunStarted { run_id: id, .. } = &event {
            run_id.clone_from(id);
        }
        if event.kind() == "text_delta" {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!run_id.is_empty());

    // Listed with the killed process as its owner: its lease is still live.
    agentloop(dir.path())
        .args(["runs", "list", "--state", "running"])
        .assert()
        .success()
        .stdout(predicate::str::contains(&run_id))
        .stdout(predicate::str::contains(format!("  pid{}-", child.id())));

    // Resume with a model that only knows the rest.
    let rest = dir.path().join("rest.json");
    std::fs::write(&rest, json!([{"text": "6 times 7 is 42."}]).to_string()).unwrap();
    agentloop(dir.path())
        .args(["--provider", "scripted", "--script"])
        .arg(&rest)
        .args(["runs", "resume", &run_id])
        .assert()
        .failure()
        .stderr(predicate::str::contains("is being executed by"));
    // The killed process's lease expires (10 s after its last renewal): `--wait` waits for it.
    agentloop(dir.path())
        .args(["--provider", "scripted", "--script"])
        .arg(&rest)
        .args(["runs", "resume", "--wait", "30", &run_id])
        .assert()
        .success()
        .stdout(predicate::str::contains("6 times 7 is 42."))
        .stdout(predicate::str::contains("→ calculator").not());

    // Finished: its lease released, no owner is shown.
    agentloop(dir.path())
        .args(["runs", "list", "--state", "finished"])
        .assert()
        .success()
        .stdout(predicate::str::contains(&run_id))
        .stdout(predicate::str::contains("  pid").not());

    agentloop(dir.path())
        .args(["runs", "show", &run_id])
        .assert()
        .success()
        .stdout(predicate::str::contains("started"))
        .stdout(predicate::str::contains("→ calculator({\"expression\":\"6 * 7\"})"))
        .stdout(predicate::str::contains("← calculator: 42 ("))
        .stdout(predicate::str::contains("finished after 2 iterations"));

    // Replay needs neither the model nor the tools.
    std::fs::remove_file(&rest).unwrap();
    let output =
        agentloop(dir.path()).args(["runs", "replay", &run_id, "--json"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let last: Event =
        serde_json::from_str(String::from_utf8_lossy(&output.stdout).lines().last().unwrap())
            .unwrap();
    assert_eq!(last.outcome().unwrap().answer, "6 times 7 is 42.");

    agentloop(dir.path())
        .args(["runs", "show", "run_missing"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no run 'run_missing'"));
}

/// `runs cancel | pause | unpause | approve | reject | answer` record requests through the run
/// service, and refuse what the run does not wait for, naming it.
#[test]
fn requests_for_a_run_are_recorded_or_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, json!([{"text": "Done."}]).to_string()).unwrap();
    let output = agentloop(dir.path())
        .args(["--provider", "scripted", "--script"])
        .arg(&script)
        .args(["run", "--json", "Say done."])
        .output()
        .unwrap();
    assert!(output.status.success());
    let run_id = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .find_map(|line| match serde_json::from_str::<Event>(line).unwrap() {
            Event::RunStarted { run_id, .. } => Some(run_id),
            _ => None,
        })
        .unwrap();

    for (args, says) in [
        (vec!["cancel"], "its executor cancels it"),
        (vec!["pause"], "pauses at the next safe point"),
        (vec!["unpause"], "its executor goes on"),
    ] {
        agentloop(dir.path())
            .arg("runs")
            .args(&args)
            .arg(&run_id)
            .assert()
            .success()
            .stdout(predicate::str::contains(format!("recorded for {run_id}")))
            .stdout(predicate::str::contains(says));
    }
    agentloop(dir.path()).args(["runs", "approve", &run_id, "call_1"]).assert().failure().stderr(
        predicate::str::contains(format!(
            "run '{run_id}' has no call 'call_1' waiting for approval"
        )),
    );
    agentloop(dir.path())
        .args(["runs", "reject", &run_id, "call_1", "--reason", "no"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("waiting for approval"));
    agentloop(dir.path())
        .args(["runs", "answer", &run_id, "Lyon"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!("run '{run_id}' is not waiting for an answer")));
    agentloop(dir.path())
        .args(["runs", "answer", "run_nowhere", "Lyon"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("no run 'run_nowhere' in the store"));
}

#[test]
fn a_store_file_that_is_not_a_store_is_named_in_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".agentloop")).unwrap();
    std::fs::write(dir.path().join(".agentloop/agentloop.db"), "not a database at all").unwrap();
    agentloop(dir.path())
        .args(["runs", "list"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("opening the SQLite store .agentloop/agentloop.db"))
        .stderr(predicate::str::contains("move it aside"))
        .stderr(predicate::str::contains("file is not a database"));
}

/// The run id of a `run --json` output.
fn run_id_of(stdout: &[u8]) -> String {
    String::from_utf8_lossy(stdout)
        .lines()
        .find_map(|line| match serde_json::from_str::<Event>(line).ok()? {
            Event::RunStarted { run_id, .. } => Some(run_id),
            _ => None,
        })
        .unwrap()
}

/// `runs delete | prune | check`: a run is deleted (and then is no run), a run an executor
/// holds is refused by delete and skipped by prune, ages parse with clear errors, and a
/// registry row whose journal was removed by hand is reported by `check` (exit 1) and
/// removed by `check --fix`.
#[test]
fn runs_are_deleted_pruned_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, json!([{"text": "Done."}]).to_string()).unwrap();
    let run = || {
        let output = agentloop(dir.path())
            .args(["--provider", "scripted", "--script"])
            .arg(&script)
            .args(["run", "--json", "Say done."])
            .output()
            .unwrap();
        assert!(output.status.success());
        run_id_of(&output.stdout)
    };
    let (first, second, damaged) = (run(), run(), run());

    agentloop(dir.path())
        .args(["runs", "delete", &first])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!("deleted run {first}")));
    agentloop(dir.path())
        .args(["runs", "show", &first])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!("no run '{first}'")));
    agentloop(dir.path())
        .args(["runs", "delete", &first])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!("no run '{first}'")));

    // A run its executor holds: killed mid-stream, its lease is live for a while.
    let slow = dir.path().join("slow.json");
    std::fs::write(
        &slow,
        json!([{"text": "This answer streams slowly and is cut by the kill.", "chunk_delay_ms": 300}])
            .to_string(),
    )
    .unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"))
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path())
        .env_remove("AGENTLOOP_CONFIG")
        .args(["--provider", "scripted", "--script"])
        .arg(&slow)
        .args(["run", "--json", "Stream."])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut held = String::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let event: Event = serde_json::from_str(&line.unwrap()).unwrap();
        if let Event::RunStarted { run_id, .. } = &event {
            held.clone_from(run_id);
        }
        if event.kind() == "text_delta" {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    agentloop(dir.path())
        .args(["runs", "delete", &held])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!("run '{held}' cannot be deleted")))
        .stderr(predicate::str::contains(format!("is being executed by 'pid{}-", child.id())))
        .stderr(predicate::str::contains("lease expires in"));

    for (age, says) in [("30x", "no unit"), ("d", "is not a duration"), ("1.5h", "not a duration")]
    {
        agentloop(dir.path())
            .args(["runs", "prune", "--older-than", age])
            .assert()
            .failure()
            .stderr(predicate::str::contains(says))
            .stderr(predicate::str::contains("e.g. 30d, 12h, 90m, 45s"));
    }
    agentloop(dir.path())
        .args(["runs", "prune", "--older-than", "0s", "--state", "running,nope"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("unknown state 'nope'"));
    agentloop(dir.path())
        .args(["runs", "prune", "--older-than", "30d"])
        .assert()
        .success()
        .stdout(predicate::str::contains("pruned 0 runs (finished, failed, cancelled)"));

    // The journal of `damaged` removed by hand: not listed, reported, repaired.
    let db = dir.path().join(".agentloop/agentloop.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "DELETE FROM journal WHERE run_key = (SELECT run_key FROM runs WHERE run_id = ?1)",
        [&damaged],
    )
    .unwrap();
    drop(conn);
    agentloop(dir.path())
        .args(["runs", "list"])
        .assert()
        .success()
        .stdout(predicate::str::contains(&second))
        .stdout(predicate::str::contains(&damaged).not());
    agentloop(dir.path())
        .args(["runs", "check"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(format!(
            "problem: {damaged}: a registry row without a journal"
        )))
        .stdout(predicate::str::contains("`agentloop runs check --fix` repairs them"));
    agentloop(dir.path())
        .args(["runs", "check", "--fix"])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!("removed the registry row of {damaged}")));
    agentloop(dir.path())
        .args(["runs", "check"])
        .assert()
        .success()
        .stdout(predicate::str::contains("the registry agrees with the journals"));

    // Every ended run is older than 0 s; the held one is skipped (and counted) when asked for.
    agentloop(dir.path())
        .args(["runs", "prune", "--older-than", "0s", "--state", "finished,running"])
        .assert()
        .success()
        .stdout(predicate::str::contains("pruned 1 runs (finished, running)"))
        .stdout(predicate::str::contains("skipped 1 held by an executor"));
    agentloop(dir.path())
        .args(["runs", "list"])
        .assert()
        .success()
        .stdout(predicate::str::contains(&second).not())
        .stdout(predicate::str::contains(&held));
}

/// `runs fork RUN --at SEQ --tool-result CALL=RESULT` makes a new run from the run's journal
/// up to that entry (numbered by `runs show`) with the result edited, which `runs show`
/// names; `runs resume` continues it to its end; the origin is unchanged. A fork point past
/// the end is refused.
#[test]
fn a_run_is_forked_with_an_edited_tool_result_and_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    let turns = json!({"follow_history": true, "turns": [
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]},
        {"text": "Done."}
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let scripted = |command: &mut Command| {
        command.args(["--provider", "scripted", "--script"]).arg(&script);
    };
    let mut run = agentloop(dir.path());
    scripted(&mut run);
    let output = run.args(["run", "--json", "What is 6 times 7?"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let run_id = run_id_of(&output.stdout);
    let shown = agentloop(dir.path()).args(["runs", "show", &run_id]).output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    // The entry where the calculator's result is journaled (`#N … ← calculator: 42`), and
    // its call.
    let line =
        shown.lines().find(|l| l.contains("← calculator")).unwrap_or_else(|| panic!("{shown}"));
    let seq = line.trim_start_matches('#').split_whitespace().next().unwrap().to_owned();
    let call_id = String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| match serde_json::from_str::<Event>(line).ok()? {
            Event::ToolStarted { call, .. } => Some(call.id.clone()),
            _ => None,
        })
        .unwrap();

    let output = agentloop(dir.path())
        .args(["runs", "fork", &run_id, "--at", &seq, "--tool-result", &format!("{call_id}=43")])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let fork = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(String::from_utf8_lossy(&output.stderr).contains(&format!("runs resume {fork}")));
    let mut resume = agentloop(dir.path());
    scripted(&mut resume);
    let resumed = resume.args(["runs", "resume", &fork, "--json"]).output().unwrap();
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    let shown = agentloop(dir.path()).args(["runs", "show", &fork]).output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.contains(&format!(
            "forked from run {run_id} at #{seq}, result of {call_id} set to 43"
        )),
        "{shown}"
    );
    assert!(shown.contains("finished"), "{shown}");
    let origin = agentloop(dir.path()).args(["runs", "show", &run_id]).output().unwrap();
    assert!(!String::from_utf8_lossy(&origin.stdout).contains("forked"), "the origin is unchanged");

    agentloop(dir.path()).args(["runs", "fork", &run_id, "--at", "999"]).assert().failure().stderr(
        predicate::str::contains("cannot be forked at entry 999: its journal ends at entry"),
    );
}
