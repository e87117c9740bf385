#!/usr/bin/env bash
# Patch to verdict: `cargo xtask validate` with a one-line patch to trace_events_user.c on both
# arches, twice. Each run gets a patch of its own (a comment with a fresh tag), so the patched
# kernel is a real incremental build every time; the first run may have to run the baseline
# (cold-baseline path), the second finds its results remembered (warm path).
# Usage: patch-to-verdict.sh [RESULTS_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-$(mktemp -d)}
mkdir -p "$out"
cargo build -q -p xtask
for run in 1 2; do
    patch="$out/touch-$run-$$.patch"
    sed "s|touched by the incremental-rebuild benchmark|touched by patch-to-verdict $run $$ $(date +%s%N)|" \
        xtask/bench/touch-user-events.patch > "$patch"
    start=$(date +%s.%N)
    target/debug/xtask validate --patch "$patch" --arch all --results "$out" > "$out/validate-$run.log" 2>&1 || true
    end=$(date +%s.%N)
    echo "run $run: patch to verdict $(echo "$end - $start" | bc) s ($(grep -c 'the baseline was run before' "$out/validate-$run.log") baseline run(s) reused)"
    grep -E "^(REGRESSED|NO REGRESSION)" "$out/validate-$run.log" | head -1
done
