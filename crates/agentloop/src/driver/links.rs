//! [`Links`]: the driver's end of the links of one iteration's tool calls. The calls emit
//! nested events ([`crate::event::Event::Nested`]) into a bounded channel while they run; the
//! driver takes them whenever it waits for a call, and before it records a call's result, so
//! each call's nested events come between its `tool_started` and its result event. What a
//! call reports of its work ([`crate::tool::ToolContext::report_usage`],
//! [`crate::tool::ToolContext::report_remote`]) is taken with its result.

use crate::event::{unerase, Event};
use crate::tool::{CallLink, CallReport, CallReports, Erased, NESTED_EVENT_BUFFER};
use std::sync::Arc;
use tokio::sync::mpsc;

/// The driver's end of the tool calls' links (see the module docs).
pub(super) struct Links {
    sender: Option<mpsc::Sender<Erased>>,
    receiver: Option<mpsc::Receiver<Erased>>,
    batch: Vec<Erased>,
    reports: Arc<CallReports>,
}

impl Links {
    /// The links of one iteration's calls; without `open` (a run that streams no transient
    /// events) they drop the nested events the calls emit (reports still count).
    pub(super) fn new(open: bool) -> Self {
        let (sender, receiver) = if open {
            let (sender, receiver) = mpsc::channel(NESTED_EVENT_BUFFER);
            (Some(sender), Some(receiver))
        } else {
            (None, None)
        };
        Self { sender, receiver, batch: Vec::new(), reports: Arc::default() }
    }

    /// The link of a call.
    pub(super) fn link(&self) -> CallLink {
        CallLink::new(self.sender.clone(), Arc::clone(&self.reports))
    }

    /// What a call reported of its work (taken).
    pub(super) fn report_of(&self, call_id: &str) -> Option<CallReport> {
        self.reports.take(call_id)
    }

    /// Waits until nested events arrived (for ever when closed); [`take`](Self::take) them.
    pub(super) async fn arrived(&mut self) {
        match &mut self.receiver {
            Some(receiver) => {
                // `Links` keeps a sender, so the channel stays open and this waits.
                receiver.recv_many(&mut self.batch, NESTED_EVENT_BUFFER).await;
            }
            None => std::future::pending().await,
        }
    }

    /// The events that arrived (after [`arrived`](Self::arrived)) and those waiting now, in
    /// order.
    pub(super) fn take(&mut self) -> impl Iterator<Item = Event> + '_ {
        if let Some(receiver) = &mut self.receiver {
            while let Ok(item) = receiver.try_recv() {
                self.batch.push(item);
            }
        }
        self.batch.drain(..).filter_map(unerase)
    }
}
