//! OpenTelemetry end to end, against a real OTLP/HTTP receiver that decodes protobuf with the
//! OpenTelemetry project's own generated classes (scripts/otel/receiver.py on PyPI
//! `opentelemetry-proto`, installed by scripts/otel/install.sh, which prints
//! `AGENTLOOP_OTEL_PYTHON`). Without it these tests are skipped, unless
//! `AGENTLOOP_OTEL_REQUIRED=1` (CI), which makes them fail.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use futures::StreamExt;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running receiver writing the spans it decodes to a file.
struct Receiver {
    child: Child,
    url: String,
    spans: PathBuf,
    metrics: PathBuf,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    fn start(dir: &Path) -> Option<Self> {
        Self::start_with(dir, false)
    }

    /// `grpc`: OTLP over gRPC instead of HTTP/protobuf.
    fn start_with(dir: &Path, grpc: bool) -> Option<Self> {
        let python = match std::env::var("AGENTLOOP_OTEL_PYTHON") {
            Ok(python) => python,
            Err(_) if std::env::var("AGENTLOOP_OTEL_REQUIRED").as_deref() == Ok("1") => {
                panic!("AGENTLOOP_OTEL_PYTHON is not set: run scripts/otel/install.sh")
            }
            Err(_) => {
                eprintln!("skipped: AGENTLOOP_OTEL_PYTHON is not set (scripts/otel/install.sh)");
                return None;
            }
        };
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/otel/receiver.py");
        let spans = dir.join("spans.jsonl");
        let metrics = dir.join("metrics.jsonl");
        let mut command = Command::new(python);
        command.arg(script).arg("--out").arg(&spans).arg("--metrics-out").arg(&metrics);
        if grpc {
            command.arg("--grpc");
        }
        let mut child = command.stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let url = line.trim().strip_prefix("READY ").unwrap().to_owned();
        Some(Self { child, url, spans, metrics })
    }

    /// The spans received so far.
    fn spans(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.spans).unwrap_or_default();
        text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
    }

    /// The metric data points received so far.
    fn metrics(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.metrics).unwrap_or_default();
        text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
    }

    /// Waits (at most 20 s) until `done` holds for the spans received.
    fn wait_for(&self, mut done: impl FnMut(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let spans = self.spans();
            if done(&spans) || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The binary in a clean directory, exporting to `endpoint`.
fn agentloop(dir: &Path, endpoint: &str) -> Command {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("agentloop"));
    command
        .current_dir(dir)
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir)
        .env("NO_COLOR", "1")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_SERVICE_NAME", "otel-test")
        .env("OTEL_BSP_SCHEDULE_DELAY", "200");
    for name in
        ["AGENTLOOP_CONFIG", "AGENTLOOP_PROVIDER", "AGENTLOOP_SERVE_TOKEN", "OTEL_TRACES_SAMPLER"]
    {
        command.env_remove(name);
    }
    command
}

fn calculator(dir: &Path) -> String {
    let path = dir.join("script.json");
    let turns = json!([
        {"text": "Let me calculate.", "tool_calls": [{"name": "calculator", "arguments": {"expression": "17 * 23"}}]},
        {"text": "17 multiplied by 23 is 391."}
    ]);
    std::fs::write(&path, turns.to_string()).unwrap();
    std::fs::write(dir.join("agentloop.toml"), "[agent]\nname = \"calc\"\ntemperature = 0.25\n")
        .unwrap();
    path.display().to_string()
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

#[test]
fn a_run_with_a_tool_call_is_exported_as_exactly_this_tree() {
    let dir = tempfile::tempdir().unwrap();
    let Some(receiver) = Receiver::start(dir.path()) else { return };
    let script = calculator(dir.path());
    let output = agentloop(dir.path(), &receiver.url)
        .args(["--provider", "scripted", "--script", &script, "run", "What is 17*23?"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    // The CLI exports what is queued at exit.
    let spans = receiver.spans();
    let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(spans.len(), 6, "{names:?}");

    let root = named(&spans, "invoke_agent calc")[0];
    assert_eq!(root["kind"], "SPAN_KIND_INTERNAL");
    assert_eq!(root["parent_span_id"], "");
    assert_eq!(root["status"]["code"], "STATUS_CODE_OK");
    assert_eq!(root["resource"]["service.name"], "otel-test");
    assert_eq!(root["scope"]["name"], "agentloop");
    let a = &root["attributes"];
    let run_id = a["agentloop.run.id"].as_str().unwrap();
    // The run's own trace: its id is the run id's (so another process resuming it finds it).
    assert_eq!(root["trace_id"], run_id.trim_start_matches("run_"));
    assert_eq!(a["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(a["gen_ai.agent.name"], "calc");
    assert_eq!(a["gen_ai.provider.name"], "scripted");
    assert_eq!(a["gen_ai.request.model"], "scripted");
    assert_eq!(a["agentloop.run.outcome"], "completed");
    assert_eq!(a["agentloop.run.iterations"], 2);
    assert_eq!(a["agentloop.run.tool_calls"], 1);
    assert_eq!(a["agentloop.run.cost_usd"], 0.0);
    assert!(a["agentloop.run.elapsed_ms"].is_i64());
    assert!(a.get("gen_ai.input.messages").is_none(), "content capture is off by default");

    let iterations = named(&spans, "iteration");
    assert_eq!(iterations.len(), 2);
    let chats = named(&spans, "chat scripted");
    assert_eq!(chats.len(), 2);
    let tools = named(&spans, "execute_tool calculator");
    assert_eq!(tools.len(), 1);
    for (n, iteration) in iterations.iter().enumerate() {
        assert_eq!(iteration["kind"], "SPAN_KIND_INTERNAL");
        assert_eq!(iteration["parent_span_id"], root["span_id"]);
        assert_eq!(iteration["attributes"]["agentloop.iteration"], n + 1);
    }
    let finish = [json!(["tool_calls"]), json!(["stop"])];
    let mut input_total = 0;
    for ((chat, iteration), finish) in chats.iter().zip(&iterations).zip(&finish) {
        assert_eq!(chat["kind"], "SPAN_KIND_CLIENT");
        assert_eq!(chat["parent_span_id"], iteration["span_id"]);
        assert_eq!(chat["status"]["code"], "STATUS_CODE_OK");
        let c = &chat["attributes"];
        assert_eq!(c["gen_ai.operation.name"], "chat");
        assert_eq!(c["gen_ai.provider.name"], "scripted");
        assert_eq!(c["gen_ai.request.model"], "scripted");
        assert_eq!(c["gen_ai.request.temperature"], 0.25);
        assert_eq!(&c["gen_ai.response.finish_reasons"], finish);
        assert!(c["gen_ai.usage.input_tokens"].as_i64().unwrap() > 0);
        assert!(c["gen_ai.usage.output_tokens"].as_i64().unwrap() > 0);
        input_total += c["gen_ai.usage.input_tokens"].as_i64().unwrap();
    }
    assert_eq!(a["gen_ai.usage.input_tokens"], input_total);
    let tool = tools[0];
    assert_eq!(tool["kind"], "SPAN_KIND_INTERNAL");
    assert_eq!(tool["parent_span_id"], iterations[0]["span_id"]);
    assert_eq!(tool["status"]["code"], "STATUS_CODE_OK");
    let t = &tool["attributes"];
    assert_eq!(t["gen_ai.operation.name"], "execute_tool");
    assert_eq!(t["gen_ai.tool.name"], "calculator");
    assert_eq!(t["gen_ai.tool.type"], "function");
    assert!(t["gen_ai.tool.call.id"].as_str().is_some_and(|id| !id.is_empty()));
    assert_eq!(t["agentloop.tool.status"], "ok");
    // Children start and end inside their parents; one trace.
    for span in &spans {
        assert_eq!(span["trace_id"], root["trace_id"]);
        let (start, end) =
            (span["start_time_unix_nano"].as_u64(), span["end_time_unix_nano"].as_u64());
        assert!(start <= end, "{span}");
        assert!(
            start >= root["start_time_unix_nano"].as_u64()
                && end <= root["end_time_unix_nano"].as_u64()
        );
    }
    // The metrics, exported at exit too.
    let metrics = receiver.metrics();
    let point = |name: &str, key: &str, value: &str| {
        metrics
            .iter()
            .find(|m| m["name"] == name && (key.is_empty() || m["attributes"][key] == value))
            .unwrap_or_else(|| panic!("no {name} {key}={value} in {metrics:?}"))
    };
    let input = point("gen_ai.client.token.usage", "gen_ai.token.type", "input");
    assert_eq!(input["type"], "histogram");
    assert_eq!(input["unit"], "{token}");
    assert_eq!(input["count"], 2);
    assert_eq!(input["sum"], input_total as f64);
    assert_eq!(input["attributes"]["gen_ai.provider.name"], "scripted");
    assert_eq!(input["explicit_bounds"][1], 4.0);
    assert_eq!(point("gen_ai.client.token.usage", "gen_ai.token.type", "output")["count"], 2);
    let duration = point("gen_ai.client.operation.duration", "", "");
    assert_eq!((duration["unit"].as_str(), duration["count"].as_u64()), (Some("s"), Some(2)));
    assert_eq!(point("agentloop.runs", "agentloop.run.outcome", "completed")["value"], 1);
    let calls = point("agentloop.tool.calls", "gen_ai.tool.name", "calculator");
    assert_eq!(
        (calls["value"].as_i64(), &calls["attributes"]["agentloop.tool.status"]),
        (Some(1), &json!("ok"))
    );
    assert_eq!(point("agentloop.run.iterations", "", "")["sum"], 2.0);
    assert_eq!(point("agentloop.otel.spans.dropped", "", "")["value"], 0);

    // `runs show` names the trace, the run's latency and cost.
    let show =
        agentloop(dir.path(), &receiver.url).args(["runs", "show", run_id]).output().unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(show.contains(&format!("trace: {}", root["trace_id"].as_str().unwrap())), "{show}");
    assert!(show.contains("latency: ") && show.contains("cost: $0.000000"), "{show}");
}

#[test]
fn spans_and_metrics_go_over_grpc_too() {
    let dir = tempfile::tempdir().unwrap();
    let Some(receiver) = Receiver::start_with(dir.path(), true) else { return };
    let script = calculator(dir.path());
    let output = agentloop(dir.path(), &receiver.url)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .args(["--provider", "scripted", "--script", &script, "run", "What is 17*23?"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
    let spans = receiver.spans();
    let mut names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    let expected = [
        "chat scripted",
        "chat scripted",
        "execute_tool calculator",
        "invoke_agent calc",
        "iteration",
        "iteration",
    ];
    assert_eq!(names, expected);
    assert!(receiver.metrics().iter().any(|m| m["name"] == "gen_ai.client.token.usage"));
}

#[test]
fn with_the_collector_unreachable_the_run_is_unaffected_and_the_loss_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let script = calculator(dir.path());
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let run = |endpoint: Option<String>| {
        let mut command = agentloop(dir.path(), "");
        match endpoint {
            Some(endpoint) => command.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
            None => command.env_remove("OTEL_EXPORTER_OTLP_ENDPOINT"),
        };
        let started = Instant::now();
        let output = command
            .args(["--provider", "scripted", "--script", &script, "run", "--json", "17*23?"])
            .output()
            .unwrap();
        (output, started.elapsed())
    };
    let (down, down_time) = run(Some(format!("http://127.0.0.1:{port}")));
    let (off, _) = run(None);
    assert!(down.status.success());
    let answer = |output: &std::process::Output| {
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        (
            last["type"].clone(),
            last["outcome"]["answer"].clone(),
            last["outcome"]["iterations"].clone(),
        )
    };
    assert_eq!(answer(&down), answer(&off));
    let stderr = String::from_utf8_lossy(&down.stderr);
    assert!(stderr.contains("telemetry: 6 of 6 spans were not exported"), "{stderr}");
    assert!(String::from_utf8_lossy(&off.stderr).is_empty());
    // The run itself never waits for the collector (its journaled iterations take what they
    // take without it); the exit waits at most ~2 s for the collector.
    let iteration_ms = |output: &std::process::Output| -> u64 {
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter(|event| event["type"] == "iteration_completed")
            .map(|event| event["duration_ms"].as_u64().unwrap())
            .sum()
    };
    assert!(iteration_ms(&down) < 500, "{}", iteration_ms(&down));
    assert!(down_time < Duration::from_secs(6), "{down_time:?}");
}

fn rpc(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

fn serve(dir: &Path, endpoint: &str) -> (Child, String) {
    let mut child = agentloop(dir, endpoint)
        .args(["serve", "--agent", "echo", "--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.strip_prefix("listening on ").unwrap().split(' ').next().unwrap().to_owned();
    (child, url)
}

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_requests_join_the_callers_trace_and_a_killed_run_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let Some(receiver) = Receiver::start(dir.path()) else { return };
    let client = agentloop::tls::http_client_builder()
        .unwrap()
        .timeout(Duration::from_secs(90))
        .build()
        .unwrap();
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let (mut first, url) = serve(dir.path(), &receiver.url);

    // A request with a traceparent: the task's run nests under the caller's span.
    let message = json!({"messageId": "m0", "role": "ROLE_USER", "parts": [{"text": "hello"}]});
    let response = client
        .post(&url)
        .header("traceparent", &traceparent)
        .json(&rpc("SendMessage", json!({"message": message})))
        .send()
        .await
        .unwrap();
    let task: Value = response.json().await.unwrap();
    let task_id = task["result"]["task"]["id"].as_str().unwrap().to_owned();
    let spans = receiver.wait_for(|spans| {
        spans.iter().any(|s| s["attributes"]["agentloop.run.id"] == task_id.as_str())
    });
    let root = spans.iter().find(|s| s["attributes"]["agentloop.run.id"] == task_id.as_str());
    let root = root.unwrap_or_else(|| panic!("no span of {task_id}: {spans:?}"));
    assert_eq!(root["name"], "invoke_agent echo");
    assert_eq!(root["trace_id"], CALLER_TRACE);
    assert_eq!(root["parent_span_id"], CALLER_SPAN);
    assert!(root["attributes"]["gen_ai.conversation.id"].is_string());

    // A long task, killed mid-stream (SIGKILL: nothing is flushed), resumed by a new server:
    // the resumed run stays in the caller's trace and links to the interrupted span.
    let message =
        json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "stream 150"}]});
    let response = client
        .post(&url)
        .header("traceparent", &traceparent)
        .json(&rpc("SendStreamingMessage", json!({"message": message})))
        .send()
        .await
        .unwrap();
    let mut body = response.bytes_stream();
    let (mut seen, mut text) = (0, String::new());
    while let Some(Ok(chunk)) = body.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk));
        seen = text.matches("artifactUpdate").count();
        if seen >= 5 {
            break;
        }
    }
    assert!(seen >= 5, "{text}");
    let long_task = text
        .split("\"taskId\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    first.kill().unwrap();
    first.wait().unwrap();

    let (mut second, _url) = serve(dir.path(), &receiver.url);
    let spans = receiver.wait_for(|spans| {
        spans.iter().any(|s| {
            s["attributes"]["agentloop.run.id"] == long_task.as_str()
                && s["attributes"]["agentloop.run.resumed"] == true
                && s["name"] == "invoke_agent echo"
        })
    });
    let resumed = spans
        .iter()
        .find(|s| {
            s["attributes"]["agentloop.run.id"] == long_task.as_str()
                && s["attributes"]["agentloop.run.resumed"] == true
        })
        .unwrap_or_else(|| panic!("the resumed run of {long_task} was not traced: {spans:?}"));
    assert_eq!(resumed["trace_id"], CALLER_TRACE);
    assert_eq!(resumed["parent_span_id"], CALLER_SPAN);
    assert_eq!(resumed["status"]["code"], "STATUS_CODE_OK");
    assert_eq!(resumed["attributes"]["agentloop.run.outcome"], "completed");
    let links = resumed["links"].as_array().unwrap();
    assert_eq!(links.len(), 1, "{resumed}");
    assert_eq!(links[0]["trace_id"], CALLER_TRACE);
    assert_ne!(links[0]["span_id"], resumed["span_id"]);
    // Every iteration in the trace hangs under one of its runs' spans: the first task's, the
    // resumed stretch's, or (sent before the kill, if the exporter got to) the span the
    // link names.
    let parents = [&root["span_id"], &resumed["span_id"], &links[0]["span_id"]];
    for span in spans.iter().filter(|s| s["trace_id"] == CALLER_TRACE && s["name"] == "iteration") {
        assert!(parents.contains(&&span["parent_span_id"]), "{span}");
    }
    second.kill().unwrap();
    second.wait().unwrap();
}

/// `agentloop worker` records the pool's metrics — claims and their latency, jobs by outcome,
/// the queue's depth — and exports them with the run metrics (at exit too).
#[test]
fn a_workers_metrics_reach_the_collector() {
    let dir = tempfile::tempdir().unwrap();
    let Some(receiver) = Receiver::start(dir.path()) else { return };
    let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") else {
        eprintln!("skipped: AGENTLOOP_REDIS_URL is not set");
        return;
    };
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let prefix = format!("agentloop-test:otel-worker:{}:", nanos.as_nanos());
    let script = dir.path().join("script.json");
    std::fs::write(&script, json!([{"text": "Queued, and answered."}]).to_string()).unwrap();
    let toml = format!(
        "[agent]\nname = \"helper\"\n\n[provider]\nkind = \"scripted\"\nscript = {:?}\n\n\
         [store]\nkind = \"redis\"\nurl = {url:?}\nprefix = {prefix:?}\n",
        script.display().to_string()
    );
    std::fs::write(dir.path().join("agentloop.toml"), toml).unwrap();
    let mut worker = agentloop(dir.path(), &receiver.url)
        .args(["worker", "--queue", &url, "--concurrency", "1", "--drain-secs", "5"])
        .env("OTEL_METRIC_EXPORT_INTERVAL", "500")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let run = agentloop(dir.path(), &receiver.url)
        .args(["run", "--queue", &url, "Say something."])
        .output()
        .unwrap();
    let killed = Command::new("kill").arg("-TERM").arg(worker.id().to_string()).status();
    let status = worker.wait().unwrap();
    let cleanup = redis::Client::open(url.as_str()).and_then(|c| c.get_connection());
    if let Ok(mut conn) = cleanup {
        let keys: Vec<String> =
            redis::cmd("KEYS").arg(format!("{prefix}*")).query(&mut conn).unwrap_or_default();
        if !keys.is_empty() {
            let _: Result<i64, _> = redis::cmd("DEL").arg(&keys).query(&mut conn);
        }
    }
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(String::from_utf8_lossy(&run.stdout).contains("Queued, and answered."));
    assert!(killed.unwrap().success() && status.success(), "{status:?}");
    let metrics = receiver.metrics();
    let point = |name: &str, key: &str, value: &str| {
        metrics
            .iter()
            .rev()
            .find(|m| m["name"] == name && m["attributes"][key] == value)
            .unwrap_or_else(|| panic!("no {name} {key}={value} in {metrics:?}"))
            .clone()
    };
    let claims = point("agentloop.worker.claims", "agentloop.agent", "helper");
    assert_eq!(
        (claims["value"].as_i64(), &claims["attributes"]["agentloop.worker.takeover"]),
        (Some(1), &json!(false))
    );
    let latency = point("agentloop.worker.claim.latency", "agentloop.agent", "helper");
    assert_eq!((latency["type"].as_str(), latency["count"].as_u64()), (Some("histogram"), Some(1)));
    let jobs = point("agentloop.worker.jobs", "agentloop.worker.outcome", "ended");
    assert_eq!(
        (jobs["value"].as_i64(), &jobs["attributes"]["agentloop.agent"]),
        (Some(1), &json!("helper"))
    );
    let depth = point("agentloop.worker.queue.depth", "agentloop.agent", "helper");
    assert_eq!(depth["value"], 0, "{depth}");
}
