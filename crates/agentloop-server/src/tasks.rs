//! The tasks of one served agent, on the run service: a new message starts a run in the
//! message's session (its `contextId`), a message to a task that waits for input answers
//! the run's question or decides on its deferred calls, and every run this process drives
//! is drained by a task of its own — so a client that goes away does not stop it, and what
//! it did is in the store for GetTask, ListTasks and SubscribeToTask from any process.
//! A run whose executor died (its lease expired) is continued by [`Host::recover`].

use crate::convert::{requested_output, to_user_message, ConvertError, InputPolicy};
use crate::mapping::TaskFold;
use a2a::{A2AError, AgentSkill, ListTasksRequest, ListTasksResponse, Task, TaskState};
use agentloop::message::Message;
use agentloop::protocol::{envelopes, Envelope};
use agentloop::run::{Decision, OutputSpec};
use agentloop::service::RunService;
use agentloop::store::{now_ms, RunCursor, RunFilter, RunState, SessionState, StoreError};
use agentloop::worker::Queue;
use agentloop::EventStream;
use agentloop::{Agent, RunOptions};
use futures::stream::BoxStream;
use futures::StreamExt;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

mod control;
mod queued;
pub use control::{decided_by, decider_name, parse_decisions};
pub use queued::{queue_full, QUEUE_FULL, QUEUE_FULL_RETRY_SECS};

/// An agent as the server serves it.
#[derive(Clone)]
pub struct ServedAgent {
    /// Its name (`RunConfig::agent`): the path it is served at (`/{name}`), its card's
    /// name, and what its runs are listed by.
    name: String,
    /// What it does (the card's description, and its main skill's).
    pub description: String,
    /// Its version (the card's).
    pub version: String,
    /// The agent. It must have a run store and a session store (tasks are durable runs in
    /// sessions).
    pub agent: Agent,
    /// Its skills on the card (default: one skill from the description, tagged with the
    /// agent's tools).
    pub skills: Vec<AgentSkill>,
    /// What it accepts.
    pub input: InputPolicy,
}

impl ServedAgent {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for ServedAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServedAgent").field("name", &self.name).finish_non_exhaustive()
    }
}

/// Why an agent cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The agent has no run store or no session store.
    #[error("agent '{0}' needs a run store and a session store to be served")]
    NoStore(String),
    /// The agent has no name (`AgentBuilder::name`): it names its path, card and runs.
    #[error("the agent has no name: build it with AgentBuilder::name")]
    NoName,
    /// The name cannot be a path segment.
    #[error("agent name '{0}' must be 1-64 characters of a-z, 0-9, '-' and '_'")]
    BadName(String),
    /// The name is the path of something else the server serves (`ui`).
    #[error("agent name '{0}' is reserved (the server's UI is at /ui)")]
    ReservedName(String),
    /// Two agents share a name.
    #[error("two agents are named '{0}'")]
    DuplicateName(String),
    /// The agent could not be built.
    #[error("the agent could not be built: {0}")]
    Agent(String),
    /// No agent to serve.
    #[error("no agent to serve")]
    NoAgents,
}

impl ServedAgent {
    /// `agent`, served under its name (`AgentBuilder::name`) with `description`.
    pub fn new(agent: Agent, description: impl Into<String>) -> Result<Self, ServeError> {
        let name = agent.config().agent.clone().ok_or(ServeError::NoName)?;
        if !valid_name(&name) {
            return Err(ServeError::BadName(name));
        }
        Ok(Self {
            name,
            description: description.into(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            agent,
            skills: Vec::new(),
            input: InputPolicy::default(),
        })
    }
}

/// A run this process drives.
struct Live {
    cancel: CancellationToken,
    /// Its stream-only events (text, reasoning and argument deltas), for whoever watches
    /// ([`Host::watch_deltas`]).
    deltas: broadcast::Sender<Envelope>,
}

/// How many stream-only events a slow watcher may fall behind before it misses some.
const DELTA_BUFFER: usize = 1024;

/// The tasks of one served agent.
pub struct Host {
    served: ServedAgent,
    service: RunService,
    live: Mutex<HashMap<String, Live>>,
    /// How long a blocking SendMessage (or CancelTask) waits for the task to settle.
    wait: Duration,
    /// The worker pool's queue, when a pool executes the tasks ([`Host::queued`]).
    queue: Option<Queue>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").field("agent", &self.served.name).finish_non_exhaustive()
    }
}

/// A message accepted: the task as it stands, and the run's events as this process
/// drives it (stream-only deltas included).
pub struct Accepted {
    /// The task when the message was accepted.
    pub task: Task,
    /// The run's events, numbered.
    pub events: mpsc::UnboundedReceiver<Envelope>,
}

/// The spec's error for a store failure (logged; the client gets no detail).
pub(crate) fn internal(error: impl std::fmt::Display) -> A2AError {
    tracing::error!(%error, "a2a: internal error");
    A2AError::internal("internal error")
}

fn convert_error(error: ConvertError) -> A2AError {
    match error {
        ConvertError::ContentType(media_type) => {
            let mut error = A2AError::content_type_not_supported();
            error.message = format!("media type '{media_type}' is not supported by this agent");
            error
        }
        other => A2AError::invalid_params(other.to_string()),
    }
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

impl Host {
    /// The host of `served`.
    pub fn new(served: ServedAgent, wait: Duration) -> Result<Self, ServeError> {
        let store = match (served.agent.store(), served.agent.session_store()) {
            (Some(store), Some(_)) => store.clone(),
            _ => return Err(ServeError::NoStore(served.name)),
        };
        Ok(Self {
            served,
            service: RunService::new(store),
            live: Mutex::new(HashMap::new()),
            wait,
            queue: None,
        })
    }

    /// This host with its tasks executed by the worker pool of `queue`
    /// (`agentloop::worker`) instead of this process: a new task's run is journaled as its
    /// session's turn and queued under the agent's name; answers, decisions and cancels are
    /// recorded through a run service that queues the run's continuation; streams follow
    /// the run's journal (journaled events only: no text deltas). [`recover`](Self::recover)
    /// does nothing: the workers' sweep queues runs that lost their job.
    pub fn queued(mut self, queue: Queue) -> Self {
        self.service = queue.service(self.service.store().clone());
        self.queue = Some(queue);
        self
    }

    /// Whether a worker pool executes this host's tasks.
    pub fn is_queued(&self) -> bool {
        self.queue.is_some()
    }

    /// The served agent.
    pub fn served(&self) -> &ServedAgent {
        &self.served
    }

    /// What this agent's session ids start with: `a2a/{name}/`.
    fn namespace(&self) -> String {
        format!("a2a/{}/", self.served.name)
    }

    /// The session of an A2A context: the context in this agent's namespace, so that
    /// another agent (or a CLI chat) on the same store never shares its conversation.
    fn session_id(&self, context_id: &str) -> String {
        format!("{}{context_id}", self.namespace())
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, Live>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The task's run folded (not found unless it is a run of this agent).
    pub async fn fold(&self, task_id: &str) -> Result<TaskFold, A2AError> {
        let entries = self.service.store().load(task_id).await.map_err(internal)?;
        let mut fold = TaskFold::with_namespace(task_id, &self.namespace());
        for entry in &entries {
            fold.apply(entry.seq, entry.at_ms, &entry.event);
        }
        if entries.is_empty() || fold.agent() != Some(self.served.name.as_str()) {
            return Err(A2AError::task_not_found(task_id));
        }
        Ok(fold)
    }

    /// GetTask.
    pub async fn get(&self, task_id: &str, history_length: Option<i32>) -> Result<Task, A2AError> {
        let history_length = history_length_of(history_length)?;
        Ok(self.fold(task_id).await?.task(history_length, true))
    }

    /// SendMessage and SendStreamingMessage: starts a task, or continues the one the
    /// message names.
    /// A new task's run hangs under the caller's span `trace_parent` (a W3C
    /// `traceparent`); a continued one stays in the trace it began in.
    pub async fn send(
        self: &Arc<Self>,
        message: &a2a::Message,
        trace_parent: Option<String>,
    ) -> Result<Accepted, A2AError> {
        let user = to_user_message(message, &self.served.input).map_err(convert_error)?;
        let output = requested_output(message).map_err(convert_error)?;
        match &message.task_id {
            Some(_) if output.is_some() => Err(A2AError::invalid_params(
                "metadata agentloop.output chooses the answer of a task when it starts, not later",
            )),
            Some(task_id) => self.continue_task(task_id, message, user).await,
            None => self.start(message, user, output, trace_parent).await,
        }
    }

    async fn start(
        self: &Arc<Self>,
        message: &a2a::Message,
        user: Message,
        output: Option<OutputSpec>,
        trace_parent: Option<String>,
    ) -> Result<Accepted, A2AError> {
        let context_id = match &message.context_id {
            Some(id) if id.is_empty() || id.len() > 128 => {
                return Err(A2AError::invalid_params("contextId must be 1-128 characters"));
            }
            Some(id) => id.clone(),
            None => a2a::new_context_id(),
        };
        if let Some(queue) = &self.queue {
            let options = RunOptions { trace_parent, output, ..RunOptions::default() };
            return self.start_queued(queue, &context_id, user, options).await;
        }
        let run_id = agentloop::agent::new_run_id();
        let session = self
            .served
            .agent
            .session(self.session_id(&context_id))
            .await
            .map_err(|e| self.session_error(e))?;
        let cancel = CancellationToken::new();
        let options = RunOptions {
            run_id: Some(run_id.clone()),
            cancel: Some(cancel.clone()),
            trace_parent,
            output,
            ..RunOptions::default()
        };
        let events = session
            .run_stream_with(user.clone(), options)
            .await
            .map_err(|e| self.session_error(e))?;
        let task = fold_start(&run_id, &context_id, user);
        let (events, known) = self.drive_signalled(run_id, events, 0, cancel);
        // Answer once the store knows the task: a GetTask or SubscribeToTask right after
        // the response finds it.
        let _ = tokio::time::timeout(Duration::from_secs(10), known).await;
        Ok(Accepted { task, events })
    }

    async fn continue_task(
        self: &Arc<Self>,
        task_id: &str,
        message: &a2a::Message,
        user: Message,
    ) -> Result<Accepted, A2AError> {
        let fold = self.fold(task_id).await?;
        if message.context_id.as_deref().is_some_and(|c| c != fold.context_id()) {
            return Err(A2AError::invalid_params(format!(
                "task {task_id} belongs to another contextId"
            )));
        }
        let state = fold.state().clone();
        if state.is_terminal() {
            return Err(A2AError::unsupported_operation(format!(
                "task {task_id} is in a terminal state and cannot be continued"
            )));
        }
        if state != TaskState::InputRequired {
            return Err(A2AError::unsupported_operation(format!(
                "task {task_id} is working; wait for it to require input"
            )));
        }
        if self.queue.is_some() {
            return self.continue_queued(task_id, &fold, message, user).await;
        }
        let next_seq = fold.last_seq().map_or(0, |seq| seq + 1);
        let session = self
            .served
            .agent
            .session(self.session_id(fold.context_id()))
            .await
            .map_err(|e| self.session_error(e))?;
        let events = if fold.awaits_approval() {
            let decisions = parse_decisions(message, fold.awaiting_approval())?;
            let by = Some(decided_by(message));
            session.decide_by(decisions, by).await.map_err(|e| self.session_error(e))?
        } else {
            session.answer(task_id, user).await.map_err(|e| self.session_error(e))?
        };
        let task = working_again(&fold);
        let events = self.drive(task_id.to_owned(), events, next_seq, CancellationToken::new());
        Ok(Accepted { task, events })
    }

    /// Drains a run's events in a task of its own (so the run goes on whatever the client
    /// does), numbering them and passing them to the returned channel while someone listens.
    fn drive(
        self: &Arc<Self>,
        run_id: String,
        events: EventStream,
        first_seq: u64,
        cancel: CancellationToken,
    ) -> mpsc::UnboundedReceiver<Envelope> {
        self.drive_signalled(run_id, events, first_seq, cancel).0
    }

    /// [`drive`](Self::drive), and a signal once the run's first event is journaled (or the
    /// run ended without one): from then on the store knows the task.
    fn drive_signalled(
        self: &Arc<Self>,
        run_id: String,
        events: EventStream,
        first_seq: u64,
        cancel: CancellationToken,
    ) -> (mpsc::UnboundedReceiver<Envelope>, oneshot::Receiver<()>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let (journaled, known) = oneshot::channel();
        let (deltas, _) = broadcast::channel(DELTA_BUFFER);
        self.live().insert(run_id.clone(), Live { cancel, deltas: deltas.clone() });
        let host = self.clone();
        tokio::spawn(async move {
            let mut journaled = Some(journaled);
            let mut numbered = std::pin::pin!(envelopes(run_id.clone(), events, first_seq));
            while let Some(envelope) = numbered.next().await {
                if envelope.is_journaled() {
                    if let Some(signal) = journaled.take() {
                        let _ = signal.send(());
                    }
                } else if deltas.receiver_count() > 0 {
                    let _ = deltas.send(envelope.clone());
                }
                // A listener that went away does not stop the run.
                let _ = sender.send(envelope);
            }
            drop(journaled);
            host.live().remove(&run_id);
            host.release_turn(&run_id).await;
        });
        (receiver, known)
    }

    /// Ends a session turn still held by a run that stopped (a suspended run cancelled
    /// outside its session, an executor that lost its journal).
    async fn release_turn(&self, run_id: &str) {
        let (Ok(fold), Some(sessions)) =
            (self.fold(run_id).await, self.served.agent.session_store())
        else {
            return;
        };
        if !fold.state().is_terminal() {
            return;
        }
        let session = self.session_id(fold.context_id());
        if let Ok(info) = sessions.open_session(&session).await {
            if info.state == SessionState::Busy && info.run_id.as_deref() == Some(run_id) {
                if let Err(error) = sessions.end_turn(&session, run_id, &[]).await {
                    tracing::warn!(%error, run_id, "a2a: a stopped run's turn could not end");
                }
            }
        }
    }

    /// The stream-only events (text, reasoning and argument deltas) of a run this process
    /// drives now, from now on; `None` when it drives no such run (a worker, another process
    /// or nobody executes it). A watcher that falls behind by more than 1,024 events misses
    /// some (`RecvError::Lagged`); the journal has the whole answer anyway.
    pub fn watch_deltas(&self, run_id: &str) -> Option<broadcast::Receiver<Envelope>> {
        self.live().get(run_id).map(|live| live.deltas.subscribe())
    }

    /// CancelTask: asks the run's executor, wherever it runs, to cancel; a task that waits
    /// for input (no executor) is cancelled here. Waits a moment for the cancellation.
    pub async fn cancel(self: &Arc<Self>, task_id: &str) -> Result<Task, A2AError> {
        let fold = self.fold(task_id).await?;
        if fold.state().is_terminal() {
            return Err(A2AError::task_not_cancelable(task_id));
        }
        let reason = "canceled by the client";
        self.service.cancel(task_id, reason).await.map_err(internal)?;
        if self.queue.is_some() {
            // The run service queued the run's continuation: a worker cancels it.
        } else if *fold.state() == TaskState::InputRequired {
            // Nothing drives a waiting run: resuming it applies the cancellation.
            if let Err(error) = self.resume_here(task_id).await {
                tracing::warn!(%error, task_id, "a2a: a waiting task could not be cancelled here");
            }
        } else if let Some(cancel) = self.live().get(task_id).map(|live| live.cancel.clone()) {
            cancel.cancel();
        }
        // Wait a moment for the executor, wherever it runs, to end the run.
        let deadline = tokio::time::Instant::now() + self.wait.min(Duration::from_secs(10));
        while tokio::time::Instant::now() < deadline {
            if self.fold(task_id).await?.state().is_terminal() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        self.get(task_id, None).await
    }

    /// ListTasks: this agent's tasks, newest first, by the filters.
    pub async fn list(&self, request: &ListTasksRequest) -> Result<ListTasksResponse, A2AError> {
        let page_size = match request.page_size {
            None | Some(0) => 50,
            Some(size @ 1..=100) => size as usize,
            Some(size) => {
                return Err(A2AError::invalid_params(format!("pageSize {size} is not in 1-100")));
            }
        };
        let history_length = history_length_of(request.history_length)?.or(Some(0));
        let mut filter = RunFilter::all().agent(self.served.name.clone());
        filter.context_id = request.context_id.as_deref().map(|c| self.session_id(c));
        filter.state = match &request.status {
            None | Some(TaskState::Unspecified) => None,
            Some(state) => Some(run_state(state)?),
        };
        if let Some(token) = request.page_token.as_deref().filter(|t| !t.is_empty()) {
            filter.after = Some(parse_page_token(token)?);
        }
        let after_ms = request.status_timestamp_after.map(|t| t.timestamp_millis().max(0) as u64);
        let total = self.service.list(&filter.clone().limit(usize::MAX)).await.map_err(internal)?;
        let runs = self.service.list(&filter.limit(page_size)).await.map_err(internal)?;
        let mut tasks = Vec::with_capacity(runs.len());
        for run in &runs {
            if after_ms.is_some_and(|after| run.updated_ms <= after) {
                continue;
            }
            match self.fold(&run.run_id).await {
                Ok(fold) => {
                    let state = fold.state().clone();
                    if request
                        .status
                        .as_ref()
                        .is_some_and(|want| *want != TaskState::Unspecified && *want != state)
                    {
                        continue;
                    }
                    tasks.push(
                        fold.task(history_length, request.include_artifacts.unwrap_or(false)),
                    );
                }
                Err(error) if error.code == a2a::error_code::TASK_NOT_FOUND => {}
                Err(error) => return Err(error),
            }
        }
        let next_page_token = match runs.last() {
            Some(last) if runs.len() == page_size => page_token(&last.cursor()),
            _ => String::new(),
        };
        Ok(ListTasksResponse {
            tasks,
            next_page_token,
            page_size: page_size as i32,
            total_size: i32::try_from(total.len()).unwrap_or(i32::MAX),
        })
    }

    /// SubscribeToTask: the fold of the task's journal and its entries after that — or,
    /// for a client that reconnects (`after`: the last `seq` it saw), the entries after
    /// `after`, even when the task has ended since. A new subscription to a task that has
    /// ended is refused.
    pub async fn subscribe(
        &self,
        task_id: &str,
        after: Option<u64>,
    ) -> Result<(TaskFold, BoxStream<'static, Result<Envelope, StoreError>>), A2AError> {
        let fold = self.fold(task_id).await?;
        let next = match after {
            Some(seq) => seq.saturating_add(1),
            None if fold.state().is_terminal() => {
                return Err(A2AError::unsupported_operation(format!(
                    "task {task_id} is in a terminal state; use GetTask"
                )));
            }
            None => fold.last_seq().map_or(0, |seq| seq + 1),
        };
        Ok((fold, self.service.subscribe(task_id, next)))
    }

    /// The run service.
    pub fn service(&self) -> &RunService {
        &self.service
    }

    /// The spec's error for a session's refusal (contexts named as the client knows them).
    fn session_error(&self, error: agentloop::SessionError) -> A2AError {
        let namespace = self.namespace();
        let context = |id: &str| id.strip_prefix(namespace.as_str()).unwrap_or(id).to_owned();
        match error {
            agentloop::SessionError::Busy { context_id, run_id } => {
                A2AError::unsupported_operation(format!(
                    "context {} is busy with task {run_id}: send to that task, or wait until \
                     it ends",
                    context(&context_id)
                ))
            }
            agentloop::SessionError::Store(StoreError::NotInTurn { context_id, .. }) => {
                A2AError::unsupported_operation(format!(
                    "the task is no longer the latest of context {} and cannot be continued",
                    context(&context_id)
                ))
            }
            agentloop::SessionError::Resume(agentloop::ResumeError::Run(error)) => {
                A2AError::invalid_params(error.to_string())
            }
            other => internal(other),
        }
    }

    /// Continues, once, the runs of this agent whose executor died (running, with a lease
    /// that expired): each is resumed — in its session when the session's turn is its —
    /// and drained here. Returns how many were resumed.
    pub async fn recover(self: &Arc<Self>) -> usize {
        if self.queue.is_some() {
            return 0;
        }
        let filter = RunFilter::all().agent(self.served.name.clone()).state(RunState::Running);
        let runs = match self.service.list(&filter).await {
            Ok(runs) => runs,
            Err(error) => {
                tracing::warn!(%error, "a2a: recovery could not list runs");
                return 0;
            }
        };
        let now = now_ms();
        let mut resumed = 0;
        for run in runs {
            if run.lease_is_live(now) || self.live().contains_key(&run.run_id) {
                continue;
            }
            let events = match self.resume_run(&run.run_id, run.context_id.as_deref()).await {
                Ok(events) => events,
                Err(error) => {
                    tracing::warn!(error = %error.message, run_id = run.run_id, "a2a: recovery could not resume");
                    continue;
                }
            };
            tracing::info!(run_id = run.run_id, "a2a: resumed a run whose executor stopped");
            drop(self.drive(run.run_id.clone(), events, run.entries, CancellationToken::new()));
            resumed += 1;
        }
        resumed
    }

    async fn resume_run(
        &self,
        run_id: &str,
        context_id: Option<&str>,
    ) -> Result<EventStream, A2AError> {
        if let (Some(context_id), Some(sessions)) = (context_id, self.served.agent.session_store())
        {
            let info = sessions.open_session(context_id).await.map_err(internal)?;
            if info.state == SessionState::Busy && info.run_id.as_deref() == Some(run_id) {
                let session = self
                    .served
                    .agent
                    .session(context_id)
                    .await
                    .map_err(|e| self.session_error(e))?;
                return session.resume_turn().await.map_err(|e| self.session_error(e));
            }
        }
        self.served.agent.resume(run_id).await.map_err(internal)
    }
}

/// The task as a message that continues it leaves it: working again (the stream's updates
/// follow).
fn working_again(fold: &TaskFold) -> Task {
    let mut task = fold.task(None, true);
    task.status = a2a::TaskStatus {
        state: TaskState::Working,
        message: None,
        timestamp: crate::mapping::timestamp(now_ms()),
    };
    task.metadata = None;
    task
}

/// The task of a run just started, before its first entry.
fn fold_start(run_id: &str, context_id: &str, user: Message) -> Task {
    let mut task = TaskFold::new(run_id).task(None, false);
    task.context_id = context_id.to_owned();
    task.status.timestamp = crate::mapping::timestamp(now_ms());
    if let Some(message) =
        crate::convert::to_a2a_message(&user, format!("{run_id}-input"), run_id, context_id)
    {
        task.history = Some(vec![message]);
    }
    task
}

fn history_length_of(length: Option<i32>) -> Result<Option<usize>, A2AError> {
    match length {
        None => Ok(None),
        Some(n) if n < 0 => Err(A2AError::invalid_params("historyLength must not be negative")),
        Some(n) => Ok(Some(n as usize)),
    }
}

fn run_state(state: &TaskState) -> Result<RunState, A2AError> {
    Ok(match state {
        TaskState::Submitted | TaskState::Working => RunState::Running,
        TaskState::Completed | TaskState::Rejected => RunState::Finished,
        TaskState::Failed => RunState::Failed,
        TaskState::Canceled => RunState::Cancelled,
        TaskState::InputRequired => RunState::Suspended,
        TaskState::AuthRequired | TaskState::Unspecified => {
            return Err(A2AError::invalid_params("no task is ever in that state here"));
        }
    })
}

/// The opaque page token of a listing position.
fn page_token(cursor: &RunCursor) -> String {
    format!("{}.{}", cursor.created_ms, cursor.run_id)
}

fn parse_page_token(token: &str) -> Result<RunCursor, A2AError> {
    let invalid = || A2AError::invalid_params("pageToken is not one this server issued");
    let (created, run_id) = token.split_once('.').ok_or_else(invalid)?;
    let created_ms = created.parse().map_err(|_| invalid())?;
    if run_id.is_empty() || run_id.len() > 128 {
        return Err(invalid());
    }
    Ok(RunCursor { created_ms, run_id: run_id.to_owned() })
}

/// A decision on deferred calls, as the client sends it.
pub(crate) fn decision_of(value: &Value) -> Option<Decision> {
    match value.get("decision").and_then(Value::as_str)? {
        "approve" | "approved" => Some(Decision::Approve),
        "reject" | "rejected" => Some(Decision::Reject {
            reason: value
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("rejected by the client")
                .to_owned(),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
