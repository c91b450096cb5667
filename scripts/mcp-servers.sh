#!/usr/bin/env bash
# Installs the reference MCP servers the `mcp` tests run against, with npm, into a cache outside
# the repo, and prints their entry points as `NAME=path` lines (one per server), ready for
# `export`:
#
#   AGENTLOOP_MCP_EVERYTHING=<cache>/mcp/<version>/node_modules/@modelcontextprotocol/server-everything/dist/index.js
#   AGENTLOOP_MCP_FILESYSTEM=<cache>/mcp/<version>/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js
#
# Start a server with `node <path> [args]`. The cache is
# `${AGENTLOOP_CACHE:-$HOME/.cache/agentloop}/mcp/<version>`; an existing install is reused
# (set AGENTLOOP_MCP_REINSTALL=1 to install again). Needs node and npm; progress goes to stderr.
set -euo pipefail

# Both servers are published under the same date-based version.
version="${AGENTLOOP_MCP_SERVERS_VERSION:-2026.8.31}"
root="${AGENTLOOP_CACHE:-$HOME/.cache/agentloop}/mcp/$version"
everything="$root/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
filesystem="$root/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "mcp-servers: $tool is not installed" >&2
    exit 1
  fi
done

if [[ "${AGENTLOOP_MCP_REINSTALL:-0}" == 1 || ! -f "$everything" || ! -f "$filesystem" ]]; then
  echo "mcp-servers: installing the MCP servers $version into $root" >&2
  mkdir -p "$root"
  # A private package.json keeps npm from walking up into another project.
  [[ -f "$root/package.json" ]] || echo '{ "name": "agentloop-mcp-servers", "private": true }' >"$root/package.json"
  npm install --prefix "$root" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/server-everything@$version" \
    "@modelcontextprotocol/server-filesystem@$version" >&2
fi

for entry in "$everything" "$filesystem"; do
  if [[ ! -f "$entry" ]]; then
    echo "mcp-servers: the install has no $entry" >&2
    exit 1
  fi
done

echo "AGENTLOOP_MCP_EVERYTHING=$everything"
echo "AGENTLOOP_MCP_FILESYSTEM=$filesystem"
