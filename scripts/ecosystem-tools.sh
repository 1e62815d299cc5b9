#!/usr/bin/env bash
# Installs the external programs the HPC-ecosystem integrations are tested with (issue 17):
# Prometheus, tmux, Slurm and munge, Python's venv. Idempotent and quiet: installs only what is
# missing; fails loudly (non-zero, the apt log on stderr) when an install fails. Needs root, as
# on the project's machines. scripts/test.sh runs it before the tests.
#
# Usage: bash scripts/ecosystem-tools.sh
# One block per integration, delimited by `# --- <name> ---` / `# --- end <name> ---`.
set -euo pipefail

apt_updated=0
# apt_install PKG...: installs the Debian packages given, running `apt-get update` once first.
apt_install() {
  local log
  log=$(mktemp)
  if [ "$apt_updated" = 0 ]; then
    apt-get update -qq >"$log" 2>&1 || { cat "$log" >&2; rm -f "$log"; exit 1; }
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >"$log" 2>&1 \
    || { echo "ecosystem-tools.sh: apt-get install $* failed:" >&2; cat "$log" >&2; rm -f "$log"; exit 1; }
  rm -f "$log"
}

# --- prom ---
# Debian's prometheus package: the `prometheus` server that crates/server/tests/prometheus.rs
# starts (its own config, temp storage, a free loopback port) to scrape a running iosets
# server, and `promtool` (check metrics / check config). On a host with systemd the package
# also enables a prometheus.service on :9090; the test does not use it.
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  apt_install prometheus
fi
# --- end prom ---

# --- top ---
# tmux: crates/cli/tests/top.rs runs `iosets top` in a real tmux session.
if ! command -v tmux >/dev/null 2>&1; then
  apt_install tmux
  command -v tmux >/dev/null 2>&1 || { echo "ecosystem-tools.sh: tmux did not install" >&2; exit 1; }
fi
# --- end top ---

# --- slurm ---
# A single-node Slurm for scripts/slurm-test.sh and the SPANK plugin's headers
# (deploy/slurm/spank_iosets.c): slurmctld, slurmd, the client commands (srun, sbatch,
# scontrol), munge, libslurm-dev (/usr/include/slurm/spank.h), a C compiler, and jq (the test
# reads `iosets ctl --json jobs`).
slurm_missing=()
command -v slurmctld >/dev/null 2>&1 || slurm_missing+=(slurmctld)
command -v slurmd >/dev/null 2>&1 || slurm_missing+=(slurmd)
command -v srun >/dev/null 2>&1 || slurm_missing+=(slurm-client)
command -v munged >/dev/null 2>&1 || slurm_missing+=(munge)
[ -f /usr/include/slurm/spank.h ] || slurm_missing+=(libslurm-dev)
command -v cc >/dev/null 2>&1 || slurm_missing+=(gcc libc6-dev)
command -v make >/dev/null 2>&1 || slurm_missing+=(make)
command -v jq >/dev/null 2>&1 || slurm_missing+=(jq)
if [ "${#slurm_missing[@]}" -gt 0 ]; then
  apt_install "${slurm_missing[@]}"
fi
# --- end slurm ---

# --- python ---
# The Python bindings (scripts/python-test.sh): python3 with its venv module. maturin and pytest
# are installed from PyPI into a venv by that script (Debian 12 forbids pip into the system Python).
if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  apt_install python3 python3-venv
fi
# --- end python ---
