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
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-target-period/period-changes}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-period}
VENV=target-period/venv

nice -n 19 cargo run -q --release -p iosets-period --example period_changes -- "$OUT" >&2

if [ "${SKIP_FTIO:-0}" != 1 ]; then
    if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import ftio' 2>/dev/null; then
        python3 -m venv "$VENV"
        "$VENV/bin/pip" install -q ftio-hpc
    fi
    "$VENV/bin/python" -c 'import importlib.metadata as m; print("ftio-hpc", m.version("ftio-hpc"))' >&2
    nice -n 19 "$VENV/bin/python" bench/period_changes_ftio.py "$OUT" 2>/dev/null
fi
python3 bench/period_changes_report.py "$OUT"
