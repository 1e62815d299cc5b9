#!/usr/bin/env python3
"""Where the real phases of `iosets experiment random` lose time: a breakdown from its runs.

Usage: scripts/random-breakdown.py OUT   (OUT: the --out directory of `iosets experiment random`)

For every workload (OUT/w<seed>/runs/<config>-1/) and configuration, inside the metrics window
(OUT/workloads.csv gives it, seconds after the first application's start):
  busy   the share of the window each server had a data request in service (mean over servers)
  idle_q the share of the window a server had none in service while one was queued there:
         time the device could have worked and did not (anticipation, set exclusivity, a job
         held back by its rule), mean over servers
  wait   per class, the mean time a data request waited in the server's queue (ms)
  excess per class, the mean of each I/O phase's length over its length alone at the writers'
         peak (OUT/workloads.csv `peak_mib_s`): how much longer phases took than the device and
         the job's own writers allow
Prints one line per configuration (means over the workloads) and writes OUT/breakdown.csv with
one row per workload, configuration and class.
"""

import csv
import glob
import os
import sys
from collections import defaultdict

import server_trace

MIB = 1 << 20


def read_trace(path):
    """Data requests of one server trace: (job, arrival_s, dispatch_s, complete_s), UNIX seconds."""
    return [
        (int(r["job"]), r["arrival_s"], r["dispatch_s"], r["complete_s"])
        for r in server_trace.rows(path)
        if r["op"] in ("read", "write") and int(r["len"]) > 0
    ]


def union_len(intervals, lo, hi):
    total, end = 0.0, lo
    for a, b in sorted(intervals):
        a, b = max(a, end, lo), min(b, hi)
        if b > a:
            total += b - a
        end = max(end, b)
    return total


def idle_with_queue(rows, lo, hi):
    """Seconds of [lo, hi] with a request queued (arrival..dispatch) and none in service."""
    events = []
    for _, a, d, c in rows:
        if d > a:
            events += [(a, 0, 1), (d, 0, -1)]
        events += [(d, 1, 1), (c, 1, -1)]
    events.sort(key=lambda e: (e[0], -e[2]))
    queued = serving = 0
    last, idle = lo, 0.0
    for t, kind, delta in events:
        t_c = min(max(t, lo), hi)
        if queued > 0 and serving == 0:
            idle += max(0.0, t_c - last)
        last = t_c
        if kind == 0:
            queued += delta
        else:
            serving += delta
    return idle


def main(out):
    jobs = defaultdict(dict)
    windows = {}
    with open(os.path.join(out, "workloads.csv")) as f:
        for r in csv.DictReader(f):
            jobs[r["seed"]][int(r["job"])] = r
            windows[r["seed"]] = (float(r["window_begin_s"]), float(r["window_end_s"]))
    rows_out = []
    per_config = defaultdict(lambda: defaultdict(list))
    for seed in sorted(jobs, key=int):
        for run in sorted(glob.glob(os.path.join(out, f"w{seed}", "runs", "*-1"))):
            config = os.path.basename(run)[:-2]
            phases = {}
            for j in jobs[seed]:
                path = os.path.join(run, f"job{j}.csv")
                if not os.path.exists(path):
                    continue
                with open(path) as f:
                    phases[j] = [
                        (r["kind"], float(r["start_unix_s"]), float(r["end_unix_s"]), int(r["bytes"]))
                        for r in csv.DictReader(f)
                    ]
            starts = [p[1] for ph in phases.values() for p in ph]
            if not starts:
                continue
            t0 = min(starts)
            lo, hi = t0 + windows[seed][0], t0 + windows[seed][1]
            traces = [read_trace(p) for p in sorted(glob.glob(os.path.join(run, "server*.trace.csv")))]
            busy = [union_len([(d, c) for _, _, d, c in t], lo, hi) / (hi - lo) for t in traces]
            idle = [idle_with_queue(t, lo, hi) / (hi - lo) for t in traces]
            wait = defaultdict(list)
            for t in traces:
                for j, a, d, _ in t:
                    if lo <= a < hi and j in jobs[seed]:
                        wait[jobs[seed][j]["class"]].append((d - a) * 1e3)
            excess = defaultdict(list)
            for j, ph in phases.items():
                peak = float(jobs[seed][j]["peak_mib_s"]) * MIB
                for kind, s, e, b in ph:
                    if kind == "io" and lo <= s and e < hi and b > 0:
                        excess[jobs[seed][j]["class"]].append((e - s) / (b / peak))
            mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
            pc = per_config[config]
            pc["busy"].append(mean(busy))
            pc["idle_q"].append(mean(idle))
            for cls in ("high", "medium", "low"):
                pc[f"wait_{cls}"].append(mean(wait[cls]))
                pc[f"excess_{cls}"].append(mean(excess[cls]))
                rows_out.append(
                    [seed, config, cls, f"{mean(busy):.4f}", f"{mean(idle):.4f}",
                     f"{mean(wait[cls]):.2f}", f"{mean(excess[cls]):.3f}", len(excess[cls])]
                )
    with open(os.path.join(out, "breakdown.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["seed", "config", "class", "busy", "idle_queued", "wait_ms", "excess", "phases"])
        w.writerows(rows_out)

    def m(xs):
        xs = [x for x in xs if x == x]
        return sum(xs) / len(xs) if xs else float("nan")

    for config, pc in per_config.items():
        print(
            f"{config:<11} busy {m(pc['busy']):.3f}  idle with work queued {m(pc['idle_q']):.3f}  "
            + "  ".join(
                f"{c}: wait {m(pc['wait_' + c]):.1f} ms excess x{m(pc['excess_' + c]):.2f}"
                for c in ("high", "medium", "low")
            )
            + f"  ({len(pc['busy'])} workloads)"
        )
    print(f"wrote {os.path.join(out, 'breakdown.csv')}")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isfile(os.path.join(sys.argv[1], "workloads.csv")):
        sys.exit("usage: random-breakdown.py OUT  (the --out directory of `iosets experiment random`)")
    main(sys.argv[1])
