//! `iosets demo`: seed 004's experiment, scaled down, on real I/O servers through the client
//! library.
//!
//! # What it does
//! Starts two servers (`iosets_server::Server`) in this process on loopback, on one shared
//! temporary root, each with an emulated device of `--throttle-mib-s` MiB/s (the servers'
//! throttle: emulation, so the contention shows on any machine). Then it runs seed 004's workload
//! through `iosets_client::Client`: one high-frequency job and `--low-jobs` low-frequency jobs,
//! each alternating a compute phase (a sleep) and a write phase (1 MiB requests into its own
//! file, striped over both servers, with 4 requests outstanding per server: seed 004's jobs are
//! 8 IOR processes that each wait for their request). It runs the workload once with the servers
//! under `timeorder` (arrival order: the unmodified BeeGFS baseline) and once under `iosets` with
//! the Set-10 priorities given to both servers by control requests (seed 004's clairvoyant
//! variant: set `floor(log10 w_iter)` of each job's period when alone, priority `10^-set`).
//!
//! # Choices that make two independent servers agree
//! IO-SETS here has no central controller: each server orders its own queue, and a job's write
//! phase ends only when *both* servers have served their part of it. Three choices keep the two
//! servers from undoing each other's exclusivity:
//! - `iosets` runs with `order=jobid` (seed 004's rule inside a set): after a holder, both
//!   servers pick the next job by id, not by which burst happened to reach them first.
//! - The low-frequency jobs start 100 ms apart, in id order (as a launcher starts them), so
//!   their first bursts reach both servers in the same order. Started at the same instant, each
//!   server would give the set first to whichever burst won the race there.
//! - The client keeps a window of requests per server, not per job (like Lustre's RPCs in
//!   flight per storage target): a job whose part on one server waits does not drain its queue
//!   on the other, which would hand that server's set to another job.
//!
//! Seed 004's IOR also fsyncs after each write phase (`-e`); `--fsync` does that too. Under
//! `iosets` the fsync arrives after the job's last write has been served, when the set has
//! already passed to the next job of the set, so it waits for the whole set to take its turn
//! first: the job's phase ends a rotation late. With `--fsync` the `iosets` servers therefore run
//! with `hold_idle_ms=100` (the policy's anticipation: a set waits that long for its holder's next
//! request before passing on), which keeps each phase and its fsync together at the price of
//! 100 ms of idle set per phase (quick run: geomean stretch −15%, I/O slowdown −29%, utilization
//! +24% against timeorder; without the hold, −0% / −12% / +2%). Fsync is off by default.
//!
//! # Automatic priorities (`--auto`)
//! A third run gives no priority by control request: each server runs with `auto_priority` and
//! detects every job's period from the requests it serves (the `period` crate's online detector,
//! as seed 004 ran FTIO next to each application). A period needs at least three I/O phases to be
//! confident, so in this short run the high-frequency job is placed in its Set-10 set within a few
//! seconds while the low-frequency jobs, with one or two phases, keep sets of their own
//! at the default priority 1/50 and share the device fairly among themselves: the high-frequency
//! job is served almost as under clairvoyant priorities, the low-frequency ones as under
//! timeorder. Seed 004's runs last 2,800 s, long enough for FTIO to see every job's period.
//!
//! # Scaling
//! Seed 004: the high-frequency job computes 18 s and writes 16 MiB × 8 processes (period
//! 19.2 s at 110 MiB/s); 15 low-frequency jobs compute 360 s and write 320 MiB × 8 (period
//! 384 s); together they keep the file system busy almost all the time. Here every duration is
//! multiplied by a factor `f` (1/32 by default: periods of 0.6 s and 12 s; 1/128 with `--quick`),
//! a write phase moves what its scaled length moves at the two servers' aggregate bandwidth `B`
//! (whole MiB), and the compute phase is what remains of the scaled period. The low-frequency
//! write phase is lengthened by `15 / low_jobs`, so that fewer jobs bring seed 004's load (the
//! device busy about all the time when the phases are spread out).
//!
//! # Metrics
//! The simulator's code (`iosets_sim::fluid::metrics`), over the window `[0.1·D, D]` of a run of
//! length `D` (jobs stop at `D`; phases cut by the window count for their part inside it):
//! `e_cpu` is the compute time inside the window, `e_io` the bytes acknowledged inside it
//! divided by `B` (each 1 MiB request counted when its acknowledgement arrives).
//!
//! # What it is not
//! Not a benchmark of the servers: the device is emulated, the compute phases are sleeps, and
//! one run is one sample of a noisy machine; the numbers vary from run to run.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use iosets_client::{Client, ClientConfig, Control, JobId, Priority};
use iosets_policy::set10::SetMapping;
use iosets_server::{Server, ServerConfig, ServerHandle};
use iosets_sim::fluid::{JobWork, Metrics, Window};

const MIB: u64 = 1024 * 1024;
/// Servers the demo starts.
const SERVERS: usize = 2;
/// Write requests a job keeps outstanding on each server during its write phase (8 in all: seed
/// 004's jobs are 8 IOR processes, each waiting for its request before sending the next).
const PER_SERVER: usize = 4;
/// How far apart the low-frequency jobs start.
const STAGGER: Duration = Duration::from_millis(100);
/// The control token the demo gives its servers.
const TOKEN: &str = "iosets-demo";

/// `iosets demo` flags.
#[derive(Debug, Args)]
pub(crate) struct IoDemoArgs {
    /// A shorter run (about 15 s in all instead of about a minute), for tests.
    #[arg(long)]
    quick: bool,
    /// How many low-frequency jobs run beside the high-frequency one (1 to 32).
    #[arg(long, default_value_t = 6, value_name = "N")]
    low_jobs: usize,
    /// Emulated bandwidth of each server's device, MiB/s.
    #[arg(long, default_value_t = 64.0, value_name = "MIB_S")]
    throttle_mib_s: f64,
    /// Write the per-job results (io-demo-jobs.csv) and the metrics (io-demo-metrics.csv)
    /// into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// End every write phase with an fsync of the job's file, as seed 004's IOR runs did.
    #[arg(long)]
    fsync: bool,
    /// Also run `iosets` with automatic priorities: each server detects every job's period from
    /// its requests (`--auto-priority`), no control requests (seed 004's FTIO variant).
    #[arg(long)]
    auto: bool,
}

/// One kind of job: how long it computes and how much it writes per iteration.
#[derive(Clone, Copy, Debug)]
struct Kind {
    name: &'static str,
    compute: Duration,
    mib: u64,
}

/// The scaled experiment.
#[derive(Clone, Debug)]
struct Plan {
    high: Kind,
    low: Kind,
    low_jobs: usize,
    /// Each policy's run length.
    duration: Duration,
    /// Aggregate bandwidth of the servers, bytes/s.
    bandwidth: f64,
    throttle_mib_s: f64,
    fsync: bool,
}

impl Plan {
    fn new(args: &IoDemoArgs) -> Result<Plan> {
        if !(1..=32).contains(&args.low_jobs) {
            bail!("--low-jobs {}: expected 1 to 32", args.low_jobs);
        }
        let t = args.throttle_mib_s;
        if !(t.is_finite() && (1.0..=4096.0).contains(&t)) {
            bail!("--throttle-mib-s {t}: expected 1 to 4096 MiB/s");
        }
        let (f, duration) = if args.quick {
            (1.0 / 128.0, 6.0)
        } else {
            (1.0 / 32.0, 27.0)
        };
        let b_mib = SERVERS as f64 * t;
        // A kind of seed 004 with period `period` (s) whose write phase lasts `io` (s) alone:
        // the volume that phase moves at `B` (whole MiB), and the compute phase that keeps the
        // period.
        let kind = |name, period: f64, io: f64| {
            let mib = ((io * f * b_mib).round() as u64).max(1);
            Kind {
                name,
                compute: Duration::from_secs_f64((period * f - mib as f64 / b_mib).max(0.0)),
                mib,
            }
        };
        Ok(Plan {
            high: kind("high", 19.2, 1.2),
            low: kind("low", 384.0, 24.0 * 15.0 / args.low_jobs as f64),
            low_jobs: args.low_jobs,
            duration: Duration::from_secs_f64(duration),
            bandwidth: b_mib * MIB as f64,
            throttle_mib_s: t,
            fsync: args.fsync,
        })
    }

    /// Job ids: 1 is the high-frequency job, 2.. the low-frequency ones.
    fn jobs(&self) -> Vec<(JobId, Kind)> {
        std::iter::once((JobId(1), self.high))
            .chain((0..self.low_jobs).map(|i| (JobId(2 + i as u64), self.low)))
            .collect()
    }

    /// A kind's I/O phase alone and its period alone (`w_iter`), seconds.
    fn alone(&self, k: Kind) -> (f64, f64) {
        let io = (k.mib * MIB) as f64 / self.bandwidth;
        (io, k.compute.as_secs_f64() + io)
    }

    /// Set-10 as seed 004 applies it: set `floor(log10 w_iter)`, priority `10^-set`.
    fn set10(&self, k: Kind) -> (i32, Priority) {
        let (_, w) = self.alone(k);
        let set = w.log10().floor() as i32;
        (set, SetMapping::default().priority_of_set(set))
    }

    fn window(&self) -> Window {
        let d = self.duration.as_secs_f64();
        Window::new(0.1 * d, d).expect("0 <= begin < end")
    }
}

/// What one job did in one run, times in seconds from the run's start.
#[derive(Debug, Default)]
struct JobLog {
    compute: Vec<(f64, f64)>,
    /// Acknowledged write requests: (time, bytes).
    acks: Vec<(f64, u64)>,
    /// Complete write phases (writes and fsync): (start, end).
    phases: Vec<(f64, f64)>,
}

impl JobLog {
    fn work(&self, w: Window, bandwidth: f64) -> JobWork {
        let e_cpu = self
            .compute
            .iter()
            .map(|&(a, b)| (b.min(w.end) - a.max(w.begin)).max(0.0))
            .sum();
        let bytes: u64 = self
            .acks
            .iter()
            .filter(|(t, _)| *t >= w.begin && *t <= w.end)
            .map(|(_, b)| b)
            .sum();
        JobWork {
            e_cpu,
            e_io: bytes as f64 / bandwidth,
        }
    }

    fn mean_phase(&self) -> Option<f64> {
        (!self.phases.is_empty())
            .then(|| self.phases.iter().map(|(a, b)| b - a).sum::<f64>() / self.phases.len() as f64)
    }
}

/// One policy's run.
#[derive(Debug)]
struct RunResult {
    policy: &'static str,
    jobs: Vec<(JobId, Kind, JobLog, JobWork)>,
    metrics: Metrics,
}

/// The temporary root, removed when dropped.
#[derive(Debug)]
struct TempRoot(PathBuf);

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// With `--fsync`: how long a set waits for its holder's next request (the fsync, sent once the
/// job's writes are answered by *both* servers) before passing on — the policy's `hold_idle_ms`.
/// Without fsync there is no such follow-up and the set passes on at once (0, the paper's rule).
const FSYNC_HOLD_IDLE_MS: &str = "100";

fn start_servers(root: &Path, run: Run, throttle: f64, fsync: bool) -> Result<Vec<ServerHandle>> {
    let policy = run.policy();
    (0..SERVERS)
        .map(|_| {
            let mut cfg = ServerConfig::new(root);
            cfg.policy = policy.into();
            cfg.auto_priority = run == Run::Auto;
            if policy == "iosets" {
                // Seed 004's rule: inside a set, the next job by id. Every server then picks the
                // same holder without talking to the others; by arrival, two servers may each
                // pick a different job of a burst that reached them at once, and each job would
                // wait for its slower half.
                cfg.policy_options = vec![
                    ("order".into(), "jobid".into()),
                    (
                        "hold_idle_ms".into(),
                        if fsync { FSYNC_HOLD_IDLE_MS } else { "0" }.into(),
                    ),
                ];
            }
            cfg.workers = 2;
            cfg.throttle_mib_s = Some(throttle);
            cfg.token = Some(TOKEN.into());
            Server::start(cfg).with_context(|| format!("starting a {policy} server"))
        })
        .collect()
}

/// The configurations the demo compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Run {
    /// `timeorder`: arrival order, the baseline.
    Baseline,
    /// `iosets` with Set-10 priorities from each job's known period, set by control requests.
    Clairvoyant,
    /// `iosets` with priorities the servers detect themselves (`auto_priority`).
    Auto,
}

impl Run {
    fn policy(self) -> &'static str {
        match self {
            Run::Baseline => "timeorder",
            Run::Clairvoyant | Run::Auto => "iosets",
        }
    }

    /// The run's name in tables and CSVs.
    fn label(self) -> &'static str {
        match self {
            Run::Baseline => "timeorder",
            Run::Clairvoyant => "iosets",
            Run::Auto => "iosets-auto",
        }
    }
}

/// One job of one run: who, what, and when (times are instants of the run).
#[derive(Debug)]
struct JobRun {
    client: Client,
    kind: Kind,
    path: String,
    /// The run's start (time 0 of the logs).
    t0: Instant,
    /// When this job starts.
    begin: Instant,
    /// When every job stops.
    deadline: Instant,
    fsync: bool,
}

/// Runs one job from `begin` until `deadline`: compute, then write `kind.mib` MiB with
/// `PER_SERVER` requests in flight on each server (then fsync, if asked); again.
async fn run_job(job: JobRun) -> Result<JobLog, iosets_client::ClientError> {
    let JobRun {
        client,
        kind,
        path,
        t0,
        begin,
        deadline,
        fsync,
    } = job;
    let secs = |t: Instant| t.duration_since(t0).as_secs_f64();
    let block = bytes::Bytes::from(vec![0x5a; MIB as usize]);
    let mut log = JobLog::default();
    tokio::time::sleep_until(begin.into()).await;
    loop {
        let start = Instant::now();
        let end = (start + kind.compute).min(deadline);
        tokio::time::sleep_until(end.into()).await;
        log.compute.push((secs(start), secs(end)));
        if end >= deadline {
            return Ok(log);
        }
        let phase_start = Instant::now();
        // Each server's chunks of the phase, in file order, with a window of its own.
        let layout = client.layout();
        let mut todo: Vec<std::collections::VecDeque<u64>> = vec![Default::default(); SERVERS];
        for k in 0..kind.mib {
            todo[layout.server_of(&path, k)].push_back(k);
        }
        let mut busy = [0usize; SERVERS];
        let mut in_flight = tokio::task::JoinSet::new();
        let mut cut = false;
        loop {
            for s in 0..SERVERS {
                while busy[s] < PER_SERVER && !todo[s].is_empty() {
                    if Instant::now() >= deadline {
                        cut = true;
                        break;
                    }
                    let k = todo[s].pop_front().expect("not empty");
                    let (c, p, d) = (client.clone(), path.clone(), block.clone());
                    in_flight.spawn(async move {
                        let r = c.write_at(&p, k * MIB, d).await;
                        (s, r, Instant::now())
                    });
                    busy[s] += 1;
                }
            }
            let Some(done) = in_flight.join_next().await else {
                break;
            };
            let (s, written, at) = done.expect("a write task panicked");
            busy[s] -= 1;
            log.acks.push((secs(at), written?));
        }
        if cut {
            return Ok(log);
        }
        if fsync {
            client.fsync(&path).await?;
        }
        log.phases.push((secs(phase_start), secs(Instant::now())));
        if Instant::now() >= deadline {
            return Ok(log);
        }
    }
}

fn run_policy(plan: &Plan, root: &Path, run: Run) -> Result<RunResult> {
    let policy = run.label();
    let run_root = root.join(policy);
    std::fs::create_dir_all(&run_root)
        .with_context(|| format!("creating {}", run_root.display()))?;
    let servers = start_servers(&run_root, run, plan.throttle_mib_s, plan.fsync)?;
    let addrs: Vec<_> = servers.iter().map(|s| s.addr()).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the client runtime")?;
    let jobs = plan.jobs();
    let logs = rt.block_on(async {
        let control = Client::connect(&addrs, ClientConfig::new(JobId(0))).await?;
        if run == Run::Clairvoyant {
            for &(job, kind) in &jobs {
                let (_, priority) = plan.set10(kind);
                for server in 0..SERVERS {
                    control
                        .control(server, TOKEN, Control::SetPriority { job, priority })
                        .await?;
                }
            }
        }
        let mut clients = Vec::new();
        for &(job, kind) in &jobs {
            let client = Client::connect(&addrs, ClientConfig::new(job)).await?;
            let path = format!("job{}.dat", job.0);
            client.create(&path, 0o644, false).await?;
            clients.push((client, kind, path));
        }
        let t0 = Instant::now();
        let deadline = t0 + plan.duration;
        let tasks: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(i, (client, kind, path))| {
                tokio::spawn(run_job(JobRun {
                    client,
                    kind,
                    path,
                    t0,
                    // The high-frequency job (0) and the first low-frequency job start at once.
                    begin: t0 + STAGGER * (i.max(1) as u32 - 1),
                    deadline,
                    fsync: plan.fsync,
                }))
            })
            .collect();
        let mut logs = Vec::new();
        for t in tasks {
            logs.push(t.await.expect("a job task panicked")?);
        }
        Ok::<_, iosets_client::ClientError>(logs)
    });
    drop(rt);
    for s in servers {
        s.shutdown().context("stopping a server")?;
    }
    let _ = std::fs::remove_dir_all(&run_root);
    let logs = logs.with_context(|| format!("the {policy} run"))?;
    let window = plan.window();
    let jobs: Vec<_> = jobs
        .into_iter()
        .zip(logs)
        .map(|((id, kind), log)| {
            let work = log.work(window, plan.bandwidth);
            (id, kind, log, work)
        })
        .collect();
    let works: Vec<JobWork> = jobs.iter().map(|j| j.3).collect();
    Ok(RunResult {
        policy,
        metrics: Metrics::compute(window, &works),
        jobs,
    })
}

fn fmt_opt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.prec$}"))
}

fn job_table(plan: &Plan, r: &RunResult) -> String {
    let w = plan.window();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  {:>4} {:<5} {:>9} {:>14} {:>8} {:>8} {:>8} {:>8}",
        "job", "kind", "I/O done", "I/O phase (s)", "e_cpu", "e_io", "stretch", "I/O slow"
    );
    for (id, kind, log, work) in &r.jobs {
        let (alone, _) = plan.alone(*kind);
        let _ = writeln!(
            s,
            "  {:>4} {:<5} {:>9} {:>6} / {:<5.2} {:>8.2} {:>8.2} {:>8} {:>8}",
            id.0,
            kind.name,
            log.phases.len(),
            fmt_opt(log.mean_phase(), 2),
            alone,
            work.e_cpu,
            work.e_io,
            fmt_opt(work.stretch(w.len()), 2),
            fmt_opt(work.io_slowdown(w.len()), 2),
        );
    }
    s
}

fn change(before: f64, after: f64) -> f64 {
    (after - before) / before * 100.0
}

fn verdict(what: &str, base: &Metrics, io: &Metrics) -> String {
    let better = [
        io.max_stretch < base.max_stretch,
        io.geomean_stretch < base.geomean_stretch,
        io.io_slowdown < base.io_slowdown,
        io.utilization > base.utilization,
    ]
    .iter()
    .filter(|&&b| b)
    .count();
    format!(
        "verdict: {what} vs timeorder: geomean stretch {:+.0}%, max stretch {:+.0}%, \
         I/O slowdown {:+.0}%, utilization {:+.0}% — better on {better} of 4 metrics",
        change(base.geomean_stretch, io.geomean_stretch),
        change(base.max_stretch, io.max_stretch),
        change(base.io_slowdown, io.io_slowdown),
        change(base.utilization, io.utilization),
    )
}

fn write_csv(dir: &Path, plan: &Plan, runs: &[RunResult]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let w = plan.window();
    let mut jobs = String::from(
        "policy,job,kind,io_phases,mean_io_phase_s,alone_io_phase_s,e_cpu_s,e_io_s,stretch,io_slowdown\n",
    );
    let mut metrics = String::from("policy,max_stretch,geomean_stretch,io_slowdown,utilization\n");
    let num = |v: Option<f64>| v.map_or_else(String::new, |x| format!("{x:.6}"));
    for r in runs {
        for (id, kind, log, work) in &r.jobs {
            let _ = writeln!(
                jobs,
                "{},{},{},{},{},{:.6},{:.6},{:.6},{},{}",
                r.policy,
                id.0,
                kind.name,
                log.phases.len(),
                num(log.mean_phase()),
                plan.alone(*kind).0,
                work.e_cpu,
                work.e_io,
                num(work.stretch(w.len())),
                num(work.io_slowdown(w.len())),
            );
        }
        let m = &r.metrics;
        let _ = writeln!(
            metrics,
            "{},{:.6},{:.6},{:.6},{:.6}",
            r.policy, m.max_stretch, m.geomean_stretch, m.io_slowdown, m.utilization
        );
    }
    for (name, text) in [("io-demo-jobs.csv", jobs), ("io-demo-metrics.csv", metrics)] {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

/// `iosets demo`.
pub(crate) fn run(args: &IoDemoArgs) -> Result<()> {
    let plan = Plan::new(args)?;
    let root = TempRoot(std::env::temp_dir().join(format!("iosets-demo-{}", std::process::id())));
    std::fs::create_dir_all(&root.0).with_context(|| format!("creating {}", root.0.display()))?;

    let w = plan.window();
    println!("iosets demo: seed 004's experiment, scaled down, on {SERVERS} real servers");
    println!(
        "  {SERVERS} servers on loopback, shared root {}, emulated device {} MiB/s each ({} MiB/s together)",
        root.0.display(),
        plan.throttle_mib_s,
        SERVERS as f64 * plan.throttle_mib_s
    );
    for (kind, n) in [(plan.high, 1), (plan.low, plan.low_jobs)] {
        let (io, period) = plan.alone(kind);
        let (set, p) = plan.set10(kind);
        println!(
            "  {n} {}-frequency job{}: compute {:.2} s, write {} MiB{} ({:.2} s alone); \
             period {:.2} s -> Set-10 set {set}, priority {}",
            kind.name,
            if n == 1 { "" } else { "s" },
            kind.compute.as_secs_f64(),
            kind.mib,
            if plan.fsync { " + fsync" } else { "" },
            io,
            period,
            p.get()
        );
    }
    println!(
        "  each policy runs {:.0} s; metrics over [{:.1} s, {:.1} s] (iosets_sim::fluid::metrics)",
        plan.duration.as_secs_f64(),
        w.begin,
        w.end
    );

    let mut runs = Vec::new();
    let mut configs = vec![
        (Run::Baseline, "arrival order"),
        (
            Run::Clairvoyant,
            "Set-10 priorities set by control requests",
        ),
    ];
    if args.auto {
        configs.push((
            Run::Auto,
            "priorities detected by the servers from each job's requests",
        ));
    }
    for (run, how) in configs {
        println!("\npolicy {} ({how})", run.label());
        let r = run_policy(&plan, &root.0, run)?;
        print!("{}", job_table(&plan, &r));
        runs.push(r);
    }

    print!("\n  {:<16}", "");
    for r in &runs {
        print!(" {:>11}", r.policy);
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
        for r in &runs {
            print!(" {:>11.3}", r.metrics.values()[i]);
        }
        println!();
    }
    for (r, what) in runs[1..]
        .iter()
        .zip(["iosets (Set-10)", "iosets (automatic priorities)"])
    {
        println!("{}", verdict(what, &runs[0].metrics, &r.metrics));
    }
    if let Some(dir) = &args.out {
        write_csv(dir, &plan, &runs)?;
        println!("wrote {}", dir.join("io-demo-jobs.csv").display());
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
            throttle_mib_s: 64.0,
            out: None,
            fsync: false,
            auto: false,
        }
    }

    #[test]
    fn the_plan_keeps_seed_004s_shape() {
        let p = Plan::new(&args(false, 6)).unwrap();
        let (_, w_high) = p.alone(p.high);
        let (_, w_low) = p.alone(p.low);
        // Periods 19.2 s and 384 s, scaled by 1/32 (volumes rounded to whole MiB).
        assert!((w_high - 0.6).abs() < 0.02, "{w_high}");
        assert!((w_low - 12.0).abs() < 0.02, "{w_low}");
        assert_eq!(p.set10(p.high).0, -1);
        assert_eq!(p.set10(p.low).0, 1);
        assert_eq!(p.set10(p.high).1.get(), 10.0);
        // The low-frequency jobs bring the load of seed 004's fifteen.
        let load: f64 = p
            .jobs()
            .iter()
            .map(|(_, k)| {
                let (io, w) = p.alone(*k);
                io / w
            })
            .sum();
        assert!((0.9..1.05).contains(&load), "{load}");
    }

    #[test]
    fn bad_flags_are_refused() {
        assert!(Plan::new(&args(false, 0)).is_err());
        assert!(Plan::new(&args(false, 33)).is_err());
        let mut a = args(true, 3);
        a.throttle_mib_s = f64::NAN;
        assert!(Plan::new(&a).is_err());
        a.throttle_mib_s = 0.5;
        assert!(Plan::new(&a).is_err());
    }

    #[test]
    fn work_counts_only_the_window() {
        let log = JobLog {
            compute: vec![(0.0, 4.0), (6.0, 12.0)],
            acks: vec![(3.0, MIB), (5.0, MIB), (11.0, 2 * MIB), (13.0, MIB)],
            phases: vec![(4.0, 6.0)],
        };
        let w = Window::new(2.0, 10.0).unwrap();
        let work = log.work(w, MIB as f64);
        assert_eq!(work.e_cpu, 2.0 + 4.0);
        assert_eq!(work.e_io, 2.0);
        assert_eq!(log.mean_phase(), Some(2.0));
    }
}
