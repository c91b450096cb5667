//! Crash-safe resume: a run journaled in SQLite stops in the middle of a tool call (as if the
//! process died), and a new agent on a new store handle resumes it from the journal.
//!
//! `cargo run -p agentloop --example resume --features test-util`
//!
//! The tool that finished before the "crash" does not run again; the one that was running
//! runs again with the same idempotency key (`run_id:call_id`), which a real tool uses to
//! avoid doing its side effect twice.

use agentloop::error::BuildError;
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::store::sqlite::SqliteStore;
use agentloop::store::RunFilter;
use agentloop::store::RunStore;
use agentloop::store::StoreError;
use agentloop::ResumeError;
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Deploys a service (pretend: it takes a while).
#[tool]
async fn deploy(service: String, ctx: ToolContext) -> Result<String, String> {
    println!("    [deploy {service} runs, idempotency key {}]", ctx.idempotency_key);
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(format!("{service} deployed"))
}

fn agent(store: Arc<SqliteStore>, turns: Vec<ScriptedTurn>) -> Result<Agent, BuildError> {
    Agent::builder(ScriptedModel::new(turns))
        .name("deployer")
        .tool(Deploy)
        .tool_concurrency(1)
        .store(store)
        // How long a dead process's claim on the run lasts (default 10 s).
        .lease_ttl(Duration::from_millis(500))
        .build()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("agentloop-resume-{}", std::process::id()));
    let path = dir.join("agentloop.db");
    let answer = "api and web are deployed.";

    // 1. The first process: deploys api, starts deploying web, and dies.
    let first = agent(
        Arc::new(SqliteStore::open(&path)?),
        vec![
            ScriptedTurn::tool_call("deploy", json!({"service": "api"}))
                .with_tool_call("deploy", json!({"service": "web"})),
            ScriptedTurn::text(answer),
        ],
    )?;
    let options = RunOptions { run_id: Some("run_deploy".into()), ..RunOptions::default() };
    let mut events = first.run_stream_with("Deploy api and web.", options);
    let mut started = 0;
    while let Some(event) = events.next().await {
        if let Event::ToolStarted { arguments, .. } = &event {
            started += 1;
            println!("  first process: tool_started {arguments}");
            if started == 2 {
                // Let the tool run a little, then "crash": everything is dropped.
                let running = async { while events.next().await.is_some() {} };
                let _ = tokio::time::timeout(Duration::from_millis(50), running).await;
                break;
            }
        }
    }
    drop(events);
    drop(first);
    println!("  *** the process died ***");

    // 2. A new process: a new store handle on the same file, a new agent.
    let store = Arc::new(SqliteStore::open(&path)?);
    let journal = store.load("run_deploy").await?;
    let kinds: Vec<&str> = journal.iter().map(|e| e.event.kind()).collect();
    println!("  journal after the crash ({} entries): {kinds:?}", journal.len());
    let second = agent(store.clone(), vec![ScriptedTurn::text(answer)])?;
    // The dead process still holds the run's lease until it expires: one executor per run.
    let events = loop {
        match second.resume("run_deploy").await {
            Err(ResumeError::Store(StoreError::LeaseHeld { expires_in_ms, .. })) => {
                println!("  the dead process's lease expires in {expires_in_ms} ms; waiting");
                tokio::time::sleep(Duration::from_millis(expires_in_ms + 10)).await;
            }
            other => break other?,
        }
    };
    let outcome = agentloop::agent::outcome_of(events).await?;
    println!("  resumed: {:?} — {}", outcome.stop_reason, outcome.answer);
    for run in store.list_runs(&RunFilter::all().agent("deployer")).await? {
        println!("  stored run {}: {} ({} entries)", run.run_id, run.state, run.entries);
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
