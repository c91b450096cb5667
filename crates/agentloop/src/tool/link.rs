//! [`CallLink`]: the line from a running tool call back to its run, for what the call reports
//! besides its result: the events of work it started (a sub-agent's run, a remote agent's
//! updates), which the driver passes on in the run's event stream as nested events.
//!
//! The tool layer lies below [`Event`](crate::event::Event) (an event names tool calls and
//! tool errors), so the link carries those events erased; `ToolContext::emit_nested` (defined
//! with `Event`, in `crate::event`) is the typed way in, and the driver, which made the link,
//! knows what comes out.

use std::any::Any;
use tokio::sync::mpsc;

/// What the link carries: an `Event`, erased (see the module docs).
pub(crate) type Erased = Box<dyn Any + Send>;

/// How many nested events a run's tool calls may have emitted that the run's consumer has not
/// taken yet. [`ToolContext::emit_nested`](super::ToolContext::emit_nested) waits for room
/// beyond that; [`try_emit_nested`](super::ToolContext::try_emit_nested) drops the event.
pub const NESTED_EVENT_BUFFER: usize = 256;

/// Where a tool call's reports go (see the module docs). A detached context's link, and the
/// link of a run that streams no transient events, drops them.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallLink {
    nested: Option<mpsc::Sender<Erased>>,
}

impl CallLink {
    /// A link whose nested events go to `nested`.
    pub(crate) fn new(nested: Option<mpsc::Sender<Erased>>) -> Self {
        Self { nested }
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
