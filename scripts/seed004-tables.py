#!/usr/bin/env python3
"""Markdown tables of a seed 004 experiment's outputs (`iosets experiment seed004 --out DIR`, or
scripts/cluster-seed004.sh's DIR), for EXPERIMENTS.md: every run's four metrics and set overlap,
each configuration's change against timeorder in the same repetition, and, when DIR has
daemons.csv (the test bed's), each node's daemons' CPU seconds and peak memory per run.

Usage: python3 scripts/seed004-tables.py DIR
"""
import csv
import sys
from collections import defaultdict


def num(v, fmt="{:.3f}"):
    return "–" if v in ("", None) else fmt.format(float(v))


def main(out):
    rows = list(csv.DictReader(open(f"{out}/metrics.csv")))
    print("| config | rep | max stretch | geomean stretch | I/O slowdown | utilization | set overlap |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        overlap = "–" if r["set_overlap"] == "" else f"{100 * float(r['set_overlap']):.2f} %"
        print(f"| {r['config']} | {r['rep']} | {num(r['max_stretch'])} | {num(r['geomean_stretch'])} "
              f"| {num(r['io_slowdown'])} | {num(r['utilization'])} | {overlap} |")
    keys = ["max_stretch", "geomean_stretch", "io_slowdown", "utilization"]
    base = {r["rep"]: r for r in rows if r["config"] == "timeorder"}
    others = [c for c in dict.fromkeys(r["config"] for r in rows) if c != "timeorder"]
    if base and others:
        print()
        print("Against timeorder in the same repetition (max stretch, geomean stretch, I/O slowdown, "
              "utilization; better is −, −, −, +):")
        print()
        print("| rep | " + " | ".join(others) + " |")
        print("|---" * (len(others) + 1) + "|")
        for rep, b in base.items():
            cells = []
            for c in others:
                r = next((x for x in rows if x["config"] == c and x["rep"] == rep), None)
                parts = []
                for k in keys:
                    if r is None or r[k] == "" or b[k] == "":
                        parts.append("–")
                    else:
                        parts.append(f"{100 * (float(r[k]) / float(b[k]) - 1):+.1f} %")
                cells.append(", ".join(parts))
            print(f"| {rep} | " + " | ".join(cells) + " |")
    try:
        daemons = list(csv.DictReader(open(f"{out}/daemons.csv")))
    except FileNotFoundError:
        return
    start, end = {}, {}
    for d in daemons:
        run, when = d["when"].rsplit(":", 1)
        key = (d["node"], d["process"], d["pid"])
        (start if when == "start" else end).setdefault(run, {})[key] = (
            float(d["cpu_s"]), int(d["peak_rss_kib"] or 0))
    print()
    print("Each node's daemons over each run: CPU seconds (user + system) and the largest peak "
          "resident memory of one such process (MiB); `iosets` on a compute node is its mount (the "
          "applications have ended when it is read), "
          "on an I/O node its server:")
    print()
    print("| run | node role | process | processes | CPU s in all | CPU s, largest | peak RSS MiB, largest |")
    print("|---|---|---|---|---|---|---|")
    for run, procs in end.items():
        agg = defaultdict(lambda: [0, 0.0, 0.0, 0])
        for (node, proc, pid), (cpu, rss) in procs.items():
            cpu -= start.get(run, {}).get((node, proc, pid), (0.0, 0))[0]
            role = {"s": "storage", "i": "I/O", "c": "compute", "h": "head"}[node[0]]
            a = agg[(role, proc)]
            a[0] += 1
            a[1] += cpu
            a[2] = max(a[2], cpu)
            a[3] = max(a[3], rss)
        for (role, proc), (n, total, most, rss) in sorted(agg.items()):
            if total < 0.05 and rss < 1024:
                continue
            print(f"| {run} | {role} | {proc} | {n} | {total:.1f} | {most:.1f} | {rss / 1024:.1f} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 scripts/seed004-tables.py DIR")
    main(sys.argv[1])
