#!/usr/bin/env python3
"""Where the newcomer's return (tried at stop 47, reverted) could apply in an `iosets experiment
random` run: per workload, each job without an automatic priority whose I/O phase lasted more
than 2 s (it may have outstayed the new set) and whose next phase began after a pause of at
least 1 s and half that phase (the rule's condition), from the jobs' phase logs
(`wN/runs/CONFIG-1/jobJ.csv`, every rank merged) and the servers' log (`automatic priority`).

Usage: scripts/random-returns.py RUN_DIR [CONFIG]     (CONFIG: auto by default)

Prints one line per workload: the candidate returns (job, phase start s, phase length s, next
phase start s, on the run's clock) and the jobs that got a priority. A candidate is where the
rule could apply, not where it did: a phase is moved out only if another newcomer waited.
"""
import csv
import glob
import os
import re
import sys


def main(run, config="auto"):
    for d in sorted(glob.glob(os.path.join(run, "w*", "runs", f"{config}-1")),
                    key=lambda p: int(re.search(r"/w(\d+)/", p).group(1))):
        w = int(re.search(r"/w(\d+)/", d).group(1))
        with open(os.path.join(d, "server0.trace.csv")) as f:
            t0 = int(f.readline().split("=")[1]) / 1e9
        estimated = set()
        with open(os.path.join(d, "log.txt")) as f:
            for line in f:
                m = re.search(r"automatic priority job=(\d+)", line)
                if m:
                    estimated.add(int(m.group(1)))
        candidates = []
        for p in glob.glob(os.path.join(d, "job*.csv")):
            j = int(re.search(r"job(\d+)\.csv$", p).group(1))
            if j in estimated:
                continue
            spans = {}
            with open(p) as f:
                for r in csv.DictReader(f):
                    if r["kind"] != "io":
                        continue
                    s, e = float(r["start_unix_s"]) - t0, float(r["end_unix_s"]) - t0
                    a = spans.setdefault(int(r["iteration"]), [s, e])
                    a[0], a[1] = min(a[0], s), max(a[1], e)
            phases = [spans[k] for k in sorted(spans)]
            for a, b in zip(phases, phases[1:]):
                length, gap = a[1] - a[0], b[0] - a[1]
                if length > 2.0 and gap >= 1.0 and 2 * gap >= length:
                    candidates.append((j, round(a[0], 1), round(length, 1), round(b[0], 1)))
        print(f"seed {w}: candidates {sorted(candidates)}; with a priority: {sorted(estimated)}")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(*sys.argv[1:])
