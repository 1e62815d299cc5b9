#!/usr/bin/env bash
# fio benchmark of FUSE file systems (the iosets mount) against baselines: the
# same fio jobs on each target, markdown tables with each target's figure and
# its ratio to the first target and to bindfs, raw fio JSON kept.
#
# Usage: bench/mount_bench.sh [options] NAME=DIR [NAME=DIR ...]
#   NAME=DIR          a target: an existing writable directory (a mount, a plain
#                     directory, a tmpfs); the first one is the baseline of the
#                     ratios. The script mounts nothing but --bindfs.
#   --bindfs BACKING  also mount `bindfs -f -o allow_other BACKING` at a temp
#                     dir as target `bindfs` (a FUSE reference); unmounted at
#                     exit. Its own pid is its CPU pid. Extra bindfs options:
#                     BINDFS_OPTS (e.g. "--multithreaded").
#   --cpu-pids [NAME=]"PID ..."  processes (FUSE daemon, servers) whose
#                     user+sys CPU seconds per GiB moved during the sequential
#                     jobs is reported for target NAME (default: the last
#                     NAME=DIR given); repeatable
#   --reps N          repetitions (default 3; targets alternate within each)
#   --size SIZE       data per sequential run, split over the jobs
#                     (default $MOUNT_BENCH_SIZE or 1g; e.g. 64m for a quick run)
#   --runtime S       seconds of each random 4 KiB run (default
#                     $MOUNT_BENCH_RUNTIME or 10)
#   --nrfiles N       files per metadata run, split over the jobs (default
#                     $MOUNT_BENCH_NRFILES or 5000)
#   --jobs "1 4"      fio numjobs values (separate files, --group_reporting)
#   --buffered        random jobs buffered on every target (no O_DIRECT probe)
#   --timeout S       bound on each fio run (default 900); a run that fails or
#                     times out ends that target's repetition (shown FAIL)
#   --out DIR         output (default target/mount-bench/<date>): fio JSON in
#                     json/, runs.tsv, results.md (the tables printed)
#
# Jobs, per target and repetition (caches dropped before each: sync; echo 3 >
# /proc/sys/vm/drop_caches, when root; a FUSE direct_io mount bypasses the
# page cache anyway; tmpfs data stays in memory whatever is dropped):
#   seqwrite  1 MiB sequential writes, end_fsync=1 (fsync time included), MiB/s
#   seqread   1 MiB sequential reads of those files, MiB/s
#   randread / randwrite  4 KiB, psync, time based, over the files of the first
#             --jobs value, IOPS; O_DIRECT where the target accepts it (probed
#             with dd), else buffered with invalidate=1 (+ end_fsync=1 for the
#             writes); the mode used is in the tables
#   filecreate / filestat / filedelete  fio's metadata ioengines, ops/s
#   ddwrite   one writer: `dd bs=1M count=SIZE/1MiB conv=fsync` (a single
#             stream, as a user copies a file), MiB/s from dd's own time
#   cpu       user+sys CPU s per GiB moved by seqwrite+seqread, of the
#             --cpu-pids processes and of fio itself (the client); and the
#             whole machine's busy CPU (/proc/stat: user, nice, system, irq,
#             softirq; every process and kernel thread, e.g. GlusterFS's
#             daemons and the file system under each target) per GiB, and
#             per 1,000 operations of the random jobs, filecreate and
#             filedelete (over the whole fio run, its setup included)
# Exit status: 0 all runs done; 1 some run failed (tables still printed);
# 2 bad arguments; 3 a process would not die (stuck on a dead mount).
set -euo pipefail
export LC_ALL=C

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() { sed -n '6,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "mount_bench.sh: $*" >&2; exit 2; }
say() { echo "mount_bench: $*" >&2; }

reps=3 size=${MOUNT_BENCH_SIZE:-1g} runtime=${MOUNT_BENCH_RUNTIME:-10}
nrfiles=${MOUNT_BENCH_NRFILES:-5000} jobs_list="1 4" timeout_s=900
out="" bindfs_backing="" force_buffered=0
names=() dirs=() cpu_specs=()
cmdline="bench/mount_bench.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --bindfs) [ $# -ge 2 ] || die "--bindfs needs a directory"; bindfs_backing=$2; shift 2 ;;
    --cpu-pids) [ $# -ge 2 ] || die "--cpu-pids needs pids"; cpu_specs+=("$2"); shift 2 ;;
    --reps) [ $# -ge 2 ] || die "--reps needs a number"; reps=$2; shift 2 ;;
    --size) [ $# -ge 2 ] || die "--size needs a size"; size=$2; shift 2 ;;
    --runtime) [ $# -ge 2 ] || die "--runtime needs seconds"; runtime=$2; shift 2 ;;
    --nrfiles) [ $# -ge 2 ] || die "--nrfiles needs a number"; nrfiles=$2; shift 2 ;;
    --jobs) [ $# -ge 2 ] || die "--jobs needs a list"; jobs_list=$2; shift 2 ;;
    --timeout) [ $# -ge 2 ] || die "--timeout needs seconds"; timeout_s=$2; shift 2 ;;
    --buffered) force_buffered=1; shift ;;
    --out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) usage >&2; die "unknown option '$1'" ;;
    *=*)
      name=${1%%=*} dir=${1#*=}
      [[ $name =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad target name '$name' (letters, digits, _ . -)"
      [ -n "$dir" ] || die "target $name: empty directory"
      names+=("$name") dirs+=("$dir"); shift ;;
    *) usage >&2; die "'$1' is not NAME=DIR" ;;
  esac
done

posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer, not '$2'"; }
posint --reps "$reps"; posint --runtime "$runtime"; posint --nrfiles "$nrfiles"
posint --timeout "$timeout_s"
read -ra jobs <<<"$jobs_list"
[ ${#jobs[@]} -ge 1 ] || die "--jobs is empty"
for nj in "${jobs[@]}"; do posint "--jobs value" "$nj"; done
size_bytes=$(numfmt --from=iec "$(echo "$size" | tr '[:lower:]' '[:upper:]' | sed 's/I\{0,1\}B$//')" 2>/dev/null) ||
  die "--size: cannot read '$size' (e.g. 64m, 1g)"
mib=$((1024 * 1024))
for nj in "${jobs[@]}"; do
  [ $((size_bytes / nj)) -ge $mib ] || die "--size $size is less than 1 MiB per job with $nj jobs"
  [ $((nrfiles / nj)) -ge 1 ] || die "--nrfiles $nrfiles is less than one file per job with $nj jobs"
done
if [ -n "$bindfs_backing" ]; then
  [ -d "$bindfs_backing" ] || die "--bindfs: not a directory: $bindfs_backing"
  for n in "${names[@]}"; do [ "$n" != bindfs ] || die "target name bindfs is taken by --bindfs"; done
fi
[ ${#names[@]} -ge 1 ] || [ -n "$bindfs_backing" ] || { usage >&2; die "no target given"; }
for i in "${!names[@]}"; do
  for j in "${!names[@]}"; do
    [ "$i" -ge "$j" ] || [ "${names[i]}" != "${names[j]}" ] || die "target name ${names[i]} given twice"
  done
  rc=0; timeout -k 5 30 test -d "${dirs[i]}" || rc=$?
  if [ $rc = 124 ] || [ $rc = 137 ]; then say "target ${names[i]}: ${dirs[i]} does not respond"; exit 3; fi
  [ $rc = 0 ] || die "target ${names[i]}: not a directory: ${dirs[i]}"
  dirs[i]=$(timeout -k 5 30 realpath -- "${dirs[i]}")
done

# --cpu-pids: NAME="PID ..." or "PID ..." (for the last NAME=DIR target)
declare -A cpu_pids=()
for spec in "${cpu_specs[@]}"; do
  if [[ $spec == *=* ]]; then
    tname=${spec%%=*} pids=${spec#*=}
  else
    [ ${#names[@]} -ge 1 ] || die "--cpu-pids without NAME= needs a NAME=DIR target"
    tname=${names[-1]} pids=$spec
  fi
  found=0
  for n in "${names[@]}"; do [ "$n" != "$tname" ] || found=1; done
  [ $found = 1 ] || die "--cpu-pids: no target named '$tname'"
  for p in $pids; do
    [[ $p =~ ^[0-9]+$ ]] || die "--cpu-pids: '$p' is not a pid"
    [ -r "/proc/$p/stat" ] || die "--cpu-pids: no process $p"
  done
  cpu_pids[$tname]="${cpu_pids[$tname]:-} $pids"
done

command -v python3 >/dev/null || die "python3 is needed to read fio's JSON"
bash "$REPO/scripts/fs-tools.sh" >/dev/null
is_root=0; [ "$(id -u)" != 0 ] || is_root=1
[ $is_root = 1 ] || say "WARNING: not root: caches are not dropped between runs"

out=${out:-$REPO/target/mount-bench/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/json"
out=$(realpath "$out")
: >"$out/runs.tsv"

# --- cleanup: bounded, runs on any exit --------------------------------------
bindfs_mnt="" bindfs_pid="" run_dirs=() fio_pid=""
# shellcheck disable=SC2317 # run by the trap
cleanup() {
  local d
  trap - EXIT INT TERM
  if [ -n "$fio_pid" ]; then # interrupted during a run: stop it first
    kill -TERM "$fio_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$fio_pid" 2>/dev/null || break; sleep 0.1; done
  fi
  for d in "${run_dirs[@]}"; do
    timeout -k 5 120 rm -rf "$d" 2>/dev/null || say "WARNING: could not remove $d"
  done
  if [ -n "$bindfs_mnt" ]; then
    if mountpoint -q "$bindfs_mnt"; then
      timeout -k 5 30 fusermount3 -u "$bindfs_mnt" 2>/dev/null ||
        timeout -k 5 30 umount -l "$bindfs_mnt" || say "WARNING: could not unmount $bindfs_mnt"
    fi
    if [ -n "$bindfs_pid" ]; then
      for _ in $(seq 50); do kill -0 "$bindfs_pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$bindfs_pid" 2>/dev/null || true
    fi
    rmdir "$bindfs_mnt" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "$bindfs_backing" ]; then
  bindfs_mnt=$(mktemp -d /tmp/mount_bench.bindfs.XXXXXX)
  read -ra bopts <<<"${BINDFS_OPTS:-}"
  bindfs -f -o allow_other "${bopts[@]}" "$bindfs_backing" "$bindfs_mnt" >"$out/bindfs.log" 2>&1 &
  bindfs_pid=$!
  for _ in $(seq 100); do
    mountpoint -q "$bindfs_mnt" && break
    kill -0 "$bindfs_pid" 2>/dev/null || { say "bindfs failed: $(cat "$out/bindfs.log")"; exit 1; }
    sleep 0.1
  done
  mountpoint -q "$bindfs_mnt" || { say "bindfs did not mount within 10 s"; exit 1; }
  names+=(bindfs) dirs+=("$bindfs_mnt")
  cpu_pids[bindfs]=$bindfs_pid
  say "bindfs of $bindfs_backing mounted at $bindfs_mnt (pid $bindfs_pid)"
fi

# --- helpers -----------------------------------------------------------------
clk_tck=$(getconf CLK_TCK)
# cpu_ticks "PID ..." -> user+sys ticks summed over the processes (all threads)
cpu_ticks() {
  local p s rest total=0 f
  for p in $1; do
    s=$(cat "/proc/$p/stat" 2>/dev/null) || { echo -1; return; }
    rest=${s##*) }
    read -ra f <<<"$rest"
    total=$((total + f[11] + f[12]))
  done
  echo "$total"
}
# machine_ticks -> busy ticks of every CPU (user nice system irq softirq)
machine_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8; exit}' /proc/stat; }
# children_ticks -> user+sys ticks of this shell's reaped children (fio)
children_ticks() {
  local s rest f
  s=$(cat "/proc/$$/stat")
  rest=${s##*) }
  read -ra f <<<"$rest"
  echo $((f[13] + f[14]))
}
# bounded CMD...: run under timeout; return its status; give up (exit 3) on a
# process that survives SIGKILL, so the script never hangs
bounded() {
  local limit=$1 rc=0 deadline
  shift
  timeout -k 10 "$limit" "$@" &
  fio_pid=$!
  deadline=$((SECONDS + limit + 40))
  while kill -0 "$fio_pid" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      say "'$*' (pid $fio_pid) survived SIGKILL: stuck in a file system; giving up"
      fio_pid=""
      exit 3
    fi
    sleep 0.05
  done
  wait "$fio_pid" || rc=$?
  fio_pid=""
  return $rc
}
drop_caches() {
  [ $is_root = 1 ] || return 0
  bounded 120 sync || return 1
  echo 3 >/proc/sys/vm/drop_caches
}
# measure_begin TARGET / measure_end TARGET REP JOB NJ MODE JSON STATUS: around one run, the
# CPU of TARGET's --cpu-pids, of this shell's children (the client) and of the whole machine,
# and the wall time; measure_end appends the run to runs.tsv and sets `took` (seconds)
measure_begin() {
  m_p0=$(cpu_ticks "${cpu_pids[$1]:-}") m_c0=$(children_ticks) m_m0=$(machine_ticks)
  m_w0=$(date +%s.%N)
}
measure_end() {
  local t=$1 rep=$2 job=$3 nj=$4 mode=$5 json=$6 status=$7 w1 m1 c1 p1 pid_s=-
  w1=$(date +%s.%N) m1=$(machine_ticks) c1=$(children_ticks) p1=$(cpu_ticks "${cpu_pids[$t]:-}")
  secs() { awk -v a="$1" -v b="$2" -v h="${3:-1}" 'BEGIN{printf "%.3f", (b - a) / h}'; }
  [ -z "${cpu_pids[$t]:-}" ] || [ "$m_p0" -lt 0 ] || [ "$p1" -lt 0 ] ||
    pid_s=$(secs "$m_p0" "$p1" "$clk_tck")
  took=$(secs "$m_w0" "$w1")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$rep" "$job" "$nj" "$mode" \
    "${json#"$out"/}" "$pid_s" "$(secs "$m_c0" "$c1" "$clk_tck")" "$took" "$status" \
    "$(secs "$m_m0" "$m1" "$clk_tck")" >>"$out/runs.tsv"
}
# fio_run TARGET REP JOB NJ MODE DIR ARGS... -> runs fio, appends to runs.tsv
fio_run() {
  local t=$1 rep=$2 job=$3 nj=$4 mode=$5 dir=$6 json rc=0 status=ok
  shift 6
  json=$out/json/$t/$job-nj$nj-rep$rep.json
  mkdir -p "$out/json/$t"
  drop_caches || { say "$t: sync failed before $job"; return 1; }
  measure_begin "$t"
  bounded "$timeout_s" fio --name="$job" --directory="$(fio_escape "$dir")" --numjobs="$nj" --group_reporting \
    --output-format=json --output="$json" "$@" >"$json.stderr" 2>&1 || rc=$?
  [ $rc = 0 ] || status=FAIL
  measure_end "$t" "$rep" "$job" "$nj" "$mode" "$json" "$status"
  [ -s "$json.stderr" ] || rm -f "$json.stderr"
  if [ $rc = 124 ] || [ $rc = 137 ]; then
    say "$t rep $rep: fio $job (nj $nj) timed out after $timeout_s s"
    return 1
  elif [ $rc != 0 ]; then
    say "$t rep $rep: fio $job (nj $nj) failed (exit $rc): $(tail -n 3 "$json.stderr" | tr '\n' ' ')"
    return 1
  fi
  say "$t rep $rep: $job nj=$nj done ($took s)"
}
# dd_run TARGET REP DIR -> one `dd bs=1M conv=fsync` stream of --size into DIR,
# recorded in runs.tsv as fio_run does (its figure in fio's JSON shape)
dd_run() {
  local t=$1 rep=$2 dir=$3 json rc=0 status=ok bytes secs
  json=$out/json/$t/ddwrite-nj1-rep$rep.json
  mkdir -p "$out/json/$t" "$dir"
  drop_caches || { say "$t: sync failed before ddwrite"; return 1; }
  measure_begin "$t"
  bounded "$timeout_s" dd if=/dev/zero of="$dir/dd.out" bs=1M count=$((size_bytes / mib)) conv=fsync \
    >"$json.stderr" 2>&1 || rc=$?
  rm -f "$dir/dd.out"
  # dd's last line: "N bytes (...) copied, T s, R MB/s"
  bytes=$(sed -n 's/^\([0-9]*\) bytes.*copied, \([0-9.]*\) s.*/\1/p' "$json.stderr" | tail -n 1)
  secs=$(sed -n 's/^\([0-9]*\) bytes.*copied, \([0-9.]*\) s.*/\2/p' "$json.stderr" | tail -n 1)
  if [ $rc != 0 ] || [ -z "$bytes" ] || [ -z "$secs" ]; then
    status=FAIL
  else
    awk -v b="$bytes" -v s="$secs" 'BEGIN{printf "{\"jobs\": [{\"write\": {\"bw_bytes\": %.0f, \"io_bytes\": %d}}]}\n", b / s, b}' >"$json"
    rm -f "$json.stderr"
  fi
  measure_end "$t" "$rep" ddwrite 1 buffered "$json" "$status"
  [ $status = ok ] || { say "$t rep $rep: dd failed (exit $rc): $(tail -n 2 "$json.stderr" | tr '\n' ' ')"; return 1; }
  say "$t rep $rep: ddwrite done ($took s)"
}
# fio's filename list syntax separates with ':'; escape it in paths
fio_escape() { printf '%s' "${1//:/\\:}"; }

# --- per-target preparation --------------------------------------------------
declare -A io_direct=()
for i in "${!names[@]}"; do
  t=${names[i]} d=${dirs[i]}
  rd=$d/.mount_bench.$$.$t
  timeout -k 5 30 mkdir -p "$rd" || { say "target $t: cannot create $rd"; exit 2; }
  run_dirs+=("$rd")
  if [ $force_buffered = 1 ]; then
    io_direct[$t]=0
  elif timeout -k 5 30 dd if=/dev/zero of="$rd/odirect" bs=4096 count=1 oflag=direct status=none 2>/dev/null &&
    timeout -k 5 30 dd if="$rd/odirect" of=/dev/null bs=4096 count=1 iflag=direct status=none 2>/dev/null; then
    io_direct[$t]=1
  else
    io_direct[$t]=0
    say "target $t: O_DIRECT refused; random 4 KiB jobs run buffered (invalidate=1)"
  fi
  rm -f "$rd/odirect"
  avail=$(timeout -k 5 30 df -B1 --output=avail "$rd" | tail -n 1 | tr -d ' ')
  need=$((2 * size_bytes + 64 * mib))
  if [[ $avail =~ ^[0-9]+$ ]] && [ "$avail" -lt "$need" ]; then
    say "target $t: $((avail / mib)) MiB free in $d, $((need / mib)) MiB needed (2 x --size + 64 MiB)"
    exit 2
  fi
done

{
  echo "# mount_bench $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Command: \`$cmdline\`  "
  echo "Host: $(uname -sr), $(nproc) cores, fio $(fio --version | sed 's/^fio-//')  "
  echo "Targets: $(for i in "${!names[@]}"; do
    printf '%s=%s (%s, %s%s) ' "${names[i]}" "${dirs[i]}" \
      "$(findmnt -n -o FSTYPE --target "${dirs[i]}" 2>/dev/null || echo '?')" \
      "$(if [ $force_buffered = 1 ]; then echo 'buffered (--buffered)'
      elif [ "${io_direct[${names[i]}]}" = 1 ]; then echo O_DIRECT; else echo 'no O_DIRECT'; fi)" \
      "${cpu_pids[${names[i]}]:+, cpu pids ${cpu_pids[${names[i]}]# }}"
  done)  "
  [ -z "$bindfs_backing" ] ||
    echo "bindfs: \`bindfs -f -o allow_other ${BINDFS_OPTS:+$BINDFS_OPTS }$bindfs_backing $bindfs_mnt\`  "
  echo "Size $size per sequential run; random runs ${runtime} s; $nrfiles files per metadata run;" \
    "jobs: ${jobs[*]}; $reps repetition(s); caches dropped: $([ $is_root = 1 ] && echo yes || echo no)"
} >"$out/header.md"

# --- the runs ----------------------------------------------------------------
seq_args=(--ioengine=psync --bs=1M)
# run_target_rep TARGET REP: all the jobs on one target; returns 1 at the
# first failed run
run_target_rep() {
  local t=$1 rep=$2 rd nj per fmt files j total mode rw meta
  local -a rand_args extra
  rd=${dirs[$3]}/.mount_bench.$$.$t
  for nj in "${jobs[@]}"; do
    per=$((size_bytes / nj / mib))M
    fmt="seq.nj$nj.\$jobnum"
    fio_run "$t" "$rep" seqwrite "$nj" buffered "$rd" "${seq_args[@]}" --rw=write \
      --size="$per" --end_fsync=1 --filename_format="$fmt" || return 1
    fio_run "$t" "$rep" seqread "$nj" buffered "$rd" "${seq_args[@]}" --rw=read \
      --size="$per" --invalidate=1 --filename_format="$fmt" || return 1
    [ "$nj" = "${jobs[0]}" ] || rm -f "$rd"/seq.nj"$nj".*
  done
  dd_run "$t" "$rep" "$rd" || return 1
  # the random jobs share the files of the first --jobs value (names relative
  # to --directory; fio separates file names with ':')
  files=""
  for j in $(seq 0 $((jobs[0] - 1))); do files+="${files:+:}seq.nj${jobs[0]}.$j"; done
  total=$(((size_bytes / jobs[0] / mib) * jobs[0]))M
  if [ "${io_direct[$t]}" = 1 ]; then
    rand_args=(--direct=1) mode=direct
  else
    rand_args=(--direct=0 --invalidate=1) mode=buffered
  fi
  for nj in "${jobs[@]}"; do
    for rw in randread randwrite; do
      extra=()
      [ $rw = randread ] || [ $mode = direct ] || extra=(--end_fsync=1)
      fio_run "$t" "$rep" "$rw" "$nj" "$mode" "$rd" --ioengine=psync --bs=4k --rw="$rw" \
        --filename="$files" --size="$total" --time_based=1 --runtime="$runtime" \
        "${rand_args[@]}" "${extra[@]}" || return 1
    done
  done
  rm -f "$rd"/seq.*
  for nj in "${jobs[@]}"; do
    meta=(--nrfiles=$((nrfiles / nj)) --filesize=4k --openfiles=1 --filename_format="meta.\$jobnum.\$filenum")
    rm -rf "$rd/meta"
    mkdir -p "$rd/meta"
    fio_run "$t" "$rep" filecreate "$nj" - "$rd/meta" --ioengine=filecreate \
      --fallocate=none --create_on_open=1 "${meta[@]}" || return 1
    fio_run "$t" "$rep" filestat "$nj" - "$rd/meta" --ioengine=filestat "${meta[@]}" || return 1
    fio_run "$t" "$rep" filedelete "$nj" - "$rd/meta" --ioengine=filedelete --unlink=0 \
      "${meta[@]}" || return 1
    rm -rf "$rd/meta"
  done
}
failed=0
for rep in $(seq "$reps"); do
  for i in "${!names[@]}"; do
    if ! run_target_rep "${names[i]}" "$rep" "$i"; then
      failed=1
      say "target ${names[i]} rep $rep: stopped after a failed run"
      timeout -k 5 120 rm -rf "${dirs[i]}/.mount_bench.$$.${names[i]}/"* 2>/dev/null || true
    fi
  done
done

# --- tables --------------------------------------------------------------------
python3 - "$out" "${names[0]}" "$(printf '%s ' "${names[@]}")" "${jobs[*]}" "$reps" \
  >"$out/tables.md" <<'PY'
import json, statistics, sys
out, first, names, jobs, reps = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split(), int(sys.argv[5])
runs = {}
for line in open(f"{out}/runs.tsv"):
    t, rep, job, nj, mode, js, pid_s, client_s, wall, status, machine_s = line.rstrip("\n").split("\t")
    runs[(t, int(rep), job, nj)] = dict(mode=mode, json=js, pid_s=pid_s, client_s=client_s,
                                        machine_s=machine_s, status=status)

def fio_job(r):
    with open(f"{out}/{r['json']}") as f:
        text = f.read()
    return json.loads(text[text.index("{"):])["jobs"][0]

METRIC = {  # job -> (title, unit, function of fio's job entry)
    "seqwrite": ("1 MiB sequential write, end_fsync=1", "MiB/s", lambda j: j["write"]["bw_bytes"] / 2**20),
    "seqread": ("1 MiB sequential read, cold cache", "MiB/s", lambda j: j["read"]["bw_bytes"] / 2**20),
    "randread": ("4 KiB random read", "IOPS", lambda j: j["read"]["iops"]),
    "randwrite": ("4 KiB random write", "IOPS", lambda j: j["write"]["iops"]),
    "filecreate": ("metadata: file create (fio filecreate)", "ops/s", lambda j: j["read"]["iops"]),
    "filestat": ("metadata: stat (fio filestat; fio's setup has stat()ed them)", "ops/s", lambda j: j["read"]["iops"]),
    "filedelete": ("metadata: unlink (fio filedelete)", "ops/s", lambda j: j["read"]["iops"]),
    "ddwrite": ("one writer: dd bs=1M conv=fsync, a single stream", "MiB/s", lambda j: j["write"]["bw_bytes"] / 2**20),
}

def value(t, rep, job, nj):
    r = runs.get((t, rep, job, nj))
    if r is None or r["status"] != "ok":
        return None if r is None else "FAIL"
    return METRIC[job][2](fio_job(r))

def cpu(t, rep, nj, key):
    """CPU seconds per GiB moved by seqwrite+seqread."""
    secs, moved = 0.0, 0
    for job, ddir in (("seqwrite", "write"), ("seqread", "read")):
        r = runs.get((t, rep, job, nj))
        if r is None or r["status"] != "ok" or r[key] == "-":
            return None
        secs += float(r[key])
        moved += fio_job(r)[ddir]["io_bytes"]
    return secs / (moved / 2**30) if moved else None

# job -> fio's direction holding its operation count. The machine's CPU is taken over the whole
# fio run, its setup included (starting the jobs, a stat of every file before filecreate and
# filedelete): comparable between targets, a little above the timed operations' own cost.
# filestat is left out: its setup lays every file out again (unlink, create, write, fsync).
OPS = {
    "randread": "read", "randwrite": "write", "filecreate": "read", "filedelete": "read",
}

def cpu_ops(t, rep, job, nj):
    """The whole machine's busy CPU milliseconds per operation (= seconds per 1,000)."""
    r = runs.get((t, rep, job, nj))
    if r is None or r["status"] != "ok":
        return None
    ops = fio_job(r)[OPS[job]]["total_ios"]
    return 1000 * float(r["machine_s"]) / ops if ops else None

def fmt(v):
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}" if v >= 0.01 else f"{v:.2g}"

def table(title, unit, get, show_mode=None):
    has_bindfs = "bindfs" in names
    head = ["target"] + (["mode"] if show_mode else []) + [f"rep {i}" for i in range(1, reps + 1)]
    head += ["median", f"× {first}"] + (["× bindfs"] if has_bindfs else [])
    rows, medians = [], {}
    for t in names:
        vals = [get(t, rep) for rep in range(1, reps + 1)]
        nums = [v for v in vals if isinstance(v, float)]
        medians[t] = statistics.median(nums) if len(nums) == reps and nums else None
        rows.append((t, vals))
    lines = [f"### {title} ({unit})", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t, vals in rows:
        m = medians[t]
        ratio = lambda base: f"{m / base:.2f}" if m is not None and base else "—"
        cells = [t] + ([show_mode(t)] if show_mode else []) + [fmt(v) for v in vals]
        cells += [fmt(m), ratio(medians.get(first))] + ([ratio(medians.get("bindfs"))] if has_bindfs else [])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"

def mode_of(job, nj):
    def f(t):
        modes = {r["mode"] for (tt, _, jj, n), r in runs.items() if tt == t and jj == job and n == nj}
        return "/".join(sorted(modes)) or "—"
    return f

parts = []
for job, (title, unit, _) in METRIC.items():
    for nj in (["1"] if job == "ddwrite" else jobs):
        parts.append(table(f"{title}, {nj} job{'s' if nj != '1' else ''}", unit,
                           lambda t, rep, job=job, nj=nj: value(t, rep, job, nj),
                           mode_of(job, nj) if job.startswith("rand") else None))
for nj in jobs:
    parts.append(table(f"CPU of the --cpu-pids processes per GiB moved (seqwrite+seqread), {nj} job(s)",
                       "s/GiB", lambda t, rep, nj=nj: cpu(t, rep, nj, "pid_s")))
    parts.append(table(f"CPU of fio itself (client) per GiB moved (seqwrite+seqread), {nj} job(s)",
                       "s/GiB", lambda t, rep, nj=nj: cpu(t, rep, nj, "client_s")))
    parts.append(table(f"CPU of the whole machine per GiB moved (seqwrite+seqread), {nj} job(s)",
                       "s/GiB", lambda t, rep, nj=nj: cpu(t, rep, nj, "machine_s")))
    for job in OPS:
        parts.append(table(f"CPU of the whole machine per 1,000 operations, {job}, {nj} job(s)",
                           "s per 1,000 ops", lambda t, rep, job=job, nj=nj: cpu_ops(t, rep, job, nj)))
print("\n".join(parts))
PY
cat "$out/header.md" - "$out/tables.md" <<<"" >"$out/results.md"
cat "$out/results.md"
say "results in $out/results.md, fio JSON in $out/json/"
exit $failed
