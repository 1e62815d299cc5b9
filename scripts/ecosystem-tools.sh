#!/usr/bin/env bash
# Installs the external programs the HPC-ecosystem integrations are tested with (issue 17).
# Idempotent and quiet: installs only what is missing; fails loudly on error. Needs root.
# One block per integration, delimited by `# --- <name> ---` / `# --- end <name> ---`.
set -euo pipefail

# --- top ---
# tmux: crates/cli/tests/top.rs runs `iosets top` in a real tmux session.
if ! command -v tmux >/dev/null 2>&1; then
  echo "ecosystem-tools: installing tmux" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null
  command -v tmux >/dev/null 2>&1 || { echo "ecosystem-tools: tmux did not install" >&2; exit 1; }
fi
# --- end top ---
