#!/usr/bin/env bash
# Issue 29's table in one run: fio's jobs (bench/mount_bench.sh: 1 MiB sequential, 4 KiB
# random, file create/stat/delete) on the same disk through every target, targets alternating
# within each repetition:
#   direct      a plain directory
#   bindfs      bindfs over a plain directory (a FUSE reference)
#   gluster     GlusterFS from Debian, a 2-brick distribute volume, its FUSE client
#   NAME-local  `iosets mount --local`
#   NAME-2srv   `iosets mount` over 2 `iosets serve` on loopback (one root each)
# for each iosets binary NAME=PATH given (default iosets=target/release/iosets, built first),
# so that a before/after is measured in one run. Every backing directory is under --base, on
# one file system: by default a fresh ext4 made for the run (a sparse image on this disk,
# loop-mounted at --base, removed at exit), with a journal as a server's would have. This
# machine's root file system has none, and ext4 without a journal checks every recently freed
# inode (deleted within 60 s, 360 s while its block is dirty) at each create ("recently_deleted"
# in the kernel's inode allocator): there a target's creates slowed with the number of files
# the targets before it had just deleted (a one-off `perf record -a`: 20 % of the machine in that
# scan). The tables'
# ratios are against `direct`.
#
# Usage: bench/small_io.sh [options]
#   --bin NAME=PATH   an iosets binary to measure (repeatable; NAME: letters, digits, _ . -)
#   --no-gluster      leave GlusterFS out
#   --base DIR        where the backing directories go (default /var/tmp/iosets-small-io)
#   --image SIZE      size of the fresh ext4 made at --base (default 16G, sparse)
#   --no-image        use --base as a plain directory of the file system it is on
#   --out DIR         results (default target/small-io/<date>): mount_bench's files, logs
#   --reps N --size S --runtime S --nrfiles N --jobs "N ..."   passed to mount_bench.sh
#                     (defaults here: 2 reps, 1g, 10 s, 4000 files, 4 jobs)
# Needs root (FUSE mounts, dropping caches, glusterd). Installs glusterfs-server if missing.
# Exit status: mount_bench.sh's (0 all runs done, 1 some failed, 2 bad arguments, 3 a stuck
# mount); 2 also for this script's bad arguments.
set -euo pipefail
export LC_ALL=C
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "small_io.sh: $*" >&2; exit 2; }
say() { echo "small_io: $*" >&2; }
# shellcheck source=bench/lib/iosets.sh
. "$REPO/bench/lib/iosets.sh"

bins=() gluster=1 base=/var/tmp/iosets-small-io out="" image_size=16G
bench=(--reps 2 --size 1g --runtime 10 --nrfiles 4000 --jobs 4)
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) [ $# -ge 2 ] || die "--bin needs NAME=PATH"; bins+=("$2"); shift 2 ;;
    --no-gluster) gluster=0; shift ;;
    --base) [ $# -ge 2 ] || die "--base needs a directory"; base=$2; shift 2 ;;
    --image) [ $# -ge 2 ] || die "--image needs a size"; image_size=$2; shift 2 ;;
    --no-image) image_size=""; shift ;;
    --out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
    --reps | --size | --runtime | --nrfiles | --jobs)
      [ $# -ge 2 ] || die "$1 needs a value"; bench+=("$1" "$2"); shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
[ "$(id -u)" = 0 ] || die "needs root (FUSE mounts, dropping caches, glusterd)"
if [ ${#bins[@]} = 0 ]; then
  (cd "$REPO" && cargo build --release --locked -q -p iosets-cli)
  bins=("iosets=$REPO/target/release/iosets")
fi
for b in "${bins[@]}"; do
  [[ $b == *=* ]] || die "--bin $b: not NAME=PATH"
  [[ ${b%%=*} =~ ^[A-Za-z0-9_.-]+$ ]] || die "--bin ${b%%=*}: a name of letters, digits, _ . -"
  [ -x "${b#*=}" ] || die "--bin ${b%%=*}: not an executable: ${b#*=}"
done
out=${out:-$REPO/target/small-io/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(realpath "$out")
[ ! -e "$base" ] || die "--base $base exists: remove it or name another"
[ -z "$image_size" ] || [[ $image_size =~ ^[0-9]+[KMGT]?$ ]] || die "--image $image_size: a size such as 16G"
mkdir -p "$base"
base=$(realpath "$base")
image=""

# --- cleanup: every mount, server and daemon made here, on any exit -----------
pids=() mounts=() volume=""
cleanup() {
  set +e
  forget_made_secret
  for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
  [ -z "$pids" ] || kill "${pids[@]}" 2>/dev/null
  if [ -n "$volume" ]; then
    gluster --mode=script volume stop "$volume" force >/dev/null 2>&1
    gluster --mode=script volume delete "$volume" >/dev/null 2>&1
    pkill -x glusterd; pkill -x glusterfsd; pkill -x glusterfs
  fi
  sleep 1
  if [ -n "$image" ]; then
    umount "$base" 2>/dev/null || umount -l "$base"
    rm -f "$image"
  fi
  rm -rf "$base"
}
trap cleanup EXIT
if [ -n "$image_size" ]; then
  [ ! -e "$base.img" ] || die "$base.img exists: remove it or name another --base"
  image=$base.img
  truncate -s "$image_size" "$image"
  mkfs.ext4 -q -F "$image" || die "mkfs.ext4 of $image failed"
  mount -o loop "$image" "$base" || die "cannot loop-mount $image at $base"
fi

targets=() cpu=()
mkdir -p "$base/direct" "$base/bindfs"
targets+=("direct=$base/direct")

if [ $gluster = 1 ]; then
  command -v glusterd >/dev/null || { apt-get update -qq && apt-get install -y -qq glusterfs-server >/dev/null; }
  pgrep -x glusterd >/dev/null && die "a glusterd is already running: stop it or use --no-gluster"
  glusterd
  volume=iosetsbench$$
  for _ in $(seq 50); do gluster --mode=script volume list >/dev/null 2>&1 && break; sleep 0.2; done
  gluster --mode=script volume create "$volume" transport tcp \
    "$(hostname):$base/brick1" "$(hostname):$base/brick2" force >/dev/null
  gluster --mode=script volume start "$volume" >/dev/null
  mkdir -p "$base/gluster"
  mount -t glusterfs "localhost:/$volume" "$base/gluster"
  mounts+=("$base/gluster")
  targets+=("gluster=$base/gluster")
  cpu+=(--cpu-pids "gluster=$(pgrep -d ' ' -x 'glusterfsd|glusterfs')")
fi

# One iosets binary's two targets: NAME-local and NAME-2srv (its servers' ports picked by the
# kernel and read from their first line).
start_iosets() {
  local name=$1 bin=$2 d=$base/$1 token i servers="" spids=""
  mkdir -p "$d/local-root" "$d/local" "$d/r0" "$d/r1" "$d/mnt"
  token=$d/token
  head -c 24 /dev/urandom | base64 >"$token"
  chmod 600 "$token"
  for i in 0 1; do
    iosets_serve "$bin" "$d/r$i" "$out/$name-server$i.log" "$token"
    pids+=("$served_pid") spids+=" $served_pid"
    servers+="${servers:+,}$served_addr"
  done
  "$bin" mount "$d/mnt" --servers "$servers" --token-file "$token" >"$out/$name-mount.log" 2>&1 &
  pids+=($!)
  cpu+=(--cpu-pids "$name-2srv=$! $spids")
  "$bin" mount "$d/local" --local "$d/local-root" >"$out/$name-local.log" 2>&1 &
  pids+=($!)
  cpu+=(--cpu-pids "$name-local=$!")
  mounts+=("$d/mnt" "$d/local")
  wait_mounted "$d/mnt" "$d/local"
  targets+=("$name-local=$d/local" "$name-2srv=$d/mnt")
  { echo "$name: $bin ($("$bin" --version))"; } >>"$out/binaries.txt"
}
for b in "${bins[@]}"; do start_iosets "${b%%=*}" "${b#*=}"; done

say "targets: ${targets[*]}"
rc=0
bash "$REPO/bench/mount_bench.sh" --bindfs "$base/bindfs" "${bench[@]}" --out "$out" \
  "${cpu[@]}" "${targets[@]}" || rc=$?
say "results in $out/results.md"
exit $rc
