//! The evaluation set of the default local agent ([`crate::recipe`]): tasks written for it
//! (`eval/tasks.json`: arithmetic in words and symbols, questions that need no tool, tasks
//! for the file tools in a temporary workspace), the runner, the judge, and the report.
//!
//! Run it with `cargo run --release -p agentloop-local --example local_eval` (options:
//! `--model NAME_OR_PATH`, `--tasks N`); a test runs the first tasks in CI.

use crate::{recipe, LocalModel};
use agentloop::tool::builtin::{Calculator, ListDir, ReadFile, Shell, Workspace};
use agentloop::Agent;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// The tasks, as shipped in `eval/tasks.json`.
pub const TASKS_JSON: &str = include_str!("../eval/tasks.json");

/// One task.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Task {
    /// A short name.
    pub id: String,
    /// `arithmetic`, `knowledge` or `files`.
    pub category: String,
    /// What the user asks.
    pub prompt: String,
    /// The built-in tools the agent gets (`calculator`, `list_dir`, `read_file`, `shell`).
    pub tools: Vec<String>,
    /// Files of the workspace (name → content), created in a temporary directory.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// What a correct answer contains.
    pub expect: Expect,
}

/// What a correct answer contains.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// A number equal to this one (thousands separators ignored; within 1e-6).
    Number(f64),
    /// One of these texts (case-insensitive).
    AnyText(Vec<String>),
    /// All of these texts (case-insensitive).
    AllText(Vec<String>),
}

impl Expect {
    /// Whether `answer` is correct. A number answer holds the expected number and no other
    /// that `context` (the question and the calls' arguments) does not hold: "The sum of 42
    /// and 25 is 107." does not answer "What is 17 plus 25?".
    pub fn judge(&self, answer: &str, context: &str) -> bool {
        let lower = answer.to_lowercase();
        let same = |a: f64, b: f64| (a - b).abs() < 1e-6;
        match self {
            Expect::Number(expected) => {
                let known: Vec<f64> = numbers(context).map(f64::abs).collect();
                let found: Vec<f64> = numbers(answer).collect();
                found.iter().any(|n| same(*n, *expected))
                    && found
                        .iter()
                        .all(|n| same(*n, *expected) || known.iter().any(|k| same(*k, n.abs())))
            }
            Expect::AnyText(texts) => texts.iter().any(|t| lower.contains(&t.to_lowercase())),
            Expect::AllText(texts) => texts.iter().all(|t| lower.contains(&t.to_lowercase())),
        }
    }
}

/// The numbers in a text (`1,234` is 1234; a sentence's final `.` is not a decimal point).
fn numbers(text: &str) -> impl Iterator<Item = f64> + '_ {
    let cleaned: String = text
        .char_indices()
        .filter(|&(i, c)| {
            // Thousands separators: a comma between digits.
            !(c == ','
                && text[..i].chars().next_back().is_some_and(|p| p.is_ascii_digit())
                && text[i + 1..].chars().next().is_some_and(|n| n.is_ascii_digit()))
        })
        .map(|(_, c)| c)
        .collect();
    let mut found = Vec::new();
    let mut current = String::new();
    for c in cleaned.chars().chain(std::iter::once(' ')) {
        let decimal_point = c == '.' && !current.is_empty() && !current.contains('.');
        if c.is_ascii_digit() || decimal_point || (c == '-' && current.is_empty()) {
            current.push(c);
        } else {
            let number = current.trim_end_matches('.');
            if let Ok(value) = number.parse::<f64>() {
                found.push(value);
            }
            current.clear();
            if c == '-' {
                current.push(c);
            }
        }
    }
    found.into_iter()
}

/// Parses a task list.
pub fn parse(json: &str) -> Result<Vec<Task>, serde_json::Error> {
    serde_json::from_str(json)
}

/// What one task gave.
#[derive(Debug, Clone, Serialize)]
pub struct TaskResult {
    /// The task.
    pub id: String,
    /// Its category.
    pub category: String,
    /// The final answer (or the error).
    pub answer: String,
    /// How the run ended.
    pub stop_reason: String,
    /// Whether the answer is right.
    pub correct: bool,
    /// Whether the answer is empty.
    pub empty: bool,
    /// Tool calls made (the done tool included).
    pub tool_calls: u32,
    /// Model calls made.
    pub model_calls: u32,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// The tool calls, in order: `name(arguments) → result` (the result cut to 80 characters).
    pub calls: Vec<String>,
}

/// Why a task could not run.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The workspace.
    #[error("workspace: {0}")]
    Workspace(String),
    /// A tool name the runner does not know.
    #[error("unknown tool {0:?}")]
    UnknownTool(String),
    /// The agent.
    #[error("agent: {0}")]
    Agent(String),
}

/// Runs one task with the default local agent on `model`.
pub async fn run_task(model: &LocalModel, task: &Task) -> Result<TaskResult, EvalError> {
    let dir = tempfile::tempdir().map_err(|e| EvalError::Workspace(e.to_string()))?;
    for (name, content) in &task.files {
        std::fs::write(dir.path().join(name), content)
            .map_err(|e| EvalError::Workspace(format!("{name}: {e}")))?;
    }
    let workspace = || Workspace::new(dir.path()).map_err(|e| EvalError::Workspace(e.to_string()));
    let mut builder = Agent::builder(model.with_workspace(dir.path())).max_iterations(4);
    for tool in &task.tools {
        builder = match tool.as_str() {
            "calculator" => builder.tool(Calculator),
            "list_dir" => builder.tool(ListDir(workspace()?)),
            "read_file" => builder.tool(ReadFile(workspace()?)),
            "shell" => builder.tool(Shell::new(dir.path())),
            other => return Err(EvalError::UnknownTool(other.to_owned())),
        };
    }
    let names: Vec<&str> = task.tools.iter().map(String::as_str).collect();
    let agent = recipe::configure(builder, &names, None)
        .build()
        .map_err(|e| EvalError::Agent(e.to_string()))?;
    let start = Instant::now();
    let result = agent.run(task.prompt.as_str()).await;
    let seconds = start.elapsed().as_secs_f64();
    Ok(match result {
        Ok(outcome) => TaskResult {
            id: task.id.clone(),
            category: task.category.clone(),
            correct: outcome.is_success()
                && task.expect.judge(&outcome.answer, &context(task, &outcome)),
            empty: outcome.answer.trim().is_empty(),
            stop_reason: format!("{:?}", outcome.stop_reason),
            tool_calls: outcome.metrics.tool_calls,
            model_calls: outcome.metrics.model_calls,
            output_tokens: outcome.usage.output,
            calls: outcome.metrics.audit.iter().map(trace).collect(),
            answer: outcome.answer,
            seconds,
        },
        Err(error) => TaskResult {
            id: task.id.clone(),
            category: task.category.clone(),
            answer: format!("error: {error}"),
            stop_reason: "error".into(),
            correct: false,
            empty: true,
            tool_calls: 0,
            model_calls: 0,
            output_tokens: 0,
            seconds,
            calls: Vec::new(),
        },
    })
}

/// What a number answer may quote besides the result: the question and the calls' arguments
/// (not the done tool's: they are the answer).
fn context(task: &Task, outcome: &agentloop::run::Outcome) -> String {
    let done = match &outcome.stop_reason {
        agentloop::run::StopReason::DoneTool { tool } => Some(tool.as_str()),
        _ => None,
    };
    let calls = outcome
        .metrics
        .audit
        .iter()
        .filter(|entry| Some(entry.tool.as_str()) != done)
        .map(|entry| entry.arguments.to_string());
    std::iter::once(task.prompt.clone()).chain(calls).collect::<Vec<_>>().join("\n")
}

/// One tool call as `name(arguments) → result`, the result cut to 80 characters.
fn trace(entry: &agentloop::run::AuditEntry) -> String {
    let result = entry.result.as_ref().map(|r| r.to_text()).unwrap_or_default();
    let result: String = result.chars().take(80).collect();
    format!("{}({}) → {}", entry.tool, entry.arguments, result)
}

/// The summary table and the misses, in Markdown.
pub fn report(model: &str, results: &[TaskResult]) -> String {
    let mut out = String::new();
    let mut categories: Vec<&str> = results.iter().map(|r| r.category.as_str()).collect();
    categories.dedup();
    categories.sort_unstable();
    categories.dedup();
    out.push_str("| model | subset | correct | empty | tool calls / task | s / task |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    let mut row = |subset: &str, rows: Vec<&TaskResult>| {
        let n = rows.len().max(1) as f64;
        let correct = rows.iter().filter(|r| r.correct).count();
        let empty = rows.iter().filter(|r| r.empty).count();
        let calls: u32 = rows.iter().map(|r| r.tool_calls).sum();
        let seconds: f64 = rows.iter().map(|r| r.seconds).sum();
        out.push_str(&format!(
            "| {model} | {subset} | {correct} / {} ({:.0} %) | {empty} | {:.2} | {:.1} |\n",
            rows.len(),
            100.0 * correct as f64 / n,
            f64::from(calls) / n,
            seconds / n
        ));
    };
    row("all", results.iter().collect());
    for category in &categories {
        row(category, results.iter().filter(|r| r.category == *category).collect());
    }
    let misses: Vec<&TaskResult> = results.iter().filter(|r| !r.correct).collect();
    if !misses.is_empty() {
        out.push_str(&format!(
            "\nMisses ({model}):\n\n| task | tool calls | ended | answer |\n|---|---|---|---|\n"
        ));
        let cell = |text: &str| text.replace('|', "\\|").replace('\n', " ⏎ ").trim().to_owned();
        for miss in misses {
            let calls: Vec<String> = miss.calls.iter().map(|c| format!("`{}`", cell(c))).collect();
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                miss.id,
                calls.join("<br>"),
                miss.stop_reason,
                cell(&miss.answer)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
