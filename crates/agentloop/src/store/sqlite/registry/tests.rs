#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::super::schema::{migrate, MIGRATIONS, REGISTRY_MIGRATION};
use super::*;
use crate::event::Event;
use crate::message::{FinishReason, Message};
use crate::run::{Price, RunConfig};

fn responded(usage: Usage) -> Event {
    Event::ModelResponded {
        iteration: 1,
        message: Message::assistant("a"),
        finish_reason: FinishReason::Stop,
        usage: Box::new(usage),
        duration_ms: 1,
        response_id: None,
        response_model: None,
        provider: None,
    }
}

/// A file of the schema before the registry's migration, with one priced run and one
/// without a price: migrating fills in their price, usage and cost from their journals.
#[test]
fn the_migration_fills_the_registry_of_older_runs_from_their_journals() {
    let mut conn = Connection::open_in_memory().unwrap();
    conn.execute_batch("CREATE TABLE agentloop_schema (version INTEGER NOT NULL)").unwrap();
    conn.execute(
        "INSERT INTO agentloop_schema (version) VALUES (?1)",
        [i64::try_from(REGISTRY_MIGRATION).unwrap()],
    )
    .unwrap();
    for migration in &MIGRATIONS[..REGISTRY_MIGRATION] {
        conn.execute_batch(migration).unwrap();
    }
    let price = Price::per_million(3.0, 15.0).with_cached_input(0.3);
    let (first, second) = (
        Usage {
            input: 1_200,
            output: 80,
            cached_input: 1_000,
            reasoning: 10,
            cache_write_input: 0,
        },
        Usage { input: 400, output: 20, cached_input: 0, reasoning: 0, cache_write_input: 0 },
    );
    for (run_id, price) in [("priced", Some(price)), ("free", None)] {
        let config = RunConfig { agent: Some("old".into()), price, ..RunConfig::default() };
        let events = [
            Event::RunStarted { run_id: run_id.into(), config: Box::new(config), input: vec![] },
            responded(first),
            Event::Resumed,
            responded(second),
        ];
        for (seq, event) in (0i64..).zip(&events) {
            conn.execute(
                "INSERT INTO journal (run_id, seq, at_ms, schema_version, event) \
                 VALUES (?1, ?2, ?3, 1, ?4)",
                params![run_id, seq, 10 + seq, to_json(event).unwrap()],
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO runs (run_id, agent, context_id, state, created_ms, updated_ms, \
             next_seq) VALUES (?1, 'old', NULL, 'running', 10, 13, 4)",
            [run_id],
        )
        .unwrap();
    }
    migrate(&mut conn).unwrap();
    let runs = list(&conn, &RunFilter::all()).unwrap();
    let total = Usage {
        input: 1_600,
        output: 100,
        cached_input: 1_000,
        reasoning: 10,
        cache_write_input: 0,
    };
    let priced = runs.iter().find(|r| r.run_id == "priced").unwrap();
    assert_eq!(priced.usage, total);
    assert_eq!(priced.cost_usd, price.cost(&total));
    assert!((priced.cost_usd - price.cost(&first) - price.cost(&second)).abs() < 1e-12);
    let free = runs.iter().find(|r| r.run_id == "free").unwrap();
    assert_eq!((free.usage, free.cost_usd), (total, 0.0));
    assert_eq!((free.parent_run_id.as_ref(), free.owner.as_ref()), (None, None));
    // An append after the migration goes on from there, at the journaled price.
    let tx = conn.transaction().unwrap();
    let current = current(&tx, "priced").unwrap();
    assert_eq!(current.next_seq, 4);
    let entries = [crate::store::JournalEntry::of(4, responded(second)).unwrap()];
    let update = SummaryUpdate::of(&entries).unwrap();
    apply(&tx, "priced", &current, 5, &update).unwrap();
    // The entry itself, as the append writes it (a run is listed only with its journal).
    tx.execute(
        "INSERT INTO journal (run_key, seq, at_ms, schema_version, event) \
         SELECT run_key, 4, 14, 1, ?1 FROM runs WHERE run_id = 'priced'",
        [to_json(&responded(second)).unwrap()],
    )
    .unwrap();
    tx.commit().unwrap();
    let runs = list(&conn, &RunFilter::all().agent("old").limit(1)).unwrap();
    let mut more = total;
    more += second;
    assert_eq!((runs[0].run_id.as_str(), runs[0].usage), ("priced", more));
    assert_eq!(runs[0].cost_usd, price.cost(&more));
}
