//! [`RunTrace`]: the spans of one stretch of a run, derived from its events.
//!
//! ```text
//! invoke_agent {agent}                 INTERNAL  the stretch (a new run, or one resumed)
//! ├── iteration                        INTERNAL  one per iteration
//! │   ├── chat {model}                 CLIENT    each model call (retries are its events)
//! │   └── execute_tool {tool}          INTERNAL  each tool call
//! ├── compaction                       INTERNAL  a summarisation of the history
//! └── pause                            INTERNAL  from `paused` to `resumed`
//! ```
//!
//! Approvals, limits, stalls, continuations, answers and hook failures are span events.

use crate::semconv as sc;
use crate::telemetry::Inner;
use crate::{content, ids};
use agentloop::event::{Event, ModelPurpose};
use agentloop::message::{FinishReason, ToolResultContent, Usage};
use agentloop::observe::{ObservedRun, RunObserver};
use agentloop::run::{Outcome, StopReason};
use opentelemetry::trace::{
    Link, SpanContext, SpanKind, Status, TraceContextExt, TraceFlags, TraceState, Tracer,
};
use opentelemetry::{Context, KeyValue, StringValue, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

/// The spans of one stretch of a run.
pub(crate) struct RunTrace {
    telemetry: Arc<Inner>,
    /// The attributes every model call shares (provider, model, sampling).
    chat_base: Vec<KeyValue>,
    /// `chat {model}`.
    chat_name: String,
    /// Shared (reference-counted): every span and metric point that names them clones them.
    provider: StringValue,
    model: StringValue,
    state: Mutex<State>,
}

/// Room for the attributes a model call's span gets when it ends (finish reasons, usage,
/// duration, output), so that setting them does not grow the vector.
const CHAT_END_ATTRIBUTES: usize = 6;
/// Room for the attributes the run's span gets when it ends (elapsed time, tool calls,
/// outcome, iterations, cost, usage).
const ROOT_END_ATTRIBUTES: usize = 9;

#[derive(Default)]
struct State {
    root: Context,
    iteration: Option<Context>,
    chat: Option<(Context, SystemTime)>,
    tools: HashMap<String, Context>,
    compaction: Option<Context>,
    pause: Option<Context>,
    /// `IterationStarted.at_ms` of the last iteration and its duration once it ended.
    elapsed_ms: u64,
    tool_calls: u32,
    ended: bool,
}

impl RunTrace {
    /// Starts the stretch's `invoke_agent` span.
    pub(crate) fn start(telemetry: Arc<Inner>, run: &ObservedRun<'_>) -> Self {
        let config = run.config;
        let provider = StringValue::from(Arc::<str>::from(sc::provider_name(run.provider)));
        let model = StringValue::from(Arc::<str>::from(run.model));
        let mut chat_base = vec![
            KeyValue::new(sc::OPERATION_NAME, "chat"),
            KeyValue::new(sc::PROVIDER_NAME, provider.clone()),
            KeyValue::new(sc::REQUEST_MODEL, model.clone()),
        ];
        if let Some(temperature) = config.temperature {
            chat_base.push(KeyValue::new(sc::REQUEST_TEMPERATURE, f64::from(temperature)));
        }
        if let Some(max_tokens) = config.max_tokens {
            chat_base.push(KeyValue::new(sc::REQUEST_MAX_TOKENS, i64::from(max_tokens)));
        }
        let agent = config.agent.as_deref();
        let name = agent.map_or_else(|| "invoke_agent".to_owned(), |a| format!("invoke_agent {a}"));
        let optional = [
            agent.is_some(),
            config.context_id.is_some(),
            config.parent_run_id.is_some(),
            run.resumed,
        ];
        let optional = optional.into_iter().filter(|set| *set).count();
        // Room for exactly what the span will hold: a vector that grows is copied, and one
        // larger than needed was measurably slower to allocate (`bench-otel`, callgrind).
        let mut attributes = Vec::with_capacity(4 + optional + ROOT_END_ATTRIBUTES);
        attributes.extend([
            KeyValue::new(sc::OPERATION_NAME, "invoke_agent"),
            KeyValue::new(sc::PROVIDER_NAME, provider.clone()),
            KeyValue::new(sc::REQUEST_MODEL, model.clone()),
            KeyValue::new(sc::RUN_ID, run.run_id.to_owned()),
        ]);
        if let Some(agent) = agent {
            attributes.push(KeyValue::new(sc::AGENT_NAME, agent.to_owned()));
        }
        if let Some(context) = &config.context_id {
            attributes.push(KeyValue::new(sc::CONVERSATION_ID, context.clone()));
        }
        if let Some(parent) = &config.parent_run_id {
            attributes.push(KeyValue::new(sc::PARENT_RUN_ID, parent.clone()));
        }
        if run.resumed {
            attributes.push(KeyValue::new(sc::RUN_RESUMED, true));
        }
        let caller = config.trace_parent.as_deref().map(|tp| telemetry.extract(tp));
        let caller = caller.filter(|cx| cx.span().span_context().is_valid());
        let own_trace = ids::run_trace_id(run.run_id);
        let trace_id = caller.as_ref().map_or(own_trace, |cx| cx.span().span_context().trace_id());
        let first_span = ids::run_span_id(run.run_id);
        let parent = caller.unwrap_or_default();
        let mut builder = telemetry
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes);
        if run.resumed {
            // The stretch that began the run (its span id is the run's): the one this
            // continues.
            let first = SpanContext::new(
                trace_id,
                first_span,
                TraceFlags::SAMPLED,
                true,
                TraceState::default(),
            );
            builder = builder.with_links(vec![Link::with_context(first)]);
        }
        let planned_span = (!run.resumed).then_some(first_span);
        let span = telemetry.ids.plan(Some(own_trace), planned_span, || {
            builder.start_with_context(&telemetry.tracer, &parent)
        });
        let root = parent.with_span(span);
        Self {
            chat_name: format!("chat {}", run.model),
            telemetry,
            chat_base,
            provider,
            model,
            state: Mutex::new(State { root, ..State::default() }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn capture(&self) -> Option<usize> {
        self.telemetry.config.capture_content.then_some(self.telemetry.config.content_max_bytes)
    }

    /// A child span of `parent`, started now (or at `start`).
    fn child(
        &self,
        parent: &Context,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
        start: Option<SystemTime>,
    ) -> Context {
        let mut builder =
            self.telemetry.tracer.span_builder(name).with_kind(kind).with_attributes(attributes);
        if let Some(start) = start {
            builder = builder.with_start_time(start);
        }
        parent.with_span(builder.start_with_context(&self.telemetry.tracer, parent))
    }

    fn handle(&self, state: &mut State, event: &Event) {
        match event {
            Event::RunStarted { config, input, .. } => {
                if let Some(max) = self.capture() {
                    let span = state.root.span();
                    if let Some(instructions) = &config.instructions {
                        let text = content::cut(instructions.clone(), max);
                        span.set_attribute(KeyValue::new(sc::SYSTEM_INSTRUCTIONS, text));
                    }
                    span.set_attribute(KeyValue::new(
                        sc::INPUT_MESSAGES,
                        content::messages(input, max),
                    ));
                }
            }
            Event::IterationStarted { iteration, at_ms } => {
                end(state.iteration.take());
                state.elapsed_ms = *at_ms;
                let attributes = vec![KeyValue::new(sc::ITERATION, i64::from(*iteration))];
                let root = state.root.clone();
                state.iteration =
                    Some(self.child(&root, "iteration", SpanKind::Internal, attributes, None));
            }
            Event::IterationCompleted { duration_ms, .. } => {
                state.elapsed_ms += duration_ms;
                end(state.iteration.take());
            }
            Event::ModelRequested { iteration, purpose } => {
                let mut attributes =
                    Vec::with_capacity(self.chat_base.len() + 2 + CHAT_END_ATTRIBUTES);
                attributes.extend_from_slice(&self.chat_base);
                attributes.push(KeyValue::new(sc::ITERATION, i64::from(*iteration)));
                if let ModelPurpose::WindDown { .. } = purpose {
                    attributes.push(KeyValue::new(sc::MODEL_PURPOSE, "wind_down"));
                }
                let parent = state.iteration.clone().unwrap_or_else(|| state.root.clone());
                let chat =
                    self.child(&parent, self.chat_name.clone(), SpanKind::Client, attributes, None);
                if let Some((old, _)) = state.chat.replace((chat, SystemTime::now())) {
                    end(Some(old));
                }
            }
            Event::ModelRetrying { attempt, delay_ms, error } => {
                let cx = state.chat.as_ref().map_or(&state.root, |(cx, _)| cx);
                cx.span().add_event(
                    "agentloop.model.retry",
                    vec![
                        KeyValue::new("agentloop.retry.attempt", i64::from(*attempt)),
                        KeyValue::new("agentloop.retry.delay_ms", millis(*delay_ms)),
                        KeyValue::new(sc::ERROR_TYPE, kind_of(error)),
                        KeyValue::new("exception.message", error.to_string()),
                    ],
                );
            }
            Event::ModelResponded {
                message,
                finish_reason,
                usage,
                duration_ms,
                response_id,
                response_model,
                ..
            } => {
                let Some((cx, _)) = state.chat.take() else { return };
                let span = cx.span();
                if let Some(id) = response_id {
                    span.set_attribute(KeyValue::new(sc::RESPONSE_ID, id.clone()));
                }
                if let Some(model) = response_model {
                    span.set_attribute(KeyValue::new(sc::RESPONSE_MODEL, model.clone()));
                }
                let finish = KeyValue::new(
                    sc::RESPONSE_FINISH_REASONS,
                    Value::Array(vec![StringValue::from(finish_name(finish_reason))].into()),
                );
                let duration = KeyValue::new(sc::MODEL_DURATION_MS, millis(*duration_ms));
                span.set_attributes([finish, duration].into_iter().chain(usage_attributes(usage)));
                if let Some(max) = self.capture() {
                    let text = content::messages(std::slice::from_ref(message), max);
                    span.set_attribute(KeyValue::new(sc::OUTPUT_MESSAGES, text));
                }
                span.set_status(Status::Ok);
                span.end();
                self.telemetry.record_model_call(
                    self.metric_base(),
                    Some(usage),
                    *duration_ms,
                    None,
                );
            }
            Event::ModelFailed { error, .. } => {
                let kind = kind_of(error);
                let duration = match state.chat.take() {
                    Some((cx, started)) => {
                        fail(&cx, &kind, &error.to_string());
                        cx.span().end();
                        started.elapsed().unwrap_or_default()
                    }
                    None => Duration::ZERO,
                };
                let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
                self.telemetry.record_model_call(self.metric_base(), None, ms, Some(kind));
            }
            Event::ToolStarted { call, arguments } => {
                state.tool_calls += 1;
                let mut attributes = tool_attributes(&call.name, &call.id);
                if let Some(max) = self.capture() {
                    let text = content::cut(arguments.to_string(), max);
                    attributes.push(KeyValue::new(sc::TOOL_CALL_ARGUMENTS, text));
                }
                let parent = state.iteration.clone().unwrap_or_else(|| state.root.clone());
                let name = format!("execute_tool {}", call.name);
                let cx = self.child(&parent, name, SpanKind::Internal, attributes, None);
                state.tools.insert(call.id.clone(), cx);
            }
            Event::ToolCompleted { name, result, duration_ms, .. } => {
                let cx = self.tool_span(state, name, &result.call_id, *duration_ms);
                self.tool_result(&cx, &result.content);
                cx.span().set_attribute(KeyValue::new(sc::TOOL_STATUS, "ok"));
                cx.span().set_status(Status::Ok);
                cx.span().end();
                self.telemetry.record_tool_call(name, "ok");
            }
            Event::ToolFailed { name, result, error, duration_ms, .. } => {
                let cx = self.tool_span(state, name, &result.call_id, *duration_ms);
                self.tool_result(&cx, &result.content);
                cx.span().set_attribute(KeyValue::new(sc::TOOL_STATUS, "error"));
                fail(&cx, &kind_of(error), &error.to_string());
                cx.span().end();
                self.telemetry.record_tool_call(name, "error");
            }
            Event::ToolTimedOut { name, result, timeout_ms, .. } => {
                let cx = self.tool_span(state, name, &result.call_id, *timeout_ms);
                cx.span().set_attribute(KeyValue::new(sc::TOOL_STATUS, "timeout"));
                fail(&cx, "timeout", &format!("no result within {timeout_ms} ms"));
                cx.span().end();
                self.telemetry.record_tool_call(name, "timeout");
            }
            Event::ApprovalRequested { call, .. } => {
                let mut attributes = tool_attributes(&call.name, &call.id);
                attributes.truncate(2);
                state.root.span().add_event("agentloop.approval.requested", attributes);
            }
            Event::ApprovalDecided { call_id, decision } => {
                state.root.span().add_event(
                    "agentloop.approval.decided",
                    vec![
                        KeyValue::new(sc::TOOL_CALL_ID, call_id.clone()),
                        KeyValue::new("agentloop.approval.decision", kind_of(decision)),
                    ],
                );
            }
            Event::LimitReached { limit } => {
                let attributes = vec![KeyValue::new("agentloop.limit", kind_of(limit))];
                state.root.span().add_event("agentloop.limit_reached", attributes);
            }
            Event::StallDetected { tool, count, .. } => {
                state.root.span().add_event(
                    "agentloop.stall_detected",
                    vec![
                        KeyValue::new(sc::TOOL_NAME, tool.clone()),
                        KeyValue::new("agentloop.stall.count", i64::from(*count)),
                    ],
                );
            }
            Event::Paused { reason } => {
                let attributes = vec![KeyValue::new("agentloop.pause.reason", reason.clone())];
                let root = state.root.clone();
                end(state.pause.take());
                state.pause =
                    Some(self.child(&root, "pause", SpanKind::Internal, attributes, None));
            }
            Event::Resumed => end(state.pause.take()),
            Event::ContinuationRequested { .. } => {
                state.root.span().add_event("agentloop.continuation", Vec::new());
            }
            Event::InputProvided { message } => {
                let mut attributes = Vec::new();
                if let Some(max) = self.capture() {
                    let text = content::messages(std::slice::from_ref(message), max);
                    attributes.push(KeyValue::new(sc::INPUT_MESSAGES, text));
                }
                state.root.span().add_event("agentloop.input_provided", attributes);
            }
            Event::CompactionStarted { tokens_before, cut, .. } => {
                let attributes = vec![
                    KeyValue::new("agentloop.compaction.tokens_before", millis(*tokens_before)),
                    KeyValue::new("agentloop.compaction.cut", millis(*cut as u64)),
                ];
                let root = state.root.clone();
                end(state.compaction.take());
                state.compaction =
                    Some(self.child(&root, "compaction", SpanKind::Internal, attributes, None));
            }
            Event::CompactionCompleted { tokens_after, usage, .. } => {
                if let Some(cx) = state.compaction.take() {
                    let span = cx.span();
                    span.set_attribute(KeyValue::new(
                        "agentloop.compaction.tokens_after",
                        millis(*tokens_after),
                    ));
                    for kv in usage_attributes(usage) {
                        span.set_attribute(kv);
                    }
                    span.set_status(Status::Ok);
                    span.end();
                }
            }
            Event::CompactionFailed { error } => {
                if let Some(cx) = state.compaction.take() {
                    fail(&cx, "compaction_failed", error);
                    cx.span().end();
                }
            }
            Event::HookFailed { hook, point, error, critical } => {
                state.root.span().add_event(
                    "agentloop.hook_failed",
                    vec![
                        KeyValue::new("agentloop.hook.name", hook.clone()),
                        KeyValue::new("agentloop.hook.point", point.clone()),
                        KeyValue::new("agentloop.hook.critical", *critical),
                        KeyValue::new("exception.message", error.clone()),
                    ],
                );
            }
            Event::JournalFailed { error } => {
                fail(&state.root, "journal_failed", error);
                self.finish(state, None);
            }
            _ => {
                if let Some(outcome) = event.outcome() {
                    let failed = matches!(event, Event::RunFailed { .. });
                    if let Event::RunFailed { error, .. } = event {
                        fail(&state.root, &stop_kind(&outcome.stop_reason), error);
                    } else if outcome.is_failure() {
                        let kind = stop_kind(&outcome.stop_reason);
                        fail(&state.root, &kind, &kind);
                    } else if !failed {
                        state.root.span().set_status(Status::Ok);
                    }
                    self.finish(state, Some(outcome));
                }
            }
        }
    }

    /// The span of tool call `call_id`: the one `tool_started` began, or (a call whose start
    /// an earlier stretch streamed) one begun `duration_ms` ago.
    fn tool_span(&self, state: &mut State, name: &str, call_id: &str, duration_ms: u64) -> Context {
        if let Some(cx) = state.tools.remove(call_id) {
            return cx;
        }
        let parent = state.iteration.clone().unwrap_or_else(|| state.root.clone());
        let start = SystemTime::now().checked_sub(Duration::from_millis(duration_ms));
        let attributes = tool_attributes(name, call_id);
        self.child(&parent, format!("execute_tool {name}"), SpanKind::Internal, attributes, start)
    }

    /// Records the result (content capture only: the text is not made otherwise).
    fn tool_result(&self, cx: &Context, result: &ToolResultContent) {
        if let Some(max) = self.capture() {
            let text = content::cut(result.to_text(), max);
            cx.span().set_attribute(KeyValue::new(sc::TOOL_CALL_RESULT, text));
        }
    }

    fn metric_base(&self) -> [KeyValue; 3] {
        [
            KeyValue::new(sc::OPERATION_NAME, "chat"),
            KeyValue::new(sc::PROVIDER_NAME, self.provider.clone()),
            KeyValue::new(sc::REQUEST_MODEL, self.model.clone()),
        ]
    }

    /// Ends every open span, the root last, with the outcome's totals on the root.
    fn finish(&self, state: &mut State, outcome: Option<&Outcome>) {
        if state.ended {
            return;
        }
        state.ended = true;
        for (_, cx) in state.tools.drain() {
            fail(&cx, "interrupted", "the run stopped before the call ended");
            cx.span().end();
        }
        if let Some((cx, _)) = state.chat.take() {
            fail(&cx, "interrupted", "the run stopped before the model answered");
            cx.span().end();
        }
        end(state.compaction.take());
        end(state.pause.take());
        end(state.iteration.take());
        let root = state.root.span();
        root.set_attributes([
            KeyValue::new(sc::RUN_ELAPSED_MS, millis(state.elapsed_ms)),
            KeyValue::new(sc::RUN_TOOL_CALLS, i64::from(state.tool_calls)),
        ]);
        if let Some(outcome) = outcome {
            let kind = stop_kind(&outcome.stop_reason);
            root.set_attributes(
                [
                    KeyValue::new(sc::RUN_OUTCOME, kind.clone()),
                    KeyValue::new(sc::RUN_ITERATIONS, i64::from(outcome.iterations)),
                    KeyValue::new(sc::RUN_COST_USD, outcome.metrics.cost_usd),
                ]
                .into_iter()
                .chain(usage_attributes(&outcome.usage)),
            );
            self.telemetry.record_run(&kind, outcome.iterations, outcome.metrics.cost_usd);
        }
        root.end();
    }
}

impl RunObserver for RunTrace {
    fn on_event(&self, event: &Event) {
        let mut state = self.state();
        if !state.ended {
            self.handle(&mut state, event);
        }
    }

    fn on_end(&self, finished: bool) {
        let mut state = self.state();
        if !state.ended && !finished {
            fail(&state.root, "interrupted", "the run's stream was dropped before the run ended");
        }
        self.finish(&mut state, None);
    }

    fn trace_parent(&self, call_id: Option<&str>) -> Option<String> {
        let state = self.state();
        let cx = match call_id {
            Some(id) => state.tools.get(id)?,
            None => match &state.chat {
                Some((cx, _)) => cx,
                None => state.iteration.as_ref().unwrap_or(&state.root),
            },
        };
        traceparent(cx.span().span_context())
    }
}

/// The W3C `traceparent` of a span.
pub(crate) fn traceparent(span: &SpanContext) -> Option<String> {
    span.is_valid().then(|| {
        format!("00-{}-{}-{:02x}", span.trace_id(), span.span_id(), span.trace_flags().to_u8())
    })
}

fn end(cx: Option<Context>) {
    if let Some(cx) = cx {
        cx.span().end();
    }
}

fn fail(cx: &Context, kind: &str, message: &str) {
    let span = cx.span();
    span.set_attribute(KeyValue::new(sc::ERROR_TYPE, kind.to_owned()));
    span.set_status(Status::error(message.to_owned()));
}

fn tool_attributes(name: &str, call_id: &str) -> Vec<KeyValue> {
    vec![
        KeyValue::new(sc::TOOL_NAME, name.to_owned()),
        KeyValue::new(sc::TOOL_CALL_ID, call_id.to_owned()),
        KeyValue::new(sc::OPERATION_NAME, "execute_tool"),
        KeyValue::new(sc::TOOL_TYPE, "function"),
    ]
}

fn usage_attributes(usage: &Usage) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new(sc::USAGE_INPUT_TOKENS, millis(usage.input)),
        KeyValue::new(sc::USAGE_OUTPUT_TOKENS, millis(usage.output)),
    ];
    if usage.cached_input > 0 {
        attributes
            .push(KeyValue::new(sc::USAGE_CACHE_READ_INPUT_TOKENS, millis(usage.cached_input)));
    }
    if usage.reasoning > 0 {
        attributes.push(KeyValue::new(sc::USAGE_REASONING_OUTPUT_TOKENS, millis(usage.reasoning)));
    }
    attributes
}

/// An unsigned count as an OTLP int.
fn millis(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn finish_name(reason: &FinishReason) -> String {
    String::from(reason.clone())
}

/// The `kind` of a stop reason ([`kind_of`] without its JSON round trip for a completed run,
/// the common end of a run).
pub(crate) fn stop_kind(reason: &StopReason) -> Cow<'static, str> {
    match reason {
        StopReason::Completed => Cow::Borrowed("completed"),
        other => Cow::Owned(kind_of(other)),
    }
}

/// The serde `kind` tag of an error or a stop reason (`rate_limited`, `limit_reached`, …).
pub(crate) fn kind_of<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(map)) => match map.get("kind") {
            Some(serde_json::Value::String(kind)) => kind.clone(),
            _ => "error".to_owned(),
        },
        Ok(serde_json::Value::String(kind)) => kind,
        _ => "error".to_owned(),
    }
}
