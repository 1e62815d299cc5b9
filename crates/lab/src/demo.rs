//! `iosets demo`: seed 004's experiment, scaled down, through a real mount — a short run of
//! `iosets experiment seed004` (see [`crate::experiment`]).
//!
//! # What it does
//! Starts two servers (`iosets_server::Server`) in this process on loopback, each with an
//! emulated device of `--throttle-mib-s` MiB/s, one FUSE mount over them, and seed 004's
//! workload as unmodified POSIX programs writing through the mount (`iosets app periodic`, one
//! process per job, tagged with its job by `IOSETS_JOB_ID`): one high-frequency job and
//! `--low-jobs` low-frequency jobs, each alternating a compute phase (a sleep) and a write phase
//! (1 MiB writes to a file per process, then fsync, as seed 004's IOR `-e`). It runs the workload
//! once with the servers under `timeorder` (arrival order: the unmodified file system) and once
//! under `iosets` with each job's Set-10 priority written to `MOUNT/.iosets/jobs/<id>/priority`
//! before the start (seed 004's clairvoyant variant); `--auto` adds a run where the servers
//! detect every job's period from the requests they serve.
//!
//! # Scaling
//! Every duration of seed 004 is multiplied by 1/64 (periods of 0.3 s and 6 s; 1/256 with
//! `--quick`), and its window [400 s, 3200 s] with it, so the window holds 7 periods of every
//! low-frequency job (seed 004's own count). Fewer low-frequency jobs than seed 004's fifteen
//! run (6 by default), each with its I/O phase lengthened by `15 / low_jobs` so that together
//! they load the device as the fifteen do; each job has 2 processes instead of 8 (1 with
//! `--quick`) so that the high-frequency job's scaled phase is still a whole 1 MiB write per
//! process. `--quick` also shortens the window to [400 s, 1600 s] (3 low-frequency periods):
//! it is for tests, not for conclusions.
//!
//! # Metrics
//! Seed 004 §4.3 from the applications' own phase logs (`crate::seed004::phaselog`), as the
//! experiment computes them: `B` is the median bandwidth of the I/O phases that shared the
//! device with no other job.
//!
//! # What it is not
//! Not a benchmark of the servers: the device is emulated, the compute phases are sleeps, and
//! one run is one sample of a noisy machine; `iosets experiment seed004 --repeat R` measures
//! the spread.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::seed004::analysis::{spread, RunMetrics};
use crate::seed004::phaselog::PhaseKind;
use crate::seed004::plan::{Config, Plan, Shape, SEED_LOW_JOBS, SEED_WINDOW};
use crate::seed004::{execute, order_inside_sets, report, Outcome, Settings};

/// Servers the demo starts.
const SERVERS: usize = 2;
/// The iosets policy's anticipation (ms): a set waits that long for its holder's next write
/// or fsync before passing on.
const HOLD_IDLE_MS: u64 = 20;

/// `iosets demo` flags.
#[derive(Debug, Args)]
pub struct IoDemoArgs {
    /// A shorter run (about 10 s per configuration instead of about 50), for tests.
    #[arg(long)]
    quick: bool,
    /// How many low-frequency jobs run beside the high-frequency one (1 to 32); their I/O
    /// phases are lengthened by 15/N, so they load the device as seed 004's fifteen.
    #[arg(long, default_value_t = 6, value_name = "N")]
    low_jobs: usize,
    /// Emulated bandwidth of each server's device, MiB/s (seed 004 measured 110 in all).
    #[arg(long, default_value_t = 55.0, value_name = "MIB_S")]
    throttle_mib_s: f64,
    /// Write the per-job results (io-demo-jobs.csv), the metrics (io-demo-metrics.csv), the
    /// experiment's files (metrics.csv, box.svg, timelines) and the runs' logs and traces into
    /// this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Also run `iosets` with automatic priorities: the servers detect every job's period from
    /// its requests, no priority is written (seed 004's FTIO variant).
    #[arg(long)]
    auto: bool,
}

/// The run's name in tables and CSVs (the demo's names since it began).
fn label(c: Config) -> &'static str {
    match c {
        Config::Timeorder => "timeorder",
        Config::Clairvoyant => "iosets",
        Config::Auto => "iosets-auto",
        Config::AutoError => "iosets-auto-error",
    }
}

fn how(c: Config) -> &'static str {
    match c {
        Config::Timeorder => "arrival order",
        Config::Clairvoyant => "Set-10 priorities written to MOUNT/.iosets before the start",
        Config::Auto => "priorities detected by the servers from each job's requests",
        Config::AutoError => "detected priorities, periods randomly ±50%",
    }
}

fn plan(args: &IoDemoArgs) -> Result<Plan> {
    if !(1..=32).contains(&args.low_jobs) {
        bail!("--low-jobs {}: expected 1 to 32", args.low_jobs);
    }
    let t = args.throttle_mib_s;
    if !(t.is_finite() && (1.0..=4096.0).contains(&t)) {
        bail!("--throttle-mib-s {t}: expected 1 to 4096 MiB/s");
    }
    let (scale, procs, window) = if args.quick {
        (1.0 / 256.0, 1, (SEED_WINDOW.0, 1600.0))
    } else {
        (1.0 / 64.0, 2, SEED_WINDOW)
    };
    Plan::new(Shape {
        scale,
        servers: SERVERS,
        device_mib_s: SERVERS as f64 * t,
        procs,
        low_jobs: args.low_jobs,
        low_load: SEED_LOW_JOBS as f64 / args.low_jobs as f64,
        window,
        hold_idle_ms: HOLD_IDLE_MS,
        chunk_kib: 1024,
    })
    .context("this --throttle-mib-s is too slow for the demo's scale")
}

/// One job of one run, for the tables.
#[derive(Debug)]
struct JobRow {
    job: u64,
    kind: &'static str,
    io_phases: usize,
    mean_io_s: Option<f64>,
    alone_io_s: f64,
    e_cpu: Option<f64>,
    e_io: Option<f64>,
    stretch: Option<f64>,
    io_slowdown: Option<f64>,
}

fn job_rows(p: &Plan, o: &Outcome, run: usize) -> Vec<JobRow> {
    let m: &RunMetrics = &o.metrics[run];
    let logs = &o.logs[run];
    p.jobs()
        .into_iter()
        .map(|(job, kind)| {
            let io: Vec<f64> = logs
                .jobs
                .iter()
                .filter(|j| j.job == job)
                .flat_map(|j| j.phases.iter())
                .filter(|ph| ph.kind == PhaseKind::Io && ph.end.is_finite())
                .map(|ph| ph.end - ph.start)
                .collect();
            let jm = m
                .metrics
                .as_ref()
                .ok()
                .and_then(|x| x.jobs.iter().find(|j| j.job == job));
            JobRow {
                job,
                kind: kind.name,
                io_phases: io.len(),
                mean_io_s: (!io.is_empty()).then(|| spread(&io).0),
                alone_io_s: p.io_alone_s(kind),
                e_cpu: jm.map(|j| j.e_cpu),
                e_io: jm.map(|j| j.e_io),
                stretch: jm.map(|j| j.stretch),
                io_slowdown: jm.map(|j| j.io_slowdown),
            }
        })
        .collect()
}

fn fmt_opt(v: Option<f64>, prec: usize) -> String {
    v.filter(|x| x.is_finite())
        .map_or_else(|| "-".into(), |x| format!("{x:.prec$}"))
}

fn job_table(rows: &[JobRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  {:>4} {:<5} {:>9} {:>14} {:>8} {:>8} {:>8} {:>8}",
        "job", "kind", "I/O done", "I/O phase (s)", "e_cpu", "e_io", "stretch", "I/O slow"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "  {:>4} {:<5} {:>9} {:>6} / {:<5.2} {:>8} {:>8} {:>8} {:>8}",
            r.job,
            r.kind,
            r.io_phases,
            fmt_opt(r.mean_io_s, 2),
            r.alone_io_s,
            fmt_opt(r.e_cpu, 2),
            fmt_opt(r.e_io, 2),
            fmt_opt(r.stretch, 2),
            fmt_opt(r.io_slowdown, 2),
        );
    }
    s
}

fn write_csv(dir: &Path, p: &Plan, o: &Outcome) -> Result<()> {
    let mut jobs = String::from(
        "policy,job,kind,io_phases,mean_io_phase_s,alone_io_phase_s,e_cpu_s,e_io_s,stretch,io_slowdown\n",
    );
    let mut metrics = String::from("policy,max_stretch,geomean_stretch,io_slowdown,utilization\n");
    let num = |v: Option<f64>| {
        v.filter(|x| x.is_finite())
            .map_or_else(String::new, |x| format!("{x:.6}"))
    };
    for (i, m) in o.metrics.iter().enumerate() {
        for r in job_rows(p, o, i) {
            let _ = writeln!(
                jobs,
                "{},{},{},{},{},{:.6},{},{},{},{}",
                label(m.config),
                r.job,
                r.kind,
                r.io_phases,
                num(r.mean_io_s),
                r.alone_io_s,
                num(r.e_cpu),
                num(r.e_io),
                num(r.stretch),
                num(r.io_slowdown),
            );
        }
        let v = m.values();
        let _ = writeln!(
            metrics,
            "{},{},{},{},{}",
            label(m.config),
            num(v.map(|v| v[0])),
            num(v.map(|v| v[1])),
            num(v.map(|v| v[2])),
            num(v.map(|v| v[3])),
        );
    }
    for (name, text) in [("io-demo-jobs.csv", jobs), ("io-demo-metrics.csv", metrics)] {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// What the job tables' columns are (printed before them).
const LEGEND: &str = "\
each job: I/O done = I/O phases it finished; I/O phase (s) = their mean length, measured / alone
(its bytes at the whole device's rate); inside the metrics window: e_cpu = its compute seconds,
e_io = the bytes it wrote over B, in seconds; stretch = window / (e_cpu + e_io); I/O slow =
(window - e_cpu) / e_io, its I/O time over what it would take at B (1 = never slowed)";

/// The directory the runs' files go to, removed at the end when the user gave none.
#[derive(Debug)]
struct RunDir {
    path: PathBuf,
    remove: bool,
}

impl RunDir {
    /// Keeps the directory after all (a run failed: its logs say why); returns its path.
    fn keep(mut self) -> PathBuf {
        self.remove = false;
        std::mem::take(&mut self.path)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// `iosets demo`.
pub fn run(args: &IoDemoArgs) -> Result<()> {
    let p = plan(args)?;
    let mut configs = vec![Config::Timeorder, Config::Clairvoyant];
    if args.auto {
        configs.push(Config::Auto);
    }
    let dir = match &args.out {
        Some(d) => RunDir {
            path: d.clone(),
            remove: false,
        },
        None => RunDir {
            path: std::env::temp_dir().join(format!("iosets-demo-{}", std::process::id())),
            remove: true,
        },
    };
    println!(
        "iosets demo: seed 004's experiment, scaled down, through a FUSE mount over {SERVERS} \
         real servers"
    );
    println!(
        "  {SERVERS} servers on loopback, emulated device {} MiB/s each ({} MiB/s together); \
         one mount; each job is `iosets app periodic` writing through it (plain POSIX)",
        args.throttle_mib_s,
        SERVERS as f64 * args.throttle_mib_s
    );
    println!(
        "  seed 004 scaled by 1/{:.0} in time; {} low-frequency job{} instead of 15, each with \
         its I/O lengthened ×{:.2} to load the device as the fifteen do; {} process{} per job \
         (seed 004: 8)",
        1.0 / p.shape.scale,
        p.low().jobs,
        if p.low().jobs == 1 { "" } else { "s" },
        p.shape.low_load,
        p.shape.procs,
        if p.shape.procs == 1 { "" } else { "es" },
    );
    for l in p.describe() {
        println!("  {l}");
    }
    let low_phases = (p.window.1 - p.window.0) / p.low().period_s;
    println!(
        "  metrics over [{:.2} s, {:.2} s] after the first start ({low_phases:.1} low-frequency \
         periods), seed 004 §4.3 from the applications' phase logs; iosets: order={} \
         hold_idle_ms={HOLD_IDLE_MS}",
        p.window.0,
        p.window.1,
        order_inside_sets()
    );
    let settings = Settings {
        plan: p,
        configs,
        repeat: 1,
        out: dir.path.clone(),
        keep: false,
        kill: None,
        analyze: false,
        order: order_inside_sets(),
    };
    let o = match execute(&settings) {
        Ok(o) => o,
        Err(e) => {
            let kept = dir.keep();
            return Err(e.context(format!(
                "the runs' logs and traces are kept in {}",
                kept.join("runs").display()
            )));
        }
    };
    let p = &settings.plan;
    println!("\n{LEGEND}");
    for (i, m) in o.metrics.iter().enumerate() {
        println!("\npolicy {} ({})", label(m.config), how(m.config));
        print!("{}", job_table(&job_rows(p, &o, i)));
        for f in &o.runs[i].failures {
            println!("  job {} failed: {}", f.job, f.status);
        }
        if let Err(e) = &m.metrics {
            println!("  no metrics: {e}");
        }
        for (job, why) in &m.excluded {
            println!("  job {job} left out of the metrics: {why}");
        }
    }
    println!("\n{}", report::bandwidth_line(o.bandwidth));
    print!("\n  {:<16}", "");
    for m in &o.metrics {
        print!(" {:>11}", label(m.config));
    }
    println!();
    let names = [
        "max stretch",
        "geomean stretch",
        "I/O slowdown",
        "utilization",
    ];
    for (i, name) in names.iter().enumerate() {
        print!("  {name:<16}");
        for m in &o.metrics {
            print!(" {:>11}", fmt_opt(m.values().map(|v| v[i]), 3));
        }
        println!();
    }
    print!("  {:<16}", "set overlap");
    for m in &o.metrics {
        print!(
            " {:>11}",
            fmt_opt(m.set_overlap.map(|x| x * 100.0), 2) + "%"
        );
    }
    println!();
    for (c, what) in [
        (Config::Clairvoyant, "iosets (Set-10)"),
        (Config::Auto, "iosets (automatic priorities)"),
    ] {
        if !settings.configs.contains(&c) {
            continue;
        }
        if args.quick {
            // Three low-frequency periods under a 1/256 scale: the low jobs' first phases, slowed
            // by the high job's set, are most of their window, and the metrics say so whatever
            // the policy (max stretch +53 % to +460 % in runs here).
            println!(
                "verdict: {what} vs timeorder: none from --quick (3 low-frequency periods at \
                 1/256 are too few for seed 004's effect; `iosets demo` runs 7 at 1/64)"
            );
            continue;
        }
        match report::verdict(&o, what, c) {
            Some(v) => println!("{v}"),
            None => println!("verdict: {what} vs timeorder: no metrics to compare"),
        }
    }
    if let Some(out) = &args.out {
        write_csv(out, p, &o)?;
        report::write_all(p, &o, out)?;
        println!(
            "wrote {} and {}; the runs' logs and traces are in {}",
            out.join("io-demo-jobs.csv").display(),
            out.join("box.svg").display(),
            out.join("runs").display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(quick: bool, low_jobs: usize) -> IoDemoArgs {
        IoDemoArgs {
            quick,
            low_jobs,
            throttle_mib_s: 55.0,
            out: None,
            auto: false,
        }
    }

    #[test]
    fn the_plan_keeps_seed_004s_shape() {
        let p = plan(&args(false, 6)).unwrap();
        // Periods 19.2 s and 384 s, scaled by 1/64.
        assert!((p.high().period_s - 0.3).abs() < 1e-9);
        assert!((p.low().period_s - 6.0).abs() < 1e-9);
        assert_eq!(p.set10(p.high()).0, -1);
        assert_eq!(p.set10(p.low()).0, 1);
        assert_eq!(p.set10(p.high()).1.get(), 10.0);
        // The window holds at least 6 phases of every low-frequency job.
        assert!((p.window.1 - p.window.0) / p.low().period_s >= 6.0);
        // The low-frequency jobs bring the load of seed 004's fifteen (the device busy about
        // all the time when their phases are spread out).
        let load: f64 = p
            .jobs()
            .iter()
            .map(|(_, k)| p.io_alone_s(*k) / k.period_s)
            .sum();
        assert!((0.9..1.05).contains(&load), "{load}");
        let q = plan(&args(true, 2)).unwrap();
        assert_eq!(
            q.set10(q.high()),
            (-1, iosets_types::Priority::new(10.0).unwrap())
        );
    }

    #[test]
    fn bad_flags_are_refused() {
        assert!(plan(&args(false, 0)).is_err());
        assert!(plan(&args(false, 33)).is_err());
        let mut a = args(true, 3);
        a.throttle_mib_s = f64::NAN;
        assert!(plan(&a).is_err());
        a.throttle_mib_s = 0.5;
        assert!(plan(&a).is_err());
    }
}
