#!/usr/bin/env bash
# Context switches of the whole machine per metadata operation (create, stat after the
# kernel's attribute cache, unlink), one process, one operation at a time, through:
#   direct    a plain tmpfs directory
#   bindfs    bindfs over it (a FUSE reference: the kernel's round trips, no network)
#   iosets-N  `iosets mount` over N `iosets serve` on loopback (one root each), N = 1 and 2
# Each operation's thread hand-offs (a thread woken, another put to sleep) are what a small
# request costs on a VM, more than the file system's own work (BENCHMARKS.md, issue 29): this
# counts them with `perf stat -a -e context-switches` around each loop, less what the machine
# makes meanwhile without them (its rate while a process sleeps 1 s, times the loop's time).
#
# Usage: bench/switches.sh [--bin PATH] [--files N]
#   --bin PATH   the iosets binary (default target/release/iosets, built first)
#   --files N    files per loop (default 2000)
# Prints one line per target: switches per create, per stat, per unlink. Needs root (FUSE,
# tmpfs) and perf.
set -euo pipefail
export LC_ALL=C
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "switches.sh: $*" >&2; exit 2; }
# shellcheck source=bench/lib/iosets.sh
. "$REPO/bench/lib/iosets.sh"

bin="" files=2000
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) [ $# -ge 2 ] || die "--bin needs a path"; bin=$2; shift 2 ;;
    --files) [ $# -ge 2 ] || die "--files needs a number"; files=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1'" ;;
  esac
done
[[ $files =~ ^[1-9][0-9]*$ ]] || die "'$files' is not a positive number"
[ "$(id -u)" = 0 ] || die "needs root (FUSE, tmpfs)"
command -v perf >/dev/null || die "needs perf (Debian: linux-perf)"
command -v bindfs >/dev/null || die "needs bindfs (scripts/fs-tools.sh installs it)"
if [ -z "$bin" ]; then
  (cd "$REPO" && cargo build --release --locked -q -p iosets-cli)
  bin=$REPO/target/release/iosets
fi
[ -x "$bin" ] || die "not an executable: $bin"

bench_scratch iosets-switches

# switches SCRIPT: "COUNT SECONDS": the machine's context switches while `python3 -c SCRIPT`
# runs, and how long its loop took (the script prints it).
switches() {
  local n secs
  secs=$(perf stat -a -x, -o "$work/perf.csv" -e context-switches -- python3 -c "import time
t = time.perf_counter()
$1
print(time.perf_counter() - t)")
  n=$(awk -F, '$3 == "context-switches" { print $1 }' "$work/perf.csv")
  echo "$n $secs"
}

# per_op DIR: switches per create, per stat, per unlink in DIR, less what the machine makes
# meanwhile without them (its rate while a process sleeps, times the loop's time).
per_op() {
  local d=$1 c s u idle
  mkdir -p "$d/t"
  c=$(switches "import os
for i in range($files): os.close(os.open('$d/t/f%d' % i, os.O_CREAT | os.O_WRONLY, 0o644))")
  sleep 1.5 # past the kernel's attribute cache (attr_ttl 1 s)
  s=$(switches "import os
for i in range($files): os.stat('$d/t/f%d' % i)")
  u=$(switches "import os
for i in range($files): os.unlink('$d/t/f%d' % i)")
  idle=$(switches "time.sleep(1)")
  python3 -c "
n = $files
idle_n, idle_s = map(float, '$idle'.split())
rate = idle_n / idle_s
out = []
for x in ('$c', '$s', '$u'):
    k, secs = map(float, x.split())
    out.append(f'{(k - rate * secs) / n:.1f}')
print(' '.join(out))"
}

echo "# bench/switches.sh: $files files, one process, $("$bin" --version); context switches per operation: create stat unlink"
mkdir -p "$work/direct"
echo "direct $(per_op "$work/direct")"

mkdir -p "$work/bindfs-back" "$work/bindfs"
bindfs -f -o allow_other "$work/bindfs-back" "$work/bindfs" >"$work/bindfs.log" 2>&1 &
pids+=($!) mnts+=("$work/bindfs")
wait_mounted "$work/bindfs"
echo "bindfs $(per_op "$work/bindfs")"
bench_stop

for n in 1 2; do
  list=""
  for i in $(seq "$n"); do
    mkdir -p "$work/r$n-$i"
    iosets_serve "$bin" "$work/r$n-$i" "$work/s$n-$i.log" "$work/token"
    pids+=("$served_pid")
    list+="${list:+,}$served_addr"
  done
  mkdir -p "$work/mnt$n"
  "$bin" mount "$work/mnt$n" --servers "$list" --token-file "$work/token" >"$work/m$n.log" 2>&1 &
  pids+=($!) mnts+=("$work/mnt$n")
  wait_mounted "$work/mnt$n"
  echo "iosets-$n $(IOSETS_JOB_ID=78 per_op "$work/mnt$n")"
  bench_stop
done
