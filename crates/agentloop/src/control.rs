//! [`RunHandle`]: pause, resume and cancel a run from outside its event stream.

use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Shared between a [`RunHandle`] and the driver.
#[derive(Debug)]
pub(crate) struct Control {
    pub(crate) cancel: CancellationToken,
    reason: Mutex<Option<String>>,
    /// `Some(reason)` while a pause is requested.
    pause: watch::Sender<Option<String>>,
    /// Cancelled when the run is to stop at its next safe point without ending
    /// ([`RunHandle::stop_at_safe_point`]).
    pub(crate) stop: CancellationToken,
}

impl Control {
    pub(crate) fn new(cancel: CancellationToken) -> Arc<Self> {
        Arc::new(Self {
            cancel,
            reason: Mutex::new(None),
            pause: watch::Sender::new(None),
            stop: CancellationToken::new(),
        })
    }

    pub(crate) fn cancel(&self, reason: String) {
        let mut slot = self.reason.lock().unwrap_or_else(PoisonError::into_inner);
        slot.get_or_insert(reason);
        drop(slot);
        self.cancel.cancel();
    }

    pub(crate) fn cancel_reason(&self) -> String {
        let slot = self.reason.lock().unwrap_or_else(PoisonError::into_inner);
        slot.clone().unwrap_or_else(|| "cancelled by the caller".to_owned())
    }

    pub(crate) fn pause(&self, reason: String) {
        self.pause.send_replace(Some(reason));
    }

    pub(crate) fn resume(&self) {
        self.pause.send_replace(None);
    }

    pub(crate) fn pause_reason(&self) -> Option<String> {
        self.pause.borrow().clone()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Option<String>> {
        self.pause.subscribe()
    }
}

/// Controls a running run. Cheap to clone; every clone controls the same run.
///
/// Pause takes effect at safe points (before each iteration and before each tool call):
/// running tools finish, nothing new starts, and the run records `paused` until
/// [`resume`](Self::resume). Cancel reaches the in-flight model request and every running
/// tool at once; the run ends with `run_cancelled` and its journal intact.
#[derive(Debug, Clone)]
pub struct RunHandle {
    pub(crate) run_id: String,
    pub(crate) control: Arc<Control>,
}

impl RunHandle {
    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Pauses at the next safe point.
    pub fn pause(&self) {
        self.pause_with("paused by the caller");
    }

    /// Pauses at the next safe point, with a reason for the journal.
    pub fn pause_with(&self, reason: impl Into<String>) {
        self.control.pause(reason.into());
    }

    /// Resumes a paused run.
    pub fn resume(&self) {
        self.control.resume();
    }

    /// Whether a pause is requested.
    pub fn is_paused(&self) -> bool {
        self.control.pause_reason().is_some()
    }

    /// Cancels the run.
    pub fn cancel(&self, reason: impl Into<String>) {
        self.control.cancel(reason.into());
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.control.cancel.is_cancelled()
    }

    /// Stops the run at its next safe point without ending it — between two steps, with no
    /// tool running and no model call in flight (a paused run stops at once): nothing more is
    /// started, nothing is journaled for the stop, and the event stream ends without a
    /// terminal event (with a store, the lease is released as the stream ends). The run is
    /// continued later from its journal ([`Agent::resume`](crate::Agent::resume)) as if it had
    /// never stopped: a worker that drains hands its runs over this way.
    pub fn stop_at_safe_point(&self) {
        self.control.stop.cancel();
    }
}
