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
    let Accepted { task, mut events } = accepted;
    async_stream::stream! {
        let mut mapper = EventMapper::new(&task.id, &task.context_id);
        let first = StreamResponse::Task(task);
        yield Ok((None, first));
        while let Some(envelope) = events.recv().await {
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

/// The stream of SubscribeToTask: the task as it stands (unless the client resumes after
/// `last_seq`), then the journal's updates.
pub fn subscribed(
    fold: TaskFold,
    journal: BoxStream<'static, Result<Envelope, StoreError>>,
    resumed: bool,
) -> impl Stream<Item = Update> + Send + 'static {
    async_stream::stream! {
        let task = fold.task(None, true);
        let mut mapper = EventMapper::new(&task.id, &task.context_id);
        if !resumed {
            let end = ends_stream(&StreamResponse::Task(task.clone()));
            yield Ok((fold.last_seq().map(|s| s.to_string()), StreamResponse::Task(task)));
            if end {
                return;
            }
        }
        let mut journal = journal;
        while let Some(envelope) = journal.next().await {
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
