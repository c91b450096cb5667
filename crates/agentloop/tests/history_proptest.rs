//! For random scripts (text, parallel calls of known, unknown and failing tools, bad JSON,
//! finish reasons, limits), every history the driver sends is valid: each tool result follows
//! its call, every call is answered, nothing is orphaned.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::message::FinishReason;
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::ProviderError;
use agentloop::run::Run;
use agentloop::tool::TaskComplete;
use common::*;
use proptest::prelude::*;
use serde_json::json;
use std::sync::Arc;

#[derive(Debug, Clone)]
enum Call {
    Add,
    Probe(u64),
    Unknown,
    BadJson,
    Invalid,
    Crash,
    Done,
}

#[derive(Debug, Clone)]
enum Turn {
    Text(FinishReason),
    Calls(Vec<Call>, bool),
    Fail,
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        4 => Just(Call::Add),
        2 => (0u64..3).prop_map(Call::Probe),
        1 => Just(Call::Unknown),
        1 => Just(Call::BadJson),
        1 => Just(Call::Invalid),
        1 => Just(Call::Crash),
        1 => Just(Call::Done),
    ]
}

fn turn() -> impl Strategy<Value = Turn> {
    prop_oneof![
        2 => prop_oneof![
            4 => Just(FinishReason::Stop),
            1 => Just(FinishReason::Length),
            1 => Just(FinishReason::ContentFilter),
        ].prop_map(Turn::Text),
        6 => (prop::collection::vec(call(), 1..5), any::<bool>()).prop_map(|(c, t)| Turn::Calls(c, t)),
        1 => Just(Turn::Fail),
    ]
}

fn scripted(turn: &Turn) -> ScriptedTurn {
    match turn {
        Turn::Text(finish) => ScriptedTurn::text("an answer").with_finish(finish.clone()),
        Turn::Fail => {
            ScriptedTurn::error(ProviderError::Server { status: 500, message: "boom".into() })
        }
        Turn::Calls(calls, with_text) => {
            let mut out =
                if *with_text { ScriptedTurn::text("calling") } else { ScriptedTurn::default() };
            for call in calls {
                out = match call {
                    Call::Add => out.with_tool_call("add", json!({"a": 1, "b": 2})),
                    Call::Probe(ms) => out.with_tool_call("probe", json!({"ms": ms, "tag": "p"})),
                    Call::Unknown => out.with_tool_call("missing", json!({})),
                    Call::BadJson => out.with_raw_tool_call("add", "{\"a\": "),
                    Call::Invalid => out.with_tool_call("add", json!({"a": "x"})),
                    Call::Crash => out.with_tool_call("crash", json!({})),
                    Call::Done => out.with_tool_call("task_complete", json!({"answer": "done"})),
                };
            }
            out
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_history_sent_is_valid(
        turns in prop::collection::vec(turn(), 1..10),
        max_iterations in 1u32..8,
        concurrency in 1usize..4,
        require_done in any::<bool>(),
        max_input_messages in prop::option::of(2usize..12),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let model = Arc::new(ScriptedModel::new(turns.iter().map(scripted)));
        let agent = Agent::builder(model.clone())
            .tool(Add)
            .tool(Probe::default())
            .tool(Crash)
            .tool(TaskComplete)
            .max_iterations(max_iterations)
            .tool_concurrency(concurrency)
            .require_done_tool(require_done)
            .context(agentloop::context::ContextConfig { max_input_messages, ..Default::default() })
            .build()
            .unwrap();
        let events = runtime.block_on(collect(agent.run_stream("start")));
        // The run always ends with exactly one terminal event, last.
        let terminal = events.iter().filter(|e| e.outcome().is_some()).count();
        prop_assert_eq!(terminal, 1);
        prop_assert!(events.last().and_then(|e| e.outcome()).is_some());
        for request in model.requests() {
            // The window may start after the task message (pinned first), never mid-pair.
            assert_valid_history(&request.messages);
            prop_assert_eq!(&request.messages[0], &Message::user("start"));
            prop_assert!(request.instructions.is_none());
        }
        // Iterations never exceed the limit. The extra calls: the wind-down answer, and for
        // each compaction (forced by a `length` finish) its summary call and the iteration's
        // request sent again.
        let compactions = events
            .iter()
            .filter(|e| matches!(e, Event::CompactionStarted { .. }))
            .count() as u32;
        prop_assert!(model.request_count() as u32 <= max_iterations + 1 + 2 * compactions);
        // The journal folds into a run that is finished with the same outcome.
        let journal: Vec<Event> = events.iter().filter(|e| e.is_durable()).cloned().collect();
        let rebuilt = Run::from_journal(&journal).unwrap();
        prop_assert_eq!(rebuilt.outcome(), events.last().and_then(|e| e.outcome()));
        assert_valid_history(rebuilt.history());
    }
}
