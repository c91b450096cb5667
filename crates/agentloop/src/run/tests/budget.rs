#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

fn run_with(limits: Limits) -> Run {
    let mut cfg = config();
    cfg.limits = limits;
    Run::new("r", cfg, vec![Message::user("x")])
}

/// One iteration: the model calls `add` with `args`, the call succeeds.
fn tool_turn(run: &mut Run, id: &str, args: &str) -> Gate {
    let _ = expect_model(run);
    run.model_responded(calls_response(&[(id, "add", args)]), ms(1)).unwrap();
    let gate = run.gate_tool(id).unwrap();
    if gate == Gate::Run {
        run.tool_started(id, Some(json!({}))).unwrap();
        run.tool_finished(id, Ok(ToolOutput::Value(json!(1))), ms(1)).unwrap();
    }
    gate
}

fn wind_down_limit(run: &mut Run) -> LimitKind {
    let request = expect_model(run);
    assert!(request.tools.is_empty(), "the wind-down call offers no tools");
    let purpose = run.drain_events().find_map(|e| match e {
        Event::ModelRequested { purpose: ModelPurpose::WindDown { limit }, .. } => Some(limit),
        _ => None,
    });
    purpose.expect("a wind-down request")
}

#[test]
fn tool_call_limit_refuses_the_call_and_winds_down() {
    let mut run = run_with(Limits { max_tool_calls: Some(1), ..Limits::default() });
    assert_eq!(tool_turn(&mut run, "a", "{}"), Gate::Run);
    assert_eq!(tool_turn(&mut run, "b", "{}"), Gate::Handled);
    let results: Vec<_> = run.history().last().unwrap().tool_results_iter().cloned().collect();
    assert_eq!(
        results,
        vec![ToolResult::error(
            "b",
            "Error: the call was not run: the run reached its tool-call limit"
        )]
    );
    assert_eq!(wind_down_limit(&mut run), LimitKind::ToolCalls);
    run.model_responded(text_response("Partial answer."), ms(1)).unwrap();
    let outcome = expect_finish(&mut run);
    assert_eq!(outcome.stop_reason, StopReason::LimitReached { limit: LimitKind::ToolCalls });
    assert_eq!(outcome.answer, "Partial answer.");
    assert_eq!(outcome.metrics.tool_calls, 1, "the refused call did not run");
}

#[test]
fn a_refused_call_whose_arguments_are_not_json_is_audited_by_the_raw_rule() {
    let mut run = run_with(Limits { max_tool_calls: Some(1), ..Limits::default() });
    assert_eq!(tool_turn(&mut run, "a", "{}"), Gate::Run);
    assert_eq!(tool_turn(&mut run, "b", "{oops"), Gate::Handled, "refused before it started");
    let audited = |run: &Run| {
        run.metrics().audit.iter().find(|e| e.call_id == "b").map(|e| Value::clone(&e.arguments))
    };
    // The same shape a started call's `tool_started` event carries.
    let expected = crate::tool::raw_arguments::wrap("{oops");
    assert_eq!(audited(&run), Some(expected.clone()));
    let journal: Vec<Event> = run.drain_events().filter(Event::is_durable).collect();
    assert_eq!(audited(&Run::from_journal(&journal).unwrap()), Some(expected));
}

#[test]
fn a_call_interrupted_by_a_crash_counts_once_after_resume() {
    let mut limits = Limits { max_tool_calls: Some(1), ..Limits::default() };
    limits.max_tool_calls_per_tool.insert("add".into(), 1);
    let mut run = run_with(limits);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("a", "add", "{}")]), ms(1)).unwrap();
    assert_eq!(run.gate_tool("a").unwrap(), Gate::Run);
    run.tool_started("a", Some(json!({}))).unwrap();
    // The process dies during the call: the journal ends with `tool_started`.
    let journal: Vec<Event> = run.drain_events().filter(Event::is_durable).collect();
    let mut resumed = Run::from_journal(&journal).unwrap();
    let Step::CallTools(calls) = resumed.next_step() else { panic!("expected the call again") };
    assert_eq!(calls.len(), 1);
    assert_eq!(resumed.gate_tool("a").unwrap(), Gate::Run, "not refused by its own count");
    resumed.tool_started("a", Some(json!({}))).unwrap();
    resumed.tool_finished("a", Ok(ToolOutput::Value(json!(1))), ms(1)).unwrap();
    let _ = expect_model(&mut resumed);
    resumed.model_responded(text_response("Done."), ms(1)).unwrap();
    let outcome = expect_finish(&mut resumed);
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(outcome.answer, "Done.");
    assert_eq!(outcome.metrics.tool_calls, 1);
    assert_eq!(outcome.metrics.tool_calls_by_name.get("add"), Some(&1));
    // And the journal of the resumed run folds to the same count.
    let mut all = journal.clone();
    all.extend(resumed.drain_events().filter(Event::is_durable));
    assert_eq!(Run::from_journal(&all).unwrap().metrics().tool_calls, 1);
}

#[test]
fn per_tool_limit() {
    let mut limits = Limits::default();
    limits.max_tool_calls_per_tool.insert("add".into(), 2);
    let mut run = run_with(limits);
    assert_eq!(tool_turn(&mut run, "a", r#"{"n":1}"#), Gate::Run);
    assert_eq!(tool_turn(&mut run, "b", r#"{"n":2}"#), Gate::Run);
    assert_eq!(tool_turn(&mut run, "c", r#"{"n":3}"#), Gate::Handled);
    assert_eq!(wind_down_limit(&mut run), LimitKind::ToolCallsOf { tool: "add".into() });
}

#[test]
fn token_limits_are_checked_before_the_next_model_call() {
    // Each response reports 10 input and 5 output tokens.
    let cases = [
        (Limits { max_input_tokens: Some(20), ..Limits::default() }, LimitKind::InputTokens, 2),
        (Limits { max_output_tokens: Some(5), ..Limits::default() }, LimitKind::OutputTokens, 1),
        (Limits { max_total_tokens: Some(30), ..Limits::default() }, LimitKind::TotalTokens, 2),
    ];
    for (limits, expected, iterations) in cases {
        let mut run = run_with(limits);
        for i in 1..=iterations {
            // The limit is also checked before each tool call: the call of the turn that
            // crossed it is refused.
            let gate = tool_turn(&mut run, &format!("c{i}"), &format!("{{\"i\":{i}}}"));
            assert_eq!(
                gate,
                if i == iterations { Gate::Handled } else { Gate::Run },
                "{expected:?} {i}"
            );
        }
        assert_eq!(wind_down_limit(&mut run), expected);
        assert_eq!(run.iteration(), iterations);
    }
}

#[test]
fn cost_limit_uses_the_price() {
    let mut cfg = config();
    cfg.limits.max_cost_usd = Some(0.000_02);
    // 10 input tokens at $1/Mtok and 5 output at $2/Mtok = $0.00002 per call.
    cfg.price = Some(Price::per_million(1.0, 2.0));
    let mut run = Run::new("r", cfg, vec![Message::user("x")]);
    assert_eq!(tool_turn(&mut run, "a", "{}"), Gate::Handled, "the first call spent the budget");
    assert_eq!(wind_down_limit(&mut run), LimitKind::Cost);
    assert!((run.spent().cost_usd - 0.000_02).abs() < 1e-12);
}

#[test]
fn price_counts_cached_input_at_its_own_rate_and_tables_match_prefixes() {
    let price = Price::per_million(2.0, 8.0).with_cached_input(0.5);
    let usage = Usage {
        input: 1_000_000,
        output: 500_000,
        cached_input: 400_000,
        reasoning: 0,
        cache_write_input: 0,
    };
    assert!((price.cost(&usage) - (1.2 + 0.2 + 4.0)).abs() < 1e-9);
    let table = PriceTable::default()
        .with("gpt-4o", Price::per_million(2.5, 10.0))
        .with("gpt-4o-mini", Price::per_million(0.15, 0.6));
    assert_eq!(table.get("gpt-4o-mini-2024-07-18"), Some(Price::per_million(0.15, 0.6)));
    assert_eq!(table.get("gpt-4o-2024-08-06"), Some(Price::per_million(2.5, 10.0)));
    assert_eq!(table.get("claude"), None);
}

#[test]
fn time_limit_is_checked_with_the_drivers_clock() {
    let mut run = run_with(Limits { max_duration_ms: Some(1_000), ..Limits::default() });
    run.set_elapsed(Duration::from_millis(10));
    assert_eq!(tool_turn(&mut run, "a", "{}"), Gate::Run);
    run.set_elapsed(Duration::from_millis(1_500));
    assert_eq!(wind_down_limit(&mut run), LimitKind::Duration);
    // The breach is journaled, so the fold does not need the clock.
    let journal: Vec<Event> = {
        let mut run = run_with(Limits { max_duration_ms: Some(1_000), ..Limits::default() });
        run.set_elapsed(Duration::from_millis(2_000));
        let _ = run.next_step();
        run.drain_events().filter(Event::is_durable).collect()
    };
    assert!(journal
        .iter()
        .any(|e| matches!(e, Event::LimitReached { limit: LimitKind::Duration })));
    let mut rebuilt = Run::from_journal(&journal).unwrap();
    let Step::CallModel(request) = rebuilt.next_step() else { panic!() };
    assert!(request.tools.is_empty());
}

#[test]
fn retryable_model_errors_are_retried_until_the_limit() {
    let mut run = run_with(Limits { max_consecutive_model_errors: 2, ..Limits::default() });
    let _ = expect_model(&mut run);
    run.model_failed(ProviderError::Server { status: 503, message: "busy".into() }).unwrap();
    let _ = expect_model(&mut run);
    run.model_failed(ProviderError::Timeout { message: "idle".into() }).unwrap();
    let outcome = expect_finish(&mut run);
    assert_eq!(
        outcome.stop_reason,
        StopReason::LimitReached { limit: LimitKind::ConsecutiveModelErrors }
    );
    // A success in between resets the count.
    let mut run = run_with(Limits { max_consecutive_model_errors: 2, ..Limits::default() });
    let _ = expect_model(&mut run);
    run.model_failed(ProviderError::Server { status: 503, message: "busy".into() }).unwrap();
    assert_eq!(tool_turn(&mut run, "a", "{}"), Gate::Run);
    let _ = expect_model(&mut run);
    run.model_failed(ProviderError::Server { status: 503, message: "busy".into() }).unwrap();
    assert!(matches!(run.next_step(), Step::CallModel(_)));
}

fn failing_turn(run: &mut Run, id: &str, args: &str, error: &str) {
    let _ = expect_model(run);
    run.model_responded(calls_response(&[(id, "add", args)]), ms(1)).unwrap();
    if run.gate_tool(id).unwrap() == Gate::Run && !run.is_ending() {
        run.tool_started(id, Some(json!({}))).unwrap();
        run.tool_finished(id, Err(ToolError::Failed(error.into())), ms(1)).unwrap();
    }
}

#[test]
fn the_same_failure_three_times_opens_the_circuit() {
    let mut run = run_with(Limits::default());
    failing_turn(&mut run, "a", r#"{"i":1}"#, "disk full");
    failing_turn(&mut run, "b", r#"{"i":2}"#, "disk full");
    assert!(!run.is_ending());
    failing_turn(&mut run, "c", r#"{"i":3}"#, "disk full");
    let outcome = expect_finish(&mut run);
    assert_eq!(
        outcome.stop_reason,
        StopReason::CircuitOpen { tool: "add".into(), error: "disk full".into(), count: 3 }
    );
    assert!(outcome.is_failure());
    let events: Vec<_> = run.drain_events().collect();
    assert!(
        matches!(events.last(), Some(Event::RunFailed { error, .. }) if error.contains("3 times in a row"))
    );
    // The failing call's own result is in the history.
    let last = run.history().last().unwrap();
    assert_eq!(last.tool_results_iter().next().unwrap().content.to_text(), "Error: disk full");
}

#[test]
fn different_errors_or_a_success_reset_the_breaker() {
    let mut run = run_with(Limits::default());
    failing_turn(&mut run, "a", r#"{"i":1}"#, "disk full");
    failing_turn(&mut run, "b", r#"{"i":2}"#, "disk full");
    failing_turn(&mut run, "c", r#"{"i":3}"#, "permission denied");
    assert_eq!(tool_turn(&mut run, "d", r#"{"i":4}"#), Gate::Run);
    failing_turn(&mut run, "e", r#"{"i":5}"#, "permission denied");
    failing_turn(&mut run, "f", r#"{"i":6}"#, "permission denied");
    assert!(!run.is_ending());
}

#[test]
fn repeated_identical_calls_warn_note_or_stop() {
    for action in [StallAction::Warn, StallAction::Note, StallAction::Stop] {
        let mut cfg = config();
        cfg.breaker.stall_action = action;
        let mut run = Run::new("r", cfg, vec![Message::user("x")]);
        assert_eq!(tool_turn(&mut run, "a", r#"{"q":"same"}"#), Gate::Run);
        assert_eq!(tool_turn(&mut run, "b", r#"{"q":"same"}"#), Gate::Run);
        let gate = tool_turn(&mut run, "c", r#"{"q":"same"}"#);
        let events: Vec<Event> = run.drain_events().collect();
        assert!(
            events.contains(&Event::StallDetected { tool: "add".into(), count: 3, action }),
            "{action:?}"
        );
        match action {
            StallAction::Warn => {
                assert_eq!(gate, Gate::Run);
                let request = expect_model(&mut run);
                assert_eq!(request.messages.last().unwrap().role, Role::Tool);
            }
            StallAction::Note => {
                assert_eq!(gate, Gate::Run);
                let request = expect_model(&mut run);
                assert_eq!(request.messages.last(), Some(&Message::user(DEFAULT_STALL_NOTE)));
                assert!(
                    run.history().iter().all(|m| m.text() != DEFAULT_STALL_NOTE),
                    "the note is not kept"
                );
                run.model_responded(text_response("ok"), ms(1)).unwrap();
            }
            StallAction::Stop => {
                assert_eq!(gate, Gate::Handled);
                let outcome = expect_finish(&mut run);
                assert_eq!(
                    outcome.stop_reason,
                    StopReason::Stalled { tool: "add".into(), count: 3 }
                );
                crate::run::tests::assert_history_answered(run.history());
            }
        }
    }
}

#[test]
fn fail_mode_ends_the_run_at_the_first_tool_error() {
    let mut cfg = config();
    cfg.breaker.tool_failure_mode = ToolFailureMode::Fail;
    let mut run = Run::new("r", cfg, vec![Message::user("x")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("a", "add", "{}"), ("b", "add", "{\"x\":1}")]), ms(1))
        .unwrap();
    run.tool_started("a", Some(json!({}))).unwrap();
    run.tool_started("b", Some(json!({"x": 1}))).unwrap();
    run.tool_finished("a", Err(ToolError::Failed("boom".into())), ms(1)).unwrap();
    assert!(run.is_ending());
    let outcome = expect_finish(&mut run);
    assert_eq!(
        outcome.stop_reason,
        StopReason::ToolFailed { tool: "add".into(), error: "boom".into() }
    );
    crate::run::tests::assert_history_answered(run.history());
}

#[test]
fn metrics_and_audit_trail() {
    let mut run = run_with(Limits::default());
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("a", "add", r#"{"x":1}"#), ("b", "add", "{}")]), ms(40))
        .unwrap();
    run.set_elapsed(ms(50));
    run.tool_started("a", Some(json!({"x": 1}))).unwrap();
    run.tool_finished("a", Ok(ToolOutput::Value(json!(2))), ms(7)).unwrap();
    run.tool_finished("b", Err(ToolError::Rejected("not allowed".into())), ms(0)).unwrap();
    run.set_elapsed(ms(90));
    let _ = expect_model(&mut run);
    run.model_responded(text_response("done"), ms(30)).unwrap();
    let outcome = expect_finish(&mut run);
    let m = &outcome.metrics;
    assert_eq!(
        (m.model_calls, m.model_time_ms, m.tool_calls, m.tool_errors, m.tool_time_ms),
        (2, 70, 1, 1, 7)
    );
    assert_eq!(m.tool_calls_by_name.get("add"), Some(&1));
    assert_eq!(m.iterations.iter().map(|i| i.iteration).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(m.iterations[0].duration_ms, 50, "closed when the last call finished");
    assert_eq!(m.usage, outcome.usage);
    assert_eq!(m.audit.len(), 2);
    assert_eq!(*m.audit[0].arguments, json!({"x": 1}));
    assert_eq!(m.audit[0].result, Some(ToolResultContent::Json(json!(2))));
    assert_eq!(m.audit[0].duration_ms, 7);
    assert_eq!(m.audit[1].approval, ApprovalRecord::Rejected { reason: "not allowed".into() });
    assert!(m.audit[1].is_error);
}
