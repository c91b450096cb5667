//! `bench-outputs`: what large tool outputs cost a durable store, kept in the journal or by
//! reference as artifacts (see `docs/PERFORMANCE.md`, "Large outputs by reference"), and
//! whether compressing them would pay.
//!
//! `cargo run --release -p agentloop-bench --bin bench-outputs [-- --sizes 4096,32768,131072
//! --runs 100 --outputs 5]`: for each output size, `--runs` runs at once each append a
//! `run_started` and then `--outputs` tool results of that size, one append each, as an
//! executor does; then every journal is loaded once. Stores: SQLite and Redis (at
//! `AGENTLOOP_REDIS_URL`, under a key prefix of its own, emptied afterwards), each with every
//! output in the journal (`large_output_bytes: None`) and by reference (a 1 KiB limit, so
//! every measured output goes to an artifact). Prints appends per second, CPU per append
//! (all threads), bytes passed to `write` per append (SQLite's WAL), and the time to load one
//! journal. Then deflate (levels 1 and 6) on the same outputs: ratio and CPU per output.
//!
//! The outputs are log lines with varying numbers (about 4x compressible by deflate), not
//! one repeated line.

use agentloop::event::Event;
use agentloop::message::{Message, ToolResult};
use agentloop::run::RunConfig;
use agentloop::store::redis::{RedisOptions, RedisStore};
use agentloop::store::sqlite::{SqliteOptions, SqliteStore};
use agentloop::store::RunStore;
use agentloop_bench::measure::{process_cpu, written};
use std::error::Error;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// `bytes` of log-like text, varied by `seed`.
fn output(bytes: usize, seed: u64) -> String {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut next = move || {
        state =
            state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        state >> 33
    };
    let mut text = String::with_capacity(bytes + 128);
    let paths = ["items", "users", "orders", "search", "health"];
    let levels = ["INFO", "INFO", "INFO", "WARN", "DEBUG"];
    while text.len() < bytes {
        let r = next();
        text.push_str(&format!(
            "2026-11-27T12:{:02}:{:02}.{:03}Z {} request id={:08x} path=/api/v1/{}/{} status={} bytes={} ms={}\n",
            r % 60,
            (r >> 6) % 60,
            (r >> 12) % 1000,
            levels[(r as usize >> 3) % levels.len()],
            next() as u32,
            paths[(r as usize >> 7) % paths.len()],
            next() % 100_000,
            [200, 200, 200, 404, 500][(r as usize >> 9) % 5],
            next() % 65_536,
            next() % 900,
        ));
    }
    text.truncate(bytes);
    text
}

/// A run's journal: the start, then `outputs` tool results of `bytes` each.
fn journal(run_id: &str, outputs: usize, bytes: usize, seed: u64) -> Vec<Event> {
    let mut events = vec![Event::RunStarted {
        run_id: run_id.into(),
        config: Box::new(RunConfig::default()),
        input: vec![Message::user("Summarize the errors in today's access log.")],
    }];
    for i in 0..outputs {
        events.push(Event::ToolCompleted {
            name: "read_log".into(),
            result: ToolResult::ok(format!("call_{i}"), output(bytes, seed + i as u64)),
            duration_ms: 3,
            control: None,
            usage: None,
            cost_usd: None,
            remote: None,
        });
    }
    events
}

struct Measured {
    appends_per_s: f64,
    cpu_per_append: Duration,
    written_per_append: f64,
    load_per_run: Duration,
}

async fn measure(
    store: Arc<dyn RunStore>,
    runs: usize,
    outputs: usize,
    bytes: usize,
) -> Result<Measured> {
    let prefix = uuid::Uuid::new_v4().simple().to_string();
    let journals: Vec<(String, Vec<Event>)> = (0..runs)
        .map(|r| {
            let id = format!("bench-{prefix}-{r}");
            let events = journal(&id, outputs, bytes, r as u64 * 1_000);
            (id, events)
        })
        .collect();
    let (cpu, wrote, started) = (process_cpu(), written(), Instant::now());
    let tasks: Vec<_> = journals
        .iter()
        .cloned()
        .map(|(id, events)| {
            let store = store.clone();
            tokio::spawn(async move {
                for (seq, event) in (0u64..).zip(events) {
                    store.append(&id, seq, std::slice::from_ref(&event)).await?;
                }
                Ok::<_, agentloop::store::StoreError>(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    let elapsed = started.elapsed();
    let cpu = process_cpu().saturating_sub(cpu);
    let wrote = written().saturating_sub(wrote);
    let total = runs * (outputs + 1);
    let loading = Instant::now();
    for (id, events) in &journals {
        let loaded = store.load(id).await?;
        if loaded.len() != events.len()
            || *loaded[loaded.len() - 1].event != events[events.len() - 1]
        {
            return Err(format!("run {id}: the loaded journal differs").into());
        }
    }
    let load_per_run = loading.elapsed() / u32::try_from(runs).unwrap_or(u32::MAX);
    for (id, _) in &journals {
        store.delete_run(id).await?;
    }
    Ok(Measured {
        appends_per_s: total as f64 / elapsed.as_secs_f64(),
        cpu_per_append: cpu / u32::try_from(total).unwrap_or(u32::MAX),
        written_per_append: wrote as f64 / total as f64,
        load_per_run,
    })
}

/// The value after `flag` parsed as a comma-separated list of numbers, or `default`.
fn numbers(args: &[String], flag: &str, default: &str) -> Result<Vec<usize>> {
    let value = args
        .iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map_or(default, String::as_str);
    Ok(value.split(',').map(str::parse).collect::<std::result::Result<_, _>>()?)
}

/// Deflate at `level` over `outputs`: the compressed share and the CPU per output.
fn deflate(outputs: &[String], level: u32) -> Result<(f64, Duration)> {
    let (mut raw, mut packed) = (0usize, 0usize);
    let cpu = process_cpu();
    for text in outputs {
        let mut encoder =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(level));
        encoder.write_all(text.as_bytes())?;
        packed += encoder.finish()?.len();
        raw += text.len();
    }
    let cpu = process_cpu().saturating_sub(cpu);
    Ok((packed as f64 / raw as f64, cpu / u32::try_from(outputs.len()).unwrap_or(1)))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let sizes = numbers(&args, "--sizes", "4096,32768,131072")?;
    let runs = numbers(&args, "--runs", "100")?.first().copied().unwrap_or(100);
    let outputs = numbers(&args, "--outputs", "5")?.first().copied().unwrap_or(5);
    let dir = std::env::temp_dir().join(format!("agentloop-bench-outputs-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let url =
        std::env::var("AGENTLOOP_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("agentloop-bench-outputs:{}:", std::process::id());
    println!("{runs} runs at once, each a run_started and {outputs} tool outputs, one append each");
    println!("| output | store | outputs | appends/s | CPU per append | bytes written per append | load one journal |");
    println!("| ---: | --- | --- | ---: | ---: | ---: | ---: |");
    for &bytes in &sizes {
        for (kind, limit) in [("in the journal", None), ("by reference", Some(1024))] {
            let sqlite = SqliteStore::open_with(
                dir.join(format!("{bytes}-{}.db", limit.is_some())),
                SqliteOptions { large_output_bytes: limit, ..SqliteOptions::default() },
            )?;
            let redis = RedisStore::connect_with(
                &url,
                RedisOptions::default().prefix(prefix.clone()).large_output_bytes(limit),
            )
            .await?;
            let stores: [(&str, Arc<dyn RunStore>); 2] =
                [("SQLite", Arc::new(sqlite)), ("Redis", Arc::new(redis))];
            for (name, store) in stores {
                let m = measure(store, runs, outputs, bytes).await?;
                println!(
                    "| {} KiB | {name} | {kind} | {:.0} | {:.0} µs | {:.0} | {:.2} ms |",
                    bytes / 1024,
                    m.appends_per_s,
                    m.cpu_per_append.as_secs_f64() * 1e6,
                    m.written_per_append,
                    m.load_per_run.as_secs_f64() * 1e3,
                );
            }
        }
    }
    println!();
    println!("| output | deflate level | compressed to | CPU per output |");
    println!("| ---: | ---: | ---: | ---: |");
    for &bytes in &sizes {
        let texts: Vec<String> = (0..50).map(|i| output(bytes, i)).collect();
        for level in [1, 6] {
            let (ratio, cpu) = deflate(&texts, level)?;
            println!(
                "| {} KiB | {level} | {:.0} % | {:.0} µs |",
                bytes / 1024,
                ratio * 100.0,
                cpu.as_secs_f64() * 1e6
            );
        }
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
