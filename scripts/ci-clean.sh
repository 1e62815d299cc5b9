#!/usr/bin/env bash
# The test command as CI runs it: a fresh clone of a commit (nothing built, no target
# directory), then `bash scripts/test.sh` in it. Prints test.sh's own time per stage at the end;
# BENCHMARKS.md ("Building the tests") holds the figures. Removes the clone afterwards, unless
# --keep. System packages already installed stay installed (a fresh CI machine installs them
# too, which this does not measure).
#
# Usage: bash scripts/ci-clean.sh [--keep] [REV]      (REV: default HEAD; a log goes to
#        $TMPDIR/iosets-ci-clean-<rev>.log)
set -euo pipefail
keep=0
rev=HEAD
for a in "$@"; do
  case "$a" in
    --keep) keep=1 ;;
    -h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "ci-clean.sh: unknown option $a" >&2; exit 2 ;;
    *) rev=$a ;;
  esac
done
repo=$(cd "$(dirname "$0")/.." && pwd)
sha=$(git -C "$repo" rev-parse --short "$rev^{commit}") || {
  echo "ci-clean.sh: $rev is not a commit of $repo" >&2
  exit 2
}
dir=$(mktemp -d "${TMPDIR:-/tmp}/iosets-ci-clean-$sha.XXXXXX")
log="${TMPDIR:-/tmp}/iosets-ci-clean-$sha.log"
cleanup() { [[ $keep = 1 ]] || rm -rf "$dir"; }
trap cleanup EXIT
git clone -q "$repo" "$dir/iosets"
git -C "$dir/iosets" checkout -q "$sha"
echo "ci-clean.sh: $sha in $dir/iosets; log $log"
rc=0
(cd "$dir/iosets" && bash scripts/test.sh) >"$log" 2>&1 || rc=$?
sed -n '/^== time per stage/,$p' "$log"
echo "ci-clean.sh: exit $rc"
exit "$rc"
