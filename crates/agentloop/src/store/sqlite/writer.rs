//! The connection thread, with **group commit**: the journal appends queued while a
//! transaction commits go into the next transaction together, and each waiter is answered
//! once that transaction is durable. An append's checks (its lease, its expected sequence)
//! come before its writes (a run's later appends make them in the statement that updates the
//! run's row), so a refused append writes nothing and the others commit; should a statement
//! fail midway (a full disk), the batch is written again with a savepoint around each append,
//! so that only the failed one is undone. A run alone is not slower: a batch is whatever is
//! queued when the thread comes to it, and the thread waits for more only when
//! [`SqliteOptions::group_commit_delay`](super::SqliteOptions::group_commit_delay) says so.

use super::{backend, int, lease, registry, Row};
use crate::store::outputs::OutputArtifact;
use crate::store::stats::WriteCounters;
use crate::store::{Lease, StoreError, SummaryUpdate};
use rusqlite::{params, Connection, TransactionBehavior};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

/// Work for the connection thread.
pub(super) enum Job {
    /// Anything else, run alone.
    Any(Box<dyn FnOnce(&mut Connection) + Send>),
    /// A journal append, committed with the others queued beside it.
    Append(Box<Append>),
}

/// One journal append, checked and written in the batch's transaction.
pub(super) struct Append {
    pub(super) run_id: String,
    pub(super) expected_seq: u64,
    pub(super) rows: Vec<Row>,
    /// Tool outputs kept by reference, written with the rows.
    pub(super) artifacts: Vec<OutputArtifact>,
    pub(super) update: SummaryUpdate,
    pub(super) fence: Option<Lease>,
    pub(super) reply: tokio::sync::oneshot::Sender<Answer>,
    /// When it was queued (for [`WriteStats::append_wait_us`](crate::store::WriteStats)).
    pub(super) queued: Instant,
}

/// What an append's caller gets back: its result, and its rows, for the caller to free.
/// They were allocated on the caller's thread; freed there, they go back to that thread's
/// own cache of the allocator (glibc's `malloc` frees memory of another thread's arena under
/// a lock, and the owner then pays to merge it back; this was 3–9 % of the writer thread's
/// time and some of the callers').
pub(super) struct Answer {
    pub(super) result: Result<u64, StoreError>,
    pub(super) spent: Vec<Row>,
}

impl Append {
    fn answer(self, result: Result<u64, StoreError>) {
        let _ = self.reply.send(Answer { result, spent: self.rows });
    }
}

/// How appends are grouped.
#[derive(Debug, Clone, Copy)]
pub(super) struct Grouping {
    /// Appends per transaction at most.
    pub(super) max_batch: usize,
    /// How long the first append of a batch waits for others (zero: not at all).
    pub(super) delay: Duration,
}

/// Serves `jobs` on `conn` until every sender is gone; counts the appends it commits in
/// `counters`.
pub(super) fn serve(
    mut conn: Connection,
    jobs: Receiver<Job>,
    grouping: Grouping,
    counters: &WriteCounters,
) {
    let mut next: Option<Job> = None;
    loop {
        let job = match next.take() {
            Some(job) => job,
            None => match jobs.recv() {
                Ok(job) => job,
                Err(_) => return,
            },
        };
        match job {
            Job::Any(job) => job(&mut conn),
            Job::Append(first) => {
                let mut batch = vec![*first];
                next = gather(&jobs, &mut batch, grouping);
                commit(&mut conn, batch, counters);
            }
        }
    }
}

/// Adds the queued appends to `batch` (waiting up to the delay for more); gives back the
/// first job of another kind, which runs after the batch.
fn gather(jobs: &Receiver<Job>, batch: &mut Vec<Append>, grouping: Grouping) -> Option<Job> {
    let deadline = Instant::now() + grouping.delay;
    while batch.len() < grouping.max_batch {
        let job = match jobs.try_recv() {
            Ok(job) => job,
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return None;
                }
                match jobs.recv_timeout(left) {
                    Ok(job) => job,
                    Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
                }
            }
        };
        match job {
            Job::Append(append) => batch.push(*append),
            other => return Some(other),
        }
    }
    None
}

/// Writes `batch` in one transaction and answers each append once it is committed (or with
/// the error that kept the whole transaction from committing).
fn commit(conn: &mut Connection, batch: Vec<Append>, counters: &WriteCounters) {
    let started = Instant::now();
    let outcome = match write_batch(conn, &batch, false) {
        // A statement failed after an append's checks passed (a full disk, say): that append
        // may have written part of its rows, so the transaction was rolled back; write the
        // batch again with a savepoint around each append, so the failure undoes only its own.
        Err(Failure::Write(_)) if batch.len() > 1 => write_batch(conn, &batch, true),
        outcome => outcome,
    };
    match outcome {
        Ok(results) => {
            let (mut appends, mut entries) = (0, 0);
            for (append, result) in batch.iter().zip(&results) {
                if result.is_ok() && !append.rows.is_empty() {
                    appends += 1;
                    entries += append.rows.len() as u64;
                }
            }
            counters.committed(appends, entries);
            let answered = Instant::now();
            let waited = batch.iter().map(|a| answered.saturating_duration_since(a.queued)).sum();
            counters.timed(waited, answered.saturating_duration_since(started));
            for (append, result) in batch.into_iter().zip(results) {
                append.answer(result.map_err(Failure::into_error));
            }
        }
        Err(error) => {
            let error = error.into_error();
            for append in batch {
                append.answer(Err(error.clone()));
            }
        }
    }
}

/// Why an append (or a whole batch) failed.
#[derive(Debug)]
enum Failure {
    /// Its checks (fence, expected sequence) refused it before it wrote anything.
    Check(StoreError),
    /// A statement failed, possibly after some of its rows were written.
    Write(StoreError),
}

impl Failure {
    fn into_error(self) -> StoreError {
        match self {
            Self::Check(error) | Self::Write(error) => error,
        }
    }
}

/// Writes `batch` in one transaction; gives each append's result, or the failure that rolled
/// the transaction back. An append refused by its checks has written nothing, so it needs no
/// savepoint; with `savepoints`, each append has one anyway and a failed statement undoes only
/// that append's rows.
fn write_batch(
    conn: &mut Connection,
    batch: &[Append],
    savepoints: bool,
) -> Result<Vec<Result<u64, Failure>>, Failure> {
    let storage = |e| Failure::Write(backend(e));
    let mut tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
    let mut results = Vec::with_capacity(batch.len());
    for append in batch {
        let result = if savepoints {
            let savepoint = tx.savepoint().map_err(storage)?;
            let result = write(&savepoint, append);
            if result.is_ok() {
                savepoint.commit().map_err(storage)?;
            }
            // Dropped uncommitted, the savepoint rolls back: this append wrote nothing.
            result
        } else {
            match write(&tx, append) {
                // Dropped uncommitted, the transaction rolls back.
                Err(Failure::Write(error)) => return Err(Failure::Write(error)),
                result => result,
            }
        };
        results.push(result);
    }
    tx.commit().map_err(storage)?;
    Ok(results)
}

/// One append: the fence and the expected-sequence check (a refused append writes nothing),
/// the run's row (its summary; created by the run's first append) and the rows. A run's
/// later appends check and write its row in one statement ([`registry::advance`]); only a
/// refused one reads why.
fn write(conn: &Connection, append: &Append) -> Result<u64, Failure> {
    let next = append.expected_seq + append.rows.len() as u64;
    if append.expected_seq > 0 && append.update.started.is_none() {
        let fence = append.fence.as_ref().map(|lease| (lease.owner.as_str(), lease.epoch));
        let (run_id, expected, update) = (&append.run_id, append.expected_seq, &append.update);
        let advanced = registry::advance(conn, run_id, expected, next, update, fence);
        if let Some(run_key) = advanced.map_err(Failure::Write)? {
            insert_rows(conn, run_key, append)?;
            return Ok(next);
        }
    }
    if let Some(lease) = &append.fence {
        lease::check(conn, lease).map_err(Failure::Check)?;
    }
    let current = registry::current(conn, &append.run_id).map_err(Failure::Check)?;
    let actual = current.next_seq;
    if actual != append.expected_seq {
        return Err(Failure::Check(StoreError::Conflict {
            run_id: append.run_id.clone(),
            expected: append.expected_seq,
            actual,
        }));
    }
    let run_key = registry::apply(conn, &append.run_id, &current, next, &append.update)
        .map_err(Failure::Write)?;
    insert_rows(conn, run_key, append)?;
    Ok(next)
}

/// Inserts the append's rows into the journal of the run `run_key` (and the artifacts its
/// rows refer to).
fn insert_rows(conn: &Connection, run_key: i64, append: &Append) -> Result<(), Failure> {
    let storage = |e| Failure::Write(backend(e));
    for artifact in &append.artifacts {
        super::artifacts::insert(conn, &artifact.meta, &artifact.data).map_err(storage)?;
    }
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO journal (run_key, seq, at_ms, schema_version, event) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(storage)?;
    for row in &append.rows {
        insert
            .execute(params![run_key, int(row.seq), int(row.at_ms), row.schema_version, row.event])
            .map_err(storage)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
