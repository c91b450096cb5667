#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::store::{ControlRequest, MemoryStore};

const TICK: Duration = Duration::from_millis(10);

async fn cancel(store: &MemoryStore, run_id: &str) {
    store.request_control(run_id, ControlRequest::Cancel("stop".into())).await.unwrap();
}

#[tokio::test]
async fn a_change_reaches_its_run_only_and_the_reader_stops_when_nothing_is_watched() {
    let store = Arc::new(MemoryStore::new());
    let watch = ControlWatch::new(store.clone(), TICK);
    let mut a = watch.watch("a", RemoteControl::default());
    let mut b = watch.watch("b", RemoteControl::default());
    // A second watcher of the same run sees the same changes.
    let mut b_again = watch.watch("b", RemoteControl::default());
    cancel(&store, "b").await;
    let seen = tokio::time::timeout(Duration::from_secs(5), b.changed()).await.unwrap();
    assert_eq!(seen.cancel.as_deref(), Some("stop"));
    let seen = tokio::time::timeout(Duration::from_secs(5), b_again.changed()).await.unwrap();
    assert_eq!(seen.cancel.as_deref(), Some("stop"));
    // Nothing changed for `a`, and nothing more for `b`.
    assert!(tokio::time::timeout(TICK * 5, a.changed()).await.is_err());
    assert!(tokio::time::timeout(TICK * 5, b.changed()).await.is_err());

    drop((a, b, b_again));
    assert!(watch.shared.watched().runs.is_empty());
    tokio::time::sleep(TICK * 5).await;
    assert!(!watch.shared.watched().reading, "the reader stopped");

    // Watched again: read again.
    let mut c = watch.watch("c", RemoteControl::default());
    assert!(watch.shared.watched().reading);
    cancel(&store, "c").await;
    let seen = tokio::time::timeout(Duration::from_secs(5), c.changed()).await.unwrap();
    assert_eq!(seen.cancel.as_deref(), Some("stop"));
}

#[tokio::test]
async fn a_state_read_before_watching_is_not_seen_again() {
    let store = Arc::new(MemoryStore::new());
    cancel(&store, "a").await;
    let initial = store.remote_control("a").await.unwrap();
    let watch = ControlWatch::new(store.clone(), TICK);
    let mut a = watch.watch("a", initial);
    assert!(tokio::time::timeout(TICK * 5, a.changed()).await.is_err());
}

#[tokio::test]
async fn the_default_reads_every_run() {
    let store = MemoryStore::new();
    cancel(&store, "b").await;
    let ids = vec!["a".to_owned(), "b".to_owned()];
    let controls = store.remote_controls(&ids).await.unwrap();
    assert_eq!(controls.len(), 2);
    assert_eq!(controls[0], ("a".to_owned(), RemoteControl::default()));
    assert_eq!(controls[1].1.cancel.as_deref(), Some("stop"));
}

#[tokio::test]
async fn a_run_is_still_controlled_after_its_agent_s_watch_is_dropped() {
    let store = Arc::new(MemoryStore::new());
    let watch = ControlWatch::new(store.clone(), TICK);
    let mut a = watch.watch("a", RemoteControl::default());
    drop(watch);
    cancel(&store, "a").await;
    let seen = tokio::time::timeout(Duration::from_secs(5), a.changed()).await.unwrap();
    assert_eq!(seen.cancel.as_deref(), Some("stop"));
}
