// The agentloop runs page, where a run's time went: each model call and tool call as a bar on
// the run's time axis (from its journaled end and duration), the waits for a person, and the
// totals. Loaded after app.js (whose helpers it uses); bars are placed through the CSSOM
// (element.style), which the page's Content-Security-Policy allows.
'use strict';

/** At most this many bars: a long run shows its longest spans. */
const MAX_BARS = 60;

/** The spans of a journal: {label, kind, start, end} in ms since the epoch. */
function spans(entries) {
  const out = [];
  const asked = new Map();
  for (const entry of entries) {
    const e = entry.event || {};
    switch (entry.kind) {
      case 'model_responded':
      case 'model_failed': {
        const took = e.duration_ms || 0;
        out.push({ label: `model · iteration ${e.iteration}`, kind: 'model', start: entry.at_ms - took, end: entry.at_ms });
        break;
      }
      case 'tool_completed':
      case 'tool_failed':
      case 'tool_timed_out': {
        const took = e.duration_ms || e.timeout_ms || 0;
        out.push({ label: `tool · ${e.name || '?'}`, kind: entry.kind === 'tool_completed' ? 'tool' : 'fail', start: entry.at_ms - took, end: entry.at_ms });
        break;
      }
      case 'approval_requested':
        if (e.call) asked.set(e.call.id, entry.at_ms);
        break;
      case 'approval_decided':
        if (asked.has(e.call_id)) {
          out.push({ label: 'waiting for approval', kind: 'wait', start: asked.get(e.call_id), end: entry.at_ms });
          asked.delete(e.call_id);
        }
        break;
      default:
        break;
    }
  }
  return out;
}

function ms(n) {
  return n < 1000 ? `${Math.round(n)} ms` : `${(n / 1000).toFixed(2)} s`;
}

/** Draws (or redraws) the waterfall above the timeline. */
function drawWaterfall(entries) {
  const box = $('waterfall');
  if (!box) return;
  box.replaceChildren();
  if (!entries.length) return;
  const first = entries[0].at_ms;
  const total = Math.max(1, entries[entries.length - 1].at_ms - first);
  const all = spans(entries);
  if (!all.length) return;
  const sum = (kind) => all.filter((s) => s.kind === kind).reduce((n, s) => n + (s.end - s.start), 0);
  const count = (kind) => all.filter((s) => s.kind === kind).length;
  const calls = (n) => `${n} call${n === 1 ? '' : 's'}`;
  const summary = el('summary', null, `Where the time went: ${ms(total)} in all — model ${ms(sum('model'))} (${calls(count('model'))}), tools ${ms(sum('tool') + sum('fail'))} (${calls(count('tool') + count('fail'))})` +
    (count('wait') ? `, waiting for a person ${ms(sum('wait'))}` : ''));
  const details = el('details', 'waterfall', summary);
  details.open = all.length <= 40;
  let shown = all;
  if (all.length > MAX_BARS) {
    shown = [...all].sort((a, b) => (b.end - b.start) - (a.end - a.start)).slice(0, MAX_BARS)
      .sort((a, b) => a.start - b.start);
    details.append(el('p', 'muted', `The ${MAX_BARS} longest of ${all.length} spans.`));
  }
  const rows = el('div', 'wf-rows');
  for (const span of shown) {
    const bar = el('div', `wf-bar wf-${span.kind}`);
    bar.style.left = `${(100 * (span.start - first)) / total}%`;
    bar.style.width = `${Math.max(0.4, (100 * (span.end - span.start)) / total)}%`;
    bar.title = `${span.label}: ${ms(span.end - span.start)} from +${ms(span.start - first)}`;
    rows.append(el('div', 'wf-row', el('span', 'wf-label', span.label), el('div', 'wf-track', bar),
      el('span', 'wf-took', ms(span.end - span.start))));
  }
  details.append(rows);
  box.append(details);
}
