//! Journaled runs in one process: resuming from every possible cut of a journal, deferred
//! approvals across a restart, a failing store, two resumers racing.
#![cfg(feature = "sqlite")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::AskHuman;

use agentloop::message::Role;
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::run::Run;
use agentloop::store::MemoryStore;
use agentloop::store::RunStore;
use agentloop::store::StoreError;
use agentloop::store::{JournalEntry, Lease, RunFilter, RunState, RunSummary};
use agentloop::EventStream;
use agentloop::ResumeError;
use async_trait::async_trait;
use common::*;
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn turns() -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::tool_call("probe", json!({"ms": 1, "tag": "a"}))
            .with_call_id("call_a")
            .with_tool_call("add", json!({"a": 1, "b": 2}))
            .with_call_id("call_b")
            .with_text("Two things first."),
        ScriptedTurn::tool_call("probe", json!({"ms": 1, "tag": "c"})).with_call_id("call_c"),
        ScriptedTurn::text("a, 3 and c."),
    ]
}

fn agent(model: ScriptedModel, probe: &Probe, store: Arc<dyn RunStore>) -> Agent {
    Agent::builder(model)
        .tool(Add)
        .tool(probe.clone())
        .tool_concurrency(1)
        .store(store)
        .build()
        .unwrap()
}

fn events_of(journal: &[JournalEntry]) -> Vec<Event> {
    journal.iter().map(|e| e.event.event().clone()).collect()
}

/// Kinds without the `tool_started` of attempts that never finished.
fn shape(journal: &[Event]) -> Vec<&'static str> {
    let mut out = Vec::new();
    for (index, event) in journal.iter().enumerate() {
        if let Event::ToolStarted { call, .. } = event {
            let again = journal[index + 1..]
                .iter()
                .any(|e| matches!(e, Event::ToolStarted { call: c, .. } if c.id == call.id));
            if again {
                continue;
            }
        }
        out.push(event.kind());
    }
    out
}

/// A crash after any journal entry: resuming gives the same run, and only the calls without
/// a journaled result run again, with their idempotency keys.
#[tokio::test]
async fn a_run_resumes_from_every_cut_of_its_journal() {
    let store = Arc::new(MemoryStore::new());
    let probe = Probe::default();
    let clean_agent = agent(ScriptedModel::new(turns()), &probe, store.clone());
    let options = RunOptions { run_id: Some("run_cut".into()), ..RunOptions::default() };
    let clean_outcome = outcome_of_stream(clean_agent.run_stream_with("go", options)).await;
    let clean = store.load("run_cut").await.unwrap();
    let clean_run = Run::from_journal(clean.iter().map(|e| &*e.event)).unwrap();
    assert_eq!(clean_outcome.answer, "a, 3 and c.");

    for cut in 1..=clean.len() {
        let store = Arc::new(MemoryStore::new());
        store.append_entries("run_cut", 0, &clean[..cut]).await.unwrap();
        let before = Run::from_journal(clean[..cut].iter().map(|e| &*e.event)).unwrap();
        // The model answers the turns the journal has no response for.
        let answered = before.history().iter().filter(|m| m.role == Role::Assistant).count();
        let model = Arc::new(ScriptedModel::new(turns().into_iter().skip(answered)));
        let probe = Probe::default();
        let agent = Agent::builder(model.clone())
            .tool(Add)
            .tool(probe.clone())
            .tool_concurrency(1)
            .store(store.clone())
            .build()
            .unwrap();
        let events = collect(agent.resume("run_cut").await.unwrap()).await;
        let resumed = outcome_of_events(&events);
        assert_eq!(resumed.answer, clean_outcome.answer, "cut {cut}");
        let after = store.load("run_cut").await.unwrap();
        assert_eq!(after[..cut], clean[..cut], "cut {cut}: the journal is only appended to");
        let run = Run::from_journal(after.iter().map(|e| &*e.event)).unwrap();
        assert_eq!(run.history(), clean_run.history(), "cut {cut}: same conversation");
        assert_eq!(
            shape(&events_of(&after)),
            events_of(&clean).iter().map(Event::kind).collect::<Vec<_>>(),
            "cut {cut}: same journal shape"
        );
        // Only probe calls without a journaled result ran, with the original keys.
        let done: Vec<String> = clean[..cut]
            .iter()
            .filter_map(|e| match &*e.event {
                Event::ToolCompleted { name, result, .. } if name == "probe" => {
                    Some(format!("run_cut:{}", result.call_id))
                }
                _ => None,
            })
            .collect();
        let expected: Vec<String> = ["run_cut:call_a", "run_cut:call_c"]
            .into_iter()
            .map(str::to_owned)
            .filter(|key| !done.contains(key))
            .collect();
        assert_eq!(*probe.keys.lock().unwrap(), expected, "cut {cut}");
        // A model call without a journaled response is made again; others are not.
        assert_eq!(model.request_count(), 3 - answered, "cut {cut}");
    }
}

async fn outcome_of_stream(events: EventStream) -> Outcome {
    agentloop::agent::outcome_of(events).await.unwrap()
}

fn outcome_of_events(events: &[Event]) -> Outcome {
    events.iter().rev().find_map(Event::outcome).cloned().expect("a terminal event")
}

#[tokio::test]
async fn resume_needs_a_store_and_a_journal_and_replays_a_finished_run_s_end() {
    let plain = Agent::builder(ScriptedModel::new([])).build().unwrap();
    assert!(matches!(plain.resume("x").await, Err(ResumeError::NoStore)));
    let store = Arc::new(MemoryStore::new());
    let model = ScriptedModel::new([ScriptedTurn::text("hi")]);
    let agent = Agent::builder(model).store(store.clone()).build().unwrap();
    let error = agent.resume("nowhere").await.err().unwrap();
    assert_eq!(error, ResumeError::NotFound("nowhere".into()));
    assert_eq!(error.to_string(), "run 'nowhere' has no journal in the store");

    let outcome = agent.run("hello").await.unwrap();
    let length = store.next_seq(&outcome.run_id).await.unwrap();
    let again = collect(agent.resume(&outcome.run_id).await.unwrap()).await;
    assert_eq!(kinds(&again), ["run_finished"]);
    assert_eq!(outcome_of_events(&again), outcome);
    assert_eq!(store.next_seq(&outcome.run_id).await.unwrap(), length, "nothing appended");
}

#[tokio::test]
async fn a_run_waiting_for_approval_survives_a_restart() {
    use agentloop::store::sqlite::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("approvals.db");
    let probe = Probe::default();
    let run_id = {
        let store = Arc::new(SqliteStore::open(&path).unwrap());
        let model = ScriptedModel::new([ScriptedTurn::tool_call(
            "probe",
            json!({"ms": 0, "tag": "deploy"}),
        )
        .with_tool_call("probe", json!({"ms": 0, "tag": "delete"}))]);
        let agent = Agent::builder(model)
            .name("ops")
            .tool(probe.clone())
            .hook(AskHuman)
            .store(store.clone())
            .build()
            .unwrap();
        let error = agent.run("ship it").await.unwrap_err();
        assert!(error.to_string().starts_with("the run is waiting for approval of"), "{error}");
        let AgentError::Suspended { outcome } = error else { panic!("{error}") };
        assert!(matches!(outcome.stop_reason, StopReason::AwaitingApproval { .. }));
        let listed = store.list_runs(&RunFilter::all().agent("ops")).await.unwrap();
        assert_eq!(listed[0].state, RunState::Suspended);
        outcome.run_id
        // The agent, the store handle and its connection are dropped: a restart.
    };
    assert_eq!(probe.calls(), 0);

    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("Deployed; no deletion.")]));
    let agent = Agent::builder(model.clone())
        .name("ops")
        .tool(probe.clone())
        .hook(AskHuman)
        .store(store.clone())
        .build()
        .unwrap();
    // Without decisions, the run is still suspended.
    let waiting = collect(agent.resume(&run_id).await.unwrap()).await;
    assert_eq!(kinds(&waiting), ["run_suspended"]);
    let decisions = [
        ("call_0_0".to_string(), Decision::Approve),
        ("call_0_1".to_string(), Decision::Reject { reason: "never delete".into() }),
    ];
    let events = collect(agent.decide(&run_id, decisions).await.unwrap()).await;
    assert_eq!(outcome_of_events(&events).answer, "Deployed; no deletion.");
    assert_eq!(*probe.keys.lock().unwrap(), [format!("{run_id}:call_0_0")]);
    let journal = store.load(&run_id).await.unwrap();
    let kinds: Vec<&str> = journal.iter().map(|e| e.event.kind()).collect();
    assert!(kinds.contains(&"approval_decided"));
    assert_eq!(kinds.last(), Some(&"run_finished"));
    let listed = store.list_runs(&RunFilter::all().agent("ops")).await.unwrap();
    assert_eq!(listed[0].state, RunState::Finished);
    assert_eq!(listed[0].entries, journal.len() as u64);
}

/// A store that fails every append after the first `ok` ones.
/// A store whose disk fills at entry `full`: an append that would write it (or any after it)
/// fails.
struct Failing {
    inner: MemoryStore,
    full: u64,
}

impl Failing {
    fn check(&self, expected_seq: u64, entries: &[JournalEntry]) -> Result<(), StoreError> {
        if expected_seq + entries.len() as u64 > self.full {
            return Err(StoreError::Backend { backend: "test", message: "disk full".into() });
        }
        Ok(())
    }
}

#[async_trait]
impl RunStore for Failing {
    async fn append_entries(
        &self,
        run_id: &str,
        expected_seq: u64,
        entries: &[JournalEntry],
    ) -> Result<u64, StoreError> {
        self.check(expected_seq, entries)?;
        self.inner.append_entries(run_id, expected_seq, entries).await
    }
    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        self.inner.load(run_id).await
    }
    async fn next_seq(&self, run_id: &str) -> Result<u64, StoreError> {
        self.inner.next_seq(run_id).await
    }
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        self.inner.list_runs(filter).await
    }
    async fn delete_run(&self, run_id: &str) -> Result<bool, StoreError> {
        self.inner.delete_run(run_id).await
    }
    async fn claim(&self, run_id: &str, owner: &str, ttl: Duration) -> Result<Lease, StoreError> {
        self.inner.claim(run_id, owner, ttl).await
    }
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        self.inner.renew(lease, ttl).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.inner.release(lease).await
    }
    async fn request_control(
        &self,
        run_id: &str,
        request: agentloop::store::ControlRequest,
    ) -> Result<agentloop::store::RemoteControl, StoreError> {
        self.inner.request_control(run_id, request).await
    }
    async fn remote_control(
        &self,
        run_id: &str,
    ) -> Result<agentloop::store::RemoteControl, StoreError> {
        self.inner.remote_control(run_id).await
    }
    async fn append_fenced(
        &self,
        lease: &Lease,
        expected_seq: u64,
        entries: &[JournalEntry],
    ) -> Result<u64, StoreError> {
        self.check(expected_seq, entries)?;
        self.inner.append_fenced(lease, expected_seq, entries).await
    }
}

#[tokio::test]
async fn a_failed_append_stops_the_run_at_its_last_checkpoint() {
    let store = Arc::new(Failing { inner: MemoryStore::new(), full: 5 });
    let probe = Probe::default();
    let model =
        ScriptedModel::new([ScriptedTurn::tool_call("probe", json!({"ms": 0, "tag": "a"}))
            .with_tool_call("probe", json!({"ms": 0, "tag": "b"}))]);
    let failing = agent(model, &probe, store.clone());
    let options = RunOptions { run_id: Some("run_fail".into()), ..RunOptions::default() };
    let events = collect(failing.run_stream_with("go", options)).await;
    // run_started, iteration_started, model_requested, model_responded, tool_started(a) are
    // journaled; tool_completed(a) is not, and is not passed on.
    let Some(Event::JournalFailed { error }) = events.last() else {
        panic!("{:?}", kinds(&events))
    };
    assert!(error.contains("disk full"), "{error}");
    let durable: Vec<&str> = events.iter().filter(|e| e.is_durable()).map(Event::kind).collect();
    assert_eq!(durable.last(), Some(&"tool_started"));
    assert_eq!(durable.len(), 5);
    assert_eq!(probe.calls(), 1, "the second call never started");
    let error =
        agentloop::agent::outcome_of(Box::pin(futures::stream::iter(events))).await.unwrap_err();
    assert!(matches!(error, AgentError::Journal { .. }), "{error}");

    // The journal is whole up to the failure: a healthy store resumes it.
    let healthy = Arc::new(MemoryStore::new());
    let journal = store.load("run_fail").await.unwrap();
    assert_eq!(journal.len(), 5);
    healthy.append_entries("run_fail", 0, &journal).await.unwrap();
    let model = ScriptedModel::new([ScriptedTurn::text("a and b")]);
    let resumer = agent(model, &probe, healthy.clone());
    let outcome = outcome_of_stream(resumer.resume("run_fail").await.unwrap()).await;
    assert_eq!(outcome.answer, "a and b");
    assert_eq!(probe.calls(), 3, "a ran again (its result was never journaled), then b");
}

/// Two executors resume one crashed run at once: one takes the run's lease, the other is
/// refused before it does anything; the crashed executor's lease had to expire first.
#[tokio::test]
async fn two_processes_resuming_one_run_one_takes_the_lease() {
    let store = Arc::new(MemoryStore::new());
    let probe = Probe::default();
    let model =
        ScriptedModel::new([ScriptedTurn::tool_call("probe", json!({"ms": 0, "tag": "a"}))]);
    let short = |model: ScriptedModel, probe: &Probe| {
        Agent::builder(model)
            .tool(Add)
            .tool(probe.clone())
            .store(store.clone())
            .lease_ttl(Duration::from_millis(150))
            .build()
            .unwrap()
    };
    let first = short(model, &probe);
    let options = RunOptions { run_id: Some("run_race".into()), ..RunOptions::default() };
    let mut events = first.run_stream_with("go", options);
    while let Some(event) = events.next().await {
        if event.kind() == "model_requested" {
            break;
        }
    }
    // The first executor is gone (as if killed): its lease lives on until it expires.
    drop(events);
    let make = || {
        let model = ScriptedModel::new([
            ScriptedTurn::text("one").with_chunk_delay(Duration::from_millis(5)),
            ScriptedTurn::text("two"),
        ]);
        short(model, &Probe::default())
    };
    let early = make().resume("run_race").await.err().unwrap();
    assert!(
        matches!(&early, ResumeError::Store(StoreError::LeaseHeld { .. })),
        "refused while the dead executor's lease lives: {early}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (a, b) = (make(), make());
    let (a, b) = tokio::join!(a.resume("run_race"), b.resume("run_race"));
    let (winner, loser) = match (a, b) {
        (Ok(events), Err(error)) | (Err(error), Ok(events)) => (events, error),
        (a, b) => panic!("exactly one resumer takes the lease: {:?} {:?}", a.is_ok(), b.is_ok()),
    };
    assert!(matches!(loser, ResumeError::Store(StoreError::LeaseHeld { .. })), "{loser}");
    assert!(loser.to_string().contains("is being executed by"), "{loser}");
    let events = collect(winner).await;
    assert_eq!(events.last().unwrap().kind(), "checkpointed");
    let journal = store.load("run_race").await.unwrap();
    assert_eq!(
        journal.iter().filter(|e| e.event.kind() == "model_responded").count(),
        1,
        "one response only"
    );
    Run::from_journal(journal.iter().map(|e| &*e.event)).unwrap();
}

/// `continue_run` with a store appends after the store's journal of the run.
#[tokio::test]
async fn continue_run_appends_after_the_stored_journal() {
    let source = Arc::new(MemoryStore::new());
    let probe = Probe::default();
    let first = agent(ScriptedModel::new(turns()), &probe, source.clone());
    let options = RunOptions { run_id: Some("run_continue".into()), ..RunOptions::default() };
    outcome_of_stream(first.run_stream_with("go", options)).await;
    let clean = source.load("run_continue").await.unwrap();

    let store = Arc::new(MemoryStore::new());
    let cut = clean.iter().position(|e| e.event.kind() == "tool_completed").unwrap() + 1;
    store.append_entries("run_continue", 0, &clean[..cut]).await.unwrap();
    let run = Run::from_journal(clean[..cut].iter().map(|e| &*e.event)).unwrap();
    let second = agent(ScriptedModel::new(turns().into_iter().skip(1)), &probe, store.clone());
    let events = collect(second.continue_run(run, None)).await;
    let first_checkpoint = events.iter().find_map(|e| match e {
        Event::Checkpointed { seq } => Some(*seq),
        _ => None,
    });
    assert_eq!(first_checkpoint, Some(cut as u64), "the first new entry follows the stored ones");
    let after = store.load("run_continue").await.unwrap();
    assert_eq!(after.len(), clean.len());
    assert_eq!(
        after.iter().map(|e| e.event.kind()).collect::<Vec<_>>(),
        clean.iter().map(|e| e.event.kind()).collect::<Vec<_>>()
    );
}

/// `Agent::run` leaves out the transient events, but journals exactly what `run_stream`
/// journals: the same durable events, the same conversation, the same outcome.
#[tokio::test]
async fn run_journals_what_run_stream_journals() {
    let streamed_store = Arc::new(MemoryStore::new());
    let streamed_agent =
        agent(ScriptedModel::new(turns()), &Probe::default(), streamed_store.clone());
    let events = collect(streamed_agent.run_stream("go")).await;
    assert!(events.iter().any(|e| !e.is_durable()), "run_stream streams notices and deltas");
    let streamed = outcome_of_events(&events);

    let quiet_store = Arc::new(MemoryStore::new());
    let quiet_agent = agent(ScriptedModel::new(turns()), &Probe::default(), quiet_store.clone());
    let quiet = quiet_agent.run("go").await.unwrap();
    assert_eq!(quiet.answer, streamed.answer);
    assert_eq!(quiet.stop_reason, streamed.stop_reason);

    let streamed_journal = events_of(&streamed_store.load(&streamed.run_id).await.unwrap());
    let quiet_journal = events_of(&quiet_store.load(&quiet.run_id).await.unwrap());
    let kinds = |journal: &[Event]| journal.iter().map(Event::kind).collect::<Vec<_>>();
    assert_eq!(kinds(&quiet_journal), kinds(&streamed_journal));
    let streamed_run = Run::from_journal(streamed_journal.iter()).unwrap();
    let quiet_run = Run::from_journal(quiet_journal.iter()).unwrap();
    assert_eq!(quiet_run.history(), streamed_run.history());
}

/// A run is continued only by an agent of the identity it was started with: another tool
/// protocol, per-step tool choice or configuration is refused, with the differences named,
/// unless the caller allows the change.
#[tokio::test]
async fn resume_with_another_identity_is_refused_unless_allowed() {
    use agentloop::provider::{StepToolChoice, ToolCallFormat, ToolProtocol};
    use agentloop::ResumeOptions;
    let store = Arc::new(MemoryStore::new());
    let probe = Probe::default();
    let model =
        ScriptedModel::new([ScriptedTurn::tool_call("probe", json!({"ms": 0, "tag": "a"}))]);
    let first = Agent::builder(model)
        .tool(probe.clone())
        .instructions("Be brief.")
        .store(store.clone())
        .lease_ttl(Duration::from_millis(100))
        .build()
        .unwrap();
    let options = RunOptions { run_id: Some("run_id".into()), ..RunOptions::default() };
    let mut events = first.run_stream_with("go", options);
    while let Some(event) = events.next().await {
        if event.kind() == "model_requested" {
            break;
        }
    }
    drop(events);
    let journal = store.load("run_id").await.unwrap();
    let Event::RunStarted { config, .. } = &*journal[0].event else { panic!() };
    let identity = config.identity.clone().unwrap();
    assert_eq!((identity.model.as_str(), identity.tool_protocol.as_str()), ("scripted", "native"));
    assert_eq!(identity.provider, "scripted");
    assert_eq!(identity.config_hash.len(), 32);
    tokio::time::sleep(Duration::from_millis(150)).await;

    let resumer = |instructions: &str, prompted: bool, policy: bool| {
        let mut builder = Agent::builder(ScriptedModel::new([ScriptedTurn::text("done")]))
            .tool(probe.clone())
            .instructions(instructions)
            .store(store.clone());
        if prompted {
            builder = builder.tool_protocol(ToolProtocol::Prompted(ToolCallFormat::Hermes));
        }
        if policy {
            builder = builder.step_tool_choice(StepToolChoice::required_first());
        }
        builder.build().unwrap()
    };
    let error = resumer("Be thorough.", true, true).resume("run_id").await.err().unwrap();
    let ResumeError::IdentityChanged { differences, .. } = &error else { panic!("{error}") };
    assert_eq!(differences.len(), 3, "{differences:?}");
    assert!(differences[0].starts_with("tool protocol: \"native\" then, \"prompted:Hermes\" now"));
    assert!(differences[1].starts_with("per-step tool choice: None then"), "{differences:?}");
    assert_eq!(differences[2], "configuration: instructions changed");
    assert!(error.to_string().contains("allow_identity_change"), "{error}");
    // The same model name through another provider family is another identity.
    struct Elsewhere(ScriptedModel);
    impl agentloop::provider::Provider for Elsewhere {
        fn stream(
            &self,
            request: agentloop::provider::ModelRequest,
        ) -> agentloop::provider::ChunkStream {
            self.0.stream(request)
        }
        fn name(&self) -> &str {
            "scripted"
        }
    }
    let elsewhere = Agent::builder(Elsewhere(ScriptedModel::new([])))
        .tool(probe.clone())
        .instructions("Be brief.")
        .store(store.clone())
        .build()
        .unwrap();
    let error = elsewhere.resume("run_id").await.err().unwrap();
    let ResumeError::IdentityChanged { differences, .. } = &error else { panic!("{error}") };
    assert_eq!(differences, &["provider: \"scripted\" then, \"custom\" now"]);
    // Refused before anything ran, and the lease was given back: the same agent resumes.
    let same = resumer("Be brief.", false, false);
    let outcome = outcome_of_stream(same.resume("run_id").await.unwrap()).await;
    assert_eq!(outcome.answer, "done");
    // Allowed explicitly, another agent may continue a run (here: one that is over).
    let other = resumer("Be thorough.", false, false);
    let allowed = ResumeOptions { allow_identity_change: true, ..ResumeOptions::default() };
    let (_, events) = other.resume_with("run_id", allowed).await.unwrap();
    assert_eq!(collect(events).await.len(), 1, "the finished run's terminal event");
}
