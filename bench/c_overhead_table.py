#!/usr/bin/env python3
"""Summarises bench/c_overhead.sh's CSV files as Markdown tables: per (library, policy, threads,
requests per thread), the median over runs and the range of the mean time in library (µs per
request) and of the throughput (requests added, handed out and released per second); ratios to
AGIOS computed within each run (same run, same T, same N), then summarised the same way."""
import csv
import statistics
import sys
from collections import defaultdict

results, idle, machine = sys.argv[1], sys.argv[2], sys.argv[3]
rows = list(csv.DictReader(open(results)))
cell = defaultdict(list)
by_run = {}
for r in rows:
    key = (r["library"], r["policy"], int(r["per_thread"]), int(r["threads"]))
    cell[key].append((float(r["mean_us"]), float(r["throughput"])))
    by_run[(r["run"],) + key] = (float(r["mean_us"]), float(r["throughput"]))


def fmt_range(vals, f):
    return f"{f(statistics.median(vals))} ({f(min(vals))} – {f(max(vals))})"


us = lambda v: f"{v:,.1f}"
rate = lambda v: f"{v / 1000:,.0f} k"
ratio = lambda v: f"{v:.2f}x"
# The AGIOS algorithm each iosets policy is compared with (AGIOS at the measured commit has no WFQ;
# seed 000 compares its WFQ with TO).
reference = {"noop": "NOOP", "NOOP": "NOOP", "timeorder": "TO", "TO": "TO", "wfq": "TO", "iosets": "TO"}
have_agios = any(k[0] == "agios" for k in cell)
print(f"{open(machine).read().strip()}\n")
for n in sorted({k[2] for k in cell}):
    print(f"#### {n:,} requests per producer thread\n")
    head = "| library | policy | T | mean time in library, µs | throughput, req/s |"
    sep = "|---|---|---|---|---|"
    if have_agios:
        head += " throughput / AGIOS | time / AGIOS |"
        sep += "---|---|"
    print(head)
    print(sep)
    for key in sorted(k for k in cell if k[2] == n):
        lib, pol, _, t = key
        vals = cell[key]
        line = f"| {lib} | {pol} | {t} | {fmt_range([v[0] for v in vals], us)} | {fmt_range([v[1] for v in vals], rate)} |"
        if have_agios:
            ref = reference.get(pol)
            tr, mr = [], []
            for r in sorted({r["run"] for r in rows}):
                mine = by_run.get((r,) + key)
                theirs = by_run.get((r, "agios", ref, n, t))
                if mine and theirs and lib != "agios":
                    tr.append(mine[1] / theirs[1])
                    mr.append(mine[0] / theirs[0])
            line += f" {fmt_range(tr, ratio) if tr else '—'} | {fmt_range(mr, ratio) if mr else '—'} |"
        print(line)
    print()
print("#### Idle CPU (CPU time of the whole process while the library is initialised and idle)\n")
print("| library | policy | wall, s | CPU, s (median, range) |")
print("|---|---|---|---|")
idle_cells = defaultdict(list)
for r in csv.DictReader(open(idle)):
    idle_cells[(r["library"], r["policy"])].append((float(r["wall_s"]), float(r["cpu_s"])))
for key in sorted(idle_cells):
    vals = idle_cells[key]
    print(f"| {key[0]} | {key[1]} | {statistics.median(v[0] for v in vals):.2f} | "
          f"{fmt_range([v[1] for v in vals], lambda x: f'{x:.4f}')} |")
