# What the period benches share (sourced from the repository's root): the iosets side built and
# run, then FTIO (PyPI ftio-hpc) in a virtual environment of its own, made at the first run.

VENV=target-period/venv
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-period}

# period_bench EXAMPLE FTIO_SCRIPT REPORT_SCRIPT OUT: runs crates/period/examples/EXAMPLE into
# OUT, then (unless SKIP_FTIO=1) FTIO_SCRIPT on OUT with the venv's python, then REPORT_SCRIPT.
period_bench() {
    local example=$1 ftio=$2 report=$3 out=$4
    nice -n 19 cargo run -q --release -p iosets-period --example "$example" -- "$out" >&2
    if [ "${SKIP_FTIO:-0}" != 1 ]; then
        if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import ftio' 2>/dev/null; then
            python3 -m venv "$VENV"
            "$VENV/bin/pip" install -q ftio-hpc
        fi
        "$VENV/bin/python" -c 'import importlib.metadata as m; print("ftio-hpc", m.version("ftio-hpc"))' >&2
        nice -n 19 "$VENV/bin/python" "$ftio" "$out" 2>/dev/null
    fi
    python3 "$report" "$out"
}
