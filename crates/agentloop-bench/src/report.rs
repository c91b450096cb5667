//! What a driver run reports (one JSON line on stdout) and how the runner prints it.

use serde::{Deserialize, Serialize};

/// The result of one driver process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DriverReport {
    /// `floor`, `agentloop` or `trivial`.
    pub driver: String,
    /// Whether responses were streamed.
    pub stream: bool,
    /// Concurrent agents.
    pub concurrency: u64,
    /// Runs completed in the measured phase (all agents).
    pub runs: u64,
    /// Model round trips completed in the measured phase.
    pub rounds: u64,
    /// Runs that failed or gave a wrong answer (warm-up included).
    pub errors: u64,
    /// The first error, if any.
    pub first_error: Option<String>,
    /// HTTP requests the driver sent in all (warm-up included), to check against the server.
    pub requests_sent: u64,
    /// Wall time of the measured phase, µs.
    pub wall_us: f64,
    /// CPU time (user + system, all threads) of the measured phase, µs.
    pub cpu_us: f64,
    /// Peak resident set size of the process (`VmHWM`), kB.
    pub peak_rss_kb: u64,
    /// History scenario: per-round samples.
    pub history: Option<History>,
    /// p50 and p99 over the measured runs of what a round took beyond the model's latency
    /// (a run's wall time per round less the mock's delay), µs.
    #[serde(default)]
    pub added_latency_us: [f64; 2],
    /// With a store: the size of one journaled run.
    #[serde(default)]
    pub journal: Option<JournalSize>,
    /// With a store: what it wrote during the measured runs (appends, entries, commits).
    #[serde(default)]
    pub writes: Option<Writes>,
    /// The share of the whole machine's CPU that was busy during the measured phase (0 to 1,
    /// all processes: this one, the mock server, a store's server), from `/proc/stat`.
    #[serde(default)]
    pub machine_busy: Option<f64>,
    /// CPU time of the thread that ran the measured phase (the current-thread runtime's, on
    /// which every run's task is polled), µs.
    #[serde(default)]
    pub runtime_thread_cpu_us: f64,
    /// With a store: how long the measured runs' calls on it took as the runs saw them
    /// ([`crate::timed_store`]), per kind of call.
    #[serde(default)]
    pub store_calls: Vec<crate::timed_store::CallTimes>,
}

/// A store's journal writes during the measured runs ([`agentloop::store::WriteStats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Writes {
    /// Appends committed.
    pub appends: u64,
    /// Entries committed.
    pub entries: u64,
    /// Commits (SQLite transactions, Redis script calls).
    pub commits: u64,
    /// Bytes the process passed to `write`-like calls meanwhile (`/proc/self/io`'s `wchar`:
    /// the SQLite file and its log, and the requests to the model and to Redis).
    #[serde(default)]
    pub written_bytes: u64,
    /// The appends' time in the store, summed, µs ([`agentloop::store::WriteStats`]).
    #[serde(default)]
    pub append_wait_us: u64,
    /// The writer's time in its commits, µs (SQLite).
    #[serde(default)]
    pub commit_busy_us: u64,
}

/// One journaled run's entries and bytes (JSON, as the stores keep them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct JournalSize {
    /// Entries in the run's journal.
    pub entries: u64,
    /// Their serialized bytes.
    pub bytes: u64,
}

/// Per-round CPU of a long run, with the request-body encoding measured apart.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// Rounds of the run.
    pub rounds: u64,
    /// Per sampled round: (round, CPU µs of the round, of which encoding the request body µs).
    pub samples: Vec<(u64, f64, f64)>,
}

impl History {
    /// The median CPU µs per round excluding encoding, over sampled rounds in `range`.
    pub fn median_without_encoding(&self, range: std::ops::RangeInclusive<u64>) -> Option<f64> {
        let mut values: Vec<f64> = self
            .samples
            .iter()
            .filter(|(round, _, _)| range.contains(round))
            .map(|(_, cpu, encode)| cpu - encode)
            .collect();
        median(&mut values)
    }

    /// The median encoding µs over sampled rounds in `range`.
    pub fn median_encoding(&self, range: std::ops::RangeInclusive<u64>) -> Option<f64> {
        let mut values: Vec<f64> = self
            .samples
            .iter()
            .filter(|(round, _, _)| range.contains(round))
            .map(|(_, _, encode)| *encode)
            .collect();
        median(&mut values)
    }
}

/// One line naming the machine and the commit a result was measured on.
pub fn machine_line() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split(':').nth(1)))
        .unwrap_or("unknown CPU")
        .trim()
        .to_owned();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    format!("machine: {model}, {cores} cores; commit {commit}")
}

/// The median of `values` (sorted in place); `None` when empty.
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 0 { (values[mid - 1] + values[mid]) / 2.0 } else { values[mid] })
}

impl DriverReport {
    /// Wall µs per model round trip.
    pub fn wall_per_round(&self) -> f64 {
        self.wall_us / self.rounds.max(1) as f64
    }

    /// Driver CPU µs per model round trip.
    pub fn cpu_per_round(&self) -> f64 {
        self.cpu_us / self.rounds.max(1) as f64
    }

    /// Round trips per second.
    pub fn rounds_per_sec(&self) -> f64 {
        self.rounds as f64 / (self.wall_us / 1e6).max(1e-9)
    }
}

/// One row of the results table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The scenario.
    pub scenario: String,
    /// What is measured.
    pub measure: String,
    /// The floor's value.
    pub floor: f64,
    /// agentloop's value.
    pub agentloop: f64,
    /// How the two compare (agentloop / floor, or as the target says).
    pub ratio: f64,
    /// The target, in words.
    pub target: String,
    /// Whether the target holds (`None`: reference only).
    pub met: Option<bool>,
}

/// The rows as a markdown table.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| scenario | measure | floor | agentloop | ratio | target | met |\n|---|---|---:|---:|---:|---|---|\n",
    );
    for row in rows {
        let met = match row.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "",
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.2}× | {} | {} |\n",
            row.scenario,
            row.measure,
            number(row.floor),
            number(row.agentloop),
            row.ratio,
            row.target,
            met
        ));
    }
    out
}

/// A number with sensible precision for the table.
pub fn number(value: f64) -> String {
    if value >= 1000.0 {
        let whole = value.round() as u64;
        let s = whole.to_string();
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

#[cfg(test)]
mod tests;
