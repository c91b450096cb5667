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
        usage: Box::new(usage),
        duration_ms: 1,
        response_id: None,
        response_model: None,
        provider: None,
    };
    let first =
        Usage { input: 1_000, output: 100, cached_input: 400, reasoning: 20, cache_write_input: 0 };
    let second =
        Usage { input: 2_000, output: 50, cached_input: 0, reasoning: 0, cache_write_input: 0 };

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
    let total =
        Usage { input: 3_000, output: 150, cached_input: 400, reasoning: 20, cache_write_input: 0 };
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

/// The registry's texts and the listings they allow: a run lists the start of its input and
/// of its answer, a fork its origin; a listing by origin finds the forks, a search finds the
/// text in the input or the answer (ASCII letters in either case, `%` and `_` as such); a
/// listing by state follows the run's state as it changes (finished, then going on).
pub(super) async fn registry_texts(store: Stores) {
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (origin, fork, other, percent) = (run_id(), run_id(), run_id(), run_id());
    let started_with = |id: &str, text: &str| Event::RunStarted {
        run_id: id.into(),
        config: Box::default(),
        input: vec![Message::user("earlier"), Message::assistant("ok"), Message::user(text)],
    };
    let asked = format!("What is the Capital of France? {tag}");
    let finished = |id: &str, answer: &str| Event::RunFinished {
        outcome: Box::new(Outcome::new(id, answer, StopReason::Completed)),
    };
    let iteration = Event::IterationStarted { iteration: 2, at_ms: 0 };
    store.append(&origin, 0, &[started_with(&origin, &asked)]).await.unwrap();
    store.append(&origin, 1, &[finished(&origin, "Paris, of course.")]).await.unwrap();
    let forked = Event::RunForked { origin_run_id: origin.clone(), at_seq: 0, edit: None };
    store.append(&fork, 0, &[started_with(&fork, &asked), forked]).await.unwrap();
    store.append(&other, 0, &[started_with(&other, &format!("Unrelated {tag}"))]).await.unwrap();
    let odd = format!("50% off_now {tag}");
    store.append(&percent, 0, &[started_with(&percent, &odd)]).await.unwrap();

    let ids = |runs: &[agentloop::store::RunSummary]| {
        let mut ids: Vec<String> = runs.iter().map(|r| r.run_id.clone()).collect();
        ids.sort_unstable();
        ids
    };
    let sorted = |mut ids: Vec<&String>| {
        ids.sort_unstable();
        ids.into_iter().cloned().collect::<Vec<_>>()
    };
    let list = |filter: RunFilter| {
        let store = store.clone();
        async move { store.list_runs(&filter).await.unwrap() }
    };
    let all = list(RunFilter::all().text(tag.as_str())).await;
    assert_eq!(ids(&all), sorted(vec![&origin, &fork, &other, &percent]));
    let run = all.iter().find(|r| r.run_id == origin).unwrap();
    assert_eq!(run.input.as_deref(), Some(asked.as_str()), "the last user message");
    assert_eq!(run.answer.as_deref(), Some("Paris, of course."));
    assert_eq!(run.origin_run_id, None);
    let forked_run = all.iter().find(|r| r.run_id == fork).unwrap();
    assert_eq!(forked_run.origin_run_id.as_deref(), Some(origin.as_str()));
    assert_eq!(forked_run.answer, None, "not finished");

    let forks = list(RunFilter::all().origin_run_id(&origin)).await;
    assert_eq!(ids(&forks), [fork.as_str()]);
    let text = |needle: String| list(RunFilter::all().text(needle));
    assert_eq!(ids(&text(format!("capital OF france? {tag}")).await), sorted(vec![&origin, &fork]));
    assert_eq!(ids(&text("PARIS, OF".into()).await), [origin.as_str()], "the answer");
    assert_eq!(ids(&text(format!("50% off_now {tag}")).await), [percent.as_str()]);
    assert!(text("50%off".into()).await.is_empty(), "% is no wildcard");
    assert!(text("off_no_".into()).await.is_empty(), "_ is no wildcard");
    let newest = list(RunFilter::all().text(tag.as_str()).limit(1)).await;
    assert_eq!(ids(&newest), [all[0].run_id.as_str()], "a page of one: the first match");

    // By state, with the other filters.
    let finished_runs = list(RunFilter::all().state(RunState::Finished).text(tag.as_str())).await;
    assert_eq!(ids(&finished_runs), [origin.as_str()]);
    let running = list(RunFilter::all().state(RunState::Running).text(tag.as_str())).await;
    assert_eq!(ids(&running), sorted(vec![&fork, &other, &percent]));
    // The finished run goes on: running again, its last answer kept until it finishes again.
    store.append(&origin, 2, &[iteration]).await.unwrap();
    let running = list(RunFilter::all().state(RunState::Running).text(tag.as_str())).await;
    assert_eq!(ids(&running), sorted(vec![&origin, &fork, &other, &percent]));
    assert!(list(RunFilter::all().state(RunState::Finished).text(tag.as_str())).await.is_empty());
    let again = list(RunFilter::all().origin_run_id(&origin).state(RunState::Running)).await;
    assert_eq!(ids(&again), [fork.as_str()]);
    store.append(&origin, 3, &[finished(&origin, "Paris.")]).await.unwrap();
    let finished_runs = list(RunFilter::all().state(RunState::Finished)).await;
    let run = finished_runs.iter().find(|r| r.run_id == origin).unwrap();
    assert_eq!(run.answer.as_deref(), Some("Paris."), "the last answer");

    for id in [&origin, &fork, &other, &percent] {
        assert!(store.delete_run(id).await.unwrap());
    }
    assert!(list(RunFilter::all().text(tag.as_str())).await.is_empty());
    assert!(list(RunFilter::all().origin_run_id(&origin)).await.is_empty());
    let finished_runs = list(RunFilter::all().state(RunState::Finished)).await;
    assert!(finished_runs.iter().all(|r| r.run_id != origin));
}
