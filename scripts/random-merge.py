#!/usr/bin/env python3
"""Puts configurations of several `iosets experiment random` runs of the same workloads together.

Usage: scripts/random-merge.py OUT DIR:CONFIG[,CONFIG...] [DIR:CONFIG...]

Writes OUT/metrics.csv and OUT/classes.csv with the rows of each DIR whose config is listed for
it (a config may be renamed with NAME=CONFIG, e.g. `auto-hold=auto`), and copies
OUT/workloads.csv from the first DIR. The workloads must be the same (same seeds and flags):
their workloads.csv files must be equal but for the `efficiency` column (measured in each run:
each DIR's rows keep the predictions made with its own), or it stops with an error.

    python3 scripts/random-merge.py merged rnd-a:timeorder rnd-b:clairvoyant,auto
"""
import csv
import os
import sys


def read(path):
    with open(path) as f:
        r = csv.DictReader(f)
        return r.fieldnames, list(r)


def main(out, parts):
    first = None
    tables = {"metrics.csv": [None, []], "classes.csv": [None, []]}
    for part in parts:
        d, sep, configs = part.partition(":")
        if not sep or not configs:
            sys.exit(f"random-merge: {part!r}: expected DIR:CONFIG[,CONFIG...]")
        names = {}
        for c in configs.split(","):
            new, eq, old = c.partition("=")
            names[old if eq else new] = new
        with open(os.path.join(d, "workloads.csv")) as f:
            workloads = f.read()
        _, rows = read(os.path.join(d, "workloads.csv"))
        drawn = [{k: v for k, v in r.items() if k != "efficiency"} for r in rows]
        if first is None:
            first, first_drawn = workloads, drawn
        elif drawn != first_drawn:
            sys.exit(f"random-merge: {d}/workloads.csv differs from the first: not the same workloads")
        for name, table in tables.items():
            fields, rows = read(os.path.join(d, name))
            table[0] = table[0] or fields
            found = set()
            for r in rows:
                if r["config"] in names:
                    found.add(r["config"])
                    table[1].append({**r, "config": names[r["config"]]})
            missing = set(names) - found
            if missing:
                sys.exit(f"random-merge: {d}/{name} has no rows of {sorted(missing)}")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "workloads.csv"), "w") as f:
        f.write(first)
    for name, (fields, rows) in tables.items():
        rows.sort(key=lambda r: int(r["seed"]))
        with open(os.path.join(out, name), "w", newline="") as f:
            w = csv.DictWriter(f, fields, lineterminator="\n")
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
