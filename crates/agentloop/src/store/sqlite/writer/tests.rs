#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::super::schema::migrate;
use super::super::Rows;
use super::*;
use crate::event::Event;
use crate::message::Message;
use crate::run::RunConfig;
use crate::store::JournalEntry;
use tokio::sync::oneshot;

type Reply = oneshot::Receiver<Answer>;

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
    let rows = Rows::encode(&entries).unwrap();
    let (reply, answer) = oneshot::channel();
    let update = SummaryUpdate::of(&entries).unwrap();
    (
        Append {
            run_id: run_id.into(),
            expected_seq,
            rows,
            artifacts: Vec::new(),
            update,
            fence: None,
            reply,
            courier: None,
            queued: std::time::Instant::now(),
        },
        answer,
    )
}

fn journal_len(conn: &Connection, run_id: &str) -> i64 {
    conn.query_row(
        "SELECT COUNT(*) FROM journal JOIN runs USING (run_key) WHERE run_id = ?1",
        [run_id],
        |r| r.get(0),
    )
    .unwrap()
}

fn run_rows(conn: &Connection, run_id: &str) -> i64 {
    conn.query_row("SELECT COUNT(*) FROM runs WHERE run_id = ?1", [run_id], |r| r.get(0)).unwrap()
}

/// The appends as the writer's ops.
fn ops(appends: Vec<Append>) -> Vec<Op> {
    appends.into_iter().map(|append| Op::Append(Box::new(append))).collect()
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
    let counters = WriteCounters::default();
    let (first, first_reply) = append("a", 0, 2);
    let (stale, mut stale_reply) = append("stale", 3, 1);
    let (second, second_reply) = append("b", 0, 1);
    commit(&mut conn, ops(vec![first, stale, second]), &counters);
    assert_eq!(first_reply.blocking_recv().unwrap().result.unwrap(), 2);
    assert_eq!(second_reply.blocking_recv().unwrap().result.unwrap(), 1);
    match stale_reply.try_recv().unwrap().result {
        Err(StoreError::Conflict { expected: 3, actual: 0, .. }) => {}
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!((journal_len(&conn, "a"), journal_len(&conn, "b")), (2, 1));
    assert_eq!((journal_len(&conn, "stale"), run_rows(&conn, "stale")), (0, 0));
    // One transaction made the two committed appends durable; the refused one is not counted.
    let stats = counters.snapshot();
    assert_eq!((stats.commits, stats.appends, stats.entries), (1, 2, 3));
}

/// A statement that fails after an append's checks passed (here a trigger refuses its second
/// row, after its first was written) undoes that append only: the batch is written again
/// with savepoints, the others commit, and the failed append left no row and no run.
#[test]
fn a_statement_failing_midway_undoes_only_its_own_append() {
    let mut conn = database();
    conn.execute_batch(
        "CREATE TRIGGER refuse BEFORE INSERT ON journal \
         WHEN NEW.seq = 1 AND NEW.run_key = (SELECT run_key FROM runs WHERE run_id = 'bad') \
         BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
    )
    .unwrap();
    let counters = WriteCounters::default();
    let (before, before_reply) = append("a", 0, 1);
    let (bad, mut bad_reply) = append("bad", 0, 2);
    let (after, after_reply) = append("b", 0, 3);
    commit(&mut conn, ops(vec![before, bad, after]), &counters);
    assert_eq!(before_reply.blocking_recv().unwrap().result.unwrap(), 1);
    assert_eq!(after_reply.blocking_recv().unwrap().result.unwrap(), 3);
    match bad_reply.try_recv().unwrap().result {
        Err(StoreError::Backend { message, .. }) => assert!(message.contains("disk full")),
        other => panic!("expected the trigger's error, got {other:?}"),
    }
    assert_eq!((journal_len(&conn, "a"), journal_len(&conn, "b")), (1, 3));
    assert_eq!((journal_len(&conn, "bad"), run_rows(&conn, "bad")), (0, 0));

    // Alone, the failed append is the whole transaction: nothing of it is written either.
    let (alone, mut alone_reply) = append("bad", 0, 2);
    commit(&mut conn, ops(vec![alone]), &counters);
    assert!(matches!(alone_reply.try_recv().unwrap().result, Err(StoreError::Backend { .. })));
    assert_eq!((journal_len(&conn, "bad"), run_rows(&conn, "bad")), (0, 0));
    // And the journal goes on from where it was for the others.
    let (next, next_reply) = append("a", 1, 1);
    commit(&mut conn, ops(vec![next]), &counters);
    assert_eq!(next_reply.blocking_recv().unwrap().result.unwrap(), 2);
    // The retried batch (one commit of two appends) and the last append; not the failed ones.
    let stats = counters.snapshot();
    assert_eq!((stats.commits, stats.appends, stats.entries), (2, 3, 5));
}

/// A run's later appends take the one-statement path (`registry::advance`): a stale sequence
/// or a fenced-off lease is refused with the same errors as on the first append and writes
/// nothing; the usage adds up and the cost follows the stored price.
#[test]
fn later_appends_check_and_write_the_run_in_one_statement() {
    let mut conn = database();
    let counters = WriteCounters::default();
    let (first, first_reply) = append("r", 0, 1);
    commit(&mut conn, ops(vec![first]), &counters);
    assert_eq!(first_reply.blocking_recv().unwrap().result.unwrap(), 1);
    let price = r#"{"input_per_mtok":1000000,"output_per_mtok":0}"#;
    conn.execute("UPDATE runs SET price = ?1 WHERE run_id = 'r'", [price]).unwrap();
    conn.execute("INSERT INTO leases VALUES ('r', 'me', 2, 0)", []).unwrap();
    let lease = |epoch| Lease { run_id: "r".into(), owner: "me".into(), epoch, expires_at_ms: 0 };
    let used = |mut append: Append, input| {
        append.update.usage.input = input;
        append
    };

    let (stale, mut stale_reply) = append("r", 0, 1);
    let (mut fenced_off, mut fenced_off_reply) = append("r", 1, 1);
    fenced_off.fence = Some(lease(1));
    let (mut held, held_reply) = append("r", 1, 2);
    held.fence = Some(lease(2));
    let (unfenced, unfenced_reply) = append("r", 3, 1);
    let batch = vec![stale, used(fenced_off, 50), used(held, 7), used(unfenced, 5)];
    commit(&mut conn, ops(batch), &counters);
    assert!(matches!(
        stale_reply.try_recv().unwrap().result,
        Err(StoreError::Conflict { expected: 0, actual: 1, .. })
    ));
    assert!(matches!(
        fenced_off_reply.try_recv().unwrap().result,
        Err(StoreError::LeaseLost { .. })
    ));
    assert_eq!(held_reply.blocking_recv().unwrap().result.unwrap(), 3);
    assert_eq!(unfenced_reply.blocking_recv().unwrap().result.unwrap(), 4);
    assert_eq!(journal_len(&conn, "r"), 4);
    let (next_seq, input, cost): (i64, i64, f64) = conn
        .query_row(
            "SELECT next_seq, input_tokens, cost_usd FROM runs WHERE run_id = 'r'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((next_seq, input), (4, 12), "the refused appends' usage is not counted");
    assert!((cost - 12.0).abs() < 1e-9, "12 input tokens at $1 each: {cost}");
    let stats = counters.snapshot();
    assert_eq!((stats.commits, stats.appends, stats.entries), (2, 3, 4));
}

/// Claims and releases share the batch's transaction with the appends: a refused claim writes
/// nothing and the rest commits; a release of a lease that is no longer the run's changes
/// nothing; when a statement fails midway, the retried batch keeps the claims.
#[test]
fn claims_and_releases_commit_with_the_appends() {
    let mut conn = database();
    conn.execute("INSERT INTO leases VALUES ('taken', 'other', 1, 9999999999999)", []).unwrap();
    let counters = WriteCounters::default();
    let claim = |run_id: &str| {
        let (reply, answer) = oneshot::channel();
        let claim = Claim {
            run_id: run_id.into(),
            owner: "me".into(),
            ttl: Duration::from_secs(60),
            reply,
            courier: None,
        };
        (Op::Claim(Box::new(claim)), answer)
    };
    let (mine, mut mine_reply) = claim("a");
    let (taken, mut taken_reply) = claim("taken");
    let (first, first_reply) = append("a", 0, 2);
    let mut batch = vec![mine, taken];
    batch.extend(ops(vec![first]));
    commit(&mut conn, batch, &counters);
    let lease = mine_reply.try_recv().unwrap().unwrap();
    assert_eq!((lease.run_id.as_str(), lease.owner.as_str(), lease.epoch), ("a", "me", 1));
    assert!(matches!(taken_reply.try_recv().unwrap(), Err(StoreError::LeaseHeld { .. })));
    assert_eq!(first_reply.blocking_recv().unwrap().result.unwrap(), 2);
    let owner = |conn: &Connection, run_id: &str| -> (String, i64) {
        conn.query_row("SELECT owner, epoch FROM leases WHERE run_id = ?1", [run_id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap()
    };
    assert_eq!(owner(&conn, "taken"), ("other".to_owned(), 1));
    assert_eq!(commits(&counters), 1);

    // A stale release changes nothing; the lease's own release frees it; a claim in a batch
    // that a failing statement makes write again is kept.
    conn.execute_batch(
        "CREATE TRIGGER refuse BEFORE INSERT ON journal \
         WHEN NEW.run_key = (SELECT run_key FROM runs WHERE run_id = 'bad') \
         BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
    )
    .unwrap();
    let release = |lease: Lease| {
        let (reply, answer) = oneshot::channel();
        (Op::Release(Box::new(Release { lease, reply, courier: None })), answer)
    };
    let stale = Lease { epoch: 0, ..lease.clone() };
    let (stale, mut stale_reply) = release(stale);
    let (own, mut own_reply) = release(lease);
    let (again, mut again_reply) = claim("b");
    let (bad, mut bad_reply) = append("bad", 0, 1);
    let mut batch = vec![stale, own, again];
    batch.extend(ops(vec![bad]));
    commit(&mut conn, batch, &counters);
    stale_reply.try_recv().unwrap().unwrap();
    own_reply.try_recv().unwrap().unwrap();
    assert_eq!(again_reply.try_recv().unwrap().unwrap().epoch, 1);
    assert!(matches!(bad_reply.try_recv().unwrap().result, Err(StoreError::Backend { .. })));
    assert_eq!(owner(&conn, "a"), (String::new(), 1));
    assert_eq!(owner(&conn, "b"), ("me".to_owned(), 1));
    assert_eq!(commits(&counters), 1, "the counters count transactions that committed appends");
}

fn commits(counters: &WriteCounters) -> u64 {
    counters.snapshot().commits
}

/// Rows go in several per statement (`INSERT OR FAIL`): appends of any size keep every row in
/// order, and a row refused after others of its statement were written (a trigger's
/// `RAISE(FAIL)`, which keeps them) still leaves nothing of its append, while the rest of the
/// batch commits.
#[test]
fn an_append_s_rows_go_in_whole_or_not_at_all() {
    let mut conn = database();
    let counters = WriteCounters::default();
    conn.execute_batch(
        "CREATE TRIGGER refuse BEFORE INSERT ON journal \
         WHEN NEW.seq = 2 AND NEW.run_key = (SELECT run_key FROM runs WHERE run_id = 'half') \
         BEGIN SELECT RAISE(FAIL, 'disk full'); END;",
    )
    .unwrap();
    let mut batch = Vec::new();
    let mut replies = Vec::new();
    for (i, entries) in [1u64, 2, 3, 4, 5, 9].into_iter().enumerate() {
        let run_id = format!("r{i}");
        let (append, reply) = append(&run_id, 0, entries);
        batch.push(append);
        replies.push((run_id, entries, reply));
    }
    let (half, mut half_reply) = append("half", 0, 4);
    batch.insert(3, half);
    commit(&mut conn, ops(batch), &counters);
    assert!(matches!(half_reply.try_recv().unwrap().result, Err(StoreError::Backend { .. })));
    assert_eq!((journal_len(&conn, "half"), run_rows(&conn, "half")), (0, 0));
    for (run_id, entries, reply) in replies {
        assert_eq!(reply.blocking_recv().unwrap().result.unwrap(), entries);
        let seqs: Vec<i64> = conn
            .prepare(
                "SELECT seq FROM journal JOIN runs USING (run_key) WHERE run_id = ?1 \
                 ORDER BY journal.rowid",
            )
            .unwrap()
            .query_map([&run_id], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(seqs, (0..i64::try_from(entries).unwrap()).collect::<Vec<_>>(), "{run_id}");
    }
}
