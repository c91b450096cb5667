//! [`journaled`]: journals a run's event stream into a [`RunStore`] without touching the
//! driver.

use super::{JournalEntry, RunStore};
use crate::driver::EventStream;
use crate::event::Event;
use futures::StreamExt;
use std::sync::Arc;

/// Journals a run: each durable event is appended to `store` (awaited) before it is passed
/// on, followed by a transient [`Event::Checkpointed`] with its sequence number; transient
/// events pass through. `next_seq` is the sequence number of the first new entry (`None`:
/// ask the store for the journal's length first).
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
    Box::pin(async_stream::stream! {
        let mut events = events;
        let mut seq = match next_seq {
            Some(seq) => seq,
            None => match store.next_seq(&run_id).await {
                Ok(seq) => seq,
                Err(error) => {
                    drop(events);
                    tracing::error!(%error, run_id, "journal: cannot read the journal's length");
                    yield Event::JournalFailed { error: error.to_string() };
                    return;
                }
            },
        };
        while let Some(event) = events.next().await {
            if !event.is_durable() {
                yield event;
                continue;
            }
            let entry = JournalEntry::new(seq, event);
            match store.append_entries(&run_id, seq, std::slice::from_ref(&entry)).await {
                Ok(_) => {
                    yield entry.event;
                    yield Event::Checkpointed { seq };
                    seq += 1;
                }
                Err(error) => {
                    drop(events);
                    tracing::error!(%error, run_id, seq, "journal: append failed; the run stops");
                    yield Event::JournalFailed { error: error.to_string() };
                    return;
                }
            }
        }
    })
}
