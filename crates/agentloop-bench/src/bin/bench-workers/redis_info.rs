//! The Redis server's own accounting (`INFO commandstats`, `INFO cpu`) before and after a
//! phase, and the removal of a phase's keys.

use anyhow::Context as _;
use redis::aio::MultiplexedConnection;
use std::collections::BTreeMap;

/// A connection for the bench's own commands (the accounting, the queue-depth poll, the
/// clean-up).
pub async fn connect(url: &str) -> anyhow::Result<MultiplexedConnection> {
    let client = redis::Client::open(url).with_context(|| format!("Redis URL {url}"))?;
    client.get_multiplexed_async_connection().await.with_context(|| format!("connecting to {url}"))
}

/// The server's counters at one moment.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Per command (`xadd`, `xgroup|create`): calls and µs spent in it.
    commands: BTreeMap<String, (u64, u64)>,
    /// `used_cpu_sys + used_cpu_user`, s: the whole server process.
    cpu: f64,
    /// The same for its main thread (the one that executes commands).
    cpu_main: f64,
}

/// What the server did between two snapshots.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// Per command: name, calls, µs in it; most calls first.
    pub commands: Vec<(String, u64, u64)>,
    /// CPU of the server process, s.
    pub cpu: f64,
    /// CPU of its main thread, s.
    pub cpu_main: f64,
}

impl Usage {
    /// Commands in all (a script's `redis.call`s are counted under their own names too).
    pub fn calls(&self) -> u64 {
        self.commands.iter().map(|(_, calls, _)| calls).sum()
    }

    /// Takes `calls` calls of `name` off (the bench's own commands).
    pub fn without(mut self, name: &str, calls: u64) -> Self {
        for (command, n, _) in &mut self.commands {
            if command == name {
                *n = n.saturating_sub(calls);
            }
        }
        self.commands.retain(|(_, calls, _)| *calls > 0);
        self
    }
}

/// Reads the counters.
pub async fn snapshot(conn: &mut MultiplexedConnection) -> anyhow::Result<Snapshot> {
    let stats: String = redis::cmd("INFO").arg("commandstats").query_async(conn).await?;
    let cpu: String = redis::cmd("INFO").arg("cpu").query_async(conn).await?;
    Ok(parse(&stats, &cpu))
}

fn parse(stats: &str, cpu: &str) -> Snapshot {
    let mut snapshot = Snapshot::default();
    for line in stats.lines() {
        let Some((name, fields)) =
            line.trim().strip_prefix("cmdstat_").and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let field = |key: &str| {
            fields
                .split(',')
                .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        snapshot.commands.insert(name.to_owned(), (field("calls"), field("usec")));
    }
    let value = |key: &str| {
        cpu.lines()
            .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    snapshot.cpu = value("used_cpu_sys") + value("used_cpu_user");
    snapshot.cpu_main = value("used_cpu_sys_main_thread") + value("used_cpu_user_main_thread");
    snapshot
}

impl Snapshot {
    /// What happened since `before`.
    pub fn since(&self, before: &Snapshot) -> Usage {
        let mut commands: Vec<(String, u64, u64)> = self
            .commands
            .iter()
            .filter_map(|(name, (calls, usec))| {
                let (calls0, usec0) = before.commands.get(name).copied().unwrap_or_default();
                let calls = calls.saturating_sub(calls0);
                (calls > 0).then(|| (name.clone(), calls, usec.saturating_sub(usec0)))
            })
            .collect();
        commands.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Usage { commands, cpu: self.cpu - before.cpu, cpu_main: self.cpu_main - before.cpu_main }
    }
}

/// Deletes every key under `prefix`; returns how many.
pub async fn delete_prefix(conn: &mut MultiplexedConnection, prefix: &str) -> anyhow::Result<u64> {
    let mut pattern = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('*');
    let (mut cursor, mut deleted) = (0u64, 0u64);
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1_000)
            .query_async(conn)
            .await?;
        if !keys.is_empty() {
            let n: u64 = redis::cmd("UNLINK").arg(&keys).query_async(conn).await?;
            deleted += n;
        }
        if next == 0 {
            return Ok(deleted);
        }
        cursor = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_and_diffed() {
        let before = parse(
            "# Commandstats\r\ncmdstat_xlen:calls=10,usec=20,usec_per_call=2.00,rejected_calls=0\r\n",
            "# CPU\r\nused_cpu_sys:1.5\r\nused_cpu_user:2.5\r\nused_cpu_sys_main_thread:1.0\r\nused_cpu_user_main_thread:2.0\r\n",
        );
        let after = parse(
            "cmdstat_xlen:calls=15,usec=30,usec_per_call=2.00\r\ncmdstat_xgroup|create:calls=1,usec=9,usec_per_call=9.00\r\n",
            "used_cpu_sys:2.0\r\nused_cpu_user:3.0\r\nused_cpu_sys_main_thread:1.5\r\nused_cpu_user_main_thread:2.25\r\n",
        );
        let usage = after.since(&before);
        assert_eq!(
            usage.commands,
            vec![("xlen".to_owned(), 5, 10), ("xgroup|create".to_owned(), 1, 9)]
        );
        assert!((usage.cpu - 1.0).abs() < 1e-9 && (usage.cpu_main - 0.75).abs() < 1e-9);
        let usage = usage.without("xlen", 5);
        assert_eq!(usage.calls(), 1);
    }
}
