#!/usr/bin/env python3
"""Writes the small sample traces of crates/period/tests/data (deterministic; run from this folder).

Each holds clean periodic jobs with I/O 20% of the period, so the tests know the answer:
- requests.csv / requests.jsonl: job 1 period 12 s x 8 phases, job 2 period 150 s x 5 phases
- ftio.json: FTIO bandwidth steps of a job with period 40 s x 10 phases
- tmio.jsonl: TMIO JSON Lines, 2 ranks, period 5 s x 8 phases (write_sync), one line per phase
- dxt.txt: darshan-dxt-parser output, job 4242, 2 ranks, period 30 s x 6 phases (X_POSIX), with the
  X_MPIIO records of the same calls (ignored: they would count twice)
"""
import json

MiB = 1 << 20


def phases(period, n, reqs=4, size=8 * MiB):
    """(start, end, bytes) of n phases: compute 0.8 p then I/O 0.2 p in `reqs` requests."""
    out = []
    for i in range(n):
        s0 = i * period + 0.8 * period
        d = 0.2 * period / reqs
        for r in range(reqs):
            out.append((round(s0 + r * d, 6), round(s0 + (r + 1) * d, 6), size))
    return out


def main():
    rows = [(s, e, b, 1) for s, e, b in phases(12.0, 8)] + [
        (s, e, b, 2) for s, e, b in phases(150.0, 5)
    ]
    rows.sort()
    with open("requests.csv", "w") as f:
        f.write("# iosets request trace: start and end in seconds, bytes, job\n")
        f.write("start,end,bytes,job\n")
        for s, e, b, j in rows:
            f.write(f"{s},{e},{b},{j}\n")
    with open("requests.jsonl", "w") as f:
        for s, e, b, j in rows:
            f.write(json.dumps({"start": s, "end": e, "bytes": b, "job": j}) + "\n")

    t, bw = [], []
    for i in range(10):
        s0 = i * 40.0 + 32.0
        t += [s0, s0 + 8.0]
        bw += [100.0 * MiB, 0.0]
    with open("ftio.json", "w") as f:
        json.dump({"t": t, "b": bw}, f)
        f.write("\n")

    with open("tmio.jsonl", "w") as f:
        empty = {"b_ind": [], "t_ind_s": [], "t_ind_e": []}
        for i in range(8):
            s0 = i * 5.0 + 4.0
            b, ts, te = [], [], []
            for rank in range(2):
                for r in range(2):
                    s = round(s0 + r * 0.5 + rank * 0.01, 6)
                    e = round(s + 0.49, 6)
                    ts.append(s)
                    te.append(e)
                    b.append(round(4 * MiB / 0.49, 3))
            section = {
                "total_bytes": 16 * MiB,
                "number_of_ranks": 2,
                "bandwidth": {"b_ind": b, "t_ind_s": ts, "t_ind_e": te},
            }
            f.write("\t" + json.dumps({"write_sync": section}) + "\n")
            f.write("\t" + json.dumps({"read_async_t": {"bandwidth": empty}}) + "\n")
        f.write("\t" + json.dumps({"io_time": {"delta_t_agg": 40.0}}) + "\n")

    with open("dxt.txt", "w") as f:
        f.write("# darshan log version: 3.41\n# compression method: ZLIB\n")
        f.write("# exe: ./ior -w -t 1m -b 4m\n# uid: 1000\n# jobid: 4242\n")
        f.write("# start_time: 1700000000\n# nprocs: 2\n# run time: 180.0\n\n")
        for rank in range(2):
            calls = [(s + rank * 0.05, e + rank * 0.05, b) for s, e, b in phases(30.0, 6)]
            f.write("# DXT, file_id: 1234567890, file_name: /scratch/ckpt.dat\n")
            f.write(f"# DXT, rank: {rank}, hostname: node{rank}\n")
            f.write(f"# DXT, write_count: {len(calls)}, read_count: 0\n")
            f.write("# DXT, mnt_pt: /scratch, fs_type: lustre\n")
            f.write("# Module    Rank  Wt/Rd  Segment          Offset       Length    Start(s)      End(s)\n")
            for seg, (s, e, b) in enumerate(calls):
                f.write(f"{'X_MPIIO':>8}{rank:>8}{'write':>7}{seg:>9}{seg * b:>16}{b:>16}{s:>12.4f}{e:>12.4f}\n")
            f.write("\n")
            f.write("# DXT, file_id: 1234567890, file_name: /scratch/ckpt.dat\n")
            f.write(f"# DXT, rank: {rank}, hostname: node{rank}\n")
            f.write(f"# DXT, write_count: {len(calls)}, read_count: 0\n")
            f.write("# DXT, mnt_pt: /scratch, fs_type: lustre\n")
            f.write("# Module    Rank  Wt/Rd  Segment          Offset       Length    Start(s)      End(s)  [OST]\n")
            for seg, (s, e, b) in enumerate(calls):
                f.write(f"{'X_POSIX':>8}{rank:>8}{'write':>7}{seg:>9}{seg * b:>16}{b:>16}{s:>12.4f}{e:>12.4f}  [  3]\n")
            f.write("\n")


main()
