//! Every loop rule, driven end to end on the scripted model: the exact events streamed and the
//! exact history sent on the next request.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::message::FinishReason;
use agentloop::message::Role;
use agentloop::message::ToolCall;
use agentloop::message::ToolResult;
use agentloop::message::{Part, ToolResultContent};
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::ProviderError;
use agentloop::provider::ToolChoice;
use agentloop::run::LimitKind;
use agentloop::tool::{AskUser, TaskComplete};
use agentloop::{AgentError, Event};
use common::*;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn model(turns: impl IntoIterator<Item = ScriptedTurn>) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(turns))
}

#[tokio::test]
async fn a_plain_answer_streams_deltas_and_ends_with_the_answer_only() {
    let model = model([ScriptedTurn::text("The capital of France is Paris.")]);
    let agent = Agent::builder(model.clone()).instructions("Be brief.").tool(Add).build().unwrap();
    let events = collect(agent.run_stream("Capital of France?")).await;
    assert_eq!(
        compact_kinds(&events),
        [
            "run_started",
            "iteration_started",
            "model_requested",
            "text_delta",
            "model_responded",
            "iteration_completed",
            "run_finished"
        ]
    );
    let deltas: String = events
        .iter()
        .filter_map(|e| match e {
            Event::TextDelta { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, "The capital of France is Paris.");
    assert!(
        kinds(&events).iter().filter(|k| **k == "text_delta").count() > 1,
        "the text streams in pieces"
    );
    let outcome = outcome(&events);
    assert_eq!(outcome.answer, "The capital of France is Paris.");
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].instructions.as_deref(), Some("Be brief."));
    assert_eq!(*requests[0].messages, vec![Message::user("Capital of France?")]);
    assert_eq!(requests[0].tools[0].name, "add");
}

#[tokio::test]
async fn a_tool_round_trip_sends_the_exact_history() {
    let model = model([
        ScriptedTurn::tool_call("add", json!({"a": 17, "b": 25})).with_text("Let me add."),
        ScriptedTurn::text("17 + 25 = 42"),
    ]);
    let agent = Agent::builder(model.clone()).instructions("Use tools.").tool(Add).build().unwrap();
    let events = collect(agent.run_stream("What is 17 + 25?")).await;
    assert_eq!(
        compact_kinds(&events),
        [
            "run_started",
            "iteration_started",
            "model_requested",
            "text_delta",
            "tool_call_stream_started",
            "tool_arguments_delta",
            "model_responded",
            "text",
            "tool_detected",
            "step_started",
            "tool_started",
            "tool_completed",
            "step_completed",
            "iteration_completed",
            "iteration_started",
            "model_requested",
            "text_delta",
            "model_responded",
            "iteration_completed",
            "run_finished"
        ]
    );
    let call = ToolCall {
        id: "call_0_0".into(),
        name: "add".into(),
        arguments: r#"{"a":17,"b":25}"#.into(),
    };
    let started = events.iter().find(|e| matches!(e, Event::ToolStarted { .. })).unwrap();
    assert_eq!(
        started,
        &Event::ToolStarted {
            call: std::sync::Arc::new(call.clone()),
            arguments: std::sync::Arc::new(json!({"a": 17, "b": 25}))
        }
    );
    let requests = model.requests();
    assert_eq!(requests[1].instructions.as_deref(), Some("Use tools."));
    assert_eq!(
        *requests[1].messages,
        vec![
            Message::user("What is 17 + 25?"),
            Message {
                role: Role::Assistant,
                content: vec![Part::text("Let me add."), Part::ToolCall(call)]
            },
            Message::tool_results([ToolResult::ok("call_0_0", json!(42))]),
        ]
    );
    let outcome = outcome(&events);
    assert_eq!(outcome.answer, "17 + 25 = 42");
    assert_eq!(outcome.iterations, 2);
    assert!(outcome.usage.output > 0);
}

#[tokio::test]
async fn per_iteration_order_is_reasoning_text_then_each_tool_step() {
    let model = model([
        ScriptedTurn::tool_call("probe", json!({"ms": 1, "tag": "one"}))
            .with_tool_call("probe", json!({"ms": 1, "tag": "two"}))
            .with_text("Checking.")
            .with_reasoning("I should probe twice."),
        ScriptedTurn::text("done"),
    ]);
    let agent = Agent::builder(model).tool(Probe::default()).tool_concurrency(1).build().unwrap();
    let events = collect(agent.run_stream("go")).await;
    let durable_and_derived: Vec<_> = kinds(&events)
        .into_iter()
        .filter(|k| !k.ends_with("_delta") && *k != "tool_call_stream_started")
        .collect();
    assert_eq!(
        durable_and_derived,
        [
            "run_started",
            "iteration_started",
            "model_requested",
            "model_responded",
            "reasoning",
            "text",
            "tool_detected",
            "step_started",
            "tool_started",
            "tool_completed",
            "step_completed",
            "step_started",
            "tool_started",
            "tool_completed",
            "step_completed",
            "iteration_completed",
            "iteration_started",
            "model_requested",
            "model_responded",
            "iteration_completed",
            "run_finished"
        ]
    );
    assert!(events.contains(&Event::Reasoning { text: "I should probe twice.".into() }));
    assert!(events.contains(&Event::Text { text: "Checking.".into() }));
}

#[tokio::test]
async fn parallel_tools_respect_the_limit_and_keep_call_order() {
    for limit in [1usize, 2, 5] {
        // Later calls are faster, so they finish first when they run in parallel.
        let mut turn = ScriptedTurn::default();
        for i in 0..6u64 {
            turn = turn.with_tool_call("probe", json!({"ms": 60 - i * 10, "tag": format!("t{i}")}));
        }
        let model = model([turn, ScriptedTurn::text("ok")]);
        let probe = Probe::default();
        let agent = Agent::builder(model.clone())
            .tool(probe.clone())
            .tool_concurrency(limit)
            .build()
            .unwrap();
        let events = collect(agent.run_stream("go")).await;
        assert_eq!(outcome(&events).answer, "ok");
        assert_eq!(probe.max(), limit, "at most {limit} at once, and the limit is used");
        let results: Vec<ToolResult> =
            model.requests()[1].messages[2].tool_results_iter().cloned().collect();
        let tags: Vec<String> = results.iter().map(|r| r.content.to_text()).collect();
        assert_eq!(
            tags,
            ["t0", "t1", "t2", "t3", "t4", "t5"],
            "results in call order (limit {limit})"
        );
        assert_valid_history(&model.requests()[1].messages);
    }
}

#[tokio::test]
async fn a_tool_that_times_out_becomes_an_error_result_and_the_loop_goes_on() {
    let model = model([
        ScriptedTurn::tool_call("probe", json!({"ms": 10_000, "tag": "late"})),
        ScriptedTurn::text("It timed out."),
    ]);
    let probe = Probe::default();
    let agent = Agent::builder(model.clone())
        .tool(probe.clone())
        .tool_timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let events = collect(agent.run_stream("go")).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    let timed_out = events.iter().find(|e| matches!(e, Event::ToolTimedOut { .. })).unwrap();
    let Event::ToolTimedOut { timeout_ms, result, .. } = timed_out else { unreachable!() };
    assert_eq!(*timeout_ms, 50);
    assert_eq!(
        result.content,
        ToolResultContent::Text("Error: the tool timed out after 50 ms".into())
    );
    assert!(result.is_error);
    assert_eq!(probe.dropped(), 1, "the tool's future was dropped");
    assert_eq!(outcome(&events).answer, "It timed out.");
    assert_eq!(model.requests()[1].messages[2].tool_results_iter().next(), Some(result));
}

#[tokio::test]
async fn a_panicking_tool_becomes_an_error_result() {
    let model =
        model([ScriptedTurn::tool_call("crash", json!({})), ScriptedTurn::text("recovered")]);
    let agent = Agent::builder(model.clone()).tool(Crash).build().unwrap();
    let events = collect(agent.run_stream("go")).await;
    let failed = events.iter().find_map(|e| match e {
        Event::ToolFailed { error, result, .. } => Some(((**error).clone(), result.clone())),
        _ => None,
    });
    let (error, result) = failed.unwrap();
    assert_eq!(error, ToolError::Panicked("the crash tool crashed".into()));
    assert_eq!(result.content.to_text(), "Error: the tool crashed: the crash tool crashed");
    assert!(events.contains(&Event::StepCompleted {
        call_id: "call_0_0".into(),
        status: agentloop::event::StepStatus::Error
    }));
    assert_eq!(outcome(&events).answer, "recovered");
}

#[tokio::test]
async fn invalid_arguments_tell_the_model_what_was_wrong() {
    let model = model([
        ScriptedTurn::tool_call("add", json!({"a": "seventeen"})),
        ScriptedTurn::text("sorry"),
    ]);
    let agent = Agent::builder(model.clone()).tool(Add).build().unwrap();
    let events = collect(agent.run_stream("go")).await;
    let result = model.requests()[1].messages[2].tool_results_iter().next().cloned().unwrap();
    assert!(result.is_error);
    let text = result.content.to_text();
    assert!(text.starts_with("Error: invalid arguments:"), "{text}");
    assert!(text.contains("/a") && text.contains("integer"), "{text}");
    assert!(text.contains("\"b\" is a required property"), "{text}");
    assert_eq!(outcome(&events).answer, "sorry");
}

#[tokio::test]
async fn arguments_that_are_not_json_are_shown_raw_and_answered_with_an_error() {
    let model = model([
        ScriptedTurn::default().with_raw_tool_call("add", r#"{"a": 1, "b": "#),
        ScriptedTurn::text("oops"),
    ]);
    let agent = Agent::builder(model.clone()).tool(Add).build().unwrap();
    let events = collect(agent.run_stream("go")).await;
    let arguments = events.iter().find_map(|e| match e {
        Event::ToolStarted { arguments, .. } => Some(serde_json::Value::clone(arguments)),
        _ => None,
    });
    assert_eq!(arguments, Some(json!({"_raw": r#"{"a": 1, "b": "#})));
    let result = model.requests()[1].messages[2].tool_results_iter().next().cloned().unwrap();
    assert!(result.is_error);
    assert!(
        result.content.to_text().starts_with("Error: the arguments are not valid JSON"),
        "{result:?}"
    );
    assert_eq!(outcome(&events).answer, "oops");
}

#[tokio::test]
async fn an_unknown_tool_is_answered_and_the_loop_goes_on() {
    let model = model([ScriptedTurn::tool_call("nope", json!({})), ScriptedTurn::text("fine")]);
    let agent = Agent::builder(model.clone()).tool(Add).build().unwrap();
    let events = collect(agent.run_stream("go")).await;
    let result = model.requests()[1].messages[2].tool_results_iter().next().cloned().unwrap();
    assert_eq!(result, ToolResult::error("call_0_0", "Error: Unknown tool 'nope'"));
    assert_eq!(outcome(&events).answer, "fine");
}

#[tokio::test]
async fn require_done_tool_continues_until_task_complete() {
    let model = model([
        ScriptedTurn::text("Working on it."),
        ScriptedTurn::tool_call("task_complete", json!({"answer": "All done: 42"})),
    ]);
    let agent = Agent::builder(model.clone()).require_done_tool(true).build().unwrap();
    assert!(agent.tools().iter().any(|t| t.name == "task_complete"), "registered automatically");
    let events = collect(agent.run_stream("do it")).await;
    let outcome = outcome(&events);
    assert_eq!(outcome.answer, "All done: 42");
    assert_eq!(outcome.stop_reason, StopReason::DoneTool { tool: "task_complete".into() });
    assert_eq!(model.request_count(), 2, "the model is not called after the done tool");
    assert_eq!(model.requests()[1].messages.last().unwrap().role, Role::User, "the nudge");
    assert!(events.contains(&Event::Text { text: "Working on it.".into() }));
}

#[tokio::test]
async fn a_done_tool_ends_the_run_and_its_result_stays_in_history() {
    let model = model([ScriptedTurn::tool_call("task_complete", json!({"answer": "bye"}))]);
    let agent = Agent::builder(model.clone()).tool(TaskComplete).build().unwrap();
    let mut events = agent.run_stream("hi");
    let mut last = None;
    while let Some(event) = futures::StreamExt::next(&mut events).await {
        last = Some(event);
    }
    let Some(Event::RunFinished { outcome }) = last else { panic!("expected run_finished") };
    assert_eq!(outcome.answer, "bye");
    assert_eq!(model.request_count(), 1);
}

#[tokio::test]
async fn ask_user_ends_the_turn_with_the_question() {
    let model = model([ScriptedTurn::tool_call("ask_user", json!({"question": "Which city?"}))]);
    let agent = Agent::builder(model).tool(AskUser).build().unwrap();
    // `run` does not return a question as if it were an answer.
    let error = agent.run("Weather?").await.unwrap_err();
    assert_eq!(error.to_string(), "the run is waiting for the user's answer to: Which city?");
    let AgentError::Suspended { outcome } = error else { panic!("{error}") };
    assert_eq!(outcome.answer, "Which city?");
    assert_eq!(outcome.stop_reason, StopReason::AwaitingInput { tool: "ask_user".into() });
}

#[tokio::test]
async fn max_iterations_ends_with_one_tool_less_summary_call() {
    let looping = || ScriptedTurn::tool_call("add", json!({"a": 1, "b": 1}));
    let model = model([looping(), looping(), ScriptedTurn::text("Summary: added twice.")]);
    let agent = Agent::builder(model.clone()).tool(Add).max_iterations(2).build().unwrap();
    let events = collect(agent.run_stream("loop")).await;
    let outcome = outcome(&events);
    assert_eq!(outcome.answer, "Summary: added twice.");
    assert_eq!(outcome.stop_reason, StopReason::LimitReached { limit: LimitKind::Iterations });
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let summary = &requests[2];
    assert!(summary.tools.is_empty());
    assert_eq!(summary.tool_choice, ToolChoice::None);
    assert_eq!(summary.messages.len(), 6);
    assert_eq!(summary.messages[5], Message::user(agent.config().wind_down_prompt.clone()));
    assert_valid_history(&summary.messages);
}

#[tokio::test]
async fn a_failed_summary_call_gives_the_fallback_text() {
    let model = model([
        ScriptedTurn::tool_call("add", json!({"a": 1, "b": 1})),
        ScriptedTurn::error(ProviderError::Server { status: 500, message: "boom".into() }),
    ]);
    let agent = Agent::builder(model)
        .tool(Add)
        .max_iterations(1)
        .wind_down_fallback("Gave up.")
        .build()
        .unwrap();
    let outcome = agent.run("loop").await.unwrap();
    assert_eq!(outcome.answer, "Gave up.");
}

#[tokio::test]
async fn finish_reasons_end_the_run_as_they_should() {
    let cases = [
        (FinishReason::Length, "run_finished", StopReason::ContextLimit),
        (FinishReason::ContentFilter, "run_finished", StopReason::ContentFiltered),
        (
            FinishReason::Error,
            "run_failed",
            StopReason::ModelError { message: "the model finished with reason 'error'".into() },
        ),
    ];
    for (finish, terminal, stop) in cases {
        let model = model([ScriptedTurn::text("partial answ").with_finish(finish.clone())]);
        let agent = Agent::builder(model).build().unwrap();
        let events = collect(agent.run_stream("go")).await;
        assert_eq!(events.last().unwrap().kind(), terminal, "{finish:?}");
        assert_eq!(outcome(&events).stop_reason, stop, "{finish:?}");
    }
}

#[tokio::test]
async fn a_provider_error_fails_the_run_with_its_message() {
    let model = model([ScriptedTurn::error(ProviderError::Auth {
        status: 401,
        message: "invalid key".into(),
    })]);
    let agent = Agent::builder(model).build().unwrap();
    let error = agent.run("hi").await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "run failed: authentication failed (401): invalid key",
        "the text is the provider error's"
    );
    assert_eq!(
        error.provider_error(),
        Some(&ProviderError::Auth { status: 401, message: "invalid key".into() })
    );
    let AgentError::Failed { error: message, provider_error, outcome } = error else {
        panic!("expected a failure")
    };
    assert!(message.contains("invalid key"));
    // The class survives: callers match on it, not on the text.
    assert!(matches!(provider_error, Some(ProviderError::Auth { status: 401, .. })));
    assert!(matches!(outcome.stop_reason, StopReason::ModelError { .. }));
}

#[tokio::test]
async fn each_failing_provider_error_class_reaches_the_caller_and_other_failures_have_none() {
    // The classes that end a run (retryable ones are tried again, then end at the
    // consecutive-model-errors limit with a wind-down answer; a context overflow compacts or
    // ends with `context_limit`).
    let classes = [
        ProviderError::Auth { status: 403, message: "forbidden".into() },
        ProviderError::InvalidRequest { message: "bad field".into() },
        ProviderError::Protocol { message: "garbled".into(), excerpt: "{".into() },
        ProviderError::Other { message: "odd".into() },
    ];
    for class in classes {
        let agent = Agent::builder(model([ScriptedTurn::error(class.clone())])).build().unwrap();
        let error = agent.run("hi").await.unwrap_err();
        assert_eq!(error.provider_error(), Some(&class), "{error}");
        assert_eq!(error.to_string(), format!("run failed: {class}"), "the text is unchanged");
    }
    // A failure that is not the provider's has none, even after a model error earlier on.
    let agent = Agent::builder(model([
        ScriptedTurn::error(ProviderError::Network { message: "reset".into() }),
        ScriptedTurn::tool_call("crash", json!({})),
    ]))
    .retry_policy(None)
    .tool(Crash)
    .tool_failure_mode(agentloop::run::ToolFailureMode::Fail)
    .build()
    .unwrap();
    let error = agent.run("hi").await.unwrap_err();
    let AgentError::Failed { provider_error, outcome, .. } = &error else { panic!("{error}") };
    assert!(matches!(outcome.stop_reason, StopReason::ToolFailed { .. }), "{error}");
    assert_eq!(*provider_error, None);
    assert_eq!(error.provider_error(), None);
}

#[tokio::test]
async fn an_error_mid_stream_surfaces_and_the_loop_tries_again() {
    let model = model([
        ScriptedTurn::text("a long answer that breaks")
            .with_error_after(2, ProviderError::Network { message: "connection reset".into() }),
        ScriptedTurn::text("a long answer"),
    ]);
    let agent = Agent::builder(model.clone()).build().unwrap();
    let events = collect(agent.run_stream("hi")).await;
    assert_eq!(
        compact_kinds(&events),
        [
            "run_started",
            "iteration_started",
            "model_requested",
            "text_delta",
            "model_failed",
            "iteration_completed",
            "iteration_started",
            "model_requested",
            "text_delta",
            "model_responded",
            "iteration_completed",
            "run_finished"
        ]
    );
    assert_eq!(
        kinds(&events)
            .iter()
            .take_while(|k| **k != "model_failed")
            .filter(|k| **k == "text_delta")
            .count(),
        2
    );
    let outcome = outcome(&events);
    assert_eq!(outcome.answer, "a long answer");
    assert_eq!(outcome.iterations, 2);
    assert_eq!(outcome.metrics.model_errors, 1);
    // The failed turn's partial text never reaches the history.
    assert_eq!(*model.requests()[1].messages, vec![Message::user("hi")]);
}

#[tokio::test]
async fn a_model_that_keeps_failing_ends_the_run_at_the_error_limit() {
    let busy =
        || ScriptedTurn::error(ProviderError::Server { status: 503, message: "busy".into() });
    let model = model([busy(), busy(), busy(), ScriptedTurn::text("never")]);
    let agent = Agent::builder(model.clone()).wind_down_fallback("Unavailable.").build().unwrap();
    // The run fails with the last error: no answer, and no fallback text made up as one.
    let error = agent.run("hi").await.unwrap_err();
    let outcome = error.outcome().unwrap();
    assert_eq!(
        outcome.stop_reason,
        StopReason::LimitReached { limit: LimitKind::ConsecutiveModelErrors }
    );
    assert_eq!(outcome.answer, "");
    assert!(matches!(error.provider_error(), Some(ProviderError::Server { status: 503, .. })));
    assert!(error.to_string().contains("3 calls in a row"), "{error}");
    assert_eq!(model.request_count(), 3);
}

#[tokio::test]
async fn tools_get_the_idempotency_key_run_id_colon_call_id() {
    let model = model([
        ScriptedTurn::tool_call("probe", json!({"ms": 0, "tag": "x"})).with_call_id("abc"),
        ScriptedTurn::text("ok"),
    ]);
    let probe = Probe::default();
    let agent = Agent::builder(model).tool(probe.clone()).build().unwrap();
    let options = RunOptions { run_id: Some("run_42".into()), ..RunOptions::default() };
    let events = collect(agent.run_stream_with("go", options)).await;
    assert_eq!(outcome(&events).run_id, "run_42");
    assert_eq!(*probe.keys.lock().unwrap(), ["run_42:abc"]);
}

#[tokio::test]
async fn repeated_call_ids_are_made_unique_before_they_are_journaled() {
    // A server that sends no ids gets `call_0` in every response (and two in one response
    // here): each call still gets its own id, key and result.
    let probe_call = |tag: &str| json!({"ms": 0, "tag": tag});
    let model = model([
        ScriptedTurn::tool_call("probe", probe_call("a")).with_call_id("call_0"),
        ScriptedTurn::tool_call("probe", probe_call("b"))
            .with_call_id("call_0")
            .with_tool_call("probe", probe_call("c"))
            .with_call_id("call_0"),
        ScriptedTurn::text("ok"),
    ]);
    let probe = Probe::default();
    let agent = Agent::builder(model.clone()).tool(probe.clone()).build().unwrap();
    let options = RunOptions { run_id: Some("run_7".into()), ..RunOptions::default() };
    let events = collect(agent.run_stream_with("go", options)).await;
    assert_eq!(outcome(&events).answer, "ok");
    let mut keys = probe.keys.lock().unwrap().clone();
    keys.sort();
    assert_eq!(keys, ["run_7:call_0", "run_7:call_0.2", "run_7:call_0.3"]);
    // The journaled responses carry the new ids, and the model sees each call answered once.
    let started: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolStarted { call, .. } => Some(call.id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(started, ["call_0", "call_0.2", "call_0.3"]);
    let history = &model.requests()[2].messages;
    let calls: Vec<&str> =
        history.iter().flat_map(|m| m.tool_calls()).map(|c| c.id.as_str()).collect();
    let results: Vec<&str> =
        history.iter().flat_map(|m| m.tool_results_iter()).map(|r| r.call_id.as_str()).collect();
    assert_eq!(calls, ["call_0", "call_0.2", "call_0.3"]);
    assert_eq!(results, calls);
}
