//! Sweeps: every value of a scenario's swept variable × `K` random workloads × every heuristic,
//! run in parallel (rayon), then aggregated per value and heuristic.
//!
//! Workload `k` of a sweep with seed `s` is drawn with [`workload_seed`]`(s, k)` at every value of
//! the variable (common random numbers: the values are compared on the same random draws), and
//! every heuristic runs on the very same workload. The rows come out in a fixed order (value,
//! workload, heuristic) whatever the number of threads, so a sweep is reproducible bit for bit.

use std::io::Write;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;

use super::metrics::METRIC_NAMES;
use super::scenario::{Scenario, SweepAxis};
use super::session::BoundsReport;
use super::{simulate, FluidError, Heuristic, Metrics, SimOptions, TurnBounds};

/// How to run a sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepConfig {
    /// Random workloads per value (`K`).
    pub workloads: usize,
    /// The sweep's seed.
    pub seed: u64,
    /// The heuristics to compare.
    pub heuristics: Vec<Heuristic>,
    /// Worker threads (`None`: rayon's default, one per core).
    pub threads: Option<usize>,
    /// Stop each run at the window's end (the metrics do not change; see
    /// [`SimOptions::stop_at_window_end`]).
    pub stop_at_window_end: bool,
    /// The servers' bounds on a turn ([`SimOptions::bounds`]; [`TurnBounds::NONE`]: the
    /// paper's rule).
    pub bounds: TurnBounds,
}

/// One run of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepRow {
    /// The swept variable's value.
    pub value: f64,
    /// The workload's index, `0..K`.
    pub workload: usize,
    /// The seed it was drawn with.
    pub seed: u64,
    /// The heuristic.
    #[serde(serialize_with = "as_display")]
    pub heuristic: Heuristic,
    /// Its metrics.
    pub metrics: Metrics,
    /// Jobs in the workload.
    pub jobs: usize,
    /// Events simulated.
    pub events: u64,
}

fn as_display<S: serde::Serializer>(h: &Heuristic, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(h)
}

/// A metric's spread over the workloads of one value.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Stat {
    /// Runs with a value (NaN ones, e.g. no job in the window, are left out).
    pub runs: usize,
    /// Their mean.
    pub mean: f64,
    /// Their median.
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
}

impl Stat {
    /// The statistics of `xs`, ignoring NaN.
    pub fn of(xs: impl Iterator<Item = f64>) -> Stat {
        let mut v: Vec<f64> = xs.filter(|x| !x.is_nan()).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n == 0 {
            return Stat {
                runs: 0,
                mean: f64::NAN,
                median: f64::NAN,
                min: f64::NAN,
                max: f64::NAN,
            };
        }
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Stat {
            runs: n,
            mean: v.iter().sum::<f64>() / n as f64,
            median,
            min: v[0],
            max: v[n - 1],
        }
    }
}

/// The aggregate of one value and one heuristic.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepPoint {
    /// The swept variable's value.
    pub value: f64,
    /// The heuristic.
    pub heuristic: String,
    /// Max stretch over the workloads.
    pub max_stretch: Stat,
    /// Geometric-mean stretch over the workloads.
    pub geomean_stretch: Stat,
    /// I/O slowdown over the workloads.
    pub io_slowdown: Stat,
    /// Utilization over the workloads.
    pub utilization: Stat,
}

impl SweepPoint {
    /// The four statistics in the order of [`METRIC_NAMES`].
    pub fn stats(&self) -> [Stat; 4] {
        [
            self.max_stretch,
            self.geomean_stretch,
            self.io_slowdown,
            self.utilization,
        ]
    }
}

/// A finished sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepResult {
    /// The scenario's name.
    pub name: String,
    /// The swept variable (`-` for a scenario without sweep).
    pub variable: String,
    /// Its values.
    pub values: Vec<f64>,
    /// The heuristics, in order.
    #[serde(serialize_with = "all_display")]
    pub heuristics: Vec<Heuristic>,
    /// Workloads per value.
    pub workloads: usize,
    /// The sweep's seed.
    pub seed: u64,
    /// Whether the workloads are random (a fixed scenario gives the same one every time).
    pub random: bool,
    /// The bounds on a turn the runs had (as JSON, a [`BoundsReport`]: `null` for the paper's
    /// rule).
    #[serde(serialize_with = "as_report")]
    pub bounds: TurnBounds,
    /// Every run, in (value, workload, heuristic) order.
    pub rows: Vec<SweepRow>,
}

fn as_report<S: serde::Serializer>(b: &TurnBounds, s: S) -> Result<S::Ok, S::Error> {
    BoundsReport::of(*b).serialize(s)
}

fn all_display<S: serde::Serializer>(hs: &[Heuristic], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(hs.iter().map(|h| h.to_string()))
}

/// The seed of workload `k` of a sweep seeded with `seed` (SplitMix64 of both).
pub fn workload_seed(seed: u64, k: usize) -> u64 {
    let mut z = seed.wrapping_add(
        (k as u64)
            .wrapping_add(1)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Runs `scenario`'s sweep (a single point if it has none) as `config` says, calling `on_task`
/// after each (value, workload) pair is done, from whichever worker thread did it.
pub fn run_sweep(
    scenario: &Scenario,
    config: &SweepConfig,
    on_task: &(dyn Fn() + Sync),
) -> Result<SweepResult, FluidError> {
    if config.workloads == 0 {
        return Err(FluidError::invalid(
            "workloads",
            0,
            "expected at least 1 workload per value",
        ));
    }
    if config.heuristics.is_empty() {
        return Err(FluidError::invalid(
            "heuristics",
            "[]",
            "expected at least one heuristic",
        ));
    }
    if config.threads == Some(0) {
        return Err(FluidError::invalid(
            "threads",
            0,
            "expected at least 1 thread",
        ));
    }
    let axis = scenario.sweep.clone().unwrap_or(SweepAxis {
        variable: "-".to_string(),
        values: vec![0.0],
    });
    let swept = scenario.sweep.is_some();
    let sources = axis
        .values
        .iter()
        .map(|&x| scenario.at(swept.then_some(x)))
        .collect::<Result<Vec<_>, _>>()?;
    let random = sources.iter().any(|s| s.is_random());
    let tasks: Vec<(usize, usize)> = (0..axis.values.len())
        .flat_map(|v| (0..config.workloads).map(move |k| (v, k)))
        .collect();
    let work = || {
        tasks
            .par_iter()
            .map(|&(v, k)| {
                let seed = workload_seed(config.seed, k);
                let w = sources[v].workload(seed)?;
                let options = SimOptions {
                    seed,
                    record: false,
                    stop_at_window_end: config.stop_at_window_end,
                    bounds: config.bounds,
                };
                let rows = config
                    .heuristics
                    .iter()
                    .map(|&h| {
                        let r = simulate(&w, h, options)?;
                        Ok(SweepRow {
                            value: axis.values[v],
                            workload: k,
                            seed,
                            heuristic: h,
                            metrics: r.metrics,
                            jobs: w.jobs.len(),
                            events: r.events,
                        })
                    })
                    .collect::<Result<Vec<_>, FluidError>>();
                on_task();
                rows
            })
            .collect::<Result<Vec<Vec<SweepRow>>, FluidError>>()
    };
    let rows = match config.threads {
        None => work()?,
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .map_err(|e| FluidError::invalid("threads", n, e.to_string()))?
            .install(work)?,
    };
    Ok(SweepResult {
        name: scenario.name.clone(),
        variable: axis.variable,
        values: axis.values,
        heuristics: config.heuristics.clone(),
        workloads: config.workloads,
        seed: config.seed,
        random,
        bounds: config.bounds,
        rows: rows.into_iter().flatten().collect(),
    })
}

impl SweepResult {
    /// The total number of events simulated.
    pub fn events(&self) -> u64 {
        self.rows.iter().map(|r| r.events).sum()
    }

    /// The aggregates, one per (value, heuristic), values in order then heuristics in order.
    pub fn points(&self) -> Vec<SweepPoint> {
        let mut out = Vec::new();
        for &x in &self.values {
            for h in &self.heuristics {
                let runs: Vec<&SweepRow> = self
                    .rows
                    .iter()
                    .filter(|r| r.value == x && r.heuristic == *h)
                    .collect();
                let stat = |i: usize| Stat::of(runs.iter().map(|r| r.metrics.values()[i]));
                out.push(SweepPoint {
                    value: x,
                    heuristic: h.to_string(),
                    max_stretch: stat(0),
                    geomean_stretch: stat(1),
                    io_slowdown: stat(2),
                    utilization: stat(3),
                });
            }
        }
        out
    }

    /// The columns of [`SweepResult::write_csv`]: the swept variable (`point` for a sweep without
    /// variable), `workload`, `seed`, `heuristic`, the four metrics ([`METRIC_NAMES`]),
    /// `measured_jobs`, `jobs`, `events`.
    pub fn columns(&self) -> Vec<String> {
        let mut c = vec![
            csv_name(&self.variable),
            "workload".to_string(),
            "seed".to_string(),
            "heuristic".to_string(),
        ];
        c.extend(METRIC_NAMES.iter().map(|m| m.to_string()));
        c.extend(["measured_jobs", "jobs", "events"].map(String::from));
        c
    }

    /// One row's values, in the order of [`SweepResult::columns`] (front ends that want rows
    /// rather than a CSV file, e.g. the Python bindings, use these).
    pub fn cells(row: &SweepRow) -> Vec<Cell> {
        let mut c = vec![
            Cell::Value(row.value),
            Cell::Int(row.workload as u64),
            Cell::Int(row.seed),
            Cell::Text(row.heuristic.to_string()),
        ];
        c.extend(row.metrics.values().map(Cell::Metric));
        c.extend([
            Cell::Int(row.metrics.measured_jobs as u64),
            Cell::Int(row.jobs as u64),
            Cell::Int(row.events),
        ]);
        c
    }

    /// Writes every run as CSV: a header of [`SweepResult::columns`], then a line per row of
    /// [`SweepResult::cells`].
    pub fn write_csv<W: Write>(&self, mut out: W) -> std::io::Result<()> {
        writeln!(out, "{}", self.columns().join(","))?;
        for r in &self.rows {
            let cells: Vec<String> = Self::cells(r).iter().map(Cell::to_string).collect();
            writeln!(out, "{}", cells.join(","))?;
        }
        out.flush()
    }

    /// Writes the sweep's description and its aggregates as JSON (the rows are in the CSV).
    pub fn write_json<W: Write>(&self, out: W) -> serde_json::Result<()> {
        #[derive(Serialize)]
        struct Doc<'a> {
            name: &'a str,
            variable: &'a str,
            values: &'a [f64],
            heuristics: Vec<String>,
            workloads: usize,
            seed: u64,
            random: bool,
            bounds: Option<BoundsReport>,
            runs: usize,
            events: u64,
            points: Vec<SweepPoint>,
        }
        serde_json::to_writer_pretty(
            out,
            &Doc {
                name: &self.name,
                variable: &self.variable,
                values: &self.values,
                heuristics: self.heuristics.iter().map(|h| h.to_string()).collect(),
                workloads: self.workloads,
                seed: self.seed,
                random: self.random,
                bounds: BoundsReport::of(self.bounds),
                runs: self.rows.len(),
                events: self.events(),
                points: self.points(),
            },
        )
    }

    /// [`SweepResult::write_csv`] to a file.
    pub fn save_csv(&self, path: &Path) -> Result<(), FluidError> {
        let io = |error| FluidError::Io {
            path: path.to_path_buf(),
            error,
        };
        let f = std::fs::File::create(path).map_err(io)?;
        self.write_csv(std::io::BufWriter::new(f)).map_err(io)
    }

    /// [`SweepResult::write_json`] to a file.
    pub fn save_json(&self, path: &Path) -> Result<(), FluidError> {
        let f = std::fs::File::create(path).map_err(|error| FluidError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        let mut w = std::io::BufWriter::new(f);
        self.write_json(&mut w).map_err(|e| FluidError::Json {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        w.flush().map_err(|error| FluidError::Io {
            path: path.to_path_buf(),
            error,
        })
    }
}

/// One value of a sweep row (see [`SweepResult::cells`]); its `Display` is its CSV text.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// The swept variable's value (shortest text that reads back the same).
    Value(f64),
    /// A metric (9 decimals in CSV; NaN when no job was measured).
    Metric(f64),
    /// A count or a seed.
    Int(u64),
    /// A name.
    Text(String),
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cell::Value(x) => write!(f, "{x}"),
            Cell::Metric(x) => write!(f, "{x:.9}"),
            Cell::Int(n) => write!(f, "{n}"),
            Cell::Text(t) => f.write_str(t),
        }
    }
}

/// Where [`SweepResult::save`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Saved {
    /// Every run, `NAME.csv`.
    pub csv: PathBuf,
    /// The aggregates, `NAME.json`.
    pub json: PathBuf,
    /// One plot per metric, `NAME-METRIC.svg` (none if not asked for).
    pub plots: Vec<PathBuf>,
}

impl SweepResult {
    /// Writes `NAME.csv`, `NAME.json` and, if `plots`, one `NAME-METRIC.svg` per metric into
    /// `dir` (created if missing), `NAME` being the scenario's name.
    pub fn save(&self, dir: &Path, plots: bool) -> Result<Saved, FluidError> {
        std::fs::create_dir_all(dir).map_err(|error| FluidError::Io {
            path: dir.to_path_buf(),
            error,
        })?;
        let csv = dir.join(format!("{}.csv", self.name));
        let json = dir.join(format!("{}.json", self.name));
        self.save_csv(&csv)?;
        self.save_json(&json)?;
        let plots = if plots {
            super::plot::save_all(dir, self)?
        } else {
            Vec::new()
        };
        Ok(Saved { csv, json, plots })
    }
}

fn csv_name(v: &str) -> String {
    if v == "-" {
        "point".to_string()
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const SWEEP: &str = r#"
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
    "#;

    fn scenario() -> Scenario {
        Scenario::parse(SWEEP, Path::new("tiny.toml"), "tiny").unwrap()
    }

    fn config(threads: Option<usize>) -> SweepConfig {
        SweepConfig {
            workloads: 3,
            seed: 9,
            heuristics: scenario().heuristics,
            threads,
            stop_at_window_end: true,
            bounds: TurnBounds::NONE,
        }
    }

    #[test]
    fn rows_are_ordered_and_reproducible_whatever_the_threads() {
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let count = || {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        };
        let a = run_sweep(&scenario(), &config(Some(1)), &count).unwrap();
        let b = run_sweep(&scenario(), &config(Some(2)), &|| {}).unwrap();
        assert_eq!(calls.into_inner(), 2 * 3);
        assert_eq!(a, b);
        assert_eq!(a.rows.len(), 2 * 3 * 3);
        let order: Vec<(f64, usize, String)> = a
            .rows
            .iter()
            .take(4)
            .map(|r| (r.value, r.workload, r.heuristic.to_string()))
            .collect();
        assert_eq!(
            order,
            vec![
                (1.0, 0, "fair-share".to_string()),
                (1.0, 0, "set-10".to_string()),
                (1.0, 0, "set-10:error=0.5".to_string()),
                (1.0, 1, "fair-share".to_string()),
            ]
        );
        assert!(a.random);
        // Each row equals a direct simulation of its workload.
        let r = &a.rows[4];
        let w = scenario().at(Some(1.0)).unwrap().workload(r.seed).unwrap();
        let direct = simulate(
            &w,
            r.heuristic,
            SimOptions {
                seed: r.seed,
                record: false,
                stop_at_window_end: true,
                ..SimOptions::default()
            },
        )
        .unwrap();
        assert_eq!(direct.metrics, r.metrics);
    }

    #[test]
    fn points_aggregate_the_workloads() {
        let res = run_sweep(&scenario(), &config(None), &|| {}).unwrap();
        let points = res.points();
        assert_eq!(points.len(), 2 * 3);
        let p = &points[1];
        assert_eq!((p.value, p.heuristic.as_str()), (1.0, "set-10"));
        let xs: Vec<f64> = res
            .rows
            .iter()
            .filter(|r| r.value == 1.0 && r.heuristic.to_string() == "set-10")
            .map(|r| r.metrics.max_stretch)
            .collect();
        assert_eq!(xs.len(), 3);
        assert_eq!(p.max_stretch.runs, 3);
        assert!((p.max_stretch.mean - xs.iter().sum::<f64>() / 3.0).abs() < 1e-12);
        assert_eq!(
            p.max_stretch.max,
            xs.iter().cloned().fold(f64::MIN, f64::max)
        );
        let mut csv = Vec::new();
        res.write_csv(&mut csv).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        assert!(csv.starts_with(
            "n,workload,seed,heuristic,max_stretch,geomean_stretch,io_slowdown,utilization,measured_jobs,jobs,events\n"
        ));
        assert_eq!(csv.lines().count(), 1 + 18);
        let mut json = Vec::new();
        res.write_json(&mut json).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["points"].as_array().unwrap().len(), 6);
        assert_eq!(v["variable"], "n");
        assert_eq!(v["points"][1]["max_stretch"]["runs"], 3);
    }

    #[test]
    fn stats_ignore_nan() {
        let s = Stat::of([3.0, f64::NAN, 1.0, 2.0, 10.0].into_iter());
        assert_eq!(
            (s.runs, s.min, s.max, s.median, s.mean),
            (4, 1.0, 10.0, 2.5, 4.0)
        );
        assert!(Stat::of(std::iter::empty()).mean.is_nan());
    }

    #[test]
    fn bad_configs_are_named() {
        let mut c = config(None);
        c.workloads = 0;
        let e = run_sweep(&scenario(), &c, &|| {}).unwrap_err().to_string();
        assert!(e.contains("workloads = 0"), "{e}");
        let mut c = config(Some(0));
        c.workloads = 1;
        let e = run_sweep(&scenario(), &c, &|| {}).unwrap_err().to_string();
        assert!(e.contains("threads = 0"), "{e}");
    }

    #[test]
    fn workload_seeds_differ() {
        let s: std::collections::BTreeSet<u64> = (0..100).map(|k| workload_seed(1, k)).collect();
        assert_eq!(s.len(), 100);
        assert_ne!(workload_seed(1, 0), workload_seed(2, 0));
    }

    #[test]
    fn cells_are_the_csv_columns_and_save_writes_every_file() {
        let s = Scenario::parse(SWEEP, Path::new("tiny.toml"), "tiny").unwrap();
        let config = SweepConfig {
            workloads: 2,
            seed: 1,
            heuristics: s.heuristics.clone(),
            threads: Some(1),
            stop_at_window_end: true,
            bounds: TurnBounds::NONE,
        };
        let r = run_sweep(&s, &config, &|| {}).unwrap();
        let cols = r.columns();
        assert_eq!(cols[..4], ["n", "workload", "seed", "heuristic"]);
        assert_eq!(cols.len(), 11);
        let mut csv = Vec::new();
        r.write_csv(&mut csv).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        let mut lines = csv.lines();
        assert_eq!(lines.next().unwrap(), cols.join(","));
        for (line, row) in lines.zip(&r.rows) {
            let cells = SweepResult::cells(row);
            assert_eq!(cells.len(), cols.len());
            assert_eq!(cells[3], Cell::Text(row.heuristic.to_string()));
            let text: Vec<String> = cells.iter().map(Cell::to_string).collect();
            assert_eq!(line, text.join(","));
        }
        let dir = std::env::temp_dir().join(format!("iosets-sweep-save-{}", std::process::id()));
        let saved = r.save(&dir, false).unwrap();
        assert!(saved.csv.ends_with("tiny.csv") && saved.plots.is_empty());
        assert_eq!(std::fs::read_to_string(&saved.csv).unwrap(), csv);
        assert!(saved.json.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
