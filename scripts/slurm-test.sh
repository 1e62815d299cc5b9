#!/usr/bin/env bash
# The Slurm SPANK plugin (deploy/slurm/spank_iosets.c) against a real single-node Slurm that
# this script starts itself: munged, slurmctld, and a configless slurmd (it fetches slurm.conf,
# cgroup.conf and plugstack.conf from slurmctld with --conf-server), over `iosets serve` on
# loopback and `iosets mount` over it.
#
# Checks, in order:
#   1. `srun --io-priority=abc`, `sbatch --io-priority=abc` and `srun --io-priority=0.1
#      --io-auto` are refused with a clear message, and no job runs.
#   2. `srun --io-priority=0.1` runs a writer that writes 1 MiB through the mount and reads its
#      own MOUNT/.iosets/jobs/$SLURM_JOB_ID/priority ("0.1 control"); while it runs,
#      `iosets ctl jobs` shows that job under its SLURM_JOB_ID with priority 0.1 (source
#      control) and bytes_written > 0; after the job the priority is cleared (job epilog).
#   3. `sbatch --io-auto` on a job held while `iosets ctl set-priority` gives it 0.5: at its
#      start the plugin clears that, so the job reads a priority that is not "0.5 control".
#   4. `sbatch --io-priority=0.2` whose script runs a step (`srun true`) and then reads its
#      priority: the step's end does not clear it; the job's end does.
#   5. With the mount gone, `srun -n2 --io-priority=0.1` fails (on_error=fail): both tasks
#      print the plugin's refusal, srun exits non-zero, the command never ran.
#      With on_error=continue instead, the step runs and the failure is in slurmd's log.
#   6. plugstack.conf switched to `ctl=iosets servers=... token_file=... auth_file=...
#      shares=on` (scontrol reconfigure; slurmd fetches it again): `srun --io-priority=0.25
#      --account=physics` sets and clears the priority through `iosets ctl`, and the server
#      knows the job's account and node count while it runs (`ctl share list`), not after;
#      `shares=on` with `mount=` is refused with a clear message.
#   7. No plugin, deploy/slurm/prolog.sh and epilog.sh as Prolog/Epilog instead:
#      `srun --comment=project-x,io-priority=0.3` has 0.3 while it runs, cleared after;
#      `--comment=io-priority=abc` runs without a priority and does not drain the node.
#
# Usage: bash scripts/slurm-test.sh [IOSETS_BINARY]   (or IOSETS_BIN=...; default: builds
#        target/release/iosets with cargo, under CARGO_TARGET_DIR if set)
# Exit status: 0 all checks passed; 1 a check failed or something did not start; 77 slurmd
# cannot run in this sandbox (the reason is printed): only that is a skip.
# Bounded: after installing tools and building, a hard timeout of 180 s (SLURM_TEST_TIMEOUT)
# stops everything the script started and removes its temp dir (exit status 124 then).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

say() { echo "slurm-test: $*"; }
fail() { echo "slurm-test: FAIL: $*" >&2; dump_logs; exit 1; }
skip() { echo "slurm-test: SKIP: $*" >&2; exit 77; }
dump_logs() { :; }  # replaced once there are logs

if [ -z "${SLURM_TEST_INNER:-}" ]; then
  # Preparation, outside the hard bound: tools and the iosets binary.
  [ "$(id -u)" = 0 ] || fail "must run as root (slurmd, munged and the mount need it)"
  bash scripts/ecosystem-tools.sh || fail "could not install Slurm/munge (scripts/ecosystem-tools.sh)"
  for tool in slurmctld slurmd srun sbatch scontrol scancel squeue munged munge jq cc make; do
    command -v "$tool" >/dev/null || fail "$tool missing after scripts/ecosystem-tools.sh"
  done
  IOSETS=${1:-${IOSETS_BIN:-}}
  if [ -z "$IOSETS" ]; then
    cargo build --release --locked --quiet -p iosets-cli || fail "cargo build of iosets failed"
    IOSETS=${CARGO_TARGET_DIR:-$REPO/target}/release/iosets
  fi
  [ -x "$IOSETS" ] || fail "no iosets binary at $IOSETS"
  IOSETS=$(cd "$(dirname "$IOSETS")" && pwd)/$(basename "$IOSETS")
  # The hard bound: the inner run traps TERM and cleans up; KILL 20 s later if it does not.
  exec timeout --kill-after=20 "${SLURM_TEST_TIMEOUT:-180}" env SLURM_TEST_INNER=1 bash "$0" "$IOSETS"
fi
IOSETS=$1

T=$(mktemp -d /tmp/iosets-slurm.XXXXXX)
# The node secret of this test bed: serve, mount, ctl and the plugin (through slurmd) find it
# here, and the test never makes /etc/iosets/secret.
export IOSETS_AUTH_FILE="$T/node.secret"
chmod 755 "$T"  # munged (user munge) must reach its key and socket below it
mkdir -p "$T/etc" "$T/ctld" "$T/spool" "$T/data" "$T/mnt" "$T/out" "$T/munge"
PIDS=()        # processes this script started (killed in reverse order on exit)
STARTED_MUNGED=0
SLURMCTLD_PID=
# What slurmd leaves outside $T, removed at the end unless it was there before: the configless
# cache link /run/slurm/conf and the freezer cgroup directory slurm_<node>.
NODE=$(hostname -s)
RUN_SLURM_EXISTED=0
[ -e /run/slurm ] && RUN_SLURM_EXISTED=1
FREEZER_DIR=/sys/fs/cgroup/freezer/slurm_$NODE
FREEZER_EXISTED=0
[ -e "$FREEZER_DIR" ] && FREEZER_EXISTED=1
MUNGE_SOCKET=/run/munge/munge.socket.2

dump_logs() {
  for f in slurmctld.log slurmd.log serve.log mount.log munged.log; do
    [ -s "$T/$f" ] || continue
    echo "----- last lines of $f" >&2
    tail -n 25 "$T/$f" >&2
  done
}

cleanup() {
  set +e
  trap - EXIT TERM INT
  # Cancel what still runs while slurmctld answers (the hard timeout's TERM reaches every
  # process of the group at once, slurmctld too: then client commands would wait for it).
  if [ -n "$SLURMCTLD_PID" ] && kill -0 "$SLURMCTLD_PID" 2>/dev/null; then
    timeout 5 scancel --quiet --full "--user=root" 2>/dev/null
    for _ in $(seq 25); do
      [ -z "$(timeout 2 squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill -TERM "${PIDS[i]}" 2>/dev/null
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
  if grep -q " $T/mnt " /proc/self/mountinfo; then
    "$IOSETS" umount "$T/mnt" 2>/dev/null || umount -l "$T/mnt" 2>/dev/null
  fi
  if [ "$(readlink /run/slurm/conf 2>/dev/null)" = "$T/spool/conf-cache" ]; then
    rm -f /run/slurm/conf
    [ "$RUN_SLURM_EXISTED" = 0 ] && rmdir /run/slurm 2>/dev/null
  fi
  if [ "$FREEZER_EXISTED" = 0 ] && [ -d "$FREEZER_DIR" ]; then
    find "$FREEZER_DIR" -depth -type d -exec rmdir {} \; 2>/dev/null
  fi
  if [ "$STARTED_MUNGED" = 1 ]; then
    munged --stop --socket="$MUNGE_SOCKET" >/dev/null 2>&1
    rmdir /run/munge 2>/dev/null
  fi
  if [ -n "${SLURM_TEST_KEEP:-}" ]; then echo "slurm-test: kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'echo "slurm-test: FAIL: a command failed at line $LINENO" >&2; dump_logs' ERR
trap 'echo "slurm-test: FAIL: hard timeout or signal" >&2; dump_logs; exit 1' TERM INT

# ---- the plugin
make -s -C deploy/slurm OUT="$T/spank_iosets.so" || fail "the plugin does not build"

# ---- iosets serve on loopback, and the mount over it
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/token"
"$IOSETS" serve --root "$T/data" --listen 127.0.0.1:0 --token-file "$T/token" --auto-priority \
  >"$T/serve.log" 2>&1 &
PIDS+=($!)
SERVER=
for _ in $(seq 100); do
  SERVER=$(sed -n 's/^iosets serve: listening on \([0-9.]*:[0-9]*\) .*/\1/p' "$T/serve.log")
  [ -n "$SERVER" ] && break
  kill -0 "${PIDS[0]}" 2>/dev/null || fail "iosets serve died"
  sleep 0.1
done
[ -n "$SERVER" ] || fail "iosets serve did not print its address"
# start_mount: `iosets mount` over the server on $T/mnt; sets MOUNT_PID.
start_mount() {
  "$IOSETS" mount "$T/mnt" --servers "$SERVER" --token-file "$T/token" >>"$T/mount.log" 2>&1 &
  MOUNT_PID=$!
  PIDS+=("$MOUNT_PID")
  for _ in $(seq 100); do
    grep -q " $T/mnt " /proc/self/mountinfo && return 0
    kill -0 "$MOUNT_PID" 2>/dev/null || fail "iosets mount died"
    sleep 0.1
  done
  fail "the mount did not come up"
}
start_mount
ctl() { "$IOSETS" ctl --server "$SERVER" --token-file "$T/token" "$@"; }
say "iosets serve on $SERVER, mounted on $T/mnt"

# ---- munge. A configless slurmd authenticates before it has a slurm.conf, so before it could
# read AuthInfo=socket=...: it needs munged on the default socket. Use the one running there,
# else start one with this test's own key (and stop it at the end).
if munge -n -S "$MUNGE_SOCKET" 2>/dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1; then
  say "using the munged already running on $MUNGE_SOCKET"
else
  [ -S "$MUNGE_SOCKET" ] && fail "$MUNGE_SOCKET exists but does not answer; stop that munged first"
  install -d -o munge -g munge -m 0755 /run/munge
  chown munge:munge "$T/munge"
  chmod 0700 "$T/munge"
  head -c 1024 /dev/urandom >"$T/munge/munge.key"
  chown munge:munge "$T/munge/munge.key"
  chmod 0400 "$T/munge/munge.key"
  runuser -u munge -- munged --key-file="$T/munge/munge.key" --socket="$MUNGE_SOCKET" \
    --pid-file="$T/munge/munged.pid" --log-file="$T/munge/munged.log" \
    --seed-file="$T/munge/munged.seed" >"$T/munged.log" 2>&1 \
    || fail "munged did not start: $(cat "$T/munged.log")"
  STARTED_MUNGED=1
  munge -n -S "$MUNGE_SOCKET" | unmunge -S "$MUNGE_SOCKET" >/dev/null || fail "munge round trip failed"
  say "started munged on $MUNGE_SOCKET"
fi

# ---- slurm.conf, cgroup.conf, plugstack.conf (slurmctld ships all three to slurmd)
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 20000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}
CTLD_PORT=$(free_port)
SLURMD_PORT=$(free_port)
while [ "$SLURMD_PORT" = "$CTLD_PORT" ]; do SLURMD_PORT=$(free_port); done
NCPU=$(nproc)
cat >"$T/etc/slurm.conf" <<EOF
ClusterName=iosetstest
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmctldParameters=enable_configless
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$T/ctld
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
SlurmdDebug=debug
ProctrackType=proctrack/cgroup
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
PlugStackConfig=$T/etc/plugstack.conf
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$NCPU State=UNKNOWN
PartitionName=test Nodes=$NODE Default=YES MaxTime=5 State=UP
EOF
cat >"$T/etc/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
EOF
echo "required $T/spank_iosets.so mount=$T/mnt on_error=fail timeout=10" >"$T/etc/plugstack.conf"
export SLURM_CONF=$T/etc/slurm.conf

# ---- slurmctld, then a configless slurmd; only a slurmd that cannot run here is a skip
slurmctld -D -i -f "$SLURM_CONF" >"$T/slurmctld.out" 2>&1 &
SLURMCTLD_PID=$!
PIDS+=("$SLURMCTLD_PID")
for _ in $(seq 100); do
  scontrol ping 2>/dev/null | grep -q UP && break
  kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$T/slurmctld.out" >&2; fail "slurmctld died"; }
  sleep 0.1
done
scontrol ping | grep -q UP || fail "slurmctld does not answer"

if [ ! -d /sys/fs/cgroup/freezer ] || ! grep -q ' /sys/fs/cgroup/freezer ' /proc/self/mountinfo; then
  skip "slurmd needs the cgroup v1 freezer hierarchy (proctrack/cgroup with cgroup/v1) and /sys/fs/cgroup/freezer is not mounted"
fi
env -u SLURM_CONF slurmd -D --conf-server "127.0.0.1:$CTLD_PORT" -N "$NODE" >"$T/slurmd.out" 2>&1 &
SLURMD_PID=$!
PIDS+=("$SLURMD_PID")
for _ in $(seq 150); do
  state=$(sinfo -h -N -n "$NODE" -o %T 2>/dev/null || true)
  case "$state" in idle*) break ;; esac
  if ! kill -0 "$SLURMD_PID" 2>/dev/null; then
    # Name the reason; a cgroup mount slurmd cannot use is the sandbox's limit, anything else a failure.
    reason=$(cat "$T/slurmd.out" "$T/slurmd.log" 2>/dev/null | grep -iE 'error|fatal' | tail -n 5)
    if grep -qiE 'cgroup.*(mount|not (found|supported)|unable to|cannot)' <<<"$reason"; then
      skip "slurmd cannot run in this sandbox: $reason"
    fi
    fail "slurmd died: $reason"
  fi
  sleep 0.2
done
case "$state" in idle*) ;; *) fail "node $NODE is '$state', not idle" ;; esac
[ -f "$T/spool/conf-cache/slurm.conf" ] && [ -f "$T/spool/conf-cache/plugstack.conf" ] \
  || fail "slurmd came up without a fetched config (configless mode not in effect)"
say "slurmctld on :$CTLD_PORT, configless slurmd on :$SLURMD_PORT, node $NODE idle"

jobs_before=$(squeue -h -t all -o %i | wc -l)

# ---- 1. refused options
if out=$(srun -N1 --io-priority=abc true 2>&1); then
  fail "srun --io-priority=abc ran: $out"
fi
grep -q 'io-priority=abc: not a finite positive number' <<<"$out" \
  || fail "srun --io-priority=abc failed without the plugin's message: $out"
say "refused: srun --io-priority=abc -> $(grep -m1 'not a finite' <<<"$out")"
if out=$(sbatch --io-priority=abc --wrap true 2>&1); then
  fail "sbatch --io-priority=abc was accepted: $out"
fi
grep -q 'io-priority=abc: not a finite positive number' <<<"$out" \
  || fail "sbatch --io-priority=abc failed without the plugin's message: $out"
if out=$(srun -N1 --io-priority=0.1 --io-auto true 2>&1); then
  fail "srun --io-priority=0.1 --io-auto ran: $out"
fi
grep -q 'mutually exclusive' <<<"$out" || fail "--io-priority with --io-auto: no clear message: $out"
say "refused: srun --io-priority=0.1 --io-auto -> $(grep -m1 'mutually' <<<"$out")"
[ "$(squeue -h -t all -o %i | wc -l)" = "$jobs_before" ] || fail "a refused srun created a job"

# ---- 2. srun --io-priority=0.1: set at start, visible in jobstats, cleared at the end
cat >"$T/writer.sh" <<'EOF'
#!/bin/sh
# Writes 1 MiB through the mount, reads its own priority, then waits for the test's go-ahead.
set -e
m=$1 out=$2
cat "$m/.iosets/jobs/$SLURM_JOB_ID/priority" >"$out/prio.$SLURM_JOB_ID"
dd if=/dev/zero of="$m/out.$SLURM_JOB_ID" bs=64k count=16 conv=fsync 2>/dev/null
grep freezer /proc/self/cgroup >"$out/cgroup.$SLURM_JOB_ID" || true
touch "$out/ready.$SLURM_JOB_ID"
i=0
while [ ! -e "$out/go.$SLURM_JOB_ID" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
EOF
chmod 755 "$T/writer.sh"

# start_writer SRUN_ARGS...: runs writer.sh under srun in the background; sets $job once it
# has read its priority and written (it then waits for finish_writer).
start_writer() {
  rm -f "$T"/out/ready.*
  srun -N1 -n1 "$@" "$T/writer.sh" "$T/mnt" "$T/out" >"$T/srun.out" 2>&1 &
  SRUN_PID=$!
  PIDS+=("$SRUN_PID")
  job=
  for _ in $(seq 300); do
    job=$(cd "$T/out" && find . -name 'ready.*' | sed 's/^\.\/ready\.//' | head -n1)
    [ -n "$job" ] && return 0
    kill -0 "$SRUN_PID" 2>/dev/null || fail "srun $* ended early: $(cat "$T/srun.out")"
    sleep 0.1
  done
  fail "the writer job (srun $*) did not get ready"
}
# finish_writer: lets the writer end and waits for srun.
finish_writer() {
  touch "$T/out/go.$job"
  wait "$SRUN_PID" || fail "srun of job $job failed: $(cat "$T/srun.out")"
}
# job_entry JOB: the job's entry of `iosets ctl jobs` (JSON), empty if the servers lack it.
job_entry() { ctl --json jobs | jq -c --argjson j "$1" '.jobs[] | select(.job == $j)'; }
# wait_cleared JOB: waits (15 s at most) until JOB has no control priority; fails otherwise.
wait_cleared() {
  local src=control
  for _ in $(seq 150); do
    src=$(job_entry "$1" | jq -r '.priority_source')
    [ "$src" != control ] && return 0
    sleep 0.1
  done
  fail "job $1 still has its control priority 15 s after it ended: $(job_entry "$1")"
}
# wait_job JOB: waits (30 s at most) until JOB has left the queue.
wait_job() {
  for _ in $(seq 300); do
    [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0
    sleep 0.1
  done
  fail "job $1 still queued or running after 30 s"
}

start_writer --io-priority=0.1
say "job $job ($(cat "$T/out/cgroup.$job")) read its priority: $(cat "$T/out/prio.$job")"
[ "$(cat "$T/out/prio.$job")" = "0.1 control" ] \
  || fail "job $job read '$(cat "$T/out/prio.$job")' from its priority file, not '0.1 control'"
entry=$(job_entry "$job")
[ -n "$entry" ] || fail "iosets ctl jobs does not list job $job: $(ctl --json jobs)"
say "iosets ctl jobs while it runs: $(jq -c '{job, priority, priority_source, bytes_written, ops}' <<<"$entry")"
jq -e '.priority == 0.1 and .priority_source == "control" and .bytes_written > 0' <<<"$entry" >/dev/null \
  || fail "job $job's jobstats: want priority 0.1 from control and bytes_written > 0: $entry"
stats_written=$(jq '.total.bytes_written' "$T/mnt/.iosets/jobs/$job/stats")
[ "$stats_written" -ge 1048576 ] || fail "the mount's stats of job $job show $stats_written bytes written, not >= 1 MiB"
finish_writer
wait_cleared "$job"
say "after job $job ended: its priority file says '$(cat "$T/mnt/.iosets/jobs/$job/priority")'"

# ---- 3. sbatch --io-auto clears a priority set by hand before the job started
jid=$(sbatch --parsable --hold --io-auto -o "$T/out/batch.%j" \
  --wrap "cat $T/mnt/.iosets/jobs/\$SLURM_JOB_ID/priority > $T/out/auto.\$SLURM_JOB_ID") \
  || fail "sbatch --io-auto refused"
ctl set-priority "$jid" 0.5 >/dev/null
[ "$(cat "$T/mnt/.iosets/jobs/$jid/priority")" = "0.5 control" ] || fail "ctl set-priority did not take"
scontrol release "$jid"
wait_job "$jid"
[ -s "$T/out/auto.$jid" ] || fail "the sbatch --io-auto job $jid did not run: $(cat "$T/out/batch.$jid" 2>/dev/null)"
[ "$(cat "$T/out/auto.$jid")" != "0.5 control" ] \
  || fail "sbatch --io-auto job $jid still had the hand-set priority 0.5 at its start"
say "sbatch --io-auto job $jid: hand-set 0.5 cleared at start, it read '$(cat "$T/out/auto.$jid")'"

# ---- 4. a step ending inside a job leaves the job's priority alone; the job's end clears it
jid=$(sbatch --parsable --io-priority=0.2 -o "$T/out/batch.%j" --wrap \
  "srun -n1 true && cat $T/mnt/.iosets/jobs/\$SLURM_JOB_ID/priority > $T/out/multi.\$SLURM_JOB_ID") \
  || fail "sbatch --io-priority=0.2 refused"
wait_job "$jid"
[ -s "$T/out/multi.$jid" ] || fail "the two-step job $jid did not run: $(cat "$T/out/batch.$jid" 2>/dev/null)"
[ "$(cat "$T/out/multi.$jid")" = "0.2 control" ] \
  || fail "job $jid read '$(cat "$T/out/multi.$jid")' after its srun step ended, not '0.2 control'"
wait_cleared "$jid"
say "sbatch --io-priority=0.2 job $jid: read '$(cat "$T/out/multi.$jid")' after its srun step ended; cleared at job end"

# reconfigure: makes slurmctld re-read its files and slurmd fetch them again (configless);
# waits until slurmd's cache has the new plugstack.conf and slurm.conf and the node is idle.
reconfigure() {
  scontrol reconfigure || fail "scontrol reconfigure failed"
  for _ in $(seq 150); do
    if cmp -s "$T/etc/plugstack.conf" "$T/spool/conf-cache/plugstack.conf" \
      && cmp -s "$T/etc/slurm.conf" "$T/spool/conf-cache/slurm.conf" \
      && sinfo -h -N -n "$NODE" -o %T | grep -q '^idle'; then
      return 0
    fi
    sleep 0.2
  done
  fail "slurmd did not fetch the new configuration within 30 s"
}

# ---- 5. no mount: on_error=fail refuses every task of the step, and its command does not run
kill -TERM "$MOUNT_PID"
for _ in $(seq 100); do grep -q " $T/mnt " /proc/self/mountinfo || break; sleep 0.1; done
grep -q " $T/mnt " /proc/self/mountinfo && fail "the mount did not go away"
rc=0
out=$(srun -N1 -n2 --io-priority=0.1 touch "$T/out/ran-without-mount" 2>&1) || rc=$?
[ "$rc" != 0 ] || fail "srun --io-priority=0.1 exited 0 without the mount: $out"
[ ! -e "$T/out/ran-without-mount" ] || fail "the step's command ran although the plugin failed"
[ "$(grep -c 'refusing to run job [0-9]* without its I/O priority' <<<"$out")" = 2 ] \
  || fail "srun without the mount: want the refusal from both tasks: $out"
say "no mount: srun exited $rc: $(grep -m1 'refusing' <<<"$out")"

# ---- 5b. still no mount, on_error=continue: the step runs, the failure is in slurmd's log
echo "required $T/spank_iosets.so mount=$T/mnt on_error=continue" >"$T/etc/plugstack.conf"
reconfigure
out=$(srun -N1 -n1 --io-priority=0.1 touch "$T/out/ran-on-continue" 2>&1) \
  || fail "on_error=continue: srun failed: $out"
[ -e "$T/out/ran-on-continue" ] || fail "on_error=continue: the step's command did not run"
line=$(grep 'iosets: --io-priority at start of job' "$T/slurmd.log" | tail -n1)
[ -n "$line" ] || fail "on_error=continue: the failed write is not in slurmd's log"
say "no mount, on_error=continue: the step ran; slurmd.log: ${line#*error: }"
start_mount

# ---- 6. the ctl mechanism: plugstack.conf runs `iosets ctl` against the server; with
# shares=on it also passes the job's Slurm account and node count (and forgets them at its end)
if grep -q 'shares=on' "$T/etc/plugstack.conf"; then fail "shares=on before section 6"; fi
echo "required $T/spank_iosets.so mount=$T/mnt shares=on" >"$T/etc/plugstack.conf"
reconfigure
if out=$(srun -N1 true 2>&1); then
  fail "shares=on with mount= was accepted: $out"
fi
grep -q 'shares=on needs ctl=' <<<"$out" || grep -q 'shares=on needs ctl=' "$T/slurmd.log" \
  || fail "shares=on with mount=: no clear message from srun or in slurmd.log: $out"
say "refused: shares=on with mount= -> $(grep -h -m1 -o 'shares=on needs ctl=[^"]*' - "$T/slurmd.log" <<<"$out" | head -n1)"
echo "required $T/spank_iosets.so ctl=$IOSETS servers=$SERVER token_file=$T/token auth_file=$IOSETS_AUTH_FILE shares=on" >"$T/etc/plugstack.conf"
reconfigure
start_writer --io-priority=0.25 --account=physics
entry=$(job_entry "$job")
jq -e '.priority == 0.25 and .priority_source == "control"' <<<"$entry" >/dev/null \
  || fail "ctl mechanism: job $job's jobstats lack priority 0.25 from control: $entry"
say "ctl mechanism: job $job read '$(cat "$T/out/prio.$job")'; jobstats $(jq -c '{priority, priority_source, bytes_written}' <<<"$entry")"
info=$(ctl --json share list | jq -c --argjson j "$job" '.jobs[] | select(.job == $j)')
jq -e '.account == "physics" and .nodes == 1' <<<"$info" >/dev/null \
  || fail "shares=on: the server lacks job $job's account and node count: $(ctl --json share list)"
say "shares=on: the server knows job $job as $info"
finish_writer
wait_cleared "$job"
for _ in $(seq 150); do
  [ -z "$(ctl --json share list | jq -c --argjson j "$job" '.jobs[] | select(.job == $j)')" ] && break
  sleep 0.1
done
[ -z "$(ctl --json share list | jq -c --argjson j "$job" '.jobs[] | select(.job == $j)')" ] \
  || fail "shares=on: job $job's account is still known 15 s after its end"
say "shares=on: job $job's account forgotten at its end"

# ---- 7. no plugin: prolog.sh / epilog.sh with --comment=io-priority=P
echo "# no plugins" >"$T/etc/plugstack.conf"
for script in prolog epilog; do
  printf '#!/bin/sh\nIOSETS_MOUNT=%s exec sh %s "$@"\n' "$T/mnt" "$REPO/deploy/slurm/$script.sh" \
    >"$T/$script-wrap.sh"
  chmod 755 "$T/$script-wrap.sh"
done
printf 'Prolog=%s\nEpilog=%s\n' "$T/prolog-wrap.sh" "$T/epilog-wrap.sh" >>"$T/etc/slurm.conf"
reconfigure
if out=$(srun -N1 --io-priority=0.1 true 2>&1); then
  fail "srun still knows --io-priority without the plugin: $out"
fi
start_writer --comment=project-x,io-priority=0.3
[ "$(cat "$T/out/prio.$job")" = "0.3 control" ] \
  || fail "prolog.sh: job $job read '$(cat "$T/out/prio.$job")', not '0.3 control'"
entry=$(job_entry "$job")
say "prolog.sh: job $job (--comment=project-x,io-priority=0.3) read '$(cat "$T/out/prio.$job")'; jobstats $(jq -c '{priority, priority_source, bytes_written}' <<<"$entry")"
finish_writer
wait_cleared "$job"
say "epilog.sh cleared job $job: its priority file says '$(cat "$T/mnt/.iosets/jobs/$job/priority")'"
# A malformed request: the prolog logs it and (IOSETS_ON_ERROR=continue, the default) the job
# runs without a priority; failing would make Slurm drain the node.
# The job id alone on stdout: srun's own messages ("job N queued and waiting for resources",
# when the previous job's epilog still holds the node) go to stderr, kept for a failure.
bad=$(srun -Q -N1 --comment=io-priority=abc sh -c 'echo $SLURM_JOB_ID' 2>"$T/out/bad.err") \
  || fail "prolog.sh: srun --comment=io-priority=abc failed: $bad $(cat "$T/out/bad.err")"
[ "$(cat "$T/mnt/.iosets/jobs/$bad/priority")" = none ] \
  || fail "prolog.sh: job $bad with a malformed comment has priority '$(cat "$T/mnt/.iosets/jobs/$bad/priority")'"
wait_job "$bad"
state=$(sinfo -h -N -n "$NODE" -o %T)
case "$state" in idle*) ;; *) fail "the node is '$state', not idle, after a malformed comment" ;; esac
say "prolog.sh: job $bad (--comment=io-priority=abc) ran without a priority; node $state"

echo "slurm-test: 8 passed, 0 failed"
