#!/usr/bin/env bash
# The verdicts of run folders, normalised for a byte-for-byte comparison across a refactor: one
# line per scenario (arch/suite/scenario, status, judged class, reason), sorted, with durations,
# timestamps and logs left out. With two folders, prints the diff and exits 1 when they differ.
#   bash xtask/bench/verdicts.sh results/latest                 # the normalised list
#   bash xtask/bench/verdicts.sh /tmp/before/latest /tmp/after/latest
set -euo pipefail
normalise() {
    python3 - "$1/run.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
rows = []
for arch in run["arches"]:
    for s in arch["scenarios"]:
        rows.append(f'{arch["arch"]}/{s["name"]}\t{s["status"]}\t{s.get("judged") or "-"}\t{s.get("reason") or "-"}')
print(f'verdict\t{run["verdict"]["kind"]}')
print("\n".join(sorted(rows)))
PY
}
if [ $# -eq 1 ]; then
    normalise "$1"
elif [ $# -eq 2 ]; then
    a=$(mktemp) b=$(mktemp)
    trap 'rm -f "$a" "$b"' EXIT
    normalise "$1" >"$a"
    normalise "$2" >"$b"
    if diff "$a" "$b"; then
        echo "identical: $(($(wc -l <"$a") - 1)) scenario verdicts"
    else
        exit 1
    fi
else
    echo "usage: $0 RUN_FOLDER [OTHER_RUN_FOLDER]" >&2
    exit 2
fi
