//! The chaos provider: an OpenAI-compatible server that answers a fifth of its requests with a
//! fault — 429 with `Retry-After`, 500, 529 (overloaded), a stream cut off after its first
//! delta, a stall past the request timeout — and the rest like a model that adds two numbers
//! with the `add` tool. Many runs over it all reach the right answer, no tool runs twice, and
//! every fault shows as exactly one retry or one failed model call.
//!
//! `AGENTLOOP_CHAOS_RUNS` sets the number of runs (200 by default; docs/RELIABILITY.md has
//! the figure for 1,000).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::event::Event;
use agentloop::prelude::*;
use agentloop::provider::http::HttpConfig;
use agentloop::provider::openai::{Dialect, OpenAi};
use agentloop::provider::RetryPolicy;
use futures::StreamExt;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The faults, each served on 4 % of requests.
const FAULTS: [&str; 5] = ["429", "500", "529", "cut", "stall"];

/// Decides each request's fate from a seeded generator, and counts what it served.
struct Chaos {
    requests: AtomicU64,
    served: Mutex<HashMap<&'static str, u64>>,
}

fn chunk(delta: Value, finish: Value) -> String {
    let body = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {body}\n\n")
}

fn sse(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

/// The numbers of "Add A and B." in the first user message.
fn operands(request: &Value) -> (i64, i64) {
    let text = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap();
    let numbers: Vec<i64> =
        text.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse().ok()).collect();
    (numbers[0], numbers[1])
}

impl Respond for Chaos {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let n = self.requests.fetch_add(1, Ordering::SeqCst);
        // SplitMix64 of the request number: reproducible, and spread evenly.
        let mut x = n.wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        let roll = x % 100;
        let fault = (roll < 20).then(|| FAULTS[(roll / 4) as usize]);
        if let Some(fault) = fault {
            *self.served.lock().unwrap().entry(fault).or_default() += 1;
        }
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let result = body["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool");
        match fault {
            Some("429") => ResponseTemplate::new(429)
                .insert_header("retry-after", "0")
                .set_body_json(json!({"error": {"message": "rate limited", "type": "rate_limit"}})),
            Some("500") => ResponseTemplate::new(500)
                .set_body_json(json!({"error": {"message": "boom", "type": "server_error"}})),
            Some("529") => ResponseTemplate::new(529)
                .set_body_json(json!({"error": {"message": "overloaded", "type": "overloaded"}})),
            // A first delta, then the connection ends: no finish, no [DONE].
            Some("cut") => {
                sse(chunk(json!({"role": "assistant", "content": "Let me"}), json!(null)))
            }
            Some(_) => ResponseTemplate::new(200).set_delay(Duration::from_millis(2_500)),
            None => match result {
                Some(result) => {
                    let sum = result["content"].as_str().unwrap();
                    let text = format!("The sum is {sum}.");
                    sse(chunk(json!({"role": "assistant", "content": text}), json!(null))
                        + &chunk(json!({}), json!("stop"))
                        + "data: [DONE]\n\n")
                }
                None => {
                    let (a, b) = operands(&body);
                    let call = json!([{"index": 0, "id": format!("call_{n}"), "type": "function",
                        "function": {"name": "add", "arguments": json!({"a": a, "b": b}).to_string()}}]);
                    sse(chunk(json!({"role": "assistant", "tool_calls": call}), json!(null))
                        + &chunk(json!({}), json!("tool_calls"))
                        + "data: [DONE]\n\n")
                }
            },
        }
    }
}

/// Adds two integers, counting its executions by operands.
#[derive(Clone)]
struct CountingAdd {
    runs: Arc<Mutex<HashMap<(i64, i64), u32>>>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

impl Tool for CountingAdd {
    const NAME: &'static str = "add";
    type Args = AddArgs;
    type Output = i64;
    type Error = String;

    fn description(&self) -> String {
        "Adds two integers.".into()
    }

    async fn call(&self, args: AddArgs, _ctx: ToolContext) -> Result<i64, String> {
        *self.runs.lock().unwrap().entry((args.a, args.b)).or_default() += 1;
        Ok(args.a + args.b)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_through_a_fifth_of_faults_all_answer_right_and_run_no_tool_twice() {
    let runs: u64 =
        std::env::var("AGENTLOOP_CHAOS_RUNS").ok().and_then(|n| n.parse().ok()).unwrap_or(200);
    let server = MockServer::start().await;
    let chaos = Arc::new(Chaos { requests: AtomicU64::new(0), served: Mutex::new(HashMap::new()) });
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ChaosRef(chaos.clone()))
        .mount(&server)
        .await;
    // Quick retries (the schedule is the policy's; only its base is shortened), and a request
    // timeout the stall passes.
    let retry = RetryPolicy::default().with_base(Duration::from_millis(2)).with_jitter_seed(7);
    let config = HttpConfig::new(format!("{}/v1", server.uri()), "m")
        .request_timeout(Duration::from_secs(1))
        .retry_policy(retry);
    let provider = OpenAi::chat_with(config, Dialect::compatible()).unwrap();
    let tool = CountingAdd { runs: Arc::new(Mutex::new(HashMap::new())) };
    // The faults follow the request number, and a run asks again at once after a cut stream
    // while others wait out stalls: a cluster of cuts can land on one run. The run's limit on
    // failed calls in a row (3 by default, tested on its own) is raised so that this test
    // measures recovery.
    let limits = agentloop::run::Limits { max_consecutive_model_errors: 8, ..Default::default() };
    let agent =
        Arc::new(Agent::builder(provider).tool(tool.clone()).limits(limits).build().unwrap());

    let started = std::time::Instant::now();
    let results: Vec<(i64, Vec<Event>)> = futures::stream::iter(0..runs)
        .map(|i| {
            let agent = agent.clone();
            async move {
                let (a, b) = (1_000 + i as i64, 7 * i as i64);
                let events: Vec<Event> =
                    agent.run_stream(format!("Add {a} and {b}.")).collect().await;
                (a + b, events)
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let elapsed = started.elapsed();

    let (mut retries, mut failed_calls, mut wrong) = (0u64, 0u64, Vec::new());
    for (sum, events) in &results {
        retries +=
            events.iter().filter(|e| matches!(e, Event::ModelRetrying { .. })).count() as u64;
        failed_calls +=
            events.iter().filter(|e| matches!(e, Event::ModelFailed { .. })).count() as u64;
        let outcome = events.last().and_then(Event::outcome);
        if outcome.map(|o| o.answer.clone()) != Some(format!("The sum is {sum}.")) {
            wrong.push((sum, outcome.map(|o| format!("{:?}: {}", o.stop_reason, o.answer))));
        }
    }
    let served = chaos.served.lock().unwrap().clone();
    let faults: u64 = served.values().sum();
    let requests = chaos.requests.load(Ordering::SeqCst);
    eprintln!(
        "{runs} runs in {elapsed:?}: {requests} requests, {faults} faults {served:?}, \
         {retries} retries, {failed_calls} failed model calls"
    );
    assert!(
        wrong.is_empty(),
        "{} runs answered wrong: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    let executions = tool.runs.lock().unwrap().clone();
    assert_eq!(executions.len() as u64, runs, "every run ran its tool");
    assert!(executions.values().all(|n| *n == 1), "a tool ran twice: {executions:?}");
    assert!(faults * 100 >= requests * 10, "the server served faults: {faults} of {requests}");
    // Each fault is one retry, or one failed call the run asked again.
    assert_eq!(retries + failed_calls, faults, "{served:?}");
}

/// A shared [`Chaos`], as wiremock takes responders by value.
struct ChaosRef(Arc<Chaos>);

impl Respond for ChaosRef {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.0.respond(request)
    }
}
