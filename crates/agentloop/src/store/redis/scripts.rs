//! The Lua scripts of the Redis store: each is one atomic step on the server.

/// Appends a batch of journal appends, one after the other: `ARGV[1]` is how many; the keys of
/// all come first (journal, meta, `runs`, lease, appended channel, then the run's indexes),
/// then for each its key count, its argument count and its arguments (expected seq, TTL, run
/// id, first and last ms, agent, context, started flag, state, lease owner and epoch, parent,
/// price, four token counts, the entries). One reply per append: `ok` with the journal's
/// length, `conflict` with it, or `lease_lost` with the lease's owner and epoch.
pub(super) const APPEND: &str = r"
local function append(kb, nk, ab, n)
  local journal, meta, lease = KEYS[kb + 1], KEYS[kb + 2], KEYS[kb + 4]
  local function arg(i) return ARGV[ab + i] end
  if arg(10) ~= '' then
    local held = redis.call('HMGET', lease, 'owner', 'epoch')
    local owner, epoch = held[1] or '', held[2] or '0'
    if owner ~= arg(10) or epoch ~= arg(11) then return {'lease_lost', owner, epoch} end
  end
  local len = redis.call('LLEN', journal)
  if len ~= tonumber(arg(1)) then return {'conflict', tostring(len)} end
  local count = n - 17
  if count == 0 then return {'ok', tostring(len)} end
  for i = ab + 18, ab + n, 1000 do
    redis.call('RPUSH', journal, unpack(ARGV, i, math.min(i + 999, ab + n)))
  end
  if len == 0 then
    redis.call('HSET', meta, 'run_id', arg(3), 'created_ms', arg(4))
    redis.call('ZADD', KEYS[kb + 3], arg(4), arg(3))
  end
  if arg(8) == '1' then
    redis.call('HSET', meta, 'agent', arg(6), 'context_id', arg(7), 'parent_run_id', arg(12))
    if arg(13) == '' then
      redis.call('HDEL', meta, 'price')
    else
      redis.call('HSET', meta, 'price', arg(13))
    end
    local created = redis.call('HGET', meta, 'created_ms')
    for k = 6, nk do redis.call('ZADD', KEYS[kb + k], created, arg(3)) end
  end
  redis.call('HSET', meta, 'state', arg(9), 'updated_ms', arg(5), 'entries', len + count)
  local tokens = {'input_tokens', 'output_tokens', 'cached_input_tokens', 'reasoning_tokens'}
  for i, field in ipairs(tokens) do
    if arg(13 + i) ~= '0' then redis.call('HINCRBY', meta, field, arg(13 + i)) end
  end
  local ttl = tonumber(arg(2))
  if ttl > 0 then
    redis.call('PEXPIRE', journal, ttl)
    redis.call('PEXPIRE', meta, ttl)
  end
  redis.call('PUBLISH', KEYS[kb + 5], tostring(len + count))
  return {'ok', tostring(len + count)}
end
local replies, kb, p = {}, 0, 2
for r = 1, tonumber(ARGV[1]) do
  local nk, n = tonumber(ARGV[p]), tonumber(ARGV[p + 1])
  replies[r] = append(kb, nk, p + 1, n)
  kb, p = kb + nk, p + 2 + n
end
return replies
";

pub(super) const DELETE_RUN: &str = r"
local existed = redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[4], KEYS[5])
for k = 7, #KEYS do redis.call('ZREM', KEYS[k], ARGV[1]) end
if redis.call('ZCARD', KEYS[3]) == 0 then redis.call('DEL', KEYS[6]) end
return existed
";

pub(super) const OPEN_SESSION: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'state', 'created', 'turns', 0, 'messages', 0,
    'created_ms', ARGV[1], 'updated_ms', ARGV[1])
end
local ttl = tonumber(ARGV[2])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return redis.call('HGETALL', KEYS[1])
";

pub(super) const BEGIN_TURN: &str = r"
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

pub(super) const END_TURN: &str = r"
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
