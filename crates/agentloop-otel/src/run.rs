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
use crate::span::{attr, now, Attr, Kind, SpanContext, SpanRecord, Status, Text, Value};
use crate::telemetry::{Inner, ModelEntry};
use crate::{content, ids};
use agentloop::event::{Event, ModelPurpose};
use agentloop::message::{FinishReason, ToolResultContent, Usage};
use agentloop::observe::{ObservedRun, RunObserver};
use agentloop::run::{Outcome, StopReason};
use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The spans of one stretch of a run.
pub(crate) struct RunTrace {
    telemetry: Arc<Inner>,
    /// What the runs of this provider and model share (names, encoded attributes,
    /// metric instruments).
    model: Arc<ModelEntry>,
    /// The request's parameters, which every model call of the run has.
    chat_parameters: Vec<Attr>,
    /// Whether the trace is recorded (an unsampled one still propagates its context and
    /// records metrics, but captures no content).
    sampled: bool,
    state: Mutex<State>,
}

/// Room for the attributes a model call's span gets when it ends (finish reasons, usage,
/// duration, response id and model, output).
const CHAT_END_ATTRIBUTES: usize = 8;
/// Room for the attributes the run's span gets when it ends (elapsed time, tool calls,
/// outcome, iterations, cost, usage, error).
const ROOT_END_ATTRIBUTES: usize = 10;

struct State {
    root: SpanRecord,
    iteration: Option<SpanRecord>,
    chat: Option<(SpanRecord, Instant)>,
    /// The open tool calls' spans by call id (a few at a time: a list, not a map).
    tools: Vec<(String, SpanRecord)>,
    compaction: Option<SpanRecord>,
    pause: Option<SpanRecord>,
    /// `IterationStarted.at_ms` of the last iteration and its duration once it ended.
    elapsed_ms: u64,
    tool_calls: u32,
    ended: bool,
    /// Where an ended span is encoded (reused).
    scratch: Vec<u8>,
}

impl State {
    /// The span new model calls and tool calls go under: the iteration's, else the run's.
    fn parent(&self) -> &SpanContext {
        self.iteration.as_ref().map_or(&self.root.context, |span| &span.context)
    }
}

impl RunTrace {
    /// Starts the stretch's `invoke_agent` span.
    pub(crate) fn start(telemetry: Arc<Inner>, run: &ObservedRun<'_>) -> Self {
        let config = run.config;
        let model = telemetry.model(sc::provider_name(run.provider), run.model);
        let mut chat_parameters = Vec::new();
        if let Some(temperature) = config.temperature {
            chat_parameters.push(attr(sc::REQUEST_TEMPERATURE, f64::from(temperature)));
        }
        if let Some(max_tokens) = config.max_tokens {
            chat_parameters.push(attr(sc::REQUEST_MAX_TOKENS, i64::from(max_tokens)));
        }
        let agent = config.agent.as_deref();
        let name = agent.map_or_else(|| "invoke_agent".to_owned(), |a| format!("invoke_agent {a}"));
        let mut attributes = Vec::with_capacity(8 + ROOT_END_ATTRIBUTES);
        attributes.extend([
            attr(sc::OPERATION_NAME, "invoke_agent"),
            attr(sc::PROVIDER_NAME, Text::Shared(model.provider.clone())),
            attr(sc::REQUEST_MODEL, Text::Shared(model.model.clone())),
            attr(sc::RUN_ID, run.run_id.to_owned()),
        ]);
        if let Some(agent) = agent {
            attributes.push(attr(sc::AGENT_NAME, agent.to_owned()));
        }
        if let Some(context) = &config.context_id {
            attributes.push(attr(sc::CONVERSATION_ID, context.clone()));
        }
        if let Some(parent) = &config.parent_run_id {
            attributes.push(attr(sc::PARENT_RUN_ID, parent.clone()));
        }
        if run.resumed {
            attributes.push(attr(sc::RUN_RESUMED, true));
        }
        let caller = config.trace_parent.as_deref().and_then(SpanContext::parse);
        let trace_id = caller.map_or_else(|| ids::run_trace_id(run.run_id), |c| c.trace_id);
        let sampled = telemetry.config.sampling.sampled(caller.map(|c| c.sampled), &trace_id);
        let first_span = ids::run_span_id(run.run_id);
        let mut links = Vec::new();
        if run.resumed {
            // The stretch that began the run (its span id is the run's): the one this
            // continues.
            links.push(SpanContext { trace_id, span_id: first_span, sampled: true });
        }
        let span_id = if run.resumed { telemetry.ids.span_id() } else { first_span };
        let context = SpanContext { trace_id, span_id, sampled };
        let mut root = SpanRecord::new(context, Text::Owned(name), Kind::Internal);
        root.parent = caller.map(|c| c.span_id);
        root.remote_parent = caller.is_some();
        root.attributes = attributes;
        root.links = links;
        Self {
            telemetry,
            model,
            chat_parameters,
            sampled,
            state: Mutex::new(State {
                root,
                iteration: None,
                chat: None,
                tools: Vec::new(),
                compaction: None,
                pause: None,
                elapsed_ms: 0,
                tool_calls: 0,
                ended: false,
                scratch: Vec::new(),
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn capture(&self) -> Option<usize> {
        let config = &self.telemetry.config;
        (self.sampled && config.capture_content).then_some(config.content_max_bytes)
    }

    /// A child span of `parent`, started now (or `ago` before now).
    fn child(
        &self,
        parent: &SpanContext,
        name: impl Into<Text>,
        kind: Kind,
        attributes: Vec<Attr>,
        ago: Option<Duration>,
    ) -> SpanRecord {
        let context = SpanContext { span_id: self.telemetry.ids.span_id(), ..*parent };
        let mut span = SpanRecord::new(context, name.into(), kind);
        span.parent = Some(parent.span_id);
        span.attributes = attributes;
        if let Some(ago) = ago {
            let ago = u64::try_from(ago.as_nanos()).unwrap_or(u64::MAX);
            span.start = span.start.saturating_sub(ago);
        }
        span
    }

    /// Ends `span` now: it goes to the export queue (encoded in `scratch`) if its trace is
    /// sampled.
    fn end(&self, scratch: &mut Vec<u8>, span: Option<SpanRecord>) {
        if let Some(mut span) = span {
            if span.context.sampled {
                span.end = now();
                self.telemetry.queue.end(&span, scratch);
            }
        }
    }

    fn handle(&self, state: &mut State, event: &Event) {
        match event {
            Event::RunStarted { config, input, .. } => {
                if let Some(max) = self.capture() {
                    let span = &mut state.root;
                    if let Some(instructions) = &config.instructions {
                        span.set(sc::SYSTEM_INSTRUCTIONS, content::cut(instructions.clone(), max));
                    }
                    span.set(sc::INPUT_MESSAGES, content::messages(input, max));
                }
            }
            Event::IterationStarted { iteration, at_ms } => {
                self.end(&mut state.scratch, state.iteration.take());
                state.elapsed_ms = *at_ms;
                let attributes = vec![attr(sc::ITERATION, i64::from(*iteration))];
                let root = state.root.context;
                state.iteration =
                    Some(self.child(&root, "iteration", Kind::Internal, attributes, None));
            }
            Event::IterationCompleted { duration_ms, .. } => {
                state.elapsed_ms += duration_ms;
                self.end(&mut state.scratch, state.iteration.take());
            }
            Event::ModelRequested { iteration, purpose } => {
                let mut attributes =
                    Vec::with_capacity(self.chat_parameters.len() + 2 + CHAT_END_ATTRIBUTES);
                attributes.extend_from_slice(&self.chat_parameters);
                attributes.push(attr(sc::ITERATION, i64::from(*iteration)));
                if let ModelPurpose::WindDown { .. } = purpose {
                    attributes.push(attr(sc::MODEL_PURPOSE, "wind_down"));
                }
                let parent = *state.parent();
                let name = Text::Shared(self.model.chat_name.clone());
                let mut chat = self.child(&parent, name, Kind::Client, attributes, None);
                chat.encoded = self.model.chat_attributes.clone();
                if let Some((old, _)) = state.chat.replace((chat, Instant::now())) {
                    self.end(&mut state.scratch, Some(old));
                }
            }
            Event::ModelRetrying { attempt, delay_ms, error } => {
                let span = match state.chat.as_mut() {
                    Some((span, _)) => span,
                    None => &mut state.root,
                };
                span.event(
                    "agentloop.model.retry",
                    vec![
                        attr("agentloop.retry.attempt", i64::from(*attempt)),
                        attr("agentloop.retry.delay_ms", millis(*delay_ms)),
                        attr(sc::ERROR_TYPE, kind_of(error)),
                        attr("exception.message", error.to_string()),
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
                let Some((mut span, _)) = state.chat.take() else { return };
                if let Some(id) = response_id {
                    span.set(sc::RESPONSE_ID, id.clone());
                }
                if let Some(model) = response_model {
                    span.set(sc::RESPONSE_MODEL, model.clone());
                }
                span.set(sc::RESPONSE_FINISH_REASONS, Value::TextList(finish_name(finish_reason)));
                span.set(sc::MODEL_DURATION_MS, millis(*duration_ms));
                usage_attributes(&mut span.attributes, usage);
                if let Some(max) = self.capture() {
                    let text = content::messages(std::slice::from_ref(message), max);
                    span.set(sc::OUTPUT_MESSAGES, text);
                }
                span.status = Status::Ok;
                self.end(&mut state.scratch, Some(span));
                if let Some(metrics) = &self.model.metrics {
                    self.telemetry.record_model_call(metrics, Some(usage), *duration_ms, None);
                }
            }
            Event::ModelFailed { error, .. } => {
                let kind = kind_of(error);
                let duration = match state.chat.take() {
                    Some((mut span, started)) => {
                        span.fail(kind.clone(), error.to_string());
                        self.end(&mut state.scratch, Some(span));
                        started.elapsed()
                    }
                    None => Duration::ZERO,
                };
                let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
                if let Some(metrics) = &self.model.metrics {
                    self.telemetry.record_model_call(metrics, None, ms, Some(kind));
                }
            }
            Event::ToolStarted { call, arguments } => {
                state.tool_calls += 1;
                let mut attributes = tool_attributes(&call.name, &call.id);
                if let Some(max) = self.capture() {
                    let text = content::cut(arguments.to_string(), max);
                    attributes.push(attr(sc::TOOL_CALL_ARGUMENTS, text));
                }
                let parent = *state.parent();
                let name = format!("execute_tool {}", call.name);
                let span = self.child(&parent, name, Kind::Internal, attributes, None);
                state.tools.push((call.id.clone(), span));
            }
            Event::ToolCompleted { name, result, duration_ms, .. } => {
                let mut span = self.tool_span(state, name, &result.call_id, *duration_ms);
                self.tool_result(&mut span, &result.content);
                span.set(sc::TOOL_STATUS, "ok");
                span.status = Status::Ok;
                self.end(&mut state.scratch, Some(span));
                self.telemetry.record_tool_call(name, "ok");
            }
            Event::ToolFailed { name, result, error, duration_ms, .. } => {
                let mut span = self.tool_span(state, name, &result.call_id, *duration_ms);
                self.tool_result(&mut span, &result.content);
                span.set(sc::TOOL_STATUS, "error");
                span.fail(kind_of(error), error.to_string());
                self.end(&mut state.scratch, Some(span));
                self.telemetry.record_tool_call(name, "error");
            }
            Event::ToolTimedOut { name, result, timeout_ms, .. } => {
                let mut span = self.tool_span(state, name, &result.call_id, *timeout_ms);
                span.set(sc::TOOL_STATUS, "timeout");
                span.fail("timeout", format!("no result within {timeout_ms} ms"));
                self.end(&mut state.scratch, Some(span));
                self.telemetry.record_tool_call(name, "timeout");
            }
            Event::ApprovalRequested { call, .. } => {
                let mut attributes = tool_attributes(&call.name, &call.id);
                attributes.truncate(2);
                state.root.event("agentloop.approval.requested", attributes);
            }
            Event::ApprovalDecided { call_id, decision } => {
                state.root.event(
                    "agentloop.approval.decided",
                    vec![
                        attr(sc::TOOL_CALL_ID, call_id.clone()),
                        attr("agentloop.approval.decision", kind_of(decision)),
                    ],
                );
            }
            Event::LimitReached { limit } => {
                let attributes = vec![attr("agentloop.limit", kind_of(limit))];
                state.root.event("agentloop.limit_reached", attributes);
            }
            Event::StallDetected { tool, count, .. } => {
                state.root.event(
                    "agentloop.stall_detected",
                    vec![
                        attr(sc::TOOL_NAME, tool.clone()),
                        attr("agentloop.stall.count", i64::from(*count)),
                    ],
                );
            }
            Event::Paused { reason } => {
                let attributes = vec![attr("agentloop.pause.reason", reason.clone())];
                let root = state.root.context;
                self.end(&mut state.scratch, state.pause.take());
                state.pause = Some(self.child(&root, "pause", Kind::Internal, attributes, None));
            }
            Event::Resumed => self.end(&mut state.scratch, state.pause.take()),
            Event::ContinuationRequested { .. } => {
                state.root.event("agentloop.continuation", Vec::new());
            }
            Event::InputProvided { message } => {
                let mut attributes = Vec::new();
                if let Some(max) = self.capture() {
                    let text = content::messages(std::slice::from_ref(message), max);
                    attributes.push(attr(sc::INPUT_MESSAGES, text));
                }
                state.root.event("agentloop.input_provided", attributes);
            }
            Event::CompactionStarted { tokens_before, cut, .. } => {
                let attributes = vec![
                    attr("agentloop.compaction.tokens_before", millis(*tokens_before)),
                    attr("agentloop.compaction.cut", millis(*cut as u64)),
                ];
                let root = state.root.context;
                self.end(&mut state.scratch, state.compaction.take());
                state.compaction =
                    Some(self.child(&root, "compaction", Kind::Internal, attributes, None));
            }
            Event::CompactionCompleted { tokens_after, usage, .. } => {
                if let Some(mut span) = state.compaction.take() {
                    span.set("agentloop.compaction.tokens_after", millis(*tokens_after));
                    usage_attributes(&mut span.attributes, usage);
                    span.status = Status::Ok;
                    self.end(&mut state.scratch, Some(span));
                }
            }
            Event::CompactionFailed { error } => {
                if let Some(mut span) = state.compaction.take() {
                    span.fail("compaction_failed", error.clone());
                    self.end(&mut state.scratch, Some(span));
                }
            }
            Event::HookFailed { hook, point, error, critical } => {
                state.root.event(
                    "agentloop.hook_failed",
                    vec![
                        attr("agentloop.hook.name", hook.clone()),
                        attr("agentloop.hook.point", point.clone()),
                        attr("agentloop.hook.critical", *critical),
                        attr("exception.message", error.clone()),
                    ],
                );
            }
            Event::JournalFailed { error } => {
                state.root.fail("journal_failed", error.clone());
                self.finish(state, None);
            }
            _ => {
                if let Some(outcome) = event.outcome() {
                    if let Event::RunFailed { error, .. } = event {
                        state.root.fail(stop_kind(&outcome.stop_reason), error.clone());
                    } else if outcome.is_failure() {
                        let kind = stop_kind(&outcome.stop_reason);
                        state.root.fail(kind.clone(), kind.into_owned());
                    } else {
                        state.root.status = Status::Ok;
                    }
                    self.finish(state, Some(outcome));
                }
            }
        }
    }

    /// The span of tool call `call_id`: the one `tool_started` began, or (a call whose start
    /// an earlier stretch streamed) one begun `duration_ms` ago.
    fn tool_span(
        &self,
        state: &mut State,
        name: &str,
        call_id: &str,
        duration_ms: u64,
    ) -> SpanRecord {
        if let Some(at) = state.tools.iter().position(|(id, _)| id == call_id) {
            return state.tools.swap_remove(at).1;
        }
        let parent = *state.parent();
        let ago = Some(Duration::from_millis(duration_ms));
        let attributes = tool_attributes(name, call_id);
        self.child(&parent, format!("execute_tool {name}"), Kind::Internal, attributes, ago)
    }

    /// Records the result (content capture only: the text is not made otherwise).
    fn tool_result(&self, span: &mut SpanRecord, result: &ToolResultContent) {
        if let Some(max) = self.capture() {
            span.set(sc::TOOL_CALL_RESULT, content::cut(result.to_text(), max));
        }
    }

    /// Ends every open span, the root last, with the outcome's totals on the root.
    fn finish(&self, state: &mut State, outcome: Option<&Outcome>) {
        if state.ended {
            return;
        }
        state.ended = true;
        for (_, mut span) in std::mem::take(&mut state.tools) {
            span.fail("interrupted", "the run stopped before the call ended");
            self.end(&mut state.scratch, Some(span));
        }
        if let Some((mut span, _)) = state.chat.take() {
            span.fail("interrupted", "the run stopped before the model answered");
            self.end(&mut state.scratch, Some(span));
        }
        self.end(&mut state.scratch, state.compaction.take());
        self.end(&mut state.scratch, state.pause.take());
        self.end(&mut state.scratch, state.iteration.take());
        let root = &mut state.root;
        root.set(sc::RUN_ELAPSED_MS, millis(state.elapsed_ms));
        root.set(sc::RUN_TOOL_CALLS, i64::from(state.tool_calls));
        if let Some(outcome) = outcome {
            let kind = stop_kind(&outcome.stop_reason);
            root.set(sc::RUN_OUTCOME, Text::from(kind.clone()));
            root.set(sc::RUN_ITERATIONS, i64::from(outcome.iterations));
            root.set(sc::RUN_COST_USD, outcome.metrics.cost_usd);
            usage_attributes(&mut root.attributes, &outcome.usage);
            self.telemetry.record_run(&kind, outcome.iterations, outcome.metrics.cost_usd);
        }
        // What is left in its place keeps the context (for `trace_parent`) and is never ended.
        let placeholder = SpanRecord::new(root.context, Text::Static(""), Kind::Internal);
        let root = std::mem::replace(&mut state.root, placeholder);
        self.end(&mut state.scratch, Some(root));
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
            let message = "the run's stream was dropped before the run ended";
            state.root.fail("interrupted", message);
        }
        self.finish(&mut state, None);
    }

    fn trace_parent(&self, call_id: Option<&str>) -> Option<String> {
        let state = self.state();
        let context = match call_id {
            Some(id) => &state.tools.iter().find(|(call, _)| call == id)?.1.context,
            None => match &state.chat {
                Some((span, _)) => &span.context,
                None => state.parent(),
            },
        };
        Some(context.traceparent())
    }
}

fn tool_attributes(name: &str, call_id: &str) -> Vec<Attr> {
    // Room for the status, an error and (content capture) arguments and result.
    let mut attributes = Vec::with_capacity(8);
    attributes.extend([
        attr(sc::TOOL_NAME, name.to_owned()),
        attr(sc::TOOL_CALL_ID, call_id.to_owned()),
        attr(sc::OPERATION_NAME, "execute_tool"),
        attr(sc::TOOL_TYPE, "function"),
    ]);
    attributes
}

/// Appends the token counts of `usage` (cached and reasoning tokens where reported).
fn usage_attributes(attributes: &mut Vec<Attr>, usage: &Usage) {
    attributes.push(attr(sc::USAGE_INPUT_TOKENS, millis(usage.input)));
    attributes.push(attr(sc::USAGE_OUTPUT_TOKENS, millis(usage.output)));
    if usage.cached_input > 0 {
        attributes.push(attr(sc::USAGE_CACHE_READ_INPUT_TOKENS, millis(usage.cached_input)));
    }
    if usage.reasoning > 0 {
        attributes.push(attr(sc::USAGE_REASONING_OUTPUT_TOKENS, millis(usage.reasoning)));
    }
}

/// An unsigned count as an OTLP int.
fn millis(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn finish_name(reason: &FinishReason) -> Text {
    match reason {
        FinishReason::Stop => Text::Static("stop"),
        FinishReason::ToolCalls => Text::Static("tool_calls"),
        FinishReason::Length => Text::Static("length"),
        other => Text::Owned(other.as_str().to_owned()),
    }
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
