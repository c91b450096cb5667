#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::{migrate, MIGRATIONS};
use rusqlite::{params, Connection};

/// The load query of the current schema.
const LOAD: &str = "SELECT seq, at_ms, event FROM journal \
    WHERE run_key = (SELECT run_key FROM runs WHERE run_id = ?1) AND seq >= ?2 ORDER BY seq";

/// A run's entries as (seq, at_ms, event), through [`LOAD`].
fn entries(conn: &Connection, run_id: &str) -> Vec<(i64, i64, String)> {
    let mut select = conn.prepare(LOAD).unwrap();
    let rows = select.query_map(params![run_id, 0], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)));
    rows.unwrap().collect::<Result<_, _>>().unwrap()
}

/// A file journaled before the journal was ordered by append (schema 4, a `WITHOUT ROWID`
/// table keyed by run and seq), whose journals have no run rows: migrating moves every entry
/// into the table ordered by append, each run's entries in order, gives each run a row (not
/// losing its journal), the load query reads them through the run's index, and a run's seq
/// stays unique.
#[test]
fn the_journal_of_an_older_file_moves_to_the_table_ordered_by_append() {
    let mut conn = Connection::open_in_memory().unwrap();
    conn.execute_batch("CREATE TABLE agentloop_schema (version INTEGER NOT NULL)").unwrap();
    conn.execute("INSERT INTO agentloop_schema (version) VALUES (4)", []).unwrap();
    for migration in &MIGRATIONS[..4] {
        conn.execute_batch(migration).unwrap();
    }
    // Interleaved, as concurrent runs append.
    for seq in 0..3i64 {
        for run_id in ["b", "a"] {
            conn.execute(
                "INSERT INTO journal (run_id, seq, at_ms, schema_version, event) \
                 VALUES (?1, ?2, ?3, 1, ?4)",
                params![run_id, seq, 100 + seq, format!("{{\"run\":\"{run_id}\",\"seq\":{seq}}}")],
            )
            .unwrap();
        }
    }
    migrate(&mut conn).unwrap();
    let version: i64 =
        conn.query_row("SELECT version FROM agentloop_schema", [], |r| r.get(0)).unwrap();
    assert_eq!(version, i64::try_from(MIGRATIONS.len()).unwrap());
    for run_id in ["a", "b"] {
        let expected: Vec<(i64, i64, String)> = (0..3)
            .map(|seq| (seq, 100 + seq, format!("{{\"run\":\"{run_id}\",\"seq\":{seq}}}")))
            .collect();
        assert_eq!(entries(&conn, run_id), expected, "run {run_id}");
        let row: (String, i64, i64, i64) = conn
            .query_row(
                "SELECT state, created_ms, updated_ms, next_seq FROM runs WHERE run_id = ?1",
                [run_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap();
        assert_eq!(row, ("running".into(), 100, 102, 3), "run {run_id}");
    }
    let plan: String = conn
        .query_row(&format!("EXPLAIN QUERY PLAN {LOAD}"), params!["a", 0], |r| r.get(3))
        .unwrap();
    assert!(plan.contains("journal_by_run"), "{plan}");
    let key_of_a: i64 =
        conn.query_row("SELECT run_key FROM runs WHERE run_id = 'a'", [], |r| r.get(0)).unwrap();
    let insert = "INSERT INTO journal (run_key, seq, at_ms, schema_version, event) \
                  VALUES (?1, ?2, 0, 1, '{}')";
    assert!(conn.execute(insert, params![key_of_a, 1]).is_err(), "a run's seq is unique");
    // New entries go to the end of the table, whatever their run.
    conn.execute(insert, params![key_of_a, 3]).unwrap();
    let last: (i64, i64) = conn
        .query_row("SELECT run_key, seq FROM journal ORDER BY rowid DESC", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(last, (key_of_a, 3));
}

/// A file of schema 6 (the journal naming runs by their id's text) moves to run keys: each
/// run keeps its row, every column of it and its rowid as its key; its journal follows it;
/// the store opened on the migrated file loads the journals, lists the runs, appends on,
/// and deletes a run with its journal.
#[tokio::test]
async fn runs_of_an_older_file_get_keys_their_journals_follow() {
    use crate::event::Event;
    use crate::store::{to_json, RunFilter, RunStore};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let started = |run_id: &str| Event::RunStarted {
        run_id: run_id.into(),
        config: Box::default(),
        input: vec![crate::message::Message::user(format!("task of {run_id}"))],
    };
    {
        let mut conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE agentloop_schema (version INTEGER NOT NULL)").unwrap();
        conn.execute("INSERT INTO agentloop_schema (version) VALUES (6)", []).unwrap();
        let tx = conn.transaction().unwrap();
        for migration in &MIGRATIONS[..6] {
            tx.execute_batch(migration).unwrap();
        }
        // Three runs; the first one deleted, so that rowids have a gap.
        for (n, run_id) in ["gone", "first", "second"].into_iter().enumerate() {
            let n = i64::try_from(n).unwrap();
            tx.execute(
                "INSERT INTO runs (run_id, agent, context_id, state, created_ms, updated_ms, \
                 next_seq, parent_run_id, input_tokens, cost_usd) \
                 VALUES (?1, 'helper', 'ctx', 'finished', ?2, ?3, 2, 'parent', 7, 0.5)",
                params![run_id, 10 * n, 10 * n + 1],
            )
            .unwrap();
            for seq in 0..2i64 {
                let event = if seq == 0 { started(run_id) } else { Event::Resumed };
                tx.execute(
                    "INSERT INTO journal (run_id, seq, at_ms, schema_version, event) \
                     VALUES (?1, ?2, ?3, 1, ?4)",
                    params![run_id, seq, 10 * n + seq, to_json(&event).unwrap()],
                )
                .unwrap();
            }
        }
        tx.execute("DELETE FROM journal WHERE run_id = 'gone'", []).unwrap();
        tx.execute("DELETE FROM runs WHERE run_id = 'gone'", []).unwrap();
        tx.commit().unwrap();
    }
    let store = super::super::SqliteStore::open(&path).unwrap();
    assert_eq!(store.schema_version().await.unwrap(), u32::try_from(MIGRATIONS.len()).unwrap());
    for run_id in ["first", "second"] {
        let journal = store.load(run_id).await.unwrap();
        assert_eq!(journal.len(), 2, "run {run_id}");
        assert_eq!(journal[0].event, started(run_id));
        assert_eq!(journal[1].event, Event::Resumed);
    }
    let runs = store.list_runs(&RunFilter::all()).await.unwrap();
    let ids: Vec<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, ["second", "first"]);
    for run in &runs {
        assert_eq!(run.agent.as_deref(), Some("helper"));
        assert_eq!(run.context_id.as_deref(), Some("ctx"));
        assert_eq!(run.parent_run_id.as_deref(), Some("parent"));
        assert_eq!((run.entries, run.usage.input, run.cost_usd), (2, 7, 0.5));
    }
    RunStore::append(&store, "second", 2, &[Event::Resumed]).await.unwrap();
    assert_eq!(store.load("second").await.unwrap().len(), 3);
    assert!(store.delete_run("first").await.unwrap());
    assert!(store.load("first").await.unwrap().is_empty());
    assert_eq!(store.load("second").await.unwrap().len(), 3);
    drop(store);
    let conn = Connection::open(&path).unwrap();
    let keys: Vec<(String, i64)> = conn
        .prepare("SELECT run_id, run_key FROM runs ORDER BY run_key")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(keys, [("second".to_owned(), 3)], "the key is the old rowid");
    let left: i64 = conn.query_row("SELECT COUNT(*) FROM journal", [], |r| r.get(0)).unwrap();
    assert_eq!(left, 3, "the deleted run's journal went with it");
}

/// A file whose artifact chunks are in a `WITHOUT ROWID` table (schema 5): migrating keeps
/// every chunk, in order, read through the new index; an artifact's chunk index stays unique.
#[test]
fn artifact_chunks_of_an_older_file_move_to_a_rowid_table() {
    let mut conn = Connection::open_in_memory().unwrap();
    conn.execute_batch("CREATE TABLE agentloop_schema (version INTEGER NOT NULL)").unwrap();
    conn.execute("INSERT INTO agentloop_schema (version) VALUES (5)", []).unwrap();
    for migration in &MIGRATIONS[..5] {
        conn.execute_batch(migration).unwrap();
    }
    let big = vec![7u8; 20_000];
    for (id, idx, data) in [("b", 0, &big[..]), ("a", 1, b"two"), ("a", 0, b"one")] {
        conn.execute(
            "INSERT INTO artifact_chunks (artifact_id, idx, data) VALUES (?1, ?2, ?3)",
            params![id, idx, data],
        )
        .unwrap();
    }
    migrate(&mut conn).unwrap();
    let read = "SELECT data FROM artifact_chunks WHERE artifact_id = ?1 ORDER BY idx";
    let chunks = |id: &str| -> Vec<Vec<u8>> {
        let mut select = conn.prepare(read).unwrap();
        let rows = select.query_map([id], |r| r.get(0)).unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    };
    assert_eq!(chunks("a"), [b"one".to_vec(), b"two".to_vec()]);
    assert_eq!(chunks("b"), [big]);
    let plan: String =
        conn.query_row(&format!("EXPLAIN QUERY PLAN {read}"), ["a"], |r| r.get(3)).unwrap();
    assert!(plan.contains("artifact_chunks_by_id"), "{plan}");
    let duplicate = conn
        .execute("INSERT INTO artifact_chunks (artifact_id, idx, data) VALUES ('a', 1, x'00')", []);
    assert!(duplicate.is_err(), "an artifact's chunk index is unique");
}

/// A file journaled before the registry kept texts (schema 7): migrating gives each run its
/// origin, input and answer from its journal, and a listing by state reads its index.
#[test]
fn the_registry_texts_of_an_older_file_come_from_its_journals() {
    use crate::event::Event;
    use crate::message::Message;
    use crate::terms::{Outcome, StopReason};
    let mut conn = Connection::open_in_memory().unwrap();
    conn.execute_batch("CREATE TABLE agentloop_schema (version INTEGER NOT NULL)").unwrap();
    conn.execute("INSERT INTO agentloop_schema (version) VALUES (7)", []).unwrap();
    for migration in &MIGRATIONS[..7] {
        conn.execute_batch(migration).unwrap();
    }
    let started = Event::RunStarted {
        run_id: "f".into(),
        config: Box::default(),
        input: vec![Message::user("first"), Message::assistant("ok"), Message::user("Why?")],
    };
    let forked = Event::RunForked { origin_run_id: "o".into(), at_seq: 0, edit: None };
    let finished = |answer: &str| Event::RunFinished {
        outcome: Box::new(Outcome::new("f", answer, StopReason::Completed)),
    };
    let journal = [started, forked, finished("Because."), finished("Because, again.")];
    conn.execute(
        "INSERT INTO runs (run_key, run_id, state, created_ms, updated_ms, next_seq) \
         VALUES (1, 'f', 'finished', 1, 2, 4), (2, 'bare', 'running', 1, 1, 0)",
        [],
    )
    .unwrap();
    for (seq, event) in journal.iter().enumerate() {
        conn.execute(
            "INSERT INTO journal (run_key, seq, at_ms, schema_version, event) \
             VALUES (1, ?1, 1, 1, ?2)",
            params![i64::try_from(seq).unwrap(), serde_json::to_string(event).unwrap()],
        )
        .unwrap();
    }
    migrate(&mut conn).unwrap();
    let texts = |run_id: &str| -> (Option<String>, Option<String>, Option<String>) {
        conn.query_row(
            "SELECT origin_run_id, input_text, answer_text FROM runs WHERE run_id = ?1",
            [run_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
    };
    let expected = (Some("o".into()), Some("Why?".into()), Some("Because, again.".into()));
    assert_eq!(texts("f"), expected);
    assert_eq!(texts("bare"), (None, None, None));
    let plan: String = conn
        .query_row(
            "EXPLAIN QUERY PLAN SELECT run_id FROM runs WHERE state = ?1 \
             ORDER BY created_ms DESC, run_id DESC LIMIT 5",
            ["failed"],
            |r| r.get(3),
        )
        .unwrap();
    assert!(plan.contains("runs_by_state"), "{plan}");
}
