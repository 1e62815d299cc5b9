"""A server's request trace (`iosets serve --trace`), for the scripts beside this one.

The trace is a CSV (job, tag, op, path, offset, len, arrival_ns, dispatch_ns, complete_ns, errno)
whose times count from the server's clock zero, given on a first line `# clock_zero_unix_ns=N`.
"""
import csv


def rows(path):
    """The trace's rows as dicts, each with `arrival_s`, `dispatch_s` and `complete_s` added:
    UNIX seconds (the trace's own seconds if it has no clock-zero line)."""
    with open(path) as f:
        first = f.readline()
        if first.startswith("# clock_zero_unix_ns="):
            zero = int(first.split("=", 1)[1])
        else:
            zero = 0
            f.seek(0)
        got = []
        for r in csv.DictReader(f):
            for k in ("arrival", "dispatch", "complete"):
                r[f"{k}_s"] = (zero + int(r[f"{k}_ns"])) * 1e-9
            got.append(r)
    return got
