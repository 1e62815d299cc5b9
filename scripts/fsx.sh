#!/usr/bin/env bash
# Runs the File System eXerciser (crates.io `fsx`, fsx-rs, installed by
# scripts/fs-tools.sh) on one file in a directory: a reproducible random mix of
# pread/pwrite, mmap reads and writes, truncate, close/reopen, fsync,
# fdatasync and msync(MS_INVALIDATE), every read checked against a model.
#
# Usage: scripts/fsx.sh [--seed S] [--no-mmap] [--fallocate] [--config FILE]
#            [--timeout SECS] [--out DIR] DIR [N]
#   DIR           directory on the file system under test (file DIR/fsx.<pid>)
#   N             number of operations (default 20000)
#   --seed S      RNG seed (default 1; always printed, rerun with it to replay)
#   --no-mmap     no mapread/mapwrite (for FUSE mounts without mmap support)
#   --fallocate   also posix_fallocate
#   --config F    fsx TOML config instead of the built-in one (then --no-mmap
#                 and --fallocate are ignored); see fsx-rs's doc/fsx.toml
#   --timeout S   bound on the run (default 600 s)
#   --out D       on failure fsx's artifacts (.fsxgood, .fsxlog) and the
#                 output go here (default <repo>/target/fsx)
# Exit status: 0 all operations verified; 1 fsx found an error (its log dump
# is shown); 2 bad arguments; 3 timeout.
set -euo pipefail
export LC_ALL=C

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() { sed -n '7,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "fsx.sh: $*" >&2; exit 2; }

seed=1 mmap=1 fallocate=0 config="" timeout_s=600 out=$REPO/target/fsx
pos=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seed) [ $# -ge 2 ] || die "--seed needs a number"; seed=$2; shift 2 ;;
    --no-mmap) mmap=0; shift ;;
    --fallocate) fallocate=1; shift ;;
    --config) [ $# -ge 2 ] || die "--config needs a file"; config=$2; shift 2 ;;
    --timeout) [ $# -ge 2 ] || die "--timeout needs seconds"; timeout_s=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) usage >&2; die "unknown option '$1'" ;;
    *) pos+=("$1"); shift ;;
  esac
done
[ ${#pos[@]} -ge 1 ] || { usage >&2; die "missing DIR"; }
[ ${#pos[@]} -le 2 ] || die "too many arguments: ${pos[*]}"
dir=${pos[0]}
nops=${pos[1]:-20000}
[[ $nops =~ ^[1-9][0-9]*$ ]] || die "N must be a positive integer, not '$nops'"
[[ $seed =~ ^[0-9]+$ ]] || die "--seed must be a non-negative integer"
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive integer"
[ -z "$config" ] || [ -f "$config" ] || die "no such config file: $config"
rc=0; timeout -k 5 30 test -d "$dir" || rc=$?
if [ $rc = 124 ] || [ $rc = 137 ]; then echo "fsx.sh: $dir does not respond (30 s)" >&2; exit 3; fi
[ $rc = 0 ] || die "not a directory: $dir"

bash "$REPO/scripts/fs-tools.sh" >/dev/null
FSX=${IOSETS_TOOLS_ROOT:-$REPO/target/tools}/bin/fsx

mkdir -p "$out"
work=$(mktemp -d)
file=$dir/fsx.$$
trap 'timeout -k 5 30 rm -f "$file" || true; rm -rf "$work"' EXIT

if [ -z "$config" ]; then
  config=$work/fsx.toml
  cat >"$config" <<EOF
# flen and opsize: fsx defaults (256 KiB file, operations up to 64 KiB)
flen = 262144
[opsize]
max = 65536
min = 0
align = 1
[weights]
read = 10
write = 10
mapread = $((mmap * 10))
mapwrite = $((mmap * 10))
truncate = 2
close_open = 1
fsync = 1
fdatasync = 1
invalidate = $mmap
posix_fallocate = $fallocate
EOF
fi

echo "fsx: $nops operations on $file, seed $seed (replay: scripts/fsx.sh --seed $seed $dir $nops)"
log=$out/fsx.$$.log
start=$(date +%s.%N)
rc=0
timeout -k 10 "$timeout_s" "$FSX" -f "$config" -N "$nops" -S "$seed" -P "$out" "$file" >"$log" 2>&1 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null; exit 130' INT TERM
# Do not wait forever if even SIGKILL cannot end it (stuck on a dead mount).
deadline=$((SECONDS + timeout_s + 40))
while kill -0 "$pid" 2>/dev/null; do
  if [ $SECONDS -ge $deadline ]; then
    echo "fsx.sh: fsx (pid $pid) survived SIGKILL: stuck in the file system; log $log" >&2
    trap - EXIT
    exit 3
  fi
  sleep 0.1
done
wait "$pid" || rc=$?
elapsed=$(echo "$start $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}')
if [ $rc = 124 ] || [ $rc = 137 ]; then
  echo "fsx: TIMEOUT after ${timeout_s} s (seed $seed, $nops ops on $dir); log $log" >&2
  exit 3
fi
if [ $rc != 0 ] || ! grep -q 'All operations completed A-OK' "$log"; then
  # the diagnosis, then the last operations of fsx's log dump
  grep -v -E '^\[ERROR fsx\] +[0-9]+ [A-Z]' "$log" | head -n 40 >&2 || true
  grep -E '^\[ERROR fsx\] +[0-9]+ [A-Z]' "$log" | tail -n 20 >&2 || true
  if [ $mmap = 1 ] && grep -q 'ENODEV' "$log"; then
    echo "fsx: ENODEV: the file system refuses mmap (a FUSE direct_io mount without" \
      "FUSE_DIRECT_IO_ALLOW_MMAP does); rerun with --no-mmap" >&2
  fi
  echo "fsx: FAILED (exit $rc) after ${elapsed} s: seed $seed, $nops ops on $dir; log $log," \
    "artifacts in $out" >&2
  exit 1
fi
rm -f "$log"
echo "fsx: OK, $nops operations verified in ${elapsed} s (seed $seed)"
