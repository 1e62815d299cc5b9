#!/usr/bin/env bash
# Seed 003's mdtest workload run by fio instead of `iosets app mdtest`: PROCS
# processes, each in a directory of its own (mdtest -u), create FILES empty
# files, stat them, remove them (mdtest -n FILES -F), one fio job file per
# phase with the filecreate, filestat and filedelete engines. An alternative
# load generator for the same experiment, to check that the mount serves a
# tool other than ours.
#
# Usage: bash scripts/seed003-fio.sh MOUNTPOINT [PROCS [FILES]]
#   MOUNTPOINT  a directory (an `iosets mount`, or any directory)
#   PROCS       processes, fio threads (default 8: seed 003's light job here)
#   FILES       files per process (default 100: seed 003's mdtest -n 100)
#
# The job files and fio's reports go to $SEED003_FIO_OUT (default: a new
# directory under /tmp, printed). The processes carry IOSETS_JOB_ID (default
# 2, the light job of `iosets experiment seed003`), which an iosets mount
# reads to tag their requests. Checked after each phase: PROCS x FILES files
# after create, none after remove (else exit 1); the work directory is
# removed at the end. fio comes from `bash scripts/fs-tools.sh`.
#
# Output: one line per phase, `create: N ops in S s = R ops/s` (R: the
# operations of all processes over the longest process's run time, fio's
# group_reporting; not quite mdtest's earliest start to latest end, as fio's
# processes start without a barrier), then where the reports are.
set -euo pipefail

usage="usage: bash scripts/seed003-fio.sh MOUNTPOINT [PROCS [FILES]]"
case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  "") echo "seed003-fio.sh: no MOUNTPOINT ($usage)" >&2; exit 2 ;;
esac
if [ $# -gt 3 ]; then
  echo "seed003-fio.sh: too many arguments ($usage)" >&2
  exit 2
fi
mnt=$1
procs=${2:-8}
files=${3:-100}
for v in "$procs" "$files"; do
  if ! [[ $v =~ ^[1-9][0-9]{0,6}$ ]]; then
    echo "seed003-fio.sh: '$v' is not a count from 1 to 9999999 ($usage)" >&2
    exit 2
  fi
done
if [ "$procs" -gt 1024 ]; then
  echo "seed003-fio.sh: PROCS $procs: at most 1024" >&2
  exit 2
fi
if [ ! -d "$mnt" ]; then
  echo "seed003-fio.sh: MOUNTPOINT $mnt is not a directory" >&2
  exit 1
fi
if ! command -v fio >/dev/null; then
  echo "seed003-fio.sh: fio is missing: run 'bash scripts/fs-tools.sh'" >&2
  exit 1
fi

out=${SEED003_FIO_OUT:-$(mktemp -d /tmp/seed003-fio.XXXXXX)}
mkdir -p "$out"
work="$mnt/fio-seed003.$$"
export IOSETS_JOB_ID=${IOSETS_JOB_ID:-2}

cleanup() {
  # Files left by a failed phase, then the rank directories.
  if [ -d "$work" ]; then
    find "$work" -mindepth 2 -maxdepth 2 -type f -name 'file.mdtest.*' -delete 2>/dev/null || true
    rmdir "$work"/r* "$work" 2>/dev/null || true
  fi
}
trap cleanup EXIT

mkdir "$work"
for ((r = 0; r < procs; r++)); do
  mkdir "$work/r$r"
done

# One job file per phase: a [rK] section per process with its own directory.
write_job() { # engine file
  {
    echo "; seed 003's mdtest phase with fio's $1 engine: $procs processes x $files files"
    echo "[global]"
    echo "ioengine=$1"
    # Files are made (or stat'ed, or removed) when the job runs, never laid out beforehand.
    echo "create_on_open=1"
    echo "filesize=4k"
    echo "nrfiles=$files"
    echo "openfiles=1"
    echo "fallocate=none"
    echo "thread"
    echo "group_reporting"
    echo "filename_format=file.mdtest.\$jobname.\$filenum"
    for ((r = 0; r < procs; r++)); do
      echo "[r$r]"
      echo "directory=$work/r$r"
    done
  } >"$2"
}

count_files() {
  find "$work" -mindepth 2 -maxdepth 2 -type f -name 'file.mdtest.*' | wc -l
}

for phase in create stat remove; do
  case $phase in
    create) engine=filecreate ;;
    stat) engine=filestat ;;
    remove) engine=filedelete ;;
  esac
  job="$out/$phase.fio"
  report="$out/$phase.json"
  write_job "$engine" "$job"
  if ! fio --output-format=json --output="$report" "$job"; then
    echo "seed003-fio.sh: fio's $phase phase failed; see $report" >&2
    exit 1
  fi
  # Every process's operations and the longest run time (ms), from fio's JSON report.
  read -r ops ms errs < <(
    python3 - "$report" <<'EOF'
import json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
ops = sum(j["read"]["total_ios"] + j["write"]["total_ios"] for j in jobs)
ms = max(j["read"]["runtime"] or j["write"]["runtime"] or j["job_runtime"] for j in jobs)
errs = sum(j["error"] for j in jobs)
print(ops, ms, errs)
EOF
  )
  if [ "$errs" != 0 ] || [ "$ops" != $((procs * files)) ]; then
    echo "seed003-fio.sh: $phase: $ops operations (expected $((procs * files))), $errs errors; see $report" >&2
    exit 1
  fi
  left=$(count_files)
  case $phase in
    create | stat) want=$((procs * files)) ;;
    remove) want=0 ;;
  esac
  if [ "$left" != "$want" ]; then
    echo "seed003-fio.sh: after $phase, $left files in $work (expected $want)" >&2
    exit 1
  fi
  awk -v p="$phase" -v n="$ops" -v ms="$ms" \
    'BEGIN { s = ms / 1000; printf "%s: %d ops in %.3f s = %.1f ops/s\n", p, n, s, (s > 0 ? n / s : 0) }'
done
echo "job files and fio reports: $out"
