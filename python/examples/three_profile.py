#!/usr/bin/env python3
"""Reproduce the IO-SETS paper's main simulation figure from Python (EXPERIMENTS.md, section 3).

The scenario is scenarios/three-profile.toml: 60 jobs, nH with w_iter ~ N(10, 1), 20 with
N(100, 10), 40 - nH with N(1000, 100), nH = 0..40, under the paper's six heuristics; the figure
plots each metric's mean over the random workloads against nH (seed 001, "Evaluation"; the paper:
Boito, Pallez, Teylo, Vidal, TPDS 2023). The runs are `iosets.sweep`, the same code as
`iosets sim sweep scenarios/three-profile.toml`.

Writes OUT/three-profile-runs.csv (every run: the sweep CSV's columns), OUT/three-profile-means.csv
(the mean per nH and heuristic) and, if matplotlib is importable, OUT/three-profile.png (the four
metrics against nH); otherwise it says so. Prints the table of EXPERIMENTS.md (nH = 10, 20, 30)
and checks the paper's claim that SET-10's I/O slowdown is below FAIR-SHARE's.

    python3 python/examples/three_profile.py                # the full sweep, 20 workloads
    python3 python/examples/three_profile.py --quick        # nH = 0, 10, ..., 40, 5 workloads
"""

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

import iosets

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "three-profile.toml"
METRICS = ["max_stretch", "geomean_stretch", "io_slowdown", "utilization"]


def scenario(quick: bool):
    """The scenario file, or (with --quick) the same scenario at nH = 0, 10, ..., 40."""
    if not quick:
        return SCENARIO
    text = SCENARIO.read_text()
    head, sep, _ = text.partition("[sweep]")
    if not sep:
        sys.exit(f"{SCENARIO}: no [sweep] table")
    return head + '[sweep]\nvariable = "nH"\nvalues = [0, 10, 20, 30, 40]\n'


def means(rows):
    """The mean of each metric per (nH, heuristic), NaN runs (no job measured) left out."""
    acc = defaultdict(lambda: defaultdict(list))
    for r in rows:
        for m in METRICS:
            if r[m] == r[m]:
                acc[(r["nH"], r["heuristic"])][m].append(r[m])
    return {k: {m: sum(v) / len(v) for m, v in ms.items()} for k, ms in acc.items()}


def write_csv(path, rows, columns):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)


def plot(path, values, heuristics, mean):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no figure drawn (pip install matplotlib); the CSVs "
              "hold the data")
        return False
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    for ax, m in zip(axes.flat, METRICS):
        for h in heuristics:
            # Dashed for CLAIRVOYANT: here it equals SET-10 and would hide it.
            style = "--" if h.startswith("clairvoyant") else "-"
            ax.plot(values, [mean[(x, h)].get(m, float("nan")) for x in values], style, label=h)
        ax.set_title(m.replace("_", " "))
        ax.set_xlabel("nH")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("IO-SETS three-profile sweep: mean over the workloads")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", type=int, help="random workloads per nH (default 20, --quick 5)")
    ap.add_argument("--quick", action="store_true", help="nH = 0, 10, ..., 40 only")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("out"))
    a = ap.parse_args()
    workloads = a.workloads or (5 if a.quick else 20)

    rows = iosets.sweep(scenario(a.quick), workloads=workloads, seed=a.seed)
    a.out.mkdir(parents=True, exist_ok=True)
    runs_csv = a.out / "three-profile-runs.csv"
    write_csv(runs_csv, rows, list(rows[0]))

    values = sorted({r["nH"] for r in rows})
    heuristics = list(dict.fromkeys(r["heuristic"] for r in rows))
    mean = means(rows)
    means_csv = a.out / "three-profile-means.csv"
    write_csv(
        means_csv,
        [{"nH": x, "heuristic": h, **mean[(x, h)]} for x in values for h in heuristics],
        ["nH", "heuristic"] + METRICS,
    )
    print(f"{len(rows)} runs: {len(values)} values of nH x {workloads} workloads x "
          f"{len(heuristics)} heuristics")
    print(f"wrote {runs_csv} and {means_csv}")
    png = a.out / "three-profile.png"
    if plot(png, values, heuristics, mean):
        print(f"wrote {png}")

    shown = [x for x in (10.0, 20.0, 30.0) if x in values]
    print()
    print("| nH | metric | " + " | ".join(heuristics) + " |")
    for x in shown:
        for m, label in [("max_stretch", "max stretch"), ("io_slowdown", "I/O slowdown"),
                         ("utilization", "utilization")]:
            cells = " | ".join(f"{mean[(x, h)][m]:.3f}" for h in heuristics)
            print(f"| {x:g} | {label} | {cells} |")

    gains = [1 - mean[(x, "set-10")]["io_slowdown"] / mean[(x, "fair-share")]["io_slowdown"]
             for x in values]
    print()
    print(f"SET-10's I/O slowdown below FAIR-SHARE's by {min(gains):.0%} to {max(gains):.0%} "
          f"(the paper: up to 25 %)")
    if min(gains) <= 0:
        sys.exit("SET-10's I/O slowdown is not below FAIR-SHARE's at every nH: the paper's "
                 "claim does not hold here")


if __name__ == "__main__":
    main()
