#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

/// A run that deferred call `b` and ran `a`; suspended.
fn suspended() -> (Run, Vec<Event>) {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let mut journal = Vec::new();
    let _ = expect_model(&mut run);
    run.model_responded(
        calls_response(&[("a", "add", "{}"), ("b", "add", r#"{"big":true}"#)]),
        ms(1),
    )
    .unwrap();
    run.tool_started("a", Some(json!({}))).unwrap();
    run.tool_deferred("b", json!({"big": true})).unwrap();
    run.tool_finished("a", Ok(ToolOutput::Value(json!(1))), ms(1)).unwrap();
    let Step::Finish(outcome) = run.next_step() else { panic!("expected suspension") };
    assert_eq!(
        outcome.stop_reason,
        StopReason::AwaitingApproval {
            calls: vec![ToolCall {
                id: "b".into(),
                name: "add".into(),
                arguments: r#"{"big":true}"#.into()
            }]
        }
    );
    assert!(!run.is_finishing(), "suspension needs no confirmation");
    assert!(run.is_suspended());
    journal.extend(run.drain_events().filter(Event::is_durable));
    assert_eq!(journal.last().map(Event::kind), Some("run_suspended"));
    (run, journal)
}

#[test]
fn a_deferred_call_suspends_the_run_after_the_others_finish() {
    let (mut run, _) = suspended();
    assert_eq!(run.awaiting_approval().len(), 1);
    // Asking again does not record a second suspension.
    assert!(matches!(run.next_step(), Step::Finish(_)));
    assert!(!run.has_events());
}

#[test]
fn approval_from_a_serialized_journal_runs_the_call() {
    let (_, journal) = suspended();
    let text = serde_json::to_string(&journal).unwrap();
    let journal: Vec<Event> = serde_json::from_str(&text).unwrap();
    let mut run = Run::from_journal(&journal).unwrap();
    assert!(run.is_suspended());
    run.decide("b", Decision::Approve).unwrap();
    let Step::CallTools(calls) = run.next_step() else { panic!("expected the approved call") };
    assert_eq!(calls, vec![ToolInvocation { call: calls[0].call.clone(), approved: true }]);
    run.tool_started("b", Some(json!({"big": true}))).unwrap();
    run.tool_finished("b", Ok(ToolOutput::Value(json!("big done"))), ms(1)).unwrap();
    let request = expect_model(&mut run);
    let results: Vec<_> =
        request.messages.last().unwrap().tool_results_iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(results, ["a", "b"]);
    assert_eq!(run.metrics().audit[1].approval, ApprovalRecord::Approved);
}

#[test]
fn rejection_becomes_the_calls_error_result() {
    let (_, journal) = suspended();
    let mut run = Run::from_journal(&journal).unwrap();
    run.decide("b", Decision::Reject { reason: "too big".into() }).unwrap();
    let request = expect_model(&mut run);
    let result = request.messages.last().unwrap().tool_results_iter().nth(1).cloned().unwrap();
    assert_eq!(result, ToolResult::error("b", "Error: the call was rejected: too big"));
    assert_eq!(
        run.metrics().audit[1].approval,
        ApprovalRecord::Rejected { reason: "too big".into() }
    );
}

#[test]
fn decisions_are_checked() {
    let (mut run, _) = suspended();
    assert_eq!(run.decide("a", Decision::Approve), Err(RunError::UnknownCall("a".into())));
    assert_eq!(run.decide("zz", Decision::Approve), Err(RunError::UnknownCall("zz".into())));
    run.decide("b", Decision::Approve).unwrap();
    assert!(run.decide("b", Decision::Approve).is_err(), "decided once");
}

#[test]
fn pause_and_resume_are_journaled() {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    run.pause("operator");
    run.pause("twice");
    assert_eq!(run.paused(), Some("operator"));
    run.resume();
    run.resume();
    let kinds: Vec<_> = run.drain_events().map(|e| e.kind()).collect();
    assert_eq!(kinds, ["run_started", "paused", "resumed"]);
}

/// The machine decides where a requested pause takes effect: not in the middle of an
/// iteration, but at the next step between iterations, journaled there; withdrawn, the next
/// step journals `resumed` and goes on.
#[test]
fn a_requested_pause_takes_effect_between_iterations() {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("a", "add", "{}")]), ms(1)).unwrap();
    let Step::CallTools(calls) = run.next_step() else { panic!("expected the call") };
    run.request_pause(Some("operator".into()));
    assert!(run.pause_requested(), "the driver starts no further call");
    assert_eq!(run.paused(), None, "not paused in the middle of the iteration");
    run.tool_started(&calls[0].call.id, Some(serde_json::json!({}))).unwrap();
    run.tool_finished(&calls[0].call.id, Ok(ToolOutput::Value(serde_json::json!(1))), ms(1))
        .unwrap();
    let _ = run.drain_events().count();
    assert_eq!(run.next_step(), Step::Paused("operator".into()));
    assert_eq!(run.next_step(), Step::Paused("operator".into()), "paused until withdrawn");
    assert_eq!(kinds(&mut run), ["paused"], "journaled once");
    run.request_pause(None);
    let _ = expect_model(&mut run);
    assert_eq!(kinds(&mut run), ["resumed", "iteration_started", "model_requested"]);
}

#[test]
fn continuations_are_bounded() {
    let mut cfg = config();
    cfg.max_continuations = 1;
    let mut run = Run::new("r", cfg, vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(text_response("first"), ms(1)).unwrap();
    assert!(matches!(run.next_step(), Step::Finish(_)));
    assert!(run.continue_with("You left TODOs."));
    let request = expect_model(&mut run);
    assert_eq!(request.messages.last(), Some(&Message::user("You left TODOs.")));
    run.model_responded(text_response("second"), ms(1)).unwrap();
    assert!(matches!(run.next_step(), Step::Finish(_)));
    assert!(!run.continue_with("Again."), "the budget is one continuation");
    assert_eq!(expect_finish(&mut run).answer, "second");
}

/// The journal of a run that died during `b` (started, no result), `a` finished before.
fn crashed_during_b() -> Vec<Event> {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("a", "add", "{}"), ("b", "charge", "{}")]), ms(1))
        .unwrap();
    run.tool_started("a", Some(json!({}))).unwrap();
    run.tool_finished("a", Ok(ToolOutput::Value(json!(1))), ms(1)).unwrap();
    run.tool_started("b", Some(json!({}))).unwrap();
    run.drain_events().filter(Event::is_durable).collect()
}

/// That run folded again, `b` held for an operator and the run suspended; with its journal.
fn held() -> (Run, Vec<Event>) {
    let mut journal = crashed_during_b();
    let mut run = Run::from_journal(&journal).unwrap();
    run.hold_for_attention("b", "the executor died during 'charge'").unwrap();
    let _ = run.next_step();
    journal.extend(run.drain_events().filter(Event::is_durable));
    (run, journal)
}

#[test]
fn a_call_held_for_attention_suspends_the_run_until_an_operator_decides() {
    let mut run = Run::from_journal(&crashed_during_b()).unwrap();
    assert_eq!(run.running_calls().len(), 1);
    // Only a call in flight can be held, and once.
    assert!(run.hold_for_attention("a", "no").is_err());
    run.hold_for_attention("b", "the executor died during 'charge'").unwrap();
    assert!(run.hold_for_attention("b", "twice").is_err());
    let held: Vec<(&str, &str)> =
        run.needing_attention().iter().map(|(call, why)| (call.id.as_str(), *why)).collect();
    assert_eq!(held, [("b", "the executor died during 'charge'")]);
    let Step::Finish(outcome) = run.next_step() else { panic!("expected a suspension") };
    let StopReason::NeedsAttention { calls, reason } = &outcome.stop_reason else {
        panic!("{:?}", outcome.stop_reason)
    };
    assert_eq!((calls[0].id.as_str(), reason.as_str()), ("b", "the executor died during 'charge'"));
    assert!(run.is_suspended());
    let journal: Vec<Event> = run.drain_events().filter(Event::is_durable).collect();
    let kinds: Vec<&str> = journal.iter().map(Event::kind).collect();
    assert_eq!(kinds, ["attention_needed", "iteration_completed", "run_suspended"]);
    assert_eq!(
        crate::store::RunState::after(journal.last().unwrap()),
        crate::store::RunState::NeedsAttention
    );
}

#[test]
fn an_operator_supplies_the_result_of_a_held_call_and_the_run_goes_on() {
    // Through a serialized journal, as the process that continues the run sees it.
    let (_, journal) = held();
    let text = serde_json::to_string(&journal).unwrap();
    let journal: Vec<Event> = serde_json::from_str(&text).unwrap();
    let mut run = Run::from_journal(&journal).unwrap();
    assert_eq!(run.needing_attention().len(), 1);
    run.decide("b", Decision::SetResult { result: json!("charged 42") }).unwrap();
    assert!(run.needing_attention().is_empty());
    // The call is not run: the model is asked with both results.
    let request = expect_model(&mut run);
    let results: Vec<String> = request
        .messages
        .last()
        .unwrap()
        .tool_results_iter()
        .map(|r| format!("{}={}", r.call_id, r.content.to_text()))
        .collect();
    assert_eq!(results, ["a=1", "b=charged 42"]);
}

#[test]
fn an_operator_retries_a_held_call_and_it_counts_once() {
    let (mut run, _) = held();
    run.decide("b", Decision::Approve).unwrap();
    let Step::CallTools(calls) = run.next_step() else { panic!("expected the call again") };
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].call.id, "b");
    run.tool_started("b", Some(json!({}))).unwrap();
    run.tool_finished("b", Ok(ToolOutput::Value(json!(2))), ms(1)).unwrap();
    assert_eq!(run.metrics().tool_calls, 2, "a, and b once though it started twice");
    let _ = expect_model(&mut run);
}
