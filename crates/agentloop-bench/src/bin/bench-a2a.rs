//! `bench-a2a`: the A2A server under load (see `docs/PERFORMANCE.md`, "A2A server").
//!
//! `cargo run --release -p agentloop-bench --bin bench-a2a [-- --streams N --model-ms MS]`
//! (defaults 1000 and 50; `--smoke` runs 20). The echo agent (`agentloop serve --agent
//! echo`), whose model takes `--model-ms` per call (`slow`), on a SQLite store, served on
//! loopback in this process:
//!
//! - **direct**: N runs of the agent at once through the library (a session each), the
//!   same store: each run's latency;
//! - **server**: N `SendStreamingMessage` streams at once over JSON-RPC: each stream's
//!   latency (request to the final event), and a check of every stream — it starts with the
//!   task, its event ids never go back, its answer chunks add up to the final answer, and it
//!   ends with `completed` (a stream that loses, reorders or repeats an event fails the
//!   bench);
//! - 100 tasks one at a time, through the library and through the server: the latency a
//!   task gets without contention;
//! - tasks per second, the added latency (server p50/p99 minus direct p50/p99, one at a
//!   time and N at once), and the resident memory each open stream adds (sampled while N
//!   streams wait on a 2 s model).

use agentloop::store::sqlite::SqliteStore;
use agentloop::RunOptions;
use agentloop_server::{echo, Server, ServerConfig};
use futures::StreamExt;
use serde_json::{json, Value};
use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// How many tasks run one at a time, for the latency without contention.
const SEQUENTIAL: usize = 100;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                line.strip_prefix("VmRSS:")?.trim().trim_end_matches("kB").trim().parse().ok()
            })
        })
        .unwrap_or(0)
}

/// What one stream saw.
struct Seen {
    latency: Duration,
    events: usize,
}

/// Reads one SSE stream to its end and checks it (see the module docs).
async fn check_stream(response: reqwest::Response) -> Result<usize> {
    let mut body = response.bytes_stream();
    let (mut buffer, mut events, mut last_seq) = (String::new(), Vec::<Value>::new(), (0u64, 0u64));
    while let Some(chunk) = body.next().await {
        buffer.push_str(std::str::from_utf8(&chunk?)?);
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(id) = line.strip_prefix("id:") {
                    let mut parts = id.trim().split('.');
                    let seq = parts.next().unwrap_or("0").parse()?;
                    let sub = parts.next().unwrap_or("0").parse()?;
                    if (seq, sub) < last_seq {
                        return Err(format!("event id {seq}.{sub} after {last_seq:?}").into());
                    }
                    last_seq = (seq, sub);
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push_str(value.trim_start());
                }
            }
            if !data.is_empty() {
                let event: Value = serde_json::from_str(&data)?;
                events.push(event["result"].clone());
            }
        }
    }
    if events.first().and_then(|e| e.get("task")).is_none() {
        return Err("the stream did not start with the task".into());
    }
    let state = events.last().map(|e| e["statusUpdate"]["status"]["state"].clone());
    if state != Some(json!("TASK_STATE_COMPLETED")) {
        return Err(format!("the stream ended with {state:?}").into());
    }
    let artifacts: Vec<&Value> = events.iter().filter_map(|e| e.get("artifactUpdate")).collect();
    let text =
        |a: &Value| a["artifact"]["parts"][0]["text"].as_str().unwrap_or_default().to_owned();
    let (last, chunks) = artifacts.split_last().ok_or("no answer")?;
    let joined: String = chunks.iter().map(|a| text(a)).collect();
    if last["lastChunk"] != json!(true) || joined != text(last) {
        return Err(
            format!("chunks {joined:?} do not add up to the answer {:?}", text(last)).into()
        );
    }
    Ok(events.len())
}

async fn stream_once(client: &reqwest::Client, url: &str, text: &str) -> Result<Seen> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {
        "message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER", "parts": [{"text": text}]}}});
    let started = Instant::now();
    let response = client.post(url).json(&body).send().await?;
    let events = check_stream(response).await?;
    Ok(Seen { latency: started.elapsed(), events })
}

fn summary(name: &str, mut latencies: Vec<Duration>, wall: Duration) -> (Duration, Duration) {
    latencies.sort();
    let (p50, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
    println!(
        "{name}: {} tasks in {:.2} s = {:.0} tasks/s; latency p50 {:.1} ms, p99 {:.1} ms",
        latencies.len(),
        wall.as_secs_f64(),
        latencies.len() as f64 / wall.as_secs_f64(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    (p50, p99)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let smoke = args.iter().any(|a| a == "--smoke");
    let streams = if smoke { 20 } else { arg("--streams", 1000) };
    let model_ms = arg("--model-ms", 50);
    let slow = format!("slow {}", model_ms as f64 / 1000.0);
    let dir = std::env::temp_dir().join(format!("bench-a2a-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let store = Arc::new(SqliteStore::open(dir.join("runs.db"))?);

    // Direct: the library, N runs at once.
    let agent = echo::echo_agent(store.clone(), store.clone())?;
    let started = Instant::now();
    let mut direct = Vec::with_capacity(streams);
    let runs = (0..streams).map(|i| {
        let (agent, slow) = (agent.clone(), slow.clone());
        tokio::spawn(async move {
            let begun = Instant::now();
            let session = agent.session(format!("direct-{i}")).await?;
            let events = session.run_stream_with(slow.as_str(), RunOptions::default()).await?;
            let _: Vec<_> = events.collect().await;
            Ok::<_, Box<dyn Error + Send + Sync>>(begun.elapsed())
        })
    });
    for run in futures::future::join_all(runs).await {
        direct.push(run??);
    }
    let (direct_p50, direct_p99) = summary("direct (library)", direct, started.elapsed());
    // One at a time: the cost of a task without contention.
    let mut alone = Vec::with_capacity(SEQUENTIAL);
    let started = Instant::now();
    for i in 0..SEQUENTIAL {
        let begun = Instant::now();
        let session = agent.session(format!("alone-{i}")).await?;
        let events = session.run_stream_with(slow.as_str(), RunOptions::default()).await?;
        let _: Vec<_> = events.collect().await;
        alone.push(begun.elapsed());
    }
    let (alone_p50, alone_p99) =
        summary("direct (library), one at a time", alone, started.elapsed());

    // Server: N streams at once.
    let served = echo::served_echo(store.clone(), store.clone())?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let root = format!("http://{}", listener.local_addr()?);
    let config = ServerConfig { public_url: root.clone(), ..ServerConfig::default() };
    tokio::spawn(Server::new(vec![served], config)?.serve(listener, std::future::pending()));
    let url = format!("{root}/echo");
    let client = agentloop::tls::http_client_builder()?
        .pool_max_idle_per_host(streams)
        .timeout(Duration::from_secs(300))
        .build()?;
    stream_once(&client, &url, "warm up").await?;
    let started = Instant::now();
    let calls = (0..streams).map(|_| {
        let (client, url, slow) = (client.clone(), url.clone(), slow.clone());
        tokio::spawn(async move { stream_once(&client, &url, &slow).await })
    });
    let (mut latencies, mut events) = (Vec::with_capacity(streams), 0);
    for call in futures::future::join_all(calls).await {
        let seen = call??;
        events += seen.events;
        latencies.push(seen.latency);
    }
    let wall = started.elapsed();
    let (p50, p99) = summary("server (A2A JSON-RPC streams)", latencies, wall);
    let mut alone = Vec::with_capacity(SEQUENTIAL);
    let started_alone = Instant::now();
    for _ in 0..SEQUENTIAL {
        alone.push(stream_once(&client, &url, &slow).await?.latency);
    }
    let (server_alone_p50, server_alone_p99) =
        summary("server, one stream at a time", alone, started_alone.elapsed());
    println!(
        "every stream checked: {streams} streams, {events} events, none lost, reordered or repeated"
    );
    let ms = |a: Duration, b: Duration| (a.as_secs_f64() - b.as_secs_f64()) * 1e3;
    println!(
        "added latency over the library, one at a time: p50 {:.1} ms, p99 {:.1} ms",
        ms(server_alone_p50, alone_p50),
        ms(server_alone_p99, alone_p99)
    );
    println!(
        "added latency over the library, {streams} at once: p50 {:.1} ms, p99 {:.1} ms",
        ms(p50, direct_p50),
        ms(p99, direct_p99)
    );

    // Memory per open stream: N streams held open by a 2 s model.
    let before = rss_kib();
    let calls: Vec<_> = (0..streams)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move { stream_once(&client, &url, "slow 2").await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let during = rss_kib();
    for call in futures::future::join_all(calls).await {
        call??;
    }
    println!(
        "memory: {} KiB resident before, {} KiB with {streams} streams open: {:.1} KiB per open stream (server and client side together)",
        before,
        during,
        during.saturating_sub(before) as f64 / streams as f64
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
