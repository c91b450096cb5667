#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::event::Event;
use crate::store::sqlite::{SqliteOptions, SqliteStore};
use crate::store::{RunStore, StoreError};
use std::sync::Arc;

fn event(seq: u64) -> Event {
    if seq == 0 {
        Event::RunStarted { run_id: "r".into(), config: Box::default(), input: Vec::new() }
    } else {
        Event::IterationStarted { iteration: u32::try_from(seq).unwrap(), at_ms: seq }
    }
}

/// `runs` runs of `events` appends each, every run a task of the current runtime, all at once.
async fn append_from_tasks(store: &Arc<SqliteStore>, prefix: &str, runs: u64, events: u64) {
    let mut tasks = tokio::task::JoinSet::new();
    for run in 0..runs {
        let (store, run_id) = (store.clone(), format!("{prefix}-{run}"));
        tasks.spawn(async move {
            for seq in 0..events {
                let next = RunStore::append(&*store, &run_id, seq, &[event(seq)]).await.unwrap();
                assert_eq!(next, seq + 1);
            }
            let claimed = store.claim(&run_id, "me", std::time::Duration::from_secs(9)).await;
            store.release(&claimed.unwrap()).await.unwrap();
            // A job of another kind (run alone on the connection thread).
            assert_eq!(store.next_seq(&run_id).await.unwrap(), events);
            run_id
        });
    }
    while let Some(run_id) = tasks.join_next().await {
        let journal = store.load(&run_id.unwrap()).await.unwrap();
        assert_eq!(journal.len() as u64, events);
    }
}

/// The runtimes the store has a courier for.
fn couriers(store: &SqliteStore) -> usize {
    let couriers = store.couriers.as_ref().unwrap();
    couriers.0.lock().unwrap().iter().filter(|(_, c)| !c.0.is_closed()).count()
}

fn open(dir: &tempfile::TempDir) -> Arc<SqliteStore> {
    Arc::new(SqliteStore::open(dir.path().join("runs.db")).unwrap())
}

/// Tasks of a runtime get their answers (appends, claims, releases) through its one
/// courier; a caller that is no task (the future `block_on` polls) is answered directly.
#[tokio::test]
async fn a_runtime_s_tasks_are_answered_by_its_courier() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    RunStore::append(&*store, "direct", 0, &[event(0)]).await.unwrap();
    assert_eq!(couriers(&store), 0, "block_on's future is answered directly");
    append_from_tasks(&store, "task", 40, 6).await;
    assert_eq!(couriers(&store), 1);
    // A refused append's error comes the same way.
    let refused = {
        let store = store.clone();
        tokio::spawn(async move { RunStore::append(&*store, "task-0", 2, &[event(2)]).await })
    };
    let refused = refused.await.unwrap();
    assert!(matches!(refused, Err(StoreError::Conflict { expected: 2, actual: 6, .. })));
}

/// Runtimes that share a store each have their courier; one shut down leaves the others
/// answered, and a runtime started after it gets a courier of its own.
#[test]
fn runtimes_sharing_a_store_are_each_answered() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let on_runtime = |prefix: &'static str, multi_thread: bool| {
        let store = store.clone();
        std::thread::spawn(move || {
            let runtime = if multi_thread {
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).build()
            } else {
                tokio::runtime::Builder::new_current_thread().build()
            };
            runtime.unwrap().block_on(append_from_tasks(&store, prefix, 20, 4));
        })
    };
    let (first, second) = (on_runtime("a", false), on_runtime("b", true));
    first.join().unwrap();
    second.join().unwrap();
    assert_eq!(couriers(&store), 0, "both runtimes are gone, and their couriers with them");
    on_runtime("c", false).join().unwrap();
    let runs = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async { store.list_runs(&crate::store::RunFilter::default()).await.unwrap() });
    assert_eq!(runs.len(), 60);
}

/// Without `wake_per_batch` the connection thread answers every caller itself.
#[tokio::test]
async fn without_wake_per_batch_there_are_no_couriers() {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions { wake_per_batch: false, ..SqliteOptions::default() };
    let store = Arc::new(SqliteStore::open_with(dir.path().join("runs.db"), options).unwrap());
    append_from_tasks(&store, "task", 10, 3).await;
    assert!(store.couriers.is_none());
}

/// Answers for a courier whose runtime is gone are given directly.
#[test]
fn answers_for_a_courier_that_is_gone_are_given_directly() {
    use super::super::{Done, Op, Release};
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    drop(receiver);
    let gone = super::Courier(sender);
    let (reply, mut answer) = tokio::sync::oneshot::channel();
    let lease =
        crate::store::Lease { run_id: "r".into(), owner: "me".into(), epoch: 1, expires_at_ms: 0 };
    let release = Release { lease, reply, courier: Some(gone.clone()) };
    super::deliver(std::iter::once((Op::Release(Box::new(release)), Ok(Done::Released))));
    assert!(matches!(answer.try_recv(), Ok(Ok(()))));
    let (reply, mut answer) = tokio::sync::oneshot::channel();
    gone.reply(Box::new(move || {
        let _ = reply.send(7);
    }));
    assert_eq!(answer.try_recv().unwrap(), 7);
}
