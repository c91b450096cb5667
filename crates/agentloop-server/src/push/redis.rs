//! Push configs in Redis, under a key prefix (default `agentloop:`, the run store's; give
//! each server sharing a Redis its own when they serve different agents):
//!
//! - `{prefix}push:task:{task_id}`: a hash, field `{id}` the config (JSON), field
//!   `{id}#cursor` its delivery cursor (JSON);
//! - `{prefix}push:pending`: a set of the `[task_id, id]` (JSON) whose delivery is not done;
//! - `{prefix}push:lease:{task_id}:{id}`: a config's delivery lease, its owner as value,
//!   expiring with it (`SET NX PX`; renewed and released by scripts that compare the owner
//!   first). A config id holds no `:`, so the key names one config.

use super::store::{Cursor, PushRecord, PushStore, PushStoreError};
use ::redis::aio::ConnectionManager;
use ::redis::{Client, Script};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::Duration;

fn backend(error: impl std::fmt::Display) -> PushStoreError {
    PushStoreError::Backend { backend: "redis", message: error.to_string() }
}

fn corrupt(error: impl std::fmt::Display) -> PushStoreError {
    PushStoreError::Corrupt(error.to_string())
}

/// Moves a cursor only while its config exists.
const ADVANCE: &str = r"
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], ARGV[1] .. '#cursor', ARGV[2])
  if ARGV[3] == '1' then
    redis.call('SREM', KEYS[2], ARGV[4])
  end
  return 1
end
return 0
";

/// Takes a lease (KEYS: the task's hash, the lease; ARGV: config id, owner, ttl ms) when the
/// config is there and the lease free or the owner's (then extended).
const CLAIM: &str = r"
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then
  return 1
end
if redis.call('GET', KEYS[2]) == ARGV[2] then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return 1
end
return 0
";

/// Extends a lease (KEYS: the lease; ARGV: owner, ttl ms) that is still the owner's.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
";

/// Deletes a lease (KEYS: the lease; ARGV: owner) that is still the owner's.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// A stored config without its cursor.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    agent: String,
    config: a2a::TaskPushNotificationConfig,
    created_ms: u64,
}

/// Push configs in Redis (see the [module docs](self)).
#[derive(Clone)]
pub struct RedisPushStore {
    conn: ConnectionManager,
    prefix: String,
    advance: Script,
    claim: Script,
    renew: Script,
    release: Script,
}

impl std::fmt::Debug for RedisPushStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisPushStore").field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

impl RedisPushStore {
    /// Connects to `url`, with keys under `prefix` (e.g. `agentloop:`).
    pub async fn connect(url: &str, prefix: impl Into<String>) -> Result<Self, PushStoreError> {
        let client = Client::open(url).map_err(backend)?;
        let conn = client.get_connection_manager().await.map_err(backend)?;
        Ok(Self {
            conn,
            prefix: prefix.into(),
            advance: Script::new(ADVANCE),
            claim: Script::new(CLAIM),
            renew: Script::new(RENEW),
            release: Script::new(RELEASE),
        })
    }

    fn lease_key(&self, task_id: &str, id: &str) -> String {
        format!("{}push:lease:{task_id}:{id}", self.prefix)
    }

    fn task_key(&self, task_id: &str) -> String {
        format!("{}push:task:{task_id}", self.prefix)
    }

    fn pending_key(&self) -> String {
        format!("{}push:pending", self.prefix)
    }

    fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }
}

fn member(task_id: &str, id: &str) -> String {
    serde_json::json!([task_id, id]).to_string()
}

fn record(stored: &str, cursor: Option<&str>) -> Result<PushRecord, PushStoreError> {
    let stored: Stored = serde_json::from_str(stored).map_err(corrupt)?;
    let cursor = match cursor {
        Some(cursor) => serde_json::from_str(cursor).map_err(corrupt)?,
        None => Cursor::default(),
    };
    Ok(PushRecord {
        agent: stored.agent,
        config: stored.config,
        created_ms: stored.created_ms,
        cursor,
    })
}

/// A TTL in ms for `PX` / `PEXPIRE` (at least 1).
fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

fn oldest_first(mut records: Vec<PushRecord>) -> Vec<PushRecord> {
    records.sort_by(|a, b| {
        (a.created_ms, a.task_id(), a.id()).cmp(&(b.created_ms, b.task_id(), b.id()))
    });
    records
}

#[async_trait]
impl PushStore for RedisPushStore {
    async fn put(&self, record: &PushRecord) -> Result<(), PushStoreError> {
        let stored = Stored {
            agent: record.agent.clone(),
            config: record.config.clone(),
            created_ms: record.created_ms,
        };
        let stored = serde_json::to_string(&stored).map_err(backend)?;
        let cursor = serde_json::to_string(&record.cursor).map_err(backend)?;
        let id = record.id();
        let mut pipe = ::redis::pipe();
        pipe.atomic()
            .cmd("HSET")
            .arg(self.task_key(record.task_id()))
            .arg(id)
            .arg(stored)
            .arg(format!("{id}#cursor"))
            .arg(cursor)
            .ignore();
        let set = if record.cursor.done { "SREM" } else { "SADD" };
        pipe.cmd(set).arg(self.pending_key()).arg(member(record.task_id(), id)).ignore();
        pipe.cmd("DEL").arg(self.lease_key(record.task_id(), id)).ignore();
        pipe.query_async::<()>(&mut self.conn()).await.map_err(backend)
    }

    async fn get(&self, task_id: &str, id: &str) -> Result<Option<PushRecord>, PushStoreError> {
        let values: Vec<Option<String>> = ::redis::cmd("HMGET")
            .arg(self.task_key(task_id))
            .arg(id)
            .arg(format!("{id}#cursor"))
            .query_async(&mut self.conn())
            .await
            .map_err(backend)?;
        match values.first() {
            Some(Some(stored)) => {
                record(stored, values.get(1).and_then(Option::as_deref)).map(Some)
            }
            _ => Ok(None),
        }
    }

    async fn list(&self, task_id: &str) -> Result<Vec<PushRecord>, PushStoreError> {
        let hash: HashMap<String, String> = ::redis::cmd("HGETALL")
            .arg(self.task_key(task_id))
            .query_async(&mut self.conn())
            .await
            .map_err(backend)?;
        let mut records = Vec::new();
        for (field, stored) in &hash {
            if field.ends_with("#cursor") {
                continue;
            }
            records.push(record(stored, hash.get(&format!("{field}#cursor")).map(String::as_str))?);
        }
        Ok(oldest_first(records))
    }

    async fn delete(&self, task_id: &str, id: &str) -> Result<bool, PushStoreError> {
        let mut pipe = ::redis::pipe();
        pipe.atomic()
            .cmd("HDEL")
            .arg(self.task_key(task_id))
            .arg(id)
            .arg(format!("{id}#cursor"))
            .cmd("SREM")
            .arg(self.pending_key())
            .arg(member(task_id, id))
            .ignore()
            .cmd("DEL")
            .arg(self.lease_key(task_id, id))
            .ignore();
        let (removed,): (i64,) = pipe.query_async(&mut self.conn()).await.map_err(backend)?;
        Ok(removed > 0)
    }

    async fn advance(&self, task_id: &str, id: &str, cursor: Cursor) -> Result<(), PushStoreError> {
        let value = serde_json::to_string(&cursor).map_err(backend)?;
        let mut invocation = self.advance.key(self.task_key(task_id));
        invocation
            .key(self.pending_key())
            .arg(id)
            .arg(value)
            .arg(if cursor.done { "1" } else { "0" })
            .arg(member(task_id, id));
        let _: i64 = invocation.invoke_async(&mut self.conn()).await.map_err(backend)?;
        Ok(())
    }

    async fn pending(&self) -> Result<Vec<PushRecord>, PushStoreError> {
        let members: Vec<String> = ::redis::cmd("SMEMBERS")
            .arg(self.pending_key())
            .query_async(&mut self.conn())
            .await
            .map_err(backend)?;
        let mut records = Vec::new();
        for raw in members {
            let Ok((task_id, id)) = serde_json::from_str::<(String, String)>(&raw) else {
                continue;
            };
            match self.get(&task_id, &id).await? {
                Some(record) if !record.cursor.done => records.push(record),
                _ => {}
            }
        }
        Ok(oldest_first(records))
    }

    async fn claim(
        &self,
        task_id: &str,
        id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, PushStoreError> {
        let mut invocation = self.claim.key(self.task_key(task_id));
        invocation.key(self.lease_key(task_id, id)).arg(id).arg(owner).arg(ttl_ms(ttl));
        let taken: i64 = invocation.invoke_async(&mut self.conn()).await.map_err(backend)?;
        Ok(taken == 1)
    }

    async fn renew(
        &self,
        task_id: &str,
        id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, PushStoreError> {
        let mut invocation = self.renew.key(self.lease_key(task_id, id));
        invocation.arg(owner).arg(ttl_ms(ttl));
        let renewed: i64 = invocation.invoke_async(&mut self.conn()).await.map_err(backend)?;
        Ok(renewed == 1)
    }

    async fn release(&self, task_id: &str, id: &str, owner: &str) -> Result<(), PushStoreError> {
        let mut invocation = self.release.key(self.lease_key(task_id, id));
        invocation.arg(owner);
        let _: i64 = invocation.invoke_async(&mut self.conn()).await.map_err(backend)?;
        Ok(())
    }
}
