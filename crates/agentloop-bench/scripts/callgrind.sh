#!/usr/bin/env bash
# Instructions per model round trip, counted by callgrind (reproducible on a busy machine,
# user space only: the kernel's share, the same for every driver, is not counted).
#
#   crates/agentloop-bench/scripts/callgrind.sh [bin-dir]
#
# Needs valgrind and the release binaries (`cargo build --release -p agentloop-bench --bins`).
# For each driver (floor, agentloop) and mode (JSON, SSE) it runs `bench-driver` under
# callgrind twice, with 5 and 25 measured runs of the K=10 task, and divides the difference
# by the round trips in between (so start-up and warm-up cancel out). Then the history
# scenario, non-streamed: one run with K = 10, 110, 900 and 1000 tool rounds; the instructions
# per round of rounds 11-110 and 901-1000, without the request-body encoding (the inclusive
# cost of the floor's body serializer and of agentloop's `WireFormat::encode_json`).
set -euo pipefail
bin=${1:-${CARGO_TARGET_DIR:-target}/release}
out=$(mktemp -d)
trap 'kill "$mock" 2>/dev/null; rm -rf "$out"' EXIT
"$bin/mockllm" --listen 127.0.0.1:0 --max-seconds 3600 >"$out/mock.txt" &
mock=$!
for _ in $(seq 100); do grep -q listening "$out/mock.txt" && break; sleep 0.1; done
url=$(sed -n 's/^listening //p' "$out/mock.txt")

total() { grep -m1 '^summary:' "$1" | awk '{print $2}'; }
inclusive() { # largest inclusive cost of a function matching $2
  callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
    awk -v pat="$2" 'index($0, pat) { gsub(",", "", $1); if ($1 + 0 > max) max = $1 + 0 } END { print max + 0 }'
}
run() { # driver, extra args..., output file
  local driver=$1 file=$2; shift 2
  valgrind --tool=callgrind --callgrind-out-file="$file" "$bin/bench-driver" --driver "$driver" \
    --url "$url" --p 1 --latency-ms 0 "$@" >/dev/null 2>&1
}

echo "instructions per round trip, sequential K=10 (11 round trips per run)"
for stream in "" "--stream"; do
  for driver in floor agentloop; do
    run "$driver" "$out/a" --k 10 --warmup 2 --runs 5 $stream
    run "$driver" "$out/b" --k 10 --warmup 2 --runs 25 $stream
    echo "  ${driver} ${stream:-(json)}: $(( ($(total "$out/b") - $(total "$out/a")) / (20 * 11) ))"
  done
done

echo "history: instructions per round without the body encoding (rounds 11-110 / 901-1000)"
for driver in floor agentloop; do
  pattern='WireFormat>::encode_json'
  [ "$driver" = floor ] && pattern='floor::Body>::serialize'
  declare -A net
  for k in 10 110 900 1000; do
    run "$driver" "$out/h$k" --k "$k" --warmup 0 --runs 1
    net[$k]=$(( $(total "$out/h$k") - $(inclusive "$out/h$k" "$pattern") ))
  done
  early=$(( (net[110] - net[10]) / 100 ))
  late=$(( (net[1000] - net[900]) / 100 ))
  echo "  ${driver}: ${early} / ${late} (growth $(awk -v a="$early" -v b="$late" 'BEGIN { printf "%.2f", b / a }'))"
  unset net
done
