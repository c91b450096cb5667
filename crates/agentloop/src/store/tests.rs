#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::run::{Outcome, RunConfig, StopReason};

fn started(agent: Option<&str>, context: Option<&str>) -> Event {
    let config = RunConfig {
        agent: agent.map(str::to_owned),
        context_id: context.map(str::to_owned),
        ..RunConfig::default()
    };
    Event::RunStarted { run_id: "r".into(), config: Box::new(config), input: vec![] }
}

fn outcome() -> Box<Outcome> {
    Box::new(Outcome {
        run_id: "r".into(),
        answer: "a".into(),
        stop_reason: StopReason::Completed,
        iterations: 1,
        usage: Default::default(),
        metrics: Default::default(),
        output: None,
        citations: Vec::new(),
    })
}

#[test]
fn the_state_comes_from_the_last_event() {
    assert_eq!(RunState::after(&Event::Resumed), RunState::Running);
    assert_eq!(RunState::after(&Event::RunFinished { outcome: outcome() }), RunState::Finished);
    assert_eq!(
        RunState::after(&Event::RunFailed { error: "e".into(), outcome: outcome() }),
        RunState::Failed
    );
    assert_eq!(RunState::after(&Event::RunSuspended { outcome: outcome() }), RunState::Suspended);
    for state in [
        RunState::Running,
        RunState::Finished,
        RunState::Failed,
        RunState::Cancelled,
        RunState::Suspended,
    ] {
        assert_eq!(RunState::parse(state.as_str()), Some(state));
        assert_eq!(serde_json::to_value(state).unwrap(), state.as_str());
    }
    assert_eq!(RunState::parse("sleeping"), None);
}

#[test]
fn a_summary_update_reads_agent_context_and_times() {
    let entries = [
        JournalEntry {
            seq: 0,
            at_ms: 10,
            schema_version: 1,
            event: started(Some("a"), None).try_into().unwrap(),
        },
        JournalEntry {
            seq: 1,
            at_ms: 12,
            schema_version: 1,
            event: Event::RunFinished { outcome: outcome() }.try_into().unwrap(),
        },
    ];
    let update = SummaryUpdate::of(&entries).unwrap();
    let started = update.started.unwrap();
    assert_eq!((started.agent.as_deref(), started.context_id), (Some("a"), None));
    assert_eq!((update.first_ms, update.last_ms, update.state), (10, 12, RunState::Finished));
    assert!(SummaryUpdate::of(&[]).is_none());
}

#[test]
fn batches_must_continue_the_journal_without_gaps() {
    let entry = |seq| JournalEntry::of(seq, Event::Resumed).unwrap();
    assert!(check_batch(3, &[entry(3), entry(4)]).is_ok());
    let error = check_batch(3, &[entry(3), entry(5)]).unwrap_err();
    assert!(error.to_string().contains("seq 5 but must have 4"), "{error}");
    assert!(check_dense("r", &[entry(0), entry(1)]).is_ok());
    assert!(matches!(check_dense("r", &[entry(1)]), Err(StoreError::Corrupt(_))));
}

#[test]
fn unknown_schema_versions_are_rejected_before_the_event_is_read() {
    let json = br#"{"seq":0,"at_ms":1,"schema_version":99,"event":{"type":"from_the_future"}}"#;
    let error = decode_entry_json("r", json).unwrap_err();
    assert_eq!(
        error,
        StoreError::UnsupportedSchema {
            run_id: "r".into(),
            seq: 0,
            found: 99,
            supported: SCHEMA_VERSION
        }
    );
    assert!(error.to_string().contains("schema version 99 is not supported"), "{error}");
    let json = br#"{"seq":0,"at_ms":1,"schema_version":1,"event":{"type":"resumed"}}"#;
    assert_eq!(decode_entry_json("r", json).unwrap().event, Event::Resumed);
    assert!(matches!(decode_entry_json("r", b"{"), Err(StoreError::Corrupt(_))));
}

/// Readers ignore fields they do not know (a newer build of the same format may add some):
/// at the top level of an entry, in its event, and in the structs inside. This is the decode
/// path of the SQLite and Redis stores.
#[test]
fn unknown_fields_are_ignored_when_an_entry_is_decoded() {
    let json = br#"{"seq":3,"at_ms":1,"schema_version":1,"written_by":"later",
        "event":{"type":"tool_completed","name":"add","duration_ms":2,"trace":"t",
        "result":{"call_id":"c","content":{"text":"5"},"is_error":false,"mime":"text/plain"}}}"#;
    let entry = decode_entry_json("r", json).unwrap();
    assert_eq!((entry.seq, entry.at_ms, entry.schema_version), (3, 1, 1));
    assert_eq!(
        entry.event,
        Event::ToolCompleted {
            name: "add".into(),
            result: crate::message::ToolResult::ok("c", "5"),
            duration_ms: 2,
            control: None,
            usage: None,
            cost_usd: None,
            remote: None,
        }
    );
}

#[test]
fn filters_match_every_set_field() {
    let run = RunSummary {
        run_id: "r".into(),
        agent: Some("a".into()),
        context_id: Some("c".into()),
        state: RunState::Finished,
        created_ms: 100,
        updated_ms: 120,
        entries: 5,
        parent_run_id: None,
        origin_run_id: None,
        input: Some("What is the Capital of France?".into()),
        answer: Some("Paris.".into()),
        owner: None,
        lease_expires_at_ms: None,
        usage: crate::message::Usage::default(),
        cost_usd: 0.0,
    };
    assert!(RunFilter::all().matches(&run));
    assert!(RunFilter::all().agent("a").context_id("c").state(RunState::Finished).matches(&run));
    assert!(!RunFilter::all().agent("b").matches(&run));
    assert!(RunFilter::all().text("capital of").matches(&run), "the input, in either case");
    assert!(RunFilter::all().text("PARIS").matches(&run), "the answer");
    assert!(!RunFilter::all().text("Lyon").matches(&run));
    assert!(!RunFilter::all().origin_run_id("o").matches(&run));
    assert!(RunFilter::all()
        .origin_run_id("o")
        .matches(&RunSummary { origin_run_id: Some("o".into()), ..run.clone() }));
    assert!(!RunFilter::all().state(RunState::Running).matches(&run));
    assert!(RunFilter::all().created_between(100, 101).matches(&run));
    assert!(!RunFilter::all().created_between(0, 100).matches(&run));
}
