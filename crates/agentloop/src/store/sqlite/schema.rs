//! The SQLite store's schema: its migrations, in order, and how a file is brought up to date
//! (one transaction; the version table records how many were applied).

use super::{backend, registry};
use crate::store::StoreError;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

/// The schema migrations, in order; the version table records how many were applied.
pub(super) const MIGRATIONS: &[&str] = &[
    r"
CREATE TABLE runs (
    run_id     TEXT PRIMARY KEY,
    agent      TEXT,
    context_id TEXT,
    state      TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    next_seq   INTEGER NOT NULL
);
CREATE INDEX runs_by_created ON runs (created_ms);
CREATE INDEX runs_by_agent ON runs (agent, created_ms);
CREATE INDEX runs_by_context ON runs (context_id, created_ms);
CREATE TABLE journal (
    run_id         TEXT NOT NULL,
    seq            INTEGER NOT NULL,
    at_ms          INTEGER NOT NULL,
    schema_version INTEGER NOT NULL,
    event          TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE sessions (
    context_id TEXT PRIMARY KEY,
    state      TEXT NOT NULL,
    run_id     TEXT,
    turns      INTEGER NOT NULL,
    messages   INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE TABLE session_messages (
    context_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    message    TEXT NOT NULL,
    PRIMARY KEY (context_id, seq)
) WITHOUT ROWID;
CREATE TABLE artifacts (
    artifact_id TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL,
    name        TEXT NOT NULL,
    media_type  TEXT NOT NULL,
    size        INTEGER NOT NULL,
    chunks      INTEGER NOT NULL,
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL
);
CREATE INDEX artifacts_by_run ON artifacts (run_id, created_ms);
CREATE TABLE artifact_chunks (
    artifact_id TEXT NOT NULL,
    idx         INTEGER NOT NULL,
    data        BLOB NOT NULL,
    PRIMARY KEY (artifact_id, idx)
) WITHOUT ROWID;
",
    r"
CREATE TABLE leases (
    run_id        TEXT PRIMARY KEY,
    owner         TEXT NOT NULL,
    epoch         INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX runs_by_created_id ON runs (created_ms, run_id);
CREATE TABLE run_controls (
    run_id TEXT PRIMARY KEY,
    cancel TEXT,
    pause  TEXT
) WITHOUT ROWID;
",
    r"
ALTER TABLE run_controls ADD COLUMN decisions TEXT;
ALTER TABLE run_controls ADD COLUMN input TEXT;
",
    registry::MIGRATION,
    // The journal in the order of its appends (a rowid table) with an index per run, instead
    // of a table ordered by run: an append adds to the table's last page, shared by the
    // appends of a transaction, and a small entry to the run's index page; a key comparison
    // never reads an entry's event (a `WITHOUT ROWID` key compared against an entry that
    // overflows its page copied the whole entry).
    r"
CREATE TABLE journal_by_append (
    run_id         TEXT NOT NULL,
    seq            INTEGER NOT NULL,
    at_ms          INTEGER NOT NULL,
    schema_version INTEGER NOT NULL,
    event          TEXT NOT NULL
);
INSERT INTO journal_by_append (run_id, seq, at_ms, schema_version, event)
    SELECT run_id, seq, at_ms, schema_version, event FROM journal ORDER BY run_id, seq;
DROP TABLE journal;
ALTER TABLE journal_by_append RENAME TO journal;
CREATE UNIQUE INDEX journal_by_run ON journal (run_id, seq);
",
    // Artifact chunks likewise (a tool output kept by reference is one chunk of up to
    // megabytes): in a `WITHOUT ROWID` table each key search compared against chunks that
    // overflow their pages, which made reading a run's outputs back twice as slow as parsing
    // them from the journal (`bench-outputs`).
    r"
CREATE TABLE artifact_chunks_by_append (
    artifact_id TEXT NOT NULL,
    idx         INTEGER NOT NULL,
    data        BLOB NOT NULL
);
INSERT INTO artifact_chunks_by_append (artifact_id, idx, data)
    SELECT artifact_id, idx, data FROM artifact_chunks ORDER BY artifact_id, idx;
DROP TABLE artifact_chunks;
ALTER TABLE artifact_chunks_by_append RENAME TO artifact_chunks;
CREATE UNIQUE INDEX artifact_chunks_by_id ON artifact_chunks (artifact_id, idx);
",
    // Runs get a stable integer key, `run_key` (an alias of the rowid: VACUUM keeps it, unlike
    // the implicit rowid of a table without one), and the journal names its run by that key
    // instead of the run id's text. The journal's index entries shrink from the run id's 36+
    // bytes to a few, and an entry's insert no longer compares run ids: inserting an entry
    // costs about 40 % less (docs/PERFORMANCE.md, "sixth step"). A journal without its run's
    // row (none is written so) gets one rather than being lost.
    r"
CREATE TABLE runs_keyed (
    run_key             INTEGER PRIMARY KEY,
    run_id              TEXT NOT NULL UNIQUE,
    agent               TEXT,
    context_id          TEXT,
    state               TEXT NOT NULL,
    created_ms          INTEGER NOT NULL,
    updated_ms          INTEGER NOT NULL,
    next_seq            INTEGER NOT NULL,
    parent_run_id       TEXT,
    price               TEXT,
    input_tokens        INTEGER NOT NULL DEFAULT 0,
    output_tokens       INTEGER NOT NULL DEFAULT 0,
    cached_input_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens    INTEGER NOT NULL DEFAULT 0,
    cost_usd            REAL NOT NULL DEFAULT 0
);
INSERT INTO runs_keyed (run_key, run_id, agent, context_id, state, created_ms, updated_ms,
    next_seq, parent_run_id, price, input_tokens, output_tokens, cached_input_tokens,
    reasoning_tokens, cost_usd)
    SELECT rowid, run_id, agent, context_id, state, created_ms, updated_ms, next_seq,
        parent_run_id, price, input_tokens, output_tokens, cached_input_tokens,
        reasoning_tokens, cost_usd
    FROM runs ORDER BY rowid;
INSERT INTO runs_keyed (run_id, state, created_ms, updated_ms, next_seq)
    SELECT run_id, 'running', MIN(at_ms), MAX(at_ms), MAX(seq) + 1 FROM journal
    WHERE run_id NOT IN (SELECT run_id FROM runs) GROUP BY run_id ORDER BY run_id;
DROP TABLE runs;
ALTER TABLE runs_keyed RENAME TO runs;
CREATE INDEX runs_by_created ON runs (created_ms);
CREATE INDEX runs_by_agent ON runs (agent, created_ms);
CREATE INDEX runs_by_context ON runs (context_id, created_ms);
CREATE INDEX runs_by_created_id ON runs (created_ms, run_id);
CREATE INDEX runs_by_parent ON runs (parent_run_id, created_ms);
CREATE TABLE journal_keyed (
    run_key        INTEGER NOT NULL,
    seq            INTEGER NOT NULL,
    at_ms          INTEGER NOT NULL,
    schema_version INTEGER NOT NULL,
    event          TEXT NOT NULL
);
INSERT INTO journal_keyed (run_key, seq, at_ms, schema_version, event)
    SELECT r.run_key, j.seq, j.at_ms, j.schema_version, j.event
    FROM journal j JOIN runs r ON r.run_id = j.run_id ORDER BY j.rowid;
DROP TABLE journal;
ALTER TABLE journal_keyed RENAME TO journal;
CREATE UNIQUE INDEX journal_by_run ON journal (run_key, seq);
",
    registry::TEXTS_MIGRATION,
];

/// The index in [`MIGRATIONS`] of [`registry::MIGRATION`] (followed by
/// [`registry::backfill_costs`]).
pub(super) const REGISTRY_MIGRATION: usize = 3;

/// The index in [`MIGRATIONS`] of [`registry::TEXTS_MIGRATION`] (followed by
/// [`registry::backfill_inputs`]).
pub(super) const TEXTS_MIGRATION: usize = 7;

/// The schema version of the file (the number of migrations applied).
pub(super) fn current_version(conn: &Connection) -> Result<u32, StoreError> {
    conn.query_row("SELECT version FROM agentloop_schema", [], |row| row.get::<_, u32>(0))
        .map_err(backend)
}

/// Applies the migrations the file lacks, in one transaction.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
    tx.execute_batch("CREATE TABLE IF NOT EXISTS agentloop_schema (version INTEGER NOT NULL)")
        .map_err(backend)?;
    let version: Option<u32> = tx
        .query_row("SELECT version FROM agentloop_schema", [], |row| row.get(0))
        .optional()
        .map_err(backend)?;
    let version = match version {
        Some(version) => version,
        None => {
            tx.execute("INSERT INTO agentloop_schema (version) VALUES (0)", []).map_err(backend)?;
            0
        }
    };
    let known = MIGRATIONS.len();
    let applied = usize::try_from(version).unwrap_or(usize::MAX);
    if applied > known {
        return Err(backend(format!(
            "the database has schema version {version}; this build knows versions up to {known}"
        )));
    }
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(applied) {
        tx.execute_batch(migration).map_err(backend)?;
        if index == REGISTRY_MIGRATION {
            registry::backfill_costs(&tx)?;
        }
        if index == TEXTS_MIGRATION {
            registry::backfill_inputs(&tx)?;
        }
    }
    tx.execute(
        "UPDATE agentloop_schema SET version = ?1",
        [i64::try_from(known).unwrap_or(i64::MAX)],
    )
    .map_err(backend)?;
    tx.commit().map_err(backend)
}

#[cfg(test)]
mod tests;
