"""iosets from Python: the same Rust code as the ``iosets`` command, as functions.

- :func:`policies` — every registered scheduling policy and its tunables (``iosets policies``);
- :func:`heuristics` — the fluid simulator's heuristics (``iosets sim heuristics``);
- :func:`simulate` — a scenario under each heuristic: metrics and per-job rows (``iosets sim run``);
- :func:`sweep` — a sweep, one dict per run with the columns of the sweep CSV, ready for
  ``pandas.DataFrame(iosets.sweep(...))`` (``iosets sim sweep``);
- :func:`detect` — each job's I/O period, confidence, Set-10 set and priority (``iosets detect``);
- :func:`replay` — a trace or a generated workload through a policy on a modelled device:
  per-queue shares, drain and finish times (``iosets replay``).

Errors are Python exceptions carrying the Rust library's message: ``FileNotFoundError`` /
``PermissionError`` / ``OSError`` for files, ``ValueError`` for any other bad input. Long calls
release the GIL, so threads can run several at once.
"""

from os import PathLike
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _native

__version__: str = _native.__version__

__all__ = ["policies", "heuristics", "simulate", "sweep", "detect", "replay", "__version__"]

Scenario = Union[str, "PathLike[str]", Dict[str, Any]]


def policies() -> List[Dict[str, Any]]:
    """Every registered policy, in the registry's order.

    Each is ``{"name", "description", "tunables": [{"name", "default", "meaning"}]}``; a
    tunable's ``default`` is ``None`` when it has none (e.g. ``weight.<job>`` families). The
    names are what :func:`replay`'s ``policy`` and a server's ``--policy`` take.
    """
    return _native.policies()


def heuristics() -> List[Dict[str, str]]:
    """The fluid simulator's heuristics and suffixes, ``{"name", "description"}`` each.

    Names such as ``"set-10"``, ``"fair-share"`` or ``"set-10:error=0.5"`` are what
    :func:`simulate` and :func:`sweep` take in ``heuristics``.
    """
    rows, _note = _native.heuristics()
    return rows


def simulate(
    scenario: Optional[Scenario] = None,
    *,
    at: Optional[float] = None,
    heuristics: Optional[Sequence[str]] = None,
    seed: int = 1,
    phases: bool = False,
    workload: Optional[Union[str, "PathLike[str]"]] = None,
    iosets_opt: Optional[Sequence[str]] = None,
) -> Dict[str, Any]:
    """Run a scenario once under each heuristic (``iosets sim run``).

    ``scenario`` is a scenario file's path (see ``scenarios/``), TOML text (a string with a
    newline), or a dict shaped like a scenario file (``{"name": ..., "platform": {...},
    "generator": {...}}``); alternatively ``workload`` is a workload JSON file (the ``workload``
    object of a ``--json`` report). ``at`` is the value of the swept variable for a sweep file.
    ``heuristics`` defaults to the scenario's list (the paper's six for a workload). The
    workload is workload 0 of a sweep seeded ``seed``. ``iosets_opt`` (``"KEY=VALUE"`` strings,
    ``sim run --iosets-opt``; ``[]`` is ``--bounds``) bounds a job's turn in its set as the
    servers' ``iosets`` policy with those options does; ``None``, the paper's rule.

    Returns ``{"scenario", "at", "seed", "random", "jobs", "iterations", "bandwidth", "window",
    "metrics": {heuristic: {max_stretch, geomean_stretch, io_slowdown, utilization,
    measured_jobs}}, "runs": [{heuristic, events, end_time, metrics, jobs, table}], "rows": [one
    dict per (heuristic, job), the columns of ``sim run --csv``], "headline", "summary",
    "json"}`` — ``headline``, ``summary`` and each run's ``table`` are the command's text, and
    ``json`` its ``--json`` report.
    """
    return _native.simulate(
        scenario,
        at=at,
        heuristics=None if heuristics is None else list(heuristics),
        seed=seed,
        phases=phases,
        workload=workload,
        iosets_opt=None if iosets_opt is None else list(iosets_opt),
    )


def sweep(
    scenario: Scenario,
    *,
    workloads: int = 20,
    seed: int = 1,
    heuristics: Optional[Sequence[str]] = None,
    threads: Optional[int] = None,
    full_runs: bool = False,
    out: Optional[Union[str, "PathLike[str]"]] = None,
    plots: bool = True,
    iosets_opt: Optional[Sequence[str]] = None,
) -> List[Dict[str, Any]]:
    """Run a sweep (``iosets sim sweep``): every value of the swept variable × ``workloads``
    random workloads × every heuristic, in parallel on ``threads`` threads (default: one per
    core).

    Returns one dict per run, in (value, workload, heuristic) order, with the columns of the
    sweep CSV: the swept variable (``"point"`` without a sweep), ``workload``, ``seed``,
    ``heuristic``, ``max_stretch``, ``geomean_stretch``, ``io_slowdown``, ``utilization``,
    ``measured_jobs``, ``jobs``, ``events``. ``pandas.DataFrame(iosets.sweep(...))`` is the
    CSV as a table. With ``out``, also writes ``NAME.csv``, ``NAME.json`` and (if ``plots``) one
    ``NAME-METRIC.svg`` per metric into that directory, as the command does. ``iosets_opt`` is
    ``simulate``'s (``sim sweep --iosets-opt``; ``[]`` is ``--bounds``; ``None``, the paper's
    rule); the JSON's ``bounds`` says which bounds the runs had.
    """
    return _native.sweep(
        scenario,
        workloads=workloads,
        seed=seed,
        heuristics=None if heuristics is None else list(heuristics),
        threads=threads,
        full_runs=full_runs,
        out=out,
        plots=plots,
        iosets_opt=None if iosets_opt is None else list(iosets_opt),
    )


def detect(
    trace: Union[str, "PathLike[str]"],
    format: Optional[str] = None,
    *,
    mode: Optional[str] = None,
    method: str = "offline",
    job: Optional[int] = None,
    segments: bool = True,
) -> List[Dict[str, Any]]:
    """Find each job's I/O period in a trace (``iosets detect``).

    ``format`` is one of ``csv``, ``jsonl``, ``tmio-jsonl``, ``tmio-json``, ``tmio-msgpack``,
    ``ftio-json``, ``ftio-txt``, ``gekkofs-json``, ``dxt`` (default: recognised from the
    content). ``mode`` is ``"read"``, ``"write"`` or ``"all"`` (default: the writes if the trace
    has any, else all, as ``iosets detect --mode``). ``method="offline"`` uses
    ``iosets detect``'s detector settings; ``"online"`` the servers' (a cheaper second pass).
    ``job`` keeps one job. ``segments=True`` splits each job where its I/O behaviour changes
    (``iosets detect --segments on``, the default); ``False`` gives one period for the whole
    trace.

    Returns one dict per job, by job id: ``job``, ``periodic``, ``period_s`` (``None`` if not
    periodic), ``best_period_s``, ``confidence`` (0 to 1), ``set`` (Set-10 set; ``None``: a set
    of its own), ``priority``, ``phases``, ``reason`` (why not periodic) — all of the job's last
    behaviour, the set the servers end it in —, ``changes_s`` (when the behaviour changed,
    seconds; empty if it did not), ``segments`` (one dict per behaviour, in time order:
    ``start_s``, ``end_s`` and the fields above but ``job``), ``note`` (the table's note),
    ``format`` (the trace's format) and ``mode`` (the events looked at).
    """
    return _native.detect(
        trace, format, mode=mode, method=method, job=job, segments=segments
    )


def replay(
    source: Optional[Union[str, "PathLike[str]", Dict[str, Any]]] = None,
    policy: str = "wfq",
    options: Optional[Dict[str, Any]] = None,
    *,
    device: Optional[Union[str, Dict[str, float]]] = None,
    window: int = 300,
    share_by: str = "job",
) -> Dict[str, Any]:
    """Replay requests through a policy on a modelled device (``iosets replay``).

    ``source`` is a trace file (iosets' request trace, or the ``time_s,job,size`` CSV) or a dict
    of workload parameters: ``jobs`` (4), ``requests`` (1000), ``size_min`` (4096 bytes),
    ``size_max`` (1 MiB), ``sizes`` (``"uniform"`` or ``"heavy"``), ``assign`` (``"random"`` or
    ``"roundrobin"``), ``rate`` (Poisson requests/s; ``None``: all queued at t=0),
    ``priorities``, ``classes`` (one per job), ``seed`` (1); ``None`` is the defaults.
    ``options`` are the policy's tunables (``--opt KEY=VALUE``), e.g. ``{"weight.1": 1}``.
    ``device`` is ``"hdd"``, ``"ssd"`` or ``{"bandwidth_mib_s": 1024, "latency_us": 0,
    "slots": 1, "seek_ms_per_gib": ..., "max_seek_ms": ...}``. ``window`` is the requests per
    share window; ``share_by`` is ``"job"``, ``"class"`` or ``"priority"``.

    Returns ``{"policy", "share_by", "window", "windows", "backlogged_windows", "requests",
    "batches", "bytes", "makespan_s", "throughput_mib_s", "queues": [{queue, weight,
    expected_share, busy_share, window_mean, window_min, window_max, requests, bytes, drained_s,
    finished_s, mean_wait_ms, p99_wait_ms}], "table"}`` (``table``: the command's text).
    """
    return _native.replay(
        source, policy, options, device=device, window=window, share_by=share_by
    )
