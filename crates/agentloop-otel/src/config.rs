//! [`TelemetryConfig`]: where telemetry goes and what it holds, from the standard
//! `OTEL_*` environment variables and from code (or a config file).

use crate::Error;
use std::time::Duration;

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// OTLP over HTTP with protobuf bodies (`http/protobuf`, port 4318).
    #[default]
    HttpProtobuf,
    /// OTLP over gRPC (`grpc`, port 4317; needs the crate's `grpc` feature).
    Grpc,
}

impl Protocol {
    /// Parses `http/protobuf` or `grpc` (`OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub fn parse(text: &str) -> Result<Self, Error> {
        match text.trim() {
            "http/protobuf" | "http" => Ok(Self::HttpProtobuf),
            "grpc" => Ok(Self::Grpc),
            other => Err(Error::Config(format!(
                "OTLP protocol {other:?} is not supported (use \"http/protobuf\" or \"grpc\")"
            ))),
        }
    }
}

/// Which traces are recorded (`OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Sampling {
    /// Every trace.
    AlwaysOn,
    /// None.
    AlwaysOff,
    /// This fraction of traces (by trace id).
    Ratio(f64),
    /// As the caller's span says; every trace that starts here (the default).
    #[default]
    ParentBasedAlwaysOn,
    /// As the caller's span says; none that start here.
    ParentBasedAlwaysOff,
    /// As the caller's span says; this fraction of those that start here.
    ParentBasedRatio(f64),
}

impl Sampling {
    /// Whether a trace with `trace_id` is recorded, given the caller's sampled flag (`None`:
    /// the trace starts here). A ratio compares the trace id's low 63 bits against it, as
    /// the OpenTelemetry `TraceIdRatioBased` sampler does, so that every process that sees
    /// the trace decides alike.
    pub(crate) fn sampled(self, caller: Option<bool>, trace_id: &[u8; 16]) -> bool {
        let ratio = |ratio: f64| {
            if ratio >= 1.0 {
                return true;
            }
            let bound = (ratio.max(0.0) * (1u64 << 63) as f64) as u64;
            let mut low = [0u8; 8];
            low.copy_from_slice(&trace_id[8..]);
            (u64::from_be_bytes(low) >> 1) < bound
        };
        match (self, caller) {
            (Self::AlwaysOn, _) => true,
            (Self::AlwaysOff, _) => false,
            (Self::Ratio(r), _) => ratio(r),
            (Self::ParentBasedAlwaysOn | Self::ParentBasedAlwaysOff, Some(sampled))
            | (Self::ParentBasedRatio(_), Some(sampled)) => sampled,
            (Self::ParentBasedAlwaysOn, None) => true,
            (Self::ParentBasedAlwaysOff, None) => false,
            (Self::ParentBasedRatio(r), None) => ratio(r),
        }
    }

    /// Parses the standard sampler names (`always_on`, `parentbased_traceidratio`, …) with
    /// the ratio argument where one is needed (default 1.0).
    pub fn parse(name: &str, arg: Option<&str>) -> Result<Self, Error> {
        let ratio = || -> Result<f64, Error> {
            match arg.map(str::trim).filter(|a| !a.is_empty()) {
                None => Ok(1.0),
                Some(arg) => {
                    arg.parse::<f64>().ok().filter(|r| (0.0..=1.0).contains(r)).ok_or_else(|| {
                        Error::Config(format!("sampler ratio {arg:?} is not in 0..1"))
                    })
                }
            }
        };
        Ok(match name.trim() {
            "always_on" => Self::AlwaysOn,
            "always_off" => Self::AlwaysOff,
            "traceidratio" => Self::Ratio(ratio()?),
            "parentbased_always_on" => Self::ParentBasedAlwaysOn,
            "parentbased_always_off" => Self::ParentBasedAlwaysOff,
            "parentbased_traceidratio" => Self::ParentBasedRatio(ratio()?),
            other => return Err(Error::Config(format!("sampler {other:?} is not supported"))),
        })
    }
}

/// What telemetry is exported where.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TelemetryConfig {
    /// The collector's base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`): `/v1/traces` and
    /// `/v1/metrics` are appended for HTTP. Default `http://localhost:4318` (HTTP) or
    /// `http://localhost:4317` (gRPC).
    pub endpoint: Option<String>,
    /// The traces URL as is (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), if set.
    pub traces_endpoint: Option<String>,
    /// The metrics URL as is (`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`), if set.
    pub metrics_endpoint: Option<String>,
    /// The transport (`OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub protocol: Protocol,
    /// Headers sent with every export (`OTEL_EXPORTER_OTLP_HEADERS`, `k=v,k2=v2`); their
    /// values never reach a log.
    pub headers: Vec<(String, String)>,
    /// The service name (`OTEL_SERVICE_NAME`; default `agentloop`).
    pub service_name: String,
    /// Which traces are recorded.
    pub sampling: Sampling,
    /// Records prompts, completions, tool arguments and results (off by default:
    /// `AGENTLOOP_OTEL_CAPTURE_CONTENT=true`).
    pub capture_content: bool,
    /// The most bytes of content one attribute holds (longer text is cut at a character
    /// boundary and marked); default 16 KiB.
    pub content_max_bytes: usize,
    /// Spans waiting for export at most (`OTEL_BSP_MAX_QUEUE_SIZE`, default 2048): more are
    /// dropped, and counted.
    pub queue_size: usize,
    /// The most spans one export request holds (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, default
    /// 512; at most `queue_size`): a full batch is exported at once, without waiting for
    /// the delay.
    pub max_export_batch: usize,
    /// The most bytes of encoded spans one export request holds, about (default 2 MiB,
    /// `AGENTLOOP_OTEL_MAX_EXPORT_BYTES`): a batch that reaches it is sent at once, so that
    /// a request stays under a collector's limit (the OpenTelemetry Collector's gRPC
    /// receiver takes 4 MiB by default) even with content capture; the request is larger
    /// by at most one span.
    pub max_export_bytes: usize,
    /// How often spans are exported (`OTEL_BSP_SCHEDULE_DELAY` in ms, default 1 s).
    pub export_delay: Duration,
    /// How long one export may take (`OTEL_EXPORTER_OTLP_TIMEOUT` in ms, default 10 s).
    pub export_timeout: Duration,
    /// Whether metrics are exported (`OTEL_METRICS_EXPORTER=none` turns them off).
    pub metrics: bool,
    /// How often metrics are exported (`OTEL_METRIC_EXPORT_INTERVAL` in ms, default 60 s).
    pub metrics_interval: Duration,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            endpoint: None,
            traces_endpoint: None,
            metrics_endpoint: None,
            protocol: Protocol::HttpProtobuf,
            headers: Vec::new(),
            service_name: "agentloop".to_owned(),
            sampling: Sampling::default(),
            capture_content: false,
            content_max_bytes: 16 * 1024,
            queue_size: 2048,
            max_export_batch: 512,
            max_export_bytes: 2 * 1024 * 1024,
            export_delay: Duration::from_secs(1),
            export_timeout: Duration::from_secs(10),
            metrics: true,
            metrics_interval: Duration::from_secs(60),
        }
    }
}

impl TelemetryConfig {
    /// A configuration that sends to `endpoint` (a base URL) over HTTP/protobuf.
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self { endpoint: Some(endpoint.into()), ..Self::default() }
    }

    /// Whether the environment asks for telemetry: an OTLP endpoint is set
    /// (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) and
    /// `OTEL_SDK_DISABLED` is not `true`.
    pub fn wanted(env: impl Fn(&str) -> Option<String>) -> bool {
        let disabled =
            env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let endpoint = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
            .iter()
            .any(|name| env(name).is_some_and(|v| !v.trim().is_empty()));
        endpoint && !disabled
    }

    /// The defaults, overridden by the standard variables `env` returns (pass
    /// `|k| std::env::var(k).ok()` for the process environment). A malformed value is an
    /// error that names the variable.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let mut config = Self::default();
        config.apply_env(env)?;
        Ok(config)
    }

    /// Overrides the fields the standard variables set.
    pub fn apply_env(&mut self, env: impl Fn(&str) -> Option<String>) -> Result<(), Error> {
        let get = |name: &str| env(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let millis = |name: &str| {
            let ms = |v: &str| v.parse::<u64>().ok().map(Duration::from_millis);
            parsed(name, get(name), "a number of ms", ms)
        };
        let positive = |name: &str| {
            let n = |v: &str| v.parse::<usize>().ok().filter(|n| *n > 0);
            parsed(name, get(name), "a positive number", n)
        };
        if let Some(v) = get("OTEL_EXPORTER_OTLP_ENDPOINT") {
            self.endpoint = Some(v);
        }
        if let Some(v) = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            self.traces_endpoint = Some(v);
        }
        if let Some(v) = get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") {
            self.metrics_endpoint = Some(v);
        }
        if let Some(v) =
            get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| get("OTEL_EXPORTER_OTLP_PROTOCOL"))
        {
            self.protocol = Protocol::parse(&v).map_err(|_| {
                Error::Config(format!(
                    "OTEL_EXPORTER_OTLP_PROTOCOL={v:?} is not supported (use \"http/protobuf\" or \"grpc\")"
                ))
            })?;
        }
        if let Some(v) = get("OTEL_EXPORTER_OTLP_HEADERS") {
            self.headers.extend(parse_headers(&v)?);
        }
        if let Some(v) = get("OTEL_SERVICE_NAME") {
            self.service_name = v;
        }
        if let Some(v) = get("OTEL_TRACES_SAMPLER") {
            self.sampling = Sampling::parse(&v, get("OTEL_TRACES_SAMPLER_ARG").as_deref())
                .map_err(|e| match e {
                    Error::Config(problem) => {
                        Error::Config(format!("OTEL_TRACES_SAMPLER: {problem}"))
                    }
                    other => other,
                })?;
        }
        if let Some(v) = get("AGENTLOOP_OTEL_CAPTURE_CONTENT") {
            self.capture_content = parse_bool("AGENTLOOP_OTEL_CAPTURE_CONTENT", &v)?;
        }
        if let Some(n) = positive("OTEL_BSP_MAX_QUEUE_SIZE")? {
            self.queue_size = n;
        }
        if let Some(n) = positive("OTEL_BSP_MAX_EXPORT_BATCH_SIZE")? {
            self.max_export_batch = n;
        }
        if let Some(n) = positive("AGENTLOOP_OTEL_MAX_EXPORT_BYTES")? {
            self.max_export_bytes = n;
        }
        if let Some(delay) = millis("OTEL_BSP_SCHEDULE_DELAY")? {
            self.export_delay = delay;
        }
        if let Some(timeout) = millis("OTEL_EXPORTER_OTLP_TIMEOUT")? {
            self.export_timeout = timeout;
        }
        if let Some(interval) = millis("OTEL_METRIC_EXPORT_INTERVAL")? {
            self.metrics_interval = interval;
        }
        if let Some(v) = get("OTEL_METRICS_EXPORTER") {
            self.metrics = v != "none";
        }
        Ok(())
    }

    /// The traces URL: the signal's own, or the base with `/v1/traces` (HTTP).
    pub(crate) fn traces_url(&self) -> String {
        self.signal_url(self.traces_endpoint.as_deref(), "/v1/traces")
    }

    /// The metrics URL: the signal's own, or the base with `/v1/metrics` (HTTP).
    pub(crate) fn metrics_url(&self) -> String {
        self.signal_url(self.metrics_endpoint.as_deref(), "/v1/metrics")
    }

    fn signal_url(&self, own: Option<&str>, path: &str) -> String {
        if let Some(own) = own {
            return own.to_owned();
        }
        let (default, path) = match self.protocol {
            Protocol::HttpProtobuf => ("http://localhost:4318", path),
            Protocol::Grpc => ("http://localhost:4317", ""),
        };
        let base = self.endpoint.as_deref().unwrap_or(default).trim_end_matches('/');
        format!("{base}{path}")
    }
}

/// Parses `k=v,k2=v2` (values may be percent-encoded, as the spec allows).
fn parse_headers(text: &str) -> Result<Vec<(String, String)>, Error> {
    text.split(',')
        .filter(|pair| !pair.trim().is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').ok_or_else(|| {
                Error::Config("OTEL_EXPORTER_OTLP_HEADERS: a header is not key=value".into())
            })?;
            Ok((key.trim().to_owned(), percent_decode(value.trim())))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Variable `name`'s value, if set, as `parse` reads it; an error saying it is not `what`.
fn parsed<T>(
    name: &str,
    value: Option<String>,
    what: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, Error> {
    value
        .map(|v| parse(&v).ok_or_else(|| Error::Config(format!("{name}={v:?} is not {what}"))))
        .transpose()
}

fn parse_bool(name: &str, value: &str) -> Result<bool, Error> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(Error::Config(format!("{name}={value:?} is not true or false"))),
    }
}
