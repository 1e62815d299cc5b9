//! The experiment's outputs: `metrics.csv`, `jobs.csv`, `sim.csv`, the figures, and the tables
//! and verdicts on standard output.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::analysis::{better, change_pct, served, spread, Bandwidth, RunMetrics};
use super::overlap::Service;
use super::plots::{save_box, save_timeline, BoxSeries, METRIC_LABELS};
use super::Outcome;
use crate::seed004::plan::{Config, Plan};

/// A CSV number (empty when missing or not finite).
pub(crate) fn num(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite())
        .map_or_else(String::new, |x| format!("{x:.6}"))
}

/// Writes a file, the error naming it.
pub(crate) fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The runs of `config` with metrics, as values per metric.
pub(crate) fn values_of(metrics: &[RunMetrics], config: Config) -> [Vec<f64>; 4] {
    let mut out: [Vec<f64>; 4] = Default::default();
    for m in metrics.iter().filter(|m| m.config == config) {
        if let Some(v) = m.values() {
            for (o, x) in out.iter_mut().zip(v) {
                o.push(x);
            }
        }
    }
    out
}

/// `metrics.csv`: one row per run.
pub(crate) fn metrics_csv(plan: &Plan, o: &Outcome) -> String {
    let mut s = String::from(
        "config,rep,servers,max_stretch,geomean_stretch,io_slowdown,utilization,set_overlap,B,\
         B_source\n",
    );
    for m in &o.metrics {
        let v = m.values();
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{:.0},{}",
            m.config.name(),
            m.rep,
            plan.shape.servers,
            num(v.map(|v| v[0])),
            num(v.map(|v| v[1])),
            num(v.map(|v| v[2])),
            num(v.map(|v| v[3])),
            num(m.set_overlap),
            o.bandwidth.bytes_s,
            o.bandwidth.source(),
        );
    }
    s
}

/// `jobs.csv`: one row per job of each run.
pub(crate) fn jobs_csv(plan: &Plan, o: &Outcome) -> String {
    let mut s =
        String::from("config,rep,job,kind,io_phases,e_cpu_s,e_io_s,stretch,io_slowdown,excluded\n");
    for m in &o.metrics {
        for (job, kind) in plan.jobs() {
            let phases = m
                .io_phases
                .iter()
                .find(|(j, _)| *j == job)
                .map_or(0, |(_, n)| *n);
            let jm = m
                .metrics
                .as_ref()
                .ok()
                .and_then(|x| x.jobs.iter().find(|j| j.job == job));
            let why = m
                .excluded
                .iter()
                .find(|(j, _)| *j == job)
                .map_or_else(String::new, |(_, r)| r.replace([',', '\n'], ";"));
            let _ = writeln!(
                s,
                "{},{},{job},{},{phases},{},{},{},{},{why}",
                m.config.name(),
                m.rep,
                kind.name,
                num(jm.map(|j| j.e_cpu)),
                num(jm.map(|j| j.e_io)),
                num(jm.map(|j| j.stretch)),
                num(jm.map(|j| j.io_slowdown)),
            );
        }
    }
    s
}

/// The bytes each of the plan's servers served each job in one run (data requests only), per job
/// in the plan's order.
fn bytes_per_server(plan: &Plan, services: &[Service]) -> Vec<(u64, Vec<u64>)> {
    plan.jobs()
        .into_iter()
        .map(|(job, _)| {
            let mut per = vec![0u64; plan.shape.servers];
            for x in services.iter().filter(|x| x.job == job) {
                if let Some(b) = per.get_mut(x.server) {
                    *b += x.bytes;
                }
            }
            (job, per)
        })
        .collect()
}

/// `bytes.csv`: the bytes each server served each job in each run (data requests only, the
/// whole run), and the job's share of its bytes on that server.
pub(crate) fn bytes_csv(plan: &Plan, o: &Outcome) -> String {
    let mut s = String::from("config,rep,job,kind,server,bytes,share\n");
    for (run, services) in o.runs.iter().zip(&o.services) {
        for ((job, per), (_, kind)) in bytes_per_server(plan, services)
            .into_iter()
            .zip(plan.jobs())
        {
            let all: u64 = per.iter().sum();
            for (server, b) in per.iter().enumerate() {
                let share = (all > 0).then(|| *b as f64 / all as f64);
                let _ = writeln!(
                    s,
                    "{},{},{job},{},{server},{b},{}",
                    run.config.name(),
                    run.rep,
                    kind.name,
                    num(share)
                );
            }
        }
    }
    s
}

/// A line on how the jobs' bytes spread over the servers in `config`'s runs: every server's
/// share of all bytes, and the smallest and largest share one job had on one server.
pub(crate) fn bytes_line(plan: &Plan, o: &Outcome, config: Config) -> Option<String> {
    if plan.shape.servers < 2 {
        return None;
    }
    let mut total = vec![0u64; plan.shape.servers];
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for (run, services) in o.runs.iter().zip(&o.services) {
        if run.config != config {
            continue;
        }
        for (_, per) in bytes_per_server(plan, services) {
            let all: u64 = per.iter().sum();
            if all == 0 {
                continue;
            }
            for (t, b) in total.iter_mut().zip(&per) {
                *t += b;
                let share = *b as f64 / all as f64;
                lo = lo.min(share);
                hi = hi.max(share);
            }
        }
    }
    let all: u64 = total.iter().sum();
    if all == 0 {
        return None;
    }
    let shares: Vec<String> = total
        .iter()
        .enumerate()
        .map(|(i, b)| format!("server {i} {:.1}%", 100.0 * *b as f64 / all as f64))
        .collect();
    Some(format!(
        "{}: bytes per server {} ({:.0} MiB in all); one job's share on one server {:.1}% to {:.1}%",
        config.name(),
        shares.join(", "),
        all as f64 / (1u64 << 20) as f64,
        100.0 * lo,
        100.0 * hi
    ))
}

/// `sim.csv`: the simulator's prediction beside the mean measurement.
pub(crate) fn sim_csv(o: &Outcome) -> String {
    let mut s = String::from("config,heuristic,metric,predicted,measured_mean,diff_pct\n");
    for (config, pred) in &o.predictions {
        let Ok(p) = pred else { continue };
        let v = values_of(&o.metrics, *config);
        for (i, name) in super::analysis::METRIC_KEYS.iter().enumerate() {
            let (mean, _, _) = spread(&v[i]);
            let _ = writeln!(
                s,
                "{},{},{name},{},{},{}",
                config.name(),
                config.heuristic(),
                num(Some(p[i])),
                num(Some(mean)),
                num(Some(change_pct(p[i], mean))),
            );
        }
    }
    s
}

/// Writes the CSV files and the figures into `out`; returns what was written.
pub(crate) fn write_all(plan: &Plan, o: &Outcome, out: &Path) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (name, text) in [
        ("metrics.csv", metrics_csv(plan, o)),
        ("jobs.csv", jobs_csv(plan, o)),
        ("bytes.csv", bytes_csv(plan, o)),
        ("sim.csv", sim_csv(o)),
    ] {
        let p = out.join(name);
        write(&p, &text)?;
        written.push(p);
    }
    let series: Vec<BoxSeries> = o
        .configs
        .iter()
        .map(|&c| BoxSeries {
            name: c.name().into(),
            values: values_of(&o.metrics, c),
            predicted: o
                .predictions
                .iter()
                .find(|(pc, _)| *pc == c)
                .and_then(|(_, p)| p.as_ref().ok().copied()),
        })
        .collect();
    let p = out.join("box.svg");
    save_box(
        &p,
        &series,
        &format!(
            "seed 004 through the mount: {} server{}, scale {:.4}, {} repetition{} \
             (× = simulator)",
            plan.shape.servers,
            if plan.shape.servers == 1 { "" } else { "s" },
            plan.shape.scale,
            o.repeat,
            if o.repeat == 1 { "" } else { "s" }
        ),
    )
    .with_context(|| format!("drawing {}", p.display()))?;
    written.push(p);
    for ((run, logs), services) in o.runs.iter().zip(&o.logs).zip(&o.services) {
        let Some(t0) = logs.t0 else { continue };
        let s = served(services, t0);
        let p = out.join(format!("timeline-{}-{}.svg", run.config.name(), run.rep));
        save_timeline(
            &p,
            &s,
            plan.shape.servers,
            plan.window,
            &format!(
                "{} (repetition {}): each job's bandwidth on each server",
                run.config.name(),
                run.rep
            ),
        )
        .with_context(|| format!("drawing {}", p.display()))?;
        written.push(p);
    }
    Ok(written)
}

fn fmt_v(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "-".into()
    }
}

fn fmt_pct(x: f64) -> String {
    if x.is_finite() {
        format!("{x:+.1}%")
    } else {
        "-".into()
    }
}

/// The table of one configuration: mean and min–max over its repetitions, the change of the
/// mean against `timeorder`, the simulator's value and the difference.
pub(crate) fn config_table(o: &Outcome, config: Config) -> String {
    let v = values_of(&o.metrics, config);
    let base = o
        .configs
        .contains(&Config::Timeorder)
        .then(|| values_of(&o.metrics, Config::Timeorder));
    let pred = o
        .predictions
        .iter()
        .find(|(c, _)| *c == config)
        .and_then(|(_, p)| p.as_ref().ok().copied());
    let runs = v[0].len();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} ({}): {runs} repetition{} with metrics",
        config.name(),
        config.describe(),
        if runs == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        s,
        "  {:<16} {:>8} {:>17} {:>13} {:>10} {:>9}",
        "metric", "mean", "min–max", "vs timeorder", "simulator", "meas/sim"
    );
    for i in 0..4 {
        let (mean, min, max) = spread(&v[i]);
        let vs = match &base {
            Some(b) if config != Config::Timeorder => fmt_pct(change_pct(spread(&b[i]).0, mean)),
            _ => "".into(),
        };
        let (p, d) = match pred {
            Some(p) => (fmt_v(p[i]), fmt_pct(change_pct(p[i], mean))),
            None => ("-".into(), "-".into()),
        };
        let _ = writeln!(
            s,
            "  {:<16} {:>8} {:>17} {:>13} {:>10} {:>9}",
            METRIC_LABELS[i],
            fmt_v(mean),
            format!("{}–{}", fmt_v(min), fmt_v(max)),
            vs,
            p,
            d
        );
    }
    let overlaps: Vec<f64> = o
        .metrics
        .iter()
        .filter(|m| m.config == config)
        .filter_map(|m| m.set_overlap)
        .collect();
    if !overlaps.is_empty() {
        let (mean, min, max) = spread(&overlaps);
        let _ = writeln!(
            s,
            "  {:<16} {:>7.2}% {:>17}",
            "set overlap",
            mean * 100.0,
            format!("{:.2}%–{:.2}%", min * 100.0, max * 100.0)
        );
    }
    s
}

/// The verdict of `config` against `timeorder`, on the means: the change of each metric and on
/// how many of the four it is better.
pub(crate) fn verdict(o: &Outcome, what: &str, config: Config) -> Option<String> {
    let base = values_of(&o.metrics, Config::Timeorder);
    let ours = values_of(&o.metrics, config);
    let b: Vec<f64> = base.iter().map(|v| spread(v).0).collect();
    let m: Vec<f64> = ours.iter().map(|v| spread(v).0).collect();
    if b.iter().chain(&m).any(|x| !x.is_finite()) {
        return None;
    }
    let n = (0..4).filter(|&i| better(i, b[i], m[i])).count();
    Some(format!(
        "verdict: {what} vs timeorder: geomean stretch {:+.0}%, max stretch {:+.0}%, \
         I/O slowdown {:+.0}%, utilization {:+.0}% — better on {n} of 4 metrics",
        change_pct(b[1], m[1]),
        change_pct(b[0], m[0]),
        change_pct(b[2], m[2]),
        change_pct(b[3], m[3]),
    ))
}

/// What `B` is, for the outputs.
pub(crate) fn bandwidth_line(b: Bandwidth) -> String {
    if b.measured() {
        format!(
            "B = {:.1} MiB/s: the median bandwidth of {} I/O phases that shared the device with \
             no other job (seed 004 §4.3)",
            b.bytes_s / 1_048_576.0,
            b.phases
        )
    } else {
        format!(
            "B = {:.1} MiB/s (NOMINAL: no I/O phase ran alone in any run, so the device's rate \
             stands in for seed 004's median of unshared phases)",
            b.bytes_s / 1_048_576.0
        )
    }
}
