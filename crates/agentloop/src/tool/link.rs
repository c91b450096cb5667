//! [`CallLink`]: the line from a running tool call back to its run, for what the call reports
//! besides its result: the events of work it started (a sub-agent's run, a remote agent's
//! updates), which the driver passes on in the run's event stream as nested events, and the
//! tokens and cost that work used, which the run journals with the call's result and counts
//! against its budgets, and the remote task it ran as, journaled with the result too.
//!
//! The tool layer lies below [`Event`](crate::event::Event) (an event names tool calls and
//! tool errors), so the link carries those events erased; `ToolContext::emit_nested` (defined
//! with `Event`, in `crate::event`) is the typed way in, and the driver, which made the link,
//! knows what comes out.

use super::report::{CallReport, RemoteTask};
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

/// What the calls of one iteration reported, by call id, until the driver takes it with the
/// call's result.
#[derive(Debug, Default)]
pub(crate) struct CallReports(Mutex<Vec<(String, CallReport)>>);

impl CallReports {
    /// Changes what `call_id` reported.
    fn update(&self, call_id: &str, change: impl FnOnce(&mut CallReport)) {
        let mut reports = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match reports.iter_mut().find(|(id, _)| id == call_id) {
            Some((_, report)) => change(report),
            None => {
                let mut report = CallReport::default();
                change(&mut report);
                reports.push((call_id.to_owned(), report));
            }
        }
    }

    /// What `call_id` reported (taken: a second call gives `None`).
    pub(crate) fn take(&self, call_id: &str) -> Option<CallReport> {
        let mut reports = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let index = reports.iter().position(|(id, _)| id == call_id)?;
        Some(reports.swap_remove(index).1)
    }
}

/// Where a tool call's reports go (see the module docs). A detached context's link drops
/// them; the link of a run that streams no transient events drops nested events.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallLink {
    nested: Option<mpsc::Sender<Erased>>,
    reports: Option<Arc<CallReports>>,
}

impl CallLink {
    /// A link whose nested events go to `nested` and reports to `reports`.
    pub(crate) fn new(nested: Option<mpsc::Sender<Erased>>, reports: Arc<CallReports>) -> Self {
        Self { nested, reports: Some(reports) }
    }

    /// Reports tokens and cost used by the work of call `call_id`.
    pub(crate) fn report_usage(&self, call_id: &str, usage: Usage, cost_usd: f64) {
        if let Some(reports) = &self.reports {
            reports.update(call_id, |report| {
                report.usage += usage;
                report.cost_usd += cost_usd;
            });
        }
    }

    /// Reports the remote task call `call_id` ran as (the last report counts).
    pub(crate) fn report_remote(&self, call_id: &str, remote: RemoteTask) {
        if let Some(reports) = &self.reports {
            reports.update(call_id, |report| report.remote = Some(remote));
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
