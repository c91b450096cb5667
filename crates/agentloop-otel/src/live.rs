//! What a run's observer does on the loop's thread as each event comes: it follows which
//! spans are open (their ids are given here, so that a model call or a tool call can carry
//! its span's `traceparent` at once) and keeps a copy of the event, which waits with the
//! others to be turned into spans and metrics in one go (`Inner::drain`). The code that
//! builds spans then runs for hundreds of events at a time while it is in the processor's
//! caches, instead of once per event between the loop's own code: per event the loop's
//! thread runs only this (docs/PERFORMANCE.md, "Events handled in batches").

use crate::span::{IdSource, SpanContext, SpanId};
use agentloop::event::Event;
use agentloop::message::{Message, ToolCall, ToolResult, ToolResultContent};
use agentloop::run::Outcome;
use std::sync::Arc;

/// The spans of a run open as its events came.
#[derive(Debug)]
pub(crate) struct Live {
    root: SpanContext,
    iteration: Option<SpanContext>,
    chat: Option<SpanContext>,
    /// The tool calls (a few at a time: a list, not a map).
    tools: Vec<(Arc<ToolCall>, SpanContext)>,
}

impl Live {
    pub(crate) fn new(root: SpanContext) -> Self {
        Self { root, iteration: None, chat: None, tools: Vec::new() }
    }

    /// Follows `event`: the id of the span it starts (an iteration, a model call, a tool
    /// call), if it starts one.
    pub(crate) fn track(&mut self, event: &Event, ids: &IdSource) -> Option<SpanId> {
        // Model and tool calls go under the iteration, iterations under the run.
        let under = |parent: SpanContext| SpanContext { span_id: ids.span_id(), ..parent };
        let started = match event {
            Event::IterationStarted { .. } => *self.iteration.insert(under(self.root)),
            Event::ModelRequested { .. } => {
                *self.chat.insert(under(self.iteration.unwrap_or(self.root)))
            }
            Event::ToolStarted { call, .. } => {
                let context = under(self.iteration.unwrap_or(self.root));
                self.tools.push((call.clone(), context));
                context
            }
            Event::IterationCompleted { .. } => {
                self.iteration = None;
                return None;
            }
            Event::ModelResponded { .. } | Event::ModelFailed { .. } => {
                self.chat = None;
                return None;
            }
            Event::ToolCompleted { result, .. }
            | Event::ToolFailed { result, .. }
            | Event::ToolTimedOut { result, .. } => {
                self.tools.retain(|(call, _)| call.id != result.call_id);
                return None;
            }
            _ => return None,
        };
        Some(started.span_id)
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

/// The copy of `event` that waits to be handled: without what telemetry reads only to
/// capture content (a model's message, a tool's result) unless `capture`; `None` for an
/// event it would not read at all.
pub(crate) fn waiting_copy(event: &Event, capture: bool) -> Option<Event> {
    if capture {
        return Some(event.clone());
    }
    Some(match event {
        Event::RunStarted { .. } => return None,
        Event::ModelResponded {
            iteration,
            message,
            finish_reason,
            usage,
            duration_ms,
            response_id,
            response_model,
        } => Event::ModelResponded {
            iteration: *iteration,
            message: Message { role: message.role, content: Vec::new() },
            finish_reason: finish_reason.clone(),
            usage: *usage,
            duration_ms: *duration_ms,
            response_id: response_id.clone(),
            response_model: response_model.clone(),
        },
        Event::ToolCompleted { name, result, duration_ms, control, .. } => Event::ToolCompleted {
            name: name.clone(),
            result: ToolResult {
                call_id: result.call_id.clone(),
                content: ToolResultContent::Text(String::new()),
                is_error: result.is_error,
            },
            duration_ms: *duration_ms,
            control: control.clone(),
            usage: None,
            cost_usd: None,
        },
        Event::RunFinished { outcome } => Event::RunFinished { outcome: outcome_copy(outcome) },
        Event::RunFailed { error, outcome } => {
            Event::RunFailed { error: error.clone(), outcome: outcome_copy(outcome) }
        }
        Event::RunSuspended { outcome } => Event::RunSuspended { outcome: outcome_copy(outcome) },
        Event::RunCancelled { reason, outcome } => {
            Event::RunCancelled { reason: reason.clone(), outcome: outcome_copy(outcome) }
        }
        other => other.clone(),
    })
}

/// What telemetry reads of an outcome (why the run stopped, its iterations, usage and
/// cost), without its answer, audit trail and per-tool maps.
fn outcome_copy(outcome: &Outcome) -> Box<Outcome> {
    let mut copy = Outcome::new(String::new(), String::new(), outcome.stop_reason.clone());
    copy.iterations = outcome.iterations;
    copy.usage = outcome.usage;
    copy.metrics.cost_usd = outcome.metrics.cost_usd;
    Box::new(copy)
}
