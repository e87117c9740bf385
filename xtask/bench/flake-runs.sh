#!/usr/bin/env bash
# The flake benchmark: the gating plan run N times in a row on pristine kernels, each run
# recorded in a history of its own, then `history flakes` over it. A false red is a run that
# did not exit 0; the re-run of unstable failures is off (`--no-rerun-unstable`), so a flake
# shows as the red it would be without the history's help. Warm: build the kernels first
# (`cargo xtask kernel --arch ARCHES [--kernel-version V]`) so every run times the same work.
# Usage: flake-runs.sh RUNS ARCHES [KERNEL_VERSION]   e.g. flake-runs.sh 30 x86_64,arm64 7.3
# Writes /tmp/flakes-<arches>-<version>/: history.sqlite, runs.tsv (run, exit code, milliseconds),
# the runs' folders under results/, the flakes report (flakes.txt), and prints the tally.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:?RUNS}
arches=${2:?ARCHES}
version=${3:-}
label=${version:-default}
out=/tmp/flakes-${arches//,/+}-$label
mkdir -p "$out"
db="sqlite:$out/history.sqlite"
kernel=()
if [[ -n $version ]]; then kernel=(--kernel-version "$version"); fi
cargo build --quiet -p xtask
for i in $(seq 1 "$runs"); do
  start=$(date +%s%N)
  set +e
  cargo xtask --history "$db" run --arch "$arches" "${kernel[@]}" --no-rerun-unstable \
    --results "$out/results" >"$out/run-$i.log" 2>&1
  code=$?
  set -e
  end=$(date +%s%N)
  secs=$(( (end - start) / 1000000 ))
  printf '%s\t%s\t%s\n' "$i" "$code" "$secs" | tee -a "$out/runs.tsv"
  if [[ $code -ne 0 && $code -ne 1 ]]; then
    echo "run $i ended with $code (not a verdict): see $out/run-$i.log" >&2
  fi
done
cargo xtask --history "$db" history flakes >"$out/flakes.txt"
reds=$(awk -F'\t' '$2 != 0' "$out/runs.tsv" | wc -l)
total=$(wc -l <"$out/runs.tsv")
echo "false reds: $reds of $total runs ($arches, kernel $label); flakes: $out/flakes.txt"
cat "$out/flakes.txt"
