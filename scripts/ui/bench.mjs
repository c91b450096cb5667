// The browser half of the runs UI benchmark (docs/PERFORMANCE.md, "Runs UI"): starts
// `bench-ui --serve` (a server over a seeded registry and a run of 1,000 iterations), then
// measures in headless Chromium (Debian's /usr/bin/chromium through playwright-core):
//
// - the first page of the runs list: from the navigation's start to the first animation frame
//   after the one that first has a table row, i.e. the row painted (p50 / p99 over --loads
//   fresh loads; target 300 ms);
// - the timeline of the 1,000-iteration run: from the navigation's start to its last entry
//   painted, the page's long tasks (PerformanceObserver 'longtask': count, longest; a task
//   over 200 ms freezes the page) and the slowest `page.evaluate` round trip while it renders.
//
//   export "$(bash scripts/ui/install.sh | tail -n 1)"   # AGENTLOOP_UI_NODE_PATH=…
//   BENCH_UI_BIN=target/release/bench-ui node scripts/ui/bench.mjs [--loads 20] [--timelines 5]
//     [bench-ui options: --store redis, --runs N, --smoke]
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch } from './chromium.mjs';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const bin = process.env.BENCH_UI_BIN ||
  path.join(process.env.CARGO_TARGET_DIR || path.join(repo, 'target'), 'release', 'bench-ui');

const FIRST_PAGE_TARGET = 300; // ms
const FREEZE = 200; // ms: a longer task freezes the page

let loads = 20;
let timelines = 5;
const passed = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--loads') loads = Number(argv[++i]);
  else if (argv[i] === '--timelines') timelines = Number(argv[++i]);
  else passed.push(argv[i]);
}

let child = null;
const dirs = [];
function cleanup() {
  if (child && child.exitCode === null) child.kill('SIGTERM');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}
process.on('exit', cleanup);

/** `bench-ui --serve`: the page's URL and the long run's id, once it has seeded. */
async function serve() {
  child = spawn(bin, ['--serve', ...passed], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let buffer = '';
    const timer = setTimeout(() => reject(new Error('bench-ui did not serve in 15 minutes')), 15 * 60 * 1000);
    child.on('exit', (code) => reject(new Error(`bench-ui exited (${code})`)));
    child.stdout.on('data', (chunk) => {
      buffer += chunk;
      const match = buffer.match(/^serving (\S+) run_1000=(\S+)/m);
      if (match) {
        clearTimeout(timer);
        resolve({ url: match[1], longRun: match[2] });
      }
    });
  });
}

/** Runs in every page before its scripts (through the driver, so the page's CSP does not apply):
 * records long tasks, and the first animation frame at which each watched selector matches. */
function instrument() {
  window.__bench = { longtasks: [], found: {}, seen: {} };
  new PerformanceObserver((list) => {
    for (const task of list.getEntries()) {
      window.__bench.longtasks.push({ start: task.startTime, duration: task.duration });
    }
  }).observe({ type: 'longtask', buffered: true });
  const watched = ['#runs-body tr', '#timeline .entry', '.kind-run_finished'];
  // A selector found in one frame was painted by the next one's callback (the callback's own
  // timestamp is the frame's start, which a long task can leave far behind).
  const frame = () => {
    const now = performance.now();
    const { found, seen } = window.__bench;
    for (const selector of watched) {
      if (selector in found && !(selector in seen)) seen[selector] = now;
      if (!(selector in found) && document.querySelector(selector)) found[selector] = now;
    }
    if (Object.keys(window.__bench.seen).length < watched.length) requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}

function percentile(sorted, p) {
  return sorted.length ? sorted[Math.round((sorted.length - 1) * p)] : NaN;
}

function summary(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), max: sorted[sorted.length - 1] };
}

const f = (ms) => `${ms.toFixed(0)} ms`;

async function waitFor(page, selector) {
  await page.waitForFunction((s) => s in window.__bench.seen, selector, { timeout: 120000, polling: 50 });
  return page.evaluate((s) => window.__bench.seen[s], selector);
}

/** Fresh loads of the list: frame times of the first row. */
async function firstPages(context, server) {
  const times = [];
  for (let i = 0; i < loads + 2; i++) {
    const page = await context.newPage();
    await page.goto(server.url, { waitUntil: 'commit' });
    const at = await waitFor(page, '#runs-body tr');
    if (i >= 2) times.push(at); // two loads warm the browser's and the server's caches
    await page.close();
  }
  return summary(times);
}

/** One load of the long run's timeline. */
async function timeline(context, server) {
  const page = await context.newPage();
  await page.goto(`${server.url}#/runs/${encodeURIComponent(server.longRun)}`, { waitUntil: 'commit' });
  // Round trips into the page while it loads and renders: how long it stays unresponsive.
  let rendering = true;
  const trips = [];
  const pinging = (async () => {
    while (rendering) {
      const sent = performance.now();
      await page.evaluate(() => 0);
      trips.push(performance.now() - sent);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  const first = await waitFor(page, '#timeline .entry');
  const last = await waitFor(page, '.kind-run_finished');
  rendering = false;
  await pinging;
  await page.waitForTimeout(300);
  const result = await page.evaluate(() => ({
    tasks: window.__bench.longtasks,
    entries: document.querySelectorAll('#timeline .entry').length,
    nodes: document.getElementsByTagName('*').length,
  }));
  await page.close();
  const durations = result.tasks.map((t) => t.duration);
  return {
    first,
    last,
    entries: result.entries,
    nodes: result.nodes,
    longTasks: durations.length,
    longest: durations.length ? Math.max(...durations) : 0,
    longTaskTotal: durations.reduce((a, b) => a + b, 0),
    slowestTrip: trips.length ? Math.max(...trips) : 0,
    trips: trips.length,
  };
}

async function main() {
  const server = await serve();
  console.log(`bench-ui serving ${server.url} (${passed.join(' ') || 'sqlite, 100000 runs'})`);
  const context = await launch('agentloop-ui-bench-', dirs);
  const problems = [];
  context.on('console', (message) => { if (message.type() === 'error') problems.push(message.text()); });
  context.on('weberror', (error) => problems.push(String(error.error())));
  await context.addInitScript(instrument);
  try {
    const list = await firstPages(context, server);
    console.log(`- first page of the runs list, navigation start to the row painted: ` +
      `p50 ${f(list.p50)}, p99 ${f(list.p99)}, max ${f(list.max)} over ${loads} loads ` +
      `[${list.p99 < FIRST_PAGE_TARGET ? 'under' : 'OVER'} ${FIRST_PAGE_TARGET} ms]`);
    const runs = [];
    for (let i = 0; i < timelines + 1; i++) {
      const one = await timeline(context, server);
      if (i >= 1) runs.push(one); // the first load warms the caches
    }
    const last = summary(runs.map((r) => r.last));
    const first = summary(runs.map((r) => r.first));
    const longest = Math.max(...runs.map((r) => r.longest));
    const trip = Math.max(...runs.map((r) => r.slowestTrip));
    const r = runs[0];
    console.log(`- timeline of the ${r.entries}-entry run (1,000 iterations; ${r.nodes} elements): ` +
      `first entry p50 ${f(first.p50)}, whole timeline p50 ${f(last.p50)}, max ${f(last.max)} ` +
      `over ${runs.length} loads`);
    console.log(`- long tasks per load: ${runs.map((x) => x.longTasks).join(', ')}; longest ${f(longest)}; ` +
      `${runs.map((x) => f(x.longTaskTotal)).join(', ')} in long tasks; slowest evaluate round trip ` +
      `while rendering ${f(trip)} [${longest > FREEZE ? 'FREEZES' : 'no freeze'}: ${FREEZE} ms]`);
    if (problems.length) throw new Error(`errors in the page: ${problems.join('; ')}`);
  } finally {
    await context.close();
  }
}

main().then(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited; // it empties its store on the way out
  }
  cleanup();
  process.exit(0);
}, (error) => {
  console.error(`ui bench failed: ${error && error.stack ? error.stack : error}`);
  cleanup();
  process.exit(1);
});
