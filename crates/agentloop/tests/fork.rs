//! Forks (`RunService::fork`): a new run from another's journal up to an entry, with an edit
//! — a tool's result the model has not seen, a user message after the run's end, the model's
//! answer that ended the run — that a process with the agent continues; the origin is unchanged, and a fork point where the edit
//! cannot apply is refused.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::event::{Event, ForkEdit};
use agentloop::message::{Message, Role};
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::{ChunkStream, ModelRequest, Provider};
use agentloop::service::{RunService, ServiceError};
use agentloop::store::{MemoryStore, RunFilter, RunState, RunStore};
use agentloop::{Agent, RunOptions};
use common::Add;
use serde_json::json;
use std::sync::Arc;

/// Answers from the conversation: "add" calls `add(2, 2)`; a tool result is read back; any
/// other user message is echoed.
struct Echoing;

impl Provider for Echoing {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let calls = request.messages.iter().filter(|m| m.role == Role::Assistant).count();
        let last: Option<&Message> = request.messages.last();
        let turn = match last {
            Some(m) if m.role == Role::Tool => {
                let said = m.tool_results_iter().map(|r| r.content.to_text()).collect::<String>();
                ScriptedTurn::text(format!("The tool said {said}."))
            }
            Some(m) if m.text() == "add" => ScriptedTurn::tool_call("add", json!({"a": 2, "b": 2}))
                .with_call_id(format!("call_{calls}")),
            Some(m) => ScriptedTurn::text(format!("You said: {}", m.text())),
            None => ScriptedTurn::text("Nothing to say."),
        };
        ScriptedModel::new([turn]).stream(request)
    }

    fn name(&self) -> &str {
        "echoing"
    }
}

fn agent(store: Arc<MemoryStore>) -> Agent {
    Agent::builder(Echoing).tool(Add).store(store).build().unwrap()
}

async fn answer_of(agent: &Agent, run_id: &str) -> String {
    agentloop::agent::outcome_of(agent.resume(run_id).await.unwrap()).await.unwrap().answer
}

#[tokio::test]
async fn a_fork_goes_on_from_its_point_with_its_edit() {
    let store = Arc::new(MemoryStore::new());
    let agent = agent(store.clone());
    let options = RunOptions { run_id: Some("origin".into()), ..RunOptions::default() };
    let outcome = agent.run_with("add", options).await.unwrap();
    assert_eq!(outcome.answer, "The tool said 4.");
    let origin = store.load("origin").await.unwrap();
    let completed = origin.iter().find(|e| e.event.kind() == "tool_completed").unwrap().seq;
    let service = RunService::new(store.clone());

    // The tool's result, edited before the model saw it: another answer.
    let edit = ForkEdit::ToolResult { call_id: "call_0".into(), result: json!("5") };
    let fork = service.fork("origin", completed, Some(edit.clone())).await.unwrap();
    assert_ne!(fork, "origin");
    let journal = store.load(&fork).await.unwrap();
    assert!(matches!(&*journal[0].event, Event::RunStarted { run_id, .. } if *run_id == fork));
    assert_eq!(journal.len() as u64, completed + 2);
    for (copied, original) in journal[1..=completed as usize].iter().zip(&origin[1..]) {
        assert_eq!(copied, original, "the prefix is the origin's, times included");
    }
    assert_eq!(
        *journal.last().unwrap().event,
        Event::RunForked { origin_run_id: "origin".into(), at_seq: completed, edit: Some(edit) }
    );
    assert_eq!(answer_of(&agent, &fork).await, "The tool said 5.");
    // The origin is unchanged.
    assert_eq!(store.load("origin").await.unwrap(), origin);

    // After the run's end, a user message: the fork goes on with it.
    let last = origin.last().unwrap().seq;
    let edit = ForkEdit::UserMessage { text: "and now?".into() };
    let fork = service.fork("origin", last, Some(edit)).await.unwrap();
    assert_eq!(answer_of(&agent, &fork).await, "You said: and now?");

    // No edit: the fork goes on as the origin would have (here: the model reads the result).
    let fork = service.fork("origin", completed, None).await.unwrap();
    assert_eq!(answer_of(&agent, &fork).await, "The tool said 4.");

    // After the run's end, the model's answer: the fork is finished with it, listed as
    // forked from the origin, and goes on from it with a next message.
    let edit = ForkEdit::ModelAnswer { text: "The tool said 5.".into() };
    let fork = service.fork("origin", last, Some(edit)).await.unwrap();
    let journal = store.load(&fork).await.unwrap();
    assert_eq!(journal.len() as u64, last + 3, "the prefix, run_forked, run_finished");
    let Event::RunFinished { outcome } = &*journal.last().unwrap().event else {
        panic!("not finished: {:?}", journal.last());
    };
    assert_eq!(
        (outcome.run_id.as_str(), outcome.answer.as_str()),
        (fork.as_str(), "The tool said 5.")
    );
    let listed = store.list_runs(&RunFilter::all().origin_run_id("origin")).await.unwrap();
    let row = listed.iter().find(|r| r.run_id == fork).unwrap();
    assert_eq!((row.state, row.answer.as_deref()), (RunState::Finished, Some("The tool said 5.")));
    let next = ForkEdit::UserMessage { text: "again".into() };
    let further = service.fork(&fork, last + 2, Some(next)).await.unwrap();
    let history = agentloop::run::Run::from_journal(
        store.load(&further).await.unwrap().iter().map(|e| &*e.event),
    )
    .unwrap()
    .history()
    .to_vec();
    let said: Vec<String> = history.iter().map(Message::text).collect();
    assert_eq!(said[said.len() - 2..], ["The tool said 5.".to_owned(), "again".to_owned()]);
    assert_eq!(answer_of(&agent, &further).await, "You said: again");
}

#[tokio::test]
async fn a_fork_where_its_edit_cannot_apply_is_refused() {
    let store = Arc::new(MemoryStore::new());
    let agent = agent(store.clone());
    let options = RunOptions { run_id: Some("origin".into()), ..RunOptions::default() };
    agent.run_with("add", options).await.unwrap();
    let origin = store.load("origin").await.unwrap();
    let last = origin.last().unwrap().seq;
    let service = RunService::new(store.clone());
    let refused = |result: Result<String, ServiceError>| match result {
        Err(ServiceError::ForkPoint { reason, .. }) => reason,
        other => panic!("not refused: {other:?}"),
    };
    let past = refused(service.fork("origin", last + 1, None).await);
    assert!(past.contains(&format!("ends at entry {last}")), "{past}");
    // The model has seen the result by the run's end.
    let seen = ForkEdit::ToolResult { call_id: "call_0".into(), result: json!("5") };
    let reason = refused(service.fork("origin", last, Some(seen)).await);
    assert!(reason.contains("fork's tool result"), "{reason}");
    let unknown = ForkEdit::ToolResult { call_id: "call_9".into(), result: json!("5") };
    let completed = origin.iter().find(|e| e.event.kind() == "tool_completed").unwrap().seq;
    let reason = refused(service.fork("origin", completed, Some(unknown)).await);
    assert!(reason.contains("call_9"), "{reason}");
    // While the tool runs, no user message.
    let started = origin.iter().find(|e| e.event.kind() == "tool_started").unwrap().seq;
    let message = ForkEdit::UserMessage { text: "wait".into() };
    let reason = refused(service.fork("origin", started, Some(message)).await);
    assert!(reason.contains("fork's user message"), "{reason}");
    // An answer only where the run ended with one.
    let answer = || Some(ForkEdit::ModelAnswer { text: "5".into() });
    let reason = refused(service.fork("origin", completed, answer()).await);
    assert!(reason.contains("fork's model answer"), "{reason}");
    assert!(matches!(service.fork("nobody", 0, None).await, Err(ServiceError::NotFound(_))));
    // Nothing was written for a refused fork.
    assert_eq!(store.list_runs(&agentloop::store::RunFilter::all()).await.unwrap().len(), 1);
}
