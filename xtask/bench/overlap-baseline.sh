#!/usr/bin/env bash
# Does booting the baseline while the patched kernels build help on this machine? The gating
# run of the cached kernels and `xtask kernel --patch P` (a fresh one-line patch each time, so a
# real incremental build), one after the other (seq) and side by side (ovl), alternating.
# Usage: overlap-baseline.sh [ROUNDS] [RESULTS_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-2}
out=${2:-$(mktemp -d)}
mkdir -p "$out"
cargo build -q -p xtask
x=target/debug/xtask
fresh_patch() {
    local p="$out/touch-$RANDOM$RANDOM.patch"
    sed "s|touched by the incremental-rebuild benchmark|overlap $(date +%s%N)|" \
        xtask/bench/touch-user-events.patch > "$p"
    echo "$p"
}
for _ in $(seq "$rounds"); do
    for mode in seq ovl; do
        p=$(fresh_patch)
        start=$(date +%s.%N)
        if [ "$mode" = seq ]; then
            $x run --no-setup --results "$out" > "$out/run.log" 2>&1 || true
            $x kernel --no-setup --patch "$p" > "$out/kernel.log" 2>&1
        else
            $x run --no-setup --results "$out" > "$out/run.log" 2>&1 &
            $x kernel --no-setup --patch "$p" > "$out/kernel.log" 2>&1
            wait
        fi
        echo "$mode $(echo "$(date +%s.%N) - $start" | bc) s (load $(cut -d' ' -f1 /proc/loadavg))"
    done
done
