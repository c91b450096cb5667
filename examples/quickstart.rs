//! Quickstart: one tool, output streamed to the terminal.
//!
//! Runs offline on the scripted model (no API key, no network):
//! `cargo run -p agentloop --example quickstart --features test-util`

use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use futures::StreamExt;
use serde_json::json;
use std::io::Write;
use std::time::Duration;

/// Multiplies two integers.
#[tool]
async fn multiply(a: i64, b: i64) -> Result<i64, String> {
    a.checked_mul(b).ok_or_else(|| format!("{a} × {b} overflows"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A scripted model stands in for a real one: it asks for the tool, then answers,
    // streaming its output in small chunks the way a real model does.
    let pace = Duration::from_millis(15);
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("multiply", json!({"a": 17, "b": 23}))
            .with_text("Let me calculate that.")
            .with_chunk_delay(pace),
        ScriptedTurn::text("17 multiplied by 23 is 391.").with_chunk_delay(pace),
    ])
    .with_chunk_chars(3);

    let agent = Agent::builder(model)
        .instructions("You are a careful assistant. Use tools for arithmetic.")
        .tool(Multiply)
        .build()?;

    let question = "What is 17 multiplied by 23?";
    println!("> {question}");
    let mut events = agent.run_stream(question);
    let mut stdout = std::io::stdout();
    while let Some(event) = events.next().await {
        match event {
            Event::TextDelta { delta } => {
                print!("{delta}");
                stdout.flush()?;
            }
            Event::ToolStarted { call, arguments } => println!("\n  → {}({arguments})", call.name),
            Event::ToolCompleted { name, result, duration_ms, .. } => {
                println!("  ← {name}: {} ({duration_ms} ms)", result.content.to_text());
            }
            Event::ToolFailed { name, error, .. } => println!("  ✗ {name}: {error}"),
            Event::RunFinished { outcome } => {
                println!(
                    "\n[{:?}: {} iterations, {} tokens in, {} out]",
                    outcome.stop_reason,
                    outcome.iterations,
                    outcome.usage.input,
                    outcome.usage.output
                );
            }
            Event::RunFailed { error, .. } => return Err(error.into()),
            _ => {}
        }
    }
    Ok(())
}
