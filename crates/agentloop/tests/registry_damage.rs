//! The run registry agrees with the journals, even in a damaged store: a run whose journal
//! rows (SQLite) or keys (Redis) were removed by hand is not listed as a healthy run — `show`
//! and `resume` find no such run, so neither does `list` — and `RunService::check` reports
//! every disagreement (a row without a journal, a cut journal, counters that differ, a journal
//! without a row), which `RunService::repair` puts right.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::event::Event;
use agentloop::message::{FinishReason, Message};
use agentloop::run::{Outcome, RunConfig, StopReason};
use agentloop::service::{Problem, Repair, RunService};
use agentloop::store::{RunFilter, RunState, RunStore};
use std::sync::Arc;

fn run_id() -> String {
    format!("run-{}", uuid::Uuid::new_v4().simple())
}

/// A finished journal of six entries.
fn journal(id: &str) -> Vec<Event> {
    let mut config = RunConfig::default();
    config.agent = Some("damaged".into());
    let mut outcome = Outcome::new(id, "hello", StopReason::Completed);
    outcome.iterations = 1;
    vec![
        Event::RunStarted { run_id: id.into(), config: Box::new(config), input: vec![] },
        Event::IterationStarted { iteration: 1, at_ms: 0 },
        Event::ModelRequested { iteration: 1, purpose: Default::default() },
        Event::ModelResponded {
            iteration: 1,
            message: Message::assistant("hello"),
            finish_reason: FinishReason::Stop,
            usage: Default::default(),
            duration_ms: 3,
            response_id: None,
            response_model: None,
            provider: None,
        },
        Event::IterationCompleted { iteration: 1, duration_ms: 3 },
        Event::RunFinished { outcome: Box::new(outcome) },
    ]
}

async fn listed(store: &dyn RunStore) -> Vec<(String, RunState, u64)> {
    let mut runs: Vec<_> = store
        .list_runs(&RunFilter::all())
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.run_id, r.state, r.entries))
        .collect();
    runs.sort_by(|a, b| a.0.cmp(&b.0));
    runs
}

/// How a test damages a store behind its back.
#[async_trait::async_trait]
trait Damage {
    /// Removes the run's whole journal.
    async fn drop_journal(&self, run_id: &str);
    /// Keeps the first `keep` entries of the run's journal.
    async fn cut_journal(&self, run_id: &str, keep: u64);
    /// Removes the run's registry row.
    async fn drop_row(&self, run_id: &str);
    /// Makes the row say `failed` with 999 input tokens.
    async fn garble_row(&self, run_id: &str);
}

/// The reported bug first (a journal removed by hand, the run still listed as finished with 6
/// entries), then each kind of damage, found by `check` and repaired.
async fn damaged_store(store: Arc<dyn RunStore>, damage: &dyn Damage) {
    let [gone, cut, orphan, garbled, healthy] = [(); 5].map(|()| run_id());
    for id in [&gone, &cut, &orphan, &garbled, &healthy] {
        store.append(id, 0, &journal(id)).await.unwrap();
    }
    damage.drop_journal(&gone).await;
    damage.cut_journal(&cut, 3).await;
    damage.drop_row(&orphan).await;
    damage.garble_row(&garbled).await;

    // `show` and `resume` find no journal: `list` does not show the run either, let alone
    // as `finished` with 6 entries; a cut journal is not listed with the row's length.
    assert!(store.load(&gone).await.unwrap().is_empty());
    let runs = listed(&*store).await;
    let ids: Vec<&str> = runs.iter().map(|(id, _, _)| id.as_str()).collect();
    assert!(!ids.contains(&gone.as_str()), "a run without a journal is listed: {runs:?}");
    assert!(!ids.contains(&cut.as_str()), "a cut journal is listed as whole: {runs:?}");
    assert!(ids.contains(&healthy.as_str()));

    let service = RunService::new(store.clone());
    let report = service.check().await.unwrap();
    assert!(!report.is_clean());
    let about = |id: &str| -> Vec<&Problem> {
        report
            .problems
            .iter()
            .filter(|p| match p {
                Problem::RowWithoutJournal { run_id, .. }
                | Problem::Disagrees { run_id, .. }
                | Problem::Unreadable { run_id, .. } => run_id == id,
                Problem::JournalWithoutRow(orphan) => orphan.run_id.as_deref() == Some(id),
                _ => false,
            })
            .collect()
    };
    assert!(matches!(about(&gone)[..], [Problem::RowWithoutJournal { children: 0, .. }]));
    match about(&cut)[..] {
        [Problem::Disagrees { fields, .. }] => {
            let names: Vec<&str> = fields.iter().map(|f| f.field).collect();
            assert!(names.contains(&"entries") && names.contains(&"state"), "{fields:?}");
        }
        ref other => panic!("{other:?}"),
    }
    match about(&orphan)[..] {
        [Problem::JournalWithoutRow(journal)] => assert_eq!(journal.entries, 6),
        ref other => panic!("{other:?}"),
    }
    match about(&garbled)[..] {
        [Problem::Disagrees { fields, .. }] => {
            let names: Vec<&str> = fields.iter().map(|f| f.field).collect();
            assert_eq!(names, ["state", "usage"], "{fields:?}");
        }
        ref other => panic!("{other:?}"),
    }
    assert!(about(&healthy).is_empty());
    assert_eq!(report.problems.len(), 4, "{report:?}");

    let repairs = service.repair(&report).await.unwrap();
    assert!(repairs.iter().all(Repair::is_fixed), "{repairs:?}");
    assert!(service.check().await.unwrap().is_clean(), "repaired");
    let runs = listed(&*store).await;
    let state_of = |id: &str| runs.iter().find(|r| r.0 == id).map(|r| (r.1, r.2));
    assert_eq!(state_of(&gone), None, "the row without a journal is removed");
    assert_eq!(state_of(&cut), Some((RunState::Running, 3)), "rebuilt from what is left");
    assert_eq!(state_of(&orphan), Some((RunState::Finished, 6)), "the journal got its row");
    assert_eq!(state_of(&garbled), Some((RunState::Finished, 6)));
    let usage = store.list_runs(&RunFilter::all().state(RunState::Finished)).await.unwrap();
    assert!(usage.iter().all(|r| r.usage.input == 0), "{usage:?}");
    for id in [&cut, &orphan, &garbled, &healthy] {
        service.delete(id).await.unwrap();
    }
    assert!(listed(&*store).await.is_empty());
}

struct SqliteDamage(std::path::PathBuf);

impl SqliteDamage {
    fn run(&self, sql: &str, run_id: &str) {
        let conn = rusqlite::Connection::open(&self.0).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
        conn.execute(sql, [run_id]).unwrap();
    }
}

const KEY: &str = "(SELECT run_key FROM runs WHERE run_id = ?1)";

#[async_trait::async_trait]
impl Damage for SqliteDamage {
    async fn drop_journal(&self, run_id: &str) {
        self.run(&format!("DELETE FROM journal WHERE run_key = {KEY}"), run_id);
    }
    async fn cut_journal(&self, run_id: &str, keep: u64) {
        let sql = format!("DELETE FROM journal WHERE run_key = {KEY} AND seq >= {keep}");
        self.run(&sql, run_id);
    }
    async fn drop_row(&self, run_id: &str) {
        self.run("DELETE FROM runs WHERE run_id = ?1", run_id);
    }
    async fn garble_row(&self, run_id: &str) {
        self.run("UPDATE runs SET state = 'failed', input_tokens = 999 WHERE run_id = ?1", run_id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_sqlite_store_is_listed_truthfully_checked_and_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let store = agentloop::store::sqlite::SqliteStore::open(&path).unwrap();
    damaged_store(Arc::new(store), &SqliteDamage(path)).await;
}

#[cfg(feature = "redis")]
struct RedisDamage {
    url: String,
    prefix: String,
}

#[cfg(feature = "redis")]
impl RedisDamage {
    async fn conn(&self) -> ::redis::aio::MultiplexedConnection {
        let client = ::redis::Client::open(self.url.as_str()).unwrap();
        client.get_multiplexed_async_connection().await.unwrap()
    }
}

#[cfg(feature = "redis")]
#[async_trait::async_trait]
impl Damage for RedisDamage {
    async fn drop_journal(&self, run_id: &str) {
        let key = format!("{}run:{run_id}:journal", self.prefix);
        let _: i64 =
            ::redis::cmd("DEL").arg(key).query_async(&mut self.conn().await).await.unwrap();
    }
    async fn cut_journal(&self, run_id: &str, keep: u64) {
        let key = format!("{}run:{run_id}:journal", self.prefix);
        let _: () = ::redis::cmd("LTRIM")
            .arg(key)
            .arg(0)
            .arg(keep - 1)
            .query_async(&mut self.conn().await)
            .await
            .unwrap();
    }
    async fn drop_row(&self, run_id: &str) {
        let key = format!("{}run:{run_id}:meta", self.prefix);
        let _: i64 =
            ::redis::cmd("DEL").arg(key).query_async(&mut self.conn().await).await.unwrap();
    }
    async fn garble_row(&self, run_id: &str) {
        let key = format!("{}run:{run_id}:meta", self.prefix);
        let _: i64 = ::redis::cmd("HSET")
            .arg(key)
            .arg(&["state", "failed", "input_tokens", "999"])
            .query_async(&mut self.conn().await)
            .await
            .unwrap();
    }
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_redis_store_is_listed_truthfully_checked_and_repaired() {
    use agentloop::store::redis::{RedisOptions, RedisStore};
    let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") else {
        eprintln!("skipped: AGENTLOOP_REDIS_URL is not set (the Redis store is not tested)");
        return;
    };
    let prefix = format!("agentloop-test:{}:", uuid::Uuid::new_v4().simple());
    let options = RedisOptions::default().prefix(prefix.clone());
    let store = RedisStore::connect_with(&url, options).await.unwrap();
    let damage = RedisDamage { url: url.clone(), prefix: prefix.clone() };
    damaged_store(Arc::new(store), &damage).await;
    let mut conn = damage.conn().await;
    let left: Vec<String> =
        ::redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(&mut conn).await.unwrap();
    if !left.is_empty() {
        let _: i64 = ::redis::cmd("DEL").arg(&left).query_async(&mut conn).await.unwrap();
    }
    assert!(left.is_empty(), "the test deletes what it writes; left: {left:?}");
}
