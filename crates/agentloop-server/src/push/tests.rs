#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::sqlite::SqlitePushStore;
use super::*;
use a2a::AuthenticationInfo;
use std::net::IpAddr;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn config(url: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        url: url.to_owned(),
        id: None,
        task_id: String::new(),
        token: None,
        authentication: None,
        tenant: None,
    }
}

#[test]
fn public_addresses_are_told_apart() {
    for public in
        ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]
    {
        assert!(is_public(ip(public)), "{public} is public");
    }
    for private in [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "172.31.255.255",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "255.255.255.255",
        "192.0.2.1",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "fd12:3456::1",
        "ff02::1",
        "2001:db8::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "64:ff9b::a00:1",
    ] {
        assert!(!is_public(ip(private)), "{private} is not public");
    }
    assert!(is_public(ip("172.32.0.1")) && is_public(ip("100.128.0.1")));
}

#[test]
fn the_allowlist_parses_its_entries() {
    let allow = PushAllow::parse([
        "public",
        "10.1.0.0/16",
        "127.0.0.1",
        "::1",
        "hooks.example.com",
        "*.corp.example",
    ])
    .unwrap();
    assert!(!allow.is_empty());
    assert!(PushAllow::parse(Vec::<String>::new()).unwrap().is_empty());
    assert!(PushAllow::none().is_empty());
    for bad in ["10.0.0.0/33", "::1/129", "http://x", "a b", "*.", "", "-bad-.com"] {
        assert_eq!(PushAllow::parse([bad]), Err(AllowError(bad.to_owned())), "{bad}");
    }
}

#[test]
fn an_address_is_allowed_by_a_network_or_as_a_public_one() {
    let public = PushAllow::public();
    assert!(public.allows(None, ip("8.8.8.8")));
    assert!(public.allows(Some("anything.example"), ip("8.8.8.8")));
    for denied in ["127.0.0.1", "10.0.0.1", "169.254.169.254", "::1", "::ffff:10.0.0.1"] {
        assert!(!public.allows(None, ip(denied)), "{denied}");
        assert!(!public.allows(Some("evil.example"), ip(denied)), "{denied}");
    }

    let nets = PushAllow::parse(["10.0.0.0/8", "127.0.0.1", "169.254.169.254/32", "::1"]).unwrap();
    assert!(nets.allows(None, ip("10.2.3.4")));
    assert!(nets.allows(None, ip("::ffff:10.2.3.4")));
    assert!(!nets.allows(None, ip("11.0.0.1")));
    assert!(nets.allows(None, ip("127.0.0.1")));
    assert!(!nets.allows(None, ip("127.0.0.2")));
    assert!(nets.allows(None, ip("169.254.169.254")));
    assert!(nets.allows(None, ip("::1")));
    assert!(!nets.allows(None, ip("8.8.8.8")), "a public address needs 'public' or its host");

    let hosts = PushAllow::parse(["hooks.example.com", "*.corp.example"]).unwrap();
    assert!(hosts.allows(Some("hooks.example.com"), ip("8.8.8.8")));
    assert!(hosts.allows(Some("HOOKS.example.com."), ip("8.8.8.8")));
    assert!(hosts.allows(Some("a.corp.example"), ip("8.8.4.4")));
    assert!(!hosts.allows(Some("corp.example"), ip("8.8.4.4")));
    assert!(!hosts.allows(Some("other.example.com"), ip("8.8.8.8")));
    assert!(!hosts.allows(None, ip("8.8.8.8")), "an IP literal is not a named host");
    assert!(
        !hosts.allows(Some("hooks.example.com"), ip("10.0.0.1")),
        "a named host still may not resolve to a private address"
    );
}

#[tokio::test]
async fn urls_are_checked_on_every_resolved_address() {
    let public = PushAllow::public();
    let url = |s: &str| Url::parse(s).unwrap();
    assert_eq!(PushAllow::none().check_url(&url("https://8.8.8.8/")).await, Err(Denied::Off));
    assert!(public.check_url(&url("https://8.8.8.8/hook")).await.is_ok());
    let denied = public.check_url(&url("http://10.0.0.1/hook")).await.unwrap_err();
    assert_eq!(denied, Denied::Address { host: "10.0.0.1".into(), addr: ip("10.0.0.1") });
    assert!(denied.to_string().contains("does not allow"));
    assert!(matches!(
        public.check_url(&url("http://[::1]:8080/")).await,
        Err(Denied::Address { .. })
    ));
    assert!(matches!(
        public.check_url(&url("http://169.254.169.254/latest/meta-data")).await,
        Err(Denied::Address { .. })
    ));
    // A name is resolved: localhost is loopback.
    assert!(matches!(
        public.check_url(&url("http://localhost:9/")).await,
        Err(Denied::Address { .. })
    ));
    let loopback = PushAllow::parse(["127.0.0.0/8", "::1"]).unwrap();
    assert!(loopback.check_url(&url("http://127.0.0.1:9/")).await.is_ok());
    assert!(loopback.check_url(&url("http://localhost:9/")).await.is_ok());
    assert!(matches!(
        loopback.check_url(&url("http://no-such-host.invalid/")).await,
        Err(Denied::NotResolved(_))
    ));
}

#[test]
fn configs_are_validated_and_completed() {
    let (checked, url) = validate(config(" https://hooks.example.com/a?b=c ")).unwrap();
    assert_eq!(url.host_str(), Some("hooks.example.com"));
    assert_eq!(checked.url, "https://hooks.example.com/a?b=c");
    assert!(!checked.id.as_deref().unwrap().is_empty(), "an id is made");

    let mut full = config("http://127.0.0.1:9/hook");
    full.id = Some("mine-1".into());
    full.token = Some("tok".into());
    full.tenant = Some("t".into());
    full.authentication =
        Some(AuthenticationInfo { scheme: "Bearer".into(), credentials: Some("secret".into()) });
    let (checked, _) = validate(full).unwrap();
    assert_eq!(checked.id.as_deref(), Some("mine-1"));
    assert_eq!(checked.token.as_deref(), Some("tok"));
    assert_eq!(checked.tenant, None);

    let refused = |c: TaskPushNotificationConfig, what: &str| {
        let error = validate(c).unwrap_err();
        assert_eq!(error.code, a2a::error_code::INVALID_PARAMS);
        assert!(error.message.contains(what), "{} lacks {what}", error.message);
        assert!(!error.message.contains("s3cret"), "a secret in an error: {}", error.message);
    };
    refused(config(""), "url");
    refused(config("not a url"), "url");
    refused(config("ftp://example.com/x"), "http or https");
    refused(config("file:///etc/passwd"), "http or https");
    refused(config("https://user:s3cret@example.com/"), "credentials");
    refused(config(&format!("https://example.com/{}", "a".repeat(MAX_URL))), "url");
    let mut bad_id = config("https://example.com/");
    bad_id.id = Some("a/b".into());
    refused(bad_id, "id");
    let mut bad_token = config("https://example.com/");
    bad_token.token = Some("s3cret\r\nX-Evil: 1".into());
    refused(bad_token, "token");
    let mut bad_scheme = config("https://example.com/");
    bad_scheme.authentication =
        Some(AuthenticationInfo { scheme: "Bear er".into(), credentials: None });
    refused(bad_scheme, "scheme");
    let mut bad_credentials = config("https://example.com/");
    bad_credentials.authentication =
        Some(AuthenticationInfo { scheme: "Bearer".into(), credentials: Some("s3cret\n".into()) });
    refused(bad_credentials, "credentials");
}

fn record(task: &str, id: &str, created_ms: u64) -> PushRecord {
    let mut config = config("https://example.com/hook");
    config.id = Some(id.into());
    config.task_id = task.into();
    config.token = Some("tok".into());
    PushRecord { agent: "echo".into(), config, created_ms, cursor: Cursor::default() }
}

/// The contract every store keeps.
pub(super) async fn store_contract(store: &dyn PushStore, task: &str) {
    let other = format!("{task}-other");
    assert!(store.get(task, "a").await.unwrap().is_none());
    store.put(&record(task, "b", 2)).await.unwrap();
    store.put(&record(task, "a", 1)).await.unwrap();
    store.put(&record(&other, "a", 3)).await.unwrap();
    assert_eq!(store.get(task, "a").await.unwrap(), Some(record(task, "a", 1)));
    let ids: Vec<String> =
        store.list(task).await.unwrap().iter().map(|r| r.id().to_owned()).collect();
    assert_eq!(ids, ["a", "b"], "oldest first");

    let cursor = Cursor { next_seq: Some(7), done: false };
    store.advance(task, "a", cursor).await.unwrap();
    assert_eq!(store.get(task, "a").await.unwrap().unwrap().cursor, cursor);
    store.advance(task, "b", Cursor { next_seq: Some(9), done: true }).await.unwrap();
    let pending: Vec<(String, String)> = store
        .pending()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.task_id() == task || r.task_id() == other)
        .map(|r| (r.task_id().to_owned(), r.id().to_owned()))
        .collect();
    assert_eq!(pending, [(task.to_owned(), "a".to_owned()), (other.clone(), "a".to_owned())]);

    // Set again: replaced, its cursor restarts.
    let mut again = record(task, "a", 4);
    again.config.url = "https://example.com/other".into();
    store.put(&again).await.unwrap();
    assert_eq!(store.get(task, "a").await.unwrap(), Some(again));

    assert!(store.delete(task, "a").await.unwrap());
    assert!(!store.delete(task, "a").await.unwrap());
    store.advance(task, "a", cursor).await.unwrap();
    assert!(store.get(task, "a").await.unwrap().is_none(), "a deleted config is not revived");
    assert!(!store.pending().await.unwrap().iter().any(|r| r.task_id() == task && r.id() == "a"));
    assert!(store.delete(task, "b").await.unwrap());
    assert!(store.delete(&other, "a").await.unwrap());
    assert!(store.list(task).await.unwrap().is_empty());
}

/// The leases every store keeps: one owner at a time, until released, dropped or expired.
pub(super) async fn lease_contract(store: &dyn PushStore, task: &str) {
    let long = Duration::from_secs(30);
    assert!(!store.claim(task, "l", "a", long).await.unwrap(), "no config, no lease");
    store.put(&record(task, "l", 1)).await.unwrap();
    assert!(store.claim(task, "l", "a", long).await.unwrap());
    assert!(!store.claim(task, "l", "b", long).await.unwrap(), "a holds it");
    assert!(store.claim(task, "l", "a", long).await.unwrap(), "a lease is its owner's again");
    assert!(store.renew(task, "l", "a", long).await.unwrap());
    assert!(!store.renew(task, "l", "b", long).await.unwrap());
    store.release(task, "l", "b").await.unwrap();
    assert!(!store.claim(task, "l", "b", long).await.unwrap(), "only its owner releases it");
    store.release(task, "l", "a").await.unwrap();
    assert!(!store.renew(task, "l", "a", long).await.unwrap(), "released");
    assert!(store.claim(task, "l", "b", long).await.unwrap());

    // Saving the config again drops its lease, as deleting it does.
    store.put(&record(task, "l", 2)).await.unwrap();
    assert!(!store.renew(task, "l", "b", long).await.unwrap(), "dropped by put");
    assert!(store.claim(task, "l", "a", long).await.unwrap());
    assert!(store.delete(task, "l").await.unwrap());
    assert!(!store.renew(task, "l", "a", long).await.unwrap(), "dropped by delete");
    store.put(&record(task, "l", 3)).await.unwrap();
    assert!(store.claim(task, "l", "b", long).await.unwrap(), "a new config, a free lease");

    // A lease not renewed expires; then another takes it, and its old owner cannot renew.
    store.release(task, "l", "b").await.unwrap();
    assert!(store.claim(task, "l", "a", Duration::from_millis(100)).await.unwrap());
    assert!(!store.claim(task, "l", "b", long).await.unwrap());
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(store.claim(task, "l", "b", long).await.unwrap(), "expired");
    assert!(!store.renew(task, "l", "a", long).await.unwrap());
    assert!(store.delete(task, "l").await.unwrap());
}

#[tokio::test]
async fn the_memory_store_keeps_the_contract() {
    store_contract(&MemoryPushStore::new(), "task-1").await;
    lease_contract(&MemoryPushStore::new(), "task-1").await;
}

#[tokio::test]
async fn the_sqlite_store_keeps_the_contract_and_its_configs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let store = SqlitePushStore::open(&path).unwrap();
    store_contract(&store, "task-1").await;
    lease_contract(&store, "task-1").await;
    let mut kept = record("task-2", "k", 5);
    kept.config.authentication =
        Some(AuthenticationInfo { scheme: "Basic".into(), credentials: Some("dTpw".into()) });
    kept.cursor = Cursor { next_seq: Some(3), done: false };
    store.put(&kept).await.unwrap();
    drop(store);
    let reopened = SqlitePushStore::open(&path).unwrap();
    assert_eq!(reopened.get("task-2", "k").await.unwrap(), Some(kept.clone()));
    assert_eq!(reopened.pending().await.unwrap(), vec![kept]);
}

#[tokio::test]
async fn a_sqlite_file_made_before_the_leases_gets_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let old = rusqlite::Connection::open(&path).unwrap();
    old.execute_batch(
        "CREATE TABLE a2a_push_configs (
             task_id TEXT NOT NULL, id TEXT NOT NULL, agent TEXT NOT NULL,
             config TEXT NOT NULL, created_ms INTEGER NOT NULL, next_seq INTEGER,
             done INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (task_id, id));",
    )
    .unwrap();
    let kept = record("task-4", "old", 1);
    let config = serde_json::to_string(&kept.config).unwrap();
    old.execute(
        "INSERT INTO a2a_push_configs (task_id, id, agent, config, created_ms)
         VALUES ('task-4', 'old', 'echo', ?1, 1)",
        [config],
    )
    .unwrap();
    drop(old);
    let store = SqlitePushStore::open(&path).unwrap();
    assert_eq!(store.pending().await.unwrap(), vec![kept]);
    let ttl = Duration::from_secs(30);
    assert!(store.claim("task-4", "old", "a", ttl).await.unwrap());
    assert!(!store.claim("task-4", "old", "b", ttl).await.unwrap());
    // A second server opening the same file shares the leases.
    let other = SqlitePushStore::open(&path).unwrap();
    assert!(!other.claim("task-4", "old", "b", ttl).await.unwrap());
    assert!(other.renew("task-4", "old", "a", ttl).await.unwrap());
}

#[tokio::test]
async fn the_redis_store_keeps_the_contract() {
    let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") else {
        eprintln!("skipped: AGENTLOOP_REDIS_URL is not set");
        return;
    };
    let prefix = format!("agentloop-test-{}:", uuid::Uuid::new_v4().simple());
    let store = super::redis::RedisPushStore::connect(&url, prefix.clone()).await.unwrap();
    store_contract(&store, "task-1").await;
    lease_contract(&store, "task-1").await;
    // The contracts delete what they made; nothing may be left under the prefix.
    let client = ::redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let left: Vec<String> =
        ::redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(&mut conn).await.unwrap();
    if !left.is_empty() {
        let _: () = ::redis::cmd("DEL").arg(&left).query_async(&mut conn).await.unwrap();
    }
    assert!(left.is_empty(), "keys left: {left:?}");
}

#[test]
fn debug_output_holds_no_secret() {
    let mut kept = record("task-3", "d", 1);
    kept.config.url = "https://example.com/hook?key=s3cret-q".into();
    kept.config.token = Some("s3cret-t".into());
    kept.config.authentication =
        Some(AuthenticationInfo { scheme: "Bearer".into(), credentials: Some("s3cret-c".into()) });
    let shown = format!("{kept:?} {:?}", Checked(kept.config.clone()));
    assert!(shown.contains("task-3"), "{shown}");
    assert!(!shown.contains("s3cret"), "{shown}");
}
