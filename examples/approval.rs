//! Human approval: asks on stdin before each tool call.
//!
//! `cargo run -p agentloop --example approval --features test-util`
//!
//! Answer `y` to run a call; anything else rejects it, and the model sees your reason (the
//! rest of the line) as the call's error result. Without a terminal (stdin closed), every call
//! is rejected.

use agentloop::hooks::HookError;
use agentloop::message::ToolCall;
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{json, Value};
use std::io::Write;
use std::time::Duration;

/// Deletes a file (pretend).
#[tool]
async fn delete_file(path: String) -> Result<String, String> {
    Ok(format!("deleted {path}"))
}

/// Lists a directory (pretend).
#[tool]
async fn list_dir(path: String) -> Result<Vec<String>, String> {
    Ok(vec![format!("{path}/notes.txt"), format!("{path}/old.log")])
}

/// Asks the person at the terminal.
struct AskOnStdin;

#[async_trait]
impl Hooks for AskOnStdin {
    fn name(&self) -> &str {
        "ask_on_stdin"
    }

    async fn approve_tool(
        &self,
        _ctx: &HookContext,
        call: &ToolCall,
        arguments: &Value,
    ) -> HookResult<Approval> {
        let prompt = format!("\nAllow {}({arguments})? [y/N, or a reason] ", call.name);
        let answer = tokio::task::spawn_blocking(move || {
            print!("{prompt}");
            let _ = std::io::stdout().flush();
            let mut line = String::new();
            match std::io::stdin().read_line(&mut line) {
                Ok(0) | Err(_) => None,
                Ok(_) => Some(line.trim().to_owned()),
            }
        })
        .await
        .map_err(|e| HookError::from(e.to_string()))?;
        Ok(match answer.as_deref() {
            Some("y" | "Y" | "yes") => Approval::Approve,
            Some("") | Some("n" | "N" | "no") => Approval::Reject("the user said no".into()),
            Some(reason) => Approval::Reject(reason.to_owned()),
            None => Approval::Reject("no one was there to approve it".into()),
        })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("list_dir", json!({"path": "/tmp/project"}))
            .with_text("Let me look first."),
        ScriptedTurn::tool_call("delete_file", json!({"path": "/tmp/project/old.log"})),
        ScriptedTurn::text("Done. I listed the directory and asked to delete old.log."),
    ]);
    let agent = Agent::builder(model)
        .tool(ListDir)
        .tool(DeleteFile)
        .hook(AskOnStdin)
        // A person needs more than the default 5 s hook timeout.
        .hook_timeout(Duration::from_secs(3600))
        .build()?;

    let mut events = agent.run_stream("Clean up old logs in /tmp/project.");
    while let Some(event) = events.next().await {
        match event {
            Event::TextDelta { delta } => print!("{delta}"),
            Event::ToolCompleted { name, result, .. } => {
                println!("  ✓ {name}: {}", result.content.to_text())
            }
            Event::ToolFailed { name, error, .. } => println!("  ✗ {name}: {error}"),
            Event::RunFinished { outcome } => {
                println!("\n[{:?} after {} iterations]", outcome.stop_reason, outcome.iterations)
            }
            Event::RunFailed { error, .. } => return Err(error.into()),
            _ => {}
        }
    }
    Ok(())
}
