//! Seed 004's experiment through the mount (`iosets experiment seed004`): the scaled workload
//! ([`plan`]), seed 004 §4.3's metrics from the applications' phase logs ([`phaselog`]) and the
//! sets' overlap from the servers' traces ([`overlap`]), beside the fluid simulator's
//! prediction ([`analysis`]), and the CSV files, figures and tables ([`report`]). The runs
//! themselves are the rig's ([`crate::rig::cluster`]); `crate::experiment` says what the
//! experiment is and is not.

pub(crate) mod analysis;
pub mod overlap;
pub mod phaselog;
pub(crate) mod plan;
mod plots;
pub(crate) mod report;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use crate::rig::cluster::{self, KillJob, RunRecord, RunSpec};
use crate::rig::{self, INTERRUPTED};
use analysis::{Bandwidth, Logs, RunMetrics};
use overlap::Service;
use plan::{Config, Plan, Shape, SEED_LOW_JOBS, SEED_WINDOW};

/// `iosets experiment seed004` flags.
#[derive(Debug, Args)]
pub struct Seed004Args {
    /// Configurations to run, comma-separated: timeorder, clairvoyant, auto, auto-error.
    #[arg(long, default_value = "timeorder,clairvoyant,auto,auto-error")]
    configs: String,
    /// Data servers (1 to 8); each emulates device/K MiB/s.
    #[arg(long, default_value_t = 2)]
    servers: usize,
    /// Time factor on every duration of seed 004 (e.g. 1/20 or 0.05; 1 is seed 004 itself):
    /// the default takes about 3 minutes per configuration and repetition.
    #[arg(long, default_value = "1/20", allow_negative_numbers = true)]
    scale: String,
    /// Repetitions of each configuration.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// The aggregate emulated device, MiB/s (seed 004 measured 110 MiB/s with fsync).
    #[arg(long, default_value_t = 110.0, allow_negative_numbers = true)]
    device_mib_s: f64,
    /// Processes per job (seed 004: 8).
    #[arg(long, default_value_t = 8)]
    procs: u32,
    /// Low-frequency jobs (seed 004: 15).
    #[arg(long, default_value_t = SEED_LOW_JOBS)]
    low_jobs: usize,
    /// Output directory (default: ./seed004-YYYYMMDD-HHMMSS, the UTC time of the start).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Keep the data files the applications wrote (on tmpfs when there is one).
    #[arg(long)]
    keep: bool,
    /// Run nothing: analyse again the runs an earlier `--out DIR` left in `DIR/runs/` (give
    /// the same workload flags), and write the outputs into DIR anew.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["out", "keep", "kill_job"])]
    analyze: Option<PathBuf>,
    /// The iosets policy's anticipation: how long a set waits for its holder's next request
    /// (the processes' next writes and fsyncs), ms.
    #[arg(long, default_value_t = 20)]
    hold_idle_ms: u64,
    /// The iosets policy's rule for who holds a set next: phase (the earliest phase stamp,
    /// the same job on every server), arrival (the first burst to arrive at each server, the
    /// paper's rule) or jobid (the next job id, seed 004's BeeGFS rule); the last two keep
    /// exclusivity per server only, to measure what the first adds.
    #[arg(long, default_value = "phase", value_parser = ["phase", "arrival", "jobid"])]
    order: String,
    /// Run nothing: print the plan for a driver that launches the jobs elsewhere (a test bed's
    /// Slurm, `scripts/cluster-seed004.sh`), one record per line, fields separated by spaces:
    /// `run STOP_AFTER_S DEADLINE_S EXPECTED_S`; per configuration and repetition
    /// `serve CONFIG REP PRIORITIES SERVE_FLAGS...` (PRIORITIES: `given`, `detected` or `none`);
    /// per job `job ID KIND PROCS COMPUTE_S RELEASE_S WRITE_MIB ITERATIONS PRIORITY`.
    #[arg(long, conflicts_with_all = ["analyze", "out", "keep", "kill_job"])]
    print_plan: bool,
    /// Test only: SIGKILL job ID's application SECONDS after the launch.
    #[arg(long, value_name = "ID@SECONDS", hide = true)]
    kill_job: Option<KillJob>,
}

/// What to run.
#[derive(Debug)]
pub(crate) struct Settings {
    /// The scaled workload.
    pub(crate) plan: Plan,
    /// The configurations, in order.
    pub(crate) configs: Vec<Config>,
    /// Repetitions of each.
    pub(crate) repeat: usize,
    /// Where the outputs go.
    pub(crate) out: PathBuf,
    /// Keep the data files.
    pub(crate) keep: bool,
    /// Kill one application in every run.
    pub(crate) kill: Option<KillJob>,
    /// Read the runs already in `out` instead of running them.
    pub(crate) analyze: bool,
    /// The `iosets` policy's `order` inside a set.
    pub(crate) order: &'static str,
}

/// What the runs gave.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The configurations, in order.
    pub(crate) configs: Vec<Config>,
    /// Repetitions of each.
    pub(crate) repeat: usize,
    /// Every run, in the order run.
    pub(crate) runs: Vec<RunRecord>,
    /// Every run's phase logs, in the same order.
    pub(crate) logs: Vec<Logs>,
    /// Every run's served requests (its servers' traces), in the same order.
    pub(crate) services: Vec<Vec<Service>>,
    /// `B`.
    pub(crate) bandwidth: Bandwidth,
    /// Every run's metrics, in the same order.
    pub(crate) metrics: Vec<RunMetrics>,
    /// The simulator's prediction per configuration.
    pub(crate) predictions: Vec<(Config, Result<[f64; 4], String>)>,
}

/// The `iosets` policy's rule inside a set: `phase` (every server picks the job whose current
/// I/O phase started first, from the stamp the mount puts on each request) where the policy
/// has it, else `jobid` (seed 004's rule: the same next job on every server).
pub(crate) fn order_inside_sets() -> &'static str {
    let phase = [("order".to_string(), "phase".to_string())];
    if iosets_policy::Counted::build("iosets", &phase).is_ok() {
        "phase"
    } else {
        "jobid"
    }
}

/// Runs every configuration `repeat` times and computes the metrics; prints a line per run.
pub(crate) fn execute(s: &Settings) -> Result<Outcome> {
    rig::catch_interrupts()?;
    std::fs::create_dir_all(&s.out).with_context(|| format!("creating {}", s.out.display()))?;
    let order = s.order;
    let total = s.repeat * s.configs.len();
    let mut runs = Vec::new();
    for rep in 1..=s.repeat {
        for &config in &s.configs {
            let label = format!("[{}/{total}] {} #{rep}", runs.len() + 1, config.name());
            let dir = s.out.join("runs").join(format!("{}-{rep}", config.name()));
            if s.analyze {
                runs.push(cluster::recorded(&s.plan, config, rep, dir)?);
                continue;
            }
            println!("{label}: running (about {:.0} s)", s.plan.expected_run_s());
            let spec = RunSpec {
                plan: &s.plan,
                config,
                rep,
                dir,
                keep: s.keep,
                kill: s.kill,
                order,
                label: label.clone(),
                interrupted: &INTERRUPTED,
            };
            let r = cluster::run_one(&spec)
                .with_context(|| format!("{} repetition {rep}", config.name()))?;
            println!("{label}: done in {:.0} s", r.elapsed_s);
            for f in &r.failures {
                println!("  job {} failed: {}", f.job, f.status);
                for l in &f.stderr_tail {
                    println!("    | {l}");
                }
            }
            if let Some(k) = &r.kept {
                println!("  data files kept in {}", k.display());
            }
            runs.push(r);
        }
    }
    let logs: Vec<Logs> = runs.iter().map(analysis::read_logs).collect();
    let bandwidth = analysis::bandwidth(&s.plan, &logs);
    let services = runs
        .iter()
        .map(|r| {
            analysis::services(r)
                .with_context(|| format!("reading the traces of {}", r.dir.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    let metrics: Vec<RunMetrics> = runs
        .iter()
        .zip(&logs)
        .zip(&services)
        .map(|((r, l), sv)| analysis::run_metrics(&s.plan, r, l, bandwidth, sv))
        .collect();
    let predictions = s
        .configs
        .iter()
        .map(|&c| {
            (
                c,
                analysis::predict(&s.plan, c, bandwidth.bytes_s, s.plan.device_bytes_s())
                    .map_err(|e| format!("{e:#}")),
            )
        })
        .collect();
    Ok(Outcome {
        configs: s.configs.clone(),
        repeat: s.repeat,
        runs,
        logs,
        services,
        bandwidth,
        metrics,
        predictions,
    })
}

/// Prints what was excluded from each run's metrics, and runs without metrics.
pub(crate) fn print_exclusions(o: &Outcome) {
    for m in &o.metrics {
        if let Err(e) = &m.metrics {
            println!("{} #{}: no metrics: {e}", m.config.name(), m.rep);
        }
        for (job, why) in &m.excluded {
            println!(
                "{} #{}: job {job} left out of the metrics: {why}",
                m.config.name(),
                m.rep
            );
        }
    }
}

/// `--print-plan`'s text (see the flag).
fn plan_text(plan: &Plan, configs: &[Config], repeat: usize, order: &'static str) -> String {
    use std::fmt::Write as _;
    let mut s = format!(
        "run {:.6} {:.6} {:.6}\n",
        plan.stop_after_s,
        plan.run_deadline_s(),
        plan.expected_run_s()
    );
    for rep in 1..=repeat {
        for &c in configs {
            let priorities = match c {
                Config::Clairvoyant => "given",
                Config::Auto | Config::AutoError => "detected",
                Config::Timeorder => "none",
            };
            let flags = cluster::Knobs::of(plan, c, rep, order).flags().join(" ");
            let _ = writeln!(s, "serve {} {rep} {priorities} {flags}", c.name());
        }
    }
    for (job, kind) in plan.jobs() {
        let _ = writeln!(
            s,
            "job {job} {} {} {:.6} {:.6} {} {} {}",
            kind.name,
            kind.procs,
            kind.compute_s,
            kind.release_s,
            kind.mib_per_proc,
            plan.iterations(kind),
            plan.set10(kind).1.get()
        );
    }
    s
}

pub(crate) fn seed004(a: &Seed004Args) -> Result<()> {
    let configs = Config::parse_list(&a.configs)?;
    let scale = plan::parse_scale(&a.scale)?;
    if !(1..=100).contains(&a.repeat) {
        anyhow::bail!("--repeat {}: expected 1 to 100", a.repeat);
    }
    let plan = Plan::new(Shape {
        scale,
        servers: a.servers,
        device_mib_s: a.device_mib_s,
        procs: a.procs,
        low_jobs: a.low_jobs,
        low_load: 1.0,
        window: SEED_WINDOW,
        hold_idle_ms: a.hold_idle_ms,
        chunk_kib: 1024,
    })?;
    if let Some(k) = a.kill_job {
        if plan.kind_of(k.job).is_none() {
            anyhow::bail!(
                "--kill-job {}@{}: no such job (jobs are 1 to {})",
                k.job,
                k.after_s,
                plan.jobs().len()
            );
        }
    }
    let order = match a.order.as_str() {
        "arrival" => "arrival",
        "jobid" => "jobid",
        _ => order_inside_sets(),
    };
    if a.print_plan {
        print!("{}", plan_text(&plan, &configs, a.repeat, order));
        return Ok(());
    }
    let out = match (&a.analyze, &a.out) {
        (Some(dir), _) => {
            if !dir.join("runs").is_dir() {
                anyhow::bail!(
                    "--analyze {}: no runs/ directory in it (give a directory an earlier \
                     `iosets experiment seed004 --out DIR` wrote)",
                    dir.display()
                );
            }
            dir.clone()
        }
        (None, Some(dir)) => dir.clone(),
        (None, None) => PathBuf::from(format!("seed004-{}", rig::timestamp())),
    };
    let settings = Settings {
        plan,
        configs,
        repeat: a.repeat,
        out,
        keep: a.keep,
        kill: a.kill_job,
        analyze: a.analyze.is_some(),
        order,
    };
    let p = &settings.plan;
    println!(
        "iosets experiment seed004: seed 004 scaled by {:.4} in time, {} {} server{}",
        p.shape.scale,
        if settings.analyze {
            "runs made earlier over"
        } else {
            "through one mount on loopback over"
        },
        p.shape.servers,
        if p.shape.servers == 1 { "" } else { "s" }
    );
    println!(
        "  emulated device {} MiB/s in all ({:.1} MiB/s per server); {} process{} per job, \
         each writing its own file in 1 MiB writes",
        p.shape.device_mib_s,
        p.shape.device_mib_s / p.shape.servers as f64,
        p.shape.procs,
        if p.shape.procs == 1 { "" } else { "es" }
    );
    for l in p.describe() {
        println!("  {l}");
    }
    println!(
        "  metrics window [{:.2} s, {:.2} s] after the first application's start; the \
         applications stop computing {:.2} s after the launch",
        p.window.0, p.window.1, p.stop_after_s
    );
    let total_s = (p.expected_run_s() + 3.0) * (settings.repeat * settings.configs.len()) as f64;
    println!(
        "  configurations: {}; {} repetition{}; iosets: order={} hold_idle_ms={}; {}",
        settings
            .configs
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(", "),
        settings.repeat,
        if settings.repeat == 1 { "" } else { "s" },
        settings.order,
        p.shape.hold_idle_ms,
        if settings.analyze {
            "nothing to run (--analyze)".to_string()
        } else if total_s < 120.0 {
            format!("about {total_s:.0} s in all")
        } else {
            format!("about {:.0} minutes in all", total_s / 60.0)
        }
    );
    if settings.analyze {
        println!(
            "  analysing the runs in {} again; outputs written there",
            settings.out.join("runs").display()
        );
    } else {
        println!("  output: {}", settings.out.display());
    }
    let o = execute(&settings)?;
    let written = report::write_all(&settings.plan, &o, &settings.out)?;
    println!();
    print_exclusions(&o);
    println!("{}", report::bandwidth_line(o.bandwidth));
    println!();
    for &c in &o.configs {
        print!("{}", report::config_table(&o, c));
        println!();
    }
    for &c in &o.configs {
        if let Some(l) = report::bytes_line(&settings.plan, &o, c) {
            println!("{l}");
        }
    }
    for (c, p) in &o.predictions {
        if let Err(e) = p {
            println!("simulator: no prediction for {}: {e}", c.name());
        }
    }
    if o.configs.contains(&Config::Timeorder) {
        for &c in o.configs.iter().filter(|&&c| c != Config::Timeorder) {
            if let Some(v) = report::verdict(&o, c.name(), c) {
                println!("{v}");
            }
        }
    }
    println!("wrote:");
    for w in written {
        println!("  {}", w.display());
    }
    Ok(())
}
