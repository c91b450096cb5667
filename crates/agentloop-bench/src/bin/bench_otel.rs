//! `bench-otel`: CPU per loop round with OpenTelemetry on (sampling 100 %) and off (issue 20;
//! see `agentloop_bench::otel` and `docs/PERFORMANCE.md`, "OpenTelemetry overhead").
//!
//! ```sh
//! eval "$(scripts/otel/install.sh | tail -n 1 | sed 's/^/export /')"   # the receiver's venv
//! cargo run --release -p agentloop-bench --bin bench-otel
//! # options: --http (the model over HTTP from mockllm), --recorded (with --http: the model's
//! # turns replayed from a real llama.cpp server's streams, a token an event), --runs 10000 --warmup 1000 --reps 5 (defaults), --endpoint URL (an OTLP/HTTP
//! # receiver already running; otherwise scripts/otel/receiver.py is started with
//! # $AGENTLOOP_OTEL_PYTHON), --variants off,observer,spans-only,discard,otlp (all by default),
//! # --queue N, --batch N (spans per export request; default 512), --json FILE, --smoke, --export-cpu N (telemetry's threads moved to CPU N),
//! # --block N (the variants interleaved within a repetition, N runs at a time); --help lists them
//! ```
//!
//! Prints one line per repetition, then the markdown table; fails if a span was lost.

use agentloop_bench::otel::{self, Plan, Sample, Variant};
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// The receiver this process started; killed when dropped.
struct Receiver {
    child: Child,
    endpoint: String,
}

impl Receiver {
    /// Starts `scripts/otel/receiver.py` with `python` (it writes the spans to `/dev/null`
    /// and counts them) and waits for its `READY` line.
    fn start(python: &str) -> Result<Self> {
        let script =
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/otel/receiver.py").to_owned();
        let mut child = Command::new(python)
            .args([script.as_str(), "--out", "/dev/null"])
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {python} {script}"))?;
        let stdout = child.stdout.take().context("the receiver's stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        match line.trim().strip_prefix("READY ") {
            Some(endpoint) => Ok(Self { endpoint: endpoint.to_owned(), child }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                bail!("the receiver did not start (it printed {line:?})")
            }
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_owned()
}

/// What `--help` prints.
const USAGE: &str = "\
bench-otel: CPU per loop round with OpenTelemetry on (sampling 100 %) and off (docs/PERFORMANCE.md)

options:
  --http              the model over HTTP, from mockllm (started beside this binary)
  --recorded          with --http: the model's turns replayed from a real llama.cpp server's streams
  --runs N            measured runs a repetition (default 10000)
  --warmup N          runs before each repetition's measurement (default 1000)
  --reps N            repetitions, variants interleaved (default 5)
  --block N           interleave the variants within a repetition, N runs at a time, each
                      variant's CPU counted per thread (for a machine whose speed drifts)
  --variants LIST     of off,observer,spans-only,discard,otlp (default: all)
  --endpoint URL      an OTLP/HTTP receiver already running (otherwise scripts/otel/receiver.py
                      is started with $AGENTLOOP_OTEL_PYTHON)
  --queue N           the span queue's size (default: a whole repetition's spans)
  --batch N           spans per export request (default 512)
  --export-cpu N      telemetry's threads moved to CPU N once started
  --json FILE         every repetition and the summary as JSON
  --smoke             200 runs, one repetition (a quick check)
  --help              this text";

/// Options that take a value, and flags.
const VALUED: &[&str] = &[
    "--runs",
    "--warmup",
    "--reps",
    "--variants",
    "--endpoint",
    "--queue",
    "--batch",
    "--export-cpu",
    "--json",
    "--block",
];
const FLAGS: &[&str] = &["--http", "--recorded", "--smoke"];

/// Refuses an argument that is no option (a misspelt one would silently measure the
/// defaults) and an option without its value.
fn check_args(args: &[String]) -> Result<()> {
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if VALUED.contains(&arg.as_str()) {
            if rest.next().is_none() {
                bail!("{arg} needs a value (see --help)");
            }
        } else if !FLAGS.contains(&arg.as_str()) {
            bail!("unknown option {arg:?} (see --help)");
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return Ok(());
    }
    check_args(&args)?;
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    let number = |name: &str, default: u64| -> Result<u64> {
        value(name).map_or(Ok(default), |v| v.parse().with_context(|| format!("{name} {v}")))
    };
    let smoke = args.iter().any(|a| a == "--smoke");
    let plan = Plan {
        runs: if smoke { 200 } else { number("--runs", 10_000)? },
        warmup: if smoke { 20 } else { number("--warmup", 1000)? },
        repetitions: if smoke { 1 } else { u32::try_from(number("--reps", 5)?)? },
        variants: match value("--variants") {
            None => Variant::ALL.to_vec(),
            Some(names) => names
                .split(',')
                .map(|name| {
                    Variant::ALL
                        .into_iter()
                        .find(|v| v.name() == name.trim())
                        .with_context(|| format!("no variant {name:?}"))
                })
                .collect::<Result<_>>()?,
        },
        endpoint: value("--endpoint").cloned(),
        queue: value("--queue").map(|v| v.parse()).transpose().context("--queue")?,
        batch: value("--batch").map(|v| v.parse()).transpose().context("--batch")?,
        model_url: None,
        recorded: args.iter().any(|a| a == "--recorded"),
        export_cpu: value("--export-cpu").map(|v| v.parse()).transpose().context("--export-cpu")?,
        block: value("--block").map(|v| v.parse()).transpose().context("--block")?,
    };
    // `--http`: the model over HTTP, from `mockllm` in a process of its own (its CPU is not
    // the bench's), started from beside this binary.
    let mut mock = None;
    let plan = if args.iter().any(|a| a == "--http") {
        let (child, url) = start_mockllm()?;
        mock = Some(child);
        Plan { model_url: Some(url), ..plan }
    } else {
        plan
    };
    let mut receiver = None;
    let plan = if plan.endpoint.is_some() || !plan.variants.contains(&Variant::Otlp) {
        plan
    } else {
        let python = std::env::var("AGENTLOOP_OTEL_PYTHON").context(
            "no --endpoint and no AGENTLOOP_OTEL_PYTHON to start scripts/otel/receiver.py with: \
             run `eval \"$(scripts/otel/install.sh | tail -n 1 | sed 's/^/export /')\"` first",
        )?;
        let started = Receiver::start(&python)?;
        let endpoint = Some(started.endpoint.clone());
        receiver = Some(started);
        Plan { endpoint, ..plan }
    };
    eprintln!(
        "bench-otel: {} runs (+{} warm-up) x {} repetitions x {} variants; model {}; OTLP endpoint {}{}",
        plan.runs,
        plan.warmup,
        plan.repetitions,
        plan.variants.len(),
        plan.model_url.as_deref().map_or("scripted, in process".to_owned(), |u| format!(
            "mockllm over HTTP at {u}{}",
            if plan.recorded { ", the recorded llama.cpp turns" } else { "" }
        )),
        plan.endpoint.as_deref().unwrap_or("-"),
        if receiver.is_some() { " (receiver.py, started here)" } else { "" },
    );
    let load_before = load();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let samples = runtime.block_on(otel::run(&plan, |sample: &Sample| {
        eprintln!(
            "  rep {} {:<10} cpu {:7.2} µs/run{} (user {:.0} ms, sys {:.0} ms), wall {:6.2} µs/run, settled after {:.0} ms{}",
            sample.repetition,
            sample.variant.name(),
            sample.cpu_per_run(),
            sample.threads_us.filter(|_| sample.spans.is_some()).map_or_else(String::new, |t| {
                format!(" (telemetry's threads {:.2})", t / sample.runs.max(1) as f64)
            }),
            sample.user_us / 1e3,
            sample.sys_us / 1e3,
            sample.wall_per_run(),
            sample.settled_us / 1e3,
            sample.spans.map_or_else(String::new, |s| format!(
                "; spans ended {} exported {} dropped {}{}",
                s.ended,
                s.exported,
                s.dropped,
                s.received.map_or_else(String::new, |r| format!(" received {r}"))
            )),
        );
    }))
    .map_err(|e| anyhow::anyhow!(e))?;
    drop(receiver);
    drop(mock);
    let summaries = otel::summarise(&samples, &plan.variants);
    println!("{}", agentloop_bench::report::machine_line());
    println!("load average before: {load_before}, after: {}", load());
    println!(
        "{} runs a repetition ({} iterations, {} tool call and {} spans a run), {} repetitions, variants interleaved",
        plan.runs,
        otel::ITERATIONS_PER_RUN,
        1,
        otel::SPANS_PER_RUN,
        plan.repetitions
    );
    println!();
    println!("{}", otel::table(&summaries));
    if let Some(otlp) = summaries.iter().find(|s| s.variant == Variant::Otlp) {
        let pct = otlp.overhead_pct.unwrap_or(f64::NAN);
        let verdict = if pct <= 10.0 { "met" } else { "not met" };
        println!("target (OTLP, sampling 100 %: at most 10 % more CPU per round): {verdict} ({pct:+.1} %)");
    }
    if let Some(path) = value("--json") {
        let json = serde_json::json!({ "runs": plan.runs, "warmup": plan.warmup,
            "repetitions": plan.repetitions, "samples": samples, "summaries": summaries });
        std::fs::write(path, serde_json::to_vec_pretty(&json)?)
            .with_context(|| format!("writing {path}"))?;
    }
    Ok(())
}

/// Starts `mockllm` (built beside this binary) on a free loopback port: the process and its
/// base URL (from its `listening http://ADDR/v1` line).
fn start_mockllm() -> Result<(KillOnDrop, String)> {
    use std::io::BufRead;
    let exe = std::env::current_exe()?;
    let path = exe.with_file_name("mockllm");
    let mut child = std::process::Command::new(&path)
        .args(["--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .with_context(|| {
            format!("starting {} (cargo build --release -p agentloop-bench)", path.display())
        })?;
    let stdout = child.stdout.take().context("mockllm's stdout")?;
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line)?;
    let url = line.trim().strip_prefix("listening ").context("mockllm did not start")?.to_owned();
    Ok((KillOnDrop(child), url))
}

/// A child process killed when dropped.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
