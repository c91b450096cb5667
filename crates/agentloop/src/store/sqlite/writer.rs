//! The connection thread, with **group commit**: the journal appends queued while a
//! transaction commits go into the next transaction together, and each waiter is answered
//! once that transaction is durable. An append's checks (its lease, its expected sequence)
//! come before its writes (a run's later appends make them in the statement that updates the
//! run's row), so a refused append writes nothing and the others commit; should a statement
//! fail midway (a full disk), the batch is written again with a savepoint around each append,
//! so that only the failed one is undone. Leases' claims and releases join the batches the
//! same way (checked, then written). A run alone is not slower: a batch is whatever is
//! queued when the thread comes to it, and the thread waits for more only when
//! [`SqliteOptions::group_commit_delay`](super::SqliteOptions::group_commit_delay) says so.
//! A committed batch's answers go to each waiting runtime at once (`courier.rs`).

use super::statements::{Sql, Statements, INSERT_ROWS};
use super::{backend, int, lease, registry, Rows};
use crate::store::outputs::OutputArtifact;
use crate::store::stats::WriteCounters;
use crate::store::{Lease, StoreError, SummaryUpdate};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, TransactionBehavior};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

mod courier;
pub(super) use courier::{Courier, Couriers};

/// Work for the connection thread.
pub(super) enum Job {
    /// Anything else, run alone.
    Any(Box<dyn FnOnce(&mut Connection) + Send>),
    /// A write committed in one transaction with the others queued beside it.
    Batched(Op),
}

/// A write that shares the batch's transaction.
pub(super) enum Op {
    /// A journal append.
    Append(Box<Append>),
    /// A lease's claim: a run's first store call, so that it shares a commit with the
    /// appends queued beside it instead of committing alone.
    Claim(Box<Claim>),
    /// A lease's release: a run's last.
    Release(Box<Release>),
}

/// A claim of `run_id`'s lease for `owner` (see [`crate::store::lease`]).
pub(super) struct Claim {
    pub(super) run_id: String,
    pub(super) owner: String,
    pub(super) ttl: Duration,
    pub(super) reply: tokio::sync::oneshot::Sender<Result<Lease, StoreError>>,
    pub(super) courier: Option<Courier>,
}

/// A release of `lease` (nothing, when it is no longer the run's lease).
pub(super) struct Release {
    pub(super) lease: Lease,
    pub(super) reply: tokio::sync::oneshot::Sender<Result<(), StoreError>>,
    pub(super) courier: Option<Courier>,
}

/// One journal append, checked and written in the batch's transaction.
pub(super) struct Append {
    pub(super) run_id: String,
    pub(super) expected_seq: u64,
    pub(super) rows: Rows,
    /// Tool outputs kept by reference, written with the rows.
    pub(super) artifacts: Vec<OutputArtifact>,
    pub(super) update: SummaryUpdate,
    pub(super) fence: Option<Lease>,
    pub(super) reply: tokio::sync::oneshot::Sender<Answer>,
    /// Who wakes the caller with the answer (`None`: the connection thread).
    pub(super) courier: Option<Courier>,
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
    pub(super) spent: Rows,
}

/// What an [`Op`] did, once its transaction committed.
enum Done {
    Appended(u64),
    Claimed(Lease),
    Released,
}

impl Op {
    /// Answers the op's caller with `result` (of its own kind, as [`Op::write`] made it).
    fn answer(self, result: Result<Done, StoreError>) {
        match self {
            Self::Append(append) => {
                let result = result.and_then(|done| match done {
                    Done::Appended(next) => Ok(next),
                    _ => Err(StoreError::Invalid("an append answered as another op".into())),
                });
                let _ = append.reply.send(Answer { result, spent: append.rows });
            }
            Self::Claim(claim) => {
                let result = result.and_then(|done| match done {
                    Done::Claimed(lease) => Ok(lease),
                    _ => Err(StoreError::Invalid("a claim answered as another op".into())),
                });
                let _ = claim.reply.send(result);
            }
            Self::Release(release) => {
                let _ = release.reply.send(result.map(|_| ()));
            }
        }
    }

    /// Its checks, then its writes, in the transaction of `statements`' connection.
    fn write(&self, statements: &mut Statements<'_>) -> Result<Done, Failure> {
        let conn = statements.conn();
        match self {
            Self::Append(append) => write(statements, append).map(Done::Appended),
            Self::Claim(claim) => {
                let lease = lease::claimed(conn, &claim.run_id, &claim.owner, claim.ttl)
                    .map_err(Failure::Check)?;
                lease::record(conn, &lease).map_err(Failure::Write)?;
                Ok(Done::Claimed(lease))
            }
            Self::Release(release) => {
                if let Some(released) =
                    lease::released(conn, &release.lease).map_err(Failure::Check)?
                {
                    lease::write(conn, &release.lease.run_id, &released).map_err(Failure::Write)?;
                }
                Ok(Done::Released)
            }
        }
    }

    /// Who wakes its caller with the answer, taken out of the op.
    fn take_courier(&mut self) -> Option<Courier> {
        match self {
            Self::Append(append) => append.courier.take(),
            Self::Claim(claim) => claim.courier.take(),
            Self::Release(release) => release.courier.take(),
        }
    }

    /// The append's rows, if it is one with rows.
    fn entries(&self) -> usize {
        match self {
            Self::Append(append) => append.rows.len(),
            _ => 0,
        }
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
            Job::Batched(first) => {
                let mut batch = vec![first];
                next = gather(&jobs, &mut batch, grouping);
                commit(&mut conn, batch, counters);
            }
        }
    }
}

/// Adds the queued ops to `batch` (waiting up to the delay for more); gives back the first
/// job of another kind, which runs after the batch.
fn gather(jobs: &Receiver<Job>, batch: &mut Vec<Op>, grouping: Grouping) -> Option<Job> {
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
            Job::Batched(op) => batch.push(op),
            other => return Some(other),
        }
    }
    None
}

/// Writes `batch` in one transaction and answers each op once it is committed (or with the
/// error that kept the whole transaction from committing).
fn commit(conn: &mut Connection, batch: Vec<Op>, counters: &WriteCounters) {
    let started = Instant::now();
    let outcome = match write_batch(conn, &batch, false) {
        // A statement failed after an op's checks passed (a full disk, say): that op may have
        // written part of its rows, so the transaction was rolled back; write the batch again
        // with a savepoint around each op, so the failure undoes only its own.
        Err(Failure::Write(_)) if batch.len() > 1 => write_batch(conn, &batch, true),
        outcome => outcome,
    };
    match outcome {
        Ok(results) => {
            let (mut appends, mut entries) = (0, 0);
            for (op, result) in batch.iter().zip(&results) {
                if result.is_ok() && op.entries() > 0 {
                    appends += 1;
                    entries += op.entries() as u64;
                }
            }
            counters.committed(appends, entries);
            let answered = Instant::now();
            let waited = batch
                .iter()
                .filter_map(|op| match op {
                    Op::Append(append) => Some(answered.saturating_duration_since(append.queued)),
                    _ => None,
                })
                .sum();
            counters.timed(waited, answered.saturating_duration_since(started));
            let results = results.into_iter().map(|result| result.map_err(Failure::into_error));
            courier::deliver(batch.into_iter().zip(results));
        }
        Err(error) => {
            let error = error.into_error();
            courier::deliver(batch.into_iter().map(|op| (op, Err(error.clone()))));
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

/// Writes `batch` in one transaction; gives each op's result, or the failure that rolled the
/// transaction back. An op refused by its checks has written nothing, so it needs no
/// savepoint; with `savepoints`, each op has one anyway and a failed statement undoes only
/// that op's writes.
fn write_batch(
    conn: &mut Connection,
    batch: &[Op],
    savepoints: bool,
) -> Result<Vec<Result<Done, Failure>>, Failure> {
    let storage = |e| Failure::Write(backend(e));
    let mut tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
    let mut results = Vec::with_capacity(batch.len());
    if savepoints {
        for op in batch {
            let savepoint = tx.savepoint().map_err(storage)?;
            let result = op.write(&mut Statements::new(&savepoint));
            if result.is_ok() {
                savepoint.commit().map_err(storage)?;
            }
            // Dropped uncommitted, the savepoint rolls back: this op wrote nothing.
            results.push(result);
        }
    } else {
        let mut statements = Statements::new(&tx);
        for op in batch {
            match op.write(&mut statements) {
                // Dropped uncommitted, the transaction rolls back.
                Err(Failure::Write(error)) => return Err(Failure::Write(error)),
                result => results.push(result),
            }
        }
    }
    tx.commit().map_err(storage)?;
    Ok(results)
}

/// One append: the fence and the expected-sequence check (a refused append writes nothing),
/// the run's row (its summary; created by the run's first append) and the rows. A run's
/// later appends check and write its row in one statement ([`registry::advance`]); only a
/// refused one reads why.
fn write(statements: &mut Statements<'_>, append: &Append) -> Result<u64, Failure> {
    let conn = statements.conn();
    let next = append.expected_seq + append.rows.len() as u64;
    if append.expected_seq > 0 && append.update.started.is_none() {
        let fence = append.fence.as_ref().map(|lease| (lease.owner.as_str(), lease.epoch));
        let (run_id, expected, update) = (&append.run_id, append.expected_seq, &append.update);
        let advanced = registry::advance(statements, run_id, expected, next, update, fence);
        if let Some(run_key) = advanced.map_err(Failure::Write)? {
            insert_rows(statements, run_key, append)?;
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
    insert_rows(statements, run_key, append)?;
    Ok(next)
}

/// Inserts the append's rows into the journal of the run `run_key` (and the artifacts its
/// rows refer to): up to [`INSERT_ROWS`] rows per statement, since much of an insert's cost
/// is the statement's own (an append has about three entries). `OR FAIL`, as in
/// [`registry::advance`]: with `ABORT` SQLite would keep a statement journal to undo a
/// statement of several rows that fails halfway; here a failed statement fails the append,
/// and the batch's transaction (or the append's savepoint) is rolled back anyway.
fn insert_rows(
    statements: &mut Statements<'_>,
    run_key: i64,
    append: &Append,
) -> Result<(), Failure> {
    let storage = |e| Failure::Write(backend(e));
    for artifact in &append.artifacts {
        let conn = statements.conn();
        super::artifacts::insert(conn, &artifact.meta, &artifact.data).map_err(storage)?;
    }
    let mut rows = append.rows.iter().peekable();
    let mut values: Vec<ToSqlOutput<'_>> = Vec::with_capacity(5 * INSERT_ROWS);
    while rows.peek().is_some() {
        values.clear();
        for (row, json) in rows.by_ref().take(INSERT_ROWS) {
            // Bound as text without checking it again: serde_json wrote it, as UTF-8.
            values.extend([
                ToSqlOutput::from(run_key),
                ToSqlOutput::from(int(row.seq)),
                ToSqlOutput::from(int(row.at_ms)),
                ToSqlOutput::from(row.schema_version),
                ToSqlOutput::Borrowed(ValueRef::Text(json)),
            ]);
        }
        let insert = statements.get(Sql::Insert(values.len() / 5)).map_err(storage)?;
        insert.execute(rusqlite::params_from_iter(values.iter())).map_err(storage)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
