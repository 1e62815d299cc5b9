#!/usr/bin/env bash
# Period detection accuracy (issue 4) and the FTIO side-by-side, on the same traces.
#
#   bench/period_accuracy.sh [OUT]      (default OUT: target-period/period-bench)
#
# 1. builds and runs crates/period/examples/period_accuracy.rs: 48 synthetic traces x {20, 5}
#    iterations, written as FTIO bandwidth-step JSON, analysed by iosets (OUT/iosets.jsonl);
# 2. makes a virtual environment under target-period/venv if there is none, installs the PyPI
#    package ftio-hpc into it, and runs FTIO in-process on the same traces (OUT/ftio.jsonl);
# 3. prints the markdown tables (bench/period_report.py).
# FTIO failures are reported in the tables, never hidden. Set SKIP_FTIO=1 to run iosets only.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib/ftio.sh
. bench/lib/ftio.sh
period_bench period_accuracy bench/period_ftio.py bench/period_report.py "${1:-target-period/period-bench}"
