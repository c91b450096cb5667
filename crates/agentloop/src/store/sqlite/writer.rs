//! The connection thread, with **group commit**: the journal appends queued while a
//! transaction commits go into the next transaction together (each in a savepoint of its own,
//! so one append's conflict or lost lease undoes only its rows), and each waiter is answered
//! once that transaction is durable. A run alone is not slower: a batch is whatever is queued
//! when the thread comes to it, and the thread waits for more only when
//! [`SqliteOptions::group_commit_delay`](super::SqliteOptions::group_commit_delay) says so.

use super::{backend, int, lease, registry, Row};
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
    pub(super) update: SummaryUpdate,
    pub(super) fence: Option<Lease>,
    pub(super) reply: tokio::sync::oneshot::Sender<Result<u64, StoreError>>,
}

/// How appends are grouped.
#[derive(Debug, Clone, Copy)]
pub(super) struct Grouping {
    /// Appends per transaction at most.
    pub(super) max_batch: usize,
    /// How long the first append of a batch waits for others (zero: not at all).
    pub(super) delay: Duration,
}

/// Serves `jobs` on `conn` until every sender is gone.
pub(super) fn serve(mut conn: Connection, jobs: Receiver<Job>, grouping: Grouping) {
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
                commit(&mut conn, batch);
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
fn commit(conn: &mut Connection, batch: Vec<Append>) {
    let outcome = (|| {
        let mut tx =
            conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
        let mut results = Vec::with_capacity(batch.len());
        if let [append] = batch.as_slice() {
            // Alone: the transaction is its savepoint (a failed append commits nothing).
            let result = write(&tx, append);
            if result.is_ok() {
                tx.commit().map_err(backend)?;
            }
            results.push(result);
            return Ok(results);
        }
        for append in &batch {
            let savepoint = tx.savepoint().map_err(backend)?;
            let result = write(&savepoint, append);
            if result.is_ok() {
                savepoint.commit().map_err(backend)?;
            }
            // Dropped uncommitted, the savepoint rolls back: this append wrote nothing.
            results.push(result);
        }
        tx.commit().map_err(backend)?;
        Ok::<_, StoreError>(results)
    })();
    match outcome {
        Ok(results) => {
            for (append, result) in batch.into_iter().zip(results) {
                let _ = append.reply.send(result);
            }
        }
        Err(error) => {
            for append in batch {
                let _ = append.reply.send(Err(error.clone()));
            }
        }
    }
}

/// One append: the fence, the expected-sequence check, the rows and the run's summary.
fn write(conn: &Connection, append: &Append) -> Result<u64, StoreError> {
    if let Some(lease) = &append.fence {
        lease::check(conn, lease)?;
    }
    let current = registry::current(conn, &append.run_id)?;
    let actual = current.next_seq;
    if actual != append.expected_seq {
        return Err(StoreError::Conflict {
            run_id: append.run_id.clone(),
            expected: append.expected_seq,
            actual,
        });
    }
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO journal (run_id, seq, at_ms, schema_version, event) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(backend)?;
    for row in &append.rows {
        insert
            .execute(params![
                append.run_id,
                int(row.seq),
                int(row.at_ms),
                row.schema_version,
                row.event
            ])
            .map_err(backend)?;
    }
    let next = append.expected_seq + append.rows.len() as u64;
    registry::apply(conn, &append.run_id, &current, next, &append.update)?;
    Ok(next)
}
