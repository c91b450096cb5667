// The agentloop runs page: plain JavaScript, no build step, no dependency. Every piece of
// text that comes from the server (model output, tool results, names) is set with
// textContent or as an attribute value, never parsed as HTML.
'use strict';

const TOKEN_KEY = 'agentloop.ui.token';
const TRIM = 400; // characters of a long text shown before "show all"
const PAGE = 50;
const SLICE_MS = 10; // of a long timeline rendered between two chances for the page to respond

const $ = (id) => document.getElementById(id);

// ---------- DOM helpers ----------

/** An element with a class and children (strings become text nodes). */
function el(tag, className, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return node;
}

/** Text that may be long: the first TRIM characters and a "show all" button. */
function longText(text, tag = 'pre') {
  const box = el(tag, 'text');
  const full = String(text);
  if (full.length <= TRIM) {
    box.textContent = full;
    return box;
  }
  box.textContent = full.slice(0, TRIM) + '…';
  const wrap = el('div', 'long', box);
  const button = el('button', 'quiet show-all', `show all (${full.length} characters)`);
  button.type = 'button';
  button.addEventListener('click', () => {
    box.textContent = full;
    button.remove();
  });
  wrap.append(button);
  return wrap;
}

function json(value) {
  return JSON.stringify(value, null, 2);
}

function time(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A duration in ms, readable. */
function seconds(ms) {
  if (!(ms >= 0)) return '';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 60000)} min`;
}

function short(id) {
  return id && id.length > 14 ? id.slice(0, 8) + '…' + id.slice(-4) : (id || '');
}

function banner(message) {
  const node = $('banner');
  node.textContent = message || '';
  node.hidden = !message;
}

// ---------- the API ----------

class AuthNeeded extends Error {}

let authHeader = 'Authorization';
let authScheme = 'bearer';

function credentials() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) return {};
  return authScheme === 'bearer' ? { Authorization: `Bearer ${token}` } : { [authHeader]: token };
}

/** Asks for a token when the server answers 401; rejects with AuthNeeded. */
async function refused(response) {
  try {
    const body = await response.json();
    if (body && body.error && body.error.scheme) {
      authScheme = body.error.scheme;
      authHeader = body.error.header || 'Authorization';
    }
  } catch (_) { /* no body */ }
  sessionStorage.removeItem(TOKEN_KEY);
  showAuth();
  throw new AuthNeeded('credentials required');
}

async function api(path, signal) {
  const response = await fetch(path, { headers: { Accept: 'application/json', ...credentials() }, signal });
  if (response.status === 401) await refused(response);
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  if (!response.ok) {
    const message = body && body.error ? body.error.message : response.statusText;
    throw new Error(`${response.status}: ${message}`);
  }
  return body;
}

const VIEWS = ['list-view', 'run-view', 'chat-view', 'compare-view'];

/** Shows one view; leaving a run stops following it. */
function showView(id) {
  if (id !== 'run-view') {
    stopLive();
    run.id = null;
  }
  for (const view of VIEWS) {
    const node = $(view);
    if (node) node.hidden = view !== id;
  }
}

function showAuth() {
  $('auth').hidden = false;
  for (const view of VIEWS) {
    const node = $(view);
    if (node) node.hidden = true;
  }
  $('auth-token').focus();
}

// ---------- the runs list ----------

const list = { next: null, shown: 0, pages: 0, timer: null };
const LIST_REFRESH_MS = 3000; // the first page of the list is read again this often

/** A datetime-local input's value as ms since the epoch ('' when empty). */
function inputMs(id) {
  const value = $(id).value;
  const ms = value ? new Date(value).getTime() : NaN;
  return Number.isFinite(ms) ? String(ms) : '';
}

/** ms since the epoch as a datetime-local input's value (local time). */
function msInput(ms) {
  const n = Number(ms);
  if (!ms || !Number.isFinite(n)) return '';
  const d = new Date(n - new Date(n).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 16);
}

function filters() {
  const query = new URLSearchParams();
  const named = [['q', 'f-q'], ['state', 'f-state'], ['agent', 'f-agent'], ['session', 'f-session']];
  for (const [name, id] of named) {
    const value = $(id).value.trim();
    if (value) query.set(name, value);
  }
  for (const [name, id] of [['since', 'f-since'], ['until', 'f-until']]) {
    const ms = inputMs(id);
    if (ms) query.set(name, ms);
  }
  return query;
}

/** Reads the first page again every few seconds while it is the only one shown (running
 * rows change, new runs appear); paused while the tab is hidden. */
function scheduleListRefresh() {
  clearTimeout(list.timer);
  list.timer = setTimeout(async () => {
    if ($('list-view').hidden || list.pages > 1) return;
    if (!document.hidden) {
      try { await loadRuns(false); } catch (_) { /* the next try */ }
    }
    scheduleListRefresh();
  }, LIST_REFRESH_MS);
}

function stateBadge(state) {
  return el('span', `state state-${state}`, state.replace('_', ' '));
}

function runRow(run) {
  const link = el('a', 'run-link', short(run.run_id));
  link.href = `#/runs/${encodeURIComponent(run.run_id)}`;
  link.title = run.run_id;
  const tokens = run.usage ? (run.usage.input || 0) + (run.usage.output || 0) : 0;
  const asked = el('td', 'texts',
    el('div', 'asked', run.input || '—'), el('div', 'answered muted', run.answer || ''));
  asked.title = [run.input, run.answer].filter(Boolean).join('\n→ ');
  const cells = [
    el('td', null, link),
    asked,
    el('td', null, stateBadge(run.state)),
    el('td', null, run.agent || '—'),
    el('td', 'mono', short(run.session) || '—'),
    el('td', null, time(run.created_ms)),
    el('td', 'num', seconds(run.updated_ms - run.created_ms)),
    el('td', 'mono', short(run.owner) || '—'),
    el('td', 'num', String(run.entries)),
    el('td', 'num', String(tokens)),
    el('td', 'num', run.cost_usd ? `$${run.cost_usd.toFixed(4)}` : '—'),
  ];
  cells[4].title = run.session || '';
  cells[6].title = `last change ${time(run.updated_ms)}`;
  cells[7].title = run.owner ? `executed by ${run.owner}` : '';
  const row = el('tr', null, ...cells);
  row.dataset.runId = run.run_id;
  row.addEventListener('click', (event) => {
    if (event.target.tagName !== 'A') location.hash = link.getAttribute('href');
  });
  return row;
}

async function loadRuns(more) {
  const query = filters();
  query.set('limit', String(PAGE));
  if (more && list.next) query.set('after', list.next);
  const page = await api(`/ui/api/runs?${query}`);
  const body = $('runs-body');
  const rows = page.runs.map(runRow);
  if (!more) {
    body.replaceChildren(...rows);
    list.shown = 0;
    list.pages = 1;
  } else {
    body.append(...rows);
    list.pages += 1;
  }
  list.shown += page.runs.length;
  list.next = page.next;
  $('more').hidden = !page.next;
  $('runs-empty').hidden = list.shown > 0;
  $('runs-count').textContent = list.shown ? `${list.shown} run${list.shown === 1 ? '' : 's'} shown` : '';
}

function readFiltersFromHash(query) {
  $('f-q').value = query.get('q') || '';
  $('f-state').value = query.get('state') || '';
  $('f-agent').value = query.get('agent') || '';
  $('f-session').value = query.get('session') || '';
  $('f-since').value = msInput(query.get('since'));
  $('f-until').value = msInput(query.get('until'));
}

// ---------- one run ----------

const run = { id: null, abort: null, lastSeq: -1, start: 0, group: null, ended: false, streaming: null, shown: 0 };

const ENDING = new Set(['run_finished', 'run_failed', 'run_cancelled', 'run_suspended']);

/** What an entry is called on the page (its `kind` is shown beside it). */
const TITLES = {
  run_started: 'Run started',
  iteration_started: 'Iteration started',
  model_requested: 'Asked the model',
  model_responded: 'Model answered',
  model_failed: 'Model call failed',
  tool_started: 'Tool called',
  tool_completed: 'Tool returned',
  tool_failed: 'Tool failed',
  tool_timed_out: 'Tool timed out',
  approval_requested: 'Waits for approval',
  approval_decided: 'Approval decided',
  input_provided: 'Answer given',
  run_forked: 'Forked',
  limit_reached: 'Limit reached',
  attention_needed: 'Needs an operator',
  stall_detected: 'Stall detected',
  paused: 'Paused',
  resumed: 'Resumed',
  continuation_requested: 'Asked to go on',
  compaction_started: 'Compacting the context',
  compaction_completed: 'Context compacted',
  compaction_failed: 'Compaction failed',
  iteration_completed: 'Iteration done',
  run_finished: 'Run finished',
  run_suspended: 'Run suspended',
  run_failed: 'Run failed',
  run_cancelled: 'Run cancelled',
};

/** Entries that say little: one quiet line each. */
const QUIET = new Set(['model_requested', 'iteration_completed']);

function messageText(message) {
  if (!message || !Array.isArray(message.content)) return '';
  return message.content.filter((p) => p.type === 'text').map((p) => p.text).join('');
}

/** A tool result's content: `{text}`, `{json}` or `{stored}` (kept as an artifact). */
function resultText(result) {
  const content = result && result.content;
  if (!content) return '';
  if (typeof content.text === 'string') return content.text;
  if (content.json !== undefined) return json(content.json);
  if (content.stored) return `(kept as artifact ${content.stored.artifact}, ${content.stored.bytes} bytes)`;
  return json(content);
}

function usageText(usage) {
  if (!usage) return '';
  return `${usage.input || 0} in / ${usage.output || 0} out tokens`;
}

function labelled(label, ...children) {
  const field = el('div', 'field', el('span', 'label', label), ...children);
  field.dataset.field = label;
  return field;
}

/** The body of one journal entry. */
function entryBody(kind, e) {
  switch (kind) {
    case 'run_started': {
      const input = (e.input || []).map(messageText).filter(Boolean).join('\n\n');
      return [labelled('input', longText(input || '(no text)')),
        labelled('agent', el('span', null, (e.config && e.config.agent) || '—'))];
    }
    case 'model_requested': {
      const purpose = e.purpose && e.purpose.kind;
      return purpose && purpose !== 'iteration' ? [el('span', 'muted', `for ${purpose.replace(/_/g, ' ')}`)] : [];
    }
    case 'model_responded': {
      const parts = [];
      const text = messageText(e.message);
      if (text) parts.push(longText(text));
      const calls = (e.message && e.message.content || []).filter((p) => p.type === 'tool_call');
      for (const call of calls) parts.push(el('div', null, 'calls the tool ', el('strong', null, call.name)));
      const model = e.response_model ? ` · ${e.response_model}` : '';
      parts.push(el('div', 'meta', `${e.duration_ms} ms · ${usageText(e.usage)} · ${e.finish_reason}${model}`));
      return parts;
    }
    case 'model_failed':
      return [longText(typeof e.error === 'string' ? e.error : json(e.error))];
    case 'tool_started':
      return [labelled('tool', el('strong', null, e.call ? e.call.name : '?')),
        labelled('arguments', longText(json(e.arguments)))];
    case 'tool_completed':
    case 'tool_failed':
    case 'tool_timed_out': {
      const parts = [labelled('tool', el('strong', null, e.name || '?'))];
      if (e.error !== undefined) parts.push(labelled('error', longText(typeof e.error === 'string' ? e.error : json(e.error))));
      parts.push(labelled('result', longText(resultText(e.result))));
      const took = kind === 'tool_timed_out' ? `timed out after ${e.timeout_ms} ms` : `${e.duration_ms} ms`;
      parts.push(el('div', 'meta', took));
      if (e.remote && typeof remoteBox === 'function') parts.push(remoteBox(e.remote)); // act.js
      return parts;
    }
    case 'approval_requested':
      return [labelled('waits for approval', el('strong', null, e.call ? e.call.name : '?')),
        labelled('arguments', longText(json(e.arguments)))];
    case 'input_provided':
      return [labelled('answer', longText(messageText(e.message)))];
    case 'approval_decided': {
      const d = e.decision || {};
      const parts = [labelled('call', el('span', 'mono', e.call_id || '?')),
        labelled('decision', el('strong', null, (d.kind || '?').replace(/_/g, ' ')))];
      if (e.by) parts.push(labelled('by', el('span', 'decided-by', e.by)));
      if (d.reason) parts.push(labelled('reason', longText(d.reason)));
      if (d.result !== undefined) parts.push(labelled('result', longText(typeof d.result === 'string' ? d.result : json(d.result))));
      return parts;
    }
    case 'limit_reached':
      return [el('span', null, typeof e.limit === 'string' ? e.limit : JSON.stringify(e.limit))];
    case 'attention_needed':
      return [labelled('call', el('span', 'mono', e.call_id || '?')), labelled('why', longText(e.reason || ''))];
    case 'stall_detected':
      return [el('span', null, `${e.tool} called ${e.count} times alike (${e.action})`)];
    case 'paused':
      return [el('span', null, e.reason || '')];
    case 'continuation_requested':
      return [longText(e.prompt || '')];
    case 'compaction_started':
      return [el('span', null, `${e.tokens_before} tokens before; the first ${e.cut} messages are summarised`)];
    case 'compaction_completed':
      return [el('div', 'meta', `${e.tokens_before} → ${e.tokens_after} tokens`), labelled('summary', longText(e.summary || ''))];
    case 'compaction_failed':
      return [longText(e.error || '')];
    case 'run_forked': {
      const origin = el('a', null, e.origin_run_id || '?');
      origin.href = `#/runs/${encodeURIComponent(e.origin_run_id || '')}`;
      const parts = [labelled('from', origin, el('span', 'muted', ` at #${e.at_seq}`))];
      const edit = e.edit || {};
      if (edit.kind === 'tool_result') {
        parts.push(labelled(`result of ${edit.call_id}`, longText(typeof edit.result === 'string' ? edit.result : json(edit.result))));
      } else if (edit.kind === 'user_message') {
        parts.push(labelled('user message', longText(edit.text || '')));
      } else if (edit.kind === 'model_answer') {
        parts.push(labelled('answer instead', longText(edit.text || '')));
      }
      return parts;
    }
    case 'iteration_completed':
      return [el('span', 'muted', `done in ${e.duration_ms} ms`)];
    case 'run_finished':
    case 'run_suspended': {
      const o = e.outcome || {};
      return [labelled('answer', longText(o.answer || '(empty)')),
        el('div', 'meta', `${o.iterations} iteration(s) · ${usageText(o.usage)}`)];
    }
    case 'run_failed':
      return [longText(typeof e.error === 'string' ? e.error : json(e.error))];
    case 'run_cancelled':
      return [el('span', null, e.reason || '')];
    default:
      return [];
  }
}

/** The event's JSON, built when first opened (a long timeline has thousands). */
function details(event) {
  const more = el('details', 'raw', el('summary', null, 'event JSON'));
  more.addEventListener('toggle', () => {
    if (more.open && more.childElementCount === 1) more.append(longText(json(event)));
  });
  return more;
}

function newGroup(title) {
  const group = el('section', 'group', el('h3', null, title));
  $('timeline').append(group);
  run.group = group;
  return group;
}

/** Text the model streams (a `delta` event): shown as it comes, in a box the model's journaled
 * answer replaces. */
function showDelta(delta) {
  if (delta.kind !== 'text' || !delta.delta) return;
  if (!run.streaming) {
    if (!run.group) newGroup('Start');
    const head = el('div', 'entry-head', el('span', 'kind', 'Model is answering…'));
    run.streaming = el('article', 'entry kind-streaming', head, el('pre', 'text'));
    run.group.append(run.streaming);
  }
  run.streaming.querySelector('pre').textContent += delta.delta;
}

function endStreaming() {
  if (run.streaming) run.streaming.remove();
  run.streaming = null;
}

function addEntry(entry) {
  if (entry.seq <= run.lastSeq) return; // seen (a resumed stream starts after it anyway)
  run.lastSeq = entry.seq;
  if (entry.kind === 'model_responded' || entry.kind === 'model_failed' || ENDING.has(entry.kind)) endStreaming();
  if (!run.start) run.start = entry.at_ms;
  const e = entry.event || {};
  if (entry.kind === 'iteration_started') {
    newGroup(`Iteration ${e.iteration}`);
    return;
  }
  if (ENDING.has(entry.kind)) newGroup('End');
  if (!run.group) newGroup('Start');
  const at = `+${((entry.at_ms - run.start) / 1000).toFixed(3)} s`;
  const title = TITLES[entry.kind] || entry.kind.replace(/_/g, ' ');
  const quiet = QUIET.has(entry.kind);
  const head = el('div', 'entry-head', el('span', 'kind', title), el('span', 'at', at),
    el('span', 'seq', `#${entry.seq} ${entry.kind}`));
  const card = el('article', `entry kind-${entry.kind}${quiet ? ' quiet-entry' : ''}`, head);
  card.dataset.seq = String(entry.seq);
  if (e.result && e.result.call_id) card.dataset.callId = e.result.call_id;
  else if (e.call && e.call.id) card.dataset.callId = e.call.id;
  for (const part of entryBody(entry.kind, e)) (quiet ? head : card).append(part);
  if (!quiet) card.append(details(e));
  run.group.append(card);
  if (typeof decorate === 'function') decorate(entry, card); // act.js
  liveFacts(entry);
  if (ENDING.has(entry.kind)) setState(stateAfter(entry));
}

/** The facts that grow with the journal, as entries arrive. */
function liveFacts(entry) {
  const entries = document.querySelector('#run-facts [data-fact=entries]');
  if (entries && Number(entries.textContent) < entry.seq + 1) entries.textContent = String(entry.seq + 1);
  const took = document.querySelector('#run-facts [data-fact=time]');
  if (took) took.textContent = `${((entry.at_ms - run.start) / 1000).toFixed(3)} s from the first to the last entry`;
}

function stateAfter(entry) {
  const e = entry.event || {};
  switch (entry.kind) {
    case 'run_finished': return e.outcome && e.outcome.stop_reason && e.outcome.stop_reason.kind === 'awaiting_input' ? 'suspended' : 'finished';
    case 'run_failed': return 'failed';
    case 'run_cancelled': return 'cancelled';
    default: return 'suspended';
  }
}

function setState(state) {
  const badge = $('run-state');
  badge.className = `state state-${state}`;
  badge.textContent = state.replace('_', ' ');
  if (typeof onRunState === 'function') onRunState(state); // act.js
}

function facts(summary, entries) {
  const dl = $('run-facts');
  dl.replaceChildren();
  const add = (name, value) => {
    if (value === null || value === undefined || value === '') return;
    const dd = el('dd', null, String(value));
    dd.dataset.fact = name;
    dl.append(el('dt', null, name), dd);
  };
  const started = entries.length && entries[0].kind === 'run_started' ? entries[0].event : null;
  add('agent', summary ? summary.agent : started && started.config && started.config.agent);
  add('session', summary && summary.session);
  add('started by', summary && summary.parent);
  add('started', time(summary ? summary.created_ms : entries.length && entries[0].at_ms));
  add('last change', summary && time(summary.updated_ms));
  if (summary && summary.usage) add('tokens', usageText(summary.usage));
  if (summary && summary.cost_usd) add('cost', `$${summary.cost_usd.toFixed(6)}`);
  const last = entries[entries.length - 1];
  if (last) {
    const seconds = ((last.at_ms - entries[0].at_ms) / 1000).toFixed(3);
    add('time', `${seconds} s from the first to the last entry`);
  }
  add('entries', summary ? summary.entries : entries.length);
}

/** Lets the page handle input and paint: a message to itself. (A timer would wait at least
 * 4 ms once nested; `scheduler.yield()` resumes ahead of other tasks, which then waited
 * hundreds of milliseconds in scripts/ui/bench.mjs.) */
function yieldToPage() {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}

/** Adds a journal's entries SLICE_MS at a time, yielding between slices, so that a long run's
 * timeline neither freezes the page nor holds back the first entries. False when the page
 * moved on (`current()` turned false) before the last. */
async function addEntries(entries, current) {
  let next = 0;
  while (next < entries.length) {
    const until = performance.now() + SLICE_MS;
    do addEntry(entries[next++]); while (next < entries.length && performance.now() < until);
    if (next < entries.length) {
      await yieldToPage();
      if (!current()) return false;
    }
  }
  return true;
}

function stopLive() {
  if (run.abort) run.abort.abort();
  run.abort = null;
  $('run-live').hidden = true;
}

async function openRun(id) {
  stopLive();
  const shown = run.shown + 1;
  Object.assign(run, { id, lastSeq: -1, start: 0, group: null, ended: false, streaming: null, shown });
  $('run-title').textContent = `Run ${id}`;
  $('timeline').replaceChildren();
  $('run-facts').replaceChildren();
  if (typeof resetActing === 'function') resetActing(); // act.js
  const current = () => run.shown === shown && run.id === id;
  const data = await api(`/ui/api/runs/${encodeURIComponent(id)}`);
  if (!current()) return;
  facts(data.run, data.entries);
  if (typeof onRunLoaded === 'function') onRunLoaded(data); // act.js
  setState(data.run ? data.run.state : 'running');
  if (!await addEntries(data.entries, current)) return;
  if (typeof onRunShown === 'function') onRunShown(data); // act.js
  const last = data.entries[data.entries.length - 1];
  if (!last || !ENDING.has(last.kind)) follow(id);
}

/** Follows a running run over SSE (fetch streaming, so the token can be sent), resuming
 * after the last entry shown (Last-Event-ID) when the connection drops. */
async function follow(id) {
  const abort = new AbortController();
  run.abort = abort;
  $('run-live').hidden = false;
  let delay = 500;
  while (run.id === id && !abort.signal.aborted) {
    try {
      const headers = { Accept: 'text/event-stream', ...credentials() };
      if (run.lastSeq >= 0) headers['Last-Event-ID'] = String(run.lastSeq);
      const response = await fetch(`/ui/api/runs/${encodeURIComponent(id)}/events`, { headers, signal: abort.signal });
      if (response.status === 401) await refused(response);
      if (!response.ok) throw new Error(`${response.status}`);
      const ended = await readEvents(response.body, (name, data) => {
        if (run.id !== id) return;
        if (name === 'message') addEntry(JSON.parse(data));
        else if (name === 'delta') showDelta(JSON.parse(data));
      });
      if (ended) break;
    } catch (error) {
      if (abort.signal.aborted || error instanceof AuthNeeded) return;
      banner(`Live updates interrupted (${error.message}); reconnecting…`);
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 5000);
  }
  if (run.abort === abort) run.abort = null; // no longer followed (act.js follows again)
  if (run.id !== id || abort.signal.aborted) return;
  banner('');
  $('run-live').hidden = true;
  try {
    const data = await api(`/ui/api/runs/${encodeURIComponent(id)}`);
    if (run.id === id) {
      facts(data.run, data.entries);
      if (typeof onRunLoaded === 'function') onRunLoaded(data); // act.js
      if (typeof onRunShown === 'function') onRunShown(data); // act.js
      if (data.run) setState(data.run.state);
    }
  } catch (_) { /* the timeline is complete; the facts stay as they were */ }
}

/** Reads an SSE body, calling onEvent(name, data) per event; true when the server sent `end`. */
async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return false;
    buffer += value.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) name = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (!data.length) continue;
      if (name === 'end') return true;
      onEvent(name, data.join('\n'));
    }
  }
}

// ---------- navigation ----------

async function route() {
  banner('');
  $('auth').hidden = true;
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path, search] = hash.split('?');
  try {
    if (path.startsWith('/runs/')) {
      showView('run-view');
      await openRun(decodeURIComponent(path.slice(6)));
    } else if (typeof routeMore === 'function' && await routeMore(path, new URLSearchParams(search || ''))) {
      // act.js: the chat and compare views
    } else {
      showView('list-view');
      readFiltersFromHash(new URLSearchParams(search || ''));
      await loadRuns(false);
      scheduleListRefresh();
    }
  } catch (error) {
    if (!(error instanceof AuthNeeded)) banner(`Could not load: ${error.message}`);
  }
}

function start() {
  $('filters').addEventListener('submit', (event) => {
    event.preventDefault();
    const query = filters().toString();
    const target = `#/${query ? '?' + query : ''}`;
    if (location.hash === target) route(); else location.hash = target;
  });
  $('f-clear').addEventListener('click', () => {
    for (const id of ['f-q', 'f-state', 'f-agent', 'f-session', 'f-since', 'f-until']) $(id).value = '';
    if (location.hash === '#/') route(); else location.hash = '#/';
  });
  $('more').addEventListener('click', () => {
    loadRuns(true).catch((error) => {
      if (!(error instanceof AuthNeeded)) banner(`Could not load: ${error.message}`);
    });
  });
  $('auth-form').addEventListener('submit', (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $('auth-token').value.trim());
    $('auth-token').value = '';
    route();
  });
  if (typeof startActions === 'function') startActions(); // act.js
  window.addEventListener('hashchange', route);
  route();
}

// After every deferred script (act.js too) has run.
document.addEventListener('DOMContentLoaded', start);
