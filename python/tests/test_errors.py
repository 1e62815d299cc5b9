"""Bad input is a Python exception with the library's message, never a crash."""

import pytest

import iosets
from conftest import SCENARIOS, TRACES


def test_a_missing_scenario_file_is_file_not_found():
    with pytest.raises(FileNotFoundError, match="nope.toml"):
        iosets.simulate("/nonexistent/nope.toml")


def test_a_misspelt_scenario_key_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match="bandwith"):
        iosets.simulate({"platform": {"bandwith": 1.0}, "group": [{"t_cpu": 1, "t_io": 1}]})


def test_a_scenario_value_toml_cannot_hold_is_a_value_error():
    with pytest.raises(ValueError, match="platform.bandwidth"):
        iosets.simulate({"platform": {"bandwidth": object()}})


def test_an_unknown_heuristic_is_a_value_error():
    with pytest.raises(ValueError, match="set-zero"):
        iosets.simulate(SCENARIOS / "seed004.toml", heuristics=["set-zero"])


def test_a_sweep_file_needs_at_and_zero_workloads_is_refused():
    with pytest.raises(ValueError):
        iosets.simulate(SCENARIOS / "three-profile.toml")
    with pytest.raises(ValueError, match="workload"):
        iosets.sweep(SCENARIOS / "three-profile.toml", workloads=0)
    with pytest.raises(ValueError, match="thread"):
        iosets.sweep(SCENARIOS / "seed004.toml", workloads=1, threads=0)


def test_a_missing_workload_json_is_file_not_found():
    with pytest.raises(FileNotFoundError):
        iosets.simulate(workload="/nonexistent/w.json")
    with pytest.raises(ValueError, match="not both"):
        iosets.simulate(SCENARIOS / "seed004.toml", workload="/nonexistent/w.json")


def test_detect_errors():
    with pytest.raises(FileNotFoundError, match="trace.csv"):
        iosets.detect("/nonexistent/trace.csv")
    with pytest.raises(ValueError, match="xml"):
        iosets.detect(TRACES / "requests.csv", "xml")
    with pytest.raises(ValueError, match="jobs: 1, 2"):
        iosets.detect(TRACES / "requests.csv", job=7)
    with pytest.raises(ValueError, match="mode"):
        iosets.detect(TRACES / "requests.csv", mode="fast")
    with pytest.raises(ValueError, match="method"):
        iosets.detect(TRACES / "requests.csv", method="fast")
    # A directory is read as Recorder's text output (recorder2text): none there.
    with pytest.raises(ValueError, match="no <rank>.txt file in the directory"):
        iosets.detect(TRACES)


def test_detect_a_malformed_trace_names_the_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("job,op,offset,len,arrival_ns\n1,write,0,10,notanumber\n")
    with pytest.raises(ValueError, match="line 2"):
        iosets.detect(bad, "csv")


def test_replay_errors(tmp_path):
    with pytest.raises(ValueError, match="wfq"):  # the message lists the valid policies
        iosets.replay(None, "no-such-policy")
    with pytest.raises(ValueError, match="nonsense"):
        iosets.replay(None, "wfq", {"nonsense": 1})
    with pytest.raises(FileNotFoundError, match="t.csv"):
        iosets.replay("/nonexistent/t.csv")
    with pytest.raises(ValueError, match="latency_us"):
        iosets.replay(None, device={"latency_us": -1})
    with pytest.raises(ValueError, match="bandwidth"):
        iosets.replay(None, device={"bandwidth_mib_s": 0})
    with pytest.raises(ValueError, match="go together"):
        iosets.replay(None, device={"seek_ms_per_gib": 8})
    with pytest.raises(ValueError, match="floppy"):
        iosets.replay(None, device="floppy")
    with pytest.raises(ValueError, match="window"):
        iosets.replay(None, window=0)
    with pytest.raises(ValueError, match="share_by"):
        iosets.replay(None, share_by="file")
    with pytest.raises(ValueError, match="jobs"):
        iosets.replay({"jobs": 0})
    with pytest.raises(ValueError, match="unknown key"):
        iosets.replay({"job": 2})
    with pytest.raises(ValueError, match="priorit"):
        iosets.replay({"jobs": 2, "priorities": [1, -1]})
    bad = tmp_path / "bad.csv"
    bad.write_text("time_s,job,size\n0,1,lots\n")
    with pytest.raises(ValueError, match="line 2"):
        iosets.replay(bad)
