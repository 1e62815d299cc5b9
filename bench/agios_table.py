#!/usr/bin/env python3
"""Summary of bench/agios_test.sh: every run's numbers and the shim / AGIOS ratios inside each run.

usage: agios_table.py OUT_DIR   (reads results.csv, idle.csv, reliability.csv, machine.txt,
failures.txt)
"""
import csv
import os
import sys
from collections import defaultdict

out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
# (mode, algorithm, threads) -> run -> library -> row
cells = defaultdict(lambda: defaultdict(dict))
algs, threads, runs = [], [], []
for r in rows:
    key = (r["mode"], r["algorithm"], int(r["threads"]))
    cells[key][int(r["run"])][r["library"]] = r
    if r["algorithm"] not in algs:
        algs.append(r["algorithm"])
    if int(r["threads"]) not in threads:
        threads.append(int(r["threads"]))
    if int(r["run"]) not in runs:
        runs.append(int(r["run"]))
threads.sort()
runs.sort()


def fmt_rate(x):
    return f"{x / 1000:,.0f}k"


def table(mode, field, better, fmt, title, goal):
    print(f"\n### {title}\n")
    print("Each cell: every run's value, `shim / AGIOS Release` and `shim / AGIOS default` ratios of "
          f"that run. Goal: {goal}.\n")
    print("| algorithm | T | AGIOS Release | AGIOS default | shim | shim / Release | shim / default | goal met in every run |")
    print("|---|---|---|---|---|---|---|---|")
    met_all = True
    for a in algs:
        for t in threads:
            per = cells.get((mode, a, t), {})
            vals = {lib: [] for lib in ("agios-release", "agios-default", "shim")}
            rr, rd, ok = [], [], True
            for run in runs:
                libs = per.get(run, {})
                for lib in vals:
                    vals[lib].append(fmt(float(libs[lib][field])) if lib in libs else "fail")
                s = libs.get("shim")
                for lib, acc in (("agios-release", rr), ("agios-default", rd)):
                    g = libs.get(lib)
                    if s and g and float(g[field]) > 0:
                        ratio = float(s[field]) / float(g[field])
                        acc.append(f"{ratio:.2f}x")
                        ok = ok and better(ratio, t)
                    elif s and g:
                        acc.append("—")
                    elif not g:
                        acc.append("AGIOS failed")
                    else:
                        acc.append("shim failed")
                        ok = False
            met_all = met_all and ok
            print(f"| {a} | {t} | {' / '.join(vals['agios-release'])} | {' / '.join(vals['agios-default'])} | "
                  f"{' / '.join(vals['shim'])} | {' / '.join(rr)} | {' / '.join(rd)} | {'yes' if ok else '**no**'} |")
    print(f"\nGoal met everywhere: {'yes' if met_all else '**no**'}")


print(open(os.path.join(out, "machine.txt")).read().strip().replace("\n", "; "))
# Issue 29's goal: 2x AGIOS with one thread, at least AGIOS's throughput with more.
table("flood", "throughput", lambda r, t: r >= (2.0 if t == 1 else 1.0), lambda x: fmt_rate(x),
      "Throughput, requests/s (N requests per thread, no think time, the callback releases)",
      "shim ≥ 2× AGIOS at T = 1, ≥ 1× at T > 1 (Release and default)")
table("paced", "mean_us", lambda r, t: r <= 1.0, lambda x: f"{x:,.1f}",
      "Time in library per request, µs (seed 000 section 5: 100 requests per thread, 10 ns think time, 4 workers release)",
      "shim ≤ AGIOS")

idle = list(csv.DictReader(open(os.path.join(out, "idle.csv"))))
print("\n### Idle: CPU seconds in 2 s of wall time (TO, initialised, nothing to do)\n")
by = defaultdict(list)
for r in idle:
    by[r["library"]].append(r["cpu_s"])
for lib, v in by.items():
    print(f"- {lib}: {', '.join(v)}")

rel_path = os.path.join(out, "reliability.csv")
if os.path.exists(rel_path):
    rel = list(csv.DictReader(open(rel_path)))
    print("\n### Reliability: AGIOS's agios_test, unchanged, one run per line of reliability.csv\n")
    print("| library | runs | ok | hangs (timeout) | crashes |")
    print("|---|---|---|---|---|")
    by = defaultdict(list)
    for r in rel:
        by[r["library"]].append(r)
    for lib, rs in by.items():
        ok = sum(r["status"] == "ok" for r in rs)
        hang = sum(r["status"] == "hang" for r in rs)
        crash = len(rs) - ok - hang
        print(f"| {lib} | {len(rs)} | {ok} | {hang} | {crash} |")
    bad = defaultdict(int)
    for r in rel:
        if r["status"] != "ok":
            bad[(r["library"], r["algorithm"], r["status"])] += 1
    if bad:
        print("\nNot ok, by algorithm: " + "; ".join(f"{l} {a} {s}: {n}" for (l, a, s), n in sorted(bad.items())))

fail = os.path.join(out, "failures.txt")
if os.path.exists(fail):
    print("\n### Harness runs that failed\n")
    for line in open(fail):
        print(f"- {line.strip()}")
