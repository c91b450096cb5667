//! What the submitter, the workers and the in-process executor share: the agent, its store
//! and the queue, all under one key prefix.

use agentloop::store::redis::{RedisOptions, RedisStore};
use agentloop::store::RunStore;
use agentloop::worker::{Queue, QueueOptions};
use agentloop::Agent;
use agentloop_bench::{via_agentloop, Script};
use anyhow::Context as _;
use std::sync::Arc;

/// The name the workers serve the agent under (and the agent's own name).
pub const AGENT: &str = "bench";

/// Where a process of the benchmark finds Redis, its keys and the mock model.
#[derive(Debug, Clone)]
pub struct Target {
    /// The Redis URL.
    pub redis: String,
    /// The key prefix of the store and the queue.
    pub prefix: String,
    /// The mock model's base URL (`http://127.0.0.1:PORT/v1`).
    pub mock: String,
    /// The conversation (K tool rounds, the model's latency).
    pub script: Script,
}

impl Target {
    /// The same target under another prefix.
    pub fn with_prefix(&self, prefix: String) -> Self {
        Self { prefix, ..self.clone() }
    }

    /// The run store.
    pub async fn store(&self) -> anyhow::Result<Arc<RedisStore>> {
        let options = RedisOptions::default().prefix(self.prefix.clone());
        let store = RedisStore::connect_with(&self.redis, options)
            .await
            .with_context(|| format!("connecting the run store to {}", self.redis))?;
        Ok(Arc::new(store))
    }

    /// The agent: the `add` tool, the mock's scripted model (not streamed, no retries), named
    /// [`AGENT`], journaling in the run store (`Durability::Sync`, the default).
    pub async fn agent(&self) -> anyhow::Result<Agent> {
        let store: Arc<dyn RunStore> = self.store().await?;
        let provider = via_agentloop::provider(&self.mock, self.script, false)?;
        let agent =
            via_agentloop::builder(provider, self.script).name(AGENT).store(store).build()?;
        Ok(agent)
    }

    /// The queue.
    pub async fn queue(&self) -> anyhow::Result<Queue> {
        let options = QueueOptions::default().prefix(self.prefix.clone());
        Queue::connect_with(&self.redis, options)
            .await
            .with_context(|| format!("connecting the queue to {}", self.redis))
    }

    /// The arguments that give a worker process this target.
    pub fn args(&self) -> Vec<String> {
        vec![
            "--redis".into(),
            self.redis.clone(),
            "--prefix".into(),
            self.prefix.clone(),
            "--mock".into(),
            self.mock.clone(),
            "--k".into(),
            self.script.tool_results.to_string(),
            "--latency-ms".into(),
            self.script.latency.as_millis().to_string(),
        ]
    }
}
