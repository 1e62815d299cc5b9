#!/usr/bin/env python3
"""Reads criterion's estimates.json files and prints Markdown tables of medians with the ratio of
each policy to `noop` measured in the same run (same group, same parameter)."""
import json
import sys
from pathlib import Path


def median_ns(path: Path) -> float:
    return json.loads(path.read_text())["median"]["point_estimate"]


def throughput(bench_dir: Path):
    bench = bench_dir / "new" / "benchmark.json"
    if not bench.exists():
        return None
    t = json.loads(bench.read_text()).get("throughput") or {}
    return t.get("Elements")


def main(root: Path) -> None:
    groups = {}
    for est in sorted(root.glob("*/*/*/new/estimates.json")):
        group, policy, param = est.parts[-5], est.parts[-4], est.parts[-3]
        groups.setdefault(group, {}).setdefault(param, {})[policy] = (
            median_ns(est),
            throughput(est.parent.parent),
        )
    for group, params in sorted(groups.items()):
        print(f"\n### {group}\n")
        print("| parameter | policy | median | per-second | ratio to noop |")
        print("|---|---|---|---|---|")
        for param in sorted(params, key=lambda p: (len(p), p)):
            row = params[param]
            base = row.get("noop", (None, None))[0]
            for policy in sorted(row, key=lambda p: (p != "noop", p)):
                ns, elems = row[policy]
                per_s = f"{elems / (ns * 1e-9):,.0f}/s" if elems else "-"
                ratio = f"{ns / base:.2f}x" if base else "-"
                shown = f"{ns:,.1f} ns" if ns < 1e6 else f"{ns / 1e6:,.2f} ms"
                print(f"| {param} | {policy} | {shown} | {per_s} | {ratio} |")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion"))
