//! The built-in tools the configuration enables, and the terminal approval prompt.

use crate::config::ToolsSection;
use agentloop::hooks::{Approval, HookContext, HookResult, Hooks};
use agentloop::message::ToolCall;
use agentloop::tool::{
    Calculator, DynTool, HttpGet, ListDir, ReadFile, Shell, Workspace, WriteFile,
};
use agentloop::AgentBuilder;
use async_trait::async_trait;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// The tools enabled when the configuration names none.
pub const DEFAULT_TOOLS: &[&str] = &["calculator"];

/// Lines typed at the terminal, shared by the chat loop and the approval prompt so that an
/// answer to a prompt is never taken as the next chat message.
pub type SharedLines = Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<String>>>;

/// Adds the enabled built-in tools and, for those that need it, the approval prompt.
pub fn install(
    mut builder: AgentBuilder,
    section: &ToolsSection,
    enabled: &[String],
    lines: Option<SharedLines>,
) -> anyhow::Result<AgentBuilder> {
    let workspace_dir = section.workspace.clone().unwrap_or_else(|| ".".into());
    let workspace =
        || Workspace::new(&workspace_dir).map_err(|e| anyhow::anyhow!("[tools] workspace: {e}"));
    let mut approval: BTreeSet<String> = section.require_approval.iter().cloned().collect();
    for name in enabled {
        let tool: Arc<dyn DynTool> = match name.as_str() {
            "calculator" => Arc::new(Calculator),
            "read_file" => Arc::new(ReadFile(workspace()?)),
            "list_dir" => Arc::new(ListDir(workspace()?)),
            "write_file" => Arc::new(WriteFile(workspace()?)),
            "http_get" => {
                if section.http_allowed_hosts.is_empty() {
                    anyhow::bail!("[tools] http_get needs http_allowed_hosts = [\"host\", …]");
                }
                Arc::new(HttpGet::new(section.http_allowed_hosts.clone()))
            }
            "shell" => {
                // Always asks, whatever the configuration says.
                approval.insert("shell".into());
                // Its timeout is every tool's (`[tools] timeout_secs`) when one is set.
                let shell = Shell::new(workspace()?.root());
                Arc::new(match section.timeout_secs {
                    Some(secs) => shell.timeout(Duration::from_secs(secs)),
                    None => shell,
                })
            }
            other => anyhow::bail!("unknown tool '{other}'"),
        };
        builder = builder.dyn_tool(tool);
    }
    if let Some(secs) = section.timeout_secs {
        builder = builder.tool_timeout(Duration::from_secs(secs));
    }
    if !approval.is_empty() {
        builder = builder
            .hook(AskBeforeCalling { tools: approval, lines })
            .hook_timeout(Duration::from_secs(24 * 3600));
    }
    Ok(builder)
}

/// Asks on the terminal before each call of the listed tools. `y` runs the call; anything
/// else rejects it with that text as the reason. Without a terminal (stdin closed), rejects.
pub struct AskBeforeCalling {
    /// The tools that ask.
    pub tools: BTreeSet<String>,
    /// Where answers come from (stdin when `None`).
    pub lines: Option<SharedLines>,
}

#[async_trait]
impl Hooks for AskBeforeCalling {
    fn name(&self) -> &str {
        "approval"
    }

    async fn approve_tool(
        &self,
        _ctx: &HookContext,
        call: &ToolCall,
        arguments: &Value,
    ) -> HookResult<Approval> {
        if !self.tools.contains(&call.name) {
            return Ok(Approval::Approve);
        }
        eprint!("\nAllow {}({arguments})? [y/N] ", call.name);
        let _ = std::io::stderr().flush();
        let answer = match &self.lines {
            Some(lines) => lines.lock().await.recv().await.map(|line| line.trim().to_owned()),
            None => tokio::task::spawn_blocking(|| {
                let mut line = String::new();
                match std::io::stdin().read_line(&mut line) {
                    Ok(0) | Err(_) => None,
                    Ok(_) => Some(line.trim().to_owned()),
                }
            })
            .await
            .map_err(|e| e.to_string())?,
        };
        Ok(match answer.as_deref() {
            Some("y" | "Y" | "yes") => Approval::Approve,
            Some("" | "n" | "N" | "no") => Approval::Reject("the user declined".into()),
            Some(reason) => Approval::Reject(reason.to_owned()),
            None => Approval::Reject("no one was there to approve it".into()),
        })
    }
}
