#!/usr/bin/env bash
# Cross-checks `iosets sim` against SimGrid (see bench/simgrid_check.py). Installs Debian's
# python3-simgrid if it is missing, builds iosets in release mode, runs the comparison.
# Usage: bench/simgrid_check.sh [--quick] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! /usr/bin/python3 -c "import simgrid" >/dev/null 2>&1; then
  echo "python3-simgrid not found: installing it with apt-get" >&2
  apt-get update && apt-get install -y python3-simgrid
fi
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -p iosets-cli --quiet
exec /usr/bin/python3 bench/simgrid_check.py --iosets "$target/release/iosets" "$@"
