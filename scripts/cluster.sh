#!/usr/bin/env bash
# A cluster on one machine (issue 30, first part): every node a separate network host (its own
# network, UTS and mount namespaces) on a private subnet behind a bridge, with roles:
#   sN    storage nodes: glusterd and a brick each of the GlusterFS volume `pfs` (the PFS)
#   ioN   I/O nodes: the volume mounted at /pfs and `iosets serve --root /pfs/iosets --listen
#         <its address>:7070 --auth-file <the cluster's secret>` (with --storage 0: a plain
#         directory /srv/iosets-cluster/ioN instead)
#   cN    compute nodes: `iosets mount /mnt/iosets --servers <every I/O node> --auth-file ...`,
#         at the same path on every node, each in its own mount namespace, and a configless
#         `slurmd -N cN` with the SPANK plugin (`--io-priority`, `--io-auto`)
#   head  `slurmctld` (partition `io` of every compute node): run jobs with
#         `scripts/cluster.sh exec head -- srun -N2 ...` or `sbatch`
# The cluster's secret and control token are $STATE/secret and $STATE/token (mode 600), e.g.
#   scripts/cluster.sh exec c1 -- iosets ctl jobs --server 10.77.0.11:7070 \
#     --auth-file /run/iosets-cluster/secret --token-file /run/iosets-cluster/token
#
# Usage: scripts/cluster.sh up [--storage N] [--io N] [--compute N] [--no-slurm] [--bin PATH]
#                              [--subnet A.B.C] [--mount-timeout S] [--mount-flags "FLAGS"]
#                              [--direct-pfs]
#        scripts/cluster.sh status
#        scripts/cluster.sh exec NODE -- CMD [ARGS...]    (in NODE's namespaces)
#        scripts/cluster.sh stop NODE        (kill -9 its daemons, as a node that dies: ioN's
#                 server, cN's mount, sN's glusterd and brick)
#        scripts/cluster.sh restart NODE     (start them again: cN's mount, sN's glusterd and
#                 brick, ioN's server, stopped with SIGTERM first if it runs)
#        scripts/cluster.sh restart ioN -- FLAGS...   (with FLAGS added to `iosets serve`: they
#                 stay for later restarts until another `--` sets others; `--` alone drops them)
#        scripts/cluster.sh down
#   --storage N   storage nodes (default 2, 0..=8; 0: no PFS)
#   --io N        I/O nodes (default 2, 1..=16)
#   --compute N   compute nodes (default 2, 1..=32)
#   --no-slurm    no head node, no slurmd
#   --mount-timeout S  the mounts' --timeout: seconds before a request to a dead or
#                 unreachable I/O node fails with EIO (default 30)
#   --mount-flags "FLAGS"  more `iosets mount` flags for every compute node, e.g.
#                 "--attr-ttl-ms 0 --threads 64"
#   --direct-pfs  the compute nodes also mount the GlusterFS volume at /pfs with GlusterFS's
#                 own client (to compare the forwarding hop with it: bench/cluster_hop.sh)
#   --bin PATH    the iosets binary (default target/release/iosets, built first)
#   --subnet ABC  the first three octets of the private /24 (default 10.77.0; the bridge is .1,
#                 head .2, I/O nodes .11…, storage nodes .21…, compute nodes .101…)
# Installs glusterfs-server (storage nodes) and Slurm and munge (scripts/ecosystem-tools.sh)
# when missing. Uses the munged already running on /run/munge/munge.socket.2, else starts one
# with a key of the cluster's (stopped by `down`).
# Everything `up` makes (namespaces, links, the bridge, mounts, daemons, the state directory
# /run/iosets-cluster) is removed by `down`, and by `up` itself on Ctrl-C or any failure. A
# second `up` while one runs is refused. Needs root. Exit status: 0 done, 1 failed, 2 bad
# arguments or a cluster already up (up) / none up (exec, status).
set -euo pipefail
export LC_ALL=C
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=/run/iosets-cluster
BRIDGE=iosclbr0
PORT=7070
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "cluster.sh: $1" >&2; exit "${2:-1}"; }
say() { echo "cluster: $*" >&2; }

# --- the namespaces of one node ------------------------------------------------
# ns_of NODE: nsenter's arguments for NODE's network, mount and UTS namespaces, in NS
ns_of() {
  NS=(--net="/var/run/netns/iocl-$1" --mount="$STATE/ns/$1.mnt" --uts="$STATE/ns/$1.uts")
}

# node_exec NODE CMD...: CMD in NODE's namespaces
node_exec() {
  ns_of "$1"
  shift
  [ ! -f "$STATE/slurm/slurm.conf" ] || export SLURM_CONF="$STATE/slurm/slurm.conf"
  nsenter "${NS[@]}" -- "$@"
}

# node_spawn NODE CMD...: node_exec as a daemon's whole process (run it with `&`: $! is then
# CMD's own pid, as nsenter execs it)
node_spawn() {
  ns_of "$1"
  shift
  exec nsenter "${NS[@]}" -- "$@"
}

# node_pids: every process of every node (the daemons started here and what they started:
# GlusterFS's brick servers and clients)
node_pids() {
  local n addr
  cat "$STATE"/pids/* 2>/dev/null
  [ -f "$STATE/nodes" ] || return 0
  while read -r n addr; do ip netns pids "iocl-$n" 2>/dev/null; done <"$STATE/nodes"
}

# make_node NODE ADDRESS: its namespaces (network: a veth on the bridge; UTS: its hostname;
# mount: a private copy), recorded in $STATE/nodes
make_node() {
  local n=$1 addr=$2
  ip netns add "iocl-$n"
  echo "$n $addr" >>"$STATE/nodes"
  ip link add "iocl-$n" type veth peer name eth0 netns "iocl-$n"
  ip link set "iocl-$n" master "$BRIDGE" up
  ip -n "iocl-$n" addr add "$addr/24" dev eth0
  ip -n "iocl-$n" link set eth0 up
  ip -n "iocl-$n" link set lo up
  : >"$STATE/ns/$n.mnt"
  : >"$STATE/ns/$n.uts"
  unshare --mount="$STATE/ns/$n.mnt" --uts="$STATE/ns/$n.uts" --propagation private \
    hostname "$n"
}

# gluster_dirs NODE: GlusterFS's state and logs private to NODE (bound over the system's in its
# mount namespace), and its run-time directory: a storage node (`storage`) gets a /run of its
# own (glusterd's socket is /run/glusterd.socket, one per node; the host's /run is then hidden
# there), another node a /run/gluster of its own (its GlusterFS client's)
gluster_dirs() {
  local n=$1 kind=${2:-client} d
  for d in lib log run; do mkdir -p "$STATE/gluster/$n/$d"; done
  node_exec "$n" mount --bind "$STATE/gluster/$n/lib" /var/lib/glusterd
  node_exec "$n" mount --bind "$STATE/gluster/$n/log" /var/log/glusterfs
  if [ "$kind" = storage ]; then
    node_exec "$n" sh -c 'mount -t tmpfs -o mode=755 tmpfs /run && mkdir -p /run/gluster'
  else
    node_exec "$n" mount --bind "$STATE/gluster/$n/run" /run/gluster
  fi
}

# gluster_in NODE ARGS...: the gluster CLI against NODE's glusterd
gluster_in() {
  local n=$1
  shift
  node_exec "$n" gluster --mode=script "$@"
}

# --- down: everything up made, whatever state it is in ---------------------------
down() {
  set +e
  [ -d "$STATE" ] || return 0
  local pid n addr
  # Mounts first (their daemons answer the unmount), then every process of every node, then
  # each node's namespaces.
  if [ -f "$STATE/nodes" ]; then
    while read -r n addr; do
      [ -e "$STATE/ns/$n.mnt" ] || continue
      node_exec "$n" umount /mnt/iosets 2>/dev/null ||
        node_exec "$n" umount -l /mnt/iosets 2>/dev/null
    done <"$STATE/nodes"
  fi
  for pid in $(node_pids); do kill "$pid" 2>/dev/null; done
  for _ in $(seq 50); do
    local alive=0
    for pid in $(node_pids); do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for pid in $(node_pids); do kill -9 "$pid" 2>/dev/null; done
  if [ -f "$STATE/nodes" ]; then
    while read -r n addr; do
      [ ! -e "$STATE/ns/$n.mnt" ] || node_exec "$n" umount -l /pfs 2>/dev/null
      umount "$STATE/ns/$n.mnt" "$STATE/ns/$n.uts" 2>/dev/null
      ip link del "iocl-$n" 2>/dev/null
      ip netns del "iocl-$n" 2>/dev/null
      # What slurmd leaves outside the state directory: its freezer cgroups (and, below, the
      # configless cache link).
      [ ! -d "/sys/fs/cgroup/freezer/slurm_$n" ] ||
        find "/sys/fs/cgroup/freezer/slurm_$n" -depth -type d -exec rmdir {} \; 2>/dev/null
    done <"$STATE/nodes"
  fi
  ip link del "$BRIDGE" 2>/dev/null
  case "$(readlink /run/slurm/conf 2>/dev/null)" in "$STATE"/*) rm -f /run/slurm/conf ;; esac
  rmdir /run/slurm 2>/dev/null
  if [ -f "$STATE/munged.started" ]; then
    munged --stop --socket=/run/munge/munge.socket.2 >/dev/null 2>&1
    rmdir /run/munge 2>/dev/null
  fi
  umount "$STATE/ns" 2>/dev/null
  rm -rf "$STATE" /srv/iosets-cluster
  return 0
}

up() {
  local storage=2 io=2 compute=2 bin="" subnet=10.77.0 slurm=1 timeout=30 mount_flags="" direct=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --storage) [ $# -ge 2 ] || die "--storage needs a number" 2; storage=$2; shift 2 ;;
      --io) [ $# -ge 2 ] || die "--io needs a number" 2; io=$2; shift 2 ;;
      --compute) [ $# -ge 2 ] || die "--compute needs a number" 2; compute=$2; shift 2 ;;
      --no-slurm) slurm=0; shift ;;
      --mount-timeout) [ $# -ge 2 ] || die "--mount-timeout needs seconds" 2; timeout=$2; shift 2 ;;
      --bin) [ $# -ge 2 ] || die "--bin needs a path" 2; bin=$2; shift 2 ;;
      --mount-flags) [ $# -ge 2 ] || die "--mount-flags needs flags" 2; mount_flags=$2; shift 2 ;;
      --direct-pfs) direct=1; shift ;;
      --subnet) [ $# -ge 2 ] || die "--subnet needs A.B.C" 2; subnet=$2; shift 2 ;;
      *) die "up: unknown argument '$1' (see --help)" 2 ;;
    esac
  done
  [[ $storage =~ ^[0-9]+$ ]] && [ "$storage" -le 8 ] || die "--storage $storage: 0 to 8" 2
  [[ $io =~ ^[0-9]+$ ]] && [ "$io" -ge 1 ] && [ "$io" -le 16 ] || die "--io $io: 1 to 16" 2
  [[ $compute =~ ^[0-9]+$ ]] && [ "$compute" -ge 1 ] && [ "$compute" -le 32 ] ||
    die "--compute $compute: 1 to 32" 2
  [[ $timeout =~ ^[0-9]+$ ]] && [ "$timeout" -ge 1 ] && [ "$timeout" -le 3600 ] ||
    die "--mount-timeout $timeout: 1 to 3600 seconds" 2
  [[ $subnet =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "--subnet $subnet: three octets, e.g. 10.77.0" 2
  [[ $mount_flags =~ ^[-A-Za-z0-9_.,=:/\ ]*$ ]] || die "--mount-flags '$mount_flags': flags and values only (letters, digits, - _ . , = : /)" 2
  [ "$direct" = 0 ] || [ "$storage" -gt 0 ] || die "--direct-pfs needs storage nodes (--storage 1 or more)" 2
  [ "$(id -u)" = 0 ] || die "needs root (namespaces, a bridge, FUSE mounts)" 2
  [ ! -e "$STATE" ] || die "a cluster is already up ($STATE exists): scripts/cluster.sh down first" 2
  ip link show "$BRIDGE" >/dev/null 2>&1 && die "the bridge $BRIDGE exists (another cluster?): scripts/cluster.sh down" 2
  if [ -z "$bin" ]; then
    (cd "$REPO" && cargo build --release --locked -q -p iosets-cli)
    bin=$REPO/target/release/iosets
  fi
  [ -x "$bin" ] || die "--bin $bin: not an executable" 2
  bin=$(realpath "$bin")
  if [ "$storage" -gt 0 ] && ! command -v glusterd >/dev/null; then
    say "installing glusterfs-server (storage nodes)"
    apt-get update -qq && apt-get install -y -qq glusterfs-server >/dev/null
  fi

  mkdir -p "$STATE/pids" "$STATE/logs" "$STATE/ns"
  trap 'say "interrupted: taking the cluster down"; down; exit 1' INT TERM
  trap 'rc=$?; if [ $rc != 0 ]; then say "up failed: taking the cluster down"; down; fi' EXIT
  # The namespace files need a private mount to be bound on.
  mount --bind "$STATE/ns" "$STATE/ns"
  mount --make-private "$STATE/ns"
  echo "$bin" >"$STATE/bin"
  # The cluster's secret (every node proves it holds it) and the control token (`iosets ctl`,
  # `.iosets/`), both private to root.
  local f
  for f in secret token; do
    (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$STATE/$f" && echo >>"$STATE/$f")
  done

  ip link add "$BRIDGE" type bridge
  ip addr add "$subnet.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up

  local i servers="" addr bricks="" root
  if [ "$storage" -gt 0 ]; then
    for i in $(seq "$storage"); do
      addr=$subnet.$((20 + i))
      make_node "s$i" "$addr"
      gluster_dirs "s$i" storage
      mkdir -p "/srv/iosets-cluster/s$i"
      node_spawn "s$i" glusterd -N >"$STATE/logs/s$i.log" 2>&1 &
      echo $! >"$STATE/pids/s$i"
      bricks+=" $addr:/srv/iosets-cluster/s$i/brick"
    done
    for i in $(seq "$storage"); do
      for _ in $(seq 100); do gluster_in "s$i" volume list >/dev/null 2>&1 && break; sleep 0.2; done
      gluster_in "s$i" volume list >/dev/null 2>&1 || die "s$i: glusterd did not start (log: $STATE/logs/s$i.log)"
    done
    for i in $(seq 2 "$storage"); do
      gluster_in s1 peer probe "$subnet.$((20 + i))" >/dev/null || die "s1 could not probe s$i"
    done
    # The pool is ready when s1 sees every peer connected.
    for _ in $(seq 100); do
      [ "$(gluster_in s1 peer status 2>/dev/null | grep -c 'Peer in Cluster (Connected)')" = $((storage - 1)) ] && break
      sleep 0.2
    done
    # shellcheck disable=SC2086
    gluster_in s1 volume create pfs transport tcp $bricks force >/dev/null ||
      die "the GlusterFS volume could not be made over$bricks"
    gluster_in s1 volume start pfs >/dev/null || die "the GlusterFS volume did not start"
    echo "pfs:$bricks" >"$STATE/pfs"
  fi
  for i in $(seq "$io"); do
    addr=$subnet.$((10 + i))
    make_node "io$i" "$addr"
    if [ "$storage" -gt 0 ]; then
      gluster_dirs "io$i"
      mkdir -p /pfs
      node_exec "io$i" mount -t glusterfs "$subnet.21:/pfs" /pfs ||
        die "io$i could not mount the GlusterFS volume at /pfs"
      root=/pfs/iosets
      node_exec "io$i" mkdir -p "$root"
    else
      root=/srv/iosets-cluster/io$i
      mkdir -p "$root"
    fi
    printf '%q ' "$bin" serve --root "$root" --listen "$addr:$PORT" --admin-listen "$addr:0" \
      --auth-file "$STATE/secret" --token-file "$STATE/token" >"$STATE/serve.io$i"
    spawn_server "io$i"
    servers+="${servers:+,}$addr:$PORT"
  done
  for i in $(seq "$io"); do wait_server "io$i"; done
  echo "$servers" >"$STATE/servers"
  mkdir -p /mnt/iosets
  for i in $(seq "$compute"); do
    make_node "c$i" "$subnet.$((100 + i))"
    # shellcheck disable=SC2086
    printf '%q ' "$bin" mount /mnt/iosets --servers "$servers" --auth-file "$STATE/secret" \
      --token-file "$STATE/token" --timeout "$timeout" $mount_flags >"$STATE/mount.c$i"
    if [ "$direct" = 1 ]; then
      gluster_dirs "c$i"
      mkdir -p /pfs
      node_exec "c$i" mount -t glusterfs "$subnet.21:/pfs" /pfs ||
        die "c$i could not mount the GlusterFS volume at /pfs"
    fi
    spawn_mount "c$i"
  done
  for i in $(seq "$compute"); do wait_mount "c$i"; done
  [ "$slurm" = 0 ] || start_slurm "$subnet" "$compute"
  trap - INT TERM EXIT
  status
}

# spawn_server NODE: its `iosets serve` (the command `up` saved), in the background, its log
# appended to
spawn_server() {
  local n=$1 cmd
  cmd="$(cat "$STATE/serve.$n") $(cat "$STATE/serve.$n.extra" 2>/dev/null || true)"
  echo "--- started $(date -u +%FT%TZ)" >>"$STATE/logs/$n.log"
  eval "node_spawn $n $cmd" >>"$STATE/logs/$n.log" 2>&1 &
  echo $! >"$STATE/pids/$n"
}

# wait_server NODE: returns once NODE's server listens (its latest start), or dies
wait_server() {
  local n=$1 log=$STATE/logs/$1.log
  for _ in $(seq 100); do
    sed -n '/^--- started/h; /^--- started/!H; ${x;p}' "$log" | grep -q "listening on" && return 0
    kill -0 "$(cat "$STATE/pids/$n")" 2>/dev/null || break
    sleep 0.1
  done
  cat "$log" >&2
  die "$n did not start (log above)"
}

# stop NODE: NODE's daemons killed (SIGKILL, as a node that dies): an I/O node's server, a
# compute node's mount (left detached; slurmd stays), a storage node's glusterd and brick
stop_node() {
  local n=${1:-} pid
  grep -q "^$n " "$STATE/nodes" 2>/dev/null && [ "$n" != head ] ||
    die "stop: no I/O, compute or storage node '$n' (scripts/cluster.sh status)" 2
  case "$n" in
    s*) for pid in $(ip netns pids "iocl-$n"); do kill -9 "$pid" 2>/dev/null || true; done ;;
    *) kill -9 "$(cat "$STATE/pids/$n")" 2>/dev/null || true ;;
  esac
}

# restart NODE [-- FLAGS...]: an I/O node's server started again, as `up` started it (stopped
# with SIGTERM first if it runs; FLAGS: see the usage); a compute node's mount (unmounted first
# if still there); a storage node's glusterd and its brick (after `stop`)
restart() {
  local n=${1:-}
  case "$n" in
    s[0-9]*)
      grep -q "^$n " "$STATE/nodes" 2>/dev/null || die "restart: no storage node '$n'" 2
      [ -z "$(ip netns pids "iocl-$n")" ] || die "restart: $n still runs (scripts/cluster.sh stop $n first)" 2
      node_spawn "$n" glusterd -N >>"$STATE/logs/$n.log" 2>&1 &
      echo $! >"$STATE/pids/$n"
      for _ in $(seq 100); do gluster_in "$n" volume list >/dev/null 2>&1 && break; sleep 0.2; done
      # The brick starts again once its glusterd rejoins the pool.
      for _ in $(seq 100); do
        gluster_in "$n" volume start pfs force >/dev/null 2>&1 &&
          gluster_in "$n" volume status pfs "$(sed -n "s/^$n //p" "$STATE/nodes"):/srv/iosets-cluster/$n/brick" 2>/dev/null |
          grep -q ' Y ' && return 0
        sleep 0.2
      done
      die "restart: $n's brick did not come back (log: $STATE/logs/$n.log)"
      ;;
    c[0-9]*)
      [ -f "$STATE/mount.$n" ] || die "restart: no compute node '$n'" 2
      ! kill -0 "$(cat "$STATE/pids/$n")" 2>/dev/null || stop_node "$n"
      node_exec "$n" umount -l /mnt/iosets 2>/dev/null || true
      spawn_mount "$n"
      wait_mount "$n"
      return 0
      ;;
  esac
  [ -f "$STATE/serve.$n" ] || die "restart: '$n' is not a node of the cluster (scripts/cluster.sh status)" 2
  shift
  if [ $# -gt 0 ]; then
    [ "$1" = -- ] || die "restart: expected ioN [-- FLAGS...], got '$1'" 2
    shift
    if [ $# -gt 0 ]; then printf '%q ' "$@" >"$STATE/serve.$n.extra"; else rm -f "$STATE/serve.$n.extra"; fi
  fi
  local pid
  pid=$(cat "$STATE/pids/$n")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  spawn_server "$n"
  wait_server "$n"
}

# spawn_mount NODE: its `iosets mount` (the command `up` saved), in the background
spawn_mount() {
  local n=$1
  echo "--- started $(date -u +%FT%TZ)" >>"$STATE/logs/$n.log"
  eval "node_spawn $n $(cat "$STATE/mount.$n")" >>"$STATE/logs/$n.log" 2>&1 &
  echo $! >"$STATE/pids/$n"
}

# wait_mount NODE: returns once NODE's /mnt/iosets is mounted, or dies
wait_mount() {
  local n=$1
  for _ in $(seq 100); do
    node_exec "$n" mountpoint -q /mnt/iosets && return 0
    kill -0 "$(cat "$STATE/pids/$n")" 2>/dev/null || break
    sleep 0.1
  done
  cat "$STATE/logs/$n.log" >&2
  die "$n did not mount /mnt/iosets (log above)"
}

# start_slurm SUBNET COMPUTE: munge, slurmctld on the head node, a configless slurmd with the
# SPANK plugin on every compute node; returns when every node is idle
start_slurm() {
  local subnet=$1 compute=$2 i state="" sock=/run/munge/munge.socket.2 nodes
  command -v slurmctld >/dev/null || bash "$REPO/scripts/ecosystem-tools.sh" ||
    die "could not install Slurm and munge (scripts/ecosystem-tools.sh)"
  [ -d /sys/fs/cgroup/freezer ] && grep -q ' /sys/fs/cgroup/freezer ' /proc/self/mountinfo ||
    die "slurmd needs the cgroup v1 freezer hierarchy, not mounted here (use --no-slurm)"
  if ! { munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1; }; then
    [ ! -S "$sock" ] || die "$sock exists but does not answer; stop that munged first"
    chmod 755 "$STATE"
    install -d -o munge -g munge -m 0700 "$STATE/munge"
    install -d -o munge -g munge -m 0755 /run/munge
    head -c 1024 /dev/urandom >"$STATE/munge/munge.key"
    chown munge:munge "$STATE/munge/munge.key"
    chmod 0400 "$STATE/munge/munge.key"
    runuser -u munge -- munged --key-file="$STATE/munge/munge.key" --socket="$sock" \
      --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/munge/munged.log" \
      --seed-file="$STATE/munge/munged.seed" || die "munged did not start"
    touch "$STATE/munged.started"
  fi
  mkdir -p "$STATE/slurm/ctld"
  make -s -C "$REPO/deploy/slurm" OUT="$STATE/slurm/spank_iosets.so" ||
    die "the SPANK plugin does not build"
  echo "required $STATE/slurm/spank_iosets.so mount=/mnt/iosets on_error=fail timeout=10" \
    >"$STATE/slurm/plugstack.conf"
  printf '%s\n' "CgroupPlugin=cgroup/v1" "CgroupMountpoint=/sys/fs/cgroup" >"$STATE/slurm/cgroup.conf"
  nodes="c[1-$compute]"
  [ "$compute" -gt 1 ] || nodes=c1
  {
    cat <<EOF
ClusterName=iosetscluster
SlurmctldHost=head($subnet.2)
SlurmctldParameters=enable_configless
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/slurm/ctld
SlurmdSpoolDir=$STATE/slurm/%n
SlurmctldPidFile=$STATE/slurm/slurmctld.pid
SlurmdPidFile=$STATE/slurm/slurmd.%n.pid
SlurmctldLogFile=$STATE/slurm/slurmctld.log
SlurmdLogFile=$STATE/slurm/slurmd.%n.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
PlugStackConfig=$STATE/slurm/plugstack.conf
EOF
    for i in $(seq "$compute"); do
      echo "NodeName=c$i NodeAddr=$subnet.$((100 + i)) CPUs=$(nproc) State=UNKNOWN"
    done
    # Jobs share nodes (a node's CPUs are not what limits an I/O experiment): up to 64 jobs on
    # one core, without time slicing (no gang scheduling).
    echo "PartitionName=io Nodes=$nodes Default=YES MaxTime=60 State=UP OverSubscribe=FORCE:64"
  } >"$STATE/slurm/slurm.conf"
  make_node head "$subnet.2"
  node_spawn head slurmctld -D -i -f "$STATE/slurm/slurm.conf" >"$STATE/logs/head.log" 2>&1 &
  echo $! >"$STATE/pids/head"
  for _ in $(seq 100); do
    node_exec head scontrol ping 2>/dev/null | grep -q UP && break
    kill -0 "$(cat "$STATE/pids/head")" 2>/dev/null || break
    sleep 0.1
  done
  node_exec head scontrol ping 2>/dev/null | grep -q UP ||
    { cat "$STATE/logs/head.log" >&2; die "slurmctld did not start (log above)"; }
  for i in $(seq "$compute"); do
    # Configless: slurmd fetches slurm.conf, cgroup.conf and plugstack.conf from slurmctld.
    node_spawn "c$i" env -u SLURM_CONF slurmd -D --conf-server "$subnet.2:6817" -N "c$i" \
      >"$STATE/logs/slurmd.c$i.log" 2>&1 &
    echo $! >"$STATE/pids/slurmd.c$i"
  done
  for _ in $(seq 150); do
    state=$(node_exec head sinfo -h -o %T 2>/dev/null | sort -u | tr '\n' ' ')
    [ "$state" = "idle " ] && break
    sleep 0.2
  done
  [ "$state" = "idle " ] ||
    { tail -n 5 "$STATE"/logs/slurmd.c*.log >&2; die "the compute nodes are '$state', not idle"; }
}

status() {
  [ -f "$STATE/nodes" ] || die "no cluster is up" 2
  local n addr pid what
  printf '%-6s %-15s %-8s %s\n' NODE ADDRESS PID ROLE
  while read -r n addr; do
    pid=$(cat "$STATE/pids/$n" 2>/dev/null || echo -)
    case "$n" in
      s*) what="glusterd, a brick of $(cut -d: -f1 "$STATE/pfs")" ;;
      head) what="slurmctld (partition io)" ;;
      io*) what="iosets serve on $addr:$PORT$([ -f "$STATE/pfs" ] && echo " over GlusterFS at /pfs" || true)" ;;
      *) what="iosets mount /mnt/iosets over $(cat "$STATE/servers")$([ -f "$STATE/pids/slurmd.$n" ] && echo ", slurmd" || true)" ;;
    esac
    kill -0 "$pid" 2>/dev/null || what="$what (not running)"
    printf '%-6s %-15s %-8s %s\n' "$n" "$addr" "$pid" "$what"
  done <"$STATE/nodes"
}

[ $# -ge 1 ] || { usage >&2; exit 2; }
cmd=$1
shift
case "$cmd" in
  up) up "$@" ;;
  down) [ "$(id -u)" = 0 ] || die "needs root" 2; down ;;
  status) status ;;
  restart) [ "$(id -u)" = 0 ] || die "needs root" 2; restart "$@" ;;
  stop) [ "$(id -u)" = 0 ] || die "needs root" 2; stop_node "$@" ;;
  exec)
    [ $# -ge 3 ] && [ "$2" = "--" ] || die "usage: scripts/cluster.sh exec NODE -- CMD [ARGS...]" 2
    node=$1
    shift 2
    grep -q "^$node " "$STATE/nodes" 2>/dev/null || die "no node '$node' (scripts/cluster.sh status)" 2
    node_exec "$node" "$@"
    ;;
  -h | --help) usage ;;
  *) usage >&2; die "unknown command '$cmd'" 2 ;;
esac
