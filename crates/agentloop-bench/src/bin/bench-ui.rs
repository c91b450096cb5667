//! `bench-ui`: the JSON API of the runs UI over a large registry (see `docs/PERFORMANCE.md`,
//! "Runs UI").
//!
//! `cargo run --release -p agentloop-bench --bin bench-ui [-- --store sqlite|redis --runs N
//! --requests N --pages N]` (defaults sqlite, 100000, 200, every page; `--smoke` runs tiny numbers;
//! Redis at `AGENTLOOP_REDIS_URL`, default `redis://127.0.0.1:6379`, under a key prefix of its
//! own that is emptied afterwards). Seeds `--runs` finished and failed runs of ten agents
//! (sessions, tokens, cost, 10–12 journal entries each) and one run of 1,000 model + tool
//! iterations journaled by a real agent, serves the whole server (`agentloop_server::Server`,
//! UI included) on a loopback port, and times with an HTTP client, from sending the request to
//! the last byte of the body (p50 / p99 over `--requests`, after 5 unmeasured):
//!
//! - `GET /ui/api/runs`: the first page (50 runs);
//! - the first page of one agent among ten, of one state (`failed`, a tenth of the runs), and of
//!   a state no run is in (`suspended`);
//! - the first page of a search (`q`) that every run matches, and of one that a single run
//!   matches (the worst case: every run's input and answer is read);
//! - pages 2 to `--pages` (default: to the end of the list), each from the previous page's `next`;
//! - `GET /ui/api/runs/{id}` of the 1,000-iteration run.
//!
//! `--serve` seeds, then serves until SIGINT or SIGTERM (and then empties its store) for the
//! browser half (`scripts/ui/bench.mjs`); its first line on stdout is
//! `serving http://127.0.0.1:PORT/ui run_1000=RUN_ID`.

use agentloop::event::Event;
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::ProviderError;
use agentloop::run::Price;
use agentloop::store::redis::{RedisOptions, RedisStore};
use agentloop::store::sqlite::SqliteStore;
use agentloop::store::{now_ms, JournalEntry, MemoryStore, RunStore, SessionStore};
use agentloop::tool::builtin::Calculator;
use agentloop_server::{ServedAgent, Server, ServerConfig};
use futures::StreamExt;
use serde_json::{json, Value};
use std::error::Error;
use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// The agents the seeded runs belong to.
const AGENTS: usize = 10;
/// Runs per session.
const RUNS_PER_SESSION: usize = 4;
/// One failed run in this many.
const FAILED_EVERY: usize = 10;
/// The id of the long run.
const LONG_RUN: &str = "run_1000_iterations";
/// The long run's iterations.
const LONG_ITERATIONS: usize = 1_000;
/// The runs appended at once while seeding.
const SEED_CONCURRENCY: usize = 32;
/// What each seeded run was asked (then its number).
const QUESTION: &str = "What is 17 times 23? Then explain the result in one sentence.";
/// Requests before each measurement that are not counted.
const WARM_UP: usize = 5;

struct Options {
    runs: usize,
    requests: usize,
    pages: usize,
    redis: bool,
    serve: bool,
}

fn parse() -> Result<Options> {
    let mut options =
        Options { runs: 100_000, requests: 200, pages: usize::MAX, redis: false, serve: false };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || -> Result<usize> {
            Ok(args.next().ok_or_else(|| format!("{arg} needs a value"))?.parse()?)
        };
        match arg.as_str() {
            "--runs" => options.runs = value()?,
            "--requests" => options.requests = value()?,
            "--pages" => options.pages = value()?,
            "--serve" => options.serve = true,
            "--smoke" => options = Options { runs: 300, requests: 10, pages: 5, ..options },
            "--store" => match args.next().as_deref() {
                Some("sqlite") => options.redis = false,
                Some("redis") => options.redis = true,
                other => return Err(format!("--store takes sqlite or redis, not {other:?}").into()),
            },
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(options)
}

/// Where the runs are: a SQLite file in a directory of its own, or Redis under a key prefix.
enum Backend {
    Sqlite(std::path::PathBuf),
    Redis { url: String, prefix: String },
}

impl Backend {
    fn new(redis: bool) -> Result<Self> {
        let pid = std::process::id();
        Ok(if redis {
            let url = std::env::var("AGENTLOOP_REDIS_URL")
                .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
            Self::Redis { url, prefix: format!("agentloop-bench-ui:{pid}:") }
        } else {
            let dir = std::env::temp_dir().join(format!("agentloop-bench-ui-{pid}"));
            std::fs::create_dir_all(&dir)?;
            Self::Sqlite(dir)
        })
    }

    fn describe(&self) -> String {
        match self {
            Self::Sqlite(dir) => format!("SQLite, {}", dir.join("runs.db").display()),
            Self::Redis { url, prefix } => format!("Redis at {url}, keys under {prefix}"),
        }
    }

    async fn open(&self) -> Result<Arc<dyn RunStore>> {
        Ok(match self {
            Self::Sqlite(dir) => Arc::new(SqliteStore::open(dir.join("runs.db"))?),
            Self::Redis { url, prefix } => {
                let options = RedisOptions::default().prefix(prefix.clone());
                Arc::new(RedisStore::connect_with(url, options).await?)
            }
        })
    }

    /// The sessions the served agent needs (a connection of their own).
    async fn sessions(&self) -> Result<Arc<dyn SessionStore>> {
        Ok(match self {
            Self::Sqlite(dir) => Arc::new(SqliteStore::open(dir.join("runs.db"))?),
            Self::Redis { url, prefix } => {
                let options = RedisOptions::default().prefix(prefix.clone());
                Arc::new(RedisStore::connect_with(url, options).await?)
            }
        })
    }

    /// Removes everything the bench wrote: the SQLite directory, or every key under the prefix.
    async fn clean(&self) -> Result<()> {
        match self {
            Self::Sqlite(dir) => std::fs::remove_dir_all(dir)?,
            Self::Redis { url, prefix } => {
                let client = redis::Client::open(url.as_str())?;
                let mut conn = client.get_multiplexed_async_connection().await?;
                let mut cursor = 0u64;
                loop {
                    let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(format!("{prefix}*"))
                        .arg("COUNT")
                        .arg(10_000)
                        .query_async(&mut conn)
                        .await?;
                    if !keys.is_empty() {
                        let _: i64 = redis::cmd("UNLINK").arg(&keys).query_async(&mut conn).await?;
                    }
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
            }
        }
        Ok(())
    }
}

fn price() -> Price {
    Price::per_million(3.0, 15.0)
}

/// The journal a real agent writes for `turns` (run on a store in memory): the template of
/// the seeded runs.
async fn template(turns: Vec<ScriptedTurn>) -> Result<Vec<Event>> {
    let store: Arc<dyn RunStore> = Arc::new(MemoryStore::new());
    let agent = Agent::builder(ScriptedModel::new(turns).without_recording())
        .name("template")
        .tool(Calculator)
        .retry_policy(None)
        .price(price())
        .store(store.clone())
        .build()?;
    let options = RunOptions { run_id: Some("template".into()), ..RunOptions::default() };
    // A failing template fails its run: the journal is what counts.
    let _ = agent.run_with(QUESTION, options).await;
    Ok(store.load("template").await?.iter().map(|entry| (*entry.event).clone()).collect())
}

/// The templates: a finished run (a calculator call, then the answer) and a failed one (a
/// calculator call, then a model error).
async fn templates() -> Result<[Vec<Event>; 2]> {
    let call = || ScriptedTurn::tool_call("calculator", json!({"expression": "17 * 23"}));
    let finished = template(vec![
        call(),
        ScriptedTurn::text("17 times 23 is 391: seventeen twenty-threes, or 340 plus 51."),
    ])
    .await?;
    let failed = template(vec![
        call(),
        ScriptedTurn::error(ProviderError::InvalidRequest {
            message: "the prompt is not valid for this model".into(),
        }),
    ])
    .await?;
    for (name, journal, last) in
        [("finished", &finished, "run_finished"), ("failed", &failed, "run_failed")]
    {
        if journal.last().map(Event::kind) != Some(last) {
            return Err(format!("the {name} template does not end with {last}").into());
        }
    }
    Ok([finished, failed])
}

/// Run `n` of the seed: `template`'s events for a run of its own (agent, session, usage),
/// created `created_ms`, one entry every 150 ms.
fn seeded(template: &[Event], n: usize, created_ms: u64) -> Result<Vec<JournalEntry>> {
    let scale = 1 + (n % 7) as u64;
    let mut entries = Vec::with_capacity(template.len());
    for (seq, event) in template.iter().enumerate() {
        let mut event = event.clone();
        match &mut event {
            Event::RunStarted { run_id, config, input } => {
                *run_id = format!("run_{n:06}");
                if let Some(asked) = input.last_mut() {
                    *asked = Message::user(format!("{QUESTION} (request {n:06})"));
                }
                config.agent = Some(format!("agent_{}", n % AGENTS));
                config.context_id = Some(format!("session_{:06}", n / RUNS_PER_SESSION));
            }
            Event::ModelResponded { usage, .. } => {
                usage.input = usage.input * scale + 1_200;
                usage.output = usage.output * scale + 40;
            }
            _ => {}
        }
        let mut entry = JournalEntry::of(seq as u64, event)?;
        entry.at_ms = created_ms + 150 * seq as u64;
        entries.push(entry);
    }
    Ok(entries)
}

/// Seeds `runs` runs, one a second up to now, a tenth of them failed.
async fn seed(store: &Arc<dyn RunStore>, runs: usize) -> Result<()> {
    let [finished, failed] = templates().await?;
    let (finished, failed) = (Arc::new(finished), Arc::new(failed));
    let first_ms = now_ms().saturating_sub(1_000 * runs as u64 + 60_000);
    let started = Instant::now();
    let mut appends = futures::stream::iter(0..runs)
        .map(|n| {
            let (store, finished, failed) = (store.clone(), finished.clone(), failed.clone());
            async move {
                let template = if n % FAILED_EVERY == FAILED_EVERY - 1 { failed } else { finished };
                let entries = seeded(&template, n, first_ms + 1_000 * n as u64)?;
                store.append_entries(&format!("run_{n:06}"), 0, &entries).await?;
                Ok::<_, Box<dyn Error>>(())
            }
        })
        .buffer_unordered(SEED_CONCURRENCY);
    while let Some(appended) = appends.next().await {
        appended?;
    }
    eprintln!(
        "- seeded {runs} runs ({} and {} entries) in {:.1} s",
        finished.len(),
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The run of 1,000 iterations, each a model turn that calls the calculator, journaled by a
/// real agent on `store`.
async fn seed_long(store: &Arc<dyn RunStore>) -> Result<()> {
    let turns: Vec<ScriptedTurn> = (0..LONG_ITERATIONS)
        .map(|i| {
            ScriptedTurn::tool_call("calculator", json!({"expression": format!("{i} * 3 + 1")}))
                .with_text(format!("Step {i}: computing the next value."))
        })
        .chain([ScriptedTurn::text("Done: 1,000 steps computed.")])
        .collect();
    let agent = Agent::builder(ScriptedModel::new(turns).without_recording())
        .name("agent_0")
        .tool(Calculator)
        .max_iterations(u32::try_from(LONG_ITERATIONS + 1)?)
        .price(price())
        .store(store.clone())
        .build()?;
    let started = Instant::now();
    let options = RunOptions { run_id: Some(LONG_RUN.into()), ..RunOptions::default() };
    let outcome = agent.run_with("Compute 1,000 values, one tool call each.", options).await?;
    eprintln!(
        "- the long run: {} iterations, {} journal entries, in {:.1} s",
        outcome.iterations,
        store.next_seq(LONG_RUN).await?,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The server (every route, the UI's included) on a loopback port: its root URL.
async fn serve(
    store: Arc<dyn RunStore>,
    sessions: Arc<dyn SessionStore>,
) -> Result<(String, tokio::sync::oneshot::Sender<()>)> {
    let agent = Agent::builder(ScriptedModel::new(Vec::<ScriptedTurn>::new()))
        .name("ui-bench")
        .store(store)
        .session_store(sessions)
        .build()?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let root = format!("http://{}", listener.local_addr()?);
    let config = ServerConfig { public_url: root.clone(), ..ServerConfig::default() };
    let server = Server::new(vec![ServedAgent::new(agent, "the runs UI benchmark")?], config)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async move {
        let _ = stopped.await;
    }));
    Ok((root, stop))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// One GET, timed from the request to the last byte of its body: the time and the body.
async fn get(client: &reqwest::Client, url: &str) -> Result<(Duration, bytes::Bytes)> {
    let started = Instant::now();
    let response = client.get(url).send().await?;
    let status = response.status();
    let body = response.bytes().await?;
    let took = started.elapsed();
    if !status.is_success() {
        return Err(format!("GET {url}: {status}: {}", String::from_utf8_lossy(&body)).into());
    }
    Ok((took, body))
}

/// The target of every API call.
const TARGET: Duration = Duration::from_millis(50);

fn report(what: &str, times: &mut [Duration], bytes: usize) {
    times.sort();
    let p99 = percentile(times, 0.99);
    println!(
        "- {what}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms over {} requests, {:.1} KiB [{}]",
        ms(percentile(times, 0.5)),
        ms(p99),
        ms(times.last().copied().unwrap_or_default()),
        times.len(),
        bytes as f64 / 1024.0,
        if p99 < TARGET { "under 50 ms" } else { "OVER 50 ms" }
    );
}

/// `requests` GETs of `path` after the warm-up; `expect` checks each body.
async fn measure(
    client: &reqwest::Client,
    url: String,
    requests: usize,
    expect: impl Fn(&Value) -> bool,
) -> Result<(Vec<Duration>, usize)> {
    let mut times = Vec::with_capacity(requests);
    let mut size = 0;
    for n in 0..WARM_UP + requests {
        let (took, body) = get(client, &url).await?;
        let parsed: Value = serde_json::from_slice(&body)?;
        if !expect(&parsed) {
            let shown: String = String::from_utf8_lossy(&body).chars().take(300).collect();
            return Err(format!("GET {url}: unexpected answer {shown}").into());
        }
        if n >= WARM_UP {
            times.push(took);
        }
        size = body.len();
    }
    Ok((times, size))
}

fn page_len(page: &Value) -> usize {
    page["runs"].as_array().map_or(0, Vec::len)
}

/// Pages 2 to `pages` of the whole list, each from the previous page's `next`.
async fn deep_pages(client: &reqwest::Client, root: &str, pages: usize) -> Result<()> {
    let (mut times, mut next, mut seen, mut size) = (Vec::new(), None::<String>, 0usize, 0usize);
    for _ in 0..pages {
        let url = match &next {
            Some(cursor) => format!("{root}/ui/api/runs?limit=50&after={cursor}"),
            None => format!("{root}/ui/api/runs?limit=50"),
        };
        let (took, body) = get(client, &url).await?;
        let page: Value = serde_json::from_slice(&body)?;
        seen += page_len(&page);
        if next.is_some() {
            times.push(took);
            size = body.len();
        }
        match page["next"].as_str() {
            Some(cursor) => next = Some(cursor.to_owned()),
            None => break,
        }
    }
    let last = times.last().copied().unwrap_or_default();
    report(
        &format!(
            "`next` pages 2 to {} (runs 51 to {seen}; the last page {:.2} ms)",
            times.len() + 1,
            ms(last)
        ),
        &mut times,
        size,
    );
    Ok(())
}

async fn bench(root: &str, options: &Options) -> Result<()> {
    let client =
        agentloop::tls::http_client_builder()?.timeout(Duration::from_secs(120)).build()?;
    let runs = options.runs;
    let requests = options.requests;
    let full = move |expected: usize| move |page: &Value| page_len(page) == expected;
    let api = format!("{root}/ui/api/runs");
    for (what, query, expected, requests) in [
        ("the first page", String::new(), 50.min(runs + 1), requests),
        (
            "the first page of one agent of ten",
            "?agent=agent_3".into(),
            50.min(runs / AGENTS),
            requests,
        ),
        (
            "the first page of one state (`failed`, a tenth)",
            "?state=failed".into(),
            50.min(runs / FAILED_EVERY),
            requests,
        ),
        ("a state no run is in (`suspended`)", "?state=suspended".into(), 0, requests.min(20)),
        ("a search every run matches", "?q=17%20times".into(), 50.min(runs), requests),
        (
            "a search one run matches (every input and answer is read)",
            format!("?q=request%20{:06}", runs / 2),
            1.min(runs),
            requests.min(20),
        ),
    ] {
        let (mut times, size) =
            measure(&client, format!("{api}{query}"), requests, full(expected)).await?;
        report(&format!("GET /ui/api/runs{query}: {what}"), &mut times, size);
    }
    deep_pages(&client, root, options.pages).await?;
    let entries = |body: &Value| body["entries"].as_array().map_or(0, Vec::len);
    let url = format!("{api}/{LONG_RUN}");
    let (mut times, size) = measure(&client, url, requests, |body| entries(body) > 5_000).await?;
    report(
        &format!("GET /ui/api/runs/{{id}}: the run of {LONG_ITERATIONS} iterations"),
        &mut times,
        size,
    );
    Ok(())
}

/// Where the time of `GET /ui/api/runs/{id}` goes, in process: the store's `load`, and, for
/// comparison, the answer's JSON built through a `serde_json::Value` per entry (as the API
/// did before it serialized the entries directly).
async fn breakdown(store: &Arc<dyn RunStore>, requests: usize) -> Result<()> {
    let (mut loads, mut encodes) = (Vec::new(), Vec::new());
    for _ in 0..requests.min(50) {
        let started = Instant::now();
        let entries = store.load(LONG_RUN).await?;
        loads.push(started.elapsed());
        let started = Instant::now();
        let shown: Vec<Value> = entries
            .iter()
            .map(|e| json!({"seq": e.seq, "at_ms": e.at_ms, "kind": e.event.kind(), "event": &*e.event}))
            .collect();
        let text = serde_json::to_vec(&json!({"run": null, "entries": shown}))?;
        encodes.push(started.elapsed());
        if text.len() < 1_000 {
            return Err("the long run's answer is too short".into());
        }
    }
    loads.sort();
    encodes.sort();
    println!(
        "  - of which, in process: the store's `load` of its {} entries p50 {:.2} ms, p99 {:.2} ms; \
         the answer through a `Value` per entry (the API before) p50 {:.2} ms, p99 {:.2} ms",
        store.next_seq(LONG_RUN).await?,
        ms(percentile(&loads, 0.5)),
        ms(percentile(&loads, 0.99)),
        ms(percentile(&encodes, 0.5)),
        ms(percentile(&encodes, 0.99)),
    );
    Ok(())
}

/// Waits for SIGINT or SIGTERM.
async fn stopped() -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let options = parse()?;
    let backend = Backend::new(options.redis)?;
    eprintln!("store: {}", backend.describe());
    let result = async {
        let store = backend.open().await?;
        seed(&store, options.runs).await?;
        seed_long(&store).await?;
        let (root, stop) = serve(store.clone(), backend.sessions().await?).await?;
        if options.serve {
            println!("serving {root}/ui run_1000={LONG_RUN}");
            std::io::stdout().flush()?;
            stopped().await?;
        } else {
            println!("runs UI API over {} runs ({}):", options.runs, backend.describe());
            bench(&root, &options).await?;
            breakdown(&store, options.requests).await?;
        }
        let _ = stop.send(());
        Ok::<_, Box<dyn Error>>(())
    }
    .await;
    backend.clean().await?;
    result
}
