//! [`CallLink`]: the line from a running tool call back to its run, for what the call reports
//! besides its result: the events of work it started (a sub-agent's run, a remote agent's
//! updates), which the driver passes on in the run's event stream as nested events, and the
//! tokens and cost that work used, which the run journals with the call's result and counts
//! against its budgets.
//!
//! The tool layer lies below [`Event`](crate::event::Event) (an event names tool calls and
//! tool errors), so the link carries those events erased; `ToolContext::emit_nested` (defined
//! with `Event`, in `crate::event`) is the typed way in, and the driver, which made the link,
//! knows what comes out.

use crate::message::Usage;
use std::any::Any;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::mpsc;

/// What the link carries: an `Event`, erased (see the module docs).
pub(crate) type Erased = Box<dyn Any + Send>;

/// How many nested events a run's tool calls may have emitted that the run's consumer has not
/// taken yet. [`ToolContext::emit_nested`](super::ToolContext::emit_nested) waits for room
/// beyond that; [`try_emit_nested`](super::ToolContext::try_emit_nested) drops the event.
pub const NESTED_EVENT_BUFFER: usize = 256;

/// The tokens and cost the calls of one iteration reported, by call id, until the driver
/// takes them with the call's result.
#[derive(Debug, Default)]
pub(crate) struct UsageReports(Mutex<Vec<(String, Usage, f64)>>);

impl UsageReports {
    /// Adds to what `call_id` reported.
    fn add(&self, call_id: &str, usage: Usage, cost_usd: f64) {
        let mut reports = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match reports.iter_mut().find(|(id, ..)| id == call_id) {
            Some((_, used, cost)) => {
                *used += usage;
                *cost += cost_usd;
            }
            None => reports.push((call_id.to_owned(), usage, cost_usd)),
        }
    }

    /// What `call_id` reported (taken: a second call gives `None`).
    pub(crate) fn take(&self, call_id: &str) -> Option<(Usage, f64)> {
        let mut reports = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let index = reports.iter().position(|(id, ..)| id == call_id)?;
        let (_, usage, cost) = reports.swap_remove(index);
        Some((usage, cost))
    }
}

/// Where a tool call's reports go (see the module docs). A detached context's link drops
/// them; the link of a run that streams no transient events drops nested events.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallLink {
    nested: Option<mpsc::Sender<Erased>>,
    usage: Option<Arc<UsageReports>>,
}

impl CallLink {
    /// A link whose nested events go to `nested` and usage reports to `usage`.
    pub(crate) fn new(nested: Option<mpsc::Sender<Erased>>, usage: Arc<UsageReports>) -> Self {
        Self { nested, usage: Some(usage) }
    }

    /// Reports tokens and cost used by the work of call `call_id`.
    pub(crate) fn report_usage(&self, call_id: &str, usage: Usage, cost_usd: f64) {
        if let Some(reports) = &self.usage {
            reports.add(call_id, usage, cost_usd);
        }
    }

    /// Whether nested events reach anyone (a closed link drops them).
    pub(crate) fn takes_nested(&self) -> bool {
        self.nested.as_ref().is_some_and(|sender| !sender.is_closed())
    }

    /// Sends a nested event, waiting while the buffer is full. `false` when the link is
    /// closed (the event is dropped).
    pub(crate) async fn send(&self, item: Erased) -> bool {
        match &self.nested {
            Some(sender) => sender.send(item).await.is_ok(),
            None => false,
        }
    }

    /// Sends a nested event if there is room now. `false` when the buffer is full or the
    /// link is closed (the event is dropped).
    pub(crate) fn try_send(&self, item: Erased) -> bool {
        self.nested.as_ref().is_some_and(|sender| sender.try_send(item).is_ok())
    }
}
