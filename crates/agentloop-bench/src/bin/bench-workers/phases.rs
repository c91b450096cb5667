//! The measured phases: the same runs executed in one process (C tasks, each running one run
//! after another) and through the queue by N worker processes; what each cost.

use crate::redis_info::{self, Snapshot, Usage};
use crate::setup::{Target, AGENT};
use agentloop::store::{RunFilter, RunState, RunStore, RunSummary};
use agentloop::RunOptions;
use agentloop_bench::measure::{self, MachineCpu};
use agentloop_bench::scenario::FINAL_ANSWER;
use anyhow::Context as _;
use redis::aio::MultiplexedConnection;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// How much to run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Runs per phase.
    pub runs: u64,
    /// Runs each worker executes at once.
    pub concurrency: usize,
    /// Runs submitted and not finished at most (default: workers × concurrency).
    pub window: Option<u64>,
    /// How often the submitter reads the queue's depth.
    pub poll: Duration,
    /// The longest a phase (and a child process) may take.
    pub max_seconds: u64,
}

/// The mock model: a `mockllm` process of our own, or one already running.
pub struct Mock {
    /// Its base URL.
    pub url: String,
    child: Option<Child>,
    client: reqwest::Client,
}

impl Mock {
    /// Starts `mockllm` from `bin_dir`; it exits by itself after `max_seconds`.
    pub async fn start(bin_dir: &Path, max_seconds: u64) -> anyhow::Result<Self> {
        let mut command = Command::new(bin_dir.join("mockllm"));
        command.args(["--listen", "127.0.0.1:0", "--max-seconds", &max_seconds.to_string()]);
        let (child, _, line) = spawn(command).await.context("starting mockllm")?;
        let url = line.strip_prefix("listening ").context("mockllm did not say where")?;
        Ok(Self { url: url.to_owned(), child: Some(child), client: http_client()? })
    }

    /// A mock already listening at `url`.
    pub fn at(url: String) -> anyhow::Result<Self> {
        Ok(Self { url, child: None, client: http_client()? })
    }

    /// Its process, when it is ours.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// Chat requests answered and refused so far.
    pub async fn requests(&self) -> anyhow::Result<(u64, u64)> {
        let url = format!("{}/stats", self.url.trim_end_matches("/v1"));
        let stats: serde_json::Value = self.client.get(url).send().await?.json().await?;
        let field = |name: &str| stats.get(name).and_then(serde_json::Value::as_u64).unwrap_or(0);
        Ok((field("requests"), field("errors")))
    }
}

/// An HTTP client configured as agentloop's (rustls on ring).
fn http_client() -> anyhow::Result<reqwest::Client> {
    Ok(agentloop::tls::http_client_builder()?.build()?)
}

/// Starts `command` with piped standard streams and reads its first line.
async fn spawn(
    mut command: Command,
) -> anyhow::Result<(Child, Lines<BufReader<ChildStdout>>, String)> {
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = command.kill_on_drop(true).spawn()?;
    let stdout = child.stdout.take().context("no standard output")?;
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .context("no first line within 30 s")??
        .context("exited before its first line")?;
    Ok((child, lines, line.trim().to_owned()))
}

/// A worker process.
struct WorkerProcess {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    pid: u32,
}

impl WorkerProcess {
    async fn start(target: &Target, settings: &Settings) -> anyhow::Result<Self> {
        let exe = std::env::current_exe()?;
        let mut command = Command::new(exe);
        command.arg("worker").args(target.args());
        command.args(["--concurrency", &settings.concurrency.to_string()]);
        command.args(["--max-seconds", &settings.max_seconds.to_string()]);
        let (child, lines, line) = spawn(command).await.context("starting a worker")?;
        anyhow::ensure!(line.starts_with("ready "), "a worker said {line:?}");
        let pid = child.id().context("a worker without a process id")?;
        Ok(Self { child, lines, pid })
    }

    /// Closes its standard input (it drains and stops) and reads its report.
    async fn stop(mut self) -> anyhow::Result<serde_json::Value> {
        drop(self.child.stdin.take());
        let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
            .await
            .context("a worker did not stop within 60 s")??
            .context("a worker exited without its report")?;
        let status = self.child.wait().await?;
        anyhow::ensure!(status.success(), "a worker exited with {status}");
        Ok(serde_json::from_str(&line)?)
    }
}

/// CPU time used by the processes of the bench, per phase.
#[derive(Debug, Clone, Default)]
pub struct Cpu {
    /// The phase's wall time, s.
    pub wall: f64,
    /// The executors: the worker processes, or this process when the runs are in process.
    pub executors: f64,
    /// The mock model (when it is ours).
    pub mock: Option<f64>,
    /// This process while workers executed (the submitter); 0 in process.
    pub submitter: f64,
    /// The busy share of the machine (0 to 1).
    pub machine_busy: Option<f64>,
}

struct Mark {
    at: Instant,
    own: Duration,
    mock: Option<Duration>,
    workers: Vec<Option<Duration>>,
    machine: Option<MachineCpu>,
    redis: Snapshot,
}

async fn mark(
    conn: &mut MultiplexedConnection,
    mock: Option<u32>,
    workers: &[u32],
) -> anyhow::Result<Mark> {
    Ok(Mark {
        redis: redis_info::snapshot(conn).await?,
        at: Instant::now(),
        own: measure::process_cpu(),
        mock: mock.and_then(measure::process_cpu_of),
        workers: workers.iter().map(|pid| measure::process_cpu_of(*pid)).collect(),
        machine: measure::machine_cpu(),
    })
}

fn secs(after: Option<Duration>, before: Option<Duration>) -> f64 {
    after.zip(before).map_or(0.0, |(a, b)| a.saturating_sub(b).as_secs_f64())
}

/// What a phase did.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// Runs executed at once (tasks in process; the submission window through the queue).
    pub concurrency: u64,
    /// Runs finished.
    pub runs: u64,
    /// Model calls.
    pub rounds: u64,
    /// From the first run's start (its `run_started` journaled: the submission) to the last
    /// run's end (its last entry journaled), s.
    pub span: f64,
    /// Per run, from its start to its end (ms, the journal's clock), sorted.
    pub latencies: Vec<u64>,
    /// The Redis server's work.
    pub redis: Usage,
    /// The submitter's queue-depth reads (`XLEN`), taken off `redis`.
    pub polls: u64,
    /// The processes' CPU.
    pub cpu: Cpu,
    /// The workers' reports.
    pub reports: Vec<serde_json::Value>,
}

impl Measured {
    /// Runs per second.
    pub fn runs_per_s(&self) -> f64 {
        self.runs as f64 / self.span.max(1e-9)
    }

    /// The `q` quantile of the per-run latency, ms.
    pub fn latency(&self, q: f64) -> u64 {
        measure::quantile(&self.latencies, q).unwrap_or(0)
    }
}

/// The phases' shared state.
pub struct Bench {
    /// Redis, the prefix of the whole bench, the mock and the script.
    pub target: Target,
    /// How much to run.
    pub settings: Settings,
    /// The mock model.
    pub mock: Mock,
    /// The bench's own Redis connection.
    pub conn: MultiplexedConnection,
}

impl Bench {
    /// `concurrency` tasks in this process run the agent until `runs` runs are done.
    pub async fn in_process(&mut self, concurrency: u64) -> anyhow::Result<Measured> {
        let target =
            self.target.with_prefix(format!("{}inproc-c{concurrency}:", self.target.prefix));
        let result = async {
            let agent = target.agent().await?;
            let rounds = u32::try_from(self.target.script.requests_per_run())?;
            let model_before = self.mock.requests().await?;
            let before = mark(&mut self.conn, self.mock.pid(), &[]).await?;
            let next = Arc::new(AtomicU64::new(0));
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..concurrency {
                let (agent, next, runs) = (agent.clone(), next.clone(), self.settings.runs);
                tasks.spawn(async move {
                    while next.fetch_add(1, Ordering::Relaxed) < runs {
                        let outcome = agent.run("go").await?;
                        anyhow::ensure!(
                            outcome.answer == FINAL_ANSWER && outcome.iterations == rounds,
                            "a wrong run: {:?} after {} rounds",
                            outcome.answer,
                            outcome.iterations
                        );
                    }
                    Ok(())
                });
            }
            while let Some(done) = tasks.join_next().await {
                done??;
            }
            let after = mark(&mut self.conn, self.mock.pid(), &[]).await?;
            let mut measured = self.measured(&target, &before, &after, model_before).await?;
            measured.concurrency = concurrency;
            measured.cpu.executors = (after.own.saturating_sub(before.own)).as_secs_f64();
            measured.cpu.submitter = 0.0;
            Ok(measured)
        }
        .await;
        redis_info::delete_prefix(&mut self.conn, &target.prefix).await?;
        result
    }

    /// `workers` worker processes execute `runs` runs that this process submits, keeping
    /// `window` runs submitted and not finished.
    pub async fn queued(&mut self, workers: usize) -> anyhow::Result<Measured> {
        let target = self.target.with_prefix(format!("{}queued-w{workers}:", self.target.prefix));
        let window =
            self.settings.window.unwrap_or((workers * self.settings.concurrency) as u64).max(1);
        let result = async {
            let mut processes = Vec::with_capacity(workers);
            for _ in 0..workers {
                processes.push(WorkerProcess::start(&target, &self.settings).await?);
            }
            let pids: Vec<u32> = processes.iter().map(|p| p.pid).collect();
            let agent = target.agent().await?;
            let queue = target.queue().await?;
            let model_before = self.mock.requests().await?;
            let before = mark(&mut self.conn, self.mock.pid(), &pids).await?;
            let polls = self.submit(&queue, &agent, window).await?;
            let after = mark(&mut self.conn, self.mock.pid(), &pids).await?;
            let mut reports = Vec::with_capacity(workers);
            for process in processes {
                reports.push(process.stop().await?);
            }
            let ended: u64 = reports.iter().filter_map(|r| r.get("ended")?.as_u64()).sum();
            anyhow::ensure!(
                ended == self.settings.runs,
                "the workers ended {ended} runs of {}: {reports:?}",
                self.settings.runs
            );
            let mut measured = self.measured(&target, &before, &after, model_before).await?;
            measured.concurrency = window;
            measured.cpu.executors =
                after.workers.iter().zip(&before.workers).map(|(a, b)| secs(*a, *b)).sum();
            measured.cpu.submitter = (after.own.saturating_sub(before.own)).as_secs_f64();
            measured.redis = std::mem::take(&mut measured.redis).without("xlen", polls);
            measured.polls = polls;
            measured.reports = reports;
            Ok(measured)
        }
        .await;
        redis_info::delete_prefix(&mut self.conn, &target.prefix).await?;
        result
    }

    /// Submits the runs, at most `window` of them not finished (the stream's length: jobs
    /// waiting or executing), reading the depth every `poll`; returns once every run is done,
    /// with the number of depth reads.
    async fn submit(
        &mut self,
        queue: &agentloop::worker::Queue,
        agent: &agentloop::Agent,
        window: u64,
    ) -> anyhow::Result<u64> {
        let stream = queue.stream(AGENT);
        let runs = self.settings.runs;
        let deadline = Instant::now() + Duration::from_secs(self.settings.max_seconds);
        let (mut submitted, mut polls) = (0u64, 0u64);
        loop {
            let depth: u64 = redis::cmd("XLEN").arg(&stream).query_async(&mut self.conn).await?;
            polls += 1;
            if submitted == runs && depth == 0 {
                return Ok(polls);
            }
            let room = window.saturating_sub(depth).min(runs - submitted);
            if room > 0 {
                let batch =
                    (0..room).map(|_| queue.submit(AGENT, agent, "go", RunOptions::default()));
                for submitted in futures::future::join_all(batch).await {
                    submitted?;
                }
                submitted += room;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{submitted} runs submitted and {depth} not done after {} s",
                self.settings.max_seconds
            );
            tokio::time::sleep(self.settings.poll).await;
        }
    }

    /// The phase's figures from the run registry, the mock and the marks; checks that every
    /// run finished and that the model was asked exactly the expected number of times.
    async fn measured(
        &self,
        target: &Target,
        before: &Mark,
        after: &Mark,
        model_before: (u64, u64),
    ) -> anyhow::Result<Measured> {
        let store = target.store().await?;
        let summaries = all_runs(store.as_ref()).await?;
        let runs = self.settings.runs;
        anyhow::ensure!(summaries.len() as u64 == runs, "{} runs in the store", summaries.len());
        if let Some(run) = summaries.iter().find(|r| r.state != RunState::Finished) {
            anyhow::bail!("run {} is {:?}", run.run_id, run.state);
        }
        let (requests, errors) = self.mock.requests().await?;
        let rounds = requests - model_before.0;
        let expected = runs * self.target.script.requests_per_run();
        anyhow::ensure!(
            rounds == expected && errors == model_before.1,
            "the model answered {rounds} requests (expected {expected}) and refused {}",
            errors - model_before.1
        );
        let mut latencies: Vec<u64> =
            summaries.iter().map(|r| r.updated_ms.saturating_sub(r.created_ms)).collect();
        latencies.sort_unstable();
        let first = summaries.iter().map(|r| r.created_ms).min().unwrap_or(0);
        let last = summaries.iter().map(|r| r.updated_ms).max().unwrap_or(0);
        let machine_busy = after.machine.zip(before.machine).map(|(a, b)| a.busy_since(b));
        let cpu = Cpu {
            wall: after.at.duration_since(before.at).as_secs_f64(),
            mock: before.mock.is_some().then(|| secs(after.mock, before.mock)),
            machine_busy,
            ..Cpu::default()
        };
        Ok(Measured {
            runs,
            rounds,
            span: last.saturating_sub(first) as f64 / 1e3,
            latencies,
            redis: after.redis.since(&before.redis),
            cpu,
            ..Measured::default()
        })
    }
}

/// Every run of `store`, a thousand a page.
async fn all_runs(store: &dyn RunStore) -> anyhow::Result<Vec<RunSummary>> {
    let mut filter = RunFilter::all().limit(1_000);
    let mut all = Vec::new();
    loop {
        let page = store.list_runs(&filter).await?;
        let Some(last) = page.last() else { return Ok(all) };
        filter = filter.after(last.cursor());
        all.extend(page);
    }
}
