//! Push configs in SQLite: tables of their own, `a2a_push_configs` and (the delivery leases)
//! `a2a_push_leases`, in a file of the operator's choice — the run store's file is a fine
//! choice (WAL mode; a busy timeout waits for the run store's writer), so one file holds the
//! tasks and their webhooks. Opening a file made before the leases adds their table. Lease
//! expiries are this machine's clock (servers sharing a SQLite file share a machine).

use super::store::{Cursor, PushRecord, PushStore, PushStoreError};
use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentloop::store::now_ms;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS a2a_push_configs (
    task_id    TEXT NOT NULL,
    id         TEXT NOT NULL,
    agent      TEXT NOT NULL,
    config     TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    next_seq   INTEGER,
    done       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (task_id, id)
);
CREATE INDEX IF NOT EXISTS a2a_push_configs_pending ON a2a_push_configs (done, created_ms);
CREATE TABLE IF NOT EXISTS a2a_push_leases (
    task_id    TEXT NOT NULL,
    id         TEXT NOT NULL,
    owner      TEXT NOT NULL,
    expires_ms INTEGER NOT NULL,
    PRIMARY KEY (task_id, id)
);
";

/// Takes a config's lease (?3 owner, ?4 now, ?5 expiry) when the config is there and the
/// lease is free, expired or the owner's.
const CLAIM: &str = "
INSERT INTO a2a_push_leases (task_id, id, owner, expires_ms)
SELECT ?1, ?2, ?3, ?5
WHERE EXISTS (SELECT 1 FROM a2a_push_configs WHERE task_id = ?1 AND id = ?2)
ON CONFLICT (task_id, id) DO UPDATE SET owner = excluded.owner, expires_ms = excluded.expires_ms
WHERE a2a_push_leases.owner = excluded.owner OR a2a_push_leases.expires_ms <= ?4
";

fn backend(error: impl std::fmt::Display) -> PushStoreError {
    PushStoreError::Backend { backend: "sqlite", message: error.to_string() }
}

/// Push configs in a SQLite file (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct SqlitePushStore {
    conn: Arc<Mutex<Connection>>,
}

impl SqlitePushStore {
    /// Opens (creating if needed) `path` and its table.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PushStoreError> {
        let conn = Connection::open(path).map_err(backend)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(backend)?;
        conn.execute_batch("PRAGMA journal_mode = WAL;").map_err(backend)?;
        conn.execute_batch(SCHEMA).map_err(backend)?;
        Ok(Self { conn: Arc::new(Mutex::new(conn)) })
    }

    async fn call<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Connection) -> Result<T, PushStoreError> + Send + 'static,
    ) -> Result<T, PushStoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
            job(&conn)
        })
        .await
        .map_err(backend)?
    }
}

type Row = (String, String, u64, Option<i64>, bool);

fn read_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((row.get(0)?, row.get(1)?, row.get::<_, i64>(2)?.max(0) as u64, row.get(3)?, row.get(4)?))
}

fn record((agent, config, created_ms, next_seq, done): Row) -> Result<PushRecord, PushStoreError> {
    let config =
        serde_json::from_str(&config).map_err(|e| PushStoreError::Corrupt(e.to_string()))?;
    let next_seq = next_seq.map(|n| n.max(0) as u64);
    Ok(PushRecord { agent, config, created_ms, cursor: Cursor { next_seq, done } })
}

const COLUMNS: &str = "agent, config, created_ms, next_seq, done";

fn seq(n: Option<u64>) -> Option<i64> {
    n.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

fn ms(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Now and `ttl` from now, in ms since the epoch.
fn now_and_expiry(ttl: Duration) -> (i64, i64) {
    let now = now_ms();
    let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    (ms(now), ms(now.saturating_add(ttl)))
}

const DROP_LEASE: &str = "DELETE FROM a2a_push_leases WHERE task_id = ?1 AND id = ?2";

#[async_trait]
impl PushStore for SqlitePushStore {
    async fn put(&self, record: &PushRecord) -> Result<(), PushStoreError> {
        let config = serde_json::to_string(&record.config).map_err(backend)?;
        let record = record.clone();
        self.call(move |conn| {
            let tx = conn.unchecked_transaction().map_err(backend)?;
            tx.execute(
                "INSERT OR REPLACE INTO a2a_push_configs
                 (task_id, id, agent, config, created_ms, next_seq, done)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    record.task_id(),
                    record.id(),
                    record.agent,
                    config,
                    ms(record.created_ms),
                    seq(record.cursor.next_seq),
                    record.cursor.done,
                ],
            )
            .map_err(backend)?;
            tx.execute(DROP_LEASE, params![record.task_id(), record.id()]).map_err(backend)?;
            tx.commit().map_err(backend)
        })
        .await
    }

    async fn get(&self, task_id: &str, id: &str) -> Result<Option<PushRecord>, PushStoreError> {
        let (task_id, id) = (task_id.to_owned(), id.to_owned());
        let row = self
            .call(move |conn| {
                conn.query_row(
                    &format!(
                        "SELECT {COLUMNS} FROM a2a_push_configs WHERE task_id = ?1 AND id = ?2"
                    ),
                    params![task_id, id],
                    read_row,
                )
                .optional()
                .map_err(backend)
            })
            .await?;
        row.map(record).transpose()
    }

    async fn list(&self, task_id: &str) -> Result<Vec<PushRecord>, PushStoreError> {
        let task_id = task_id.to_owned();
        let rows = self
            .call(move |conn| {
                let mut statement = conn
                    .prepare(&format!(
                        "SELECT {COLUMNS} FROM a2a_push_configs WHERE task_id = ?1
                         ORDER BY created_ms, id"
                    ))
                    .map_err(backend)?;
                let rows = statement
                    .query_map(params![task_id], read_row)
                    .map_err(backend)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(backend)?;
                Ok(rows)
            })
            .await?;
        rows.into_iter().map(record).collect()
    }

    async fn delete(&self, task_id: &str, id: &str) -> Result<bool, PushStoreError> {
        let (task_id, id) = (task_id.to_owned(), id.to_owned());
        self.call(move |conn| {
            let tx = conn.unchecked_transaction().map_err(backend)?;
            let n = tx
                .execute(
                    "DELETE FROM a2a_push_configs WHERE task_id = ?1 AND id = ?2",
                    params![task_id, id],
                )
                .map_err(backend)?;
            tx.execute(DROP_LEASE, params![task_id, id]).map_err(backend)?;
            tx.commit().map_err(backend)?;
            Ok(n > 0)
        })
        .await
    }

    async fn advance(&self, task_id: &str, id: &str, cursor: Cursor) -> Result<(), PushStoreError> {
        let (task_id, id) = (task_id.to_owned(), id.to_owned());
        self.call(move |conn| {
            conn.execute(
                "UPDATE a2a_push_configs SET next_seq = ?3, done = ?4
                 WHERE task_id = ?1 AND id = ?2",
                params![task_id, id, seq(cursor.next_seq), cursor.done],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn pending(&self) -> Result<Vec<PushRecord>, PushStoreError> {
        let rows = self
            .call(move |conn| {
                let mut statement = conn
                    .prepare(&format!(
                        "SELECT {COLUMNS} FROM a2a_push_configs WHERE done = 0
                         ORDER BY created_ms, task_id, id"
                    ))
                    .map_err(backend)?;
                let rows = statement
                    .query_map([], read_row)
                    .map_err(backend)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(backend)?;
                Ok(rows)
            })
            .await?;
        rows.into_iter().map(record).collect()
    }

    async fn claim(
        &self,
        task_id: &str,
        id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, PushStoreError> {
        let (task_id, id, owner) = (task_id.to_owned(), id.to_owned(), owner.to_owned());
        let (now, expires) = now_and_expiry(ttl);
        self.call(move |conn| {
            let n =
                conn.execute(CLAIM, params![task_id, id, owner, now, expires]).map_err(backend)?;
            Ok(n > 0)
        })
        .await
    }

    async fn renew(
        &self,
        task_id: &str,
        id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, PushStoreError> {
        let (task_id, id, owner) = (task_id.to_owned(), id.to_owned(), owner.to_owned());
        let (now, expires) = now_and_expiry(ttl);
        self.call(move |conn| {
            let n = conn
                .execute(
                    "UPDATE a2a_push_leases SET expires_ms = ?5
                     WHERE task_id = ?1 AND id = ?2 AND owner = ?3 AND expires_ms > ?4",
                    params![task_id, id, owner, now, expires],
                )
                .map_err(backend)?;
            Ok(n > 0)
        })
        .await
    }

    async fn release(&self, task_id: &str, id: &str, owner: &str) -> Result<(), PushStoreError> {
        let (task_id, id, owner) = (task_id.to_owned(), id.to_owned(), owner.to_owned());
        self.call(move |conn| {
            conn.execute(
                "DELETE FROM a2a_push_leases WHERE task_id = ?1 AND id = ?2 AND owner = ?3",
                params![task_id, id, owner],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }
}
