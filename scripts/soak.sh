#!/usr/bin/env bash
# The soak suite (issue 16): builds the release binary, runs `iosets soak` (every scenario,
# full size), prints the summary table and copies it to the file given as argument.
# Exits non-zero if any scenario fails.
#
#   scripts/soak.sh [TABLE_FILE] [iosets soak flags...]
#   e.g. scripts/soak.sh soak-table.txt --out runs/soak
#        scripts/soak.sh /dev/null --quick --only kill9,sigterm
set -euo pipefail
cd "$(dirname "$0")/.."
table="${1:-soak-table.txt}"
shift || true
cargo build --release -p iosets-cli
bin="${CARGO_TARGET_DIR:-target}/release/iosets"
set +e
"$bin" soak "$@" | tee "$table"
status=${PIPESTATUS[0]}
set -e
echo "soak: table in $table (exit $status)"
exit "$status"
