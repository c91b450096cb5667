#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::super::{migrate, Row};
use super::*;
use crate::event::Event;
use crate::message::Message;
use crate::run::RunConfig;
use crate::store::{to_json, JournalEntry};
use tokio::sync::oneshot;

type Reply = oneshot::Receiver<Result<u64, StoreError>>;

/// An append of `events` journal entries to `run_id` from `expected_seq` on: the run's start
/// first when `expected_seq` is zero, then model answers.
fn append(run_id: &str, expected_seq: u64, events: u64) -> (Append, Reply) {
    let entries: Vec<JournalEntry> = (expected_seq..expected_seq + events)
        .map(|seq| {
            let event = if seq == 0 {
                Event::RunStarted {
                    run_id: run_id.into(),
                    config: Box::new(RunConfig::default()),
                    input: vec![Message::user("hi")],
                }
            } else {
                Event::IterationStarted { iteration: u32::try_from(seq).unwrap(), at_ms: 0 }
            };
            JournalEntry::of(seq, event).unwrap()
        })
        .collect();
    let rows = entries
        .iter()
        .map(|e| Row {
            seq: e.seq,
            at_ms: e.at_ms,
            schema_version: e.schema_version,
            event: to_json(&e.event).unwrap(),
        })
        .collect();
    let (reply, answer) = oneshot::channel();
    let update = SummaryUpdate::of(&entries).unwrap();
    (Append { run_id: run_id.into(), expected_seq, rows, update, fence: None, reply }, answer)
}

fn journal_len(conn: &Connection, run_id: &str) -> i64 {
    conn.query_row("SELECT COUNT(*) FROM journal WHERE run_id = ?1", [run_id], |r| r.get(0))
        .unwrap()
}

fn run_rows(conn: &Connection, run_id: &str) -> i64 {
    conn.query_row("SELECT COUNT(*) FROM runs WHERE run_id = ?1", [run_id], |r| r.get(0)).unwrap()
}

fn database() -> Connection {
    let mut conn = Connection::open_in_memory().unwrap();
    migrate(&mut conn).unwrap();
    conn
}

/// A refused append (a stale expected sequence) in a batch writes nothing and the others of
/// its batch commit, without savepoints.
#[test]
fn a_refused_append_leaves_its_batch_committed() {
    let mut conn = database();
    let (first, first_reply) = append("a", 0, 2);
    let (stale, mut stale_reply) = append("stale", 3, 1);
    let (second, second_reply) = append("b", 0, 1);
    commit(&mut conn, vec![first, stale, second]);
    assert_eq!(first_reply.blocking_recv().unwrap().unwrap(), 2);
    assert_eq!(second_reply.blocking_recv().unwrap().unwrap(), 1);
    match stale_reply.try_recv().unwrap() {
        Err(StoreError::Conflict { expected: 3, actual: 0, .. }) => {}
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!((journal_len(&conn, "a"), journal_len(&conn, "b")), (2, 1));
    assert_eq!((journal_len(&conn, "stale"), run_rows(&conn, "stale")), (0, 0));
}

/// A statement that fails after an append's checks passed (here a trigger refuses its second
/// row, after its first was written) undoes that append only: the batch is written again
/// with savepoints, the others commit, and the failed append left no row and no run.
#[test]
fn a_statement_failing_midway_undoes_only_its_own_append() {
    let mut conn = database();
    conn.execute_batch(
        "CREATE TRIGGER refuse BEFORE INSERT ON journal \
         WHEN NEW.run_id = 'bad' AND NEW.seq = 1 BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
    )
    .unwrap();
    let (before, before_reply) = append("a", 0, 1);
    let (bad, mut bad_reply) = append("bad", 0, 2);
    let (after, after_reply) = append("b", 0, 3);
    commit(&mut conn, vec![before, bad, after]);
    assert_eq!(before_reply.blocking_recv().unwrap().unwrap(), 1);
    assert_eq!(after_reply.blocking_recv().unwrap().unwrap(), 3);
    match bad_reply.try_recv().unwrap() {
        Err(StoreError::Backend { message, .. }) => assert!(message.contains("disk full")),
        other => panic!("expected the trigger's error, got {other:?}"),
    }
    assert_eq!((journal_len(&conn, "a"), journal_len(&conn, "b")), (1, 3));
    assert_eq!((journal_len(&conn, "bad"), run_rows(&conn, "bad")), (0, 0));

    // Alone, the failed append is the whole transaction: nothing of it is written either.
    let (alone, mut alone_reply) = append("bad", 0, 2);
    commit(&mut conn, vec![alone]);
    assert!(matches!(alone_reply.try_recv().unwrap(), Err(StoreError::Backend { .. })));
    assert_eq!((journal_len(&conn, "bad"), run_rows(&conn, "bad")), (0, 0));
    // And the journal goes on from where it was for the others.
    let (next, next_reply) = append("a", 1, 1);
    commit(&mut conn, vec![next]);
    assert_eq!(next_reply.blocking_recv().unwrap().unwrap(), 2);
}
