//! Micro-benchmarks beside the overhead benchmark: event fan-out through the driver, tool
//! dispatch, and SSE decoding throughput per provider (each provider's `StreamDecoder` behind
//! the shared SSE parser, over the recorded fixtures repeated to a few MB).
//!
//! `cargo bench -p agentloop-bench --bench micro`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use agentloop::prelude::*;
use agentloop::provider::anthropic::Anthropic;
use agentloop::provider::gemini::Gemini;
use agentloop::provider::openai::{Dialect, OpenAiChat};
use agentloop::provider::openai_responses::OpenAiResponses;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::sse::chunk_stream;
use agentloop::provider::wire::WireFormat;
use agentloop::tool::{ToolContext, ToolExecutor, ToolRegistry, ToolSet};
use agentloop_bench::via_agentloop::Add;
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use futures::StreamExt;
use serde_json::json;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap()
}

/// One model turn streaming `deltas` text deltas, every event consumed: the cost per event
/// of the driver's fan-out (model chunk → event → caller).
fn event_fan_out(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("event_fan_out");
    for deltas in [100usize, 10_000] {
        group.throughput(Throughput::Elements(deltas as u64));
        group.bench_with_input(BenchmarkId::new("text_deltas", deltas), &deltas, |b, &n| {
            b.to_async(&rt).iter_batched(
                || {
                    let model = ScriptedModel::new([ScriptedTurn::text("abcd".repeat(n))])
                        .without_recording()
                        .with_chunk_chars(4);
                    Agent::builder(model).build().unwrap()
                },
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

/// Tool dispatch: the executor alone (lookup, schema validation, the call), and one model
/// turn with 8 parallel calls through the whole driver.
fn tool_dispatch(c: &mut Criterion) {
    let rt = runtime();
    let mut registry = ToolRegistry::new();
    registry.register(Add).unwrap();
    let sets: Vec<Arc<dyn ToolSet>> = vec![Arc::new(registry)];
    let executor = ToolExecutor::new(sets, Duration::from_secs(30)).unwrap();
    let mut group = c.benchmark_group("tool_dispatch");
    group.bench_function("execute_add", |b| {
        b.to_async(&rt).iter(|| async {
            let result = executor
                .execute("add", Ok(json!({"a": 1, "b": 2})), ToolContext::detached("c1"))
                .await;
            black_box(result)
        });
    });
    group.throughput(Throughput::Elements(8));
    group.bench_function("turn_with_8_calls", |b| {
        b.to_async(&rt).iter_batched(
            || {
                let mut turn = ScriptedTurn::tool_call("add", json!({"a": 1, "b": 2}));
                for _ in 1..8 {
                    turn = turn.with_tool_call("add", json!({"a": 1, "b": 2}));
                }
                let model = ScriptedModel::new([turn, ScriptedTurn::text("3")]).without_recording();
                Agent::builder(model).tool(Add).tool_concurrency(8).build().unwrap()
            },
            |agent| async move { agent.run("go").await.unwrap().iterations },
            BatchSize::LargeInput,
        );
    });
    group.finish();
}

fn fixture(dir: &str, name: &str) -> String {
    let path = format!("{}/../agentloop/tests/fixtures/{dir}/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Whole fixture streams, repeated until they add up to `target` bytes.
fn corpus(dir: &str, names: &[&str], target: usize) -> Vec<Bytes> {
    let streams: Vec<Bytes> = names.iter().map(|n| Bytes::from(fixture(dir, n))).collect();
    let mut out = Vec::new();
    let mut total = 0;
    while total < target {
        for stream in &streams {
            total += stream.len();
            out.push(stream.clone());
        }
    }
    out
}

/// Decodes every stream of `corpus` with a fresh decoder of `format`: chunks out.
async fn decode_all(format: &dyn WireFormat, corpus: &[Bytes]) -> usize {
    let mut chunks = 0;
    for stream in corpus {
        let bytes = futures::stream::iter([Ok::<_, std::io::Error>(stream.clone())]);
        let mut decoded =
            chunk_stream(bytes, Duration::from_secs(60), format.stream_decoder(), |e| {
                agentloop::provider::ProviderError::Network { message: e.to_string() }
            });
        while let Some(chunk) = decoded.next().await {
            black_box(chunk.unwrap());
            chunks += 1;
        }
    }
    chunks
}

/// A provider's name, wire format, fixture directory and fixture files.
type Corpus = (&'static str, Box<dyn WireFormat>, &'static str, Vec<&'static str>);

fn sse_decoding(c: &mut Criterion) {
    let rt = runtime();
    let providers: Vec<Corpus> = vec![
        (
            "openai_chat",
            Box::new(OpenAiChat::new("gpt-4.1", Dialect::openai())),
            "openai",
            vec![
                "text_stream.sse",
                "tool_call_stream.sse",
                "parallel_tool_calls_stream.sse",
                "reasoning_tool_call_stream.sse",
            ],
        ),
        (
            "openai_responses",
            Box::new(OpenAiResponses::new("gpt-5", Dialect::openai())),
            "openai_responses",
            vec![
                "text_stream.sse",
                "tool_call_stream.sse",
                "parallel_tool_calls_stream.sse",
                "reasoning_tool_call_stream.sse",
            ],
        ),
        (
            "anthropic",
            Box::new(Anthropic::messages("claude-sonnet-4-5")),
            "anthropic",
            vec![
                "text_stream.sse",
                "tool_use_stream.sse",
                "parallel_tools_stream.sse",
                "thinking_stream.sse",
            ],
        ),
        (
            "gemini",
            Box::new(Gemini::new("gemini-2.5-flash")),
            "gemini",
            vec![
                "text_stream.sse",
                "tool_call_stream.sse",
                "parallel_tools_stream.sse",
                "thinking_stream.sse",
            ],
        ),
    ];
    let mut group = c.benchmark_group("sse_decoding");
    group.measurement_time(Duration::from_secs(5)).sample_size(20);
    for (name, format, dir, fixtures) in &providers {
        let corpus = corpus(dir, fixtures, 4 << 20);
        let bytes: usize = corpus.iter().map(Bytes::len).sum();
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_function(*name, |b| {
            b.to_async(&rt).iter(|| decode_all(format.as_ref(), &corpus));
        });
    }
    group.finish();
}

criterion_group!(benches, event_fan_out, tool_dispatch, sse_decoding);
criterion_main!(benches);
