//! [`RedisStore`]: runs, sessions and artifacts in Redis (feature `redis`).
//!
//! Keys (all under a prefix, default `agentloop:`):
//!
//! | key | type | what |
//! | --- | --- | --- |
//! | `run:{id}:journal` | list | the journal entries, as JSON, in order |
//! | `run:{id}:meta` | hash | agent, context, parent, origin, state, times, length, price, tokens, the input's and the answer's start (for `list`) |
//! | `run:{id}:lease` | hash | owner, epoch and expiry of the run's lease ([`crate::store::lease`]) |
//! | `run:{id}:control` | hash | what was requested of the run's executor ([`super::RemoteControl`]) |
//! | `runs` | sorted set | run ids by creation time (the index `list` scans) |
//! | `runs:parent:{id}` | sorted set | the runs a run started, by creation time (`list` by parent) |
//! | `runs:agent:{name}`, `runs:context:{id}`, `runs:origin:{id}`, `runs:state:{state}` | sorted set | the runs of an agent, of a session, forked from a run, in a state, by creation time |
//! | `session:{context}` | hash | the session's state and counters |
//! | `session:{context}:messages` | list | its conversation, as JSON |
//! | `artifact:{id}` / `artifact:{id}:chunks` | hash / list | an artifact and its chunks |
//! | `run:{id}:artifacts` | sorted set | a run's artifacts by creation time |
//!
//! Every write that must check something (the expected sequence number of an append, the
//! state of a session) is one Lua script, so it is atomic: of two writers appending at the
//! same sequence number, exactly one succeeds and the other gets
//! [`StoreError::Conflict`]. With a TTL, every key a write touches gets it again (the `runs`
//! and `runs:…` indexes keep expired ids until `list` meets and drops them). Redis
//! Cluster is not supported (the scripts touch keys of several slots).

use super::registry::Started;
use super::stats::WriteCounters;
use super::{
    check_batch, check_dense_from, cost_of, decode_entry_json, from_json, outputs, to_json,
    write_json, ControlRequest, JournalEntry, Lease, RemoteControl, RunFilter, RunState, RunStore,
    RunSummary, StoreError, SummaryUpdate, JSON_PER_ENTRY,
};
use crate::message::Usage;
use crate::run::Price;
use ::redis::aio::ConnectionManager;
use ::redis::Client;
use async_trait::async_trait;
use scripts::Scripts;
use std::collections::HashMap;
use std::time::Duration;

/// Options of [`RedisStore::connect_with`].
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Prefix of every key (default `agentloop:`).
    pub prefix: String,
    /// Expire runs, sessions and artifacts this long after their last write (default: never).
    pub ttl: Option<Duration>,
    /// How long a command may wait for its reply before it fails (default 10 s; `None`: no
    /// limit). The client's own default, 500 ms, failed journal appends of a process running
    /// 1,000 runs at once (`tests/crash_concurrent.rs`): under such load a reply can take longer,
    /// and a timed-out append stops its run.
    pub response_timeout: Option<Duration>,
    /// Tool outputs of at least this many bytes are journaled by reference: kept as an
    /// artifact of the run, written just before the append's script, and put back when the
    /// journal is loaded (default [`DEFAULT_LARGE_OUTPUT_BYTES`], 32 KiB; `None`: always in
    /// the journal). An append that is then refused leaves its artifacts behind, deleted with
    /// the run.
    ///
    /// [`DEFAULT_LARGE_OUTPUT_BYTES`]: crate::store::DEFAULT_LARGE_OUTPUT_BYTES
    pub large_output_bytes: Option<usize>,
}

/// [`RedisOptions::response_timeout`] by default.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            prefix: "agentloop:".into(),
            ttl: None,
            response_timeout: Some(DEFAULT_RESPONSE_TIMEOUT),
            large_output_bytes: Some(super::DEFAULT_LARGE_OUTPUT_BYTES),
        }
    }
}

impl RedisOptions {
    /// Sets the key prefix.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets the TTL.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Sets how long a command may wait for its reply (`None`: no limit).
    pub fn response_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Sets the size from which tool outputs are journaled by reference (`None`: never).
    pub fn large_output_bytes(mut self, bytes: Option<usize>) -> Self {
        self.large_output_bytes = bytes;
        self
    }
}

/// Runs, sessions and artifacts in Redis. Cheap to clone; reconnects on its own.
#[derive(Clone)]
pub struct RedisStore {
    /// For the pub/sub connections of [`RunStore::watch`].
    client: Client,
    conn: ConnectionManager,
    options: RedisOptions,
    scripts: std::sync::Arc<Scripts>,
    /// The appends this store (and its clones) committed.
    counters: std::sync::Arc<WriteCounters>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore").field("options", &self.options).finish()
    }
}

fn backend(error: impl std::fmt::Display) -> StoreError {
    StoreError::Backend { backend: "redis", message: error.to_string() }
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(what.to_owned())
}

/// A hash as read.
type Hash = HashMap<String, String>;

/// A number field of a hash.
fn number(hash: &HashMap<String, String>, field: &str) -> u64 {
    hash.get(field).and_then(|v| v.parse().ok()).unwrap_or(0)
}

impl RedisStore {
    /// Connects with the default options.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, RedisOptions::default()).await
    }

    /// Connects (`redis://host:port/db`).
    pub async fn connect_with(url: &str, options: RedisOptions) -> Result<Self, StoreError> {
        let client = Client::open(url).map_err(backend)?;
        // Reconnects within a second of Redis coming back (the default backoff doubles up
        // to 3.2 s between attempts).
        let config = ::redis::aio::ConnectionManagerConfig::new()
            .set_response_timeout(options.response_timeout)
            .set_max_delay(Duration::from_secs(1));
        let conn = client.get_connection_manager_with_config(config).await.map_err(backend)?;
        let scripts = Scripts::new();
        let store = Self {
            client,
            conn,
            options,
            scripts: std::sync::Arc::new(scripts),
            counters: std::sync::Arc::default(),
        };
        store.index_older_runs().await?;
        Ok(store)
    }

    /// The options it was connected with.
    pub fn options(&self) -> &RedisOptions {
        &self.options
    }

    fn key(&self, parts: &[&str]) -> String {
        let mut key = String::new();
        self.key_into(&mut key, parts);
        key
    }

    /// [`key`](Self::key), made in `key` (cleared first): an append reuses one buffer.
    fn key_into(&self, key: &mut String, parts: &[&str]) {
        key.clear();
        key.push_str(&self.options.prefix);
        parts.iter().for_each(|part| key.push_str(part));
    }

    fn ttl_ms(&self) -> u64 {
        self.options.ttl.map_or(0, |ttl| u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
    }

    fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }

    /// The channel an append publishes the journal's new length on (see
    /// [`RunStore::watch`]).
    fn appended_channel(&self, run_id: &str) -> String {
        self.key(&["run:", run_id, ":appended"])
    }

    /// The index of the runs `parent_run_id` started.
    fn parent_index(&self, parent_run_id: &str) -> String {
        self.key(&["runs:parent:", parent_run_id])
    }

    /// The key that records that runs journaled before the agent and session indexes were
    /// added to them (deleted with the store's last run).
    fn indexed_marker(&self) -> String {
        self.key(&["runs:indexed"])
    }

    /// The index of the runs of an agent.
    fn agent_index(&self, agent: &str) -> String {
        self.key(&["runs:agent:", agent])
    }

    /// The index of the runs of a session.
    fn context_index(&self, context_id: &str) -> String {
        self.key(&["runs:context:", context_id])
    }

    /// The secondary indexes a run is listed in besides `runs` (sorted sets by creation
    /// time): its parent's, its agent's, its session's.
    fn indexes(
        &self,
        parent_run_id: &Option<String>,
        agent: &Option<String>,
        context_id: &Option<String>,
    ) -> Vec<String> {
        let parent = parent_run_id.as_deref().map(|p| self.parent_index(p));
        let agent = agent.as_deref().map(|a| self.agent_index(a));
        let context = context_id.as_deref().map(|c| self.context_index(c));
        [parent, agent, context].into_iter().flatten().collect()
    }

    async fn hash(&self, key: &str) -> Result<HashMap<String, String>, StoreError> {
        ::redis::cmd("HGETALL").arg(key).query_async(&mut self.conn()).await.map_err(backend)
    }
}

/// How many runs a call of the search script reads at most.
const SEARCH_READS: usize = 10_000;

/// A JSON-encoded optional name, as the run meta stores it (`null` or a JSON string).
fn optional_name(value: &Option<String>) -> Result<String, StoreError> {
    to_json(value)
}

/// A run's summary from its meta hash and its lease hash (empty: never claimed).
fn summary_of(
    run_id: &str,
    meta: &HashMap<String, String>,
    lease: &HashMap<String, String>,
) -> Result<RunSummary, StoreError> {
    let name = |field: &str| -> Result<Option<String>, StoreError> {
        match meta.get(field) {
            None => Ok(None),
            Some(json) => serde_json::from_str(json)
                .map_err(|e| corrupt(&format!("run '{run_id}': field {field}: {e}"))),
        }
    };
    let state = meta.get("state").map(String::as_str).unwrap_or("running");
    let usage = Usage {
        input: number(meta, "input_tokens"),
        output: number(meta, "output_tokens"),
        cached_input: number(meta, "cached_input_tokens"),
        reasoning: number(meta, "reasoning_tokens"),
        // The registry keeps no cache writes: its cost prices them as input.
        cache_write_input: 0,
    };
    let price: Option<Price> = meta
        .get("price")
        .map(|json| from_json(json, &format!("run '{run_id}': its price")))
        .transpose()?;
    let mut summary = RunSummary {
        run_id: run_id.to_owned(),
        agent: name("agent")?,
        context_id: name("context_id")?,
        parent_run_id: name("parent_run_id")?,
        origin_run_id: meta.get("origin_run_id").cloned(),
        input: meta.get("input").cloned(),
        answer: meta.get("answer").cloned(),
        state: RunState::parse(state)
            .ok_or_else(|| corrupt(&format!("run '{run_id}': unknown state '{state}'")))?,
        created_ms: number(meta, "created_ms"),
        updated_ms: number(meta, "updated_ms"),
        entries: number(meta, "entries"),
        owner: None,
        lease_expires_at_ms: None,
        cost_usd: cost_of(price.as_ref(), &usage),
        usage,
    };
    summary.set_lease(lease.get("owner").cloned(), number(lease, "expires_at_ms"));
    Ok(summary)
}

impl RedisStore {
    /// An append, fenced by `fence` when given (checked in the append's script).
    async fn append(
        &self,
        run_id: &str,
        expected_seq: u64,
        entries: &[JournalEntry],
        fence: Option<&Lease>,
    ) -> Result<u64, StoreError> {
        check_batch(expected_seq, entries)?;
        let update = SummaryUpdate::of(entries);
        let offloaded = outputs::by_reference(run_id, entries, self.options.large_output_bytes);
        if let Some((_, artifacts)) = &offloaded {
            let mut pipe = ::redis::pipe();
            pipe.atomic();
            for artifact in artifacts {
                self.create_commands(&mut pipe, &artifact.meta, &artifact.data);
            }
            let () = pipe.query_async(&mut self.conn()).await.map_err(backend)?;
        }
        let entries = offloaded.as_ref().map_or(entries, |(stored, _)| stored.as_slice());
        let (first_ms, last_ms, state) =
            update.as_ref().map_or((0, 0, RunState::Running), |u| (u.first_ms, u.last_ms, u.state));
        let started = update.as_ref().and_then(|u| u.started.clone());
        let usage = update.as_ref().map(|u| u.usage).unwrap_or_default();
        let Started { agent, context_id, parent_run_id, price } =
            started.clone().unwrap_or_default();
        // One EVALSHA command, built in place: a `ScriptInvocation` allocates every argument
        // and then copies them all into the command (4–8 % of the CPU of a durable round in
        // `bench-driver --store redis` at 1,000 agents).
        let indexes = self.indexes(&parent_run_id, &agent, &context_id);
        let mut invocation = ::redis::cmd("EVALSHA");
        invocation.arg(self.scripts.append.get_hash()).arg(5 + indexes.len());
        // The keys, each made in one reused buffer; the last is `appended_channel`'s.
        let keys: [&[&str]; 5] = [
            &["run:", run_id, ":journal"],
            &["run:", run_id, ":meta"],
            &["runs"],
            &["run:", run_id, ":lease"],
            &["run:", run_id, ":appended"],
        ];
        let mut key = String::with_capacity(self.options.prefix.len() + run_id.len() + 16);
        for parts in keys {
            self.key_into(&mut key, parts);
            invocation.arg(key.as_str());
        }
        invocation
            .arg(indexes)
            .arg(expected_seq)
            .arg(self.ttl_ms())
            .arg(run_id)
            .arg(first_ms)
            .arg(last_ms)
            .arg(optional_name(&agent)?)
            .arg(optional_name(&context_id)?)
            .arg(if started.is_some() { "1" } else { "0" })
            .arg(state.as_str())
            .arg(fence.map_or("", |lease| lease.owner.as_str()))
            .arg(fence.map_or(0, |lease| lease.epoch))
            .arg(optional_name(&parent_run_id)?)
            .arg(price.as_ref().map(to_json).transpose()?.unwrap_or_default())
            .arg(usage.input)
            .arg(usage.output)
            .arg(usage.cached_input)
            .arg(usage.reasoning);
        let texts = update.as_ref().map(|u| (&u.origin_run_id, &u.input, &u.answer));
        let (origin, input, answer) = texts.unwrap_or((&None, &None, &None));
        invocation.arg(origin.as_deref().unwrap_or_default());
        for text in [input, answer] {
            invocation.arg(if text.is_some() { "1" } else { "0" });
            invocation.arg(text.as_deref().unwrap_or_default());
        }
        // Each entry encoded in one reused buffer, then copied into the command (encoding
        // straight into the command costs more: its writer is called for every token).
        let mut json = Vec::with_capacity(JSON_PER_ENTRY);
        for entry in entries {
            json.clear();
            write_json(&mut json, entry)?;
            ::redis::RedisWrite::write_arg(&mut invocation, &json);
        }
        let called = std::time::Instant::now();
        let reply: Vec<String> = self.evalsha(&self.scripts.append, &invocation).await?;
        let waited = called.elapsed();
        let length = reply.get(1).and_then(|n| n.parse::<u64>().ok());
        match (reply.first().map(String::as_str), length) {
            (Some("ok"), Some(next)) => {
                self.counters.committed(u64::from(!entries.is_empty()), entries.len() as u64);
                self.counters.timed(waited, std::time::Duration::ZERO);
                Ok(next)
            }
            (Some("conflict"), Some(actual)) => Err(StoreError::Conflict {
                run_id: run_id.to_owned(),
                expected: expected_seq,
                actual,
            }),
            (Some("lease_lost"), _) => match fence {
                Some(lease) => Err(lease::lost_reply(lease, &reply)),
                None => Err(corrupt("the append script refused an unfenced append")),
            },
            _ => Err(corrupt(&format!("unexpected reply of the append script: {reply:?}"))),
        }
    }
}

#[async_trait]
impl RunStore for RedisStore {
    async fn append_entries(
        &self,
        run_id: &str,
        expected_seq: u64,
        entries: &[JournalEntry],
    ) -> Result<u64, StoreError> {
        self.append(run_id, expected_seq, entries, None).await
    }

    async fn append_fenced(
        &self,
        lease: &Lease,
        expected_seq: u64,
        entries: &[JournalEntry],
    ) -> Result<u64, StoreError> {
        self.append(&lease.run_id, expected_seq, entries, Some(lease)).await
    }

    async fn claim(&self, run_id: &str, owner: &str, ttl: Duration) -> Result<Lease, StoreError> {
        lease::claim(self, run_id, owner, ttl).await
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        lease::renew(self, lease, ttl).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        lease::release(self, lease).await
    }

    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        self.load_from(run_id, 0).await
    }

    /// Every append publishes the journal's new length on the run's channel
    /// (`run:{id}:appended`, in the append's script); this subscribes to it on a connection of
    /// its own. The stream ends when that connection does.
    async fn watch(
        &self,
        run_id: &str,
    ) -> Result<Option<futures::stream::BoxStream<'static, ()>>, StoreError> {
        use futures::StreamExt;
        let mut pubsub = self.client.get_async_pubsub().await.map_err(backend)?;
        pubsub.subscribe(self.appended_channel(run_id)).await.map_err(backend)?;
        Ok(Some(pubsub.into_on_message().map(|_| ()).boxed()))
    }

    async fn request_control(
        &self,
        run_id: &str,
        request: ControlRequest,
    ) -> Result<RemoteControl, StoreError> {
        lease::request_control(self, run_id, request).await
    }

    async fn remote_control(&self, run_id: &str) -> Result<RemoteControl, StoreError> {
        lease::remote_control(self, run_id).await
    }

    async fn remote_controls(
        &self,
        run_ids: &[String],
    ) -> Result<Vec<(String, RemoteControl)>, StoreError> {
        lease::remote_controls(self, run_ids).await
    }

    async fn load_from(&self, run_id: &str, from: u64) -> Result<Vec<JournalEntry>, StoreError> {
        let raw: Vec<Vec<u8>> = ::redis::cmd("LRANGE")
            .arg(self.key(&["run:", run_id, ":journal"]))
            .arg(from)
            .arg(-1)
            .query_async(&mut self.conn())
            .await
            .map_err(backend)?;
        let mut entries = raw
            .iter()
            .map(|json| decode_entry_json(run_id, json))
            .collect::<Result<Vec<_>, _>>()?;
        check_dense_from(run_id, from, &entries)?;
        let referenced = outputs::referenced(&entries);
        if !referenced.is_empty() {
            let mut data = self.artifact_data(&referenced).await?;
            outputs::restore(run_id, &mut entries, |id| Ok(data.remove(id)))?;
        }
        Ok(entries)
    }

    async fn next_seq(&self, run_id: &str) -> Result<u64, StoreError> {
        ::redis::cmd("LLEN")
            .arg(self.key(&["run:", run_id, ":journal"]))
            .query_async(&mut self.conn())
            .await
            .map_err(backend)
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        // The most selective index the filter names: a parent's children, an origin's forks,
        // a session's runs, the runs in a state, an agent's runs; the other fields are
        // checked on each run read.
        let index = if let Some(parent) = &filter.parent_run_id {
            self.parent_index(parent)
        } else if let Some(origin) = &filter.origin_run_id {
            self.key(&["runs:origin:", origin])
        } else if let Some(context_id) = &filter.context_id {
            self.context_index(context_id)
        } else if let Some(state) = filter.state {
            self.key(&["runs:state:", state.as_str()])
        } else if let Some(agent) = &filter.agent {
            self.agent_index(agent)
        } else {
            self.key(&["runs"])
        };
        let max = match (&filter.after, filter.created_before_ms) {
            // The cursor's own creation time is included: runs as old with a smaller id.
            (Some(cursor), Some(before)) if before <= cursor.created_ms => format!("({before}"),
            (Some(cursor), _) => cursor.created_ms.to_string(),
            (None, before) => before.map_or("+inf".to_owned(), |t| format!("({t}")),
        };
        let min = filter.created_from_ms.map_or("-inf".to_owned(), |t| t.to_string());
        let limit = filter.limit.unwrap_or(usize::MAX);
        // Ids a page at a time (newest first; equal times by id, descending, as the sorted
        // set orders equal scores), so that a small limit reads little of a large index. A
        // search finds its page's ids on the server (`SEARCH`).
        let page_size = limit.clamp(100, 1_000);
        let needle = filter.text.as_deref().map(str::to_ascii_lowercase);
        let (mut runs, mut expired, mut offset) = (Vec::new(), Vec::new(), 0usize);
        loop {
            let (ids, exhausted) = match &needle {
                None => {
                    let ids: Vec<String> = ::redis::cmd("ZREVRANGEBYSCORE")
                        .arg(&index)
                        .arg(&max)
                        .arg(&min)
                        .arg("LIMIT")
                        .arg(offset)
                        .arg(page_size)
                        .query_async(&mut self.conn())
                        .await
                        .map_err(backend)?;
                    offset += ids.len();
                    let exhausted = ids.len() < page_size;
                    (ids, exhausted)
                }
                Some(needle) => {
                    let mut search = ::redis::cmd("EVALSHA");
                    search
                        .arg(self.scripts.search.get_hash())
                        .arg(1)
                        .arg(&index)
                        .arg(&max)
                        .arg(&min)
                        .arg(needle)
                        .arg(offset)
                        .arg(page_size)
                        .arg(SEARCH_READS)
                        .arg(&self.options.prefix);
                    let (next, ids): (i64, Vec<String>) =
                        self.evalsha(&self.scripts.search, &search).await?;
                    offset = usize::try_from(next).unwrap_or(offset);
                    (ids, next < 0)
                }
            };
            if ids.is_empty() {
                if exhausted {
                    break;
                }
                continue;
            }
            // The journal's length after the meta hash: an append in between only makes it
            // longer (the script writes both at once).
            let mut pipe = ::redis::pipe();
            for id in &ids {
                pipe.cmd("HGETALL").arg(self.key(&["run:", id, ":meta"]));
                pipe.cmd("HGETALL").arg(self.key(&["run:", id, ":lease"]));
                pipe.cmd("LLEN").arg(self.key(&["run:", id, ":journal"]));
            }
            let read: Vec<(Hash, Hash, u64)> =
                pipe.query_async(&mut self.conn()).await.map_err(backend)?;
            for (id, (meta, lease, length)) in ids.iter().zip(read) {
                if meta.is_empty() {
                    expired.push(id.clone());
                    continue;
                }
                let summary = summary_of(id, &meta, &lease)?;
                // A journal shorter than its registry entry says (a damaged store, keys
                // deleted by hand) is no run `load` can read: left out, as `check` reports.
                if length < summary.entries.max(1) {
                    continue;
                }
                if filter.matches(&summary) {
                    runs.push(summary);
                }
            }
            if runs.len() >= limit || exhausted {
                break;
            }
        }
        if !expired.is_empty() {
            let _: i64 = ::redis::cmd("ZREM")
                .arg(&index)
                .arg(&expired)
                .query_async(&mut self.conn())
                .await
                .map_err(backend)?;
        }
        // Same creation time: by run id, descending (as the other stores).
        runs.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then_with(|| b.run_id.cmp(&a.run_id)));
        runs.truncate(limit);
        Ok(runs)
    }

    async fn delete_run(&self, run_id: &str) -> Result<bool, StoreError> {
        let meta = self.key(&["run:", run_id, ":meta"]);
        // The names never change once journaled, so they can be read before the script.
        let names: Vec<Option<String>> = ::redis::cmd("HMGET")
            .arg(&meta)
            .arg(&["parent_run_id", "agent", "context_id"])
            .query_async(&mut self.conn())
            .await
            .map_err(backend)?;
        let name = |index: usize, field: &str| -> Result<Option<String>, StoreError> {
            match names.get(index).cloned().flatten() {
                Some(json) => from_json(&json, &format!("run '{run_id}': field {field}")),
                None => Ok(None),
            }
        };
        let indexes =
            self.indexes(&name(0, "parent_run_id")?, &name(1, "agent")?, &name(2, "context_id")?);
        let mut invocation = self.scripts.delete_run.prepare_invoke();
        invocation
            .key(self.key(&["run:", run_id, ":journal"]))
            .key(meta)
            .key(self.key(&["runs"]))
            .key(self.key(&["run:", run_id, ":lease"]))
            .key(self.key(&["run:", run_id, ":control"]))
            .key(self.indexed_marker());
        for index in indexes {
            invocation.key(index);
        }
        let existed: i64 = self.invoke(invocation.arg(run_id)).await?;
        self.delete_artifacts_of(run_id).await?;
        Ok(existed > 0)
    }

    async fn remove_runs(
        &self,
        run_ids: &[String],
        rule: &super::RemovalRule,
    ) -> Result<Vec<super::Removal>, StoreError> {
        self.remove(run_ids, rule).await
    }

    async fn registry_rows(
        &self,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<super::RegistryPage, StoreError> {
        self.rows(cursor, limit).await
    }

    async fn orphan_journals(&self) -> Result<Vec<super::OrphanJournal>, StoreError> {
        self.orphans().await
    }

    async fn rebuild_registry(&self, run_id: &str) -> Result<bool, StoreError> {
        self.rebuild(run_id).await
    }

    async fn adopt_journal(
        &self,
        orphan: &super::OrphanJournal,
    ) -> Result<Option<String>, StoreError> {
        Ok(self.rebuild(&orphan.locator).await?.then(|| orphan.locator.clone()))
    }

    fn write_stats(&self) -> Option<super::WriteStats> {
        Some(self.counters.snapshot())
    }
}

mod admin;
mod artifacts;
mod lease;
mod scripts;
mod sessions;
