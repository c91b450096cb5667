// Headless Chromium for the runs UI's browser test and benchmark: Debian's /usr/bin/chromium
// driven by playwright-core from the cache scripts/ui/install.sh fills (its last line sets
// AGENTLOOP_UI_NODE_PATH).
import { createRequire } from 'node:module';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const nodePath = process.env.AGENTLOOP_UI_NODE_PATH;
if (!nodePath) throw new Error('AGENTLOOP_UI_NODE_PATH is not set (scripts/ui/install.sh prints it)');
const { chromium } = createRequire(path.join(nodePath, 'noop.js'))('playwright-core');

/** A persistent context on a fresh user-data-dir (Chromium's --user-data-dir) whose path is
 * pushed to `dirs`, for the caller to remove. */
export async function launch(prefix, dirs) {
  const userData = mkdtempSync(path.join(tmpdir(), prefix));
  dirs.push(userData);
  return chromium.launchPersistentContext(userData, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}
