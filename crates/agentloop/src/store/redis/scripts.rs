//! The Lua scripts of the Redis store: each is one atomic step on the server.

pub(super) const APPEND: &str = r"
if ARGV[10] ~= '' then
  local held = redis.call('HMGET', KEYS[4], 'owner', 'epoch')
  local owner, epoch = held[1] or '', held[2] or '0'
  if owner ~= ARGV[10] or epoch ~= ARGV[11] then return {'lease_lost', owner, epoch} end
end
local len = redis.call('LLEN', KEYS[1])
if len ~= tonumber(ARGV[1]) then return {'conflict', tostring(len)} end
local n = #ARGV - 17
if n == 0 then return {'ok', tostring(len)} end
for i = 18, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
if len == 0 then
  redis.call('HSET', KEYS[2], 'run_id', ARGV[3], 'created_ms', ARGV[4])
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
end
if ARGV[8] == '1' then
  redis.call('HSET', KEYS[2], 'agent', ARGV[6], 'context_id', ARGV[7], 'parent_run_id', ARGV[12])
  if ARGV[13] == '' then
    redis.call('HDEL', KEYS[2], 'price')
  else
    redis.call('HSET', KEYS[2], 'price', ARGV[13])
  end
  local created = redis.call('HGET', KEYS[2], 'created_ms')
  for k = 6, #KEYS do redis.call('ZADD', KEYS[k], created, ARGV[3]) end
end
redis.call('HSET', KEYS[2], 'state', ARGV[9], 'updated_ms', ARGV[5], 'entries', len + n)
local tokens = {'input_tokens', 'output_tokens', 'cached_input_tokens', 'reasoning_tokens'}
for i, field in ipairs(tokens) do
  if ARGV[13 + i] ~= '0' then redis.call('HINCRBY', KEYS[2], field, ARGV[13 + i]) end
end
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
redis.call('PUBLISH', KEYS[5], tostring(len + n))
return {'ok', tostring(len + n)}
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
