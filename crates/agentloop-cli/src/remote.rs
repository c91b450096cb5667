//! `agentloop runs fork`: a new run from a run's journal up to an entry, with an edit.
//! `agentloop runs cancel | pause | unpause | approve | reject | answer | retry-call |
//! set-result | fail`: requests for a run, recorded in the store through the run service, for
//! the run's executor in whatever process it runs (a cancel or a pause), or for whoever
//! continues the run (a decision, an answer): the next `runs resume` — or, with `--queue`, a
//! worker, which the request's job wakes.

use crate::config::StoreSection;
use crate::runs::cell;
use agentloop::event::ForkEdit;
use agentloop::run::Decision;
use agentloop::service::{RunService, ServiceError};
use agentloop::store::RunStore;
use clap::{Args, Subcommand};
use std::sync::Arc;

/// `--queue`: the run is continued by the workers of this queue.
#[derive(Debug, Args)]
pub struct QueueArg {
    /// The worker queue (a Redis URL): a worker continues the run once the request is
    /// recorded (instead of `agentloop runs resume`).
    #[arg(long = "queue", env = "AGENTLOOP_QUEUE", hide_env_values = true, value_name = "URL")]
    pub url: Option<String>,
}

/// The requests of `agentloop runs`.
#[derive(Debug, Subcommand)]
pub enum RequestCommand {
    /// Asks the run's executor, in whatever process, to cancel the run (within a second).
    Cancel {
        /// The run id.
        run_id: String,
        /// Why (journaled with the run's end).
        #[arg(long, default_value = "cancelled from the command line")]
        reason: String,
        #[command(flatten)]
        queue: QueueArg,
    },
    /// Asks the run's executor to pause the run at its next safe point.
    Pause {
        /// The run id.
        run_id: String,
        /// Why (journaled).
        #[arg(long, default_value = "paused from the command line")]
        reason: String,
    },
    /// Lets a run paused with `runs pause` go on.
    Unpause {
        /// The run id.
        run_id: String,
    },
    /// Approves a call the run deferred for approval; `runs resume` (or, with `--queue`, a
    /// worker) then continues the run.
    Approve {
        /// The run id.
        run_id: String,
        /// The call id (`runs show` lists the calls that wait).
        call_id: String,
        #[command(flatten)]
        queue: QueueArg,
    },
    /// Rejects a call the run deferred for approval: the model sees the reason as its result
    /// when `runs resume` (or, with `--queue`, a worker) continues the run.
    Reject {
        /// The run id.
        run_id: String,
        /// The call id.
        call_id: String,
        /// Why.
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        queue: QueueArg,
    },
    /// Answers the question the run asked (an ask-user tool); `runs resume` (or, with
    /// `--queue`, a worker) then goes on.
    Answer {
        /// The run id.
        run_id: String,
        /// The answer.
        text: String,
        #[command(flatten)]
        queue: QueueArg,
    },
    /// Runs again a call that waits for an operator (state `needs_attention`: a crash left it
    /// in flight and its tool is not safe to run twice), with the same idempotency key.
    RetryCall {
        /// The run id.
        run_id: String,
        /// The call id (`runs show` lists the calls that wait).
        call_id: String,
        #[command(flatten)]
        queue: QueueArg,
    },
    /// Supplies the result of a call that waits for a decision (what the call left in flight
    /// did, as an operator found out): the model sees it as the call's result.
    SetResult {
        /// The run id.
        run_id: String,
        /// The call id.
        call_id: String,
        /// The result: JSON if it parses as JSON, else the text itself.
        result: String,
        #[command(flatten)]
        queue: QueueArg,
    },
    /// Forks a run at an entry of its journal (`runs show` numbers them) into a new run that
    /// goes on from there — with a call's result replaced before the model sees it, with a
    /// user message, or with the model's final answer replaced — and prints the new run's id; `runs resume NEW` (or, with `--queue`, a
    /// worker) continues it. The run itself is not changed.
    Fork {
        /// The run id.
        run_id: String,
        /// The last entry the fork keeps.
        #[arg(long, value_name = "SEQ")]
        at: u64,
        /// The result the model sees for this call instead (`CALL=RESULT`; the result is JSON
        /// if it parses as JSON, else the text itself).
        #[arg(long, value_name = "CALL=RESULT", conflicts_with_all = ["message", "answer"])]
        tool_result: Option<String>,
        /// A user message the fork goes on with (after a model's answer or the run's end).
        #[arg(long, value_name = "TEXT", conflicts_with = "answer")]
        message: Option<String>,
        /// The answer the fork ends with instead of the model's (at or after the run's end,
        /// when it finished with the model's answer).
        #[arg(long, value_name = "TEXT")]
        answer: Option<String>,
        #[command(flatten)]
        queue: QueueArg,
    },
    /// Fails a call that waits for a decision: the model sees the reason as its error result.
    Fail {
        /// The run id.
        run_id: String,
        /// The call id.
        call_id: String,
        /// Why.
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        queue: QueueArg,
    },
}

/// What is requested of the run.
enum Request {
    Cancel(String),
    Pause(String),
    Unpause,
    Approve(String),
    Reject { call_id: String, reason: String },
    Answer(String),
    RetryCall(String),
    SetResult { call_id: String, result: serde_json::Value },
    Fail { call_id: String, reason: String },
}

/// A `set-result` argument as a JSON value: JSON if it parses, else a JSON string.
fn result_value(text: String) -> serde_json::Value {
    serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
}

/// Records the request of `command` and says what happens next.
pub async fn run(
    command: RequestCommand,
    store: Arc<dyn RunStore>,
    section: &StoreSection,
) -> anyhow::Result<i32> {
    let none = QueueArg { url: None };
    let (run_id, request, queue) = match command {
        RequestCommand::Fork { run_id, at, tool_result, message, answer, queue } => {
            let args = ForkArgs { run_id, at, tool_result, message, answer, queue };
            return fork(args, store, section).await;
        }
        RequestCommand::Cancel { run_id, reason, queue } => {
            (run_id, Request::Cancel(reason), queue)
        }
        RequestCommand::Pause { run_id, reason } => (run_id, Request::Pause(reason), none),
        RequestCommand::Unpause { run_id } => (run_id, Request::Unpause, none),
        RequestCommand::Approve { run_id, call_id, queue } => {
            (run_id, Request::Approve(call_id), queue)
        }
        RequestCommand::Reject { run_id, call_id, reason, queue } => {
            (run_id, Request::Reject { call_id, reason }, queue)
        }
        RequestCommand::Answer { run_id, text, queue } => (run_id, Request::Answer(text), queue),
        RequestCommand::RetryCall { run_id, call_id, queue } => {
            (run_id, Request::RetryCall(call_id), queue)
        }
        RequestCommand::SetResult { run_id, call_id, result, queue } => {
            (run_id, Request::SetResult { call_id, result: result_value(result) }, queue)
        }
        RequestCommand::Fail { run_id, call_id, reason, queue } => {
            (run_id, Request::Fail { call_id, reason }, queue)
        }
    };
    if store.next_seq(&run_id).await? == 0 {
        anyhow::bail!("no run '{}' in the store", cell(&run_id));
    }
    let service = match &queue.url {
        Some(url) => crate::workers::connect(url, section, None).await?.service(store),
        None => RunService::new(store),
    };
    let next = request_one(&service, &run_id, request, queue.url.is_some()).await?;
    println!("recorded for {}: {next}", cell(&run_id));
    Ok(0)
}

/// What `runs fork` was asked for.
struct ForkArgs {
    run_id: String,
    at: u64,
    tool_result: Option<String>,
    message: Option<String>,
    answer: Option<String>,
    queue: QueueArg,
}

/// `runs fork`: forks the run and prints the fork's id (and, with `--queue`, queues it).
async fn fork(
    args: ForkArgs,
    store: Arc<dyn RunStore>,
    section: &StoreSection,
) -> anyhow::Result<i32> {
    let edit = match (args.tool_result, args.message, args.answer) {
        (Some(pair), _, _) => {
            let Some((call_id, result)) = pair.split_once('=') else {
                anyhow::bail!("--tool-result: expected CALL=RESULT, e.g. call_1=42");
            };
            let result = result_value(result.to_owned());
            Some(ForkEdit::ToolResult { call_id: call_id.trim().to_owned(), result })
        }
        (None, Some(text), _) => Some(ForkEdit::UserMessage { text }),
        (None, None, Some(text)) => Some(ForkEdit::ModelAnswer { text }),
        (None, None, None) => None,
    };
    let service = RunService::new(store.clone());
    let fork_id = service.fork(&args.run_id, args.at, edit).await?;
    match &args.queue.url {
        Some(url) => {
            let queue = crate::workers::connect(url, section, None).await?;
            queue.continue_run(store.as_ref(), &fork_id).await?;
            eprintln!("a worker continues the fork");
        }
        None => eprintln!("`agentloop runs resume {}` continues it", cell(&fork_id)),
    }
    println!("{}", cell(&fork_id));
    Ok(0)
}

/// Records `request`; what happens next (`queued`: a worker continues the run).
async fn request_one(
    service: &RunService,
    run_id: &str,
    request: Request,
    queued: bool,
) -> anyhow::Result<&'static str> {
    let resume = |queued_text: &'static str, resume_text: &'static str| {
        if queued {
            queued_text
        } else {
            resume_text
        }
    };
    Ok(match request {
        Request::Cancel(reason) => {
            service.cancel(run_id, reason).await?;
            resume(
                "its executor cancels it within a second; a run nobody executes now is \
                 cancelled by a worker",
                "its executor cancels it within a second; a run nobody executes now is \
                 cancelled by the next `agentloop runs resume`",
            )
        }
        Request::Pause(reason) => {
            service.pause(run_id, reason).await?;
            "its executor pauses at the next safe point"
        }
        Request::Unpause => {
            service.resume(run_id).await?;
            "its executor goes on"
        }
        Request::Approve(call_id) => {
            service.decide_by(run_id, &call_id, Decision::Approve, operator()).await?;
            resume(
                "a worker runs the call and continues the run",
                "`agentloop runs resume` runs the call and continues the run",
            )
        }
        Request::Reject { call_id, reason } => {
            service.decide_by(run_id, &call_id, Decision::Reject { reason }, operator()).await?;
            resume(
                "a worker continues the run with the rejection as the call's result",
                "`agentloop runs resume` continues the run with the rejection as the call's \
                 result",
            )
        }
        Request::Answer(text) => {
            service.send_input(run_id, text).await?;
            resume(
                "a worker continues the run with the answer",
                "`agentloop runs resume` continues the run with the answer",
            )
        }
        Request::RetryCall(call_id) => {
            let decided = service.decide_by(run_id, &call_id, Decision::Approve, operator()).await;
            waiting(decided, run_id, &call_id)?;
            resume(
                "a worker runs the call again and continues the run",
                "`agentloop runs resume` runs the call again and continues the run",
            )
        }
        Request::SetResult { call_id, result } => {
            let decision = Decision::SetResult { result };
            waiting(
                service.decide_by(run_id, &call_id, decision, operator()).await,
                run_id,
                &call_id,
            )?;
            resume(
                "a worker continues the run with this result of the call",
                "`agentloop runs resume` continues the run with this result of the call",
            )
        }
        Request::Fail { call_id, reason } => {
            let decision = Decision::Reject { reason };
            waiting(
                service.decide_by(run_id, &call_id, decision, operator()).await,
                run_id,
                &call_id,
            )?;
            resume(
                "a worker continues the run with the reason as the call's error result",
                "`agentloop runs resume` continues the run with the reason as the call's \
                 error result",
            )
        }
    })
}

/// Who decides from this command line, as the journal records it: `cli:` and the user
/// (`$USER`), or `cli` when the environment does not name one.
fn operator() -> Option<String> {
    let user = std::env::var("USER").ok().filter(|user| !user.trim().is_empty());
    Some(user.map_or_else(|| "cli".to_owned(), |user| format!("cli:{}", user.trim())))
}

/// A decision on a call that waits for an operator, refused with what to do when the call
/// does not wait.
fn waiting<T>(result: Result<T, ServiceError>, run_id: &str, call_id: &str) -> anyhow::Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(ServiceError::NotAwaitingApproval { .. }) => anyhow::bail!(
            "run '{}' has no call '{}' waiting for a decision (`agentloop runs show {}` \
             lists the calls that wait)",
            cell(run_id),
            cell(call_id),
            cell(run_id)
        ),
        Err(error) => Err(error.into()),
    }
}
