#!/usr/bin/env python3
"""Where a job of a high-priority set loses time against the fluid model: one run of
`iosets experiment random` (DIR/wN/runs/CONFIG-1), per job of a class.

For each job of the class (default: high), from the jobs' phase logs (jobK.csv) and the servers'
traces (serverN.trace.csv):
- its I/O phases' median length: those that overlapped no other job's phase ("alone"), those
  that overlapped only jobs of other sets ("other sets only"; the fluid model gives the set its
  priority's share then, 10/11 of the device for priority 10 against 1), and those that
  overlapped a job of its own set;
- its writes' median and mean wait in the server's queue (arrival to dispatch), and how many
  requests of jobs of other classes were dispatched on that server while each waited.

    python3 scripts/random-granularity.py RUN_DIR WORKLOADS_CSV SEED [CLASS]

e.g. `python3 scripts/random-granularity.py rnd256h/w2/runs/clairvoyant-1 rnd256h/workloads.csv 2`.
"""
import bisect
import csv
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_trace  # noqa: E402


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def main(run, workloads, seed, cls):
    classes = {}
    with open(workloads) as f:
        for r in csv.DictReader(f):
            if int(r["seed"]) == seed:
                classes[int(r["job"])] = r["class"]
    if not classes:
        sys.exit(f"random-granularity: no jobs of seed {seed} in {workloads}")
    phases = {}
    for job in classes:
        path = os.path.join(run, f"job{job}.csv")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            phases[job] = [
                (float(r["start_unix_s"]), float(r["end_unix_s"]))
                for r in csv.DictReader(f)
                if r["kind"] == "io" and r["end_unix_s"] != "inf"
            ]
    mine = [j for j in sorted(phases) if classes[j] == cls]
    if not mine:
        sys.exit(f"random-granularity: no {cls} job ran in {run}")

    def overlaps(s, e, jobs):
        return any(s2 < e and e2 > s for k in jobs for (s2, e2) in phases[k])

    traces = sorted(glob.glob(os.path.join(run, "server*.trace.csv")))
    rows = [server_trace.rows(t) for t in traces]
    print(f"{run}: {cls} jobs {mine}; {len(traces)} server traces")
    for j in mine:
        own = [k for k in phases if k != j and classes[k] == cls]
        others = [k for k in phases if classes[k] != cls]
        alone, other_sets, own_set = [], [], []
        for s, e in phases[j]:
            length = (e - s) * 1e3
            if overlaps(s, e, own):
                own_set.append(length)
            elif overlaps(s, e, others):
                other_sets.append(length)
            else:
                alone.append(length)
        waits, between = [], []
        for rs in rows:
            dispatches = sorted((r["dispatch_s"], r["path"].split(".")[0]) for r in rs)
            times = [d[0] for d in dispatches]
            for r in rs:
                if r["op"] != "write" or not r["path"].startswith(f"job{j}."):
                    continue
                waits.append((r["dispatch_s"] - r["arrival_s"]) * 1e3)
                lo = bisect.bisect_right(times, r["arrival_s"])
                hi = bisect.bisect_left(times, r["dispatch_s"])
                between.append(
                    sum(
                        1
                        for _, name in dispatches[lo:hi]
                        if name.startswith("job") and classes.get(int(name[3:])) != cls
                    )
                )
        print(
            f"job {j}: phases alone {len(alone)} median {median(alone):.1f} ms; other sets only "
            f"{len(other_sets)} median {median(other_sets):.1f} ms; with its own set "
            f"{len(own_set)} median {median(own_set):.1f} ms; writes {len(waits)}, wait median "
            f"{median(waits):.2f} ms mean {statistics.mean(waits) if waits else float('nan'):.2f} ms, "
            f"other classes' requests dispatched meanwhile: mean "
            f"{statistics.mean(between) if between else float('nan'):.2f}"
        )


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit("usage: random-granularity.py RUN_DIR WORKLOADS_CSV SEED [CLASS]")
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) == 5 else "high")
