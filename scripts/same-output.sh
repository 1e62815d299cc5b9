#!/usr/bin/env bash
# Compares the deterministic outputs of two `iosets` binaries, for a refactoring that must not
# change them (issue 28): `sim run` on every scenario, `detect` on every trace fixture, `policies`
# and `sim heuristics`. (The demo, the experiments and the soak run real servers: their numbers
# vary from run to run.) Prints one line per case and exits 1 if any differs.
#
#   scripts/same-output.sh OLD_BINARY NEW_BINARY
set -euo pipefail
old=${1:?usage: same-output.sh OLD_BINARY NEW_BINARY}
new=${2:?usage: same-output.sh OLD_BINARY NEW_BINARY}
here=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
differ=0

# compare NAME ARGS...: runs both binaries with ARGS from the repository's root.
compare() {
    local name=$1
    shift
    (cd "$here" && "$old" "$@" >"$out/old" 2>&1) || echo "exit $?" >>"$out/old"
    (cd "$here" && "$new" "$@" >"$out/new" 2>&1) || echo "exit $?" >>"$out/new"
    if cmp -s "$out/old" "$out/new"; then
        echo "same     $name"
    else
        echo "DIFFERS  $name"
        diff "$out/old" "$out/new" | head -20
        differ=1
    fi
}

for s in "$here"/scenarios/*.toml; do
    compare "sim run $(basename "$s")" sim run "$s"
done
for t in "$here"/crates/period/tests/fixtures/* "$here"/crates/period/tests/data/*; do
    case $t in *.py | *.md) continue ;; esac
    compare "detect $(basename "$t")" detect "$t"
done
compare policies policies
compare "sim heuristics" sim heuristics
exit $differ
