# Sourced by the scripts that bring up the cluster on one machine for a run of their own
# (scripts/cluster-seed003.sh, scripts/cluster-seed004.sh, bench/cluster_hop.sh): what they check
# before anything is made, and the iosets binary they use. Needs REPO and die() (die MESSAGE
# STATUS) from the script that sources it.

# testbed_preflight [slurm]: root, network namespaces and FUSE here (and the cgroup v1 freezer
# slurmd needs, with `slurm`), else exit 77 with the reason
testbed_preflight() {
  [ "$(id -u)" = 0 ] || die "needs root (namespaces, FUSE mounts${1:+, Slurm})" 77
  ip netns list >/dev/null 2>&1 || die "no network namespaces here" 77
  [ -e /dev/fuse ] || die "no /dev/fuse here" 77
  [ "${1:-}" != slurm ] || grep -q ' /sys/fs/cgroup/freezer ' /proc/self/mountinfo ||
    die "slurmd needs the cgroup v1 freezer hierarchy" 77
}

# testbed_bin PATH: sets bin to PATH made absolute, or to target/release/iosets (built first)
# when PATH is empty; exits 2 if it is not an executable
testbed_bin() {
  bin=$1
  if [ -z "$bin" ]; then
    (cd "$REPO" && cargo build --release --locked -q -p iosets-cli)
    bin=$REPO/target/release/iosets
  fi
  [ -x "$bin" ] || die "--bin $bin: not an executable" 2
  bin=$(realpath "$bin")
}
