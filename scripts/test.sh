#!/usr/bin/env bash
# The one test command: formatting, lints, docs, and every test of the workspace.
# README.md names it; .ci/run calls it. Installs what a fresh machine lacks.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's wall time, printed at the end (CI must stay under 25 minutes on 2 cores).
stages=()
stage_start=$SECONDS
stage_name=""
stage() {
  if [[ -n "$stage_name" ]]; then
    stages+=("$(printf '%5d s  %s' $((SECONDS - stage_start)) "$stage_name")")
  fi
  stage_name="$1"
  stage_start=$SECONDS
  [[ -z "$1" ]] || echo "== $1"
}
report() {
  local rc=$?
  stage ""
  echo "== time per stage (${SECONDS} s in all$([[ $rc -eq 0 ]] || echo ", stopped by a failure"))"
  printf '%s\n' "${stages[@]}"
}
trap report EXIT

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: installing the Rust toolchain through rustup" >&2
  curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  # shellcheck disable=SC1091
  . "$HOME/.cargo/env"
fi
for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    rustup component add "$component"
  fi
done

stage "file system tools (fuse3, fio, bindfs, pjdfstest, fsx) for the mount's tests"
bash scripts/fs-tools.sh >/dev/null
stage "ecosystem tools (prometheus, tmux, slurm, munge, python venv) for the integrations' tests"
bash scripts/ecosystem-tools.sh
stage "cargo fmt --check"
cargo fmt --all -- --check
stage "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
stage "cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet
stage "feature pins: the builds after the tests reuse the test build's artifacts (scripts/feature-pins.py)"
python3 scripts/feature-pins.py
stage "cargo test"
# Every test binary and the doc tests, not the examples: clippy --all-targets compiles those,
# and linking four more release binaries here bought nothing (BENCHMARKS.md, "Building the tests").
cargo test --workspace --locked --release --lib --bins --tests
cargo test --workspace --locked --release --doc
stage "loom models of the runtime's lock and wake-up protocol (own target dir: all of it built under --cfg loom)"
RUSTFLAGS="--cfg loom" CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true \
  CARGO_PROFILE_RELEASE_DEBUG=false \
  cargo test -p iosets-runtime-loom --locked --release --test loom_protocol --target-dir target/loom
stage "iosets mount: pjdfstest and fsx through a real mount"
bash scripts/mount-conformance.sh 20000
stage "the Debian package (dpkg-deb; installed, used and purged) and cargo install --path"
bash scripts/package.sh
stage "C tests of libiosets (under valgrind)"
bash crates/ffi/tests/c/run.sh
stage "Slurm: the SPANK plugin and prolog/epilog on a single-node Slurm (scripts/slurm-test.sh; 77 = slurmd cannot run here)"
bash scripts/slurm-test.sh || [ $? = 77 ]
stage "a cluster on one machine: GlusterFS storage nodes, I/O nodes, compute nodes and a Slurm head in network namespaces (scripts/cluster-test.sh; 77 = no namespaces here)"
bash scripts/cluster-test.sh --bin "${CARGO_TARGET_DIR:-target}/release/iosets" || [ $? = 77 ]
stage "Python bindings: pip install ./python in a venv, then pytest python/tests"
bash scripts/python-test.sh
