#!/usr/bin/env python3
"""What fsyncs cost the I/O phases of `iosets experiment random`, per configuration and class.

Usage: scripts/random-fsync.py OUT [OUT ...]   (OUT: the --out directory of `iosets experiment random`)

Every application ends each I/O phase with an fsync per file. An fsync moves no data (the
servers' files are on tmpfs; the throttle charges writes only), so the time it spends in a
server's queue is time the phase waits for nothing of its own. For each run directory
(OUT/w<seed>/runs/<config>-1/) it reads both servers' traces and the jobs' phase logs, and prints
per configuration and class:
  fsync wait  mean time an fsync waited in a server's queue, ms (and its service, ms)
  phase       mean I/O phase length, ms (a phase: one iteration's I/O across the job's ranks)
  tail        mean, over phases, of the longest wait of an fsync that arrived during the phase,
              and its share of the phase length
"""

import csv
import glob
import os
import sys
from collections import defaultdict

import server_trace


def classes(out):
    got = {}
    with open(os.path.join(out, "workloads.csv")) as f:
        for r in csv.DictReader(f):
            got[(r["seed"], r["job"])] = r["class"]
    return got


def fsyncs(run):
    """job -> [(arrival, complete, dispatch)] in UNIX seconds, from both servers' traces."""
    got = defaultdict(list)
    for path in glob.glob(os.path.join(run, "server*.trace.csv")):
        for r in server_trace.rows(path):
            if r["op"] == "fsync":
                got[r["job"]].append((r["arrival_s"], r["complete_s"], r["dispatch_s"]))
    return got


def phases(path):
    """iteration -> (start, end) of the job's I/O phase over all its ranks, UNIX seconds."""
    got = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["kind"] != "io":
                continue
            s, e = float(r["start_unix_s"]), float(r["end_unix_s"])
            a, b = got.get(r["iteration"], (s, e))
            got[r["iteration"]] = (min(a, s), max(b, e))
    return got


def main(outs):
    waits = defaultdict(lambda: [0.0, 0.0, 0])  # (config, class) -> wait, service, count
    tails = defaultdict(lambda: [0.0, 0.0, 0])  # (config, class) -> phase, tail, count
    for out in outs:
        cls = classes(out)
        for run in sorted(glob.glob(os.path.join(out, "w*", "runs", "*-1"))):
            seed = run.split(os.sep)[-3][1:]
            config = os.path.basename(run)[: -len("-1")]
            fs = fsyncs(run)
            for job, rows in fs.items():
                c = cls.get((seed, job))
                if c is None:
                    continue
                w = waits[(config, c)]
                for arrival, complete, dispatch in rows:
                    w[0] += dispatch - arrival
                    w[1] += complete - dispatch
                    w[2] += 1
            for log in glob.glob(os.path.join(run, "job*.csv")):
                job = os.path.basename(log)[3:-4]
                c = cls.get((seed, job))
                if c is None:
                    continue
                rows = fs.get(job, [])
                for start, end in phases(log).values():
                    tail = max(
                        (complete - arrival for arrival, complete, _ in rows if start <= arrival <= end + 0.001),
                        default=0.0,
                    )
                    t = tails[(config, c)]
                    t[0] += end - start
                    t[1] += tail
                    t[2] += 1
    print("config        class    fsyncs  wait ms  service ms  phases  phase ms  tail ms  tail share")
    for key in sorted(waits):
        w, t = waits[key], tails[key]
        if not w[2] or not t[2]:
            continue
        print(
            f"{key[0]:<13} {key[1]:<7} {w[2]:>7} {1e3 * w[0] / w[2]:>8.1f} {1e3 * w[1] / w[2]:>11.2f}"
            f" {t[2]:>7} {1e3 * t[0] / t[2]:>9.1f} {1e3 * t[1] / t[2]:>8.1f} {100 * t[1] / t[0]:>10.0f} %"
        )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
