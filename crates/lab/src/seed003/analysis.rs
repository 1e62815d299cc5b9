//! The runs' numbers, from what they left on disk: the light job's mdtest rates (per phase, the
//! mean over its iterations of mdtest's rate), the stage-in's `t_E − t_S`, the server's CPU
//! use, the heavy job's rates for context, and which jobs the server listed under the quota
//! rule. The same code serves a fresh run and `--analyze`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::params::{Params, Setting, HEAVY_JOB, LIGHT_JOB, RULE};
use super::run::Measured;
use crate::app::mdtest::{parse_log, phase_rates, Phase, PhaseRate};

/// One run's numbers.
#[derive(Clone, Debug)]
pub(crate) struct RunResult {
    /// The setting.
    pub(crate) setting: Setting,
    /// The repetition, from 1.
    pub(crate) rep: usize,
    /// Its directory.
    pub(crate) dir: PathBuf,
    /// The light job's phases, by iteration then phase.
    pub(crate) light: Vec<PhaseRate>,
    /// The heavy job's phases that every process finished (none in `reference`).
    pub(crate) heavy: Vec<PhaseRate>,
    /// The stage-in merged over its processes, if it completed.
    pub(crate) stagein: Option<PhaseRate>,
    /// What the harness measured.
    pub(crate) measured: Measured,
    /// Jobs the snapshot lists with operations.
    pub(crate) snapshot_jobs: Vec<u64>,
    /// Jobs the snapshot lists under the quota rule.
    pub(crate) rule_jobs: Vec<u64>,
}

impl RunResult {
    /// The light job's rate in `phase`: the mean over its iterations of mdtest's rate.
    pub(crate) fn light_rate(&self, phase: Phase) -> f64 {
        mean_rate(&self.light, phase)
    }

    /// The heavy job's mean rate in `phase` over its finished phases (NaN without any).
    pub(crate) fn heavy_rate(&self, phase: Phase) -> f64 {
        mean_rate(&self.heavy, phase)
    }

    /// The stage-in's `t_E − t_S`, and whether it completed (if not: the time it ran before it
    /// was stopped, a lower bound).
    pub(crate) fn stagein_s(&self) -> (f64, bool) {
        match &self.stagein {
            Some(r) => (r.seconds(), true),
            None => (self.measured.stagein_wall_s, false),
        }
    }

    /// The server's CPU use over the light job's mdtest, percent of one core.
    pub(crate) fn cpu_pct_core(&self) -> f64 {
        100.0 * self.measured.light_cpu_s / self.measured.light_wall_s
    }

    /// The same, percent of the machine's cores.
    pub(crate) fn cpu_pct_machine(&self) -> f64 {
        self.cpu_pct_core() / self.measured.cores.max(1) as f64
    }

    /// The heavy job's requests served per second during the light job's mdtest.
    pub(crate) fn heavy_requests_s(&self) -> f64 {
        self.measured.heavy_requests as f64 / self.measured.light_wall_s
    }

    /// The light job's server requests per file operation of its mdtest (the kernel's lookups
    /// and attribute reads of each path component included).
    pub(crate) fn light_requests_per_op(&self) -> f64 {
        let ops: u64 = self.light.iter().map(|r| r.ops).sum();
        self.measured.light_requests as f64 / ops as f64
    }

    /// The server's CPU use over the stage-in, percent of one core.
    pub(crate) fn stagein_cpu_pct_core(&self) -> f64 {
        100.0 * self.measured.stagein_cpu_s / self.measured.stagein_wall_s
    }
}

/// The mean of `xs` (NaN when empty).
/// The mean rate of `rates`' phases of kind `phase` (NaN without any).
fn mean_rate(rates: &[PhaseRate], phase: Phase) -> f64 {
    let of_phase: Vec<f64> = rates
        .iter()
        .filter(|r| r.phase == phase)
        .map(PhaseRate::rate)
        .collect();
    mean(&of_phase)
}

pub(crate) fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        f64::NAN
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// The rows of an mdtest log, the error naming the file.
fn read_log(path: &Path) -> Result<Vec<crate::app::mdtest::Row>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_log(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Reads the run in `dir` and checks that its logs are whole.
pub(crate) fn load_run(p: &Params, setting: Setting, rep: usize, dir: &Path) -> Result<RunResult> {
    if !dir.is_dir() {
        bail!("{}: no such run directory", dir.display());
    }
    let measured = Measured::load(dir)?;
    let light_log = dir.join("light.csv");
    let rows = read_log(&light_log)?;
    if let Some(r) = rows.iter().find(|r| r.job != LIGHT_JOB) {
        bail!(
            "{}: a row of job {} (expected only job {LIGHT_JOB})",
            light_log.display(),
            r.job
        );
    }
    let light = phase_rates(&rows);
    for it in 0..p.light_iterations {
        for phase in Phase::MDTEST {
            let Some(r) = light.iter().find(|r| r.iteration == it && r.phase == phase) else {
                bail!(
                    "{}: iteration {it} has no {} phase (the run did not finish)",
                    light_log.display(),
                    phase.name()
                );
            };
            let expected = u64::from(p.light_procs) * p.files;
            if r.ranks != p.light_procs as usize || r.ops != expected {
                bail!(
                    "{}: iteration {it}, {}: {} ranks and {} operations, expected {} and \
                     {expected}",
                    light_log.display(),
                    phase.name(),
                    r.ranks,
                    r.ops,
                    p.light_procs
                );
            }
        }
    }
    if light.len() != (p.light_iterations * 3) as usize {
        bail!(
            "{}: {} phases, expected {} (made with other parameters than {}?)",
            light_log.display(),
            light.len(),
            p.light_iterations * 3,
            dir.parent().and_then(Path::parent).map_or_else(
                || "params.json".into(),
                |d| d.join("params.json").display().to_string()
            )
        );
    }
    let heavy = if setting.heavy() {
        let heavy_log = dir.join("heavy.csv");
        // The heavy job is killed at the end: its last phases may be partial.
        let rows = read_log(&heavy_log).unwrap_or_default();
        phase_rates(&rows)
            .into_iter()
            .filter(|r| r.job == HEAVY_JOB && r.ranks == p.heavy_procs as usize)
            .collect()
    } else {
        Vec::new()
    };
    let stagein = if measured.stagein_completed {
        let log = dir.join("stagein.csv");
        let rows = read_log(&log)?;
        let merged = phase_rates(&rows);
        match merged.as_slice() {
            [r] if r.phase == Phase::Mkdir
                && r.ranks == p.light_procs as usize
                && r.ops == p.stagein_dirs =>
            {
                Some(*r)
            }
            _ => bail!(
                "{}: expected one mkdir row per process ({}) making {} directories in all",
                log.display(),
                p.light_procs,
                p.stagein_dirs
            ),
        }
    } else {
        None
    };
    let (snapshot_jobs, rule_jobs) = snapshot_jobs(&dir.join("snapshot-jobs.json"))?;
    Ok(RunResult {
        setting,
        rep,
        dir: dir.to_path_buf(),
        light,
        heavy,
        stagein,
        measured,
        snapshot_jobs,
        rule_jobs,
    })
}

/// The jobs a job-statistics snapshot lists with operations, and those it lists under the rule.
pub(crate) fn snapshot_jobs(path: &Path) -> Result<(Vec<u64>, Vec<u64>)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let Some(jobs) = v.get("jobs").and_then(Value::as_array) else {
        bail!("{}: no jobs list", path.display());
    };
    let mut listed = Vec::new();
    let mut ruled = Vec::new();
    for j in jobs {
        let Some(id) = j.get("job").and_then(Value::as_u64) else {
            continue;
        };
        if j.get("ops").and_then(Value::as_u64).unwrap_or(0) > 0 {
            listed.push(id);
        }
        let under = j.get("rules").and_then(Value::as_array).is_some_and(|r| {
            r.iter()
                .any(|x| x.get("rule").and_then(Value::as_str) == Some(RULE))
        });
        if under {
            ruled.push(id);
        }
    }
    listed.sort_unstable();
    ruled.sort_unstable();
    Ok((listed, ruled))
}

/// The run directories of an earlier `--out DIR`: `DIR/runs/<setting>-<rep>`, every setting
/// with the same repetitions 1..=R.
pub(crate) fn discover(out: &Path) -> Result<Vec<(Setting, usize, PathBuf)>> {
    let runs = out.join("runs");
    let entries =
        std::fs::read_dir(&runs).with_context(|| format!("reading {}", runs.display()))?;
    let mut found: Vec<(Setting, usize, PathBuf)> = Vec::new();
    for e in entries {
        let e = e.with_context(|| format!("reading {}", runs.display()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((s, r)) = name.rsplit_once('-') else {
            continue;
        };
        let (Some(setting), Ok(rep)) = (Setting::parse(s), r.parse::<usize>()) else {
            continue;
        };
        if rep >= 1 && e.path().is_dir() {
            found.push((setting, rep, e.path()));
        }
    }
    found.sort_by_key(|(s, r, _)| (*r, *s));
    for s in Setting::ALL {
        if !found.iter().any(|(x, _, _)| *x == s) {
            bail!(
                "{}: no run of the {} setting (expected {}-1, …)",
                runs.display(),
                s.name(),
                s.name()
            );
        }
    }
    Ok(found)
}

/// One metric of the tables and the figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Metric {
    /// The light job's create rate, ops/s.
    Create,
    /// Its stat rate.
    Stat,
    /// Its remove rate.
    Remove,
    /// The stage-in's `t_E − t_S`, s.
    Stagein,
    /// The server's CPU over the light job's mdtest, % of one core.
    Cpu,
}

impl Metric {
    /// All of them, in table order.
    pub(crate) const ALL: [Metric; 5] = [
        Metric::Create,
        Metric::Stat,
        Metric::Remove,
        Metric::Stagein,
        Metric::Cpu,
    ];

    /// Its key in CSV files.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Metric::Create => "light_create_ops_s",
            Metric::Stat => "light_stat_ops_s",
            Metric::Remove => "light_remove_ops_s",
            Metric::Stagein => "stagein_s",
            Metric::Cpu => "server_cpu_pct_core",
        }
    }

    /// The mdtest phase it is the rate of.
    pub(crate) fn phase(self) -> Option<Phase> {
        match self {
            Metric::Create => Some(Phase::Create),
            Metric::Stat => Some(Phase::Stat),
            Metric::Remove => Some(Phase::Remove),
            _ => None,
        }
    }

    /// Whether a run's value is a lower bound (a stage-in stopped at its limit).
    pub(crate) fn value(self, r: &RunResult) -> (f64, bool) {
        match self {
            Metric::Stagein => {
                let (s, done) = r.stagein_s();
                (s, !done)
            }
            Metric::Cpu => (r.cpu_pct_core(), false),
            m => (r.light_rate(m.phase().expect("a rate")), false),
        }
    }
}

/// A metric over the repetitions of one setting.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Series {
    /// Per repetition: the value and whether it is a lower bound.
    pub(crate) values: Vec<(f64, bool)>,
}

impl Series {
    /// The metric over `setting`'s runs, by repetition.
    pub(crate) fn of(runs: &[RunResult], setting: Setting, m: Metric) -> Series {
        let mut rs: Vec<&RunResult> = runs.iter().filter(|r| r.setting == setting).collect();
        rs.sort_by_key(|r| r.rep);
        Series {
            values: rs.iter().map(|r| m.value(r)).collect(),
        }
    }

    /// The mean, and whether it is a lower bound (a value in it is).
    pub(crate) fn mean(&self) -> (f64, bool) {
        let v: Vec<f64> = self.values.iter().map(|x| x.0).collect();
        (mean(&v), self.values.iter().any(|x| x.1))
    }
}

/// The ratio of two means with what it bounds: `Exact`, `AtLeast` (the numerator is a lower
/// bound), `AtMost` (the denominator is).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Ratio {
    /// Both means are measured.
    Exact(f64),
    /// The numerator is a lower bound, so is the ratio.
    AtLeast(f64),
    /// The denominator is a lower bound: the ratio is an upper bound.
    AtMost(f64),
    /// Both are lower bounds: nothing is known.
    Unknown,
}

impl Ratio {
    /// `a / b` of two means.
    pub(crate) fn of(a: (f64, bool), b: (f64, bool)) -> Ratio {
        let x = a.0 / b.0;
        match (a.1, b.1) {
            (false, false) => Ratio::Exact(x),
            (true, false) => Ratio::AtLeast(x),
            (false, true) => Ratio::AtMost(x),
            (true, true) => Ratio::Unknown,
        }
    }

    /// As text: `3.21×`, `≥ 3.21×`, `≤ 3.21×`, `?`.
    pub(crate) fn text(self) -> String {
        match self {
            Ratio::Exact(x) => format!("{x:.2}×"),
            Ratio::AtLeast(x) => format!("≥ {x:.2}×"),
            Ratio::AtMost(x) => format!("≤ {x:.2}×"),
            Ratio::Unknown => "?".into(),
        }
    }

    /// Whether the ratio is surely at least `t` (`Some(false)`: surely not; `None`: unknown).
    pub(crate) fn at_least(self, t: f64) -> Option<bool> {
        match self {
            Ratio::Exact(x) => Some(x.is_finite() && x >= t),
            Ratio::AtLeast(x) => (x >= t).then_some(true),
            Ratio::AtMost(x) => (x < t).then_some(false),
            Ratio::Unknown => None,
        }
    }

    /// Whether the ratio is surely at most `t`.
    pub(crate) fn at_most(self, t: f64) -> Option<bool> {
        match self {
            Ratio::Exact(x) => Some(x.is_finite() && x <= t),
            Ratio::AtLeast(x) => (x > t).then_some(false),
            Ratio::AtMost(x) => (x <= t).then_some(true),
            Ratio::Unknown => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(iteration: u32, phase: Phase, ops: u64, secs: f64) -> PhaseRate {
        PhaseRate {
            job: LIGHT_JOB,
            iteration,
            phase,
            ranks: 2,
            ops,
            start: 100.0,
            end: 100.0 + secs,
        }
    }

    fn run(setting: Setting, rep: usize, create_s: f64, stagein: Option<f64>) -> RunResult {
        RunResult {
            setting,
            rep,
            dir: PathBuf::new(),
            light: vec![
                rate(0, Phase::Create, 100, create_s),
                rate(1, Phase::Create, 100, create_s * 3.0),
                rate(0, Phase::Stat, 100, 1.0),
            ],
            heavy: Vec::new(),
            stagein: stagein.map(|s| PhaseRate {
                phase: Phase::Mkdir,
                ..rate(0, Phase::Mkdir, 1024, s)
            }),
            measured: Measured {
                light_wall_s: 10.0,
                light_cpu_s: 2.5,
                heavy_requests: 0,
                light_requests: 0,
                stagein_wall_s: 60.0,
                stagein_cpu_s: 1.0,
                stagein_completed: stagein.is_some(),
                cores: 2,
            },
            snapshot_jobs: vec![1, 2],
            rule_jobs: Vec::new(),
        }
    }

    #[test]
    fn a_rate_is_the_mean_over_iterations_of_mdtests_rate() {
        let r = run(Setting::Off, 1, 1.0, Some(2.0));
        // 100 ops/s and 33.3 ops/s: the mean of the rates, not total ops over total time.
        assert!((r.light_rate(Phase::Create) - (100.0 + 100.0 / 3.0) / 2.0).abs() < 1e-9);
        assert_eq!(r.light_rate(Phase::Stat), 100.0);
        assert!(r.light_rate(Phase::Remove).is_nan());
        assert_eq!(r.cpu_pct_core(), 25.0);
        assert_eq!(r.cpu_pct_machine(), 12.5);
        assert_eq!(r.stagein_s(), (2.0, true));
        assert_eq!(run(Setting::Off, 1, 1.0, None).stagein_s(), (60.0, false));
    }

    #[test]
    fn lower_bounds_carry_into_means_and_ratios() {
        let runs = vec![
            run(Setting::Reference, 1, 1.0, Some(1.0)),
            run(Setting::Off, 1, 1.0, Some(50.0)),
            run(Setting::Off, 2, 1.0, None),
        ];
        let off = Series::of(&runs, Setting::Off, Metric::Stagein);
        assert_eq!(off.values, vec![(50.0, false), (60.0, true)]);
        assert_eq!(off.mean(), (55.0, true));
        let reference = Series::of(&runs, Setting::Reference, Metric::Stagein).mean();
        let r = Ratio::of(off.mean(), reference);
        assert_eq!(r, Ratio::AtLeast(55.0));
        assert_eq!(r.at_least(5.0), Some(true));
        assert_eq!(r.at_most(1.5), Some(false));
        assert_eq!(Ratio::AtLeast(2.0).at_least(5.0), None);
        assert_eq!(Ratio::Exact(1.2).at_most(1.5), Some(true));
        assert_eq!(Ratio::Exact(f64::NAN).at_least(1.0), Some(false));
        assert_eq!(Ratio::AtMost(0.5).text(), "≤ 0.50×");
    }
}
