#!/usr/bin/env bash
# Change points of `iosets detect` (issue 32) against FTIO with its change-point windows.
#
#   bench/period_changes.sh [OUT]      (default OUT: target-period/period-changes)
#
# 1. builds and runs crates/period/examples/period_changes.rs: 84 traces whose period changes
#    once or twice, written as FTIO bandwidth-step JSON and segmented by iosets
#    (OUT/iosets.jsonl), and the 10,000-phase speed cases (OUT/speed.jsonl);
# 2. makes a virtual environment under target-period/venv if there is none, installs the PyPI
#    package ftio-hpc into it (as bench/period_accuracy.sh does), and runs FTIO on the same
#    traces: whole, and its online predictor with -w cusum, ph and adwin replayed in process
#    (bench/period_changes_ftio.py; OUT/ftio.jsonl);
# 3. prints the markdown tables (bench/period_changes_report.py).
# FTIO failures are reported in the tables, never hidden. SKIP_FTIO=1 runs iosets only.
# SCALE=0.1 multiplies every period by 0.1 (periods of 1-80 s, nearer the seconds FTIO's
# change-point windows were made for).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib/ftio.sh
. bench/lib/ftio.sh
period_bench period_changes bench/period_changes_ftio.py bench/period_changes_report.py "${1:-target-period/period-changes}"
