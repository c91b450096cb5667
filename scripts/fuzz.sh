#!/usr/bin/env bash
# Builds the fuzz targets of fuzz/ (libFuzzer, through libfuzzer-sys, on stable Rust: the
# coverage instrumentation cargo-fuzz would add, without cargo-fuzz) and runs each for a set
# time on a corpus seeded from the test fixtures (fuzz/seeds.py).
#
#   bash scripts/fuzz.sh [--seconds N] [TARGET...]     (default: 60 s each, every target)
#
# The build and the corpus live in a cache outside the repo
# (${AGENTLOOP_CACHE:-$HOME/.cache/agentloop}/fuzz-*), so a corpus grows from run to run. A
# crash fails the script and leaves its input in .../fuzz-artifacts/TARGET/; reproduce it with
# `<cache>/fuzz-target-*/<triple>/release/TARGET <input>` (or `cargo fuzz run TARGET <input>`).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [[ ${#targets[@]} -eq 0 ]]; then
  mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^agentloop-fuzz$')
fi

cache="${AGENTLOOP_CACHE:-$HOME/.cache/agentloop}"
toolchain=$(rustc -V | tr -cd '[:alnum:].-' | cut -c1-40)
triple=$(rustc -vV | sed -n 's/^host: //p')
export CARGO_TARGET_DIR="$cache/fuzz-target-$toolchain"
export CARGO_INCREMENTAL=0
# What cargo-fuzz passes (sanitizer "none"): libFuzzer's coverage feedback, cfg(fuzzing),
# and the checks a debug build has. Given with --target, so build scripts and proc macros
# are built without them.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
echo "fuzz: building ${#targets[@]} targets" >&2
bin_args=()
for target in "${targets[@]}"; do bin_args+=(--bin "$target"); done
cargo build --locked --release --manifest-path fuzz/Cargo.toml --target "$triple" "${bin_args[@]}" >&2

seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
python3 fuzz/seeds.py "$seeds"

failed=()
for target in "${targets[@]}"; do
  corpus="$cache/fuzz-corpus/$target"
  artifacts="$cache/fuzz-artifacts/$target"
  mkdir -p "$corpus" "$artifacts" "$seeds/$target"
  echo "fuzz: $target for ${seconds}s" >&2
  log="$seeds/$target.log"
  # -timeout: an input that takes 20 s is a hang; -rss_limit_mb: a leak or a blow-up.
  if "$CARGO_TARGET_DIR/$triple/release/$target" "$corpus" "$seeds/$target" \
      -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len=262144 \
      -artifact_prefix="$artifacts/" -print_final_stats=1 >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz: $target ok: ${runs:-?} inputs, corpus $(ls "$corpus" | wc -l)" >&2
  else
    tail -n 40 "$log" >&2
    echo "fuzz: $target FAILED; the input is in $artifacts/" >&2
    failed+=("$target")
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
