#!/usr/bin/env bash
# Seed 004's experiment across the nodes of the cluster on one machine (issue 30, item 2):
# every job is a Slurm job of two compute nodes (`srun -N2`, one rank of PROCS/2 processes per
# node, each rank through its own node's `iosets mount`, the two meeting before each I/O phase
# as IOR's ranks do at a barrier), its priority given through the SPANK
# plugin (`--io-priority=P` for clairvoyant, `--io-auto` for auto), the I/O nodes' `iosets serve`
# restarted before every run with that configuration's policy and a trace, over GlusterFS.
# `iosets experiment seed004 --print-plan` says what to run; `--analyze` computes seed 004's
# metrics, the set overlap across I/O nodes and each job's bytes per I/O node from the runs.
#
# Usage: scripts/cluster-seed004.sh [--configs LIST] [--repeat R] [--scale S] [--compute N]
#                                    [--io N] [--storage N] [--device-mib-s X] [--out DIR]
#                                    [--bin PATH] [--procs P] [--low-jobs N]
#   --configs LIST  timeorder,clairvoyant,auto (default; auto-error too if asked)
#   --repeat R      repetitions of each configuration (default 3)
#   --scale S       seed 004's time factor (default 1/20: about 3 minutes per run)
#   --compute N     compute nodes (default 4, at least 2); --io N I/O nodes (default 2);
#   --storage N     storage nodes (default 2)
#   --device-mib-s X  the emulated device, MiB/s in all, shared by the I/O nodes (default 110)
#   --procs P       processes per job, even: P/2 per node (default 8)
#   --low-jobs N    low-frequency jobs (default 15)
#   --out DIR       outputs (default ./cluster-seed004-<UTC time>)
#   --bin PATH      the iosets binary (default target/release/iosets, built first)
# Brings its own test bed up (scripts/cluster.sh up) and takes it down at the end, on Ctrl-C
# and on any failure; refused while another is up. Writes DIR/runs/<config>-<rep>/ (phase
# logs, the I/O nodes' traces, launcher-jobs.csv: Slurm's job id of each planned job), the
# analysis's outputs (DIR/metrics.csv, jobs.csv, bytes.csv, figures), DIR/report.txt (the
# tables), and DIR/daemons.csv: each node's daemons' CPU seconds and peak memory per run.
# Needs root. Exit status: 0 done, 1 failed, 2 bad arguments, 77 no test bed possible here.
set -euo pipefail
export LC_ALL=C
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
C="$REPO/scripts/cluster.sh"
STATE=/run/iosets-cluster
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "cluster-seed004.sh: $1" >&2; exit "${2:-1}"; }
say() { echo "cluster-seed004: $*" >&2; }

configs=timeorder,clairvoyant,auto repeat=3 scale=1/20 compute=4 io=2 storage=2
device=110 out="" bin="" procs=8 low_jobs=15
while [ $# -gt 0 ]; do
  [ "$1" = -h ] || [ "$1" = --help ] && { usage; exit 0; }
  [ $# -ge 2 ] || die "$1 needs a value (see --help)" 2
  case "$1" in
    --configs) configs=$2 ;;
    --repeat) repeat=$2 ;;
    --scale) scale=$2 ;;
    --compute) compute=$2 ;;
    --io) io=$2 ;;
    --storage) storage=$2 ;;
    --device-mib-s) device=$2 ;;
    --out) out=$2 ;;
    --bin) bin=$2 ;;
    --procs) procs=$2 ;;
    --low-jobs) low_jobs=$2 ;;
    *) die "unknown argument '$1' (see --help)" 2 ;;
  esac
  shift 2
done
[[ $compute =~ ^[0-9]+$ ]] && [ "$compute" -ge 2 ] || die "--compute $compute: at least 2 (every job spans two nodes)" 2
[[ $procs =~ ^[0-9]+$ ]] && [ "$procs" -ge 2 ] && [ $((procs % 2)) = 0 ] ||
  die "--procs $procs: an even number >= 2 (half on each of the job's two nodes)" 2
# shellcheck source=scripts/testbed-lib.sh
. "$REPO/scripts/testbed-lib.sh"
testbed_preflight slurm
testbed_bin "$bin"
out=$(realpath -m "${out:-cluster-seed004-$(date -u +%Y%m%d-%H%M%S)}")
workload=(--servers "$io" --scale "$scale" --device-mib-s "$device" --procs "$procs" --low-jobs "$low_jobs")
plan=$("$bin" experiment seed004 --print-plan "${workload[@]}" --configs "$configs" --repeat "$repeat") ||
  die "iosets refused the workload (above)" 2
read -r _ stop_after deadline expected < <(grep '^run ' <<<"$plan")
mkdir -p "$out/runs"
echo "$plan" >"$out/plan.txt"

say "bringing the test bed up: $storage storage, $io I/O, $compute compute nodes"
# A request may wait for whole phases of other jobs: the mounts' timeout is the run's bound.
mount_timeout=$(awk -v d="$deadline" 'BEGIN { printf "%d", d + 30 }')
trap 'say "interrupted: taking the test bed down"; bash "$C" down >/dev/null 2>&1 || true; exit 1' INT TERM
trap 'rc=$?; bash "$C" down >/dev/null 2>&1 || true; exit $rc' EXIT
bash "$C" up --storage "$storage" --io "$io" --compute "$compute" --bin "$bin" \
  --mount-timeout "$mount_timeout" >"$out/testbed.txt" || die "the test bed did not come up"

# usage_of LABEL: every node's processes' CPU seconds and peak resident memory, one line each
# (label,node,process,pid,cpu_s,peak_rss_kib), from /proc; the node of a process is the network
# namespace it is in.
tick=$(getconf CLK_TCK)
usage_of() {
  local label=$1 n addr pid
  while read -r n addr; do
    for pid in $(ip netns pids "iocl-$n" 2>/dev/null); do
      awk -v l="$label" -v n="$n" -v p="$pid" -v t="$tick" \
        -v rss="$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)" \
        '{ sub(/^.*\) /, ""); printf "%s,%s,%s,%s,%.2f,%s\n", l, n, c, p, ($12 + $13) / t, rss }' \
        c="$(cat "/proc/$pid/comm" 2>/dev/null)" "/proc/$pid/stat" 2>/dev/null || true
    done
  done <"$STATE/nodes"
}
echo "when,node,process,pid,cpu_s,peak_rss_kib" >"$out/daemons.csv"

# run_one CONFIG REP PRIORITIES FLAGS...: one run
run_one() {
  local config=$1 rep=$2 priorities=$3
  shift 3
  local dir=$out/runs/$config-$rep i job kind jprocs compute release mib iters prio opt
  rm -rf "$dir"
  # barrier/: where each job's two ranks meet before each I/O phase (IOR's MPI barrier)
  mkdir -p "$dir/barrier"
  for i in $(seq "$io"); do
    bash "$C" restart "io$i" -- "$@" --trace "$dir/server$((i - 1)).trace.csv" >/dev/null
  done
  bash "$C" exec io1 -- sh -c 'rm -f /pfs/iosets/job*'
  usage_of "$config-$rep:start" >>"$out/daemons.csv"
  # Every job counts its release from one origin, a few seconds ahead (srun takes a while).
  local njobs start stop pids=() t0
  njobs=$(grep -c '^job ' <<<"$plan")
  start=$(awk -v n="$njobs" -v t="$(date +%s.%N)" 'BEGIN { printf "%.3f", t + 5 + 0.3 * n }')
  stop=$(awk -v s="$start" -v a="$stop_after" 'BEGIN { printf "%.3f", s + a }')
  while read -r _ job kind jprocs compute release mib iters prio; do
    case "$priorities" in
      given) opt=(--io-priority="$prio") ;;
      detected) opt=(--io-auto) ;;
      *) opt=() ;;
    esac
    # Rank 0 records Slurm's job id; each rank writes its own files through its node's mount.
    bash "$C" exec head -- srun -N2 --ntasks-per-node=1 -J "seed004-$job" "${opt[@]}" \
      sh -c '[ "$SLURM_PROCID" != 0 ] || echo "$SLURM_JOB_ID" >"$1/slurm-job.$2"; shift 2; exec "$@"' \
      sh "$dir" "$job" "$bin" app periodic --dir /mnt/iosets --procs $((jprocs / 2)) \
      --compute "$compute" --release "$release" --write-mib "$mib" --iterations "$iters" \
      --fsync --log "$dir/job$job.csv" --job "$job" --start-at "$start" --stop-at "$stop" \
      --barrier-dir "$dir/barrier" \
      >"$dir/job$job.srun.log" 2>&1 &
    pids+=($!)
  done < <(grep '^job ' <<<"$plan")
  t0=$(date +%s)
  local limit
  limit=$(awk -v s="$start" -v d="$deadline" -v t="$t0" 'BEGIN { printf "%d", s - t + d + 30 }')
  say "$config #$rep: $njobs jobs launched (about $(printf '%.0f' "$expected") s; killed after $limit s)"
  local failed=0 p
  while :; do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
    [ "$alive" = 0 ] && break
    if [ $(($(date +%s) - t0)) -gt "$limit" ]; then
      say "$config #$rep: $alive jobs still running at the bound: cancelled"
      bash "$C" exec head -- scancel --name="$(printf 'seed004-%s,' $(seq "$njobs") | sed 's/,$//')" || true
      sleep 3
      for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    fi
    sleep 1
  done
  for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
  usage_of "$config-$rep:end" >>"$out/daemons.csv"
  rm -rf "$dir/barrier"
  # The servers stop (SIGTERM: their traces flushed) and start again without a trace.
  for i in $(seq "$io"); do bash "$C" restart "io$i" -- >/dev/null; done
  echo "plan_job,launcher_job" >"$dir/launcher-jobs.csv"
  for job in $(seq "$njobs"); do
    [ -f "$dir/slurm-job.$job" ] || { say "job $job never started (its srun log: $dir/job$job.srun.log)"; continue; }
    echo "$job,$(cat "$dir/slurm-job.$job")" >>"$dir/launcher-jobs.csv"
  done
  say "$config #$rep: done in $(($(date +%s) - t0)) s, $failed of $njobs jobs failed"
  [ "$failed" = 0 ] || for job in $(seq "$njobs"); do
    grep -q . "$dir/job$job.srun.log" && sed "s/^/  job $job | /" "$dir/job$job.srun.log" | tail -n 3 >&2
  done
  return 0
}

while read -r _ config rep priorities flags; do
  # shellcheck disable=SC2086
  run_one "$config" "$rep" "$priorities" $flags
done < <(grep '^serve ' <<<"$plan")

bash "$C" down >/dev/null
trap - EXIT INT TERM
"$bin" experiment seed004 --analyze "$out" "${workload[@]}" --configs "$configs" --repeat "$repeat" |
  tee "$out/report.txt"
