//! Deleting and pruning runs through the run service, and the registry check, against every
//! store: a run goes with everything it owns and its sub-agent runs, all together; a live
//! lease refuses a delete and makes a prune skip the run; a prune racing a running run never
//! shows a run half removed.

use super::*;
use agentloop::service::{PruneOptions, RunService, ServiceError};
use agentloop::store::{now_ms, ControlRequest, RemoteControl};
use std::time::Duration;

const DAY_MS: u64 = 86_400_000;

/// `run_started` of a run of `agent` in session `context`, started by `parent`.
fn started_by(id: &str, context: &str, parent: Option<&str>) -> Event {
    let mut config = RunConfig::default();
    config.agent = Some("remover".into());
    config.context_id = Some(context.into());
    config.parent_run_id = parent.map(str::to_owned);
    Event::RunStarted {
        run_id: id.into(),
        config: Box::new(config),
        input: vec![Message::user("hi")],
    }
}

/// A finished journal of a run started by `parent`.
fn finished_by(id: &str, context: &str, parent: Option<&str>) -> Vec<Event> {
    let mut events = journal(id);
    events[0] = started_by(id, context, parent);
    events
}

fn service(store: &Stores) -> RunService {
    RunService::new(store.clone().runs())
}

/// Deleting a run removes its journal, row, lease, controls and artifacts, releases its
/// session, and takes its sub-agent runs (and theirs) with it; other runs stay.
pub(super) async fn delete_removes_everything_a_run_owns(store: Stores) {
    let (parent, child, grandchild, other) = (run_id(), run_id(), run_id(), run_id());
    let context = format!("ctx-{}", uuid::Uuid::new_v4().simple());
    let lease = store.claim(&parent, "executor", Duration::from_secs(30)).await.unwrap();
    store.begin_turn(&context, &parent).await.unwrap();
    let events = finished_by(&parent, &context, None);
    store.append_fenced(&lease, 0, &entries(0, &events)).await.unwrap();
    store.release(&lease).await.unwrap();
    store.append(&child, 0, &finished_by(&child, "c2", Some(&parent))).await.unwrap();
    store.append(&grandchild, 0, &finished_by(&grandchild, "c3", Some(&child))).await.unwrap();
    store.append(&other, 0, &journal(&other)).await.unwrap();
    let new =
        NewArtifact { run_id: &parent, name: "out.txt", media_type: "text/plain", data: b"x" };
    let artifact = store.create_artifact(new).await.unwrap();
    let new = NewArtifact { run_id: &child, name: "o.txt", media_type: "text/plain", data: b"y" };
    store.create_artifact(new).await.unwrap();
    store.request_control(&parent, ControlRequest::Cancel("stop".into())).await.unwrap();

    let service = service(&store);
    let deleted = service.delete(&parent).await.unwrap();
    assert_eq!(deleted, [parent.clone(), child.clone(), grandchild.clone()], "the run first");
    for id in &deleted {
        assert!(store.load(id).await.unwrap().is_empty(), "{id}: its journal is gone");
        assert_eq!(store.next_seq(id).await.unwrap(), 0);
        assert!(store.list_artifacts(id).await.unwrap().is_empty(), "{id}: its artifacts");
        assert_eq!(store.remote_control(id).await.unwrap(), RemoteControl::default());
    }
    assert!(store.get_artifact(&artifact.id).await.unwrap().is_none());
    let listed: Vec<String> =
        store.list_runs(&RunFilter::all()).await.unwrap().into_iter().map(|s| s.run_id).collect();
    assert_eq!(listed, std::slice::from_ref(&other), "only the other run is left");
    assert!(store.list_runs(&RunFilter::all().parent_run_id(&parent)).await.unwrap().is_empty());
    let session = store.get_session(&context).await.unwrap().unwrap();
    assert_eq!((session.state, session.run_id), (SessionState::Ready, None), "released");
    // Its lease went too: a new claim starts the epochs again.
    let again = store.claim(&parent, "later", Duration::from_secs(1)).await.unwrap();
    assert_eq!(again.epoch, 1);
    store.release(&again).await.unwrap();
    let error = service.delete(&parent).await.unwrap_err();
    assert!(matches!(&error, ServiceError::NotFound(id) if id == &parent), "{error}");
    assert_eq!(store.load(&other).await.unwrap().len(), 6, "the other run is untouched");
    assert!(service.check().await.unwrap().is_clean());
    service.delete(&other).await.unwrap();
    store.delete_session(&context).await.unwrap();
    // The last claim wrote a lease record: a run with a journal again, deleted with it.
    store.append(&parent, 0, &journal(&parent)[..1]).await.unwrap();
    service.delete(&parent).await.unwrap();
}

/// A run whose sub-agent run is being executed cannot be deleted: the error names that run,
/// its executor and the lease's expiry, and nothing is removed.
pub(super) async fn delete_refuses_a_live_lease(store: Stores) {
    let (parent, child) = (run_id(), run_id());
    store.append(&parent, 0, &finished_by(&parent, "c1", None)).await.unwrap();
    let lease = store.claim(&child, "busy-executor", Duration::from_secs(30)).await.unwrap();
    let first = entries(0, &[started_by(&child, "c2", Some(&parent))]);
    store.append_fenced(&lease, 0, &first).await.unwrap();
    let service = service(&store);
    let error = service.delete(&parent).await.unwrap_err();
    match &error {
        ServiceError::LeaseLive { run_id, held, owner, expires_in_ms } => {
            assert_eq!((run_id, held, owner.as_str()), (&parent, &child, "busy-executor"));
            assert!((1..=30_000).contains(expires_in_ms), "{expires_in_ms}");
        }
        other => panic!("{other}"),
    }
    let text = error.to_string();
    assert!(text.contains("is being executed by 'busy-executor'"), "{text}");
    assert!(text.contains("lease expires in"), "{text}");
    assert_eq!(store.load(&parent).await.unwrap().len(), 6, "nothing was removed");
    assert_eq!(store.load(&child).await.unwrap().len(), 1);
    assert!(matches!(service.delete(&child).await, Err(ServiceError::LeaseLive { .. })));
    store.release(&lease).await.unwrap();
    assert_eq!(service.delete(&parent).await.unwrap(), [parent.clone(), child.clone()]);
}

/// A prune removes the ended runs past the age (a batch at a time), with their sub-agent
/// runs, and skips the recent, the running and the live ones.
pub(super) async fn prune_by_age_and_state(store: Stores) {
    let old = now_ms() - 40 * DAY_MS;
    let ids: Vec<String> = (0..8).map(|_| run_id()).collect();
    let [f1, f2, f3, child, failed, running, recent, live] = <[String; 8]>::try_from(ids).unwrap();
    for id in [&f1, &f2, &f3] {
        seed(&*store, id, old, journal(id)).await;
    }
    seed(&*store, &child, old + 10, finished_by(&child, "c", Some(&f1))).await;
    let failure = Event::RunFailed { error: "boom".into(), outcome: outcome(&failed) };
    seed(&*store, &failed, old, vec![started(&failed, "a", "c"), failure]).await;
    seed(&*store, &running, old, vec![started(&running, "a", "c"), Event::Resumed]).await;
    seed(&*store, &recent, now_ms() - 1_000, journal(&recent)).await;
    seed(&*store, &live, old, journal(&live)).await;
    let lease = store.claim(&live, "executor", Duration::from_secs(30)).await.unwrap();

    let service = service(&store);
    let month = Duration::from_secs(30 * 86_400);
    let report = service.prune(&PruneOptions::older_than(month).batch(2)).await.unwrap();
    assert_eq!((report.removed, report.skipped_live), (5, 1), "{report:?}");
    assert!(report.batches >= 3, "{report:?}");
    let mut left: Vec<String> =
        store.list_runs(&RunFilter::all()).await.unwrap().into_iter().map(|s| s.run_id).collect();
    left.sort();
    let mut expected = vec![running.clone(), recent.clone(), live.clone()];
    expected.sort();
    assert_eq!(left, expected);
    let only_running = PruneOptions::older_than(month).states([RunState::Running]);
    let report = service.prune(&only_running).await.unwrap();
    assert_eq!((report.removed, report.skipped_live), (1, 0), "{report:?}");
    store.release(&lease).await.unwrap();
    let report = service.prune(&PruneOptions::older_than(month)).await.unwrap();
    assert_eq!(report.removed, 1, "the live run once released: {report:?}");
    assert!(service.check().await.unwrap().is_clean());
    service.delete(&recent).await.unwrap();
}

/// A prune races a run that is being executed (its lease live, its journal growing, its
/// entries as old as the pruned ones): the run is skipped and its journal stays whole, and a
/// reader listing and loading runs throughout never sees a run half removed.
pub(super) async fn prune_racing_a_running_run(store: Stores) {
    let old = now_ms() - 40 * DAY_MS;
    let ids: Vec<String> = (0..60).map(|_| run_id()).collect();
    for id in &ids {
        seed(&*store, id, old, journal(id)).await;
    }
    let running = run_id();
    let lease = store.claim(&running, "executor", Duration::from_secs(60)).await.unwrap();
    let stamp = move |seq: u64, event: Event| JournalEntry {
        seq,
        at_ms: old + seq,
        schema_version: SCHEMA_VERSION,
        event: event.try_into().unwrap(),
    };
    let first = [stamp(0, started(&running, "a", "c")), stamp(1, Event::Resumed)];
    store.append_fenced(&lease, 0, &first).await.unwrap();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (store, lease, done) = (store.clone(), lease.clone(), done.clone());
        tokio::spawn(async move {
            let mut seq = 2;
            while !done.load(std::sync::atomic::Ordering::SeqCst) || seq < 30 {
                let batch = [stamp(seq, Event::Paused { reason: format!("p{seq}") })];
                store.append_fenced(&lease, seq, &batch).await.unwrap();
                seq += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            seq
        })
    };
    let reader = {
        let (store, done, running) = (store.clone(), done.clone(), running.clone());
        tokio::spawn(async move {
            let mut reads = 0;
            // At least one pass, however soon the prune ends.
            loop {
                let last = done.load(std::sync::atomic::Ordering::SeqCst);
                for run in store.list_runs(&RunFilter::all().limit(15)).await.unwrap() {
                    let loaded = store.load(&run.run_id).await.unwrap();
                    let n = loaded.len() as u64;
                    assert!(n == 0 || n >= run.entries, "{}: {n} of {}", run.run_id, run.entries);
                    if run.run_id != running && n > 0 {
                        assert_eq!(n, 6, "a pruned run is whole or gone");
                    }
                    reads += 1;
                }
                if last {
                    break reads;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    let service = service(&store);
    let month = Duration::from_secs(30 * 86_400);
    let options =
        PruneOptions::older_than(month).states([RunState::Finished, RunState::Running]).batch(7);
    let report = service.prune(&options).await.unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let written = writer.await.unwrap();
    assert!(reader.await.unwrap() > 0);
    assert_eq!(report.removed, 60, "{report:?}");
    assert!(report.skipped_live >= 1, "the running run was skipped: {report:?}");
    let journal = store.load(&running).await.unwrap();
    assert_eq!(journal.len() as u64, written, "its journal is whole");
    assert!(journal.iter().enumerate().all(|(i, e)| e.seq == i as u64));
    for id in &ids {
        assert!(store.load(id).await.unwrap().is_empty());
    }
    store.release(&lease).await.unwrap();
    service.delete(&running).await.unwrap();
}

/// On a store that only its own code wrote, the registry agrees with every journal.
pub(super) async fn check_finds_nothing_on_a_healthy_store(store: Stores) {
    let (parent, child) = (run_id(), run_id());
    store.append(&parent, 0, &journal(&parent)).await.unwrap();
    store.append(&child, 0, &finished_by(&child, "c", Some(&parent))).await.unwrap();
    let service = service(&store);
    let report = service.check().await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!((report.checked, report.live), (2, 0));
    service.delete(&parent).await.unwrap();
}
