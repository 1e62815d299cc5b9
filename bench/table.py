#!/usr/bin/env python3
"""Reads criterion's estimates.json files of one or more runs (one criterion directory per run) and
prints Markdown tables: for each group/parameter/policy, the median over runs of criterion's median,
the min-max range over runs, throughput where the bench declared one, and the ratio to `noop`
(same group and parameter; ratio of the medians over runs)."""
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


def main(roots) -> None:
    runs = [load(Path(r)) for r in roots]
    keys = sorted(set().union(*runs), key=lambda k: (k[0], len(k[1]), k[1], k[2] != "noop", k[2]))
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


if __name__ == "__main__":
    main(sys.argv[1:] or ["target/criterion"])
