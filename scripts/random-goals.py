#!/usr/bin/env python3
"""Issue 27's goals over the runs of one or more `iosets experiment random` directories.

Reads each DIR/metrics.csv (seed, omega, config, metric, measured, fluid, fluid_diff_pct,
writers, writers_diff_pct), as `iosets experiment random --analyze` writes it, and counts over
all the workloads together:
- per model (fluid, writers, and unbounded where the CSV has it: the writers model without the
  `iosets` policy's bounds on a turn): in how many workloads timeorder is within 10 % of
  fair-share, clairvoyant of set-10 and auto of set-10:online on all four metrics;
- the workloads where the model puts set-10 more than 3 % ahead of fair-share on some metric
  (the clairvoyant row's prediction against the timeorder row's), and in how many of them
  clairvoyant is measured ahead of timeorder on every such metric;
- auto measured within 5 % of clairvoyant on all four metrics; the same as each model predicts
  it, and auto no more than 5 % worse than clairvoyant on any metric (measured and predicted);
- per configuration and class, the mean I/O slowdown over the workloads, measured and under the
  writers model (each DIR/classes.csv).
Stretches and the I/O slowdown are better lower, utilization higher.

    python3 scripts/random-goals.py experiments/random-chunk256 DIR2 ...
"""
import csv
import math
import statistics
import sys
from collections import defaultdict

METRICS = ["max_stretch", "geomean_stretch", "io_slowdown", "utilization"]
HIGHER_IS_BETTER = {"utilization"}


def ahead(metric, a, b, margin):
    """True if value a is better than value b by more than `margin` (a fraction of b)."""
    if metric in HIGHER_IS_BETTER:
        return a > b * (1 + margin)
    return a < b * (1 - margin)


def main(dirs):
    rows = {}
    models = ["fluid", "writers", "unbounded"]
    for d in dirs:
        with open(f"{d}/metrics.csv") as f:
            reader = csv.DictReader(f)
            models = [m for m in models if m in reader.fieldnames]
            for r in reader:
                key = (d, int(r["seed"]), r["config"], r["metric"])
                # A merge of runs made before a model existed leaves its cells empty: the
                # model is then missing for those rows, not zero.
                rows[key] = {k: (None if v == "" else v) for k, v in r.items()}
    workloads = sorted({(d, s) for (d, s, _, _) in rows})
    if not workloads:
        sys.exit("random-goals: no runs in " + " ".join(dirs))
    n = len(workloads)
    out = []
    for model in models:
        within, modelled = defaultdict(int), defaultdict(int)
        predicted, met = 0, 0
        for d, s in workloads:
            for config in ["timeorder", "clairvoyant", "auto"]:
                diffs = [rows.get((d, s, config, m)) for m in METRICS]
                if not all(r is not None and r.get(f"{model}_diff_pct") is not None for r in diffs):
                    continue
                modelled[config] += 1
                if all(abs(float(r[f"{model}_diff_pct"])) <= 10.0 for r in diffs):
                    within[config] += 1
            where = []
            for m in METRICS:
                t, c = rows.get((d, s, "timeorder", m)), rows.get((d, s, "clairvoyant", m))
                if t and c and t.get(model) is not None and c.get(model) is not None and ahead(
                    m, float(c[model]), float(t[model]), 0.03
                ):
                    where.append((m, float(c["measured"]), float(t["measured"])))
            if where:
                predicted += 1
                if all(ahead(m, c, t, 0.0) for m, c, t in where):
                    met += 1
        for config, name in [("timeorder", "fair-share"), ("clairvoyant", "set-10"), ("auto", "set-10:online")]:
            # Out of the workloads whose rows have this model (older runs may lack it).
            out.append(
                f"{model} model: {config} within 10 % of {name} on all four: "
                f"{within[config]} of {modelled[config]}"
            )
        out.append(
            f"{model} model: set-10 predicted > 3 % ahead of fair-share on some metric in {predicted} "
            f"of {n}; clairvoyant measured ahead of timeorder on every such metric in {met}"
        )
    # Auto against clairvoyant, measured and as each model predicts it (what the policy's bounds
    # make of it before anything runs): within 5 %, and no more than 5 % *worse*.
    for source in ["measured"] + models:
        within, not_worse = 0, 0
        for d, s in workloads:
            pairs = [(rows.get((d, s, "auto", m)), rows.get((d, s, "clairvoyant", m))) for m in METRICS]
            if not all(a and c for a, c in pairs):
                continue
            ratios = [(m, float(a[source]) / float(c[source]) - 1) for m, (a, c) in zip(METRICS, pairs)]
            within += all(abs(r) <= 0.05 for _, r in ratios)
            not_worse += all((r >= -0.05) if m in HIGHER_IS_BETTER else (r <= 0.05) for m, r in ratios)
        out.append(
            f"auto against clairvoyant, {source}: within 5 % on all four in {within} of {n}; "
            f"no more than 5 % worse on any in {not_worse}"
        )
    for m in METRICS:
        for config in ["timeorder", "clairvoyant", "auto"]:
            v = sorted(
                float(rows[(d, s, config, m)]["writers_diff_pct"])
                for d, s in workloads
                if (d, s, config, m) in rows
            )
            if v:
                med = statistics.median(v)
                k = sum(abs(x) <= 10 for x in v)
                out.append(f"{m} {config}: within 10 % of the writers model in {k} of {len(v)}, median {med:+.1f} %")
    for m in METRICS:
        gains = []
        for d, s in workloads:
            c, t = rows.get((d, s, "clairvoyant", m)), rows.get((d, s, "timeorder", m))
            if c and t:
                gains.append(float(c["measured"]) / float(t["measured"]) - 1)
        if gains:
            k = len(gains)
            med = statistics.median(gains)
            better = sum(ahead(m, 1 + g, 1.0, 0.0) for g in gains)
            out.append(
                f"{m}: clairvoyant against timeorder, measured: median {100 * med:+.1f} %, "
                f"better in {better} of {k}"
            )
    slowdowns = defaultdict(list)
    unbounded = "unbounded" in models
    for d in dirs:
        with open(f"{d}/classes.csv") as f:
            for r in csv.DictReader(f):
                u = float(r["unbounded_io_slowdown"]) if unbounded and r.get("unbounded_io_slowdown") else float("nan")
                triple = (float(r["measured_io_slowdown"]), float(r["writers_io_slowdown"]), u)
                slowdowns[(r["config"], r["class"])].append(triple)
    for (config, cls), v in sorted(slowdowns.items()):
        measured = statistics.mean(m for m, _, _ in v)
        model = statistics.mean(w for _, w, _ in v)
        line = f"{config} {cls}: mean I/O slowdown {measured:.2f} measured, {model:.2f} writers model"
        known = [u for _, _, u in v if not math.isnan(u)]
        if unbounded and known:
            line += f", {statistics.mean(known):.2f} unbounded"
        out.append(f"{line} ({len(v)} workloads)")
    print("\n".join(out))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: random-goals.py DIR [DIR...]")
    main(sys.argv[1:])
