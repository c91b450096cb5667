//! OpenTelemetry for agentloop: GenAI spans and metrics derived from each run's event
//! stream, exported over OTLP (HTTP/protobuf, or gRPC with the `grpc` feature), with W3C
//! trace context carried to the model's HTTP requests, to sub-agents and to A2A peers.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use agentloop::prelude::*;
//! use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
//! use agentloop_otel::{Telemetry, TelemetryConfig};
//!
//! // OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, … apply.
//! let telemetry = Telemetry::new(TelemetryConfig::from_env(|k| std::env::var(k).ok())?)?;
//! let agent = Agent::builder(ScriptedModel::new([ScriptedTurn::text("Hi")]))
//!     .name("greeter")
//!     .observer(telemetry.observer())
//!     .build()?;
//! // … run the agent …
//! let stats = telemetry.shutdown(std::time::Duration::from_secs(5));
//! eprintln!("{} spans dropped", stats.dropped);
//! # Ok(()) }
//! ```
//!
//! The spans, their attributes and the metrics are listed in `docs/TELEMETRY.md`.

mod config;
mod content;
mod counting;
mod export;
#[cfg(feature = "grpc")]
mod grpc;
mod http_export;
mod ids;
mod live;
mod otlp;
mod run;
pub mod semconv;
mod span;
mod telemetry;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(feature = "worker")]
mod worker;

pub use config::{Protocol, Sampling, TelemetryConfig};
pub use counting::SpanStats;
pub use export::SpanSink;
pub use telemetry::{ClientSpan, Telemetry};

/// The trace id (32 hex digits) of the run `run_id` started under `trace_parent` (the
/// caller's W3C `traceparent`, journaled as `RunConfig::trace_parent`): the caller's trace,
/// or the run's own, which is derived from its id. Every process that drives the run uses
/// it, so it finds the run's trace in a backend.
pub fn trace_id(run_id: &str, trace_parent: Option<&str>) -> String {
    let caller = trace_parent.and_then(span::SpanContext::parse).map(|c| c.trace_id);
    let mut out = String::with_capacity(32);
    span::hex(&mut out, &caller.unwrap_or_else(|| ids::run_trace_id(run_id)));
    out
}

/// What can go wrong setting telemetry up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting is malformed (it names the variable or field).
    #[error("telemetry configuration: {0}")]
    Config(String),
    /// The OTLP exporter could not be built.
    #[error("telemetry exporter: {0}")]
    Exporter(String),
}

#[cfg(test)]
mod tests;
