//! Multi-turn sessions: the conversation kept in a session store across turns, agents and
//! restarts; lifecycle created → busy → ready; one turn at a time.
#![cfg(feature = "sqlite")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::error::SessionError;
use agentloop::message::Role;
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::ProviderError;
use agentloop::store::sqlite::SqliteStore;
use agentloop::store::MemoryStore;
use agentloop::store::RunStore;
use agentloop::store::SessionStore;
use agentloop::store::{RunFilter, SessionState};
use common::*;
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn model(turns: impl IntoIterator<Item = ScriptedTurn>) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(turns))
}

async fn multi_turn(store: Arc<dyn SessionStore>) {
    let model = model([
        ScriptedTurn::tool_call("add", json!({"a": 2, "b": 2})),
        ScriptedTurn::text("2 + 2 = 4. Nice to meet you, Ada."),
        ScriptedTurn::text("You are Ada."),
    ]);
    let agent = Agent::builder(model.clone())
        .instructions("Be brief.")
        .tool(Add)
        .session_store(store.clone())
        .build()
        .unwrap();
    let session = agent.session("ctx-ada").await.unwrap();
    assert_eq!(session.info().await.unwrap().state, SessionState::Created);
    let first = session.run("I am Ada. What is 2 + 2?").await.unwrap();
    assert_eq!(first.answer, "2 + 2 = 4. Nice to meet you, Ada.");
    let info = session.info().await.unwrap();
    assert_eq!((info.state, info.turns, info.messages), (SessionState::Ready, 1, 4));
    assert_eq!(info.run_id.as_deref(), Some(first.run_id.as_str()));

    let second = session.run("Who am I?").await.unwrap();
    assert_eq!(second.answer, "You are Ada.");
    // The second turn's input: the stored history plus the new user message; the
    // instructions travel separately and are never stored.
    let request = &model.requests()[2];
    let history = session.history().await.unwrap();
    assert_eq!(request.messages[..4], history[..4]);
    assert_eq!(request.messages[4], Message::user("Who am I?"));
    assert_eq!(request.messages.len(), 5);
    assert_eq!(request.instructions.as_deref(), Some("Be brief."));
    assert_eq!(history.len(), 6);
    assert!(history.iter().all(|m| m.role != Role::System && m.role != Role::Developer));
    assert!(history.iter().all(|m| !m.text().contains("Be brief.")));
    assert_eq!(history[5], Message::assistant("You are Ada."));
    assert_valid_history(&history);
    let info = session.info().await.unwrap();
    assert_eq!((info.state, info.turns, info.messages), (SessionState::Ready, 2, 6));
}

#[tokio::test]
async fn a_session_keeps_its_conversation_in_memory() {
    multi_turn(Arc::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn a_session_keeps_its_conversation_in_sqlite_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    multi_turn(Arc::new(SqliteStore::open(&path).unwrap())).await;
    // A new process: new store handle, new agent; the conversation is there.
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let model = model([ScriptedTurn::text("Still Ada.")]);
    let agent = Agent::builder(model.clone()).session_store(store).build().unwrap();
    let session = agent.session("ctx-ada").await.unwrap();
    assert_eq!(session.run("And now?").await.unwrap().answer, "Still Ada.");
    assert_eq!(model.requests()[0].messages.len(), 7);
    assert_eq!(session.history().await.unwrap().len(), 8);
}

#[tokio::test]
async fn a_second_turn_on_a_busy_session_fails_at_once() {
    let store = Arc::new(MemoryStore::new());
    let model = model([
        ScriptedTurn::text("slow answer").with_chunk_delay(Duration::from_millis(20)),
        ScriptedTurn::text("next"),
    ]);
    let agent = Agent::builder(model).session_store(store).build().unwrap();
    let session = agent.session("ctx-busy").await.unwrap();
    let turn = session.run_stream("first").await.unwrap();
    assert_eq!(session.info().await.unwrap().state, SessionState::Busy);
    let error = session.run("second").await.unwrap_err();
    let SessionError::Busy { context_id, run_id } = &error else { panic!("{error}") };
    assert_eq!(context_id, "ctx-busy");
    assert!(error.to_string().contains("is busy with run"), "{error}");
    // The same session from another handle (another agent clone) is busy too.
    let other = agent.session("ctx-busy").await.unwrap();
    assert!(matches!(other.run("third").await, Err(SessionError::Busy { .. })));
    let events = collect(turn).await;
    assert_eq!(outcome(&events[..events.len()]).run_id, *run_id);
    assert_eq!(session.info().await.unwrap().state, SessionState::Ready);
    assert_eq!(session.run("second").await.unwrap().answer, "next");
    assert_eq!(session.history().await.unwrap().len(), 4, "the refused turns left nothing");
}

#[tokio::test]
async fn a_failed_turn_appends_nothing_and_a_dropped_turn_ends() {
    let store = Arc::new(MemoryStore::new());
    let model = model([
        ScriptedTurn::text("hello"),
        ScriptedTurn::error(ProviderError::Auth { status: 401, message: "bad key".into() }),
        ScriptedTurn::hang(),
        ScriptedTurn::text("back"),
    ]);
    let agent = Agent::builder(model).session_store(store.clone()).build().unwrap();
    let session = agent.session("ctx-fail").await.unwrap();
    session.run("hi").await.unwrap();
    let error = session.run("again").await.unwrap_err();
    assert!(matches!(error, SessionError::Run(AgentError::Failed { .. })), "{error}");
    let info = session.info().await.unwrap();
    assert_eq!((info.state, info.turns, info.messages), (SessionState::Ready, 2, 2));

    // Dropping a turn's stream cancels its run and ends the turn (in the background).
    let mut turn = session.run_stream("hang").await.unwrap();
    let hanging = async { while turn.next().await.is_some() {} };
    assert!(tokio::time::timeout(Duration::from_millis(30), hanging).await.is_err());
    drop(turn);
    for _ in 0..100 {
        if session.info().await.unwrap().state == SessionState::Ready {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(session.info().await.unwrap().state, SessionState::Ready);
    assert_eq!(session.run("back?").await.unwrap().answer, "back");
    assert_eq!(session.history().await.unwrap().len(), 4);
}

#[tokio::test]
async fn a_turn_cut_by_a_crash_is_resumed_and_ends_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let probe = Probe::default();
    {
        let store = Arc::new(SqliteStore::open(&path).unwrap());
        let model = model([
            ScriptedTurn::text("first answer"),
            ScriptedTurn::tool_call("probe", json!({"ms": 20, "tag": "x"})).with_call_id("c1"),
        ]);
        let agent = Agent::builder(model)
            .tool(probe.clone())
            .store(store.clone())
            .session_store(store)
            .lease_ttl(std::time::Duration::from_millis(100))
            .build()
            .unwrap();
        let session = agent.session("ctx-crash").await.unwrap();
        session.run("one").await.unwrap();
        let mut turn = session.run_stream("two").await.unwrap();
        while let Some(event) = turn.next().await {
            if event.kind() == "tool_started" {
                break;
            }
        }
        // The process dies here: nothing is dropped cleanly, nothing ends the turn.
        std::mem::forget(turn);
    }
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let model = model([ScriptedTurn::text("second answer")]);
    let probe_after = Probe::default();
    let agent = Agent::builder(model.clone())
        .tool(probe_after.clone())
        .store(store.clone())
        .session_store(store.clone())
        .build()
        .unwrap();
    let session = agent.session("ctx-crash").await.unwrap();
    let info = session.info().await.unwrap();
    assert_eq!((info.state, info.messages), (SessionState::Busy, 2), "still busy after the crash");
    assert!(matches!(session.run("three").await, Err(SessionError::Busy { .. })));
    // The dead process's lease on the run expires first.
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let events = collect(session.resume_turn().await.unwrap()).await;
    assert_eq!(events.iter().rev().find_map(Event::outcome).unwrap().answer, "second answer");
    assert_eq!(probe_after.calls(), 1, "the unfinished tool ran again");
    let info = session.info().await.unwrap();
    assert_eq!((info.state, info.turns, info.messages), (SessionState::Ready, 2, 6));
    let history = session.history().await.unwrap();
    assert_eq!(history[2], Message::user("two"));
    assert_eq!(history[5], Message::assistant("second answer"));
    assert_valid_history(&history);
    let runs = store.list_runs(&RunFilter::all().context_id("ctx-crash")).await.unwrap();
    assert_eq!(runs.len(), 2, "both turns' runs are listed under the session");
}

#[tokio::test]
async fn sessions_need_a_session_store() {
    let agent = Agent::builder(model([])).build().unwrap();
    let error = agent.session("x").await.unwrap_err();
    assert!(matches!(error, SessionError::NoSessionStore), "{error}");
}

/// A turn whose run another process executes (a worker pool): `create_turn` journals the
/// run's start and keeps the session busy; the executor resumes the run and `settle_turn`
/// ends the turn with the run's new messages. An answer to the run's question is a turn of
/// its own (`begin_answer`), which the executor settles too; `release_turn` gives back a
/// turn whose run never went on.
#[tokio::test]
async fn a_turn_executed_elsewhere_is_settled_by_its_executor() {
    let store = Arc::new(MemoryStore::new());
    let model = model([
        ScriptedTurn::tool_call("ask_user", json!({"question": "Which city?"})),
        ScriptedTurn::text("Lyon it is."),
    ]);
    let agent = Agent::builder(model)
        .tool(agentloop::tool::builtin::AskUser)
        .store(store.clone())
        .session_store(store.clone())
        .build()
        .unwrap();
    let session = agent.session("ctx-elsewhere").await.unwrap();
    let run_id = session.create_turn("Plan a trip.", RunOptions::default()).await.unwrap();
    assert_eq!(session.info().await.unwrap().state, SessionState::Busy);
    assert!(matches!(
        session.run("Another turn").await,
        Err(SessionError::Busy { run_id: busy, .. }) if busy == run_id
    ));
    // Nothing to settle while the run has not run.
    assert!(!agent.settle_turn(&run_id).await.unwrap());

    // The executor: another agent on the same stores resumes the run to its question.
    let outcome = agentloop::agent::outcome_of(agent.resume(&run_id).await.unwrap()).await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert!(agent.settle_turn(&run_id).await.unwrap());
    assert!(!agent.settle_turn(&run_id).await.unwrap(), "a turn ends once");
    let info = session.info().await.unwrap();
    assert_eq!(info.state, SessionState::Ready);
    let asked = session.history().await.unwrap().len();
    assert_eq!(asked, 3, "the request, the question's call and its result");

    // The answer: a turn begun here, recorded through the run service, settled there.
    let service = agentloop::service::RunService::new(store.clone());
    session.begin_answer(&run_id).await.unwrap();
    assert!(matches!(session.begin_answer(&run_id).await, Err(SessionError::Store(_))));
    service.send_input(&run_id, "Lyon").await.unwrap();
    let outcome = agentloop::agent::outcome_of(agent.resume(&run_id).await.unwrap()).await;
    assert_eq!(outcome.unwrap().answer, "Lyon it is.");
    assert!(agent.settle_turn(&run_id).await.unwrap());
    let history = session.history().await.unwrap();
    assert_eq!(history.len(), asked + 2, "the answer and the reply: {history:?}");
    assert_eq!(history.last().unwrap().text(), "Lyon it is.");

    // A turn begun for a run that then does not go on is given back.
    let second = session.create_turn("Again.", RunOptions::default()).await.unwrap();
    session.release_turn(&second).await.unwrap();
    assert_eq!(session.info().await.unwrap().state, SessionState::Ready);
    assert_eq!(session.history().await.unwrap().len(), asked + 2);
}
