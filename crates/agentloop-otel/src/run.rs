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

use crate::live::{Live, Note, Noted, Notes, Start};
use crate::semconv as sc;
use crate::span::{now, Kind, SpanContext, SpanId, SpanRecord, Status, Value};
use crate::telemetry::{Inner, ModelEntry};
use crate::{content, ids};
use agentloop::event::Event;
use agentloop::message::{ToolResultContent, Usage};
use agentloop::observe::{ObservedRun, RunObserver};
use agentloop::run::{Outcome, StopReason};
use std::borrow::Cow;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The spans of one stretch of a run.
pub(crate) struct RunTrace {
    me: std::sync::Weak<RunTrace>,
    telemetry: Arc<Inner>,
    /// Whether the trace is recorded (an unsampled one still propagates its context and
    /// records metrics, but captures no content).
    sampled: bool,
    state: Mutex<State>,
    /// The spans open as the events came (the loop's thread's; `state` is the handler's).
    live: Mutex<Live>,
}

/// Room in a new span's buffer: most spans' fields fit.
const SPAN_ROOM: usize = 512;
/// Span buffers a run keeps for reuse, at most (it has four spans open at most, but for
/// parallel tool calls).
const SPARE_BUFFERS: usize = 8;

struct State {
    /// The stretch's span: a placeholder with its context until its start is handled
    /// ([`RunTrace::begin`]).
    root: SpanRecord,
    /// What the runs of this provider and model share (names, encoded attributes,
    /// metric instruments), once the start is handled.
    model: Option<Arc<ModelEntry>>,
    /// The request's parameters, which every model call of the run has, encoded.
    chat_parameters: Vec<u8>,
    iteration: Option<SpanRecord>,
    chat: Option<SpanRecord>,
    /// The open tool calls' spans by call id (a few at a time: a list, not a map).
    tools: Vec<(String, SpanRecord)>,
    compaction: Option<SpanRecord>,
    pause: Option<SpanRecord>,
    /// `IterationStarted.at_ms` of the last iteration and its duration once it ended.
    elapsed_ms: u64,
    tool_calls: u32,
    ended: bool,
    /// The buffers of ended spans, for the next ones.
    spare: Vec<Vec<u8>>,
    /// When the event being handled happened (nanoseconds since the Unix epoch).
    clock: u64,
    /// The id of the span the event being handled starts (given as it came, by `Live`).
    next_id: Option<SpanId>,
}

impl State {
    /// The span new model calls and tool calls go under: the iteration's, else the run's.
    fn parent(&self) -> &SpanContext {
        self.iteration.as_ref().map_or(&self.root.context, |span| &span.context)
    }
}

impl RunTrace {
    /// Starts a stretch: its root span's context (which `traceparent`s need at once) and a
    /// note of what the span needs, which [`begin`](Self::begin) makes into it with the
    /// other spans.
    pub(crate) fn start(
        telemetry: Arc<Inner>,
        run: &ObservedRun<'_>,
        me: std::sync::Weak<Self>,
    ) -> Self {
        let config = run.config;
        let caller = config.trace_parent.as_deref().and_then(SpanContext::parse);
        let (run_trace, first_span) = ids::run_ids(run.run_id);
        let trace_id = caller.map_or(run_trace, |c| c.trace_id);
        let sampled = telemetry.config.sampling.sampled(caller.map(|c| c.sampled), &trace_id);
        let span_id = if run.resumed { telemetry.ids.span_id() } else { first_span };
        let context = SpanContext { trace_id, span_id, sampled };
        let mut notes = Notes::for_a_run();
        notes.start = Some(Start {
            at: now(),
            run_id: notes.put(run.run_id),
            provider: notes.put(sc::provider_name(run.provider)),
            model: notes.put(run.model),
            agent: config.agent.as_deref().map(|agent| notes.put(agent)),
            context_id: config.context_id.as_deref().map(|id| notes.put(id)),
            parent_run_id: config.parent_run_id.as_deref().map(|id| notes.put(id)),
            temperature: config.temperature,
            max_tokens: config.max_tokens,
            caller: caller.map(|c| c.span_id),
            resumed_from: run.resumed.then_some(first_span),
        });
        Self {
            me,
            telemetry,
            sampled,
            state: Mutex::new(State {
                root: SpanRecord::placeholder(context),
                model: None,
                chat_parameters: Vec::new(),
                iteration: None,
                chat: None,
                tools: Vec::new(),
                compaction: None,
                pause: None,
                elapsed_ms: 0,
                tool_calls: 0,
                ended: false,
                spare: Vec::new(),
                clock: 0,
                next_id: None,
            }),
            live: Mutex::new(Live::new(context, notes)),
        }
    }

    /// Makes the stretch's `invoke_agent` span from its `start` (strings in `notes`).
    fn begin(&self, state: &mut State, start: &Start, notes: &Notes) {
        let model = self.telemetry.model(notes.text(start.provider), notes.text(start.model));
        let mut parameters: Vec<(&str, Value<'_>)> = Vec::new();
        if let Some(temperature) = start.temperature {
            parameters.push((sc::REQUEST_TEMPERATURE, f64::from(temperature).into()));
        }
        if let Some(max_tokens) = start.max_tokens {
            parameters.push((sc::REQUEST_MAX_TOKENS, i64::from(max_tokens).into()));
        }
        state.chat_parameters = crate::otlp::attributes(&parameters);
        let context = state.root.context;
        let agent = start.agent.map(|agent| notes.text(agent));
        let name: &[&str] = match agent {
            Some(agent) => &["invoke_agent ", agent],
            None => &["invoke_agent"],
        };
        let parent = start.caller.map(|span_id| (span_id, true));
        let body = span_buffer(&mut state.spare, context.sampled);
        let mut root =
            SpanRecord::started_at(start.at, context, name, Kind::Internal, parent, body);
        root.set_encoded(&model.agent_attributes);
        root.set(sc::RUN_ID, notes.text(start.run_id));
        if let Some(agent) = agent {
            root.set(sc::AGENT_NAME, agent);
        }
        if let Some(id) = start.context_id {
            root.set(sc::CONVERSATION_ID, notes.text(id));
        }
        if let Some(id) = start.parent_run_id {
            root.set(sc::PARENT_RUN_ID, notes.text(id));
        }
        if let Some(first_span) = start.resumed_from {
            root.set(sc::RUN_RESUMED, true);
            // The stretch that began the run (its span id is the run's): the one this
            // continues.
            let trace_id = context.trace_id;
            root.link(&SpanContext { trace_id, span_id: first_span, sampled: true });
        }
        state.root = root;
        state.model = Some(model);
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn capture(&self) -> Option<usize> {
        let config = &self.telemetry.config;
        (self.sampled && config.capture_content).then_some(config.content_max_bytes)
    }

    /// A child span of `parent` named by the concatenation of `name`, started at `start`,
    /// in a buffer from `spare`; its id is `next_id` (given when its event came), else new.
    fn child(
        &self,
        next_id: &mut Option<SpanId>,
        spare: &mut Vec<Vec<u8>>,
        parent: &SpanContext,
        name: &[&str],
        kind: Kind,
        start: u64,
    ) -> SpanRecord {
        let span_id = next_id.take().unwrap_or_else(|| self.telemetry.ids.span_id());
        let context = SpanContext { span_id, ..*parent };
        let body = span_buffer(spare, parent.sampled);
        let parent = Some((parent.span_id, false));
        SpanRecord::started_at(start, context, name, kind, parent, body)
    }

    /// Ends `span` now: it goes to the export queue if its trace is sampled, and its
    /// buffer to `spare`.
    fn end(&self, spare: &mut Vec<Vec<u8>>, span: Option<SpanRecord>, at: u64) {
        if let Some(span) = span {
            if span.context.sampled {
                self.telemetry.queue.end(&span, at);
            }
            if spare.len() < SPARE_BUFFERS && span.body.capacity() > 0 {
                spare.push(span.body);
            }
        }
    }

    /// Handles the notes `notes` (the run's, taken from [`Live`]) in order.
    fn handle_notes(&self, notes: &Notes) {
        let mut state = self.state();
        if let Some(start) = &notes.start {
            self.begin(&mut state, start, notes);
        }
        for note in &notes.list {
            if state.ended {
                break;
            }
            state.clock = note.at;
            state.next_id = note.span_id;
            match (&note.noted, &note.whole) {
                (Noted::Whole, Some(event)) => self.handle_whole(&mut state, event),
                (Noted::End { finished }, _) => self.end_stream(&mut state, *finished),
                (noted, whole) => self.handle(&mut state, noted, notes, whole.as_deref()),
            }
            state.next_id = None;
        }
    }

    /// Handles an event every run has, from its note (its strings in `notes`); `whole` is
    /// the event itself when content is captured.
    fn handle(&self, state: &mut State, noted: &Noted, notes: &Notes, whole: Option<&Event>) {
        let at = state.clock;
        match *noted {
            Noted::IterationStarted { iteration, at_ms } => {
                self.end(&mut state.spare, state.iteration.take(), at);
                state.elapsed_ms = at_ms;
                let root = state.root.context;
                let mut span = self.child(
                    &mut state.next_id,
                    &mut state.spare,
                    &root,
                    &["iteration"],
                    Kind::Internal,
                    at,
                );
                span.set(sc::ITERATION, i64::from(iteration));
                state.iteration = Some(span);
            }
            Noted::IterationCompleted { duration_ms } => {
                state.elapsed_ms += duration_ms;
                self.end(&mut state.spare, state.iteration.take(), at);
            }
            Noted::ModelRequested { iteration, wind_down } => {
                // Set by `begin`, which handles a stretch's start before its first note.
                let Some(model) = state.model.clone() else { return };
                let parent = *state.parent();
                let name = &[&*model.chat_name];
                let mut chat = self.child(
                    &mut state.next_id,
                    &mut state.spare,
                    &parent,
                    name,
                    Kind::Client,
                    at,
                );
                chat.set_encoded(&model.chat_attributes);
                chat.set_encoded(&state.chat_parameters);
                chat.set(sc::ITERATION, i64::from(iteration));
                if wind_down {
                    chat.set(sc::MODEL_PURPOSE, "wind_down");
                }
                if let Some(old) = state.chat.replace(chat) {
                    self.end(&mut state.spare, Some(old), at);
                }
            }
            Noted::ModelResponded {
                finish_reason,
                ref usage,
                duration_ms,
                response_id,
                response_model,
            } => {
                let Some(mut span) = state.chat.take() else { return };
                if let Some(Event::ModelResponded { provider: Some(member), .. }) = whole {
                    span.set(sc::FALLBACK_MEMBER, member.as_str());
                }
                if let Some(id) = response_id {
                    span.set(sc::RESPONSE_ID, notes.text(id));
                }
                if let Some(model) = response_model {
                    span.set(sc::RESPONSE_MODEL, notes.text(model));
                }
                let finish_reason = Value::TextList(notes.text(finish_reason));
                span.set(sc::RESPONSE_FINISH_REASONS, finish_reason);
                span.set(sc::MODEL_DURATION_MS, millis(duration_ms));
                usage_attributes(&mut span, usage);
                if let (Some(max), Some(Event::ModelResponded { message, .. })) =
                    (self.capture(), whole)
                {
                    let text = content::messages(std::slice::from_ref(message), max);
                    span.set(sc::OUTPUT_MESSAGES, &text);
                }
                span.status = Status::Ok;
                self.end(&mut state.spare, Some(span), at);
                if let Some(metrics) = state.model.as_ref().and_then(|m| m.metrics.as_ref()) {
                    self.telemetry.record_model_call(metrics, Some(usage), duration_ms, None);
                }
            }
            Noted::ToolStarted { name, call_id } => {
                state.tool_calls += 1;
                let parent = *state.parent();
                let (name, call_id) = (notes.text(name), notes.text(call_id));
                let mut span =
                    self.tool(&mut state.next_id, &mut state.spare, &parent, name, call_id, at);
                if let (Some(max), Some(Event::ToolStarted { arguments, .. })) =
                    (self.capture(), whole)
                {
                    let text = content::cut(arguments.to_string(), max);
                    span.set(sc::TOOL_CALL_ARGUMENTS, &text);
                }
                state.tools.push((call_id.to_owned(), span));
            }
            Noted::ToolCompleted { name, call_id, duration_ms } => {
                let name = notes.text(name);
                let mut span = self.tool_span(state, name, notes.text(call_id), duration_ms);
                if let Some(Event::ToolCompleted { result, .. }) = whole {
                    self.tool_result(&mut span, &result.content);
                }
                span.set(sc::TOOL_STATUS, "ok");
                span.status = Status::Ok;
                self.end(&mut state.spare, Some(span), at);
                self.telemetry.record_tool_call(name, "ok");
            }
            Noted::RunCompleted { iterations, ref usage, cost_usd } => {
                state.root.status = Status::Ok;
                let kind = Cow::Borrowed("completed");
                self.finish(state, Some(Totals { kind, iterations, usage, cost_usd }));
            }
            Noted::Whole | Noted::End { .. } => {}
        }
    }

    /// Handles an event kept whole: the start of a run whose content is captured, the
    /// end of a run that did not complete, and [the rare events](Self::handle_rare).
    fn handle_whole(&self, state: &mut State, event: &Event) {
        if let Event::RunStarted { config, input, .. } = event {
            if let Some(max) = self.capture() {
                let span = &mut state.root;
                if let Some(instructions) = &config.instructions {
                    let text = content::cut(instructions.clone(), max);
                    span.set(sc::SYSTEM_INSTRUCTIONS, &text);
                }
                span.set(sc::INPUT_MESSAGES, &content::messages(input, max));
            }
            return;
        }
        let Some(outcome) = event.outcome() else { return self.handle_rare(state, event) };
        if let Event::RunFailed { error, .. } = event {
            state.root.fail(&stop_kind(&outcome.stop_reason), error.clone());
        } else if outcome.is_failure() {
            let kind = stop_kind(&outcome.stop_reason);
            state.root.fail(&kind, kind.clone().into_owned());
        } else {
            state.root.status = Status::Ok;
        }
        self.finish(state, Some(Totals::of(outcome)));
    }

    /// The events most runs never have (retries, failures, approvals, pauses, compaction,
    /// hooks): out of line, so that the code of a common run's events stays together.
    #[cold]
    #[inline(never)]
    fn handle_rare(&self, state: &mut State, event: &Event) {
        let at = state.clock;
        match event {
            Event::ModelRetrying { attempt, delay_ms, error } => {
                let span = match state.chat.as_mut() {
                    Some(span) => span,
                    None => &mut state.root,
                };
                let (kind, message) = (kind_of(error), error.to_string());
                span.event_at(
                    at,
                    "agentloop.model.retry",
                    &[
                        ("agentloop.retry.attempt", i64::from(*attempt).into()),
                        ("agentloop.retry.delay_ms", millis(*delay_ms).into()),
                        (sc::ERROR_TYPE, (&kind).into()),
                        ("exception.message", (&message).into()),
                    ],
                );
            }
            Event::ModelFailed { error, .. } => {
                let kind = kind_of(error);
                let duration = match state.chat.take() {
                    Some(mut span) => {
                        span.fail(&kind, error.to_string());
                        let started = span.start;
                        self.end(&mut state.spare, Some(span), at);
                        Duration::from_nanos(at.saturating_sub(started))
                    }
                    None => Duration::ZERO,
                };
                let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
                if let Some(metrics) = state.model.as_ref().and_then(|m| m.metrics.as_ref()) {
                    self.telemetry.record_model_call(metrics, None, ms, Some(kind));
                }
            }
            Event::ToolFailed { name, result, error, duration_ms, .. } => {
                let mut span = self.tool_span(state, name, &result.call_id, *duration_ms);
                self.tool_result(&mut span, &result.content);
                span.set(sc::TOOL_STATUS, "error");
                span.fail(&kind_of(error), error.to_string());
                self.end(&mut state.spare, Some(span), at);
                self.telemetry.record_tool_call(name, "error");
            }
            Event::ToolTimedOut { name, result, timeout_ms, .. } => {
                let mut span = self.tool_span(state, name, &result.call_id, *timeout_ms);
                span.set(sc::TOOL_STATUS, "timeout");
                span.fail("timeout", format!("no result within {timeout_ms} ms"));
                self.end(&mut state.spare, Some(span), at);
                self.telemetry.record_tool_call(name, "timeout");
            }
            Event::ApprovalRequested { call, .. } => {
                state.root.event_at(
                    at,
                    "agentloop.approval.requested",
                    &[(sc::TOOL_NAME, (&call.name).into()), (sc::TOOL_CALL_ID, (&call.id).into())],
                );
            }
            Event::ApprovalDecided { call_id, decision, .. } => {
                let decision = kind_of(decision);
                state.root.event_at(
                    at,
                    "agentloop.approval.decided",
                    &[
                        (sc::TOOL_CALL_ID, call_id.into()),
                        ("agentloop.approval.decision", (&decision).into()),
                    ],
                );
            }
            Event::LimitReached { limit } => {
                let limit = kind_of(limit);
                state.root.event_at(
                    at,
                    "agentloop.limit_reached",
                    &[("agentloop.limit", (&limit).into())],
                );
            }
            Event::StallDetected { tool, count, .. } => {
                state.root.event_at(
                    at,
                    "agentloop.stall_detected",
                    &[
                        (sc::TOOL_NAME, tool.into()),
                        ("agentloop.stall.count", i64::from(*count).into()),
                    ],
                );
            }
            Event::Paused { reason } => {
                let root = state.root.context;
                self.end(&mut state.spare, state.pause.take(), at);
                let mut span = self.child(
                    &mut state.next_id,
                    &mut state.spare,
                    &root,
                    &["pause"],
                    Kind::Internal,
                    at,
                );
                span.set("agentloop.pause.reason", reason);
                state.pause = Some(span);
            }
            Event::Resumed => self.end(&mut state.spare, state.pause.take(), at),
            Event::ContinuationRequested { .. } => {
                state.root.event_at(at, "agentloop.continuation", &[]);
            }
            Event::InputProvided { message } => {
                let text =
                    self.capture().map(|max| content::messages(std::slice::from_ref(message), max));
                let attributes: &[(&str, Value<'_>)] = match &text {
                    Some(text) => &[(sc::INPUT_MESSAGES, Value::Text(text))],
                    None => &[],
                };
                state.root.event_at(at, "agentloop.input_provided", attributes);
            }
            Event::CompactionStarted { tokens_before, cut, .. } => {
                let root = state.root.context;
                self.end(&mut state.spare, state.compaction.take(), at);
                let name = &["compaction"];
                let mut span = self.child(
                    &mut state.next_id,
                    &mut state.spare,
                    &root,
                    name,
                    Kind::Internal,
                    at,
                );
                span.set("agentloop.compaction.tokens_before", millis(*tokens_before));
                span.set("agentloop.compaction.cut", millis(*cut as u64));
                state.compaction = Some(span);
            }
            Event::CompactionCompleted { tokens_after, usage, .. } => {
                if let Some(mut span) = state.compaction.take() {
                    span.set("agentloop.compaction.tokens_after", millis(*tokens_after));
                    usage_attributes(&mut span, usage);
                    span.status = Status::Ok;
                    self.end(&mut state.spare, Some(span), at);
                }
            }
            Event::CompactionFailed { error } => {
                if let Some(mut span) = state.compaction.take() {
                    span.fail("compaction_failed", error.clone());
                    self.end(&mut state.spare, Some(span), at);
                }
            }
            Event::HookFailed { hook, point, error, critical } => {
                state.root.event_at(
                    at,
                    "agentloop.hook_failed",
                    &[
                        ("agentloop.hook.name", hook.into()),
                        ("agentloop.hook.point", point.into()),
                        ("agentloop.hook.critical", (*critical).into()),
                        ("exception.message", error.into()),
                    ],
                );
            }
            Event::JournalFailed { error } => {
                state.root.fail("journal_failed", error.clone());
                self.finish(state, None);
            }
            _ => {}
        }
    }

    /// The span of tool call `call_id`: the one `tool_started` began, or (a call whose start
    /// an earlier stretch streamed) one begun `duration_ms` before the event.
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
        let ago = duration_ms.saturating_mul(1_000_000);
        let start = state.clock.saturating_sub(ago);
        self.tool(&mut state.next_id, &mut state.spare, &parent, name, call_id, start)
    }

    /// The span of a call of tool `name`, started at `start`.
    fn tool(
        &self,
        next_id: &mut Option<SpanId>,
        spare: &mut Vec<Vec<u8>>,
        parent: &SpanContext,
        name: &str,
        call_id: &str,
        start: u64,
    ) -> SpanRecord {
        let span_name = &["execute_tool ", name];
        let mut span = self.child(next_id, spare, parent, span_name, Kind::Internal, start);
        span.set(sc::TOOL_NAME, name);
        span.set(sc::TOOL_CALL_ID, call_id);
        span.set_encoded(&self.telemetry.tool_attributes);
        span
    }

    /// Records the result (content capture only: the text is not made otherwise).
    fn tool_result(&self, span: &mut SpanRecord, result: &ToolResultContent) {
        if let Some(max) = self.capture() {
            span.set(sc::TOOL_CALL_RESULT, &content::cut(result.to_text(), max));
        }
    }

    /// Ends every open span, the root last, with the outcome's totals on the root.
    fn finish(&self, state: &mut State, totals: Option<Totals<'_>>) {
        let at = state.clock;
        if state.ended {
            return;
        }
        state.ended = true;
        for (_, mut span) in std::mem::take(&mut state.tools) {
            span.fail("interrupted", "the run stopped before the call ended");
            self.end(&mut state.spare, Some(span), at);
        }
        if let Some(mut span) = state.chat.take() {
            span.fail("interrupted", "the run stopped before the model answered");
            self.end(&mut state.spare, Some(span), at);
        }
        self.end(&mut state.spare, state.compaction.take(), at);
        self.end(&mut state.spare, state.pause.take(), at);
        self.end(&mut state.spare, state.iteration.take(), at);
        let root = &mut state.root;
        root.set(sc::RUN_ELAPSED_MS, millis(state.elapsed_ms));
        root.set(sc::RUN_TOOL_CALLS, i64::from(state.tool_calls));
        if let Some(Totals { kind, iterations, usage, cost_usd }) = totals {
            root.set(sc::RUN_OUTCOME, &*kind);
            root.set(sc::RUN_ITERATIONS, i64::from(iterations));
            root.set(sc::RUN_COST_USD, cost_usd);
            usage_attributes(root, usage);
            self.telemetry.record_run(&kind, iterations, cost_usd);
        }
        // What is left in its place keeps the context (for `trace_parent`) and is never ended.
        let placeholder = SpanRecord::placeholder(root.context);
        let root = std::mem::replace(&mut state.root, placeholder);
        self.end(&mut state.spare, Some(root), at);
    }
}

impl RunObserver for RunTrace {
    fn on_event(&self, event: &Event) {
        if crate::live::ignored(event) {
            return;
        }
        let mut live = self.live();
        if let Some(note) = live.note(event, &self.telemetry.ids, self.capture().is_some()) {
            self.wait(live, note);
        }
    }

    fn on_end(&self, finished: bool) {
        let live = self.live();
        let note = Note { noted: Noted::End { finished }, whole: None, at: now(), span_id: None };
        self.wait(live, note);
    }

    fn trace_parent(&self, call_id: Option<&str>) -> Option<String> {
        self.live().trace_parent(call_id)
    }
}

impl RunTrace {
    /// Adds a note to those that wait, and the run to the runs whose notes wait if it is
    /// not there yet.
    fn wait(&self, mut live: MutexGuard<'_, Live>, note: Note) {
        live.notes.list.push(note);
        let first = !std::mem::replace(&mut live.queued, true);
        let many = live.notes.list.len() >= PENDING_NOTES;
        drop(live);
        if first {
            if let Some(me) = self.me.upgrade() {
                self.telemetry.defer(me);
            }
        } else if many {
            self.telemetry.drain_now();
        }
    }

    /// Handles the run's notes that wait, in order (`notes`: the drainer's buffers, which
    /// the run's are swapped with).
    pub(crate) fn replay(&self, notes: &mut Notes) {
        {
            let mut live = self.live();
            std::mem::swap(&mut live.notes, notes);
            live.queued = false;
        }
        self.handle_notes(notes);
        notes.clear();
    }

    fn end_stream(&self, state: &mut State, finished: bool) {
        if !state.ended && !finished {
            let message = "the run's stream was dropped before the run ended";
            state.root.fail("interrupted", message);
        }
        self.finish(state, None);
    }
}

/// The buffer for a new span: one from `spare`, else a new one; none (an empty `Vec`) for
/// an unsampled span, which records nothing.
fn span_buffer(spare: &mut Vec<Vec<u8>>, sampled: bool) -> Vec<u8> {
    match sampled {
        true => spare.pop().unwrap_or_else(|| Vec::with_capacity(SPAN_ROOM)),
        false => Vec::new(),
    }
}

/// Notes a run keeps at most before they are handled on its own thread (when the export
/// thread has not handled them in time).
const PENDING_NOTES: usize = 512;

/// What a run's root span records of its end.
struct Totals<'a> {
    /// Why it stopped (`stop_kind`).
    kind: Cow<'static, str>,
    iterations: u32,
    usage: &'a Usage,
    cost_usd: f64,
}

impl<'a> Totals<'a> {
    fn of(outcome: &'a Outcome) -> Self {
        Self {
            kind: stop_kind(&outcome.stop_reason),
            iterations: outcome.iterations,
            usage: &outcome.usage,
            cost_usd: outcome.metrics.cost_usd,
        }
    }
}

/// Sets the token counts of `usage` (cached and reasoning tokens where reported).
fn usage_attributes(span: &mut SpanRecord, usage: &Usage) {
    span.set(sc::USAGE_INPUT_TOKENS, millis(usage.input));
    span.set(sc::USAGE_OUTPUT_TOKENS, millis(usage.output));
    if usage.cached_input > 0 {
        span.set(sc::USAGE_CACHE_READ_INPUT_TOKENS, millis(usage.cached_input));
    }
    if usage.cache_write_input > 0 {
        span.set(sc::USAGE_CACHE_CREATION_INPUT_TOKENS, millis(usage.cache_write_input));
    }
    if usage.reasoning > 0 {
        span.set(sc::USAGE_REASONING_OUTPUT_TOKENS, millis(usage.reasoning));
    }
}

/// An unsigned count as an OTLP int.
fn millis(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
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
