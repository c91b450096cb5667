//! Redis lists a filtered page from the index of what it filters on (an agent's, a session's,
//! a parent's, a state's runs), and runs journaled before those indexes existed are added to
//! them (and get their input from their journals) when a store connects.
#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::event::Event;
use agentloop::message::Message;
use agentloop::run::RunConfig;
use agentloop::store::redis::{RedisOptions, RedisStore};
use agentloop::store::{RunFilter, RunStore};

fn started(run_id: &str, agent: &str, context_id: &str) -> Event {
    let mut config = RunConfig::default();
    config.agent = Some(agent.into());
    config.context_id = Some(context_id.into());
    Event::RunStarted {
        run_id: run_id.into(),
        config: Box::new(config),
        input: vec![Message::user("hi")],
    }
}

fn bare(run_id: &str) -> Event {
    let config = Box::new(RunConfig::default());
    Event::RunStarted { run_id: run_id.into(), config, input: vec![Message::user("hi")] }
}

#[tokio::test]
async fn filtered_listings_use_the_indexes_and_older_runs_join_them() {
    let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") else {
        eprintln!("skipped: AGENTLOOP_REDIS_URL is not set");
        return;
    };
    let prefix = format!("agentloop-test:{}:", uuid::Uuid::new_v4().simple());
    let open = || async {
        RedisStore::connect_with(&url, RedisOptions::default().prefix(prefix.clone()))
            .await
            .unwrap()
    };
    let store = open().await;
    // Runs without an agent or a session are in no such index (a reconnect indexes nothing).
    store.append("run_bare", 0, &[bare("run_bare")]).await.unwrap();
    drop(open().await);
    assert!(store.delete_run("run_bare").await.unwrap());
    for n in 0..30 {
        let (agent, context) = (format!("agent_{}", n % 3), format!("ctx_{}", n % 5));
        store
            .append(&format!("run_{n:02}"), 0, &[started(&format!("run_{n:02}"), &agent, &context)])
            .await
            .unwrap();
    }
    let ids = |runs: Vec<agentloop::store::RunSummary>| -> Vec<String> {
        runs.into_iter().map(|r| r.run_id).collect()
    };
    let of_agent = ids(store.list_runs(&RunFilter::all().agent("agent_1")).await.unwrap());
    assert_eq!(of_agent.len(), 10);
    assert!(of_agent.iter().all(|id| id[4..].parse::<u32>().unwrap() % 3 == 1), "{of_agent:?}");
    let both = RunFilter::all().agent("agent_1").context_id("ctx_2").limit(5);
    let of_both = ids(store.list_runs(&both).await.unwrap());
    assert_eq!(of_both, ["run_22", "run_07"], "agent 1 and session 2: n = 7, 22 (newest first)");

    // As a store written before the indexes: drop them and the marker, then reconnect.
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut dropped: Vec<String> = Vec::new();
    for n in 0..3 {
        dropped.push(format!("{prefix}runs:agent:agent_{n}"));
    }
    for n in 0..5 {
        dropped.push(format!("{prefix}runs:context:ctx_{n}"));
    }
    dropped.push(format!("{prefix}runs:state:running"));
    dropped.push(format!("{prefix}runs:indexed"));
    let _: () = redis::cmd("DEL").arg(&dropped).query_async(&mut conn).await.unwrap();
    for n in 0..30 {
        let meta = format!("{prefix}run:run_{n:02}:meta");
        let _: () = redis::cmd("HDEL").arg(meta).arg("input").query_async(&mut conn).await.unwrap();
    }
    assert!(store.list_runs(&RunFilter::all().agent("agent_1")).await.unwrap().is_empty());
    let running = RunFilter::all().state(agentloop::store::RunState::Running);
    assert!(store.list_runs(&running).await.unwrap().is_empty());
    let reconnected = open().await;
    assert_eq!(
        ids(reconnected.list_runs(&RunFilter::all().agent("agent_1")).await.unwrap()),
        of_agent
    );
    assert_eq!(ids(reconnected.list_runs(&both).await.unwrap()), of_both);
    let listed = reconnected.list_runs(&running).await.unwrap();
    assert_eq!(listed.len(), 30);
    assert!(listed.iter().all(|run| run.input.as_deref() == Some("hi")), "from the journal");

    // Deleting a run takes it out of its indexes too.
    assert!(reconnected.delete_run("run_22").await.unwrap());
    assert_eq!(ids(reconnected.list_runs(&both).await.unwrap()), ["run_07"]);
    for n in 0..30 {
        reconnected.delete_run(&format!("run_{n:02}")).await.unwrap();
    }
    let left: Vec<String> =
        redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(&mut conn).await.unwrap();
    assert!(left.is_empty(), "nothing is left, not even the marker: {left:?}");
}

/// The append is an `EVALSHA`: after `SCRIPT FLUSH` (or a server restart) the store loads the
/// script again and the append goes through.
#[tokio::test]
async fn appends_load_the_script_again_after_a_script_flush() {
    let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") else {
        eprintln!("skipped: AGENTLOOP_REDIS_URL is not set");
        return;
    };
    let prefix = format!("agentloop-test:{}:", uuid::Uuid::new_v4().simple());
    let options = RedisOptions::default().prefix(prefix.clone());
    let store = RedisStore::connect_with(&url, options).await.unwrap();
    let client = ::redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = ::redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut conn).await.unwrap();
    store.append("run_flushed", 0, &[bare("run_flushed")]).await.unwrap();
    let _: () = ::redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut conn).await.unwrap();
    let conflict = store.append("run_flushed", 0, &[bare("run_flushed")]).await.unwrap_err();
    assert!(matches!(conflict, agentloop::store::StoreError::Conflict { actual: 1, .. }));
    assert_eq!(store.load("run_flushed").await.unwrap().len(), 1);
    assert!(store.delete_run("run_flushed").await.unwrap());
    let left: Vec<String> =
        ::redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(&mut conn).await.unwrap();
    assert!(left.is_empty(), "{left:?}");
}
