#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use agentloop::store::MemoryStore;
use agentloop::Event;

#[tokio::test]
async fn times_each_kind_of_call_and_forgets_on_reset() {
    let store = TimedStore::new(Arc::new(MemoryStore::new()));
    let lease = store.claim("r1", "me", Duration::from_secs(60)).await.unwrap();
    let entries =
        [JournalEntry::of(0, Event::IterationStarted { iteration: 1, at_ms: 0 }).unwrap()];
    assert_eq!(store.append_fenced(&lease, 0, &entries).await.unwrap(), 1);
    let entries =
        [JournalEntry::of(1, Event::IterationStarted { iteration: 2, at_ms: 1 }).unwrap()];
    assert_eq!(store.append_fenced(&lease, 1, &entries).await.unwrap(), 2);
    store.release(&lease).await.unwrap();
    assert_eq!(store.load("r1").await.unwrap().len(), 2, "passed through");

    let times = store.times();
    let calls: Vec<(&str, u64)> = times.iter().map(|t| (t.call.as_str(), t.count)).collect();
    assert_eq!(calls, [("append", 2), ("claim", 1), ("release", 1)]);
    assert!(times.iter().all(|t| t.p50_us <= t.p99_us));
    store.reset();
    assert!(store.times().is_empty());
}
