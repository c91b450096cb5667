//! What a store has written since it was opened: appends, entries and commits (transactions
//! on SQLite, script calls on Redis), for a process's own metrics and for the benchmarks.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts of a store's journal writes since it was opened ([`RunStore::write_stats`]).
///
/// [`RunStore::write_stats`]: super::RunStore::write_stats
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Appends committed (one per store call that wrote entries).
    pub appends: u64,
    /// Journal entries committed.
    pub entries: u64,
    /// Commits that made them durable: SQLite transactions (the appends of concurrent runs
    /// share one, group commit), Redis script calls (one per append); in memory, one per
    /// append.
    pub commits: u64,
    /// Summed over the appends committed, µs: on SQLite from the store call to the answer of
    /// its commit (queued for the writer thread, then the transaction), not counting the
    /// caller's wait to run again; on Redis the script call as its caller saw it. Not counted
    /// in memory.
    pub append_wait_us: u64,
    /// Time the store's writer spent writing and committing, µs (SQLite: its transactions;
    /// not counted by the other stores).
    pub commit_busy_us: u64,
}

impl WriteStats {
    /// What was written between `earlier` and `self`.
    #[must_use]
    pub fn since(self, earlier: Self) -> Self {
        Self {
            appends: self.appends.saturating_sub(earlier.appends),
            entries: self.entries.saturating_sub(earlier.entries),
            commits: self.commits.saturating_sub(earlier.commits),
            append_wait_us: self.append_wait_us.saturating_sub(earlier.append_wait_us),
            commit_busy_us: self.commit_busy_us.saturating_sub(earlier.commit_busy_us),
        }
    }
}

/// The counters behind [`WriteStats`], shared by a store and the thread or task that writes.
#[derive(Debug, Default)]
pub(crate) struct WriteCounters {
    appends: AtomicU64,
    entries: AtomicU64,
    commits: AtomicU64,
    append_wait_us: AtomicU64,
    commit_busy_us: AtomicU64,
}

impl WriteCounters {
    /// One commit that made `appends` appends of `entries` entries durable.
    pub(crate) fn committed(&self, appends: u64, entries: u64) {
        if appends == 0 {
            return;
        }
        self.appends.fetch_add(appends, Ordering::Relaxed);
        self.entries.fetch_add(entries, Ordering::Relaxed);
        self.commits.fetch_add(1, Ordering::Relaxed);
    }

    /// Time spent on appends ([`WriteStats::append_wait_us`]) and, where a writer commits for
    /// many appends, in its commit ([`WriteStats::commit_busy_us`]).
    pub(crate) fn timed(&self, append_wait: std::time::Duration, commit_busy: std::time::Duration) {
        let us = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.append_wait_us.fetch_add(us(append_wait), Ordering::Relaxed);
        self.commit_busy_us.fetch_add(us(commit_busy), Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> WriteStats {
        WriteStats {
            appends: self.appends.load(Ordering::Relaxed),
            entries: self.entries.load(Ordering::Relaxed),
            commits: self.commits.load(Ordering::Relaxed),
            append_wait_us: self.append_wait_us.load(Ordering::Relaxed),
            commit_busy_us: self.commit_busy_us.load(Ordering::Relaxed),
        }
    }
}
