//! The **checkpointer**: a thread with a connection of its own that copies the write-ahead
//! log into the database file every
//! [`SqliteOptions::checkpoint_interval`](super::SqliteOptions::checkpoint_interval), with a
//! `PASSIVE` checkpoint (it never waits for the writer, nor makes it wait). A checkpoint
//! copies every page the log holds and syncs the file; left to SQLite, the connection that
//! commits when the log passes its threshold does it, here the one writer all runs queue
//! behind. The writer keeps SQLite's automatic checkpoint only as a backstop, at
//! [`SqliteOptions::checkpoint_pages`](super::SqliteOptions::checkpoint_pages).

use super::{backend, SqliteOptions};
use crate::store::StoreError;
use rusqlite::Connection;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};

/// Starts the checkpointer of the file at `path`; it stops when the returned sender is
/// dropped (with the store), after a last checkpoint.
pub(super) fn start(
    path: &Path,
    options: &SqliteOptions,
) -> Result<Option<mpsc::Sender<()>>, StoreError> {
    let interval = options.checkpoint_interval;
    if interval.is_zero() {
        return Ok(None);
    }
    let conn = Connection::open(path).map_err(backend)?;
    conn.busy_timeout(options.busy_timeout).map_err(backend)?;
    let synchronous = if options.synchronous_full { "FULL" } else { "NORMAL" };
    conn.execute_batch(&format!("PRAGMA synchronous = {synchronous};")).map_err(backend)?;
    let (stop, stopped) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("agentloop-ckpt".into())
        .spawn(move || loop {
            let last =
                matches!(stopped.recv_timeout(interval), Err(RecvTimeoutError::Disconnected));
            // (busy, log pages, pages copied): a checkpoint that could not copy everything
            // (a reader on an older snapshot) copies the rest next time.
            if let Err(error) =
                conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| row.get::<_, i64>(0))
            {
                tracing::debug!(%error, "agentloop: SQLite checkpoint failed; retried later");
            }
            if last {
                return;
            }
        })
        .map_err(|e| backend(format!("cannot start the checkpoint thread: {e}")))?;
    Ok(Some(stop))
}

#[cfg(test)]
mod tests;
