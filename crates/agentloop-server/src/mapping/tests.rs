use super::*;
use crate::echo::echo_agent;
use agentloop::store::{MemoryStore, RunStore};
use agentloop::RunOptions;
use futures::StreamExt;
use std::sync::Arc;

/// Runs the echo agent on `text` in session `ctx` and returns the run's live events and
/// its journal folded.
async fn run(text: &str) -> (Vec<agentloop::Event>, TaskFold) {
    let store = Arc::new(MemoryStore::new());
    let agent = echo_agent(store.clone(), store.clone()).unwrap();
    let session = agent.session("ctx-1").await.unwrap();
    let options = RunOptions { run_id: Some("run-1".into()), ..RunOptions::default() };
    let events: Vec<_> = session.run_stream_with(text, options).await.unwrap().collect().await;
    let mut fold = TaskFold::new("run-1");
    for entry in store.load("run-1").await.unwrap() {
        fold.apply(entry.seq, entry.at_ms, &entry.event);
    }
    (events, fold)
}

#[tokio::test]
async fn a_finished_run_is_a_completed_task_with_its_answer_and_history() {
    let (_, fold) = run("hello there, agent").await;
    let task = fold.task(None, true);
    assert_eq!(task.status.state, TaskState::Completed);
    assert_eq!(task.context_id, "ctx-1");
    let artifacts = task.artifacts.unwrap();
    assert_eq!(artifacts[0].artifact_id, ANSWER_ARTIFACT);
    assert_eq!(artifacts[0].parts[0].as_text(), Some("hello there, agent"));
    let history = task.history.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].role, a2a::Role::User);
    assert_eq!(history[1].role, a2a::Role::Agent);
    assert_eq!(fold.task(Some(1), false).history.unwrap().len(), 1);
    assert!(fold.task(Some(0), false).history.is_none());
    assert!(fold.task(None, false).artifacts.is_none());
}

#[tokio::test]
async fn an_ask_user_run_requires_input_and_an_approval_run_carries_the_calls() {
    let (_, fold) = run("ask What colour?").await;
    let task = fold.task(None, true);
    assert_eq!(task.status.state, TaskState::InputRequired);
    assert_eq!(task.status.message.unwrap().text(), Some("What colour?"));
    assert!(!fold.awaits_approval());

    let (_, fold) = run("approve").await;
    assert!(fold.awaits_approval());
    let message = fold.task(None, true).status.message.unwrap();
    let data = message.parts.iter().find_map(|p| match &p.content {
        a2a::PartContent::Data(v) => Some(v.clone()),
        _ => None,
    });
    assert_eq!(data.unwrap()["approvalRequired"][0]["tool"], "guarded_action");
}

#[tokio::test]
async fn failures_and_limits_map_to_their_states() {
    let (_, fold) = run("fail").await;
    assert_eq!(*fold.state(), TaskState::Failed);
    let (_, fold) = run("loop").await;
    let task = fold.task(None, true);
    assert_eq!(task.status.state, TaskState::Completed);
    assert_eq!(task.metadata.unwrap()[METADATA_KEY]["stopReason"], "limit_reached");
}

#[tokio::test]
async fn live_events_stream_chunks_then_the_whole_answer_then_the_status() {
    let (events, _) = run("stream 3").await;
    let mut mapper = EventMapper::new("run-1", "ctx-1");
    let updates: Vec<StreamResponse> = events.iter().flat_map(|e| mapper.map(0, 0, e)).collect();
    let chunks: Vec<(String, Option<bool>, Option<bool>)> = updates
        .iter()
        .filter_map(|u| match u {
            StreamResponse::ArtifactUpdate(a) => Some((
                a.artifact.parts[0].as_text().unwrap_or_default().to_owned(),
                a.append,
                a.last_chunk,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        chunks,
        vec![
            ("chunk 1 ".into(), Some(false), Some(false)),
            ("chunk 2 ".into(), Some(true), Some(false)),
            ("chunk 3".into(), Some(true), Some(false)),
            ("chunk 1 chunk 2 chunk 3".into(), Some(false), Some(true)),
        ]
    );
    let last = updates.last().unwrap();
    assert!(ends_stream(last));
    assert!(
        matches!(last, StreamResponse::StatusUpdate(s) if s.status.state == TaskState::Completed)
    );
    // Working first.
    assert!(
        matches!(&updates[0], StreamResponse::StatusUpdate(s) if s.status.state == TaskState::Working)
    );
}

#[tokio::test]
async fn tool_activity_is_a_working_status_with_metadata() {
    let (events, _) = run("calc 6 * 7").await;
    let mut mapper = EventMapper::new("run-1", "ctx-1");
    let tools: Vec<Value> = events
        .iter()
        .flat_map(|e| mapper.map(0, 0, e))
        .filter_map(|u| match u {
            StreamResponse::StatusUpdate(s)
                if s.status.message.is_some() && s.status.state == TaskState::Working =>
            {
                s.metadata.and_then(|m| m.get(METADATA_KEY).cloned())
            }
            _ => None,
        })
        .collect();
    assert_eq!(tools.len(), 2, "{tools:?}");
    assert_eq!(tools[0]["event"], "tool_started");
    assert_eq!(tools[0]["tool"], "calculator");
    assert_eq!(tools[1]["event"], "tool_completed");
}

#[test]
fn a_sub_agents_events_are_working_statuses_that_name_the_call_and_run() {
    let mut mapper = EventMapper::new("run-1", "ctx-1");
    let inner = agentloop::Event::Text { text: "looking it up".into() };
    let nested = agentloop::Event::Nested {
        call_id: "call-7".into(),
        run_id: Some("run-child".into()),
        event: Box::new(inner),
    };
    let updates = mapper.map(3, 0, &nested);
    let [StreamResponse::StatusUpdate(update)] = updates.as_slice() else { panic!("{updates:?}") };
    assert_eq!(update.status.state, TaskState::Working);
    assert_eq!(update.status.message.as_ref().unwrap().text(), Some("looking it up"));
    let meta = &update.metadata.as_ref().unwrap()[METADATA_KEY];
    assert_eq!(meta["event"], "nested");
    assert_eq!(meta["callId"], "call-7");
    assert_eq!(meta["runId"], "run-child");
    // Deltas are left out.
    let delta = agentloop::Event::Nested {
        call_id: "call-7".into(),
        run_id: None,
        event: Box::new(agentloop::Event::TextDelta { delta: "x".into() }),
    };
    assert!(mapper.map(3, 0, &delta).is_empty());
}

#[tokio::test]
async fn a_typed_answer_is_the_answer_artifacts_data_part_folded_and_streamed() {
    use agentloop::run::{OutputMode, OutputSpec};
    let store = Arc::new(MemoryStore::new());
    let schema = serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}},
        "required": ["city"]});
    let spec = OutputSpec::new("place", schema).with_mode(OutputMode::Native);
    let agent = crate::echo::echo_builder(store.clone(), store.clone())
        .unwrap()
        .output(spec)
        .build()
        .unwrap();
    let session = agent.session("ctx-1").await.unwrap();
    let options = RunOptions { run_id: Some("run-1".into()), ..RunOptions::default() };
    // The echo model answers with the text it is given: here, a JSON object the schema takes.
    let text = r#"{"city": "Paris"}"#;
    let events: Vec<_> = session.run_stream_with(text, options).await.unwrap().collect().await;
    let mut fold = TaskFold::new("run-1");
    for entry in store.load("run-1").await.unwrap() {
        fold.apply(entry.seq, entry.at_ms, &entry.event);
    }
    let data = |artifact: &a2a::Artifact| match &artifact.parts[..] {
        [part] => match &part.content {
            a2a::PartContent::Data(value) => Some(value.clone()),
            _ => None,
        },
        _ => None,
    };
    let task = fold.task(None, true);
    assert_eq!(task.status.state, TaskState::Completed);
    let artifacts = task.artifacts.unwrap();
    assert_eq!(data(&artifacts[0]), Some(serde_json::json!({"city": "Paris"})));

    let mut mapper = EventMapper::new("run-1", "ctx-1");
    let updates: Vec<StreamResponse> =
        events.iter().flat_map(|event| mapper.map(1, 0, event)).collect();
    let last_artifact = updates
        .iter()
        .rev()
        .find_map(|update| match update {
            StreamResponse::ArtifactUpdate(update) => Some(update),
            _ => None,
        })
        .unwrap();
    assert_eq!(last_artifact.last_chunk, Some(true));
    assert_eq!(data(&last_artifact.artifact), Some(serde_json::json!({"city": "Paris"})));
}

#[test]
fn the_tasks_usage_names_cache_reads_writes_and_reasoning_only_when_reported() {
    use agentloop::message::Usage;
    let plain = Usage { input: 10, output: 2, ..Usage::default() };
    assert_eq!(usage_metadata(&plain), serde_json::json!({"inputTokens": 10, "outputTokens": 2}));
    let cached =
        Usage { input: 2160, output: 15, cached_input: 2048, cache_write_input: 100, reasoning: 7 };
    assert_eq!(
        usage_metadata(&cached),
        serde_json::json!({"inputTokens": 2160, "outputTokens": 15, "cacheReadInputTokens": 2048,
               "cacheWriteInputTokens": 100, "reasoningTokens": 7})
    );
}
