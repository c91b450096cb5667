#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::testing::{span::SpanKind, status::StatusCode, MemorySink, Span};
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::run::Run;
use agentloop::tool::{DynTool, ToolContext, ToolError, ToolOutput, ToolSpec};
use futures::StreamExt;
use serde_json::{json, Value};
use std::sync::Arc;

struct Echo;

#[async_trait::async_trait]
impl DynTool for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "echo".into(),
            description: "echoes".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }
    async fn call_json(
        &self,
        args: serde_json::Value,
        _ctx: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::Value(serde_json::Value::String(format!("echo {args}"))))
    }
}

fn telemetry(capture: bool) -> (Telemetry, MemorySink) {
    let exporter = MemorySink::default();
    let config = TelemetryConfig {
        capture_content: capture,
        content_max_bytes: 64,
        ..TelemetryConfig::default()
    };
    (Telemetry::with_sink(config, exporter.clone(), None), exporter)
}

fn spans(telemetry: &Telemetry, exporter: &MemorySink) -> Vec<Span> {
    telemetry.flush();
    exporter.spans()
}

fn attr(span: &Span, key: &str) -> Option<Value> {
    crate::testing::attribute(&span.attributes, key)
}

/// The span's status code.
fn code(span: &Span) -> StatusCode {
    let code = span.status.as_ref().map_or(0, |s| s.code);
    StatusCode::try_from(code).unwrap()
}

fn kind(span: &Span) -> SpanKind {
    SpanKind::try_from(span.kind).unwrap()
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "{name}: {:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>());
    found[0]
}

fn agent(telemetry: &Telemetry, turns: Vec<ScriptedTurn>) -> Agent {
    Agent::builder(ScriptedModel::new(turns))
        .name("helper")
        .temperature(0.5)
        .max_tokens(128)
        .dyn_tool(Arc::new(Echo))
        .observer(telemetry.observer())
        .build()
        .unwrap()
}

fn two_iterations() -> Vec<ScriptedTurn> {
    vec![ScriptedTurn::tool_call("echo", serde_json::json!({"x": 1})), ScriptedTurn::text("done")]
}

#[tokio::test]
async fn a_run_with_a_tool_call_is_one_tree() {
    let (telemetry, exporter) = telemetry(false);
    let agent = agent(&telemetry, two_iterations());
    let outcome = agent.run("hi").await.unwrap();
    let spans = spans(&telemetry, &exporter);
    assert_eq!(spans.len(), 6, "{spans:#?}");
    let root = one(&spans, "invoke_agent helper");
    assert_eq!(root.parent_span_id, Vec::<u8>::new());
    assert_eq!(kind(root), SpanKind::Internal);
    assert_eq!(code(root), StatusCode::Ok);
    let run_id = outcome.run_id.as_str();
    assert_eq!(root.trace_id, ids::run_trace_id(run_id).to_vec());
    assert_eq!(root.span_id, ids::run_span_id(run_id).to_vec());
    assert_eq!(attr(root, "gen_ai.operation.name"), Some(json!("invoke_agent")));
    assert_eq!(attr(root, "gen_ai.agent.name"), Some(json!("helper")));
    assert_eq!(attr(root, "agentloop.run.id"), Some(json!(run_id.to_owned())));
    assert_eq!(attr(root, "agentloop.run.outcome"), Some(json!("completed")));
    assert_eq!(attr(root, "agentloop.run.iterations"), Some(json!(2)));
    assert_eq!(attr(root, "agentloop.run.tool_calls"), Some(json!(1)));
    assert!(attr(root, "gen_ai.input.messages").is_none(), "content is off by default");
    let iterations = named(&spans, "iteration");
    assert_eq!(iterations.len(), 2);
    for (n, iteration) in iterations.iter().enumerate() {
        assert_eq!(iteration.parent_span_id, root.span_id);
        assert_eq!(attr(iteration, "agentloop.iteration"), Some(json!(n as i64 + 1)));
    }
    let chats = named(&spans, "chat scripted");
    assert_eq!(chats.len(), 2);
    for (chat, iteration) in chats.iter().zip(&iterations) {
        assert_eq!(kind(chat), SpanKind::Client);
        assert_eq!(chat.parent_span_id, iteration.span_id);
        assert_eq!(attr(chat, "gen_ai.operation.name"), Some(json!("chat")));
        assert_eq!(attr(chat, "gen_ai.provider.name"), Some(json!("scripted")));
        assert_eq!(attr(chat, "gen_ai.request.model"), Some(json!("scripted")));
        assert_eq!(attr(chat, "gen_ai.request.temperature"), Some(json!(0.5)));
        assert_eq!(attr(chat, "gen_ai.request.max_tokens"), Some(json!(128)));
        assert!(attr(chat, "gen_ai.usage.input_tokens").is_some_and(|v| v.is_i64()));
        assert_eq!(code(chat), StatusCode::Ok);
    }
    let finish = |chat: &Span| format!("{:?}", attr(chat, "gen_ai.response.finish_reasons"));
    assert!(finish(chats[0]).contains("tool_calls"), "{}", finish(chats[0]));
    assert!(finish(chats[1]).contains("stop"), "{}", finish(chats[1]));
    let tool = one(&spans, "execute_tool echo");
    assert_eq!(tool.parent_span_id, iterations[0].span_id);
    assert_eq!(attr(tool, "gen_ai.tool.name"), Some(json!("echo")));
    assert_eq!(attr(tool, "gen_ai.tool.type"), Some(json!("function")));
    assert!(attr(tool, "gen_ai.tool.call.id").is_some_and(|v| v.is_string()));
    assert_eq!(attr(tool, "agentloop.tool.status"), Some(json!("ok")));
    assert!(spans.iter().all(|s| s.trace_id == root.trace_id));
    let stats = telemetry.shutdown(std::time::Duration::from_secs(1));
    assert_eq!((stats.ended, stats.exported, stats.dropped), (6, 6, 0));
}

#[tokio::test]
async fn content_is_captured_when_asked_and_cut_to_size() {
    let (telemetry, exporter) = telemetry(true);
    let agent = agent(&telemetry, two_iterations());
    agent.run("a question that is long enough to be cut at sixty-four bytes").await.unwrap();
    let spans = spans(&telemetry, &exporter);
    let root = one(&spans, "invoke_agent helper");
    let Some(Value::String(input)) = attr(root, "gen_ai.input.messages") else { panic!() };
    let expected = r#"[{"role":"user","parts":[{"type":"text","content":"a question"#;
    assert!(input.as_str().starts_with(expected), "{input}");
    assert!(input.as_str().contains("…[truncated"), "{input}");
    let tool = one(&spans, "execute_tool echo");
    assert_eq!(attr(tool, "gen_ai.tool.call.arguments"), Some(json!(r#"{"x":1}"#)));
    assert_eq!(attr(tool, "gen_ai.tool.call.result"), Some(json!(r#"echo {"x":1}"#)));
    let chats = named(&spans, "chat scripted");
    let Some(Value::String(output)) = attr(chats[1], "gen_ai.output.messages") else { panic!() };
    assert!(output.as_str().contains(r#""content":"done""#), "{output}");
}

#[tokio::test]
async fn a_caller_trace_parent_becomes_the_parent() {
    let (telemetry, exporter) = telemetry(false);
    let agent = agent(&telemetry, vec![ScriptedTurn::text("hi")]);
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let events = agent.run_stream_with("hi", RunOptions::default().trace_parent(parent));
    let _: Vec<_> = events.collect().await;
    let spans = spans(&telemetry, &exporter);
    let root = one(&spans, "invoke_agent helper");
    assert_eq!(crate::testing::hex(&root.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(crate::testing::hex(&root.parent_span_id), "00f067aa0ba902b7");
}

#[tokio::test]
async fn a_resumed_run_keeps_its_trace_and_links_to_its_first_span() {
    let (telemetry, exporter) = telemetry(false);
    let agent = agent(&telemetry, two_iterations());
    // The first stretch stops after the tool's result (the process "dies").
    let mut events = agent.run_stream("hi");
    let mut journal = Vec::new();
    while let Some(event) = events.next().await {
        let stop = matches!(event, Event::ToolCompleted { .. });
        if event.is_durable() {
            journal.push(event);
        }
        if stop {
            break;
        }
    }
    drop(events);
    let run = Run::from_journal(journal.iter()).unwrap();
    let run_id = run.run_id().to_owned();
    let rest: Vec<Event> = agent.continue_run(run, None).collect().await;
    assert!(matches!(rest.last(), Some(Event::RunFinished { .. })), "{rest:?}");
    let spans = spans(&telemetry, &exporter);
    let roots = named(&spans, "invoke_agent helper");
    assert_eq!(roots.len(), 2);
    let (first, second) = (roots[0], roots[1]);
    assert_eq!(first.span_id, ids::run_span_id(&run_id).to_vec());
    assert_eq!(attr(first, "error.type"), Some(json!("interrupted")));
    assert_eq!(second.trace_id, first.trace_id);
    assert_ne!(second.span_id, first.span_id);
    assert_eq!(attr(second, "agentloop.run.resumed"), Some(json!(true)));
    assert_eq!(second.links.len(), 1);
    assert_eq!(second.links[0].span_id, first.span_id);
    assert_eq!(code(second), StatusCode::Ok);
}

#[tokio::test]
async fn a_sub_agent_nests_under_the_tool_call() {
    let (telemetry, exporter) = telemetry(false);
    let child = Agent::builder(ScriptedModel::new([ScriptedTurn::text("child answer")]))
        .name("child")
        .observer(telemetry.observer())
        .build()
        .unwrap();
    let parent = Agent::builder(ScriptedModel::new([
        ScriptedTurn::tool_call("ask_child", serde_json::json!({"input": "q"})),
        ScriptedTurn::text("done"),
    ]))
    .name("parent")
    .dyn_tool(Arc::new(child.as_tool("ask_child", "asks the child")))
    .observer(telemetry.observer())
    .build()
    .unwrap();
    parent.run("hi").await.unwrap();
    let spans = spans(&telemetry, &exporter);
    let root = one(&spans, "invoke_agent parent");
    let tool = one(&spans, "execute_tool ask_child");
    let child = one(&spans, "invoke_agent child");
    assert_eq!(child.parent_span_id, tool.span_id);
    assert_eq!(child.trace_id, root.trace_id);
    assert!(attr(child, "agentloop.run.parent_id").is_some_and(|v| v.is_string()));
}

#[tokio::test]
async fn a_failed_model_call_is_an_error_span() {
    let (telemetry, exporter) = telemetry(false);
    let error = agentloop::provider::ProviderError::InvalidRequest { message: "bad".into() };
    let agent = agent(&telemetry, vec![ScriptedTurn::error(error)]);
    let _ = agent.run("hi").await;
    let spans = spans(&telemetry, &exporter);
    let chat = one(&spans, "chat scripted");
    assert_eq!(attr(chat, "error.type"), Some(json!("invalid_request")));
    assert_eq!(code(chat), StatusCode::Error);
    let root = one(&spans, "invoke_agent helper");
    assert_eq!(code(root), StatusCode::Error);
}

#[tokio::test]
async fn a_model_that_cannot_be_reached_fails_the_run_span_with_the_cause() {
    let (telemetry, exporter) = telemetry(false);
    let message = "sending the request: tcp connect error: Connection refused".to_owned();
    let error = agentloop::provider::ProviderError::Unreachable { message };
    let agent = agent(&telemetry, vec![ScriptedTurn::error(error)]);
    let _ = agent.run("hi").await;
    let spans = spans(&telemetry, &exporter);
    let chat = one(&spans, "chat scripted");
    assert_eq!(attr(chat, "error.type"), Some(json!("unreachable")));
    let root = one(&spans, "invoke_agent helper");
    assert_eq!(code(root), StatusCode::Error);
    let status = root.status.as_ref().map(|s| s.message.clone()).unwrap_or_default();
    assert!(status.contains("could not be reached: sending the request"), "{status}");
}

#[tokio::test]
async fn a_retried_model_call_carries_its_retries_as_events() {
    use agentloop::provider::{ProviderError, RetryPolicy};
    let (telemetry, exporter) = telemetry(false);
    let busy = ProviderError::Server { status: 503, message: "busy".into() };
    let turns = [ScriptedTurn::error(busy), ScriptedTurn::text("ok")];
    let retry = RetryPolicy::new().without_jitter().with_base(std::time::Duration::from_millis(1));
    let agent = Agent::builder(ScriptedModel::new(turns))
        .name("helper")
        .retry_policy(Some(retry))
        .observer(telemetry.observer())
        .build()
        .unwrap();
    assert_eq!(agent.run("hi").await.unwrap().answer, "ok");
    let spans = spans(&telemetry, &exporter);
    let chat = one(&spans, "chat scripted");
    assert_eq!(code(chat), StatusCode::Ok);
    let names: Vec<&str> = chat.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["agentloop.model.retry"]);
    let retry = &chat.events[0].attributes;
    let attribute = |key| crate::testing::attribute(retry, key);
    assert_eq!(attribute("agentloop.retry.attempt"), Some(json!(1)));
    assert_eq!(attribute("error.type"), Some(json!("server")));
}

#[test]
fn the_environment_configures_telemetry() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned())
    };
    assert!(!TelemetryConfig::wanted(env(&[])));
    assert!(TelemetryConfig::wanted(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4318")])));
    assert!(!TelemetryConfig::wanted(env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4318"),
        ("OTEL_SDK_DISABLED", "true")
    ])));
    let config = TelemetryConfig::from_env(env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
        ("OTEL_SERVICE_NAME", "svc"),
        ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
        ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s%3Dcret,x=y"),
        ("AGENTLOOP_OTEL_CAPTURE_CONTENT", "true"),
    ]))
    .unwrap();
    assert_eq!(config.traces_url(), "http://collector:4318/v1/traces");
    assert_eq!(config.metrics_url(), "http://collector:4318/v1/metrics");
    assert_eq!(config.service_name, "svc");
    assert_eq!(config.sampling, Sampling::ParentBasedRatio(0.25));
    assert_eq!(config.headers[0], ("api-key".to_owned(), "s=cret".to_owned()));
    assert!(config.capture_content);
    let bad = TelemetryConfig::from_env(env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]));
    assert!(bad.unwrap_err().to_string().contains("OTEL_EXPORTER_OTLP_PROTOCOL"));
    assert_eq!(config.max_export_batch, 512);
    let config = TelemetryConfig::from_env(env(&[
        ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2048"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "8192"),
    ]))
    .unwrap();
    assert_eq!((config.max_export_batch, config.queue_size), (2048, 8192));
    assert_eq!(config.max_export_bytes, 2 * 1024 * 1024);
    let config =
        TelemetryConfig::from_env(env(&[("AGENTLOOP_OTEL_MAX_EXPORT_BYTES", "65536")])).unwrap();
    assert_eq!(config.max_export_bytes, 65536);
    let bad = TelemetryConfig::from_env(env(&[("AGENTLOOP_OTEL_MAX_EXPORT_BYTES", "1 MiB")]));
    assert!(bad.unwrap_err().to_string().contains("AGENTLOOP_OTEL_MAX_EXPORT_BYTES"));
    let bad = TelemetryConfig::from_env(env(&[("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "0")]));
    assert!(bad.unwrap_err().to_string().contains("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"));
    let bad = TelemetryConfig::from_env(env(&[("OTEL_BSP_SCHEDULE_DELAY", "soon")]));
    assert!(bad.unwrap_err().to_string().contains("OTEL_BSP_SCHEDULE_DELAY"));
}

#[test]
fn content_is_cut_at_a_character_boundary() {
    assert_eq!(content::cut("héllo".into(), 2), "h…[truncated 5 bytes]");
    assert_eq!(content::cut("short".into(), 10), "short");
}

/// A model that reports its response id and model, as the HTTP wire formats do.
struct Reporting;

impl agentloop::provider::Provider for Reporting {
    fn stream(
        &self,
        _request: agentloop::provider::ModelRequest,
    ) -> agentloop::provider::ChunkStream {
        use agentloop::provider::StreamChunk;
        Box::pin(futures::stream::iter([
            Ok(StreamChunk::ResponseInfo {
                id: Some("chatcmpl-42".into()),
                model: Some("gpt-test-2026-01-01".into()),
            }),
            Ok(StreamChunk::TextDelta { text: "hi".into() }),
            Ok(StreamChunk::Finish { reason: agentloop::message::FinishReason::Stop }),
        ]))
    }

    fn name(&self) -> &str {
        "gpt-test"
    }

    fn family(&self) -> &str {
        "openai"
    }
}

#[tokio::test]
async fn the_chat_span_names_the_response_and_the_model_that_answered() {
    let (telemetry, exporter) = telemetry(false);
    let agent = Agent::builder(Reporting).observer(telemetry.observer()).build().unwrap();
    agent.run("hi").await.unwrap();
    let spans = spans(&telemetry, &exporter);
    let chat = one(&spans, "chat gpt-test");
    assert_eq!(attr(chat, "gen_ai.provider.name"), Some(json!("openai")));
    assert_eq!(attr(chat, "gen_ai.request.model"), Some(json!("gpt-test")));
    assert_eq!(attr(chat, "gen_ai.response.id"), Some(json!("chatcmpl-42")));
    assert_eq!(attr(chat, "gen_ai.response.model"), Some(json!("gpt-test-2026-01-01")));
    assert_eq!(one(&spans, "invoke_agent").parent_span_id, Vec::<u8>::new());
}

#[tokio::test]
async fn the_chat_span_names_the_fallback_member_and_the_cache_tokens() {
    use agentloop::message::Usage;
    use agentloop::provider::Fallback;
    let (telemetry, exporter) = telemetry(false);
    let usage =
        Usage { input: 100, output: 5, cached_input: 60, cache_write_input: 30, reasoning: 0 };
    let scripted = ScriptedModel::new([ScriptedTurn::text("ok").with_usage(usage)]);
    let chain = Fallback::new([Fallback::member(scripted)]).unwrap();
    let agent = Agent::builder(chain).observer(telemetry.observer()).build().unwrap();
    agent.run("hi").await.unwrap();
    let spans = spans(&telemetry, &exporter);
    let chat = one(&spans, "chat scripted");
    assert_eq!(attr(chat, "gen_ai.provider.name"), Some(json!("fallback")));
    assert_eq!(attr(chat, "agentloop.model.answered_by"), Some(json!("scripted:scripted")));
    assert_eq!(attr(chat, "gen_ai.usage.input_tokens"), Some(json!(100)));
    assert_eq!(attr(chat, "gen_ai.usage.cache_read.input_tokens"), Some(json!(60)));
    assert_eq!(attr(chat, "gen_ai.usage.cache_creation.input_tokens"), Some(json!(30)));
}

/// A sink whose collector is always down.
struct Down;

impl SpanSink for Down {
    fn export(&mut self, _request: &[u8], _spans: usize) -> Result<(), String> {
        Err("connection refused".into())
    }
}

#[tokio::test]
async fn with_the_collector_down_every_span_is_counted_as_dropped() {
    let config = TelemetryConfig { queue_size: 4, ..TelemetryConfig::default() };
    let telemetry = Telemetry::with_sink(config, Down, None);
    let agent = agent(&telemetry, two_iterations());
    let outcome = agent.run("hi").await.unwrap();
    assert_eq!(outcome.answer, "done");
    let stats = telemetry.shutdown(std::time::Duration::from_secs(2));
    // Six spans, all lost: in failed exports, or (when the export thread is slower than the
    // run) for want of room in the queue of four.
    assert_eq!(stats.ended, 6);
    assert_eq!(stats.exported, 0);
    assert_eq!(stats.dropped, 6, "{stats:?}");
    assert!((1..=6).contains(&stats.failed), "{stats:?}");
}

#[test]
fn the_outcome_kind_without_json_is_the_serde_tag() {
    use agentloop::run::StopReason;
    for reason in [
        StopReason::Completed,
        StopReason::ContextLimit,
        StopReason::DoneTool { tool: "done".into() },
    ] {
        assert_eq!(run::stop_kind(&reason), run::kind_of(&reason), "{reason:?}");
    }
    assert_eq!(run::stop_kind(&StopReason::Completed), "completed");
}

/// A sink whose first export waits until the test lets it go.
struct Held {
    entered: std::sync::mpsc::Sender<()>,
    release: std::sync::mpsc::Receiver<()>,
    inner: MemorySink,
}

impl SpanSink for Held {
    fn export(&mut self, request: &[u8], spans: usize) -> Result<(), String> {
        if self.entered.send(()).is_ok() {
            let _ = self.release.recv();
        }
        self.inner.export(request, spans)
    }
}

#[test]
fn a_full_queue_drops_spans_and_counts_them_at_once() {
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel();
    let sink = MemorySink::default();
    let held = Held { entered: entered_tx, release: release_rx, inner: sink.clone() };
    let config = TelemetryConfig {
        queue_size: 4,
        // Only a full batch (or a flush) starts an export.
        export_delay: std::time::Duration::from_secs(3600),
        metrics: false,
        ..TelemetryConfig::default()
    };
    let telemetry = Telemetry::with_sink(config, held, None);
    // Four spans fill a batch: the export thread takes them and is held in the sink.
    for n in 0..4 {
        drop(telemetry.client_span(&format!("a{n}")));
    }
    entered.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
    // Four more fill the queue; six find no room.
    for n in 0..10 {
        drop(telemetry.client_span(&format!("b{n}")));
    }
    let stats = telemetry.stats();
    assert_eq!((stats.ended, stats.exported, stats.dropped), (14, 0, 6), "{stats:?}");
    // Later exports do not wait (their `entered` finds no receiver).
    drop(entered);
    release.send(()).unwrap();
    let stats = telemetry.flush();
    assert_eq!((stats.ended, stats.exported, stats.failed, stats.dropped), (14, 8, 0, 6));
    let names: Vec<String> = sink.spans().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3"]);
    // After shutdown a span is dropped, and counted.
    telemetry.shutdown(std::time::Duration::from_secs(2));
    drop(telemetry.client_span("late"));
    assert_eq!(telemetry.stats().dropped, 7);
}

#[tokio::test]
async fn an_unsampled_trace_exports_nothing_and_a_sampled_caller_decides() {
    let sink = MemorySink::default();
    let config = TelemetryConfig {
        sampling: Sampling::ParentBasedAlwaysOff,
        capture_content: true,
        ..TelemetryConfig::default()
    };
    let telemetry = Telemetry::with_sink(config, sink.clone(), None);
    let agent = agent(&telemetry, two_iterations());
    agent.run("hi").await.unwrap();
    assert_eq!(telemetry.flush().ended, 0);
    assert!(sink.spans().is_empty());
    // The caller's trace is sampled: so is the run's.
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let options = RunOptions::default().trace_parent(parent);
    let agent = self::agent(&telemetry, two_iterations());
    let _: Vec<_> = agent.run_stream_with("hi", options).collect().await;
    let spans = spans(&telemetry, &sink);
    assert_eq!(spans.len(), 6);
    assert!(spans.iter().all(|s| crate::testing::hex(&s.trace_id) == parent[3..35]));
}

#[tokio::test]
async fn a_malformed_grpc_endpoint_is_an_error_inside_an_async_context() {
    // Built (and failing) inside a tokio runtime, as the CLI does: an error, not a panic.
    let config = TelemetryConfig {
        protocol: Protocol::Grpc,
        traces_endpoint: Some("::bad::".into()),
        metrics: false,
        ..TelemetryConfig::default()
    };
    let error = Telemetry::new(config).unwrap_err();
    assert!(error.to_string().contains("gRPC endpoint"), "{error}");
}

#[tokio::test]
async fn a_malformed_http_endpoint_is_an_error_at_start() {
    let config = TelemetryConfig {
        traces_endpoint: Some("::bad::".into()),
        metrics: false,
        ..TelemetryConfig::default()
    };
    let error = Telemetry::new(config).unwrap_err();
    assert!(error.to_string().contains("the traces endpoint \"::bad::\" is not a URL"), "{error}");
}

#[test]
fn a_request_buffer_comes_back_to_its_pool_when_its_last_clone_is_dropped() {
    use crate::export::{Pool, Pooled, POOLED_REQUESTS};
    let pool = Pool::default();
    let request = |capacity: usize| {
        let mut buf = Vec::with_capacity(capacity);
        buf.extend_from_slice(b"request");
        bytes::Bytes::from_owner(Pooled { buf, pool: pool.clone() })
    };
    let first = request(1000);
    let clone = first.clone();
    drop(first);
    // A clone still holds it (the HTTP client, say).
    assert!(pool.lock().unwrap().is_empty());
    assert_eq!(&clone[..], b"request");
    drop(clone);
    let back = pool.lock().unwrap().pop().unwrap();
    assert_eq!((back.capacity(), &back[..]), (1000, &b"request"[..]));
    // The pool keeps a few; more are freed.
    let many: Vec<_> = (0..POOLED_REQUESTS + 2).map(|_| request(10)).collect();
    drop(many);
    assert_eq!(pool.lock().unwrap().len(), POOLED_REQUESTS);
}

#[test]
fn a_full_batch_of_the_configured_size_is_exported_at_once_in_one_request() {
    let sink = MemorySink::default();
    let config = TelemetryConfig {
        max_export_batch: 3,
        // Only a full batch (or a flush) starts an export.
        export_delay: std::time::Duration::from_secs(3600),
        metrics: false,
        ..TelemetryConfig::default()
    };
    let telemetry = Telemetry::with_sink(config, sink.clone(), None);
    for n in 0..7 {
        drop(telemetry.client_span(&format!("s{n}")));
    }
    // Two full batches go without a flush; the seventh span waits for one.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while telemetry.stats().exported < 6 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!((telemetry.stats().exported, sink.requests()), (6, 2));
    assert_eq!(telemetry.flush().exported, 7);
    assert_eq!(sink.requests(), 3);
    telemetry.shutdown(std::time::Duration::from_secs(2));
}

#[test]
fn a_batch_that_reaches_the_byte_limit_is_exported_at_once() {
    let sink = MemorySink::default();
    let config = TelemetryConfig {
        // Room for a thousand spans, but not for two of these names.
        max_export_batch: 1000,
        max_export_bytes: 300,
        export_delay: std::time::Duration::from_secs(3600),
        metrics: false,
        ..TelemetryConfig::default()
    };
    let telemetry = Telemetry::with_sink(config, sink.clone(), None);
    let long = "n".repeat(200);
    for n in 0..4 {
        drop(telemetry.client_span(&format!("{long}{n}")));
    }
    drop(telemetry.client_span("short"));
    // Every second span's entry (each over 200 bytes) passes the limit: its batch goes at
    // once, without a flush; the short one waits.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while telemetry.stats().exported < 4 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!((telemetry.stats().exported, sink.requests()), (4, 2));
    let names: Vec<String> = spans(&telemetry, &sink).into_iter().map(|s| s.name).collect();
    assert_eq!(names.len(), 5);
    assert_eq!((names[0].len(), names[4].as_str()), (201, "short"));
    assert_eq!(sink.requests(), 3);
    telemetry.shutdown(std::time::Duration::from_secs(2));
}

/// The events wait to be handled in batches: without a flush, the export thread still
/// handles them and exports their spans within the export delay.
#[tokio::test]
async fn spans_of_waiting_events_are_exported_within_the_export_delay() {
    let exporter = MemorySink::default();
    let config = TelemetryConfig {
        export_delay: std::time::Duration::from_millis(50),
        ..TelemetryConfig::default()
    };
    let telemetry = Telemetry::with_sink(config, exporter.clone(), None);
    agent(&telemetry, two_iterations()).run("hi").await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while exporter.spans().len() < 6 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(exporter.spans().len(), 6, "no flush: the export delay exports the run");
    assert_eq!(telemetry.stats().exported, 6);
}

/// A span's times are those of its events, not of when the events were handled.
#[tokio::test]
async fn span_times_are_the_events_times_however_late_they_are_handled() {
    let (telemetry, exporter) = telemetry(false);
    let before = crate::span::now();
    agent(&telemetry, two_iterations()).run("hi").await.unwrap();
    let after = crate::span::now();
    // Handled a second later (the default export delay), at the flush.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let spans = spans(&telemetry, &exporter);
    assert_eq!(spans.len(), 6);
    for span in &spans {
        let (start, end) = (span.start_time_unix_nano, span.end_time_unix_nano);
        assert!(before <= start && start <= end && end <= after, "{}: {start}..{end}", span.name);
    }
    let root = one(&spans, "invoke_agent helper");
    for span in &spans {
        assert!(root.start_time_unix_nano <= span.start_time_unix_nano, "{}", span.name);
        assert!(span.end_time_unix_nano <= root.end_time_unix_nano, "{}", span.name);
    }
}

/// More runs at once than wait before their events are handled: their notes are handled
/// while other runs go on (a run's may be handled in more than one drain), and each run is
/// still its own tree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_runs_at_once_each_make_their_own_tree() {
    let (telemetry, exporter) = telemetry(false);
    let runs = 100;
    let tasks: Vec<_> = (0..runs)
        .map(|_| {
            let agent = agent(&telemetry, two_iterations());
            tokio::spawn(async move { agent.run("hi").await.unwrap().run_id })
        })
        .collect();
    let mut run_ids = Vec::new();
    for task in tasks {
        run_ids.push(task.await.unwrap());
    }
    let spans = spans(&telemetry, &exporter);
    assert_eq!(spans.len(), runs * 6);
    for run_id in &run_ids {
        let trace_id = ids::run_trace_id(run_id.as_str()).to_vec();
        let tree: Vec<Span> = spans.iter().filter(|s| s.trace_id == trace_id).cloned().collect();
        assert_eq!(tree.len(), 6, "{run_id}");
        let root = one(&tree, "invoke_agent helper");
        assert_eq!(root.span_id, ids::run_span_id(run_id.as_str()).to_vec());
        let iterations = named(&tree, "iteration");
        assert_eq!(iterations.len(), 2);
        assert!(iterations.iter().all(|i| i.parent_span_id == root.span_id));
        let chats = named(&tree, "chat scripted");
        assert_eq!(chats.len(), 2);
        for (chat, iteration) in chats.iter().zip(&iterations) {
            assert_eq!(chat.parent_span_id, iteration.span_id);
        }
        let tool = one(&tree, "execute_tool echo");
        assert_eq!(tool.parent_span_id, iterations[0].span_id);
        assert!(tree.iter().all(|s| code(s) != StatusCode::Error), "{run_id}");
        assert_eq!(attr(root, "agentloop.run.tool_calls"), Some(json!(1)));
    }
}

/// A run with more events than wait before they are handled: its own thread handles
/// them as it goes (not only the export thread, every export delay), in order.
#[tokio::test]
async fn a_long_run_has_its_events_handled_as_it_goes() {
    let (telemetry, exporter) = telemetry(false);
    let calls = 120;
    let mut turns: Vec<ScriptedTurn> =
        (0..calls).map(|n| ScriptedTurn::tool_call("echo", json!({ "n": n }))).collect();
    turns.push(ScriptedTurn::text("done"));
    let agent = Agent::builder(ScriptedModel::new(turns))
        .name("helper")
        .max_iterations(calls as u32 + 5)
        .dyn_tool(Arc::new(Echo))
        .observer(telemetry.observer())
        .build()
        .unwrap();
    let outcome = agent.run("hi").await.unwrap();
    assert_eq!(outcome.iterations, calls as u32 + 1);
    // Six notes an iteration: more than 512 were handled before the run ended (the
    // default export delay is a second away).
    assert!(telemetry.stats().ended >= 3 * 80, "{:?}", telemetry.stats());
    let spans = spans(&telemetry, &exporter);
    assert_eq!(spans.len(), 1 + 2 * (calls + 1) + calls);
    let iterations = named(&spans, "iteration");
    let chats = named(&spans, "chat scripted");
    let tools = named(&spans, "execute_tool echo");
    assert_eq!((iterations.len(), chats.len(), tools.len()), (calls + 1, calls + 1, calls));
    for (n, iteration) in iterations.iter().enumerate() {
        assert_eq!(attr(iteration, "agentloop.iteration"), Some(json!(n as i64 + 1)));
        assert_eq!(chats[n].parent_span_id, iteration.span_id);
        if n < calls {
            assert_eq!(tools[n].parent_span_id, iteration.span_id);
        }
    }
    let root = one(&spans, "invoke_agent helper");
    assert_eq!(attr(root, "agentloop.run.tool_calls"), Some(json!(calls as i64)));
    assert_eq!(code(root), StatusCode::Ok);
}

/// A note is what the loop's thread writes per event (docs/PERFORMANCE.md, "Events noted,
/// not copied"): keep it small. A performance guard, not a timing (112: a model call's note
/// holds its `Usage`, five counts).
#[test]
fn a_note_stays_small() {
    let size = std::mem::size_of::<crate::live::Note>();
    assert!(size <= 112, "a note is {size} bytes");
}
