"""Shared paths for the iosets Python tests (run from anywhere: `pytest python/tests`)."""

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
TRACES = ROOT / "crates" / "period" / "tests" / "data"


def iosets_binary():
    """The `iosets` command to compare with: $IOSETS_BIN, else a built one under target/."""
    env = os.environ.get("IOSETS_BIN")
    if env:
        return env
    for base in [os.environ.get("CARGO_TARGET_DIR"), str(ROOT / "target")]:
        if not base:
            continue
        for profile in ("release", "debug"):
            p = Path(base) / profile / "iosets"
            if p.is_file():
                return str(p)
    return shutil.which("iosets")


@pytest.fixture
def cli():
    """The path of the `iosets` command. The comparison tests need it: scripts/python-test.sh
    sets IOSETS_BIN; run alone without a built command, they are skipped, saying so."""
    path = iosets_binary()
    if path is None:
        pytest.skip("no iosets command built: set IOSETS_BIN or cargo build -p iosets-cli")
    return path
