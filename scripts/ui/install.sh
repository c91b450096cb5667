#!/usr/bin/env bash
# Installs what the browser test of the runs UI (scripts/ui/test.mjs) needs, outside the repo:
# Debian's `chromium` (apt-get, only when /usr/bin/chromium is missing; needs root) and npm's
# `playwright-core` (the driver only, no browser download) into
# `${AGENTLOOP_CACHE:-$HOME/.cache/agentloop}/ui-node/<version>`. An existing install is reused.
# Prints `AGENTLOOP_UI_NODE_PATH=<dir>/node_modules` last, ready for `export NODE_PATH=…`.
# Progress goes to stderr.
set -euo pipefail

version="${AGENTLOOP_PLAYWRIGHT_VERSION:-1.65.1}"
root="${AGENTLOOP_CACHE:-$HOME/.cache/agentloop}/ui-node/$version"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "ui-install: $tool is not installed" >&2
    exit 1
  fi
done

if [[ ! -x /usr/bin/chromium ]]; then
  if [[ $(id -u) != 0 ]]; then
    echo "ui-install: /usr/bin/chromium is missing; install Debian's chromium as root (apt-get install chromium)" >&2
    exit 1
  fi
  echo "ui-install: installing chromium with apt-get" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
fi

if [[ ! -f "$root/node_modules/playwright-core/package.json" ]]; then
  echo "ui-install: installing playwright-core $version into $root" >&2
  mkdir -p "$root"
  # A private package.json keeps npm from walking up into another project.
  [[ -f "$root/package.json" ]] || echo '{ "name": "agentloop-ui-test", "private": true }' >"$root/package.json"
  # The driver only: the browser is Debian's chromium.
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$root" --no-audit --no-fund \
    --loglevel=error "playwright-core@$version" >&2
fi

if [[ ! -f "$root/node_modules/playwright-core/package.json" ]]; then
  echo "ui-install: the install has no playwright-core" >&2
  exit 1
fi
echo "AGENTLOOP_UI_NODE_PATH=$root/node_modules"
