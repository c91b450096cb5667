//! Framework overhead of the loop, with no HTTP: the scripted model answers instantly, so
//! what is measured is agentloop's own work per iteration (Run decisions, event streaming,
//! tool dispatch with validation, journal events, history bookkeeping).
//!
//! `cargo bench -p agentloop --bench run_overhead`

use agentloop::message::{FinishReason, Message, Part, Role, ToolCall, Usage};
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::ModelResponse;
use agentloop::run::Run;
use agentloop::run::RunConfig;
use agentloop::run::Step;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use futures::StreamExt;
use serde_json::json;
use std::hint::black_box;
use std::time::Duration;

/// Adds two integers.
#[tool]
async fn add(a: i64, b: i64) -> Result<i64, String> {
    a.checked_add(b).ok_or_else(|| "overflow".to_string())
}

const USAGE: Usage =
    Usage { input: 100, output: 10, cached_input: 0, reasoning: 0, cache_write_input: 0 };

/// An agent whose model calls `add` `iterations - 1` times, then answers.
fn agent(iterations: u32) -> Agent {
    let call = || ScriptedTurn::tool_call("add", json!({"a": 1, "b": 2})).with_usage(USAGE);
    let turns = (1..iterations).map(|_| call()).chain([ScriptedTurn::text("3").with_usage(USAGE)]);
    let model = ScriptedModel::new(turns).without_recording().with_chunk_chars(16);
    Agent::builder(model).tool(Add).max_iterations(iterations).build().unwrap_or_else(|e| {
        eprintln!("bench setup failed: {e}");
        std::process::exit(1)
    })
}

/// The whole loop through the async driver: `iterations` model turns, each with one tool call.
fn driver(c: &mut Criterion) {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap_or_else(|e| {
            eprintln!("runtime: {e}");
            std::process::exit(1)
        });
    let mut group = c.benchmark_group("driver");
    group.measurement_time(Duration::from_secs(8)).sample_size(20);
    for iterations in [10u32, 1_000] {
        group.throughput(Throughput::Elements(u64::from(iterations)));
        group.bench_with_input(BenchmarkId::new("iterations", iterations), &iterations, |b, &n| {
            b.to_async(&runtime).iter_batched(
                || agent(n),
                |agent| async move {
                    let mut events = agent.run_stream("go");
                    let mut count = 0usize;
                    while let Some(event) = events.next().await {
                        count += 1;
                        black_box(&event);
                    }
                    count
                },
                BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

/// The sans-IO machine alone: decisions, events and history for `iterations` turns.
fn run_machine(c: &mut Criterion) {
    let response = ModelResponse {
        message: Message {
            role: Role::Assistant,
            content: vec![Part::ToolCall(ToolCall {
                id: "c".into(),
                name: "add".into(),
                arguments: r#"{"a":1,"b":2}"#.into(),
            })],
        },
        finish_reason: FinishReason::ToolCalls,
        usage: USAGE,
        id: None,
        model: None,
        provider: None,
    };
    let mut group = c.benchmark_group("run");
    group.sample_size(30);
    for iterations in [10u32, 1_000] {
        group.throughput(Throughput::Elements(u64::from(iterations)));
        group.bench_with_input(BenchmarkId::new("iterations", iterations), &iterations, |b, &n| {
            b.iter(|| {
                let mut config = RunConfig::default();
                config.limits.max_iterations = n + 1;
                let mut run = Run::new("bench", config, vec![Message::user("go")]);
                let mut events = 0usize;
                for _ in 0..n {
                    let Step::CallModel(request) = run.next_step() else { break };
                    drop(request);
                    let _ = run.model_responded(response.clone(), Duration::ZERO);
                    let _ = run.tool_started("c", Some(json!({"a": 1, "b": 2})));
                    let _ = run.tool_finished("c", Ok(ToolOutput::Value(json!(3))), Duration::ZERO);
                    events += run.drain_events().count();
                }
                black_box(events)
            });
        });
    }
    group.finish();
}

/// Context bookkeeping as history grows: one full `Run` iteration (request with the window
/// plan and view, response, tool call and result) on a run whose history already holds
/// `messages` messages — both sizes are past the default 50-message window, so the cost must
/// not depend on the size.
fn context(c: &mut Criterion) {
    fn iteration(run: &mut Run, id: &str) {
        let Step::CallModel(request) = run.next_step() else { return };
        drop(request);
        let response = ModelResponse {
            message: Message {
                role: Role::Assistant,
                content: vec![Part::ToolCall(ToolCall {
                    id: id.into(),
                    name: "add".into(),
                    arguments: r#"{"a":1,"b":2}"#.into(),
                })],
            },
            finish_reason: FinishReason::ToolCalls,
            usage: USAGE,
            id: None,
            model: None,
            provider: None,
        };
        let _ = run.model_responded(response, Duration::ZERO);
        let _ = run.tool_started(id, Some(json!({"a": 1, "b": 2})));
        let _ = run.tool_finished(id, Ok(ToolOutput::Value(json!(3))), Duration::ZERO);
        black_box(run.drain_events().count());
    }
    let mut group = c.benchmark_group("context");
    group.sample_size(30);
    for messages in [1_000usize, 10_000] {
        let mut config = RunConfig::default();
        config.limits.max_iterations = u32::MAX;
        let mut base = Run::new("bench", config, vec![Message::user("go")]);
        for i in 0..messages / 2 {
            iteration(&mut base, &format!("warm{i}"));
        }
        group.bench_function(BenchmarkId::new("iteration_at", messages), |b| {
            b.iter_custom(|iters| {
                let mut run = base.clone();
                iteration(&mut run, "first"); // the clone's first request copies the shared view
                let started = std::time::Instant::now();
                for i in 0..iters {
                    iteration(&mut run, &format!("c{i}"));
                }
                started.elapsed()
            });
        });
    }
    group.finish();
}

criterion_group!(benches, run_machine, context, driver);
criterion_main!(benches);
