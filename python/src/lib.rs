//! `iosets._native`: the Python bindings of iosets, wrapped by the pure-Python package `iosets`
//! (python/iosets/, which holds the docstrings and type stubs).
//!
//! Every function turns its Python arguments into the library crates' inputs, calls the very
//! code the `iosets` command calls (`iosets_sim::fluid::session` for `sim run`,
//! `iosets_sim::fluid::sweep` for `sim sweep`, `iosets_period::report` for `detect`,
//! `iosets_sim::plan` for `replay`, `iosets_policy::registry` for `policies`), and turns the
//! result into dicts and lists. Nothing is computed here. Long calls release the GIL.
//!
//! Errors: a missing or unreadable file is `FileNotFoundError`/`PermissionError`/`OSError`, any
//! other bad input (a scenario, heuristic, policy, tunable, trace or option the library rejects)
//! is `ValueError`, in both cases with the library's message. Nothing here panics on bad input.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use pyo3::exceptions::{
    PyFileNotFoundError, PyIsADirectoryError, PyOSError, PyPermissionError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use iosets_period::report::{detect_trace, JobReport, Placement};
use iosets_period::segment::SegmentConfig;
use iosets_period::trace::Format;
use iosets_period::{Config, JobId};
use iosets_policy::registry::POLICIES;
use iosets_policy::set10::SetMapping;
use iosets_policy::{ClassId, Priority};
use iosets_sim::fluid::heuristic::{CATALOGUE, CATALOGUE_NOTE};
use iosets_sim::fluid::metrics::Metrics;
use iosets_sim::fluid::report::{job_table, summary_table};
use iosets_sim::fluid::scenario::Scenario;
use iosets_sim::fluid::session::{run_input, RunInput, ScenarioRun};
use iosets_sim::fluid::sweep::{run_sweep, Cell, SweepConfig, SweepResult};
use iosets_sim::fluid::{FluidError, Heuristic, RunResult, TurnBounds, Workload};
use iosets_sim::plan::{device_from_units, execute, Outcome, Plan, PlanError, Source};
use iosets_sim::report::summary_table as replay_table;
use iosets_sim::workload::{Arrivals, Assign, Sizes, WorkloadSpec, DEFAULT_PARETO_ALPHA};
use iosets_sim::{DeviceModel, ShareKey, SimError};

// ---------------------------------------------------------------------------------------------
// Errors

/// An I/O error of `kind` as the matching Python exception, carrying `message`.
fn io_error(kind: ErrorKind, message: String) -> PyErr {
    match kind {
        ErrorKind::NotFound => PyFileNotFoundError::new_err(message),
        ErrorKind::PermissionDenied => PyPermissionError::new_err(message),
        ErrorKind::IsADirectory => PyIsADirectoryError::new_err(message),
        _ => PyOSError::new_err(message),
    }
}

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn fluid_error(e: FluidError) -> PyErr {
    match &e {
        FluidError::Io { error, .. } => io_error(error.kind(), e.to_string()),
        _ => value_error(e),
    }
}

fn period_error(e: iosets_period::Error) -> PyErr {
    match &e {
        iosets_period::Error::Io { error, .. } => io_error(error.kind(), e.to_string()),
        _ => value_error(e),
    }
}

fn sim_error(e: SimError) -> PyErr {
    match &e {
        SimError::Io { error, .. } => io_error(error.kind(), e.to_string()),
        _ => value_error(e),
    }
}

fn plan_error(e: PlanError) -> PyErr {
    match &e {
        PlanError::Trace { io: Some(kind), .. } => io_error(*kind, e.to_string()),
        _ => value_error(e),
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs

/// A dict (or list, scalar) from Python as a TOML value, for scenarios given as dicts.
fn toml_value(obj: &Bound<'_, PyAny>, at: &str) -> PyResult<toml::Value> {
    if obj.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(obj.extract()?));
    }
    if obj.is_instance_of::<PyInt>() {
        let n: i64 = obj
            .extract()
            .map_err(|_| value_error(format!("{at}: integer out of range")))?;
        return Ok(toml::Value::Integer(n));
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(obj.extract()?));
    }
    if let Ok(s) = obj.downcast::<PyString>() {
        return Ok(toml::Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(d) = obj.downcast::<PyDict>() {
        let mut t = toml::map::Map::new();
        for (k, v) in d.iter() {
            let Ok(key) = k.extract::<String>() else {
                return Err(value_error(format!(
                    "{at}: keys must be strings, found {}",
                    k.repr()?
                )));
            };
            let path = if at.is_empty() {
                key.clone()
            } else {
                format!("{at}.{key}")
            };
            if v.is_none() {
                continue; // TOML has no null: a None value is an absent key.
            }
            t.insert(key, toml_value(&v, &path)?);
        }
        return Ok(toml::Value::Table(t));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let items = obj
            .try_iter()?
            .enumerate()
            .map(|(i, v)| toml_value(&v?, &format!("{at}[{i}]")))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(toml::Value::Array(items));
    }
    Err(value_error(format!(
        "{at}: cannot be written in TOML: {}",
        obj.get_type().name()?
    )))
}

/// A scenario given as a path (str or os.PathLike), TOML text (a str with a newline) or a dict
/// shaped like a scenario file.
fn scenario_of(obj: &Bound<'_, PyAny>) -> PyResult<Scenario> {
    if let Ok(d) = obj.downcast::<PyDict>() {
        let text = toml::to_string(&toml_value(d.as_any(), "")?).map_err(value_error)?;
        return Scenario::parse(&text, Path::new("<dict>"), "scenario").map_err(fluid_error);
    }
    if let Ok(s) = obj.downcast::<PyString>() {
        let s = s.to_cow()?;
        if s.contains('\n') {
            return Scenario::parse(&s, Path::new("<string>"), "scenario").map_err(fluid_error);
        }
    }
    let path: PathBuf = obj.extract().map_err(|_| {
        value_error("scenario: expected a path, TOML text (with a newline) or a dict")
    })?;
    Scenario::load(&path).map_err(fluid_error)
}

fn heuristics_of(names: Option<Vec<String>>) -> PyResult<Vec<Heuristic>> {
    names
        .unwrap_or_default()
        .iter()
        .map(|n| {
            n.parse::<Heuristic>()
                .map_err(|e| value_error(format!("heuristic {n:?}: {e}")))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Outputs

fn metrics_dict<'py>(py: Python<'py>, m: &Metrics) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("max_stretch", m.max_stretch)?;
    d.set_item("geomean_stretch", m.geomean_stretch)?;
    d.set_item("io_slowdown", m.io_slowdown)?;
    d.set_item("utilization", m.utilization)?;
    d.set_item("measured_jobs", m.measured_jobs)?;
    Ok(d)
}

/// A line per job of `run`, the columns of `sim run --csv` (heuristic, job, group, w_iter, set,
/// priority, iterations, iterations_done, completion, e_cpu, e_io, stretch, io_slowdown).
fn job_rows<'py>(
    py: Python<'py>,
    workload: &Workload,
    run: &RunResult,
) -> PyResult<Bound<'py, PyList>> {
    let rows = PyList::empty(py);
    for (i, j) in run.jobs.iter().enumerate() {
        let d = PyDict::new(py);
        d.set_item("heuristic", run.heuristic.to_string())?;
        d.set_item("job", i)?;
        d.set_item(
            "group",
            workload.groups.get(j.group).map_or("", String::as_str),
        )?;
        d.set_item("w_iter", j.w_iter)?;
        d.set_item("set", j.last_set.map(|(s, _)| s.to_string()))?;
        d.set_item("priority", j.last_set.map(|(_, p)| p))?;
        d.set_item("iterations", j.iterations)?;
        d.set_item("iterations_done", j.iterations_done)?;
        d.set_item("completion", j.completion)?;
        d.set_item("e_cpu", j.work.e_cpu)?;
        d.set_item("e_io", j.work.e_io)?;
        d.set_item("stretch", j.stretch)?;
        d.set_item("io_slowdown", j.io_slowdown)?;
        rows.append(d)?;
    }
    Ok(rows)
}

fn run_dict<'py>(py: Python<'py>, done: &ScenarioRun) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("scenario", &done.name)?;
    match &done.at {
        Some((v, x)) => {
            let at = PyDict::new(py);
            at.set_item("variable", v)?;
            at.set_item("value", x)?;
            d.set_item("at", at)?;
        }
        None => d.set_item("at", py.None())?,
    }
    d.set_item("seed", done.seed)?;
    d.set_item("random", done.random)?;
    d.set_item("jobs", done.workload.jobs.len())?;
    d.set_item("iterations", done.workload.iterations())?;
    d.set_item("bandwidth", done.workload.bandwidth)?;
    let w = done.runs[0].window;
    d.set_item("window", (w.begin, w.end))?;
    let metrics = PyDict::new(py);
    let runs = PyList::empty(py);
    let rows = PyList::empty(py);
    for r in &done.runs {
        metrics.set_item(r.heuristic.to_string(), metrics_dict(py, &r.metrics)?)?;
        let rd = PyDict::new(py);
        rd.set_item("heuristic", r.heuristic.to_string())?;
        rd.set_item("events", r.events)?;
        rd.set_item("end_time", r.end_time)?;
        rd.set_item("metrics", metrics_dict(py, &r.metrics)?)?;
        rd.set_item("table", job_table(&done.workload, r))?;
        let jr = job_rows(py, &done.workload, r)?;
        for row in jr.iter() {
            rows.append(row)?;
        }
        rd.set_item("jobs", jr)?;
        runs.append(rd)?;
    }
    d.set_item("metrics", metrics)?;
    d.set_item("runs", runs)?;
    d.set_item("rows", rows)?;
    d.set_item("headline", done.headline())?;
    d.set_item("summary", summary_table(&done.runs))?;
    let json = serde_json::to_string(&done.report()).map_err(value_error)?;
    d.set_item("json", json)?;
    Ok(d)
}

fn cell_object<'py>(py: Python<'py>, c: &Cell) -> PyResult<Bound<'py, PyAny>> {
    Ok(match c {
        Cell::Value(x) | Cell::Metric(x) => PyFloat::new(py, *x).into_any(),
        Cell::Int(n) => n.into_pyobject(py)?.into_any(),
        Cell::Text(t) => PyString::new(py, t).into_any(),
    })
}

fn sweep_rows<'py>(py: Python<'py>, r: &SweepResult) -> PyResult<Bound<'py, PyList>> {
    let columns = r.columns();
    let rows = PyList::empty(py);
    for row in &r.rows {
        let d = PyDict::new(py);
        for (name, cell) in columns.iter().zip(SweepResult::cells(row)) {
            d.set_item(name, cell_object(py, &cell)?)?;
        }
        rows.append(d)?;
    }
    Ok(rows)
}

/// A serde_json value as Python objects (null → None).
fn json_object<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value as J;
    Ok(match v {
        J::Null => py.None().into_bound(py),
        J::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        J::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into_pyobject(py)?.into_any(),
            (None, Some(i)) => i.into_pyobject(py)?.into_any(),
            _ => PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any(),
        },
        J::String(s) => PyString::new(py, s).into_any(),
        J::Array(a) => {
            let l = PyList::empty(py);
            for x in a {
                l.append(json_object(py, x)?)?;
            }
            l.into_any()
        }
        J::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, json_object(py, x)?)?;
            }
            d.into_any()
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Functions

/// The registered policies: name, description, tunables (name, default, meaning).
#[pyfunction]
fn policies(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for p in POLICIES {
        let d = PyDict::new(py);
        d.set_item("name", p.name)?;
        d.set_item("description", p.summary)?;
        let ts = PyList::empty(py);
        for t in p.tunables {
            let td = PyDict::new(py);
            td.set_item("name", t.name)?;
            td.set_item(
                "default",
                if t.default.is_empty() {
                    None
                } else {
                    Some(t.default)
                },
            )?;
            td.set_item("meaning", t.help)?;
            ts.append(td)?;
        }
        d.set_item("tunables", ts)?;
        out.append(d)?;
    }
    Ok(out)
}

/// The fluid simulator's heuristics and suffixes: name, description (`iosets sim heuristics`).
#[pyfunction]
fn heuristics(py: Python<'_>) -> PyResult<(Bound<'_, PyList>, &'static str)> {
    let out = PyList::empty(py);
    for (name, what) in CATALOGUE {
        let d = PyDict::new(py);
        d.set_item("name", name)?;
        d.set_item("description", what)?;
        out.append(d)?;
    }
    Ok((out, CATALOGUE_NOTE))
}

/// The bounds on a turn of `iosets sim run|sweep --iosets-opt` (an empty list: `--bounds`;
/// `None`: the paper's rule).
fn bounds_of(iosets_opt: Option<Vec<String>>) -> PyResult<TurnBounds> {
    match iosets_opt {
        None => Ok(TurnBounds::NONE),
        Some(opts) => iosets_policy::tunables::parse_pairs(&opts)
            .and_then(|pairs| iosets_policy::iosets::turn_bounds(&pairs))
            .map_err(|e| value_error(format!("iosets_opt: {e}"))),
    }
}

/// `iosets sim run`: a scenario (or a workload JSON) under each heuristic.
#[pyfunction]
#[pyo3(signature = (scenario=None, *, at=None, heuristics=None, seed=1, phases=false, workload=None, iosets_opt=None))]
#[allow(clippy::too_many_arguments)]
fn simulate<'py>(
    py: Python<'py>,
    scenario: Option<&Bound<'py, PyAny>>,
    at: Option<f64>,
    heuristics: Option<Vec<String>>,
    seed: u64,
    phases: bool,
    workload: Option<PathBuf>,
    iosets_opt: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyDict>> {
    let bounds = bounds_of(iosets_opt)?;
    let input = match (scenario, workload) {
        (Some(_), Some(_)) => {
            return Err(value_error(
                "give a scenario or a workload, not both (as `iosets sim run`)",
            ))
        }
        (None, Some(path)) => {
            if at.is_some() {
                return Err(value_error("at: only for a scenario with a sweep"));
            }
            RunInput::Workload {
                name: path.file_stem().map_or_else(
                    || "workload".to_string(),
                    |s| s.to_string_lossy().into_owned(),
                ),
                workload: Workload::load_json(&path).map_err(fluid_error)?,
            }
        }
        (Some(s), None) => RunInput::Scenario {
            scenario: Box::new(scenario_of(s)?),
            at,
        },
        (None, None) => return Err(value_error("give a scenario or workload=PATH.json")),
    };
    let hs = heuristics_of(heuristics)?;
    let done = py
        .allow_threads(|| run_input(input, &hs, seed, phases, bounds))
        .map_err(fluid_error)?;
    run_dict(py, &done)
}

/// `iosets sim sweep`: every value × `workloads` random workloads × every heuristic; one dict
/// per run with the columns of the sweep CSV. With `out`, also writes the CSV, the JSON
/// aggregates and (if `plots`) one SVG per metric there, as the command does.
#[pyfunction]
#[pyo3(signature = (scenario, *, workloads=20, seed=1, heuristics=None, threads=None, full_runs=false, out=None, plots=true, iosets_opt=None))]
#[allow(clippy::too_many_arguments)] // The command's flags, one keyword argument each.
fn sweep<'py>(
    py: Python<'py>,
    scenario: &Bound<'py, PyAny>,
    workloads: usize,
    seed: u64,
    heuristics: Option<Vec<String>>,
    threads: Option<usize>,
    full_runs: bool,
    out: Option<PathBuf>,
    plots: bool,
    iosets_opt: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyList>> {
    let scenario = scenario_of(scenario)?;
    let hs = heuristics_of(heuristics)?;
    let config = SweepConfig {
        bounds: bounds_of(iosets_opt)?,
        workloads,
        seed,
        heuristics: if hs.is_empty() {
            scenario.heuristics.clone()
        } else {
            hs
        },
        threads,
        stop_at_window_end: !full_runs,
    };
    let result = py
        .allow_threads(|| {
            let r = run_sweep(&scenario, &config, &|| {})?;
            if let Some(dir) = &out {
                r.save(dir, plots)?;
            }
            Ok::<_, FluidError>(r)
        })
        .map_err(fluid_error)?;
    sweep_rows(py, &result)
}

/// The servers' Set-10 mapping of a period (seconds; `None` without a confident one), as
/// `iosets detect` places jobs.
fn set10(period_s: Option<f64>) -> Placement {
    let a = SetMapping::default().assign(period_s);
    Placement {
        set: a.set(),
        priority: a.priority(),
    }
}

/// `iosets detect`: each job's period, confidence, Set-10 set and priority, phases.
#[pyfunction]
#[pyo3(signature = (trace, format=None, *, mode=None, method="offline", job=None, segments=true))]
fn detect<'py>(
    py: Python<'py>,
    trace: PathBuf,
    format: Option<&str>,
    mode: Option<&str>,
    method: &str,
    job: Option<u64>,
    segments: bool,
) -> PyResult<Bound<'py, PyList>> {
    let format = format
        .map(str::parse::<Format>)
        .transpose()
        .map_err(period_error)?;
    let mode = mode
        .map(str::parse::<iosets_period::Mode>)
        .transpose()
        .map_err(|e| value_error(format!("mode: {e}")))?;
    let config = match method {
        "offline" => Config::default(),
        "online" => Config::online(),
        other => {
            return Err(value_error(format!(
                "method {other:?}: expected \"offline\" (iosets detect's settings) or \"online\" \
                 (the servers' cheaper second pass)"
            )))
        }
    };
    let report = py
        .allow_threads(|| {
            let segments = if segments {
                SegmentConfig::default()
            } else {
                SegmentConfig::off()
            };
            detect_trace(
                &trace,
                format,
                mode,
                job.map(JobId),
                &config,
                &segments,
                &set10,
            )
        })
        .map_err(|e| match e {
            iosets_period::Error::NoSuchJob { .. } => {
                value_error(format!("job {}: {e}", job.unwrap_or_default()))
            }
            e => period_error(e),
        })?;
    let out = PyList::empty(py);
    for j in &report.jobs {
        let d = json_object(py, &JobReport::to_json(j))?;
        d.set_item("format", report.format.name())?;
        d.set_item("mode", report.mode.name())?;
        d.set_item("note", j.note())?;
        out.append(d)?;
    }
    Ok(out)
}

/// The generator's keyword arguments (the flags of `iosets replay` without --trace).
fn workload_spec(d: &Bound<'_, PyDict>) -> PyResult<WorkloadSpec> {
    const KEYS: [&str; 10] = [
        "jobs",
        "requests",
        "size_min",
        "size_max",
        "sizes",
        "assign",
        "rate",
        "priorities",
        "classes",
        "seed",
    ];
    for k in d.keys() {
        let k: String = k.extract()?;
        if !KEYS.contains(&k.as_str()) {
            return Err(value_error(format!(
                "workload: unknown key {k:?} (known: {})",
                KEYS.join(", ")
            )));
        }
    }
    fn get<'py, T: FromPyObject<'py>>(
        d: &Bound<'py, PyDict>,
        key: &str,
        default: T,
    ) -> PyResult<T> {
        match d.get_item(key)? {
            Some(v) if !v.is_none() => v
                .extract()
                .map_err(|e| value_error(format!("workload[{key:?}]: {e}"))),
            _ => Ok(default),
        }
    }
    let (min, max) = (
        get(d, "size_min", 4u64 << 10)?,
        get(d, "size_max", 1u64 << 20)?,
    );
    let sizes = match get(d, "sizes", "uniform".to_string())?.as_str() {
        "uniform" => Sizes::Uniform { min, max },
        "heavy" => Sizes::BoundedPareto {
            min,
            max,
            alpha: DEFAULT_PARETO_ALPHA,
        },
        other => {
            return Err(value_error(format!(
                "workload[\"sizes\"] = {other:?}: expected \"uniform\" or \"heavy\""
            )))
        }
    };
    let assign = match get(d, "assign", "random".to_string())?.as_str() {
        "random" => Assign::Random,
        "roundrobin" | "round-robin" => Assign::RoundRobin,
        other => {
            return Err(value_error(format!(
                "workload[\"assign\"] = {other:?}: expected \"random\" or \"roundrobin\""
            )))
        }
    };
    let priorities = get(d, "priorities", Vec::<f64>::new())?
        .into_iter()
        .map(|p| {
            Priority::new(p).ok_or_else(|| {
                value_error(format!(
                    "workload[\"priorities\"]: {p} is not a priority: expected a number > 0"
                ))
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let spec = WorkloadSpec {
        jobs: get(d, "jobs", 4)?,
        requests: get(d, "requests", 1000)?,
        sizes,
        assign,
        arrivals: match get(d, "rate", None::<f64>)? {
            None => Arrivals::Backlogged,
            Some(rate_per_s) => Arrivals::Poisson { rate_per_s },
        },
        priorities,
        classes: get(d, "classes", Vec::<u64>::new())?
            .into_iter()
            .map(ClassId)
            .collect(),
        seed: get(d, "seed", 1)?,
    };
    spec.validate().map_err(sim_error)?;
    Ok(spec)
}

/// The device: "hdd", "ssd", or a dict of bandwidth_mib_s, latency_us, slots and optionally
/// seek_ms_per_gib with max_seek_ms (the flags of `iosets replay`).
fn device_of(obj: Option<&Bound<'_, PyAny>>) -> PyResult<DeviceModel> {
    let Some(obj) = obj else {
        return device_from_units(1024.0, 0.0, 1, None).map_err(sim_error);
    };
    if let Ok(s) = obj.downcast::<PyString>() {
        return match s.to_cow()?.as_ref() {
            "hdd" => Ok(DeviceModel::hdd()),
            "ssd" => Ok(DeviceModel::ssd()),
            other => Err(value_error(format!(
                "device {other:?}: expected \"hdd\", \"ssd\" or a dict of bandwidth_mib_s, \
                 latency_us, slots, seek_ms_per_gib, max_seek_ms"
            ))),
        };
    }
    let d = obj
        .downcast::<PyDict>()
        .map_err(|_| value_error("device: expected \"hdd\", \"ssd\" or a dict"))?;
    const KEYS: [&str; 5] = [
        "bandwidth_mib_s",
        "latency_us",
        "slots",
        "seek_ms_per_gib",
        "max_seek_ms",
    ];
    let mut v: [Option<f64>; 5] = [None; 5];
    for (k, x) in d.iter() {
        let k: String = k.extract()?;
        let i = KEYS.iter().position(|&n| n == k).ok_or_else(|| {
            value_error(format!(
                "device: unknown key {k:?} (known: {})",
                KEYS.join(", ")
            ))
        })?;
        v[i] = Some(
            x.extract()
                .map_err(|e| value_error(format!("device[{k:?}]: {e}")))?,
        );
    }
    let slots = v[2].unwrap_or(1.0);
    if !(slots >= 1.0 && slots.fract() == 0.0 && slots <= u32::MAX as f64) {
        return Err(value_error(format!(
            "device[\"slots\"] = {slots}: expected a whole number ≥ 1"
        )));
    }
    let seek = match (v[3], v[4]) {
        (Some(a), Some(b)) => Some((a, b)),
        (None, None) => None,
        _ => {
            return Err(value_error(
                "device: seek_ms_per_gib and max_seek_ms go together (a disk head needs both)",
            ))
        }
    };
    device_from_units(
        v[0].unwrap_or(1024.0),
        v[1].unwrap_or(0.0),
        slots as usize,
        seek,
    )
    .map_err(sim_error)
}

fn nanos_s(n: iosets_policy::Nanos) -> f64 {
    n.as_secs_f64()
}

fn outcome_dict<'py>(py: Python<'py>, o: &Outcome) -> PyResult<Bound<'py, PyDict>> {
    let s = &o.summary;
    let d = PyDict::new(py);
    d.set_item("policy", s.policy)?;
    d.set_item("share_by", s.key.to_string())?;
    d.set_item("window", s.window)?;
    d.set_item("windows", s.windows)?;
    d.set_item("backlogged_windows", s.backlogged_windows)?;
    d.set_item("requests", s.requests)?;
    d.set_item("batches", s.batches)?;
    d.set_item("bytes", s.bytes)?;
    d.set_item("makespan_s", nanos_s(s.makespan))?;
    d.set_item("throughput_mib_s", s.throughput / 1_048_576.0)?;
    let queues = PyList::empty(py);
    for q in &s.queues {
        let qd = PyDict::new(py);
        qd.set_item("queue", q.queue.to_string())?;
        qd.set_item("weight", q.weight)?;
        qd.set_item("expected_share", q.expected_share)?;
        qd.set_item("busy_share", q.busy_share)?;
        qd.set_item("window_mean", q.window_mean)?;
        qd.set_item("window_min", q.window_min)?;
        qd.set_item("window_max", q.window_max)?;
        qd.set_item("requests", q.requests)?;
        qd.set_item("bytes", q.bytes)?;
        qd.set_item("drained_s", nanos_s(q.drain_time))?;
        qd.set_item("finished_s", nanos_s(q.last_completion))?;
        qd.set_item("mean_wait_ms", nanos_s(q.mean_wait) * 1e3)?;
        qd.set_item("p99_wait_ms", nanos_s(q.p99_wait) * 1e3)?;
        queues.append(qd)?;
    }
    d.set_item("queues", queues)?;
    d.set_item("table", replay_table(s))?;
    Ok(d)
}

/// `iosets replay`: a trace file or a generated workload through a policy on a modelled device.
#[pyfunction]
#[pyo3(signature = (source=None, policy="wfq", options=None, *, device=None, window=300, share_by="job"))]
fn replay<'py>(
    py: Python<'py>,
    source: Option<&Bound<'py, PyAny>>,
    policy: &str,
    options: Option<&Bound<'py, PyDict>>,
    device: Option<&Bound<'py, PyAny>>,
    window: usize,
    share_by: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let source = match source {
        None => Source::Generated(workload_spec(&PyDict::new(py))?),
        Some(s) => match s.downcast::<PyDict>() {
            Ok(d) => Source::Generated(workload_spec(d)?),
            Err(_) => Source::Trace(s.extract().map_err(|_| {
                value_error("source: expected a trace path or a dict of workload parameters")
            })?),
        },
    };
    let mut pairs = Vec::new();
    if let Some(o) = options {
        for (k, v) in o.iter() {
            let key: String = k.extract()?;
            // Values as the command would get them: text (1 and "1" are the same tunable value).
            let value = if let Ok(s) = v.downcast::<PyString>() {
                s.to_cow()?.into_owned()
            } else {
                v.str()?.to_cow()?.into_owned()
            };
            pairs.push((key, value));
        }
    }
    if window == 0 {
        return Err(value_error(
            "window 0: a window must hold at least 1 request",
        ));
    }
    let share_by = match share_by {
        "job" => ShareKey::Job,
        "class" => ShareKey::Class,
        "priority" => ShareKey::Priority,
        other => {
            return Err(value_error(format!(
                "share_by {other:?}: expected \"job\", \"class\" or \"priority\""
            )))
        }
    };
    let plan = Plan {
        policy: policy.to_string(),
        pairs,
        source,
        device: device_of(device)?,
        window,
        share_by,
    };
    let outcome = py.allow_threads(|| execute(&plan)).map_err(plan_error)?;
    outcome_dict(py, &outcome)
}

/// The native module, imported by the `iosets` package.
#[pymodule]
#[pyo3(name = "_native")]
fn iosets_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(heuristics, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(sweep, m)?)?;
    m.add_function(wrap_pyfunction!(detect, m)?)?;
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
