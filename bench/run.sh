#!/usr/bin/env bash
# Runs the criterion benchmarks RUNS times (default 3) and prints the tables BENCHMARKS.md quotes:
# for each case the median of the per-run medians, the min-max range over runs, and the ratio to
# noop measured in the same runs; then each run's own medians and ratios to noop, with the load
# average at the end of the run. Several runs because a shared 2-core VM varies by tens of percent
# from one run to the next.
#   bash bench/run.sh            # policy hot path + runtime throughput
#   bash bench/run.sh policies   # only the policy hot path
#   RUNS=5 bash bench/run.sh
#   FILTER=enqueue_dispatch bash bench/run.sh policies   # only the benches whose name matches
# Each run writes its criterion results to target/bench-runs/<run>/ (CRITERION_HOME), so the
# shared target/criterion of other benches is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
runs=${RUNS:-3}
filter=${FILTER:-}
out=target/bench-runs
case "$what" in all | policies | runtime) ;; *)
  echo "usage: bash bench/run.sh [all|policies|runtime]" >&2
  exit 2
  ;;
esac
rm -rf "$out"
# Build first, so that no run measures a machine busy compiling.
if [ "$what" = all ] || [ "$what" = policies ]; then
  cargo bench -q -p iosets-policy --bench policies --no-run >/dev/null 2>&1
fi
if [ "$what" = all ] || [ "$what" = runtime ]; then
  cargo bench -q -p iosets-runtime --bench throughput --no-run >/dev/null 2>&1
fi
for run in $(seq 1 "$runs"); do
  mkdir -p "$out/$run"
  home=$(cd "$out/$run" && pwd)
  if [ "$what" = all ] || [ "$what" = policies ]; then
    CRITERION_HOME="$home" cargo bench -q -p iosets-policy --bench policies -- ${filter:+"$filter"} >/dev/null 2>&1
  fi
  if [ "$what" = all ] || [ "$what" = runtime ]; then
    CRITERION_HOME="$home" cargo bench -q -p iosets-runtime --bench throughput -- ${filter:+"$filter"} >/dev/null 2>&1
  fi
  cut -d' ' -f1-3 /proc/loadavg >"$out/$run/loadavg"
  echo "run $run of $runs done (load average $(cat "$out/$run/loadavg"))" >&2
done
python3 bench/table.py "$out"/*
