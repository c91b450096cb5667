//! The run service: a run executed in one process, followed and cancelled from another.
//!
//! `cargo run -p agentloop --example run_service --features test-util`
//!
//! The executor journals its run in SQLite and holds the run's lease; the "other process" (a
//! `RunService` on its own connection to the same file) lists the runs, subscribes to the
//! run's journal as it grows, and cancels it — the executor stops within a quarter second.

use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::service::RunService;
use agentloop::store::sqlite::SqliteStore;
use agentloop::store::RunFilter;
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Copies a big file (pretend: it takes a long time).
#[tool]
async fn copy_file(path: String) -> Result<String, String> {
    tokio::time::sleep(Duration::from_secs(3600)).await;
    Ok(format!("{path} copied"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("agentloop-service-{}", std::process::id()));
    let path = dir.join("agentloop.db");

    // The executor (in its own process, in real life).
    let executor = Agent::builder(ScriptedModel::new([ScriptedTurn::tool_call(
        "copy_file",
        json!({"path": "backup.tar"}),
    )]))
    .name("copier")
    .tool(CopyFile)
    .store(Arc::new(SqliteStore::open(&path)?))
    .build()?;
    let options = RunOptions { run_id: Some("run_copy".into()), ..RunOptions::default() };
    let run = tokio::spawn(agentloop::agent::outcome_of(
        executor.run_stream_with("Copy backup.tar.", options),
    ));

    // Another process: its own connection to the store.
    let service = RunService::new(Arc::new(SqliteStore::open(&path)?));
    let mut journal = service.subscribe("run_copy", 0);
    while let Some(entry) = journal.next().await {
        let entry = entry?;
        println!("  [{}] {}", entry.seq, entry.event.kind());
        if entry.event.kind() == "tool_started" {
            break;
        }
    }
    for run in service.list(&RunFilter::all().agent("copier")).await? {
        println!("  listed: {} {} ({} entries)", run.run_id, run.state, run.entries);
    }
    let asked = Instant::now();
    service.cancel("run_copy", "taking too long").await?;
    while let Some(entry) = journal.next().await {
        let entry = entry?;
        println!(
            "  [{}] {} ({} ms after the cancel)",
            entry.seq,
            entry.event.kind(),
            asked.elapsed().as_millis()
        );
    }
    let outcome = run.await?;
    println!(
        "  the executor's outcome: {:?}",
        outcome.map(|o| o.stop_reason).map_err(|e| e.to_string())
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
