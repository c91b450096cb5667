//! [`Agent`]: a provider, tools and a [`RunConfig`], ready to run. Build one with
//! [`Agent::builder`].

mod as_tool;
mod create;
mod options;
mod output;
mod replay;
mod resume;

pub use as_tool::{child_run_id, AgentTool, AgentToolArgs};
pub use options::{RunInput, RunOptions};
pub use output::RunAsError;
pub use replay::JournalReplay;
pub use resume::ResumeOptions;

use crate::control::{Control, RunHandle};
use crate::driver::{Driver, EventStream, Start};
use crate::error::{AgentError, BuildError};
use crate::event::Event;
use crate::hooks::{HookSet, Hooks, PermissionHook};
use crate::message::ToolCall;
use crate::provider::{Provider, ToolChoice};
use crate::run::{
    BreakerConfig, Decision, Limits, Outcome, Price, Run, RunConfig, RunError, RunIdentity,
    StopReason, ToolFailureMode,
};
use crate::store::journal::journaled_leased;
use crate::store::{Lease, RunStore, SessionStore, DEFAULT_LEASE_TTL, REMOTE_CONTROL_POLL};
use crate::tool::{DynTool, TaskComplete, Tool, ToolExecutor, ToolRegistry, ToolSet, ToolSpec};
use futures::StreamExt;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A configured agent. Cheap to clone; runs share nothing but the provider and tools.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use agentloop::prelude::*;
/// use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
///
/// let model = ScriptedModel::new([ScriptedTurn::text("Hello!")]);
/// let agent = Agent::builder(model).instructions("Be brief.").build()?;
/// let outcome = agent.run("Say hello").await?;
/// assert_eq!(outcome.answer, "Hello!");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Agent {
    driver: Driver,
    config: Arc<RunConfig>,
    store: Option<Arc<dyn RunStore>>,
    sessions: Option<Arc<dyn SessionStore>>,
    /// How long a run's lease lasts without renewal (see [`crate::store::lease`]).
    lease_ttl: Duration,
    /// When the journal is committed.
    durability: crate::store::Durability,
    /// Reads the remote control of the agent's journaled runs (with a store).
    controls: Option<crate::store::control_watch::ControlWatch>,
    /// Who runs the agent's runs (the config hash is computed per run).
    identity: RunIdentity,
    /// Sees every run's events (telemetry), if set.
    observer: Option<Arc<dyn crate::observe::Observer>>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("provider", &self.driver.provider.name())
            .field("tools", &self.driver.tools)
            .field("config", &self.config)
            .field("store", &self.store.is_some())
            .field("session_store", &self.sessions.is_some())
            .finish()
    }
}

pub use crate::terms::new_run_id;

impl Agent {
    /// Starts building an agent on this provider.
    pub fn builder(provider: impl Provider + 'static) -> AgentBuilder {
        AgentBuilder::new(Arc::new(provider))
    }

    /// The configuration every run starts from.
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// The tools offered to the model (read again from tool sets whose tools changed, such as
    /// MCP servers).
    pub fn tools(&self) -> Arc<Vec<ToolSpec>> {
        self.refresh_tools();
        self.driver.tools.specs()
    }

    /// Indexes the tool sets again if one changed its tools; a run started afterwards offers
    /// the new list. A change that cannot be indexed (a duplicate name, an invalid schema) is
    /// logged and the previous tools stay.
    fn refresh_tools(&self) {
        if let Err(error) = self.driver.tools.refresh() {
            tracing::warn!(%error, "a tool set changed its tools; keeping the previous ones");
        }
    }

    /// Runs to the end, streaming every event. Dropping the stream cancels the run.
    ///
    /// The run ends with one terminal event, whose outcome says why: `run_finished` (an
    /// answer, a done tool, a question for the user, a limit's wind-down answer, …),
    /// `run_failed`, `run_cancelled`, or `run_suspended` (calls wait for a human decision:
    /// continue with [`decide`](Self::decide) or
    /// [`resume_with_decisions`](Self::resume_with_decisions)). What comes last depends on
    /// the store:
    ///
    /// - **Without a store**, the terminal event is the last event.
    /// - **With a store** ([`AgentBuilder::store`]), each durable event is passed on once it
    ///   is journaled, followed by a transient `checkpointed { seq }`: the last two events are
    ///   the terminal event and its `checkpointed`. If the journal cannot be written (the
    ///   store fails, or the run's lease is refused or taken over), the run stops at once and
    ///   the stream ends with a transient `journal_failed` instead, with no terminal event;
    ///   the run continues from its last checkpoint with [`resume`](Self::resume).
    ///
    /// [`outcome_of`] reads a stream down to its outcome (a `journal_failed` becomes
    /// [`AgentError::Journal`]).
    pub fn run_stream(&self, input: impl Into<RunInput>) -> EventStream {
        self.run_stream_with(input, RunOptions::default())
    }

    /// [`run_stream`](Self::run_stream) with options.
    pub fn run_stream_with(&self, input: impl Into<RunInput>, options: RunOptions) -> EventStream {
        self.start_with(input, options).1
    }

    /// Starts a run and returns a handle to pause, resume or cancel it, with its events.
    pub fn start(&self, input: impl Into<RunInput>) -> (RunHandle, EventStream) {
        self.start_with(input, RunOptions::default())
    }

    /// [`start`](Self::start) with options.
    pub fn start_with(
        &self,
        input: impl Into<RunInput>,
        options: RunOptions,
    ) -> (RunHandle, EventStream) {
        self.start_inner(input, options, false)
    }

    /// [`start_with`](Self::start_with); `quiet` leaves out the transient events.
    fn start_inner(
        &self,
        input: impl Into<RunInput>,
        options: RunOptions,
        quiet: bool,
    ) -> (RunHandle, EventStream) {
        let run_id = options.run_id.unwrap_or_else(new_run_id);
        let control = Control::new(options.cancel.unwrap_or_default());
        let handle = RunHandle { run_id: run_id.clone(), control: control.clone() };
        self.refresh_tools();
        let config =
            self.new_run_config(options.parent_run_id, options.trace_parent, options.output);
        let observer = self.run_observer(&run_id, &config, false);
        let start =
            Start::New { run_id: run_id.clone(), config: Box::new(config), input: input.into().0 };
        let driver = Driver { quiet, observer: observer.clone(), ..self.driver.clone() };
        let events = driver.drive(start, control.clone());
        let events = self.journal(events, &control, run_id, None, Some(0), !quiet);
        (handle, crate::observe::observed(events, observer))
    }

    /// Journals `events` when the agent has a store, by the holder of the run's lease
    /// (`lease`: already claimed; `None`: claimed first); `checkpoints`: with a
    /// `checkpointed` event after each journaled one.
    fn journal(
        &self,
        events: EventStream,
        control: &Arc<Control>,
        run_id: String,
        lease: Option<Lease>,
        next_seq: Option<u64>,
        checkpoints: bool,
    ) -> EventStream {
        let Some(store) = &self.store else { return events };
        let (store, ttl) = (store.clone(), self.lease_ttl);
        let control = self.controls.clone().map(|watch| (control.clone(), watch));
        let leased = (lease, ttl);
        let durability = self.durability;
        journaled_leased(events, store, run_id, leased, next_seq, control, durability, checkpoints)
    }

    /// Drives an existing run, journaled from `next_seq` (`None`: the store's length).
    fn drive_existing(
        &self,
        run: Run,
        cancel: Option<CancellationToken>,
        lease: Option<Lease>,
        next_seq: Option<u64>,
    ) -> (RunHandle, EventStream) {
        let control = Control::new(cancel.unwrap_or_default());
        let run_id = run.run_id().to_owned();
        let handle = RunHandle { run_id: run_id.clone(), control: control.clone() };
        self.refresh_tools();
        let observer = self.run_observer(&run_id, run.config(), true);
        let driver = Driver { observer: observer.clone(), ..self.driver.clone() };
        let events = driver.drive(Start::Existing(Box::new(run)), control.clone());
        let events = self.journal(events, &control, run_id, lease, next_seq, true);
        (handle, crate::observe::observed(events, observer))
    }

    /// Continues a run rebuilt from its journal ([`Run::from_journal`]): a model call without
    /// a response is made again, tools without a result run again (with the same idempotency
    /// key), tools with a result never run again. With a store, the new events are appended
    /// after the store's last entry of the run: pass a run rebuilt from that journal (or use
    /// [`resume`](Self::resume), which loads it).
    pub fn continue_run(&self, run: Run, cancel: Option<CancellationToken>) -> EventStream {
        self.continue_run_with_handle(run, cancel).1
    }

    /// [`continue_run`](Self::continue_run), with a handle.
    pub fn continue_run_with_handle(
        &self,
        run: Run,
        cancel: Option<CancellationToken>,
    ) -> (RunHandle, EventStream) {
        self.drive_existing(run, cancel, None, None)
    }

    /// Continues a run suspended for approvals (its journal, e.g. loaded from a store) with
    /// the human decisions: approved calls run, rejected ones get the reason as their error
    /// result. Calls without a decision keep waiting (the run suspends again). With a store,
    /// the new events are appended after the given journal's durable events (they must be
    /// the store's journal of the run: see [`decide`](Self::decide)).
    pub fn resume_with_decisions<'a>(
        &self,
        journal: impl IntoIterator<Item = &'a Event>,
        decisions: impl IntoIterator<Item = (String, Decision)>,
    ) -> Result<EventStream, RunError> {
        let journal: Vec<&Event> = journal.into_iter().filter(|e| e.is_durable()).collect();
        let mut run = Run::from_journal(journal.iter().copied())?;
        for (call_id, decision) in decisions {
            run.decide(&call_id, decision)?;
        }
        Ok(self.drive_existing(run, None, None, Some(journal.len() as u64)).1)
    }

    /// How long the lease of a run this agent executes lasts unless renewed
    /// ([`AgentBuilder::lease_ttl`]).
    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    /// The store runs are journaled in, if any.
    pub fn store(&self) -> Option<&Arc<dyn RunStore>> {
        self.store.as_ref()
    }

    /// The store sessions keep their conversations in, if any ([`Agent::session`]).
    pub fn session_store(&self) -> Option<&Arc<dyn SessionStore>> {
        self.sessions.as_ref()
    }

    /// This agent, with runs that belong to the conversation `context_id`.
    pub(crate) fn in_context(&self, context_id: &str) -> Self {
        let mut config = (*self.config).clone();
        config.context_id = Some(context_id.to_owned());
        Self { config: Arc::new(config), ..self.clone() }
    }

    /// Runs to the end and returns the outcome. A failed or cancelled run is an error that
    /// carries its outcome. Only the outcome is wanted, so the transient events (deltas,
    /// notices, `checkpointed`) are not even built; the journal is the same as
    /// [`run_stream`](Self::run_stream)'s.
    ///
    /// A run that stops to wait is an error too, [`AgentError::Suspended`], so that it cannot
    /// be mistaken for an answer: suspended for approval
    /// ([`StopReason::AwaitingApproval`](crate::StopReason)), or stopped by an ask-user tool
    /// ([`StopReason::AwaitingInput`](crate::StopReason), the question in the outcome's
    /// `answer`).
    pub async fn run(&self, input: impl Into<RunInput>) -> Result<Outcome, AgentError> {
        self.run_with(input, RunOptions::default()).await
    }

    /// [`run`](Self::run) with per-run options (an id, a cancellation token, a typed
    /// output, …).
    pub async fn run_with(
        &self,
        input: impl Into<RunInput>,
        options: RunOptions,
    ) -> Result<Outcome, AgentError> {
        let (_, events) = self.start_inner(input, options, true);
        let outcome = outcome_of(events).await?;
        match outcome.stop_reason {
            StopReason::AwaitingApproval { .. } | StopReason::AwaitingInput { .. } => {
                Err(AgentError::Suspended { outcome: Box::new(outcome) })
            }
            _ => Ok(outcome),
        }
    }
}

/// Consumes an event stream and returns its outcome.
pub async fn outcome_of(mut events: EventStream) -> Result<Outcome, AgentError> {
    let mut reader = OutcomeReader::default();
    while let Some(event) = events.next().await {
        reader.read(event);
    }
    reader.outcome()
}

/// What [`outcome_of`] keeps of a run's events to tell its outcome.
#[derive(Default)]
struct OutcomeReader {
    last: Option<Event>,
    journal_error: Option<String>,
    model_error: Option<crate::provider::ProviderError>,
}

impl OutcomeReader {
    /// Whether [`read`](Self::read) keeps something of this event (the others can be passed
    /// on without a copy).
    fn wants(event: &Event) -> bool {
        matches!(
            event,
            Event::JournalFailed { .. }
                | Event::ModelFailed { .. }
                | Event::RunFinished { .. }
                | Event::RunFailed { .. }
                | Event::RunCancelled { .. }
                | Event::RunSuspended { .. }
        )
    }

    /// Reads the next event of the stream.
    fn read(&mut self, event: Event) {
        match event {
            Event::JournalFailed { error } => self.journal_error = Some(error),
            Event::ModelFailed { error, .. } => self.model_error = Some(error),
            Event::RunFinished { .. }
            | Event::RunFailed { .. }
            | Event::RunCancelled { .. }
            | Event::RunSuspended { .. } => {
                self.last = Some(event);
            }
            _ => {}
        }
    }

    /// The outcome of the events read (the stream ended).
    fn outcome(self) -> Result<Outcome, AgentError> {
        if let Some(error) = self.journal_error {
            return Err(AgentError::Journal { error });
        }
        match self.last {
            Some(Event::RunFinished { outcome }) | Some(Event::RunSuspended { outcome }) => {
                Ok(*outcome)
            }
            Some(Event::RunFailed { error, outcome }) => {
                Err(AgentError::failed(error, outcome, self.model_error))
            }
            Some(Event::RunCancelled { reason, outcome }) => {
                Err(AgentError::Cancelled { reason, outcome })
            }
            _ => Err(AgentError::NoOutcome),
        }
    }
}

/// Builds an [`Agent`].
pub struct AgentBuilder {
    provider: Arc<dyn Provider>,
    registry: ToolRegistry,
    sets: Vec<Arc<dyn ToolSet>>,
    config: RunConfig,
    concurrency: usize,
    tool_timeout: Duration,
    retry: Option<Option<crate::provider::RetryPolicy>>,
    counter: Option<Arc<dyn crate::context::TokenCounter>>,
    hooks: HookSet,
    errors: Vec<String>,
    store: Option<Arc<dyn RunStore>>,
    sessions: Option<Arc<dyn SessionStore>>,
    lease_ttl: Duration,
    durability: crate::store::Durability,
    tool_protocol: crate::provider::ToolProtocol,
    step_tool_choice: Option<crate::provider::StepToolChoice>,
    observer: Option<Arc<dyn crate::observe::Observer>>,
    secrets: crate::provider::secrets::Secrets,
}

impl AgentBuilder {
    fn new(provider: Arc<dyn Provider>) -> Self {
        Self {
            provider,
            registry: ToolRegistry::new(),
            sets: Vec::new(),
            config: RunConfig::default(),
            concurrency: 5,
            tool_timeout: Duration::from_secs(30),
            retry: None,
            counter: None,
            hooks: HookSet::new(Duration::from_secs(5)),
            errors: Vec::new(),
            store: None,
            sessions: None,
            lease_ttl: DEFAULT_LEASE_TTL,
            durability: crate::store::Durability::Sync,
            tool_protocol: crate::provider::ToolProtocol::Auto,
            step_tool_choice: None,
            observer: None,
            secrets: crate::provider::secrets::Secrets::new(),
        }
    }

    /// The agent's name (journaled with every run; stores list runs by it).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.config.agent = Some(name.into());
        self
    }

    /// System / developer instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.config.instructions = Some(instructions.into());
        self
    }

    /// Adds a typed tool.
    pub fn tool<T: Tool>(self, tool: T) -> Self {
        self.dyn_tool(Arc::new(tool))
    }

    /// Adds an erased tool.
    pub fn dyn_tool(mut self, tool: Arc<dyn DynTool>) -> Self {
        if let Err(error) = self.registry.register_dyn(tool) {
            self.errors.push(error.to_string());
        }
        self
    }

    /// Adds a source of tools (an MCP server, a remote agent, …).
    pub fn tool_set(mut self, set: Arc<dyn ToolSet>) -> Self {
        self.sets.push(set);
        self
    }

    /// Model calls in the loop before the wind-down answer (default 20, at least 1).
    pub fn max_iterations(mut self, iterations: u32) -> Self {
        self.config.limits.max_iterations = iterations;
        self
    }

    /// Only a done tool (`task_complete`, registered automatically) ends the run.
    pub fn require_done_tool(mut self, required: bool) -> Self {
        self.config.require_done_tool = required;
        self
    }

    /// The user message added after a tool-less turn when the done tool is required
    /// (`None`: none).
    pub fn done_tool_nudge(mut self, nudge: Option<String>) -> Self {
        self.config.done_tool_nudge = nudge;
        self
    }

    /// The summary request of the wind-down call.
    pub fn wind_down_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.config.wind_down_prompt = prompt.into();
        self
    }

    /// The answer when the wind-down call fails.
    pub fn wind_down_fallback(mut self, text: impl Into<String>) -> Self {
        self.config.wind_down_fallback = text.into();
        self
    }

    /// Tool calls of one model turn that may run at once (default 5, at least 1).
    pub fn tool_concurrency(mut self, limit: usize) -> Self {
        self.concurrency = limit;
        self
    }

    /// Default timeout of a tool call (default 30 s); a tool may set its own.
    pub fn tool_timeout(mut self, timeout: Duration) -> Self {
        self.tool_timeout = timeout;
        self
    }

    /// Whether the model must call tools.
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.config.tool_choice = choice;
        self
    }

    /// How tools reach the model (default [`ToolProtocol::Auto`](crate::provider::ToolProtocol):
    /// native tool calling when the provider supports it, else tool calls through the prompt
    /// with [`PromptedTools`](crate::provider::PromptedTools)).
    pub fn tool_protocol(mut self, protocol: crate::provider::ToolProtocol) -> Self {
        self.tool_protocol = protocol;
        self
    }

    /// A tool choice per step of a turn (e.g.
    /// [`StepToolChoice::required_first`](crate::provider::StepToolChoice::required_first));
    /// it replaces [`tool_choice`](Self::tool_choice) on requests that offer tools.
    pub fn step_tool_choice(mut self, policy: crate::provider::StepToolChoice) -> Self {
        self.step_tool_choice = Some(policy);
        self
    }

    /// What model calls ask of the provider's prompt cache: breakpoints (auto, off, or
    /// explicit points), a cache key, a created cache
    /// ([`CachePolicy`](crate::provider::CachePolicy)). Unset, each provider uses its own
    /// policy (Anthropic's: auto breakpoints).
    pub fn cache(mut self, policy: crate::provider::CachePolicy) -> Self {
        self.config.cache = Some(policy);
        self
    }

    /// Sampling temperature.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.config.temperature = Some(temperature);
        self
    }

    /// Output token limit per model call.
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.config.max_tokens = Some(max_tokens);
        self
    }

    /// Adds run metadata (passed to providers and tools).
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.config.metadata.insert(key.into(), value.into());
        self
    }

    /// How failed model calls are retried (before any content arrived); `None` turns retries
    /// off. Default: the provider's own policy (`Provider::retry_policy`).
    pub fn retry_policy(mut self, policy: Option<crate::provider::RetryPolicy>) -> Self {
        self.retry = Some(policy);
        self
    }

    /// Context management: window, trimming, compaction. The context window defaults to the
    /// model's from [`context_window_for`](crate::context::context_window_for) (by the
    /// provider's name).
    pub fn context(mut self, context: crate::context::ContextConfig) -> Self {
        self.config.context = context;
        self
    }

    /// The model's context window in tokens.
    pub fn context_window(mut self, tokens: u32) -> Self {
        self.config.context.context_window = Some(tokens);
        self
    }

    /// The token counter (default: exact tiktoken counts for OpenAI model names, an estimate
    /// otherwise).
    pub fn token_counter(mut self, counter: Arc<dyn crate::context::TokenCounter>) -> Self {
        self.counter = Some(counter);
        self
    }

    /// Adds hooks. They run in registration order; a failing hook is reported as a
    /// `hook_failed` event and the run goes on.
    pub fn hook(mut self, hooks: impl Hooks + 'static) -> Self {
        self.hooks.push(Arc::new(hooks), false);
        self
    }

    /// Adds hooks whose failure (error, panic, timeout) fails the run.
    pub fn critical_hook(mut self, hooks: impl Hooks + 'static) -> Self {
        self.hooks.push(Arc::new(hooks), true);
        self
    }

    /// Timeout of each hook call (default 5 s).
    pub fn hook_timeout(mut self, timeout: Duration) -> Self {
        self.hooks.set_timeout(timeout);
        self
    }

    /// A permission check in one line: `Err(reason)` rejects the call and the model sees the
    /// reason as its error result.
    pub fn can_execute_tool(
        self,
        check: impl Fn(&ToolCall, &Value) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.hook(PermissionHook(check))
    }

    /// All limits at once (replaces `max_iterations` and the other limit setters).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.config.limits = limits;
        self
    }

    /// Tool calls in the whole run.
    pub fn max_tool_calls(mut self, calls: u32) -> Self {
        self.config.limits.max_tool_calls = Some(calls);
        self
    }

    /// Calls of one tool in the whole run.
    pub fn max_calls_of(mut self, tool: impl Into<String>, calls: u32) -> Self {
        self.config.limits.max_tool_calls_per_tool.insert(tool.into(), calls);
        self
    }

    /// Input plus output tokens in the whole run.
    pub fn max_total_tokens(mut self, tokens: u64) -> Self {
        self.config.limits.max_total_tokens = Some(tokens);
        self
    }

    /// Cost in USD (needs a [`price`](Self::price)).
    pub fn max_cost_usd(mut self, usd: f64) -> Self {
        self.config.limits.max_cost_usd = Some(usd);
        self
    }

    /// Wall-clock time of the whole run: a deadline. When it passes, the model call or the
    /// tools in flight are stopped; after tools the run winds down (under
    /// [`wind_down_timeout`](Self::wind_down_timeout)), after a model call that was still
    /// going it ends at once (the model is what stalled).
    pub fn max_duration(mut self, duration: Duration) -> Self {
        self.config.limits.max_duration_ms = Some(crate::run::millis(duration));
        self
    }

    /// How long the wind-down call (the tool-less answer after a limit) may take; default 30
    /// s. Past it the run ends with the fallback answer.
    pub fn wind_down_timeout(mut self, timeout: Duration) -> Self {
        self.config.wind_down_timeout_ms = Some(crate::run::millis(timeout));
        self
    }

    /// The model's price, for cost accounting.
    pub fn price(mut self, price: Price) -> Self {
        self.config.price = Some(price);
        self
    }

    /// The price of one member of a fallback chain, by its label (`family:name`, e.g.
    /// `openai:gpt-4o-mini`; see [`Fallback`](crate::provider::Fallback)): calls that member
    /// answered are priced at it, the others at [`price`](Self::price).
    pub fn provider_price(mut self, member: impl Into<String>, price: Price) -> Self {
        self.config.provider_prices.insert(member.into(), price);
        self
    }

    /// Circuit breaker, stall detection and tool failure mode.
    pub fn breaker(mut self, breaker: BreakerConfig) -> Self {
        self.config.breaker = breaker;
        self
    }

    /// Whether a tool error ends the run (default: it becomes an error result).
    pub fn tool_failure_mode(mut self, mode: ToolFailureMode) -> Self {
        self.config.breaker.tool_failure_mode = mode;
        self
    }

    /// How many times `on_incomplete_work` hooks may make the model continue (default 3).
    pub fn max_continuations(mut self, continuations: u32) -> Self {
        self.config.max_continuations = continuations;
        self
    }

    /// Journals every run in this store (see [`crate::store`]): each durable event is
    /// appended before it is streamed, and [`Agent::resume`] continues a run from it.
    pub fn store(mut self, store: Arc<dyn RunStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// How long a run's lease lasts without renewal (default [`DEFAULT_LEASE_TTL`]): the
    /// executor renews it every third of that; a run whose process died can be resumed
    /// elsewhere once it expired (see [`crate::store::lease`]).
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// When the store commits the journal (default [`Durability::Sync`]; see
    /// [`Durability`] for what a crash may lose in each mode).
    ///
    /// [`Durability`]: crate::store::Durability
    /// [`Durability::Sync`]: crate::store::Durability::Sync
    pub fn durability(mut self, durability: crate::store::Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Shows every run's events to `observer` (telemetry: see [`crate::observe`]).
    pub fn observer(mut self, observer: Arc<dyn crate::observe::Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Redacts `secret` (a token, a password; 8 characters or more) from every tool result
    /// and tool error before it is journaled, streamed or shown to the model. The provider's
    /// own secrets (its API key, its credential headers) are redacted without this.
    pub fn secret(mut self, secret: impl AsRef<str>) -> Self {
        self.secrets.add(secret.as_ref());
        self
    }

    /// [`secret`](Self::secret) for each of `secrets`.
    pub fn secrets(mut self, secrets: &crate::provider::secrets::Secrets) -> Self {
        self.secrets.extend(secrets);
        self
    }

    /// Keeps the conversations of multi-turn sessions ([`Agent::session`]) in this store.
    pub fn session_store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.sessions = Some(store);
        self
    }

    /// Checks the settings and builds the agent.
    pub fn build(mut self) -> Result<Agent, BuildError> {
        if let Some(error) = self.errors.first() {
            return Err(BuildError::InvalidSetting(error.clone()));
        }
        if self.concurrency == 0 {
            return Err(BuildError::InvalidSetting("tool_concurrency must be at least 1".into()));
        }
        if self.config.limits.max_iterations == 0 {
            return Err(BuildError::InvalidSetting("max_iterations must be at least 1".into()));
        }
        if self.config.limits.max_cost_usd.is_some() && self.config.price.is_none() {
            return Err(BuildError::InvalidSetting("max_cost_usd needs a price".into()));
        }
        if self.tool_timeout.is_zero() {
            return Err(BuildError::InvalidSetting("tool_timeout must be positive".into()));
        }
        if self.config.require_done_tool
            && !self.registry.contains(<TaskComplete as Tool>::NAME)
            && !self.sets.iter().any(|s| s.specs().iter().any(|t| t.name == TaskComplete::NAME))
        {
            self.registry
                .register_dyn(Arc::new(TaskComplete))
                .map_err(|e| BuildError::InvalidSetting(e.to_string()))?;
        }
        let mut sets: Vec<Arc<dyn ToolSet>> = Vec::with_capacity(self.sets.len() + 1);
        if !self.registry.is_empty() {
            sets.push(Arc::new(self.registry));
        }
        sets.extend(self.sets);
        let tools = ToolExecutor::new(sets, self.tool_timeout)?;
        self.config.tools = tools.specs();
        let mut provider = self.provider;
        let prompted = self.tool_protocol.prompted_format(provider.as_ref());
        let tool_protocol = match &prompted {
            Some(format) => format!("prompted:{format:?}"),
            None => "native".into(),
        };
        if let Some(format) = prompted {
            let protocol = crate::provider::PromptedProtocol::new(format);
            provider = Arc::new(crate::provider::PromptedTools::with_protocol(provider, protocol));
        }
        let step_tool_choice = self.step_tool_choice.as_ref().map(|policy| format!("{policy:?}"));
        if let Some(policy) = self.step_tool_choice {
            provider = Arc::new(crate::provider::ToolChoicePolicy::new(provider, policy));
        }
        let identity = RunIdentity {
            provider: provider.family().to_owned(),
            model: provider.name().to_owned(),
            tool_protocol,
            step_tool_choice,
            config_hash: String::new(),
        };
        let retry = self.retry.unwrap_or_else(|| provider.retry_policy());
        let mut secrets = provider.secrets();
        secrets.extend(&self.secrets);
        let model = provider.name().to_owned();
        if self.config.context.context_window.is_none() {
            self.config.context.context_window = crate::context::context_window_for(&model);
        }
        let counter = match self.counter {
            Some(counter) => Some(counter),
            None if crate::context::tokens::openai_encoding(&model).is_some() => {
                Some(crate::context::counter_for_model(&model))
            }
            None => None,
        };
        Ok(Agent {
            driver: Driver {
                retry,
                counter,
                provider,
                tools: Arc::new(tools),
                hooks: Arc::new(self.hooks),
                concurrency: self.concurrency,
                quiet: false,
                observer: None,
                secrets: Arc::new(secrets),
            },
            config: Arc::new(self.config),
            controls: self.store.clone().map(|store| {
                crate::store::control_watch::ControlWatch::new(store, REMOTE_CONTROL_POLL)
            }),
            store: self.store,
            sessions: self.sessions,
            lease_ttl: self.lease_ttl,
            durability: self.durability,
            identity,
            observer: self.observer,
        })
    }
}
