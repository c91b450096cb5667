//! Golden journals: run journals written by the code of journal schema version 1, committed
//! under `tests/fixtures/golden/` as JSON lines (one `JournalEntry` per line, as the stores
//! serialize it). They are a contract: whatever the journal format becomes, these files must
//! still load into a store and the crashed run must still resume to the same answer. Never
//! regenerate them to make a format change pass; teach the readers to read them instead.
//!
//! - `finished.jsonl` (run `golden_finished`): a model turn with reasoning, text and two tool
//!   calls (`multiply`, `lookup`), their results, and the final answer.
//! - `crashed.jsonl` (run `golden_crashed`): the same run cut by a crash while `lookup` ran:
//!   `multiply`'s result is journaled, `lookup` has a `tool_started` and no result.
//!
//! Regenerating overwrites both files with what the code of the day writes:
//! `AGENTLOOP_REGENERATE_GOLDEN=1 cargo test -p agentloop --test golden_journal -- --ignored`.
//! Do it only to add a golden set for a new format (move these files aside first and keep
//! testing them), never to make a format change pass.
#![cfg(feature = "sqlite")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::message::Role;
use agentloop::message::Usage;
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::Provider;
use agentloop::run::Price;
use agentloop::run::Run;
use agentloop::store::sqlite::SqliteStore;
use agentloop::store::MemoryStore;
use agentloop::store::RunStore;
use agentloop::store::{JournalEntry, RunFilter, RunState};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const FINISHED: &str = "golden_finished";
const CRASHED: &str = "golden_crashed";
const QUESTION: &str = "What is 17 × 23, and what is the capital of Japan?";
const ANSWER: &str = "17 × 23 = 391, and the capital of Japan is Tokyo.";

/// Multiplies two integers; counts its calls.
#[derive(Clone, Default)]
struct Multiply {
    calls: Arc<AtomicUsize>,
}

#[derive(Deserialize, JsonSchema)]
struct MultiplyArgs {
    /// The first factor.
    a: i64,
    /// The second factor.
    b: i64,
}

impl Tool for Multiply {
    const NAME: &'static str = "multiply";
    type Args = MultiplyArgs;
    type Output = i64;
    type Error = String;

    fn description(&self) -> String {
        "Multiplies two integers.".into()
    }

    async fn call(&self, args: MultiplyArgs, _ctx: ToolContext) -> Result<i64, String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        args.a.checked_mul(args.b).ok_or_else(|| "overflow".to_string())
    }
}

/// Looks a fact up; records each call's idempotency key. `hang`: never returns (the crash).
#[derive(Clone, Default)]
struct Lookup {
    hang: bool,
    keys: Arc<Mutex<Vec<String>>>,
}

#[derive(Deserialize, JsonSchema)]
struct LookupArgs {
    /// What to look up.
    query: String,
    /// The language of the answer.
    lang: String,
}

impl Tool for Lookup {
    const NAME: &'static str = "lookup";
    type Args = LookupArgs;
    type Output = serde_json::Value;
    type Error = String;

    fn description(&self) -> String {
        "Looks a fact up.".into()
    }

    async fn call(&self, args: LookupArgs, ctx: ToolContext) -> Result<serde_json::Value, String> {
        self.keys.lock().unwrap().push(ctx.idempotency_key.clone());
        if self.hang {
            std::future::pending::<()>().await;
        }
        // Keys out of order on purpose: with serde_json's `preserve_order` they stay so in
        // memory, and the journal must still hold them sorted.
        Ok(json!({"query": args.query, "lang": args.lang, "answer": "Tokyo"}))
    }
}

fn usage(input: u64, output: u64) -> Usage {
    Usage { input, output, ..Usage::default() }
}

fn first_turn() -> ScriptedTurn {
    ScriptedTurn::tool_call("multiply", json!({"b": 23, "a": 17}))
        .with_call_id("call_multiply")
        .with_tool_call("lookup", json!({"query": "capital of Japan", "lang": "en"}))
        .with_call_id("call_lookup")
        .with_reasoning("Two facts: one product, one lookup.")
        .with_text("Let me check both.")
        .with_usage(usage(120, 30))
}

fn last_turn() -> ScriptedTurn {
    ScriptedTurn::text(ANSWER).with_usage(usage(180, 20))
}

fn agent(
    model: impl Provider + 'static,
    multiply: Multiply,
    lookup: Lookup,
    store: Arc<dyn RunStore>,
) -> Agent {
    Agent::builder(model)
        .name("golden")
        .instructions("Use the tools for facts and arithmetic.")
        .tool(multiply)
        .tool(lookup)
        .tool_concurrency(1)
        .metadata("tenant", json!({"name": "acme", "id": 7}))
        .price(Price::per_million(1.0, 4.0))
        .store(store)
        .build()
        .unwrap()
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden").join(name)
}

fn read_fixture(name: &str) -> Vec<JournalEntry> {
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// A fresh SQLite store holding the fixture's journal.
async fn store_with(run_id: &str, name: &str) -> (tempfile::TempDir, Arc<SqliteStore>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("golden.db")).unwrap());
    let entries = read_fixture(name);
    store.append_entries(run_id, 0, &entries).await.unwrap();
    (dir, store)
}

fn events(journal: &[JournalEntry]) -> Vec<Event> {
    journal.iter().map(|e| e.event.event().clone()).collect()
}

fn kinds(journal: &[JournalEntry]) -> Vec<&'static str> {
    journal.iter().map(|e| e.event.kind()).collect()
}

/// The conversation both runs end with (the same conversation as the one written today).
fn assert_conversation(history: &[Message]) {
    let roles: Vec<Role> = history.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::Assistant]);
    assert_eq!(history[0].text(), QUESTION);
    let calls: Vec<(&str, &str, &str)> = history[1]
        .tool_calls()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("call_multiply", "multiply", r#"{"a":17,"b":23}"#),
            ("call_lookup", "lookup", r#"{"lang":"en","query":"capital of Japan"}"#),
        ]
    );
    let results: Vec<(&str, String)> =
        history[2].tool_results_iter().map(|r| (r.call_id.as_str(), r.content.to_text())).collect();
    assert_eq!(
        results,
        [
            ("call_multiply", "391".to_owned()),
            (
                "call_lookup",
                r#"{"answer":"Tokyo","lang":"en","query":"capital of Japan"}"#.to_owned()
            ),
        ]
    );
    assert_eq!(history[3].text(), ANSWER);
}

#[tokio::test]
async fn the_finished_golden_run_loads_with_its_recorded_outcome() {
    let (_dir, store) = store_with(FINISHED, "finished.jsonl").await;
    let journal = store.load(FINISHED).await.unwrap();
    assert_eq!(journal, read_fixture("finished.jsonl"), "the store gives back what it got");
    let run = Run::from_journal(&events(&journal)).unwrap();
    assert!(run.is_finished());
    assert_conversation(run.history());
    let outcome = run.outcome().unwrap().clone();
    assert_eq!(outcome.answer, ANSWER);
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(outcome.iterations, 2);
    assert_eq!(outcome.usage, usage(300, 50));
    let Some(Event::RunFinished { outcome: recorded }) = journal.last().map(|e| &*e.event) else {
        panic!("the journal ends with run_finished: {:?}", kinds(&journal));
    };
    assert_eq!(&outcome, &**recorded);
    let listed = store.list_runs(&RunFilter::all().agent("golden")).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, RunState::Finished);

    // Resuming a finished run gives its end again and appends nothing.
    let finished =
        agent(ScriptedModel::new([]), Multiply::default(), Lookup::default(), store.clone());
    let again: Vec<Event> = finished.resume(FINISHED).await.unwrap().collect().await;
    assert_eq!(again.iter().map(Event::kind).collect::<Vec<_>>(), ["run_finished"]);
    assert_eq!(again.last().and_then(Event::outcome), Some(&outcome));
    assert_eq!(store.load(FINISHED).await.unwrap().len(), journal.len());
}

#[tokio::test]
async fn the_crashed_golden_run_resumes_to_its_answer() {
    let (_dir, store) = store_with(CRASHED, "crashed.jsonl").await;
    let before = store.load(CRASHED).await.unwrap();
    assert_eq!(before, read_fixture("crashed.jsonl"));
    let cut = Run::from_journal(&events(&before)).unwrap();
    assert!(!cut.is_finished());
    assert!(
        matches!(&*before.last().unwrap().event, Event::ToolStarted { call, .. } if call.name == "lookup"),
        "the crash left lookup started without a result: {:?}",
        kinds(&before)
    );

    let model = Arc::new(ScriptedModel::new([last_turn()]));
    let (multiply, lookup) = (Multiply::default(), Lookup::default());
    let resumer = agent(model.clone(), multiply.clone(), lookup.clone(), store.clone());
    let outcome = agentloop::agent::outcome_of(resumer.resume(CRASHED).await.unwrap()).await;
    let outcome = outcome.unwrap();
    assert_eq!(outcome.answer, ANSWER);
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    // `lookup` ran again with its original idempotency key; `multiply` (result journaled) not.
    assert_eq!(*lookup.keys.lock().unwrap(), ["golden_crashed:call_lookup"]);
    assert_eq!(multiply.calls.load(Ordering::SeqCst), 0);
    assert_eq!(model.request_count(), 1, "only the model call without a response");

    let after = store.load(CRASHED).await.unwrap();
    assert_eq!(after[..before.len()], before[..], "the journal is only appended to");
    let run = Run::from_journal(&events(&after)).unwrap();
    assert!(run.is_finished());
    assert_conversation(run.history());
    assert_eq!(run.outcome(), Some(&outcome), "the journal's outcome is the one streamed");
    let listed = store.list_runs(&RunFilter::all().state(RunState::Finished)).await.unwrap();
    assert_eq!(listed.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(), [CRASHED]);
}

/// Runs the golden scenarios into `store`: the whole run, and the same run dropped (as a
/// crash would stop it) once `lookup` has started.
async fn record_golden_runs(store: Arc<dyn RunStore>) {
    let model = ScriptedModel::new([first_turn(), last_turn()]);
    let whole = agent(model, Multiply::default(), Lookup::default(), store.clone());
    let options = RunOptions { run_id: Some(FINISHED.into()), ..RunOptions::default() };
    let outcome = agentloop::agent::outcome_of(whole.run_stream_with(QUESTION, options)).await;
    assert_eq!(outcome.unwrap().answer, ANSWER);

    let model = ScriptedModel::new([first_turn(), last_turn()]);
    let hanging = Lookup { hang: true, ..Lookup::default() };
    let crashing = agent(model, Multiply::default(), hanging, store);
    let options = RunOptions { run_id: Some(CRASHED.into()), ..RunOptions::default() };
    let mut events = crashing.run_stream_with(QUESTION, options);
    while let Some(event) = events.next().await {
        if matches!(&event, Event::ToolStarted { call, .. } if call.name == "lookup") {
            break;
        }
    }
}

/// A run's journal as JSON lines, one entry each, as the stores serialize it.
async fn journal_lines(store: &dyn RunStore, run_id: &str) -> String {
    let mut text = String::new();
    for entry in store.load(run_id).await.unwrap() {
        text.push_str(&serde_json::to_string(&entry).unwrap());
        text.push('\n');
    }
    text
}

/// The `"identity":{…}` member of a `run_started` config taken out (it is the config's last
/// field, and holds no nested object).
fn without_identity(text: &str) -> String {
    let Some(at) = text.find(",\"identity\":{") else { return text.to_owned() };
    let end = text[at..].find('}').map_or(text.len(), |i| at + i + 1);
    format!("{}{}", &text[..at], &text[end..])
}

/// Every `"…_ms":<number>` set to 0: timings differ from one run to the next.
fn without_times(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("_ms\":") {
        let (head, tail) = rest.split_at(at + "_ms\":".len());
        out.push_str(head);
        let digits = tail.len() - tail.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 {
            out.push('0');
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

/// Today's code writes these journals byte for byte, timings aside, with serde_json's
/// `preserve_order` on or off (`tests/golden_journal.rs` runs under both): the journal is
/// canonical JSON. This holds while the journal format is the fixtures' (schema version 1)
/// plus the additions since, which are taken out before comparing: the run's identity in
/// `run_started` (`RunConfig::identity`, added after the fixtures were written; older
/// journals have none). A deliberate format change retires this test — never the fixtures,
/// which must still load.
#[tokio::test]
async fn today_s_code_writes_the_golden_bytes_apart_from_times() {
    let store = Arc::new(MemoryStore::new());
    record_golden_runs(store.clone()).await;
    for (run_id, name) in [(FINISHED, "finished.jsonl"), (CRASHED, "crashed.jsonl")] {
        let written =
            without_times(&without_identity(&journal_lines(store.as_ref(), run_id).await));
        let golden = without_times(&std::fs::read_to_string(fixture(name)).unwrap());
        for (i, (got, want)) in written.lines().zip(golden.lines()).enumerate() {
            assert_eq!(got, want, "{name}, line {}", i + 1);
        }
        assert_eq!(written.lines().count(), golden.lines().count(), "{name}");
    }
}

/// Writes the fixtures with today's code (see the module docs). Ignored, and a no-op without
/// `AGENTLOOP_REGENERATE_GOLDEN=1`, so that running ignored tests cannot overwrite them.
#[tokio::test]
#[ignore = "writes the golden fixtures; run with AGENTLOOP_REGENERATE_GOLDEN=1"]
async fn regenerate_golden_journals() {
    if std::env::var_os("AGENTLOOP_REGENERATE_GOLDEN").is_none() {
        eprintln!("AGENTLOOP_REGENERATE_GOLDEN is not set: the fixtures are left as they are");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("golden.db")).unwrap());
    record_golden_runs(store.clone()).await;
    std::fs::create_dir_all(fixture("")).unwrap();
    for (run_id, name) in [(FINISHED, "finished.jsonl"), (CRASHED, "crashed.jsonl")] {
        std::fs::write(fixture(name), journal_lines(store.as_ref(), run_id).await).unwrap();
    }
}
