//! `agentloop chat`: an interactive session. The conversation is kept in the session store
//! (the configured SQLite or Redis store), so `--session NAME` continues it in a later process;
//! `/reset` forgets it, `/tools` lists the tools, `/exit` (or end of input) leaves, and Ctrl-C
//! cancels the current turn without ending the session (a cancelled turn adds nothing to the
//! conversation). A turn left unfinished by a crash is resumed when the session is opened.

use crate::render::Ending;
use crate::tools::SharedLines;
use agentloop::prelude::*;
use agentloop::store::{SessionState, SessionStore};
use agentloop::{EventStream, RunOptions};
use anyhow::Context;
use std::io::Write;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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

/// Runs the session `session` (default: a new one); returns the exit code: that of the last
/// turn (as for `agentloop run`: 3 when it ended without an answer, 1 when it failed, 130
/// when it was cancelled), 0 when no turn ran.
pub async fn chat(
    agent: Agent,
    sessions: Arc<dyn SessionStore>,
    input: SharedLines,
    session: Option<String>,
) -> anyhow::Result<i32> {
    let id = session.unwrap_or_else(|| format!("chat-{}", agentloop::store::now_ms()));
    let mut session = agent.session(id.clone()).await.context("opening the session")?;
    let info = session.info().await?;
    println!(
        "agentloop chat — session {id} ({} messages); /tools, /reset, /exit; \
         Ctrl-C cancels a running turn.",
        info.messages
    );
    let mut code = 0;
    if info.state == SessionState::Busy {
        println!("(resuming the turn a previous process left unfinished)");
        match session.resume_turn().await {
            Ok(events) => {
                code = show_turn(events, None).await.code();
            }
            Err(error) => println!("(could not resume it: {error})"),
        }
    }
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
            return Ok(code);
        };
        match line.trim() {
            "" => continue,
            "/exit" | "/quit" => return Ok(code),
            "/reset" => {
                sessions.delete_session(&id).await.context("clearing the session")?;
                session = agent.session(id.clone()).await.context("opening the session")?;
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
        let cancel = CancellationToken::new();
        let options = RunOptions { cancel: Some(cancel.clone()), ..RunOptions::default() };
        let events = match session.run_stream_with(line, options).await {
            Ok(events) => events,
            Err(error) => {
                println!("(the turn could not start: {error})");
                code = 1;
                continue;
            }
        };
        let ending = show_turn(events, Some(cancel)).await;
        code = ending.code();
        match ending {
            Ending::Failed => println!("(the turn failed; the conversation is kept without it)"),
            Ending::Cancelled => println!("(cancelled; the conversation is kept without it)"),
            _ => {}
        }
    }
}

/// Shows one turn's events; Ctrl-C cancels it through `cancel`.
async fn show_turn(events: EventStream, cancel: Option<CancellationToken>) -> Ending {
    crate::render::show_events(events, false, cancel.map(|cancel| move || cancel.cancel())).await
}
