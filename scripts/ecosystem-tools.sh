#!/usr/bin/env bash
# Installs the system tools of the ecosystem integrations' tests (issue 17), one block per
# integration. Idempotent and quiet: installs only what is missing; fails loudly on error.
set -euo pipefail

# --- python ---
# The Python bindings (scripts/python-test.sh): python3 with its venv module. maturin and pytest
# are installed from PyPI into a venv by that script (Debian 12 forbids pip into the system Python).
if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
fi
# --- end python ---
