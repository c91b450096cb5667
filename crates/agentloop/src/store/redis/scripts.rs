//! The Lua scripts of the Redis store: each is one atomic step on the server; and how they
//! are called (by their hash, loaded again when the server lost them).

use super::{admin, artifacts, backend, lease, RedisStore};
use crate::store::StoreError;
use ::redis::Script;

/// The store's scripts, each made once (making one hashes its text).
pub(super) struct Scripts {
    pub(super) append: Script,
    pub(super) delete_run: Script,
    pub(super) open_session: Script,
    pub(super) begin_turn: Script,
    pub(super) end_turn: Script,
    pub(super) append_chunk: Script,
    pub(super) remove: Script,
    pub(super) rebuild: Script,
    pub(super) search: Script,
    pub(super) lease: lease::Scripts,
}

impl Scripts {
    pub(super) fn new() -> Self {
        Self {
            append: Script::new(APPEND),
            delete_run: Script::new(DELETE_RUN),
            open_session: Script::new(OPEN_SESSION),
            begin_turn: Script::new(BEGIN_TURN),
            end_turn: Script::new(END_TURN),
            append_chunk: Script::new(artifacts::APPEND_CHUNK),
            remove: Script::new(admin::REMOVE),
            rebuild: Script::new(admin::REBUILD),
            search: Script::new(SEARCH),
            lease: lease::Scripts::new(),
        }
    }
}

/// How many times a script call loads its script again when the server lost it (a restart
/// or a `SCRIPT FLUSH`, which another client may send again between the load and the call).
const SCRIPT_LOADS: usize = 3;

fn no_script(error: &::redis::RedisError) -> bool {
    error.kind() == ::redis::ErrorKind::Server(::redis::ServerErrorKind::NoScript)
}

impl RedisStore {
    /// Runs an `EVALSHA` of `script`, loading the script first if the server does not have
    /// it (after a restart or a `SCRIPT FLUSH`; again should it lose it again before the call).
    pub(super) async fn evalsha<T: ::redis::FromRedisValue>(
        &self,
        script: &Script,
        command: &::redis::Cmd,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn();
        let mut loads = 0;
        loop {
            match command.query_async(&mut conn).await {
                Err(error) if no_script(&error) && loads < SCRIPT_LOADS => {
                    loads += 1;
                    script.load_async(&mut conn).await.map_err(backend)?;
                }
                other => return other.map_err(backend),
            }
        }
    }

    /// Runs a script call ([`evalsha`](Self::evalsha)'s retries, for a prepared invocation:
    /// each attempt loads the script when the server does not have it).
    pub(super) async fn invoke<T: ::redis::FromRedisValue>(
        &self,
        invocation: &::redis::ScriptInvocation<'_>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn();
        let mut attempts = 0;
        loop {
            match invocation.invoke_async(&mut conn).await {
                Err(error) if no_script(&error) && attempts < SCRIPT_LOADS => attempts += 1,
                other => return other.map_err(backend),
            }
        }
    }
}

/// An append: `KEYS` the journal, meta, `runs`, lease and appended channel, then the indexes
/// of a batch with `run_started`; `ARGV` 1–17 as [`RedisStore::append`] passes them, 18 the
/// origin of a batch with `run_forked` (empty: none), 19–20 and 21–22 whether the batch sets
/// the input and the answer (`1`) and their text, then the entries. The state index
/// (`runs:state:{state}`) and the origin index (`runs:origin:{id}`) keys are made here.
const APPEND: &str = r"
if ARGV[10] ~= '' then
  local held = redis.call('HMGET', KEYS[4], 'owner', 'epoch')
  local owner, epoch = held[1] or '', held[2] or '0'
  if owner ~= ARGV[10] or epoch ~= ARGV[11] then return {'lease_lost', owner, epoch} end
end
local len = redis.call('LLEN', KEYS[1])
if len ~= tonumber(ARGV[1]) then return {'conflict', tostring(len)} end
local n = #ARGV - 22
if n == 0 then return {'ok', tostring(len)} end
for i = 23, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
local prefix = string.sub(KEYS[3], 1, -5)
if len == 0 then
  redis.call('HSET', KEYS[2], 'run_id', ARGV[3], 'created_ms', ARGV[4])
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
end
-- The creation time, read only when an index needs it (not on a round that changes nothing).
local created_ms
local function created()
  created_ms = created_ms or redis.call('HGET', KEYS[2], 'created_ms')
  return created_ms
end
if ARGV[8] == '1' then
  redis.call('HSET', KEYS[2], 'agent', ARGV[6], 'context_id', ARGV[7], 'parent_run_id', ARGV[12])
  if ARGV[13] == '' then
    redis.call('HDEL', KEYS[2], 'price')
  else
    redis.call('HSET', KEYS[2], 'price', ARGV[13])
  end
  for k = 6, #KEYS do redis.call('ZADD', KEYS[k], created(), ARGV[3]) end
end
if ARGV[18] ~= '' then
  redis.call('HSET', KEYS[2], 'origin_run_id', ARGV[18])
  redis.call('ZADD', prefix .. 'runs:origin:' .. ARGV[18], created(), ARGV[3])
end
for i, field in ipairs({'input', 'answer'}) do
  if ARGV[17 + 2 * i] == '1' then
    if ARGV[18 + 2 * i] == '' then
      redis.call('HDEL', KEYS[2], field)
    else
      redis.call('HSET', KEYS[2], field, ARGV[18 + 2 * i])
    end
  end
end
local old = redis.call('HGET', KEYS[2], 'state')
if old ~= ARGV[9] then
  if old then redis.call('ZREM', prefix .. 'runs:state:' .. old, ARGV[3]) end
  redis.call('ZADD', prefix .. 'runs:state:' .. ARGV[9], created(), ARGV[3])
end
redis.call('HSET', KEYS[2], 'state', ARGV[9], 'updated_ms', ARGV[5], 'entries', len + n)
local tokens = {'input_tokens', 'output_tokens', 'cached_input_tokens', 'reasoning_tokens'}
for i, field in ipairs(tokens) do
  if ARGV[13 + i] ~= '0' then redis.call('HINCRBY', KEYS[2], field, ARGV[13 + i]) end
end
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  -- Every key of the run gets the TTL alike: its journal, meta, lease, controls, artifacts.
  local run = string.sub(KEYS[1], 1, -9)
  for _, k in ipairs({KEYS[1], KEYS[2], KEYS[4], run .. ':control', run .. ':artifacts'}) do
    redis.call('PEXPIRE', k, ttl)
  end
  for _, a in ipairs(redis.call('ZRANGE', run .. ':artifacts', 0, -1)) do
    redis.call('PEXPIRE', prefix .. 'artifact:' .. a, ttl)
    redis.call('PEXPIRE', prefix .. 'artifact:' .. a .. ':chunks', ttl)
  end
end
redis.call('PUBLISH', KEYS[5], tostring(len + n))
return {'ok', tostring(len + n)}
";

/// The ids of an index's runs whose input or answer contains a text, newest first: `KEYS[1]`
/// the index; `ARGV` its score range (max, min), the text in lower case, the offset to start
/// at, how many ids to find, how many to read at most, the key prefix. Gives the offset to go
/// on from (-1: the index ends) and the ids found. Reading a bounded number per call keeps
/// each call short (the server runs nothing else meanwhile); the ids are read in two ranges,
/// 256 and the rest (a range that starts at an offset first walks to it: small ranges would
/// walk the index over and over, one large range would read ids a full page does not need).
pub(super) const SEARCH: &str = r"
local offset, want, budget = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local needle, found, read, chunk = ARGV[3], {}, 0, 256
local function has(text) return text and string.find(string.lower(text), needle, 1, true) end
while read < budget do
  chunk = math.min(chunk, budget - read)
  local ids = redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[2], 'LIMIT', offset, chunk)
  for _, id in ipairs(ids) do
    offset, read = offset + 1, read + 1
    local t = redis.call('HMGET', ARGV[7] .. 'run:' .. id .. ':meta', 'input', 'answer')
    if has(t[1]) or has(t[2]) then
      table.insert(found, id)
      if #found >= want then return {offset, found} end
    end
  end
  if #ids < chunk then return {-1, found} end
  chunk = budget
end
return {offset, found}
";

const DELETE_RUN: &str = r"
local prefix = string.sub(KEYS[3], 1, -5)
local texts = redis.call('HMGET', KEYS[2], 'state', 'origin_run_id')
if texts[1] then redis.call('ZREM', prefix .. 'runs:state:' .. texts[1], ARGV[1]) end
if texts[2] then redis.call('ZREM', prefix .. 'runs:origin:' .. texts[2], ARGV[1]) end
local existed = redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[4], KEYS[5])
for k = 7, #KEYS do redis.call('ZREM', KEYS[k], ARGV[1]) end
if redis.call('ZCARD', KEYS[3]) == 0 then redis.call('DEL', KEYS[6]) end
return existed
";

const OPEN_SESSION: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'state', 'created', 'turns', 0, 'messages', 0,
    'created_ms', ARGV[1], 'updated_ms', ARGV[1])
end
local ttl = tonumber(ARGV[2])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return redis.call('HGETALL', KEYS[1])
";

const BEGIN_TURN: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'state', 'created', 'turns', 0, 'messages', 0,
    'created_ms', ARGV[2], 'updated_ms', ARGV[2])
end
if redis.call('HGET', KEYS[1], 'state') == 'busy' then
  return {'busy', redis.call('HGET', KEYS[1], 'run_id') or ''}
end
redis.call('HSET', KEYS[1], 'state', 'busy', 'run_id', ARGV[1], 'updated_ms', ARGV[2])
local ttl = tonumber(ARGV[3])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return {'ok'}
";

const END_TURN: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing'} end
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'busy' or redis.call('HGET', KEYS[1], 'run_id') ~= ARGV[1] then
  return {'not_in_turn', state}
end
for i = 4, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
redis.call('HSET', KEYS[1], 'state', 'ready', 'updated_ms', ARGV[2],
  'messages', redis.call('LLEN', KEYS[2]))
redis.call('HINCRBY', KEYS[1], 'turns', 1)
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return {'ok'}
";
