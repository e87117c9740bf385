#!/usr/bin/env bash
# Patch to verdict with --affected: `cargo xtask validate --affected` with the one-line behaviour
# change of xtask/test_data/patches/delete-busy-errno.patch (EAGAIN for EBUSY when deleting an
# event in use), a fresh tag in a comment on the changed line each run (so the patched kernel is a
# real incremental build every time). The baseline's coverage map must be a run in RESULTS_DIR
# (`cargo xtask run --coverage --results RESULTS_DIR`). Prints the seconds to the first regression
# (validate's own clock) and to the verdict (this script's), and the exit code.
# Usage: affected-to-verdict.sh RESULTS_DIR [more validate flags]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$1
shift
mkdir -p "$out"
tag="$$ $(date +%s%N)"
patch="$out/affected-${tag// /-}.patch"
sed "s|return -EAGAIN;|return -EAGAIN; /* affected-to-verdict $tag */|" \
    xtask/test_data/patches/delete-busy-errno.patch > "$patch"
start=$(date +%s.%N)
code=0
cargo xtask validate --affected --patch "$patch" --results "$out" "$@" > "$patch.log" 2>&1 || code=$?
end=$(date +%s.%N)
first=$(grep -m1 -o 'first regression: .*' "$patch.log" || echo 'first regression: none')
echo "verdict $(echo "$end - $start" | bc) s, exit $code; $first"
