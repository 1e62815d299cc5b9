#!/usr/bin/env bash
# Runs the criterion benchmarks RUNS times (default 3) and prints the tables BENCHMARKS.md quotes:
# for each case the median of the per-run medians, the min-max range over runs, and the ratio to
# noop measured in the same runs. Several runs because a shared 2-core VM varies by tens of percent
# from one run to the next.
#   bash bench/run.sh            # policy hot path + runtime throughput
#   bash bench/run.sh policies   # only the policy hot path
#   RUNS=5 bash bench/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
runs=${RUNS:-3}
out=target/bench-runs
rm -rf "$out"
for run in $(seq 1 "$runs"); do
  rm -rf target/criterion
  if [ "$what" = all ] || [ "$what" = policies ]; then
    cargo bench -q -p iosets-policy --bench policies >/dev/null 2>&1
  fi
  if [ "$what" = all ] || [ "$what" = runtime ]; then
    cargo bench -q -p iosets-runtime --bench throughput >/dev/null 2>&1
  fi
  mkdir -p "$out/$run"
  cp -r target/criterion/. "$out/$run/"
  echo "run $run of $runs done" >&2
done
python3 bench/table.py "$out"/*
