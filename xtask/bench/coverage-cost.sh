#!/usr/bin/env bash
# The cost of a coverage run against a normal run of the same plan (issue 19, part 5): the
# gating plan without the isolated 65k-event fill on the default pair, warm (both kernels of
# each kind cached: run each command once first), paired A B A B by farm-bench.
# Usage: coverage-cost.sh [RUNS] (default 3); results under /tmp/bench-cost-{plain,cov}.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
filter='!limits/running-out-of-event-ids-is-enodev'
farm-bench -n "$runs" --warmup 1 --timeout 3000 \
  --vs "sh -c 'exec cargo xtask run --filter $filter --results /tmp/bench-cost-plain >>/tmp/bench-cost-plain.log 2>&1'" \
  -- sh -c "exec cargo xtask run --coverage --filter '$filter' --results /tmp/bench-cost-cov >>/tmp/bench-cost-cov.log 2>&1"
grep -h "timings: \(scenarios\|render\|total\)" /tmp/bench-cost-plain.log /tmp/bench-cost-cov.log | tail -12
