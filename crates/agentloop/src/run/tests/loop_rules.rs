#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

#[test]
fn plain_answer_ends_the_run_without_a_text_event() {
    let mut run = Run::new("r1", config(), vec![Message::user("hi")]);
    let request = expect_model(&mut run);
    assert_eq!(request.instructions.as_deref(), Some("be brief"));
    assert_eq!(*request.messages, vec![Message::user("hi")]);
    assert_eq!(request.tools.len(), 1);
    run.model_responded(text_response("  Hello there \n"), ms(3)).unwrap();
    let outcome = expect_finish(&mut run);
    assert_eq!(outcome.answer, "Hello there");
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(outcome.iterations, 1);
    assert_eq!(outcome.usage.input, 10);
    assert_eq!(
        kinds(&mut run),
        [
            "run_started",
            "iteration_started",
            "model_requested",
            "model_responded",
            "iteration_completed",
            "run_finished"
        ]
    );
    assert!(run.is_finished());
    // Asking again returns the same outcome and records nothing.
    assert_eq!(expect_finish(&mut run).answer, "Hello there");
    assert!(!run.has_events());
}

#[test]
fn instructions_are_not_stored_in_history() {
    let mut run = Run::new("r", config(), vec![Message::user("hi")]);
    let _ = expect_model(&mut run);
    assert!(run.history().iter().all(|m| m.role != Role::System && m.role != Role::Developer));
}

#[test]
fn tool_round_trip_appends_results_in_call_order() {
    let mut run = Run::new("r", config(), vec![Message::user("sum")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("a", "add", "{}"), ("b", "add", "{}")]), ms(1)).unwrap();
    let Step::CallTools(calls) = run.next_step() else { panic!("expected tools") };
    assert_eq!(calls.iter().map(|c| c.call.id.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    run.tool_started("a", Some(json!({}))).unwrap();
    run.tool_started("b", Some(json!({}))).unwrap();
    // b finishes first; the history still lists a then b.
    run.tool_finished("b", Ok(ToolOutput::Value(json!(2))), ms(1)).unwrap();
    run.tool_finished("a", Ok(ToolOutput::Value(json!("one"))), ms(1)).unwrap();
    let request = expect_model(&mut run);
    let last = request.messages.last().unwrap();
    assert_eq!(last.role, Role::Tool);
    let results: Vec<_> = last.tool_results_iter().cloned().collect();
    assert_eq!(
        results,
        vec![
            ToolResult::ok("a", ToolResultContent::Text("one".into())),
            ToolResult::ok("b", json!(2))
        ]
    );
    assert_eq!(
        kinds(&mut run),
        [
            "run_started",
            "iteration_started",
            "model_requested",
            "model_responded",
            "tool_detected",
            "step_started",
            "tool_started",
            "step_started",
            "tool_started",
            "tool_completed",
            "step_completed",
            "tool_completed",
            "step_completed",
            "iteration_completed",
            "iteration_started",
            "model_requested"
        ]
    );
}

#[test]
fn text_before_tool_calls_is_a_text_event() {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    let mut response = calls_response(&[("a", "add", "{}")]);
    response.message.content.insert(0, Part::text("Let me add."));
    response.message.content.insert(
        0,
        Part::Reasoning(crate::message::Reasoning { text: "think".into(), opaque: None }),
    );
    run.model_responded(response, ms(1)).unwrap();
    let events: Vec<Event> = run.drain_events().collect();
    let tail: Vec<_> = events.iter().skip(4).map(Event::kind).collect();
    assert_eq!(tail, ["reasoning", "text", "tool_detected"]);
    assert_eq!(events[5], Event::Text { text: "Let me add.".into() });
}

#[test]
fn unknown_or_repeated_call_ids_are_refused() {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("a", "add", "{}")]), ms(1)).unwrap();
    assert_eq!(run.tool_started("zz", None), Err(RunError::UnknownCall("zz".into())));
    run.tool_finished("a", Ok(ToolOutput::Value(json!(1))), ms(1)).unwrap();
    assert!(matches!(
        run.tool_finished("a", Ok(ToolOutput::Value(json!(1))), ms(1)),
        Err(RunError::Unexpected { .. })
    ));
    assert!(matches!(run.model_failed(ProviderError::Cancelled), Err(RunError::Unexpected { .. })));
}

#[test]
fn require_done_tool_keeps_looping_and_nudges() {
    let mut cfg = config();
    cfg.require_done_tool = true;
    let mut run = Run::new("r", cfg, vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(text_response("I think I'm done"), ms(1)).unwrap();
    let request = expect_model(&mut run);
    assert_eq!(request.messages.len(), 3);
    assert_eq!(request.messages[2], Message::user(DEFAULT_DONE_TOOL_NUDGE));
    assert_eq!(run.iteration(), 2);
    let events: Vec<_> = run.drain_events().map(|e| e.kind()).collect();
    assert!(events.contains(&"text"), "a non-terminal turn's text is an event: {events:?}");
}

#[test]
fn require_done_tool_without_nudge_sends_history_as_is() {
    let mut cfg = config();
    cfg.require_done_tool = true;
    cfg.done_tool_nudge = None;
    let mut run = Run::new("r", cfg, vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(text_response("thinking"), ms(1)).unwrap();
    let request = expect_model(&mut run);
    assert_eq!(*request.messages, vec![Message::user("x"), Message::assistant("thinking")]);
}

#[test]
fn done_signal_ends_the_run_and_keeps_the_result_in_history() {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("a", "add", "{}"), ("d", "task_complete", "{}")]), ms(1))
        .unwrap();
    run.tool_finished("d", Ok(ToolOutput::Done("all done".into())), ms(1)).unwrap();
    run.tool_finished("a", Ok(ToolOutput::Value(json!(3))), ms(1)).unwrap();
    let outcome = expect_finish(&mut run);
    assert_eq!(outcome.answer, "all done");
    assert_eq!(outcome.stop_reason, StopReason::DoneTool { tool: "task_complete".into() });
    let last = run.history().last().unwrap();
    assert_eq!(
        last.tool_results_iter().nth(1).unwrap().content,
        ToolResultContent::Text("all done".into())
    );
}

#[test]
fn ask_user_ends_the_turn_awaiting_input() {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("q", "ask_user", "{}")]), ms(1)).unwrap();
    run.tool_finished("q", Ok(ToolOutput::AskUser("Which city?".into())), ms(1)).unwrap();
    let outcome = expect_finish(&mut run);
    assert_eq!(outcome.answer, "Which city?");
    assert_eq!(outcome.stop_reason, StopReason::AwaitingInput { tool: "ask_user".into() });
    assert!(outcome.is_success());
}

#[test]
fn finish_reasons_decide() {
    let cases = [
        (FinishReason::Length, StopReason::ContextLimit, "run_finished"),
        (FinishReason::ContentFilter, StopReason::ContentFiltered, "run_finished"),
        (
            FinishReason::Error,
            StopReason::ModelError { message: "the model finished with reason 'error'".into() },
            "run_failed",
        ),
        (FinishReason::Other("end_turn".into()), StopReason::Completed, "run_finished"),
    ];
    for (finish, stop, terminal) in cases {
        let mut run = Run::new("r", config(), vec![Message::user("x")]);
        let _ = expect_model(&mut run);
        let mut response = text_response("partial");
        response.finish_reason = finish.clone();
        run.model_responded(response, ms(1)).unwrap();
        let outcome = expect_finish(&mut run);
        assert_eq!(outcome.stop_reason, stop, "{finish:?}");
        assert_eq!(kinds(&mut run).last().copied(), Some(terminal), "{finish:?}");
    }
}

#[test]
fn tool_calls_continue_even_when_finish_reason_says_stop() {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    let mut response = calls_response(&[("a", "add", "{}")]);
    response.finish_reason = FinishReason::Stop;
    run.model_responded(response, ms(1)).unwrap();
    assert!(matches!(run.next_step(), Step::CallTools(_)));
}

#[test]
fn max_iterations_winds_down_on_a_temporary_history() {
    let mut cfg = config();
    cfg.limits.max_iterations = 1;
    let mut run = Run::new("r", cfg, vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("a", "add", "{}")]), ms(1)).unwrap();
    run.tool_finished("a", Ok(ToolOutput::Value(json!(1))), ms(1)).unwrap();
    let request = expect_model(&mut run);
    assert!(request.tools.is_empty());
    assert_eq!(request.tool_choice, ToolChoice::None);
    assert_eq!(request.messages.len(), 4);
    assert_eq!(request.messages[3], Message::user(DEFAULT_WIND_DOWN_PROMPT));
    assert_eq!(run.history().len(), 3, "the summary request is not added to the history");
    let events: Vec<Event> = run.drain_events().collect();
    assert_eq!(
        events.last(),
        Some(&Event::ModelRequested {
            iteration: 1,
            purpose: ModelPurpose::WindDown { limit: LimitKind::Iterations }
        })
    );
    run.model_responded(text_response("Summary: 1"), ms(1)).unwrap();
    let outcome = expect_finish(&mut run);
    assert_eq!(outcome.answer, "Summary: 1");
    assert_eq!(outcome.stop_reason, StopReason::LimitReached { limit: LimitKind::Iterations });
    assert_eq!(outcome.iterations, 1);
}

#[test]
fn failed_wind_down_gives_the_fallback_text() {
    let mut cfg = config();
    cfg.limits.max_iterations = 1;
    cfg.wind_down_fallback = "fallback".into();
    let mut run = Run::new("r", cfg, vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("a", "add", "{}")]), ms(1)).unwrap();
    run.tool_finished("a", Ok(ToolOutput::Value(json!(1))), ms(1)).unwrap();
    let _ = expect_model(&mut run);
    run.model_failed(ProviderError::Network { message: "down".into() }).unwrap();
    let outcome = expect_finish(&mut run);
    assert_eq!(outcome.answer, "fallback");
    assert_eq!(outcome.stop_reason, StopReason::LimitReached { limit: LimitKind::Iterations });
}

#[test]
fn model_failure_fails_the_run() {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_failed(ProviderError::Auth { status: 401, message: "bad key".into() }).unwrap();
    let outcome = expect_finish(&mut run);
    assert!(matches!(outcome.stop_reason, StopReason::ModelError { .. }));
    let events: Vec<Event> = run.drain_events().collect();
    assert!(
        matches!(events.last(), Some(Event::RunFailed { error, .. }) if error.contains("bad key"))
    );
}

#[test]
fn tool_errors_become_error_results() {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("a", "nope", "{}"), ("b", "add", "{}")]), ms(1)).unwrap();
    run.tool_finished("a", Err(ToolError::UnknownTool("nope".into())), ms(0)).unwrap();
    run.tool_finished("b", Err(ToolError::Timeout(30_000)), ms(30_000)).unwrap();
    let events: Vec<Event> = run.drain_events().collect();
    assert!(events.iter().any(|e| matches!(e, Event::ToolFailed { .. })));
    assert!(events.iter().any(|e| matches!(e, Event::ToolTimedOut { timeout_ms: 30_000, .. })));
    let request = expect_model(&mut run);
    let results: Vec<_> = request.messages.last().unwrap().tool_results_iter().cloned().collect();
    assert_eq!(results[0], ToolResult::error("a", "Error: Unknown tool 'nope'"));
    assert!(results[1].is_error);
}

#[test]
fn cancel_answers_open_calls_and_ends_the_run() {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("a", "add", "{}"), ("b", "add", "{}")]), ms(1)).unwrap();
    run.tool_finished("a", Ok(ToolOutput::Value(json!(1))), ms(1)).unwrap();
    run.cancel("user pressed stop");
    let outcome = expect_finish(&mut run);
    assert_eq!(outcome.stop_reason, StopReason::Cancelled { reason: "user pressed stop".into() });
    let last = run.history().last().unwrap();
    assert_eq!(last.tool_results_iter().count(), 2);
    assert!(last.tool_results_iter().nth(1).unwrap().is_error);
    run.cancel("again");
    assert_eq!(kinds(&mut run).iter().filter(|k| **k == "run_cancelled").count(), 1);
}

/// Drives a full run by hand and returns it with its journal.
fn full_run() -> (Run, Vec<Event>) {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let mut journal = Vec::new();
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("a", "add", r#"{"a":1}"#), ("b", "add", "oops")]), ms(1))
        .unwrap();
    run.tool_started("a", Some(json!({"a": 1}))).unwrap();
    run.tool_started("b", None).unwrap();
    run.tool_finished("a", Ok(ToolOutput::Value(json!(1))), ms(1)).unwrap();
    run.tool_finished("b", Err(ToolError::BadJson("eof".into())), ms(1)).unwrap();
    let _ = expect_model(&mut run);
    run.model_responded(text_response("done"), ms(1)).unwrap();
    let _ = expect_finish(&mut run);
    journal.extend(run.drain_events().filter(Event::is_durable));
    (run, journal)
}

#[test]
fn the_run_is_a_fold_over_its_journal() {
    let (live, journal) = full_run();
    let rebuilt = Run::from_journal(&journal).unwrap();
    assert_eq!(serde_json::to_value(&rebuilt).unwrap(), serde_json::to_value(&live).unwrap());
    // Every prefix folds, too.
    for end in 1..journal.len() {
        Run::from_journal(&journal[..end]).unwrap();
    }
}

#[test]
fn bad_json_arguments_are_journaled_raw() {
    let (_, journal) = full_run();
    let raw = journal.iter().find_map(|e| match e {
        Event::ToolStarted { call, arguments } if call.id == "b" => Some(Value::clone(arguments)),
        _ => None,
    });
    assert_eq!(raw, Some(json!({"_raw": "oops"})));
}

#[test]
fn resume_repeats_only_unfinished_work() {
    let (_, journal) = full_run();
    // Cut right after call a finished and b started: only b runs again.
    let cut = journal.iter().position(|e| matches!(e, Event::ToolCompleted { .. })).unwrap() + 1;
    let mut run = Run::from_journal(&journal[..cut]).unwrap();
    let Step::CallTools(calls) = run.next_step() else { panic!("expected tools") };
    assert_eq!(calls.iter().map(|c| c.call.id.as_str()).collect::<Vec<_>>(), ["b"]);
    // Cut right after a model request: the same request is made again.
    let cut = journal.iter().rposition(|e| matches!(e, Event::ModelRequested { .. })).unwrap() + 1;
    let mut run = Run::from_journal(&journal[..cut]).unwrap();
    let request = expect_model(&mut run);
    assert_eq!(request.messages.len(), 3);
    assert!(!run.has_events(), "a repeated request is not journaled twice");
}

#[test]
fn journals_that_do_not_fold_are_rejected() {
    let (_, journal) = full_run();
    assert_eq!(
        Run::from_journal(&journal[1..]).unwrap_err(),
        RunError::Unexpected { what: "iteration_started", phase: "new" }
    );
    assert_eq!(Run::from_journal(&[]).unwrap_err(), RunError::NotStarted);
    let mut twice = journal.clone();
    twice.insert(1, journal[0].clone());
    assert!(Run::from_journal(&twice).is_err());
}

#[test]
fn snapshots_round_trip_and_check_their_version() {
    let (live, _) = full_run();
    let snapshot = serde_json::to_value(&live).unwrap();
    let restored = Run::from_snapshot(snapshot.clone()).unwrap();
    assert_eq!(serde_json::to_value(&restored).unwrap(), snapshot);
    let mut future = snapshot;
    future["schema_version"] = json!(99);
    assert_eq!(
        Run::from_snapshot(future).unwrap_err(),
        RunError::UnsupportedVersion { found: 99, supported: SCHEMA_VERSION }
    );
    assert!(matches!(
        Run::from_snapshot(json!({"schema_version": 1})),
        Err(RunError::InvalidSnapshot(_))
    ));
}

#[test]
fn journal_events_round_trip_through_json() {
    let (_, journal) = full_run();
    let text = serde_json::to_string(&journal).unwrap();
    let back: Vec<Event> = serde_json::from_str(&text).unwrap();
    assert_eq!(back, journal);
    assert_eq!(serde_json::to_value(&journal[0]).unwrap()["type"], "run_started");
}

#[test]
fn calls_that_will_never_run_leave_the_history() {
    // A wind-down answer with calls (the model ignored tool_choice none).
    let mut cfg = config();
    cfg.limits.max_iterations = 1;
    let mut run = Run::new("r", cfg, vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("a", "add", "{}")]), ms(1)).unwrap();
    run.tool_finished("a", Ok(ToolOutput::Value(json!(1))), ms(1)).unwrap();
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("b", "add", "{}")]), ms(1)).unwrap();
    let outcome = expect_finish(&mut run);
    assert_eq!(outcome.answer, DEFAULT_WIND_DOWN_FALLBACK);
    assert_eq!(run.history().len(), 3, "the call-only wind-down message is dropped");
    // A truncated turn with text and a call keeps its text.
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    let mut response = calls_response(&[("a", "add", "{\"a\":")]);
    response.message.content.insert(0, Part::text("partial"));
    response.finish_reason = FinishReason::Length;
    run.model_responded(response, ms(1)).unwrap();
    assert_eq!(expect_finish(&mut run).stop_reason, StopReason::ContextLimit);
    assert_eq!(run.history().last(), Some(&Message::assistant("partial")));
}

#[test]
fn requests_share_the_history_instead_of_copying_it() {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let first = expect_model(&mut run);
    assert!(Arc::ptr_eq(&first.messages, &run.history), "a request shares the run's history");
    assert!(Arc::ptr_eq(&first.tools, &run.config.tools), "and its tools");
    let shared = Arc::as_ptr(&first.messages);
    drop(first);
    run.model_responded(calls_response(&[("a", "add", "{}")]), ms(1)).unwrap();
    run.tool_finished("a", Ok(ToolOutput::Value(json!(1))), ms(1)).unwrap();
    let second = expect_model(&mut run);
    assert_eq!(
        Arc::as_ptr(&second.messages),
        shared,
        "appends reuse the history once no request holds it"
    );
    assert_eq!(second.messages.len(), 3);
}

#[test]
fn the_whole_history_plan_is_the_window_plan() {
    use crate::context::window::{plan_window, WindowPolicy};
    let policies = [
        (None, None),
        (Some(3), None),
        (Some(1000), None),
        (None, Some(1_000_000)),
        (None, Some(30)),
        (Some(1000), Some(1_000_000)),
    ];
    for (max_messages, context_window) in policies {
        let mut config = config();
        config.context.max_input_messages = max_messages;
        config.context.context_window = context_window;
        config.context.reserved_output = 0;
        config.context.margin = 0;
        config.context.compaction.enabled = false;
        let input = vec![Message::system("sys"), Message::user("x")];
        let mut run = Run::new("r", config, input);
        for round in 0..12 {
            let Step::CallModel(_) = run.next_step() else { break };
            // What `plan` chose against `plan_window` over the whole history.
            let plan = run.plan();
            run.ensure_counts();
            let budget = run.config.context.input_budget(run.config.max_tokens);
            let policy = WindowPolicy { max_messages, max_tokens: budget };
            let expected = plan_window(
                &run.history,
                &run.cache.counts,
                &run.context.pinned,
                run.floor(),
                (0, 0),
                policy,
            );
            assert_eq!(
                plan, expected,
                "policy {max_messages:?} / {context_window:?}, round {round}"
            );
            let id = format!("c{round}");
            // No reported usage: the token estimate stays uncalibrated, as the budget above.
            let uncalibrated = |calls: &[(&str, &str, &str)]| ModelResponse {
                usage: Usage::default(),
                ..calls_response(calls)
            };
            if round % 3 == 2 {
                let other = format!("other{round}");
                let calls = [(id.as_str(), "add", "{}"), (other.as_str(), "add", "{\"a\":1}")];
                run.model_responded(uncalibrated(&calls), ms(1)).unwrap();
                run.tool_finished(&other, Ok(ToolOutput::Value(json!(2))), ms(1)).unwrap();
            } else {
                run.model_responded(uncalibrated(&[(id.as_str(), "add", "{}")]), ms(1)).unwrap();
            }
            let plan = run.plan();
            let expected = plan_window(
                &run.history,
                &run.cache.counts,
                &run.context.pinned,
                run.floor(),
                (0, 0),
                WindowPolicy { max_messages, max_tokens: budget },
            );
            assert_eq!(plan, expected, "with a call open, round {round}");
            run.tool_finished(&id, Ok(ToolOutput::Value(json!(1))), ms(1)).unwrap();
        }
    }
}

#[test]
fn a_repeated_call_id_is_suffixed_also_after_the_run_is_folded_from_its_journal() {
    let mut run = Run::new("r", config(), vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("call_0", "add", "{}")]), ms(1)).unwrap();
    run.tool_started("call_0", Some(json!({}))).unwrap();
    run.tool_finished("call_0", Ok(ToolOutput::Value(json!(1))), ms(1)).unwrap();
    let _ = expect_model(&mut run);
    let journal: Vec<Event> = run.drain_events().filter(Event::is_durable).collect();
    // A process that picks the run up from its journal: the next response repeats the id.
    let mut run = Run::from_journal(&journal).unwrap();
    let calls = [("call_0", "add", "{}"), ("call_0", "add", "{\"a\":1}")];
    run.model_responded(calls_response(&calls), ms(1)).unwrap();
    let Step::CallTools(invocations) = run.next_step() else { panic!("expected the calls") };
    let ids: Vec<&str> = invocations.iter().map(|i| i.call.id.as_str()).collect();
    assert_eq!(ids, ["call_0.2", "call_0.3"]);
    // And again on the next response.
    for id in ids.clone() {
        run.tool_started(id, Some(json!({}))).unwrap();
        run.tool_finished(id, Ok(ToolOutput::Value(json!(2))), ms(1)).unwrap();
    }
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("call_0.2", "add", "{}")]), ms(1)).unwrap();
    let Step::CallTools(invocations) = run.next_step() else { panic!("expected the call") };
    assert_eq!(invocations[0].call.id, "call_0.2.2");
}
