#!/usr/bin/env bash
# The cost of the forwarding hop (issue 30): on one compute node of the cluster on one machine
# (scripts/cluster.sh), the same fio jobs through `iosets mount` -> I/O nodes -> GlusterFS, and
# on GlusterFS's own FUSE client mounted on that compute node (`up --direct-pfs`), in one run:
#   1. bench/mount_bench.sh on c1 with targets direct=/pfs/hop and iosets=/mnt/iosets/hop
#      (1 MiB sequential write with fsync and read, 4 KiB random read and write, creates,
#      stats, deletes, a single-stream dd; ratios against direct);
#   2. creates under a metadata storm from other nodes: c2 and c3 each run 4 fio threads that
#      create and delete files without pause (as jobs 9001, 9002) on the same file system as
#      c1 (through their own mounts of it), while c1 measures fio filecreate (4 threads, as job
#      9000); alternately on direct and on iosets, --reps times.
# The I/O nodes' servers run at their defaults (no emulated device): the PFS is the device.
#
# Usage: bench/cluster_hop.sh [--reps N] [--size SIZE] [--nrfiles N] [--out DIR] [--bin PATH]
#   --reps N      repetitions of each part (default 3)
#   --size SIZE   data per sequential run (default 512m)
#   --nrfiles N   files per metadata run (default 2000)
#   --out DIR     output (default target/cluster-hop/<UTC time>): suite/ (mount_bench.sh's),
#                 storm.tsv, results.md
#   --bin PATH    the iosets binary (default target/release/iosets, built first)
# Brings its own test bed up (2 storage, 2 I/O, 3 compute nodes, no Slurm) and takes it down at
# the end, on Ctrl-C and on failure. Needs root. Exit status: 0 done, 1 failed, 2 bad
# arguments, 77 no test bed possible here.
set -euo pipefail
export LC_ALL=C
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
C="$REPO/scripts/cluster.sh"
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "cluster_hop.sh: $1" >&2; exit "${2:-1}"; }
say() { echo "cluster_hop: $*" >&2; }

reps=3 size=512m nrfiles=2000 out="" bin=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --reps | --size | --nrfiles | --out | --bin)
      [ $# -ge 2 ] || die "$1 needs a value" 2
      v=$2
      case "$1" in --reps) reps=$v ;; --size) size=$v ;; --nrfiles) nrfiles=$v ;; --out) out=$v ;; --bin) bin=$v ;; esac
      shift 2 ;;
    *) die "unknown argument '$1' (see --help)" 2 ;;
  esac
done
[[ $reps =~ ^[1-9][0-9]?$ ]] || die "--reps $reps: 1 to 99" 2
[[ $nrfiles =~ ^[1-9][0-9]*$ ]] || die "--nrfiles $nrfiles: a positive number" 2
# shellcheck source=scripts/testbed-lib.sh
. "$REPO/scripts/testbed-lib.sh"
testbed_preflight
testbed_bin "$bin"
out=$(realpath -m "${out:-$REPO/target/cluster-hop/$(date -u +%Y%m%d-%H%M%S)}")
mkdir -p "$out"
bash "$REPO/scripts/fs-tools.sh" >/dev/null

trap 'say "interrupted: taking the test bed down"; bash "$C" down >/dev/null 2>&1 || true; exit 1' INT TERM
trap 'rc=$?; bash "$C" down >/dev/null 2>&1 || true; exit $rc' EXIT
say "bringing the test bed up: 2 storage, 2 I/O, 3 compute nodes, GlusterFS also on the compute nodes"
bash "$C" up --storage 2 --io 2 --compute 3 --no-slurm --direct-pfs --bin "$bin" >"$out/testbed.txt"
for n in c1 c2 c3; do
  bash "$C" exec "$n" -- mkdir -p "/pfs/hop" "/pfs/storm-$n" "/mnt/iosets/hop" "/mnt/iosets/storm-$n"
done

say "part 1: the fio suite on c1, direct GlusterFS against through iosets"
bash "$C" exec c1 -- bash "$REPO/bench/mount_bench.sh" --reps "$reps" --size "$size" \
  --nrfiles "$nrfiles" --jobs "1 4" --out "$out/suite" direct=/pfs/hop iosets=/mnt/iosets/hop \
  >"$out/suite.txt" 2>"$out/suite.err" || die "mount_bench.sh failed (see $out/suite.err)"

# storm NODE ROOT JOB: NODE creates and deletes files in ROOT/storm-NODE without pause, 4 fio
# threads, until $out/storm.stop exists; in the background
storm() {
  bash "$C" exec "$1" -- env IOSETS_JOB_ID="$3" sh -c '
    while [ ! -e "$1/storm.stop" ]; do
      fio --name=storm --directory="$2" --ioengine=filecreate --fallocate=none --create_on_open=1 \
        --nrfiles=500 --filesize=4k --openfiles=1 --filename_format="s.\$jobnum.\$filenum" \
        --numjobs=4 --group_reporting >/dev/null 2>&1 || exit 1
      fio --name=storm --directory="$2" --ioengine=filedelete --unlink=0 --nrfiles=500 \
        --filesize=4k --openfiles=1 --filename_format="s.\$jobnum.\$filenum" --numjobs=4 \
        --group_reporting >/dev/null 2>&1 || exit 1
    done' sh "$out" "$2/storm-$1" &
}
# creates DIR: c1's fio filecreate in DIR (4 threads, --nrfiles in all), ops/s; the files removed
creates() {
  local json=$out/storm-$RANDOM.json
  bash "$C" exec c1 -- env IOSETS_JOB_ID=9000 fio --name=creates --directory="$1" \
    --ioengine=filecreate --fallocate=none --create_on_open=1 --nrfiles=$((nrfiles / 4)) \
    --filesize=4k --openfiles=1 --filename_format="c.\$jobnum.\$filenum" --numjobs=4 \
    --group_reporting --output-format=json --output="$json" >/dev/null
  python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
print(round(j["read"]["iops"]))' "$json"
  bash "$C" exec c1 -- find "$1" -mindepth 1 -delete
}

say "part 2: creates on c1 while c2 and c3 storm the same file system"
printf 'rep\ttarget\tcreates_per_s\n' >"$out/storm.tsv"
for rep in $(seq "$reps"); do
  for target in direct iosets; do
    case "$target" in direct) root=/pfs ;; iosets) root=/mnt/iosets ;; esac
    rm -f "$out/storm.stop"
    storm c2 "$root" 9001
    s2=$!
    storm c3 "$root" 9002
    s3=$!
    sleep 2
    r=$(creates "$root/hop")
    touch "$out/storm.stop"
    wait "$s2" "$s3" || die "a storm failed on $target"
    printf '%s\t%s\t%s\n' "$rep" "$target" "$r" >>"$out/storm.tsv"
    say "  rep $rep, $target: $r creates/s under the storm"
  done
done

bash "$C" down >/dev/null
trap - EXIT INT TERM
python3 - "$out" <<'PY' | tee "$out/results.md"
import csv, statistics, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/storm.tsv"), delimiter="\t"))
med = {t: statistics.median(float(r["creates_per_s"]) for r in rows if r["target"] == t)
       for t in ("direct", "iosets")}
each = {t: ", ".join(r["creates_per_s"] for r in rows if r["target"] == t) for t in med}
print(open(f"{out}/suite.txt").read().rstrip())
print()
print("Creates on c1 (4 fio threads) while c2 and c3 create and delete without pause:")
print()
print("| target | creates/s, median | each repetition | ratio to direct |")
print("|---|---|---|---|")
for t in ("direct", "iosets"):
    print(f"| {t} | {med[t]:,.0f} | {each[t]} | {med[t] / med['direct']:.2f} |")
PY
