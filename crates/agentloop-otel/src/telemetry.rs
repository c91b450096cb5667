//! [`Telemetry`]: the span export queue, the meter provider, and the [`Observer`] that
//! agents take.

use crate::config::{Protocol, TelemetryConfig};
use crate::counting::{Counters, SpanStats};
use crate::export::{Queue, SpanSink};
use crate::http_export::HttpSink;
use crate::live::Notes;
use crate::otlp::Preamble;
use crate::run::RunTrace;
use crate::semconv as sc;
use crate::span::{self, IdSource, Kind, SpanContext, SpanRecord};
use crate::Error;
use agentloop::message::Usage;
use agentloop::observe::{ObservedRun, Observer, RunObserver};
use opentelemetry::metrics::{
    BoundCounter, BoundHistogram, Counter, Histogram, Meter, MeterProvider,
};
use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::Resource;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use std::time::Duration;

/// OpenTelemetry for agentloop: spans and metrics derived from every run's events, exported
/// over OTLP. Cheap to clone. Give it to agents with
/// `Agent::builder(..).observer(telemetry.observer())`; call [`shutdown`](Self::shutdown)
/// once at exit, which exports what is queued.
#[derive(Clone)]
pub struct Telemetry {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").field("stats", &self.stats()).finish_non_exhaustive()
    }
}

/// What the runs' observers share.
pub(crate) struct Inner {
    pub(crate) queue: Queue,
    /// The attributes every `execute_tool` span has (operation, type), encoded.
    pub(crate) tool_attributes: Vec<u8>,
    /// By model, then provider.
    models: Mutex<FastMap<String, Vec<Arc<ModelEntry>>>>,
    pub(crate) ids: IdSource,
    pub(crate) config: TelemetryConfig,
    meter_provider: Option<SdkMeterProvider>,
    instruments: Option<Instruments>,
    counters: Arc<Counters>,
    shut: AtomicBool,
    /// The runs whose events' notes wait to be handled ([`Inner::drain`]), each once.
    pending: Mutex<Vec<Arc<RunTrace>>>,
    /// Held while events are handled; holds the buffers they are handled from (reused).
    draining: Mutex<Drainer>,
}

/// The buffers of the thread that handles the events that wait.
#[derive(Default)]
struct Drainer {
    runs: Vec<Arc<RunTrace>>,
    notes: Notes,
}

/// Runs whose events wait before they are handled in one go: the code that turns an
/// event into spans and metrics then runs for many events while it is in the processor's
/// caches, instead of once per event between the loop's own code (docs/PERFORMANCE.md).
const PENDING_RUNS: usize = 32;

struct Instruments {
    token_usage: Histogram<u64>,
    operation_duration: Histogram<f64>,
    runs: Counter<u64>,
    tool_calls: Counter<u64>,
    iterations: Histogram<u64>,
    cost: Counter<f64>,
    /// The instruments bound to the attributes of each tool (and status) and outcome seen
    /// (a model's are in its `ModelEntry`): one lookup per tool call and ended run instead
    /// of hashing every measurement's attributes.
    tools: Mutex<FastMap<String, [Option<BoundCounter<u64>>; 3]>>,
    outcomes: Mutex<FastMap<String, OutcomeInstruments>>,
}

/// What every run of one provider and model shares: built once, by the first.
pub(crate) struct ModelEntry {
    pub(crate) provider: Arc<str>,
    /// `chat {model}`.
    pub(crate) chat_name: Arc<str>,
    /// The operation, provider and model attributes of a `chat` span, encoded.
    pub(crate) chat_attributes: Arc<[u8]>,
    /// The same of an `invoke_agent` span.
    pub(crate) agent_attributes: Arc<[u8]>,
    /// The model-call instruments bound to the provider and model (metrics on).
    pub(crate) metrics: Option<ModelInstruments>,
}

/// The model-call instruments bound to one provider and model.
pub(crate) struct ModelInstruments {
    base: [KeyValue; 3],
    input_tokens: BoundHistogram<u64>,
    output_tokens: BoundHistogram<u64>,
    duration: BoundHistogram<f64>,
}

#[derive(Clone)]
struct OutcomeInstruments {
    runs: BoundCounter<u64>,
    iterations: BoundHistogram<u64>,
    cost: BoundCounter<f64>,
}

/// The tool statuses (`agentloop.tool.status`).
const TOOL_STATUSES: [&str; 3] = ["ok", "error", "timeout"];

/// The maps looked up on every run, model call and tool call: keyed by short names
/// (models, tools, outcomes), hashed by foldhash (randomly seeded per process) instead of
/// SipHash, which was about a sixth of recording the metrics (docs/PERFORMANCE.md).
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Instruments {
    fn new(meter: &Meter) -> Self {
        Self {
            token_usage: meter
                .u64_histogram(sc::METRIC_TOKEN_USAGE)
                .with_unit("{token}")
                .with_description("Tokens used per model call, by gen_ai.token.type")
                .with_boundaries(sc::TOKEN_BOUNDARIES.to_vec())
                .build(),
            operation_duration: meter
                .f64_histogram(sc::METRIC_OPERATION_DURATION)
                .with_unit("s")
                .with_description("Duration of model calls")
                .with_boundaries(sc::DURATION_BOUNDARIES.to_vec())
                .build(),
            runs: meter
                .u64_counter(sc::METRIC_RUNS)
                .with_unit("{run}")
                .with_description("Runs (stretches of runs) that ended, by outcome")
                .build(),
            tool_calls: meter
                .u64_counter(sc::METRIC_TOOL_CALLS)
                .with_unit("{call}")
                .with_description("Tool calls, by tool and status")
                .build(),
            iterations: meter
                .u64_histogram(sc::METRIC_RUN_ITERATIONS)
                .with_unit("{iteration}")
                .with_description("Iterations per ended run")
                .with_boundaries(vec![1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0, 55.0, 89.0])
                .build(),
            cost: meter
                .f64_counter(sc::METRIC_RUN_COST)
                .with_unit("USD")
                .with_description("Cost of the ended runs (agents with a price)")
                .build(),
            tools: Mutex::default(),
            outcomes: Mutex::default(),
        }
    }
}

impl Telemetry {
    /// Telemetry exported over OTLP as `config` says (HTTP/protobuf, or gRPC with the
    /// `grpc` feature). Exports run on their own threads: a run never waits for the
    /// collector, and spans that cannot be queued or exported are counted, not kept.
    pub fn new(config: TelemetryConfig) -> Result<Self, Error> {
        let traces = traces_sink(&config)?;
        let meter_provider = if config.metrics {
            let exporter = metrics_exporter(&config)?;
            let reader =
                PeriodicReader::builder(exporter).with_interval(config.metrics_interval).build();
            Some(
                SdkMeterProvider::builder()
                    .with_reader(reader)
                    .with_resource(resource(&config))
                    .build(),
            )
        } else {
            None
        };
        Ok(Self::with_boxed_sink(config, traces, meter_provider))
    }

    /// Telemetry whose spans go to `sink` (as OTLP protobuf requests, from the export
    /// thread, behind the same bounded queue and counters) and with these metrics, if any:
    /// for tests and transports of your own.
    pub fn with_sink<S: SpanSink>(
        config: TelemetryConfig,
        sink: S,
        meter_provider: Option<SdkMeterProvider>,
    ) -> Self {
        Self::with_boxed_sink(config, Box::new(sink), meter_provider)
    }

    fn with_boxed_sink(
        config: TelemetryConfig,
        sink: Box<dyn SpanSink>,
        meter_provider: Option<SdkMeterProvider>,
    ) -> Self {
        let counters = Arc::new(Counters::default());
        let preamble = preamble(&resource(&config));
        let queue = Queue::start(sink, preamble, &config, counters.clone());
        let instruments = meter_provider.as_ref().map(|p| Instruments::new(&p.meter("agentloop")));
        if let Some(provider) = &meter_provider {
            let counters = counters.clone();
            // Built and registered with the provider, which keeps it.
            let _dropped = provider
                .meter("agentloop")
                .u64_observable_counter(sc::METRIC_SPANS_DROPPED)
                .with_unit("{span}")
                .with_description("Spans that never reached the collector")
                .with_callback(move |observer| observer.observe(counters.stats(false).dropped, &[]))
                .build();
        }
        let tool_attributes = crate::otlp::attributes(&[
            (sc::OPERATION_NAME, "execute_tool".into()),
            (sc::TOOL_TYPE, "function".into()),
        ]);
        let inner = Inner {
            queue,
            tool_attributes,
            models: Mutex::default(),
            ids: IdSource::default(),
            config,
            meter_provider,
            instruments,
            counters,
            shut: AtomicBool::new(false),
            pending: Mutex::new(Vec::new()),
            draining: Mutex::default(),
        };
        let inner = Arc::new(inner);
        let weak = Arc::downgrade(&inner);
        inner.queue.set_collect(Box::new(move || {
            if let Some(inner) = weak.upgrade() {
                inner.drain();
            }
        }));
        Self { inner }
    }

    /// The meter provider, when metrics are on.
    #[cfg(feature = "worker")]
    pub(crate) fn meter_provider(&self) -> Option<&SdkMeterProvider> {
        self.inner.meter_provider.as_ref()
    }

    /// The observer to give agents (`AgentBuilder::observer`).
    pub fn observer(&self) -> Arc<dyn Observer> {
        Arc::new(self.clone())
    }

    /// What became of the spans so far (the spans still queued are not counted as dropped
    /// until [`flush`](Self::flush) or [`shutdown`](Self::shutdown), and the spans of events
    /// still waiting to be handled — at most an export delay — are not counted at all).
    pub fn stats(&self) -> SpanStats {
        self.inner.counters.stats(self.inner.shut.load(Ordering::Relaxed))
    }

    /// Exports what is queued now (waits for the collector, at most the export timeout).
    pub fn flush(&self) -> SpanStats {
        self.inner.drain();
        let settled = self.inner.queue.flush(self.inner.config.export_timeout);
        if let Some(meters) = &self.inner.meter_provider {
            if let Err(error) = meters.force_flush() {
                tracing::debug!(%error, "otel: flushing the metrics failed");
            }
        }
        self.inner.counters.stats(settled)
    }

    /// Exports what is queued and stops the exporters (waits at most `timeout` for each).
    /// Returns the final counts: `dropped` is exact.
    pub fn shutdown(&self, timeout: Duration) -> SpanStats {
        if self.inner.shut.swap(true, Ordering::Relaxed) {
            return self.stats();
        }
        self.inner.drain();
        self.inner.queue.shutdown(timeout);
        if let Some(meters) = &self.inner.meter_provider {
            if let Err(error) = meters.shutdown_with_timeout(timeout) {
                tracing::debug!(%error, "otel: shutting the metrics export down failed");
            }
        }
        self.stats()
    }

    /// The W3C `traceparent` of a new span of the caller's (for a request that starts
    /// work elsewhere outside a run, such as `agentloop a2a send`): a root span named
    /// `name`, ended by the returned guard.
    pub fn client_span(&self, name: &str) -> ClientSpan {
        let trace_id = self.inner.ids.trace_id();
        let sampled = self.inner.config.sampling.sampled(None, &trace_id);
        let context = SpanContext { trace_id, span_id: self.inner.ids.span_id(), sampled };
        let span = SpanRecord::new(context, &[name], Kind::Client, None, Vec::new());
        ClientSpan { span: Mutex::new(Some(span)), telemetry: self.inner.clone() }
    }
}

/// A span of the caller's, ended when dropped.
pub struct ClientSpan {
    span: Mutex<Option<SpanRecord>>,
    telemetry: Arc<Inner>,
}

impl ClientSpan {
    /// Its W3C `traceparent`.
    pub fn trace_parent(&self) -> Option<String> {
        let span = self.span.lock().unwrap_or_else(PoisonError::into_inner);
        span.as_ref().map(|span| span.context.traceparent())
    }
}

impl Drop for ClientSpan {
    fn drop(&mut self) {
        let span = self.span.get_mut().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(span) = span.filter(|span| span.context.sampled) {
            self.telemetry.queue.end(&span, span::now());
        }
    }
}

impl Observer for Telemetry {
    fn observe(&self, run: &ObservedRun<'_>) -> Option<Arc<dyn RunObserver>> {
        if self.inner.shut.load(Ordering::Relaxed) {
            return None;
        }
        Some(Arc::new_cyclic(|me| RunTrace::start(self.inner.clone(), run, me.clone())))
    }
}

impl Inner {
    /// Adds `run` to the runs whose events wait for [`drain`](Self::drain) (it is there
    /// once until they are handled); drains them when [`PENDING_RUNS`] are waiting (unless
    /// another thread is draining: then a later call does), or at once after shutdown (the
    /// spans are then counted as dropped).
    pub(crate) fn defer(&self, run: Arc<RunTrace>) {
        let mut pending = lock(&self.pending);
        pending.push(run);
        let full = pending.len() >= PENDING_RUNS;
        drop(pending);
        if full || self.shut.load(Ordering::Relaxed) {
            self.drain_now();
        }
    }

    /// Drains, unless another thread is draining.
    pub(crate) fn drain_now(&self) {
        match self.draining.try_lock() {
            Ok(draining) => self.drain_locked(draining),
            Err(TryLockError::Poisoned(poisoned)) => self.drain_locked(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => {}
        }
    }

    /// Handles the events waiting, in the order they came: their spans end into the
    /// export queue and their metrics are recorded. Called by the export thread every
    /// export delay, by [`defer`](Self::defer) when enough are waiting, and before a flush.
    pub(crate) fn drain(&self) {
        let draining = lock(&self.draining);
        self.drain_locked(draining);
    }

    /// One thread at a time drains (the `draining` lock held): the events it takes are
    /// handled before any that come after them.
    fn drain_locked(&self, mut drainer: std::sync::MutexGuard<'_, Drainer>) {
        let Drainer { runs, notes } = &mut *drainer;
        std::mem::swap(runs, &mut *lock(&self.pending));
        for run in runs.drain(..) {
            run.replay(notes);
        }
    }

    /// What the runs of `provider` and `model` share, built by the first of them.
    pub(crate) fn model(&self, provider: &str, model: &str) -> Arc<ModelEntry> {
        let mut models = lock(&self.models);
        let entries = match models.get_mut(model) {
            Some(entries) => entries,
            None => models.entry(model.to_owned()).or_default(),
        };
        if let Some(entry) = entries.iter().find(|e| &*e.provider == provider) {
            return entry.clone();
        }
        let provider: Arc<str> = Arc::from(provider);
        let model: Arc<str> = Arc::from(model);
        let encoded = |operation: &str| {
            crate::otlp::attributes(&[
                (sc::OPERATION_NAME, operation.into()),
                (sc::PROVIDER_NAME, (&*provider).into()),
                (sc::REQUEST_MODEL, (&*model).into()),
            ])
            .into()
        };
        let (chat_attributes, agent_attributes) = (encoded("chat"), encoded("invoke_agent"));
        let metrics = self.instruments.as_ref().map(|instruments| {
            let base = [
                KeyValue::new(sc::OPERATION_NAME, "chat"),
                KeyValue::new(sc::PROVIDER_NAME, provider.clone()),
                KeyValue::new(sc::REQUEST_MODEL, model.clone()),
            ];
            let tokens = |kind: &'static str| {
                let mut attributes = base.to_vec();
                attributes.push(KeyValue::new(sc::TOKEN_TYPE, kind));
                instruments.token_usage.bind(&attributes)
            };
            ModelInstruments {
                input_tokens: tokens("input"),
                output_tokens: tokens("output"),
                duration: instruments.operation_duration.bind(&base),
                base,
            }
        });
        let entry = Arc::new(ModelEntry {
            chat_name: Arc::from(format!("chat {model}")),
            provider,
            chat_attributes,
            agent_attributes,
            metrics,
        });
        entries.push(entry.clone());
        entry
    }

    pub(crate) fn record_model_call(
        &self,
        model: &ModelInstruments,
        usage: Option<&Usage>,
        duration_ms: u64,
        error: Option<String>,
    ) {
        let Some(instruments) = &self.instruments else { return };
        if let Some(usage) = usage {
            model.input_tokens.record(usage.input);
            model.output_tokens.record(usage.output);
        }
        let seconds = duration_ms as f64 / 1000.0;
        match error {
            None => model.duration.record(seconds),
            Some(error) => {
                let mut attributes = model.base.to_vec();
                attributes.push(KeyValue::new(sc::ERROR_TYPE, error));
                instruments.operation_duration.record(seconds, &attributes);
            }
        }
    }

    pub(crate) fn record_tool_call(&self, tool: &str, status: &'static str) {
        let Some(instruments) = &self.instruments else { return };
        let Some(index) = TOOL_STATUSES.iter().position(|s| *s == status) else { return };
        let bind = || {
            instruments.tool_calls.bind(&[
                KeyValue::new(sc::TOOL_NAME, tool.to_owned()),
                KeyValue::new(sc::TOOL_STATUS, status),
            ])
        };
        // One lookup for a tool seen before (the key is hashed once).
        let mut tools = lock(&instruments.tools);
        if let Some(bound) = tools.get_mut(tool) {
            bound[index].get_or_insert_with(bind).add(1);
            return;
        }
        let mut bound: [Option<BoundCounter<u64>>; 3] = Default::default();
        bound[index].insert(bind()).add(1);
        tools.insert(tool.to_owned(), bound);
    }

    pub(crate) fn record_run(&self, outcome: &str, iterations: u32, cost_usd: f64) {
        let Some(instruments) = &self.instruments else { return };
        let record = |bound: &OutcomeInstruments| {
            bound.runs.add(1);
            bound.iterations.record(u64::from(iterations));
            if cost_usd > 0.0 {
                bound.cost.add(cost_usd);
            }
        };
        // One lookup for an outcome seen before (the key is hashed once).
        let mut outcomes = lock(&instruments.outcomes);
        if let Some(bound) = outcomes.get(outcome) {
            record(bound);
            return;
        }
        let attributes = [KeyValue::new(sc::RUN_OUTCOME, outcome.to_owned())];
        let bound = OutcomeInstruments {
            runs: instruments.runs.bind(&attributes),
            iterations: instruments.iterations.bind(&attributes),
            cost: instruments.cost.bind(&attributes),
        };
        record(&bound);
        outcomes.insert(outcome.to_owned(), bound);
    }
}

fn resource(config: &TelemetryConfig) -> Resource {
    Resource::builder().with_service_name(config.service_name.clone()).build()
}

/// The resource's attributes, encoded once for every request.
fn preamble(resource: &Resource) -> Preamble {
    use opentelemetry::Value as V;
    let attributes: Vec<(&str, span::Value<'_>)> = resource
        .iter()
        .filter_map(|(key, value)| {
            let value = match value {
                V::Bool(b) => span::Value::Bool(*b),
                V::I64(i) => span::Value::Int(*i),
                V::F64(f) => span::Value::Float(*f),
                V::String(s) => span::Value::Text(s.as_str()),
                _ => return None,
            };
            Some((key.as_str(), value))
        })
        .collect();
    Preamble::new(&attributes)
}

fn headers(config: &TelemetryConfig) -> HashMap<String, String> {
    config.headers.iter().cloned().collect()
}

/// TLS for the exporters' HTTP clients: agentloop's (rustls on ring, the webpki roots,
/// configured per client).
pub(crate) fn tls_config() -> Result<rustls::ClientConfig, String> {
    agentloop::tls::client_config().map_err(|e| format!("TLS setup failed: {e}"))
}

/// The metrics exporter's HTTP client: blocking (the periodic reader exports from a thread
/// of its own, outside any async runtime). Built on a thread of its own: a blocking client
/// cannot be built inside an async runtime.
fn http_client() -> Result<reqwest::blocking::Client, Error> {
    let build = || -> Result<reqwest::blocking::Client, String> {
        reqwest::blocking::Client::builder()
            .tls_backend_preconfigured(tls_config()?)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("the HTTP client could not be built: {e}"))
    };
    std::thread::Builder::new()
        .name("agentloop-otel-client".into())
        .spawn(build)
        .map_err(|e| Error::Exporter(format!("cannot start a thread: {e}")))?
        .join()
        .map_err(|_| Error::Exporter("building the HTTP client panicked".into()))?
        .map_err(Error::Exporter)
}

fn traces_sink(config: &TelemetryConfig) -> Result<Box<dyn SpanSink>, Error> {
    match config.protocol {
        Protocol::HttpProtobuf => {
            let mut headers = http::HeaderMap::new();
            for (name, value) in &config.headers {
                let name = http::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| Error::Config(format!("header name {name:?} is not valid")))?;
                let value = http::HeaderValue::from_str(value).map_err(|_| {
                    Error::Config(format!("the value of header {name:?} is not valid"))
                })?;
                headers.insert(name, value);
            }
            headers.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/x-protobuf"),
            );
            let uri = config.traces_url();
            // Parsed once, not for every request.
            let uri = crate::http_export::endpoint(&uri).map_err(Error::Config)?;
            let client =
                crate::http_export::Client::new(&uri, tls_config().map_err(Error::Exporter)?)
                    .map_err(Error::Exporter)?;
            Ok(Box::new(HttpSink {
                client,
                runtime: None,
                uri,
                headers,
                timeout: config.export_timeout,
            }))
        }
        Protocol::Grpc => grpc_traces(config),
    }
}

fn metrics_exporter(config: &TelemetryConfig) -> Result<opentelemetry_otlp::MetricExporter, Error> {
    use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
    let built = match config.protocol {
        Protocol::HttpProtobuf => opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_http_client(http_client()?)
            .with_endpoint(config.metrics_url())
            .with_timeout(config.export_timeout)
            .with_headers(headers(config))
            .build(),
        Protocol::Grpc => grpc_metrics(config)?,
    };
    built.map_err(|e| Error::Exporter(e.to_string()))
}

#[cfg(feature = "grpc")]
fn grpc_traces(config: &TelemetryConfig) -> Result<Box<dyn SpanSink>, Error> {
    let metadata = grpc_metadata(config)?;
    let sink = crate::grpc::GrpcSink::new(&config.traces_url(), metadata, config.export_timeout)?;
    Ok(Box::new(sink))
}

#[cfg(feature = "grpc")]
fn grpc_metrics(
    config: &TelemetryConfig,
) -> Result<Result<opentelemetry_otlp::MetricExporter, opentelemetry_otlp::ExporterBuildError>, Error>
{
    use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
    let metadata = grpc_metadata(config)?;
    Ok(opentelemetry_otlp::MetricExporter::builder()
        .with_tonic()
        .with_endpoint(config.metrics_url())
        .with_timeout(config.export_timeout)
        .with_metadata(metadata)
        .build())
}

#[cfg(feature = "grpc")]
fn grpc_metadata(config: &TelemetryConfig) -> Result<tonic::metadata::MetadataMap, Error> {
    let mut map = tonic::metadata::MetadataMap::new();
    for (name, value) in &config.headers {
        let key = tonic::metadata::MetadataKey::from_bytes(name.to_ascii_lowercase().as_bytes())
            .map_err(|_| Error::Config(format!("header name {name:?} is not valid in gRPC")))?;
        let value = value
            .parse()
            .map_err(|_| Error::Config(format!("the value of header {name:?} is not valid")))?;
        map.insert(key, value);
    }
    Ok(map)
}

#[cfg(not(feature = "grpc"))]
fn grpc_traces(_config: &TelemetryConfig) -> Result<Box<dyn SpanSink>, Error> {
    Err(Error::Config("OTLP over gRPC needs agentloop-otel's `grpc` feature".into()))
}

#[cfg(not(feature = "grpc"))]
fn grpc_metrics(
    _config: &TelemetryConfig,
) -> Result<Result<opentelemetry_otlp::MetricExporter, opentelemetry_otlp::ExporterBuildError>, Error>
{
    Err(Error::Config("OTLP over gRPC needs agentloop-otel's `grpc` feature".into()))
}
