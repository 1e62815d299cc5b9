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
OUT=${1:-target-period/period-bench}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-period}
VENV=target-period/venv

nice -n 19 cargo run -q --release -p iosets-period --example period_accuracy -- "$OUT" >&2

if [ "${SKIP_FTIO:-0}" != 1 ]; then
    if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import ftio' 2>/dev/null; then
        python3 -m venv "$VENV"
        "$VENV/bin/pip" install -q ftio-hpc
    fi
    "$VENV/bin/python" -c 'import importlib.metadata as m; print("ftio-hpc", m.version("ftio-hpc"))' >&2
    nice -n 19 "$VENV/bin/python" bench/period_ftio.py "$OUT" 2>/dev/null
fi
python3 bench/period_report.py "$OUT"
