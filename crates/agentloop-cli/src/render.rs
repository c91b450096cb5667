//! Showing a run on the terminal: text as it arrives, each tool call and result on its own
//! line (colored on a terminal, plain otherwise), a spinner while the model thinks, and a
//! summary line; or, with `--json`, every event as a JSON line.

use crate::safe::{escape, json_safe};
use agentloop::message::{FinishReason, ToolCall};
use agentloop::run::LimitKind;
use agentloop::run::CONTEXT_LIMIT_TEXT;
use agentloop::{Event, Outcome, StopReason};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How the run ended, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// An answer (or a question for the user, or a limit's wind-down answer).
    Answered,
    /// Waiting for approvals.
    Suspended,
    /// Finished without a complete answer: empty, cut off by a token limit, filtered, or a
    /// limit reached before the wind-down wrote one ([`Outcome::has_answer`] is false).
    NoAnswer,
    /// Failed.
    Failed,
    /// Cancelled.
    Cancelled,
    /// The stream ended without a terminal event.
    Unknown,
}

/// The exit code of a run that ended without a complete answer.
pub const NO_ANSWER_CODE: i32 = 3;

impl Ending {
    /// The process exit code (the table in docs/CLI.md).
    pub fn code(self) -> i32 {
        match self {
            Self::Answered | Self::Suspended => 0,
            Self::Failed | Self::Unknown => 1,
            Self::NoAnswer => NO_ANSWER_CODE,
            Self::Cancelled => 130,
        }
    }
}

/// What the renderer saw of the last model response (to explain an ending without an answer).
#[derive(Debug, Clone, Default)]
struct LastResponse {
    finish: Option<FinishReason>,
    output_tokens: u64,
    had_calls: bool,
    /// Why the last model call failed, when it did (cleared by a response).
    model_error: Option<String>,
}

/// Renders events.
pub struct Renderer {
    json: bool,
    color: bool,
    spinner: Option<ProgressBar>,
    started: Instant,
    at_line_start: bool,
    streamed_text: bool,
    /// The text streamed by the current model call.
    streamed: String,
    tool_calls: u32,
    last_response: LastResponse,
    /// The run's id (from `run_started`).
    run_id: Option<String>,
}

const DIM: &str = "\x1b[2m";
const CYAN: &str = "\x1b[36m";
const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const RESET: &str = "\x1b[0m";

/// A single line of a value, cut to `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.chars().map(|c| if c == '\n' { ' ' } else { c }).collect();
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}

impl Renderer {
    /// A renderer for this terminal (or JSON lines).
    pub fn new(json: bool) -> Self {
        let tty = std::io::stdout().is_terminal();
        let color = tty && std::env::var_os("NO_COLOR").is_none();
        Self {
            json,
            color,
            spinner: None,
            started: Instant::now(),
            at_line_start: true,
            streamed_text: false,
            streamed: String::new(),
            tool_calls: 0,
            last_response: LastResponse::default(),
            run_id: None,
        }
    }

    fn paint(&self, color: &str, text: &str) -> String {
        if self.color {
            format!("{color}{text}{RESET}")
        } else {
            text.to_owned()
        }
    }

    fn stop_spinner(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
    }

    fn line(&mut self, text: String) {
        self.stop_spinner();
        let mut out = std::io::stdout().lock();
        if !self.at_line_start {
            let _ = writeln!(out);
        }
        let _ = writeln!(out, "{text}");
        self.at_line_start = true;
    }

    /// Shows one event; returns the ending once the run is over. A run that ends without
    /// an answer gets a sentence on stderr saying why (in JSON mode too: stdout keeps only
    /// the events).
    pub fn show(&mut self, event: &Event) -> Option<Ending> {
        if let Event::ModelResponded { message, finish_reason, usage, .. } = event {
            self.last_response = LastResponse {
                finish: Some(finish_reason.clone()),
                output_tokens: usage.output,
                had_calls: message.has_tool_calls(),
                model_error: None,
            };
        }
        if let Event::ModelFailed { error, .. } = event {
            self.last_response.model_error = Some(error.to_string());
        }
        if let Event::RunStarted { run_id, .. } = event {
            self.run_id = Some(run_id.clone());
        }
        let ending = ending_of(event);
        if self.json {
            if let Ok(line) = serde_json::to_string(event) {
                println!("{}", json_safe(&line));
            }
        } else {
            self.show_human(event);
        }
        if ending == Some(Ending::NoAnswer) {
            if let Some(outcome) = event.outcome() {
                let why = self.paint_err(YELLOW, &no_answer_message(outcome, &self.last_response));
                eprintln!("{why}");
            }
        }
        ending
    }

    /// Colors for stderr (only when stderr is a terminal).
    fn paint_err(&self, color: &str, text: &str) -> String {
        if self.color && std::io::stderr().is_terminal() {
            format!("{color}{text}{RESET}")
        } else {
            text.to_owned()
        }
    }

    fn show_human(&mut self, event: &Event) {
        match event {
            Event::ModelRequested { .. } => {
                self.streamed_text = false;
                self.streamed.clear();
                if self.color {
                    let spinner = ProgressBar::new_spinner();
                    spinner.set_style(
                        ProgressStyle::with_template("{spinner} {msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    spinner.set_message("thinking…");
                    spinner.enable_steady_tick(Duration::from_millis(100));
                    self.spinner = Some(spinner);
                }
            }
            Event::TextDelta { delta } => {
                self.stop_spinner();
                self.streamed_text = true;
                self.streamed.push_str(delta);
                let mut out = std::io::stdout().lock();
                let _ = write!(out, "{}", escape(delta));
                let _ = out.flush();
                self.at_line_start = delta.ends_with('\n');
            }
            Event::ModelResponded { .. } | Event::ModelFailed { .. } => self.stop_spinner(),
            Event::ToolStarted { call, arguments } => {
                self.tool_calls += 1;
                let text = format!(
                    "→ {}({})",
                    escape(&call.name),
                    one_line(&escape(&arguments.to_string()), 200)
                );
                self.line(self.paint(CYAN, &text));
            }
            Event::ToolCompleted { name, result, duration_ms, .. } => {
                let text = format!(
                    "← {}: {} ({duration_ms} ms)",
                    escape(name),
                    one_line(&escape(&result.content.to_text()), 200)
                );
                self.line(self.paint(GREEN, &text));
            }
            Event::ToolFailed { name, error, .. } => {
                let text =
                    format!("✗ {}: {}", escape(name), one_line(&escape(&error.to_string()), 200));
                self.line(self.paint(RED, &text));
            }
            Event::ToolTimedOut { name, timeout_ms, .. } => {
                let text = format!("✗ {}: timed out after {timeout_ms} ms", escape(name));
                self.line(self.paint(RED, &text));
            }
            Event::ModelRetrying { attempt, delay_ms, error } => {
                let text = format!(
                    "↻ model call failed ({}); retry {attempt} in {delay_ms} ms",
                    escape(&error.to_string())
                );
                self.line(self.paint(YELLOW, &text));
            }
            Event::LimitReached { limit } => {
                self.line(self.paint(YELLOW, &format!("! {limit} reached")))
            }
            Event::StallDetected { tool, count, .. } => {
                self.line(self.paint(
                    YELLOW,
                    &format!("! {} called {count} times with the same arguments", escape(tool)),
                ));
            }
            Event::CompactionCompleted { tokens_before, tokens_after, .. } => {
                self.line(self.paint(
                    YELLOW,
                    &format!("! context compacted: {tokens_before} → {tokens_after} tokens"),
                ));
            }
            Event::HookFailed { hook, point, error, .. } => {
                let text = format!("! hook {hook} ({point}) failed: {}", escape(error));
                self.line(self.paint(YELLOW, &text));
            }
            Event::RunFinished { outcome } | Event::RunSuspended { outcome } => {
                self.finish(outcome)
            }
            Event::RunFailed { error, outcome } => {
                self.finish(outcome);
                eprintln!("{}", self.paint(RED, &format!("error: {}", escape(error))));
            }
            Event::RunCancelled { reason, outcome } => {
                self.finish(outcome);
                eprintln!("{}", self.paint(YELLOW, &format!("cancelled: {}", escape(reason))));
            }
            _ => {}
        }
    }

    fn finish(&mut self, outcome: &Outcome) {
        self.stop_spinner();
        // The answer streamed as text unless a tool or a limit wrote it (a cut-off answer is
        // the streamed text too).
        let streamed = self.streamed_text
            && (matches!(outcome.stop_reason, StopReason::Completed)
                || self.streamed.trim() == outcome.answer.trim());
        // A limit's canned fallback is not an answer: it is not shown as one (the sentence
        // on stderr says why there is none).
        let fallback =
            matches!(outcome.stop_reason, StopReason::LimitReached { .. }) && !outcome.has_answer();
        if !streamed && !fallback && !outcome.answer.is_empty() {
            self.line(escape(&outcome.answer));
        }
        if let StopReason::AwaitingApproval { calls } = &outcome.stop_reason {
            let names: Vec<String> = calls.iter().map(|c| escape(&c.name)).collect();
            self.line(
                self.paint(YELLOW, &format!("waiting for approval of: {}", names.join(", "))),
            );
        }
        if let StopReason::NeedsAttention { calls, reason } = &outcome.stop_reason {
            let run_id = self.run_id.clone().unwrap_or_else(|| "RUN".into());
            for line in attention_lines(&run_id, calls, reason) {
                self.line(self.paint(YELLOW, &escape(&line)));
            }
        }
        let usage = outcome.usage;
        let mut summary = format!(
            "[{} · {} iteration{} · {} tool call{} · {} tokens ({} in / {} out)",
            stop_name(&outcome.stop_reason),
            outcome.iterations,
            if outcome.iterations == 1 { "" } else { "s" },
            self.tool_calls,
            if self.tool_calls == 1 { "" } else { "s" },
            usage.total(),
            usage.input,
            usage.output,
        );
        if outcome.metrics.cost_usd > 0.0 {
            summary.push_str(&format!(" · ${:.4}", outcome.metrics.cost_usd));
        }
        summary.push_str(&format!(" · {:.1} s]", self.started.elapsed().as_secs_f64()));
        self.line(self.paint(DIM, &summary));
    }
}

/// What a run in `needs_attention` waits for — the calls a crash left in flight, whose tools
/// are not safe to run twice — and the commands that resolve them (not escaped).
pub fn attention_lines(run_id: &str, calls: &[ToolCall], reason: &str) -> Vec<String> {
    let waiting: Vec<String> = calls.iter().map(|c| format!("{} ({})", c.id, c.name)).collect();
    let (s, verb, call) = match calls {
        [one] => ("", "waits", one.id.as_str()),
        _ => ("s", "wait", "CALL"),
    };
    vec![
        format!("needs attention: call{s} {} {verb} for an operator: {reason}", waiting.join(", ")),
        format!(
            "resolve each call: `agentloop runs retry-call {run_id} {call}` runs it again, \
             `agentloop runs set-result {run_id} {call} RESULT` gives its result, `agentloop \
             runs fail {run_id} {call} --reason TEXT` fails it; then `agentloop runs resume \
             {run_id}` continues the run (with --queue, a worker does)"
        ),
    ]
}

fn stop_name(reason: &StopReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(|k| k.replace('_', " ")))
        .unwrap_or_else(|| "finished".into())
}

/// The sentence that says why a run ended without a (complete) answer.
fn no_answer_message(outcome: &Outcome, last: &LastResponse) -> String {
    let partial = !outcome.answer.trim().is_empty();
    let cut_by_length = last.finish == Some(FinishReason::Length);
    match &outcome.stop_reason {
        StopReason::OutputLimit { max_tokens } if last.had_calls && !partial => format!(
            "no answer: the model stopped at its {max_tokens}-token limit in the middle of a \
             tool call, which was not run; try --max-tokens or a larger model"
        ),
        StopReason::OutputLimit { max_tokens } if partial => format!(
            "incomplete answer: the model stopped at its {max_tokens}-token limit before it \
             finished; try --max-tokens or a larger model"
        ),
        StopReason::OutputLimit { max_tokens } => format!(
            "no answer: the model stopped at its {max_tokens}-token limit without an answer; \
             try --max-tokens or a larger model"
        ),
        StopReason::ContextLimit if outcome.answer.starts_with(CONTEXT_LIMIT_TEXT) => {
            "no answer: the conversation no longer fits the model's context window and \
             compaction could not make room; start a new conversation or use a model with a \
             larger context"
                .to_owned()
        }
        StopReason::ContextLimit if cut_by_length => {
            let what = if partial { "incomplete answer" } else { "no answer" };
            let before = if partial { "before it finished" } else { "without an answer" };
            format!(
                "{what}: the model stopped after {} output tokens {before} (finish reason \
                 `length`: it reached its output-token limit or filled its context window, and \
                 compaction could not help); try --max-tokens or a larger model",
                last.output_tokens
            )
        }
        StopReason::ContextLimit => "no answer: the conversation no longer fits the model's \
             context window; start a new conversation or use a model with a larger context"
            .to_owned(),
        StopReason::ContentFiltered if partial => "incomplete answer: the provider filtered the \
             model's output before it finished"
            .to_owned(),
        StopReason::ContentFiltered => {
            "no answer: the provider filtered the model's output".to_owned()
        }
        StopReason::LimitReached { limit: LimitKind::ConsecutiveModelErrors } => format!(
            "no answer: the model could not be reached or kept failing ({}); the run stopped \
             after {} failed model calls, each retried",
            escape(last.model_error.as_deref().unwrap_or("no error was reported")),
            outcome.metrics.model_errors.max(1)
        ),
        StopReason::LimitReached { limit } => {
            format!("no answer: the run reached its {limit} before the model wrote an answer")
        }
        StopReason::DoneTool { tool } => {
            format!("no answer: the {tool} tool ended the run with an empty answer")
        }
        StopReason::Completed => "no answer: the model ended its turn without writing an \
             answer; try again, rephrase, or use a larger model"
            .to_owned(),
        other => format!("no answer: the run ended ({}) without an answer", stop_name(other)),
    }
}

fn ending_of(event: &Event) -> Option<Ending> {
    match event {
        Event::RunFinished { outcome } => Some(
            if outcome.has_answer()
                || matches!(outcome.stop_reason, StopReason::AwaitingInput { .. })
            {
                Ending::Answered
            } else {
                Ending::NoAnswer
            },
        ),
        Event::RunSuspended { .. } => Some(Ending::Suspended),
        Event::RunFailed { .. } => Some(Ending::Failed),
        Event::RunCancelled { .. } => Some(Ending::Cancelled),
        _ => None,
    }
}

/// Shows a run's events until the stream ends and returns how it ended. The first Ctrl-C
/// calls `interrupt` (which should cancel the run: its ending is still shown).
pub async fn show_events<F: FnOnce()>(
    mut events: agentloop::EventStream,
    json: bool,
    mut interrupt: Option<F>,
) -> Ending {
    use futures::StreamExt;
    let mut renderer = Renderer::new(json);
    let mut ending = Ending::Unknown;
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(event) => {
                    if let Some(end) = renderer.show(&event) {
                        ending = end;
                    }
                }
                None => break,
            },
            _ = tokio::signal::ctrl_c(), if interrupt.is_some() => {
                if let Some(interrupt) = interrupt.take() {
                    interrupt();
                }
            }
        }
    }
    ending
}
