#!/usr/bin/env python3
"""When a server's device sat idle although requests waited: the gaps in a request trace.

Reads a server trace (`iosets serve --trace`, or the loopback bench's `TRACE=path`: columns
job, tag, op, path, offset, len, arrival_ns, dispatch_ns, complete_ns, errno, after a
`# clock_zero...` line) and prints the run's span, the gaps longer than MIN_MS (default 0.1)
during which no request was in service, their total, and the longest ones with the requests
that arrived before the gap and were dispatched only after it.

    python3 scripts/trace-gaps.py TRACE.csv [MIN_MS]
"""
import csv
import sys


def main(path, min_ms):
    with open(path) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    if not rows:
        sys.exit(f"trace-gaps: no requests in {path}")
    for r in rows:
        for k in ("arrival_ns", "dispatch_ns", "complete_ns"):
            r[k] = int(r[k])
    events = sorted(
        [(r["dispatch_ns"], 1) for r in rows] + [(r["complete_ns"], -1) for r in rows]
    )
    busy, idle_since, gaps = 0, None, []
    for t, d in events:
        if busy == 0 and idle_since is not None and t - idle_since > min_ms * 1e6:
            gaps.append((idle_since, t - idle_since))
        busy += d
        if busy == 0:
            idle_since = t
    span = max(r["complete_ns"] for r in rows) - min(r["arrival_ns"] for r in rows)
    print(
        f"{len(rows)} requests over {span / 1e6:.1f} ms; {len(gaps)} idle gaps longer than "
        f"{min_ms} ms, {sum(g for _, g in gaps) / 1e6:.1f} ms in all"
    )
    for start, length in sorted(gaps, key=lambda g: -g[1])[:5]:
        waiting = sorted(
            {r["job"] for r in rows if r["arrival_ns"] < start and r["dispatch_ns"] >= start + length}
        )
        print(
            f"  {length / 1e6:.2f} ms from {start / 1e6:.1f} ms; waiting through it: "
            f"{len(waiting)} jobs {', '.join(waiting)}"
        )


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: trace-gaps.py TRACE.csv [MIN_MS]")
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) == 3 else 0.1)
