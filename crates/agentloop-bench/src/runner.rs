//! `bench-overhead`: the runner. Starts `mockllm` pinned to core 0, runs each scenario's
//! drivers as separate processes pinned to core 1 (floor and agentloop alternately, several
//! repetitions, medians), checks every driver's work against the server's request count,
//! and prints the markdown table with ratios to the floor measured in the same run.

use crate::driver::{JournalStore, Kind, Plan};
use crate::measure;
use crate::report::{markdown, median, DriverReport, Row};
use crate::scenario::Script;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// Runner options.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Tiny parameters, no targets checked: does every driver do its work?
    pub smoke: bool,
    /// Pin the server to core 0 and drivers to core 1 with `taskset`.
    pub pin: bool,
    /// Where the `mockllm` and `bench-driver` binaries are.
    pub bin_dir: PathBuf,
    /// Run only these scenario groups (`capacity`, `sequential`, `concurrent`, `history`);
    /// empty: all.
    pub only: Vec<String>,
}

impl Options {
    fn runs(&self, group: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|g| g == group)
    }
}

/// The mock server process (killed on drop).
struct Server {
    child: Child,
    url: String,
    stats_url: String,
    client: reqwest::Client,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(serde::Deserialize)]
struct Stats {
    requests: u64,
    errors: u64,
}

impl Server {
    fn start(options: &Options) -> Result<Self, String> {
        let client = agentloop::tls::http_client_builder()
            .map_err(|e| e.to_string())?
            .build()
            .map_err(|e| e.to_string())?;
        let mockllm = options.bin_dir.join("mockllm");
        let mut command = pinned(options, "0", &mockllm);
        // The server exits by itself if the runner dies without stopping it.
        let lifetime = if options.smoke { "300" } else { "3600" };
        command.args(["--listen", "127.0.0.1:0", "--max-seconds", lifetime]);
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", mockllm.display()))?;
        let stdout = child.stdout.take().ok_or("mockllm has no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map_err(|e| e.to_string())?;
        let url = line.trim().strip_prefix("listening ").ok_or_else(|| {
            let _ = child.kill();
            format!("mockllm said {line:?}")
        })?;
        let stats_url = format!("{}/stats", url.trim_end_matches("/v1"));
        Ok(Self { url: url.to_owned(), stats_url, child, client })
    }

    async fn stats(&self) -> Result<Stats, String> {
        let response = self.client.get(&self.stats_url).send().await.map_err(|e| e.to_string())?;
        let bytes = response.bytes().await.map_err(|e| e.to_string())?;
        serde_json::from_slice(&bytes).map_err(|e| e.to_string())
    }

    /// The server's CPU time so far, µs (from `/proc/<pid>/stat`, clock-tick resolution).
    fn cpu_us(&self) -> f64 {
        proc_cpu_us(self.child.id()).unwrap_or(0.0)
    }
}

/// utime + stime of a process, µs.
fn proc_cpu_us(pid: u32) -> Option<f64> {
    measure::process_cpu_of(pid).map(|cpu| cpu.as_secs_f64() * 1e6)
}

fn pinned(options: &Options, core: &str, program: &std::path::Path) -> Command {
    if options.pin {
        let mut command = Command::new("taskset");
        command.arg("-c").arg(core).arg(program);
        command
    } else {
        Command::new(program)
    }
}

/// One driver process, checked against the server.
struct Measured {
    report: DriverReport,
    /// Server CPU per request of this driver's run, µs.
    server_cpu_per_request: f64,
    /// Server CPU / driver wall time over the whole process run.
    server_busy: f64,
}

async fn run_driver(server: &Server, options: &Options, plan: &Plan) -> Result<Measured, String> {
    let before = server.stats().await?;
    let server_cpu = server.cpu_us();
    let started = Instant::now();
    let mut command = pinned(options, "1", &options.bin_dir.join("bench-driver"));
    command.args([
        "--driver",
        plan.kind.name(),
        "--url",
        &server.url,
        "--k",
        &plan.script.tool_results.to_string(),
        "--p",
        &plan.script.parallel.to_string(),
        "--latency-ms",
        &plan.script.latency.as_millis().to_string(),
        "--concurrency",
        &plan.concurrency.to_string(),
        "--warmup",
        &plan.warmup.to_string(),
        "--runs",
        &plan.runs.to_string(),
    ]);
    if plan.stream {
        command.arg("--stream");
    }
    if plan.history {
        command.arg("--history");
    }
    if plan.store != JournalStore::None {
        command.args(["--store", plan.store.name()]);
    }
    let output = command.stderr(Stdio::inherit()).output().map_err(|e| e.to_string())?;
    let wall = started.elapsed().as_secs_f64() * 1e6;
    if !output.status.success() {
        return Err(format!("{} driver failed: {}", plan.kind.name(), output.status));
    }
    let report: DriverReport = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("driver report: {e}: {}", String::from_utf8_lossy(&output.stdout)))?;
    let after = server.stats().await?;
    validate(plan, &report, after.requests - before.requests, after.errors - before.errors)?;
    let served = after.requests - before.requests;
    let server_cpu = server.cpu_us() - server_cpu;
    Ok(Measured {
        report,
        server_cpu_per_request: server_cpu / served.max(1) as f64,
        server_busy: server_cpu / wall,
    })
}

/// Checks a driver's run against the server: no failed run, no refused request, and exactly
/// the requests the plan makes. A run that did less (or more) work is invalid.
pub fn validate(
    plan: &Plan,
    report: &DriverReport,
    served: u64,
    refused: u64,
) -> Result<(), String> {
    let expected = plan.expected_requests();
    if report.errors > 0 {
        return Err(format!(
            "INVALID: {} had {} failed runs (first: {})",
            plan.kind.name(),
            report.errors,
            report.first_error.as_deref().unwrap_or("?")
        ));
    }
    if served != expected || refused > 0 {
        return Err(format!(
            "INVALID: {} made the server answer {served} requests ({refused} refused), expected {expected}",
            plan.kind.name(),
        ));
    }
    let measured = plan.concurrency
        * plan.runs
        * if plan.kind == Kind::Trivial { 1 } else { plan.script.requests_per_run() };
    if report.rounds != measured {
        return Err(format!(
            "INVALID: {} measured {} round trips, expected {measured}",
            plan.kind.name(),
            report.rounds
        ));
    }
    Ok(())
}

/// The scenarios, full size or smoke size.
struct Sizes {
    seq_k: u32,
    seq_runs: u64,
    seq_warmup: u64,
    seq_reps: usize,
    conc: [u64; 2],
    conc_k: u32,
    conc_latency: u64,
    conc_runs: [u64; 2],
    conc_reps: usize,
    history_k: u32,
    history_reps: usize,
    trivial: [(u64, u64); 2],
}

const FULL: Sizes = Sizes {
    seq_k: 10,
    seq_runs: 40,
    seq_warmup: 5,
    seq_reps: 21,
    conc: [1_000, 10_000],
    conc_k: 5,
    conc_latency: 50,
    conc_runs: [4, 2],
    conc_reps: 5,
    history_k: 1_000,
    history_reps: 3,
    trivial: [(1, 5_000), (256, 200)],
};

const SMOKE: Sizes = Sizes {
    seq_k: 3,
    seq_runs: 3,
    seq_warmup: 1,
    seq_reps: 1,
    conc: [20, 50],
    conc_k: 2,
    conc_latency: 5,
    conc_runs: [1, 1],
    conc_reps: 1,
    history_k: 30,
    history_reps: 1,
    trivial: [(1, 20), (8, 10)],
};

/// Runs floor and agentloop `reps` times each, alternately.
async fn pairs(
    server: &Server,
    options: &Options,
    plan: &Plan,
    reps: usize,
    log: &mut Vec<String>,
) -> Result<(Vec<Measured>, Vec<Measured>), String> {
    let mut floor = Vec::new();
    let mut agentloop = Vec::new();
    for _ in 0..reps {
        for kind in [Kind::Floor, Kind::Agentloop] {
            let plan = Plan { kind, ..plan.clone() };
            let measured = run_driver(server, options, &plan).await?;
            log.push(format!(
                "{:<9} {} c={} k={} rounds={} wall/round={:.1}µs cpu/round={:.1}µs rounds/s={:.0} rss={}kB server={:.1}µs/req busy={:.0}%",
                kind.name(),
                if plan.stream { "stream" } else { "json  " },
                plan.concurrency,
                plan.script.tool_results,
                measured.report.rounds,
                measured.report.wall_per_round(),
                measured.report.cpu_per_round(),
                measured.report.rounds_per_sec(),
                measured.report.peak_rss_kb,
                measured.server_cpu_per_request,
                measured.server_busy * 100.0,
            ));
            eprintln!("{}", log.last().map(String::as_str).unwrap_or(""));
            if kind == Kind::Floor {
                floor.push(measured)
            } else {
                agentloop.push(measured)
            }
        }
    }
    Ok((floor, agentloop))
}

fn med(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    median(&mut values).unwrap_or(f64::NAN)
}

/// The medians of `get` over the floor's and agentloop's runs, and the median of the ratios
/// of each agentloop run to the floor run just before it. On a shared machine the load
/// drifts between runs; a pair's two runs see nearly the same load, so the paired ratio
/// cancels most of the drift that the ratio of two medians keeps.
fn paired(floor: &[Measured], agentloop: &[Measured], get: impl Fn(&Measured) -> f64) -> Paired {
    let ratios = floor.iter().zip(agentloop).map(|(f, a)| get(a) / get(f));
    Paired {
        floor: med(floor.iter().map(&get)),
        agentloop: med(agentloop.iter().map(&get)),
        ratio: med(ratios),
    }
}

/// See [`paired`].
struct Paired {
    floor: f64,
    agentloop: f64,
    ratio: f64,
}

impl Paired {
    /// Two values and their ratio.
    fn plain(floor: f64, agentloop: f64) -> Self {
        Self { floor, agentloop, ratio: agentloop / floor }
    }
}

fn row(scenario: &str, measure: &str, values: Paired, target: &str, ok: Option<bool>) -> Row {
    Row {
        scenario: scenario.to_owned(),
        measure: measure.to_owned(),
        floor: values.floor,
        agentloop: values.agentloop,
        ratio: values.ratio,
        target: target.to_owned(),
        met: ok,
    }
}

/// Everything the runner prints.
#[derive(Debug, Clone, Default)]
pub struct Results {
    /// The markdown table.
    pub table: String,
    /// The server's capacity lines.
    pub capacity: Vec<String>,
    /// One line per driver process.
    pub log: Vec<String>,
    /// Whether every target held (always true in smoke mode, where none is checked).
    pub all_met: bool,
}

/// Runs every scenario.
pub async fn run(options: &Options) -> Result<Results, String> {
    let sizes = if options.smoke { &SMOKE } else { &FULL };
    let check = !options.smoke;
    let server = Server::start(options)?;
    let mut results = Results::default();
    let mut rows = Vec::new();

    // The server's own capacity, with a trivial client (fixed request, no JSON handling).
    for (concurrency, runs) in sizes.trivial.into_iter().filter(|_| options.runs("capacity")) {
        let plan = Plan {
            kind: Kind::Trivial,
            url: server.url.clone(),
            script: Script::new(0, 1, 0),
            stream: false,
            concurrency,
            warmup: 1,
            runs,
            history: false,
            store: JournalStore::None,
            global_queue_interval: None,
            wake_per_batch: true,
        };
        let measured = run_driver(&server, options, &plan).await?;
        let line = format!(
            "mockllm capacity, trivial client, {concurrency} connection(s): {:.0} requests/s, {:.1} µs wall per request, server CPU {:.1} µs per request",
            measured.report.rounds_per_sec(),
            measured.report.wall_per_round(),
            measured.server_cpu_per_request
        );
        eprintln!("{line}");
        results.capacity.push(line);
    }

    // Sequential, latency 0.
    for stream in [false, true].into_iter().filter(|_| options.runs("sequential")) {
        let plan = Plan {
            kind: Kind::Floor,
            url: server.url.clone(),
            script: Script::new(sizes.seq_k, 1, 0),
            stream,
            concurrency: 1,
            warmup: sizes.seq_warmup,
            runs: sizes.seq_runs,
            history: false,
            store: JournalStore::None,
            global_queue_interval: None,
            wake_per_batch: true,
        };
        let (floor, agentloop) =
            pairs(&server, options, &plan, sizes.seq_reps, &mut results.log).await?;
        let limit = if stream { 1.15 } else { 1.10 };
        let name = format!(
            "sequential, K={}, latency 0, {} runs, {}",
            sizes.seq_k,
            sizes.seq_runs,
            if stream { "streaming" } else { "non-streaming" }
        );
        let target = format!("≤ {limit:.2}× floor");
        for (measure, get) in [
            ("wall µs / round trip", DriverReport::wall_per_round as fn(&DriverReport) -> f64),
            ("driver CPU µs / round trip", DriverReport::cpu_per_round),
        ] {
            let values = paired(&floor, &agentloop, |m| get(&m.report));
            let ok = check.then_some(values.ratio <= limit);
            rows.push(row(&name, measure, values, &target, ok));
        }
    }

    // Concurrent agents.
    for (i, concurrency) in
        sizes.conc.into_iter().enumerate().filter(|_| options.runs("concurrent"))
    {
        let plan = Plan {
            kind: Kind::Floor,
            url: server.url.clone(),
            script: Script::new(sizes.conc_k, 1, sizes.conc_latency),
            stream: false,
            concurrency,
            warmup: 1,
            runs: sizes.conc_runs[i],
            history: false,
            store: JournalStore::None,
            global_queue_interval: None,
            wake_per_batch: true,
        };
        let (floor, agentloop) =
            pairs(&server, options, &plan, sizes.conc_reps, &mut results.log).await?;
        let name = format!(
            "C={concurrency} concurrent agents, K={}, latency {} ms",
            sizes.conc_k, sizes.conc_latency
        );
        let (throughput, memory) = if i == 0 { (0.95, 1.5) } else { (0.90, f64::INFINITY) };
        let values = paired(&floor, &agentloop, |m| m.report.rounds_per_sec());
        let target = format!("≥ {:.0} % of floor", throughput * 100.0);
        let ok = check.then_some(values.ratio >= throughput);
        rows.push(row(&name, "round trips / s", values, &target, ok));
        let values = paired(&floor, &agentloop, |m| m.report.cpu_per_round());
        rows.push(row(&name, "driver CPU µs / round trip", values, "reference", None));
        let values = paired(&floor, &agentloop, |m| m.report.peak_rss_kb as f64 / 1024.0);
        let (target, ok) = if memory.is_finite() {
            (format!("≤ {memory:.1}× floor"), check.then_some(values.ratio <= memory))
        } else {
            ("no errors (checked)".to_owned(), None)
        };
        rows.push(row(&name, "peak RSS, MiB", values, &target, ok));
    }

    if options.runs("history") {
        history(&server, options, sizes, &mut rows, &mut results.log).await?;
    }

    results.all_met = rows.iter().all(|r| r.met != Some(false));
    results.table = markdown(&rows);
    Ok(results)
}

/// History growth: one agent, K tool rounds; CPU per round early and late, without the
/// encoding of the request body (measured apart).
async fn history(
    server: &Server,
    options: &Options,
    sizes: &Sizes,
    rows: &mut Vec<Row>,
    log: &mut Vec<String>,
) -> Result<(), String> {
    let check = !options.smoke;
    let plan = Plan {
        kind: Kind::Floor,
        url: server.url.clone(),
        script: Script::new(sizes.history_k, 1, 0),
        stream: false,
        concurrency: 1,
        warmup: 1,
        runs: 1,
        history: true,
        store: JournalStore::None,
        global_queue_interval: None,
        wake_per_batch: true,
    };
    let (floor, agentloop) = pairs(server, options, &plan, sizes.history_reps, log).await?;
    let k = u64::from(sizes.history_k);
    let early = 6..=15u64;
    let late = k.saturating_sub(9)..=k;
    let at = |runs: &[Measured], range: &std::ops::RangeInclusive<u64>, encoding: bool| {
        med(runs.iter().filter_map(|m| {
            let history = m.report.history.as_ref()?;
            if encoding {
                history.median_encoding(range.clone())
            } else {
                history.median_without_encoding(range.clone())
            }
        }))
    };
    let name = format!("history growth: one agent, {k} tool rounds, non-streaming");
    let (f10, a10) = (at(&floor, &early, false), at(&agentloop, &early, false));
    let (f1k, a1k) = (at(&floor, &late, false), at(&agentloop, &late, false));
    rows.push(row(
        &name,
        "CPU µs / round at rounds 6–15, excl. body encoding",
        Paired::plain(f10, a10),
        "reference",
        None,
    ));
    rows.push(row(
        &name,
        &format!("CPU µs / round at rounds {}–{k}, excl. body encoding", late.start()),
        Paired::plain(f1k, a1k),
        "reference",
        None,
    ));
    let growth = row(
        &name,
        "growth (late / early), excl. encoding",
        Paired::plain(f1k / f10, a1k / a10),
        "agentloop ≤ 1.5",
        check.then_some(a1k / a10 <= 1.5),
    );
    rows.push(growth);
    let (fe10, ae10) = (at(&floor, &early, true), at(&agentloop, &early, true));
    let (fe1k, ae1k) = (at(&floor, &late, true), at(&agentloop, &late, true));
    rows.push(row(
        &name,
        "body encoding µs at rounds 6–15 (excluded above)",
        Paired::plain(fe10, ae10),
        "reference",
        None,
    ));
    rows.push(row(
        &name,
        &format!("body encoding µs at rounds {}–{k} (excluded above)", late.start()),
        Paired::plain(fe1k, ae1k),
        "reference",
        None,
    ));
    Ok(())
}

/// Parses the runner's arguments (`--smoke`, `--no-pin`, `--bin-dir DIR`).
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        smoke: false,
        pin: true,
        bin_dir: std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(PathBuf::from))
            .unwrap_or_default(),
        only: Vec::new(),
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--smoke" => options.smoke = true,
            "--no-pin" => options.pin = false,
            "--bin-dir" => options.bin_dir = args.next().ok_or("--bin-dir needs a value")?.into(),
            "--only" => {
                let groups = args.next().ok_or("--only needs a value")?;
                options.only.extend(groups.split(',').map(str::to_owned));
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?} (--smoke, --no-pin, --bin-dir DIR, --only GROUPS)"
                ))
            }
        }
    }
    Ok(options)
}

#[cfg(test)]
mod tests;
