//! Group commit at work: the appends of runs appending at once share SQLite transactions, and
//! each run's journal is exactly its own.

use super::*;

/// 300 runs append six events each, one append at a time, all at once: every journal is
/// whole and in order, and the store made fewer commits than appends.
pub(super) async fn appends_at_once_share_commits(store: Stores) {
    let ids: Vec<String> = (0..300).map(|_| run_id()).collect();
    let before = store.write_stats().unwrap();
    let writes = ids.iter().map(|id| {
        let store = store.clone();
        async move {
            for (seq, event) in (0u64..).zip(journal(id)) {
                store.append(id, seq, std::slice::from_ref(&event)).await.unwrap();
            }
        }
    });
    futures::future::join_all(writes).await;
    let written = store.write_stats().unwrap().since(before);
    assert_eq!((written.appends, written.entries), (1_800, 1_800), "{written:?}");
    assert!(written.commits < written.appends, "no append shared a commit: {written:?}");
    // The writer's time: in its commits, and (no less) the appends' from queued to answered.
    assert!(written.commit_busy_us > 0, "{written:?}");
    assert!(written.append_wait_us >= written.commit_busy_us, "{written:?}");
    for id in &ids {
        let events: Vec<Event> =
            store.load(id).await.unwrap().iter().map(|entry| (*entry.event).clone()).collect();
        assert_eq!(events, journal(id), "run {id}");
        assert!(store.delete_run(id).await.unwrap());
    }
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_appends_at_once_share_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let store = agentloop::store::sqlite::SqliteStore::open(dir.path().join("a.db")).unwrap();
    appends_at_once_share_commits(Arc::new(store)).await;
}
