//! One conformance suite, run against every store: the memory store, SQLite, and Redis (from
//! `AGENTLOOP_REDIS_URL`; skipped with a notice when it is unset). Each test gets a store of
//! its own (a new SQLite file, a unique Redis key prefix that is cleaned up afterwards).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::event::Event;
use agentloop::message::Message;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::run::{Decision, Outcome, Run, RunConfig, StopReason, SCHEMA_VERSION};
use agentloop::store::{
    ArtifactStore, JournalEntry, MemoryStore, NewArtifact, RunFilter, RunState, RunStore,
    SessionState, SessionStore, StoreError,
};
use agentloop::Agent;
use common::*;
use serde_json::json;
use std::future::Future;
use std::sync::Arc;

/// Every store kind at once.
trait AllStores: RunStore + SessionStore + ArtifactStore {
    /// The store as a run store (for a `RunService`).
    fn runs(self: Arc<Self>) -> Arc<dyn RunStore>;
}
impl<T: RunStore + SessionStore + ArtifactStore + 'static> AllStores for T {
    fn runs(self: Arc<Self>) -> Arc<dyn RunStore> {
        self
    }
}

type Stores = Arc<dyn AllStores>;

#[path = "store_conformance/registry.rs"]
mod registry_suite;
use registry_suite::{registry, registry_texts};

#[path = "store_conformance/outputs.rs"]
mod outputs_suite;

#[path = "store_conformance/batching.rs"]
mod batching;

#[path = "store_conformance/removal.rs"]
mod removal_suite;
use removal_suite::*;

fn run_id() -> String {
    format!("run-{}", uuid::Uuid::new_v4().simple())
}

fn started(run_id: &str, agent: &str, context: &str) -> Event {
    let mut config = RunConfig::default();
    config.agent = Some(agent.into());
    config.context_id = Some(context.into());
    Event::RunStarted {
        run_id: run_id.into(),
        config: Box::new(config),
        input: vec![Message::user("hi")],
    }
}

fn outcome(run_id: &str) -> Box<Outcome> {
    let mut outcome = Outcome::new(run_id, "hello", StopReason::Completed);
    outcome.iterations = 1;
    Box::new(outcome)
}

/// A whole small journal: started, one model turn, finished.
fn journal(run_id: &str) -> Vec<Event> {
    vec![
        started(run_id, "agent-a", "ctx-1"),
        Event::IterationStarted { iteration: 1, at_ms: 0 },
        Event::ModelRequested { iteration: 1, purpose: Default::default() },
        Event::ModelResponded {
            iteration: 1,
            message: Message::assistant("hello"),
            finish_reason: agentloop::message::FinishReason::Stop,
            usage: Default::default(),
            duration_ms: 3,
            response_id: None,
            response_model: None,
            provider: None,
        },
        Event::IterationCompleted { iteration: 1, duration_ms: 3 },
        Event::RunFinished { outcome: outcome(run_id) },
    ]
}

async fn append_and_load(store: Stores) {
    let id = run_id();
    assert_eq!(store.next_seq(&id).await.unwrap(), 0);
    assert!(store.load(&id).await.unwrap().is_empty(), "an unknown run has an empty journal");
    let events = journal(&id);
    let before = agentloop::store::now_ms();
    assert_eq!(store.append(&id, 0, &events[..2]).await.unwrap(), 2);
    assert_eq!(store.append(&id, 2, &events[2..]).await.unwrap(), 6);
    let after = agentloop::store::now_ms();
    let loaded = store.load(&id).await.unwrap();
    assert_eq!(loaded.len(), 6);
    for (index, entry) in loaded.iter().enumerate() {
        assert_eq!(entry.seq, index as u64, "dense 0-based seqs");
        assert_eq!(entry.schema_version, SCHEMA_VERSION);
        assert!(
            (before..=after).contains(&entry.at_ms),
            "{} not in {before}..={after}",
            entry.at_ms
        );
        assert_eq!(entry.event, events[index]);
    }
    assert_eq!(store.next_seq(&id).await.unwrap(), 6);
    let run = Run::from_journal(loaded.iter().map(|e| &*e.event)).unwrap();
    assert!(run.is_finished());
    assert_eq!(run.history().len(), 2);
    assert!(store.delete_run(&id).await.unwrap());
}

/// One append of 2,500 entries (an import, a copy between stores: more than one command's
/// worth on Redis) is stored whole and in order.
async fn a_long_append(store: Stores) {
    let id = run_id();
    let mut events = vec![started(&id, "importer", "")];
    events.extend((1..2_500).map(|n| Event::IterationStarted { iteration: n, at_ms: 0 }));
    assert_eq!(store.append(&id, 0, &events).await.unwrap(), 2_500);
    let loaded = store.load(&id).await.unwrap();
    assert_eq!(loaded.len(), 2_500);
    for (index, entry) in loaded.iter().enumerate() {
        assert_eq!((entry.seq, &*entry.event), (index as u64, &events[index]));
    }
    assert_eq!(store.append(&id, 2_500, &events[1..2]).await.unwrap(), 2_501);
    assert!(store.delete_run(&id).await.unwrap());
}

async fn stale_appends_conflict_and_write_nothing(store: Stores) {
    let id = run_id();
    let events = journal(&id);
    store.append(&id, 0, &events[..3]).await.unwrap();
    let error = store.append(&id, 0, &events[3..]).await.unwrap_err();
    assert_eq!(error, StoreError::Conflict { run_id: id.clone(), expected: 0, actual: 3 });
    assert!(error.to_string().contains("another writer appended first"), "{error}");
    let error = store.append(&id, 5, &events[3..]).await.unwrap_err();
    assert_eq!(error, StoreError::Conflict { run_id: id.clone(), expected: 5, actual: 3 });
    assert_eq!(store.load(&id).await.unwrap().len(), 3, "a conflict writes nothing");
    // Entries must continue the journal at the expected seq, without gaps.
    let gap = [
        JournalEntry::of(3, Event::Resumed).unwrap(),
        JournalEntry::of(5, Event::Resumed).unwrap(),
    ];
    assert!(matches!(store.append_entries(&id, 3, &gap).await, Err(StoreError::Invalid(_))));
    // A stream-only event has no place in a journal: the whole append is refused.
    let with_delta = [Event::Resumed, Event::TextDelta { delta: "Hel".into() }];
    let error = store.append(&id, 3, &with_delta).await.unwrap_err();
    assert!(error.to_string().contains("text_delta event is stream-only"), "{error}");
    assert_eq!(store.load(&id).await.unwrap().len(), 3, "a refused append writes nothing");
    assert_eq!(store.append(&id, 3, &events[3..]).await.unwrap(), 6);
    // An empty append checks the seq and writes nothing.
    assert_eq!(store.append(&id, 6, &[]).await.unwrap(), 6);
    assert!(matches!(store.append(&id, 2, &[]).await, Err(StoreError::Conflict { .. })));
    assert!(store.delete_run(&id).await.unwrap());
}

/// Two writers race to append at the same seq, 20 times: exactly one wins each time and the
/// journal holds whole batches only, never an interleaving.
async fn racing_writers(first: Stores, second: Stores) {
    let id = run_id();
    first.append(&id, 0, &journal(&id)[..1]).await.unwrap();
    let batch = |writer: usize, round: usize| -> Vec<Event> {
        (0..3).map(|i| Event::Paused { reason: format!("w{writer}-r{round}-{i}") }).collect()
    };
    let mut next = 1u64;
    for round in 0..20 {
        let tasks: Vec<_> = [first.clone(), second.clone()]
            .into_iter()
            .enumerate()
            .map(|(writer, store)| {
                let (id, events) = (id.clone(), batch(writer, round));
                tokio::spawn(async move { (writer, store.append(&id, next, &events).await) })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                (writer, Ok(n)) => {
                    assert_eq!(n, next + 3);
                    winners.push(writer);
                }
                (_, Err(StoreError::Conflict { expected, actual, .. })) => {
                    assert_eq!((expected, actual), (next, next + 3));
                }
                (_, Err(other)) => panic!("unexpected error: {other}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: exactly one writer wins");
        next += 3;
    }
    let loaded = store_events(&*first, &id).await;
    assert_eq!(loaded.len(), 61);
    for (round, block) in loaded[1..].chunks(3).enumerate() {
        let reasons: Vec<String> = block
            .iter()
            .map(|e| match e {
                Event::Paused { reason } => reason.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        let writer = &reasons[0][..2];
        let expected: Vec<String> = (0..3).map(|i| format!("{writer}-r{round}-{i}")).collect();
        assert_eq!(reasons, expected, "one writer's whole batch, in order");
    }
    assert!(first.delete_run(&id).await.unwrap());
}

fn entries(first: u64, events: &[Event]) -> Vec<JournalEntry> {
    (first..)
        .zip(events)
        .map(|(seq, event)| JournalEntry::of(seq, event.clone()).unwrap())
        .collect()
}

/// Claims, renewals, releases and fenced appends: a stale holder can neither renew nor write,
/// an expired lease is taken over, and epochs only grow.
async fn leases(store: Stores) {
    use std::time::Duration;
    let id = run_id();
    let long = Duration::from_secs(30);
    let events = journal(&id);
    let a = store.claim(&id, "a", long).await.unwrap();
    assert_eq!((a.epoch, a.owner.as_str(), a.run_id.as_str()), (1, "a", id.as_str()));
    let held = store.claim(&id, "b", long).await.unwrap_err();
    assert!(matches!(&held, StoreError::LeaseHeld { owner, .. } if owner == "a"), "{held}");
    assert_eq!(store.append_fenced(&a, 0, &entries(0, &events[..2])).await.unwrap(), 2);
    let a = store.renew(&a, long).await.unwrap();
    assert!(a.expires_at_ms > 0);
    store.release(&a).await.unwrap();
    let b = store.claim(&id, "b", Duration::from_millis(300)).await.unwrap();
    assert_eq!(b.epoch, 2, "released, then claimed: the epoch still grows");
    // `a` is fenced: no append, no renewal; its release changes nothing.
    let stale = store.append_fenced(&a, 2, &entries(2, &events[2..3])).await.unwrap_err();
    assert!(
        matches!(&stale, StoreError::LeaseLost { epoch: 1, current_epoch: 2, current_owner, .. } if current_owner == "b"),
        "{stale}"
    );
    assert!(matches!(store.renew(&a, long).await, Err(StoreError::LeaseLost { .. })));
    store.release(&a).await.unwrap();
    assert!(matches!(store.claim(&id, "c", long).await, Err(StoreError::LeaseHeld { .. })));
    // `b` stops renewing (its process died): once expired, `c` takes over and `b` is fenced.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let c = store.claim(&id, "c", long).await.unwrap();
    assert_eq!(c.epoch, 3);
    assert!(matches!(
        store.append_fenced(&b, 2, &entries(2, &events[2..3])).await,
        Err(StoreError::LeaseLost { .. })
    ));
    assert_eq!(store.append_fenced(&c, 2, &entries(2, &events[2..3])).await.unwrap(), 3);
    // A fenced append still checks the sequence number.
    assert!(matches!(
        store.append_fenced(&c, 2, &entries(2, &events[3..4])).await,
        Err(StoreError::Conflict { expected: 2, actual: 3, .. })
    ));
    assert_eq!(store.load(&id).await.unwrap().len(), 3, "refused appends wrote nothing");
    store.release(&c).await.unwrap();
    assert!(store.delete_run(&id).await.unwrap());
}

/// A journal's tail from a seq, and what is requested of a run's executor.
async fn tails_and_remote_control(store: Stores) {
    use agentloop::store::{ControlRequest, RemoteControl};
    let id = run_id();
    let events = journal(&id);
    store.append(&id, 0, &events).await.unwrap();
    let tail = store.load_from(&id, 4).await.unwrap();
    assert_eq!(tail.iter().map(|e| e.seq).collect::<Vec<_>>(), [4, 5]);
    assert_eq!(tail[0].event, events[4]);
    assert!(store.load_from(&id, 6).await.unwrap().is_empty());
    assert!(store.load_from(&id, 60).await.unwrap().is_empty());
    assert_eq!(store.load_from(&id, 0).await.unwrap(), store.load(&id).await.unwrap());
    assert_eq!(store.remote_control(&id).await.unwrap(), RemoteControl::default());
    let paused = store.request_control(&id, ControlRequest::Pause("p".into())).await.unwrap();
    assert_eq!(paused, RemoteControl { pause: Some("p".into()), ..RemoteControl::default() });
    store.request_control(&id, ControlRequest::Cancel("first".into())).await.unwrap();
    store.request_control(&id, ControlRequest::Cancel("second".into())).await.unwrap();
    let resumed = store.request_control(&id, ControlRequest::Resume).await.unwrap();
    let expected = RemoteControl { cancel: Some("first".into()), ..RemoteControl::default() };
    assert_eq!(resumed, expected, "the first cancel's reason wins; a resume ends the pause");
    assert_eq!(store.remote_control(&id).await.unwrap(), expected);
    assert!(store.delete_run(&id).await.unwrap());
    assert_eq!(store.remote_control(&id).await.unwrap(), RemoteControl::default());
}

/// 20 claims at once, 10 times: exactly one wins each time.
async fn racing_claims(store: Stores) {
    use std::time::Duration;
    for round in 0..10 {
        let id = run_id();
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let (store, id) = (store.clone(), id.clone());
                tokio::spawn(async move {
                    store.claim(&id, &format!("o{i}"), Duration::from_secs(30)).await
                })
            })
            .collect();
        let mut won = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                Ok(lease) => won.push(lease),
                Err(StoreError::LeaseHeld { .. }) => {}
                Err(other) => panic!("round {round}: {other}"),
            }
        }
        assert_eq!(won.len(), 1, "round {round}: exactly one claim wins");
        assert_eq!(won[0].epoch, 1);
        store.append_fenced(&won[0], 0, &entries(0, &journal(&id)[..1])).await.unwrap();
        assert!(store.delete_run(&id).await.unwrap());
    }
}

async fn store_events(store: &dyn AllStores, id: &str) -> Vec<Event> {
    store.load(id).await.unwrap().into_iter().map(|e| e.event.into_event()).collect()
}

/// Appends a journal with explicit times (the first entry's time is the run's creation).
async fn seed(store: &dyn AllStores, id: &str, created_ms: u64, events: Vec<Event>) {
    let entries: Vec<JournalEntry> = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| JournalEntry {
            seq: i as u64,
            at_ms: created_ms + i as u64,
            schema_version: SCHEMA_VERSION,
            event: event.try_into().unwrap(),
        })
        .collect();
    store.append_entries(id, 0, &entries).await.unwrap();
}

/// A listing paged with cursors: 25 runs (some created in the same millisecond) in pages of
/// 4, every run once, in the listing order; with a filter too.
async fn list_pages(store: Stores) {
    let agent = format!("pager-{}", uuid::Uuid::new_v4().simple());
    let mut ids = Vec::new();
    for i in 0..25u64 {
        let id = format!("{}-{i:02}", run_id());
        seed(
            &*store,
            &id,
            1_000 + i / 3,
            vec![started(&id, &agent, if i % 2 == 0 { "even" } else { "odd" })],
        )
        .await;
        ids.push((1_000 + i / 3, id));
    }
    ids.sort_by(|a, b| b.cmp(a));
    let expected: Vec<String> = ids.iter().map(|(_, id)| id.clone()).collect();
    for (context, size) in [(None, 4), (Some("even"), 3)] {
        let mut filter = RunFilter::all().agent(agent.clone()).limit(size);
        if let Some(context) = context {
            filter = filter.context_id(context);
        }
        let mut seen: Vec<String> = Vec::new();
        loop {
            let page = store.list_runs(&filter).await.unwrap();
            assert!(page.len() <= size);
            let Some(last) = page.last() else { break };
            filter = filter.after(last.cursor());
            seen.extend(page.iter().map(|r| r.run_id.clone()));
        }
        let want: Vec<String> = match context {
            None => expected.clone(),
            Some(_) => expected
                .iter()
                .filter(|id| id[id.len() - 2..].parse::<u64>().unwrap() % 2 == 0)
                .cloned()
                .collect(),
        };
        assert_eq!(seen, want, "context {context:?}");
    }
    for (_, id) in ids {
        assert!(store.delete_run(&id).await.unwrap());
    }
}

async fn list_filters(store: Stores) {
    let ids: Vec<String> = (1..=5).map(|i| format!("{}-{i}", run_id())).collect();
    let terminal = |i: usize| -> Option<Event> {
        let outcome = outcome(&ids[i]);
        match i {
            0 => Some(Event::RunFinished { outcome }),
            1 => None,
            2 => Some(Event::RunFailed { error: "boom".into(), outcome }),
            3 => Some(Event::RunSuspended { outcome }),
            _ => Some(Event::RunCancelled { reason: "stop".into(), outcome }),
        }
    };
    let specs = [("a", "c1"), ("a", "c2"), ("b", "c1"), ("b", "c2"), ("c", "c3")];
    for (i, (agent, context)) in specs.into_iter().enumerate() {
        let mut events = vec![started(&ids[i], agent, context), Event::Resumed];
        events.extend(terminal(i));
        seed(&*store, &ids[i], 1_000 * (i as u64 + 1), events).await;
    }
    let listed = |filter: RunFilter| {
        let store = store.clone();
        async move {
            store
                .list_runs(&filter)
                .await
                .unwrap()
                .into_iter()
                .map(|s| s.run_id)
                .collect::<Vec<_>>()
        }
    };
    let id = |i: usize| ids[i - 1].clone();
    assert_eq!(listed(RunFilter::all()).await, [id(5), id(4), id(3), id(2), id(1)]);
    assert_eq!(listed(RunFilter::all().agent("a")).await, [id(2), id(1)]);
    assert_eq!(listed(RunFilter::all().context_id("c1")).await, [id(3), id(1)]);
    assert_eq!(listed(RunFilter::all().state(RunState::Failed)).await, [id(3)]);
    assert_eq!(listed(RunFilter::all().state(RunState::Running)).await, [id(2)]);
    assert_eq!(listed(RunFilter::all().state(RunState::Suspended)).await, [id(4)]);
    assert_eq!(listed(RunFilter::all().state(RunState::Cancelled)).await, [id(5)]);
    assert_eq!(listed(RunFilter::all().created_between(2_000, 4_000)).await, [id(3), id(2)]);
    assert_eq!(listed(RunFilter::all().limit(2)).await, [id(5), id(4)]);
    assert_eq!(listed(RunFilter::all().agent("a").state(RunState::Finished)).await, [id(1)]);
    assert!(listed(RunFilter::all().agent("nobody")).await.is_empty());
    let summary = store.list_runs(&RunFilter::all().agent("a").limit(1)).await.unwrap().remove(0);
    assert_eq!(summary.run_id, id(2));
    assert_eq!(summary.agent.as_deref(), Some("a"));
    assert_eq!(summary.context_id.as_deref(), Some("c2"));
    assert_eq!((summary.created_ms, summary.updated_ms, summary.entries), (2_000, 2_001, 2));
    // A suspended run that continues is running again; its end is what the state follows.
    let next = store.next_seq(&id(4)).await.unwrap();
    let decided =
        Event::ApprovalDecided { call_id: "c".into(), decision: Decision::Approve, by: None };
    store.append(&id(4), next, &[decided]).await.unwrap();
    assert_eq!(listed(RunFilter::all().state(RunState::Running)).await, [id(4), id(2)]);
    let finished = Event::RunFinished { outcome: outcome(&id(4)) };
    store.append(&id(4), next + 1, &[finished]).await.unwrap();
    assert_eq!(listed(RunFilter::all().state(RunState::Finished)).await, [id(4), id(1)]);
    for id in &ids {
        assert!(store.delete_run(id).await.unwrap());
    }
}

async fn delete_runs(store: Stores) {
    let (id, other) = (run_id(), run_id());
    store.append(&id, 0, &journal(&id)).await.unwrap();
    store.append(&other, 0, &journal(&other)).await.unwrap();
    assert!(store.delete_run(&id).await.unwrap());
    assert!(!store.delete_run(&id).await.unwrap(), "deleting twice finds nothing");
    assert!(store.load(&id).await.unwrap().is_empty());
    assert_eq!(store.next_seq(&id).await.unwrap(), 0);
    let listed: Vec<String> =
        store.list_runs(&RunFilter::all()).await.unwrap().into_iter().map(|s| s.run_id).collect();
    assert_eq!(listed, std::slice::from_ref(&other));
    assert_eq!(store.load(&other).await.unwrap().len(), 6, "other runs are untouched");
    // The id can be used again from seq 0.
    assert_eq!(store.append(&id, 0, &journal(&id)[..1]).await.unwrap(), 1);
    assert!(store.delete_run(&id).await.unwrap());
    assert!(store.delete_run(&other).await.unwrap());
}

async fn unknown_schema_versions_are_rejected(store: Stores) {
    let id = run_id();
    store.append(&id, 0, &journal(&id)[..1]).await.unwrap();
    let future = JournalEntry {
        seq: 1,
        at_ms: 1,
        schema_version: 99,
        event: Event::Resumed.try_into().unwrap(),
    };
    store.append_entries(&id, 1, &[future]).await.unwrap();
    let error = store.load(&id).await.unwrap_err();
    assert_eq!(
        error,
        StoreError::UnsupportedSchema {
            run_id: id.clone(),
            seq: 1,
            found: 99,
            supported: SCHEMA_VERSION
        }
    );
    assert!(error.to_string().contains("schema version 99 is not supported"), "{error}");
    assert!(store.delete_run(&id).await.unwrap());
}

async fn artifacts(store: Stores) {
    let (run, other) = (run_id(), run_id());
    let new = |run_id, name, data| NewArtifact { run_id, name, media_type: "text/plain", data };
    let report = store.create_artifact(new(&run, "report.txt", b"hello ")).await.unwrap();
    assert_eq!((report.size, report.chunks, report.name.as_str()), (6, 1, "report.txt"));
    let grown = store.append_chunk(&report.id, b"world").await.unwrap();
    assert_eq!((grown.size, grown.chunks), (11, 2));
    assert!(grown.updated_ms >= report.created_ms);
    let got = store.get_artifact(&report.id).await.unwrap().unwrap();
    assert_eq!(got.data, b"hello world");
    assert_eq!(got.meta, grown);

    // Many chunks, binary, from empty.
    let log = store.create_artifact(new(&run, "log.bin", b"")).await.unwrap();
    assert_eq!((log.size, log.chunks), (0, 0));
    let mut expected = Vec::new();
    for i in 0..100u8 {
        let chunk: Vec<u8> = (0..=255u8).map(|b| b ^ i).collect();
        expected.extend_from_slice(&chunk);
        store.append_chunk(&log.id, &chunk).await.unwrap();
    }
    let got = store.get_artifact(&log.id).await.unwrap().unwrap();
    assert_eq!((got.meta.size, got.meta.chunks), (25_600, 100));
    assert_eq!(got.data, expected);

    let elsewhere = store.create_artifact(new(&other, "x", b"x")).await.unwrap();
    let names: Vec<String> =
        store.list_artifacts(&run).await.unwrap().into_iter().map(|m| m.name).collect();
    assert_eq!(names, ["report.txt", "log.bin"], "a run's artifacts, oldest first");
    assert_eq!(store.list_artifacts(&other).await.unwrap(), std::slice::from_ref(&elsewhere));

    assert!(store.delete_artifact(&report.id).await.unwrap());
    assert!(!store.delete_artifact(&report.id).await.unwrap());
    assert!(store.get_artifact(&report.id).await.unwrap().is_none());
    let error = store.append_chunk(&report.id, b"late").await.unwrap_err();
    assert_eq!(error, StoreError::NotFound { what: "artifact", id: report.id.clone() });
    assert_eq!(store.list_artifacts(&run).await.unwrap().len(), 1);
    assert!(store.delete_artifact(&log.id).await.unwrap());
    assert!(store.delete_artifact(&elsewhere.id).await.unwrap());
    assert!(store.list_artifacts(&run).await.unwrap().is_empty());
}

async fn sessions(store: Stores) {
    let ctx = format!("ctx-{}", uuid::Uuid::new_v4().simple());
    assert!(store.get_session(&ctx).await.unwrap().is_none());
    let info = store.open_session(&ctx).await.unwrap();
    assert_eq!(
        (info.state, info.turns, info.messages, info.run_id.clone()),
        (SessionState::Created, 0, 0, None)
    );
    assert_eq!(store.open_session(&ctx).await.unwrap(), info, "opening again changes nothing");

    assert!(store.begin_turn(&ctx, "r1").await.unwrap().is_empty());
    let busy = store.get_session(&ctx).await.unwrap().unwrap();
    assert_eq!((busy.state, busy.run_id.as_deref()), (SessionState::Busy, Some("r1")));
    let error = store.begin_turn(&ctx, "r2").await.unwrap_err();
    assert_eq!(error, StoreError::SessionBusy { context_id: ctx.clone(), run_id: "r1".into() });
    assert!(error.to_string().contains("is busy with run 'r1'"), "{error}");
    let error = store.end_turn(&ctx, "r2", &[]).await.unwrap_err();
    assert!(matches!(error, StoreError::NotInTurn { state: SessionState::Busy, .. }), "{error}");

    let turn = [Message::user("I am Ada."), Message::assistant("Hi Ada!")];
    let ready = store.end_turn(&ctx, "r1", &turn).await.unwrap();
    assert_eq!((ready.state, ready.turns, ready.messages), (SessionState::Ready, 1, 2));
    assert!(matches!(
        store.end_turn(&ctx, "r1", &[]).await,
        Err(StoreError::NotInTurn { state: SessionState::Ready, .. })
    ));
    assert_eq!(store.begin_turn(&ctx, "r2").await.unwrap(), turn, "the history so far");
    let more = [Message::user("Name?"), Message::assistant("Ada.")];
    let info = store.end_turn(&ctx, "r2", &more).await.unwrap();
    assert_eq!((info.turns, info.messages, info.run_id.as_deref()), (2, 4, Some("r2")));
    assert_eq!(store.session_messages(&ctx).await.unwrap(), [&turn[..], &more[..]].concat());
    // A turn that ends without messages (failed, cancelled) keeps the history.
    store.begin_turn(&ctx, "r3").await.unwrap();
    let info = store.end_turn(&ctx, "r3", &[]).await.unwrap();
    assert_eq!((info.state, info.turns, info.messages), (SessionState::Ready, 3, 4));

    // Two turns racing for a ready session: exactly one begins.
    let racers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|run| {
            let (store, ctx) = (store.clone(), ctx.clone());
            tokio::spawn(async move { store.begin_turn(&ctx, run).await })
        })
        .collect();
    let mut begun = 0;
    for racer in racers {
        match racer.await.unwrap() {
            Ok(history) => {
                assert_eq!(history.len(), 4);
                begun += 1;
            }
            Err(StoreError::SessionBusy { .. }) => {}
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!(begun, 1);

    assert!(store.delete_session(&ctx).await.unwrap());
    assert!(!store.delete_session(&ctx).await.unwrap());
    assert!(store.session_messages(&ctx).await.unwrap().is_empty());
    assert!(store.get_session(&ctx).await.unwrap().is_none());
}

/// An agent with the store journals its run: each durable event, then `checkpointed`.
async fn an_agent_journals_its_runs(store: Stores) {
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("add", json!({"a": 2, "b": 3})),
        ScriptedTurn::text("5"),
    ]);
    let agent = Agent::builder(model).name("adder").tool(Add).store(store.clone()).build().unwrap();
    let events = collect(agent.run_stream("2+3?")).await;
    let run_id = common::outcome(&events[..events.len() - 1]).run_id;
    let durable: Vec<Event> = events.iter().filter(|e| e.is_durable()).cloned().collect();
    let mut seq = 0;
    for (index, event) in events.iter().enumerate() {
        if event.is_durable() {
            assert_eq!(events[index + 1], Event::Checkpointed { seq }, "after {}", event.kind());
            seq += 1;
        }
    }
    assert_eq!(store_events(&*store, &run_id).await, durable);
    let summary = store.list_runs(&RunFilter::all().agent("adder")).await.unwrap().remove(0);
    assert_eq!((summary.state, summary.entries), (RunState::Finished, durable.len() as u64));
    assert!(store.delete_run(&run_id).await.unwrap());
}

/// Runs one suite function against a fresh store of each kind.
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod memory {
            use super::{Arc, MemoryStore};
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::$name(Arc::new(MemoryStore::new())).await;
            })*
        }
        #[cfg(feature = "sqlite")]
        mod sqlite {
            use super::Arc;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let dir = tempfile::tempdir().unwrap();
                let store = agentloop::store::sqlite::SqliteStore::open(dir.path().join("a.db")).unwrap();
                super::$name(Arc::new(store)).await;
            })*
        }
        #[cfg(feature = "redis")]
        mod redis {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::with_redis(|store| super::$name(store)).await;
            })*
        }
    };
}

conformance!(
    append_and_load,
    a_long_append,
    stale_appends_conflict_and_write_nothing,
    racing,
    list_filters,
    delete_runs,
    unknown_schema_versions_are_rejected,
    artifacts,
    sessions,
    an_agent_journals_its_runs,
    leases,
    racing_claims,
    tails_and_remote_control,
    list_pages,
    registry,
    registry_texts,
    many_runs_at_once,
    delete_removes_everything_a_run_owns,
    delete_refuses_a_live_lease,
    prune_by_age_and_state,
    prune_racing_a_running_run,
    check_finds_nothing_on_a_healthy_store,
);

/// 200 runs append their journals an event at a time, all at once (on SQLite, through one
/// writer that commits them in groups), each append raced by a stale one: every run ends
/// with exactly its journal, dense, and every stale append is refused.
async fn many_runs_at_once(store: Stores) {
    let ids: Vec<String> = (0..200).map(|_| run_id()).collect();
    let before = store.write_stats();
    let writes = ids.iter().map(|id| {
        let store = store.clone();
        async move {
            let events = journal(id);
            store.append(id, 0, &events[..1]).await.unwrap();
            for (seq, event) in (1u64..).zip(&events[1..]) {
                let one = std::slice::from_ref(event);
                let stale = store.append(id, seq - 1, one);
                let (written, stale) = futures::join!(store.append(id, seq, one), stale);
                assert_eq!(written.unwrap(), seq + 1);
                assert!(matches!(stale, Err(StoreError::Conflict { .. })), "{stale:?}");
            }
        }
    });
    futures::future::join_all(writes).await;
    // The store's counts: every committed append (6 per run: the first and 5
    // alone), none of the refused ones, and at most one commit per append.
    let written = store.write_stats().unwrap().since(before.unwrap());
    assert_eq!((written.appends, written.entries), (1_200, 1_200), "{written:?}");
    assert!((1..=1_200).contains(&written.commits), "{written:?}");
    for id in &ids {
        let loaded = store.load(id).await.unwrap();
        let events: Vec<Event> = loaded.iter().map(|entry| (*entry.event).clone()).collect();
        assert_eq!(events, journal(id), "run {id}");
        assert!(store.delete_run(id).await.unwrap());
    }
}

/// Two writers on one store.
async fn racing(store: Stores) {
    racing_writers(store.clone(), store).await;
}

/// Two processes' worth of SQLite: two stores (two connections) on one file.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_writers_on_two_connections_never_interleave() {
    use agentloop::store::sqlite::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let (first, second) = (SqliteStore::open(&path).unwrap(), SqliteStore::open(&path).unwrap());
    assert_eq!(first.schema_version().await.unwrap(), 8, "migrations ran once");
    racing_writers(Arc::new(first), Arc::new(second)).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_creates_its_directory_and_reopens_its_file() {
    use agentloop::store::sqlite::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("deeper").join("agentloop.db");
    let id = run_id();
    {
        let store = SqliteStore::open(&path).unwrap();
        store.append(&id, 0, &journal(&id)).await.unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.schema_version().await.unwrap(), 8);
    assert_eq!(store.load(&id).await.unwrap().len(), 6, "the journal survived the reopen");
    assert_eq!(agentloop::store::sqlite::DEFAULT_PATH, ".agentloop/agentloop.db");
}

/// Runs `body` against a Redis store under a unique key prefix, then checks that the suite
/// deleted what it wrote and removes any leftover key.
#[cfg(feature = "redis")]
async fn with_redis<F, Fut>(body: F)
where
    F: FnOnce(Stores) -> Fut,
    Fut: Future<Output = ()>,
{
    use agentloop::store::redis::{RedisOptions, RedisStore};
    let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") else {
        eprintln!("skipped: AGENTLOOP_REDIS_URL is not set (the Redis store is not tested)");
        return;
    };
    let prefix = format!("agentloop-test:{}:", uuid::Uuid::new_v4().simple());
    let options = RedisOptions::default().prefix(prefix.clone());
    let store = RedisStore::connect_with(&url, options).await.unwrap();
    body(Arc::new(store)).await;
    let client = ::redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let left: Vec<String> =
        ::redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(&mut conn).await.unwrap();
    if !left.is_empty() {
        let _: i64 = ::redis::cmd("DEL").arg(&left).query_async(&mut conn).await.unwrap();
    }
    assert!(left.is_empty(), "the suite deletes what it writes; left: {left:?}");
}

#[cfg(not(feature = "redis"))]
#[allow(dead_code)]
async fn with_redis<F, Fut>(_body: F)
where
    F: FnOnce(Stores) -> Fut,
    Fut: Future<Output = ()>,
{
}

#[path = "store_conformance/ttl.rs"]
mod ttl;
