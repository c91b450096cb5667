//! Built-in control tools: `task_complete` (ends the run with an answer) and `ask_user` (ends
//! the turn waiting for the user).

use crate::tool::{Control, Tool, ToolContext, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use std::convert::Infallible;

/// Ends the run with a final answer. Register it (or set `require_done_tool`) when the model
/// should say explicitly that it is done.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskComplete;

/// Arguments of [`TaskComplete`].
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskCompleteArgs {
    /// The final answer for the user.
    #[schemars(length(min = 1))]
    pub answer: String,
}

impl Tool for TaskComplete {
    const NAME: &'static str = "task_complete";
    type Args = TaskCompleteArgs;
    type Output = Control;
    type Error = Infallible;

    fn description(&self) -> String {
        "Call this when the task is complete, with the final answer for the user. \
         Nothing after this call is executed."
            .into()
    }

    async fn call(&self, args: TaskCompleteArgs, _ctx: ToolContext) -> Result<Control, Infallible> {
        Ok(Control(ToolOutput::Done(args.answer)))
    }
}

/// Ends the turn with a question for the user; the run finishes waiting for input.
#[derive(Debug, Clone, Copy, Default)]
pub struct AskUser;

/// Arguments of [`AskUser`].
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskUserArgs {
    /// The question to ask.
    pub question: String,
}

impl Tool for AskUser {
    const NAME: &'static str = "ask_user";
    type Args = AskUserArgs;
    type Output = Control;
    type Error = Infallible;

    fn description(&self) -> String {
        "Ask the user a question when you cannot continue without their input. \
         The turn ends until they answer."
            .into()
    }

    async fn call(&self, args: AskUserArgs, _ctx: ToolContext) -> Result<Control, Infallible> {
        Ok(Control(ToolOutput::AskUser(args.question)))
    }
}
