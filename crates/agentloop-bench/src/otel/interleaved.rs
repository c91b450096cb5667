//! Interleaved repetitions (`--block N`): every variant's telemetry and agent live side by
//! side, and a repetition runs the variants in turn, `block` runs at a time (the order
//! rotating from block to block), until each has run `runs`. On a machine whose speed
//! drifts by more than telemetry costs — a virtual machine whose neighbours come and go —
//! a repetition of one variant after another (seconds apart) compares different machines;
//! blocks tens of milliseconds apart compare the same one.
//!
//! The CPU a variant used is counted per thread, since the threads of the others run in
//! between: the loop's thread over that variant's blocks (`CLOCK_THREAD_CPUTIME_ID`), plus
//! every thread its telemetry started (the export thread, the metrics reader's and its HTTP
//! client's; `/proc/self/task/<tid>/schedstat`, nanoseconds) from the first block until its
//! spans are exported. A thread no variant started that ran meanwhile (none is expected) is
//! reported.

use super::{one_run, received, settle, shut_down, telemetry, warmed_up, BenchError, Plan};
use super::{Sample, Variant};
use crate::measure;
use agentloop::Agent;
use agentloop_otel::Telemetry;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// One variant of an interleaved repetition, and what it used so far.
struct Lane {
    variant: Variant,
    telemetry: Option<Telemetry>,
    agent: Agent,
    /// The threads its telemetry started.
    threads: Vec<i32>,
    /// Their CPU time when the blocks began, each: ns, and user and system ticks.
    threads_before: Vec<(u64, u64, u64)>,
    /// The loop's thread over this variant's blocks: ns, and user and system ticks.
    loop_ns: u64,
    loop_ticks: (u64, u64),
    wall: Duration,
    received_before: Option<u64>,
}

/// The threads of this process.
fn tids() -> BTreeSet<i32> {
    let Ok(entries) = std::fs::read_dir("/proc/self/task") else { return BTreeSet::new() };
    entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect()
}

/// CPU time of thread `tid` of this process: ns (`schedstat`), user and system ticks
/// (`stat`). Zero for a thread that has ended.
fn thread_cpu(tid: i32) -> (u64, u64, u64) {
    let task = format!("/proc/self/task/{tid}");
    let ns = std::fs::read_to_string(format!("{task}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let (user, sys) = ticks(&std::fs::read_to_string(format!("{task}/stat")).unwrap_or_default());
    (ns, user, sys)
}

/// utime and stime (fields 14 and 15) of a `stat` line; the command before them, in
/// parentheses, may hold spaces.
pub(super) fn ticks(stat: &str) -> (u64, u64) {
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse().ok()).unwrap_or(0);
    (field(11), field(12))
}

/// The calling thread's user and system ticks.
fn own_ticks() -> (u64, u64) {
    ticks(&std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default())
}

/// The CPU `threads` used since they used `before` (each thread on its own: one that ended
/// meanwhile, which reads as nothing, takes nothing from the others).
fn since(threads: &[i32], before: &[(u64, u64, u64)]) -> (u64, u64, u64) {
    threads.iter().zip(before).fold((0, 0, 0), |total, (&tid, before)| {
        let now = thread_cpu(tid);
        (
            total.0 + now.0.saturating_sub(before.0),
            total.1 + now.1.saturating_sub(before.1),
            total.2 + now.2.saturating_sub(before.2),
        )
    })
}

fn sum(threads: &[i32]) -> (u64, u64, u64) {
    threads
        .iter()
        .map(|&tid| thread_cpu(tid))
        .fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
}

/// Runs every repetition, interleaved by blocks of `block` runs (see the module docs).
pub(super) async fn run(
    plan: &Plan,
    block: u64,
    client: &reqwest::Client,
    progress: &mut impl FnMut(&Sample),
) -> Result<Vec<Sample>, BenchError> {
    let block = block.max(1);
    let tick_us = 1e6 / rustix::param::clock_ticks_per_second() as f64;
    let main = rustix::thread::gettid().as_raw_nonzero().get();
    let mut samples = Vec::new();
    for repetition in 0..plan.repetitions {
        let total = plan.warmup + plan.runs;
        let mut lanes = Vec::new();
        let mut known = BTreeSet::from([main]);
        for &variant in &plan.variants {
            let endpoint = plan.endpoint.as_deref().filter(|_| variant == Variant::Otlp);
            let received_before = received(client, endpoint).await;
            let before = tids();
            let telemetry = telemetry(plan, variant, total)?;
            let agent = warmed_up(plan, variant, total, telemetry.as_ref()).await?;
            let threads: Vec<i32> = tids().difference(&before).copied().collect();
            known.extend(&threads);
            lanes.push(Lane {
                variant,
                telemetry,
                agent,
                threads,
                threads_before: Vec::new(),
                loop_ns: 0,
                loop_ticks: (0, 0),
                wall: Duration::ZERO,
                received_before,
            });
        }
        for lane in &mut lanes {
            lane.threads_before = lane.threads.iter().map(|&tid| thread_cpu(tid)).collect();
        }
        let others_before: Vec<i32> = tids().difference(&known).copied().collect();
        let others_cpu: Vec<_> = others_before.iter().map(|&tid| thread_cpu(tid)).collect();
        let mut done = 0;
        let mut turn = 0;
        while done < plan.runs {
            let n = block.min(plan.runs - done);
            let count = lanes.len();
            for i in 0..count {
                let lane = &mut lanes[(i + turn) % count];
                let (ns, ticks, started) = (measure::thread_cpu(), own_ticks(), Instant::now());
                for _ in 0..n {
                    one_run(&lane.agent).await?;
                }
                lane.wall += started.elapsed();
                lane.loop_ns += measure::thread_cpu().saturating_sub(ns).as_nanos() as u64;
                let after = own_ticks();
                lane.loop_ticks.0 += after.0.saturating_sub(ticks.0);
                lane.loop_ticks.1 += after.1.saturating_sub(ticks.1);
            }
            done += n;
            turn += 1;
        }
        // Threads that no variant started and that ran meanwhile: their CPU is nobody's.
        let others: Vec<i32> = tids().difference(&known).copied().collect();
        let started: Vec<i32> =
            others.iter().filter(|tid| !others_before.contains(tid)).copied().collect();
        let stray = since(&others_before, &others_cpu).0 + sum(&started).0;
        if stray > 0 {
            eprintln!(
                "  rep {repetition}: {:.1} ms of CPU on threads no variant started ({others:?})",
                stray as f64 / 1e6
            );
        }
        for lane in lanes {
            let settle_started = Instant::now();
            if let Some(telemetry) = &lane.telemetry {
                settle(telemetry);
            }
            let settled = lane.wall + settle_started.elapsed();
            let threads = since(&lane.threads, &lane.threads_before);
            let cpu_ns = lane.loop_ns + threads.0;
            let user = lane.loop_ticks.0 + threads.1;
            let sys = lane.loop_ticks.1 + threads.2;
            let endpoint = plan.endpoint.as_deref().filter(|_| lane.variant == Variant::Otlp);
            let spans = match &lane.telemetry {
                Some(telemetry) => Some(
                    shut_down(telemetry, client, endpoint, lane.received_before, total, repetition)
                        .await
                        .map_err(|e| format!("{}: {e}", lane.variant.name()))?,
                ),
                None => None,
            };
            let sample = Sample {
                variant: lane.variant,
                repetition,
                runs: plan.runs,
                cpu_us: cpu_ns as f64 / 1e3,
                user_us: user as f64 * tick_us,
                sys_us: sys as f64 * tick_us,
                wall_us: lane.wall.as_secs_f64() * 1e6,
                settled_us: settled.as_secs_f64() * 1e6,
                threads_us: Some(threads.0 as f64 / 1e3),
                spans,
            };
            progress(&sample);
            samples.push(sample);
        }
    }
    Ok(samples)
}

#[cfg(test)]
mod tests;
