#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::{migrate, MIGRATIONS};
use rusqlite::{params, Connection};

/// A file journaled before the journal was ordered by append (schema 4, a `WITHOUT ROWID`
/// table keyed by run and seq): migrating moves every entry into the new table, each run's
/// entries in order, the load query reads them through the run's index, and a run's seq
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
    let load = "SELECT seq, at_ms, event FROM journal WHERE run_id = ?1 AND seq >= ?2 ORDER BY seq";
    for run_id in ["a", "b"] {
        let mut select = conn.prepare(load).unwrap();
        let rows: Vec<(i64, i64, String)> = select
            .query_map(params![run_id, 0], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let expected: Vec<(i64, i64, String)> = (0..3)
            .map(|seq| (seq, 100 + seq, format!("{{\"run\":\"{run_id}\",\"seq\":{seq}}}")))
            .collect();
        assert_eq!(rows, expected, "run {run_id}");
    }
    let plan: String = conn
        .query_row(&format!("EXPLAIN QUERY PLAN {load}"), params!["a", 0], |r| r.get(3))
        .unwrap();
    assert!(plan.contains("journal_by_run"), "{plan}");
    let duplicate = conn.execute(
        "INSERT INTO journal (run_id, seq, at_ms, schema_version, event) \
         VALUES ('a', 1, 0, 1, '{}')",
        [],
    );
    assert!(duplicate.is_err(), "a run's seq is unique");
    // New entries go to the end of the table, whatever their run.
    conn.execute(
        "INSERT INTO journal (run_id, seq, at_ms, schema_version, event) \
         VALUES ('a', 3, 0, 1, '{}')",
        [],
    )
    .unwrap();
    let last: String = conn
        .query_row("SELECT run_id || seq FROM journal ORDER BY rowid DESC", [], |r| r.get(0))
        .unwrap();
    assert_eq!(last, "a3");
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
