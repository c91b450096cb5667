//! A server, a worker pool and Redis as separate processes (`AGENTLOOP_REDIS_URL`; skipped
//! without it): an A2A client streams a task from `agentloop serve --queue` (server A) while
//! `agentloop worker` B executes it; B is killed with SIGKILL mid-run and worker C takes the
//! run over. The client's stream from A stays in order, without a gap or a duplicate, and
//! ends `completed`; it is the same stream a subscriber reading the whole journal gets.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{agentloop, Keys, Running};

use futures::StreamExt;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

/// `agentloop serve --agent echo --queue` on a free port: the process and the agent's URL.
fn serve(dir: &Path, url: &str) -> (Running, String) {
    let mut child = Running(
        agentloop(dir, url)
            .args(["serve", "--agent", "echo", "--bind", "127.0.0.1:0", "--queue", url])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let mut queued = false;
    loop {
        let line = lines.next().expect("serve said where it listens").unwrap();
        queued |= line.contains("queued to the worker pool");
        if let Some(rest) = line.strip_prefix("listening on ") {
            assert!(queued, "serve --queue did not say it queues");
            return (child, rest.split(' ').next().unwrap().to_owned());
        }
    }
}

/// `agentloop worker --agent echo --name NAME`, once it started; its stderr lines.
fn worker(dir: &Path, url: &str, name: &str) -> (Running, mpsc::Receiver<String>) {
    common::worker(dir, url, &["--agent", "echo", "--name", name, "--drain-secs", "5"])
}

/// The SSE events of a response as `(id, data)`, sent one by one as they arrive.
fn sse(
    response: reqwest::Response,
) -> tokio::sync::mpsc::UnboundedReceiver<(Option<String>, Value)> {
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut buffer = String::new();
        let mut body = response.bytes_stream();
        while let Some(Ok(chunk)) = body.next().await {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            for event in common::drain_events(&mut buffer) {
                if sender.send(event).is_err() {
                    return;
                }
            }
        }
    });
    receiver
}

fn rpc(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

fn seq_of(id: Option<&String>) -> Option<u64> {
    id?.split('.').next()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_streams_from_the_server_while_workers_die_and_take_over() {
    let Some(url) = common::redis_url() else { return };
    let keys = Keys::new(&url, "pool");
    let dir = tempfile::tempdir().unwrap();
    let toml = format!("[store]\nkind = \"redis\"\nurl = {url:?}\nprefix = {:?}\n", keys.prefix);
    std::fs::write(dir.path().join("agentloop.toml"), toml).unwrap();
    let (_server, agent_url) = serve(dir.path(), &url);
    let (mut b, _b_log) = worker(dir.path(), &url, "b");
    let client = agentloop::tls::http_client_builder()
        .unwrap()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();

    // Three calculator calls, a second apart: B is killed after the first one's result.
    let message = json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "steps 3 1"}]});
    let response = client
        .post(&agent_url)
        .json(&rpc("SendStreamingMessage", json!({"message": message})))
        .send()
        .await
        .unwrap();
    let mut stream = sse(response);
    let mut seen: Vec<(Option<String>, Value)> = Vec::new();
    let mut c = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let next = tokio::time::timeout_at(deadline, stream.recv())
            .await
            .expect("the stream ended in time");
        let Some(event) = next else { break };
        seen.push(event);
        let completed = |e: &Value| {
            e["result"]["statusUpdate"]["metadata"]["agentloop"]["event"] == "tool_completed"
        };
        if c.is_none() && seen.iter().any(|(_, e)| completed(e)) {
            b.0.kill().unwrap();
            b.0.wait().unwrap();
            c = Some(worker(dir.path(), &url, "c"));
        }
    }
    let (mut c, c_log) = c.unwrap_or_else(|| panic!("B was never killed: {seen:#?}"));

    // The stream ended completed, with the answer of all three steps.
    let last = &seen.last().unwrap().1["result"];
    assert_eq!(last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED", "{seen:#?}");
    let task_id = seen[0].1["result"]["task"]["id"].as_str().unwrap().to_owned();
    let task = client.post(&agent_url).json(&rpc("GetTask", json!({"id": task_id}))).send().await;
    let task: Value = task.unwrap().json().await.unwrap();
    let answer = task["result"]["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert_eq!(answer, "Done: 3 steps, the last said 3.");

    // In order, no duplicate: journal positions never go back, and no update twice.
    let seqs: Vec<u64> = seen.iter().filter_map(|(id, _)| seq_of(id.as_ref())).collect();
    assert!(seqs.windows(2).all(|w| w[0] <= w[1]), "{seqs:?}");
    let mut unique: Vec<String> = seen.iter().map(|e| format!("{e:?}")).collect();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "an update came twice: {seen:#?}");
    // No gap: the same updates as a subscriber that reads the whole journal afterwards.
    let first = seqs[0];
    let response = client
        .post(&agent_url)
        .header("Last-Event-ID", first.to_string())
        .json(&rpc("SubscribeToTask", json!({"id": task_id})))
        .send()
        .await
        .unwrap();
    let mut replay = sse(response);
    let mut replayed = Vec::new();
    while let Some(event) = replay.recv().await {
        replayed.push(event);
    }
    let live: Vec<&(Option<String>, Value)> =
        seen.iter().filter(|(id, _)| seq_of(id.as_ref()).is_some_and(|s| s > first)).collect();
    let replayed: Vec<&(Option<String>, Value)> = replayed.iter().collect();
    assert_eq!(live, replayed, "the live stream and the journal differ");

    // C took the run over from B and finished it.
    std::process::Command::new("kill").args(["-TERM", &c.0.id().to_string()]).status().unwrap();
    let status = c.0.wait().unwrap();
    assert!(status.success());
    // Every line, up to the end of its stderr (the process has exited).
    let said: Vec<String> = c_log.iter().collect();
    let summary =
        said.iter().find(|l| l.contains("worker c stopped")).unwrap_or_else(|| panic!("{said:?}"));
    assert!(summary.contains("1 jobs (1 taken over): 1 ended"), "{summary}");
}
