//! `iosets app periodic`: seed 004's IOR (§4.2): `--procs` processes, each with its own file,
//! alternate a compute phase (a sleep) and an I/O phase (each process rewrites its file from
//! offset 0 with `--block-kib` writes, then fsyncs it with `--fsync`, like IOR's `-e`). The
//! processes are threads of this process; under `mpirun`, `srun` or a PMI launcher every rank is
//! one such process with its own threads and files. The threads meet at the start and at the end
//! of each I/O phase (IOR's barriers): the phase starts when they are released together and ends
//! when the last of them is done. With `--barrier-dir` the ranks also meet before each I/O phase
//! (IOR's MPI barrier, through files in a directory they share: there is no MPI library here);
//! without it they do not wait for each other. The job's phase is merged from its ranks' rows
//! afterwards (`crate::seed004::phaselog::merge_ranks`).
//!
//! Every phase of this rank becomes one row of the phase log (`crate::seed004::phaselog`), appended
//! with a single `write` at the phase's end, so that every rank of a job can append to one file.
//! An I/O phase that fails is logged without an end, with the bytes written so far, and the app
//! exits non-zero naming the file and the errno. SIGINT and SIGTERM keep their default action
//! (the process ends at once, mid-phase, without a row for that phase).
//!
//! What this is not: no MPI-IO, no reads, no data verification — only the write pattern and the
//! phase boundaries seed 004's metrics need.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;

use super::{check_dir, describe, job_id, rank_and_size, Clock, Log, MAX_PROCS, PHASE_LOG};
use crate::seed004::phaselog::{PhaseKind, PhaseRow};

/// `iosets app periodic` flags.
#[derive(Debug, Args)]
pub struct PeriodicArgs {
    /// Directory for the data files, one per process: `DIR/job<ID>.r<RANK>.p<I>`.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Processes of this rank (threads), each writing its own file.
    #[arg(long, value_name = "N")]
    procs: u32,
    /// Length of each compute phase, seconds (fractional allowed, 0 for none).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    compute: f64,
    /// MiB each process writes in each I/O phase.
    #[arg(long, value_name = "MIB")]
    write_mib: u64,
    /// Iterations: a compute phase then an I/O phase each.
    #[arg(long, value_name = "K")]
    iterations: u32,
    /// fsync each file at the end of each I/O phase (IOR's -e).
    #[arg(long)]
    fsync: bool,
    /// Append the phase log to FILE (its creator writes the header line); default: stdout.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Job id [default: $IOSETS_JOB_ID, else $SLURM_JOB_ID, else Open MPI's job id when run as
    /// one of several ranks, else the process id].
    #[arg(long, value_name = "ID")]
    job: Option<u64>,
    /// Size of each write, KiB (the last write of a phase is shorter if it does not divide
    /// --write-mib).
    #[arg(long, value_name = "KIB", default_value_t = 1024)]
    block_kib: u64,
    /// Stop at this UNIX time (seconds): a compute phase that would run past it is cut there
    /// (and logged with its real end) and the app exits 0; an I/O phase is always finished first.
    #[arg(long, value_name = "UNIX_S", allow_negative_numbers = true)]
    stop_at: Option<f64>,
    /// Wait this long (seconds) before the first compute phase, logging nothing: the job's
    /// release time after its launch, as in the IO-SETS paper's workloads.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    release: f64,
    /// Count `--release` from this UNIX time (seconds) instead of from the start of this process:
    /// the ranks of a job started by a launcher on several nodes, and every job of a run, then
    /// share one time origin whatever the launcher's delays. Must not lie in the past by more
    /// than a second (the launch was too slow for the plan), nor more than a day ahead.
    #[arg(long, value_name = "UNIX_S", allow_negative_numbers = true)]
    start_at: Option<f64>,
    /// A directory every rank of the job can reach (not the file system measured: the ranks'
    /// file there is the barrier): the ranks meet before each I/O phase, as IOR's ranks do at
    /// MPI barriers, so that a job on several nodes starts each I/O phase on all of them at
    /// once. Without it, ranks do not wait for each other. A rank waits at most until --stop-at.
    #[arg(long, value_name = "DIR")]
    barrier_dir: Option<PathBuf>,
}

/// Largest write, KiB (1 GiB).
const MAX_BLOCK_KIB: u64 = 1 << 20;

/// The checked parameters of one rank's run.
#[derive(Debug)]
struct Plan {
    job: u64,
    rank: u32,
    size: u32,
    compute: f64,
    bytes_per_proc: u64,
    block: usize,
    iterations: u32,
    fsync: bool,
    stop_at: Option<f64>,
    release: f64,
    start_at: Option<f64>,
    barrier: Option<Barrier>,
}

/// The job's ranks meeting before each I/O phase, through files in a shared directory: rank R
/// at iteration I makes `job<J>.i<I>.r<R>` and waits for the `size` files of iteration I
/// (polling every millisecond). A rank at iteration I removes its file of iteration I − 2:
/// every rank has passed that barrier by then.
#[derive(Debug)]
struct Barrier {
    dir: PathBuf,
}

/// How often a rank at the barrier looks for the others.
const BARRIER_POLL: std::time::Duration = std::time::Duration::from_millis(1);

impl Barrier {
    fn name(job: u64, iteration: u32, rank: u32) -> String {
        format!("job{job}.i{iteration}.r{rank}")
    }

    /// Waits for every rank at `iteration`; `Ok(false)` if `stop_at` came first (a rank that
    /// stopped, or crashed, never arrives).
    fn wait(&self, plan: &Plan, iteration: u32, clock: &Clock) -> Result<bool> {
        let mine = self.dir.join(Barrier::name(plan.job, iteration, plan.rank));
        File::create(&mine).with_context(|| format!("the barrier file {}", mine.display()))?;
        if iteration >= 2 {
            let _ = std::fs::remove_file(self.dir.join(Barrier::name(
                plan.job,
                iteration - 2,
                plan.rank,
            )));
        }
        let others: Vec<PathBuf> = (0..plan.size)
            .map(|r| self.dir.join(Barrier::name(plan.job, iteration, r)))
            .collect();
        loop {
            if others.iter().all(|p| p.exists()) {
                return Ok(true);
            }
            if plan.stop_at.is_some_and(|t| clock.now() >= t) {
                return Ok(false);
            }
            std::thread::sleep(BARRIER_POLL);
        }
    }
}

pub(crate) fn periodic(args: &PeriodicArgs) -> Result<()> {
    let env = |name: &str| std::env::var(name).ok();
    let plan = plan(args, &env, std::process::id())?;
    check_dir(&args.dir)?;
    let files = (0..args.procs)
        .map(|i| DataFile::create(&args.dir, &plan, i))
        .collect::<Result<Vec<_>>>()?;
    let mut log = Log::open(args.log.as_deref(), plan.rank == 0, &PHASE_LOG)?;
    let clock = Clock::start();
    run_periodic(&plan, &files, &mut log, &clock)
}

/// Checks the flags and resolves the job id, rank and size from them and the environment.
fn plan(args: &PeriodicArgs, env: &dyn Fn(&str) -> Option<String>, pid: u32) -> Result<Plan> {
    if args.procs == 0 || args.procs > MAX_PROCS {
        bail!(
            "--procs {}: expected 1 to {MAX_PROCS} processes",
            args.procs
        );
    }
    if !(args.compute.is_finite() && args.compute >= 0.0) {
        bail!(
            "--compute {}: expected a finite number of seconds >= 0",
            args.compute
        );
    }
    if args.write_mib == 0 {
        bail!("--write-mib 0: each process must write at least 1 MiB per I/O phase");
    }
    let Some(bytes_per_proc) = args.write_mib.checked_mul(1 << 20) else {
        bail!("--write-mib {}: too large", args.write_mib);
    };
    if args.iterations == 0 {
        bail!("--iterations 0: expected at least 1 iteration");
    }
    if args.block_kib == 0 || args.block_kib > MAX_BLOCK_KIB {
        bail!(
            "--block-kib {}: expected 1 to {MAX_BLOCK_KIB} KiB",
            args.block_kib
        );
    }
    if !(args.release.is_finite() && args.release >= 0.0) {
        bail!(
            "--release {}: expected a finite number of seconds >= 0",
            args.release
        );
    }
    if let Some(t) = args.stop_at {
        if !t.is_finite() {
            bail!("--stop-at {t}: expected a finite UNIX time in seconds");
        }
    }
    if let Some(d) = &args.barrier_dir {
        if !d.is_dir() {
            bail!("--barrier-dir {}: no such directory", d.display());
        }
    }
    if let Some(t) = args.start_at {
        let now = crate::rig::unix_now();
        if !t.is_finite() || t < now - 1.0 || t > now + 86_400.0 {
            bail!(
                "--start-at {t}: expected a UNIX time in seconds from one second ago to a day \
                 ahead (now is {now:.3})"
            );
        }
    }
    let (rank, size) = rank_and_size(env)?;
    let job = job_id(args.job, env, rank, size, pid)?;
    // At most 1 GiB, checked above: fits in usize.
    let block = (args.block_kib * 1024).min(bytes_per_proc) as usize;
    Ok(Plan {
        job,
        rank,
        size,
        compute: args.compute,
        bytes_per_proc,
        block,
        iterations: args.iterations,
        fsync: args.fsync,
        stop_at: args.stop_at,
        release: args.release,
        start_at: args.start_at,
        barrier: args
            .barrier_dir
            .clone()
            .filter(|_| size > 1)
            .map(|dir| Barrier { dir }),
    })
}

/// The alignment of the block the application writes from.
const PAGE: usize = 4096;

/// One process's file and the block it writes.
#[derive(Debug)]
struct DataFile {
    path: PathBuf,
    file: File,
    /// The block, and one page more: the block is written from its first page boundary
    /// ([`DataFile::block`]).
    buf: Vec<u8>,
    len: usize,
}

impl DataFile {
    /// Creates (or empties) `DIR/job<ID>.r<RANK>.p<I>`.
    fn create(dir: &Path, plan: &Plan, proc: u32) -> Result<DataFile> {
        let path = dir.join(format!("job{}.r{}.p{proc}", plan.job, plan.rank));
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| anyhow!("creating data file {}: {}", path.display(), describe(&e)))?;
        // Not all zeros, different per process.
        let fill = 0x5a_u8 ^ (proc as u8);
        Ok(DataFile {
            path,
            file,
            buf: vec![fill; plan.block + PAGE],
            len: plan.block,
        })
    }

    /// The block, starting on a page boundary, as IOR's `aligned_buffer_alloc` gives it: with
    /// direct I/O (a FUSE mount) the kernel cuts a write into requests of at most 256 pages, so
    /// a 1 MiB block that starts 16 bytes into a page (where `malloc` puts a large buffer)
    /// would reach the file system as 1,048,560 + 16 bytes.
    fn block(&self) -> &[u8] {
        let skip = self.buf.as_ptr().align_offset(PAGE).min(PAGE);
        &self.buf[skip..skip + self.len]
    }

    /// Rewrites `bytes` from offset 0 (fsync at the end with `fsync`), stopping early when `abort`
    /// is raised. Returns the bytes written, and the error that stopped it, if any.
    fn write_phase(&self, bytes: u64, fsync: bool, abort: &AtomicBool) -> (u64, Option<String>) {
        let mut offset = 0u64;
        while offset < bytes {
            if abort.load(Ordering::Relaxed) {
                return (offset, None);
            }
            let n = (bytes - offset).min(self.len as u64) as usize;
            if let Err(e) = self.file.write_all_at(&self.block()[..n], offset) {
                abort.store(true, Ordering::Relaxed);
                let what = format!(
                    "writing {n} bytes at offset {offset} to {}: {}",
                    self.path.display(),
                    describe(&e)
                );
                return (offset, Some(what));
            }
            offset += n as u64;
        }
        if fsync {
            if let Err(e) = self.file.sync_all() {
                abort.store(true, Ordering::Relaxed);
                let what = format!("fsync of {}: {}", self.path.display(), describe(&e));
                return (offset, Some(what));
            }
        }
        (offset, None)
    }
}

/// Runs the iterations of one rank, logging every phase.
fn run_periodic(plan: &Plan, files: &[DataFile], log: &mut Log, clock: &Clock) -> Result<()> {
    let row = |iteration: u32, kind: PhaseKind, start: f64, end: f64, bytes: u64| PhaseRow {
        job: plan.job,
        rank: plan.rank,
        iteration,
        kind,
        start,
        end,
        bytes,
    };
    if plan.release > 0.0 || plan.start_at.is_some() {
        let released = plan.start_at.unwrap_or_else(|| clock.now()) + plan.release;
        clock.sleep_until(plan.stop_at.map_or(released, |t| released.min(t)));
    }
    let mut start = clock.now();
    for iteration in 0..plan.iterations {
        let planned = start + plan.compute;
        let cut_at = plan.stop_at.filter(|&t| planned > t);
        clock.sleep_until(cut_at.unwrap_or(planned));
        // The ranks meet before the I/O phase (the wait counts in the compute phase).
        let met = match (&plan.barrier, cut_at) {
            (Some(b), None) => b.wait(plan, iteration, clock)?,
            _ => true,
        };
        let end = clock.now();
        log.row(&row(iteration, PhaseKind::Compute, start, end, 0))?;
        if cut_at.is_some() || !met {
            return Ok(());
        }
        let (io_start, bytes, failure) = io_phase(plan, files, clock);
        let io_end = clock.now();
        if let Some(failure) = failure {
            // The phase never ended: logged without an end, with what was written.
            log.row(&row(
                iteration,
                PhaseKind::Io,
                io_start,
                f64::INFINITY,
                bytes,
            ))?;
            return Err(anyhow!(failure)).with_context(|| {
                format!(
                    "job {} rank {} of {}, I/O phase of iteration {iteration}",
                    plan.job, plan.rank, plan.size
                )
            });
        }
        log.row(&row(iteration, PhaseKind::Io, io_start, io_end, bytes))?;
        start = io_end;
    }
    Ok(())
}

/// One I/O phase: every process writes its file at once (released together, the phase starts
/// then) and the phase ends when the last is done. Returns its start, the bytes written, and the
/// first failure (the other processes stop at their next block).
fn io_phase(plan: &Plan, files: &[DataFile], clock: &Clock) -> (f64, u64, Option<String>) {
    let abort = AtomicBool::new(false);
    let mut start = 0.0;
    let results: Vec<(u64, Option<String>)> = std::thread::scope(|s| {
        start = clock.now();
        let mut handles = Vec::with_capacity(files.len());
        let mut spawn_error = None;
        for (i, f) in files.iter().enumerate() {
            let abort = &abort;
            let spawned = std::thread::Builder::new()
                .name(format!("proc-{i}"))
                .spawn_scoped(s, move || {
                    f.write_phase(plan.bytes_per_proc, plan.fsync, abort)
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    abort.store(true, Ordering::Relaxed);
                    spawn_error = Some(format!("starting process {i}: {}", describe(&e)));
                    break;
                }
            }
        }
        let mut results: Vec<(u64, Option<String>)> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| (0, Some("a writer thread panicked".to_string())))
            })
            .collect();
        if let Some(e) = spawn_error {
            results.push((0, Some(e)));
        }
        results
    });
    let bytes = results.iter().map(|(b, _)| b).sum();
    let failure = results.into_iter().find_map(|(_, e)| e);
    (start, bytes, failure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::io;

    fn args(procs: u32, compute: f64, write_mib: u64) -> PeriodicArgs {
        PeriodicArgs {
            dir: PathBuf::from("."),
            procs,
            compute,
            write_mib,
            iterations: 3,
            fsync: false,
            log: None,
            job: None,
            block_kib: 1024,
            stop_at: None,
            release: 0.0,
            start_at: None,
            barrier_dir: None,
        }
    }

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn job_id_comes_from_the_flag_then_iosets_then_slurm_then_the_pid() {
        let a = args(1, 0.0, 1);
        let none = env_of(&[]);
        assert_eq!(plan(&a, &none, 321).unwrap().job, 321);
        let slurm = env_of(&[("SLURM_JOB_ID", "77")]);
        assert_eq!(plan(&a, &slurm, 321).unwrap().job, 77);
        let both = env_of(&[("SLURM_JOB_ID", "77"), ("IOSETS_JOB_ID", "5")]);
        assert_eq!(plan(&a, &both, 321).unwrap().job, 5);
        let flagged = PeriodicArgs {
            job: Some(9),
            ..args(1, 0.0, 1)
        };
        assert_eq!(plan(&flagged, &both, 321).unwrap().job, 9);
        let empty = env_of(&[("IOSETS_JOB_ID", "")]);
        assert_eq!(plan(&a, &empty, 321).unwrap().job, 321);
        let bad = env_of(&[("IOSETS_JOB_ID", "seven")]);
        let err = plan(&a, &bad, 321).unwrap_err().to_string();
        assert!(
            err.contains("IOSETS_JOB_ID=\"seven\" is not a job id"),
            "{err}"
        );
    }

    #[test]
    fn ranks_come_from_the_launchers() {
        let a = args(1, 0.0, 1);
        let ompi = env_of(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_MCA_ess_base_jobid", "2126184449"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
        ]);
        let p = plan(&a, &ompi, 321).unwrap();
        assert_eq!((p.rank, p.size, p.job), (1, 2, 2126184449));
        let pmi = env_of(&[("PMI_RANK", "3"), ("PMI_SIZE", "4"), ("IOSETS_JOB_ID", "8")]);
        let p = plan(&a, &pmi, 321).unwrap();
        assert_eq!((p.rank, p.size, p.job), (3, 4, 8));
        let slurm = env_of(&[
            ("SLURM_PROCID", "2"),
            ("SLURM_NTASKS", "3"),
            ("SLURM_JOB_ID", "40"),
        ]);
        let p = plan(&a, &slurm, 321).unwrap();
        assert_eq!((p.rank, p.size, p.job), (2, 3, 40));
        // Several ranks without a shared job id: the pid would differ per rank.
        let lone = env_of(&[("PMI_RANK", "0"), ("PMI_SIZE", "2")]);
        let err = plan(&a, &lone, 321).unwrap_err().to_string();
        assert!(err.contains("no job id shared by all ranks"), "{err}");
        for (pairs, needle) in [
            (&[("PMI_RANK", "2"), ("PMI_SIZE", "2")][..], "is not below"),
            (&[("PMI_RANK", "x"), ("PMI_SIZE", "2")][..], "is not a rank"),
            (&[("PMI_RANK", "0")][..], "PMI_SIZE is not"),
        ] {
            let err = plan(&a, &env_of(pairs), 321).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }

    #[test]
    fn bad_flags_are_refused() {
        let none = env_of(&[]);
        let cases = [
            (args(0, 1.0, 1), "--procs 0"),
            (args(1, -1.0, 1), "--compute -1"),
            (args(1, f64::NAN, 1), "--compute NaN"),
            (args(1, f64::INFINITY, 1), "--compute inf"),
            (args(1, 1.0, 0), "--write-mib 0"),
            (args(1, 1.0, u64::MAX), "too large"),
            (
                PeriodicArgs {
                    iterations: 0,
                    ..args(1, 1.0, 1)
                },
                "--iterations 0",
            ),
            (
                PeriodicArgs {
                    block_kib: 0,
                    ..args(1, 1.0, 1)
                },
                "--block-kib 0",
            ),
            (
                PeriodicArgs {
                    stop_at: Some(f64::NAN),
                    ..args(1, 1.0, 1)
                },
                "--stop-at NaN",
            ),
            (
                PeriodicArgs {
                    release: -1.0,
                    ..args(1, 1.0, 1)
                },
                "--release -1",
            ),
            (
                PeriodicArgs {
                    release: f64::INFINITY,
                    ..args(1, 1.0, 1)
                },
                "--release inf",
            ),
            (
                PeriodicArgs {
                    start_at: Some(crate::rig::unix_now() - 60.0),
                    ..args(1, 1.0, 1)
                },
                "--start-at",
            ),
            (
                PeriodicArgs {
                    start_at: Some(f64::NAN),
                    ..args(1, 1.0, 1)
                },
                "--start-at NaN",
            ),
        ];
        for (a, needle) in cases {
            let err = plan(&a, &none, 1).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
        // A block larger than the volume is the volume.
        let p = plan(
            &PeriodicArgs {
                block_kib: 4096,
                ..args(1, 0.0, 2)
            },
            &none,
            1,
        )
        .unwrap();
        assert_eq!((p.block, p.bytes_per_proc), (2 << 20, 2 << 20));
    }

    #[test]
    fn the_block_starts_on_a_page() {
        let p = plan(&args(1, 0.0, 1), &env_of(&[]), 1).unwrap();
        let dir = std::env::temp_dir().join(format!("iosets-app-align-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = DataFile::create(&dir, &p, 0).unwrap();
        assert_eq!(f.block().as_ptr() as usize % PAGE, 0);
        assert_eq!(f.block().len(), p.block);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn errors_name_their_errno() {
        let e = io::Error::from_raw_os_error(28);
        assert_eq!(describe(&e), "No space left on device (errno 28, ENOSPC)");
        let e = io::Error::new(io::ErrorKind::WriteZero, "failed to write whole buffer");
        assert_eq!(describe(&e), "failed to write whole buffer");
    }
}
