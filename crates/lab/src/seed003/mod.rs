//! `iosets experiment seed003`: seed 003's thread-quota experiment (RIKEN's FEFS MDS QoS)
//! through a real mount, with an mdtest-like application (`iosets app mdtest`).
//!
//! # What seed 003 measured, and what this reproduces
//! On the K computer a metadata-heavy job (mdtest by 6,144 processes in directories of stripe
//! count 96) blocked every service thread of the MDS, which waited for the storage servers, so a
//! light job (768 processes, stripe count 4) crawled; with a thread quota (the jobs' group at most
//! 71 % of the 24 threads, shared 50:50 between the two jobs, each up to 90 % when the other is
//! idle) the light job got most of its speed back, and a stage-in's rank-directory creation
//! went from "not done in 5 minutes" to the time it took alone. Here, in three settings
//! ([`params::Setting`]) — `reference` (the light job alone), `off` (both, no quota) and `on`
//! (both, `--quota` with that rule) — one `iosets serve` with 24 workers, policy `timeorder`
//! (arrival order, the design's fifo: the MDS served in arrival order), and the emulated slow
//! back end (each create or unlink holds its worker one call per stripe of its directory,
//! [`params::Params`]) serves two jobs through FUSE mounts ([`run`]). Measured: the light
//! job's create, stat and remove rates as mdtest computes them, the stage-in's `t_E − t_S`,
//! and the server's CPU use ([`analysis`]); written as CSV files, two bar charts, tables and
//! one verdict line per goal ([`report`]).
//!
//! # Scaling
//! Processes are scaled down (64 and 8 instead of 6,144 and 768: this runs on one machine), the
//! stripe counts, the workers and the quota are seed 003's. The back end's latency per call
//! (1 ms at `--scale full`) sets the pace: with the heavy job's creates 96 calls long, its 64
//! processes keep the 24 workers busy, as 6,144 processes did seed 003's MDS.
//!
//! # What it is not
//! Not a Lustre MDS: the storage servers' slowness is a sleep in the worker, the namespace is a
//! tmpfs directory, and everything shares the machine it runs on (the repetitions show the
//! noise). The CPU figure is the server process's own (its worker threads mostly wait, as seed
//! 003's MDS threads waited for the OSSes).

pub(crate) mod analysis;
mod params;
mod plots;
mod report;
mod run;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use analysis::RunResult;
use params::{Params, Setting};
use run::RunSpec;

/// `iosets experiment seed003` flags.
#[derive(Debug, Args)]
pub(crate) struct Seed003Args {
    /// Repetitions of each setting (reference, off, on) [default: 3].
    #[arg(long, value_name = "R")]
    repeat: Option<usize>,
    /// Workload size: full (seed 003's mdtest -n 100, 1,024 stage-in directories, 1 ms per
    /// back-end call) or quick (-n 20, 256 directories, 0.5 ms) [default: full].
    #[arg(long)]
    scale: Option<String>,
    /// Files per process and phase (mdtest's -n), both jobs; overrides the scale's.
    #[arg(long, value_name = "N")]
    files: Option<u64>,
    /// The emulated back end's latency per call, ms; overrides the scale's.
    #[arg(long, value_name = "MS")]
    meta_latency_ms: Option<f64>,
    /// Rank directories the stage-in creates (seed 003: 1,024); overrides the scale's.
    #[arg(long, value_name = "N")]
    stagein_dirs: Option<u64>,
    /// Stop a stage-in still running after this many seconds and report it as not completed
    /// (seed 003: 5 minutes); overrides the scale's.
    #[arg(long, value_name = "SECONDS")]
    stagein_limit_s: Option<f64>,
    /// Fail a run whose light mdtest has not ended after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    light_limit_s: Option<f64>,
    /// Processes of the heavy job (1 to 64) [default: 64].
    #[arg(long, value_name = "N")]
    heavy_procs: Option<u32>,
    /// Processes of the light job and its stage-in (1 to 64) [default: 8].
    #[arg(long, value_name = "N")]
    light_procs: Option<u32>,
    /// Iterations of the light job's mdtest (-i) [default: 3].
    #[arg(long, value_name = "K")]
    light_iterations: Option<u32>,
    /// Seconds the heavy job runs before the light job starts.
    #[arg(long, value_name = "SECONDS")]
    warmup_s: Option<f64>,
    /// In the `on` setting, keep a thread a job frees this many milliseconds for the job's next
    /// request (the quota's `keep_ms`; default 0, off, as seed 003).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    keep_ms: Option<f64>,
    /// With --print-plan: what the quota's rule matches, e.g. `client=10.77.0.96/27` (a test
    /// bed's compute nodes by address, as FEFS's node groups); in-process the jobs' mounts are
    /// all on loopback, so the rule matches the two jobs by id [default: job={1 2}].
    #[arg(long, value_name = "MATCH", requires = "print_plan")]
    quota_match: Option<String>,
    /// Output directory (default: ./seed003-YYYYMMDD-HHMMSS, the UTC time of the start).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Run nothing: analyse again the runs an earlier `--out DIR` left in `DIR/runs/` (with the
    /// parameters it recorded in `DIR/params.json`), and write the outputs into DIR anew.
    #[arg(long, value_name = "DIR", conflicts_with_all = [
        "out", "repeat", "scale", "files", "meta_latency_ms", "stagein_dirs", "stagein_limit_s",
        "light_limit_s", "heavy_procs", "light_procs", "light_iterations", "warmup_s", "keep_ms",
        "kill",
    ])]
    analyze: Option<PathBuf>,
    /// Run nothing but write `DIR/params.json` (give `--out DIR`) and print the plan for a
    /// driver that runs the jobs elsewhere (`scripts/cluster-seed003.sh`), one record per line,
    /// fields separated by spaces: `server FLAGS...` (but the quota, token and secret), `quota
    /// THREADS_PCT JOB_SHARE_PCT KEEP_MS`, `heavy PROCS FILES STRIPES`, `light PROCS FILES
    /// ITERATIONS STRIPES`, `stagein DIRS LIMIT_S`, `limits LIGHT_LIMIT_S WARMUP_S`; and write
    /// the `on` setting's quota file `DIR/quota.toml`; then `iosets experiment seed003
    /// --analyze DIR` reads the runs it left in `DIR/runs/`.
    #[arg(long, requires = "out", conflicts_with_all = ["kill", "repeat"])]
    print_plan: bool,
    /// Test only: SIGKILL the server, the heavy or the light job SECONDS after the light job's
    /// mdtest started, in every run that has it.
    #[arg(long, value_name = "ROLE@SECONDS", hide = true)]
    kill: Option<run::Kill>,
}

/// The parameters the flags ask for.
fn params_of(a: &Seed003Args) -> Result<Params> {
    let mut p = Params::of_scale(a.scale.as_deref().unwrap_or("full"))?;
    let before = p.clone();
    if let Some(v) = a.files {
        p.files = v;
    }
    if let Some(v) = a.meta_latency_ms {
        p.meta_latency_ms = v;
    }
    if let Some(v) = a.stagein_dirs {
        p.stagein_dirs = v;
    }
    if let Some(v) = a.stagein_limit_s {
        p.stagein_limit_s = v;
    }
    if let Some(v) = a.light_limit_s {
        p.light_limit_s = v;
    }
    if let Some(v) = a.heavy_procs {
        p.heavy_procs = v;
    }
    if let Some(v) = a.light_procs {
        p.light_procs = v;
    }
    if let Some(v) = a.light_iterations {
        p.light_iterations = v;
    }
    if let Some(v) = a.warmup_s {
        p.warmup_s = v;
    }
    if let Some(v) = a.keep_ms {
        p.keep_ms = v;
    }
    if let Some(v) = &a.quota_match {
        p.quota_match = v.clone();
    }
    if p != before {
        p.scale = format!("{} (changed by flags)", before.scale);
    }
    p.check()?;
    Ok(p)
}

/// `iosets experiment seed003`.
pub(crate) fn seed003(a: &Seed003Args) -> Result<()> {
    if let Some(dir) = &a.analyze {
        if !dir.join("runs").is_dir() {
            bail!(
                "--analyze {}: no runs/ directory in it (give a directory an earlier \
                 `iosets experiment seed003 --out DIR` wrote)",
                dir.display()
            );
        }
        let p = Params::load(dir)?;
        let found = analysis::discover(dir)?;
        println!(
            "iosets experiment seed003 --analyze {}: {} runs, nothing run",
            dir.display(),
            found.len()
        );
        for l in p.describe() {
            println!("  {l}");
        }
        let runs = found
            .iter()
            .map(|(s, rep, d)| analysis::load_run(&p, *s, *rep, d))
            .collect::<Result<Vec<_>>>()?;
        return finish(&p, &runs, dir);
    }
    let repeat = a.repeat.unwrap_or(3);
    if !(1..=100).contains(&repeat) {
        bail!("--repeat {repeat}: expected 1 to 100");
    }
    let p = params_of(a)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("seed003-{}", crate::rig::timestamp())));
    std::fs::create_dir_all(out.join("runs"))
        .with_context(|| format!("creating {}", out.join("runs").display()))?;
    p.save(&out)?;
    if a.print_plan {
        // The `on` setting's quota file, for the driver to give its server.
        let q = out.join("quota.toml");
        std::fs::write(&q, p.quota_toml()).with_context(|| format!("writing {}", q.display()))?;
        print!("{}", plan_text(&p));
        return Ok(());
    }
    // The rig's Ctrl-C flag and handler: one per process, whichever experiment.
    crate::rig::catch_interrupts()?;
    println!(
        "iosets experiment seed003: seed 003's thread-quota test through the mount, scale {}, \
         {repeat} repetition{} of reference, off and on",
        p.scale,
        if repeat == 1 { "" } else { "s" }
    );
    for l in p.describe() {
        println!("  {l}");
    }
    println!("  output: {}", out.display());
    let total = repeat * Setting::ALL.len();
    let mut runs: Vec<RunResult> = Vec::new();
    for rep in 1..=repeat {
        for setting in Setting::ALL {
            let label = format!("[{}/{total}] {} #{rep}", runs.len() + 1, setting.name());
            let dir = out.join("runs").join(format!("{}-{rep}", setting.name()));
            println!("{label}: running");
            let spec = RunSpec {
                params: &p,
                setting,
                rep,
                dir: dir.clone(),
                label: label.clone(),
                interrupted: &crate::rig::INTERRUPTED,
                kill: a.kill,
            };
            let m = run::run_one(&spec)
                .with_context(|| format!("run {} repetition {rep}", setting.name()))?;
            let r = analysis::load_run(&p, setting, rep, &dir)
                .with_context(|| format!("reading run {} repetition {rep}", setting.name()))?;
            let (st, done) = r.stagein_s();
            println!(
                "{label}: done in {:.0} s; light job create {:.1}, stat {:.1}, remove {:.1} \
                 ops/s; stage-in {}{st:.3} s; server CPU {:.1}% of a core",
                m.light_wall_s + m.stagein_wall_s,
                r.light_rate(crate::app::mdtest::Phase::Create),
                r.light_rate(crate::app::mdtest::Phase::Stat),
                r.light_rate(crate::app::mdtest::Phase::Remove),
                if done {
                    ""
                } else {
                    "not completed, stopped at "
                },
                r.cpu_pct_core()
            );
            runs.push(r);
        }
    }
    finish(&p, &runs, &out)
}

/// `--print-plan`'s text (see the flag).
fn plan_text(p: &Params) -> String {
    format!(
        "server {}\nquota {} {} {}\nheavy {} {} {}\nlight {} {} {} {}\nstagein {} {}\nlimits {} {}\n",
        run::server_flags(p).join(" "),
        p.threads_pct,
        p.job_share_pct,
        p.keep_ms,
        p.heavy_procs,
        p.files,
        p.heavy_stripes,
        p.light_procs,
        p.files,
        p.light_iterations,
        p.light_stripes,
        p.stagein_dirs,
        p.stagein_limit_s,
        p.light_limit_s,
        p.warmup_s
    )
}

/// Writes the outputs and prints the tables and the verdicts.
fn finish(p: &Params, runs: &[RunResult], out: &std::path::Path) -> Result<()> {
    let written = report::write_all(p, runs, out)?;
    println!();
    print!("{}", report::tables(p, runs));
    println!();
    for r in runs.iter().filter(|r| r.setting == Setting::On) {
        println!(
            "on #{}: the server's job statistics listed jobs {:?} with operations, jobs {:?} \
             under rule {:?} ({})",
            r.rep,
            r.snapshot_jobs,
            r.rule_jobs,
            params::RULE,
            r.dir.join("snapshot-jobs.json").display()
        );
    }
    println!();
    for v in report::verdicts(runs) {
        println!("{v}");
    }
    println!("wrote:");
    for w in written {
        println!("  {}", w.display());
    }
    Ok(())
}
