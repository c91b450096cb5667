//! Push delivery with two `Pusher`s (two servers) on one push store: each config's lease
//! lets one of them deliver it, so every update reaches the webhook once; when the one
//! delivering stops, or dies and its lease expires, the other takes the delivery over from
//! its cursor and no update is lost.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use a2a::TaskPushNotificationConfig;
use agentloop::store::sqlite::SqliteStore;
use agentloop_server::push::redis::RedisPushStore;
use agentloop_server::push::sqlite::SqlitePushStore;
use agentloop_server::push::{
    Cursor, DeliveryOptions, MemoryPushStore, PushAllow, PushRecord, PushStore, PushStoreError,
    Pusher,
};
use agentloop_server::{echo, Host, ServerConfig};
use common::hook::Hook;
use common::TestServer;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A completed task of the echo agent (several updates: statuses of a tool call, the
/// artifact, the final status), in `dir/runs.db`.
async fn completed_task(dir: tempfile::TempDir) -> (TestServer, String) {
    let runs = Arc::new(SqliteStore::open(dir.path().join("runs.db")).unwrap());
    let server = common::start_on(runs.clone(), runs, None, ServerConfig::default(), dir).await;
    let task = server.send("calc 6 * 7", None).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    (server, task["id"].as_str().unwrap().to_owned())
}

/// The echo agent's host on the run store in `dir` (a connection of its own).
fn hosts(dir: &Path) -> Vec<Arc<Host>> {
    let runs = Arc::new(SqliteStore::open(dir.join("runs.db")).unwrap());
    let served = echo::served_echo(runs.clone(), runs).unwrap();
    vec![Arc::new(Host::new(served, Duration::from_secs(30)).unwrap())]
}

fn pusher(store: &Arc<dyn PushStore>, lease_ttl: Duration) -> Pusher {
    let options = DeliveryOptions {
        timeout: Duration::from_secs(5),
        min_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(50),
        lease_ttl,
        ..DeliveryOptions::default()
    };
    Pusher::new(PushAllow::parse(["127.0.0.1"]).unwrap(), store.clone(), options)
}

/// The config `id` of `task_id` to `url`, its delivery at the task's first journal entry.
fn record(task_id: &str, id: &str, url: &str) -> PushRecord {
    let config = TaskPushNotificationConfig {
        url: url.to_owned(),
        id: Some(id.to_owned()),
        task_id: task_id.to_owned(),
        token: None,
        authentication: None,
        tenant: None,
    };
    let cursor = Cursor { next_seq: Some(0), done: false };
    PushRecord { agent: "echo".into(), config, created_ms: 1, cursor }
}

/// The updates one `Pusher` alone delivers for `task_id` (what every test must get).
async fn expected(hosts: &[Arc<Host>], task_id: &str) -> Vec<Value> {
    let hook = Hook::start(|_| 200).await;
    let store: Arc<dyn PushStore> = Arc::new(MemoryPushStore::new());
    store.put(&record(task_id, "reference", &hook.url)).await.unwrap();
    let alone = pusher(&store, Duration::from_secs(30));
    assert_eq!(alone.recover(hosts).await, 1);
    let delivered = hook.until_completed().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(hook.delivered(), delivered, "nothing after the final status");
    assert!(delivered.len() >= 5, "a task with several updates: {delivered:?}");
    delivered
}

/// Whether `got` is `expected`, but for the updates of one journal entry (at most two: the
/// answer and the final status) delivered again right after themselves — those in flight
/// when the delivery was taken over: at least once, nothing lost, nothing else again.
fn taken_over(got: &[Value], expected: &[Value]) -> bool {
    got == expected
        || (1..=2).any(|again| {
            got.len() == expected.len() + again
                && (again..=expected.len())
                    .any(|k| got[..k] == expected[..k] && got[k..] == expected[k - again..])
        })
}

/// Two `Pusher`s on `store` recover the same config at once, then every 50 ms until the
/// task's updates are delivered: one of them delivers it, each update once.
async fn each_update_once(store: Arc<dyn PushStore>, id: &str) {
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts(dir.path());
    let (server, task_id) = completed_task(dir).await;
    let expected = expected(&hosts, &task_id).await;

    let hook = Hook::slow(Duration::from_millis(40)).await;
    store.put(&record(&task_id, id, &hook.url)).await.unwrap();
    let (a, b) = (pusher(&store, Duration::from_secs(30)), pusher(&store, Duration::from_secs(30)));
    let (started_a, started_b) = tokio::join!(a.recover(&hosts), b.recover(&hosts));
    assert_eq!(started_a + started_b, 1, "one of the two delivers the config");
    let deadline = Instant::now() + Duration::from_secs(15);
    while hook.delivered().len() < expected.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (again_a, again_b) = tokio::join!(a.recover(&hosts), b.recover(&hosts));
        assert_eq!((again_a, again_b), (0, 0), "a leased delivery is not started again");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(hook.delivered(), expected, "every update once, in order");
    assert!(store.get(&task_id, id).await.unwrap().unwrap().cursor.done);
    assert!(store.delete(&task_id, id).await.unwrap());
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pushers_on_one_memory_store_deliver_each_update_once() {
    each_update_once(Arc::new(MemoryPushStore::new()), "memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pushers_on_one_sqlite_store_deliver_each_update_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("push.db");
    // Two servers, two connections to the one file.
    let first: Arc<dyn PushStore> = Arc::new(SqlitePushStore::open(&path).unwrap());
    each_update_once(first, "sqlite").await;
    let second: Arc<dyn PushStore> = Arc::new(SqlitePushStore::open(&path).unwrap());
    each_update_once(second, "sqlite-again").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pushers_on_one_redis_store_deliver_each_update_once() {
    let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") else {
        eprintln!("skipped: AGENTLOOP_REDIS_URL is not set");
        return;
    };
    let prefix = format!("agentloop-test:{}:", uuid::Uuid::new_v4().simple());
    let store = Arc::new(RedisPushStore::connect(&url, prefix.clone()).await.unwrap());
    each_update_once(store, "redis").await;
    // The test deleted its config: nothing (no lease either) is left under the prefix.
    let client = ::redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let left: Vec<String> =
        ::redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(&mut conn).await.unwrap();
    if !left.is_empty() {
        let _: () = ::redis::cmd("DEL").arg(&left).query_async(&mut conn).await.unwrap();
    }
    assert!(left.is_empty(), "keys left: {left:?}");
}

/// Recovers with `pusher` every 50 ms until it starts a delivery; how long that took.
async fn until_started(pusher: &Pusher, hosts: &[Arc<Host>]) -> Duration {
    let asked = Instant::now();
    while pusher.recover(hosts).await == 0 {
        assert!(asked.elapsed() < Duration::from_secs(10), "the delivery was not taken over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    asked.elapsed()
}

/// Waits until the delivery of the config `id` of `task_id` is done (its last update
/// answered); what `hook` got.
async fn until_done(store: &dyn PushStore, hook: &Hook, task_id: &str, id: &str) -> Vec<Value> {
    for _ in 0..500 {
        if store.get(task_id, id).await.unwrap().is_some_and(|r| r.cursor.done) {
            return hook.delivered();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the delivery did not end: {:?}", hook.got());
}

/// Waits until `hook` got `n` requests.
async fn until_got(hook: &Hook, n: usize) {
    for _ in 0..400 {
        if hook.got().len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the webhook did not get {n} requests: {:?}", hook.got());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_pusher_hands_its_delivery_over_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts(dir.path());
    let store: Arc<dyn PushStore> =
        Arc::new(SqlitePushStore::open(dir.path().join("push.db")).unwrap());
    let (_server, task_id) = completed_task(dir).await;
    let expected = expected(&hosts, &task_id).await;

    let hook = Hook::slow(Duration::from_millis(100)).await;
    store.put(&record(&task_id, "c", &hook.url)).await.unwrap();
    let (a, b) = (pusher(&store, Duration::from_secs(30)), pusher(&store, Duration::from_secs(30)));
    assert_eq!(a.recover(&hosts).await, 1);
    until_got(&hook, 2).await;
    assert_eq!(b.recover(&hosts).await, 0, "the first one holds the lease");
    drop(a);
    // Its lease was released: no need to wait for the 30 s it had left.
    let waited = until_started(&b, &hosts).await;
    assert!(waited < Duration::from_secs(5), "taken over after {waited:?}");
    let got = until_done(&*store, &hook, &task_id, "c").await;
    assert!(taken_over(&got, &expected), "got {got:?}\nexpected {expected:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_taken_over_from_the_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let hosts_b = hosts(dir.path());
    let hosts_a = hosts(dir.path());
    let path = dir.path().join("push.db");
    let (_server, task_id) = completed_task(dir).await;
    let expected = expected(&hosts_b, &task_id).await;

    let hook = Hook::slow(Duration::from_millis(100)).await;
    let ttl = Duration::from_millis(1500);
    // The first server runs on a runtime of its own, to die with it: its deliveries end
    // without releasing their leases.
    let first =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let store_a: Arc<dyn PushStore> = Arc::new(SqlitePushStore::open(&path).unwrap());
    store_a.put(&record(&task_id, "c", &hook.url)).await.unwrap();
    let a = Arc::new(pusher(&store_a, ttl));
    let (recovering, hosts) = (a.clone(), hosts_a.clone());
    let started = first.spawn(async move { recovering.recover(&hosts).await });
    assert_eq!(started.await.unwrap(), 1);
    until_got(&hook, 3).await;
    first.shutdown_background();
    let died = Instant::now();

    let store_b: Arc<dyn PushStore> = Arc::new(SqlitePushStore::open(&path).unwrap());
    let b = pusher(&store_b, ttl);
    assert_eq!(b.recover(&hosts_b).await, 0, "the dead server's lease is still live");
    until_started(&b, &hosts_b).await;
    let waited = died.elapsed();
    assert!(waited >= ttl / 2, "taken over after {waited:?}, before the lease expired");
    let got = until_done(&*store_b, &hook, &task_id, "c").await;
    assert!(got.len() > 3, "the second server delivered the rest: {got:?}");
    assert!(taken_over(&got, &expected), "got {got:?}\nexpected {expected:?}");
    drop(a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_that_loses_its_lease_stops_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts(dir.path());
    let store: Arc<dyn PushStore> = Arc::new(MemoryPushStore::new());
    let (_server, task_id) = completed_task(dir).await;
    let expected = expected(&hosts, &task_id).await;

    let hook = Hook::slow(Duration::from_millis(100)).await;
    store.put(&record(&task_id, "c", &hook.url)).await.unwrap();
    let ttl = Duration::from_millis(600);
    let (a, b) = (pusher(&store, ttl), pusher(&store, ttl));
    assert_eq!(a.recover(&hosts).await, 1);
    until_got(&hook, 2).await;
    // Saved again (its cursor as it stands): the lease is dropped, the first delivery
    // finds it lost at its next renewal (within a third of the TTL) and stops.
    let saved = store.get(&task_id, "c").await.unwrap().unwrap();
    store.put(&saved).await.unwrap();
    tokio::time::sleep(ttl / 3 + Duration::from_millis(200)).await;
    let stopped = hook.got().len();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(hook.got().len(), stopped, "the first delivery stopped");
    assert!(stopped < expected.len(), "stopped before the end: {:?}", hook.got());

    assert_eq!(b.recover(&hosts).await, 1, "the lease is free");
    let got = until_done(&*store, &hook, &task_id, "c").await;
    assert!(taken_over(&got, &expected), "got {got:?}\nexpected {expected:?}");
}

/// A store whose lease renewals fail (the store is out of reach for them).
#[derive(Debug)]
struct NoRenewals(Arc<dyn PushStore>);

#[async_trait::async_trait]
impl PushStore for NoRenewals {
    async fn put(&self, record: &PushRecord) -> Result<(), PushStoreError> {
        self.0.put(record).await
    }
    async fn get(&self, task_id: &str, id: &str) -> Result<Option<PushRecord>, PushStoreError> {
        self.0.get(task_id, id).await
    }
    async fn list(&self, task_id: &str) -> Result<Vec<PushRecord>, PushStoreError> {
        self.0.list(task_id).await
    }
    async fn delete(&self, task_id: &str, id: &str) -> Result<bool, PushStoreError> {
        self.0.delete(task_id, id).await
    }
    async fn advance(&self, task_id: &str, id: &str, cursor: Cursor) -> Result<(), PushStoreError> {
        self.0.advance(task_id, id, cursor).await
    }
    async fn pending(&self) -> Result<Vec<PushRecord>, PushStoreError> {
        self.0.pending().await
    }
    async fn claim(
        &self,
        task_id: &str,
        id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, PushStoreError> {
        self.0.claim(task_id, id, owner, ttl).await
    }
    async fn renew(&self, _: &str, _: &str, _: &str, _: Duration) -> Result<bool, PushStoreError> {
        Err(PushStoreError::Backend { backend: "test", message: "out of reach".into() })
    }
    async fn release(&self, task_id: &str, id: &str, owner: &str) -> Result<(), PushStoreError> {
        self.0.release(task_id, id, owner).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_that_cannot_renew_stops_before_its_lease_expires() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts(dir.path());
    let store: Arc<dyn PushStore> = Arc::new(MemoryPushStore::new());
    let (_server, task_id) = completed_task(dir).await;
    let expected = expected(&hosts, &task_id).await;

    let hook = Hook::slow(Duration::from_millis(400)).await;
    store.put(&record(&task_id, "c", &hook.url)).await.unwrap();
    // Renewed every second, failing: the second failure (2 s) leaves too little of the
    // lease (3 s) for a third attempt.
    let ttl = Duration::from_secs(3);
    let unrenewed: Arc<dyn PushStore> = Arc::new(NoRenewals(store.clone()));
    let (a, b) = (pusher(&unrenewed, ttl), pusher(&store, ttl));
    let claimed = Instant::now();
    assert_eq!(a.recover(&hosts).await, 1);
    // Until the webhook gets nothing more for 300 ms.
    let mut seen = hook.got().len();
    let mut quiet = Instant::now();
    while quiet.elapsed() < Duration::from_millis(300) {
        assert!(claimed.elapsed() < Duration::from_secs(10), "the delivery did not stop");
        tokio::time::sleep(Duration::from_millis(20)).await;
        if hook.got().len() != seen {
            (seen, quiet) = (hook.got().len(), Instant::now());
        }
    }
    assert!(seen < expected.len(), "stopped before the end: {:?}", hook.got());
    assert_eq!(b.recover(&hosts).await, 0, "stopped while its lease was live");
    let waited = claimed.elapsed() + until_started(&b, &hosts).await;
    assert!(waited >= ttl - Duration::from_millis(100), "taken over after {waited:?}");
    let got = until_done(&*store, &hook, &task_id, "c").await;
    assert!(taken_over(&got, &expected), "got {got:?}\nexpected {expected:?}");
}
