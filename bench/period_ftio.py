#!/usr/bin/env python3
"""Runs FTIO (PyPI ftio-hpc) in-process on the traces listed in <out>/iosets.jsonl.

Each trace is FTIO's application-level bandwidth {"t": [...], "b": [...]}; it is handed to
ftio.cli.ftio_core.core as FTIO's API example does (time, bandwidth, total_bytes, ranks) with
FTIO's default arguments (DFT, 10 Hz sampling, no autocorrelation) and, as a second variant, with
--autocorrelation. The analysis is timed with time.perf_counter (best of 2 runs). One JSON line per
case and variant goes to <out>/ftio.jsonl.
"""
import contextlib
import io
import json
import sys
import time

import numpy as np
from ftio.cli.ftio_core import core
from ftio.parse.args import parse_args

VARIANTS = {"ftio": ["-e", "no"]}
# FTIO's --autocorrelation variant is not run: it is quadratic in the samples (11.8 s on one
# 20-period trace of 100 s at 10 Hz, and about 100x that on the 1000 s traces).


def period_of(prediction):
    """(period s, confidence) of FTIO's most confident dominant frequency, or (None, 0)."""
    freqs = np.atleast_1d(np.asarray(prediction.dominant_freq, dtype=float))
    confs = np.atleast_1d(np.asarray(prediction.conf, dtype=float))
    if freqs.size == 0 or not np.any(freqs > 0):
        return None, 0.0
    i = int(np.nanargmax(confs)) if confs.size == freqs.size else 0
    if not freqs[i] > 0:
        return None, 0.0
    return 1.0 / float(freqs[i]), float(confs[i]) if confs.size else 0.0


def main(out):
    cases = [json.loads(line) for line in open(f"{out}/iosets.jsonl")]
    with open(f"{out}/ftio.jsonl", "w") as results:
        for case in cases:
            doc = json.load(open(case["trace"]))
            t, b = np.asarray(doc["t"], float), np.asarray(doc["b"], float)
            total = int(round(float(np.sum(b[:-1] * np.diff(t)))))
            for variant, argv in VARIANTS.items():
                best, period, conf, error = float("inf"), None, 0.0, None
                for _ in range(2):
                    data = {"time": t.copy(), "bandwidth": b.copy(), "total_bytes": total, "ranks": 1}
                    args = parse_args(list(argv), "ftio")
                    sink = io.StringIO()
                    try:
                        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                            start = time.perf_counter()
                            prediction, _ = core(data, args)
                            elapsed = time.perf_counter() - start
                        period, conf = period_of(prediction)
                        best = min(best, elapsed)
                    except Exception as e:  # report, never hide
                        error = f"{type(e).__name__}: {e}"
                        break
                row = {"case": case["case"], "variant": variant, "estimate_s": period,
                       "confidence": conf, "time_s": best if error is None else None, "error": error}
                results.write(json.dumps(row) + "\n")
            print(case["case"], file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])
