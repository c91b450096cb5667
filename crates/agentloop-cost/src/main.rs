//! `agentloop-cost`: the workload the cost gate counts (`scripts/cost-gate.sh`). It runs
//! `--runs N` agent runs of [`TOOL_ROUNDS`] tool rounds and a final answer each, on a mock
//! model in the same process (no sockets, no HTTP: only the loop's own work), on a
//! single-threaded tokio runtime, and prints the rounds it made.
//!
//! ```text
//! agentloop-cost --scenario loop-json|loop-stream|sqlite-json|sqlite-stream --runs N
//! ```
//!
//! `loop-*`: an agent without a store (the loop in memory). `sqlite-*`: every run journaled
//! in a SQLite file in the temporary directory (durability `Sync`), deleted at the end.
//! `*-json`: the model answers whole (`Provider::streams` is false, as an HTTP provider that
//! does not stream); `*-stream`: it streams its answer as chunks.
//!
//! Instructions per round are the difference of two processes' counts (N and 5N runs)
//! divided by the rounds in between, so start-up and first-use costs cancel.

use agentloop::context::ContextConfig;
use agentloop::message::{FinishReason, Part, Role, Usage};
use agentloop::provider::{
    ChunkStream, ModelRequest, ModelResponse, Provider, ProviderError, StreamChunk,
};
use agentloop::Agent;
use futures::future::BoxFuture;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Tool rounds per run (each a call of `add`), before the final answer.
const TOOL_ROUNDS: usize = 10;

/// The final answer.
const ANSWER: &str = "3";

/// The arguments of every call.
const ARGUMENTS: &str = r#"{"a":1,"b":2}"#;

/// Adds two integers.
#[agentloop::tool]
async fn add(a: i64, b: i64) -> Result<i64, String> {
    a.checked_add(b).ok_or_else(|| "overflow".to_string())
}

/// A model in the process: it calls `add` until the request holds [`TOOL_ROUNDS`] tool
/// results, then answers [`ANSWER`]. Its turns are built once and cloned, with a call id of
/// fixed length per turn.
struct Mock {
    stream: bool,
    turn: AtomicU64,
    call_chunks: Vec<StreamChunk>,
    answer_chunks: Vec<StreamChunk>,
    call_response: ModelResponse,
    answer_response: ModelResponse,
}

impl Mock {
    /// The mock; `stream`: answers as chunks, else whole.
    async fn new(stream: bool) -> anyhow::Result<Self> {
        let usage = Usage { input: 40, output: 10, ..Usage::default() };
        let id = call_id(0);
        let call_chunks = vec![
            StreamChunk::ToolCallStart { id: id.clone(), name: "add".into() },
            StreamChunk::ToolCallDelta { id: id.clone(), delta: ARGUMENTS.into() },
            StreamChunk::ToolCallEnd { id },
            StreamChunk::Usage { usage },
            StreamChunk::Finish { reason: FinishReason::ToolCalls },
        ];
        let answer_chunks = vec![
            StreamChunk::TextDelta { text: ANSWER.into() },
            StreamChunk::Usage { usage },
            StreamChunk::Finish { reason: FinishReason::Stop },
        ];
        let whole = |chunks: &[StreamChunk]| {
            let chunks: Vec<_> = chunks.iter().cloned().map(Ok).collect();
            agentloop::provider::collect(Box::pin(futures::stream::iter(chunks)))
        };
        Ok(Self {
            stream,
            turn: AtomicU64::new(0),
            call_response: whole(&call_chunks).await?,
            answer_response: whole(&answer_chunks).await?,
            call_chunks,
            answer_chunks,
        })
    }

    /// Whether the next turn is the answer; the next call's id otherwise.
    fn next(&self, request: &ModelRequest) -> Option<String> {
        let results = request.messages.iter().filter(|m| m.role == Role::Tool).count();
        if results >= TOOL_ROUNDS {
            return None;
        }
        Some(call_id(self.turn.fetch_add(1, Ordering::Relaxed)))
    }
}

/// A call id of fixed length.
fn call_id(turn: u64) -> String {
    format!("call_{turn:010}")
}

impl Provider for Mock {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let chunks = match self.next(&request) {
            None => self.answer_chunks.clone(),
            Some(id) => {
                let mut chunks = self.call_chunks.clone();
                for chunk in &mut chunks {
                    match chunk {
                        StreamChunk::ToolCallStart { id: old, .. }
                        | StreamChunk::ToolCallDelta { id: old, .. }
                        | StreamChunk::ToolCallEnd { id: old } => old.clone_from(&id),
                        _ => {}
                    }
                }
                chunks
            }
        };
        Box::pin(futures::stream::iter(chunks.into_iter().map(Ok)))
    }

    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        let response = match self.next(&request) {
            None => self.answer_response.clone(),
            Some(id) => {
                let mut response = self.call_response.clone();
                for part in &mut response.message.content {
                    if let Part::ToolCall(call) = part {
                        call.id.clone_from(&id);
                    }
                }
                response
            }
        };
        Box::pin(futures::future::ready(Ok(response)))
    }

    fn name(&self) -> &str {
        "cost-mock"
    }

    fn streams(&self) -> bool {
        self.stream
    }
}

/// What to run.
struct Plan {
    sqlite: bool,
    stream: bool,
    runs: u64,
}

fn parse_args() -> anyhow::Result<Plan> {
    let mut args = std::env::args().skip(1);
    let (mut scenario, mut runs) = (None, None);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| anyhow::anyhow!("{arg} needs a value"));
        match arg.as_str() {
            "--scenario" => scenario = Some(value()?),
            "--runs" => runs = Some(value()?.parse::<u64>()?),
            other => anyhow::bail!("unknown argument {other:?}"),
        }
    }
    let (sqlite, stream) = match scenario.as_deref() {
        Some("loop-json") => (false, false),
        Some("loop-stream") => (false, true),
        Some("sqlite-json") => (true, false),
        Some("sqlite-stream") => (true, true),
        other => anyhow::bail!(
            "--scenario must be loop-json, loop-stream, sqlite-json or sqlite-stream (got {other:?})"
        ),
    };
    let runs = runs.ok_or_else(|| anyhow::anyhow!("--runs N is required"))?;
    Ok(Plan { sqlite, stream, runs })
}

/// The SQLite file of this process (and its `-wal` and `-shm` companions).
fn sqlite_files() -> Vec<std::path::PathBuf> {
    let base = std::env::temp_dir().join(format!("agentloop-cost-{}.db", std::process::id()));
    let mut files = vec![base.clone()];
    for suffix in ["-wal", "-shm"] {
        let mut name = base.clone().into_os_string();
        name.push(suffix);
        files.push(name.into());
    }
    files
}

async fn run(plan: &Plan) -> anyhow::Result<u64> {
    let context = ContextConfig { max_input_messages: None, ..ContextConfig::default() };
    let mut builder = Agent::builder(Mock::new(plan.stream).await?)
        .tool(Add)
        .max_iterations(u32::try_from(TOOL_ROUNDS + 2)?)
        .context(context);
    if plan.sqlite {
        use agentloop::store::sqlite::{SqliteOptions, SqliteStore};
        // No checkpoint thread: it runs on a timer, which would make the count depend on
        // how long the process takes (the write-ahead log stays far below the writer's own
        // checkpoint at `checkpoint_pages`).
        let options = SqliteOptions {
            checkpoint_interval: std::time::Duration::ZERO,
            ..SqliteOptions::default()
        };
        let store = SqliteStore::open_with(&sqlite_files()[0], options)?;
        builder = builder.store(Arc::new(store)).durability(agentloop::store::Durability::Sync);
    }
    let agent = builder.build()?;
    let mut rounds = 0;
    for _ in 0..plan.runs {
        let outcome = agent.run("go").await?;
        anyhow::ensure!(outcome.answer == ANSWER, "wrong answer {:?}", outcome.answer);
        rounds += u64::from(outcome.iterations);
    }
    Ok(rounds)
}

fn main() -> anyhow::Result<()> {
    let plan = parse_args()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    let result = runtime.block_on(run(&plan));
    drop(runtime);
    if plan.sqlite {
        for file in sqlite_files() {
            let _ = std::fs::remove_file(file);
        }
    }
    let rounds = result?;
    anyhow::ensure!(
        rounds == plan.runs * (TOOL_ROUNDS as u64 + 1),
        "{rounds} rounds in {} runs, expected {} each",
        plan.runs,
        TOOL_ROUNDS + 1
    );
    println!("{rounds} rounds");
    Ok(())
}
