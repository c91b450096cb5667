//! `agentloop a2a`: a remote A2A 1.0 agent from the command line.
//!
//! - `a2a card URL` shows the agent's card (name, description, version, interfaces,
//!   capabilities, skills), or with `--json` the card as JSON.
//! - `a2a send URL TEXT` sends a message and shows the task as it goes: status changes,
//!   tool activity, the answer's text as it streams, then the final state. The exit code
//!   says how it ended: 0 completed, 1 failed / rejected / canceled (or unfinished), 3
//!   input-required (answer with `--task ID`); 2 when the agent could not be reached.
//!
//! Everything the remote agent sends is escaped before it reaches the terminal (control,
//! bidirectional and zero-width characters), in JSON output too.

use crate::config::{Config, RemoteAgentSection};
use crate::safe::{escape, json_safe};
use agentloop::provider::secrets::Secrets;
use agentloop_a2a::a2a::{
    AgentCard, Message, Part, PartContent, Role, SendMessageRequest, SendMessageResponse,
    StreamResponse, Task, TaskState,
};
use agentloop_a2a::{state_name, A2aAgentTool, A2aClient, TaskCollector};
use anyhow::Context;
use futures::StreamExt;
use secrecy::SecretString;
use std::io::Write;
use std::time::Duration;

/// The exit code of a task that waits for the user's input.
pub const INPUT_REQUIRED_CODE: i32 = 3;

/// `agentloop a2a …`.
#[derive(Debug, clap::Subcommand)]
pub enum A2aCommand {
    /// Shows a remote agent's card.
    Card {
        /// The agent's base URL (or its card's URL).
        url: String,
        /// Print the card as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        connection: Connection,
    },
    /// Sends a message to a remote agent and shows its task until it ends or asks for
    /// input. Exit code: 0 completed, 1 failed / rejected / canceled, 3 input-required.
    Send {
        /// The agent's base URL (or its card's URL).
        url: String,
        /// The message.
        text: String,
        /// Continue this task (to answer its question).
        #[arg(long)]
        task: Option<String>,
        /// The conversation (context) the message belongs to.
        #[arg(long)]
        context: Option<String>,
        /// Wait for the answer instead of streaming the task's updates.
        #[arg(long)]
        no_stream: bool,
        /// Print every update (or, with --no-stream, the answer) as a JSON line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        connection: Connection,
    },
}

/// How to reach the agent.
#[derive(Debug, Clone, clap::Args)]
pub struct Connection {
    /// A bearer token for the agent.
    #[arg(long, env = "AGENTLOOP_A2A_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Seconds a request may take (a blocking send waits for the whole task).
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    timeout: u64,
}

/// Runs an `a2a` subcommand; the exit code.
pub async fn run(command: A2aCommand) -> anyhow::Result<i32> {
    match command {
        A2aCommand::Card { url, json, connection } => {
            let client = connect(&url, &connection).await?;
            if json {
                let text = serde_json::to_string_pretty(client.card())
                    .context("writing the card as JSON")?;
                println!("{}", json_safe(&text));
            } else {
                print!("{}", card_text(client.card()));
            }
            Ok(0)
        }
        A2aCommand::Send { url, text, task, context, no_stream, json, connection } => {
            let client = connect(&url, &connection).await?;
            let mut message = Message::new(Role::User, vec![Part::text(text)]);
            message.task_id = task.clone();
            message.context_id = context;
            let request =
                SendMessageRequest { message, configuration: None, metadata: None, tenant: None };
            let mut view = TaskView::new(json, task.is_some(), url);
            if no_stream || client.card().capabilities.streaming != Some(true) {
                let response =
                    client.send_message(&request).await.context("sending the message")?;
                view.response(&response);
            } else {
                stream(&client, &request, &mut view).await?;
            }
            if !view.collector.is_settled() {
                // The stream ended before the task settled: ask once where it stands.
                if let Some(id) = view.collector.task_id().map(str::to_owned) {
                    let task = client.get_task(&id, Some(1)).await.context("reading the task")?;
                    view.final_task(&task);
                }
            }
            Ok(view.finish())
        }
    }
}

async fn connect(url: &str, connection: &Connection) -> anyhow::Result<A2aClient> {
    let mut builder = A2aClient::builder().timeout(Duration::from_secs(connection.timeout.max(1)));
    if let Some(token) = &connection.token {
        builder = builder.bearer_token(SecretString::from(token.clone()));
    }
    builder.resolve(url).await.with_context(|| format!("reading the agent card at {}", escape(url)))
}

/// The tool for a `[[a2a]]` table: the agent's card is fetched now (its name and skills
/// describe the tool). Errors name the file and line of the table, never the token; the
/// token goes into `secrets` (the agent redacts it from every tool result).
pub async fn remote_agent_tool(
    config: &Config,
    remote: &RemoteAgentSection,
    secrets: &mut Secrets,
) -> anyhow::Result<A2aAgentTool> {
    let at = config
        .source
        .as_ref()
        .map_or_else(String::new, |path| format!("{}:{}: ", path.display(), remote.line));
    let url = remote.url.get_ref();
    let mut builder = A2aClient::builder();
    if let Some(secs) = remote.timeout_secs {
        builder = builder.timeout(Duration::from_secs(secs));
    }
    let token = match (&remote.token, &remote.token_env) {
        (Some(token), _) => Some(token.clone()),
        (None, Some(name)) => match std::env::var(name) {
            Ok(token) if !token.trim().is_empty() => Some(token),
            _ => anyhow::bail!("{at}[[a2a]] token_env: the variable {name} is not set"),
        },
        (None, None) => None,
    };
    if let Some(token) = token {
        secrets.add(&token);
        builder = builder.bearer_token(SecretString::from(token));
    }
    let client = builder.resolve(url).await.map_err(|error| {
        anyhow::anyhow!("{at}[[a2a]] the agent at {}: {error}", escape(without_query(url)))
    })?;
    let mut tool = A2aAgentTool::new(client);
    if let Some(name) = &remote.name {
        tool = tool.with_name(name);
    }
    if let Some(description) = &remote.description {
        tool = tool.with_description(description.clone());
    }
    if let Some(secs) = remote.timeout_secs {
        tool = tool.with_timeout(Duration::from_secs(secs));
    }
    Ok(tool)
}

/// A URL without its query (which may carry a key).
fn without_query(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or(url)
}

/// Streams the task's updates into `view`; Ctrl-C cancels the remote task.
async fn stream(
    client: &A2aClient,
    request: &SendMessageRequest,
    view: &mut TaskView,
) -> anyhow::Result<()> {
    let mut events = client.send_streaming_message(request).await.context("sending the message")?;
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(event) => {
                    view.update(&event.context("reading the task's updates")?);
                    if view.collector.is_settled() {
                        return Ok(());
                    }
                }
                None => return Ok(()),
            },
            _ = tokio::signal::ctrl_c() => {
                if let Some(id) = view.collector.task_id().map(str::to_owned) {
                    view.line(format!("interrupted: cancelling task {}", escape(&id)));
                    let cancelled = client.cancel_task(&id).await.context("cancelling the task")?;
                    view.final_task(&cancelled);
                }
                return Ok(());
            }
        }
    }
}

/// Shows a task's updates: status lines, answer text as it arrives, the final state.
struct TaskView {
    json: bool,
    url: String,
    collector: TaskCollector,
    /// Each artifact's text shown so far, by id.
    shown: Vec<(String, String)>,
    at_line_start: bool,
    /// Continuing a task, before its first update.
    continuing: bool,
    /// An agent's message reply (no task).
    reply: bool,
}

impl TaskView {
    fn new(json: bool, continuing: bool, url: String) -> Self {
        let collector =
            if continuing { TaskCollector::continuing() } else { TaskCollector::default() };
        Self {
            json,
            url,
            collector,
            shown: Vec::new(),
            at_line_start: true,
            continuing,
            reply: false,
        }
    }

    fn out(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
        self.at_line_start = text.ends_with('\n');
    }

    fn line(&mut self, text: String) {
        if !self.at_line_start {
            self.out("\n");
        }
        self.out(&format!("{text}\n"));
    }

    fn json_line(&mut self, value: &impl serde::Serialize) {
        match serde_json::to_string(value) {
            Ok(text) => self.line(json_safe(&text)),
            Err(error) => self.line(format!("(an update could not be written as JSON: {error})")),
        }
    }

    /// One streamed update.
    fn update(&mut self, event: &StreamResponse) {
        let first_of_continued = std::mem::take(&mut self.continuing);
        self.collector.apply(event);
        if self.json {
            self.json_line(event);
            return;
        }
        match event {
            StreamResponse::Task(task) => {
                self.line(format!(
                    "task {} (context {})",
                    escape(&task.id),
                    escape(&task.context_id)
                ));
                // Continuing a task, its first snapshot is the state the message answers.
                if !first_of_continued {
                    self.status(&task.status.state, task.status.message.as_ref());
                }
            }
            StreamResponse::StatusUpdate(update) => {
                self.status(&update.status.state, update.status.message.as_ref());
            }
            StreamResponse::ArtifactUpdate(update) => {
                let text = escape(&parts_text(&update.artifact.parts));
                let delta = self.artifact_delta(
                    &update.artifact.artifact_id,
                    text,
                    update.append == Some(true),
                );
                self.out(&delta);
            }
            StreamResponse::Message(message) => self.message(message),
        }
    }

    /// The text to print for an artifact chunk: all of an appended chunk; of a chunk that
    /// replaces the artifact, what it adds to the text shown (a whole answer sent again as
    /// the last chunk adds nothing), or all of it on a new line when it is different.
    fn artifact_delta(&mut self, id: &str, text: String, append: bool) -> String {
        let index = match self.shown.iter().position(|(known, _)| known == id) {
            Some(index) => index,
            None => {
                self.shown.push((id.to_owned(), String::new()));
                self.shown.len() - 1
            }
        };
        let shown = &mut self.shown[index].1;
        if append {
            shown.push_str(&text);
            return text;
        }
        let delta = match text.strip_prefix(shown.as_str()) {
            Some(rest) => rest.to_owned(),
            None if self.at_line_start => text.clone(),
            None => format!("\n{text}"),
        };
        *shown = text;
        delta
    }

    fn status(&mut self, state: &TaskState, message: Option<&Message>) {
        let text = message.map(message_text).unwrap_or_default();
        let text = text.trim();
        if text.is_empty() {
            self.line(format!("[{}]", state_name(state)));
        } else {
            self.line(format!("[{}] {}", state_name(state), escape(text)));
        }
    }

    fn message(&mut self, message: &Message) {
        if message.role == Role::Agent {
            self.reply = true;
            self.line(escape(&message_text(message)));
        }
    }

    /// The answer of a blocking send.
    fn response(&mut self, response: &SendMessageResponse) {
        self.collector.apply_response(response);
        if self.json {
            self.json_line(response);
            return;
        }
        match response {
            SendMessageResponse::Task(task) => self.final_task(task),
            SendMessageResponse::Message(message) => self.message(message),
        }
    }

    /// A whole task at the end: its answer, then its state.
    fn final_task(&mut self, task: &Task) {
        self.collector.apply_task(task);
        if self.json {
            self.json_line(task);
            return;
        }
        self.line(format!("task {} (context {})", escape(&task.id), escape(&task.context_id)));
        for artifact in task.artifacts.iter().flatten() {
            let text = escape(&parts_text(&artifact.parts));
            let delta = self.artifact_delta(&artifact.artifact_id, text, false);
            self.out(&delta);
        }
        self.status(&task.status.state, task.status.message.as_ref());
    }

    /// The exit code; for a task waiting for input, how to answer on stderr.
    fn finish(mut self) -> i32 {
        if !self.at_line_start {
            self.out("\n");
        }
        let task_id = self.collector.task_id().map(escape);
        match self.collector.state() {
            None if self.reply => 0,
            Some(TaskState::Completed) => 0,
            Some(TaskState::InputRequired) => {
                let id = task_id.unwrap_or_default();
                eprintln!(
                    "The agent waits for input on task {id}. Answer with:\n  agentloop a2a send {} \"<answer>\" --task {id}",
                    escape(&self.url)
                );
                INPUT_REQUIRED_CODE
            }
            Some(TaskState::AuthRequired) => {
                eprintln!("The agent needs authentication (auth-required); see --token.");
                1
            }
            Some(state) if state.is_terminal() => 1,
            state => {
                eprintln!(
                    "The task did not finish (last state: {}).",
                    state.map_or("unknown", state_name)
                );
                1
            }
        }
    }
}

/// The card as text (every value escaped).
pub fn card_text(card: &AgentCard) -> String {
    let mut text = format!("name: {}\n", escape(&card.name));
    text.push_str(&format!("description: {}\n", escape(card.description.trim())));
    text.push_str(&format!("version: {}\n", escape(&card.version)));
    text.push_str("interfaces:\n");
    for interface in &card.supported_interfaces {
        let version = if interface.protocol_version.is_empty() {
            String::new()
        } else {
            format!(" {}", escape(&interface.protocol_version))
        };
        text.push_str(&format!(
            "  {}{version}  {}\n",
            escape(&interface.protocol_binding),
            escape(&interface.url)
        ));
    }
    let yes_no = |flag: Option<bool>| if flag == Some(true) { "yes" } else { "no" };
    let capabilities = &card.capabilities;
    text.push_str(&format!(
        "capabilities: streaming {}, push notifications {}, extended card {}\n",
        yes_no(capabilities.streaming),
        yes_no(capabilities.push_notifications),
        yes_no(capabilities.extended_agent_card)
    ));
    if !card.default_input_modes.is_empty() || !card.default_output_modes.is_empty() {
        text.push_str(&format!(
            "modes: in {}; out {}\n",
            escape(&card.default_input_modes.join(", ")),
            escape(&card.default_output_modes.join(", "))
        ));
    }
    if card.security_schemes.as_ref().is_some_and(|schemes| !schemes.is_empty()) {
        let mut names: Vec<String> =
            card.security_schemes.iter().flatten().map(|(name, _)| escape(name)).collect();
        names.sort();
        text.push_str(&format!("security: {}\n", names.join(", ")));
    }
    text.push_str("skills:\n");
    if card.skills.is_empty() {
        text.push_str("  (none)\n");
    }
    for skill in &card.skills {
        text.push_str(&format!(
            "  - {} ({}): {}\n",
            escape(&skill.name),
            escape(&skill.id),
            escape(skill.description.trim())
        ));
        if !skill.tags.is_empty() {
            text.push_str(&format!("    tags: {}\n", escape(&skill.tags.join(", "))));
        }
        for example in skill.examples.iter().flatten() {
            text.push_str(&format!("    e.g. {}\n", escape(example)));
        }
    }
    text
}

/// Parts as text: text as is, data as JSON, files by name (never their bytes).
fn parts_text(parts: &[Part]) -> String {
    let mut text = String::new();
    for part in parts {
        match &part.content {
            PartContent::Text(t) => text.push_str(t),
            PartContent::Data(value) => {
                if !text.is_empty() && !text.ends_with(char::is_whitespace) {
                    text.push(' ');
                }
                text.push_str(&value.to_string());
            }
            PartContent::Url(url) => text.push_str(&format!("[file: {url}]")),
            PartContent::Raw(bytes) => {
                let name = part.filename.as_deref().unwrap_or("(unnamed)");
                text.push_str(&format!("[file {name}, {} bytes]", bytes.len()));
            }
        }
    }
    text
}

fn message_text(message: &Message) -> String {
    parts_text(&message.parts)
}

#[cfg(test)]
mod tests;
