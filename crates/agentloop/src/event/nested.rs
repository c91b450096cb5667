//! How a tool call emits [`Event::Nested`]: the typed end of the tool's
//! [`CallLink`](crate::tool::CallLink) (which lies below `Event` and carries it erased).

use super::Event;
use crate::tool::{Erased, ToolContext};

impl ToolContext {
    /// Passes on an event of work this call started (a sub-agent's run, `run_id` its id; a
    /// remote agent's update mapped into an event) as an [`Event::Nested`] of this call: the
    /// run streams it while the call runs, after the call's `tool_started` and before its
    /// result, in emission order. Nested events are stream-only; they are not journaled.
    ///
    /// Up to [`NESTED_EVENT_BUFFER`](crate::tool::NESTED_EVENT_BUFFER) events may wait for the
    /// run's consumer; beyond that this waits for room, so work that emits faster than the
    /// consumer reads is paced by it (as the run itself is) and nothing is lost. Use
    /// [`try_emit_nested`](Self::try_emit_nested) where waiting is not wanted. Returns
    /// whether the event was passed on: `false` for a detached context and a run that
    /// streams no transient events ([`takes_nested_events`](Self::takes_nested_events)), and
    /// once the call has ended (its step is over: later events are dropped).
    pub async fn emit_nested(&self, run_id: Option<&str>, event: Event) -> bool {
        if !self.takes_nested_events() {
            return false;
        }
        self.link.send(self.nested(run_id, event)).await
    }

    /// [`emit_nested`](Self::emit_nested) without waiting: when the buffer is full the event
    /// is dropped and this returns `false`.
    pub fn try_emit_nested(&self, run_id: Option<&str>, event: Event) -> bool {
        if !self.takes_nested_events() {
            return false;
        }
        self.link.try_send(self.nested(run_id, event))
    }

    fn nested(&self, run_id: Option<&str>, event: Event) -> Erased {
        Box::new(Event::Nested {
            call_id: self.call_id.clone(),
            run_id: run_id.map(str::to_owned),
            event: Box::new(event),
        })
    }
}

/// The event a tool call sent on its link (the driver's end; anything else is dropped).
pub(crate) fn unerase(item: Erased) -> Option<Event> {
    item.downcast::<Event>().ok().map(|event| *event)
}
