#!/usr/bin/env bash
# Between-scenario hygiene cost: N pairs of whole runs, hygiene on and off (`--kernel-args
# ue.hygiene=off`), alternating, each under `flock /tmp/ue-boot.lock` so boots of other
# sessions do not overlap them. For each shared boot it prints the scenarios' own time (the sum
# of time_ms), what the agent says hygiene took (its `between-scenario hygiene` console line)
# and the supervisor's time between scenarios (first to last `ue-agent: begin` on the console,
# minus the time_ms of all but the last scenario). Usage: hygiene-cost.sh [N] [run args...]
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-1}
shift || true
cargo build -q -p xtask
for i in $(seq "$n"); do
    for mode in on off; do
        out=$(mktemp -d)
        extra=()
        if [ "$mode" = off ]; then extra=(--kernel-args ue.hygiene=off); fi
        flock /tmp/ue-boot.lock target/debug/xtask run "$@" "${extra[@]}" --results "$out" >"$out/log" 2>&1 || true
        run=$(find "$out" -mindepth 1 -maxdepth 1 -type d ! -name latest | head -1)
        for dir in "$run"/*/; do
            boot=$(basename "$dir")
            case "$boot" in *isolated* | *resume*) continue ;; esac
            [ -f "$dir/results.ktap" ] || continue
            times=$(grep -E '^(not )?ok [0-9]+ ' "$dir/results.ktap" | grep -o 'time_ms=[0-9]*' | cut -d= -f2)
            total=$(echo "$times" | awk '{s += $1} END {print s + 0}')
            but_last=$(echo "$times" | awk '{s += $1; l = $1} END {print s - l}')
            span=$(grep -o '\[ *[0-9.]*\] ue-agent: begin' "$dir/console.log" | tr -d '[]' |
                awk 'NR == 1 {f = $1} {l = $1} END {printf "%.0f", (l - f) * 1000}')
            hygiene=$(grep -o 'between-scenario hygiene: .*' "$dir/console.log" || echo "between-scenario hygiene: off")
            echo "run $i hygiene $mode $boot: scenarios $total ms, between scenarios $((span - but_last)) ms, $hygiene"
        done
        rm -rf "$out"
    done
done
