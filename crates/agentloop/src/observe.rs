//! Observers: one subscriber per run that sees every event of the run's stream, after the
//! journal (an event the store refused never reaches it), in the order the caller gets them.
//! Telemetry is built on it (`agentloop-otel` derives OpenTelemetry spans and metrics from
//! the events), so the journal, the live stream and the trace can never disagree.
//!
//! An [`Observer`] is set on the agent ([`AgentBuilder::observer`](crate::AgentBuilder::observer)).
//! For each stretch of a run that a process drives (a new run, or a run continued from its
//! journal: resumed after a crash, after an approval or an answer) it makes a
//! [`RunObserver`], which gets the events and may give the driver a W3C `traceparent` for
//! the work the run does outside the process: the model's HTTP requests carry it, and a tool
//! call gets it in [`ToolContext::trace_parent`](crate::tool::ToolContext::trace_parent)
//! (a sub-agent's run and a remote A2A agent nest under the call with it).

use crate::event::Event;
use crate::terms::RunConfig;
use futures::stream::BoxStream;
use futures::Stream;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A stretch of a run that is about to be driven.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ObservedRun<'a> {
    /// The run's id.
    pub run_id: &'a str,
    /// Its configuration: the agent's name, the model (`identity`), the sampling, the
    /// session, the parent run, and the caller's trace context (`trace_parent`).
    pub config: &'a RunConfig,
    /// `false` for a new run; `true` for a run continued from its journal (its
    /// `run_started` is not streamed again).
    pub resumed: bool,
    /// The provider family (`openai`, `anthropic`, `gemini`, `local`, `scripted`, …).
    pub provider: &'a str,
    /// The model the provider calls.
    pub model: &'a str,
}

/// Makes a [`RunObserver`] for each stretch of a run the agent drives.
pub trait Observer: Send + Sync + 'static {
    /// The observer of the stretch `run` (`None`: this one is not observed).
    fn observe(&self, run: &ObservedRun<'_>) -> Option<Arc<dyn RunObserver>>;
}

/// Sees the events of one stretch of a run. Called inline, on the task that polls the run's
/// stream: it must not block (hand slow work such as export to a thread or a queue).
pub trait RunObserver: Send + Sync {
    /// An event of the run, as the caller gets it.
    fn on_event(&self, event: &Event);

    /// The stream ended or was dropped (`finished`: it ended after its last event; `false`:
    /// the caller dropped it midway).
    fn on_end(&self, finished: bool) {
        let _ = finished;
    }

    /// The W3C `traceparent` for the work the run does next outside the process: for the
    /// model call in progress (`call_id` `None`), or for the tool call `call_id`.
    fn trace_parent(&self, call_id: Option<&str>) -> Option<String> {
        let _ = call_id;
        None
    }
}

/// A run's stream that shows each event to `observer` before passing it on.
pub(crate) fn observed(
    events: BoxStream<'static, Event>,
    observer: Option<Arc<dyn RunObserver>>,
) -> BoxStream<'static, Event> {
    match observer {
        None => events,
        Some(observer) => Box::pin(Observed { events, observer, ended: false }),
    }
}

struct Observed {
    events: BoxStream<'static, Event>,
    observer: Arc<dyn RunObserver>,
    ended: bool,
}

impl Stream for Observed {
    type Item = Event;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        let this = self.get_mut();
        let next = this.events.as_mut().poll_next(cx);
        match &next {
            Poll::Ready(Some(event)) => this.observer.on_event(event),
            Poll::Ready(None) if !this.ended => {
                this.ended = true;
                this.observer.on_end(true);
            }
            _ => {}
        }
        next
    }
}

impl Drop for Observed {
    fn drop(&mut self) {
        if !self.ended {
            self.observer.on_end(false);
        }
    }
}

#[cfg(test)]
mod tests;
