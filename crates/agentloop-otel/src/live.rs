//! What a run's observer does on the loop's thread. As the run begins it notes what the
//! run's root span will need ([`Start`]) without building the span. As each event comes it
//! follows which spans are open (their ids are given here, so that a model call or a tool
//! call can carry its span's `traceparent` at once) and notes what it will need of the
//! event: a note of 104 bytes, with the event's strings in the run's arena ([`Notes`]). The
//! notes wait in the run, with other runs', to be turned into spans and metrics in one go
//! (`Inner::drain`). The code that builds spans then runs for hundreds of events at a time
//! while it is in the processor's caches, instead of between the loop's own code: the
//! loop's thread runs only this (docs/PERFORMANCE.md, "Events handled in batches", "Events
//! noted, not copied" and "A ninth machine").

use crate::span::{now, IdSource, SpanContext, SpanId};
use agentloop::event::{Event, ModelPurpose};
use agentloop::message::{ToolCall, Usage};
use agentloop::run::StopReason;
use std::sync::Arc;

/// The spans of a run open as its events came, and the notes of the events that wait to
/// be handled.
#[derive(Debug)]
pub(crate) struct Live {
    root: SpanContext,
    iteration: Option<SpanContext>,
    chat: Option<SpanContext>,
    /// The tool calls (a few at a time: a list, not a map).
    tools: Vec<(Arc<ToolCall>, SpanContext)>,
    pub(crate) notes: Notes,
    /// Whether the run is in the list of runs whose notes wait (`Inner::defer`).
    pub(crate) queued: bool,
}

impl Live {
    /// The spans of a stretch whose root span is `root`; `notes` holds what its start was
    /// ([`Notes::start`]).
    pub(crate) fn new(root: SpanContext, notes: Notes) -> Self {
        Self { root, iteration: None, chat: None, tools: Vec::new(), notes, queued: false }
    }

    /// Follows `event` (which spans it opens and closes) and notes what telemetry reads of
    /// it (`None`: nothing). The note carries the id of the span the event starts (an
    /// iteration, a model call, a tool call), if it starts one. With `capture`, the note
    /// keeps the whole event too. (The caller leaves out the events telemetry
    /// [ignores](ignored).)
    pub(crate) fn note(&mut self, event: &Event, ids: &IdSource, capture: bool) -> Option<Note> {
        // Model and tool calls go under the iteration, iterations under the run.
        let under = |parent: SpanContext| SpanContext { span_id: ids.span_id(), ..parent };
        let notes = &mut self.notes;
        let (noted, started) = match event {
            Event::IterationStarted { iteration, at_ms } => {
                let started = *self.iteration.insert(under(self.root));
                let noted = Noted::IterationStarted { iteration: *iteration, at_ms: *at_ms };
                (noted, Some(started.span_id))
            }
            Event::IterationCompleted { duration_ms, .. } => {
                self.iteration = None;
                (Noted::IterationCompleted { duration_ms: *duration_ms }, None)
            }
            Event::ModelRequested { iteration, purpose } => {
                let started = *self.chat.insert(under(self.iteration.unwrap_or(self.root)));
                let wind_down = matches!(purpose, ModelPurpose::WindDown { .. });
                (Noted::ModelRequested { iteration: *iteration, wind_down }, Some(started.span_id))
            }
            Event::ModelResponded {
                finish_reason,
                usage,
                duration_ms,
                response_id,
                response_model,
                ..
            } => {
                self.chat = None;
                let noted = Noted::ModelResponded {
                    finish_reason: notes.put(finish_reason.as_str()),
                    usage: **usage,
                    duration_ms: *duration_ms,
                    response_id: response_id.as_deref().map(|id| notes.put(id)),
                    response_model: response_model.as_deref().map(|model| notes.put(model)),
                };
                (noted, None)
            }
            Event::ToolStarted { call, .. } => {
                let started = under(self.iteration.unwrap_or(self.root));
                self.tools.push((call.clone(), started));
                let noted = Noted::ToolStarted {
                    name: notes.put(&call.name),
                    call_id: notes.put(&call.id),
                };
                (noted, Some(started.span_id))
            }
            Event::ToolCompleted { name, result, duration_ms, .. } => {
                self.tools.retain(|(call, _)| call.id != result.call_id);
                let noted = Noted::ToolCompleted {
                    name: notes.put(name),
                    call_id: notes.put(&result.call_id),
                    duration_ms: *duration_ms,
                };
                (noted, None)
            }
            Event::RunFinished { outcome }
                if matches!(outcome.stop_reason, StopReason::Completed) =>
            {
                let noted = Noted::RunCompleted {
                    iterations: outcome.iterations,
                    usage: outcome.usage,
                    cost_usd: outcome.metrics.cost_usd,
                };
                (noted, None)
            }
            Event::ModelFailed { .. } => {
                self.chat = None;
                (Noted::Whole, None)
            }
            Event::ToolFailed { result, .. } | Event::ToolTimedOut { result, .. } => {
                self.tools.retain(|(call, _)| call.id != result.call_id);
                (Noted::Whole, None)
            }
            // What a run's start says is read only to capture content.
            Event::RunStarted { .. } if !capture => return None,
            _ => (Noted::Whole, None),
        };
        // A fallback chain's answer names its member: read from the whole event (most runs
        // have none, and the note stays small).
        let answered_by = matches!(event, Event::ModelResponded { provider: Some(_), .. });
        let whole = (capture || answered_by || matches!(noted, Noted::Whole))
            .then(|| Box::new(event.clone()));
        Some(Note { noted, whole, at: now(), span_id: started })
    }

    /// The `traceparent` of tool call `call_id`'s span, or (`None`) of the model call in
    /// progress, else of the iteration, else of the run.
    pub(crate) fn trace_parent(&self, call_id: Option<&str>) -> Option<String> {
        let context = match call_id {
            Some(id) => &self.tools.iter().find(|(call, _)| call.id == id)?.1,
            None => self.chat.as_ref().or(self.iteration.as_ref()).unwrap_or(&self.root),
        };
        Some(context.traceparent())
    }
}

/// A string of a note: where it lies in its [`Notes`]' arena.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Text {
    start: u32,
    len: u32,
}

/// What telemetry reads of an event, noted as it comes: the events every run has. The
/// others are kept whole ([`Noted::Whole`]), and so is every event, beside its note, when
/// content is captured.
#[derive(Debug)]
pub(crate) enum Noted {
    IterationStarted {
        iteration: u32,
        at_ms: u64,
    },
    IterationCompleted {
        duration_ms: u64,
    },
    ModelRequested {
        iteration: u32,
        wind_down: bool,
    },
    ModelResponded {
        finish_reason: Text,
        usage: Usage,
        duration_ms: u64,
        response_id: Option<Text>,
        response_model: Option<Text>,
    },
    ToolStarted {
        name: Text,
        call_id: Text,
    },
    ToolCompleted {
        name: Text,
        call_id: Text,
        duration_ms: u64,
    },
    /// `RunFinished`, the run completed.
    RunCompleted {
        iterations: u32,
        usage: Usage,
        cost_usd: f64,
    },
    /// Any other event: the note's `whole`.
    Whole,
    /// The end of the run's stream (`finished`: after its last event).
    End {
        finished: bool,
    },
}

/// A note, when its event happened (nanoseconds since the Unix epoch), and the id of the
/// span its event starts, if it starts one (given as it came: [`Live::note`]).
#[derive(Debug)]
pub(crate) struct Note {
    pub(crate) noted: Noted,
    /// The event itself (a copy), when telemetry reads more of it than the note holds:
    /// an event every run does not have, or content to capture.
    pub(crate) whole: Option<Box<Event>>,
    pub(crate) at: u64,
    pub(crate) span_id: Option<SpanId>,
}

/// What a stretch's root span (`invoke_agent`) needs of its start, its strings in the
/// notes' arena: noted as the run begins, and made into the span with the others, in
/// `RunTrace::begin`, so that the loop's thread runs none of the span's code.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Start {
    /// When the stretch began (nanoseconds since the Unix epoch).
    pub(crate) at: u64,
    pub(crate) run_id: Text,
    /// The provider's name in the conventions (`semconv::provider_name`).
    pub(crate) provider: Text,
    pub(crate) model: Text,
    pub(crate) agent: Option<Text>,
    pub(crate) context_id: Option<Text>,
    pub(crate) parent_run_id: Option<Text>,
    pub(crate) temperature: Option<f32>,
    pub(crate) max_tokens: Option<u32>,
    /// The caller's span (in another process), the root span's parent.
    pub(crate) caller: Option<SpanId>,
    /// When this stretch resumes the run: the span of the stretch that began it, which the
    /// root span links to.
    pub(crate) resumed_from: Option<SpanId>,
}

/// Notes, in the order their events came, and the arena their strings are in. (Reused:
/// the buffers of handled notes go back to a run for its next ones.)
#[derive(Debug, Default)]
pub(crate) struct Notes {
    pub(crate) list: Vec<Note>,
    arena: String,
    /// The stretch's start: set in a stretch's first notes only (cleared with them).
    pub(crate) start: Option<Start>,
}

impl Notes {
    /// Room for the notes of a run of a few iterations.
    pub(crate) fn for_a_run() -> Self {
        Self { list: Vec::with_capacity(16), arena: String::with_capacity(256), start: None }
    }

    /// `text`, kept in the arena (a string that would take it past 4 GiB is kept empty:
    /// notes are handled long before).
    pub(crate) fn put(&mut self, text: &str) -> Text {
        let (Ok(start), Ok(len)) = (u32::try_from(self.arena.len()), u32::try_from(text.len()))
        else {
            return Text { start: 0, len: 0 };
        };
        if start.checked_add(len).is_none() {
            return Text { start: 0, len: 0 };
        }
        self.arena.push_str(text);
        Text { start, len }
    }

    /// The string `text` stands for.
    pub(crate) fn text(&self, text: Text) -> &str {
        let start = text.start as usize;
        self.arena.get(start..start + text.len as usize).unwrap_or_default()
    }

    /// Forgets the notes (their buffers kept).
    pub(crate) fn clear(&mut self) {
        self.list.clear();
        self.arena.clear();
        self.start = None;
    }
}

/// Whether telemetry has nothing to do for `event`: what is only streamed (deltas, steps,
/// checkpoints: their totals come with the durable events), but for the retries, hook
/// failures and journal failures it traces. (Checked before the run's lock is taken: most
/// of a streamed run's events are deltas.)
pub(crate) fn ignored(event: &Event) -> bool {
    !event.is_durable()
        && !matches!(
            event,
            Event::ModelRetrying { .. } | Event::HookFailed { .. } | Event::JournalFailed { .. }
        )
}
