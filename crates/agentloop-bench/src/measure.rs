//! What a driver measures about itself: CPU time (user + system, all threads) and peak
//! resident memory.

use std::time::Duration;

/// CPU time this process has used so far, all threads, user and system
/// (`CLOCK_PROCESS_CPUTIME_ID`, nanosecond resolution).
pub fn process_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(u64::try_from(t.tv_sec).unwrap_or(0), u32::try_from(t.tv_nsec).unwrap_or(0))
}

/// CPU time of the calling thread so far.
pub fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(u64::try_from(t.tv_sec).unwrap_or(0), u32::try_from(t.tv_nsec).unwrap_or(0))
}

/// CPU time another process has used so far, user and system (`/proc/<pid>/stat`, clock-tick
/// resolution); `None` when it cannot be read (the process is gone).
pub fn process_cpu_of(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at state (field 3).
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let ticks = rustix::param::clock_ticks_per_second().max(1);
    Some(Duration::from_secs_f64((utime + stime) as f64 / ticks as f64))
}

/// Bytes this process has passed to `write`-like calls so far (`wchar` of `/proc/self/io`).
pub fn written() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| {
            io.lines().find_map(|l| l.strip_prefix("wchar: ")).and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The machine's CPU time so far, all cores (`/proc/stat`): busy (user, nice, system, irq,
/// softirq, steal) and in all (busy plus idle and I/O wait), in clock ticks. With it a
/// benchmark tells whether the machine was saturated, and how much went to other processes
/// (a mock server, a Redis server) beside its own.
pub fn machine_cpu() -> Option<MachineCpu> {
    parse_machine_cpu(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Busy and total CPU ticks of the whole machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MachineCpu {
    /// Ticks spent busy, all cores.
    pub busy: u64,
    /// Ticks in all, all cores.
    pub total: u64,
}

impl MachineCpu {
    /// The share of the machine's CPU that was busy since `before` (0 to 1).
    pub fn busy_since(self, before: Self) -> f64 {
        let total = self.total.saturating_sub(before.total);
        if total == 0 {
            return 0.0;
        }
        self.busy.saturating_sub(before.busy) as f64 / total as f64
    }
}

/// The `cpu` line of a `/proc/stat` text (`guest` time is already counted in `user`).
fn parse_machine_cpu(stat: &str) -> Option<MachineCpu> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line.split_whitespace().skip(1).map_while(|t| t.parse().ok()).collect();
    let tick = |i: usize| ticks.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal
    let busy = tick(0) + tick(1) + tick(2) + tick(5) + tick(6) + tick(7);
    let idle = tick(3) + tick(4);
    (ticks.len() >= 4).then_some(MachineCpu { busy, total: busy + idle })
}

/// A field of `/proc/self/status` in kB (e.g. `VmHWM`, the peak resident set size).
pub fn status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().trim_end_matches("kB").trim().parse().ok()
    })
}

/// Raises this process's open-file limit to its hard limit (10,000 connections need more
/// than the usual soft limit). Returns the limit now in force.
pub fn raise_open_files_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.maximum.is_some() {
        limit.current = limit.maximum;
    }
    let _ = setrlimit(Resource::Nofile, limit);
    getrlimit(Resource::Nofile).current
}

/// The `q` quantile (0 to 1) of `sorted` (nearest rank; `None` when empty).
pub fn quantile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let last = sorted.len().checked_sub(1)?;
    sorted.get((last as f64 * q).round() as usize).copied()
}

#[cfg(test)]
mod tests;
