//! Checkpoint cost: the time of one journal append (one durable event, as the journaling
//! wrapper writes it) for the memory store, SQLite and Redis (when `AGENTLOOP_REDIS_URL` is
//! set), at journal lengths 10 and 10,000, to show that an append does not grow with the
//! history.
//!
//! `cargo bench -p agentloop --all-features --bench journal`
//!
//! Each timed batch appends at most 100 events to a run prefilled (untimed) to the length, so
//! the length stays within 100 of the nominal one. Appends are fenced by the run's lease
//! (`RunStore::append_fenced`), as an agent's journaling makes them.

use agentloop::event::{Event, JournalEvent};
use agentloop::message::ToolResult;
use agentloop::store::{JournalEntry, MemoryStore, RunStore};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A typical durable event: a tool result of about 200 bytes of JSON.
fn event(i: u64) -> JournalEvent {
    let event = Event::ToolCompleted {
        name: "search".into(),
        result: ToolResult::ok(
            format!("call_{i}"),
            json!({"hits": [{"title": "Journal append cost", "url": "https://example.org/a", "rank": i}]}),
        ),
        duration_ms: 12,
        control: None,
        usage: None,
        cost_usd: None,
        remote: None,
    };
    JournalEvent::new(event).unwrap_or_else(|e| exit("event", e))
}

fn exit(what: &str, error: impl std::fmt::Display) -> ! {
    eprintln!("journal bench: {what}: {error}");
    std::process::exit(1)
}

/// A new run prefilled to `length` entries (in batches of 1,000).
async fn prefilled(store: &dyn RunStore, length: u64) -> String {
    let run_id = format!("bench-{}", uuid::Uuid::new_v4().simple());
    let mut seq = 0;
    while seq < length {
        let batch: Vec<JournalEntry> =
            (seq..length.min(seq + 1_000)).map(|i| JournalEntry::new(i, event(i))).collect();
        seq =
            store.append_entries(&run_id, seq, &batch).await.unwrap_or_else(|e| exit("prefill", e));
    }
    run_id
}

fn bench_store(
    c: &mut Criterion,
    runtime: &tokio::runtime::Runtime,
    name: &str,
    store: Arc<dyn RunStore>,
) {
    let mut group = c.benchmark_group(format!("append/{name}"));
    group.measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    group.sample_size(20);
    for length in [10u64, 10_000] {
        group.bench_with_input(BenchmarkId::new("length", length), &length, |b, &length| {
            b.to_async(runtime).iter_custom(|iters| {
                let store = store.clone();
                async move {
                    let mut total = Duration::ZERO;
                    let mut done = 0;
                    let mut runs = Vec::new();
                    while done < iters {
                        let run_id = prefilled(&*store, length).await;
                        let lease = store
                            .claim(&run_id, "bench", Duration::from_secs(600))
                            .await
                            .unwrap_or_else(|e| exit("claim", e));
                        let n = (iters - done).min(100);
                        let started = Instant::now();
                        for seq in length..length + n {
                            let entry = JournalEntry::new(seq, event(seq));
                            store
                                .append_fenced(&lease, seq, std::slice::from_ref(&entry))
                                .await
                                .unwrap_or_else(|e| exit("append", e));
                        }
                        total += started.elapsed();
                        done += n;
                        runs.push(run_id);
                    }
                    for run_id in runs {
                        store.delete_run(&run_id).await.unwrap_or_else(|e| exit("delete", e));
                    }
                    total
                }
            });
        });
    }
    group.finish();
}

fn journal(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| exit("runtime", e));
    bench_store(c, &runtime, "memory", Arc::new(MemoryStore::new()));

    let dir = tempfile::tempdir().unwrap_or_else(|e| exit("temp dir", e));
    let sqlite = agentloop::store::sqlite::SqliteStore::open(dir.path().join("bench.db"))
        .unwrap_or_else(|e| exit("sqlite", e));
    bench_store(c, &runtime, "sqlite", Arc::new(sqlite));

    #[cfg(feature = "redis")]
    match std::env::var("AGENTLOOP_REDIS_URL") {
        Ok(url) => {
            use agentloop::store::redis::{RedisOptions, RedisStore};
            let prefix = format!("agentloop-bench:{}:", uuid::Uuid::new_v4().simple());
            let store = runtime
                .block_on(RedisStore::connect_with(&url, RedisOptions::default().prefix(prefix)))
                .unwrap_or_else(|e| exit("redis", e));
            bench_store(c, &runtime, "redis", Arc::new(store));
        }
        Err(_) => eprintln!("journal bench: AGENTLOOP_REDIS_URL is not set; Redis skipped"),
    }
}

criterion_group!(benches, journal);
criterion_main!(benches);
