//! The outputs: `runs.csv` (one row per run), `phases.csv` (every phase of both jobs),
//! `means.csv` (per metric and setting, with the ratios), the two figures, and the tables and
//! verdicts printed at the end.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::analysis::{Metric, Ratio, RunResult, Series};
use super::params::{Params, Setting};
use super::plots;
use crate::app::mdtest::Phase;
use crate::seed004::report::write;

/// Seed 003's goals, as the brief states them.
/// The light job's rates on over off, at least.
const ON_OVER_OFF: f64 = 3.0;
/// The light job's rates on over reference, at least.
const ON_OVER_REFERENCE: f64 = 0.5;
/// The stage-in on over reference, at most.
const STAGEIN_ON_WITHIN: f64 = 1.5;
/// The stage-in off over reference, at least.
const STAGEIN_OFF_SLOWER: f64 = 5.0;

/// A CSV number (empty when not finite): the seed 004 report's, for one value.
fn num(x: f64) -> String {
    crate::seed004::report::num(Some(x))
}

/// `runs.csv`.
pub(crate) fn runs_csv(runs: &[RunResult]) -> String {
    let mut s = String::from(
        "setting,rep,light_create_ops_s,light_stat_ops_s,light_remove_ops_s,stagein_s,\
         stagein_completed,light_wall_s,server_cpu_s,server_cpu_pct_core,\
         server_cpu_pct_machine,stagein_server_cpu_pct_core,light_requests_per_op,heavy_requests_s,\
         heavy_create_ops_s,heavy_stat_ops_s,heavy_remove_ops_s,snapshot_jobs,rule_jobs\n",
    );
    let ids = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
    for r in runs {
        let (stagein, done) = r.stagein_s();
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{done},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.setting.name(),
            r.rep,
            num(r.light_rate(Phase::Create)),
            num(r.light_rate(Phase::Stat)),
            num(r.light_rate(Phase::Remove)),
            num(stagein),
            num(r.measured.light_wall_s),
            num(r.measured.light_cpu_s),
            num(r.cpu_pct_core()),
            num(r.cpu_pct_machine()),
            num(r.stagein_cpu_pct_core()),
            num(r.light_requests_per_op()),
            num(r.heavy_requests_s()),
            num(r.heavy_rate(Phase::Create)),
            num(r.heavy_rate(Phase::Stat)),
            num(r.heavy_rate(Phase::Remove)),
            ids(&r.snapshot_jobs),
            ids(&r.rule_jobs),
        );
    }
    s
}

/// `phases.csv`: every phase of every job of every run (mdtest's rate per phase).
pub(crate) fn phases_csv(runs: &[RunResult]) -> String {
    let mut s = String::from(
        "setting,rep,job,iteration,phase,ranks,ops,start_unix_s,end_unix_s,seconds,ops_per_s\n",
    );
    for r in runs {
        for p in r.light.iter().chain(&r.heavy).chain(r.stagein.iter()) {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{:.6},{:.6},{},{}",
                r.setting.name(),
                r.rep,
                p.job,
                p.iteration,
                p.phase.name(),
                p.ranks,
                p.ops,
                p.start,
                p.end,
                num(p.seconds()),
                num(p.rate())
            );
        }
    }
    s
}

/// `means.csv`: per metric, each setting's mean (and whether it is a lower bound) and the
/// ratios on/off and on/reference.
pub(crate) fn means_csv(runs: &[RunResult]) -> String {
    let mut s = String::from(
        "metric,reference,reference_lower_bound,off,off_lower_bound,on,on_lower_bound,\
         on_over_off,on_over_reference\n",
    );
    for m in Metric::ALL {
        let [r, off, on] = Setting::ALL.map(|x| Series::of(runs, x, m).mean());
        let ratio = |a, b| match Ratio::of(a, b) {
            Ratio::Exact(x) | Ratio::AtLeast(x) | Ratio::AtMost(x) => num(x),
            Ratio::Unknown => String::new(),
        };
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{}",
            m.key(),
            num(r.0),
            r.1,
            num(off.0),
            off.1,
            num(on.0),
            on.1,
            ratio(on, off),
            ratio(on, r),
        );
    }
    s
}

/// Writes the CSV files and the figures into `out`; returns what was written.
pub(crate) fn write_all(p: &Params, runs: &[RunResult], out: &Path) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (name, text) in [
        ("runs.csv", runs_csv(runs)),
        ("phases.csv", phases_csv(runs)),
        ("means.csv", means_csv(runs)),
    ] {
        let path = out.join(name);
        write(&path, &text)?;
        written.push(path);
    }
    let reps = runs.iter().map(|r| r.rep).max().unwrap_or(0);
    let rates = out.join("seed003-rates.svg");
    let bars: Vec<plots::Group> = [Metric::Create, Metric::Stat, Metric::Remove]
        .into_iter()
        .map(|m| plots::Group {
            name: m.phase().expect("a rate").name().to_string(),
            series: Setting::ALL.map(|s| Series::of(runs, s, m)).to_vec(),
        })
        .collect();
    plots::save_bars(
        &rates,
        &bars,
        &format!(
            "seed 003 through the mount: the light job's mdtest (job 2, {} processes, -n {}), \
             {reps} repetition{}",
            p.light_procs,
            p.files,
            if reps == 1 { "" } else { "s" }
        ),
        "ops/s (log scale; bar: mean, dot: repetition)",
    )
    .with_context(|| format!("drawing {}", rates.display()))?;
    written.push(rates);
    let stagein = out.join("seed003-stagein.svg");
    plots::save_bars(
        &stagein,
        &[plots::Group {
            name: format!("{} rank directories", p.stagein_dirs),
            series: Setting::ALL
                .map(|s| Series::of(runs, s, Metric::Stagein))
                .to_vec(),
        }],
        &format!(
            "seed 003's stage-in through the mount: t_E − t_S, {reps} repetition{} \
             (▲: stopped at {} s, a lower bound)",
            if reps == 1 { "" } else { "s" },
            p.stagein_limit_s
        ),
        "seconds (log scale; bar: mean, dot: repetition)",
    )
    .with_context(|| format!("drawing {}", stagein.display()))?;
    written.push(stagein);
    Ok(written)
}

/// A table cell: the value, `≥` before a lower bound, `-` for none.
fn cell(v: (f64, bool), digits: usize) -> String {
    if !v.0.is_finite() {
        return "-".into();
    }
    format!("{}{:.*}", if v.1 { "≥" } else { "" }, digits, v.0)
}

/// The tables: per metric, each setting's repetitions and mean; then the ratios.
pub(crate) fn tables(p: &Params, runs: &[RunResult]) -> String {
    let reps = runs.iter().map(|r| r.rep).max().unwrap_or(0);
    let mut s = String::new();
    let head = |s: &mut String, what: &str| {
        let _ = write!(s, "{what:<22} {:<10}", "setting");
        for r in 1..=reps {
            let _ = write!(s, " {:>10}", format!("#{r}"));
        }
        let _ = writeln!(s, " {:>10}", "mean");
    };
    let row = |s: &mut String, label: &str, setting: Setting, m: Metric, digits: usize| {
        let series = Series::of(runs, setting, m);
        let _ = write!(s, "{label:<22} {:<10}", setting.name());
        for v in &series.values {
            let _ = write!(s, " {:>10}", cell(*v, digits));
        }
        for _ in series.values.len()..reps {
            let _ = write!(s, " {:>10}", "-");
        }
        let _ = writeln!(s, " {:>10}", cell(series.mean(), digits));
    };
    let _ = writeln!(
        s,
        "light job's mdtest (job 2, {} processes, -n {} -i {}): ops/s, per repetition the mean \
         over its iterations of mdtest's rate",
        p.light_procs, p.files, p.light_iterations
    );
    head(&mut s, "phase");
    for m in [Metric::Create, Metric::Stat, Metric::Remove] {
        for setting in Setting::ALL {
            let label = if setting == Setting::Reference {
                m.phase().expect("a rate").name()
            } else {
                ""
            };
            row(&mut s, label, setting, m, 1);
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "stage-in (job 2, {} processes, {} rank directories): t_E − t_S in seconds (≥: stopped \
         at {} s)",
        p.light_procs, p.stagein_dirs, p.stagein_limit_s
    );
    head(&mut s, "");
    for setting in Setting::ALL {
        row(&mut s, "t_rnk_d", setting, Metric::Stagein, 3);
    }
    let _ = writeln!(s);
    let cores = runs.first().map_or(1, |r| r.measured.cores);
    let _ = writeln!(
        s,
        "server CPU (user + system) during the light job's mdtest: % of one core (÷ {cores} for \
         the machine's {cores} cores)"
    );
    head(&mut s, "");
    for setting in Setting::ALL {
        row(&mut s, "cpu %", setting, Metric::Cpu, 1);
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "heavy job (job 1, {} processes, -n {}): requests served per second during the light \
         job's mdtest (all kinds), and ops/s of its phases that ended during the run",
        p.heavy_procs, p.files
    );
    for setting in [Setting::Off, Setting::On] {
        let mut rs: Vec<&RunResult> = runs.iter().filter(|r| r.setting == setting).collect();
        rs.sort_by_key(|r| r.rep);
        let fmt = |x: f64| {
            if x.is_finite() {
                format!("{x:.1}")
            } else {
                "-".into()
            }
        };
        let v: Vec<String> = rs.iter().map(|r| fmt(r.heavy_requests_s())).collect();
        let _ = writeln!(
            s,
            "  {:<4} {:<9} {}",
            setting.name(),
            "requests",
            v.join("  ")
        );
        for phase in Phase::MDTEST {
            let v: Vec<String> = rs.iter().map(|r| fmt(r.heavy_rate(phase))).collect();
            let _ = writeln!(
                s,
                "  {:<4} {:<9} {}",
                setting.name(),
                phase.name(),
                v.join("  ")
            );
        }
    }
    let _ = writeln!(s);
    let per_op: Vec<String> = runs
        .iter()
        .map(|r| {
            format!(
                "{} #{} {:.2}",
                r.setting.name(),
                r.rep,
                r.light_requests_per_op()
            )
        })
        .collect();
    let _ = writeln!(
        s,
        "server requests per light file operation (with no attribute cache the kernel looks up \
         and reads the attributes of each path component too): {}",
        per_op.join(", ")
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "ratios of the means");
    let _ = writeln!(
        s,
        "{:<22} {:>12} {:>14}",
        "metric", "on/off", "on/reference"
    );
    for m in Metric::ALL {
        let [r, off, on] = Setting::ALL.map(|x| Series::of(runs, x, m).mean());
        let _ = writeln!(
            s,
            "{:<22} {:>12} {:>14}",
            m.key(),
            Ratio::of(on, off).text(),
            Ratio::of(on, r).text()
        );
    }
    s
}

/// A goal's verdict as a word.
fn verdict_word(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "MET",
        Some(false) => "NOT MET",
        None => "UNDECIDED",
    }
}

/// Whether every part of a goal holds: false if one surely does not, unknown if one is unknown.
fn all(vs: impl IntoIterator<Item = Option<bool>>) -> Option<bool> {
    let mut out = Some(true);
    for v in vs {
        match v {
            Some(false) => return Some(false),
            None => out = None,
            Some(true) => {}
        }
    }
    out
}

/// One line per goal of seed 003, on the means, with the measured figures.
pub(crate) fn verdicts(runs: &[RunResult]) -> Vec<String> {
    let rates = [Metric::Create, Metric::Stat, Metric::Remove];
    let ratios = |num: Setting, den: Setting| -> Vec<(Metric, Ratio)> {
        rates
            .iter()
            .map(|&m| {
                (
                    m,
                    Ratio::of(
                        Series::of(runs, num, m).mean(),
                        Series::of(runs, den, m).mean(),
                    ),
                )
            })
            .collect()
    };
    let list = |rs: &[(Metric, Ratio)]| {
        rs.iter()
            .map(|(m, r)| format!("{} {}", m.phase().expect("a rate").name(), r.text()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    let on_off = ratios(Setting::On, Setting::Off);
    out.push(format!(
        "goal: the light job's rates with the quota at least {ON_OVER_OFF}× without (on/off): \
         {} — {}",
        list(&on_off),
        verdict_word(all(on_off.iter().map(|(_, r)| r.at_least(ON_OVER_OFF))))
    ));
    let on_ref = ratios(Setting::On, Setting::Reference);
    out.push(format!(
        "goal: the light job's rates with the quota at least {:.0}% of alone (on/reference): \
         {} — {}",
        ON_OVER_REFERENCE * 100.0,
        list(&on_ref),
        verdict_word(all(on_ref
            .iter()
            .map(|(_, r)| r.at_least(ON_OVER_REFERENCE))))
    ));
    let st = |s: Setting| Series::of(runs, s, Metric::Stagein).mean();
    let on = Ratio::of(st(Setting::On), st(Setting::Reference));
    out.push(format!(
        "goal: the stage-in with the quota within {STAGEIN_ON_WITHIN}× of alone: on/reference \
         {} ({} s vs {} s) — {}",
        on.text(),
        cell(st(Setting::On), 3),
        cell(st(Setting::Reference), 3),
        verdict_word(on.at_most(STAGEIN_ON_WITHIN))
    ));
    let off = Ratio::of(st(Setting::Off), st(Setting::Reference));
    out.push(format!(
        "goal: the stage-in without the quota at least {STAGEIN_OFF_SLOWER}× slower than alone: \
         off/reference {} ({} s vs {} s) — {}",
        off.text(),
        cell(st(Setting::Off), 3),
        cell(st(Setting::Reference), 3),
        verdict_word(off.at_least(STAGEIN_OFF_SLOWER))
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_combine_bounds() {
        assert_eq!(all([Some(true), Some(true)]), Some(true));
        assert_eq!(all([Some(true), None]), None);
        assert_eq!(all([None, Some(false)]), Some(false));
        assert_eq!(cell((1.23456, true), 2), "≥1.23");
        assert_eq!(cell((f64::NAN, false), 2), "-");
    }
}
