//! Finish reason `length`: the output limit (the request's `max_tokens` reached) against a
//! full context, with empty text, partial text and tool calls; compaction only for the
//! context; old outcomes and journals still load.

use super::*;

/// A response cut off by `length` with this text (and calls), reporting `output` tokens.
fn cut_off(text: &str, calls: &[(&str, &str, &str)], output: u64) -> ModelResponse {
    let mut response = calls_response(calls);
    if !text.is_empty() {
        response.message.content.insert(0, Part::text(text));
    }
    response.finish_reason = FinishReason::Length;
    response.usage = Usage { input: 40, output, ..Usage::default() };
    response
}

fn with_max_tokens(max_tokens: Option<u32>) -> RunConfig {
    RunConfig { max_tokens, ..config() }
}

/// A conversation long enough for a compaction to have something to summarise.
fn long_input() -> Vec<Message> {
    let mut input = Vec::new();
    for i in 0..6 {
        input.push(Message::user(format!("question {i}")));
        input.push(Message::assistant(format!("answer {i}")));
    }
    input.push(Message::user("the last question"));
    input
}

/// The outcome after one model turn answered with `response`.
fn one_turn(config: RunConfig, input: Vec<Message>, response: ModelResponse) -> (Run, Outcome) {
    let mut run = Run::new("r", config, input);
    let request = expect_model(&mut run);
    assert_eq!(request.max_tokens, run.config().max_tokens, "the request carries max_tokens");
    run.model_responded(response, ms(1)).unwrap();
    let outcome = expect_finish(&mut run);
    (run, outcome)
}

#[test]
fn an_empty_answer_at_max_tokens_is_an_output_limit_and_no_success() {
    let (mut run, outcome) =
        one_turn(with_max_tokens(Some(512)), vec![Message::user("x")], cut_off("", &[], 512));
    assert_eq!(outcome.stop_reason, StopReason::OutputLimit { max_tokens: 512 });
    assert_eq!(outcome.answer, "");
    assert!(!outcome.is_success());
    assert!(!outcome.is_failure(), "the run did not fail: it ran out of output tokens");
    assert!(!outcome.has_answer());
    assert!(outcome.is_token_limited());
    assert_eq!(kinds(&mut run).last().copied(), Some("run_finished"));
    assert_eq!(run.outcome(), Some(&outcome));
}

#[test]
fn a_partial_answer_at_max_tokens_keeps_its_text_but_is_no_answer() {
    let (_, outcome) = one_turn(
        with_max_tokens(Some(64)),
        vec![Message::user("x")],
        cut_off("The answer is a long", &[], 70),
    );
    assert_eq!(outcome.stop_reason, StopReason::OutputLimit { max_tokens: 64 });
    assert_eq!(outcome.answer, "The answer is a long");
    assert!(!outcome.is_success());
    assert!(!outcome.has_answer(), "cut-off text is not a complete answer");
}

#[test]
fn tool_calls_cut_off_at_max_tokens_do_not_run() {
    // Text and a call: the call leaves the history, the text stays.
    let (run, outcome) = one_turn(
        with_max_tokens(Some(32)),
        vec![Message::user("x")],
        cut_off("Let me add.", &[("a", "add", r#"{"a": 1, "#)], 32),
    );
    assert_eq!(outcome.stop_reason, StopReason::OutputLimit { max_tokens: 32 });
    assert_eq!(outcome.answer, "Let me add.");
    assert_eq!(run.history().last(), Some(&Message::assistant("Let me add.")));
    assert_history_answered(run.history());
    // Only a call: the message leaves the history, the answer is empty.
    let (run, outcome) = one_turn(
        with_max_tokens(Some(32)),
        vec![Message::user("x")],
        cut_off("", &[("a", "add", r#"{"a": 1, "#)], 40),
    );
    assert_eq!(outcome.stop_reason, StopReason::OutputLimit { max_tokens: 32 });
    assert_eq!(outcome.answer, "");
    assert!(!outcome.has_answer());
    assert_eq!(run.history(), &[Message::user("x")]);
}

#[test]
fn an_output_limit_is_not_compacted_even_when_compaction_could_run() {
    let mut run = Run::new("r", with_max_tokens(Some(512)), long_input());
    let _ = expect_model(&mut run);
    run.model_responded(cut_off("", &[], 512), ms(1)).unwrap();
    let outcome = expect_finish(&mut run);
    assert_eq!(outcome.stop_reason, StopReason::OutputLimit { max_tokens: 512 });
    let kinds = kinds(&mut run);
    assert!(!kinds.contains(&"compaction_started"), "{kinds:?}");
    // The marker for old journals does not outlive the run.
    assert_eq!(run.context.legacy_length_cut, None);
}

#[test]
fn fewer_output_tokens_than_max_tokens_mean_a_full_context() {
    // max_tokens known and not reached: the context ran out first (a server caps the output
    // at the room left in its window). Nothing to compact: the run ends at the context limit.
    let (_, outcome) = one_turn(
        with_max_tokens(Some(512)),
        vec![Message::user("x")],
        cut_off("The room ran o", &[], 300),
    );
    assert_eq!(outcome.stop_reason, StopReason::ContextLimit);
    assert_eq!(outcome.answer, "The room ran o");
    assert!(!outcome.is_success() && !outcome.has_answer() && outcome.is_token_limited());
    // With something to compact, the same response forces a compaction and a retry.
    let mut run = Run::new("r", with_max_tokens(Some(512)), long_input());
    let _ = expect_model(&mut run);
    run.model_responded(cut_off("The room ran o", &[], 300), ms(1)).unwrap();
    assert!(matches!(run.next_step(), Step::Compact(_)));
    assert!(kinds(&mut run).contains(&"compaction_started"));
}

#[test]
fn a_length_finish_that_cannot_be_attributed_is_taken_for_a_full_context() {
    // No max_tokens on the request: the provider's own cap or the context, unknown.
    let (_, outcome) =
        one_turn(with_max_tokens(None), vec![Message::user("x")], cut_off("", &[], 512));
    assert_eq!(outcome.stop_reason, StopReason::ContextLimit);
    assert!(!outcome.is_success() && !outcome.has_answer());
    // No usage reported.
    let (_, outcome) =
        one_turn(with_max_tokens(Some(512)), vec![Message::user("x")], cut_off("", &[], 0));
    assert_eq!(outcome.stop_reason, StopReason::ContextLimit);
    // And it compacts when it can, as before.
    let mut run = Run::new("r", with_max_tokens(None), long_input());
    let _ = expect_model(&mut run);
    run.model_responded(cut_off("", &[], 512), ms(1)).unwrap();
    assert!(matches!(run.next_step(), Step::Compact(_)));
}

#[test]
fn the_output_limit_rule_holds_when_the_run_is_rebuilt_from_its_journal() {
    let mut run = Run::new("r", with_max_tokens(Some(16)), vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(cut_off("partial", &[], 16), ms(1)).unwrap();
    let journal: Vec<Event> = run.drain_events().filter(Event::is_durable).collect();
    let mut rebuilt = Run::from_journal(&journal).unwrap();
    assert_eq!(rebuilt.history(), run.history());
    assert_eq!(expect_finish(&mut rebuilt).stop_reason, StopReason::OutputLimit { max_tokens: 16 });
}

#[test]
fn the_output_limit_serializes_with_its_limit_and_old_outcomes_still_load() {
    assert_eq!(
        serde_json::to_value(StopReason::OutputLimit { max_tokens: 512 }).unwrap(),
        json!({"kind": "output_limit", "max_tokens": 512})
    );
    // An outcome as the build before `OutputLimit` wrote it (without metrics, even older).
    let old = json!({
        "run_id": "r",
        "answer": "",
        "stop_reason": {"kind": "context_limit"},
        "iterations": 1,
        "usage": {"input": 40, "output": 512, "cached_input": 0, "reasoning": 0}
    });
    let outcome: Outcome = serde_json::from_value(old).unwrap();
    assert_eq!(outcome.stop_reason, StopReason::ContextLimit);
    assert!(!outcome.is_success() && !outcome.has_answer());
    // And the terminal event of the golden journal (written by the build before).
    let line = include_str!("journal.golden.jsonl")
        .lines()
        .find(|line| line.starts_with(r#"{"type":"run_finished""#))
        .unwrap();
    let event: Event = serde_json::from_str(line).unwrap();
    assert!(event.outcome().unwrap().has_answer());
    // A run snapshot without the new context field loads too (it is left out when unset).
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    run.drain_events().for_each(drop);
    let mut snapshot = serde_json::to_value(&run).unwrap();
    assert!(snapshot["context"].get("legacy_length_cut").is_none());
    snapshot["context"].as_object_mut().unwrap().remove("legacy_length_cut");
    assert_eq!(Run::from_snapshot(snapshot).unwrap(), run);
}

#[test]
fn a_journal_that_compacted_after_an_output_limit_still_folds() {
    // The build before `OutputLimit` compacted after any `length` it could. Write such a
    // journal (this build does the same when it cannot attribute the `length`), then give it
    // the max_tokens that makes the `length` an output limit today.
    let mut run = Run::new("r", with_max_tokens(None), long_input());
    let _ = expect_model(&mut run);
    run.model_responded(cut_off("cut", &[], 512), ms(1)).unwrap();
    let Step::Compact(_) = run.next_step() else { panic!("expected a compaction") };
    run.compacted(text_response("a summary")).unwrap();
    let retry = expect_model(&mut run);
    assert!(retry.messages.iter().all(|m| m.text() != "cut"));
    run.model_responded(text_response("the answer"), ms(1)).unwrap();
    assert_eq!(expect_finish(&mut run).answer, "the answer");
    let mut journal: Vec<Event> = run.drain_events().filter(Event::is_durable).collect();
    let Event::RunStarted { config, .. } = &mut journal[0] else { panic!("run_started first") };
    config.max_tokens = Some(512);
    let rebuilt = Run::from_journal(&journal).unwrap();
    assert_eq!(rebuilt.history(), run.history());
    assert_eq!(rebuilt.outcome().map(|o| o.answer.as_str()), Some("the answer"));
    assert_eq!(rebuilt.context.legacy_length_cut, None);
    // Cut right after the compaction started: the run goes on from there.
    let at = journal.iter().position(|e| e.kind() == "compaction_started").unwrap();
    let mut rebuilt = Run::from_journal(&journal[..=at]).unwrap();
    assert!(matches!(rebuilt.next_step(), Step::Compact(_)));
}

#[test]
fn has_answer_tells_an_answer_from_its_absence() {
    let outcome = |answer: &str, stop_reason: StopReason| Outcome {
        run_id: "r".into(),
        answer: answer.into(),
        stop_reason,
        iterations: 1,
        usage: Usage::default(),
        metrics: Metrics::default(),
        output: None,
        citations: Vec::new(),
    };
    let limit = || StopReason::LimitReached { limit: LimitKind::Iterations };
    assert!(outcome("42", StopReason::Completed).has_answer());
    assert!(!outcome("  \n", StopReason::Completed).has_answer(), "a model that said nothing");
    assert!(outcome("42", StopReason::DoneTool { tool: "task_complete".into() }).has_answer());
    assert!(outcome("What I found so far.", limit()).has_answer());
    assert!(!outcome(DEFAULT_WIND_DOWN_FALLBACK, limit()).has_answer());
    assert!(!outcome("Which city?", StopReason::AwaitingInput { tool: "ask".into() }).has_answer());
    assert!(!outcome("cut", StopReason::ContentFiltered).has_answer());
    assert!(!outcome(CONTEXT_LIMIT_TEXT, StopReason::ContextLimit).has_answer());
    assert!(!outcome("", StopReason::Cancelled { reason: "user".into() }).has_answer());
}
