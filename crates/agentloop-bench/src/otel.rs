//! The cost of OpenTelemetry per loop round (issue 20; the binary `bench-otel`, see
//! `docs/PERFORMANCE.md`, "OpenTelemetry overhead").
//!
//! The workload is the common loop round of `run_overhead`, without HTTP: a scripted model
//! (instant, turns streamed in 16-character chunks) that calls the `add` tool once and then
//! answers, so one run is two iterations — two model calls and one tool call — and, with
//! telemetry on, six spans (`invoke_agent`, two `iteration`, two `chat`, one
//! `execute_tool`). With [`Plan::model_url`] the model is `mockllm` over HTTP instead (its
//! minimal turns, or with [`Plan::recorded`] two turns a real llama.cpp server streamed).
//! The runs are sequential, on a current-thread tokio runtime, with every event streamed
//! and consumed. Each [`Variant`] runs the same workload:
//!
//! - [`Variant::Off`]: no observer;
//! - [`Variant::Observer`]: an observer that records nothing (it sees every event and gives
//!   each model call the same `traceparent`): the cost of observing itself;
//! - [`Variant::SpansOnly`]: telemetry at 100 % sampling into an exporter that discards
//!   every batch, metrics off;
//! - [`Variant::Discard`]: the same with metrics on (recorded, aggregated and collected,
//!   then discarded): span and metric building, the batch queue and its thread, without
//!   encoding or HTTP;
//! - [`Variant::Otlp`]: telemetry at 100 % sampling exported over OTLP/HTTP protobuf to a
//!   receiver (`scripts/otel/receiver.py`, another process), metrics on.
//!
//! A repetition of a variant builds its telemetry and its agent, warms up, then measures
//! the process's CPU time (user + system, all threads: the batch export thread and the HTTP
//! client's thread included) over `runs` runs *and* the export of their spans (it flushes
//! and waits until every span ended has been exported), and the wall time of the runs alone.
//! It then shuts the telemetry down and checks that every span was exported and none was
//! dropped (and, with the receiver, that the receiver got exactly that many spans): a
//! repetition that loses spans fails the bench.

use crate::measure;
use crate::mock::RECORDED_MODEL;
use crate::report::median;
use crate::via_agentloop::{Add, Calculator};
use agentloop::message::Usage;
use agentloop::observe::{ObservedRun, Observer, RunObserver};
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop_otel::{Sampling, SpanSink, SpanStats, Telemetry, TelemetryConfig};
use futures::StreamExt;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};
use serde::Serialize;
use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What can go wrong: setup, a run, or a check.
pub type BenchError = Box<dyn Error + Send + Sync>;

/// Spans one run makes with telemetry on.
pub const SPANS_PER_RUN: u64 = 6;
/// Iterations (model calls) one run makes.
pub const ITERATIONS_PER_RUN: u64 = 2;

const USAGE: Usage =
    Usage { input: 100, output: 10, cached_input: 0, reasoning: 0, cache_write_input: 0 };

/// How long a repetition waits for its spans to be exported before it gives up.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);

/// What is measured (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// No telemetry.
    Off,
    /// An observer that sees every event and gives each model call a `traceparent`, and
    /// records nothing: what observing costs before telemetry does any work.
    Observer,
    /// Spans into a discarding exporter, no metrics.
    SpansOnly,
    /// Spans into a discarding exporter, metrics recorded in memory.
    Discard,
    /// Spans and metrics over OTLP/HTTP protobuf to a receiver.
    Otlp,
}

impl Variant {
    /// Every variant, in the order a repetition runs them.
    pub const ALL: [Variant; 5] =
        [Variant::Off, Variant::Observer, Variant::SpansOnly, Variant::Discard, Variant::Otlp];

    /// Its short name.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Off => "off",
            Variant::Observer => "observer",
            Variant::SpansOnly => "spans-only",
            Variant::Discard => "discard",
            Variant::Otlp => "otlp",
        }
    }

    /// What it runs, in a few words.
    pub fn describe(self) -> &'static str {
        match self {
            Variant::Off => "telemetry off",
            Variant::Observer => "an observer that records nothing",
            Variant::SpansOnly => "on, spans discarded in process, metrics off",
            Variant::Discard => "on, spans and metrics discarded in process",
            Variant::Otlp => "on, OTLP/HTTP protobuf to the receiver, metrics on",
        }
    }
}

/// What a `bench-otel` invocation measures.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Measured runs per repetition.
    pub runs: u64,
    /// Unmeasured runs before them.
    pub warmup: u64,
    /// Repetitions of every variant (interleaved: off, spans-only, discard, otlp, off, …).
    pub repetitions: u32,
    /// The variants.
    pub variants: Vec<Variant>,
    /// The OTLP base URL (`/v1/traces` and `/v1/metrics` are appended); needed for
    /// [`Variant::Otlp`].
    pub endpoint: Option<String>,
    /// The span queue (`None`: large enough for a whole repetition, so that a receiver slower
    /// than the loop costs no spans).
    pub queue: Option<usize>,
    /// Spans per export request (`None`: the default, 512).
    pub batch: Option<usize>,
    /// The base URL of the bench's mock OpenAI-compatible server (`mockllm`, in its own
    /// process): the model is called over HTTP and streams its turns as SSE, as a real one
    /// does (`None`: the scripted model, in process, no HTTP).
    pub model_url: Option<String>,
    /// With `model_url`: the model's turns are two a real llama.cpp server streamed, replayed
    /// byte for byte (`mock::RECORDED_MODEL`: a `calculator` call and a prose answer, a token
    /// an event), instead of the mock's minimal turns (`add`'s call in two events, a
    /// one-character answer).
    pub recorded: bool,
    /// The CPU the process's other threads (telemetry's export thread, its HTTP client's,
    /// the metrics reader's) are moved to once a repetition's telemetry started, the loop's
    /// thread staying where it is (`--export-cpu`; `None`: where the process was started).
    /// Their CPU time is counted all the same.
    pub export_cpu: Option<usize>,
    /// Interleave the variants within each repetition, this many runs at a time
    /// (`--block N`; see `interleaved`), instead of running one variant's repetition after
    /// another's (`None`).
    pub block: Option<u64>,
}

/// A span sink that drops every request (encoded as OTLP protobuf, as for a collector).
#[derive(Debug, Default)]
pub struct Discard;

impl SpanSink for Discard {
    fn export(&mut self, request: &[u8], _spans: usize) -> Result<(), String> {
        std::hint::black_box(request);
        Ok(())
    }
}

/// A metric exporter that drops every export (the metrics are still recorded, aggregated
/// and collected).
#[derive(Debug, Default)]
pub struct DiscardMetrics;

impl PushMetricExporter for DiscardMetrics {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        std::hint::black_box(metrics);
        Ok(())
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }

    fn temporality(&self) -> Temporality {
        Temporality::Cumulative
    }
}

/// An observer that sees every event and gives a `traceparent` (the same for every call)
/// and records nothing ([`Variant::Observer`]).
#[derive(Debug, Default)]
pub struct NullObserver;

impl Observer for NullObserver {
    fn observe(&self, _run: &ObservedRun<'_>) -> Option<Arc<dyn RunObserver>> {
        Some(Arc::new(NullRun))
    }
}

struct NullRun;

impl RunObserver for NullRun {
    fn on_event(&self, event: &agentloop::event::Event) {
        std::hint::black_box(event);
    }

    fn trace_parent(&self, _call_id: Option<&str>) -> Option<String> {
        Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned())
    }
}

/// What became of a repetition's spans ([`SpanStats`] after the shutdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Spans {
    /// Spans ended.
    pub ended: u64,
    /// Spans the exporter accepted.
    pub exported: u64,
    /// Spans in failed exports.
    pub failed: u64,
    /// Spans that never reached the exporter's destination.
    pub dropped: u64,
    /// Spans the receiver counted (its `GET /stats`), when it answers one.
    pub received: Option<u64>,
}

/// One repetition of one variant.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// The variant.
    pub variant: Variant,
    /// The repetition (0-based).
    pub repetition: u32,
    /// Measured runs.
    pub runs: u64,
    /// CPU time of the process (user + system, all threads) over the runs and the export of
    /// their spans, µs.
    pub cpu_us: f64,
    /// Of which user time, µs (`/proc/self/stat`, clock-tick resolution).
    pub user_us: f64,
    /// Of which system time, µs (same).
    pub sys_us: f64,
    /// Wall time of the runs, µs (without the wait for the last export).
    pub wall_us: f64,
    /// Wall time until the last span was exported, µs.
    pub settled_us: f64,
    /// Of `cpu_us`, the threads telemetry started (export, HTTP client, metrics reader), µs:
    /// measured by thread with `--block` only.
    pub threads_us: Option<f64>,
    /// The spans, with telemetry on.
    pub spans: Option<Spans>,
}

impl Sample {
    /// CPU µs per run.
    pub fn cpu_per_run(&self) -> f64 {
        self.cpu_us / self.runs.max(1) as f64
    }

    /// Wall µs per run.
    pub fn wall_per_run(&self) -> f64 {
        self.wall_us / self.runs.max(1) as f64
    }
}

/// Median, lowest and highest of some values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The lowest.
    pub min: f64,
    /// The highest.
    pub max: f64,
}

impl Spread {
    /// Of `values` (`None` when empty).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut values: Vec<f64> = values.into_iter().collect();
        let median = median(&mut values)?;
        let (min, max) = (values.first().copied()?, values.last().copied()?);
        Some(Self { median, min, max })
    }
}

/// A variant over all repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The variant.
    pub variant: Variant,
    /// CPU µs per run.
    pub cpu_per_run: Spread,
    /// User CPU µs per run (median).
    pub user_per_run: f64,
    /// System CPU µs per run (median).
    pub sys_per_run: f64,
    /// Wall µs per run.
    pub wall_per_run: Spread,
    /// CPU over `off` − 1, from the medians, in %.
    pub overhead_pct: Option<f64>,
    /// The same per repetition (each against the `off` run of the same repetition), in %.
    pub paired_overhead_pct: Option<Spread>,
    /// Spans ended in all repetitions.
    pub spans_ended: u64,
    /// Spans exported in all repetitions.
    pub spans_exported: u64,
    /// Spans dropped in all repetitions.
    pub spans_dropped: u64,
}

/// Summarises `samples` by variant, in `variants` order.
pub fn summarise(samples: &[Sample], variants: &[Variant]) -> Vec<Summary> {
    let of = |variant: Variant| samples.iter().filter(move |s| s.variant == variant);
    let per_run = |variant: Variant, f: fn(&Sample) -> f64| Spread::of(of(variant).map(f));
    let off = per_run(Variant::Off, Sample::cpu_per_run);
    variants
        .iter()
        .filter_map(|&variant| {
            let cpu_per_run = per_run(variant, Sample::cpu_per_run)?;
            let wall_per_run = per_run(variant, Sample::wall_per_run)?;
            let user = per_run(variant, |s| s.user_us / s.runs.max(1) as f64)?;
            let sys = per_run(variant, |s| s.sys_us / s.runs.max(1) as f64)?;
            let overhead_pct = off
                .filter(|_| variant != Variant::Off)
                .map(|off| (cpu_per_run.median / off.median - 1.0) * 100.0);
            let paired = of(variant).filter_map(|sample| {
                let off = of(Variant::Off).find(|o| o.repetition == sample.repetition)?;
                Some((sample.cpu_per_run() / off.cpu_per_run() - 1.0) * 100.0)
            });
            let paired_overhead_pct =
                if variant == Variant::Off { None } else { Spread::of(paired) };
            let spans = |f: fn(&Spans) -> u64| {
                of(variant).filter_map(|s| s.spans.as_ref()).map(f).sum::<u64>()
            };
            Some(Summary {
                variant,
                cpu_per_run,
                user_per_run: user.median,
                sys_per_run: sys.median,
                wall_per_run,
                overhead_pct,
                paired_overhead_pct,
                spans_ended: spans(|s| s.ended),
                spans_exported: spans(|s| s.exported),
                spans_dropped: spans(|s| s.dropped),
            })
        })
        .collect()
}

/// The markdown table of `summaries`.
pub fn table(summaries: &[Summary]) -> String {
    let mut out = String::from(
        "| variant | what runs | CPU µs / run: median (min–max) | CPU µs / iteration | user / sys µs / run | CPU over off: medians (per repetition) | wall µs / run | spans ended / exported / dropped |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for s in summaries {
        let overhead = match (s.overhead_pct, s.paired_overhead_pct) {
            (Some(pct), Some(paired)) => {
                format!("{pct:+.1} % ({:+.1} to {:+.1} %)", paired.min, paired.max)
            }
            _ => "—".to_owned(),
        };
        let spans = if s.variant == Variant::Off {
            "—".to_owned()
        } else {
            format!("{} / {} / {}", s.spans_ended, s.spans_exported, s.spans_dropped)
        };
        out.push_str(&format!(
            "| `{}` | {} | {:.2} ({:.2}–{:.2}) | {:.2} | {:.1} / {:.1} | {} | {:.2} | {} |\n",
            s.variant.name(),
            s.variant.describe(),
            s.cpu_per_run.median,
            s.cpu_per_run.min,
            s.cpu_per_run.max,
            s.cpu_per_run.median / ITERATIONS_PER_RUN as f64,
            s.user_per_run,
            s.sys_per_run,
            overhead,
            s.wall_per_run.median,
            spans,
        ));
    }
    out
}

/// Runs every repetition of every variant (interleaved), checking each.
/// `progress` gets each sample as it is taken.
pub async fn run(
    plan: &Plan,
    mut progress: impl FnMut(&Sample),
) -> Result<Vec<Sample>, BenchError> {
    if plan.variants.contains(&Variant::Otlp) && plan.endpoint.is_none() {
        return Err("the otlp variant needs an endpoint".into());
    }
    let client = agentloop::tls::http_client_builder()?.timeout(Duration::from_secs(10)).build()?;
    if let Some(block) = plan.block {
        if plan.export_cpu.is_some() {
            return Err("--export-cpu moves every other thread: not with --block".into());
        }
        return interleaved::run(plan, block, &client, &mut progress).await;
    }
    let mut samples = Vec::new();
    for repetition in 0..plan.repetitions {
        for &variant in &plan.variants {
            let sample = repeat(plan, variant, repetition, &client).await?;
            progress(&sample);
            samples.push(sample);
        }
    }
    Ok(samples)
}

/// The agent: `runs` runs' worth of turns (each run: a streamed tool call, then the answer),
/// from the scripted model, or over HTTP from the mock server at `model_url`: script
/// `bench-k1-p1-l0` (one `add` call, then the answer, at once), or with `recorded` the
/// recorded llama.cpp turns (a `calculator` call, then a prose answer).
fn agent(
    runs: u64,
    observer: Option<Arc<dyn Observer>>,
    model_url: Option<&str>,
    recorded: bool,
) -> Result<Agent, BenchError> {
    let mut builder = match (model_url, recorded) {
        (Some(url), true) => {
            let provider = crate::via_agentloop::provider_for(url, RECORDED_MODEL, true)?;
            Agent::builder(provider).tool(Calculator)
        }
        (Some(url), false) => {
            let script = crate::scenario::Script::new(1, 1, 0);
            Agent::builder(crate::via_agentloop::provider(url, script, true)?).tool(Add)
        }
        (None, true) => return Err("the recorded turns come over HTTP (--http)".into()),
        (None, false) => {
            let call = || ScriptedTurn::tool_call("add", serde_json::json!({"a": 1, "b": 2}));
            let answer = || ScriptedTurn::text("3").with_usage(USAGE);
            let turns = (0..runs).flat_map(|_| [call().with_usage(USAGE), answer()]);
            let model = ScriptedModel::new(turns).without_recording().with_chunk_chars(16);
            Agent::builder(model).tool(Add)
        }
    };
    builder = builder.name("bench").max_iterations(3);
    if let Some(observer) = observer {
        builder = builder.observer(observer);
    }
    Ok(builder.build()?)
}

/// One run, checked: it finishes, completed, after two iterations.
async fn one_run(agent: &Agent) -> Result<(), BenchError> {
    let mut events = agent.run_stream("go");
    let mut finished = None;
    while let Some(event) = events.next().await {
        if let Some(outcome) = event.outcome() {
            finished = Some((outcome.stop_reason.clone(), outcome.iterations));
        }
    }
    match finished {
        Some((StopReason::Completed, 2)) => Ok(()),
        other => {
            Err(format!("a run ended with {other:?}, not completed after 2 iterations").into())
        }
    }
}

/// The telemetry of `variant` (`None` for [`Variant::Off`]), its queue sized for `runs`.
fn telemetry(plan: &Plan, variant: Variant, runs: u64) -> Result<Option<Telemetry>, BenchError> {
    let mut config = match (&plan.endpoint, variant) {
        (Some(endpoint), Variant::Otlp) => TelemetryConfig::new(endpoint.clone()),
        _ => TelemetryConfig::default(),
    };
    config.sampling = Sampling::AlwaysOn;
    let spans = usize::try_from(runs * SPANS_PER_RUN).unwrap_or(usize::MAX);
    config.queue_size = plan.queue.unwrap_or(spans.max(2048));
    if let Some(batch) = plan.batch {
        config.max_export_batch = batch;
    }
    Ok(match variant {
        Variant::Off | Variant::Observer => None,
        Variant::SpansOnly => {
            config.metrics = false;
            Some(Telemetry::with_sink(config, Discard, None))
        }
        Variant::Discard => {
            config.metrics = true;
            // As `Telemetry::new` builds it, with the exporter that discards.
            let reader = PeriodicReader::builder(DiscardMetrics)
                .with_interval(config.metrics_interval)
                .build();
            let meters = SdkMeterProvider::builder().with_reader(reader).build();
            Some(Telemetry::with_sink(config, Discard, Some(meters)))
        }
        Variant::Otlp => {
            config.metrics = true;
            Some(Telemetry::new(config)?)
        }
    })
}

/// Flushes until every span ended so far has been exported (or failed), at most
/// [`SETTLE_TIMEOUT`]; a span the full queue dropped never settles (the check after the
/// shutdown reports it).
fn settle(telemetry: &Telemetry) -> SpanStats {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    loop {
        let stats = telemetry.flush();
        if stats.exported + stats.failed >= stats.ended || Instant::now() > deadline {
            return stats;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The spans the receiver at `endpoint` has counted (`None`: it does not answer `/stats`).
async fn received(client: &reqwest::Client, endpoint: Option<&str>) -> Option<u64> {
    let url = format!("{}/stats", endpoint?.trim_end_matches('/'));
    let response = client.get(url).send().await.ok()?.error_for_status().ok()?;
    let stats: serde_json::Value = response.json().await.ok()?;
    stats.get("spans")?.as_u64()
}

/// User and system CPU time of the process so far, µs (`/proc/self/stat`).
fn user_sys_us() -> (f64, f64) {
    let tick_us = 1e6 / rustix::param::clock_ticks_per_second() as f64;
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let (user, sys) = interleaved::ticks(&stat);
    (user as f64 * tick_us, sys as f64 * tick_us)
}

/// Moves every thread of the process but the calling one to `cpu`.
fn other_threads_to(cpu: usize) -> Result<(), BenchError> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    let me = rustix::thread::gettid();
    for entry in std::fs::read_dir("/proc/self/task")? {
        let tid = entry?.file_name().to_string_lossy().parse::<i32>().ok();
        let Some(tid) = tid.and_then(rustix::process::Pid::from_raw) else { continue };
        if tid != me {
            match rustix::thread::sched_setaffinity(Some(tid), &set) {
                // The thread ended between the listing and the move: nothing to move.
                Err(rustix::io::Errno::SRCH) | Ok(()) => {}
                Err(e) => return Err(format!("moving thread {tid:?} to CPU {cpu}: {e}").into()),
            }
        }
    }
    Ok(())
}

async fn repeat(
    plan: &Plan,
    variant: Variant,
    repetition: u32,
    client: &reqwest::Client,
) -> Result<Sample, BenchError> {
    let total = plan.warmup + plan.runs;
    let endpoint = plan.endpoint.as_deref().filter(|_| variant == Variant::Otlp);
    let received_before = received(client, endpoint).await;
    let telemetry = telemetry(plan, variant, total)?;
    if let Some(cpu) = plan.export_cpu {
        other_threads_to(cpu)?;
    }
    let agent = warmed_up(plan, variant, total, telemetry.as_ref()).await?;

    let (cpu, (user, sys)) = (measure::process_cpu(), user_sys_us());
    let started = Instant::now();
    for _ in 0..plan.runs {
        one_run(&agent).await?;
    }
    let wall = started.elapsed();
    if let Some(telemetry) = &telemetry {
        settle(telemetry);
    }
    let cpu = measure::process_cpu().saturating_sub(cpu);
    let settled = started.elapsed();
    let (user_after, sys_after) = user_sys_us();

    let spans = match &telemetry {
        None => None,
        Some(telemetry) => Some(
            shut_down(telemetry, client, endpoint, received_before, total, repetition)
                .await
                .map_err(|e| format!("{}: {e}", variant.name()))?,
        ),
    };
    Ok(Sample {
        variant,
        repetition,
        runs: plan.runs,
        cpu_us: cpu.as_secs_f64() * 1e6,
        user_us: user_after - user,
        sys_us: sys_after - sys,
        wall_us: wall.as_secs_f64() * 1e6,
        settled_us: settled.as_secs_f64() * 1e6,
        threads_us: None,
        spans,
    })
}

/// The agent of `variant` (observed by `telemetry`, or by the null observer), after
/// `plan.warmup` runs whose spans were all exported.
async fn warmed_up(
    plan: &Plan,
    variant: Variant,
    runs: u64,
    telemetry: Option<&Telemetry>,
) -> Result<Agent, BenchError> {
    let observer = match (telemetry, variant) {
        (Some(telemetry), _) => Some(telemetry.observer()),
        (None, Variant::Observer) => Some(Arc::new(NullObserver) as Arc<dyn Observer>),
        (None, _) => None,
    };
    let agent = agent(runs, observer, plan.model_url.as_deref(), plan.recorded)?;
    for _ in 0..plan.warmup {
        one_run(&agent).await?;
    }
    if let Some(telemetry) = telemetry {
        settle(telemetry);
    }
    Ok(agent)
}

/// Shuts `telemetry` down and checks what became of the spans of the repetition's `runs`
/// runs (the receiver at `endpoint` counted `received_before` before they began).
async fn shut_down(
    telemetry: &Telemetry,
    client: &reqwest::Client,
    endpoint: Option<&str>,
    received_before: Option<u64>,
    runs: u64,
    repetition: u32,
) -> Result<Spans, BenchError> {
    let stats = telemetry.shutdown(Duration::from_secs(10));
    let received = match (received_before, received(client, endpoint).await) {
        (Some(before), Some(after)) => Some(after.saturating_sub(before)),
        _ => None,
    };
    let spans = Spans {
        ended: stats.ended,
        exported: stats.exported,
        failed: stats.failed,
        dropped: stats.dropped,
        received,
    };
    check(&spans, runs).map_err(|e| format!("repetition {repetition}: {e}"))?;
    Ok(spans)
}

/// Every span of `runs` runs ended, was exported and (if the receiver counts) received.
fn check(spans: &Spans, runs: u64) -> Result<(), String> {
    let expected = runs * SPANS_PER_RUN;
    if spans.ended != expected {
        return Err(format!("{} spans ended, expected {expected}", spans.ended));
    }
    if spans.dropped != 0 || spans.failed != 0 || spans.exported != spans.ended {
        return Err(format!(
            "spans lost: {} ended, {} exported, {} failed, {} dropped (a larger --queue?)",
            spans.ended, spans.exported, spans.failed, spans.dropped
        ));
    }
    match spans.received {
        Some(received) if received != spans.exported => Err(format!(
            "the receiver counted {received} spans, the exporter {} exported",
            spans.exported
        )),
        _ => Ok(()),
    }
}

mod interleaved;

#[cfg(test)]
mod tests;
