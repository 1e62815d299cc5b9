#!/usr/bin/env bash
# Installs the external file system test tools used by scripts/pjdfstest.sh,
# scripts/fsx.sh and bench/mount_bench.sh. Idempotent: silent when everything
# is already there.
#
# Usage: bash scripts/fs-tools.sh [--check]
#   (no flag)  install whatever is missing, then print the tool paths
#   --check    install nothing; exit 1 (listing what is missing on stderr)
#              if anything is missing
#
# Output: stdout carries only KEY=PATH lines, one per tool, in this order:
#   FUSERMOUNT3= FIO= BINDFS= PJDFSTEST= FSX=
# so a caller may `eval "$(bash scripts/fs-tools.sh)"`; the scripts of this
# repository simply run it with stdout discarded and use the fixed paths
# below. Progress and errors go to stderr. Nothing is exported.
#
# What it installs (needs root, as on the project's machines):
#   Debian: fuse3 (fusermount3), fio, bindfs, libacl1-dev (to build pjdfstest),
#     openmpi-bin (mpirun: `iosets app periodic` one rank per process, its test)
#     `apt-get update` runs only when one of them is missing.
#   crates.io: pjdfstest $PJDFSTEST_VERSION and fsx $FSX_VERSION, built with
#     `cargo install --locked --root $IOSETS_TOOLS_ROOT` (default
#     <repo>/target/tools, binaries in its bin/); retried without --locked,
#     with a warning, if the locked build fails.
#   Users: the two unprivileged dummy users pjdfstest switches to by default
#     (its DummyAuthConfig: user `nobody` with its primary group, and user
#     `tests` with its primary group); the missing ones are created with
#     `useradd --system --no-create-home --user-group`.
set -euo pipefail

PJDFSTEST_VERSION=0.2.2
FSX_VERSION=0.3.2
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS_ROOT=${IOSETS_TOOLS_ROOT:-$REPO/target/tools}

check_only=0
case "${1:-}" in
  "") ;;
  --check) check_only=1 ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "fs-tools.sh: unknown argument '$1' (usage: bash scripts/fs-tools.sh [--check])" >&2; exit 2 ;;
esac
if [ $# -gt 1 ]; then
  echo "fs-tools.sh: too many arguments (usage: bash scripts/fs-tools.sh [--check])" >&2
  exit 2
fi

say() { echo "fs-tools: $*" >&2; }
missing=()

# --- Debian packages ---------------------------------------------------------
deb_missing=()
for pkg in fuse3 fio bindfs libacl1-dev openmpi-bin; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    deb_missing+=("$pkg")
  fi
done
if [ ${#deb_missing[@]} -gt 0 ]; then
  if [ $check_only = 1 ]; then
    missing+=("${deb_missing[@]}")
  else
    if [ "$(id -u)" != 0 ]; then
      say "missing Debian packages ${deb_missing[*]} and not root: install them with apt-get as root"
      exit 1
    fi
    say "installing Debian packages: ${deb_missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq "${deb_missing[@]}" >&2
  fi
fi

# --- crates.io tools ---------------------------------------------------------
# installed_version BIN -> prints "X.Y.Z" of `BIN --version`, or nothing
installed_version() {
  [ -x "$1" ] || return 0
  "$1" --version 2>/dev/null | awk '{print $NF; exit}'
}

cargo_tool() { # CRATE VERSION
  local crate=$1 version=$2 bin=$TOOLS_ROOT/bin/$1
  if [ "$(installed_version "$bin")" = "$version" ]; then
    return 0
  fi
  if [ $check_only = 1 ]; then
    missing+=("$crate $version ($bin)")
    return 0
  fi
  if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    say "cargo not found: install the Rust toolchain first (scripts/test.sh does)"
    exit 1
  fi
  say "building $crate $version into $TOOLS_ROOT (cargo install, a few minutes)"
  # Test tools, bound by system calls: optimised lightly, without debug information, and both
  # built in one target directory so that their shared dependencies are compiled once (105 s
  # for the two on 2 cores, against 159 s at cargo install's defaults).
  local build=(env CARGO_TARGET_DIR="$TOOLS_ROOT/build" CARGO_PROFILE_RELEASE_OPT_LEVEL=1
    CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_LTO=false)
  if ! "${build[@]}" cargo install --quiet --locked --root "$TOOLS_ROOT" --version "=$version" "$crate" >&2; then
    say "WARNING: 'cargo install --locked $crate' failed; retrying without --locked"
    "${build[@]}" cargo install --quiet --root "$TOOLS_ROOT" --version "=$version" "$crate" >&2
  fi
  if [ "$(installed_version "$bin")" != "$version" ]; then
    say "$crate $version did not install at $bin"
    exit 1
  fi
}
cargo_tool pjdfstest "$PJDFSTEST_VERSION"
cargo_tool fsx "$FSX_VERSION"

# --- pjdfstest's dummy users -------------------------------------------------
for user in nobody tests; do
  if ! getent passwd "$user" >/dev/null; then
    if [ $check_only = 1 ]; then
      missing+=("user $user")
      continue
    fi
    say "creating system user $user (with its own group) for pjdfstest"
    if getent group "$user" >/dev/null; then
      useradd --system --no-create-home --shell /usr/sbin/nologin --gid "$user" "$user"
    else
      useradd --system --no-create-home --shell /usr/sbin/nologin --user-group "$user"
    fi
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  say "missing: $(printf '%s; ' "${missing[@]}")"
  exit 1
fi

echo "FUSERMOUNT3=$(command -v fusermount3)"
echo "FIO=$(command -v fio)"
echo "BINDFS=$(command -v bindfs)"
echo "PJDFSTEST=$TOOLS_ROOT/bin/pjdfstest"
echo "FSX=$TOOLS_ROOT/bin/fsx"
