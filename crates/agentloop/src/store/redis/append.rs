//! Journal appends on Redis, in batches: every append of the process goes to one writer task,
//! which sends the appends queued while its last script call ran as **one** call of the
//! append script (up to [`MAX_BATCH`]; Redis runs a script atomically, the appends in it one
//! after the other, each checked as if it ran alone) and answers each caller once the call
//! returned. A run alone waits for nothing (a batch is whatever is queued when the writer
//! comes to it); under load one script call, one command and one reply carry many runs'
//! appends instead of one each.

use super::{backend, corrupt, lease, optional_name, RedisStore};
use crate::message::Usage;
use crate::store::outputs;
use crate::store::{
    check_batch, to_json, JournalEntry, Lease, RunState, StoreError, SummaryUpdate,
};
use tokio::sync::{mpsc, oneshot};

/// Appends in one script call at most.
pub(super) const MAX_BATCH: usize = 256;

/// The queue of the store's batch writer.
pub(super) type Queue = mpsc::UnboundedSender<Queued>;

/// One append waiting for the batch writer, with its script arguments built by its caller.
pub(super) struct Queued {
    run_id: String,
    expected_seq: u64,
    first_ms: u64,
    last_ms: u64,
    state: RunState,
    /// The run's names and price as the meta hash stores them, when the append holds
    /// `run_started`.
    started: Option<[String; 4]>,
    /// The secondary indexes the run goes into (with `run_started`).
    indexes: Vec<String>,
    usage: Usage,
    fence: Option<(String, u64)>,
    /// The entries, as JSON.
    entries: Vec<String>,
    reply: oneshot::Sender<Result<Vec<String>, StoreError>>,
}

fn stopped() -> StoreError {
    backend("the store's append writer has stopped")
}

impl RedisStore {
    /// An append, fenced by `fence` when given (checked in the append's script).
    pub(super) async fn append(
        &self,
        run_id: &str,
        expected_seq: u64,
        entries: &[JournalEntry],
        fence: Option<&Lease>,
    ) -> Result<u64, StoreError> {
        check_batch(expected_seq, entries)?;
        let update = SummaryUpdate::of(entries);
        let offloaded = outputs::by_reference(run_id, entries, self.options.large_output_bytes);
        if let Some((_, artifacts)) = &offloaded {
            let mut pipe = ::redis::pipe();
            pipe.atomic();
            for artifact in artifacts {
                self.create_commands(&mut pipe, &artifact.meta, &artifact.data);
            }
            let () = pipe.query_async(&mut self.conn()).await.map_err(backend)?;
        }
        let entries = offloaded.as_ref().map_or(entries, |(stored, _)| stored.as_slice());
        let (first_ms, last_ms, state) =
            update.as_ref().map_or((0, 0, RunState::Running), |u| (u.first_ms, u.last_ms, u.state));
        let usage = update.as_ref().map(|u| u.usage).unwrap_or_default();
        let (started, indexes) = match update.and_then(|u| u.started) {
            Some(started) => {
                let indexes =
                    self.indexes(&started.parent_run_id, &started.agent, &started.context_id);
                let price = started.price.as_ref().map(to_json).transpose()?.unwrap_or_default();
                let names = [
                    optional_name(&started.agent)?,
                    optional_name(&started.context_id)?,
                    optional_name(&started.parent_run_id)?,
                    price,
                ];
                (Some(names), indexes)
            }
            None => (None, Vec::new()),
        };
        let (reply, answer) = oneshot::channel();
        let queued = Queued {
            run_id: run_id.to_owned(),
            expected_seq,
            first_ms,
            last_ms,
            state,
            started,
            indexes,
            usage,
            fence: fence.map(|lease| (lease.owner.clone(), lease.epoch)),
            entries: entries.iter().map(to_json).collect::<Result<_, _>>()?,
            reply,
        };
        self.queue.as_ref().ok_or_else(stopped)?.send(queued).map_err(|_| stopped())?;
        let reply = answer.await.map_err(|_| stopped())??;
        let length = reply.get(1).and_then(|n| n.parse::<u64>().ok());
        match (reply.first().map(String::as_str), length) {
            (Some("ok"), Some(next)) => Ok(next),
            (Some("conflict"), Some(actual)) => Err(StoreError::Conflict {
                run_id: run_id.to_owned(),
                expected: expected_seq,
                actual,
            }),
            (Some("lease_lost"), _) => match fence {
                Some(lease) => Err(lease::lost_reply(lease, &reply)),
                None => Err(corrupt("the append script refused an unfenced append")),
            },
            _ => Err(corrupt(&format!("unexpected reply of the append script: {reply:?}"))),
        }
    }

    /// One `EVALSHA` of the append script for `batch`, built in place (a `ScriptInvocation`
    /// allocates every argument and then copies them all into the command: 4–8 % of the CPU
    /// of a durable round in `bench-driver --store redis` at 1,000 agents). The keys of all
    /// appends come first, then for each append its key count, its argument count and its
    /// arguments (see `scripts::APPEND`).
    fn batch_command(&self, batch: &[Queued]) -> ::redis::Cmd {
        let mut command = ::redis::cmd("EVALSHA");
        let keys: usize = batch.iter().map(|q| 5 + q.indexes.len()).sum();
        command.arg(self.scripts.append.get_hash()).arg(keys);
        for queued in batch {
            let run_id = queued.run_id.as_str();
            command
                .arg(self.key(&["run:", run_id, ":journal"]))
                .arg(self.key(&["run:", run_id, ":meta"]))
                .arg(self.key(&["runs"]))
                .arg(self.key(&["run:", run_id, ":lease"]))
                .arg(self.appended_channel(run_id))
                .arg(&queued.indexes);
        }
        command.arg(batch.len());
        let ttl_ms = self.ttl_ms();
        for queued in batch {
            let [agent, context_id, parent, price] =
                queued.started.as_ref().map_or(["", "", "", ""], |s| {
                    [s[0].as_str(), s[1].as_str(), s[2].as_str(), s[3].as_str()]
                });
            let (owner, epoch) = queued.fence.as_ref().map_or(("", 0), |(o, e)| (o.as_str(), *e));
            command
                .arg(5 + queued.indexes.len())
                .arg(17 + queued.entries.len())
                .arg(queued.expected_seq)
                .arg(ttl_ms)
                .arg(&queued.run_id)
                .arg(queued.first_ms)
                .arg(queued.last_ms)
                .arg(agent)
                .arg(context_id)
                .arg(if queued.started.is_some() { "1" } else { "0" })
                .arg(queued.state.as_str())
                .arg(owner)
                .arg(epoch)
                .arg(parent)
                .arg(price)
                .arg(queued.usage.input)
                .arg(queued.usage.output)
                .arg(queued.usage.cached_input)
                .arg(queued.usage.reasoning)
                .arg(&queued.entries);
        }
        command
    }
}

/// The batch writer: serves `queue` until every clone of the store is gone. `store` is a
/// clone without a queue of its own (so that it does not keep the queue open).
pub(super) async fn serve(store: RedisStore, mut queue: mpsc::UnboundedReceiver<Queued>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = queue.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let command = store.batch_command(&batch);
        let replies: Result<Vec<Vec<String>>, StoreError> =
            store.evalsha(&store.scripts.append, &command).await;
        match replies {
            Ok(replies) if replies.len() == batch.len() => {
                let (mut appends, mut entries) = (0, 0);
                for (queued, reply) in batch.drain(..).zip(replies) {
                    if reply.first().map(String::as_str) == Some("ok") && !queued.entries.is_empty()
                    {
                        appends += 1;
                        entries += queued.entries.len() as u64;
                    }
                    // A caller that went away (its run was dropped) needs no answer.
                    drop(queued.reply.send(Ok(reply)));
                }
                store.counters.committed(appends, entries);
            }
            Ok(replies) => {
                let error = corrupt(&format!(
                    "the append script answered {} of {} appends",
                    replies.len(),
                    batch.len()
                ));
                for queued in batch.drain(..) {
                    drop(queued.reply.send(Err(error.clone())));
                }
            }
            Err(error) => {
                for queued in batch.drain(..) {
                    drop(queued.reply.send(Err(error.clone())));
                }
            }
        }
    }
}
