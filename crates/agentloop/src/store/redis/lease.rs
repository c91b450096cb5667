//! Leases in Redis: a hash per run (`run:{id}:lease`: owner, epoch, expiry), changed only by
//! Lua scripts, so every claim is atomic. Expiry is decided by the Redis server's clock
//! (`TIME`), the one clock all executors share. And what was requested of a run's executor
//! (`run:{id}:control`: `cancel`, `pause`), each change one atomic command.

use super::{backend, corrupt, RedisStore};
use crate::store::lease::ttl_ms;
use crate::store::{from_json, to_json, ControlRequest, Lease, RemoteControl, StoreError};
use ::redis::{Script, ScriptInvocation};
use std::collections::HashMap;
use std::time::Duration;

/// The server's time in milliseconds, as a script computes it.
const NOW: &str = "local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
";

/// Claims: refused while the lease is live; else the next epoch.
const CLAIM: &str = "
local owner = redis.call('HGET', KEYS[1], 'owner') or ''
local epoch = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
local expires = tonumber(redis.call('HGET', KEYS[1], 'expires_at_ms') or '0')
if owner ~= '' and expires > now then return {'held', owner, tostring(expires - now)} end
local until_ms = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'epoch', tostring(epoch + 1),
  'expires_at_ms', tostring(until_ms))
if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return {'ok', tostring(epoch + 1), tostring(until_ms)}
";

/// Renews: only the current holder.
const RENEW: &str = "
local owner = redis.call('HGET', KEYS[1], 'owner') or ''
local epoch = redis.call('HGET', KEYS[1], 'epoch') or '0'
if owner ~= ARGV[1] or epoch ~= ARGV[2] then return {'lost', owner, epoch} end
local until_ms = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'expires_at_ms', tostring(until_ms))
if tonumber(ARGV[4]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return {'ok', tostring(until_ms)}
";

/// Releases: only the current holder; the epoch stays.
const RELEASE: &str = "
local owner = redis.call('HGET', KEYS[1], 'owner') or ''
local epoch = redis.call('HGET', KEYS[1], 'epoch') or '0'
if owner == ARGV[1] and epoch == ARGV[2] then
  redis.call('HSET', KEYS[1], 'owner', '', 'expires_at_ms', '0')
end
return {'ok'}
";

fn script(body: &str) -> Script {
    Script::new(&format!("{NOW}{body}"))
}

/// The lease scripts, made once per store (making one hashes its text).
pub(super) struct Scripts {
    claim: Script,
    renew: Script,
    release: Script,
}

impl Scripts {
    pub(super) fn new() -> Self {
        Self { claim: script(CLAIM), renew: script(RENEW), release: script(RELEASE) }
    }
}

/// `script` called by the holder of `lease`: the lease's key, its owner and epoch.
fn held<'a>(store: &RedisStore, script: &'a Script, lease: &Lease) -> ScriptInvocation<'a> {
    let mut invocation = script.key(key(store, &lease.run_id));
    invocation.arg(&lease.owner).arg(lease.epoch);
    invocation
}

fn key(store: &RedisStore, run_id: &str) -> String {
    store.key(&["run:", run_id, ":lease"])
}

fn parse(field: Option<&String>, what: &str) -> Result<u64, StoreError> {
    field
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| corrupt(&format!("lease script: bad {what}")))
}

/// [`StoreError::LeaseLost`] from a script's `{'lost' | 'lease_lost', owner, epoch}` reply.
pub(super) fn lost_reply(lease: &Lease, reply: &[String]) -> StoreError {
    StoreError::LeaseLost {
        run_id: lease.run_id.clone(),
        epoch: lease.epoch,
        current_owner: reply.get(1).cloned().unwrap_or_default(),
        current_epoch: reply.get(2).and_then(|n| n.parse().ok()).unwrap_or(0),
    }
}

pub(super) async fn claim(
    store: &RedisStore,
    run_id: &str,
    owner: &str,
    ttl: Duration,
) -> Result<Lease, StoreError> {
    let reply: Vec<String> = store
        .invoke(
            store
                .scripts
                .lease
                .claim
                .key(key(store, run_id))
                .arg(owner)
                .arg(ttl_ms(ttl))
                .arg(store.ttl_ms()),
        )
        .await?;
    match reply.first().map(String::as_str) {
        Some("ok") => Ok(Lease {
            run_id: run_id.to_owned(),
            owner: owner.to_owned(),
            epoch: parse(reply.get(1), "epoch")?,
            expires_at_ms: parse(reply.get(2), "expiry")?,
        }),
        Some("held") => Err(StoreError::LeaseHeld {
            run_id: run_id.to_owned(),
            owner: reply.get(1).cloned().unwrap_or_default(),
            expires_in_ms: parse(reply.get(2), "expiry")?,
        }),
        _ => Err(corrupt(&format!("unexpected reply of the claim script: {reply:?}"))),
    }
}

pub(super) async fn renew(
    store: &RedisStore,
    lease: &Lease,
    ttl: Duration,
) -> Result<Lease, StoreError> {
    let renew = &store.scripts.lease.renew;
    let reply: Vec<String> =
        store.invoke(held(store, renew, lease).arg(ttl_ms(ttl)).arg(store.ttl_ms())).await?;
    match reply.first().map(String::as_str) {
        Some("ok") => Ok(Lease { expires_at_ms: parse(reply.get(1), "expiry")?, ..lease.clone() }),
        Some("lost") => Err(lost_reply(lease, &reply)),
        _ => Err(corrupt(&format!("unexpected reply of the renew script: {reply:?}"))),
    }
}

pub(super) async fn release(store: &RedisStore, lease: &Lease) -> Result<(), StoreError> {
    let _: Vec<String> = store.invoke(&held(store, &store.scripts.lease.release, lease)).await?;
    Ok(())
}

pub(super) async fn remote_control(
    store: &RedisStore,
    run_id: &str,
) -> Result<RemoteControl, StoreError> {
    let hash = store.hash(&store.key(&["run:", run_id, ":control"])).await?;
    control_of(hash)
}

/// The remote control of each of `run_ids`: one pipeline of `HGETALL`s, one round trip.
pub(super) async fn remote_controls(
    store: &RedisStore,
    run_ids: &[String],
) -> Result<Vec<(String, RemoteControl)>, StoreError> {
    if run_ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = ::redis::pipe();
    for run_id in run_ids {
        pipe.cmd("HGETALL").arg(store.key(&["run:", run_id, ":control"]));
    }
    let hashes: Vec<HashMap<String, String>> =
        pipe.query_async(&mut store.conn()).await.map_err(backend)?;
    run_ids
        .iter()
        .zip(hashes)
        .map(|(run_id, hash)| Ok((run_id.clone(), control_of(hash)?)))
        .collect()
}

/// The control state from its hash: `cancel`, `pause`, `input` (JSON), one
/// `decision:{call_id}` field (JSON) per decided call and a `decided_by:{call_id}` field for
/// each whose request said who decided.
fn control_of(hash: HashMap<String, String>) -> Result<RemoteControl, StoreError> {
    let mut control = RemoteControl::default();
    for (field, value) in hash {
        match field.as_str() {
            "cancel" => control.cancel = Some(value),
            "pause" => control.pause = Some(value),
            "input" => control.input = Some(from_json(&value, "run control input")?),
            _ => {
                if let Some(call_id) = field.strip_prefix("decision:") {
                    let decision = from_json(&value, "run control decision")?;
                    control.decisions.insert(call_id.to_owned(), decision);
                } else if let Some(call_id) = field.strip_prefix("decided_by:") {
                    control.decided_by.insert(call_id.to_owned(), value);
                }
            }
        }
    }
    Ok(control)
}

pub(super) async fn request_control(
    store: &RedisStore,
    run_id: &str,
    request: ControlRequest,
) -> Result<RemoteControl, StoreError> {
    let key = store.key(&["run:", run_id, ":control"]);
    let mut pipe = ::redis::pipe();
    pipe.atomic();
    match &request {
        ControlRequest::Cancel(reason) => pipe.cmd("HSETNX").arg(&key).arg("cancel").arg(reason),
        ControlRequest::Pause(reason) => pipe.cmd("HSET").arg(&key).arg("pause").arg(reason),
        ControlRequest::Resume => pipe.cmd("HDEL").arg(&key).arg("pause"),
        ControlRequest::Decide { call_id, decision, by } => {
            let field = format!("decided_by:{call_id}");
            match by {
                Some(by) => pipe.cmd("HSET").arg(&key).arg(field).arg(by).ignore(),
                None => pipe.cmd("HDEL").arg(&key).arg(field).ignore(),
            };
            pipe.cmd("HSET").arg(&key).arg(format!("decision:{call_id}")).arg(to_json(decision)?)
        }
        ControlRequest::Input(answer) => {
            pipe.cmd("HSET").arg(&key).arg("input").arg(to_json(answer)?)
        }
    }
    .ignore();
    if store.ttl_ms() > 0 {
        pipe.cmd("PEXPIRE").arg(&key).arg(store.ttl_ms()).ignore();
    }
    pipe.cmd("HGETALL").arg(&key);
    let (hash,): (HashMap<String, String>,) =
        pipe.query_async(&mut store.conn()).await.map_err(backend)?;
    control_of(hash)
}
