//! The run registry's part of the conformance suite: what `list_runs` says of a run besides
//! its journal's state (its parent, its lease, its usage and cost).

use super::*;

/// The run registry: a run with a parent, a lease and two model responses (in two appends)
/// lists its parent, its owner and lease expiry, its usage and its cost; a listing by parent
/// finds a run's children only; a renewal moves the expiry, a release clears the owner, an
/// expired lease keeps its owner but is not live. An agent's run started with a parent lists
/// the usage and cost of its outcome.
pub(super) async fn registry(store: Stores) {
    use agentloop::message::{FinishReason, Usage};
    use agentloop::run::Price;
    use agentloop::store::now_ms;
    use agentloop::RunOptions;
    use std::time::Duration;
    let (parent, child, sibling, stranger) = (run_id(), run_id(), run_id(), run_id());
    let price = Price::per_million(2.0, 8.0).with_cached_input(0.5);
    let started_by = |id: &str, parent: Option<&str>| Event::RunStarted {
        run_id: id.into(),
        config: Box::new({
            let mut config = RunConfig::default();
            config.agent = Some("sub".into());
            config.parent_run_id = parent.map(str::to_owned);
            config.price = Some(price);
            config
        }),
        input: vec![Message::user("hi")],
    };
    let responded = |iteration: u32, usage: Usage| Event::ModelResponded {
        iteration,
        message: Message::assistant("a"),
        finish_reason: FinishReason::Stop,
        usage,
        duration_ms: 1,
        response_id: None,
        response_model: None,
    };
    let first = Usage { input: 1_000, output: 100, cached_input: 400, reasoning: 20 };
    let second = Usage { input: 2_000, output: 50, cached_input: 0, reasoning: 0 };

    store.append(&parent, 0, &journal(&parent)).await.unwrap();
    let lease = store.claim(&child, "owner-1", Duration::from_secs(30)).await.unwrap();
    let batch = [
        started_by(&child, Some(&parent)),
        Event::IterationStarted { iteration: 1, at_ms: 0 },
        Event::ModelRequested { iteration: 1, purpose: Default::default() },
        responded(1, first),
    ];
    assert_eq!(store.append_fenced(&lease, 0, &entries(0, &batch)).await.unwrap(), 4);
    let batch = [
        Event::IterationCompleted { iteration: 1, duration_ms: 1 },
        Event::IterationStarted { iteration: 2, at_ms: 0 },
        Event::ModelRequested { iteration: 2, purpose: Default::default() },
        responded(2, second),
    ];
    assert_eq!(store.append_fenced(&lease, 4, &entries(4, &batch)).await.unwrap(), 8);
    // A stale append writes nothing, so it counts nothing.
    let stale = store.append(&child, 4, &[responded(2, second)]).await.unwrap_err();
    assert!(matches!(stale, StoreError::Conflict { .. }), "{stale}");
    // Another child of the same parent (finished, no lease), a run of another parent.
    store.append(&sibling, 0, &[started_by(&sibling, Some(&parent))]).await.unwrap();
    let finished = Event::RunFinished { outcome: outcome(&sibling) };
    store.append(&sibling, 1, &[finished]).await.unwrap();
    store.append(&stranger, 0, &[started_by(&stranger, Some("someone-else"))]).await.unwrap();

    let children = store.list_runs(&RunFilter::all().parent_run_id(&parent)).await.unwrap();
    let mut ids: Vec<&str> = children.iter().map(|r| r.run_id.as_str()).collect();
    ids.sort_unstable();
    let mut expected = [child.as_str(), sibling.as_str()];
    expected.sort_unstable();
    assert_eq!(ids, expected, "the parent's children, and only them");
    let run = children.iter().find(|r| r.run_id == child).unwrap();
    assert_eq!(run.parent_run_id.as_deref(), Some(parent.as_str()));
    assert_eq!((run.agent.as_deref(), run.state, run.entries), (Some("sub"), RunState::Running, 8));
    assert_eq!(run.owner.as_deref(), Some("owner-1"));
    assert_eq!(run.lease_expires_at_ms, Some(lease.expires_at_ms));
    assert!(run.lease_is_live(now_ms()));
    let total = Usage { input: 3_000, output: 150, cached_input: 400, reasoning: 20 };
    assert_eq!(run.usage, total);
    let per_call = price.cost(&first) + price.cost(&second);
    assert!((run.cost_usd - per_call).abs() < 1e-12, "{} ≠ {per_call}", run.cost_usd);
    let sibling_run = children.iter().find(|r| r.run_id == sibling).unwrap();
    assert_eq!((sibling_run.owner.as_ref(), sibling_run.lease_expires_at_ms), (None, None));
    assert_eq!((sibling_run.usage, sibling_run.cost_usd), (Usage::default(), 0.0));
    assert_eq!(sibling_run.state, RunState::Finished);
    // The parent filter combines with the others.
    let filter = RunFilter::all().parent_run_id(&parent).state(RunState::Finished);
    let listed = store.list_runs(&filter).await.unwrap();
    assert_eq!(listed.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(), [sibling.as_str()]);
    let listed = store.list_runs(&RunFilter::all().parent_run_id(&parent).limit(1)).await.unwrap();
    assert_eq!(listed.len(), 1);
    let orphan = RunFilter::all().parent_run_id(&stranger);
    assert!(store.list_runs(&orphan).await.unwrap().is_empty());
    let top = store.list_runs(&RunFilter::all()).await.unwrap();
    let parent_run = top.iter().find(|r| r.run_id == parent).unwrap();
    assert_eq!((parent_run.parent_run_id.as_ref(), parent_run.owner.as_ref()), (None, None));
    assert_eq!(parent_run.cost_usd, 0.0, "no price, no cost");

    // Renewed: the new expiry; released: no owner.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let renewed = store.renew(&lease, Duration::from_secs(60)).await.unwrap();
    let listed = store.list_runs(&RunFilter::all().parent_run_id(&parent)).await.unwrap();
    let run = listed.iter().find(|r| r.run_id == child).unwrap();
    assert_eq!(run.lease_expires_at_ms, Some(renewed.expires_at_ms));
    assert!(renewed.expires_at_ms > lease.expires_at_ms);
    store.release(&renewed).await.unwrap();
    let listed = store.list_runs(&RunFilter::all().parent_run_id(&parent)).await.unwrap();
    let run = listed.iter().find(|r| r.run_id == child).unwrap();
    assert_eq!((run.owner.as_ref(), run.lease_expires_at_ms), (None, None), "released");
    assert_eq!(run.usage, total, "the usage stays");
    // A holder that died keeps the lease until it expires: listed, but not live.
    let dead = store.claim(&sibling, "dead", Duration::from_millis(1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let listed = store.list_runs(&RunFilter::all().parent_run_id(&parent)).await.unwrap();
    let run = listed.iter().find(|r| r.run_id == sibling).unwrap();
    assert_eq!(
        (run.owner.as_deref(), run.lease_expires_at_ms),
        (Some("dead"), Some(dead.expires_at_ms))
    );
    assert!(!run.lease_is_live(now_ms()));

    // An agent's run started with a parent: journaled with it, listed with its outcome's
    // usage and cost (and no owner once it ended).
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("add", json!({"a": 2, "b": 3})).with_usage(first),
        ScriptedTurn::text("5").with_usage(second),
    ]);
    let agent = Agent::builder(model).tool(Add).price(price).store(store.clone()).build().unwrap();
    let options = RunOptions::default().parent_run_id(parent.clone());
    let events = collect(agent.run_stream_with("2+3?", options)).await;
    let outcome = common::outcome(&events[..events.len() - 1]);
    let listed = store.list_runs(&RunFilter::all().parent_run_id(&parent)).await.unwrap();
    assert_eq!(listed.len(), 3);
    let run = listed.iter().find(|r| r.run_id == outcome.run_id).unwrap();
    assert_eq!((run.state, run.owner.as_ref()), (RunState::Finished, None));
    assert_eq!(run.usage, outcome.usage);
    assert_eq!(run.usage, total);
    assert!((run.cost_usd - outcome.metrics.cost_usd).abs() < 1e-12);
    // The parent is the run's, not the agent's: resuming it is no identity change.
    let again = collect(agent.resume(&outcome.run_id).await.unwrap()).await;
    assert_eq!(common::outcome(&again).answer, outcome.answer);

    for id in [&parent, &child, &sibling, &stranger, &outcome.run_id] {
        assert!(store.delete_run(id).await.unwrap());
    }
    assert!(store.list_runs(&RunFilter::all().parent_run_id(&parent)).await.unwrap().is_empty());
}
