//! `agentloop serve`: killed with SIGKILL while it streams a task, restarted on the same
//! store: the task completes (the new server continues the run once the dead one's lease
//! expires), and a client that resubscribes from the last event it saw gets every later
//! event exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use futures::StreamExt;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

/// Starts `agentloop serve --agent echo` in `dir` on a free port: the process and the
/// agent's URL (read from its `listening on URL (…)` line).
fn serve(dir: &Path) -> (Child, String) {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"))
        .current_dir(dir)
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir)
        .env_remove("AGENTLOOP_CONFIG")
        .env_remove("AGENTLOOP_SERVE_TOKEN")
        .args(["serve", "--agent", "echo", "--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.strip_prefix("listening on ").unwrap().split(' ').next().unwrap().to_owned();
    (child, url)
}

/// The SSE events of a response as `(id, data)`, until it ends or `stop` says so.
async fn events(
    response: reqwest::Response,
    mut stop: impl FnMut(&[(Option<String>, Value)]) -> bool,
) -> Vec<(Option<String>, Value)> {
    let (mut out, mut buffer) = (Vec::new(), String::new());
    let mut body = response.bytes_stream();
    while let Some(Ok(chunk)) = body.next().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        for event in common::drain_events(&mut buffer) {
            out.push(event);
            if stop(&out) {
                return out;
            }
        }
    }
    out
}

fn rpc(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

/// The journal positions of the events (`seq` ids; `seq.sub` ids are stream-only deltas).
fn journaled(events: &[(Option<String>, Value)]) -> Vec<u64> {
    events.iter().filter_map(|(id, _)| id.as_deref()?.parse().ok()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_is_restarted_and_its_task_completes_with_every_event_once() {
    let dir = tempfile::tempdir().unwrap();
    let client = agentloop::tls::http_client_builder()
        .unwrap()
        .timeout(Duration::from_secs(90))
        .build()
        .unwrap();
    let (mut first, url) = serve(dir.path());
    let message =
        json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "stream 150"}]});
    let response = client
        .post(&url)
        .json(&rpc("SendStreamingMessage", json!({"message": message})))
        .send()
        .await
        .unwrap();
    // Read until a few answer chunks arrived, then kill the server mid-stream.
    let before = events(response, |seen| {
        seen.iter().filter(|(_, e)| e["result"].get("artifactUpdate").is_some()).count() >= 5
    })
    .await;
    first.kill().unwrap();
    first.wait().unwrap();
    let task_id = before[0].1["result"]["task"]["id"].as_str().unwrap().to_owned();
    let last_seen = *journaled(&before).last().unwrap();

    let (mut second, url) = serve(dir.path());
    let response = client
        .post(&url)
        .header("Last-Event-ID", last_seen.to_string())
        .json(&rpc("SubscribeToTask", json!({"id": task_id})))
        .send()
        .await
        .unwrap();
    let after = events(response, |_| false).await;
    let last = &after.last().unwrap().1["result"]["statusUpdate"]["status"]["state"];
    assert_eq!(last, "TASK_STATE_COMPLETED", "{after:?}");

    // Every journaled event once: the resumed subscription starts after the last one seen
    // and never goes back (one event may make two updates: the answer and the status).
    let seqs = journaled(&after);
    assert!(seqs.iter().all(|&seq| seq > last_seen), "{seqs:?} after {last_seen}");
    assert!(seqs.windows(2).all(|w| w[0] <= w[1]), "{seqs:?}");
    let updates: Vec<&Value> = after.iter().map(|(_, e)| &e["result"]).collect();
    assert_eq!(
        updates
            .iter()
            .filter(|u| u
                .get("statusUpdate")
                .is_some_and(|s| s["status"]["state"] == "TASK_STATE_COMPLETED"))
            .count(),
        1
    );

    let task =
        client.post(&url).json(&rpc("GetTask", json!({"id": task_id}))).send().await.unwrap();
    let task: Value = task.json().await.unwrap();
    let answer = task["result"]["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    let expected: Vec<String> = (1..=150).map(|i| format!("chunk {i}")).collect();
    assert_eq!(answer, expected.join(" "));
    second.kill().unwrap();
    second.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_agents_from_one_config_file_each_with_its_card_and_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("script.json"),
        json!([{"text": "Hello from a served agent."}]).to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        "[provider]\nkind = \"scripted\"\nscript = \"script.json\"\n\n\
         [[serve]]\nname = \"alpha\"\ndescription = \"The first agent\"\ntools = [\"calculator\"]\n\n\
         [[serve]]\nname = \"beta\"\ndescription = \"The second agent\"\ntools = []\n",
    )
    .unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"))
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path())
        .env_remove("AGENTLOOP_CONFIG")
        .env_remove("AGENTLOOP_PROVIDER")
        .args(["serve", "--bind", "127.0.0.1:0", "--push-allow", "127.0.0.1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let urls: Vec<String> = (0..2)
        .map(|_| {
            let line = lines.next().unwrap().unwrap();
            line.strip_prefix("listening on ").unwrap().split(' ').next().unwrap().to_owned()
        })
        .collect();
    assert!(urls[0].ends_with("/alpha") && urls[1].ends_with("/beta"), "{urls:?}");
    let client = agentloop::tls::http_client_builder().unwrap().build().unwrap();
    for (url, (name, description, tags)) in urls.iter().zip([
        ("alpha", "The first agent", json!(["calculator"])),
        ("beta", "The second agent", json!(["chat"])),
    ]) {
        let card: Value = client
            .get(format!("{url}/.well-known/agent-card.json"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(card["name"], name);
        assert_eq!(card["description"], description);
        assert_eq!(card["capabilities"]["pushNotifications"], true, "--push-allow turns push on");
        assert_eq!(card["skills"][0]["tags"], tags, "{card}");
        let message = json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
        let task: Value = client
            .post(url)
            .json(&rpc("SendMessage", json!({"message": message})))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let task = &task["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
        assert_eq!(task["artifacts"][0]["parts"][0]["text"], "Hello from a served agent.");
        // Each agent lists only its own tasks.
        let listed: Value = client
            .post(url)
            .json(&rpc("ListTasks", json!({})))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(listed["result"]["tasks"].as_array().unwrap().len(), 1, "{listed}");
    }
    child.kill().unwrap();
    child.wait().unwrap();
}
