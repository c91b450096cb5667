//! The default agent around a small local model: its instructions (with worked examples for
//! the tools it has) and its per-step tool choice. The `agentloop` CLI uses it on the
//! embedded model, and the evaluation set (`eval/`, [`crate::eval`]) measures it, so what is
//! measured is what a user runs.
//!
//! The levers, each chosen by measurement (docs/PERFORMANCE.md, "Local model: evaluation"):
//! - **worked examples** in the system prompt, one or two per tool present, in the model's
//!   own tool-call format, and examples of questions answered without a tool;
//! - **a tool call on the first step** ([`step_tool_choice`]), forced into shape by the
//!   grammar; `task_complete` is one of the tools, so a question that needs no tool is answered
//!   through it (the small models rarely choose a tool unasked, and answer arithmetic wrongly
//!   from memory);
//! - **the answer after a tool result** goes through `task_complete` (a named tool choice),
//!   whose answer the local model constrains to quote a short result verbatim.

use agentloop::agent::AgentBuilder;
use agentloop::message::{Message, Part, Role, ToolCall, ToolResult};
use agentloop::provider::{StepToolChoice, ToolChoice};
use agentloop::tool::builtin::TaskComplete;
use agentloop::tool::ToolSpec;

/// The sampling temperature: greedy (the small models pick worse tool arguments when they
/// sample).
pub const TEMPERATURE: f32 = 0.0;

/// The per-step tool choice for an agent with these tools (their names): a call on the first
/// step of a turn — the calculator when the question has a digit in it (where offered), and
/// when the calculator is the only other tool, `task_complete` for a question without one (a
/// question without a number is not arithmetic for the calculator: forced to pick a tool,
/// SmolLM2-135M sent "What color is the sky?" to the calculator) — and after a tool result
/// the answer through `task_complete` (the local model constrains it to quote a short
/// result). One tool call per turn: the small models do not chain calls usefully; asked for
/// free text after a result, SmolLM2-135M rambled about operators, while through
/// `task_complete` it answers tersely.
pub fn step_tool_choice(tools: &[&str]) -> StepToolChoice {
    let others: Vec<&&str> = tools.iter().filter(|name| **name != "task_complete").collect();
    let first = if others.as_slice() == [&"calculator"] {
        ToolChoice::Named("task_complete".into())
    } else {
        ToolChoice::Required
    };
    StepToolChoice {
        first,
        then: ToolChoice::Named("task_complete".into()),
        first_with_digits: Some(ToolChoice::Named("calculator".into())),
    }
}

/// Worked examples per tool: (tool, user, arguments, result, answer).
const EXAMPLES: &[(&str, &str, &str, &str, &str)] = &[
    ("calculator", "What is 6 times 7?", r#"{"expression": "6 * 7"}"#, "42", "6 times 7 is 42."),
    (
        "calculator",
        "Tom has 4 bags with 5 marbles in each. He loses 3 marbles. How many are left?",
        r#"{"expression": "4 * 5 - 3"}"#,
        "17",
        "17 marbles are left.",
    ),
    (
        "calculator",
        "What is 20% of 150?",
        r#"{"expression": "20 / 100 * 150"}"#,
        "30",
        "20% of 150 is 30.",
    ),
    (
        "calculator",
        "What is the square root of 81?",
        r#"{"expression": "sqrt(81)"}"#,
        "9",
        "The square root of 81 is 9.",
    ),
    (
        "calculator",
        "What is 3 to the power of 4?",
        r#"{"expression": "3 ^ 4"}"#,
        "81",
        "3 to the power of 4 is 81.",
    ),
    (
        "list_dir",
        "Which files are in the folder?",
        r#"{}"#,
        "a.txt\nb.csv",
        "The files are a.txt and b.csv.",
    ),
    (
        "read_file",
        "What is the first line of a.txt?",
        r#"{"path": "a.txt"}"#,
        "hello world\nsecond line",
        "The first line of a.txt is: hello world",
    ),
    (
        "shell",
        "How many words are in b.csv?",
        r#"{"command": "wc -w b.csv"}"#,
        // In the shell tool's own format (it was a JSON object, which the tool never returns).
        "exit code: 0\nstdout:\n4 b.csv\n\nstderr:\n",
        "b.csv has 4 words.",
    ),
    (
        "task_complete",
        "What is the capital of Italy?",
        r#"{"answer": "The capital of Italy is Rome."}"#,
        "",
        "",
    ),
    (
        "task_complete",
        "Who wrote Romeo and Juliet?",
        r#"{"answer": "William Shakespeare wrote Romeo and Juliet."}"#,
        "",
        "",
    ),
];

/// Worked examples for the tools of a request, as conversation turns that come before the
/// real conversation (see [`crate::LocalModelBuilder::examples`]): for each example whose tool
/// is offered, the question, the call, the result, and the answer through `task_complete`
/// when that is offered too.
pub fn examples(tools: &[ToolSpec]) -> Vec<Message> {
    let offered = |name: &str| tools.iter().any(|tool| tool.name == name);
    let mut messages = Vec::new();
    let call = |id: String, name: &str, arguments: &str| Message {
        role: Role::Assistant,
        content: vec![Part::ToolCall(ToolCall {
            id,
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        })],
    };
    for (index, (tool, user, arguments, result, answer)) in EXAMPLES.iter().enumerate() {
        if !offered(tool) {
            continue;
        }
        messages.push(Message::user(*user));
        messages.push(call(format!("example_{index}"), tool, arguments));
        if answer.is_empty() {
            continue;
        }
        messages.push(Message::tool_results([ToolResult::ok(format!("example_{index}"), *result)]));
        if offered("task_complete") {
            let answer = serde_json::json!({ "answer": answer }).to_string();
            messages.push(call(format!("example_{index}_done"), "task_complete", &answer));
        } else {
            messages.push(Message::assistant(*answer));
        }
    }
    messages
}

/// The instructions for an agent with these tools: what to do, and for the calculator how
/// arithmetic words become expressions. (The worked examples are conversation turns:
/// [`examples`].)
pub fn instructions(tools: &[&str]) -> String {
    let mut text = String::from(
        "You are a helpful assistant. Always answer by calling one tool. Use calculator for any \
         arithmetic, the file tools for questions about files, and task_complete with the \
         answer when no other tool is needed. When a tool result arrives, answer the user's \
         question in one short sentence that states the result.\n",
    );
    if tools.contains(&"calculator") {
        text.push_str(
            "\nWrite calculator expressions with numbers and + - * / ^ ( ): \
             'A times B' is A * B, 'A divided by B' is A / B, 'A percent of B' and 'A% of B' \
             are A / 100 * B, \
             'A squared' is A ^ 2, 'A to the power of B' is A ^ B, 'the square root of A' is \
             sqrt(A), 'subtract A from B' is B - A, 'A less B' is A - B.\n",
        );
    }
    text
}

/// The settings of a local model for the default agent: [`examples`] before the conversation.
pub fn model(path: impl AsRef<std::path::Path>) -> crate::LocalModelBuilder {
    crate::LocalModel::builder(path).examples(examples)
}

/// Configures `builder` for a small local model with these tools (the names of the tools
/// already registered): the done tool `task_complete`, the per-step tool choice, and, unless
/// `instructions` are given, [`instructions`].
pub fn configure(
    builder: AgentBuilder,
    tools: &[&str],
    instructions: Option<String>,
) -> AgentBuilder {
    let mut names: Vec<&str> = tools.to_vec();
    names.push("task_complete");
    let builder = builder
        .tool(TaskComplete)
        .step_tool_choice(step_tool_choice(&names))
        .temperature(TEMPERATURE);
    builder.instructions(instructions.unwrap_or_else(|| self::instructions(&names)))
}

#[cfg(test)]
mod tests;
