"""The iosets module by behaviour: each function's answers, and the same answers as the command."""

import csv
import json
import math
import subprocess
import threading

import pytest

import iosets
from conftest import SCENARIOS, TRACES

# Two jobs on B = 1 (the fluid model's hand case): a computes 1 s then moves 4, b computes 2 s then
# moves 2. Fair share: a alone in [1, 2], then both at 1/2 until b is done at 6, a at 7. Exclusive
# FCFS: a first, done at 5, then b at 7.
HAND = {
    "name": "hand",
    "heuristics": ["fair-share", "exclusive-fcfs"],
    "platform": {"bandwidth": 1.0},
    "group": [
        {"name": "a", "t_cpu": 1.0, "t_io": 4.0, "iterations": 1},
        {"name": "b", "t_cpu": 2.0, "t_io": 2.0, "iterations": 1},
    ],
}

TINY_SWEEP = """
name = "tiny"
heuristics = ["fair-share", "set-10", "set-10:error=0.5"]
[platform]
bandwidth = 1
horizon = 500
window = [100, 400]
[generator]
omega = 0.7
noise = 0.1
[[generator.group]]
count = "n"
mean = 10
sd = 1
[[generator.group]]
count = "3 - n"
mean = 100
sd = 10
[sweep]
variable = "n"
values = [1, 2]
"""


def run_cli(cli, *args):
    return subprocess.run(
        [cli, *args], capture_output=True, text=True, timeout=120, check=True
    ).stdout


def test_policies_list_every_policy_with_its_tunables():
    ps = iosets.policies()
    names = [p["name"] for p in ps]
    assert len(names) == len(set(names)) >= 10
    assert {"noop", "wfq", "iosets"} <= set(names)
    wfq = next(p for p in ps if p["name"] == "wfq")
    assert wfq["description"]
    assert any(t["name"].startswith("weight.") for t in wfq["tunables"])
    for p in ps:
        for t in p["tunables"]:
            assert set(t) == {"name", "default", "meaning"} and t["meaning"]


def test_policies_are_the_commands(cli):
    out = run_cli(cli, "policies")
    listed = [l.split()[0] for l in out.splitlines() if l and not l.startswith(" ")]
    assert listed == [p["name"] for p in iosets.policies()]


def test_heuristics_name_the_papers_six():
    names = [h["name"] for h in iosets.heuristics()]
    for h in ["exclusive-fcfs", "fair-share", "set-10", "set-fairshare", "share+priority", "clairvoyant"]:
        assert h in names


def test_simulate_a_dict_scenario_gives_the_hand_computed_completions():
    r = iosets.simulate(HAND)
    assert r["scenario"] == "hand" and r["jobs"] == 2 and not r["random"]
    assert [run["heuristic"] for run in r["runs"]] == ["fair-share", "exclusive-fcfs"]
    fair = {row["group"]: row["completion"] for row in r["runs"][0]["jobs"]}
    fcfs = {row["group"]: row["completion"] for row in r["runs"][1]["jobs"]}
    assert fair == pytest.approx({"a": 7.0, "b": 6.0})
    assert fcfs == pytest.approx({"a": 5.0, "b": 7.0})
    assert len(r["rows"]) == 4
    stretches = [row["stretch"] for row in r["runs"][0]["jobs"]]
    assert r["metrics"]["fair-share"]["max_stretch"] == pytest.approx(max(stretches))


def test_simulate_with_the_servers_bounds_on_a_turn():
    # 1 s turns while the other waits: a 1→3, b 3→4, a 4→5, b 5→6 (done), a 6→7 (done).
    r = iosets.simulate(HAND, heuristics=["exclusive-fcfs"], iosets_opt=["max_exclusive_ms=1000"])
    done = {row["group"]: row["completion"] for row in r["runs"][0]["jobs"]}
    assert done == pytest.approx({"a": 7.0, "b": 6.0})
    assert "bounds on a turn, as the servers': max_exclusive 1 s" in r["headline"]
    assert "bounds on a turn" not in iosets.simulate(HAND)["headline"]
    with pytest.raises(ValueError, match="holdd"):
        iosets.simulate(HAND, iosets_opt=["holdd=1"])


def test_sweep_with_the_servers_bounds_on_a_turn(tmp_path):
    # Seed 004's scenario, auto's model: max stretch 1.135 under the paper's rule, 1.286 under
    # the servers' bounds (`iosets_opt=[]` is `--bounds`), as `iosets sim sweep` gives.
    seed004 = SCENARIOS / "seed004.toml"
    paper = iosets.sweep(seed004, workloads=1, heuristics=["set-10:online"], plots=False)
    bounded = iosets.sweep(
        seed004, workloads=1, heuristics=["set-10:online"], out=tmp_path, plots=False, iosets_opt=[]
    )
    assert paper[0]["max_stretch"] == pytest.approx(1.135, abs=1e-3)
    assert bounded[0]["max_stretch"] == pytest.approx(1.286, abs=1e-3)
    with open(tmp_path / "seed004.json") as f:
        assert json.load(f)["bounds"] == {
            "max_exclusive": "auto",
            "max_exclusive_s": None,
            "unknown_hold_s": 2.0,
        }
    with pytest.raises(ValueError, match="holdd"):
        iosets.sweep(seed004, workloads=1, iosets_opt=["holdd=1"])


def test_simulate_toml_text_path_and_heuristics():
    text = (SCENARIOS / "seed004.toml").read_text()
    a = iosets.simulate(SCENARIOS / "seed004.toml", heuristics=["set-10"])
    b = iosets.simulate(text, heuristics=["set-10"])
    assert a["metrics"] == b["metrics"]
    assert list(a["metrics"]) == ["set-10"] and a["jobs"] == 16
    assert a["metrics"]["set-10"]["utilization"] > 0.5


def test_simulate_prints_what_the_command_prints(cli):
    path = str(SCENARIOS / "seed004.toml")
    out = run_cli(cli, "sim", "run", path, "--summary-only")
    r = iosets.simulate(path)
    assert out == r["headline"] + "\n" + r["summary"]


def test_sweep_rows_are_the_csv_rows(tmp_path):
    rows = iosets.sweep(TINY_SWEEP, workloads=3, seed=5, out=tmp_path, plots=False)
    assert len(rows) == 2 * 3 * 3
    with open(tmp_path / "tiny.csv") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames
        written = list(reader)
    assert list(rows[0]) == header
    assert header[:4] == ["n", "workload", "seed", "heuristic"]
    for mine, theirs in zip(rows, written):
        for k, v in mine.items():
            if isinstance(v, float):
                assert v == pytest.approx(float(theirs[k]), abs=1e-8) or (
                    math.isnan(v) and theirs[k] == "NaN"
                )
            else:
                assert str(v) == theirs[k]
    assert (tmp_path / "tiny.json").exists()
    # Every value is a plain scalar: pandas.DataFrame(rows) is the CSV as a table.
    assert all(isinstance(v, (int, float, str)) for row in rows for v in row.values())


def test_sweep_rows_load_into_pandas_as_the_csv_does(tmp_path):
    import pandas as pd  # installed by scripts/python-test.sh
    rows = iosets.sweep(TINY_SWEEP, workloads=2, seed=5, out=tmp_path, plots=False)
    df = pd.DataFrame(rows)
    csv_df = pd.read_csv(tmp_path / "tiny.csv")
    assert list(df.columns) == list(csv_df.columns)
    assert len(df) == len(csv_df) == 2 * 2 * 3
    means = df.groupby("heuristic")["io_slowdown"].mean()
    assert means.notna().all() and (means >= 1.0).all()
    # The swept value is a float in Python (n = 10.0); the CSV prints it as 10, read as int.
    pd.testing.assert_frame_equal(df[["n", "workload", "seed", "heuristic"]],
                                  csv_df[["n", "workload", "seed", "heuristic"]], check_dtype=False)


def test_sweep_is_reproducible_and_the_seed_matters():
    a = iosets.sweep(TINY_SWEEP, workloads=2, seed=1, threads=1)
    b = iosets.sweep(TINY_SWEEP, workloads=2, seed=1, threads=2)
    c = iosets.sweep(TINY_SWEEP, workloads=2, seed=2)
    assert a == b
    assert a != c


def test_sweep_matches_the_commands_csv(cli, tmp_path):
    src = tmp_path / "tiny.toml"
    src.write_text(TINY_SWEEP)
    run_cli(cli, "sim", "sweep", str(src), "--workloads", "2", "--out", str(tmp_path / "cli"),
            "--quiet", "--no-plots")
    iosets.sweep(src, workloads=2, out=tmp_path / "py", plots=False)
    assert (tmp_path / "cli" / "tiny.csv").read_bytes() == (tmp_path / "py" / "tiny.csv").read_bytes()


def test_detect_finds_both_jobs_periods():
    jobs = iosets.detect(TRACES / "requests.csv")
    assert [j["job"] for j in jobs] == [1, 2]
    for j in jobs:
        assert j["periodic"] and j["period_s"] > 0 and 0.5 <= j["confidence"] <= 1
        assert isinstance(j["set"], int) and j["priority"] > 0 and j["phases"] >= 3
        assert j["format"] == "csv" and j["reason"] is None
    only = iosets.detect(str(TRACES / "requests.csv"), "csv", job=2)
    assert [j["job"] for j in only] == [2] and only[0]["period_s"] == jobs[1]["period_s"]
    online = iosets.detect(TRACES / "requests.csv", method="online")
    assert [j["job"] for j in online] == [1, 2]


FIXTURES = TRACES.parent / "fixtures"


def test_detect_mode_separates_reads_from_writes():
    # TMIO mixes both: writes every 10 s, reads every 7 s; together they hide either period.
    trace = FIXTURES / "tmio-mixed.jsonl"
    write = iosets.detect(trace)
    read = iosets.detect(trace, mode="read")
    both = iosets.detect(trace, mode="all")
    assert write[0]["mode"] == "write" and write[0]["format"] == "tmio-jsonl"
    assert abs(write[0]["period_s"] - 10.0) < 0.5, write
    assert abs(read[0]["period_s"] - 7.0) < 0.5, read
    assert not both[0]["periodic"], both


def test_detect_reads_every_format():
    for name in ["requests.csv", "requests.jsonl", "ftio.json", "tmio.jsonl", "dxt.txt"]:
        assert iosets.detect(TRACES / name), name


def test_detect_answers_as_the_command(cli):
    import json

    path = str(TRACES / "requests.csv")
    theirs = json.loads(run_cli(cli, "detect", path, "--json"))["jobs"]
    mine = iosets.detect(path)
    for t, m in zip(theirs, mine):
        assert {k: m[k] for k in t} == t


def changing_trace(path):
    """Job 5 writes every 10 s for 15 phases, then every 100 s for 15 (2 s and 20 s of I/O)."""
    rows, t = ["start,end,bytes,job"], 0.0
    for period, phases in [(10.0, 15), (100.0, 15)]:
        for _ in range(phases):
            t += 0.8 * period
            rows.append(f"{t:.3f},{t + 0.2 * period:.3f},{1 << 30},5")
            t += 0.2 * period
    path.write_text("\n".join(rows) + "\n")
    return path


def test_detect_splits_a_job_whose_period_changes(tmp_path):
    trace = changing_trace(tmp_path / "changing.csv")
    (job,) = iosets.detect(trace)
    assert len(job["segments"]) == 2 and len(job["changes_s"]) == 1
    first, last = job["segments"]
    assert first["period_s"] == pytest.approx(10.0, rel=0.05)
    assert last["period_s"] == pytest.approx(100.0, rel=0.05)
    # The change: after the 15th phase, which ends at 150 s.
    assert job["changes_s"][0] == pytest.approx(150.0, abs=10.0)
    assert first["end_s"] == last["start_s"] == job["changes_s"][0]
    # The job's own fields are its last behaviour's.
    assert job["period_s"] == last["period_s"] and job["set"] == last["set"] == 2
    assert first["set"] == 1
    (whole,) = iosets.detect(trace, segments=False)
    assert len(whole["segments"]) == 1 and whole["changes_s"] == []


def test_replay_shares_follow_the_weights():
    r = iosets.replay({"jobs": 2, "requests": 2000, "seed": 3}, "wfq", {"weight.1": 1, "weight.2": 3})
    assert r["policy"] == "wfq" and r["requests"] == 2000
    q1, q2 = r["queues"]
    assert (q1["queue"], q2["queue"]) == ("job 1", "job 2")
    assert q1["expected_share"] == pytest.approx(0.25) and q2["expected_share"] == pytest.approx(0.75)
    assert q1["window_mean"] == pytest.approx(0.25, abs=0.05)
    assert q2["window_mean"] == pytest.approx(0.75, abs=0.05)
    # The heavier queue drains first; the lighter one finishes last, at the makespan.
    assert q2["drained_s"] < q1["drained_s"]
    assert max(q1["finished_s"], q2["finished_s"]) == pytest.approx(r["makespan_s"])


def test_replay_a_trace_on_a_device(tmp_path):
    trace = tmp_path / "t.csv"
    lines = ["time_s,job,size"] + [f"{i * 0.001},{1 + i % 2},{65536 * (1 + i % 3)}" for i in range(200)]
    trace.write_text("\n".join(lines) + "\n")
    r = iosets.replay(trace, "timeorder", device="ssd", window=50)
    assert r["requests"] == 200 and [q["queue"] for q in r["queues"]] == ["job 1", "job 2"]
    assert sum(q["bytes"] for q in r["queues"]) == sum(65536 * (1 + i % 3) for i in range(200))
    hdd = iosets.replay(str(trace), "timeorder", device="hdd", window=50)
    assert hdd["makespan_s"] >= r["makespan_s"]
    custom = iosets.replay(None, "noop", device={"bandwidth_mib_s": 100, "latency_us": 10, "slots": 2})
    assert custom["requests"] == 1000


def test_replay_prints_what_the_command_prints(cli):
    out = run_cli(cli, "replay", "--policy", "wfq", "--opt", "weight.1=1", "--opt", "weight.2=2",
                  "--jobs", "2", "--requests", "500", "--seed", "4")
    r = iosets.replay({"jobs": 2, "requests": 500, "seed": 4}, "wfq", {"weight.1": 1, "weight.2": "2"})
    assert out == r["table"]


def test_long_calls_let_other_threads_run():
    started = threading.Event()
    result = []

    # About 0.15 s in a release build (10,000 s simulated per run, 120 runs), longer in debug.
    long = TINY_SWEEP.replace("horizon = 500", "horizon = 50000").replace(
        "window = [100, 400]", "window = [10000, 40000]"
    )

    def work():
        started.set()
        result.append(iosets.sweep(long, workloads=20, threads=1))

    t = threading.Thread(target=work)
    t.start()
    started.wait()
    ticks = 0
    while t.is_alive():
        ticks += 1
        t.join(0.001)
    # Had the sweep held the GIL, this thread could not have looped while it ran.
    assert ticks >= 5 and len(result[0]) == 2 * 20 * 3
