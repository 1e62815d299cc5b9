#!/usr/bin/env bash
# Seed 003's thread-quota experiment by groups of nodes, as FEFS did it (issue 30, item 3), on
# the cluster on one machine: one I/O node (the metadata server: `iosets serve`, arrival order,
# seed 003's 24 workers and emulated back end) over GlusterFS; the heavy job is a Slurm job of
# 64 mdtest processes over three compute nodes (c1-c3), the light job one of 8 processes and then
# its stage-in on the fourth (c4). In `on`, the thread-quota rule is seed 003's "compute node
# group" (71 % of the threads, shared evenly by its jobs; the rest is the GIO group's) matched
# by the nodes' client addresses, `client=10.77.0.96/27` (the compute nodes c1-c27: the heavy
# job's .101-.103 and the light job's .104), not by job ids: whatever job runs on those nodes
# is under the rule, each job its share. Settings reference (the light job alone), off (both, no quota), on (both,
# the quota) as in `iosets experiment seed003`, whose `--print-plan` gives the workload and
# whose `--analyze` computes the rates, the stage-in times and the verdicts from the runs.
#
# Usage: scripts/cluster-seed003.sh [--repeat R] [--scale full|quick] [--out DIR] [--bin PATH]
#   --repeat R     repetitions of each setting (default 3)
#   --scale S      seed 003's workload size (default full; quick for a short check)
#   --out DIR      outputs (default ./cluster-seed003-<UTC time>)
#   --bin PATH     the iosets binary (default target/release/iosets, built first)
# Brings its own test bed up (2 storage, 1 I/O, 4 compute nodes and Slurm) and takes it down at
# the end, on Ctrl-C and on any failure; refused while another is up. Writes
# DIR/runs/<setting>-<rep>/ (the apps' logs, run.csv, the server's job statistics while the
# light job ran, quota.toml), DIR/params.json, the analysis's outputs and DIR/report.txt.
# Needs root. Exit status: 0 done, 1 failed, 2 bad arguments, 77 no test bed possible here.
set -euo pipefail
export LC_ALL=C
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
C="$REPO/scripts/cluster.sh"
STATE=/run/iosets-cluster
COMPUTE_GROUP=10.77.0.96/27
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "cluster-seed003.sh: $1" >&2; exit "${2:-1}"; }
say() { echo "cluster-seed003: $*" >&2; }

repeat=3 scale=full out="" bin=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --repeat | --scale | --out | --bin)
      [ $# -ge 2 ] || die "$1 needs a value" 2
      case "$1" in --repeat) repeat=$2 ;; --scale) scale=$2 ;; --out) out=$2 ;; --bin) bin=$2 ;; esac
      shift 2 ;;
    *) die "unknown argument '$1' (see --help)" 2 ;;
  esac
done
[[ $repeat =~ ^[1-9][0-9]?$ ]] || die "--repeat $repeat: 1 to 99" 2
# shellcheck source=scripts/testbed-lib.sh
. "$REPO/scripts/testbed-lib.sh"
testbed_preflight slurm
testbed_bin "$bin"
out=$(realpath -m "${out:-cluster-seed003-$(date -u +%Y%m%d-%H%M%S)}")
plan=$("$bin" experiment seed003 --print-plan --scale "$scale" --out "$out" \
  --quota-match "client=$COMPUTE_GROUP") ||
  die "iosets refused the workload (above)" 2
field() { awk -v k="$1" -v i="$2" '$1 == k { print $(i + 1) }' <<<"$plan"; }
server_flags=$(sed -n 's/^server //p' <<<"$plan")
heavy_procs=$(field heavy 1) files=$(field heavy 2) heavy_stripes=$(field heavy 3)
light_procs=$(field light 1) light_iters=$(field light 3) light_stripes=$(field light 4)
stagein_dirs=$(field stagein 1) stagein_limit=$(field stagein 2)
light_limit=$(field limits 1) warmup=$(field limits 2)
echo "$plan" >"$out/plan.txt"

# A request may wait behind the heavy job for long; every stat and lookup must reach the server.
mount_timeout=$(awk -v a="$light_limit" -v b="$stagein_limit" 'BEGIN { printf "%d", a + b + 60 }')
trap 'say "interrupted: taking the test bed down"; bash "$C" down >/dev/null 2>&1 || true; exit 1' INT TERM
trap 'rc=$?; bash "$C" down >/dev/null 2>&1 || true; exit $rc' EXIT
say "bringing the test bed up: 2 storage, 1 I/O, 4 compute nodes"
bash "$C" up --storage 2 --io 1 --compute 4 --bin "$bin" --mount-timeout "$mount_timeout" \
  --mount-flags "--attr-ttl-ms 0 --threads 64" >"$out/testbed.txt" || die "the test bed did not come up"
ctl() { bash "$C" exec c4 -- "$bin" ctl --server 10.77.0.11:7070 --auth-file "$STATE/secret" --token-file "$STATE/token" "$@"; }
server_pid() { cat "$STATE/pids/io1"; }
cpu_s() { awk -v t="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.3f", ($12 + $13) / t }' "/proc/$(server_pid)/stat"; }
# ops_of SLURM_JOB: the requests the server completed for that job so far (0 if unknown)
ops_of() {
  ctl jobs --json | python3 -c 'import json, sys
j = [x for x in json.load(sys.stdin)["jobs"] if x["job"] == int(sys.argv[1])]
print(j[0]["ops"] if j else 0)' "$1"
}
# striped DIR STRIPES: DIR made afresh on the PFS with its stripe count (lfs setstripe -c)
striped() {
  bash "$C" exec io1 -- python3 -c 'import os, sys
os.makedirs(sys.argv[1], exist_ok=True)
os.setxattr(sys.argv[1], "user.iosets.stripe_count", sys.argv[2].encode())' "/pfs/iosets/$1" "$2"
}
# srun_job NAME NODES TASKS PROCS LOG APP_ARGS...: an mdtest job in the background ($! its srun);
# rank 0 writes Slurm's job id into $dir/NAME.slurm-job
srun_job() {
  local name=$1 nodes=$2 tasks=$3 procs=$4 log=$5
  shift 5
  bash "$C" exec head -- srun -O -w "$nodes" -n "$tasks" -J "seed003-$name" \
    sh -c '[ "$SLURM_PROCID" != 0 ] || echo "$SLURM_JOB_ID" >"$1"; shift; exec "$@"' \
    sh "$dir/$name.slurm-job" "$bin" app mdtest --dir /mnt/iosets --procs "$procs" \
    --log "$log" "$@" >"$dir/$name.stdout" 2>"$dir/$name.stderr" &
}
# wait_bounded PID SECONDS: 0 if PID ended within SECONDS with status 0, 1 if it failed, 2 if
# it was still running (left running)
wait_bounded() {
  local pid=$1 limit=$2 t0
  t0=$(date +%s.%N)
  while kill -0 "$pid" 2>/dev/null; do
    awk -v t0="$t0" -v l="$limit" -v now="$(date +%s.%N)" 'BEGIN { exit !(now - t0 > l) }' && return 2
    sleep 0.2
  done
  wait "$pid" && return 0 || return 1
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }

run_one() {
  local setting=$1 rep=$2 heavy_pid="" heavy_job="" light_job="" t0 t1 c0 c1 h0=0 l0=0
  dir=$out/runs/$setting-$rep
  rm -rf "$dir"
  mkdir -p "$dir"
  local flags=$server_flags
  if [ "$setting" = on ]; then
    cp "$out/quota.toml" "$dir/quota.toml"
    flags="$flags --quota $dir/quota.toml"
  fi
  # shellcheck disable=SC2086
  bash "$C" restart io1 -- $flags >/dev/null
  bash "$C" exec io1 -- sh -c 'rm -rf /pfs/iosets/* /pfs/iosets/.[!.]* 2>/dev/null; true'
  local r
  if [ "$setting" != reference ]; then
    for r in $(seq 0 $((heavy_procs - 1))); do striped "1.r$r" "$heavy_stripes"; done
  fi
  for r in $(seq 0 $((light_procs - 1))); do striped "2.r$r" "$light_stripes"; done
  striped stagein.2 "$light_stripes"

  if [ "$setting" != reference ]; then
    srun_job heavy "c[1-3]" "$heavy_procs" 1 "$dir/heavy.csv" --job 1 --files "$files" --iterations 4294967295
    heavy_pid=$!
    sleep "$warmup"
    for _ in $(seq 100); do [ -s "$dir/heavy.slurm-job" ] && break; sleep 0.2; done
    heavy_job=$(cat "$dir/heavy.slurm-job" 2>/dev/null) || die "$setting #$rep: the heavy job did not start ($dir/heavy.stderr)"
    h0=$(ops_of "$heavy_job")
  fi
  c0=$(cpu_s)
  t0=$(now)
  srun_job light c4 1 "$light_procs" "$dir/light.csv" --job 2 --files "$files" --iterations "$light_iters"
  local light_pid=$! best=""
  # The server's job statistics every second while the light job runs: the last that lists
  # both jobs is kept (with Slurm's ids given as the experiment's 1 and 2).
  while kill -0 "$light_pid" 2>/dev/null; do
    light_job=$(cat "$dir/light.slurm-job" 2>/dev/null || true)
    if [ -n "$light_job" ]; then
      ctl jobs --json >"$dir/jobs.now.json" 2>/dev/null &&
        python3 - "$dir/jobs.now.json" "${heavy_job:-0}" "$light_job" "$dir/snapshot-jobs.json" <<'PY' || true
import json, sys
path, heavy, light, dest = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
v = json.load(open(path))
ids = {heavy: 1, light: 2}
v["jobs"] = [dict(j, job=ids[j["job"]]) for j in v["jobs"] if j["job"] in ids]
if len([j for j in v["jobs"] if j.get("ops", 0) > 0]) >= len({k for k in ids if k}):
    json.dump(v, open(dest, "w"))
PY
    fi
    awk -v t0="$t0" -v l="$light_limit" -v now="$(now)" 'BEGIN { exit !(now - t0 > l) }' &&
      die "$setting #$rep: the light job's mdtest did not end within $light_limit s"
    sleep 1
  done
  wait "$light_pid" || die "$setting #$rep: the light job failed ($(tail -n 3 "$dir/light.stderr"))"
  t1=$(now)
  c1=$(cpu_s)
  light_job=$(cat "$dir/light.slurm-job")
  local light_wall light_cpu heavy_req=0 light_req
  light_wall=$(elapsed "$t0" "$t1")
  light_cpu=$(elapsed "$c0" "$c1")
  [ -z "$heavy_job" ] || heavy_req=$(($(ops_of "$heavy_job") - h0))
  light_req=$(($(ops_of "$light_job") - l0))
  [ -f "$dir/snapshot-jobs.json" ] || cp "$dir/jobs.now.json" "$dir/snapshot-jobs.json"

  # The stage-in, on the light job's node, bounded.
  c0=$(cpu_s)
  t0=$(now)
  srun_job stagein c4 1 "$light_procs" "$dir/stagein.csv" --job 2 --mkdirs "$stagein_dirs"
  local st_pid=$! completed=true rc=0
  wait_bounded "$st_pid" "$stagein_limit" || rc=$?
  t1=$(now)
  c1=$(cpu_s)
  case $rc in
    0) ;;
    2) completed=false
       bash "$C" exec head -- scancel --name=seed003-stagein || true
       wait "$st_pid" 2>/dev/null || true ;;
    *) die "$setting #$rep: the stage-in failed ($(tail -n 3 "$dir/stagein.stderr"))" ;;
  esac
  if [ -n "$heavy_pid" ]; then
    bash "$C" exec head -- scancel --name=seed003-heavy || true
    wait "$heavy_pid" 2>/dev/null || true
  fi
  printf 'key,value\nsetting,%s\nrep,%s\nlight_wall_s,%s\nlight_cpu_s,%s\nheavy_requests,%s\nlight_requests,%s\nstagein_wall_s,%s\nstagein_cpu_s,%s\nstagein_completed,%s\ncores,%s\n' \
    "$setting" "$rep" "$light_wall" "$light_cpu" "$heavy_req" "$light_req" \
    "$(elapsed "$t0" "$t1")" "$(elapsed "$c0" "$c1")" "$completed" "$(nproc)" >"$dir/run.csv"
  say "$setting #$rep: light mdtest $light_wall s, stage-in $(elapsed "$t0" "$t1") s$([ $completed = true ] || echo ' (not completed)')"
}

for rep in $(seq "$repeat"); do
  for setting in reference off on; do run_one "$setting" "$rep"; done
done
bash "$C" down >/dev/null
trap - EXIT INT TERM
"$bin" experiment seed003 --analyze "$out" | tee "$out/report.txt"
