#!/usr/bin/env bash
# Runs the criterion benchmarks and prints the tables BENCHMARKS.md quotes: medians, and each
# policy's ratio to noop measured in the same run.
#   bash bench/run.sh            # policy hot path + runtime throughput
#   bash bench/run.sh policies   # only the policy hot path
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
if [ "$what" = all ] || [ "$what" = policies ]; then
  cargo bench -p iosets-policy --bench policies >/dev/null
fi
if [ "$what" = all ] || [ "$what" = runtime ]; then
  cargo bench -p iosets-runtime --bench throughput >/dev/null
fi
python3 bench/table.py target/criterion
