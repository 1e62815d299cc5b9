#!/usr/bin/env python3
"""Cross-check of `iosets sim` against SimGrid on the IO-SETS paper's model.

For each case (the 16-job validation at several nH, and 60 jobs x 100 iterations drawn by the
paper's generator), this script:

1. asks iosets for the workload (`iosets sim run ... --json`), rounds every I/O volume to whole
   bytes (SimGrid's Disk.write takes an integer size) with B = 1e9 bytes/s, and writes it back;
2. runs that very workload in iosets (`iosets sim run --workload`), one process per heuristic,
   timed;
3. runs it in SimGrid (python3-simgrid), one process per heuristic, timed: one actor per job on one
   host with one disk of bandwidth B; each I/O phase is `disk.write(volume, priority)` (SimGrid
   shares the disk in proportion to the priorities) inside the set's `Mutex` (exclusive, FIFO);
4. compares every job's completion time and the four metrics over the window, computed from the
   SimGrid trace by this script's own code (rates rebuilt from the trace: between two events each
   transferring phase moves B * p_i / sum p);
5. simulates the workload a third time in 50-digit decimal arithmetic (`reference`) and reports how
   far each simulator's completion times are from it.

Why the third simulator: under FAIR-SHARE and SHARE+PRIORITY (many phases sharing at once, no set
to serialise them) the model's dynamics amplify any difference in event times, by about ten times
every few hundred simulated seconds, so two correct double-precision simulators drift apart over a
long run. The check passes when every completion time and metric agrees with SimGrid within 1e-5,
or, where it does not, iosets is the closer of the two to the 50-digit reference.

Sets and priorities are computed here independently (Set-10: set = floor(log10 w + 1/2),
p = 10^-set) and checked against what iosets reports.

Usage: bench/simgrid_check.sh [--iosets PATH] [--out DIR] [--quick]
"""

import argparse
import json
import math
import os
import random
from decimal import Decimal as D, getcontext
import subprocess
import sys
import time

HEURISTICS = ["exclusive-fcfs", "fair-share", "set-10", "set-fairshare", "share+priority", "clairvoyant"]
B = 1e9  # bytes per second


def set10(w):
    """Set-10 set index: round half up of log10 w (Rust's f64::round rounds half away from zero)."""
    x = math.log(w) / math.log(10.0)
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def placement(heuristic, j, job, bandwidth):
    """(set key or None for a set of its own, priority) of job j under a paper heuristic."""
    w = (sum(job["cpu"]) + sum(job["volume"]) / bandwidth) / len(job["cpu"])
    if heuristic == "exclusive-fcfs":
        return "all", 1.0
    if heuristic == "fair-share":
        return None, 1.0
    if heuristic == "clairvoyant":
        s = set10(job["class_w_iter"])
        return "S%d" % s, 10.0 ** (-s)
    s = set10(w)
    if heuristic == "set-10":
        return "S%d" % s, 10.0 ** (-s)
    if heuristic == "set-fairshare":
        return "S%d" % s, 1.0
    if heuristic == "share+priority":
        return None, 10.0 ** (-s)
    raise ValueError(heuristic)


# ---------------------------------------------------------------------------------------------
# The SimGrid side (run in a child process: one SimGrid engine per process).

def simgrid_one(workload_path, heuristic, trace_path):
    import simgrid

    with open(workload_path) as f:
        w = json.load(f)
    bandwidth = w["bandwidth"]
    args = ["simgrid_check", "--log=root.thres:critical"]
    if os.environ.get("SIMGRID_TIGHT"):
        # Tighter than SimGrid's defaults (surf/precision 1e-9 s, maxmin/precision 1e-5).
        args += ["--cfg=surf/precision:1e-12", "--cfg=maxmin/precision:1e-9"]
    e = simgrid.Engine(args)
    zone = simgrid.NetZone.create_full_zone("zone")
    host = zone.create_host("host", 1e9)
    disk = host.create_disk("pfs", bandwidth, bandwidth)
    host.seal()
    zone.seal()
    mutexes = {}
    trace = {}

    def job(j, spec, set_key, priority):
        simgrid.this_actor.sleep_for(spec["release"])
        phases = []
        mutex = None
        if set_key is not None:
            mutex = mutexes.setdefault(set_key, simgrid.Mutex())
        for cpu, vol in zip(spec["cpu"], spec["volume"]):
            start = simgrid.Engine.clock
            simgrid.this_actor.sleep_for(cpu)
            asked = simgrid.Engine.clock
            phases.append(("c", start, asked))
            if mutex is not None:
                mutex.lock()
            got = simgrid.Engine.clock
            disk.write(int(vol), priority)
            done = simgrid.Engine.clock
            if mutex is not None:
                mutex.unlock()
            phases.append(("io", asked, got, done, vol, priority))
        trace[j] = phases

    for j, spec in enumerate(w["jobs"]):
        set_key, priority = placement(heuristic, j, spec, bandwidth)
        simgrid.Actor.create("job%d" % j, host, job, j, spec, set_key, priority)
    t0 = time.perf_counter()
    e.run()
    run_s = time.perf_counter() - t0
    with open(trace_path, "w") as f:
        json.dump({"run_s": run_s, "jobs": [trace[j] for j in range(len(w["jobs"]))]}, f)


# ---------------------------------------------------------------------------------------------
# Metrics from a trace, computed independently of iosets.

def metrics_from_trace(jobs, bandwidth, window):
    """The four metrics over `window` from per-job phase lists (SimGrid trace format)."""
    tb, te = window
    # Transfer intervals with priorities, to rebuild the rates.
    transfers = []
    for j, phases in enumerate(jobs):
        for p in phases:
            if p[0] == "io":
                transfers.append((p[2], p[3], p[5], j, p[4]))
    # Event times at which the set of transferring phases changes.
    times = sorted({t for tr in transfers for t in (tr[0], tr[1])} | {tb, te})
    moved_in = [0.0] * len(jobs)
    # Sweep over elementary intervals inside the window.
    starts = sorted(transfers, key=lambda t: t[0])
    active = []
    k = 0
    for a, b in zip(times, times[1:]):
        while k < len(starts) and starts[k][0] <= a:
            active.append(starts[k])
            k += 1
        active = [t for t in active if t[1] > a]
        lo, hi = max(a, tb), min(b, te)
        if hi <= lo or not active:
            continue
        live = [t for t in active if t[0] <= a and t[1] >= b]
        total = sum(t[2] for t in live)
        for t in live:
            moved_in[t[3]] += bandwidth * t[2] / total * (hi - lo)
    e_cpu = [0.0] * len(jobs)
    for j, phases in enumerate(jobs):
        for p in phases:
            if p[0] == "c":
                e_cpu[j] += max(0.0, min(p[2], te) - max(p[1], tb))
    length = te - tb
    stretches, slowdowns = [], []
    for j in range(len(jobs)):
        e_io = moved_in[j] / bandwidth
        if e_cpu[j] + e_io > 0:
            stretches.append(length / (e_cpu[j] + e_io))
        if e_io > 0:
            slowdowns.append((length - e_cpu[j]) / e_io)
    geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")
    return {
        "max_stretch": max(stretches) if stretches else float("nan"),
        "geomean_stretch": geo(stretches),
        "io_slowdown": geo(slowdowns),
        "utilization": sum(e_cpu) / (len(jobs) * length),
    }



# ---------------------------------------------------------------------------------------------
# A third opinion: the same fluid model in 50-digit decimal arithmetic.

def reference(w, heuristic, ends=None):
    """Completion times of every job, simulated event by event in 50-digit decimal arithmetic
    (FCFS inside a set, ties by job index, B * p_i / sum p between events)."""
    getcontext().prec = 50
    dec = lambda x: D(repr(x))
    bw = dec(w["bandwidth"])
    jobs = w["jobs"]
    n = len(jobs)
    place = [placement(heuristic, j, job, w["bandwidth"]) for j, job in enumerate(jobs)]
    key = [p[0] if p[0] is not None else ("own", j) for j, p in enumerate(place)]
    prio = [dec(p[1]) for p in place]
    it = [0] * n
    due = {j: dec(jobs[j]["release"]) + dec(jobs[j]["cpu"][0]) for j in range(n)}
    queues, rem, comp, now = {}, {}, [None] * n, D(0)
    while True:
        active = [q[0] for q in queues.values() if q]
        total = sum(prio[j] for j in active)
        rate = {j: bw * prio[j] / total for j in active}
        nxt = [now + rem[j] / rate[j] for j in active] + list(due.values())
        if not nxt:
            break
        t = min(nxt)
        for j in active:
            rem[j] -= rate[j] * (t - now)
        now = t
        for j in sorted(active):
            if rem[j] <= D("1e-30") * (dec(jobs[j]["volume"][it[j]]) + 1):
                if ends is not None:
                    ends[(j, it[j])] = now
                queues[key[j]].pop(0)
                it[j] += 1
                if it[j] == len(jobs[j]["cpu"]):
                    comp[j] = now
                else:
                    due[j] = now + dec(jobs[j]["cpu"][it[j]])
        for j in sorted(j for j, d in due.items() if d <= now):
            del due[j]
            rem[j] = dec(jobs[j]["volume"][it[j]])
            queues.setdefault(key[j], []).append(j)
    return [float(c) for c in comp]

def growth(iosets, workload_path, heuristic):
    """Prints how far iosets's I/O phase ends are from the 50-digit reference, by tenths of the
    phases in time order."""
    with open(workload_path) as f:
        w = json.load(f)
    p, _ = run([iosets, "sim", "run", "--workload", workload_path, "-H", heuristic,
                "--summary-only", "--json", "/dev/stdout", "--phases"])
    r = json.loads(p.stdout[p.stdout.index("{"):p.stdout.rindex("}") + 1])["runs"][0]
    ends = {}
    reference(w, heuristic, ends)
    diffs = []
    for j, jr in enumerate(r["jobs"]):
        io = [ph for ph in jr["phases"] if ph["kind"] == "io"]
        for k, ph in enumerate(io):
            exact = float(ends[(j, k)])
            diffs.append((exact, rel(ph["end"], exact)))
    diffs.sort()
    step = max(1, len(diffs) // 10)
    for i in range(0, len(diffs), step):
        chunk = diffs[i:i + step]
        print("phases ending before %10.1f s: largest relative difference %.1e"
              % (chunk[-1][0], max(e for _, e in chunk)))


# ---------------------------------------------------------------------------------------------
# The driver.

def run(cmd, **kw):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit("command failed: %s\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
    return p, dt


def rel(a, b):
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


def prepare(iosets, out, name, args, cut=None, jitter=0.0):
    """Gets a workload from iosets, rounds volumes to bytes at B = 1e9, optionally keeps only the
    first `cut` iterations of each job and multiplies each compute length by 1 + U[-jitter,
    jitter] (seeded); writes and returns it."""
    rng = random.Random(1)
    raw = os.path.join(out, name + "-raw.json")
    run([iosets, "sim", "run"] + args + ["--summary-only", "-H", "fair-share", "--json", raw])
    with open(raw) as f:
        w = json.load(f)["workload"]
    scale = B / w["bandwidth"]
    w["bandwidth"] = B
    for j, job in enumerate(w["jobs"]):
        if jitter > 0:
            job["cpu"] = [c * (1.0 + rng.uniform(-jitter, jitter)) for c in job["cpu"]]
        if cut is not None:
            job["cpu"] = job["cpu"][:cut]
            job["volume"] = job["volume"][:cut]
        job["volume"] = [float(round(v * scale)) for v in job["volume"]]
    path = os.path.join(out, name + ".json")
    with open(path, "w") as f:
        json.dump(w, f)
    return path, w


def check_case(iosets, out, name, wpath, w, window, heuristics):
    rows = []
    for h in heuristics:
        res = os.path.join(out, "%s-%s-iosets.json" % (name, h))
        _, io_s = run([iosets, "sim", "run", "--workload", wpath, "-H", h, "--summary-only",
                       "--json", res])
        # The run time alone, without writing the JSON.
        _, io_s = run([iosets, "sim", "run", "--workload", wpath, "-H", h, "--summary-only"])
        with open(res) as f:
            r = json.load(f)["runs"][0]
        trace = os.path.join(out, "%s-%s-simgrid.json" % (name, h))
        _, sg_total = run(["/usr/bin/python3", __file__, "--simgrid-one", wpath, h, trace])
        with open(trace) as f:
            sg = json.load(f)
        # Placements agree.
        for j, (job, jr) in enumerate(zip(w["jobs"], r["jobs"])):
            key, prio = placement(h, j, job, w["bandwidth"])
            ikey, iprio = jr["last_set"]
            if key is not None and key != ikey and h != "exclusive-fcfs":
                sys.exit("%s %s job %d: set %s here, %s in iosets" % (name, h, j, key, ikey))
            if rel(prio, iprio) > 1e-12 and h != "exclusive-fcfs":
                sys.exit("%s %s job %d: priority %g here, %g in iosets" % (name, h, j, prio, iprio))
        comp_err = 0.0
        for jr, phases in zip(r["jobs"], sg["jobs"]):
            comp_err = max(comp_err, rel(jr["completion"], phases[-1][3]))
        ref = reference(w, h)
        io_ref = max(rel(jr["completion"], c) for jr, c in zip(r["jobs"], ref))
        sg_ref = max(rel(phases[-1][3], c) for phases, c in zip(sg["jobs"], ref))
        win = window or (0.0, max(p[-1][3] for p in sg["jobs"]))
        m_sg = metrics_from_trace(sg["jobs"], w["bandwidth"], win)
        m_err = max(rel(r["metrics"][k], m_sg[k]) for k in m_sg)
        rows.append({
            "case": name, "heuristic": h, "jobs": len(w["jobs"]),
            "iterations": sum(len(j["cpu"]) for j in w["jobs"]),
            "completion_rel_err": comp_err, "metric_rel_err": m_err,
            "iosets_vs_reference": io_ref, "simgrid_vs_reference": sg_ref,
            "iosets_s": io_s, "simgrid_run_s": sg["run_s"], "simgrid_total_s": sg_total,
            "events": r["events"], "iosets_metrics": r["metrics"], "simgrid_metrics": m_sg,
        })
        print("%-16s %-15s completion %.1e metrics %.1e (vs 50-digit: iosets %.1e, SimGrid %.1e)"
              "  iosets %.3f s  simgrid %.3f s (engine %.3f s)"
              % (name, h, comp_err, m_err, io_ref, sg_ref, io_s, sg_total, sg["run_s"]), flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iosets", default="target/release/iosets")
    ap.add_argument("--out", default="out/simgrid")
    ap.add_argument("--quick", action="store_true", help="one validation point, 3 heuristics")
    ap.add_argument("--tight", action="store_true",
                    help="run SimGrid with surf/precision 1e-12 and maxmin/precision 1e-9 "
                         "instead of its defaults (1e-9, 1e-5)")
    ap.add_argument("--jitter", type=float, default=0.01,
                    help="relative jitter on each compute phase of the validation cases (0: the "
                         "paper's identical jobs, whose simultaneous requests are tie-broken "
                         "differently by SimGrid's Mutex and by iosets)")
    ap.add_argument("--growth", nargs=2, metavar=("WORKLOAD", "HEURISTIC"),
                    help="instead of the check: how iosets's phase ends drift from the 50-digit "
                         "reference over a run of WORKLOAD (a JSON written by the check)")
    ap.add_argument("--simgrid-one", nargs=3, metavar=("WORKLOAD", "HEURISTIC", "TRACE"),
                    help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.simgrid_one:
        simgrid_one(*a.simgrid_one)
        return
    if a.growth:
        growth(a.iosets, *a.growth)
        return
    os.makedirs(a.out, exist_ok=True)
    if a.tight:
        os.environ["SIMGRID_TIGHT"] = "1"
    here = os.path.dirname(os.path.abspath(__file__))
    scen = os.path.join(here, "..", "scenarios")
    heuristics = HEURISTICS[:3] if a.quick else HEURISTICS
    rows = []
    points = [4] if a.quick else [0, 4, 8, 12, 16]
    for nh in points:
        name = "validation16-nH%d" % nh
        # Identical jobs in exclusive sets ask for I/O at the very same instants again and again;
        # SimGrid's Mutex and iosets (job index) order such ties differently. A 1% jitter on each
        # compute phase (--jitter) removes the ties.
        path, w = prepare(a.iosets, a.out, name,
                          [os.path.join(scen, "validation16.toml"), "--at", str(nh)],
                          jitter=a.jitter)
        rows += check_case(a.iosets, a.out, name, path, w, (640.0, 5760.0), heuristics)
    if not a.quick:
        # 60 jobs x 100 iterations: the three-profile generator at nH = 20 with a horizon long
        # enough for 100 iterations of the slowest jobs, cut to the first 100 iterations each.
        spec = os.path.join(a.out, "sixty.toml")
        with open(os.path.join(scen, "three-profile.toml")) as f:
            text = f.read()
        text = text.replace("horizon = 20000", "horizon = 150000").replace(
            "window = [6000, 14000]", "window = [200, 800]")
        text = text.replace('name = "three-profile"', 'name = "sixty"')
        with open(spec, "w") as f:
            f.write(text)
        path, w = prepare(a.iosets, a.out, "sixty-x100", [spec, "--at", "20", "--seed", "1"],
                          cut=100)
        rows += check_case(a.iosets, a.out, "sixty-x100", path, w, (200.0, 800.0), heuristics)
    with open(os.path.join(a.out, "simgrid_check.json"), "w") as f:
        json.dump(rows, f, indent=1)
    worst_c = max(r["completion_rel_err"] for r in rows)
    worst_m = max(r["metric_rel_err"] for r in rows)
    io_total = sum(r["iosets_s"] for r in rows)
    sg_total = sum(r["simgrid_total_s"] for r in rows)
    print()
    print("| case | heuristic | jobs | iterations | completion: iosets vs SimGrid | metrics: iosets "
          "vs SimGrid | completion vs 50-digit: iosets | SimGrid | iosets s | SimGrid s (engine) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %d | %d | %.1e | %.1e | %.1e | %.1e | %.3f | %.3f (%.3f) |" % (
            r["case"], r["heuristic"], r["jobs"], r["iterations"], r["completion_rel_err"],
            r["metric_rel_err"], r["iosets_vs_reference"], r["simgrid_vs_reference"],
            r["iosets_s"], r["simgrid_total_s"], r["simgrid_run_s"]))
    print()
    print("worst relative difference: completion times %.2e, metrics %.2e; total time iosets %.2f s,"
          " SimGrid %.2f s" % (worst_c, worst_m, io_total, sg_total))
    # Where iosets and SimGrid differ by more than 1e-5, iosets must be the closer of the two to
    # the 50-digit reference (the difference is then SimGrid's, amplified by the dynamics).
    bad = [r for r in rows
           if max(r["completion_rel_err"], r["metric_rel_err"]) > 1e-5
           and r["iosets_vs_reference"] > r["simgrid_vs_reference"]]
    far = [r for r in rows if max(r["completion_rel_err"], r["metric_rel_err"]) > 1e-5]
    print("%d of %d runs agree with SimGrid within 1e-5 on every completion time and metric; in "
          "the %d others iosets is closer to the 50-digit reference than SimGrid is"
          % (len(rows) - len(far), len(rows), len(far)))
    if bad:
        sys.exit("MISMATCH: iosets farther than SimGrid from the reference in %s"
                 % ", ".join("%s/%s" % (r["case"], r["heuristic"]) for r in bad))


if __name__ == "__main__":
    main()
