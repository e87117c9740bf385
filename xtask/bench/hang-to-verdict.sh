#!/usr/bin/env bash
# Hang to verdict: boots x86_64 with the kernel patched to deadlock DIAG_IOCSDEL on one name
# (xtask/test_data/patches/deadlock-on-delete.patch) and the fault suite, N times, and prints the
# seconds from the hung scenario's `ue-begin` on the result channel to its boot's verdict.json,
# as a user watching the run folder would see them. Usage: hang-to-verdict.sh [N]
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-3}
cargo build -q -p xtask
for i in $(seq "$n"); do
    out=$(mktemp -d)
    target/debug/xtask boot --arch x86_64 --patch xtask/test_data/patches/deadlock-on-delete.patch \
        --suite xtask/test_data/suites/faults/fault.yaml --results "$out" >"$out/log" 2>&1 &
    pid=$!
    hang="" verdict=""
    while kill -0 "$pid" 2>/dev/null; do
        run=$(find "$out" -mindepth 1 -maxdepth 1 -type d ! -name latest | head -1)
        if [ -z "$hang" ] && [ -n "$run" ] && grep -q "ue-begin 2 fault/deadlock" "$run/x86_64/results.ktap" 2>/dev/null; then
            hang=$(date +%s.%N)
        fi
        if [ -n "$hang" ] && [ -z "$verdict" ] && [ -f "$run/x86_64/verdict.json" ]; then
            verdict=$(date +%s.%N)
        fi
        sleep 0.02
    done
    wait "$pid" || true
    echo "run $i: hang to verdict $(echo "$verdict - $hang" | bc) s"
    rm -rf "$out"
done
