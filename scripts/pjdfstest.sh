#!/usr/bin/env bash
# Runs the POSIX conformance suite pjdfstest (Rust rewrite, crates.io
# `pjdfstest`, installed by scripts/fs-tools.sh) in a directory and scores it.
#
# Usage: scripts/pjdfstest.sh DIR [--expected FILE] [--config FILE]
#            [--naptime SECS] [--secondary DIR2] [--timeout SECS]
#            [--out DIR] [-- PATTERN...]
#   DIR            directory to test in (e.g. an iosets mount); pjdfstest makes
#                  and removes a temporary directory inside it. Must be root.
#   --expected F   known failures: one case name per line; `# reason` after the
#                  name or on its own line. Without it the list is empty.
#   --config F     pjdfstest TOML config to use instead of the built-in one
#                  (features posix_fallocate, rename_ctime, utime_now,
#                  utimensat; naptime; default dummy users nobody and tests)
#   --naptime S    naptime of the built-in config (default 0.1 s: must exceed
#                  the timestamp granularity of the file system under test)
#   --secondary D  a directory on another file system (enables the EXDEV cases)
#   --timeout S    bound on the whole run (default 900 s)
#   --out D        where the log and lists go (default <repo>/target/pjdfstest)
#   -- PATTERN...  only run cases whose name contains a pattern
#
# Prints `pjdfstest: PASSED/TOTAL passed, F failed, S skipped`, writes the
# sorted failing case names to OUT/<label>.failures (label from DIR) and the
# full output to OUT/<label>.log.
# Exit status: 0 no failure outside the expected list (expected failures that
# did not fail are listed, not fatal); 1 new failures (listed); 2 bad
# arguments; 3 the run did not complete (timeout, crash, unparsable output).
set -euo pipefail
export LC_ALL=C

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() { sed -n '5,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
indent() { sed 's/^/  /'; }
die() { echo "pjdfstest.sh: $*" >&2; exit 2; }

dir="" expected="" config="" naptime=0.1 secondary="" timeout_s=900
out=$REPO/target/pjdfstest
patterns=()
while [ $# -gt 0 ]; do
  case "$1" in
    --expected) [ $# -ge 2 ] || die "--expected needs a file"; expected=$2; shift 2 ;;
    --config) [ $# -ge 2 ] || die "--config needs a file"; config=$2; shift 2 ;;
    --naptime) [ $# -ge 2 ] || die "--naptime needs seconds"; naptime=$2; shift 2 ;;
    --secondary) [ $# -ge 2 ] || die "--secondary needs a directory"; secondary=$2; shift 2 ;;
    --timeout) [ $# -ge 2 ] || die "--timeout needs seconds"; timeout_s=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; patterns=("$@"); break ;;
    -*) usage >&2; die "unknown option '$1'" ;;
    *) [ -z "$dir" ] || die "more than one DIR given ('$dir', '$1')"; dir=$1; shift ;;
  esac
done
[ -n "$dir" ] || { usage >&2; die "missing DIR"; }
# Every look at DIR is bounded: a dead FUSE mount must not hang the caller.
rc=0; timeout -k 5 30 test -d "$dir" || rc=$?
if [ $rc = 124 ] || [ $rc = 137 ]; then
  echo "pjdfstest.sh: $dir does not respond (30 s)" >&2
  exit 3
fi
[ $rc = 0 ] || die "not a directory: $dir"
[ -z "$expected" ] || [ -f "$expected" ] || die "no such expected-failures file: $expected"
[ -z "$config" ] || [ -f "$config" ] || die "no such config file: $config"
[ -z "$secondary" ] || [ -d "$secondary" ] || die "not a directory: $secondary"
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive integer"
[[ $naptime =~ ^[0-9]*\.?[0-9]+$ ]] || die "--naptime must be a number of seconds"
[ "$(id -u)" = 0 ] || die "must run as root (pjdfstest switches users and chowns)"

bash "$REPO/scripts/fs-tools.sh" >/dev/null
PJDFSTEST=${IOSETS_TOOLS_ROOT:-$REPO/target/tools}/bin/pjdfstest

dir=$(timeout -k 5 30 realpath -- "$dir")
label=$(echo "${dir#/}" | tr -c 'A-Za-z0-9._\n-' '_')
[ -n "$label" ] || label=root
mkdir -p "$out"
log=$out/$label.log
failures=$out/$label.failures
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Warnings about setups that make whole groups of cases fail for no fault of
# the file system.
fstype=$(timeout -k 5 30 findmnt -n -o FSTYPE --target "$dir" 2>/dev/null || true)
fsopts=$(timeout -k 5 30 findmnt -n -o OPTIONS --target "$dir" 2>/dev/null || true)
if [[ $fstype == fuse* ]] && [[ ,$fsopts, != *,allow_other,* ]]; then
  echo "pjdfstest.sh: WARNING: $dir is a FUSE mount without allow_other:" \
    "cases that switch to the dummy users will fail" >&2
fi
if ! runuser -u nobody -- test -x "$dir" 2>/dev/null; then
  echo "pjdfstest.sh: WARNING: user nobody cannot reach $dir (search permission on a parent)" >&2
fi

if [ -z "$config" ]; then
  config=$work/pjdfstest.toml
  cat >"$config" <<EOF
[features]
posix_fallocate = {}
rename_ctime = {}
utime_now = {}
utimensat = {}

[settings]
naptime = $naptime
allow_remount = false
EOF
fi

args=(-c "$config" -p "$dir")
[ -z "$secondary" ] || args+=(-s "$secondary")
args+=("${patterns[@]}")

# Run under timeout (which kills the whole process group), in the
# background, and give up waiting if even SIGKILL does not end it (a process
# stuck in the kernel on a dead FUSE mount), so the caller never hangs.
before=$(timeout -k 5 30 ls -A "$dir")
# pjdfstest removes its temporary directory (.tmpXXXXXX) when it ends, but on
# FUSE that can fail (ENOTEMPTY while an unlinked open file is still a
# .fuse_hidden* entry) and a killed run leaves it too: remove what is new.
remove_leftovers() {
  local left
  comm -13 <(echo "$before") <(timeout -k 5 30 ls -A "$dir") | { grep "^\.tmp" || true; } | while read -r left; do
    timeout -k 5 120 rm -rf "${dir:?}/$left" ||
      echo "pjdfstest.sh: WARNING: could not remove $dir/$left" >&2
  done
}
start=$(date +%s.%N)
(cd "$work" && exec env NO_COLOR=1 RUST_BACKTRACE=0 timeout -k 20 "$timeout_s" \
  "$PJDFSTEST" "${args[@]}") >"$log" 2>&1 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null; exit 130' INT TERM
deadline=$((SECONDS + timeout_s + 60))
while kill -0 "$pid" 2>/dev/null; do
  if [ $SECONDS -ge $deadline ]; then
    echo "pjdfstest.sh: pjdfstest (pid $pid) survived SIGKILL: stuck in the file system;" \
      "abort the mount (umount -l $dir, or echo 1 > /sys/fs/fuse/connections/N/abort). Log: $log" >&2
    exit 3
  fi
  sleep 0.2
done
rc=0
wait "$pid" || rc=$?
elapsed=$(echo "$start $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}')
if [ $rc = 124 ] || [ $rc = 137 ]; then
  echo "pjdfstest.sh: pjdfstest timed out after ${timeout_s} s in $dir; log: $log" >&2
  remove_leftovers
  exit 3
fi
remove_leftovers

# Parse "<case name>   ok|skipped|FAILED|failed as expected|PASSED UNEXPECTEDLY"
# (the last two appear when the config has settings.expected_failures).
sed 's/\x1b\[[0-9;]*m//g' "$log" | awk -v work="$work" '
  /^[A-Za-z0-9_:]+ +(ok|skipped|FAILED|failed as expected|PASSED UNEXPECTEDLY)$/ {
    name = $1
    if ($0 ~ / ok$/ || $0 ~ /PASSED UNEXPECTEDLY$/) print name > (work "/passed")
    else if ($0 ~ / skipped$/) print name > (work "/skipped")
    else print name > (work "/failed")
  }
  /^Summary: / { for (i = 1; i <= NF; i++) if ($i == "total") total = $(i - 1); print total > (work "/total") }'
touch "$work/passed" "$work/skipped" "$work/failed"
sort -u "$work/failed" >"$failures"
n_pass=$(wc -l <"$work/passed")
n_skip=$(wc -l <"$work/skipped")
n_fail=$(wc -l <"$failures")
n_total=$((n_pass + n_skip + n_fail))
if [ ! -s "$work/total" ] || [ "$(cat "$work/total")" != "$n_total" ]; then
  echo "pjdfstest.sh: could not score the run (exit $rc; summary total '$(cat "$work/total" 2>/dev/null)'," \
    "parsed $n_total cases); log: $log" >&2
  tail -n 5 "$log" >&2
  exit 3
fi

echo "pjdfstest: $n_pass/$n_total passed, $n_fail failed, $n_skip skipped ($dir, ${elapsed} s)"
echo "pjdfstest: failing cases in $failures, full log in $log"

# Compare with the expected failures.
sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "${expected:-/dev/null}" | sort -u >"$work/expected"
all=$(sort -u "$work/passed" "$work/skipped" "$failures")
unknown=$(comm -23 "$work/expected" <(echo "$all"))
if [ -n "$unknown" ] && [ ${#patterns[@]} = 0 ]; then
  echo "pjdfstest: WARNING: names in $expected that are no case of this run:"
  indent <<<"$unknown"
fi
fixed=$(comm -12 "$work/expected" <(sort -u "$work/passed"))
if [ -n "$fixed" ]; then
  echo "pjdfstest: expected failures that now pass (tighten $expected):"
  indent <<<"$fixed"
fi
new=$(comm -23 "$failures" "$work/expected")
if [ -n "$new" ]; then
  echo "pjdfstest: $(echo "$new" | wc -l) NEW failure(s), not in ${expected:-an expected list}:"
  indent <<<"$new"
  exit 1
fi
if [ "$n_fail" -gt 0 ]; then
  echo "pjdfstest: all $n_fail failures are expected"
fi
exit 0
