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

/// Bytes this process has passed to `write`-like calls so far (`wchar` of `/proc/self/io`).
pub fn written() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| {
            io.lines().find_map(|l| l.strip_prefix("wchar: ")).and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
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

#[cfg(test)]
mod tests;
