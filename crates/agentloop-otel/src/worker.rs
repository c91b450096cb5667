//! Worker pool metrics (feature `worker`): a [`WorkerObserver`] that records what an
//! `agentloop::worker::Worker` does as OpenTelemetry instruments, exported with the run
//! metrics.
//!
//! | instrument | kind | attributes | what |
//! | --- | --- | --- | --- |
//! | `agentloop.worker.claims` | counter | `agentloop.agent`, `agentloop.worker.takeover` | jobs claimed (`takeover`: from a worker that died) |
//! | `agentloop.worker.claim.latency` | histogram (s) | `agentloop.agent` | from a job's queueing to its claim |
//! | `agentloop.worker.jobs` | counter | `agentloop.agent`, `agentloop.worker.outcome` | jobs that ended for the worker: `ended`, `suspended`, `needs_attention`, `handed_over`, `refused`, `dead_lettered`, `interrupted` |
//! | `agentloop.worker.queue.depth` | gauge | `agentloop.agent` | the agent's jobs not done |
//! | `agentloop.worker.queue.pending` | gauge | `agentloop.agent` | delivered to a worker, not done |
//! | `agentloop.worker.runs` | gauge | `agentloop.agent` | runs this worker executes now |

use crate::Telemetry;
use agentloop::worker::{JobOutcome, WorkerObserver};
use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter};
use opentelemetry::KeyValue;
use std::sync::Arc;
use std::time::Duration;

/// The worker instruments.
struct WorkerMetrics {
    claims: Counter<u64>,
    latency: Histogram<f64>,
    jobs: Counter<u64>,
    depth: Gauge<u64>,
    pending: Gauge<u64>,
    runs: Gauge<u64>,
}

fn agent(name: &str) -> KeyValue {
    KeyValue::new("agentloop.agent", name.to_owned())
}

impl WorkerMetrics {
    fn new(meter: &Meter) -> Self {
        Self {
            claims: meter
                .u64_counter("agentloop.worker.claims")
                .with_unit("{job}")
                .with_description("Jobs claimed, by agent and whether taken over")
                .build(),
            latency: meter
                .f64_histogram("agentloop.worker.claim.latency")
                .with_unit("s")
                .with_description("From a job's queueing to its claim by a worker")
                .with_boundaries(vec![
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                ])
                .build(),
            jobs: meter
                .u64_counter("agentloop.worker.jobs")
                .with_unit("{job}")
                .with_description("Jobs that ended for the worker, by agent and outcome")
                .build(),
            depth: meter
                .u64_gauge("agentloop.worker.queue.depth")
                .with_unit("{job}")
                .with_description("The agent's jobs not done (waiting or executing)")
                .build(),
            pending: meter
                .u64_gauge("agentloop.worker.queue.pending")
                .with_unit("{job}")
                .with_description("The agent's jobs delivered to a worker and not done")
                .build(),
            runs: meter
                .u64_gauge("agentloop.worker.runs")
                .with_unit("{run}")
                .with_description("Runs this worker executes now")
                .build(),
        }
    }
}

impl WorkerObserver for WorkerMetrics {
    fn claimed(&self, name: &str, waited: Duration, takeover: bool) {
        let takeover = KeyValue::new("agentloop.worker.takeover", takeover);
        self.claims.add(1, &[agent(name), takeover]);
        self.latency.record(waited.as_secs_f64(), &[agent(name)]);
    }

    fn ended(&self, name: &str, outcome: JobOutcome) {
        let outcome = KeyValue::new("agentloop.worker.outcome", outcome.as_str());
        self.jobs.add(1, &[agent(name), outcome]);
    }

    fn queue(&self, name: &str, depth: u64, pending: u64, in_flight: u64) {
        self.depth.record(depth, &[agent(name)]);
        self.pending.record(pending, &[agent(name)]);
        self.runs.record(in_flight, &[agent(name)]);
    }
}

impl Telemetry {
    /// The observer to give a worker (`WorkerBuilder::observer`), recording its metrics;
    /// `None` when metrics are off.
    pub fn worker_observer(&self) -> Option<Arc<dyn WorkerObserver>> {
        let provider = self.meter_provider()?;
        let metrics = WorkerMetrics::new(&opentelemetry::metrics::MeterProvider::meter(
            provider,
            "agentloop",
        ));
        Some(Arc::new(metrics))
    }
}
