#!/usr/bin/env python3
"""Runs FTIO (PyPI ftio-hpc) on the change-point traces listed in <out>/iosets.jsonl.

Each trace is FTIO's application-level bandwidth {"t": [...], "b": [...]}. Variants:

- "ftio": one analysis of the whole trace (ftio.cli.ftio_core.core with FTIO's defaults, as in
  bench/period_ftio.py): one period, no change points.
- "ftio-cusum", "ftio-ph", "ftio-adwin": FTIO's online predictor with its change-point window
  adaptation (`predictor -w cusum|ph|adwin`), replayed in process: a prediction at every phase
  start from the third on (the data up to that instant, from the window's start), each followed
  by FTIO's own detector function (ftio.prediction.change_detection.*.detect_pattern_change_*)
  on a minimal stand-in for the predictor's shared state (the saved predictions and the
  detector's state dict), and the window start moved as FTIO's change_post_processing moves it.
  A change is where FTIO moved the window's start; a segment's period is the last prediction
  before the next change.

One JSON line per case and variant goes to <out>/ftio.jsonl; FTIO's whole analysis of the
10,000-phase speed traces (<out>/speed.jsonl) to <out>/ftio-speed.jsonl. Failures are recorded,
never hidden.
"""
import contextlib
import io
import json
import sys
import time

import numpy as np
from ftio.cli.ftio_core import core
from ftio.parse.args import parse_args
from ftio.prediction.change_detection.adwin import detect_pattern_change_adwin
from ftio.prediction.change_detection.cusum import detect_pattern_change_cusum
from ftio.prediction.change_detection.pagehinkley import detect_pattern_change_pagehinkley
from ftio.prediction.helper import get_dominant

DETECTORS = {
    "cusum": detect_pattern_change_cusum,
    "ph": detect_pattern_change_pagehinkley,
    "adwin": detect_pattern_change_adwin,
}


class Shared:
    """What FTIO's detector functions read and write of the predictor's shared resources."""

    def __init__(self):
        self.data = []
        self.online_detection = {"change_count": 0, "last_change_time": 0.0, "state": {}}


def analyse(t, b, t_s, t_e, argv):
    """FTIO's prediction over [t_s, t_e] of the bandwidth steps (t, b)."""
    keep = (t >= t_s) & (t <= t_e)
    tw, bw = t[keep], b[keep]
    if tw.size < 2:
        return None
    total = int(round(float(np.sum(bw[:-1] * np.diff(tw)))))
    data = {"time": tw.copy(), "bandwidth": bw.copy(), "total_bytes": total, "ranks": 1}
    args = parse_args(list(argv), "ftio")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        prediction, _figures = core(data, args)
    return prediction, args


def period_of(prediction):
    f = get_dominant(prediction)
    return 1.0 / f if f is not None and np.isfinite(f) and f > 0 else None


def whole(t, b):
    start = time.perf_counter()
    prediction, _ = analyse(t, b, float(t[0]), float(t[-1]), ["-e", "no"])
    elapsed = time.perf_counter() - start
    p = period_of(prediction)
    return {"segments": [{"start_s": float(t[0]), "period_s": p}], "changes_s": [],
            "time_s": elapsed, "predictions": 1}


def online(t, b, starts, name):
    detect = DETECTORS[name]
    argv = ["-e", "no", "-w", name]
    shared = Shared()
    t_s = float(t[0])
    changes, periods, elapsed, count = [], [], 0.0, 0
    segments = [{"start_s": t_s, "period_s": None}]
    for t_e in starts[2:]:
        start = time.perf_counter()
        out = analyse(t, b, t_s, t_e, argv)
        if out is None:
            continue
        prediction, args = out
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            changed, _log, detected_t_s, _old, _new = detect(args, shared, prediction, count)
        elapsed += time.perf_counter() - start
        shared.data.append({"dominant_freq": prediction.dominant_freq, "conf": prediction.conf,
                            "amp": prediction.amp, "t_start": prediction.t_start,
                            "t_end": prediction.t_end})
        count += 1
        p = period_of(prediction)
        if changed:
            # FTIO's change_post_processing: the proposed start, kept at least 1 s before t_e.
            safe = min(detected_t_s, t_e - 1.0)
            t_s = safe if safe >= 0 and t_e - safe >= 1.0 else max(0.0, t_e - 1.0)
            changes.append(t_s)
            segments.append({"start_s": t_s, "period_s": None})
        else:
            segments[-1]["period_s"] = p
        periods.append(p)
    return {"segments": segments, "changes_s": changes, "time_s": elapsed, "predictions": count}


def main(out):
    cases = [json.loads(line) for line in open(f"{out}/iosets.jsonl")]
    with open(f"{out}/ftio.jsonl", "w") as results:
        for case in cases:
            doc = json.load(open(case["trace"]))
            t, b = np.asarray(doc["t"], float), np.asarray(doc["b"], float)
            variants = {"ftio": lambda: whole(t, b)}
            for name in DETECTORS:
                variants[f"ftio-{name}"] = (lambda n: lambda: online(t, b, case["phase_starts_s"], n))(name)
            for variant, run in variants.items():
                row = {"case": case["case"], "variant": variant}
                try:
                    row.update(run())
                    row["error"] = None
                except Exception as e:  # report, never hide
                    row["error"] = f"{type(e).__name__}: {e}"
                results.write(json.dumps(row) + "\n")
                results.flush()
            print(case["case"], file=sys.stderr)
    # The speed cases: FTIO on the whole 10,000-phase traces, best of 2.
    with open(f"{out}/ftio-speed.jsonl", "w") as results:
        for line in open(f"{out}/speed.jsonl"):
            case = json.loads(line)
            doc = json.load(open(case["trace"]))
            t, b = np.asarray(doc["t"], float), np.asarray(doc["b"], float)
            row = {"case": case["case"]}
            try:
                runs = [whole(t, b) for _ in range(2)]
                row.update({"time_s": min(r["time_s"] for r in runs),
                            "period_s": runs[0]["segments"][0]["period_s"], "error": None})
            except Exception as e:  # report, never hide
                row["error"] = f"{type(e).__name__}: {e}"
            results.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
