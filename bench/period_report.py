#!/usr/bin/env python3
"""Markdown tables from <out>/iosets.jsonl and, if present, <out>/ftio.jsonl (stdlib only).

Error = |estimate / truth - 1|, truth = the trace's own mean time between phase starts. A case
without an estimate counts as a wrong set and is shown as "none". "Set" is Set-10's
round(log10 period); "set ok" compares it with the truth's.
"""
import json
import math
import os
import statistics
import sys


def set10(p):
    return round(math.log10(p)) if p and p > 0 else None


def err(est, truth):
    return abs(est / truth - 1.0) if est else None


def pct(e, digits=2):
    return "none" if e is None else f"{100 * e:.{digits}f}%"


def main(out):
    cases = [json.loads(l) for l in open(os.path.join(out, "iosets.jsonl"))]
    ftio = {}
    path = os.path.join(out, "ftio.jsonl")
    if os.path.exists(path):
        for l in open(path):
            r = json.loads(l)
            ftio.setdefault(r["case"], {})[r["variant"]] = r
    variants = sorted({v for c in ftio.values() for v in c})

    for it in (20, 5):
        rows = [c for c in cases if c["iterations"] == it]
        print(f"\n### {it} iterations ({len(rows)} cases)\n")
        head = "| period s | jitter | background | truth s | iosets s | error | conf | set ok |"
        sep = "|---:|---:|:---|---:|---:|---:|---:|:---|"
        for v in variants:
            head += f" {v} s | {v} error | {v} set ok |"
            sep += "---:|---:|:---|"
        print(head)
        print(sep)
        for c in rows:
            e = err(c["estimate_s"], c["truth_s"])
            ok = set10(c["estimate_s"]) == set10(c["truth_s"])
            est = "none" if c["estimate_s"] is None else f"{c['estimate_s']:.3f}"
            mark = "" if c["periodic"] else " (low conf)"
            line = (f"| {c['period']:g} | {int(c['jitter'] * 100)}% | {'yes' if c['background'] else 'no'} "
                    f"| {c['truth_s']:.3f} | {est}{mark} | {pct(e)} | {c['confidence']:.2f} | {'yes' if ok else '**no**'} |")
            for v in variants:
                r = ftio.get(c["case"], {}).get(v)
                if r is None or r.get("error"):
                    line += f" failed: {r['error'] if r else 'missing'} | - | **no** |"
                    continue
                fe = err(r["estimate_s"], c["truth_s"])
                fok = set10(r["estimate_s"]) == set10(c["truth_s"])
                fs = "none" if r["estimate_s"] is None else f"{r['estimate_s']:.3f}"
                line += f" {fs} | {pct(fe)} | {'yes' if fok else '**no**'} |"
            print(line)

    print("\n### Summary\n")
    print("| tool | iterations | class | cases | sets right | confident | median error | max error | median time per analysis |")
    print("|:---|---:|:---|---:|---:|---:|---:|---:|---:|")
    classes = [("all", lambda c: True), ("clean (0% jitter)", lambda c: c["jitter"] == 0),
               ("10% jitter", lambda c: c["jitter"] == 0.1), ("30% jitter", lambda c: c["jitter"] == 0.3),
               ("50% jitter", lambda c: c["jitter"] == 0.5), ("background I/O", lambda c: c["background"]),
               ("36 = jitter 0/10/30%, both backgrounds", lambda c: c["jitter"] < 0.4)]
    medians, exact = {}, {}
    for tool in ["iosets"] + variants:
        for it in (20, 5):
            for name, keep in classes:
                rows = [c for c in cases if c["iterations"] == it and keep(c)]
                if tool == "iosets":
                    res = [(c["estimate_s"], c["periodic"], c["time_s"]) for c in rows]
                else:
                    res = []
                    for c in rows:
                        r = ftio.get(c["case"], {}).get(tool, {})
                        res.append((None if r.get("error") else r.get("estimate_s"),
                                    bool(r.get("estimate_s")) and not r.get("error"), r.get("time_s")))
                errs = [err(e, c["truth_s"]) for (e, _, _), c in zip(res, rows)]
                right = sum(set10(e) == set10(c["truth_s"]) for (e, _, _), c in zip(res, rows))
                conf = sum(p for _, p, _ in res)
                known = [x for x in errs if x is not None]
                med = pct(statistics.median([x if x is not None else math.inf for x in errs])) if errs else "-"
                mx = pct(max(known)) if len(known) == len(errs) and known else ("inf (missing)" if errs else "-")
                times = [t for _, _, t in res if t is not None]
                tm = f"{statistics.median(times) * 1e3:.3f} ms" if times else "-"
                print(f"| {tool} | {it} | {name} | {len(rows)} | {right} | {conf} | {med} | {mx} | {tm} |")
                if times:
                    medians[(tool, it, name)] = statistics.median(times)
                if tool == "iosets" and len(known) == len(errs) and known:
                    exact[(it, name)] = pct(max(known), 4)

    if variants:
        print("\n### Speed: FTIO time / iosets time (medians per analysis)\n")
        print("| iterations | class | iosets | " + " | ".join(variants) + " | " +
              " | ".join(f"{v} / iosets" for v in variants) + " | iosets max error (4 digits) |")
        print("|---:|:---|---:|" + "---:|" * (2 * len(variants)) + "---:|")
        for it in (20, 5):
            for name, _ in classes:
                mine = medians.get(("iosets", it, name))
                if mine is None:
                    continue
                theirs = [medians.get((v, it, name)) for v in variants]
                ratio = [f"{t / mine:.0f}x" if t else "-" for t in theirs]
                shown = [f"{t * 1e3:.2f} ms" if t else "-" for t in theirs]
                print(f"| {it} | {name} | {mine * 1e3:.3f} ms | " + " | ".join(shown) + " | " +
                      " | ".join(ratio) + f" | {exact.get((it, name), '-')} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "target-period/period-bench")
