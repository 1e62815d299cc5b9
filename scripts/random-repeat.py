#!/usr/bin/env python3
"""How much `iosets experiment random`'s measured metrics move between two runs of the same
workloads and configuration: the noise floor under issue 27's "auto within 5 % of clairvoyant".

Reads DIR_A/metrics.csv and DIR_B/metrics.csv, takes the workloads (seeds) and configurations
both have, and prints, per configuration and metric, the median and largest |B/A - 1| and in how
many workloads the two runs are within 5 %, and in how many they are within 5 % on all four.
Either side may be several directories joined by commas (runs of different seeds, e.g. seeds
1-10 and 11-20).

    python3 scripts/random-repeat.py experiments/random-chunk256-11-20 DIR_B
    python3 scripts/random-repeat.py experiments/random-chunk256,experiments/random-chunk256-11-20 DIR_B
"""
import csv
import sys

METRICS = ["max_stretch", "geomean_stretch", "io_slowdown", "utilization"]


def load(dirs):
    got = {}
    for d in dirs.split(","):
        with open(f"{d}/metrics.csv") as f:
            for r in csv.DictReader(f):
                key = (int(r["seed"]), r["config"], r["metric"])
                if key in got:
                    sys.exit(f"random-repeat: seed {key[0]}'s {key[1]} is in more than one of {dirs}")
                got[key] = float(r["measured"])
    return got


def main(a_dir, b_dir):
    a, b = load(a_dir), load(b_dir)
    both = sorted(k for k in a if k in b)
    configs = sorted({k[1] for k in both})
    if not both:
        sys.exit("random-repeat: no workload and configuration in both")
    for config in configs:
        seeds = sorted({k[0] for k in both if k[1] == config})
        all_four = 0
        for s in seeds:
            if all(
                (s, config, m) in a and abs(b[(s, config, m)] / a[(s, config, m)] - 1) <= 0.05
                for m in METRICS
            ):
                all_four += 1
        print(f"{config}: {len(seeds)} workloads run twice; within 5 % on all four metrics in {all_four}")
        for m in METRICS:
            d = sorted(
                abs(b[(s, config, m)] / a[(s, config, m)] - 1) for s in seeds if (s, config, m) in a
            )
            k = len(d)
            med = d[k // 2] if k % 2 else (d[k // 2 - 1] + d[k // 2]) / 2
            within = sum(x <= 0.05 for x in d)
            print(f"  {m}: median {100 * med:.1f} %, largest {100 * d[-1]:.1f} %, within 5 % in {within} of {k}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: random-repeat.py DIR_A DIR_B")
    main(sys.argv[1], sys.argv[2])
