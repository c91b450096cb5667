#!/usr/bin/env bash
# The cost gate (docs/PERFORMANCE.md, "Cost gate"): instructions per loop round, counted by
# valgrind, against the baseline committed in crates/agentloop-cost/baseline.toml.
#
#   bash scripts/cost-gate.sh [--update] [--bin PATH] [--runs N]
#
# Builds `agentloop-cost` with the `cost` profile (optimized; into $CARGO_TARGET_DIR, or
# target/) unless --bin names a built one, and counts, for each scenario (the agent loop
# without a store and journaled in SQLite, each with whole and with streamed answers of an
# in-process mock model), the user-space instructions of two processes that make N and 5N
# runs (default N = 40; 11 rounds a run) with `valgrind --tool=cachegrind`. The difference
# divided by the rounds in between is the cost of a round, start-up and first use cancelled.
#
# Fails (exit 1) when a scenario costs more than THRESHOLD per cent over its baseline, and
# prints a note when one costs that much less (lower the baseline). --update rewrites the
# baseline with today's counts, the commit and the toolchain: commit it on its own, and say
# in the message why the cost changed.
set -euo pipefail
cd "$(dirname "$0")/.."

# Per cent over the baseline that fails the gate. The counts repeat to within 0.1 % from run
# to run (docs/PERFORMANCE.md, "Cost gate"); 3 % is what a real change of the loop's work
# moves, not the noise.
THRESHOLD=3
SCENARIOS=(loop-json loop-stream sqlite-json sqlite-stream)
baseline=crates/agentloop-cost/baseline.toml

update=0 bin="" runs=40
while [[ $# -gt 0 ]]; do
  case "$1" in
    --update) update=1; shift ;;
    --bin) bin="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "cost-gate: unknown argument $1" >&2; exit 2 ;;
  esac
done
if ! command -v valgrind >/dev/null; then
  echo "cost-gate: valgrind is not installed" >&2
  exit 2
fi
if [[ -z "$bin" ]]; then
  cargo build -q -p agentloop-cost --profile cost
  bin="${CARGO_TARGET_DIR:-target}/cost/agentloop-cost"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The instructions and the rounds of one process: `count SCENARIO RUNS`.
count() {
  local log="$work/$1-$2"
  if ! valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
    --log-file="$log.vg" "$bin" --scenario "$1" --runs "$2" >"$log.out" 2>"$log.err"; then
    echo "cost-gate: $1 with $2 runs failed:" >&2
    cat "$log.err" "$log.vg" >&2
    exit 2
  fi
  local instructions rounds
  instructions=$(sed -n 's/.*I *refs: *//p' "$log.vg" | tr -d ',')
  rounds=$(awk '/ rounds$/ { print $1 }' "$log.out")
  echo "$instructions $rounds"
}

# A value of the baseline: `base KEY`.
base() {
  [[ -f "$baseline" ]] || return 0
  sed -n "s/^$1 *= *\"\{0,1\}\([^\"]*\)\"\{0,1\}\$/\1/p" "$baseline" | head -n 1
}

declare -A now
for scenario in "${SCENARIOS[@]}"; do
  read -r i1 r1 < <(count "$scenario" "$runs")
  read -r i5 r5 < <(count "$scenario" $((5 * runs)))
  now[$scenario]=$(( (i5 - i1) / (r5 - r1) ))
done

toolchain=$(rustc -V)
if [[ $update -eq 1 ]]; then
  commit=$(git describe --always --dirty --abbrev=7)
  cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
  {
    echo "# Instructions per loop round (scripts/cost-gate.sh; docs/PERFORMANCE.md, \"Cost gate\")."
    echo "# Rewritten by \`scripts/cost-gate.sh --update\`: commit it on its own, saying why the"
    echo "# cost changed."
    echo "commit = \"$commit\""
    echo "toolchain = \"$toolchain\""
    echo "valgrind = \"$(valgrind --version)\""
    echo "machine = \"$(nproc) cores, $cpu\""
    echo "runs = $runs"
    echo
    echo "[instructions_per_round]"
    for scenario in "${SCENARIOS[@]}"; do
      echo "$scenario = ${now[$scenario]}"
    done
  } >"$baseline"
  echo "cost-gate: $baseline rewritten (commit $commit):"
  for scenario in "${SCENARIOS[@]}"; do
    printf '  %-14s %9d instructions / round\n' "$scenario" "${now[$scenario]}"
  done
  exit 0
fi

if [[ ! -f "$baseline" ]]; then
  echo "cost-gate: no baseline ($baseline): run scripts/cost-gate.sh --update" >&2
  exit 2
fi
echo "instructions per round: baseline of $(base commit) ($(base toolchain)) and now"
if [[ "$(base toolchain)" != "$toolchain" ]]; then
  echo "note: the toolchain is now $toolchain; counts move with the compiler"
fi
failed=0 cheaper=0
printf '  %-14s %10s %10s %8s\n' scenario baseline now delta
for scenario in "${SCENARIOS[@]}"; do
  old=$(base "$scenario")
  new=${now[$scenario]}
  if [[ -z "$old" ]]; then
    printf '  %-14s %10s %10d %8s  no baseline\n' "$scenario" - "$new" -
    failed=1
    continue
  fi
  verdict=$(awk -v o="$old" -v n="$new" -v t="$THRESHOLD" 'BEGIN {
    d = (n - o) * 100 / o
    printf "%+7.2f%% %s", d, (d > t ? "OVER" : (d < -t ? "cheaper" : "ok"))
  }')
  printf '  %-14s %10d %10d %s\n' "$scenario" "$old" "$new" "$verdict"
  case "$verdict" in
    *OVER) failed=1 ;;
    *cheaper) cheaper=1 ;;
  esac
done
if [[ $cheaper -eq 1 ]]; then
  echo "note: a scenario got cheaper by more than $THRESHOLD %: lower the baseline" \
    "(scripts/cost-gate.sh --update, committed with why)"
fi
if [[ $failed -eq 1 ]]; then
  echo "cost-gate: FAILED: a round costs more than $THRESHOLD % over the baseline" \
    "(find where with callgrind: docs/PERFORMANCE.md, \"Cost gate\"; if the cost is" \
    "wanted, scripts/cost-gate.sh --update and say why in the commit)" >&2
  exit 1
fi
echo "cost-gate: passed (threshold $THRESHOLD %)"
