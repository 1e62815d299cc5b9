#!/usr/bin/env bash
# POSIX conformance of `iosets mount`, through a real mount: pjdfstest (all its cases, scored
# against crates/mount/tests/pjdfstest-expected.txt) and fsx (N operations, default 20000), on
# `iosets mount --local` over a scratch directory. Installs what it needs (scripts/fs-tools.sh).
#
# Usage: bash scripts/mount-conformance.sh [FSX_OPS]
# Exit status: 0 both pass; non-zero otherwise (a new pjdfstest failure, an fsx error, a mount
# that does not come up). Always unmounts and removes its scratch directory.
set -euo pipefail
cd "$(dirname "$0")/.."
ops=${1:-20000}
bash scripts/fs-tools.sh >/dev/null
cargo build --release --locked --quiet -p iosets-cli
scratch=$(mktemp -d /tmp/iosets-conformance.XXXXXX)
chmod 755 "$scratch"  # pjdfstest switches to unprivileged users, who must reach the mount
mkdir -p "$scratch/mnt" "$scratch/root"
./target/release/iosets mount "$scratch/mnt" --local "$scratch/root" >"$scratch/mount.log" 2>&1 &
mount_pid=$!
cleanup() {
  kill -TERM "$mount_pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$mount_pid" 2>/dev/null || break; sleep 0.1; done
  ./target/release/iosets umount "$scratch/mnt" 2>/dev/null || true
  kill -9 "$mount_pid" 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT
for _ in $(seq 200); do
  grep -q " $scratch/mnt " /proc/self/mountinfo && break
  kill -0 "$mount_pid" 2>/dev/null || { cat "$scratch/mount.log"; exit 1; }
  sleep 0.1
done
grep -q " $scratch/mnt " /proc/self/mountinfo || { echo "mount did not come up"; cat "$scratch/mount.log"; exit 1; }
bash scripts/pjdfstest.sh "$scratch/mnt" --expected crates/mount/tests/pjdfstest-expected.txt --timeout 600
bash scripts/fsx.sh "$scratch/mnt" "$ops"
