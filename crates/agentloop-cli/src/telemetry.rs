//! OpenTelemetry for the CLI (feature `otel`, on by default): on when the `[telemetry]`
//! table says so or when the standard `OTEL_EXPORTER_OTLP_ENDPOINT` is set; the process's
//! agents get its observer, and what is queued is exported at exit.

use crate::config::TelemetrySection;
use std::sync::Arc;

/// The process's telemetry, if it is on.
#[derive(Clone, Default)]
pub struct Otel {
    #[cfg(feature = "otel")]
    telemetry: Option<agentloop_otel::Telemetry>,
}

impl std::fmt::Debug for Otel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.observer().is_some() { "Otel(on)" } else { "Otel(off)" })
    }
}

impl Otel {
    /// Starts telemetry as the section and the environment say (off when neither asks).
    #[cfg(feature = "otel")]
    pub fn start(section: &TelemetrySection) -> anyhow::Result<Self> {
        use anyhow::Context;
        let env = |name: &str| std::env::var(name).ok();
        let wanted = match section.enabled {
            Some(enabled) => enabled,
            None => section.endpoint.is_some() || agentloop_otel::TelemetryConfig::wanted(env),
        };
        if !wanted || env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim() == "true") {
            return Ok(Self::default());
        }
        // The file's settings, then the standard variables over them.
        let mut config = agentloop_otel::TelemetryConfig::default();
        if let Some(endpoint) = &section.endpoint {
            config.endpoint = Some(endpoint.clone());
        }
        if let Some(protocol) = &section.protocol {
            config.protocol =
                agentloop_otel::Protocol::parse(protocol).context("[telemetry] protocol")?;
        }
        if let Some(name) = &section.service_name {
            config.service_name = name.clone();
        }
        // (The table's values were checked when the file was read.)
        if let Some(ratio) = section.sample_ratio {
            config.sampling = agentloop_otel::Sampling::ParentBasedRatio(ratio);
        }
        if let Some(capture) = section.capture_content {
            config.capture_content = capture;
        }
        if let Some(max) = section.content_max_bytes {
            config.content_max_bytes = max;
        }
        config.headers.extend(section.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
        config.apply_env(env)?;
        let telemetry = agentloop_otel::Telemetry::new(config).context("starting telemetry")?;
        Ok(Self { telemetry: Some(telemetry) })
    }

    /// Telemetry is not in this build.
    #[cfg(not(feature = "otel"))]
    pub fn start(section: &TelemetrySection) -> anyhow::Result<Self> {
        if section.enabled == Some(true) {
            anyhow::bail!("[telemetry] needs a build with the `otel` feature");
        }
        Ok(Self::default())
    }

    /// The observer agents get, when telemetry is on.
    pub fn observer(&self) -> Option<Arc<dyn agentloop::observe::Observer>> {
        #[cfg(feature = "otel")]
        if let Some(telemetry) = &self.telemetry {
            return Some(telemetry.observer());
        }
        None
    }

    /// The observer a worker gets (its metrics), when telemetry with metrics is on.
    pub fn worker_observer(&self) -> Option<Arc<dyn agentloop::worker::WorkerObserver>> {
        #[cfg(feature = "otel")]
        if let Some(telemetry) = &self.telemetry {
            return telemetry.worker_observer();
        }
        None
    }

    /// Exports what is queued (waiting at most a couple of seconds for the collector) and
    /// says on stderr how many spans never reached it.
    pub fn finish(&self) {
        #[cfg(feature = "otel")]
        if let Some(telemetry) = &self.telemetry {
            let timeout = std::time::Duration::from_secs(2);
            let stats = tokio::task::block_in_place(|| telemetry.shutdown(timeout));
            if stats.dropped > 0 {
                eprintln!(
                    "telemetry: {} of {} spans were not exported (is the OTLP collector reachable?)",
                    stats.dropped, stats.ended
                );
            }
        }
    }
}
