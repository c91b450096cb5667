#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::{FinishReason, Message};
use crate::run::RunConfig;
use crate::store::JournalEntry;

fn summary() -> RunSummary {
    RunSummary {
        run_id: "r".into(),
        agent: None,
        context_id: None,
        parent_run_id: Some("p".into()),
        origin_run_id: None,
        input: None,
        answer: None,
        state: RunState::Running,
        created_ms: 1,
        updated_ms: 1,
        entries: 1,
        owner: None,
        lease_expires_at_ms: None,
        usage: Usage::default(),
        cost_usd: 0.0,
    }
}

fn responded(input: u64, output: u64) -> Event {
    Event::ModelResponded {
        iteration: 1,
        message: Message::assistant("a"),
        finish_reason: FinishReason::Stop,
        usage: Box::new(Usage { input, output, ..Usage::default() }),
        duration_ms: 1,
        response_id: None,
        response_model: None,
        provider: None,
    }
}

#[test]
fn a_batch_sums_the_usage_of_its_model_calls_and_reads_run_started() {
    let config = RunConfig {
        agent: Some("a".into()),
        parent_run_id: Some("p".into()),
        price: Some(Price::per_million(1.0, 4.0)),
        ..RunConfig::default()
    };
    let started = Event::RunStarted { run_id: "r".into(), config: Box::new(config), input: vec![] };
    let compacted = Event::CompactionCompleted {
        cut: 1,
        summary: "s".into(),
        tokens_before: 10,
        tokens_after: 2,
        usage: Usage { input: 5, output: 1, cached_input: 2, reasoning: 0, cache_write_input: 0 },
    };
    let entries: Vec<JournalEntry> = [started, responded(100, 10), compacted, responded(200, 20)]
        .into_iter()
        .enumerate()
        .map(|(seq, event)| JournalEntry::of(seq as u64, event).unwrap())
        .collect();
    let update = SummaryUpdate::of(&entries).unwrap();
    assert_eq!(
        update.usage,
        Usage { input: 305, output: 31, cached_input: 2, reasoning: 0, cache_write_input: 0 }
    );
    let started = update.started.unwrap();
    assert_eq!(started.parent_run_id.as_deref(), Some("p"));
    assert_eq!(started.agent.as_deref(), Some("a"));
    let price = started.price.unwrap();
    assert_eq!(cost_of(Some(&price), &update.usage), price.cost(&update.usage));
    assert_eq!(cost_of(None, &update.usage), 0.0);
    // A batch without `run_started` changes neither the run's names nor its price.
    let update = SummaryUpdate::of(&entries[1..2]).unwrap();
    assert!(update.started.is_none());
    assert_eq!(update.usage.total(), 110);
}

#[test]
fn the_lease_columns_follow_the_lease_record() {
    let mut run = summary();
    run.set_lease(Some("pid1-a".into()), 500);
    assert_eq!((run.owner.as_deref(), run.lease_expires_at_ms), (Some("pid1-a"), Some(500)));
    assert!(run.lease_is_live(499));
    assert!(!run.lease_is_live(500), "an expired lease has no live holder");
    // Released: the record keeps an empty owner.
    run.set_lease(Some(String::new()), 0);
    assert_eq!((run.owner, run.lease_expires_at_ms), (None, None));
    assert!(!summary().lease_is_live(0));
}

#[test]
fn the_parent_filter_matches_the_parent() {
    let run = summary();
    assert!(RunFilter::all().parent_run_id("p").matches(&run));
    assert!(!RunFilter::all().parent_run_id("q").matches(&run));
    assert!(!RunFilter::all()
        .parent_run_id("p")
        .matches(&RunSummary { parent_run_id: None, ..run }));
}

#[test]
fn a_batch_reads_the_input_the_answer_and_the_origin_cut_to_their_preview() {
    let long = "é".repeat(PREVIEW_CHARS + 10);
    let input = vec![Message::user("earlier"), Message::assistant("ok"), Message::user(&long)];
    let started = Event::RunStarted { run_id: "r".into(), config: Box::default(), input };
    let forked = Event::RunForked { origin_run_id: "o".into(), at_seq: 3, edit: None };
    let outcome = crate::terms::Outcome::new("r", "Paris.", crate::terms::StopReason::Completed);
    let finished = Event::RunFinished { outcome: Box::new(outcome) };
    let entries: Vec<JournalEntry> = [started, forked, finished]
        .into_iter()
        .enumerate()
        .map(|(seq, event)| JournalEntry::of(seq as u64, event).unwrap())
        .collect();
    let update = SummaryUpdate::of(&entries).unwrap();
    assert_eq!(update.input.as_deref(), Some("é".repeat(PREVIEW_CHARS).as_str()));
    assert_eq!(update.answer.as_deref(), Some("Paris."));
    assert_eq!(update.origin_run_id.as_deref(), Some("o"));
    assert!(SummaryUpdate::of(&entries[..0]).is_none());
    // Only a response: none of the three.
    let progress = SummaryUpdate::of(&[JournalEntry::of(3, responded(1, 1)).unwrap()]).unwrap();
    assert_eq!((progress.input, progress.answer, progress.origin_run_id), (None, None, None));
}

#[test]
fn text_is_found_ignoring_the_case_of_ascii_letters() {
    assert!(contains_ignoring_case("The Capital", "capital"));
    assert!(contains_ignoring_case("anything", ""));
    assert!(!contains_ignoring_case("ab", "abc"));
    assert!(!contains_ignoring_case("Élan", "élan"), "only ASCII letters fold");
}
