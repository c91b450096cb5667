//! The wire vocabulary of runs outside the process: an [`Envelope`] is one event of one run,
//! numbered so that a client that reconnects can continue where it stopped and drop what it
//! has seen. A journaled event carries its journal `seq` (`sub` 0); a stream-only event (a
//! text, argument or reasoning delta, a notice) carries the `seq` of the last journaled event
//! before it and a `sub`-index from 1. [`RunService::subscribe`](crate::service::RunService::subscribe)
//! yields envelopes of journaled events from the store; [`envelopes`] numbers an executor's
//! own event stream the same way. The JSON Schema is `docs/schema/envelope.schema.json`
//! ([`crate::schema::envelope`]).

use crate::driver::EventStream;
use crate::event::Event;
use crate::run::SCHEMA_VERSION;
use crate::store::JournalEntry;
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};

/// One event of one run, numbered (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Envelope {
    /// The run.
    pub run_id: String,
    /// A journaled event: its journal sequence number. A stream-only event: the sequence
    /// number of the last journaled event before it.
    pub seq: u64,
    /// 0 for a journaled event; 1, 2, … for the stream-only events after journaled event
    /// `seq` (omitted when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sub: u32,
    /// When the event was journaled (a journaled event read from the store) or seen
    /// (milliseconds since the Unix epoch).
    pub at_ms: u64,
    /// The format version ([`SCHEMA_VERSION`], the journal's).
    pub format: u32,
    /// The event.
    pub event: Event,
}

fn is_zero(sub: &u32) -> bool {
    *sub == 0
}

impl Envelope {
    /// The envelope of a journal entry of `run_id`.
    pub fn from_entry(run_id: &str, entry: JournalEntry) -> Self {
        Self {
            run_id: run_id.to_owned(),
            seq: entry.seq,
            sub: 0,
            at_ms: entry.at_ms,
            format: entry.schema_version,
            event: entry.event.into_event(),
        }
    }

    /// Whether it holds a journaled event.
    pub fn is_journaled(&self) -> bool {
        self.sub == 0
    }

    /// Its position, for ordering and dropping what a client has seen: `(seq, sub)`.
    pub fn position(&self) -> (u64, u32) {
        (self.seq, self.sub)
    }
}

/// Numbers an executor's event stream (of `run_id`) as envelopes: each durable event gets
/// the `seq` of its `checkpointed` event (which is not passed on), or — without a store, where
/// there are none — the next number from `first_seq`; every other event gets the `seq` of
/// the last durable event and the next `sub`.
pub fn envelopes(
    run_id: String,
    events: EventStream,
    first_seq: u64,
) -> impl Stream<Item = Envelope> + Send {
    async_stream::stream! {
        let mut events = events;
        let mut pending: Option<Event> = None;
        // The seq of the last journaled event, and the next one's.
        let (mut last, mut next, mut sub) = (first_seq.checked_sub(1), first_seq, 0u32);
        let envelope = |seq: u64, sub: u32, event: Event| Envelope {
            run_id: run_id.clone(),
            seq,
            sub,
            at_ms: crate::store::now_ms(),
            format: SCHEMA_VERSION,
            event,
        };
        while let Some(event) = events.next().await {
            if let Event::Checkpointed { seq } = event {
                if let Some(durable) = pending.take() {
                    yield envelope(seq, 0, durable);
                    (last, next, sub) = (Some(seq), seq + 1, 0);
                }
                continue;
            }
            if let Some(durable) = pending.take() {
                // No checkpoint followed it: a run without a store.
                yield envelope(next, 0, durable);
                (last, next, sub) = (Some(next), next + 1, 0);
            }
            if event.is_durable() {
                pending = Some(event);
            } else {
                sub += 1;
                yield envelope(last.unwrap_or(0), sub, event);
            }
        }
        if let Some(durable) = pending.take() {
            yield envelope(next, 0, durable);
        }
    }
}
