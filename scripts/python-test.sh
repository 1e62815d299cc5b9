#!/usr/bin/env bash
# Builds the Python bindings (python/: maturin + PyO3, module `iosets`) into a virtual environment
# and runs their pytest tests (python/tests), comparing with the `iosets` command built from the
# same tree. Bounded: every step has a hard timeout.
#
#   bash scripts/python-test.sh            # venv under ${CARGO_TARGET_DIR:-target}/python-venv
#
# The venv is reused when present (maturin and pytest come from PyPI the first time; Debian 12
# forbids pip into the system Python, hence the venv). python3 with its venv module is installed
# by scripts/ecosystem-tools.sh; without it this script fails, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=${CARGO_TARGET_DIR:-target}
VENV=${IOSETS_PY_VENV:-$TARGET/python-venv}
# Absolute: pip runs maturin from a temporary directory, through PATH.
case "$TARGET" in /*) ;; *) TARGET="$PWD/$TARGET" ;; esac
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac

if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  echo "python3 with venv is missing: run bash scripts/ecosystem-tools.sh (installs python3-venv)" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  timeout 120 python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import pytest, pandas' 2>/dev/null || ! [ -x "$VENV/bin/maturin" ]; then
  # pandas: the tests load sweep() rows into a DataFrame, as users do.
  timeout 300 "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    "maturin>=1.5,<2" "pytest>=7" "pandas>=2"
fi
export PATH="$VENV/bin:$PATH"

# The command the tests compare with (already built by `cargo test --release` in scripts/test.sh).
timeout 900 cargo build -q --release --locked -p iosets-cli
export IOSETS_BIN="$TARGET/release/iosets"

# A release build of python/ (its own crate in the workspace, same target dir), installed.
timeout 900 "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
  --no-build-isolation --force-reinstall --no-deps ./python

# From /: the tests import the installed package, not the source tree.
(cd / && timeout 300 "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$OLDPWD/python/tests")
