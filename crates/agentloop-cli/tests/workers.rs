//! `agentloop worker`, `agentloop workers`, `agentloop run --queue` on a real Redis
//! (`AGENTLOOP_REDIS_URL`; skipped without it), each test under a key prefix of its own
//! (`[store] prefix`), deleted at its end: runs submitted, executed and followed; SIGTERM
//! drains a worker; a bounded queue refuses a run; a worker killed with a call in flight
//! leaves the run to another worker, which holds it in `needs_attention` (resolved with
//! `runs fail --queue`) or, past `--max-deliveries`, dead-letters it. Without Redis: `workers`
//! against an unreachable URL fails within seconds, and `runs retry-call | set-result | fail`
//! refuse a call that does not wait.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::json;
use std::path::Path;
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{redis_url, Keys, Running};

/// `agentloop.toml` in `dir`: the agent `helper` on the scripted model playing `turns`, its
/// runs in Redis under `prefix`.
fn config(dir: &Path, url: &str, prefix: &str, turns: serde_json::Value) {
    config_with(dir, url, prefix, turns, "");
}

/// [`config`] with more tables (after `[store]`).
fn config_with(dir: &Path, url: &str, prefix: &str, turns: serde_json::Value, more: &str) {
    let script = dir.join("script.json");
    std::fs::write(&script, turns.to_string()).unwrap();
    let toml = format!(
        "[agent]\nname = \"helper\"\n\n[provider]\nkind = \"scripted\"\nscript = {:?}\n\n\
         [store]\nkind = \"redis\"\nurl = {url:?}\nprefix = {prefix:?}\n\n{more}",
        script.display().to_string()
    );
    std::fs::write(dir.join("agentloop.toml"), toml).unwrap();
}

fn agentloop(dir: &Path) -> Command {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("agentloop"));
    command.current_dir(dir).env("HOME", dir).env("XDG_CONFIG_HOME", dir).env("NO_COLOR", "1");
    for name in ["AGENTLOOP_CONFIG", "AGENTLOOP_PROVIDER", "AGENTLOOP_QUEUE", "AGENTLOOP_LOG"] {
        command.env_remove(name);
    }
    command.timeout(Duration::from_secs(60));
    command
}

/// `agentloop worker --name NAME ARGS…` in `dir` (2 runs at once), once it said it started;
/// its stderr lines go to the receiver.
fn worker(dir: &Path, url: &str, name: &str, args: &[&str]) -> (Running, mpsc::Receiver<String>) {
    let base = ["--concurrency", "2", "--drain-secs", "5", "--name", name];
    let all: Vec<&str> = base.iter().chain(args).copied().collect();
    common::worker(dir, url, &all)
}

/// Waits up to `secs` for the process to exit.
fn exit_within(child: &mut Child, secs: u64) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the process did not exit within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn a_worker_executes_queued_runs_and_drains_on_sigterm() {
    let Some(url) = redis_url() else { return };
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::new(&url, "worker");
    let prefix = keys.prefix.clone();
    config(dir.path(), &url, &prefix, json!([{"text": "Queued answer 42."}, {"text": "Second."}]));
    let (mut child, lines) = worker(dir.path(), &url, "test-worker", &[]);

    // Submitted, executed by the worker, followed here: the answer and exit code 0.
    agentloop(dir.path())
        .args(["run", "--queue", &url, "What is the answer?"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Queued answer 42."))
        .stdout(predicate::str::contains("[completed · 1 iteration"))
        .stderr(predicate::str::contains("queued run run_"))
        .stderr(predicate::str::contains("for agent helper"));

    // Detached: the run's id, then the run finishes in the store.
    let output = agentloop(dir.path())
        .env("AGENTLOOP_QUEUE", &url)
        .args(["run", "--detach", "Again?"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let run_id = stdout(&output).trim().to_owned();
    assert!(run_id.starts_with("run_"), "{run_id}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let shown = agentloop(dir.path()).args(["runs", "show", &run_id]).output().unwrap();
        if stdout(&shown).contains("finished after 1 iterations") {
            assert!(stdout(&shown).contains("Second."), "{}", stdout(&shown));
            break;
        }
        assert!(Instant::now() < deadline, "the detached run did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }

    // The queue is empty; the worker is listed.
    agentloop(dir.path())
        .args(["workers", "--queue", &url, "--dead", "3"])
        .assert()
        .success()
        .stdout(predicate::str::contains("agent helper: depth 0, pending 0, 1 worker"))
        .stdout(predicate::str::contains("  worker test-worker: pending 0, idle "))
        .stdout(predicate::str::contains("dead letters: 0"));

    // SIGTERM: the worker drains, reports and exits 0 promptly.
    let started = Instant::now();
    let killed =
        std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    assert!(killed.unwrap().success());
    let status = exit_within(&mut child, 15);
    assert!(status.success(), "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let stderr: Vec<String> = lines.iter().collect();
    assert!(
        stderr
            .iter()
            .any(|line| line
                .starts_with("worker test-worker stopped: 2 jobs (0 taken over): 2 ended")),
        "{stderr:#?}"
    );
    // It left the group.
    agentloop(dir.path())
        .args(["workers", "--queue", &url])
        .assert()
        .success()
        .stdout(predicate::str::contains("agent helper: depth 0, pending 0, 0 workers"));

    // No worker now: a bounded queue takes one run and refuses the next, which leaves no
    // run behind.
    agentloop(dir.path())
        .args(["run", "--queue", &url, "--max-queued", "1", "--detach", "One"])
        .assert()
        .success();
    agentloop(dir.path())
        .args(["run", "--queue", &url, "--max-queued", "1", "Two"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "the queue of agent 'helper' is full (1 of at most 1 jobs waiting or executing)",
        ));
    let listed = agentloop(dir.path()).args(["runs", "list"]).output().unwrap();
    assert_eq!(stdout(&listed).lines().filter(|l| l.contains("running")).count(), 1);
    agentloop(dir.path())
        .args(["workers", "--queue", &url])
        .assert()
        .success()
        .stdout(predicate::str::contains("agent helper: depth 1, pending 0, 0 workers"));
}

#[test]
fn workers_on_an_empty_queue_says_so() {
    let Some(url) = redis_url() else { return };
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::new(&url, "empty");
    let prefix = keys.prefix.clone();
    config(dir.path(), &url, &prefix, json!([]));
    agentloop(dir.path())
        .args(["workers", "--queue", &url, "--dead", "5"])
        .assert()
        .success()
        .stdout(predicate::str::contains("no agent has a queue"))
        .stdout(predicate::str::contains("dead letters: 0"));
}

#[test]
fn workers_sets_and_lifts_an_agents_limit_across_the_pool() {
    let Some(url) = redis_url() else { return };
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::new(&url, "limit");
    config(dir.path(), &url, &keys.prefix, json!([]));
    agentloop(dir.path())
        .args(["workers", "--queue", &url, "--limit", "helper=2"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "limit of helper: 2 runs at once across the pool (0 now)",
        ));
    agentloop(dir.path())
        .args(["workers", "--queue", &url, "--no-limit", "helper"])
        .assert()
        .success()
        .stdout(predicate::str::contains("limit of").not());
    agentloop(dir.path())
        .args(["workers", "--queue", &url, "--limit", "helper=0"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("expected AGENT=N"));
}

#[test]
fn workers_against_an_unreachable_redis_fails_fast_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let started = Instant::now();
    agentloop(dir.path())
        .args(["workers", "--queue", &format!("redis://127.0.0.1:{port}")])
        .assert()
        .failure()
        .stderr(predicate::str::contains("error: connecting to the queue (--queue)"));
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
}

/// `runs retry-call | set-result | fail` refuse a call that does not wait for a decision,
/// and a run that is not in the store, naming what is wrong.
#[test]
fn decisions_on_calls_that_do_not_wait_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, json!([{"text": "Done."}]).to_string()).unwrap();
    agentloop(dir.path())
        .args(["--provider", "scripted", "--script"])
        .arg(&script)
        .args(["run", "Say done."])
        .assert()
        .success();
    let listed =
        agentloop(dir.path()).args(["runs", "list", "--state", "finished"]).output().unwrap();
    let run_id = stdout(&listed)
        .lines()
        .find_map(|line| line.split_whitespace().next().filter(|id| id.starts_with("run_")))
        .unwrap()
        .to_owned();
    let refused = format!("run '{run_id}' has no call 'call_1' waiting for a decision");
    for args in [
        vec!["retry-call", &run_id, "call_1"],
        vec!["set-result", &run_id, "call_1", "{\"ok\": true}"],
        vec!["fail", &run_id, "call_1", "--reason", "it failed"],
    ] {
        agentloop(dir.path())
            .arg("runs")
            .args(&args)
            .assert()
            .failure()
            .stderr(predicate::str::contains(&refused))
            .stderr(predicate::str::contains(format!("agentloop runs show {run_id}")));
    }
    agentloop(dir.path())
        .args(["runs", "retry-call", "run_nowhere", "call_1"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("no run 'run_nowhere' in the store"));
    agentloop(dir.path()).args(["runs", "list", "--state", "needs_attention"]).assert().success();
    agentloop(dir.path())
        .args(["runs", "list", "--state", "waiting"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("suspended or needs_attention"));
}

/// A server that accepts connections and never answers: an `http_get` call to it stays in
/// flight. Its port, and a receiver told of each connection.
fn silent_server() -> (u16, mpsc::Receiver<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (accepted, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
            let _ = accepted.send(());
        }
    });
    (port, receiver)
}

/// A run whose `http_get` call (not safe to retry) is in flight in a worker killed with
/// SIGKILL: the run's id. The next model turn (of the next worker) is `next`.
fn run_killed_mid_call(dir: &Path, url: &str, prefix: &str, next: serde_json::Value) -> String {
    let (port, accepted) = silent_server();
    let call =
        json!({"name": "http_get", "arguments": {"url": format!("http://127.0.0.1:{port}/slow")}});
    let tools = "[tools]\nenabled = [\"http_get\"]\nhttp_allowed_hosts = [\"127.0.0.1\"]\n";
    config_with(dir, url, prefix, json!([{"tool_calls": [call]}]), tools);
    let (mut first, _log) = worker(dir, url, "first", &[]);
    let output =
        agentloop(dir).args(["run", "--queue", url, "--detach", "Fetch it."]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let run_id = stdout(&output).trim().to_owned();
    accepted.recv_timeout(Duration::from_secs(30)).expect("the call reached the server");
    first.kill().unwrap();
    first.wait().unwrap();
    config_with(dir, url, prefix, json!([next]), tools);
    run_id
}

/// Waits (up to 60 s) until `runs show RUN` says `what`; its output.
fn shown_once(dir: &Path, run_id: &str, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let shown = stdout(&agentloop(dir).args(["runs", "show", run_id]).output().unwrap());
        if shown.contains(what) {
            return shown;
        }
        assert!(Instant::now() < deadline, "`runs show` never said {what:?}:\n{shown}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A call a dead worker left in flight, whose tool is not safe to run twice, stops the run in
/// `needs_attention` when another worker takes it over; `runs show` says which call waits and
/// how to resolve it, and `runs fail --queue` has a worker continue the run.
#[test]
fn a_call_left_in_flight_waits_for_an_operator_who_fails_it() {
    let Some(url) = redis_url() else { return };
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::new(&url, "attention");
    let prefix = keys.prefix.clone();
    let answer = json!({"text": "The page could not be fetched."});
    let run_id = run_killed_mid_call(dir.path(), &url, &prefix, answer);
    let (mut second, _log) = worker(dir.path(), &url, "second", &[]);
    let shown = shown_once(dir.path(), &run_id, "resolve each call");
    let call_id = shown
        .lines()
        .find_map(|line| line.split("  ! ").nth(1)?.split(" needs attention").next())
        .unwrap()
        .to_owned();
    assert!(
        shown
            .contains(&format!("needs attention: call {call_id} (http_get) waits for an operator")),
        "{shown}"
    );
    assert!(shown.contains(&format!("`agentloop runs retry-call {run_id} {call_id}`")), "{shown}");
    assert!(
        shown.contains(&format!("`agentloop runs fail {run_id} {call_id} --reason TEXT`")),
        "{shown}"
    );
    agentloop(dir.path())
        .args(["runs", "list", "--state", "needs_attention"])
        .assert()
        .success()
        .stdout(predicate::str::contains(&run_id));

    agentloop(dir.path())
        .args(["runs", "fail", &run_id, &call_id, "--reason", "the server never answered"])
        .args(["--queue", &url])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "a worker continues the run with the reason as the call's error result",
        ));
    let shown = shown_once(dir.path(), &run_id, "finished after");
    assert!(shown.contains("The page could not be fetched."), "{shown}");
    assert!(shown.contains("the server never answered"), "{shown}");
    std::process::Command::new("kill").args(["-TERM", &second.id().to_string()]).status().unwrap();
    assert!(exit_within(&mut second, 15).success());
}

/// A job delivered more often than `--max-deliveries` goes to the dead letters and its run
/// fails; `workers --dead N` lists it.
#[test]
fn a_job_past_its_deliveries_is_a_dead_letter_listed_by_workers() {
    let Some(url) = redis_url() else { return };
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::new(&url, "dead");
    let prefix = keys.prefix.clone();
    let run_id = run_killed_mid_call(dir.path(), &url, &prefix, json!({"text": "unused"}));
    let (mut second, _log) = worker(dir.path(), &url, "second", &["--max-deliveries", "1"]);
    shown_once(dir.path(), &run_id, "failed: the job was delivered 2 times");
    agentloop(dir.path())
        .args(["workers", "--queue", &url, "--dead", "5"])
        .assert()
        .success()
        .stdout(predicate::str::contains("dead letters: 1"))
        .stdout(predicate::str::contains(format!(
            "  run {run_id} (agent helper, 2 deliveries): the job was delivered 2 times"
        )));
    std::process::Command::new("kill").args(["-TERM", &second.id().to_string()]).status().unwrap();
    assert!(exit_within(&mut second, 15).success());
}
