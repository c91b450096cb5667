//! Keeping a Redis store in order: removing runs with everything they own, one Lua script per
//! call ([`REMOVE`]: atomic, so no reader ever sees a run half removed); the registry's raw
//! entries (`run:{id}:meta`, found with `SCAN`) with their journals' lengths, journals without
//! a meta hash, and a meta hash rebuilt from its journal ([`REBUILD`]); runs journaled before
//! an index existed added to it when a store connects.

use super::{backend, corrupt, optional_name, summary_of, RedisStore};
use crate::event::Event;
use crate::store::{
    decode_entry_json, from_json, input_preview, preview, JournalEntry, OrphanJournal,
    RegistryPage, RegistryRow, Removal, RemovalRule, StoreError, SummaryUpdate,
};
use std::collections::HashMap;

/// A hash as read.
type Hash = HashMap<String, String>;

/// Removes runs: `ARGV[1]` the key prefix, `ARGV[2]` the allowed states (comma separated,
/// empty: any), `ARGV[3]` the time before which the last entry must be (empty: any), then
/// the run ids. The keys are made in the script (not for Redis Cluster, as the store).
pub(super) const REMOVE: &str = r"
local prefix = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local states, any_state = {}, ARGV[2] == ''
for s in string.gmatch(ARGV[2], '[^,]+') do states[s] = true end
local before = tonumber(ARGV[3])
local function key(...) return prefix .. table.concat({...}) end
local function name(meta, field)
  local v = redis.call('HGET', meta, field)
  if not v then return nil end
  local ok, decoded = pcall(cjson.decode, v)
  if ok and type(decoded) == 'string' then return decoded end
  return nil
end
local out = {}
for i = 4, #ARGV do
  local id = ARGV[i]
  local meta = key('run:', id, ':meta')
  if redis.call('EXISTS', meta) == 0 then
    table.insert(out, {'not_found'})
  else
    local state = redis.call('HGET', meta, 'state') or 'running'
    local updated = tonumber(redis.call('HGET', meta, 'updated_ms') or '0')
    if (not any_state and not states[state]) or (before and updated >= before) then
      table.insert(out, {'not_matching'})
    else
      local tree, seen, n = {id}, {[id] = true}, 1
      while n <= #tree do
        for _, c in ipairs(redis.call('ZRANGE', key('runs:parent:', tree[n]), 0, -1)) do
          if not seen[c] and redis.call('EXISTS', key('run:', c, ':meta')) == 1 then
            seen[c] = true
            table.insert(tree, c)
          end
        end
        n = n + 1
      end
      local live = nil
      for _, r in ipairs(tree) do
        local l = redis.call('HMGET', key('run:', r, ':lease'), 'owner', 'expires_at_ms')
        local owner, expires = l[1] or '', tonumber(l[2] or '0')
        if owner ~= '' and expires > now then
          live = {'lease_live', r, owner, tostring(expires - now)}
          break
        end
      end
      if live then
        table.insert(out, live)
      else
        for _, r in ipairs(tree) do
          local m = key('run:', r, ':meta')
          local parent, agent, ctx = name(m, 'parent_run_id'), name(m, 'agent'), name(m, 'context_id')
          redis.call('ZREM', key('runs'), r)
          local texts = redis.call('HMGET', m, 'state', 'origin_run_id')
          if texts[1] then redis.call('ZREM', key('runs:state:', texts[1]), r) end
          if texts[2] then redis.call('ZREM', key('runs:origin:', texts[2]), r) end
          if parent then redis.call('ZREM', key('runs:parent:', parent), r) end
          if agent then redis.call('ZREM', key('runs:agent:', agent), r) end
          if ctx then
            redis.call('ZREM', key('runs:context:', ctx), r)
            local session = key('session:', ctx)
            if redis.call('HGET', session, 'run_id') == r then
              redis.call('HDEL', session, 'run_id')
              if redis.call('HGET', session, 'state') == 'busy' then
                redis.call('HSET', session, 'state', 'ready', 'updated_ms', tostring(now))
              end
            end
          end
          local artifacts = key('run:', r, ':artifacts')
          for _, a in ipairs(redis.call('ZRANGE', artifacts, 0, -1)) do
            redis.call('DEL', key('artifact:', a), key('artifact:', a, ':chunks'))
          end
          redis.call('DEL', key('run:', r, ':journal'), m, key('run:', r, ':lease'),
            key('run:', r, ':control'), artifacts, key('runs:parent:', r))
        end
        local removed = {'removed'}
        for _, r in ipairs(tree) do table.insert(removed, r) end
        table.insert(out, removed)
      end
    end
  end
end
if redis.call('ZCARD', key('runs')) == 0 then redis.call('DEL', key('runs:indexed')) end
return out
";

/// Writes a run's meta hash from its journal, unless the journal changed since it was read:
/// `KEYS` journal, meta, `runs`, then the secondary indexes; `ARGV` the journal's length, run
/// id, first and last times, state, agent, session, parent (JSON), price (JSON, empty: none),
/// the four token counts, the TTL in ms (0: none), the origin (empty: none), the input and
/// the answer (empty: none). The state and origin indexes' keys are made here.
pub(super) const REBUILD: &str = r"
if redis.call('LLEN', KEYS[1]) ~= tonumber(ARGV[1]) then return 'changed' end
local prefix = string.sub(KEYS[3], 1, -5)
local old = redis.call('HGET', KEYS[2], 'state')
if old and old ~= ARGV[5] then redis.call('ZREM', prefix .. 'runs:state:' .. old, ARGV[2]) end
redis.call('ZADD', prefix .. 'runs:state:' .. ARGV[5], ARGV[3], ARGV[2])
if ARGV[15] ~= '' then
  redis.call('HSET', KEYS[2], 'origin_run_id', ARGV[15])
  redis.call('ZADD', prefix .. 'runs:origin:' .. ARGV[15], ARGV[3], ARGV[2])
end
for i, field in ipairs({'input', 'answer'}) do
  if ARGV[15 + i] == '' then redis.call('HDEL', KEYS[2], field)
  else redis.call('HSET', KEYS[2], field, ARGV[15 + i]) end
end
redis.call('HSET', KEYS[2], 'run_id', ARGV[2], 'created_ms', ARGV[3], 'updated_ms', ARGV[4],
  'state', ARGV[5], 'entries', ARGV[1], 'agent', ARGV[6], 'context_id', ARGV[7],
  'parent_run_id', ARGV[8], 'input_tokens', ARGV[10], 'output_tokens', ARGV[11],
  'cached_input_tokens', ARGV[12], 'reasoning_tokens', ARGV[13])
if ARGV[9] == '' then redis.call('HDEL', KEYS[2], 'price') else
  redis.call('HSET', KEYS[2], 'price', ARGV[9]) end
for k = 3, #KEYS do redis.call('ZADD', KEYS[k], ARGV[3], ARGV[2]) end
local ttl = tonumber(ARGV[14])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return 'ok'
";

/// `text` with the glob characters of `SCAN … MATCH` escaped.
fn glob_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

impl RedisStore {
    /// Runs journaled before the agent, session and state indexes existed are added to them
    /// once, and get their input and answer from their journals' first and last entries (a
    /// marker key records that it was done, unless there were no runs; it goes with the
    /// store's last run; adding twice is harmless).
    pub(super) async fn index_older_runs(&self) -> Result<(), StoreError> {
        const VERSION: &str = "3";
        let marker = self.indexed_marker();
        let done: Option<String> = ::redis::cmd("GET")
            .arg(&marker)
            .query_async(&mut self.conn())
            .await
            .map_err(backend)?;
        if done.as_deref() == Some(VERSION) {
            return Ok(());
        }
        let mut offset = 0usize;
        loop {
            let page: Vec<(String, u64)> = ::redis::cmd("ZRANGE")
                .arg(self.key(&["runs"]))
                .arg(offset)
                .arg(offset + 999)
                .arg("WITHSCORES")
                .query_async(&mut self.conn())
                .await
                .map_err(backend)?;
            if page.is_empty() {
                break;
            }
            offset += page.len();
            let mut read = ::redis::pipe();
            for (id, _) in &page {
                read.cmd("HMGET").arg(self.key(&["run:", id, ":meta"])).arg(&[
                    "agent",
                    "context_id",
                    "state",
                    "input",
                    "answer",
                ]);
                read.cmd("LINDEX").arg(self.key(&["run:", id, ":journal"])).arg(0);
                read.cmd("LINDEX").arg(self.key(&["run:", id, ":journal"])).arg(-1);
            }
            type Read = (Vec<Option<String>>, Option<Vec<u8>>, Option<Vec<u8>>);
            let read: Vec<Read> = read.query_async(&mut self.conn()).await.map_err(backend)?;
            let mut write = ::redis::pipe();
            for ((id, created), (fields, first, last)) in page.iter().zip(read) {
                let field = |i: usize| fields.get(i).cloned().flatten();
                let name = |i: usize| field(i).and_then(|json| from_json(&json, "name").ok());
                for index in self.indexes(&None, &name(0), &name(1)) {
                    write.cmd("ZADD").arg(index).arg(*created).arg(id).ignore();
                }
                if let Some(state) = field(2) {
                    let index = self.key(&["runs:state:", &state]);
                    write.cmd("ZADD").arg(index).arg(*created).arg(id).ignore();
                }
                let meta = self.key(&["run:", id, ":meta"]);
                let texts = older_texts(id, first.as_deref(), last.as_deref());
                for (i, (name, text)) in
                    [("input", texts.0), ("answer", texts.1)].into_iter().enumerate()
                {
                    if let (None, Some(text)) = (field(3 + i), text) {
                        write.cmd("HSET").arg(&meta).arg(name).arg(text).ignore();
                    }
                }
            }
            if !write.is_empty() {
                write.query_async::<()>(&mut self.conn()).await.map_err(backend)?;
            }
        }
        if offset == 0 {
            // Nothing to index (a new store): its runs are indexed as they are appended.
            return Ok(());
        }
        ::redis::cmd("SET")
            .arg(&marker)
            .arg(VERSION)
            .query_async::<()>(&mut self.conn())
            .await
            .map_err(backend)?;
        Ok(())
    }

    pub(super) async fn remove(
        &self,
        run_ids: &[String],
        rule: &RemovalRule,
    ) -> Result<Vec<Removal>, StoreError> {
        if run_ids.is_empty() {
            return Ok(Vec::new());
        }
        let states: Vec<&str> = rule.states.iter().map(|s| s.as_str()).collect();
        let mut invocation = self.scripts.remove.prepare_invoke();
        invocation
            .arg(&self.options.prefix)
            .arg(states.join(","))
            .arg(rule.updated_before_ms.map(|t| t.to_string()).unwrap_or_default());
        for id in run_ids {
            invocation.arg(id);
        }
        let replies: Vec<Vec<String>> = self.invoke(&invocation).await?;
        if replies.len() != run_ids.len() {
            return Err(corrupt(&format!("the remove script answered {replies:?}")));
        }
        replies.into_iter().map(removal).collect()
    }

    /// The run ids of the keys `run:{id}:{suffix}` one `SCAN` step finds from `cursor`.
    async fn scan_runs(
        &self,
        cursor: u64,
        suffix: &str,
        count: usize,
    ) -> Result<(u64, Vec<String>), StoreError> {
        let start = self.key(&["run:"]);
        let pattern = format!("{}*:{suffix}", glob_escape(&start));
        let (next, keys): (u64, Vec<String>) = ::redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count.max(10))
            .query_async(&mut self.conn())
            .await
            .map_err(backend)?;
        let end = format!(":{suffix}");
        let ids = keys
            .iter()
            .filter_map(|k| k.strip_prefix(start.as_str())?.strip_suffix(end.as_str()))
            .map(str::to_owned)
            .collect();
        Ok((next, ids))
    }

    pub(super) async fn rows(
        &self,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<RegistryPage, StoreError> {
        let cursor = match cursor {
            None => 0,
            Some(text) => text
                .parse()
                .map_err(|_| StoreError::Invalid(format!("'{text}' is not a Redis SCAN cursor")))?,
        };
        let (next, ids) = self.scan_runs(cursor, "meta", limit).await?;
        let mut pipe = ::redis::pipe();
        for id in &ids {
            pipe.cmd("HGETALL").arg(self.key(&["run:", id, ":meta"]));
            pipe.cmd("HGETALL").arg(self.key(&["run:", id, ":lease"]));
            pipe.cmd("LLEN").arg(self.key(&["run:", id, ":journal"]));
        }
        let read: Vec<(Hash, Hash, u64)> = if ids.is_empty() {
            Vec::new()
        } else {
            pipe.query_async(&mut self.conn()).await.map_err(backend)?
        };
        let mut rows = Vec::with_capacity(ids.len());
        for (id, (meta, lease, length)) in ids.iter().zip(read) {
            if !meta.is_empty() {
                rows.push(RegistryRow::new(summary_of(id, &meta, &lease)?, length));
            }
        }
        Ok(RegistryPage::new(rows, (next != 0).then(|| next.to_string())))
    }

    pub(super) async fn orphans(&self) -> Result<Vec<OrphanJournal>, StoreError> {
        let (mut cursor, mut orphans) = (0u64, Vec::new());
        loop {
            let (next, ids) = self.scan_runs(cursor, "journal", 1_000).await?;
            if !ids.is_empty() {
                let mut pipe = ::redis::pipe();
                for id in &ids {
                    pipe.cmd("EXISTS").arg(self.key(&["run:", id, ":meta"]));
                    pipe.cmd("LLEN").arg(self.key(&["run:", id, ":journal"]));
                }
                let read: Vec<(i64, u64)> =
                    pipe.query_async(&mut self.conn()).await.map_err(backend)?;
                for (id, (exists, length)) in ids.iter().zip(read) {
                    if exists == 0 && length > 0 {
                        orphans.push(OrphanJournal::new(Some(id.clone()), id.clone(), length));
                    }
                }
            }
            if next == 0 {
                return Ok(orphans);
            }
            cursor = next;
        }
    }

    /// The run's meta hash again from its journal (`false`: no journal).
    pub(super) async fn rebuild(&self, run_id: &str) -> Result<bool, StoreError> {
        let raw: Vec<Vec<u8>> = ::redis::cmd("LRANGE")
            .arg(self.key(&["run:", run_id, ":journal"]))
            .arg(0)
            .arg(-1)
            .query_async(&mut self.conn())
            .await
            .map_err(backend)?;
        let entries = raw
            .iter()
            .map(|json| decode_entry_json(run_id, json))
            .collect::<Result<Vec<JournalEntry>, _>>()?;
        let Some(update) = SummaryUpdate::of(&entries) else { return Ok(false) };
        let started = update.started.clone().unwrap_or_default();
        let mut invocation = self.scripts.rebuild.prepare_invoke();
        invocation
            .key(self.key(&["run:", run_id, ":journal"]))
            .key(self.key(&["run:", run_id, ":meta"]))
            .key(self.key(&["runs"]));
        for index in self.indexes(&started.parent_run_id, &started.agent, &started.context_id) {
            invocation.key(index);
        }
        let usage = update.usage;
        invocation
            .arg(entries.len())
            .arg(run_id)
            .arg(update.first_ms)
            .arg(update.last_ms)
            .arg(update.state.as_str())
            .arg(optional_name(&started.agent)?)
            .arg(optional_name(&started.context_id)?)
            .arg(optional_name(&started.parent_run_id)?)
            .arg(started.price.as_ref().map(crate::store::to_json).transpose()?.unwrap_or_default())
            .arg(usage.input)
            .arg(usage.output)
            .arg(usage.cached_input)
            .arg(usage.reasoning)
            .arg(self.ttl_ms())
            .arg(update.origin_run_id.as_deref().unwrap_or_default())
            .arg(update.input.as_deref().unwrap_or_default())
            .arg(update.answer.as_deref().unwrap_or_default());
        let reply: String = self.invoke(&invocation).await?;
        match reply.as_str() {
            "ok" => Ok(true),
            _ => Err(StoreError::Conflict {
                run_id: run_id.to_owned(),
                expected: entries.len() as u64,
                actual: self.next_seq_raw(run_id).await?,
            }),
        }
    }

    async fn next_seq_raw(&self, run_id: &str) -> Result<u64, StoreError> {
        ::redis::cmd("LLEN")
            .arg(self.key(&["run:", run_id, ":journal"]))
            .query_async(&mut self.conn())
            .await
            .map_err(backend)
    }
}

/// One answer of the remove script.
fn removal(reply: Vec<String>) -> Result<Removal, StoreError> {
    let mut parts = reply.into_iter();
    match parts.next().as_deref() {
        Some("removed") => Ok(Removal::Removed { run_ids: parts.collect() }),
        Some("not_found") => Ok(Removal::NotFound),
        Some("not_matching") => Ok(Removal::NotMatching),
        Some("lease_live") => {
            let (run_id, owner) = (parts.next().unwrap_or_default(), parts.next());
            let expires_in_ms = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            Ok(Removal::LeaseLive { run_id, owner: owner.unwrap_or_default(), expires_in_ms })
        }
        other => Err(corrupt(&format!("unexpected answer of the remove script: {other:?}"))),
    }
}

/// The input and answer of a run journaled before the registry kept them: its `run_started`
/// (the first entry) and its `run_finished` when that is the last entry. An entry that does
/// not read gives nothing (`RunService::check` reports the journal).
fn older_texts(
    run_id: &str,
    first: Option<&[u8]>,
    last: Option<&[u8]>,
) -> (Option<String>, Option<String>) {
    let event = |json: Option<&[u8]>| json.and_then(|j| decode_entry_json(run_id, j).ok());
    let (first, last) = (event(first), event(last));
    let input = match first.as_ref().map(|entry| &*entry.event) {
        Some(Event::RunStarted { input, .. }) => input_preview(input),
        _ => None,
    };
    let answer = match last.as_ref().map(|entry| &*entry.event) {
        Some(Event::RunFinished { outcome }) => {
            Some(preview(&outcome.answer)).filter(|text| !text.is_empty())
        }
        _ => None,
    };
    (input, answer)
}
