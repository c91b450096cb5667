//! The statements of an append's fast path, prepared once per batch of the writer.
//!
//! rusqlite's statement cache finds a statement by hashing its SQL, and hashes it again when
//! the statement goes back to the cache after its use: with three statements per append,
//! that was about a tenth of the writer thread's instructions (callgrind,
//! `bench-driver --store sqlite`). A batch takes each statement from the cache once.

use rusqlite::{CachedStatement, Connection};

/// The `INSERT` of journal rows with these `VALUES`.
macro_rules! insert {
    ($values:literal) => {
        concat!(
            "INSERT OR FAIL INTO journal (run_key, seq, at_ms, schema_version, event) VALUES ",
            $values
        )
    };
}

/// A statement of the fast path.
#[derive(Debug, Clone, Copy)]
pub(super) enum Sql {
    /// [`super::registry::advance`]'s checked update of the run's row, for a run that stays in
    /// its state (most appends): the state is not written, so its index is not touched.
    Advance,
    /// The same, for a run whose state changes (writes it, and so its index entry), and for a
    /// batch that names the run's origin (`?12`) or answer (`?13`).
    AdvanceState,
    /// [`super::registry::advance`]'s read of the run's key and usage.
    RunKey,
    /// An insert of 1 to 4 journal rows (`Insert(n)`, see [`super::writer`]).
    Insert(usize),
}

impl Sql {
    fn slot(self) -> usize {
        match self {
            Self::Advance => 0,
            Self::AdvanceState => 1,
            Self::RunKey => 2,
            Self::Insert(rows) => 2 + rows.clamp(1, INSERT_ROWS),
        }
    }

    fn text(self) -> &'static str {
        match self {
            Self::Advance => {
                "UPDATE OR FAIL runs SET updated_ms = ?4, next_seq = ?5, \
                 input_tokens = input_tokens + ?6, output_tokens = output_tokens + ?7, \
                 cached_input_tokens = cached_input_tokens + ?8, \
                 reasoning_tokens = reasoning_tokens + ?9 \
                 WHERE run_id = ?1 AND next_seq = ?2 AND state = ?3 AND (?10 IS NULL OR EXISTS (\
                   SELECT 1 FROM leases WHERE run_id = ?1 AND owner = ?10 AND epoch = ?11))"
            }
            Self::AdvanceState => {
                "UPDATE OR FAIL runs SET state = ?3, updated_ms = ?4, next_seq = ?5, \
                 input_tokens = input_tokens + ?6, output_tokens = output_tokens + ?7, \
                 cached_input_tokens = cached_input_tokens + ?8, \
                 reasoning_tokens = reasoning_tokens + ?9, \
                 origin_run_id = COALESCE(?12, origin_run_id), \
                 answer_text = CASE WHEN ?13 IS NULL THEN answer_text ELSE NULLIF(?13, '') END \
                 WHERE run_id = ?1 AND next_seq = ?2 AND (?10 IS NULL OR EXISTS (\
                   SELECT 1 FROM leases WHERE run_id = ?1 AND owner = ?10 AND epoch = ?11))"
            }
            Self::RunKey => {
                "SELECT run_key, price, input_tokens, output_tokens, cached_input_tokens, \
                 reasoning_tokens FROM runs WHERE run_id = ?1"
            }
            Self::Insert(rows) => match rows.clamp(1, INSERT_ROWS) {
                1 => insert!("(?, ?, ?, ?, ?)"),
                2 => insert!("(?, ?, ?, ?, ?), (?, ?, ?, ?, ?)"),
                3 => insert!("(?, ?, ?, ?, ?), (?, ?, ?, ?, ?), (?, ?, ?, ?, ?)"),
                _ => insert!("(?, ?, ?, ?, ?), (?, ?, ?, ?, ?), (?, ?, ?, ?, ?), (?, ?, ?, ?, ?)"),
            },
        }
    }
}

/// Journal rows one insert writes at most.
pub(super) const INSERT_ROWS: usize = 4;

/// The fast path's statements on one connection (or transaction, or savepoint), each taken
/// from the connection's cache on first use and given back when this is dropped.
pub(super) struct Statements<'c> {
    conn: &'c Connection,
    slots: [Option<CachedStatement<'c>>; 3 + INSERT_ROWS],
}

impl<'c> Statements<'c> {
    pub(super) fn new(conn: &'c Connection) -> Self {
        Self { conn, slots: Default::default() }
    }

    /// The connection, for the statements of the other paths.
    pub(super) fn conn(&self) -> &'c Connection {
        self.conn
    }

    /// Statement `sql`, prepared on first use.
    pub(super) fn get(&mut self, sql: Sql) -> rusqlite::Result<&mut CachedStatement<'c>> {
        let slot = self.slots.get_mut(sql.slot()).ok_or(rusqlite::Error::InvalidQuery)?;
        if slot.is_none() {
            *slot = Some(self.conn.prepare_cached(sql.text())?);
        }
        slot.as_mut().ok_or(rusqlite::Error::InvalidQuery)
    }
}
