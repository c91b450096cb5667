//! Log lines on stderr for the long-running commands (`agentloop worker`): the library's
//! `tracing` events of agentloop's own targets — a worker that started, cannot reach the
//! queue, takes a job over, dead-letters one, drains — one line each, with its time (UTC),
//! level, message and fields, control characters escaped. `AGENTLOOP_LOG` sets the level:
//! `error`, `warn`, `info` (default), `debug`, `trace` or `off`.

use crate::runs::cell;
use std::fmt::Debug;
use std::io::Write;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// Installs the stderr log for the process (nothing when `AGENTLOOP_LOG=off`, or when a
/// subscriber is installed already).
pub fn init() -> anyhow::Result<()> {
    let level = std::env::var("AGENTLOOP_LOG").unwrap_or_default();
    let max = match level.trim().to_ascii_lowercase().as_str() {
        "" | "info" => Level::INFO,
        "error" => Level::ERROR,
        "warn" => Level::WARN,
        "debug" => Level::DEBUG,
        "trace" => Level::TRACE,
        "off" => return Ok(()),
        other => anyhow::bail!(
            "AGENTLOOP_LOG: unknown level '{}' (expected error, warn, info, debug, trace or off)",
            cell(other)
        ),
    };
    // Already installed (a second call): the first one stays.
    let _ = tracing::subscriber::set_global_default(StderrLog { max });
    Ok(())
}

/// Writes each enabled event as one line on stderr; spans are not kept.
struct StderrLog {
    max: Level,
}

impl Subscriber for StderrLog {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= self.max && metadata.target().starts_with("agentloop")
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::from_level(self.max))
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut line = Line::default();
        event.record(&mut line);
        let at = crate::runs::time(agentloop::store::now_ms());
        let mut text = format!("{at} {:>5} {}", event.metadata().level(), line.message);
        for field in &line.fields {
            text.push(' ');
            text.push_str(field);
        }
        let _ = writeln!(std::io::stderr().lock(), "{}", cell(&text));
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// An event's message and its other fields as `name=value`.
#[derive(Default)]
struct Line {
    message: String,
    fields: Vec<String>,
}

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_owned();
        } else if value.is_empty() || value.contains([' ', '=', '"']) {
            self.fields.push(format!("{}={value:?}", field.name()));
        } else {
            self.fields.push(format!("{}={value}", field.name()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.fields.push(format!("{}={value:?}", field.name()));
        }
    }
}
