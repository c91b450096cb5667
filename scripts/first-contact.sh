#!/usr/bin/env bash
# First contact: the README's first command as a new user meets it — a fresh clone, an empty
# home directory, an empty cargo registry and an empty target directory — split into its parts
# and timed: downloading the crates, building (cargo --timings), fetching the model, the first
# answer. docs/DEVELOPMENT.md ("First contact") keeps today's figures.
#
#   bash scripts/first-contact.sh [--warm-registry] [--question Q] [--dir DIR] [--commit REV] [--keep]
#
# --warm-registry  reuse the cargo home (registry, crate sources) of an earlier run in DIR:
#                  the "warm registry, cold target" case. Without it everything starts empty.
# --question Q     what to ask (default: a question that is not the README's example).
# --dir DIR        where the clone, cargo home, home and target live (default: a temp dir).
# --commit REV     measure that commit instead of HEAD (an earlier one, to compare).
# --keep           leave the target directory (default: removed at the end; the report and
#                  cargo's timing page stay in DIR).
#
# Clones the repository's HEAD, or REV (commit first what you want measured). Needs the network (the
# crate registry and the Python package index), as a new user has it.
set -euo pipefail

repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
question="How many legs do 3 spiders have in total?"
dir="" warm=0 keep=0 rev=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --warm-registry) warm=1 ;;
    --question) question=$2; shift ;;
    --dir) dir=$2; shift ;;
    --commit) rev=$2; shift ;;
    --keep) keep=1 ;;
    *) echo "first-contact: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z "$dir" ]]; then
  [[ $warm -eq 1 ]] && { echo "first-contact: --warm-registry needs --dir of an earlier run" >&2; exit 2; }
  dir=$(mktemp -d "${TMPDIR:-/tmp}/first-contact.XXXXXX")
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# The toolchain stays the machine's (rustup's home is not the user's first-contact state).
export RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}"
export CARGO_HOME="$dir/cargo-home" HOME="$dir/home" CARGO_TARGET_DIR="$dir/target"
unset AGENTLOOP_CACHE XDG_CACHE_HOME CARGO_BUILD_JOBS RUSTC_WRAPPER CARGO_INCREMENTAL
export CARGO_TERM_COLOR=never
if [[ $warm -eq 0 ]]; then rm -rf "$CARGO_HOME"; fi
rm -rf "$HOME" "$CARGO_TARGET_DIR" "$dir/agentloop"
mkdir -p "$HOME" "$CARGO_HOME"

log="$dir/first-contact.log"
: >"$log"
say() { echo "$*" | tee -a "$log"; }
clock() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

git clone --quiet "$repo" "$dir/agentloop"
cd "$dir/agentloop"
if [[ -n "$rev" ]]; then git checkout --quiet "$rev"; fi
commit=$(git rev-parse --short HEAD)
say "first contact: $commit, $(nproc) cores, $(rustc -V), registry $([[ $warm -eq 1 ]] && echo warm || echo cold), target cold"
say "question: $question"

t0=$(clock)
cargo fetch --locked >>"$log" 2>&1
t1=$(clock)
cargo build -p agentloop-cli --timings >>"$log" 2>&1
t2=$(clock)
bin="$CARGO_TARGET_DIR/debug/agentloop"
"$bin" model fetch >>"$log" 2>&1
t3=$(clock)
answer=$(cargo run -q -p agentloop-cli -- run "$question" 2>>"$log")
t4=$(clock)

timing_page=$(ls -t "$CARGO_TARGET_DIR"/cargo-timings/cargo-timing-*.html 2>/dev/null | head -1 || true)
[[ -n "$timing_page" ]] && cp "$timing_page" "$dir/cargo-timing.html"
say "answer: $answer"
say ""
say "| part | seconds |"
say "|---|---:|"
say "| downloading crates (\`cargo fetch\`) | $(elapsed "$t0" "$t1") |"
say "| building (\`cargo build -p agentloop-cli\`) | $(elapsed "$t1" "$t2") |"
say "| fetching the model (\`agentloop model fetch\`) | $(elapsed "$t2" "$t3") |"
say "| the first answer (\`cargo run … run\`) | $(elapsed "$t3" "$t4") |"
say "| **total** | **$(elapsed "$t0" "$t4")** |"
say ""
say "crates built: $(cargo tree -p agentloop-cli -e normal,build --prefix none 2>/dev/null | sed 's/ (\*)//' | sort -u | wc -l)," \
  "names with more than one version (\`cargo tree -d\`, the CLI): $(cargo tree -p agentloop-cli -e normal,build -d --depth 0 --prefix none 2>/dev/null | grep -v '^$' | sort -u | awk '{print $1}' | uniq -d | wc -l)"
say "debug binary: $(( $(stat -c %s "$bin") / 1000000 )) MB"
if [[ -n "$timing_page" ]]; then
  python3 - "$timing_page" <<'PY' | tee -a "$log"
import json, re, sys
page = open(sys.argv[1], encoding="utf-8").read()
match = re.search(r"const UNIT_DATA = (\[.*?\]);\n", page, re.S)
if not match:
    print("(no unit data in the timing page)")
    sys.exit(0)
units = json.loads(match.group(1))

def part(unit, name):
    return sum(end["end"] - end["start"] for n, end in (unit.get("sections") or []) if n == name)

total = sum(u["duration"] for u in units)
frontend = sum(part(u, "frontend") for u in units)
codegen = sum(part(u, "codegen") for u in units)
print(f"\nunits: {len(units)}, {total:.0f} s of compiling in all: {frontend:.0f} s front end, "
      f"{codegen:.0f} s code generation, {total - frontend - codegen:.0f} s other "
      "(build scripts, units without sections); wall time is less (2 cores)")
print("\n| the 20 slowest units | seconds | front end | code generation |\n|---|---:|---:|---:|")
for u in sorted(units, key=lambda u: -u["duration"])[:20]:
    target = u.get("target", "").strip()
    name = f"{u['name']} {u['version']}{(' ' + target) if target else ''}"
    split = [f"{part(u, n):.1f}" if u.get("sections") else "–" for n in ("frontend", "codegen")]
    print(f"| {name} | {u['duration']:.1f} | {split[0]} | {split[1]} |")
PY
fi
say ""
say "log: $log; cargo's timing page: $dir/cargo-timing.html"
if [[ $keep -eq 0 ]]; then rm -rf "$CARGO_TARGET_DIR"; fi
