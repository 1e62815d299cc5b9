//! `iosets sim`: the IO-SETS fluid simulator (`run`, `sweep`, `heuristics`).
//!
//! This file parses flags and prints; the model, heuristics, metrics, sweeps and writers are in
//! `iosets_sim::fluid`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use iosets_sim::fluid::heuristic::{CATALOGUE, CATALOGUE_NOTE};
use iosets_sim::fluid::metrics::METRIC_NAMES;
use iosets_sim::fluid::report::{job_table, save_jobs_csv, summary_table};
use iosets_sim::fluid::scenario::Scenario;
use iosets_sim::fluid::session::{bounds_line, run_input, RunInput};
use iosets_sim::fluid::sweep::{run_sweep, SweepConfig, SweepResult};
use iosets_sim::fluid::{Heuristic, TurnBounds, Workload};

/// `iosets sim` and its subcommands.
#[derive(Debug, Args)]
pub struct SimArgs {
    #[command(subcommand)]
    command: SimCommand,
}

#[derive(Debug, Subcommand)]
enum SimCommand {
    /// Run a scenario once under each heuristic: a table per job, then the metrics side by side.
    Run(RunArgs),
    /// Run a sweep: every value of its variable × K random workloads × every heuristic, in
    /// parallel; writes CSV (every run), JSON (aggregates) and one SVG plot per metric.
    Sweep(SweepArgs),
    /// List the heuristics and their variants.
    Heuristics,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The scenario file (TOML; see scenarios/ and EXPERIMENTS.md).
    #[arg(required_unless_present = "workload")]
    scenario: Option<PathBuf>,
    /// Run this workload (JSON: the `workload` object written by --json) instead of a scenario,
    /// under the paper's six heuristics unless --heuristic says otherwise.
    #[arg(long, value_name = "FILE.json", conflicts_with_all = ["scenario", "at"])]
    workload: Option<PathBuf>,
    /// The value of the scenario's swept variable to run at (required for a sweep file).
    #[arg(long, value_name = "VALUE", allow_negative_numbers = true)]
    at: Option<f64>,
    /// A heuristic to run instead of the scenario's list; repeat for several (see `iosets sim
    /// heuristics`).
    #[arg(long = "heuristic", short = 'H', value_name = "NAME")]
    heuristics: Vec<String>,
    /// Seed: the workload is workload 0 of `iosets sim sweep --seed SEED`.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print only the summary, not the table per job.
    #[arg(long)]
    summary_only: bool,
    /// Write a line per (heuristic, job) as CSV here.
    #[arg(long, value_name = "FILE.csv")]
    csv: Option<PathBuf>,
    /// Write the workload and every result as JSON here.
    #[arg(long, value_name = "FILE.json")]
    json: Option<PathBuf>,
    /// Include every phase of every job in the JSON.
    #[arg(long, requires = "json")]
    phases: bool,
    #[command(flatten)]
    bounds: BoundsArgs,
}

/// The servers' bounds on a turn, for `sim run` and `sim sweep`.
#[derive(Debug, Args)]
struct BoundsArgs {
    /// Bound a job's turn in its set as the servers' `iosets` policy does by default
    /// (`max_exclusive_ms=auto`, `unknown_hold_ms=2000`) instead of the paper's rule (a job
    /// keeps its set for its whole phase).
    #[arg(long)]
    bounds: bool,
    /// An option of the `iosets` policy whose bounds on a turn to model (`max_exclusive_ms`,
    /// `unknown_hold_ms`; any other of its options is accepted and changes nothing here);
    /// repeatable; implies --bounds.
    #[arg(long = "iosets-opt", value_name = "KEY=VALUE")]
    iosets_opt: Vec<String>,
}

#[derive(Debug, Args)]
struct SweepArgs {
    /// The sweep file (a scenario with a [sweep] table; without one, a single point).
    sweep: PathBuf,
    /// Random workloads per value of the swept variable.
    #[arg(long, default_value_t = 20, value_name = "K")]
    workloads: usize,
    /// Seed of the sweep (workload k is drawn with a seed derived from it and k).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A heuristic to run instead of the scenario's list; repeat for several.
    #[arg(long = "heuristic", short = 'H', value_name = "NAME")]
    heuristics: Vec<String>,
    /// Directory for NAME.csv, NAME.json and NAME-METRIC.svg (NAME: the scenario's name).
    #[arg(long, value_name = "DIR", default_value = "out")]
    out: PathBuf,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Simulate every run to its end instead of stopping at the window's end (same metrics,
    /// slower).
    #[arg(long)]
    full_runs: bool,
    /// Do not draw the plots.
    #[arg(long)]
    no_plots: bool,
    /// Print nothing but errors (no progress bar, no tables).
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    bounds: BoundsArgs,
}

/// Runs `iosets sim ...`.
pub fn sim(args: &SimArgs) -> Result<()> {
    match &args.command {
        SimCommand::Run(a) => run(a),
        SimCommand::Sweep(a) => sweep(a),
        SimCommand::Heuristics => {
            heuristics();
            Ok(())
        }
    }
}

fn load(path: &Path) -> Result<Scenario> {
    Ok(Scenario::load(path)?)
}

fn parse_heuristics(names: &[String]) -> Result<Vec<Heuristic>> {
    names
        .iter()
        .map(|n| {
            n.parse::<Heuristic>()
                .with_context(|| format!("--heuristic {n}"))
        })
        .collect()
}

/// The bounds on a turn `sim run` and `sim sweep` model: none (the paper's), or the `iosets`
/// policy's with `--bounds` or `--iosets-opt`.
fn turn_bounds(a: &BoundsArgs) -> Result<TurnBounds> {
    if !a.bounds && a.iosets_opt.is_empty() {
        return Ok(TurnBounds::NONE);
    }
    let pairs = iosets_policy::tunables::parse_pairs(&a.iosets_opt)
        .map_err(|e| anyhow::anyhow!("--iosets-opt: {e}"))?;
    iosets_policy::iosets::turn_bounds(&pairs).map_err(|e| anyhow::anyhow!("--iosets-opt: {e}"))
}

fn run(a: &RunArgs) -> Result<()> {
    let input = match (&a.scenario, &a.workload) {
        (_, Some(path)) => RunInput::Workload {
            name: path.file_stem().map_or_else(
                || "workload".to_string(),
                |s| s.to_string_lossy().into_owned(),
            ),
            workload: Workload::load_json(path)?,
        },
        (Some(path), None) => RunInput::Scenario {
            scenario: Box::new(load(path)?),
            at: a.at,
        },
        (None, None) => bail!("give a scenario file or --workload FILE.json"),
    };
    let heuristics = parse_heuristics(&a.heuristics)?;
    let bounds = turn_bounds(&a.bounds)?;
    let done = run_input(input, &heuristics, a.seed, a.phases, bounds)?;
    let (workload, runs) = (&done.workload, &done.runs);
    println!("{}", done.headline());
    if !a.summary_only {
        for r in runs {
            println!();
            println!("== {} ({} events)", r.heuristic, r.events);
            print!("{}", job_table(workload, r));
        }
        println!();
    }
    print!("{}", summary_table(runs));
    if let Some(p) = &a.csv {
        save_jobs_csv(p, workload, runs)?;
        println!("wrote the per-job table to {}", p.display());
    }
    if let Some(p) = &a.json {
        done.report().save_json(p)?;
        println!("wrote the workload and results to {}", p.display());
    }
    Ok(())
}

fn sweep(a: &SweepArgs) -> Result<()> {
    let scenario = load(&a.sweep)?;
    let heuristics = if a.heuristics.is_empty() {
        scenario.heuristics.clone()
    } else {
        parse_heuristics(&a.heuristics)?
    };
    if a.workloads == 0 {
        bail!("--workloads 0: expected at least 1 workload per value");
    }
    if a.threads == Some(0) {
        bail!("--threads 0: expected at least 1 thread");
    }
    let values = scenario.sweep.as_ref().map_or(1, |s| s.values.len());
    let config = SweepConfig {
        workloads: a.workloads,
        seed: a.seed,
        heuristics,
        threads: a.threads,
        stop_at_window_end: !a.full_runs,
        bounds: turn_bounds(&a.bounds)?,
    };
    let tasks = (values * a.workloads) as u64;
    let bar = if a.quiet {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new(tasks);
        b.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} workloads ({eta} left)",
            )
            .context("progress bar template")?,
        );
        b
    };
    let start = Instant::now();
    let result = run_sweep(&scenario, &config, &|| bar.inc(1))?;
    let elapsed = start.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let saved = result.save(&a.out, !a.no_plots)?;
    if !a.quiet {
        print_sweep(&result, elapsed, a.threads);
        println!(
            "wrote {} (every run) and {} (aggregates)",
            saved.csv.display(),
            saved.json.display()
        );
        for p in saved.plots {
            println!("wrote {}", p.display());
        }
    }
    Ok(())
}

fn print_sweep(r: &SweepResult, elapsed: f64, threads: Option<usize>) {
    let events = r.events();
    println!(
        "sweep {}: {} values of {} × {} workload{} × {} heuristics = {} runs, {} events in {:.2} s \
         ({:.2} M events/s, {} threads)",
        r.name,
        r.values.len(),
        r.variable,
        r.workloads,
        if r.workloads == 1 { "" } else { "s" },
        r.heuristics.len(),
        r.rows.len(),
        events,
        elapsed,
        events as f64 / elapsed / 1e6,
        threads.unwrap_or_else(rayon_threads),
    );
    if let Some(line) = bounds_line(r.bounds) {
        println!("{line}");
    }
    if !r.random && r.workloads > 1 {
        println!(
            "(the scenario is not random: its {} workloads are identical; only :error heuristics vary)",
            r.workloads
        );
    }
    let points = r.points();
    for (m, name) in METRIC_NAMES.iter().enumerate() {
        println!();
        println!("{name} (mean over the workloads)");
        let mut header = format!("{:>8}", r.variable);
        for h in &r.heuristics {
            header.push_str(&format!("  {:>15}", h.to_string()));
        }
        println!("{header}");
        for &x in &r.values {
            let mut line = format!("{x:>8}");
            for h in &r.heuristics {
                let label = h.to_string();
                let v = points
                    .iter()
                    .find(|p| p.value == x && p.heuristic == label)
                    .map_or(f64::NAN, |p| p.stats()[m].mean);
                line.push_str(&format!("  {v:>15.4}"));
            }
            println!("{line}");
        }
    }
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn heuristics() {
    for (name, what) in CATALOGUE {
        println!("{name:<16} {what}");
    }
    println!("{CATALOGUE_NOTE}");
}
