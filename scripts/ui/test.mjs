// The browser test of the runs UI: starts `agentloop serve --agent echo` on a free port with a
// fresh store (and a second one as its remote A2A agent), gives it tasks over JSON-RPC, then
// drives /ui in headless Chromium (Debian's /usr/bin/chromium through playwright-core): the
// list, its filters, a timeline with a sub-agent and a remote agent, a live run, a
// message that tries to inject HTML, a connection cut mid-stream (through a TCP proxy), the
// actions (approve, answer, cancel, chat, fork and compare), and a server that needs a
// token. Screenshots go to
// docs/ui/ (or $AGENTLOOP_UI_SHOTS). Exits non-zero on the first failure.
//
//   export "$(bash scripts/ui/install.sh | tail -n 1)"   # AGENTLOOP_UI_NODE_PATH=…
//   AGENTLOOP_BIN=target/debug/agentloop node scripts/ui/test.mjs
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch } from './chromium.mjs';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import net from 'node:net';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const bin = process.env.AGENTLOOP_BIN ||
  path.join(process.env.CARGO_TARGET_DIR || path.join(repo, 'target'), 'debug', 'agentloop');
const shots = process.env.AGENTLOOP_UI_SHOTS || path.join(repo, 'docs', 'ui');
const XSS = '<script>alert(1)</script><img src=x onerror=alert(2)>';
const LONG_CALC = 'calc ' + Array.from({ length: 120 }, (_, i) => i + 1).join(' + ');

const children = [];
const dirs = [];
function cleanup() {
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}
process.on('exit', cleanup);

/** `agentloop serve --agent echo` on a free port with its own store (and `config` as its
 * agentloop.toml): its root URL and agent URL. */
async function serve(extra = [], config = '') {
  const dir = mkdtempSync(path.join(tmpdir(), 'agentloop-ui-'));
  dirs.push(dir);
  if (config) writeFileSync(path.join(dir, 'agentloop.toml'), config);
  const env = { ...process.env, XDG_CONFIG_HOME: dir };
  delete env.AGENTLOOP_SERVE_TOKEN;
  const child = spawn(bin, ['serve', '--agent', 'echo', '--bind', '127.0.0.1:0', ...extra], {
    cwd: dir,
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  const agentUrl = await new Promise((resolve, reject) => {
    let buffer = '';
    const timer = setTimeout(() => reject(new Error('the server did not start in 30 s')), 30000);
    child.on('exit', (code) => reject(new Error(`the server exited (${code})`)));
    child.stdout.on('data', (chunk) => {
      buffer += chunk;
      const match = buffer.match(/^listening on (\S+) \(/m);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
  });
  return { root: new URL(agentUrl).origin, agentUrl };
}

/** A TCP proxy to `root` on a free port: its origin, and `cut()`, which drops every
 * connection through it (the server and the browser each see theirs reset). */
async function proxy(root) {
  const target = new URL(root);
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const [a, b] of [[client, upstream], [upstream, client]]) {
      sockets.add(a);
      a.pipe(b);
      a.on('error', () => b.destroy());
      a.on('close', () => { sockets.delete(a); b.destroy(); });
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    root: `http://127.0.0.1:${server.address().port}`,
    cut() {
      const n = sockets.size;
      for (const socket of sockets) socket.destroy();
      return n;
    },
    close() { server.close(); },
  };
}

/** SendMessage over JSON-RPC: the task. */
async function send(server, text, { wait = true, token, traceparent } = {}) {
  const body = {
    jsonrpc: '2.0', id: 1, method: 'SendMessage',
    params: {
      message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] },
      configuration: { returnImmediately: !wait },
    },
  };
  const headers = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  if (traceparent) headers.traceparent = traceparent;
  const response = await fetch(server.agentUrl, { method: 'POST', headers, body: JSON.stringify(body) });
  const reply = await response.json();
  assert.ok(reply.result && reply.result.task, `SendMessage ${text}: ${JSON.stringify(reply)}`);
  return reply.result.task;
}

function step(name) {
  console.log(`ui test: ${name}`);
}

async function main() {
  mkdirSync(shots, { recursive: true });
  // A second server: the first one's remote A2A agent `far` (its `remote far TASK`).
  const far = await serve();
  const server = await serve(['--trace-url', 'http://127.0.0.1:16686/trace/{trace_id}'],
    `[[a2a]]\nurl = "${far.agentUrl}"\nname = "far"\n`);
  step(`server at ${server.root}, its remote agent at ${far.root}`);
  const long = await send(server, LONG_CALC); // too long for the calculator: a long error
  const calc = await send(server, 'calc (17 * 23) + 4');
  await send(server, 'Hello! This run just echoes its message back.');
  const xss = await send(server, XSS);
  const failed = await send(server, 'fail');

  const context = await launch('agentloop-ui-chromium-', dirs);
  try {
    const page = await context.newPage();
    const dialogs = [];
    const injected = [];
    const problems = [];
    page.on('dialog', (dialog) => { dialogs.push(dialog.message()); dialog.dismiss(); });
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (url.pathname === '/x' || url.pathname.endsWith('/x')) injected.push(request.url());
    });
    page.on('console', (message) => { if (message.type() === 'error') problems.push(message.text()); });
    page.on('pageerror', (error) => problems.push(String(error)));
    page.on('response', (response) => { if (response.status() >= 400) problems.push(`${response.status()} ${response.url()}`); });

    step('the list shows the runs');
    await page.goto(`${server.root}/ui`);
    await page.locator('#runs-body tr').nth(4).waitFor();
    assert.equal(await page.locator('#runs-body tr').count(), 5);
    assert.match(await page.locator('#runs-count').textContent(), /5 runs/);
    await page.screenshot({ path: path.join(shots, 'list.png') });

    step('filters: state failed, then an agent nobody runs, then clear');
    await page.selectOption('#f-state', 'failed');
    await page.click('#filters button[type=submit]');
    await page.waitForFunction(() => document.querySelectorAll('#runs-body tr').length === 1);
    assert.equal(await page.locator('#runs-body tr').getAttribute('data-run-id'), failed.id);
    assert.equal(await page.locator('#runs-body .state').textContent(), 'failed');
    assert.match(page.url(), /state=failed/);
    await page.selectOption('#f-state', '');
    await page.fill('#f-agent', 'nobody');
    await page.click('#filters button[type=submit]');
    await page.locator('#runs-empty').waitFor();
    await page.click('#f-clear');
    await page.waitForFunction(() => document.querySelectorAll('#runs-body tr').length === 5);

    step('search the inputs and answers');
    await page.fill('#f-q', 'CALC (17');
    await page.click('#filters button[type=submit]');
    await page.waitForFunction((id) => {
      const rows = document.querySelectorAll('#runs-body tr');
      return rows.length === 1 && rows[0].dataset.runId === id;
    }, calc.id);
    assert.match(page.url(), /q=CALC/);
    assert.match(await page.locator('#runs-body .answered').textContent(), /395/);
    assert.match(await page.locator('#runs-body .asked').textContent(), /calc/);
    await page.click('#f-clear');
    await page.waitForFunction(() => document.querySelectorAll('#runs-body tr').length === 5);

    step('the list updates by itself: a new run appears');
    const fresh = await send(server, 'a run started while the list is open');
    await page.locator(`#runs-body tr[data-run-id="${fresh.id}"]`).waitFor({ timeout: 10000 });
    assert.equal(await page.locator('#runs-body tr').count(), 6);

    step('a timeline: iterations, a tool call and its result');
    await page.click(`#runs-body tr[data-run-id="${calc.id}"] a`);
    await page.locator('.kind-run_finished').waitFor();
    assert.ok(await page.locator('.group h3', { hasText: 'Iteration 1' }).count() >= 1);
    assert.match(await page.locator('.kind-tool_started').first().textContent(), /calculator/);
    assert.equal(await page.locator('.kind-tool_completed [data-field=result] pre').textContent(), '395');
    assert.match(await page.locator('.kind-run_finished').textContent(), /395/);
    assert.match(await page.locator('#run-state').textContent(), /finished/);
    assert.match(await page.locator('#waterfall summary').textContent(), /Where the time went: .* model .* \(2 calls\), tools .* \(1 call\)/);
    assert.equal(await page.locator('#waterfall .wf-bar').count(), 3);

    step('a sub-agent run nested under the call that started it');
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const delegated = await send(server, 'delegate calc 6 * 7', { traceparent: `00-${traceId}-b7ad6b7169203331-01` });
    await page.goto(`${server.root}/ui#/runs/${encodeURIComponent(delegated.id)}`);
    const subrun = page.locator('.kind-tool_started .subrun');
    await subrun.waitFor();
    assert.match(await subrun.textContent(), /echo-helper/);
    await subrun.locator('details.subrun-timeline summary').click();
    await subrun.locator('.subrun-entries li', { hasText: '42' }).first().waitFor();
    assert.match(await page.locator('.kind-run_finished').textContent(), /The helper answered: The result is 42/);
    assert.equal(await page.locator('#run-facts [data-fact=trace] a').getAttribute('href'),
      `http://127.0.0.1:16686/trace/${traceId}`, 'the trace id links to the trace');
    await page.screenshot({ path: path.join(shots, 'timeline.png'), fullPage: true });
    await subrun.locator('a').click();
    await page.locator('.kind-run_finished').waitFor();
    assert.match(await page.locator('#run-facts').textContent(), new RegExp(delegated.id));

    step('a remote A2A agent nested under the call that reached it, linked to its server');
    const reached = await send(server, 'remote far calc 6 * 7');
    await page.goto(`${server.root}/ui#/runs/${encodeURIComponent(reached.id)}`);
    const remote = page.locator('.kind-tool_completed .subrun.remote');
    await remote.waitFor();
    assert.match(await remote.textContent(), /remote A2A agent.*echo · task .*completed/);
    assert.match(await page.locator('.kind-run_finished').textContent(), /The remote agent answered: The result is 42/);
    const remoteLink = remote.locator('a.remote-link');
    assert.ok((await remoteLink.getAttribute('href')).startsWith(`${far.root}/ui/#/runs/`));
    assert.equal(await remoteLink.getAttribute('target'), '_blank');
    await page.screenshot({ path: path.join(shots, 'remote.png'), fullPage: true });
    const [farPage] = await Promise.all([context.waitForEvent('page'), remoteLink.click()]);
    await farPage.locator('.kind-run_finished').waitFor();
    assert.match(await farPage.locator('.kind-run_finished').textContent(), /The result is 42/);
    assert.match(await farPage.locator('.kind-tool_started').first().textContent(), /calculator/);
    await farPage.close();

    step('a long tool result: cut, then shown whole');
    await page.goto(`${server.root}/ui#/runs/${encodeURIComponent(long.id)}`);
    const failedCall = page.locator('.kind-tool_failed').first();
    await failedCall.waitFor();
    const result = failedCall.locator('[data-field=result]');
    assert.doesNotMatch(await result.locator('pre').textContent(), /119 \+ 120/);
    await result.locator('.show-all').click();
    assert.equal(await result.locator('.show-all').count(), 0, 'the button goes once the text is whole');
    assert.match(await result.locator('pre').textContent(), /119 \+ 120/);
    await failedCall.locator('details.raw summary').click();
    assert.match(await failedCall.locator('details.raw pre').textContent(), /tool_failed/);

    step('HTML in a message is shown as text');
    await page.goto(`${server.root}/ui#/runs/${encodeURIComponent(xss.id)}`);
    await page.locator('.kind-run_finished').waitFor();
    const input = await page.locator('.kind-run_started pre.text').first().textContent();
    assert.equal(input, XSS);
    assert.equal(await page.locator('#timeline img, #timeline script').count(), 0);

    step('a live run updates to its end, across a connection cut mid-stream');
    const relay = await proxy(server.root);
    const live = await send(server, 'steps 3 1', { wait: false });
    await page.goto(`${relay.root}/ui#/runs/${encodeURIComponent(live.id)}`);
    await page.locator('#run-live').waitFor({ state: 'visible' });
    await page.locator('.kind-tool_completed').first().waitFor({ timeout: 15000 });
    assert.ok(await page.locator('#run-live').isVisible(), 'still live after the first call');
    assert.match(await page.locator('#run-state').textContent(), /running/);
    await page.screenshot({ path: path.join(shots, 'live.png'), fullPage: true });
    const shownBefore = await page.locator('.entry').count();
    const beforeCut = problems.length;
    assert.ok(relay.cut() > 0, 'a connection was cut');
    await page.locator('#banner', { hasText: 'reconnecting' }).waitFor({ timeout: 5000 });
    await page.locator('.kind-run_finished').waitFor({ timeout: 20000 });
    // The browser logs the stream it lost; nothing else may go wrong.
    const cutErrors = problems.splice(beforeCut);
    assert.ok(cutErrors.every((text) => /ERR_INCOMPLETE_CHUNKED_ENCODING|ERR_CONNECTION_RESET|ERR_EMPTY_RESPONSE/.test(text)),
      `only the cut stream failed: ${cutErrors}`);
    assert.ok(await page.locator('.entry').count() > shownBefore, 'entries after the cut arrived');
    await page.locator('#run-live').waitFor({ state: 'hidden' });
    assert.match(await page.locator('#run-state').textContent(), /finished/);
    const seqs = await page.locator('.entry').evaluateAll((nodes) => nodes.map((n) => Number(n.dataset.seq)));
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), 'entries in order');
    assert.equal(new Set(seqs).size, seqs.length, 'no entry twice');

    step('streamed text appears as the model writes it, then the answer replaces it');
    const streamed = await send(server, 'stream 150', { wait: false });
    await page.goto(`${server.root}/ui#/runs/${encodeURIComponent(streamed.id)}`);
    // Only now: the page on the relay's origin reads the ended run's facts, sub-agents and
    // forks after its stream ends, and a closed relay would refuse those reads.
    relay.close();
    const streamingBox = page.locator('.kind-streaming pre');
    await page.waitForFunction(() => {
      const box = document.querySelector('.kind-streaming pre');
      return box && /chunk \d+ chunk/.test(box.textContent);
    }, null, { timeout: 10000 });
    const partial = await streamingBox.textContent();
    assert.doesNotMatch(partial, /chunk 150$/, 'shown before the end');
    await page.locator('.kind-run_finished').waitFor({ timeout: 20000 });
    assert.equal(await page.locator('.kind-streaming').count(), 0, 'the journaled answer replaced it');
    assert.match(await page.locator('.kind-model_responded').last().textContent(), /^Model answered.*chunk 1 chunk 2 chunk 3 /);

    step('approve a deferred call from the page, as a named person');
    const guardedCall = await send(server, 'approve');
    await page.goto(`${server.root}/ui#/runs/${encodeURIComponent(guardedCall.id)}`);
    await page.fill('.decide-form .decider', 'Grace');
    await page.locator('.decide-form button.approve').click();
    await page.locator('.kind-approval_decided').waitFor({ timeout: 15000 });
    assert.equal(await page.locator('.kind-approval_decided .decided-by').textContent(), 'ui:Grace');
    await page.locator('.kind-run_finished').waitFor({ timeout: 15000 });
    await page.waitForFunction(() => /finished/.test(document.getElementById('run-state').textContent));
    assert.equal(await page.locator('.decide-form').count(), 0, 'no decision asked any more');

    step('answer the question a run asks');
    const asking = await send(server, 'ask what is your name?');
    await page.goto(`${server.root}/ui#/runs/${encodeURIComponent(asking.id)}`);
    await page.fill('.answer-form .answer-text', 'Ada Lovelace');
    await page.click('.answer-form button');
    await page.locator('.kind-input_provided').waitFor({ timeout: 15000 });
    await page.locator('.kind-run_finished >> nth=-1').waitFor();
    await page.waitForFunction(() => /finished/.test(document.getElementById('run-state').textContent));
    assert.match(await page.locator('.kind-run_finished').last().textContent(), /Ada Lovelace/);

    step('cancel a running run');
    const slow = await send(server, 'slow 30', { wait: false });
    await page.goto(`${server.root}/ui#/runs/${encodeURIComponent(slow.id)}`);
    await page.locator('#run-actions button', { hasText: 'Cancel' }).click();
    await page.locator('.kind-run_cancelled').waitFor({ timeout: 15000 });
    await page.waitForFunction(() => /cancelled/.test(document.getElementById('run-state').textContent));

    step('chat: a new conversation, then its next turn');
    await page.goto(`${server.root}/ui#/`);
    await page.click('#nav-chat');
    await page.fill('#chat-text', 'hello from the chat page');
    await page.click('#chat-form button[type=submit]');
    await page.waitForFunction(() => /finished/.test(document.getElementById('run-state').textContent));
    assert.match(await page.locator('.kind-run_finished').textContent(), /hello from the chat page/);
    const firstTurn = page.url();
    await page.fill('#run-actions .chat-next', 'the second turn');
    await page.click('#run-actions .continue-form button');
    await page.waitForFunction((before) => location.href !== before, firstTurn);
    await page.waitForFunction(() => /finished/.test(document.getElementById('run-state').textContent));
    assert.match(await page.locator('.kind-run_finished').textContent(), /the second turn/);

    step('fork a run with an edited tool result, then compare the two');
    await page.goto(`${server.root}/ui#/runs/${encodeURIComponent(calc.id)}`);
    const toolCard = page.locator('.kind-tool_completed').first();
    await toolCard.locator('.fork-button').click();
    await toolCard.locator('.fork-form .fork-text').fill('400');
    await toolCard.locator('.fork-form button[type=submit]').click();
    await page.waitForFunction((origin) => location.hash.startsWith('#/runs/') && !location.hash.includes(origin), calc.id);
    await page.locator('.kind-run_forked').waitFor();
    await page.waitForFunction(() => /finished/.test(document.getElementById('run-state').textContent));
    assert.match(await page.locator('.kind-run_finished').textContent(), /400/);
    await page.click('#run-actions .compare-link');
    await page.locator('.cmp-first').waitFor();
    assert.match(await page.locator('#compare-answer-a').textContent(), /395/);
    assert.match(await page.locator('#compare-answer-b').textContent(), /400/);
    assert.match(await page.locator('.cmp-first').textContent(), /Forked/);
    await page.screenshot({ path: path.join(shots, 'compare.png'), fullPage: true });

    step('the origin lists its fork; a fork with the answer edited ends with it');
    await page.goto(`${server.root}/ui#/runs/${encodeURIComponent(calc.id)}`);
    await page.locator('#run-facts [data-fact=forks] a.fork-link').first().waitFor();
    assert.equal(await page.locator('#run-facts [data-fact=forks] a.fork-link').count(), 1);
    const endCard = page.locator('.kind-run_finished').first();
    await endCard.locator('.fork-button').click();
    assert.equal(await endCard.locator('.fork-form .fork-kind').inputValue(), 'model_answer');
    await endCard.locator('.fork-form .fork-text').fill('About four hundred.');
    await endCard.locator('.fork-form button[type=submit]').click();
    await page.waitForFunction((origin) => location.hash.startsWith('#/runs/') && !location.hash.includes(origin), calc.id);
    await page.waitForFunction(() => /finished/.test(document.getElementById('run-state').textContent));
    assert.match(await page.locator('.kind-run_finished').last().textContent(), /About four hundred\./);
    await page.goto(`${server.root}/ui#/runs/${encodeURIComponent(calc.id)}`);
    await page.waitForFunction(() => document.querySelectorAll('#run-facts [data-fact=forks] a.fork-link').length === 2);

    assert.deepEqual(dialogs, [], 'no dialog opened');
    assert.deepEqual(injected, [], 'no request to the injected image');
    assert.deepEqual(problems, [], 'no error in the console (CSP included)');
    await page.close();

    step('a server with a token: the page asks for it, keeps it for the tab');
    const guarded = await serve(['--token', 'ui-test-token']);
    await send(guarded, 'calc 1 + 1', { token: 'ui-test-token' });
    const tab = await context.newPage();
    await tab.goto(`${guarded.root}/ui`);
    await tab.locator('#auth').waitFor({ state: 'visible' });
    await tab.fill('#auth-token', 'ui-test-token');
    await tab.click('#auth-form button');
    await tab.locator('#runs-body tr').first().waitFor();
    assert.equal(await tab.locator('#runs-body tr').count(), 1);
    assert.equal(await tab.evaluate(() => localStorage.length), 0, 'nothing in localStorage');
    await tab.close();
  } finally {
    await context.close();
  }
  step('passed');
}

main().then(() => {
  cleanup();
  process.exit(0);
}, (error) => {
  console.error(`ui test failed: ${error && error.stack ? error.stack : error}`);
  cleanup();
  process.exit(1);
});
