#!/usr/bin/env python3
"""Reads criterion's estimates.json files of one or more runs (one criterion directory per run) and
prints Markdown tables: for each group/parameter/policy, the median over runs of criterion's median,
the min-max range over runs, throughput where the bench declared one, and the ratio to `noop`
(same group and parameter; ratio of the medians over runs). With more than one run it then prints,
per group, every run's own median and its ratio to the `noop` of the same run, and the load average
a run recorded (a `loadavg` file in its directory, as bench/run.sh writes)."""
import json
import statistics
import sys
from pathlib import Path


def load(root: Path):
    out = {}
    for est in root.glob("*/*/*/new/estimates.json"):
        group, policy, param = est.parts[-5], est.parts[-4], est.parts[-3]
        median = json.loads(est.read_text())["median"]["point_estimate"]
        bench = est.parent / "benchmark.json"
        elems = None
        if bench.exists():
            elems = (json.loads(bench.read_text()).get("throughput") or {}).get("Elements")
        out[(group, param, policy)] = (median, elems)
    return out


def fmt_ns(ns: float) -> str:
    return f"{ns:,.1f} ns" if ns < 1e6 else f"{ns / 1e6:,.1f} ms"


def sort_key(k):
    return (k[0], len(k[1]), k[1], k[2] != "noop", k[2])


def summary(runs) -> None:
    keys = sorted(set().union(*runs), key=sort_key)
    groups = {}
    for key in keys:
        samples = [r[key][0] for r in runs if key in r]
        elems = next((r[key][1] for r in runs if key in r), None)
        groups.setdefault(key[0], []).append((key, statistics.median(samples), min(samples), max(samples), elems, len(samples)))
    for group, rows in groups.items():
        print(f"\n### {group} ({len(runs)} runs)\n")
        print("| parameter | policy | median | range over runs | per second | ratio to noop |")
        print("|---|---|---|---|---|---|")
        base = {k[1]: m for (k, m, *_ ) in rows if k[2] == "noop"}
        for (g, param, policy), med, lo, hi, elems, n in rows:
            per_s = f"{elems / (med * 1e-9):,.0f}/s" if elems else "-"
            ratio = f"{med / base[param]:.2f}x" if param in base else "-"
            print(f"| {param} | {policy} | {fmt_ns(med)} | {fmt_ns(lo)} – {fmt_ns(hi)} | {per_s} | {ratio} |")


def per_run(runs, loads) -> None:
    keys = sorted(set().union(*runs), key=sort_key)
    for group in sorted({k[0] for k in keys}):
        rows = [k for k in keys if k[0] == group]
        print(f"\n### {group}: every run (median, and ratio to noop in the same run)\n")
        print("| parameter | policy | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |")
        print("|---|---|" + "---|" * len(runs))
        for _, param, policy in rows:
            cells = []
            for r in runs:
                if (group, param, policy) not in r:
                    cells.append("-")
                    continue
                med = r[(group, param, policy)][0]
                base = r.get((group, param, "noop"))
                ratio = f" ({med / base[0]:.2f}x)" if base and policy != "noop" else ""
                cells.append(f"{fmt_ns(med)}{ratio}")
            print(f"| {param} | {policy} | " + " | ".join(cells) + " |")
        print("| | load average (1, 5, 15 min) at the run's end | " + " | ".join(loads) + " |")


def main(roots) -> None:
    dirs = [Path(r) for r in roots if Path(r).is_dir()]
    runs = [load(d) for d in dirs]
    loads = [(d / "loadavg").read_text().strip() if (d / "loadavg").exists() else "-" for d in dirs]
    summary(runs)
    if len(runs) > 1:
        per_run(runs, loads)


if __name__ == "__main__":
    main(sys.argv[1:] or ["target/criterion"])
