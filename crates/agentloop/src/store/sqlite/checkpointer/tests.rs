#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::super::{SqliteOptions, SqliteStore};
use crate::event::Event;
use crate::store::RunStore;
use std::time::Duration;

/// Appends 300 events to a fresh file opened with `interval`, waits, and gives the size of
/// the database file itself: it grows only when a checkpoint copies the log into it (the
/// writer's own automatic checkpoint is set out of reach).
async fn database_file_after_appends(interval: Duration) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let options = SqliteOptions {
        checkpoint_interval: interval,
        checkpoint_pages: 1_000_000,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open_with(&path, options).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = std::fs::metadata(&path).unwrap().len();
    for seq in 0..300u64 {
        let event = if seq == 0 {
            Event::RunStarted {
                run_id: "r".into(),
                config: Box::default(),
                input: vec![crate::message::Message::user("x".repeat(2_000))],
            }
        } else {
            Event::IterationStarted { iteration: u32::try_from(seq).unwrap(), at_ms: seq }
        };
        RunStore::append(&store, "r", seq, std::slice::from_ref(&event)).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = std::fs::metadata(&path).unwrap().len();
    drop(store);
    (before, after)
}

#[tokio::test]
async fn the_checkpoint_thread_copies_the_log_into_the_database_file() {
    let (before, after) = database_file_after_appends(Duration::from_millis(20)).await;
    assert!(after > before, "the database file did not grow: {before} then {after} bytes");
    // Without the thread (and the writer's threshold out of reach) nothing copies the log.
    let (before, after) = database_file_after_appends(Duration::ZERO).await;
    assert_eq!(after, before, "the database file changed without a checkpoint");
}
