//! A multi-turn session: the agent keeps the conversation of `context_id` in a store across
//! `run` calls (and processes), and refuses a second turn while one is running.
//!
//! `cargo run -p agentloop --example session --features test-util`

use agentloop::error::SessionError;
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::store::sqlite::SqliteStore;
use std::sync::Arc;
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("agentloop-session-{}", std::process::id()));
    let store = Arc::new(SqliteStore::open(dir.join("agentloop.db"))?);
    let model = ScriptedModel::new([
        ScriptedTurn::text("Nice to meet you, Ada!"),
        ScriptedTurn::text("Your name is Ada.").with_chunk_delay(Duration::from_millis(20)),
    ]);
    let agent = Agent::builder(model)
        .instructions("You are a friendly assistant.")
        .store(store.clone())
        .session_store(store.clone())
        .build()?;

    let session = agent.session("chat-42").await?;
    println!("state: {}", session.info().await?.state);
    let first = session.run("Hi, I am Ada.").await?;
    println!("turn 1: {}", first.answer);

    // The second turn runs in the background; a third one cannot start meanwhile.
    let turn = session.run_stream("What is my name?").await?;
    println!("state: {}", session.info().await?.state);
    match session.run("Are you there?").await {
        Err(SessionError::Busy { run_id, .. }) => println!("refused: busy with {run_id}"),
        other => println!("unexpected: {other:?}"),
    }
    let second = agentloop::agent::outcome_of(turn).await?;
    println!("turn 2: {}", second.answer);

    // The conversation is in the store (without the instructions), for any later process.
    let info = session.info().await?;
    println!("state: {}, {} turns, {} messages:", info.state, info.turns, info.messages);
    for message in session.history().await? {
        println!("  {:?}: {}", message.role, message.text());
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
