#!/usr/bin/env python3
"""Where `auto` places the jobs of `iosets experiment random` runs, against clairvoyant.

For each workload of DIR (an `--out` directory with its w<seed>/runs/auto-1/ logs kept), reads
the servers' "automatic priority" log lines (job, period, set) and the jobs' phase logs, and
prints per job: its class and Set-10 set (clairvoyant's), the set auto gave it and when (seconds
after the job's launch, the start of its first row, a compute phase; "never" if auto gave none:
the job stayed in the shared new set), then per workload how much of the metrics window each job
spent without its right set, next to auto's measured difference from clairvoyant
(DIR/metrics.csv), and last per class: how many jobs got a set and the median time, each job's
volume per I/O phase (MiB), and when its first I/O phase began (after its launch) and how long
it took.

    python3 scripts/random-auto.py DIR
"""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict
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
    per_class = defaultdict(lambda: {"jobs": 0, "after": [], "mib": [], "first_io_at": [], "first_io_s": []})
    for seed in seeds:
        run = os.path.join(root, f"w{seed}", "runs", "auto-1")
        if not os.path.isdir(run):
            continue
        first_io = {}
        first_phase = defaultdict(lambda: [float("inf"), 0.0])  # job -> its iteration 0 I/O
        for path in glob.glob(os.path.join(run, "job*.csv")):
            with open(path) as f:
                for r in csv.DictReader(f):
                    j = int(r["job"])
                    t = float(r["start_unix_s"])
                    first_io[j] = min(first_io.get(j, t), t)
                    if r["kind"] == "io" and r["iteration"] == "0":
                        p = first_phase[j]
                        p[0], p[1] = min(p[0], t), max(p[1], float(r["end_unix_s"]))
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
            c = per_class[w["class"]]
            c["jobs"] += 1
            c["mib"].append(int(w["procs"]) * int(w["mib_per_proc"]))
            if j in given and given[j][1] == want:
                c["after"].append(given[j][0] - first_io.get(j, zero))
            if j in first_phase:
                c["first_io_at"].append(first_phase[j][0] - first_io.get(j, zero))
                c["first_io_s"].append(first_phase[j][1] - first_phase[j][0])
            print(f"{seed:>4} {j:>3} {w['class']:<6} {want:>5} {note}  ({without / (hi - lo):.2f})")
        diffs = []
        for m in METRICS:
            a, c = measured.get((seed, "auto", m)), measured.get((seed, "clairvoyant", m))
            if a is not None and c:
                diffs.append(f"{m} {100 * (a / c - 1):+.1f}%")
        summary.append(f"seed {seed}: jobs' mean window share without their set {wrong_time / n:.2f}; auto vs clairvoyant: " + ", ".join(diffs))
    print()
    print("\n".join(summary))
    print()
    span = lambda xs, f: f"{f(min(xs))}–{f(max(xs))}, median {f(statistics.median(xs))}" if xs else "none"
    for name, c in sorted(per_class.items()):
        print(
            f"{name}: {len(c['after'])} of {c['jobs']} jobs got their set, after {span(c['after'], lambda x: f'{x:.1f} s')}; "
            f"{span(c['mib'], lambda x: f'{x:.0f}')} MiB per I/O phase; first I/O phase at {span(c['first_io_at'], lambda x: f'{x:.1f} s')}, "
            f"lasting {span(c['first_io_s'], lambda x: f'{x:.1f} s')}"
        )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: random-auto.py DIR")
    main(sys.argv[1])
