//! `agentloop chat`: an interactive session. The conversation is kept across turns;
//! `/reset` forgets it, `/tools` lists the tools, `/exit` (or end of input) leaves, and Ctrl-C
//! cancels the current run without ending the session.

use crate::render::{Ending, Renderer};
use crate::tools::SharedLines;
use agentloop::prelude::*;
use futures::StreamExt;
use std::io::Write;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Reads lines on a thread, so that input and Ctrl-C can be awaited together.
pub fn lines() -> SharedLines {
    let (sender, receiver) = mpsc::channel(16);
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        loop {
            let mut line = String::new();
            match stdin.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if sender.blocking_send(line.trim_end_matches(['\n', '\r']).to_owned()).is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    Arc::new(tokio::sync::Mutex::new(receiver))
}

fn prompt() {
    print!("you> ");
    let _ = std::io::stdout().flush();
}

/// Runs the session; returns the exit code.
pub async fn chat(agent: Agent, input: SharedLines) -> anyhow::Result<i32> {
    let mut history: Vec<Message> = Vec::new();
    println!("agentloop chat — /tools, /reset, /exit; Ctrl-C cancels a running turn.");
    loop {
        prompt();
        let line = {
            let mut input = input.lock().await;
            tokio::select! {
                line = input.recv() => line,
                _ = tokio::signal::ctrl_c() => None,
            }
        };
        let Some(line) = line else {
            println!();
            return Ok(0);
        };
        match line.trim() {
            "" => continue,
            "/exit" | "/quit" => return Ok(0),
            "/reset" => {
                history.clear();
                println!("(conversation cleared)");
                continue;
            }
            "/tools" => {
                for tool in agent.tools().iter() {
                    println!("  {} — {}", tool.name, tool.description);
                }
                continue;
            }
            _ => {}
        }
        let mut turn = history.clone();
        turn.push(Message::user(line));
        let (handle, mut events) = agent.start(turn);
        let mut renderer = Renderer::new(false);
        let mut journal = Vec::new();
        let mut ending = Ending::Unknown;
        let mut cancelled = false;
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(event) => {
                        if let Some(end) = renderer.show(&event) {
                            ending = end;
                        }
                        if event.is_durable() {
                            journal.push(event);
                        }
                    }
                    None => break,
                },
                _ = tokio::signal::ctrl_c(), if !cancelled => {
                    cancelled = true;
                    handle.cancel("interrupted (Ctrl-C)");
                }
            }
        }
        // The conversation goes on from the run's whole history (tool calls and results
        // included), even after a failure or a cancel: open calls were answered.
        if let Ok(run) = Run::from_journal(&journal) {
            history = run.history().to_vec();
        }
        if ending == Ending::Failed {
            println!("(the turn failed; the conversation is kept)");
        }
    }
}
