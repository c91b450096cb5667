//! Redis with a TTL: every key of a run expires alike, and listings forget expired runs.

use super::*;

#[cfg(feature = "redis")]
#[tokio::test]
async fn redis_keys_expire_with_a_ttl() {
    use agentloop::store::redis::{RedisOptions, RedisStore};
    let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") else {
        eprintln!("skipped: AGENTLOOP_REDIS_URL is not set (the Redis store is not tested)");
        return;
    };
    let prefix = format!("agentloop-test:{}:", uuid::Uuid::new_v4().simple());
    let options =
        RedisOptions::default().prefix(prefix.clone()).ttl(std::time::Duration::from_millis(300));
    let store = RedisStore::connect_with(&url, options).await.unwrap();
    let id = run_id();
    store.append(&id, 0, &journal(&id)).await.unwrap();
    store.begin_turn("ctx", "r").await.unwrap();
    let client = ::redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let ttl: i64 = ::redis::cmd("PTTL")
        .arg(format!("{prefix}run:{id}:journal"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!((1..=300).contains(&ttl), "the journal expires: {ttl} ms");
    tokio::time::sleep(std::time::Duration::from_millis(450)).await;
    assert!(store.load(&id).await.unwrap().is_empty(), "the journal expired");
    assert!(store.list_runs(&RunFilter::all()).await.unwrap().is_empty(), "the index forgot it");
    // The agent's, the session's and the state's indexes forget it when a listing reads them.
    assert!(store.list_runs(&RunFilter::all().agent("agent-a")).await.unwrap().is_empty());
    let finished = RunFilter::all().state(RunState::Finished);
    assert!(store.list_runs(&finished).await.unwrap().is_empty());
    assert!(store.list_runs(&RunFilter::all().context_id("ctx-1")).await.unwrap().is_empty());
    assert!(store.get_session("ctx").await.unwrap().is_none(), "the session expired");
    let left: Vec<String> =
        ::redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(&mut conn).await.unwrap();
    assert!(left.is_empty(), "{left:?}");
}

/// With a TTL, every key of a run gets it alike — journal, meta, lease, controls, the
/// run's artifact index and its artifacts — refreshed by each append; only the indexes that
/// many runs share (`runs`, by agent, session, parent, state, origin) have none, and listings drop the ids
/// of expired runs from them.
#[cfg(feature = "redis")]
#[tokio::test]
async fn redis_every_key_of_a_run_gets_the_ttl_alike() {
    use agentloop::store::redis::{RedisOptions, RedisStore};
    use agentloop::store::ControlRequest;
    use std::time::Duration;
    let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") else {
        eprintln!("skipped: AGENTLOOP_REDIS_URL is not set (the Redis store is not tested)");
        return;
    };
    let prefix = format!("agentloop-test:{}:", uuid::Uuid::new_v4().simple());
    let ttl = Duration::from_secs(60);
    let options = RedisOptions::default().prefix(prefix.clone()).ttl(ttl);
    let store = RedisStore::connect_with(&url, options).await.unwrap();
    let (id, child) = (run_id(), run_id());
    let lease = store.claim(&id, "executor", Duration::from_secs(30)).await.unwrap();
    let events = journal(&id);
    store.append_fenced(&lease, 0, &entries(0, &events[..3])).await.unwrap();
    store.request_control(&id, ControlRequest::Pause("p".into())).await.unwrap();
    let new = NewArtifact { run_id: &id, name: "out", media_type: "text/plain", data: b"x" };
    let artifact = store.create_artifact(new).await.unwrap();
    store.append_chunk(&artifact.id, b"y").await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    store.append_fenced(&lease, 3, &entries(3, &events[3..])).await.unwrap();
    let mut started = RunConfig::default();
    started.parent_run_id = Some(id.clone());
    let first =
        Event::RunStarted { run_id: child.clone(), config: Box::new(started), input: vec![] };
    store.append(&child, 0, &[first]).await.unwrap();

    let client = ::redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> =
        ::redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(&mut conn).await.unwrap();
    let shared = |key: &str| {
        let rest = &key[prefix.len()..];
        rest == "runs" || rest == "runs:indexed" || rest.starts_with("runs:")
    };
    let mut ttls = Vec::new();
    for key in keys.iter().filter(|k| !shared(k)) {
        let left: i64 = ::redis::cmd("PTTL").arg(key).query_async(&mut conn).await.unwrap();
        assert!((1..=60_000).contains(&left), "{key}: {left} ms");
        ttls.push((key.clone(), left));
    }
    let of_run: Vec<&(String, i64)> = ttls.iter().filter(|(k, _)| !k.contains(&child)).collect();
    for suffix in [":journal", ":meta", ":lease", ":control", ":artifacts"] {
        let key = format!("{prefix}run:{id}{suffix}");
        assert!(of_run.iter().any(|(k, _)| k == &key), "{key} is missing: {ttls:?}");
    }
    assert!(of_run.iter().any(|(k, _)| k.ends_with(&format!("artifact:{}:chunks", artifact.id))));
    let (low, high) =
        of_run.iter().fold((i64::MAX, 0), |(low, high), (_, ttl)| (low.min(*ttl), high.max(*ttl)));
    assert!(high - low < 250, "refreshed together by the last append: {ttls:?}");
    store.release(&lease).await.unwrap();
    let deleted = agentloop::service::RunService::new(Arc::new(store)).delete(&id).await.unwrap();
    assert_eq!(deleted, [id.clone(), child.clone()]);
    let left: Vec<String> =
        ::redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(&mut conn).await.unwrap();
    assert!(left.is_empty(), "{left:?}");
}
