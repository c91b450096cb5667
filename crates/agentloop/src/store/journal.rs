//! [`journaled`]: journals a run's event stream into a [`RunStore`] without touching the
//! driver.

use super::control_watch::{ControlWatch, RunWatcher};
use super::lease::new_owner_id;
use super::{JournalEntry, Lease, RemoteControl, RunStore, StoreError};
use crate::control::Control;
use crate::driver::EventStream;
use crate::event::{Event, JournalEvent, StreamOnly};
use futures::{FutureExt, StreamExt};
use std::sync::Arc;
use std::time::Duration;

/// Journals a run: each durable event is appended to `store` (awaited) before it is passed
/// on, followed by a transient [`Event::Checkpointed`] with its sequence number; transient
/// events pass through. The events the driver made together (those its stream holds without
/// running the driver on) are appended in one call. `next_seq` is the sequence number of the
/// first new entry (`None`: ask the store for the journal's length first).
///
/// The driver is a generator that does not go on until its consumer polls again, so nothing
/// happens between an event and its append: a tool's `tool_started` is journaled before the
/// tool runs, a result before the next step, `model_requested` before the model is called.
///
/// If an append fails (the store is down, or another writer appended first), the run stops
/// there: the event is not passed on, the driver is dropped (which cancels the model call and
/// the running tools), and the stream ends with a transient [`Event::JournalFailed`]. The
/// journal is left whole up to the last checkpoint, so the run can be resumed from it.
pub fn journaled(
    events: EventStream,
    store: Arc<dyn RunStore>,
    run_id: String,
    next_seq: Option<u64>,
) -> EventStream {
    journal_loop(events, store, run_id, None, next_seq, None, Durability::Sync, true)
}

/// [`journaled`], by the holder of the run's lease (see [`crate::store::lease`]): `lease` is
/// the lease already claimed (`None`: claim it first, for a new owner id; a refused claim ends
/// the stream with [`Event::JournalFailed`] before the run does anything). Every append is
/// fenced by the lease; the lease is renewed every third of `ttl` while the run goes on
/// (events or not) and released when the run's stream ends. When a newer claim took the
/// lease over, the run stops at once — the driver is dropped, which cancels the model call
/// and the running tools — and the stream ends with [`Event::JournalFailed`].
pub fn journaled_with_lease(
    events: EventStream,
    store: Arc<dyn RunStore>,
    run_id: String,
    lease: Option<Lease>,
    ttl: Duration,
    next_seq: Option<u64>,
) -> EventStream {
    let leased = Some((lease, ttl));
    journal_loop(events, store, run_id, leased, next_seq, None, Durability::Sync, true)
}

/// When a run's durable events are committed (LangGraph calls these durability modes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Every durable event is committed before it is streamed (the default). A crash loses
    /// nothing that was streamed.
    #[default]
    Sync,
    /// Events stream at once and are committed together at the next **checkpoint**: before a
    /// side effect (`model_requested`, `tool_started`), at the end of an iteration, and at
    /// every other event that is not a model answer, a tool result or an iteration start. A
    /// crash may lose what streamed since the last checkpoint — at most a model answer (the
    /// model is asked again on resume) and the results of the iteration's tools (they run
    /// again, with the same idempotency keys) — never the record that a side effect started.
    /// Fewer appends than `Sync` (9 against 11 for a run of three iterations and three tool
    /// calls).
    Checkpoint,
    /// Nothing is journaled, even with a store: the run lives in memory only.
    Off,
}

impl Durability {
    /// Whether `event` may wait for the next checkpoint (in [`Durability::Checkpoint`]).
    fn may_wait(self, event: &Event) -> bool {
        self == Self::Checkpoint
            && matches!(
                event,
                Event::IterationStarted { .. }
                    | Event::ModelResponded { .. }
                    | Event::ToolCompleted { .. }
                    | Event::ToolFailed { .. }
                    | Event::ToolTimedOut { .. }
            )
    }
}

/// How often an executor reads what was requested of its run from outside
/// ([`RunStore::remote_control`]): a cancel from another process takes effect within this.
pub const REMOTE_CONTROL_POLL: Duration = Duration::from_millis(250);

/// [`journaled_with_lease`] that also applies what other processes request of the run
/// ([`RunStore::request_control`]) to its `control`: read when the run starts, then every
/// [`REMOTE_CONTROL_POLL`] through the agent's `watch` (one read for all its runs): a cancel at
/// once, a pause at the next safe point, a resume after a remote pause. Without
/// `checkpoints` (a caller that reads only the outcome) no [`Event::Checkpointed`] is
/// passed on: the journal is the same, the stream has 6–7 events a round fewer to hand over.
#[allow(clippy::too_many_arguments)]
pub(crate) fn journaled_leased(
    events: EventStream,
    store: Arc<dyn RunStore>,
    run_id: String,
    leased: (Option<Lease>, Duration),
    next_seq: Option<u64>,
    control: Option<(Arc<Control>, ControlWatch)>,
    durability: Durability,
    checkpoints: bool,
) -> EventStream {
    if durability == Durability::Off {
        return events;
    }
    journal_loop(events, store, run_id, Some(leased), next_seq, control, durability, checkpoints)
}

/// The journaling loop: `leased` (the lease, `None` to claim it, and its TTL) fences the
/// appends, renews the lease and reads remote control; without it appends are unfenced.
/// `durability` says when the events are committed; `checkpoints`, whether each committed
/// entry's [`Event::Checkpointed`] is passed on.
#[allow(clippy::too_many_arguments)]
fn journal_loop(
    events: EventStream,
    store: Arc<dyn RunStore>,
    run_id: String,
    leased: Option<(Option<Lease>, Duration)>,
    next_seq: Option<u64>,
    control: Option<(Arc<Control>, ControlWatch)>,
    durability: Durability,
    checkpoints: bool,
) -> EventStream {
    Box::pin(async_stream::stream! {
        let mut events = events;
        let ttl = leased.as_ref().map_or(Duration::from_secs(3_600), |(_, ttl)| *ttl);
        let claimed = match leased {
            None => Ok(None),
            Some((Some(lease), _)) => Ok(Some(lease)),
            Some((None, ttl)) => store.claim(&run_id, &new_owner_id(), ttl).await.map(Some),
        };
        let mut lease = match claimed {
            Ok(lease) => lease,
            Err(error) => {
                drop(events);
                tracing::error!(%error, run_id, "journal: the run's lease is not ours");
                yield Event::JournalFailed { error: error.to_string() };
                return;
            }
        };
        let mut seq = match next_seq {
            Some(seq) => seq,
            None => match store.next_seq(&run_id).await {
                Ok(seq) => seq,
                Err(error) => {
                    drop(events);
                    tracing::error!(%error, run_id, "journal: cannot read the journal's length");
                    yield Event::JournalFailed { error: error.to_string() };
                    release(store.as_ref(), lease.as_ref()).await;
                    return;
                }
            },
        };
        let mut heartbeat = tokio::time::interval((ttl / 3).max(Duration::from_millis(1)));
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        heartbeat.reset();
        let mut remotely_paused = false;
        // The run's remote control: read now, then as the agent's watch sees it change.
        let mut watcher = match &control {
            Some((control, watch)) => {
                let initial = match store.remote_control(&run_id).await {
                    Ok(initial) => initial,
                    Err(error) => {
                        tracing::warn!(%error, run_id, "journal: cannot read the run's remote control");
                        RemoteControl::default()
                    }
                };
                remotely_paused = apply_remote(control, &initial, remotely_paused);
                Some(watch.watch(&run_id, initial))
            }
            None => None,
        };
        // Streamed, not yet committed (`Durability::Checkpoint`).
        let mut waiting: Vec<JournalEntry> = Vec::new();
        // Reused for each group: the events taken together, and those held until the commit
        // (in their order; an index into `waiting` for a durable one).
        let (mut group, mut held): (Vec<Event>, Vec<Held>) = (Vec::new(), Vec::new());
        let mut ended = false;
        loop {
            let step = tokio::select! {
                event = events.next() => Step::Event(event),
                _ = heartbeat.tick(), if lease.is_some() => {
                    Step::Renew(renew(store.as_ref(), lease.as_ref(), ttl).await)
                }
                requested = changed(&mut watcher), if watcher.is_some() => Step::Remote(requested),
            };
            match step {
                Step::Remote(requested) => {
                    if let Some((control, _)) = &control {
                        remotely_paused = apply_remote(control, &requested, remotely_paused);
                    }
                    continue;
                }
                Step::Renew(Ok(renewed)) => {
                    lease = Some(renewed);
                    continue;
                }
                Step::Renew(Err(error @ StoreError::LeaseLost { .. })) => {
                    drop(events);
                    tracing::error!(%error, run_id, "journal: lease lost; the run stops");
                    yield Event::JournalFailed { error: error.to_string() };
                    return;
                }
                Step::Renew(Err(error)) => {
                    // The store is unreachable for now: appends are fenced, so going on is
                    // safe; the next heartbeat tries again.
                    tracing::warn!(%error, run_id, "journal: cannot renew the run's lease");
                    continue;
                }
                Step::Event(None) => {
                    if waiting.is_empty() {
                        break;
                    }
                    // The stream ended with events still waiting: commit them.
                    ended = true;
                }
                Step::Event(Some(event)) => ready_after(event, &mut events, &mut group),
            }
            let mut commit = ended;
            for event in group.drain(..) {
                let event = match JournalEvent::new(event) {
                    Ok(event) => event,
                    Err(StreamOnly(event)) if held.is_empty() => {
                        yield *event;
                        continue;
                    }
                    Err(StreamOnly(event)) => {
                        held.push(Held::Transient(*event));
                        continue;
                    }
                };
                let entry = JournalEntry::new(seq + waiting.len() as u64, event);
                if held.is_empty() && durability.may_wait(&entry.event) {
                    // Streamed now, committed at the next checkpoint.
                    yield (*entry.event).clone();
                    waiting.push(entry);
                    continue;
                }
                commit |= !durability.may_wait(&entry.event);
                held.push(Held::Entry(waiting.len()));
                waiting.push(entry);
            }
            if !commit {
                // Only events that may wait, all streamed (nothing is held without an event
                // that commits before it).
                continue;
            }
            let appended = match &lease {
                Some(lease) => store.append_fenced(lease, seq, &waiting).await,
                None => store.append_entries(&run_id, seq, &waiting).await,
            };
            match appended {
                Ok(_) => {
                    // The held events in order. In `Sync` each durable one is followed by
                    // the `checkpointed` of every entry up to it (those streamed before it
                    // included), as if each had been appended alone; in `Checkpoint` the
                    // `checkpointed`s of the whole commit follow its last event (without
                    // `checkpoints`, none: the sequence numbers just move on).
                    let count = waiting.len();
                    let mut entries = waiting.drain(..);
                    let (mut consumed, mut checkpointed) = (0, 0);
                    for held in held.drain(..) {
                        match held {
                            Held::Transient(event) => yield event,
                            Held::Entry(index) => {
                                if let Some(entry) = entries.nth(index - consumed) {
                                    yield entry.event.into_event();
                                }
                                consumed = index + 1;
                                if checkpoints && durability == Durability::Sync {
                                    for _ in checkpointed..consumed {
                                        yield Event::Checkpointed { seq };
                                        seq += 1;
                                    }
                                    checkpointed = consumed;
                                }
                            }
                        }
                    }
                    if checkpoints {
                        for _ in checkpointed..count {
                            yield Event::Checkpointed { seq };
                            seq += 1;
                        }
                    } else {
                        seq += count as u64;
                    }
                    if ended {
                        break;
                    }
                }
                Err(error) => {
                    drop(events);
                    tracing::error!(%error, run_id, seq, "journal: append failed; the run stops");
                    yield Event::JournalFailed { error: error.to_string() };
                    if matches!(error, StoreError::LeaseLost { .. }) {
                        return;
                    }
                    break;
                }
            }
        }
        release(store.as_ref(), lease.as_ref()).await;
    })
}

/// Renews the lease (the heartbeat runs only while there is one).
async fn renew(
    store: &dyn RunStore,
    lease: Option<&Lease>,
    ttl: Duration,
) -> Result<Lease, StoreError> {
    match lease {
        Some(lease) => store.renew(lease, ttl).await,
        None => Err(StoreError::Invalid("no lease to renew".into())),
    }
}

/// Releases the lease, if any; one that cannot be released expires.
async fn release(store: &dyn RunStore, lease: Option<&Lease>) {
    let Some(lease) = lease else { return };
    if let Err(error) = store.release(lease).await {
        tracing::warn!(%error, run_id = lease.run_id, "journal: cannot release the run's lease");
    }
}

/// Events appended together at most: the first one and those ready after it.
const MAX_GROUP: usize = 256;

/// Puts `first` and the events that are ready after it in `group`: those the stream can hand
/// out without running the driver on (the lower bound of its `size_hint`, which the driver's
/// stream gives as the events it holds). They are appended together, in one store call, and
/// none is passed on before that commits; the driver's next side effect waits for the next
/// poll.
fn ready_after(first: Event, events: &mut EventStream, group: &mut Vec<Event>) {
    group.push(first);
    while group.len() < MAX_GROUP && events.size_hint().0 > 0 {
        match events.next().now_or_never() {
            Some(Some(event)) => group.push(event),
            _ => break,
        }
    }
}

/// An event held until its append commits.
enum Held {
    /// A stream-only event behind a durable one.
    Transient(Event),
    /// A durable event: its index in the entries appended.
    Entry(usize),
}

/// What woke the journaling loop.
enum Step {
    Event(Option<Event>),
    Renew(Result<Lease, StoreError>),
    Remote(RemoteControl),
}

/// The run's remote control once it changes (never without a watcher).
async fn changed(watcher: &mut Option<RunWatcher>) -> RemoteControl {
    match watcher {
        Some(watcher) => watcher.changed().await,
        None => std::future::pending().await,
    }
}

/// Applies what was requested from outside to the run's control; returns whether the run is
/// now paused by such a request (a local pause is not resumed by a remote state without one).
fn apply_remote(control: &Control, requested: &RemoteControl, remotely_paused: bool) -> bool {
    if let Some(reason) = &requested.cancel {
        if !control.cancel.is_cancelled() {
            control.cancel(reason.clone());
        }
    }
    match &requested.pause {
        Some(reason) => {
            if control.pause_reason().is_none() {
                control.pause(reason.clone());
            }
            true
        }
        None => {
            if remotely_paused {
                control.resume();
            }
            false
        }
    }
}
