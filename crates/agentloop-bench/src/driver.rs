//! `bench-driver`: runs one driver (floor, agentloop or a trivial client) against a mock
//! server with C concurrent agents, a warm-up phase and a measured phase, and measures the
//! measured phase: wall time, the process's CPU time, rounds, peak RSS.

use crate::floor::{Floor, Round};
use crate::measure;
use crate::report::{DriverReport, History};
use crate::scenario::{Script, FINAL_ANSWER};
use crate::timed_store::TimedStore;
use crate::via_agentloop;
use agentloop::Agent;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which implementation drives the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The raw reqwest loop.
    Floor,
    /// agentloop's `Agent`.
    Agentloop,
    /// One fixed request per run, no JSON handling: measures the server's capacity.
    Trivial,
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "floor" => Ok(Self::Floor),
            "agentloop" => Ok(Self::Agentloop),
            "trivial" => Ok(Self::Trivial),
            other => Err(format!("unknown driver {other:?} (floor, agentloop, trivial)")),
        }
    }
}

impl Kind {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Floor => "floor",
            Self::Agentloop => "agentloop",
            Self::Trivial => "trivial",
        }
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The implementation.
    pub kind: Kind,
    /// The mock's base URL, e.g. `http://127.0.0.1:8080/v1`.
    pub url: String,
    /// The conversation.
    pub script: Script,
    /// Streamed responses.
    pub stream: bool,
    /// Concurrent agents.
    pub concurrency: u64,
    /// Runs per agent before measuring (they also open the connections).
    pub warmup: u64,
    /// Measured runs per agent.
    pub runs: u64,
    /// Record per-round CPU of the first measured run (history scenario; concurrency 1).
    pub history: bool,
    /// Where agentloop's runs are journaled (`--store`; none by default).
    pub store: JournalStore,
    /// The runtime's `global_queue_interval` (`--global-queue-interval`; tokio's default when
    /// `None`): every how many polls a task woken from another thread (an answer of SQLite's
    /// writer thread) is taken before the tasks woken on the runtime's own thread.
    pub global_queue_interval: Option<u32>,
    /// [`SqliteOptions::wake_per_batch`](agentloop::store::sqlite::SqliteOptions) (`true`
    /// unless `--wake-direct`).
    pub wake_per_batch: bool,
}

/// Where agentloop's runs are journaled in the benchmark (`--store`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JournalStore {
    /// Not journaled (the agent has no store).
    #[default]
    None,
    /// The memory store.
    Memory,
    /// A SQLite file in the temporary directory, committed as the mode says.
    Sqlite(agentloop::store::Durability),
    /// Redis at `AGENTLOOP_REDIS_URL` (default `redis://127.0.0.1:6379`), under a key prefix
    /// of the process's own, committed as the mode says.
    Redis(agentloop::store::Durability),
}

impl std::str::FromStr for JournalStore {
    type Err = String;

    /// `none`, `memory`, `sqlite`, `sqlite-checkpoint`, `redis`, `redis-checkpoint`.
    fn from_str(text: &str) -> Result<Self, String> {
        use agentloop::store::Durability::{Checkpoint, Sync};
        Ok(match text {
            "none" => Self::None,
            "memory" => Self::Memory,
            "sqlite" => Self::Sqlite(Sync),
            "sqlite-checkpoint" => Self::Sqlite(Checkpoint),
            "redis" => Self::Redis(Sync),
            "redis-checkpoint" => Self::Redis(Checkpoint),
            other => return Err(format!("unknown store {other:?}")),
        })
    }
}

impl JournalStore {
    /// The `--store` argument that names it.
    pub fn name(self) -> &'static str {
        use agentloop::store::Durability::{Checkpoint, Off, Sync};
        match self {
            Self::None => "none",
            Self::Memory => "memory",
            Self::Sqlite(Sync | Off) => "sqlite",
            Self::Sqlite(Checkpoint) => "sqlite-checkpoint",
            Self::Redis(Sync | Off) => "redis",
            Self::Redis(Checkpoint) => "redis-checkpoint",
        }
    }

    /// Deletes every run the benchmark journaled in `store` (and the SQLite file).
    pub async fn clean(self, store: &dyn agentloop::store::RunStore) -> Result<(), String> {
        if let Self::Sqlite(_) = self {
            for suffix in ["", "-wal", "-shm"] {
                let path = Self::sqlite_path().with_extension(format!("db{suffix}"));
                let _ = std::fs::remove_file(path);
            }
            return Ok(());
        }
        crate::delete_all_runs(store).await.map_err(|e| e.to_string())
    }

    /// The SQLite file of this process's benchmark.
    fn sqlite_path() -> std::path::PathBuf {
        std::env::temp_dir().join(format!("agentloop-bench-{}.db", std::process::id()))
    }

    /// The store and its durability (`None`: no store); a SQLite store wakes the runs it
    /// answers once per batch or not as `wake_per_batch` says.
    pub async fn open(
        self,
        wake_per_batch: bool,
    ) -> Result<Option<(Arc<dyn agentloop::store::RunStore>, agentloop::store::Durability)>, String>
    {
        use agentloop::store::{redis, sqlite, Durability, MemoryStore};
        let pid = std::process::id();
        Ok(match self {
            Self::None => None,
            Self::Memory => Some((Arc::new(MemoryStore::new()), Durability::Sync)),
            Self::Sqlite(mode) => {
                let options = sqlite::SqliteOptions { wake_per_batch, ..Default::default() };
                let store = sqlite::SqliteStore::open_with(Self::sqlite_path(), options)
                    .map_err(|e| e.to_string())?;
                Some((Arc::new(store), mode))
            }
            Self::Redis(mode) => {
                let url = std::env::var("AGENTLOOP_REDIS_URL")
                    .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
                let options =
                    redis::RedisOptions::default().prefix(format!("agentloop-bench:{pid}:"));
                let store = redis::RedisStore::connect_with(&url, options)
                    .await
                    .map_err(|e| e.to_string())?;
                Some((Arc::new(store), mode))
            }
        })
    }
}

impl Plan {
    /// HTTP requests the plan makes when every run succeeds.
    pub fn expected_requests(&self) -> u64 {
        let per_run = if self.kind == Kind::Trivial { 1 } else { self.script.requests_per_run() };
        self.concurrency * (self.warmup + self.runs) * per_run
    }
}

enum Job {
    Floor(Floor),
    /// The agent, and (history scenario) where its provider records encode times.
    Agent(Box<Agent>, Option<via_agentloop::Encodings>),
    Trivial {
        client: reqwest::Client,
        url: String,
        body: bytes::Bytes,
    },
}

impl Job {
    /// One run: its round trips, or why it failed.
    async fn run_once(&self, expected_rounds: u64) -> Result<u64, String> {
        match self {
            Job::Floor(floor) => {
                let run = floor.run().await.map_err(|e| e.to_string())?;
                check(&run.answer, u64::from(run.rounds), expected_rounds)
            }
            Job::Agent(agent, _) => {
                let outcome = via_agentloop::run(agent).await.map_err(|e| e.to_string())?;
                check(&outcome.answer, u64::from(outcome.iterations), expected_rounds)
            }
            Job::Trivial { client, url, body } => {
                let response = client
                    .post(url)
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                if !response.status().is_success() {
                    return Err(format!("HTTP {}", response.status()));
                }
                response.bytes().await.map_err(|e| e.to_string())?;
                Ok(1)
            }
        }
    }
}

fn check(answer: &str, rounds: u64, expected: u64) -> Result<u64, String> {
    if answer != FINAL_ANSWER || rounds != expected {
        return Err(format!(
            "wrong run: answer {answer:?} after {rounds} rounds, expected {expected}"
        ));
    }
    Ok(rounds)
}

#[derive(Default)]
struct Tally {
    runs: u64,
    rounds: u64,
    errors: u64,
    first_error: Option<String>,
    /// Per successful run: its wall time per round less the model's latency, µs.
    added_us: Vec<f64>,
}

async fn phase(
    job: &Arc<Job>,
    concurrency: u64,
    runs: u64,
    expected_rounds: u64,
    latency: Duration,
) -> Tally {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let job = job.clone();
        tasks.spawn(async move {
            let mut tally = Tally::default();
            for _ in 0..runs {
                let started = Instant::now();
                match job.run_once(expected_rounds).await {
                    Ok(rounds) => {
                        tally.runs += 1;
                        tally.rounds += rounds;
                        let per_round = started.elapsed().as_secs_f64() / rounds.max(1) as f64;
                        tally.added_us.push((per_round - latency.as_secs_f64()) * 1e6);
                    }
                    Err(error) => {
                        tally.errors += 1;
                        tally.first_error.get_or_insert(error);
                    }
                }
            }
            tally
        });
    }
    let mut total = Tally::default();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(tally) => {
                total.runs += tally.runs;
                total.rounds += tally.rounds;
                total.added_us.extend(tally.added_us);
                total.errors += tally.errors;
                if total.first_error.is_none() {
                    total.first_error = tally.first_error;
                }
            }
            Err(e) => {
                total.errors += 1;
                total.first_error.get_or_insert(e.to_string());
            }
        }
    }
    total
}

/// Runs `plan` on the current runtime.
pub async fn drive(plan: &Plan) -> Result<DriverReport, String> {
    let expected_rounds =
        if plan.kind == Kind::Trivial { 1 } else { plan.script.requests_per_run() };
    let journal = match plan.kind {
        Kind::Agentloop if !plan.history => plan.store.open(plan.wake_per_batch).await?,
        _ => None,
    };
    // The runs use the store through a timer of their calls; cleaning up uses it directly.
    let timed = journal.as_ref().map(|(store, _)| Arc::new(TimedStore::new(store.clone())));
    let runs_store = journal.as_ref().zip(timed.as_ref()).map(|((_, durability), timed)| {
        (timed.clone() as Arc<dyn agentloop::store::RunStore>, *durability)
    });
    let job = Arc::new(match plan.kind {
        Kind::Floor => {
            let client = agentloop::tls::http_client_builder()
                .map_err(|e| e.to_string())?
                .connect_timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| e.to_string())?;
            Job::Floor(Floor::new(client, &plan.url, plan.script, plan.stream))
        }
        Kind::Agentloop if plan.history => {
            let (provider, encodings) =
                via_agentloop::timed_provider(&plan.url, plan.script, plan.stream)
                    .map_err(|e| e.to_string())?;
            let agent = via_agentloop::agent(provider, plan.script).map_err(|e| e.to_string())?;
            Job::Agent(Box::new(agent), Some(encodings))
        }
        Kind::Agentloop => {
            let provider = via_agentloop::provider(&plan.url, plan.script, plan.stream)
                .map_err(|e| e.to_string())?;
            let agent = via_agentloop::agent_with_store(provider, plan.script, runs_store)
                .map_err(|e| e.to_string())?;
            Job::Agent(Box::new(agent), None)
        }
        Kind::Trivial => {
            let client = agentloop::tls::http_client_builder()
                .map_err(|e| e.to_string())?
                .build()
                .map_err(|e| e.to_string())?;
            let body = serde_json::json!({
                "model": Script::new(0, 1, plan.script.latency.as_millis() as u64).model_name(),
                "messages": [{"role": "user", "content": "go"}],
            });
            Job::Trivial {
                client,
                url: format!("{}/chat/completions", plan.url.trim_end_matches('/')),
                body: bytes::Bytes::from(body.to_string()),
            }
        }
    });
    let latency = plan.script.latency;
    let warm = phase(&job, plan.concurrency, plan.warmup, expected_rounds, latency).await;
    let mut report = DriverReport {
        driver: plan.kind.name().to_owned(),
        stream: plan.stream,
        concurrency: plan.concurrency,
        ..DriverReport::default()
    };
    let written = journal.as_ref().and_then(|(store, _)| store.write_stats());
    if let Some(timed) = &timed {
        timed.reset();
    }
    let written_bytes = measure::written();
    let wall = Instant::now();
    let cpu = measure::process_cpu();
    let machine = measure::machine_cpu();
    let thread_cpu = measure::thread_cpu();
    let measured = if plan.history {
        let (tally, history) = history_run(&job, expected_rounds).await?;
        report.history = Some(history);
        tally
    } else {
        phase(&job, plan.concurrency, plan.runs, expected_rounds, latency).await
    };
    // (For the history scenario this includes agentloop's capture run and encode timing.)
    report.cpu_us = (measure::process_cpu() - cpu).as_secs_f64() * 1e6;
    report.runtime_thread_cpu_us = (measure::thread_cpu() - thread_cpu).as_secs_f64() * 1e6;
    report.wall_us = wall.elapsed().as_secs_f64() * 1e6;
    report.store_calls = timed.as_ref().map(|t| t.times()).unwrap_or_default();
    report.machine_busy =
        machine.zip(measure::machine_cpu()).map(|(before, after)| after.busy_since(before));
    if let (Some((store, _)), Some(before)) = (&journal, written) {
        if let Some(after) = store.write_stats() {
            let w = after.since(before);
            report.writes = Some(crate::report::Writes {
                appends: w.appends,
                entries: w.entries,
                commits: w.commits,
                written_bytes: measure::written().saturating_sub(written_bytes),
                append_wait_us: w.append_wait_us,
                commit_busy_us: w.commit_busy_us,
            });
        }
    }
    report.runs = measured.runs;
    report.rounds = measured.rounds;
    report.errors = warm.errors + measured.errors;
    report.first_error = warm.first_error.or(measured.first_error);
    report.requests_sent = plan.expected_requests();
    report.peak_rss_kb = measure::status_kb("VmHWM").unwrap_or(0);
    let mut added = measured.added_us;
    report.added_latency_us = [percentile(&mut added, 0.50), percentile(&mut added, 0.99)];
    if let Some((store, _)) = &journal {
        report.journal = journal_size(store.as_ref()).await?;
        plan.store.clean(store.as_ref()).await?;
    }
    Ok(report)
}

/// The `q` quantile (0 to 1) of `values` (0 when empty).
fn percentile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    crate::measure::quantile(values, q).unwrap_or(0.0)
}

/// The size of one journaled run: its entries, and their bytes as the stores keep them (JSON).
async fn journal_size(
    store: &dyn agentloop::store::RunStore,
) -> Result<Option<crate::report::JournalSize>, String> {
    let filter = agentloop::store::RunFilter::all().limit(1);
    let runs = store.list_runs(&filter).await.map_err(|e| e.to_string())?;
    let Some(run) = runs.first() else { return Ok(None) };
    let entries = store.load(&run.run_id).await.map_err(|e| e.to_string())?;
    let mut bytes = 0;
    for entry in &entries {
        bytes += serde_json::to_vec(entry).map_err(|e| e.to_string())?.len() as u64;
    }
    Ok(Some(crate::report::JournalSize { entries: entries.len() as u64, bytes }))
}

/// Rounds whose CPU the history scenario samples: around round 10 and the last ten.
pub fn sampled_rounds(tool_rounds: u64) -> Vec<u64> {
    let mut rounds: Vec<u64> = (6..=15).filter(|r| *r <= tool_rounds).collect();
    rounds.extend((tool_rounds.saturating_sub(9).max(16)..=tool_rounds).filter(|r| *r >= 1));
    rounds
}

/// One run with per-round CPU and the CPU time of each request-body encoding recorded (a
/// timer around the encoding, in the floor's loop and in agentloop's wire format).
async fn history_run(job: &Arc<Job>, expected_rounds: u64) -> Result<(Tally, History), String> {
    let tool_rounds = expected_rounds - 1;
    let sampled = sampled_rounds(tool_rounds);
    let mut tally = Tally::default();
    let mut samples = Vec::new();
    match &**job {
        Job::Floor(floor) => {
            let mut rounds: Vec<Round> = Vec::new();
            let run = floor.run_recorded(Some(&mut rounds)).await.map_err(|e| e.to_string())?;
            tally.rounds = check(&run.answer, u64::from(run.rounds), expected_rounds)?;
            for &r in &sampled {
                let i = r as usize;
                if let (Some(this), Some(next)) = (rounds.get(i - 1), rounds.get(i)) {
                    let cpu = (next.cpu_at_start - this.cpu_at_start).as_secs_f64() * 1e6;
                    samples.push((r, cpu, this.encode.as_secs_f64() * 1e6));
                }
            }
        }
        Job::Agent(agent, encodings) => {
            let encodings = encodings.as_ref().ok_or("the history agent records no encodings")?;
            let first = encodings.lock().map(|e| e.len()).unwrap_or(0);
            let mut starts = Vec::new();
            let outcome =
                via_agentloop::run_recorded(agent, &mut starts).await.map_err(|e| e.to_string())?;
            tally.rounds = check(&outcome.answer, u64::from(outcome.iterations), expected_rounds)?;
            let encodings: Vec<Duration> =
                encodings.lock().map(|e| e[first..].to_vec()).unwrap_or_default();
            for &r in &sampled {
                let i = r as usize;
                if let (Some(this), Some(next), Some(encode)) =
                    (starts.get(i - 1), starts.get(i), encodings.get(i - 1))
                {
                    let cpu = (*next - *this).as_secs_f64() * 1e6;
                    samples.push((r, cpu, encode.as_secs_f64() * 1e6));
                }
            }
        }
        Job::Trivial { .. } => return Err("the history scenario needs floor or agentloop".into()),
    }
    tally.runs = 1;
    Ok((tally, History { rounds: tool_rounds, samples }))
}

/// Parses `bench-driver` arguments (`--driver floor --url U --k 10 --p 1 --latency-ms 0
/// --stream --concurrency 1 --warmup 5 --runs 40 --history --store sqlite
/// --global-queue-interval 31`).
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Plan, String> {
    let mut plan = Plan {
        kind: Kind::Floor,
        url: String::new(),
        script: Script::new(10, 1, 0),
        stream: false,
        concurrency: 1,
        warmup: 1,
        runs: 1,
        history: false,
        store: JournalStore::None,
        global_queue_interval: None,
        wake_per_batch: true,
    };
    let mut args = args.into_iter();
    let (mut k, mut p, mut l) = (10u32, 1u32, 0u64);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{v}: {e}"));
        match arg.as_str() {
            "--driver" => plan.kind = value()?.parse()?,
            "--url" => plan.url = value()?,
            "--k" => k = u32::try_from(number(value()?)?).map_err(|e| e.to_string())?,
            "--p" => p = u32::try_from(number(value()?)?).map_err(|e| e.to_string())?,
            "--latency-ms" => l = number(value()?)?,
            "--stream" => plan.stream = true,
            "--concurrency" => plan.concurrency = number(value()?)?.max(1),
            "--warmup" => plan.warmup = number(value()?)?,
            "--runs" => plan.runs = number(value()?)?,
            "--history" => plan.history = true,
            "--store" => plan.store = value()?.parse()?,
            "--wake-direct" => plan.wake_per_batch = false,
            "--global-queue-interval" => {
                let n = u32::try_from(number(value()?)?).map_err(|e| e.to_string())?;
                plan.global_queue_interval = Some(n.max(1));
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if p == 0 {
        return Err("--p must be at least 1".into());
    }
    if plan.url.is_empty() {
        return Err("--url is required".into());
    }
    plan.script = Script::new(k, p, l);
    Ok(plan)
}

#[cfg(test)]
mod tests;
