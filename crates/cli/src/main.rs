//! `iosets`: the command-line front end.
//!
//! Subcommands: `demo` (a short run of `iosets experiment seed004`: seed 004's workload, scaled
//! down, written by unmodified programs through a FUSE mount over two loopback servers, under
//! `timeorder` and `iosets`), `experiment` (seeds' experiments end to end through a mount:
//! `seed004`), `app` (applications doing plain POSIX I/O for those experiments: `periodic`),
//! `serve` (the I/O server) and `ctl` (its control), `mount`/`umount` (the FUSE client),
//! `replay` (replay a generated workload or a CSV trace through a policy on a modelled device
//! and print who got what), `demo-wfq` (seed 000's weighted-fair-queuing check, scaled up),
//! `sim`, `detect` and `policies` (every registered policy and its tunables). This binary parses
//! arguments and prints; every decision and measurement comes from the library crates (the
//! experiment harness in `experiment` starts servers, a mount and processes, and reads their
//! logs).

mod conventions;
mod detect_cmd;
mod mount_cmd;
mod serve_cmd;
mod sim_cmd;
mod top;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

use iosets_policy::registry::POLICIES;
use iosets_policy::tunables::parse_pairs;
use iosets_policy::{ClassId, Priority};
use iosets_sim::plan::{device_from_units, execute, Outcome, Plan, Source};
use iosets_sim::report::{save_shares_csv, save_shares_svg, summary_table};
use iosets_sim::shares::ShareKey;
use iosets_sim::workload::{Arrivals, Assign, Sizes, WorkloadSpec, DEFAULT_PARETO_ALPHA};
use iosets_sim::{DeviceModel, SimError};

#[derive(Debug, Parser)]
#[command(
    name = "iosets",
    version,
    about = "I/O request scheduling for shared HPC storage"
)]
struct Cli {
    /// How log lines (on standard error) are written: text for people, json (one object per
    /// line) for log collectors. Which lines: RUST_LOG (default `info`, e.g.
    /// `RUST_LOG=iosets_server=debug`).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t = LogFormat::Text,
        env = "IOSETS_LOG_FORMAT"
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per event.
    Json,
}

/// Installs the log subscriber: events at or above RUST_LOG's levels (default `info`) to
/// standard error, or to a lab run's file ([`iosets_lab::logsink`]), in `format`; colours only on a
/// terminal and never for the lab (`lab`), whose lines go to files. A RUST_LOG that does not
/// parse is an error, not ignored.
fn init_logging(format: LogFormat, lab: bool) -> Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => EnvFilter::try_new(&v).with_context(|| {
            format!("RUST_LOG={v:?} is not a log filter (e.g. info, iosets_server=debug)")
        })?,
        _ => EnvFilter::new("info"),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(!lab && std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(iosets_lab::logsink::Sink);
    match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    }
    .map_err(|e| anyhow::anyhow!("installing the logger: {e}"))
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay a workload through a policy on a modelled device and print each queue's share.
    Replay(Box<ReplayArgs>),
    /// Seed 000's check of weighted fair queuing: 4 queues, weights 1:2:3:4, shares over time.
    DemoWfq(DemoArgs),
    /// Seed 004's experiment, scaled down, through a FUSE mount (a short `experiment seed004`).
    ///
    /// Two servers on loopback, one FUSE mount over them, and 1 high-frequency and 6
    /// (`--low-jobs`) low-frequency jobs as plain POSIX programs (`iosets app periodic`) writing
    /// through it, once under timeorder and once under iosets with Set-10 priorities (`--auto`:
    /// also with priorities the servers detect); prints each job's stretch and seed 004's four
    /// metrics for each.
    Demo(iosets_lab::demo::IoDemoArgs),
    /// Serve a directory: schedule every job's file I/O with a policy (the I/O server).
    Serve(Box<serve_cmd::ServeArgs>),
    /// Control a running server: job statistics, priorities, policy, server statistics.
    Ctl(serve_cmd::CtlArgs),
    /// Mount the servers (or a local directory) with FUSE: unmodified programs are scheduled
    /// by the job they belong to.
    #[command(after_long_help = iosets_mount::control::README)]
    Mount(Box<mount_cmd::MountArgs>),
    /// Unmount an iosets mount (also after its process was killed).
    Umount(mount_cmd::UmountArgs),
    /// List every registered policy with its tunables.
    Policies,
    /// Find each job's I/O period in a trace: period, confidence, Set-10 set and priority.
    Detect(detect_cmd::DetectArgs),
    /// The IO-SETS fluid simulator: run a scenario, or sweep one and plot the metrics.
    Sim(sim_cmd::SimArgs),
    /// Applications that do real POSIX I/O (no iosets library), for experiments on a mount.
    App(iosets_lab::app::AppArgs),
    /// Reproduce a seed's experiment end to end through a real mount.
    Experiment(iosets_lab::experiment::ExperimentArgs),
    /// The reliability suite: kill -9 and SIGTERM restarts under load, many clients against a
    /// model, and resource probes, against a real `iosets serve` on loopback.
    Soak(iosets_lab::soak::SoakArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to standard output.
    Completions(conventions::CompletionsArgs),
    /// Write the manual pages (`--out DIR`: every page; otherwise iosets.1 to standard output).
    Man(conventions::ManArgs),
    /// Configuration files: `iosets config check FILE` checks one without starting a server.
    #[command(subcommand)]
    Config(conventions::ConfigCommand),
    /// A live view of one or many servers: jobs with their set, priority and its source,
    /// bandwidth, queues, waits, quota rules (plain-text frames without a terminal).
    Top(top::TopArgs),
}

#[derive(Debug, Args)]
struct ReplayArgs {
    /// Policy to replay (see `iosets policies`).
    #[arg(long, default_value = "wfq")]
    policy: String,
    /// A policy tunable, KEY=VALUE; repeat for several (e.g. --opt weight.1=1 --opt weight.2=3).
    #[arg(long = "opt", value_name = "KEY=VALUE")]
    opts: Vec<String>,
    /// Replay this trace instead of generating a workload: iosets' request trace (the server's
    /// --trace file; header with at least job,op,offset,len,arrival_ns, see docs/trace-format.md),
    /// or the older `time_s,job,size[,file,offset,op,class,priority]` CSV.
    #[arg(
        long,
        value_name = "FILE.csv",
        conflicts_with_all = [
            "jobs", "requests", "size_min", "size_max", "sizes", "assign", "rate", "priorities",
            "classes", "seed",
        ]
    )]
    trace: Option<PathBuf>,
    #[command(flatten)]
    generator: GeneratorArgs,
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    output: OutputArgs,
}

/// The workload generator's flags (ignored with --trace).
#[derive(Debug, Args)]
struct GeneratorArgs {
    /// Number of jobs (numbered 1..=N; each writes sequentially in its own file).
    #[arg(long, default_value_t = 4)]
    jobs: u64,
    /// Number of requests.
    #[arg(long, default_value_t = 1000)]
    requests: usize,
    /// Smallest request size (bytes; suffixes K/KiB, M/MiB, G/GiB, kB/MB/GB).
    #[arg(long, value_name = "BYTES", default_value = "4KiB", value_parser = parse_size)]
    size_min: u64,
    /// Largest request size (bytes; same suffixes).
    #[arg(long, value_name = "BYTES", default_value = "1MiB", value_parser = parse_size)]
    size_max: u64,
    /// Size law: uniform in [min, max], or heavy (bounded Pareto between min and max).
    #[arg(long, value_enum, default_value_t = SizeLaw::Uniform)]
    sizes: SizeLaw,
    /// How requests are attributed to jobs.
    #[arg(long, value_enum, default_value_t = AssignArg::Random)]
    assign: AssignArg,
    /// Poisson arrivals at this many requests per second (default: all queued at t=0).
    #[arg(long, value_name = "REQ_PER_S", allow_negative_numbers = true)]
    rate: Option<f64>,
    /// Priority hint of each job, comma-separated, one per job (used by iosets; a weight for wfq).
    #[arg(
        long,
        value_name = "P1,P2,...",
        value_delimiter = ',',
        allow_negative_numbers = true
    )]
    priorities: Vec<f64>,
    /// Class of each job, comma-separated, one per job (for wfq key=class, --share-by class).
    #[arg(long, value_name = "C1,C2,...", value_delimiter = ',')]
    classes: Vec<u64>,
    /// Seed of the generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// The modelled device.
#[derive(Debug, Args)]
struct DeviceArgs {
    /// Device bandwidth, MiB/s, shared equally by the batches in service.
    #[arg(
        long,
        value_name = "MIB_PER_S",
        default_value_t = 1024.0,
        allow_negative_numbers = true
    )]
    bandwidth_mib_s: f64,
    /// Fixed latency of each batch before its transfer, µs.
    #[arg(
        long,
        value_name = "US",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    latency_us: f64,
    /// Batches in service at once.
    #[arg(long, default_value_t = 1)]
    slots: usize,
    /// Add a disk head: seek time per GiB of distance within a file, ms (needs --max-seek-ms).
    #[arg(
        long,
        value_name = "MS",
        requires = "max_seek_ms",
        allow_negative_numbers = true
    )]
    seek_ms_per_gib: Option<f64>,
    /// With a disk head: the longest seek, also the cost of moving to another file, ms.
    #[arg(
        long,
        value_name = "MS",
        requires = "seek_ms_per_gib",
        allow_negative_numbers = true
    )]
    max_seek_ms: Option<f64>,
    /// A preset instead of the device flags: hdd (150 MiB/s, 100 µs, 1 slot, seeks of 8 ms per GiB
    /// up to 8 ms) or ssd (2 GiB/s, 80 µs, 8 slots, no seeks).
    #[arg(
        long,
        value_enum,
        conflicts_with_all = ["bandwidth_mib_s", "latency_us", "slots", "seek_ms_per_gib", "max_seek_ms"]
    )]
    device: Option<DevicePreset>,
}

/// A preset device model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum DevicePreset {
    /// A seeking disk.
    Hdd,
    /// Flash: no seek cost.
    Ssd,
}

/// What to measure and write.
#[derive(Debug, Args)]
struct OutputArgs {
    /// Requests per sliding window (seed 000 uses 300).
    #[arg(long, default_value_t = 300)]
    window: usize,
    /// What a queue is when measuring shares.
    #[arg(long, value_enum, default_value_t = ShareBy::Job)]
    share_by: ShareBy,
    /// Write the window shares as CSV here.
    #[arg(long, value_name = "FILE.csv")]
    csv: Option<PathBuf>,
    /// Plot the window shares as SVG here.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Print nothing on success.
    #[arg(long)]
    quiet: bool,
}

#[derive(Debug, Args)]
struct DemoArgs {
    /// Directory for demo-shares.csv and demo-shares.svg.
    #[arg(long, value_name = "DIR", default_value = "out")]
    out: PathBuf,
    /// Seed of the generated workload.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum SizeLaw {
    Uniform,
    Heavy,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum AssignArg {
    Random,
    #[value(name = "roundrobin", alias = "round-robin")]
    RoundRobin,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ShareBy {
    Job,
    Class,
    Priority,
}

impl From<ShareBy> for ShareKey {
    fn from(s: ShareBy) -> ShareKey {
        match s {
            ShareBy::Job => ShareKey::Job,
            ShareBy::Class => ShareKey::Class,
            ShareBy::Priority => ShareKey::Priority,
        }
    }
}

/// Parses a byte count: `4096`, `4K`, `4KiB`, `1M`, `1MiB`, `2G`, `2GiB` (powers of 1024), or
/// `4kB`, `1MB`, `2GB` (powers of 1000).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size: expected bytes, e.g. 4096, 4KiB or 1MiB"))?;
    let unit: u64 = match suffix.trim() {
        "" | "B" | "b" => 1,
        "K" | "k" | "KiB" | "kiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        other => {
            return Err(format!(
                "unknown size suffix {other:?}: use B, KiB, MiB, GiB, kB, MB or GB"
            ))
        }
    };
    n.checked_mul(unit)
        .ok_or_else(|| format!("{s:?} is too large"))
}

fn fmt_bytes(b: u64) -> String {
    if b >= 1 << 20 && b.trailing_zeros() >= 20 {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 10 && b.trailing_zeros() >= 10 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// The device the flags describe: a preset, or bandwidth/latency/slots with an optional head.
fn device_of(d: &DeviceArgs) -> Result<DeviceModel> {
    match d.device {
        Some(DevicePreset::Hdd) => return Ok(DeviceModel::hdd()),
        Some(DevicePreset::Ssd) => return Ok(DeviceModel::ssd()),
        None => {}
    }
    let seek = d.seek_ms_per_gib.zip(d.max_seek_ms);
    device_from_units(d.bandwidth_mib_s, d.latency_us, d.slots, seek).map_err(|e| match e {
        // A bad duration names its flag; a bad bandwidth or slot count, all three flags.
        SimError::InvalidDevice {
            field: field @ ("latency_us" | "seek_ms_per_gib" | "max_seek_ms"),
            value,
            expected,
        } => anyhow::anyhow!("--{} {value}: expected {expected}", field.replace('_', "-")),
        e => anyhow::Error::new(e).context(format!(
            "bad device flags (--bandwidth-mib-s {}, --latency-us {}, --slots {})",
            d.bandwidth_mib_s, d.latency_us, d.slots
        )),
    })
}

fn workload_spec(g: &GeneratorArgs) -> Result<WorkloadSpec> {
    let priorities = g
        .priorities
        .iter()
        .map(|&p| {
            Priority::new(p).with_context(|| {
                format!("--priorities: {p} is not a priority: expected a number > 0")
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let sizes = match g.sizes {
        SizeLaw::Uniform => Sizes::Uniform {
            min: g.size_min,
            max: g.size_max,
        },
        SizeLaw::Heavy => Sizes::BoundedPareto {
            min: g.size_min,
            max: g.size_max,
            alpha: DEFAULT_PARETO_ALPHA,
        },
    };
    let spec = WorkloadSpec {
        jobs: g.jobs,
        requests: g.requests,
        sizes,
        assign: match g.assign {
            AssignArg::Random => Assign::Random,
            AssignArg::RoundRobin => Assign::RoundRobin,
        },
        arrivals: match g.rate {
            None => Arrivals::Backlogged,
            Some(rate_per_s) => Arrivals::Poisson { rate_per_s },
        },
        priorities,
        classes: g.classes.iter().map(|&c| ClassId(c)).collect(),
        seed: g.seed,
    };
    spec.validate().context("bad workload flags")?;
    Ok(spec)
}

fn write_outputs(
    outcome: &Outcome,
    csv: Option<&Path>,
    plot: Option<&Path>,
    title: &str,
) -> Result<()> {
    if let Some(path) = csv {
        save_shares_csv(path, &outcome.shares).context("writing the share CSV")?;
    }
    if let Some(path) = plot {
        save_shares_svg(
            path,
            &outcome.shares,
            &outcome.summary.expected_shares(),
            title,
        )
        .context("writing the share plot")?;
    }
    Ok(())
}

fn replay(args: &ReplayArgs) -> Result<()> {
    let pairs = parse_pairs(&args.opts).context("--opt")?;
    let source = match &args.trace {
        Some(path) => Source::Trace(path.clone()),
        None => Source::Generated(workload_spec(&args.generator)?),
    };
    let d = &args.device;
    let device = device_of(d)?;
    let out = &args.output;
    if out.window == 0 {
        bail!("--window 0: a window must hold at least 1 request");
    }
    let plan = Plan {
        policy: args.policy.clone(),
        pairs,
        source,
        device,
        window: out.window,
        share_by: out.share_by.into(),
    };
    let outcome = execute(&plan)?;
    let title = format!(
        "{}: share of bytes per {}-request window, by {}",
        outcome.result.policy, plan.window, plan.share_by
    );
    write_outputs(&outcome, out.csv.as_deref(), out.plot.as_deref(), &title)?;
    if !out.quiet {
        print!("{}", summary_table(&outcome.summary));
        if outcome.shares.windows.is_empty() {
            println!(
                "(fewer than {} requests: no share windows; try a smaller --window)",
                plan.window
            );
        }
        for (what, path) in [("window shares", &out.csv), ("plot", &out.plot)] {
            if let Some(p) = path {
                println!("wrote {what} to {}", p.display());
            }
        }
    }
    Ok(())
}

fn demo(args: &DemoArgs) -> Result<()> {
    const JOBS: u64 = 4;
    const REQUESTS: usize = 4000;
    const WINDOW: usize = 300;
    let (min, max) = (4 << 10, 1 << 20);
    let opts = ["weight.1=1", "weight.2=2", "weight.3=3", "weight.4=4"];
    let (bandwidth_mib_s, latency_us, slots) = (1024.0, 20.0, 2);
    let plan = Plan {
        policy: "wfq".to_string(),
        pairs: parse_pairs(&opts)?,
        source: Source::Generated(WorkloadSpec {
            sizes: Sizes::Uniform { min, max },
            seed: args.seed,
            ..WorkloadSpec::new(JOBS, REQUESTS)
        }),
        device: device_from_units(bandwidth_mib_s, latency_us, slots, None)?,
        window: WINDOW,
        share_by: ShareKey::Job,
    };
    let outcome = execute(&plan)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let csv = args.out.join("demo-shares.csv");
    let svg = args.out.join("demo-shares.svg");
    let title = "wfq, weights 1:2:3:4: share of bytes per 300-request window";
    write_outputs(&outcome, Some(&csv), Some(&svg), title)?;

    let s = &outcome.summary;
    println!("iosets demo-wfq: seed 000's weighted fair queuing check, scaled up");
    println!(
        "  {REQUESTS} requests of {} to {} (uniform) attributed at random to {JOBS} jobs, all \
         queued at t=0 (seed {})",
        fmt_bytes(min),
        fmt_bytes(max),
        args.seed
    );
    println!("  policy wfq with {}", opts.join(" "));
    println!(
        "  device: {bandwidth_mib_s} MiB/s shared by up to {slots} batches in service, \
         {latency_us} µs latency each"
    );
    println!(
        "  share of the bytes in each {WINDOW}-request window, over the {} windows (of {}) where \
         all {JOBS} jobs are backlogged:",
        s.backlogged_windows, s.windows
    );
    println!();
    println!(
        "  {:<6} {:>6} {:>9} {:>9} {:>7} {:>7} {:>11} {:>12}",
        "queue", "weight", "expected", "measured", "min", "max", "drained at", "request #"
    );
    let pct = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |v| format!("{:.1}%", v * 100.0));
    for (q, d) in s.queues.iter().zip(&outcome.shares.queues) {
        println!(
            "  {:<6} {:>6} {:>9} {:>9} {:>7} {:>7} {:>9.3} s {:>12}",
            q.queue.to_string(),
            q.weight.map_or_else(|| "-".to_string(), |w| w.to_string()),
            pct(q.expected_share),
            pct(q.window_mean),
            pct(q.window_min),
            pct(q.window_max),
            q.drain_time.as_secs_f64(),
            d.drain_index + 1,
        );
    }
    println!();
    println!(
        "  {} requests, {:.0} MiB in {:.3} s ({:.0} MiB/s); as each queue drains, the others take \
         its share in proportion to their weights",
        s.requests,
        s.bytes as f64 / 1_048_576.0,
        s.makespan.as_secs_f64(),
        s.throughput / 1_048_576.0
    );
    println!(
        "wrote {} (window shares) and {} (plot)",
        csv.display(),
        svg.display()
    );
    Ok(())
}

fn policies() {
    for p in POLICIES {
        println!("{:<10} {}", p.name, p.summary);
        if p.tunables.is_empty() {
            println!("    (no tunables)");
        }
        for t in p.tunables {
            let default = if t.default.is_empty() {
                "no default".to_string()
            } else {
                format!("default {}", t.default)
            };
            println!("    --opt {}=...  ({default})", t.name);
            println!("        {}", t.help);
        }
    }
}

/// Whether `command` only prints to standard output and exits. Those die quietly of SIGPIPE when
/// the reader goes away (`iosets policies | head`), as coreutils do; the others keep Rust's
/// default (SIGPIPE ignored, EPIPE an error): a server, a mount or an experiment must outlive a
/// closed pipe or socket and shut down cleanly.
fn prints_and_exits(command: &Command) -> bool {
    matches!(
        command,
        Command::Replay(_)
            | Command::DemoWfq(_)
            | Command::Ctl(_)
            | Command::Policies
            | Command::Detect(_)
            | Command::Sim(_)
            | Command::Completions(_)
            | Command::Man(_)
            | Command::Config(_)
    )
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if prints_and_exits(&cli.command) {
        sigpipe::reset();
    }
    let lab = matches!(cli.command, Command::Demo(_) | Command::Experiment(_));
    if let Err(e) = init_logging(cli.log_format, lab) {
        eprintln!("error: {e:#}");
        return ExitCode::from(2);
    }
    let result = match &cli.command {
        Command::Replay(args) => replay(args),
        Command::DemoWfq(args) => demo(args),
        Command::Demo(args) => iosets_lab::demo::run(args),
        Command::Serve(args) => serve_cmd::serve(args),
        Command::Ctl(args) => serve_cmd::ctl(args),
        Command::Mount(args) => mount_cmd::mount(args),
        Command::Umount(args) => mount_cmd::umount(args),
        Command::Detect(args) => detect_cmd::run(args),
        Command::Sim(args) => sim_cmd::sim(args),
        Command::App(args) => iosets_lab::app::run(args),
        Command::Experiment(args) => iosets_lab::experiment::run(args),
        Command::Soak(args) => iosets_lab::soak::run(args),
        Command::Completions(args) => conventions::completions(args, Cli::command()),
        Command::Man(args) => conventions::man(args, Cli::command()),
        Command::Config(command) => conventions::config(command),
        Command::Top(args) => top::run(args),
        Command::Policies => {
            policies();
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            ExitCode::FAILURE
        }
    }
}

/// `e` and its causes, `: `-separated, each cause left out when the text before already says it
/// (many errors print their cause in their own message, and `{:#}` would print it twice:
/// "cannot connect to X: Connection refused: Connection refused").
pub(crate) fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if text.is_empty() {
            text = part;
        } else if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_says_each_cause_once() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = anyhow::Error::from(iosets_client::ClientError::Connect {
            server: "127.0.0.1:1".parse().unwrap(),
            source: io,
        })
        .context("asking 127.0.0.1:1");
        let text = error_text(&e);
        assert_eq!(text.matches("connection refused").count(), 1, "{text}");
        assert!(
            text.starts_with("asking 127.0.0.1:1: cannot connect to 127.0.0.1:1: "),
            "{text}"
        );
        // Causes the message does not carry are kept.
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_text(&e), "outer: inner");
    }

    #[test]
    fn sizes_take_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("4kB"), Ok(4000));
        assert!(parse_size("4XB").unwrap_err().contains("suffix"));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999GiB")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
