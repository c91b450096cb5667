#!/usr/bin/env bash
# Installs the Python A2A peer used by the agentloop-a2a integration tests: the official
# a2a-sdk (server framework) and a2a-proof, in a venv kept outside the repository.
# Idempotent: a second run with the same versions only prints the interpreter.
# Prints `AGENTLOOP_A2A_PYTHON=<venv python>` as its last line; export it to run the tests:
#   eval "$(scripts/a2a/install.sh | tail -n 1 | sed 's/^/export /')"
set -euo pipefail

A2A_SDK_VERSION="1.3.0"
A2A_PROOF_VERSION="0.16.0"
PYTHON="${PYTHON:-python3}"
CACHE="${AGENTLOOP_CACHE:-$HOME/.cache/agentloop}"
VENV="$CACHE/a2a-venv-sdk${A2A_SDK_VERSION}-proof${A2A_PROOF_VERSION}"
MARKER="$VENV/.agentloop-installed"

if [ ! -f "$MARKER" ]; then
    mkdir -p "$CACHE"
    if [ ! -x "$VENV/bin/python" ]; then
        "$PYTHON" -m venv "$VENV" >&2
    fi
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "a2a-sdk[http-server]==${A2A_SDK_VERSION}" \
        "a2a-proof==${A2A_PROOF_VERSION}" \
        "uvicorn" >&2
    # Fails (and leaves no marker) if the server framework is not importable.
    "$VENV/bin/python" -c "import a2a.server.routes, a2a.server.request_handlers, uvicorn, starlette" >&2
    touch "$MARKER"
fi

echo "AGENTLOOP_A2A_PYTHON=$VENV/bin/python"
