#!/usr/bin/env python3
"""Markdown tables from <out>/iosets.jsonl and, if present, <out>/ftio.jsonl (stdlib only).

Per case and method (iosets, and each FTIO variant of bench/period_changes_ftio.py):
- "right": as many segments as behaviours, every change within one period (of the shorter of
  the two behaviours around it) of the truth, and every segment's period within 5% of its
  behaviour's w_iter (the segments matched in order);
- "changes found": true changes with a found change within one period;
- "last error": |last segment's period / last behaviour's w_iter - 1| (what a scheduler ends
  with); "none" without a period;
- time: iosets one analysis (segmentation included, best of 5); FTIO the whole analysis, or
  for the online variants the sum over its predictions (and per prediction).
Every case is listed in a second table.
"""
import json
import os
import statistics
import sys


def score(case, found):
    """(right, changes found, last error or None) of `found` = {segments, changes_s}."""
    truth_changes = case["true_changes_s"]
    periods = case["true_periods_s"]
    changes = found["changes_s"]
    near = 0
    for k, t in enumerate(truth_changes):
        tol = min(periods[k], periods[k + 1])
        if any(abs(c - t) <= tol for c in changes):
            near += 1
    segs = found["segments"]
    last = segs[-1]["period_s"] if segs else None
    last_err = abs(last / periods[-1] - 1.0) if last else None
    right = (
        len(segs) == len(periods)
        and near == len(truth_changes)
        and all(s["period_s"] and abs(s["period_s"] / p - 1.0) <= 0.05 for s, p in zip(segs, periods))
    )
    return right, near, last_err


def pct(e):
    return "none" if e is None else f"{100 * e:.2f}%"


def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def main(out):
    cases = [json.loads(l) for l in open(os.path.join(out, "iosets.jsonl"))]
    ftio = {}
    path = os.path.join(out, "ftio.jsonl")
    if os.path.exists(path):
        for l in open(path):
            r = json.loads(l)
            ftio.setdefault(r["case"], {})[r["variant"]] = r
    variants = ["iosets"] + sorted({v for c in ftio.values() for v in c})

    def found(case, v):
        if v == "iosets":
            return {
                "segments": case["segments"],
                "changes_s": [s["start_s"] for s in case["segments"][1:]],
                "time_s": case["time_s"],
                "predictions": 1,
                "error": None,
            }
        return ftio.get(case["case"], {}).get(v)

    classes = []
    for c in cases:
        if c["class"] not in classes:
            classes.append(c["class"])
    print("| class (periods s) | cases | method | right | changes found | median last error | worst last error | median time per analysis |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for cl in classes + ["all"]:
        rows = [c for c in cases if cl in ("all", c["class"])]
        label = "all" if cl == "all" else f"{cl} ({' → '.join(f'{p:g}' for p in rows[0]['periods'])})"
        for v in variants:
            res = [(c, found(c, v)) for c in rows]
            failed = sum(1 for _, f in res if f is None or f.get("error"))
            ok = [(c, f) for c, f in res if f is not None and not f.get("error")]
            scores = [score(c, f) for c, f in ok]
            right = sum(1 for s in scores if s[0])
            near = sum(s[1] for s in scores)
            total_changes = sum(len(c["true_changes_s"]) for c, _ in ok)
            errs = [s[2] for s in scores]
            worst = None if any(e is None for e in errs) or not errs else max(errs)
            times = [f["time_s"] for _, f in ok]
            per = [f["time_s"] / max(f.get("predictions", 1), 1) for _, f in ok]
            t = med(times)
            tp = med(per)
            time_s = "-" if t is None else f"{t * 1e3:.2f} ms"
            if v.startswith("ftio-") and tp is not None:
                time_s += f" ({tp * 1e3:.2f} ms per prediction)"
            missing = sum(1 for e in errs if e is None)
            worst_s = f"none in {missing}" if missing else pct(worst)
            fail = f", {failed} failed" if failed else ""
            print(f"| {label} | {len(rows)} | {v}{fail} | {right}/{len(ok)} | {near}/{total_changes} | {pct(med(errs))} | {worst_s} | {time_s} |")

    print("\n### Every case\n")
    print("| case | truth: changes s / periods s | " + " | ".join(variants) + " |")
    print("|---|---|" + "---|" * len(variants))
    for c in cases:
        truth = (", ".join(f"{t:.0f}" for t in c["true_changes_s"]) + " / "
                 + ", ".join(f"{p:.1f}" for p in c["true_periods_s"]))
        cells = []
        for v in variants:
            f = found(c, v)
            if f is None:
                cells.append("-")
            elif f.get("error"):
                cells.append(f"error: {f['error']}")
            else:
                ch = ", ".join(f"{t:.0f}" for t in f["changes_s"]) or "no change"
                ps = ", ".join("none" if s["period_s"] is None else f"{s['period_s']:.1f}" for s in f["segments"])
                mark = "✓" if score(c, f)[0] else "✗"
                cells.append(f"{mark} {ch} / {ps}")
        print(f"| {c['case']} | {truth} | " + " | ".join(cells) + " |")

    speed = os.path.join(out, "speed.jsonl")
    if os.path.exists(speed):
        fs = {}
        fpath = os.path.join(out, "ftio-speed.jsonl")
        if os.path.exists(fpath):
            fs = {json.loads(l)["case"]: json.loads(l) for l in open(fpath)}
        print("\n### Speed on 10,000 phases (iosets best of 5, FTIO best of 2)\n")
        print("| trace | events | iosets segments, last period s | iosets detect (segments on) | iosets whole (segments off) | FTIO whole: period s | FTIO time | FTIO ÷ iosets (segments on) |")
        print("|---|---:|---|---:|---:|---:|---:|---:|")
        for l in open(speed):
            r = json.loads(l)
            lp = "none" if r["last_period_s"] is None else f"{r['last_period_s']:.3f}"
            f = fs.get(r["case"])
            if f is None:
                fp = ft = ratio = "-"
            elif f.get("error"):
                fp, ft, ratio = f"error: {f['error']}", "-", "-"
            else:
                fp = "none" if f["period_s"] is None else f"{f['period_s']:.3f}"
                ft = f"{f['time_s'] * 1e3:.1f} ms"
                ratio = f"{f['time_s'] / r['segment_s']:.0f}×"
            print(f"| {r['case']} | {r['events']} | {r['segments']}, {lp} | {r['segment_s'] * 1e3:.2f} ms | "
                  f"{r['detect_whole_s'] * 1e3:.2f} ms | {fp} | {ft} | {ratio} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "target-period/period-changes")
