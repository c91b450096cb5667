//! Remote control read for many runs at once: one [`RunStore::remote_controls`] call per
//! interval for every run an agent journals in this process, instead of one
//! [`RunStore::remote_control`] read per run per interval — at a thousand concurrent runs,
//! four reads a second instead of four thousand, each of which took the SQLite connection
//! thread from the journal's appends.

use super::{RemoteControl, RunStore};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// The runs watched, and whether the reading task runs.
#[derive(Default)]
struct Watched {
    runs: HashMap<String, (watch::Sender<RemoteControl>, usize)>,
    reading: bool,
}

struct Shared {
    store: Arc<dyn RunStore>,
    interval: Duration,
    watched: Mutex<Watched>,
}

impl Shared {
    fn watched(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.watched.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Reads the remote control of every run watched through it, with one store call per
/// interval (a task of its own while anything is watched). Cheap to clone.
#[derive(Clone)]
pub(crate) struct ControlWatch {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ControlWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlWatch").field("interval", &self.shared.interval).finish()
    }
}

impl ControlWatch {
    /// A watch on `store`, read every `interval`.
    pub(crate) fn new(store: Arc<dyn RunStore>, interval: Duration) -> Self {
        let shared = Shared { store, interval, watched: Mutex::default() };
        Self { shared: Arc::new(shared) }
    }

    /// Watches `run_id` until the returned watcher is dropped; its receiver changes when the
    /// run's remote control does (it starts as `initial`, read by the caller).
    pub(crate) fn watch(&self, run_id: &str, initial: RemoteControl) -> RunWatcher {
        let mut watched = self.shared.watched();
        let receiver = match watched.runs.get_mut(run_id) {
            Some((sender, count)) => {
                *count += 1;
                sender.subscribe()
            }
            None => {
                let (sender, receiver) = watch::channel(initial);
                watched.runs.insert(run_id.to_owned(), (sender, 1));
                receiver
            }
        };
        if !watched.reading {
            watched.reading = true;
            tokio::spawn(read(Arc::downgrade(&self.shared)));
        }
        RunWatcher { run_id: run_id.to_owned(), receiver, shared: self.shared.clone() }
    }
}

/// Reads the watched runs' remote control every interval, until nothing is watched (or the
/// watch is gone).
async fn read(shared: Weak<Shared>) {
    loop {
        let Some(strong) = shared.upgrade() else { return };
        let (store, interval) = (strong.store.clone(), strong.interval);
        let run_ids: Vec<String> = {
            let mut watched = strong.watched();
            if watched.runs.is_empty() {
                watched.reading = false;
                return;
            }
            watched.runs.keys().cloned().collect()
        };
        drop(strong);
        tokio::time::sleep(interval).await;
        match store.remote_controls(&run_ids).await {
            Ok(controls) => {
                let Some(strong) = shared.upgrade() else { return };
                let watched = strong.watched();
                for (run_id, control) in controls {
                    if let Some((sender, _)) = watched.runs.get(&run_id) {
                        sender.send_if_modified(|current| {
                            let changed = *current != control;
                            if changed {
                                *current = control;
                            }
                            changed
                        });
                    }
                }
            }
            Err(error) => {
                tracing::warn!(%error, runs = run_ids.len(), "cannot read the runs' remote control");
            }
        }
    }
}

/// One run's watched remote control; stops watching when dropped. It keeps the watch alive:
/// a run goes on being controlled after its agent is dropped.
pub(crate) struct RunWatcher {
    run_id: String,
    receiver: watch::Receiver<RemoteControl>,
    shared: Arc<Shared>,
}

impl RunWatcher {
    /// Waits until the run's remote control changes; the new state.
    pub(crate) async fn changed(&mut self) -> RemoteControl {
        if self.receiver.changed().await.is_err() {
            // The sender is gone (never while this watcher is registered): nothing changes.
            std::future::pending::<()>().await;
        }
        self.receiver.borrow_and_update().clone()
    }
}

impl Drop for RunWatcher {
    fn drop(&mut self) {
        let mut watched = self.shared.watched();
        if let Some((_, count)) = watched.runs.get_mut(&self.run_id) {
            *count -= 1;
            if *count == 0 {
                watched.runs.remove(&self.run_id);
            }
        }
    }
}

#[cfg(test)]
mod tests;
