#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::run::tests::*;

fn place_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"],
    })
}

fn with_output(mode: OutputMode, retries: u32) -> RunConfig {
    let spec = OutputSpec::new("place", place_schema()).with_mode(mode).with_max_retries(retries);
    RunConfig { output: Some(spec), ..config() }
}

/// The durable events recorded so far, drained.
fn journal(run: &mut Run, into: &mut Vec<Event>) {
    into.extend(run.drain_events().filter(Event::is_durable));
}

#[test]
fn native_mode_puts_the_schema_on_the_request_and_takes_a_valid_answer() {
    let mut run = Run::new("r", with_output(OutputMode::Native, 2), vec![Message::user("where")]);
    let request = expect_model(&mut run);
    let format = request.output.expect("the schema is on the request");
    assert_eq!(format.name, "place");
    assert_eq!(format.schema, place_schema());
    assert_eq!(request.tools.len(), 1, "no final-answer tool in native mode");
    assert_eq!(request.tool_choice, ToolChoice::Auto);
    run.model_responded(text_response(r#"{"city": "Lyon", "population": 522000}"#), ms(1)).unwrap();
    let outcome = expect_finish(&mut run);
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(outcome.output, Some(json!({"city": "Lyon", "population": 522000})));
}

#[test]
fn a_fenced_answer_is_taken_too() {
    let mut run = Run::new("r", with_output(OutputMode::Native, 0), vec![Message::user("where")]);
    let _ = expect_model(&mut run);
    let text = "```json\n{\"city\": \"Lyon\", \"population\": 1}\n```";
    run.model_responded(text_response(text), ms(1)).unwrap();
    assert_eq!(expect_finish(&mut run).output, Some(json!({"city": "Lyon", "population": 1})));
}

#[test]
fn an_invalid_answer_goes_back_with_its_errors_then_the_run_fails_without_retries_left() {
    let mut events = Vec::new();
    let mut run = Run::new("r", with_output(OutputMode::Native, 1), vec![Message::user("where")]);
    let _ = expect_model(&mut run);
    run.model_responded(text_response(r#"{"city": "Lyon", "population": "many"}"#), ms(1)).unwrap();
    journal(&mut run, &mut events);
    let request = expect_model(&mut run);
    let retry = request.messages.last().unwrap();
    assert_eq!(retry.role, Role::User);
    let retry = retry.text();
    assert!(retry.contains("at /population") && retry.contains("integer"), "{retry}");
    run.model_responded(text_response("Lyon, about half a million people"), ms(1)).unwrap();
    let outcome = expect_finish(&mut run);
    journal(&mut run, &mut events);
    let StopReason::OutputInvalid { errors } = &outcome.stop_reason else {
        panic!("expected output_invalid, got {:?}", outcome.stop_reason)
    };
    assert!(errors.contains("not JSON"), "{errors}");
    assert!(outcome.is_failure());
    assert_eq!(outcome.output, None);
    assert_eq!(events.last().map(Event::kind), Some("run_failed"));
    // The journal folds to the same end.
    let rebuilt = Run::from_journal(&events).unwrap();
    assert_eq!(rebuilt.outcome(), run.outcome());
}

#[test]
fn tool_mode_offers_the_final_answer_tool_and_ends_after_the_other_calls() {
    let mut events = Vec::new();
    let mut run = Run::new("r", with_output(OutputMode::Tool, 2), vec![Message::user("where")]);
    let request = expect_model(&mut run);
    assert!(request.output.is_none());
    let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["add", OUTPUT_TOOL]);
    assert_eq!(request.tool_choice, ToolChoice::Required, "auto becomes required");
    let answer = r#"{"city": "Lyon", "population": 522000}"#;
    run.model_responded(calls_response(&[("a", "add", "{}"), ("f", OUTPUT_TOOL, answer)]), ms(1))
        .unwrap();
    journal(&mut run, &mut events);
    // Only the real tool is for the driver; the final answer is the run's.
    let Step::CallTools(calls) = run.next_step() else { panic!("expected tools") };
    assert_eq!(calls.iter().map(|c| c.call.id.as_str()).collect::<Vec<_>>(), ["a"]);
    run.tool_started("a", Some(json!({}))).unwrap();
    run.tool_finished("a", Ok(ToolOutput::Value(json!(3))), ms(1)).unwrap();
    let outcome = expect_finish(&mut run);
    journal(&mut run, &mut events);
    assert_eq!(outcome.stop_reason, StopReason::DoneTool { tool: OUTPUT_TOOL.into() });
    assert_eq!(outcome.output, Some(json!({"city": "Lyon", "population": 522000})));
    assert_history_answered(run.history());
    let rebuilt = Run::from_journal(&events).unwrap();
    assert_eq!(rebuilt.outcome(), run.outcome());
}

#[test]
fn tool_mode_sends_invalid_arguments_back_as_the_calls_error() {
    let mut run = Run::new("r", with_output(OutputMode::Tool, 2), vec![Message::user("where")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("f", OUTPUT_TOOL, r#"{"city": "Lyon"}"#)]), ms(1))
        .unwrap();
    // Nothing to run: the next step is the model again, with the error as the result.
    let request = expect_model(&mut run);
    let result = request.messages.last().unwrap().tool_results_iter().next().unwrap().clone();
    assert!(result.is_error);
    assert!(result.content.to_text().contains("population"), "{:?}", result.content);
    run.model_responded(
        calls_response(&[("g", OUTPUT_TOOL, r#"{"city": "Lyon", "population": 2}"#)]),
        ms(1),
    )
    .unwrap();
    let outcome = expect_finish(&mut run);
    assert_eq!(outcome.output, Some(json!({"city": "Lyon", "population": 2})));
    assert_eq!(outcome.answer, r#"{"city":"Lyon","population":2}"#);
}

#[test]
fn tool_mode_asks_for_the_tool_after_a_plain_text_answer() {
    let mut run = Run::new("r", with_output(OutputMode::Tool, 2), vec![Message::user("where")]);
    let _ = expect_model(&mut run);
    run.model_responded(text_response("It is Lyon."), ms(1)).unwrap();
    let request = expect_model(&mut run);
    let nudge = request.messages.last().unwrap().text();
    assert!(nudge.contains(OUTPUT_TOOL), "{nudge}");
    // A valid JSON text answer is taken even in tool mode.
    run.model_responded(text_response(r#"{"city": "Lyon", "population": 5}"#), ms(1)).unwrap();
    assert_eq!(expect_finish(&mut run).output, Some(json!({"city": "Lyon", "population": 5})));
}

#[test]
fn a_non_object_schema_is_wrapped_and_unwrapped() {
    let spec = OutputSpec::new("numbers", json!({"type": "array", "items": {"type": "integer"}}));
    assert!(spec.wrapped);
    assert_eq!(spec.schema["properties"]["response"]["type"], "array");
    let config = RunConfig { output: Some(spec.with_mode(OutputMode::Native)), ..config() };
    let mut run = Run::new("r", config, vec![Message::user("list")]);
    let _ = expect_model(&mut run);
    run.model_responded(text_response(r#"{"response": [1, 2, 3]}"#), ms(1)).unwrap();
    assert_eq!(expect_finish(&mut run).output, Some(json!([1, 2, 3])));
}

#[test]
fn a_wind_down_answer_is_the_output_when_it_is_valid() {
    let mut config = with_output(OutputMode::Native, 2);
    config.limits.max_iterations = 1;
    let mut run = Run::new("r", config, vec![Message::user("where")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("a", "add", "{}")]), ms(1)).unwrap();
    let Step::CallTools(_) = run.next_step() else { panic!("expected tools") };
    run.tool_started("a", Some(json!({}))).unwrap();
    run.tool_finished("a", Ok(ToolOutput::Value(json!(3))), ms(1)).unwrap();
    let request = expect_model(&mut run);
    assert!(request.tools.is_empty(), "the wind-down offers no tools");
    assert!(request.output.is_some(), "but keeps the schema");
    run.model_responded(text_response(r#"{"city": "Lyon", "population": 3}"#), ms(1)).unwrap();
    let outcome = expect_finish(&mut run);
    assert!(matches!(outcome.stop_reason, StopReason::LimitReached { .. }));
    assert_eq!(outcome.output, Some(json!({"city": "Lyon", "population": 3})));
}

#[test]
fn a_spec_of_a_type_names_and_describes_it() {
    /// A place on a map.
    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Place {
        city: String,
        population: Option<u64>,
    }
    let spec = OutputSpec::of::<Place>();
    assert_eq!(spec.name, "Place");
    assert_eq!(spec.description.as_deref(), Some("A place on a map."));
    assert!(!spec.wrapped);
    // The integer's range is in the schema: the validator refuses what `u64` cannot hold.
    let population = &spec.schema["properties"]["population"];
    assert_eq!(population["minimum"], 0, "{population}");
    assert_eq!(population["maximum"], u64::MAX, "{population}");
    let tool = spec.tool_spec();
    assert_eq!(tool.name, OUTPUT_TOOL);
    assert!(tool.parameters.get("$schema").is_none());
    assert!(tool.description.contains("A place on a map."));
}

#[test]
fn another_done_tools_answer_is_taken_as_a_text_answer() {
    let mut run = Run::new("r", with_output(OutputMode::Tool, 2), vec![Message::user("where")]);
    let _ = expect_model(&mut run);
    run.model_responded(calls_response(&[("d", "task_complete", "{}")]), ms(1)).unwrap();
    let Step::CallTools(_) = run.next_step() else { panic!("expected tools") };
    run.tool_started("d", Some(json!({}))).unwrap();
    run.tool_finished("d", Ok(ToolOutput::Done("Lyon".into())), ms(1)).unwrap();
    // Not the answer: the model is asked for the final-answer tool.
    let request = expect_model(&mut run);
    assert!(request.messages.last().unwrap().text().contains(OUTPUT_TOOL));
    run.model_responded(calls_response(&[("e", "task_complete", "{}")]), ms(1)).unwrap();
    let Step::CallTools(_) = run.next_step() else { panic!("expected tools") };
    run.tool_started("e", Some(json!({}))).unwrap();
    let answer = r#"{"city": "Lyon", "population": 7}"#;
    run.tool_finished("e", Ok(ToolOutput::Done(answer.into())), ms(1)).unwrap();
    let outcome = expect_finish(&mut run);
    assert_eq!(outcome.output, Some(json!({"city": "Lyon", "population": 7})));
}
