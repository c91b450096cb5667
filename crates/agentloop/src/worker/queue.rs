//! [`Queue`]: the run jobs in Redis Streams, one stream per agent, read by a consumer group.
//!
//! Keys (under a prefix, default `agentloop:`):
//!
//! | key | type | what |
//! | --- | --- | --- |
//! | `queue:{agent}` | stream | the agent's jobs (`run`, `kind`, `at_ms`, `refusals`), read by the group `workers` |
//! | `queue:jobs` | hash | run id → the entry id of its one live job (at most one per run) |
//! | `queue:again` | set | runs to continue once their live job is done (a decision arrived meanwhile) |
//! | `queue:agents` | set | the agents that have a stream |
//! | `queue:dead` | stream | dead letters: `run`, `agent`, `reason`, `job`, `deliveries`, `at_ms` |
//! | `queue:limits` | hash | agent → how many of its jobs the pool executes at once |
//! | `queue:slots:{agent}` | sorted set | the jobs holding one of those slots → when the slot expires |
//! | `queue:dead:runs` | set | the runs of dead letters, which a sweep leaves alone until they are queued again |
//!
//! A job is acknowledged and deleted from its stream when it is done, so a stream's length
//! is the number of jobs not done: waiting or being executed.

use super::WorkerError;
use crate::store::now_ms;
use ::redis::aio::ConnectionManager;
use ::redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};
use ::redis::{Client, Script, Value};
use std::collections::HashMap;
use std::time::Duration;

/// The consumer group every worker of a queue joins.
pub const GROUP: &str = "workers";

/// Options of [`Queue::connect_with`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct QueueOptions {
    /// The key prefix (default `agentloop:`, the Redis store's).
    pub prefix: String,
    /// The most jobs an agent's stream holds (waiting or executing); a submission beyond it
    /// is refused with [`WorkerError::QueueFull`]. `None`: unbounded.
    pub max_queued: Option<u64>,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self { prefix: "agentloop:".into(), max_queued: None }
    }
}

impl QueueOptions {
    /// Sets the key prefix.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Bounds each agent's stream.
    pub fn max_queued(mut self, max: Option<u64>) -> Self {
        self.max_queued = max;
        self
    }
}

/// What a job asks of a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobKind {
    /// Execute a run that was submitted (its start is journaled).
    Start,
    /// Continue a run: after a decision or an answer, or handed over by a draining worker.
    Continue,
}

impl JobKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Continue => "continue",
        }
    }
}

/// A job read from an agent's stream.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    /// The agent (the stream's).
    pub(crate) agent: String,
    /// The stream entry's id.
    pub(crate) id: String,
    /// The run, or why the entry is not a job.
    pub(crate) run_id: Result<String, String>,
    /// How many workers refused it (another configuration of the agent).
    pub(crate) refusals: u32,
    /// How many times it was delivered (1 for a fresh job; more after takeovers).
    pub(crate) deliveries: u64,
    /// When it was queued (ms since the Unix epoch), if it says.
    pub(crate) queued_ms: Option<u64>,
}

/// What was done about a submission or a continuation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Enqueued {
    /// A job was added (its stream entry id).
    Added(String),
    /// The run already has a live job (this entry id): it is continued once that job is
    /// done.
    Pending(String),
    /// Not by a sweep: the run's last job went to the dead letters (an explicit
    /// [`Queue::enqueue`] takes it back).
    Held,
}

/// The jobs of one agent, as `agentloop workers` shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentQueue {
    /// The agent.
    pub agent: String,
    /// Jobs not done (waiting or executing).
    pub depth: u64,
    /// Jobs delivered to a worker and not done yet.
    pub pending: u64,
    /// The group's consumers (workers): name, jobs pending, ms since it last read or claimed.
    pub consumers: Vec<(String, u64, u64)>,
}

/// The jobs of every agent, and the dead letters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStatus {
    /// Per agent, by name.
    pub agents: Vec<AgentQueue>,
    /// Jobs that went to the dead-letter stream.
    pub dead_letters: u64,
}

/// A dead letter: a job no worker could execute.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetter {
    /// Its entry id in the dead-letter stream.
    pub id: String,
    /// The run (empty for a malformed job).
    pub run_id: String,
    /// The agent.
    pub agent: String,
    /// Why.
    pub reason: String,
    /// How many times it was delivered.
    pub deliveries: u64,
}

/// Adds a job unless the run has one (then marks it to be continued), within the bound. A
/// sweep (`ARGV[7]` = 1) leaves dead-lettered runs alone; any other enqueue takes them back.
/// KEYS: stream, jobs, again, agents, dead runs. ARGV: run, kind, at_ms, max (0: none),
/// agent, refusals, sweep.
const ENQUEUE: &str = r"
if ARGV[7] == '1' then
  if redis.call('SISMEMBER', KEYS[5], ARGV[1]) == 1 then return {2, ''} end
else
  redis.call('SREM', KEYS[5], ARGV[1])
end
local live = redis.call('HGET', KEYS[2], ARGV[1])
if live then
  redis.call('SADD', KEYS[3], ARGV[1])
  return {0, live}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[1], 'workers', '0', 'MKSTREAM')
end
local max = tonumber(ARGV[4])
if max > 0 then
  local depth = redis.call('XLEN', KEYS[1])
  if depth >= max then return {-1, tostring(depth)} end
end
local id = redis.call('XADD', KEYS[1], '*', 'run', ARGV[1], 'kind', ARGV[2], 'at_ms', ARGV[3],
  'refusals', ARGV[6])
redis.call('HSET', KEYS[2], ARGV[1], id)
redis.call('SADD', KEYS[4], ARGV[5])
return {1, id}
";

/// Marks a job done: acknowledged and deleted; the run's live job is forgotten — or
/// replaced by a new one when the run is to be continued (`again`) or handed over
/// (`requeue` = 1, with `refusals`). KEYS: stream, jobs, again. ARGV: entry id, run (may be
/// empty), requeue, at_ms, refusals.
const FINISH: &str = r"
redis.call('XACK', KEYS[1], 'workers', ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
if ARGV[2] == '' then return 0 end
local mine = redis.call('HGET', KEYS[2], ARGV[2]) == ARGV[1]
local again = redis.call('SREM', KEYS[3], ARGV[2]) == 1
if ARGV[3] == '1' or again then
  if not mine and not again then return 0 end
  local refusals = ARGV[3] == '1' and ARGV[5] or '0'
  local id = redis.call('XADD', KEYS[1], '*', 'run', ARGV[2], 'kind', 'continue', 'at_ms', ARGV[4],
    'refusals', refusals)
  redis.call('HSET', KEYS[2], ARGV[2], id)
  return 2
end
if mine then redis.call('HDEL', KEYS[2], ARGV[2]) end
return 1
";

/// Resets the idle time of the jobs this consumer still owns (a heartbeat): a job whose
/// worker is alive is never taken over; the agent's slots they hold are extended. KEYS:
/// stream, slots. ARGV: consumer, slot expiry (ms), ids….
const TOUCH: &str = r"
local touched = 0
for i = 3, #ARGV do
  local pending = redis.call('XPENDING', KEYS[1], 'workers', ARGV[i], ARGV[i], 1)
  if pending[1] and pending[1][2] == ARGV[1] then
    redis.call('XCLAIM', KEYS[1], 'workers', ARGV[1], 0, ARGV[i], 'JUSTID')
    redis.call('ZADD', KEYS[2], 'XX', ARGV[2], ARGV[i])
    touched = touched + 1
  end
end
return touched
";

/// Takes one of the agent's slots for a job, unless the pool runs `limit` of its jobs
/// already (slots whose worker stopped touching them have expired). KEYS: slots. ARGV: job
/// id, limit, now (ms), expiry (ms). Returns 1 when taken (or held already).
const ACQUIRE: &str = r"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 1 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
return 1
";

/// The run jobs of a pool of workers, in Redis Streams (see the [module docs](self)).
/// Cheap to clone; reconnects on its own.
#[derive(Clone)]
pub struct Queue {
    conn: ConnectionManager,
    /// Blocking reads (`XREADGROUP … BLOCK`) go on their own connection, so that they do not
    /// hold up the other commands.
    reader: ConnectionManager,
    options: QueueOptions,
    scripts: std::sync::Arc<[Script; 4]>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").field("options", &self.options).finish_non_exhaustive()
    }
}

pub(crate) fn redis_error(error: ::redis::RedisError) -> WorkerError {
    WorkerError::Redis(error.to_string())
}

impl Queue {
    /// Connects with the default options (`redis://host:port/db`).
    pub async fn connect(url: &str) -> Result<Self, WorkerError> {
        Self::connect_with(url, QueueOptions::default()).await
    }

    /// Connects with `options`.
    pub async fn connect_with(url: &str, options: QueueOptions) -> Result<Self, WorkerError> {
        let client = Client::open(url).map_err(redis_error)?;
        // Reconnects within a second of Redis coming back.
        let config = ::redis::aio::ConnectionManagerConfig::new()
            .set_response_timeout(Some(Duration::from_secs(10)))
            .set_max_delay(Duration::from_secs(1));
        let conn = client.get_connection_manager_with_config(config).await.map_err(redis_error)?;
        let config = ::redis::aio::ConnectionManagerConfig::new()
            .set_response_timeout(None)
            .set_max_delay(Duration::from_secs(1));
        let reader =
            client.get_connection_manager_with_config(config).await.map_err(redis_error)?;
        let scripts =
            [Script::new(ENQUEUE), Script::new(FINISH), Script::new(TOUCH), Script::new(ACQUIRE)];
        Ok(Self { conn, reader, options, scripts: std::sync::Arc::new(scripts) })
    }

    /// The options.
    pub fn options(&self) -> &QueueOptions {
        &self.options
    }

    fn key(&self, name: &str) -> String {
        format!("{}queue:{name}", self.options.prefix)
    }

    /// The stream of an agent's jobs.
    pub fn stream(&self, agent: &str) -> String {
        self.key(agent)
    }

    /// The dead-letter stream.
    pub fn dead_stream(&self) -> String {
        self.key("dead")
    }

    /// Adds a job for `run_id` to `agent`'s stream — unless the run has a live job already:
    /// then that job's worker continues the run once more when it is done
    /// ([`Enqueued::Pending`]). Refused with [`WorkerError::QueueFull`] when the stream holds
    /// [`QueueOptions::max_queued`] jobs.
    pub async fn enqueue(
        &self,
        agent: &str,
        run_id: &str,
        kind: JobKind,
    ) -> Result<Enqueued, WorkerError> {
        self.enqueue_with(agent, run_id, kind, false).await
    }

    /// [`enqueue`](Self::enqueue); `sweep`: unless the run was dead-lettered
    /// ([`Enqueued::Held`]).
    pub(crate) async fn enqueue_with(
        &self,
        agent: &str,
        run_id: &str,
        kind: JobKind,
        sweep: bool,
    ) -> Result<Enqueued, WorkerError> {
        if agent == "dead" || agent == "jobs" || agent == "again" || agent == "agents" {
            return Err(WorkerError::Invalid(format!("'{agent}' cannot name an agent's queue")));
        }
        let (status, value): (i64, String) = self.scripts[0]
            .key(self.stream(agent))
            .key(self.key("jobs"))
            .key(self.key("again"))
            .key(self.key("agents"))
            .key(self.key("dead:runs"))
            .arg(run_id)
            .arg(kind.as_str())
            .arg(now_ms())
            .arg(self.options.max_queued.unwrap_or(0))
            .arg(agent)
            .arg(0)
            .arg(if sweep { "1" } else { "0" })
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        match status {
            1 => Ok(Enqueued::Added(value)),
            0 => Ok(Enqueued::Pending(value)),
            2 => Ok(Enqueued::Held),
            _ => Err(WorkerError::QueueFull {
                agent: agent.to_owned(),
                depth: value.parse().unwrap_or_default(),
                max: self.options.max_queued.unwrap_or_default(),
            }),
        }
    }

    /// Creates the agent's stream and its consumer group if they do not exist (a stream
    /// without the group gets it, reading from its first entry), and lists the agent.
    pub(crate) async fn ensure_group(&self, agent: &str) -> Result<(), WorkerError> {
        let _: i64 = ::redis::cmd("SADD")
            .arg(self.key("agents"))
            .arg(agent)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        let created: Result<(), _> = ::redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(self.stream(agent))
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut self.conn.clone())
            .await;
        match created {
            Ok(()) => Ok(()),
            Err(error) if error.code() == Some("BUSYGROUP") => Ok(()),
            Err(error) => Err(redis_error(error)),
        }
    }

    /// Reads up to `count` new jobs of `agents` for `consumer`, waiting up to `block`.
    pub(crate) async fn read(
        &self,
        consumer: &str,
        agents: &[String],
        count: usize,
        block: Duration,
    ) -> Result<Vec<Job>, WorkerError> {
        let mut command = ::redis::cmd("XREADGROUP");
        command.arg("GROUP").arg(GROUP).arg(consumer).arg("COUNT").arg(count);
        command.arg("BLOCK").arg(block.as_millis().max(1) as u64).arg("STREAMS");
        for agent in agents {
            command.arg(self.stream(agent));
        }
        for _ in agents {
            command.arg(">");
        }
        let read: Result<Option<StreamReadReply>, _> =
            command.query_async(&mut self.reader.clone()).await;
        let reply = match read {
            Ok(reply) => reply.unwrap_or_default(),
            Err(error) if error.code() == Some("NOGROUP") => {
                // Deleted (or never made into a group) under us: made again, read next time.
                for agent in agents {
                    self.ensure_group(agent).await?;
                }
                return Ok(Vec::new());
            }
            Err(error) => return Err(redis_error(error)),
        };
        let mut jobs = Vec::new();
        for key in reply.keys {
            let Some(agent) = agents.iter().find(|agent| self.stream(agent) == key.key) else {
                continue;
            };
            jobs.extend(key.ids.into_iter().map(|entry| parse_job(agent, entry, 1)));
        }
        Ok(jobs)
    }

    /// Takes over up to `count` of `agent`'s jobs that were idle (not touched by their
    /// worker's heartbeat) for `min_idle`: their workers died.
    pub(crate) async fn autoclaim(
        &self,
        agent: &str,
        consumer: &str,
        min_idle: Duration,
        count: usize,
    ) -> Result<Vec<Job>, WorkerError> {
        let stream = self.stream(agent);
        let reply: StreamAutoClaimReply = ::redis::cmd("XAUTOCLAIM")
            .arg(&stream)
            .arg(GROUP)
            .arg(consumer)
            .arg(min_idle.as_millis() as u64)
            .arg("0-0")
            .arg("COUNT")
            .arg(count)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        let mut jobs = Vec::with_capacity(reply.claimed.len());
        for entry in reply.claimed {
            let deliveries = self.deliveries(&stream, &entry.id).await?;
            jobs.push(parse_job(agent, entry, deliveries));
        }
        Ok(jobs)
    }

    /// How many times the job was delivered.
    async fn deliveries(&self, stream: &str, id: &str) -> Result<u64, WorkerError> {
        let pending: Vec<(String, String, u64, u64)> = ::redis::cmd("XPENDING")
            .arg(stream)
            .arg(GROUP)
            .arg(id)
            .arg(id)
            .arg(1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        Ok(pending.first().map_or(1, |(_, _, _, deliveries)| *deliveries))
    }

    /// Resets the idle time of `consumer`'s jobs `ids` of `agent` (those it still owns), and
    /// extends their slots by `ttl`.
    pub(crate) async fn touch(
        &self,
        agent: &str,
        consumer: &str,
        ids: &[String],
        ttl: Duration,
    ) -> Result<(), WorkerError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut invocation = self.scripts[2].key(self.stream(agent));
        invocation.key(self.slots(agent)).arg(consumer).arg(now_ms() + millis(ttl));
        for id in ids {
            invocation.arg(id);
        }
        let _: i64 = invocation.invoke_async(&mut self.conn.clone()).await.map_err(redis_error)?;
        Ok(())
    }

    /// The sorted set of the agent's slots in use (job id → expiry).
    fn slots(&self, agent: &str) -> String {
        self.key(&format!("slots:{agent}"))
    }

    /// Limits the jobs of `agent` that the whole pool executes at once (`None`: no limit).
    /// Every worker reads it before it claims jobs; it holds from the next claim on.
    pub async fn set_limit(&self, agent: &str, limit: Option<u32>) -> Result<(), WorkerError> {
        let command = match limit {
            Some(limit) => {
                let mut command = ::redis::cmd("HSET");
                command.arg(self.key("limits")).arg(agent).arg(limit);
                command
            }
            None => {
                let mut command = ::redis::cmd("HDEL");
                command.arg(self.key("limits")).arg(agent);
                command
            }
        };
        let _: i64 = command.query_async(&mut self.conn.clone()).await.map_err(redis_error)?;
        Ok(())
    }

    /// The pool's limits per agent ([`set_limit`](Self::set_limit)).
    pub async fn limits(&self) -> Result<HashMap<String, u32>, WorkerError> {
        ::redis::cmd("HGETALL")
            .arg(self.key("limits"))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)
    }

    /// How many of the agent's slots are in use (unexpired).
    pub async fn slots_in_use(&self, agent: &str) -> Result<u64, WorkerError> {
        ::redis::cmd("ZCOUNT")
            .arg(self.slots(agent))
            .arg(now_ms())
            .arg("+inf")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)
    }

    /// Takes one of the agent's `limit` slots for `job`, for `ttl` (its worker's heartbeat
    /// extends it); whether it got one.
    pub(crate) async fn acquire(
        &self,
        job: &Job,
        limit: u32,
        ttl: Duration,
    ) -> Result<bool, WorkerError> {
        let now = now_ms();
        let taken: i64 = self.scripts[3]
            .key(self.slots(&job.agent))
            .arg(&job.id)
            .arg(limit)
            .arg(now)
            .arg(now + millis(ttl))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        Ok(taken == 1)
    }

    /// Gives `job`'s slot back (if it had one).
    pub(crate) async fn release(&self, job: &Job) -> Result<(), WorkerError> {
        let _: i64 = ::redis::cmd("ZREM")
            .arg(self.slots(&job.agent))
            .arg(&job.id)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        Ok(())
    }

    /// Marks `job` done: acknowledged and deleted; with `requeue` (a worker that drains, a
    /// refusal), a new job for the run takes its place.
    pub(crate) async fn finish(&self, job: &Job, requeue: Option<u32>) -> Result<(), WorkerError> {
        let run_id = job.run_id.as_deref().unwrap_or_default();
        let _: i64 = self.scripts[1]
            .key(self.stream(&job.agent))
            .key(self.key("jobs"))
            .key(self.key("again"))
            .arg(&job.id)
            .arg(run_id)
            .arg(if requeue.is_some() { "1" } else { "0" })
            .arg(now_ms())
            .arg(requeue.unwrap_or(0))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        Ok(())
    }

    /// Moves `job` to the dead-letter stream with `reason`, and marks it done.
    pub(crate) async fn dead_letter(&self, job: &Job, reason: &str) -> Result<(), WorkerError> {
        let run_id = job.run_id.as_deref().unwrap_or_default();
        if !run_id.is_empty() {
            let _: i64 = ::redis::cmd("SADD")
                .arg(self.key("dead:runs"))
                .arg(run_id)
                .query_async(&mut self.conn.clone())
                .await
                .map_err(redis_error)?;
        }
        let _: String = ::redis::cmd("XADD")
            .arg(self.dead_stream())
            .arg("*")
            .arg(&[("run", run_id), ("agent", &job.agent), ("reason", reason), ("job", &job.id)])
            .arg("deliveries")
            .arg(job.deliveries)
            .arg("at_ms")
            .arg(now_ms())
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        self.finish(job, None).await
    }

    /// The dead letters, oldest first (at most `count`).
    pub async fn dead_letters(&self, count: usize) -> Result<Vec<DeadLetter>, WorkerError> {
        let reply: ::redis::streams::StreamRangeReply = ::redis::cmd("XRANGE")
            .arg(self.dead_stream())
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(count)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        Ok(reply
            .ids
            .into_iter()
            .map(|entry| DeadLetter {
                run_id: text(&entry.map, "run").unwrap_or_default(),
                agent: text(&entry.map, "agent").unwrap_or_default(),
                reason: text(&entry.map, "reason").unwrap_or_default(),
                deliveries: text(&entry.map, "deliveries")
                    .and_then(|d| d.parse().ok())
                    .unwrap_or(0),
                id: entry.id,
            })
            .collect())
    }

    /// Every agent's jobs and workers, and the number of dead letters.
    pub async fn status(&self) -> Result<QueueStatus, WorkerError> {
        let mut conn = self.conn.clone();
        let mut names: Vec<String> = ::redis::cmd("SMEMBERS")
            .arg(self.key("agents"))
            .query_async(&mut conn)
            .await
            .map_err(redis_error)?;
        names.sort();
        let mut agents = Vec::with_capacity(names.len());
        for agent in names {
            let stream = self.stream(&agent);
            let depth: u64 = ::redis::cmd("XLEN")
                .arg(&stream)
                .query_async(&mut conn)
                .await
                .map_err(redis_error)?;
            let consumers: Result<Vec<HashMap<String, Value>>, _> = ::redis::cmd("XINFO")
                .arg("CONSUMERS")
                .arg(&stream)
                .arg(GROUP)
                .query_async(&mut conn)
                .await;
            let consumers: Vec<(String, u64, u64)> = match consumers {
                Ok(consumers) => consumers
                    .iter()
                    .map(|c| {
                        let number = |field: &str| match c.get(field) {
                            Some(Value::Int(n)) => u64::try_from(*n).unwrap_or(0),
                            _ => 0,
                        };
                        let name = match c.get("name") {
                            Some(Value::BulkString(name)) => {
                                String::from_utf8_lossy(name).into_owned()
                            }
                            _ => String::new(),
                        };
                        (name, number("pending"), number("idle"))
                    })
                    .collect(),
                Err(error) if error.code() == Some("NOGROUP") => Vec::new(),
                Err(error) => return Err(redis_error(error)),
            };
            let pending = consumers.iter().map(|(_, pending, _)| pending).sum();
            agents.push(AgentQueue { agent, depth, pending, consumers });
        }
        let dead_letters: u64 = ::redis::cmd("XLEN")
            .arg(self.dead_stream())
            .query_async(&mut conn)
            .await
            .map_err(redis_error)?;
        Ok(QueueStatus { agents, dead_letters })
    }

    /// The agent's jobs not done (`depth`) and delivered to a worker (`pending`).
    pub async fn depth(&self, agent: &str) -> Result<(u64, u64), WorkerError> {
        let stream = self.stream(agent);
        let (depth, pending): (u64, Value) = ::redis::pipe()
            .cmd("XLEN")
            .arg(&stream)
            .cmd("XPENDING")
            .arg(&stream)
            .arg(GROUP)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        let pending = match pending {
            Value::Array(summary) => match summary.first() {
                Some(Value::Int(n)) => u64::try_from(*n).unwrap_or(0),
                _ => 0,
            },
            _ => 0,
        };
        Ok((depth, pending))
    }

    /// Removes a consumer that left the group with no job pending (a worker that stopped).
    pub(crate) async fn leave(&self, agent: &str, consumer: &str) -> Result<(), WorkerError> {
        let _: i64 = ::redis::cmd("XGROUP")
            .arg("DELCONSUMER")
            .arg(self.stream(agent))
            .arg(GROUP)
            .arg(consumer)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        Ok(())
    }

    /// Whether the run has a live job.
    pub async fn has_job(&self, run_id: &str) -> Result<bool, WorkerError> {
        ::redis::cmd("HEXISTS")
            .arg(self.key("jobs"))
            .arg(run_id)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)
    }

    /// Requeues `job` with one more refusal.
    pub(crate) async fn refuse(&self, job: &Job) -> Result<(), WorkerError> {
        self.finish(job, Some(job.refusals + 1)).await
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A field of a stream entry as text.
fn text(map: &HashMap<String, Value>, field: &str) -> Option<String> {
    match map.get(field)? {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) => Some(text.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A stream entry as a job (a malformed one keeps why).
pub(super) fn parse_job(agent: &str, entry: StreamId, deliveries: u64) -> Job {
    let run_id = match text(&entry.map, "run") {
        Some(run) if !run.is_empty() && run.len() <= 256 && !run.chars().any(char::is_control) => {
            Ok(run)
        }
        Some(_) => Err("its `run` field is empty, too long or holds control characters".into()),
        None => Err(format!(
            "it has no `run` field (fields: {})",
            entry.map.keys().cloned().collect::<Vec<_>>().join(", ")
        )),
    };
    let refusals = text(&entry.map, "refusals").and_then(|r| r.parse().ok()).unwrap_or(0);
    let queued_ms = text(&entry.map, "at_ms").and_then(|at| at.parse().ok());
    Job { agent: agent.to_owned(), id: entry.id, run_id, refusals, deliveries, queued_ms }
}
