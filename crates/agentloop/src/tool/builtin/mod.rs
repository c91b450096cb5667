//! Built-in tools: the control tools (`task_complete`, `ask_user`), a calculator, file tools
//! confined to a workspace directory, `http_get` limited to allowed hosts, and `shell`.

mod calculator;
mod control;
mod fs;
mod http;
mod shell;

pub use calculator::{evaluate, number, Calculator, CalculatorArgs};
pub use control::{AskUser, AskUserArgs, TaskComplete, TaskCompleteArgs};
pub use fs::{ListDir, ReadFile, Workspace, WorkspaceError, WriteFile};
pub use http::HttpGet;
pub use shell::Shell;

#[cfg(test)]
mod tests;
