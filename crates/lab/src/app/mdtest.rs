//! `iosets app mdtest`: a metadata load generator in the manner of mdtest (seed 003 ran
//! `mdtest -d DIR -n 100 -i 3 -F -u`), doing plain POSIX calls (no iosets library).
//!
//! # The workload
//! `--procs` processes (threads of this process, as `iosets app periodic` runs them) each work
//! in a directory of their own, `DIR/<job>.r<rank>/` (mdtest's `-u`). Per iteration (`-i`)
//! there are three phases, each ended by a barrier among the threads: **create** `-n` files
//! (`open(O_CREAT|O_EXCL)` then `close`), **stat** them, **remove** them. A thread's rank
//! directory is created if missing (an existing one is used as it is: an administrator may
//! have set its striping beforehand, as `lfs setstripe -c N dir`), and removed at the end if
//! this run created it (and it is empty, when `--stop-at` stopped the run early).
//!
//! `--mkdirs N` is the stage-in mode of seed 003 instead: the threads together create the `N`
//! rank directories `DIR/stagein.<job>/rank<k>` (split evenly, thread `i` of `T` making
//! `k ∈ [i·N/T, (i+1)·N/T)`), released together by a barrier; the rows give the earliest start
//! `t_S` and the latest end `t_E`, seed 003's `t_rnk_d = t_E − t_S`.
//!
//! # The log
//! One CSV row per (rank, iteration, phase), appended with a single `write` when the rank's
//! phase ends: `job,rank,iteration,phase,start_unix_s,end_unix_s,ops` ([`HEADER`]), phase one
//! of `create`, `stat`, `remove`, `mkdir`. Rates are computed as mdtest computes them
//! (`phase_rates`): per phase and iteration, the operations of all ranks over the time from
//! the earliest start to the latest end.
//!
//! A failing call (a create that finds the file, a stat that does not) stops every thread at
//! its next operation and the app exits non-zero naming the path and the errno; the phase in
//! which it failed is not logged. `--stop-at` ends the run after the phase during which that
//! UNIX time is reached (files a create phase made stay then). SIGINT and SIGTERM keep their
//! default action.
//!
//! # What it is not
//! Not mdtest itself: no MPI (ranks of a launcher do not wait for each other; the job's phase is
//! merged from the rows), no directory-tree or shared-directory modes, no data in the files.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};

use anyhow::{bail, Result};
use clap::Args;

use super::{check_dir, describe, job_id, rank_and_size, Clock, Log, LogFormat, MAX_PROCS};

/// The log's header line.
pub(crate) const HEADER: &str = "job,rank,iteration,phase,start_unix_s,end_unix_s,ops";

/// Most files per rank and phase, and most stage-in directories (the bound only rejects
/// nonsense).
const MAX_COUNT: u64 = 10_000_000;

/// `iosets app mdtest` flags.
#[derive(Debug, Args)]
pub(super) struct MdtestArgs {
    /// Directory to work in: each process uses `DIR/<job>.r<rank>/` (or, with --mkdirs,
    /// `DIR/stagein.<job>/`).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Processes of this rank (threads), each with its own directory.
    #[arg(long, value_name = "N")]
    procs: u32,
    /// Files each process creates, stats and removes per iteration (mdtest's -n).
    #[arg(
        short = 'n',
        long,
        value_name = "N",
        required_unless_present = "mkdirs"
    )]
    files: Option<u64>,
    /// Iterations of the three phases (mdtest's -i).
    #[arg(short = 'i', long, value_name = "K", default_value_t = 1)]
    iterations: u32,
    /// Append the log to FILE (its creator writes the header line); default: stdout.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Job id [default: $IOSETS_JOB_ID, else $SLURM_JOB_ID, else Open MPI's job id when run as
    /// one of several ranks, else the process id].
    #[arg(long, value_name = "ID")]
    job: Option<u64>,
    /// Stop after the phase during which this UNIX time (seconds) is reached, and exit 0.
    #[arg(long, value_name = "UNIX_S", allow_negative_numbers = true)]
    stop_at: Option<f64>,
    /// Stage-in mode: instead of the mdtest phases, the processes together create N rank
    /// directories `DIR/stagein.<job>/rank<k>` and log one `mkdir` row each.
    #[arg(long, value_name = "N", conflicts_with_all = ["files", "stop_at"])]
    mkdirs: Option<u64>,
}

/// A phase of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Phase {
    /// Create the files.
    Create,
    /// Stat them.
    Stat,
    /// Remove them.
    Remove,
    /// Create the stage-in rank directories.
    Mkdir,
}

impl Phase {
    /// The mdtest phases, in order.
    pub(crate) const MDTEST: [Phase; 3] = [Phase::Create, Phase::Stat, Phase::Remove];

    /// Its name in the log.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Phase::Create => "create",
            Phase::Stat => "stat",
            Phase::Remove => "remove",
            Phase::Mkdir => "mkdir",
        }
    }

    /// The phase named `s` in the log.
    fn parse(s: &str) -> Option<Phase> {
        Some(match s {
            "create" => Phase::Create,
            "stat" => Phase::Stat,
            "remove" => Phase::Remove,
            "mkdir" => Phase::Mkdir,
            _ => return None,
        })
    }
}

/// One row of the log.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Row {
    /// The job.
    pub(crate) job: u64,
    /// The process (thread) rank in the job.
    pub(crate) rank: u32,
    /// The iteration, from 0.
    pub(crate) iteration: u32,
    /// The phase.
    pub(crate) phase: Phase,
    /// When the rank started it, UNIX seconds.
    pub(crate) start: f64,
    /// When the rank finished it, UNIX seconds.
    pub(crate) end: f64,
    /// Operations the rank did in it.
    pub(crate) ops: u64,
}

impl Row {
    /// The row as a log line, with its newline.
    fn to_line(self) -> String {
        format!(
            "{},{},{},{},{:.6},{:.6},{}\n",
            self.job,
            self.rank,
            self.iteration,
            self.phase.name(),
            self.start,
            self.end,
            self.ops
        )
    }
}

/// Parses a log: the header line, then rows (blank lines ignored). The error names the line.
pub(crate) fn parse_log(text: &str) -> Result<Vec<Row>, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    match lines.next() {
        Some((_, l)) if l.trim() == HEADER => {}
        Some((_, l)) => return Err(format!("line 1: {l:?} is not the header {HEADER:?}")),
        None => return Err("empty: not even the header line".into()),
    }
    lines
        .map(|(i, l)| parse_row(l).map_err(|e| format!("line {}: {e}: {l:?}", i + 1)))
        .collect()
}

/// One row of the log (its fields, a phase that does not end before it starts).
fn parse_row(line: &str) -> Result<Row, String> {
    let f: Vec<&str> = line.trim().split(',').collect();
    if f.len() != 7 {
        return Err(format!("{} fields, expected 7", f.len()));
    }
    let num = |i: usize, what: &str| -> Result<f64, String> {
        f[i].parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| format!("{what} {:?} is not a number", f[i]))
    };
    let row = Row {
        job: f[0].parse().map_err(|_| format!("job {:?}", f[0]))?,
        rank: f[1].parse().map_err(|_| format!("rank {:?}", f[1]))?,
        iteration: f[2].parse().map_err(|_| format!("iteration {:?}", f[2]))?,
        phase: Phase::parse(f[3]).ok_or_else(|| format!("phase {:?}", f[3]))?,
        start: num(4, "start")?,
        end: num(5, "end")?,
        ops: f[6].parse().map_err(|_| format!("ops {:?}", f[6]))?,
    };
    if row.end < row.start {
        return Err("ends before it starts".into());
    }
    Ok(row)
}

/// One phase of one iteration of one job, merged over its ranks (mdtest's rate).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PhaseRate {
    /// The job.
    pub(crate) job: u64,
    /// The iteration.
    pub(crate) iteration: u32,
    /// The phase.
    pub(crate) phase: Phase,
    /// Ranks that logged it.
    pub(crate) ranks: usize,
    /// Operations of all ranks.
    pub(crate) ops: u64,
    /// The earliest start.
    pub(crate) start: f64,
    /// The latest end.
    pub(crate) end: f64,
}

impl PhaseRate {
    /// Seconds from the earliest start to the latest end.
    pub(crate) fn seconds(&self) -> f64 {
        self.end - self.start
    }

    /// Operations per second (infinite for a phase of no measurable length).
    pub(crate) fn rate(&self) -> f64 {
        self.ops as f64 / self.seconds()
    }
}

/// The rows merged per (job, iteration, phase), in that order.
pub(crate) fn phase_rates(rows: &[Row]) -> Vec<PhaseRate> {
    let mut out: std::collections::BTreeMap<(u64, u32, Phase), PhaseRate> = Default::default();
    for r in rows {
        out.entry((r.job, r.iteration, r.phase))
            .and_modify(|p| {
                p.ranks += 1;
                p.ops += r.ops;
                p.start = p.start.min(r.start);
                p.end = p.end.max(r.end);
            })
            .or_insert(PhaseRate {
                job: r.job,
                iteration: r.iteration,
                phase: r.phase,
                ranks: 1,
                ops: r.ops,
                start: r.start,
                end: r.end,
            });
    }
    out.into_values().collect()
}

/// The checked parameters of one launcher rank's run.
#[derive(Debug)]
struct Plan {
    /// The job.
    job: u64,
    /// The launcher rank (processes of one job started by mpirun or srun; 0 alone).
    rank: u32,
    /// The launcher's number of ranks (1 alone).
    size: u32,
    /// Threads of this rank.
    procs: u32,
    /// What they do.
    work: Work,
    /// `--stop-at`.
    stop_at: Option<f64>,
}

/// What the threads do.
#[derive(Clone, Copy, Debug)]
enum Work {
    /// The mdtest phases: `files` per thread, `iterations` times.
    Mdtest { files: u64, iterations: u32 },
    /// The stage-in: `dirs` rank directories in all.
    Mkdirs { dirs: u64 },
}

/// Checks the flags and resolves the job id, rank and size from them and the environment.
fn plan(args: &MdtestArgs, env: &dyn Fn(&str) -> Option<String>, pid: u32) -> Result<Plan> {
    if args.procs == 0 || args.procs > MAX_PROCS {
        bail!(
            "--procs {}: expected 1 to {MAX_PROCS} processes",
            args.procs
        );
    }
    let work = match (args.mkdirs, args.files) {
        (Some(0), _) => bail!("--mkdirs 0: expected at least 1 directory"),
        (Some(n), _) if n > MAX_COUNT => bail!("--mkdirs {n}: expected at most {MAX_COUNT}"),
        (Some(dirs), _) => {
            if args.iterations != 1 {
                bail!(
                    "--iterations {}: --mkdirs runs one stage-in, not iterations",
                    args.iterations
                );
            }
            Work::Mkdirs { dirs }
        }
        (None, None) => bail!("give --files N (mdtest's -n) or --mkdirs N"),
        (None, Some(0)) => bail!("--files 0: expected at least 1 file per process"),
        (None, Some(n)) if n > MAX_COUNT => bail!("--files {n}: expected at most {MAX_COUNT}"),
        (None, Some(files)) => {
            if args.iterations == 0 {
                bail!("--iterations 0: expected at least 1 iteration");
            }
            Work::Mdtest {
                files,
                iterations: args.iterations,
            }
        }
    };
    if let Some(t) = args.stop_at {
        if !t.is_finite() {
            bail!("--stop-at {t}: expected a finite UNIX time in seconds");
        }
    }
    let (rank, size) = rank_and_size(env)?;
    let job = job_id(args.job, env, rank, size, pid)?;
    Ok(Plan {
        job,
        rank,
        size,
        procs: args.procs,
        work,
        stop_at: args.stop_at,
    })
}

/// `iosets app mdtest`.
pub(super) fn mdtest(args: &MdtestArgs) -> Result<()> {
    let env = |name: &str| std::env::var(name).ok();
    let plan = plan(args, &env, std::process::id())?;
    check_dir(&args.dir)?;
    let log = Log::open(args.log.as_deref(), plan.rank == 0, &MDTEST_LOG)?;
    let clock = Clock::start();
    let ctx = Ctx {
        plan: &plan,
        dir: &args.dir,
        clock: &clock,
        log: Mutex::new(log),
        barrier: Barrier::new(plan.procs as usize),
        failure: Mutex::new(None),
        rows: Mutex::new(Vec::new()),
    };
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for i in 0..plan.procs {
            let ctx = &ctx;
            let spawned = std::thread::Builder::new()
                .name(format!("proc-{i}"))
                .spawn_scoped(s, move || ctx.run_proc(i));
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    ctx.fail(format!("starting process {i}: {}", describe(&e)));
                    break;
                }
            }
        }
        for h in handles {
            if h.join().is_err() {
                ctx.fail("a process thread panicked".into());
            }
        }
    });
    if let Some(f) = ctx.failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        bail!("{f}");
    }
    if args.log.is_some() && plan.size == 1 {
        let rows = ctx.rows.into_inner().unwrap_or_else(|e| e.into_inner());
        print_summary(&plan, &rows);
    }
    Ok(())
}

/// `iosets app mdtest`'s log: one row per rank, iteration and phase.
const MDTEST_LOG: LogFormat = LogFormat {
    header: HEADER,
    name: "log",
    what: "an mdtest log",
};

/// mdtest's summary of this run's ranks: per phase, the rate of each iteration's max, min and
/// mean.
fn print_summary(plan: &Plan, rows: &[Row]) {
    let rates = phase_rates(rows);
    println!(
        "iosets app mdtest: job {}, {} process{}",
        plan.job,
        plan.procs,
        if plan.procs == 1 { "" } else { "es" }
    );
    println!(
        "{:<18} {:>12} {:>12} {:>12} {:>10}",
        "operation", "max ops/s", "min ops/s", "mean ops/s", "iterations"
    );
    for phase in [Phase::Create, Phase::Stat, Phase::Remove, Phase::Mkdir] {
        let v: Vec<f64> = rates
            .iter()
            .filter(|r| r.phase == phase)
            .map(PhaseRate::rate)
            .collect();
        if v.is_empty() {
            continue;
        }
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let label = match phase {
            Phase::Create => "File creation",
            Phase::Stat => "File stat",
            Phase::Remove => "File removal",
            Phase::Mkdir => "Directory creation",
        };
        println!(
            "{label:<18} {max:>12.1} {min:>12.1} {mean:>12.1} {:>10}",
            v.len()
        );
    }
    if let Some(r) = rates.iter().find(|r| r.phase == Phase::Mkdir) {
        println!(
            "stage-in: {} directories, t_E - t_S = {:.6} s",
            r.ops,
            r.seconds()
        );
    }
}

/// A barrier among the threads that a failing thread can break, so that the others stop
/// instead of waiting for it forever. The last thread to arrive decides something for all.
#[derive(Debug)]
struct Barrier {
    /// The threads that must arrive.
    n: usize,
    state: Mutex<BarrierState>,
    cv: Condvar,
    /// `BarrierState::broken`, readable without the lock: every file operation checks it.
    broken: std::sync::atomic::AtomicBool,
}

/// The state of a [`Barrier`].
#[derive(Debug, Default)]
struct BarrierState {
    /// Threads waiting in the current generation.
    arrived: usize,
    /// Bumped each time every thread has arrived.
    generation: u64,
    /// What the last thread of the latest generation decided.
    decision: bool,
    /// A thread failed.
    broken: bool,
}

/// The barrier was broken: another thread failed.
#[derive(Debug)]
struct Broken;

impl Barrier {
    /// A barrier for `n` threads.
    fn new(n: usize) -> Barrier {
        Barrier {
            n,
            state: Mutex::new(BarrierState::default()),
            cv: Condvar::new(),
            broken: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Its state (a thread that panicked holding it leaves it usable).
    fn lock(&self) -> std::sync::MutexGuard<'_, BarrierState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for every thread; the last to arrive runs `decide`, and every thread gets its
    /// answer.
    fn wait(&self, decide: impl FnOnce() -> bool) -> Result<bool, Broken> {
        let mut s = self.lock();
        if s.broken {
            return Err(Broken);
        }
        s.arrived += 1;
        if s.arrived == self.n {
            s.arrived = 0;
            s.generation += 1;
            s.decision = decide();
            self.cv.notify_all();
            return Ok(s.decision);
        }
        let generation = s.generation;
        while s.generation == generation && !s.broken {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        if s.generation == generation {
            return Err(Broken);
        }
        Ok(s.decision)
    }

    /// Breaks it: every waiting and later thread gets [`Broken`].
    fn break_all(&self) {
        self.lock().broken = true;
        self.broken
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.cv.notify_all();
    }

    /// Whether a thread failed (the others stop at their next operation).
    fn is_broken(&self) -> bool {
        self.broken.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// What the threads share.
#[derive(Debug)]
struct Ctx<'a> {
    /// The run.
    plan: &'a Plan,
    /// `--dir`.
    dir: &'a Path,
    /// The time base of every row.
    clock: &'a Clock,
    /// Where the rows go.
    log: Mutex<Log>,
    /// Ends each phase.
    barrier: Barrier,
    /// The first failure.
    failure: Mutex<Option<String>>,
    /// Every row logged, for the summary.
    rows: Mutex<Vec<Row>>,
}

impl Ctx<'_> {
    /// Records the first failure and releases every thread waiting at the barrier.
    fn fail(&self, what: String) {
        let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        f.get_or_insert(what);
        drop(f);
        self.barrier.break_all();
    }

    /// Appends `row` to the log (one `write`) and keeps it for the summary.
    fn log(&self, row: Row) -> Result<(), String> {
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log.append(&row.to_line()).map_err(|e| format!("{e:#}"))?;
        drop(log);
        self.rows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(row);
        Ok(())
    }

    /// Whether `--stop-at` has come.
    fn stop_now(&self) -> bool {
        self.plan.stop_at.is_some_and(|t| self.clock.now() >= t)
    }

    /// One process: its phases, or its share of the stage-in.
    fn run_proc(&self, i: u32) {
        let rank = self.plan.rank * self.plan.procs + i;
        let result = match self.plan.work {
            Work::Mdtest { files, iterations } => self.mdtest_proc(rank, files, iterations),
            Work::Mkdirs { dirs } => self.mkdirs_proc(rank, dirs),
        };
        if let Err(Some(what)) = result {
            self.fail(what);
        }
    }

    /// One process's iterations. `Err(Some(what))`: it failed; `Err(None)`: stopped because
    /// another thread failed.
    fn mdtest_proc(&self, rank: u32, files: u64, iterations: u32) -> Result<(), Option<String>> {
        let p = self.plan;
        let dir = self.dir.join(format!("{}.r{rank}", p.job));
        let created = make_dir(&dir).map_err(|e| {
            Some(format!(
                "job {} rank {rank}: creating its directory {}: {}",
                p.job,
                dir.display(),
                describe(&e)
            ))
        })?;
        let names: Vec<PathBuf> = (0..files)
            .map(|k| dir.join(format!("file.mdtest.{rank}.{k}")))
            .collect();
        let mut stop = self.barrier.wait(|| self.stop_now()).map_err(|_| None)?;
        let mut completed = true;
        'run: for iteration in 0..iterations {
            for phase in Phase::MDTEST {
                if stop {
                    completed = false;
                    break 'run;
                }
                let start = self.clock.now();
                self.phase(phase, &names).map_err(|e| {
                    e.map(|e| {
                        format!(
                            "job {} rank {rank}, iteration {iteration}, {} phase: {e}",
                            p.job,
                            phase.name()
                        )
                    })
                })?;
                let end = self.clock.now();
                self.log(Row {
                    job: p.job,
                    rank,
                    iteration,
                    phase,
                    start,
                    end,
                    ops: files,
                })
                .map_err(Some)?;
                stop = self.barrier.wait(|| self.stop_now()).map_err(|_| None)?;
            }
        }
        if created {
            // Stopped early, the files of a create phase stay, and so does the directory.
            if let Err(e) = std::fs::remove_dir(&dir) {
                if completed {
                    return Err(Some(format!(
                        "job {} rank {rank}: removing its directory {}: {}",
                        p.job,
                        dir.display(),
                        describe(&e)
                    )));
                }
            }
        }
        Ok(())
    }

    /// One phase over `names`. `Err(Some(what))`: a call failed; `Err(None)`: stopped because
    /// another thread failed.
    fn phase(&self, phase: Phase, names: &[PathBuf]) -> Result<(), Option<String>> {
        for path in names {
            if self.barrier.is_broken() {
                return Err(None);
            }
            let r = match phase {
                Phase::Create => OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(path)
                    .map(drop::<File>)
                    .map_err(|e| format!("creating {}: {}", path.display(), describe(&e))),
                Phase::Stat => std::fs::metadata(path)
                    .map(drop)
                    .map_err(|e| format!("stat of {}: {}", path.display(), describe(&e))),
                Phase::Remove => std::fs::remove_file(path)
                    .map_err(|e| format!("removing {}: {}", path.display(), describe(&e))),
                Phase::Mkdir => std::fs::create_dir(path)
                    .map_err(|e| format!("creating {}: {}", path.display(), describe(&e))),
            };
            r.map_err(Some)?;
        }
        Ok(())
    }

    /// One process's share of the stage-in; errors as [`Ctx::mdtest_proc`]'s.
    fn mkdirs_proc(&self, rank: u32, dirs: u64) -> Result<(), Option<String>> {
        let p = self.plan;
        let parent = self.dir.join(format!("stagein.{}", p.job));
        make_dir(&parent).map_err(|e| {
            Some(format!(
                "job {} rank {rank}: creating the stage-in directory {}: {}",
                p.job,
                parent.display(),
                describe(&e)
            ))
        })?;
        let all = u64::from(p.size) * u64::from(p.procs);
        let (from, to) = (
            u64::from(rank) * dirs / all,
            (u64::from(rank) + 1) * dirs / all,
        );
        self.barrier.wait(|| false).map_err(|_| None)?;
        let start = self.clock.now();
        for k in from..to {
            if self.barrier.is_broken() {
                return Err(None);
            }
            let d = parent.join(format!("rank{k}"));
            if let Err(e) = std::fs::create_dir(&d) {
                return Err(Some(format!(
                    "job {} rank {rank}, stage-in: creating {}: {}",
                    p.job,
                    d.display(),
                    describe(&e)
                )));
            }
        }
        let end = self.clock.now();
        self.log(Row {
            job: p.job,
            rank,
            iteration: 0,
            phase: Phase::Mkdir,
            start,
            end,
            ops: to - from,
        })
        .map_err(Some)
    }
}

/// Creates `dir` if missing; `Ok(true)` if this call created it, `Ok(false)` if a directory
/// was there already.
fn make_dir(dir: &Path) -> io::Result<bool> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(files: Option<u64>, mkdirs: Option<u64>) -> MdtestArgs {
        MdtestArgs {
            dir: PathBuf::from("."),
            procs: 2,
            files,
            iterations: 1,
            log: None,
            job: Some(7),
            stop_at: None,
            mkdirs,
        }
    }

    #[test]
    fn bad_flags_are_refused() {
        let none = |_: &str| None;
        let cases = [
            (args(None, None), "give --files"),
            (args(Some(0), None), "--files 0"),
            (args(Some(MAX_COUNT + 1), None), "at most"),
            (args(None, Some(0)), "--mkdirs 0"),
            (
                MdtestArgs {
                    iterations: 0,
                    ..args(Some(1), None)
                },
                "--iterations 0",
            ),
            (
                MdtestArgs {
                    iterations: 3,
                    ..args(None, Some(4))
                },
                "one stage-in",
            ),
            (
                MdtestArgs {
                    procs: 0,
                    ..args(Some(1), None)
                },
                "--procs 0",
            ),
            (
                MdtestArgs {
                    stop_at: Some(f64::INFINITY),
                    ..args(Some(1), None)
                },
                "--stop-at inf",
            ),
        ];
        for (a, needle) in cases {
            let err = plan(&a, &none, 1).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
        let p = plan(&args(Some(5), None), &none, 1).unwrap();
        assert_eq!(p.job, 7);
    }

    #[test]
    fn rates_merge_ranks_like_mdtest() {
        let row = |rank, phase, start, end| Row {
            job: 3,
            rank,
            iteration: 0,
            phase,
            start,
            end,
            ops: 10,
        };
        let rows = [
            row(0, Phase::Create, 100.0, 101.0),
            row(1, Phase::Create, 100.5, 102.0),
            row(0, Phase::Stat, 102.0, 102.5),
        ];
        let r = phase_rates(&rows);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].phase, r[0].ranks, r[0].ops), (Phase::Create, 2, 20));
        assert_eq!(r[0].seconds(), 2.0);
        assert_eq!(r[0].rate(), 10.0);
        assert_eq!(r[1].rate(), 20.0);
    }

    #[test]
    fn logs_round_trip_and_bad_lines_are_named() {
        let row = Row {
            job: 1,
            rank: 2,
            iteration: 3,
            phase: Phase::Remove,
            start: 10.25,
            end: 11.5,
            ops: 100,
        };
        let text = format!("{HEADER}\n{}\n", row.to_line());
        assert_eq!(parse_log(&text).unwrap(), vec![row]);
        let bad = format!("{HEADER}\n1,2,3,delete,1,2,3\n");
        let e = parse_log(&bad).unwrap_err();
        assert!(e.contains("line 2") && e.contains("phase"), "{e}");
        let e = parse_log("job,rank\n").unwrap_err();
        assert!(e.contains("header"), "{e}");
        let e = parse_log(&format!("{HEADER}\n1,2,3,stat,5,4,1\n")).unwrap_err();
        assert!(e.contains("ends before"), "{e}");
    }

    #[test]
    fn a_broken_barrier_releases_the_waiters() {
        let b = Barrier::new(2);
        std::thread::scope(|s| {
            let h = s.spawn(|| b.wait(|| true));
            // Broken only once the other thread waits: the wake-up is what is tested.
            while b.lock().arrived == 0 {
                std::thread::yield_now();
            }
            b.break_all();
            assert!(h.join().unwrap().is_err());
        });
        let b = Barrier::new(2);
        std::thread::scope(|s| {
            let h = s.spawn(|| b.wait(|| true));
            assert!(b.wait(|| true).unwrap());
            assert!(h.join().unwrap().unwrap());
        });
    }
}
