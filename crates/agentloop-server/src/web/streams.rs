//! The update streams of SendStreamingMessage and SubscribeToTask, shared by both bindings:
//! each item is an SSE event id and a [`StreamResponse`]. A stream starts with the task and
//! ends after a status that is terminal or waits for the client.
//!
//! Event ids: a journaled event's `seq`, a stream-only one's `seq.sub`. A subscriber that
//! reconnects with `Last-Event-ID` gets the journaled events after that `seq` (stream-only
//! deltas are not replayed; the answer comes whole at the end).

use crate::mapping::{ends_stream, EventMapper, TaskFold};
use crate::tasks::Accepted;
use a2a::StreamResponse;
use agentloop::protocol::Envelope;
use agentloop::store::StoreError;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};

/// One item of an update stream: its SSE id (if any) and the update, or an error that ends
/// the stream.
pub type Update = Result<(Option<String>, StreamResponse), StoreError>;

fn id_of(envelope: &Envelope) -> String {
    if envelope.sub == 0 {
        envelope.seq.to_string()
    } else {
        format!("{}.{}", envelope.seq, envelope.sub)
    }
}

/// The stream of a message just accepted: the task, then the run's updates as this
/// process drives it.
pub fn accepted(accepted: Accepted) -> impl Stream<Item = Update> + Send + 'static {
    let Accepted { task, events } = accepted;
    let mapper = EventMapper::new(&task.id, &task.context_id);
    let envelopes = futures::stream::unfold(events, |mut events| async move {
        let envelope = events.recv().await?;
        Some((Ok(envelope), events))
    });
    futures::stream::once(async move { Ok((None, StreamResponse::Task(task))) })
        .chain(updates(mapper, envelopes))
}

/// The stream of SubscribeToTask: the task as it stands (unless the client resumes after an
/// event id it saw), then the journal's updates.
pub fn subscribed(
    fold: TaskFold,
    journal: BoxStream<'static, Result<Envelope, StoreError>>,
    resumed: bool,
) -> impl Stream<Item = Update> + Send + 'static {
    let task = fold.task(None, true);
    let mapper = EventMapper::new(&task.id, &task.context_id);
    let ended = ends_stream(&StreamResponse::Task(task.clone()));
    let first = (!resumed)
        .then(|| Ok((fold.last_seq().map(|s| s.to_string()), StreamResponse::Task(task))));
    let rest = (!(first.is_some() && ended)).then(|| updates(mapper, journal));
    futures::stream::iter(first).chain(futures::stream::iter(rest).flatten())
}

/// The updates of a run's envelopes, each with its event id, until one ends the stream (or
/// an error, which is passed on last).
fn updates(
    mut mapper: EventMapper,
    envelopes: impl Stream<Item = Result<Envelope, StoreError>> + Send + 'static,
) -> impl Stream<Item = Update> + Send + 'static {
    async_stream::stream! {
        let mut envelopes = std::pin::pin!(envelopes);
        while let Some(envelope) = envelopes.next().await {
            let envelope = match envelope {
                Ok(envelope) => envelope,
                Err(error) => {
                    yield Err(error);
                    return;
                }
            };
            let id = id_of(&envelope);
            for update in mapper.map(envelope.seq, envelope.at_ms, &envelope.event) {
                let end = ends_stream(&update);
                yield Ok((Some(id.clone()), update));
                if end {
                    return;
                }
            }
        }
    }
}

/// The `seq` a `Last-Event-ID` names (`seq` or `seq.sub`).
pub fn last_seq(last_event_id: &str) -> Option<u64> {
    last_event_id.split('.').next()?.trim().parse().ok()
}
