// The agentloop runs page, its actions: chat with an agent, answer a question, approve or
// reject a deferred call, pause / resume / cancel a run, fork it at an entry, and compare two
// runs. Loaded after app.js (whose helpers it uses). Every action is a POST with a JSON body;
// text from the server is set with textContent only.
'use strict';

/** A POST of JSON to the API; the answer's body, or an Error with the server's message. */
async function post(path, body) {
  const response = await fetch(path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json', ...credentials() },
    body: JSON.stringify(body || {}),
  });
  if (response.status === 401) await refused(response);
  let data = null;
  try { data = await response.json(); } catch (_) { data = null; }
  if (!response.ok) {
    throw new Error(data && data.error ? data.error.message : `${response.status} ${response.statusText}`);
  }
  return data;
}

function button(text, className, onClick) {
  const node = el('button', className, text);
  node.type = 'button';
  node.addEventListener('click', onClick);
  return node;
}

/** Runs an action, showing its error in the banner (and its note, if the server gave one). */
async function act(what, action) {
  banner('');
  try {
    const answer = await action();
    if (answer && answer.note) banner(answer.note);
    return answer;
  } catch (error) {
    if (!(error instanceof AuthNeeded)) banner(`Could not ${what}: ${error.message}`);
    return null;
  }
}

const runPath = (id, action) => `/ui/api/runs/${encodeURIComponent(id)}/${action}`;

// ---------- on a run's page ----------

/** What the actions of the open run need: its summary, its waiting calls, its fork origin. */
const acting = { summary: null, waiting: new Map(), origin: null };

function onRunLoaded(data) {
  acting.summary = data.run;
  showRunActions();
  showTrace(data.entries);
  if (typeof drawWaterfall === 'function') drawWaterfall(data.entries); // waterfall.js
}

/** Called by app.js once every entry of a run's journal is on the page. */
function onRunShown() {
  loadChildren(run.id);
  loadForks(run.id);
}

/** The runs forked from the open run, among its facts: each linked, with a link to compare
 * it with this one. */
async function loadForks(id) {
  let page;
  try {
    page = await api(`/ui/api/runs?origin=${encodeURIComponent(id)}&limit=50`);
  } catch (_) {
    return;
  }
  if (run.id !== id || !page.runs.length) return;
  const facts = $('run-facts');
  const old = facts.querySelector('[data-fact=forks]');
  if (old) { old.previousSibling.remove(); old.remove(); }
  const dd = el('dd', 'forks');
  dd.dataset.fact = 'forks';
  for (const fork of page.runs) {
    const link = el('a', 'fork-link', short(fork.run_id));
    link.href = `#/runs/${encodeURIComponent(fork.run_id)}`;
    link.title = fork.run_id;
    const compare = el('a', 'muted', 'compare');
    compare.href = `#/compare/${encodeURIComponent(id)}/${encodeURIComponent(fork.run_id)}`;
    dd.append(el('span', null, link, ' (', compare, ') '));
  }
  if (page.next) dd.append(el('span', 'muted', 'and more'));
  facts.append(el('dt', null, `forks (${page.runs.length}${page.next ? '+' : ''})`), dd);
}

/** What the server offers (its agents, the link to a trace), read once. */
let served = null;
async function servedInfo() {
  if (!served) served = await api('/ui/api/agents');
  return served;
}

/** The run's trace id among its facts (from its journaled W3C traceparent), linked to the
 * tracing backend when the server has a link for it. */
async function showTrace(entries) {
  const started = entries.length && entries[0].kind === 'run_started' ? entries[0].event : null;
  const parent = started && started.config && started.config.trace_parent;
  const traceId = parent ? parent.split('-')[1] : null;
  if (!traceId || !/^[0-9a-f]{32}$/.test(traceId)) return;
  let template = null;
  try { template = (await servedInfo()).trace_url; } catch (_) { template = null; }
  const facts = $('run-facts');
  const old = facts.querySelector('[data-fact=trace]');
  if (old) { old.previousSibling.remove(); old.remove(); }
  let value = el('span', 'mono', traceId);
  if (template) {
    const url = template.replace('{trace_id}', traceId);
    if (/^https?:\/\//.test(url)) {
      value = el('a', 'mono', traceId);
      value.href = url;
      value.target = '_blank';
      value.rel = 'noopener noreferrer';
    }
  }
  const dd = el('dd', null, value);
  dd.dataset.fact = 'trace';
  facts.append(el('dt', null, 'trace'), dd);
}

// ---------- sub-agent runs ----------

/** The runs the open run started (sub-agents), each nested under the call that started it
 * (a sub-agent's run id is `{run}.{call}`), or else in a group of their own at the end. */
async function loadChildren(id) {
  let page;
  try {
    page = await api(`/ui/api/runs?parent=${encodeURIComponent(id)}&limit=500`);
  } catch (_) {
    return;
  }
  if (run.id !== id) return;
  for (const child of page.runs) {
    const old = document.querySelector(`.subrun[data-run-id="${CSS.escape(child.run_id)}"]`);
    const box = subrunBox(child);
    if (old) {
      old.replaceWith(box);
      continue;
    }
    const callId = child.run_id.startsWith(`${id}.`) ? child.run_id.slice(id.length + 1) : null;
    const card = callId &&
      document.querySelector(`#timeline .kind-tool_started[data-call-id="${CSS.escape(callId)}"]`);
    if (card) {
      card.append(box);
    } else {
      let group = $('subruns');
      if (!group) {
        group = el('section', 'group', el('h3', null, 'Sub-agent runs'));
        group.id = 'subruns';
        $('timeline').append(group);
      }
      group.append(box);
    }
  }
}

function subrunBox(child) {
  const link = el('a', null, `${child.agent || 'sub-agent'} · run ${short(child.run_id)}`);
  link.href = `#/runs/${encodeURIComponent(child.run_id)}`;
  link.title = child.run_id;
  const tokens = child.usage ? (child.usage.input || 0) + (child.usage.output || 0) : 0;
  const box = el('div', 'subrun',
    el('div', 'subrun-head', el('span', 'label', 'sub-agent run'), link, stateBadge(child.state),
      el('span', 'muted', `${child.entries} entries · ${tokens} tokens`)));
  box.dataset.runId = child.run_id;
  box.append(timelineDetails(child.run_id));
  return box;
}

/** A closed "its timeline" that loads run `id`'s entries, in brief, when opened. */
function timelineDetails(id) {
  const inner = el('details', 'subrun-timeline', el('summary', null, 'its timeline'));
  inner.addEventListener('toggle', async () => {
    if (!inner.open || inner.dataset.loaded) return;
    inner.dataset.loaded = 'yes';
    try {
      const data = await api(`/ui/api/runs/${encodeURIComponent(id)}`);
      const list = el('ol', 'subrun-entries');
      for (const entry of data.entries) {
        if (QUIET.has(entry.kind) || entry.kind === 'iteration_started') continue;
        const text = gist(entry);
        list.append(el('li', null, el('span', 'cmp-kind', `#${entry.seq} ${TITLES[entry.kind] || entry.kind}`),
          text ? el('span', null, ` ${text.length > 300 ? text.slice(0, 300) + '…' : text}`) : null));
      }
      inner.append(list);
    } catch (error) {
      if (!(error instanceof AuthNeeded)) inner.append(el('p', 'muted', `Could not load: ${error.message}`));
    }
  });
  return inner;
}

// ---------- remote agents ----------

/** The remote A2A agent's task a call ran as (journaled with the call's result): the agent,
 * the task and its state, linked to the page that shows it when its server said where. A task
 * of this same server opens here, with its timeline below; another server's opens in a new
 * tab (that page asks for its own token). */
function remoteBox(remote) {
  const name = `${remote.agent || 'remote agent'} · task ${short(remote.task_id)}`;
  let target = null;
  let here = false;
  if (remote.view_url && /^https?:\/\//i.test(remote.view_url)) {
    try {
      const url = new URL(remote.view_url);
      here = url.origin === location.origin && url.pathname.replace(/\/$/, '') === '/ui' && url.hash.startsWith('#/runs/');
      target = here ? url.hash : url.href;
      if (here) decodeURIComponent(url.hash); // a malformed id opens nothing
    } catch (_) {
      target = null;
      here = false;
    }
  }
  let head;
  if (target) {
    head = el('a', 'remote-link', here ? name : `${name} ↗`);
    head.href = target;
    if (!here) {
      head.target = '_blank';
      head.rel = 'noopener noreferrer';
    }
  } else {
    head = el('span', 'mono', name);
  }
  head.title = remote.task_id || '';
  const box = el('div', 'subrun remote',
    el('div', 'subrun-head', el('span', 'label', 'remote A2A agent'), head,
      remote.state ? el('span', `state state-a2a-${remote.state.replace(/[^a-z-]/g, '')}`, remote.state.replace(/-/g, ' ')) : null,
      el('span', 'muted mono', remote.url || '')));
  box.dataset.taskId = remote.task_id || '';
  if (here) box.append(timelineDetails(decodeURIComponent(target.slice('#/runs/'.length))));
  return box;
}

/** Called by app.js for each entry shown: adds what one can do at that entry. */
function decorate(entry, card) {
  const e = entry.event || {};
  const head = card.querySelector('.entry-head');
  if (head && entry.kind !== 'run_started') {
    const fork = button('fork here', 'quiet small fork-button', () => openForkForm(entry, card));
    fork.title = `A new run from this run's journal up to #${entry.seq}`;
    head.append(fork);
  }
  if (entry.kind === 'run_forked') {
    acting.origin = e.origin_run_id;
    showRunActions();
  }
  if (entry.kind === 'approval_requested' && e.call) {
    const form = decideForm(e.call);
    acting.waiting.set(e.call.id, form);
    card.append(form);
  }
  if (entry.kind === 'approval_decided') {
    const form = acting.waiting.get(e.call_id);
    if (form) form.remove();
    acting.waiting.delete(e.call_id);
  }
  if (entry.kind === 'input_provided' || entry.kind === 'run_started') {
    for (const form of document.querySelectorAll('.answer-form')) form.remove();
  }
  const outcome = e.outcome || {};
  const stop = outcome.stop_reason || {};
  if (entry.kind === 'run_finished' && stop.kind === 'awaiting_input') card.append(answerForm());
}

/** The name decisions are journaled with (`ui:NAME`), as the person at the page gave it:
 * kept in this browser, not a credential. */
const DECIDER_KEY = 'agentloop.decider';

function decideForm(call) {
  const reason = el('input', 'reason');
  reason.placeholder = 'reason (for a rejection)';
  reason.setAttribute('aria-label', `reason to reject ${call.name}`);
  const by = el('input', 'decider');
  by.placeholder = 'your name (journaled)';
  by.maxLength = 100;
  by.setAttribute('aria-label', 'your name, journaled with the decision');
  by.value = localStorage.getItem(DECIDER_KEY) || '';
  const form = el('div', 'row decide-form');
  form.dataset.callId = call.id;
  const decide = (decision) => act(`${decision} the call`, async () => {
    const name = by.value.trim();
    if (name) localStorage.setItem(DECIDER_KEY, name); else localStorage.removeItem(DECIDER_KEY);
    const body = { call_id: call.id, decision, reason: reason.value || null, by: name || null };
    const answer = await post(runPath(run.id, 'decide'), body);
    form.replaceChildren(el('span', 'muted', `${decision === 'approve' ? 'approved' : 'rejected'}; the run goes on`));
    followAgain();
    return answer;
  });
  form.append(button('Approve', 'approve', () => decide('approve')),
    button('Reject', 'quiet reject', () => decide('reject')), reason, by);
  return form;
}

function answerForm() {
  const text = el('input', 'answer-text');
  text.placeholder = 'your answer';
  text.setAttribute('aria-label', 'your answer');
  const form = el('form', 'row answer-form', el('span', 'label', 'The agent asks you'), text);
  const send = el('button', null, 'Answer');
  send.type = 'submit';
  form.append(send);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    act('answer', async () => {
      const answer = await post(runPath(run.id, 'answer'), { text: text.value });
      form.replaceChildren(el('span', 'muted', 'answered; the run goes on'));
      followAgain();
      return answer;
    });
  });
  return form;
}

/** After an action continues the open run: a stopped run's journal grows again, so read it
 * until it has (at most 10 s), then follow it live. A run still followed needs nothing. */
async function followAgain() {
  const id = run.id;
  if (!id) return; // the page moved on to the list before the action answered
  const before = run.lastSeq;
  for (let tries = 0; tries < 100 && run.id === id && !run.abort; tries += 1) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    let data;
    try {
      data = await api(`/ui/api/runs/${encodeURIComponent(id)}`);
    } catch (_) {
      continue;
    }
    const last = data.entries[data.entries.length - 1];
    if (run.id !== id || run.abort || !last || last.seq <= before) continue;
    for (const entry of data.entries) addEntry(entry);
    facts(data.run, data.entries);
    onRunLoaded(data);
    onRunShown(data);
    if (data.run && ENDING.has(last.kind)) setState(data.run.state);
    else follow(id);
    return;
  }
}

/** The buttons above the timeline: pause / resume / cancel while the run is not over, a link
 * to compare a fork with its origin, and a form to go on with the conversation. */
function showRunActions() {
  const box = $('run-actions');
  if (!box) return;
  box.replaceChildren();
  const state = $('run-state').textContent.replace(' ', '_');
  const over = state === 'finished' || state === 'failed' || state === 'cancelled';
  if (!over) {
    box.append(
      button('Pause', 'quiet', () => act('pause', () => post(runPath(run.id, 'pause'), {}))),
      button('Resume', 'quiet', () => act('resume', () => post(runPath(run.id, 'resume'), {}))),
      button('Cancel', 'quiet danger', () => act('cancel', async () => {
        const answer = await post(runPath(run.id, 'cancel'), { reason: 'cancelled from the UI' });
        followAgain();
        return answer;
      })),
    );
  }
  if (acting.origin) {
    const compare = el('a', 'compare-link', 'Compare with the run it was forked from');
    compare.href = `#/compare/${encodeURIComponent(acting.origin)}/${encodeURIComponent(run.id)}`;
    box.append(compare);
  }
  const summary = acting.summary;
  if (state === 'finished' && summary && summary.session) {
    const text = el('input', 'chat-next');
    text.placeholder = 'the next message of this conversation';
    text.setAttribute('aria-label', 'next message');
    const send = el('button', null, 'Send');
    send.type = 'submit';
    const form = el('form', 'row continue-form', text, send);
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      startChat(summary.agent, summary.session, text.value);
    });
    box.append(form);
  }
}

function onRunState() {
  showRunActions();
  const state = $('run-state').textContent.replace(' ', '_');
  if (state === 'finished' || state === 'failed' || state === 'cancelled') {
    for (const form of acting.waiting.values()) form.remove();
    acting.waiting.clear();
  }
}

function resetActing() {
  Object.assign(acting, { summary: null, waiting: new Map(), origin: null });
  const box = $('run-actions');
  if (box) box.replaceChildren();
  const waterfall = $('waterfall');
  if (waterfall) waterfall.replaceChildren();
}

// ---------- fork ----------

/** The calls whose results are journaled at or before `seq`, newest first. */
function callsUpTo(seq) {
  const calls = [];
  for (const card of document.querySelectorAll('#timeline .entry.kind-tool_completed, #timeline .entry.kind-tool_failed')) {
    if (Number(card.dataset.seq) <= seq && card.dataset.callId) calls.unshift(card.dataset.callId);
  }
  return calls;
}

function openForkForm(entry, card) {
  for (const open of document.querySelectorAll('.fork-form')) open.remove();
  const kind = el('select', 'fork-kind');
  const kinds = [['none', 'no edit'], ['tool_result', 'replace a tool result'],
    ['user_message', 'add a user message'], ['model_answer', "replace the model's answer"]];
  for (const [value, label] of kinds) {
    const option = el('option', null, label);
    option.value = value;
    kind.append(option);
  }
  const call = el('select', 'fork-call');
  for (const id of callsUpTo(entry.seq)) {
    const option = el('option', null, id);
    option.value = id;
    call.append(option);
  }
  const text = el('textarea', 'fork-text');
  text.rows = 2;
  text.placeholder = 'the new result, the user message, or the answer';
  const go = el('button', null, `Fork at #${entry.seq}`);
  go.type = 'submit';
  const form = el('form', 'fork-form',
    el('div', 'row', el('span', 'label', 'Fork here'), kind, call, go,
      button('Close', 'quiet', () => form.remove())), text);
  const sync = () => {
    call.hidden = kind.value !== 'tool_result';
    text.hidden = kind.value === 'none';
  };
  kind.addEventListener('change', sync);
  if (entry.kind === 'tool_completed' || entry.kind === 'tool_failed') kind.value = 'tool_result';
  if (entry.kind === 'run_finished') kind.value = 'model_answer';
  sync();
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    let edit = null;
    if (kind.value === 'tool_result') {
      let result = text.value;
      try { result = JSON.parse(text.value); } catch (_) { /* text */ }
      edit = { kind: 'tool_result', call_id: call.value, result };
    } else if (kind.value === 'user_message' || kind.value === 'model_answer') {
      edit = { kind: kind.value, text: text.value };
    }
    const origin = run.id;
    act('fork', async () => {
      const answer = await post(runPath(origin, 'fork'), { at_seq: entry.seq, edit });
      location.hash = `#/runs/${encodeURIComponent(answer.run_id)}`;
      return answer;
    });
  });
  card.append(form);
  kind.focus();
}

// ---------- chat ----------

async function startChat(agent, session, text) {
  return act('send the message', async () => {
    const answer = await post('/ui/api/chat', { agent: agent || null, session: session || null, text });
    location.hash = `#/runs/${encodeURIComponent(answer.run_id)}`;
    return answer;
  });
}

async function openChat(query) {
  const select = $('chat-agent');
  const { agents } = await servedInfo();
  select.replaceChildren();
  for (const agent of agents) {
    const option = el('option', null, agent.description ? `${agent.name} — ${agent.description}` : agent.name);
    option.value = agent.name;
    select.append(option);
  }
  if (query.get('agent')) select.value = query.get('agent');
  $('chat-session').value = query.get('session') || '';
  $('chat-text').focus();
}

// ---------- compare ----------

/** One line that stands for an entry when two runs are compared: what happened, not when. */
function gist(entry) {
  const e = entry.event || {};
  switch (entry.kind) {
    case 'run_started': return (e.input || []).map(messageText).join('\n');
    case 'model_responded': {
      const calls = ((e.message && e.message.content) || []).filter((p) => p.type === 'tool_call').map((p) => `→ ${p.name}`);
      return [messageText(e.message), ...calls].filter(Boolean).join('\n');
    }
    case 'tool_started': return `${e.call ? e.call.name : '?'} ${JSON.stringify(e.arguments)}`;
    case 'tool_completed': case 'tool_failed': return `${e.name || '?'}: ${e.error !== undefined ? JSON.stringify(e.error) : resultText(e.result)}`;
    case 'run_forked': {
      const edit = e.edit || {};
      const what = edit.kind === 'tool_result'
        ? `, the result of ${edit.call_id} replaced by ${typeof edit.result === 'string' ? edit.result : JSON.stringify(edit.result)}`
        : edit.kind === 'user_message' ? `, then the user said: ${edit.text}`
        : edit.kind === 'model_answer' ? `, the answer replaced by: ${edit.text}` : '';
      return `forked from ${e.origin_run_id} at #${e.at_seq}${what}`;
    }
    case 'run_finished': case 'run_suspended': return (e.outcome && e.outcome.answer) || '';
    case 'run_failed': return typeof e.error === 'string' ? e.error : JSON.stringify(e.error);
    case 'input_provided': return messageText(e.message);
    case 'iteration_started': return `iteration ${e.iteration}`;
    default: return '';
  }
}

function answerOf(entries) {
  const last = entries[entries.length - 1];
  const e = last ? last.event || {} : {};
  return e.outcome && e.outcome.answer !== undefined ? e.outcome.answer : '(no answer yet)';
}

async function openCompare(left, right) {
  const [a, b] = await Promise.all([
    api(`/ui/api/runs/${encodeURIComponent(left)}`),
    api(`/ui/api/runs/${encodeURIComponent(right)}`),
  ]);
  const rows = $('compare-rows');
  rows.replaceChildren();
  const heads = [left, right].map((id) => {
    const link = el('a', 'mono', id);
    link.href = `#/runs/${encodeURIComponent(id)}`;
    return link;
  });
  $('compare-a').replaceChildren(el('span', 'label', 'A '), heads[0]);
  $('compare-b').replaceChildren(el('span', 'label', 'B '), heads[1]);
  $('compare-answer-a').replaceChildren(longText(answerOf(a.entries)));
  $('compare-answer-b').replaceChildren(longText(answerOf(b.entries)));
  const cell = (entry) => {
    if (!entry) return el('td', 'cmp-missing', '—');
    const text = gist(entry);
    return el('td', null, el('div', 'cmp-kind', `#${entry.seq} ${TITLES[entry.kind] || entry.kind}`),
      text ? longText(text) : null);
  };
  // Entry by entry; a fork's `run_forked` (an entry its origin does not have) stands alone,
  // so that what follows it lines up with the origin's entries after the fork point.
  const key = (entry) => `${entry.kind}\n${gist(entry)}`;
  let first = null;
  let i = 0;
  let j = 0;
  while (i < a.entries.length || j < b.entries.length) {
    let x = a.entries[i];
    let y = b.entries[j];
    if (x && y && key(x) !== key(y)) {
      if (y.kind === 'run_forked') x = null;
      else if (x.kind === 'run_forked') y = null;
    }
    if (x) i += 1;
    if (y) j += 1;
    const same = x && y && key(x) === key(y);
    const row = el('tr', same ? 'cmp-same' : 'cmp-differs', cell(x), cell(y));
    if (!same && !first) {
      first = row;
      row.dataset.seq = String((y || x).seq);
      row.classList.add('cmp-first');
      row.id = 'first-difference';
    }
    rows.append(row);
  }
  $('compare-summary').textContent = first
    ? `The runs agree up to entry #${Number(first.dataset.seq) - 1}; the first difference is highlighted, and every row that differs is tinted.`
    : 'The runs agree entry by entry.';
  if (first) first.scrollIntoView({ block: 'center' });
}

// ---------- wiring ----------

/** Routes app.js does not know: `#/chat` and `#/compare/A/B`. True when handled. */
async function routeMore(path, query) {
  if (path === '/chat') {
    showView('chat-view');
    await openChat(query);
    return true;
  }
  if (path.startsWith('/compare/')) {
    const [left, right] = path.slice(9).split('/').map(decodeURIComponent);
    showView('compare-view');
    await openCompare(left, right);
    return true;
  }
  return false;
}

function startActions() {
  $('chat-form').addEventListener('submit', (event) => {
    event.preventDefault();
    startChat($('chat-agent').value, $('chat-session').value.trim(), $('chat-text').value);
  });
}
