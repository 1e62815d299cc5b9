#!/usr/bin/env python3
"""Where `auto` places the jobs of `iosets experiment random` runs, against clairvoyant.

For each workload of DIR (an `--out` directory with its w<seed>/runs/auto-1/ logs kept), reads
the servers' "automatic priority" log lines (job, period, set) and the jobs' phase logs, and
prints per job: its class and Set-10 set (clairvoyant's), the set auto gave it and when (seconds
after the job's first phase began; "never" if auto gave none: the job stayed in the shared new
set), then per workload how much of the metrics window each job spent without its right set,
next to auto's measured difference from clairvoyant (DIR/metrics.csv).

    python3 scripts/random-auto.py DIR
"""
import csv
import glob
import os
import re
import sys
from datetime import datetime

LINE = re.compile(
    r"^(\S+)Z\s+INFO iosets_runtime::scheduler: automatic priority job=(\d+) period_s=(\S+) set=(-?\d+)"
)
METRICS = ["max_stretch", "geomean_stretch", "io_slowdown", "utilization"]


def unix(ts):
    return datetime.fromisoformat(ts + "+00:00").timestamp()


def main(root):
    jobs = {}
    with open(os.path.join(root, "workloads.csv")) as f:
        for r in csv.DictReader(f):
            jobs[(int(r["seed"]), int(r["job"]))] = r
    measured = {}
    with open(os.path.join(root, "metrics.csv")) as f:
        for r in csv.DictReader(f):
            measured[(int(r["seed"]), r["config"], r["metric"])] = float(r["measured"])
    seeds = sorted({s for s, _ in jobs})
    print("seed job class set10 auto_set after_s  (window share without its set)")
    summary = []
    for seed in seeds:
        run = os.path.join(root, f"w{seed}", "runs", "auto-1")
        if not os.path.isdir(run):
            continue
        first_io = {}
        for path in glob.glob(os.path.join(run, "job*.csv")):
            with open(path) as f:
                for r in csv.DictReader(f):
                    j = int(r["job"])
                    t = float(r["start_unix_s"])
                    first_io[j] = min(first_io.get(j, t), t)
        zero = min(first_io.values()) if first_io else 0.0
        given = {}
        with open(os.path.join(run, "log.txt")) as f:
            for line in f:
                m = LINE.match(line)
                if m:
                    t, job, _period, s = unix(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4))
                    # Several servers log the same decision; the last one in force counts, its
                    # first time the moment.
                    if job not in given or given[job][1] != s:
                        given[job] = (t, s)
        wrong_time = 0.0
        n = 0
        for (s, j), w in sorted(jobs.items()):
            if s != seed:
                continue
            n += 1
            want = int(w["set10"])
            lo, hi = zero + float(w["window_begin_s"]), zero + float(w["window_end_s"])
            if j in given:
                t, got = given[j]
                after = t - first_io.get(j, zero)
                note = f"{got:>4} {after:7.1f}"
                # Time in the window without its right set: until the decision, or all of it.
                without = hi - lo if got != want else max(0.0, min(t, hi) - lo)
            else:
                note = "never        "
                without = hi - lo
            wrong_time += without / (hi - lo)
            print(f"{seed:>4} {j:>3} {w['class']:<6} {want:>5} {note}  ({without / (hi - lo):.2f})")
        diffs = []
        for m in METRICS:
            a, c = measured.get((seed, "auto", m)), measured.get((seed, "clairvoyant", m))
            if a is not None and c:
                diffs.append(f"{m} {100 * (a / c - 1):+.1f}%")
        summary.append(f"seed {seed}: jobs' mean window share without their set {wrong_time / n:.2f}; auto vs clairvoyant: " + ", ".join(diffs))
    print()
    print("\n".join(summary))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: random-auto.py DIR")
    main(sys.argv[1])
