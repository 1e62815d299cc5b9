"""The example script reproduces the three-profile figure's data (quick mode) and says what it drew."""

import csv
import subprocess
import sys

from conftest import ROOT


def test_the_three_profile_example_writes_its_csvs_and_checks_the_papers_claim(tmp_path):
    script = ROOT / "python" / "examples" / "three_profile.py"
    p = subprocess.run(
        [sys.executable, str(script), "--quick", "--workloads", "2", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    with open(tmp_path / "three-profile-runs.csv") as f:
        runs = list(csv.DictReader(f))
    assert len(runs) == 5 * 2 * 6
    assert sorted({float(r["nH"]) for r in runs}) == [0, 10, 20, 30, 40]
    with open(tmp_path / "three-profile-means.csv") as f:
        means = list(csv.DictReader(f))
    assert len(means) == 5 * 6
    assert "SET-10's I/O slowdown below FAIR-SHARE's" in p.stdout
    try:
        import matplotlib  # noqa: F401

        assert (tmp_path / "three-profile.png").stat().st_size > 10_000
    except ImportError:
        assert "matplotlib is not installed" in p.stdout
        assert not (tmp_path / "three-profile.png").exists()
