//! The table the bench prints.

use crate::phases::Measured;

/// One worker count's phases: in process at the same concurrency (unless skipped), and
/// through the queue.
pub struct Row {
    /// Worker processes.
    pub workers: usize,
    /// The runs in one process.
    pub in_process: Option<Measured>,
    /// The runs through the queue.
    pub queued: Measured,
}

fn pct(seconds: f64, wall: f64) -> String {
    format!("{:.0}", seconds / wall.max(1e-9) * 100.0)
}

fn thousands(n: f64) -> String {
    let digits = format!("{:.0}", n.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn cells(what: &str, m: &Measured, vs_one: &str, added: &str) -> String {
    let runs = m.runs.max(1) as f64;
    let cpu = &m.cpu;
    let mock = cpu.mock.map_or("—".to_owned(), |s| pct(s, cpu.wall));
    let submitter =
        if cpu.submitter > 0.0 { pct(cpu.submitter, cpu.wall) } else { "—".to_owned() };
    // The machine's busy time beyond the bench's processes: other processes (the kernel's
    // own work for the bench is in each process's system time).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let busy = cpu.machine_busy.map_or("—".to_owned(), |b| {
        let ours = cpu.executors + cpu.mock.unwrap_or(0.0) + m.redis.cpu + cpu.submitter;
        let others = (b * cores * cpu.wall - ours).max(0.0);
        format!("{:.0} % ({})", b * 100.0, pct(others, cpu.wall))
    });
    format!(
        "| {what} | {} | {} | {} | {} | {vs_one} | {} / {} | {added} | {:.1} | {:.0} ({:.0}) | {} | {} / {mock} / {} / {submitter} | {} |",
        m.concurrency,
        thousands(m.runs as f64),
        thousands(m.runs_per_s()),
        thousands(m.rounds as f64 / m.span.max(1e-9)),
        m.latency(0.5),
        m.latency(0.99),
        m.redis.calls() as f64 / runs,
        m.redis.cpu * 1e6 / runs,
        m.redis.cpu_main * 1e6 / runs,
        thousands(runs / m.redis.cpu_main.max(1e-9)),
        pct(cpu.executors, cpu.wall),
        pct(m.redis.cpu, cpu.wall),
        busy,
    )
}

/// Prints the table, the top commands of each phase, the workers' reports and the target.
pub fn print(rows: &[Row]) {
    println!();
    println!(
        "| executor | C | runs | runs/s | rounds/s | × 1 worker | start→end p50 / p99 ms | added p50 / p99 ms | Redis commands / run | Redis CPU µs / run (main thread) | runs/s at 100 % of Redis's main thread | CPU % of a core: executors / mockllm / Redis / submitter | machine busy (the rest, % of a core) |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let one = rows.iter().find(|r| r.workers == 1).map(|r| r.queued.runs_per_s());
    for row in rows {
        if let Some(local) = &row.in_process {
            println!("{}", cells("in process", local, "", ""));
        }
        let vs_one = one.map_or("—".to_owned(), |one| {
            format!("{:.2}×", row.queued.runs_per_s() / one.max(1e-9))
        });
        let added = row.in_process.as_ref().map_or("—".to_owned(), |local| {
            let d = |q: f64| row.queued.latency(q) as i64 - local.latency(q) as i64;
            format!("{:+} / {:+}", d(0.5), d(0.99))
        });
        let what =
            format!("{} worker{} (queue)", row.workers, if row.workers == 1 { "" } else { "s" });
        println!("{}", cells(&what, &row.queued, &vs_one, &added));
    }
    println!();
    println!("Redis commands per run (calls; µs inside the command), the most called first:");
    for row in rows {
        let phases = row.in_process.iter().map(|m| ("in process", m));
        for (what, m) in phases.chain([("queue", &row.queued)]) {
            let runs = m.runs.max(1) as f64;
            let top: Vec<String> = m
                .redis
                .commands
                .iter()
                .take(12)
                .map(|(name, calls, usec)| {
                    format!("{name} {:.2} ({:.1} µs)", *calls as f64 / runs, *usec as f64 / runs)
                })
                .collect();
            let polls = if what == "queue" {
                format!(
                    " [the submitter's {:.2} XLEN polls per run not counted]",
                    m.polls as f64 / runs
                )
            } else {
                String::new()
            };
            println!(
                "- {} worker(s), {what}: {:.1} in all{polls}: {}",
                row.workers,
                m.redis.calls() as f64 / runs,
                top.join(", ")
            );
        }
    }
    println!();
    println!("What the queue adds per run (queue minus in process, calls; µs inside the command):");
    for row in rows {
        let Some(local) = &row.in_process else { continue };
        println!("- {} worker(s): {}", row.workers, added_commands(local, &row.queued).join(", "));
    }
    println!();
    for row in rows {
        let field = |name: &str| -> u64 {
            row.queued.reports.iter().filter_map(|r| r.get(name)?.as_u64()).sum()
        };
        let cpu: Vec<String> = row
            .queued
            .reports
            .iter()
            .filter_map(|r| r.get("cpu_s")?.as_f64())
            .map(|s| format!("{s:.1} s"))
            .collect();
        println!(
            "- {} worker(s): jobs {}, ended {}, takeovers {}, interrupted {}, dead letters {}; CPU per worker process over its life {}",
            row.workers,
            field("jobs"),
            field("ended"),
            field("takeovers"),
            field("interrupted"),
            field("dead_letters"),
            cpu.join(", ")
        );
    }
    println!();
    println!("CPU µs per run: executors / mockllm / Redis / submitter:");
    for row in rows {
        let phases = row.in_process.iter().map(|m| ("in process", m));
        for (what, m) in phases.chain([("queue", &row.queued)]) {
            let per_run = |s: f64| format!("{:.0}", s * 1e6 / m.runs.max(1) as f64);
            println!(
                "- {} worker(s), {what}: {} / {} / {} / {}",
                row.workers,
                per_run(m.cpu.executors),
                m.cpu.mock.map_or("—".to_owned(), per_run),
                per_run(m.redis.cpu),
                per_run(m.cpu.submitter)
            );
        }
    }
    let four = rows.iter().find(|r| r.workers == 4).map(|r| r.queued.runs_per_s());
    if let (Some(one), Some(four)) = (one, four) {
        let ratio = four / one.max(1e-9);
        println!(
            "\nTarget (4 workers >= 3x one worker's runs/s): {} ({ratio:.2}x: {} against {} runs/s)",
            if ratio >= 3.0 { "met" } else { "NOT met" },
            thousands(four),
            thousands(one)
        );
    }
}

/// Per command, what `queued` did per run beyond `local`: calls and µs, most calls first.
fn added_commands(local: &Measured, queued: &Measured) -> Vec<String> {
    let per_run = |m: &Measured| -> std::collections::BTreeMap<String, (f64, f64)> {
        let runs = m.runs.max(1) as f64;
        m.redis
            .commands
            .iter()
            .map(|(name, calls, usec)| (name.clone(), (*calls as f64 / runs, *usec as f64 / runs)))
            .collect()
    };
    let (before, mut after) = (per_run(local), per_run(queued));
    for (name, (calls, usec)) in before {
        let entry = after.entry(name).or_default();
        entry.0 -= calls;
        entry.1 -= usec;
    }
    let mut added: Vec<(String, (f64, f64))> =
        after.into_iter().filter(|(_, (calls, _))| calls.abs() >= 0.005).collect();
    added.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
    added
        .into_iter()
        .map(|(name, (calls, usec))| format!("{name} {calls:+.2} ({usec:+.1} µs)"))
        .collect()
}
