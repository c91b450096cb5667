//! A pool of workers that execute runs from a queue in Redis Streams (feature `redis`).
//!
//! A run is **submitted** ([`Queue::submit`]): its start is journaled in the run store first
//! ([`Agent::create_run`]), then a job naming the run is added to its agent's stream. Every
//! [`Worker`] joins the streams' consumer group, claims jobs (`XREADGROUP`) up to its
//! concurrency, and executes each under the run's lease — resuming it from its journal, so a
//! job is the same whether the run is new, continued after a human decision, or taken over
//! from a worker that died. The job is acknowledged (and deleted) once the run finished,
//! failed, was cancelled, or suspended for a human; a decision, an answer or a cancel given
//! through a [`RunService`] that continues runs with the queue
//! ([`RunService::continue_with`]) adds the run's next job.
//!
//! **Takeover.** A worker touches its jobs every third of the takeover time (a heartbeat);
//! a job left untouched that long — its worker died — is taken over by another worker
//! (`XAUTOCLAIM`), which resumes the run once the dead worker's lease has expired. A tool
//! whose result is journaled never runs again; a tool that was in flight runs again only if
//! it is declared safe to retry ([`Tool::safe_to_retry`](crate::tool::Tool::safe_to_retry));
//! otherwise the run stops in `needs_attention` for an operator
//! ([`RunService::retry_call`], [`RunService::set_result`], [`RunService::fail_call`]). A job
//! delivered more than [`WorkerOptions::max_deliveries`] times (it kills its workers) goes to
//! the dead-letter stream, and its run is failed with the reason.
//!
//! **Drain.** A worker told to stop ([`Worker::run`]'s token: SIGTERM in `agentloop worker`)
//! claims nothing more, stops its runs at their next safe point
//! ([`RunHandle::stop_at_safe_point`](crate::RunHandle::stop_at_safe_point): no tool running,
//! nothing journaled for the stop), releases their leases and hands their jobs back, so
//! another worker continues them at once.
//!
//! ```no_run
//! # async fn demo(agent: agentloop::Agent) -> Result<(), agentloop::worker::WorkerError> {
//! use agentloop::worker::{Queue, Worker};
//! use tokio_util::sync::CancellationToken;
//! let queue = Queue::connect("redis://127.0.0.1:6379").await?;
//! let run_id = queue.submit("support", &agent, "Where is my order?", Default::default()).await?;
//! let worker = Worker::builder(queue).agent("support", agent).build()?;
//! let report = worker.run(CancellationToken::new()).await?;
//! # Ok(()) }
//! ```

mod execute;
mod queue;

pub use queue::{
    AgentQueue, DeadLetter, Enqueued, JobKind, Queue, QueueOptions, QueueStatus, GROUP,
};

use crate::agent::{Agent, RunInput, RunOptions};
use crate::error::ResumeError;
use crate::service::{ContinueRun, RunService};
use crate::store::{RunState, RunStore, StoreError};
use queue::Job;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Why a queue or a worker failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// Redis failed (connection, command).
    #[error("redis: {0}")]
    Redis(String),
    /// The agent's stream is full ([`QueueOptions::max_queued`]).
    #[error(
        "the queue of agent '{agent}' is full ({depth} of at most {max} jobs waiting or \
         executing): try again when the workers have caught up"
    )]
    QueueFull {
        /// The agent.
        agent: String,
        /// Jobs in its stream.
        depth: u64,
        /// The bound.
        max: u64,
    },
    /// The run store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run could not be started or continued.
    #[error(transparent)]
    Resume(#[from] ResumeError),
    /// A request that cannot be served as asked.
    #[error("{0}")]
    Invalid(String),
}

/// How a [`Worker`] works.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkerOptions {
    /// Runs executed at once (default 8).
    pub concurrency: usize,
    /// How long a draining worker lets its runs reach a safe point (default 30 s); runs that
    /// have not are left to be taken over.
    pub drain: Duration,
    /// Deliveries of a job before it goes to the dead-letter stream and its run fails
    /// (default 5): a job that kills every worker that takes it.
    pub max_deliveries: u64,
    /// Workers that may refuse a job (their agent's configuration differs from the run's)
    /// before it goes to the dead-letter stream (default 3).
    pub max_refusals: u32,
    /// How long a job goes untouched before another worker takes it over (default: the
    /// longest lease TTL of the worker's agents, plus 2 s).
    pub takeover_after: Option<Duration>,
    /// How long a read waits for new jobs (default 1 s): also how late a drain can start.
    pub block: Duration,
    /// How often the worker sweeps its agents' runs that have no job ([`Queue::sweep`];
    /// default 30 s; `None`: never). A run is swept once it has been idle for twice the
    /// takeover time.
    pub sweep_every: Option<Duration>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            concurrency: 8,
            drain: Duration::from_secs(30),
            max_deliveries: 5,
            max_refusals: 3,
            takeover_after: None,
            block: Duration::from_secs(1),
            sweep_every: Some(Duration::from_secs(30)),
        }
    }
}

impl WorkerOptions {
    /// Sets the concurrency (at least 1).
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Sets the drain deadline.
    pub fn drain(mut self, drain: Duration) -> Self {
        self.drain = drain;
        self
    }

    /// Sets the deliveries before a job is dead-lettered (at least 1).
    pub fn max_deliveries(mut self, deliveries: u64) -> Self {
        self.max_deliveries = deliveries.max(1);
        self
    }

    /// Sets the takeover time.
    pub fn takeover_after(mut self, after: Duration) -> Self {
        self.takeover_after = Some(after);
        self
    }

    /// Sets how often the worker sweeps for runs without a job (`None`: never).
    pub fn sweep_every(mut self, every: Option<Duration>) -> Self {
        self.sweep_every = every;
        self
    }

    /// Sets how long a read waits for new jobs.
    pub fn block(mut self, block: Duration) -> Self {
        self.block = block.max(Duration::from_millis(1));
        self
    }
}

/// How a job ended for the worker that had it (what a [`WorkerObserver`] is told).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobOutcome {
    /// The run finished, failed or was cancelled.
    Ended,
    /// The run waits for a human (approval, an answer).
    Suspended,
    /// The run waits for an operator (`needs_attention`).
    NeedsAttention,
    /// Stopped at a safe point while draining, and handed back.
    HandedOver,
    /// Refused (another configuration of the agent) and requeued.
    Refused,
    /// Moved to the dead-letter stream.
    DeadLettered,
    /// Left pending, for a takeover (the journal failed, the run could not start).
    Interrupted,
}

impl JobOutcome {
    /// Its name in metrics: `ended`, `suspended`, `needs_attention`, `handed_over`,
    /// `refused`, `dead_lettered`, `interrupted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ended => "ended",
            Self::Suspended => "suspended",
            Self::NeedsAttention => "needs_attention",
            Self::HandedOver => "handed_over",
            Self::Refused => "refused",
            Self::DeadLettered => "dead_lettered",
            Self::Interrupted => "interrupted",
        }
    }
}

/// Told what a worker does, as it does it: for metrics (`agentloop-otel` records them as
/// OpenTelemetry instruments). Calls are made on the worker's tasks: keep them short.
pub trait WorkerObserver: Send + Sync {
    /// A job was claimed, `waited` after it was queued; `takeover`: from a worker that died.
    fn claimed(&self, agent: &str, waited: Duration, takeover: bool);
    /// A job ended for this worker.
    fn ended(&self, agent: &str, outcome: JobOutcome);
    /// The agent's queue, read every third of the takeover time: jobs not done (`depth`) and
    /// delivered to a worker (`pending`), and this worker's runs of it.
    fn queue(&self, agent: &str, depth: u64, pending: u64, in_flight: u64);
}

/// What a worker did, when it stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerReport {
    /// Jobs taken (new and taken over).
    pub jobs: u64,
    /// Jobs taken over from a worker that died.
    pub takeovers: u64,
    /// Runs that ended (finished, failed, cancelled) under this worker.
    pub ended: u64,
    /// Runs that suspended for a human (approval, input).
    pub suspended: u64,
    /// Runs that wait for an operator (`needs_attention`).
    pub needs_attention: u64,
    /// Runs stopped at a safe point and handed back while draining.
    pub handed_over: u64,
    /// Jobs refused (another configuration of the agent).
    pub refused: u64,
    /// Jobs moved to the dead-letter stream.
    pub dead_letters: u64,
    /// Runs whose journal could not be written (the store failed, the lease was taken): the
    /// job stays pending and is taken over.
    pub interrupted: u64,
}

impl WorkerReport {
    fn add(&mut self, end: JobOutcome) {
        match end {
            JobOutcome::Ended => self.ended += 1,
            JobOutcome::Suspended => self.suspended += 1,
            JobOutcome::NeedsAttention => self.needs_attention += 1,
            JobOutcome::HandedOver => self.handed_over += 1,
            JobOutcome::Refused => self.refused += 1,
            JobOutcome::DeadLettered => self.dead_letters += 1,
            JobOutcome::Interrupted => self.interrupted += 1,
        }
    }
}

impl Queue {
    /// Submits a run of `agent` (served by the workers under the name `name`): journals its
    /// start in the agent's store ([`Agent::create_run`]) and adds its job. The journal comes
    /// first, so an accepted run is never lost: should the job not be added (Redis went
    /// away, the process died), the run is in the store, and a worker's sweep
    /// ([`Queue::sweep`]) queues it. A full queue refuses the run
    /// ([`WorkerError::QueueFull`]) and removes its start. Returns the run's id.
    pub async fn submit(
        &self,
        name: &str,
        agent: &Agent,
        input: impl Into<RunInput>,
        options: RunOptions,
    ) -> Result<String, WorkerError> {
        check_name(name, agent)?;
        let run_id = agent.create_run(input, options).await?;
        match self.enqueue(name, &run_id, JobKind::Start).await {
            Ok(_) => Ok(run_id),
            Err(full @ WorkerError::QueueFull { .. }) => {
                // Refused: the run was not taken, and leaves nothing behind.
                if let Some(store) = agent.store() {
                    if let Err(error) = store.delete_run(&run_id).await {
                        tracing::warn!(%error, run_id, "submit: a refused run stays journaled; a sweep queues it");
                    }
                }
                Err(full)
            }
            Err(error) => Err(WorkerError::Invalid(format!(
                "run '{run_id}' was journaled but not queued ({error}); a worker's sweep queues \
                 it (or Queue::enqueue)"
            ))),
        }
    }

    /// Adds a job that continues `run_id`, for the agent named in its journal
    /// (`RunConfig::agent`).
    pub async fn continue_run(
        &self,
        store: &dyn RunStore,
        run_id: &str,
    ) -> Result<Enqueued, WorkerError> {
        let first = store.load_from(run_id, 0).await?;
        let Some(first) = first.first() else {
            return Err(WorkerError::Invalid(format!("no run '{run_id}' in the store")));
        };
        let crate::event::Event::RunStarted { config, .. } = &*first.event else {
            return Err(WorkerError::Invalid(format!("run '{run_id}' has no `run_started`")));
        };
        let Some(agent) = &config.agent else {
            return Err(WorkerError::Invalid(format!(
                "run '{run_id}' was started by an agent without a name: no worker serves it"
            )));
        };
        self.enqueue(agent, run_id, JobKind::Continue).await
    }

    /// Queues the runs of `agent` that have a start but no job and nobody executing them: no
    /// live lease, no live job, and no journal entry for `idle_for` — a submitter that died
    /// between its journal and its job, or a process that executed the run in-process and
    /// died. A run whose last job went to the dead letters is left alone. Looks at `limit`
    /// such runs at most (newest first). Returns how many it queued.
    pub async fn sweep(
        &self,
        store: &dyn RunStore,
        agent: &str,
        idle_for: Duration,
        limit: usize,
    ) -> Result<usize, WorkerError> {
        let mut filter = crate::store::RunFilter::all().agent(agent).state(RunState::Running);
        filter.limit = Some(limit);
        let now = crate::store::now_ms();
        let idle_ms = u64::try_from(idle_for.as_millis()).unwrap_or(u64::MAX);
        let mut queued = 0;
        for run in store.list_runs(&filter).await? {
            if run.lease_is_live(now) || run.updated_ms.saturating_add(idle_ms) > now {
                continue;
            }
            if self.has_job(&run.run_id).await? {
                continue;
            }
            let enqueued = self.enqueue_with(agent, &run.run_id, JobKind::Continue, true).await?;
            if let Enqueued::Added(_) = enqueued {
                tracing::info!(run_id = run.run_id, agent, "sweep: queued a run that had no job");
                queued += 1;
            }
        }
        Ok(queued)
    }

    /// The run service over `store` that continues runs with this queue once a decision, an
    /// answer or a cancel is recorded for them ([`RunService::continue_with`]).
    pub fn service(&self, store: Arc<dyn RunStore>) -> RunService {
        let continuation = Continuation { queue: self.clone(), store: store.clone() };
        RunService::new(store).continue_with(Arc::new(continuation))
    }
}

/// Continues runs through the queue (see [`Queue::service`]).
struct Continuation {
    queue: Queue,
    store: Arc<dyn RunStore>,
}

#[async_trait::async_trait]
impl ContinueRun for Continuation {
    async fn continue_run(&self, run_id: &str) -> Result<(), String> {
        self.queue
            .continue_run(self.store.as_ref(), run_id)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// A served agent must carry the name its jobs are queued under (a continuation finds the
/// stream by the name in the run's journal).
fn check_name(name: &str, agent: &Agent) -> Result<(), WorkerError> {
    match agent.config().agent.as_deref() {
        Some(own) if own == name => Ok(()),
        own => Err(WorkerError::Invalid(format!(
            "the agent served as '{name}' is named {own:?}: name it '{name}' \
             (AgentBuilder::name), so that its runs are continued by the same workers"
        ))),
    }
}

/// Builds a [`Worker`].
#[derive(Debug)]
pub struct WorkerBuilder {
    queue: Queue,
    agents: BTreeMap<String, Agent>,
    options: WorkerOptions,
    consumer: Option<String>,
    observer: Option<Arc<dyn WorkerObserver>>,
}

impl std::fmt::Debug for dyn WorkerObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkerObserver")
    }
}

impl WorkerBuilder {
    /// Serves `agent` under `name` (the agent's own name: [`AgentBuilder::name`](crate::AgentBuilder::name)).
    pub fn agent(mut self, name: impl Into<String>, agent: Agent) -> Self {
        self.agents.insert(name.into(), agent);
        self
    }

    /// Sets the options.
    pub fn options(mut self, options: WorkerOptions) -> Self {
        self.options = options;
        self
    }

    /// Tells `observer` what the worker does (metrics).
    pub fn observer(mut self, observer: Arc<dyn WorkerObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Sets the worker's name in the consumer group (default: host name, process id and a
    /// random suffix).
    pub fn consumer(mut self, name: impl Into<String>) -> Self {
        self.consumer = Some(name.into());
        self
    }

    /// The worker; refused without an agent, or for an agent without a store or named
    /// otherwise than it is served.
    pub fn build(self) -> Result<Worker, WorkerError> {
        if self.agents.is_empty() {
            return Err(WorkerError::Invalid("a worker needs at least one agent".into()));
        }
        for (name, agent) in &self.agents {
            check_name(name, agent)?;
            if agent.store().is_none() {
                return Err(WorkerError::Invalid(format!(
                    "agent '{name}' has no run store: a worker executes runs from a store"
                )));
            }
        }
        let longest = self.agents.values().map(|agent| agent.lease_ttl()).max();
        let takeover = self
            .options
            .takeover_after
            .unwrap_or_else(|| longest.unwrap_or_default() + Duration::from_secs(2));
        let consumer = self.consumer.unwrap_or_else(default_consumer);
        Ok(Worker {
            queue: self.queue,
            agents: Arc::new(self.agents),
            options: self.options,
            takeover,
            consumer,
            observer: self.observer,
        })
    }
}

/// `host-pid-xxxx`.
fn default_consumer() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "worker".into());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}-{}", std::process::id(), &suffix[..6])
}

/// Executes runs from a [`Queue`] (see the [module docs](self)).
#[derive(Debug)]
pub struct Worker {
    queue: Queue,
    agents: Arc<BTreeMap<String, Agent>>,
    options: WorkerOptions,
    takeover: Duration,
    consumer: String,
    observer: Option<Arc<dyn WorkerObserver>>,
}

/// The jobs a worker executes now, by entry id: their agent.
type InFlight = Arc<Mutex<HashMap<String, String>>>;

impl Worker {
    /// A worker on `queue`.
    pub fn builder(queue: Queue) -> WorkerBuilder {
        WorkerBuilder {
            queue,
            agents: BTreeMap::new(),
            options: WorkerOptions::default(),
            consumer: None,
            observer: None,
        }
    }

    /// Its name in the consumer group.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// Claims and executes jobs until `shutdown` is cancelled, then drains (see the
    /// [module docs](self)). Redis going away is waited out (and logged); the worker goes on
    /// when it is back.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<WorkerReport, WorkerError> {
        let names: Vec<String> = self.agents.keys().cloned().collect();
        let mut backoff = Backoff::default();
        for name in &names {
            while let Err(error) = self.queue.ensure_group(name).await {
                tracing::warn!(%error, agent = name, "worker: cannot reach the queue; retrying");
                if !backoff.wait(&shutdown).await {
                    return Ok(WorkerReport::default());
                }
            }
        }
        tracing::info!(consumer = self.consumer, agents = ?names, "worker: started");
        let in_flight: InFlight = Arc::default();
        let draining = CancellationToken::new();
        // Stops with this future, however it ends (dropped too: a worker that is aborted
        // touches nothing more, like one that was killed).
        let beat = Heartbeat {
            queue: self.queue.clone(),
            consumer: self.consumer.clone(),
            in_flight: in_flight.clone(),
            takeover: self.takeover,
            observed: self.observer.clone().map(|observer| (observer, names.clone())),
        };
        let heartbeat = AbortOnDrop(tokio::spawn(beat.run()));
        let mut tasks: JoinSet<(String, JobOutcome)> = JoinSet::new();
        let mut report = WorkerReport::default();
        let mut next_takeover = tokio::time::Instant::now();
        let mut next_sweep = tokio::time::Instant::now();
        while !shutdown.is_cancelled() {
            if let Some(every) = self.options.sweep_every {
                if tokio::time::Instant::now() >= next_sweep {
                    next_sweep = tokio::time::Instant::now() + every;
                    self.sweep().await;
                }
            }
            while let Some(done) = tasks.try_join_next() {
                finished(&in_flight, &mut report, self.observer.as_deref(), done);
            }
            let free = self.options.concurrency.saturating_sub(tasks.len());
            if free == 0 {
                tokio::select! {
                    done = tasks.join_next() => if let Some(done) = done {
                        finished(&in_flight, &mut report, self.observer.as_deref(), done);
                    },
                    () = shutdown.cancelled() => {}
                }
                continue;
            }
            let jobs = match self.claim(&names, free, &mut next_takeover, &mut report).await {
                Ok(jobs) => {
                    backoff = Backoff::default();
                    jobs
                }
                Err(error) => {
                    tracing::warn!(%error, "worker: cannot read the queue; retrying");
                    backoff.wait(&shutdown).await;
                    continue;
                }
            };
            for job in jobs {
                report.jobs += 1;
                if let Some(observer) = &self.observer {
                    let queued = job.queued_ms.unwrap_or_else(crate::store::now_ms);
                    let waited = crate::store::now_ms().saturating_sub(queued);
                    let waited = Duration::from_millis(waited);
                    observer.claimed(&job.agent, waited, job.deliveries > 1);
                }
                lock(&in_flight).insert(job.id.clone(), job.agent.clone());
                let context = execute::Context {
                    queue: self.queue.clone(),
                    agents: self.agents.clone(),
                    options: self.options.clone(),
                    takeover: self.takeover,
                    draining: draining.clone(),
                };
                let id = job.id.clone();
                tasks.spawn(async move { (id, context.execute(job).await) });
            }
        }
        tracing::info!(consumer = self.consumer, runs = tasks.len(), "worker: draining");
        draining.cancel();
        let drained = tokio::time::timeout(self.options.drain, async {
            while let Some(done) = tasks.join_next().await {
                finished(&in_flight, &mut report, self.observer.as_deref(), done);
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                runs = tasks.len(),
                "worker: runs did not reach a safe point in time; they will be taken over"
            );
            report.interrupted += tasks.len() as u64;
            tasks.abort_all();
        }
        drop(heartbeat);
        // The queues as the worker leaves them, for gauges that keep the last value.
        if let Some(observer) = &self.observer {
            for name in &names {
                if let Ok((depth, pending)) = self.queue.depth(name).await {
                    let mine = lock(&in_flight).values().filter(|agent| *agent == name).count();
                    observer.queue(name, depth, pending, mine as u64);
                }
            }
        }
        if lock(&in_flight).is_empty() {
            for name in &names {
                if let Err(error) = self.queue.leave(name, &self.consumer).await {
                    tracing::debug!(%error, "worker: could not leave the group");
                }
            }
        }
        tracing::info!(consumer = self.consumer, ?report, "worker: stopped");
        Ok(report)
    }

    /// Queues the runs of its agents that have no job ([`Queue::sweep`]); failures are
    /// logged (the next sweep tries again).
    async fn sweep(&self) {
        for (name, agent) in self.agents.iter() {
            let Some(store) = agent.store() else { continue };
            let swept = self.queue.sweep(store.as_ref(), name, self.takeover * 2, 1_000).await;
            if let Err(error) = swept {
                tracing::warn!(%error, agent = name, "worker: sweep failed");
            }
        }
    }

    /// New jobs, after the jobs of dead workers (looked for every third of the takeover
    /// time).
    async fn claim(
        &self,
        names: &[String],
        free: usize,
        next_takeover: &mut tokio::time::Instant,
        report: &mut WorkerReport,
    ) -> Result<Vec<Job>, WorkerError> {
        let mut jobs = Vec::new();
        if tokio::time::Instant::now() >= *next_takeover {
            *next_takeover = tokio::time::Instant::now() + self.takeover / 3;
            for name in names {
                let left = free - jobs.len();
                if left == 0 {
                    break;
                }
                let taken = self.queue.autoclaim(name, &self.consumer, self.takeover, left).await?;
                for job in &taken {
                    tracing::info!(run_id = ?job.run_id, job = job.id, deliveries = job.deliveries, "worker: taking over a job");
                }
                report.takeovers += taken.len() as u64;
                jobs.extend(taken);
            }
        }
        if jobs.is_empty() {
            // An agent whose limit the pool has reached is not read from until a slot frees.
            let limits = self.queue.limits().await?;
            let mut open = Vec::with_capacity(names.len());
            for name in names {
                match limits.get(name) {
                    Some(&limit) if self.queue.slots_in_use(name).await? >= u64::from(limit) => {}
                    _ => open.push(name.clone()),
                }
            }
            if open.is_empty() {
                tokio::time::sleep(self.options.block.min(Duration::from_millis(200))).await;
                return Ok(jobs);
            }
            jobs = self.queue.read(&self.consumer, &open, free, self.options.block).await?;
        }
        Ok(jobs)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A job's task ended.
fn finished(
    in_flight: &InFlight,
    report: &mut WorkerReport,
    observer: Option<&dyn WorkerObserver>,
    done: Result<(String, JobOutcome), tokio::task::JoinError>,
) {
    match done {
        Ok((id, end)) => {
            let agent = lock(in_flight).remove(&id);
            report.add(end);
            if let (Some(observer), Some(agent)) = (observer, agent) {
                observer.ended(&agent, end);
            }
        }
        Err(error) => {
            // A panic in a run's task: the job stays pending and is taken over.
            tracing::error!(%error, "worker: a job's task failed");
            report.interrupted += 1;
        }
    }
}

/// The worker's heartbeat.
struct Heartbeat {
    queue: Queue,
    consumer: String,
    in_flight: InFlight,
    takeover: Duration,
    /// The observer told of the queues of these agents.
    observed: Option<(Arc<dyn WorkerObserver>, Vec<String>)>,
}

impl Heartbeat {
    /// Touches the worker's jobs every third of the takeover time, so that none is taken
    /// over (and no slot of theirs expires) while it lives; reads the queues for the
    /// observer.
    async fn run(self) {
        let every = (self.takeover / 3).max(Duration::from_millis(10));
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let mut by_agent: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (id, agent) in lock(&self.in_flight).iter() {
                by_agent.entry(agent.clone()).or_default().push(id.clone());
            }
            for (agent, ids) in &by_agent {
                let touched = self.queue.touch(agent, &self.consumer, ids, self.takeover).await;
                if let Err(error) = touched {
                    tracing::warn!(%error, agent, "worker: heartbeat failed");
                }
            }
            let Some((observer, names)) = &self.observed else { continue };
            for name in names {
                if let Ok((depth, pending)) = self.queue.depth(name).await {
                    let mine = by_agent.get(name).map_or(0, Vec::len) as u64;
                    observer.queue(name, depth, pending, mine);
                }
            }
        }
    }
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Waits longer after each failure (100 ms doubling up to 5 s).
#[derive(Default)]
struct Backoff {
    failures: u32,
}

impl Backoff {
    /// Waits; `false` when `shutdown` came first.
    async fn wait(&mut self, shutdown: &CancellationToken) -> bool {
        let delay =
            Duration::from_millis(100 * 2u64.pow(self.failures.min(6))).min(Duration::from_secs(5));
        self.failures += 1;
        tokio::select! {
            () = tokio::time::sleep(delay) => true,
            () = shutdown.cancelled() => false,
        }
    }
}

#[cfg(test)]
mod tests;
