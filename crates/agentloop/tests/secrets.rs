//! The agent's secret registry: a secret a tool prints, or puts in its error, is redacted
//! before the result is journaled, streamed, shown to an `after_tool` hook or sent to the
//! model; the run goes on with the redacted text.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::store::{MemoryStore, RunStore};
use common::collect;
use serde_json::json;
use std::sync::Arc;

const TOKEN: &str = "ghp_0123456789abcdefghijklmnopQRST";

/// Prints the environment (as `env` would), the token among it.
#[tool]
async fn print_env() -> Result<String, String> {
    Ok(format!("HOME=/home/u\nGITHUB_TOKEN={TOKEN}\n"))
}

/// Fails, naming the token in its error.
#[tool]
async fn fetch_repo() -> Result<String, String> {
    Err(format!("401 for token {TOKEN}"))
}

#[tokio::test]
async fn a_secret_in_a_tool_result_or_error_is_redacted_everywhere() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("print_env", json!({})).with_tool_call("fetch_repo", json!({})),
        ScriptedTurn::text("Done."),
    ]));
    let store = Arc::new(MemoryStore::new());
    let agent = Agent::builder(model.clone())
        .tool(PrintEnv)
        .tool(FetchRepo)
        .secret(TOKEN)
        .store(store.clone())
        .build()
        .unwrap();
    let events = collect(agent.run_stream("Show the environment.")).await;
    let streamed = serde_json::to_string(&events).unwrap();
    assert!(streamed.contains("GITHUB_TOKEN=ghp…QRST"), "{streamed}");
    assert!(streamed.contains("401 for token ghp…QRST"), "{streamed}");
    let Some(Event::RunStarted { run_id, .. }) = events.first() else { panic!("no start") };
    let journal = serde_json::to_string(&store.load(run_id).await.unwrap()).unwrap();
    let sent = serde_json::to_string(&model.requests()).unwrap();
    for (name, text) in [("the events", &streamed), ("the journal", &journal), ("the model", &sent)]
    {
        assert!(!text.contains(TOKEN), "the token reached {name}");
    }
    assert!(sent.contains("GITHUB_TOKEN=ghp…QRST"), "the model got the redacted result");
    let finished = events.iter().find_map(|event| match event {
        Event::RunFinished { outcome, .. } => Some(outcome.answer.clone()),
        _ => None,
    });
    assert_eq!(finished.as_deref(), Some("Done."));
}
