//! Deciding on deferred calls and answering a run's question from another process: the run
//! service records the request in the store, and the next executor that resumes the run
//! (an agent on its own store connection, as another process has) applies it and goes on —
//! on SQLite and, when `AGENTLOOP_REDIS_URL` is set, on Redis.
#![cfg(feature = "sqlite")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::event::Event;
use agentloop::message::{Message, Role};
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::run::{Decision, StopReason};
use agentloop::service::{RunService, ServiceError};
use agentloop::store::sqlite::SqliteStore;
use agentloop::store::{RunFilter, RunState, RunStore};
use agentloop::tool::AskUser;
use agentloop::{Agent, AgentError};
use common::{collect, AskHuman, Probe};
use serde_json::json;
use std::sync::Arc;

/// Opens a connection to one store (as another process would).
type Open = Box<dyn Fn() -> Arc<dyn RunStore>>;

/// The stores to check: a SQLite file (each agent and the service open their own
/// connection, as separate processes do), and Redis when it is configured.
async fn stores() -> Vec<(String, Open)> {
    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("runs.db");
    let mut stores: Vec<(String, Open)> = vec![(
        "sqlite".into(),
        Box::new(move || Arc::new(SqliteStore::open(&path).unwrap()) as Arc<dyn RunStore>),
    )];
    if let Ok(url) = std::env::var("AGENTLOOP_REDIS_URL") {
        use agentloop::store::redis::{RedisOptions, RedisStore};
        let prefix = format!("agentloop-test:{}:", uuid::Uuid::new_v4().simple());
        let options = RedisOptions::default().prefix(prefix);
        let store: Arc<dyn RunStore> =
            Arc::new(RedisStore::connect_with(&url, options).await.unwrap());
        stores.push(("redis".into(), Box::new(move || store.clone())));
    }
    stores
}

fn outcome(events: &[Event]) -> &agentloop::run::Outcome {
    events.iter().rev().find_map(Event::outcome).expect("an outcome")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_approves_and_rejects_deferred_calls() {
    for (name, store) in stores().await {
        let probe = Probe::default();
        let executor = |model: Arc<ScriptedModel>| {
            Agent::builder(model).tool(probe.clone()).hook(AskHuman).store(store()).build().unwrap()
        };
        let scripted = |turns: Vec<ScriptedTurn>| Arc::new(ScriptedModel::new(turns));
        // The model asks for two probes; both wait for a human, and the run suspends.
        let first = ScriptedTurn::tool_call("probe", json!({"ms": 0, "tag": "probed a"}))
            .with_call_id("call_a")
            .with_tool_call("probe", json!({"ms": 0, "tag": "probed b"}));
        let suspended = match executor(scripted(vec![first])).run("probe twice").await {
            Err(AgentError::Suspended { outcome }) => *outcome,
            other => panic!("{name}: expected a suspension, got {other:?}"),
        };
        let run_id = suspended.run_id.clone();
        let StopReason::AwaitingApproval { calls } = &suspended.stop_reason else {
            panic!("{name}: {:?}", suspended.stop_reason)
        };
        let ids: Vec<String> = calls.iter().map(|c| c.id.clone()).collect();
        assert_eq!(ids.len(), 2, "{name}");

        // Another process decides: the first approved, the second rejected (after a change of
        // mind: the last decision wins); an unknown call is refused.
        let service = RunService::new(store());
        // Who decided goes with each decision (the last one's, none when it named nobody).
        let not_yet = Decision::Reject { reason: "not yet".into() };
        service.decide_by(&run_id, &ids[0], not_yet, Some("ops:bob".into())).await.unwrap();
        service.approve(&run_id, &ids[0]).await.unwrap();
        let risky = Decision::Reject { reason: "too risky".into() };
        let by = Some("ops:carol".to_owned());
        let control = service.decide_by(&run_id, &ids[1], risky, by).await.unwrap();
        assert_eq!(control.decisions.len(), 2, "{name}");
        let expected = [(ids[1].clone(), "ops:carol".to_owned())].into_iter().collect();
        assert_eq!(control.decided_by, expected, "{name}");
        let unknown = service.approve(&run_id, "call_nobody").await.unwrap_err();
        assert!(matches!(unknown, ServiceError::NotAwaitingApproval { .. }), "{name}: {unknown}");
        assert!(matches!(
            service.approve("run_nowhere", &ids[0]).await.unwrap_err(),
            ServiceError::NotFound(_)
        ));
        let listed = service.list(&RunFilter::all()).await.unwrap();
        let listed = listed.iter().find(|r| r.run_id == run_id).unwrap();
        assert_eq!(listed.state, RunState::Suspended, "{name}");
        assert_eq!(probe.calls(), 0, "{name}: nothing ran before the decisions");

        // A third process resumes the run: the approved call runs once, the rejected one gets
        // its reason as the error result, and the run finishes.
        let model = scripted(vec![ScriptedTurn::text("one probe done")]);
        let events = collect(executor(model.clone()).resume(&run_id).await.unwrap()).await;
        assert_eq!(outcome(&events).stop_reason, StopReason::Completed, "{name}");
        assert_eq!(outcome(&events).answer, "one probe done");
        assert_eq!(probe.calls(), 1, "{name}: the approved call ran once");
        let journal = store().load(&run_id).await.unwrap();
        let decided: Vec<&Event> = journal
            .iter()
            .map(|e| &*e.event)
            .filter(|e| matches!(e, Event::ApprovalDecided { .. }))
            .collect();
        assert_eq!(decided.len(), 2, "{name}");
        let by: Vec<(&str, Option<&str>)> = decided
            .iter()
            .filter_map(|e| match e {
                Event::ApprovalDecided { call_id, by, .. } => {
                    Some((call_id.as_str(), by.as_deref()))
                }
                _ => None,
            })
            .collect();
        assert!(by.contains(&(ids[0].as_str(), None)), "{name}: {by:?}");
        assert!(by.contains(&(ids[1].as_str(), Some("ops:carol"))), "{name}: {by:?}");
        let results: Vec<_> = model.requests()[0]
            .messages
            .iter()
            .flat_map(|m| m.tool_results_iter())
            .map(|r| (r.call_id.clone(), r.content.to_text()))
            .collect();
        let rejected = results.iter().any(|(id, text)| *id == ids[1] && text.contains("too risky"));
        let ran = results.iter().any(|(id, text)| *id == ids[0] && text.contains("probed a"));
        assert!(ran, "{name}: {results:?}");
        assert!(rejected, "{name}: the model sees the rejection's reason");

        // Resuming again changes nothing: the decisions were taken once.
        let again = collect(executor(scripted(vec![])).resume(&run_id).await.unwrap()).await;
        assert_eq!(again.len(), 1, "{name}: only the terminal event again");
        assert_eq!(store().load(&run_id).await.unwrap().len(), journal.len(), "{name}");
        assert_eq!(probe.calls(), 1, "{name}");
        assert!(store().delete_run(&run_id).await.unwrap(), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_answers_the_question_a_run_asked() {
    for (name, store) in stores().await {
        let model = Arc::new(ScriptedModel::new([
            ScriptedTurn::tool_call("ask_user", json!({"question": "Which city?"})),
            ScriptedTurn::text("Lyon it is: sunny."),
        ]));
        let recorder = model.clone();
        let agent = Agent::builder(model).tool(AskUser).store(store()).build().unwrap();
        let asked = match agent.run("What's the weather?").await {
            Err(AgentError::Suspended { outcome }) => *outcome,
            other => panic!("{name}: expected a question, got {other:?}"),
        };
        assert_eq!(asked.answer, "Which city?");
        let run_id = asked.run_id.clone();

        let service = RunService::new(store());
        let listed = service.list(&RunFilter::all().state(RunState::Suspended)).await.unwrap();
        assert!(listed.iter().any(|r| r.run_id == run_id), "{name}: it waits for a human");
        let control = service.send_input(&run_id, "Lyon").await.unwrap();
        let asked_at = store().next_seq(&run_id).await.unwrap() - 1;
        assert_eq!(
            control.input.as_ref().map(|i| (i.for_seq, i.text.as_str())),
            Some((asked_at, "Lyon"))
        );

        // The same run goes on, with the answer as the user's message after the question.
        let events = collect(agent.resume(&run_id).await.unwrap()).await;
        assert_eq!(outcome(&events).stop_reason, StopReason::Completed, "{name}");
        assert_eq!(outcome(&events).answer, "Lyon it is: sunny.");
        assert_eq!(outcome(&events).run_id, run_id, "{name}: the same run");
        let last_request = recorder.requests().pop().unwrap();
        let last_message = last_request.messages.last().unwrap();
        assert_eq!((last_message.role, last_message.text()), (Role::User, "Lyon".to_owned()));
        let journal = store().load(&run_id).await.unwrap();
        let provided: Vec<&Message> = journal
            .iter()
            .filter_map(|e| match &*e.event {
                Event::InputProvided { message } => Some(message),
                _ => None,
            })
            .collect();
        assert_eq!(provided.len(), 1, "{name}");
        let listed = service.list(&RunFilter::all().state(RunState::Finished)).await.unwrap();
        assert!(listed.iter().any(|r| r.run_id == run_id), "{name}: finished now");

        // The answer was for that question only: the run no longer waits for one.
        let refused = service.send_input(&run_id, "Paris").await.unwrap_err();
        assert!(matches!(refused, ServiceError::NotAwaitingInput(_)), "{name}: {refused}");
        let again = collect(agent.resume(&run_id).await.unwrap()).await;
        assert_eq!(again.len(), 1, "{name}: nothing to do");
        assert_eq!(store().load(&run_id).await.unwrap().len(), journal.len(), "{name}");
        assert!(store().delete_run(&run_id).await.unwrap(), "{name}");
    }
}

#[tokio::test]
async fn an_answer_continues_a_run_in_process_and_a_stale_one_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn RunStore> = Arc::new(SqliteStore::open(dir.path().join("r.db")).unwrap());
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("ask_user", json!({"question": "Which city?"})),
        ScriptedTurn::tool_call("ask_user", json!({"question": "Which day?"})),
        ScriptedTurn::text("Lyon on Monday."),
    ]);
    let agent = Agent::builder(model).tool(AskUser).store(store.clone()).build().unwrap();
    let Err(AgentError::Suspended { outcome: asked }) = agent.run("weather?").await else {
        panic!()
    };
    let run_id = asked.run_id;
    // An answer recorded for the first question...
    RunService::new(store.clone()).send_input(&run_id, "Lyon").await.unwrap();
    // ...while the run is answered directly, in process: it asks again.
    let events = collect(agent.answer(&run_id, Message::user("Lyon")).await.unwrap()).await;
    assert_eq!(outcome(&events).answer, "Which day?");
    // Resuming now does not apply the stale answer to the second question.
    let events = collect(agent.resume(&run_id).await.unwrap()).await;
    assert_eq!(events.len(), 1);
    assert_eq!(outcome(&events).answer, "Which day?");
    // Answering the second question finishes the run.
    let events = collect(agent.answer(&run_id, Message::user("Monday")).await.unwrap()).await;
    assert_eq!(outcome(&events).answer, "Lyon on Monday.");
    let Err(error) = agent.answer(&run_id, Message::user("again")).await else { panic!() };
    assert!(error.to_string().contains("input_provided"), "{error}");
}
