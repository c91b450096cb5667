//! Context management end to end on the scripted model: the sliding window, compaction
//! (threshold, forced by `length` and by a context overflow, attempts exhausted), and tool-output
//! trimming with `read_tool_output` paging the whole output back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::context::{CompactionConfig, CompactionReason, ContextConfig, TrimConfig};
use agentloop::message::FinishReason;
use agentloop::message::Role;
use agentloop::message::Usage;
use agentloop::message::{Part, ToolResultContent};
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::ProviderError;
use agentloop::provider::ToolChoice;
use agentloop::run::Run;
use common::*;
use serde_json::json;
use std::sync::Arc;

/// Returns `n` bytes of text, numbered lines so that pages can be checked.
#[tool]
async fn blob(n: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < n {
        out.push_str(&format!("line {i:05}\n"));
        i += 1;
    }
    out.truncate(n);
    out
}

/// Scripted usage of zero keeps the token estimate uncalibrated, so thresholds are exact.
fn turn(turn: ScriptedTurn) -> ScriptedTurn {
    turn.with_usage(Usage::default())
}

fn call_blob(n: usize) -> ScriptedTurn {
    turn(ScriptedTurn::tool_call("blob", json!({ "n": n })))
}

fn small_window(threshold: f32) -> ContextConfig {
    ContextConfig {
        context_window: Some(3_000),
        reserved_output: 200,
        margin: 100,
        max_input_messages: None,
        trim: TrimConfig::default(),
        compaction: CompactionConfig {
            threshold,
            keep_recent_messages: 2,
            ..CompactionConfig::default()
        },
    }
}

fn compaction_events(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::CompactionStarted { reason, cut, .. } => {
                Some(format!("started {reason:?} {cut}"))
            }
            Event::CompactionCompleted { cut, summary, tokens_before, tokens_after, .. } => {
                assert!(tokens_after < tokens_before, "{tokens_after} < {tokens_before}");
                Some(format!("completed {cut} {summary}"))
            }
            Event::CompactionFailed { error } => Some(format!("failed {error}")),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn compaction_starts_when_the_input_passes_the_threshold() {
    let model = Arc::new(ScriptedModel::new([
        call_blob(1000),
        call_blob(1000),
        call_blob(1000),
        call_blob(1000),
        turn(ScriptedTurn::text("Four blobs of 1000 bytes were read.")),
        turn(ScriptedTurn::text("done")),
    ]));
    let agent =
        Agent::builder(model.clone()).tool(Blob).context(small_window(0.3)).build().unwrap();
    let events = collect(agent.run_stream("Read four blobs.")).await;
    assert_eq!(
        compaction_events(&events),
        ["started Threshold 7", "completed 7 Four blobs of 1000 bytes were read."]
    );
    let requests = model.requests();
    let summarise = &requests[4];
    assert!(summarise.tools.is_empty() && summarise.tool_choice == ToolChoice::None);
    assert_eq!(summarise.messages.len(), 8, "the history before the cut, then the prompt");
    assert_eq!(
        summarise.messages.last(),
        Some(&Message::user(agentloop::context::compact::DEFAULT_COMPACTION_PROMPT))
    );
    let after = &requests[5].messages;
    assert_eq!(after.len(), 4, "the task, the summary, the last call and its result");
    assert_eq!(after[0], Message::user("Read four blobs."));
    assert!(after[1].text().contains("Four blobs of 1000 bytes were read."));
    assert_valid_history(after);
    assert_eq!(outcome(&events).answer, "done");
    // The journal keeps every original message; the fold reproduces the compaction.
    let journal: Vec<Event> = events.iter().filter(|e| e.is_durable()).cloned().collect();
    let run = Run::from_journal(&journal).unwrap();
    assert_eq!(run.history().len(), 10);
}

#[tokio::test]
async fn a_cut_off_answer_forces_a_compaction_and_the_same_request_again() {
    let model = Arc::new(ScriptedModel::new([
        call_blob(500),
        call_blob(500),
        turn(
            ScriptedTurn::text("Here is the beginning of a long answ")
                .with_finish(FinishReason::Length),
        ),
        turn(ScriptedTurn::text("Two blobs read.")),
        turn(ScriptedTurn::text("The complete answer.")),
    ]));
    let agent =
        Agent::builder(model.clone()).tool(Blob).context(small_window(0.99)).build().unwrap();
    let events = collect(agent.run_stream("Read two blobs and explain.")).await;
    assert_eq!(compaction_events(&events), ["started Length 3", "completed 3 Two blobs read."]);
    let outcome = outcome(&events);
    assert_eq!(outcome.answer, "The complete answer.");
    assert_eq!(outcome.iterations, 3, "the retried request belongs to the same iteration");
    let requests = model.requests();
    let retried = &requests[4].messages;
    assert_eq!(retried.len(), 4);
    assert!(
        retried.iter().all(|m| !m.text().contains("long answ")),
        "the cut-off answer is not sent again"
    );
    assert_valid_history(retried);
    assert_eq!(kinds(&events).iter().filter(|k| **k == "iteration_started").count(), 3);
}

#[tokio::test]
async fn a_context_overflow_forces_a_compaction_and_a_retry() {
    let overflow = ProviderError::ContextLengthExceeded { message: "prompt is too long".into() };
    let model = Arc::new(ScriptedModel::new([
        call_blob(500),
        call_blob(500),
        turn(ScriptedTurn::error(overflow)),
        turn(ScriptedTurn::text("Two blobs read.")),
        turn(ScriptedTurn::text("Fits now.")),
    ]));
    let agent =
        Agent::builder(model.clone()).tool(Blob).context(small_window(0.99)).build().unwrap();
    let events = collect(agent.run_stream("Read two blobs.")).await;
    assert_eq!(
        compaction_events(&events),
        ["started ContextLengthExceeded 3", "completed 3 Two blobs read."]
    );
    assert_eq!(outcome(&events).answer, "Fits now.");
    assert_eq!(model.request_count(), 5);
}

#[tokio::test]
async fn when_compaction_cannot_help_the_run_ends_at_the_context_limit() {
    let overflow = || {
        turn(ScriptedTurn::error(ProviderError::ContextLengthExceeded {
            message: "too long".into(),
        }))
    };
    let config = ContextConfig {
        compaction: CompactionConfig {
            max_attempts: 1,
            keep_recent_messages: 2,
            ..CompactionConfig::default()
        },
        ..small_window(0.99)
    };
    let model = Arc::new(ScriptedModel::new([
        call_blob(500),
        call_blob(500),
        overflow(),
        turn(ScriptedTurn::text("summary")),
        overflow(),
    ]));
    let agent = Agent::builder(model.clone()).tool(Blob).context(config).build().unwrap();
    let outcome = agent.run("Read two blobs.").await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::ContextLimit);
    assert!(outcome.answer.starts_with(agentloop::run::CONTEXT_LIMIT_TEXT), "{}", outcome.answer);
    assert_eq!(model.request_count(), 5, "one compaction, then no more");

    // Nothing before the current interaction: no compaction is possible at all.
    let model = Arc::new(ScriptedModel::new([overflow()]));
    let agent = Agent::builder(model).context(small_window(0.99)).build().unwrap();
    let outcome = agent.run("hi").await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::ContextLimit);
}

#[tokio::test]
async fn a_required_message_larger_than_the_window_ends_with_a_clear_reason() {
    let model = Arc::new(ScriptedModel::new([turn(ScriptedTurn::text("never"))]));
    let agent = Agent::builder(model.clone()).context(small_window(0.99)).build().unwrap();
    let outcome = agent.run("x".repeat(40_000)).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::ContextLimit);
    assert!(outcome.answer.contains("fit in the context window"), "{}", outcome.answer);
    assert_eq!(model.request_count(), 0);
}

#[tokio::test]
async fn big_outputs_are_trimmed_and_read_tool_output_pages_them_back_whole() {
    let size = 40_000;
    let page = 8_192;
    let mut turns = vec![call_blob(size)];
    for offset in (0..size).step_by(page) {
        turns.push(turn(ScriptedTurn::tool_call(
            "read_tool_output",
            json!({"ref": "call_0_0", "offset": offset, "length": page}),
        )));
    }
    turns.push(turn(ScriptedTurn::text("I read all of it.")));
    let model = Arc::new(ScriptedModel::new(turns));
    let agent = Agent::builder(model.clone()).tool(Blob).build().unwrap();
    assert!(
        agent.tools().iter().all(|t| t.name != "read_tool_output"),
        "not offered before it is needed"
    );
    let events = collect(agent.run_stream("Read the blob.")).await;
    assert_eq!(outcome(&events).answer, "I read all of it.");

    let full = blob(size).await;
    // The journal keeps the whole output; the model's view has the excerpt.
    let journaled = events.iter().find_map(|e| match e {
        Event::ToolCompleted { name, result, .. } if name == "blob" => Some(result.content.clone()),
        _ => None,
    });
    assert_eq!(journaled, Some(ToolResultContent::Text(full.clone())));
    let requests = model.requests();
    let shown = requests[1].messages[2].tool_results_iter().next().unwrap().content.to_text();
    assert!(shown.starts_with("[This output was trimmed: 40000 bytes"), "{shown}");
    assert!(shown.len() < 5_000);
    assert!(
        requests[1].tools.iter().any(|t| t.name == "read_tool_output"),
        "offered once something was trimmed"
    );
    // Paging back gives the whole output, byte for byte.
    let mut paged = String::new();
    for request in &requests[2..] {
        let last = request.messages.last().unwrap();
        let text = last.tool_results_iter().next().unwrap().content.to_text();
        let (header, body) = text.split_once('\n').unwrap();
        assert!(header.starts_with("[bytes "), "{header}");
        paged.push_str(body);
    }
    assert_eq!(paged, full);
    assert!(!kinds(&events).contains(&"tool_failed"));
}

#[tokio::test]
async fn the_message_window_keeps_the_task_and_a_valid_recent_tail() {
    let mut turns: Vec<ScriptedTurn> =
        (0..12).map(|i| turn(ScriptedTurn::tool_call("blob", json!({ "n": 10 + i })))).collect();
    turns.push(turn(ScriptedTurn::text("done")));
    let model = Arc::new(ScriptedModel::new(turns));
    let context = ContextConfig { max_input_messages: Some(6), ..ContextConfig::default() };
    let agent = Agent::builder(model.clone()).tool(Blob).context(context).build().unwrap();
    let outcome = agent.run("Read many blobs.").await.unwrap();
    assert_eq!(outcome.answer, "done");
    for request in model.requests() {
        assert!(request.messages.len() <= 6, "{} messages", request.messages.len());
        assert_eq!(request.messages[0], Message::user("Read many blobs."));
        assert_valid_history(&request.messages[1..]);
        assert!(request.messages.len() < 2 || request.messages[1].role == Role::Assistant);
    }
    let last = model.requests().last().unwrap().messages.clone();
    let Part::ToolCall(call) = &last[last.len() - 2].content[0] else { panic!("{last:?}") };
    assert_eq!(call.id, "call_11_0", "the newest interaction is always sent");
}

#[tokio::test]
async fn old_outputs_can_be_collapsed_to_one_line() {
    let model = Arc::new(ScriptedModel::new([
        call_blob(600),
        call_blob(700),
        call_blob(800),
        turn(ScriptedTurn::text("ok")),
    ]));
    let context = ContextConfig {
        trim: TrimConfig { collapse_after_turns: Some(1), ..TrimConfig::default() },
        ..ContextConfig::default()
    };
    let agent = Agent::builder(model.clone()).tool(Blob).context(context).build().unwrap();
    agent.run("go").await.unwrap();
    let last = model.requests().last().unwrap().messages.clone();
    let results: Vec<String> =
        last.iter().flat_map(|m| m.tool_results_iter()).map(|r| r.content.to_text()).collect();
    assert!(results[0].starts_with("[Output of blob (600 bytes) collapsed"), "{}", results[0]);
    assert!(results[1].starts_with("[Output of blob (700 bytes) collapsed"));
    assert_eq!(results[2].len(), 800, "the latest output is whole");
    assert_valid_history(&last);
}

#[tokio::test]
async fn compaction_reason_names_are_stable() {
    assert_eq!(
        serde_json::to_value(CompactionReason::ContextLengthExceeded).unwrap(),
        json!("context_length_exceeded")
    );
}
