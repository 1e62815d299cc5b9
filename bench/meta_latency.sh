#!/usr/bin/env bash
# One process's metadata latency through `iosets mount`: create, stat (after the kernel's
# attribute cache expired) and unlink of N files, one at a time, in µs per operation, and the
# servers' requests per operation (from their job reports). Configurations alternate within
# each repetition, on the same backing file system (a tmpfs made here, so that the disk does
# not blur the path's own cost).
#
# Usage: bench/meta_latency.sh [options] NAME="SERVE_ARGS | MOUNT_ARGS [| BINARY]" [...]
#   NAME="…"     a configuration: extra arguments of `iosets serve`, then after `|` extra
#                arguments of `iosets mount` (e.g. one="--net-threads 1 | --net-threads 1"),
#                and after a second `|` another iosets binary (a before/after in one run)
#   --bin PATH   the iosets binary (default target/release/iosets, built first)
#   --servers N  servers per configuration, on loopback (default 1)
#   --files N    files per repetition (default 3000)
#   --reps N     repetitions (default 5)
#   --stat-elsewhere  stat through a second mount of the same servers (another compute node:
#                its kernel and its mount have seen none of the files), not the one that made them
# Prints one line per run and, per configuration, the median of each figure. Needs root.
set -euo pipefail
export LC_ALL=C
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "meta_latency.sh: $*" >&2; exit 2; }
# shellcheck source=bench/lib/iosets.sh
. "$REPO/bench/lib/iosets.sh"

bin="" servers=1 files=3000 reps=5 names=() specs=() elsewhere=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) [ $# -ge 2 ] || die "--bin needs a path"; bin=$2; shift 2 ;;
    --servers) [ $# -ge 2 ] || die "--servers needs a number"; servers=$2; shift 2 ;;
    --files) [ $# -ge 2 ] || die "--files needs a number"; files=$2; shift 2 ;;
    --reps) [ $# -ge 2 ] || die "--reps needs a number"; reps=$2; shift 2 ;;
    --stat-elsewhere) elsewhere=1; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) usage >&2; die "unknown option '$1'" ;;
    *=*) names+=("${1%%=*}") specs+=("${1#*=}"); shift ;;
    *) usage >&2; die "'$1' is not NAME=\"SERVE_ARGS | MOUNT_ARGS\"" ;;
  esac
done
for v in "$servers" "$files" "$reps"; do [[ $v =~ ^[1-9][0-9]*$ ]] || die "'$v' is not a positive number"; done
[ ${#names[@]} -ge 1 ] || { usage >&2; die "no configuration given"; }
[ "$(id -u)" = 0 ] || die "needs root (FUSE, tmpfs)"
if [ -z "$bin" ]; then
  (cd "$REPO" && cargo build --release --locked -q -p iosets-cli)
  bin=$REPO/target/release/iosets
fi
[ -x "$bin" ] || die "not an executable: $bin"

bench_scratch iosets-meta-latency

# run NAME SPEC: one repetition; prints "create stat unlink requests-per-op" (µs, µs, µs, n)
run() {
  local spec=$2 sargs margs i list="" d=$work/run bin=$bin rest
  sargs=${spec%%|*} margs=""
  if [[ $spec == *"|"* ]]; then
    rest=${spec#*|}
    margs=${rest%%|*}
    if [[ $rest == *"|"* ]]; then
      bin=$(echo ${rest#*|})
      [ -x "$bin" ] || die "$1: not an executable: $bin"
    fi
  fi
  rm -rf "$d" && mkdir -p "$d/mnt" "$d/mnt2"
  for i in $(seq "$servers"); do
    mkdir -p "$d/r$i"
    # shellcheck disable=SC2086
    iosets_serve "$bin" "$d/r$i" "$d/s$i.log" "$work/token" $sargs
    pids+=("$served_pid")
    list+="${list:+,}$served_addr"
  done
  # shellcheck disable=SC2086
  "$bin" mount "$d/mnt" --servers "$list" --token-file "$work/token" $margs >"$d/m.log" 2>&1 &
  pids+=($!)
  local mnt=$d/mnt
  mnts+=("$mnt")
  wait_mounted "$mnt"
  local stat_dir=$mnt/t
  if [ "$elsewhere" = 1 ]; then
    # shellcheck disable=SC2086
    "$bin" mount "$d/mnt2" --servers "$list" --token-file "$work/token" $margs >"$d/m2.log" 2>&1 &
    pids+=($!)
    mnts+=("$d/mnt2")
    wait_mounted "$d/mnt2"
    stat_dir=$d/mnt2/t
  fi
  IOSETS_JOB_ID=77 python3 - "$mnt/t" "$files" "$stat_dir" <<'EOF' >"$d/times"
import os, sys, time
d, n, sd = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.mkdir(d)
t = time.perf_counter()
for i in range(n):
    os.close(os.open(f"{d}/f{i}", os.O_CREAT | os.O_WRONLY, 0o644))
c = time.perf_counter() - t
time.sleep(1.5)  # past the kernel's attribute cache (attr_ttl 1 s)
t = time.perf_counter()
for i in range(n):
    os.stat(f"{sd}/f{i}")
s = time.perf_counter() - t
t = time.perf_counter()
for i in range(n):
    os.unlink(f"{d}/f{i}")
u = time.perf_counter() - t
print(f"{c / n * 1e6:.1f} {s / n * 1e6:.1f} {u / n * 1e6:.1f}")
EOF
  local ops
  ops=$(for a in ${list//,/ }; do
    "$bin" ctl --server "$a" --token-file "$work/token" --json jobs 2>/dev/null
  done | python3 -c '
import json, sys
text = sys.stdin.read()
dec, i, total = json.JSONDecoder(), 0, 0
while i < len(text):
    if text[i].isspace(): i += 1; continue
    obj, i = dec.raw_decode(text, i)
    total += sum(j["ops"] for j in obj.get("jobs", []) if j["job"] == 77)
print(total)')
  bench_stop
  echo "$(cat "$d/times") $(python3 -c "print(f'{$ops / (3 * $files):.2f}')")"
}

echo "# bench/meta_latency.sh: $files files, $servers server(s), $reps repetitions$([ "$elsewhere" = 1 ] && echo ", stat through a second mount"), $("$bin" --version)"
echo "# config rep: create_us stat_us unlink_us requests_per_op"
declare -A all=()
for rep in $(seq "$reps"); do
  for i in "${!names[@]}"; do
    r=$(run "${names[i]}" "${specs[i]}")
    echo "${names[i]} $rep: $r"
    all[${names[i]}]+="$r"$'\n'
  done
done
echo "# medians: config create_us stat_us unlink_us requests_per_op"
for n in "${names[@]}"; do
  printf '%s' "${all[$n]}" | python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
cols = [statistics.median(c) for c in zip(*rows)]
print(sys.argv[1], *(f"{c:g}" for c in cols))' "$n"
done
