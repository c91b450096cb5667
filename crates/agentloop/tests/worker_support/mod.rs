//! What the worker tests share: a model that answers from the conversation (so any process
//! gives a run the same turns), tools that record every execution in Redis with its
//! idempotency key, and a Redis key space of its own per test.
#![allow(dead_code)]

use agentloop::message::Role;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::{ChunkStream, ModelRequest, Provider};
use agentloop::store::redis::{RedisOptions, RedisStore};
use agentloop::store::RunStore;
use agentloop::tool::{DynTool, ToolContext, ToolError, ToolOutput, ToolSpec};
use agentloop::worker::{Queue, QueueOptions};
use agentloop::Agent;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// The tool calls of every run, in order: (tool, safe to retry).
pub const STEPS: [(&str, bool); 3] = [("step_a", true), ("step_b", false), ("step_c", true)];

/// The answer of every run: the three tools' results, joined.
pub const ANSWER: &str = "done: a1 b2 c3";

/// The Redis URL, or `None` (the test is skipped).
pub fn redis_url() -> Option<String> {
    match std::env::var("AGENTLOOP_REDIS_URL") {
        Ok(url) => Some(url),
        Err(_) => {
            eprintln!("skipped: AGENTLOOP_REDIS_URL is not set");
            None
        }
    }
}

/// A key prefix of its own.
pub fn prefix(test: &str) -> String {
    format!("agentloop-test:{test}:{}:", uuid::Uuid::new_v4().simple())
}

/// Answers from the conversation: the i-th assistant turn calls the i-th step, the last one
/// answers with the results seen.
pub struct Steps;

impl Provider for Steps {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let turn = request.messages.iter().filter(|m| m.role == Role::Assistant).count();
        let scripted = match STEPS.get(turn) {
            Some((tool, _)) => ScriptedTurn::tool_call(*tool, json!({"n": turn + 1}))
                .with_call_id(format!("call_{turn}")),
            None => ScriptedTurn::text(ANSWER),
        };
        ScriptedModel::new([scripted]).stream(request)
    }

    fn name(&self) -> &str {
        "steps"
    }
}

/// How long a step takes: `before` its effect, then `after` it (a kill in `after` leaves a
/// call that had its effect but no journaled result; one in `before`, a call that had none).
#[derive(Debug, Clone, Copy)]
pub struct Delays {
    pub before: Duration,
    pub after: Duration,
}

impl Delays {
    /// All of it after the effect.
    pub fn after(after: Duration) -> Self {
        Self { before: Duration::ZERO, after }
    }

    /// Half before the effect, half after.
    pub fn split(total: Duration) -> Self {
        Self { before: total / 2, after: total / 2 }
    }
}

/// A step: waits, records its execution (`RPUSH {prefix}exec:{name}` of the idempotency
/// key), waits again, and answers `<letter><n>`.
pub struct Step {
    pub name: &'static str,
    pub safe: bool,
    pub delays: Delays,
    pub redis: redis::aio::ConnectionManager,
    pub prefix: String,
}

#[async_trait]
impl DynTool for Step {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.into(),
            description: "One step of the task.".into(),
            parameters: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        }
    }

    fn safe_to_retry(&self) -> bool {
        self.safe
    }

    async fn call_json(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(self.delays.before).await;
        let key = format!("{}exec:{}", self.prefix, self.name);
        let mut redis = self.redis.clone();
        let _: i64 = redis::cmd("RPUSH")
            .arg(&key)
            .arg(&ctx.idempotency_key)
            .query_async(&mut redis)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        tokio::time::sleep(self.delays.after).await;
        let letter = self.name.trim_start_matches("step_");
        Ok(ToolOutput::Value(json!(format!("{letter}{}", args["n"]))))
    }
}

/// The store, the queue and a connection, under `prefix`.
pub async fn open(
    url: &str,
    prefix: &str,
) -> (Arc<dyn RunStore>, Queue, redis::aio::ConnectionManager) {
    let store =
        RedisStore::connect_with(url, RedisOptions::default().prefix(prefix)).await.unwrap();
    let queue = Queue::connect_with(url, QueueOptions::default().prefix(prefix)).await.unwrap();
    let client = redis::Client::open(url).unwrap();
    let conn = client.get_connection_manager().await.unwrap();
    (Arc::new(store), queue, conn)
}

/// The agent `steps` on `store`, its tools taking `delays` each.
pub fn agent(
    store: Arc<dyn RunStore>,
    redis: redis::aio::ConnectionManager,
    prefix: &str,
    delays: Delays,
    lease_ttl: Duration,
) -> Agent {
    let mut builder = Agent::builder(Steps).name("steps").store(store).lease_ttl(lease_ttl);
    for (name, safe) in STEPS {
        let step = Step { name, safe, delays, redis: redis.clone(), prefix: prefix.to_owned() };
        builder = builder.dyn_tool(Arc::new(step));
    }
    builder.build().unwrap()
}

/// The executions recorded for a tool: idempotency keys, in order.
pub async fn executions(
    redis: &mut redis::aio::ConnectionManager,
    prefix: &str,
    tool: &str,
) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(format!("{prefix}exec:{tool}"))
        .arg(0)
        .arg(-1)
        .query_async(redis)
        .await
        .unwrap()
}

/// Deletes every key under `prefix`.
pub async fn clean(redis: &mut redis::aio::ConnectionManager, prefix: &str) {
    let keys: Vec<String> =
        redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(redis).await.unwrap();
    for chunk in keys.chunks(500) {
        let _: i64 = redis::cmd("DEL").arg(chunk).query_async(redis).await.unwrap();
    }
}

/// Submits `runs` runs of `agent` (`task 0`, `task 1`, …); their ids.
pub async fn submit(queue: &Queue, agent: &Agent, runs: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(runs);
    for n in 0..runs {
        let options = agentloop::RunOptions::default();
        ids.push(queue.submit("steps", agent, format!("task {n}"), options).await.unwrap());
    }
    ids
}

/// How many runs of the store finished.
pub async fn finished(store: &Arc<dyn RunStore>) -> usize {
    let filter = agentloop::store::RunFilter::all().state(agentloop::store::RunState::Finished);
    store.list_runs(&filter).await.unwrap().len()
}
