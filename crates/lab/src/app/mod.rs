//! `iosets app`: applications doing plain POSIX I/O (no iosets library), for experiments on a
//! mount (issue 14): [`periodic`], seed 004's IOR, and [`mdtest`], a metadata load.
//!
//! What they share is here: the job id, rank and size from the flags and the launchers'
//! variables, the clock every phase row is stamped with, the log file several ranks append
//! to, and errno names in error messages. SIGINT and SIGTERM keep their default action (the
//! process ends at once, mid-phase, without a row for that phase).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};

use crate::seed004::phaselog::{PhaseRow, HEADER};
pub mod mdtest;
pub mod periodic;

/// `iosets app` flags.
#[derive(Debug, Args)]
pub struct AppArgs {
    #[command(subcommand)]
    app: App,
}

#[derive(Debug, Subcommand)]
enum App {
    /// Seed 004's IOR: N processes alternating a compute phase (a sleep) and an I/O phase (each
    /// rewrites its own file), printing one CSV row per phase:
    /// job,rank,iteration,kind,start_unix_s,end_unix_s,bytes.
    Periodic(periodic::PeriodicArgs),
    /// mdtest-like metadata load: N processes each create, stat and remove -n files per
    /// iteration in a directory of their own (or, with --mkdirs, create stage-in rank
    /// directories), printing one CSV row per phase:
    /// job,rank,iteration,phase,start_unix_s,end_unix_s,ops.
    Mdtest(mdtest::MdtestArgs),
}

/// Most processes one rank runs (each is a thread).
const MAX_PROCS: u32 = 4096;
/// Longest single sleep: a long compute phase is slept in pieces.
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// The rank and size variables of the launchers, in the order they are looked at.
const LAUNCHERS: [(&str, &str); 3] = [
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
];

/// `iosets app`.
pub fn run(args: &AppArgs) -> Result<()> {
    match &args.app {
        App::Periodic(a) => periodic::periodic(a),
        App::Mdtest(a) => mdtest::mdtest(a),
    }
}

/// A variable of the environment, an empty value counting as absent.
fn var(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    env(name)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// This process's rank and the number of ranks, from the first launcher whose rank variable is
/// set (Open MPI, PMI, Slurm); 0 of 1 without any.
fn rank_and_size(env: &dyn Fn(&str) -> Option<String>) -> Result<(u32, u32)> {
    for (rank_var, size_var) in LAUNCHERS {
        let Some(rank) = var(env, rank_var) else {
            continue;
        };
        let rank: u32 = rank.parse().map_err(|_| {
            anyhow!("{rank_var}={rank:?} is not a rank: expected an unsigned integer")
        })?;
        let size =
            var(env, size_var).ok_or_else(|| anyhow!("{rank_var} is set but {size_var} is not"))?;
        let size: u32 = size
            .parse()
            .map_err(|_| anyhow!("{size_var}={size:?} is not a number of ranks"))?;
        if rank >= size {
            bail!("{rank_var}={rank} is not below {size_var}={size}");
        }
        return Ok((rank, size));
    }
    Ok((0, 1))
}

/// The job id: the flag, else `IOSETS_JOB_ID`, else `SLURM_JOB_ID`; else, for one of several
/// ranks, Open MPI's job id (the same in every rank; the process id would not be), and for a
/// lone process its process id.
fn job_id(
    flag: Option<u64>,
    env: &dyn Fn(&str) -> Option<String>,
    rank: u32,
    size: u32,
    pid: u32,
) -> Result<u64> {
    if let Some(job) = flag {
        return Ok(job);
    }
    for name in ["IOSETS_JOB_ID", "SLURM_JOB_ID"] {
        if let Some(v) = var(env, name) {
            return v.parse().map_err(|_| {
                anyhow!("{name}={v:?} is not a job id: expected an unsigned integer")
            });
        }
    }
    if size == 1 {
        return Ok(u64::from(pid));
    }
    for name in ["OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"] {
        if let Some(job) = var(env, name).and_then(|v| v.parse().ok()) {
            return Ok(job);
        }
    }
    bail!(
        "rank {rank} of {size} has no job id shared by all ranks: pass --job ID or set \
         IOSETS_JOB_ID in every rank (mpirun -x IOSETS_JOB_ID)"
    )
}

fn check_dir(dir: &Path) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => bail!("--dir {}: not a directory", dir.display()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            bail!("--dir {}: no such directory", dir.display())
        }
        Err(e) => bail!("--dir {}: {}", dir.display(), describe(&e)),
    }
}

/// An I/O error with its errno: `No space left on device (errno 28, ENOSPC)`.
fn describe(e: &io::Error) -> String {
    let Some(code) = e.raw_os_error() else {
        return e.to_string();
    };
    let text = e.to_string();
    let text = text
        .strip_suffix(&format!(" (os error {code})"))
        .unwrap_or(&text);
    match errno_name(code) {
        Some(name) => format!("{text} (errno {code}, {name})"),
        None => format!("{text} (errno {code})"),
    }
}

/// The symbolic name of the errnos a write, an fsync or a create can meet (Linux numbering).
fn errno_name(code: i32) -> Option<&'static str> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    Some(match code {
        1 => "EPERM",
        2 => "ENOENT",
        4 => "EINTR",
        5 => "EIO",
        6 => "ENXIO",
        9 => "EBADF",
        11 => "EAGAIN",
        12 => "ENOMEM",
        13 => "EACCES",
        16 => "EBUSY",
        17 => "EEXIST",
        20 => "ENOTDIR",
        21 => "EISDIR",
        22 => "EINVAL",
        23 => "ENFILE",
        24 => "EMFILE",
        27 => "EFBIG",
        28 => "ENOSPC",
        30 => "EROFS",
        32 => "EPIPE",
        36 => "ENAMETOOLONG",
        103 => "ECONNABORTED",
        104 => "ECONNRESET",
        107 => "ENOTCONN",
        110 => "ETIMEDOUT",
        111 => "ECONNREFUSED",
        116 => "ESTALE",
        122 => "EDQUOT",
        _ => return None,
    })
}

/// UNIX time in seconds, read from a monotonic clock anchored once at start: phases of one rank
/// never go back in time, and ranks and jobs on one machine share the time base.
#[derive(Debug)]
struct Clock {
    unix_at_start: f64,
    start: Instant,
}

impl Clock {
    fn start() -> Clock {
        Clock {
            unix_at_start: crate::rig::unix_now(),
            start: Instant::now(),
        }
    }

    fn now(&self) -> f64 {
        self.unix_at_start + self.start.elapsed().as_secs_f64()
    }

    /// Sleeps until UNIX time `t` (returns at once if it has passed).
    fn sleep_until(&self, t: f64) {
        loop {
            let left = t - self.now();
            if left <= 0.0 {
                return;
            }
            std::thread::sleep(Duration::from_secs_f64(left).min(MAX_SLEEP));
        }
    }
}

/// What an app's log is: its header line, and how errors name it.
#[derive(Debug)]
pub(super) struct LogFormat {
    /// The first line of the file (the CSV header).
    pub header: &'static str,
    /// The log's name in errors ("phase log").
    pub name: &'static str,
    /// What a file of this format is, for the error on a file of another ("a periodic app's
    /// phase log").
    pub what: &'static str,
}

/// `iosets app periodic`'s log: the phase rows of seed 004's analysis.
const PHASE_LOG: LogFormat = LogFormat {
    header: HEADER,
    name: "phase log",
    what: "a periodic app's phase log",
};

/// Where an app's rows go.
#[derive(Debug)]
enum Log {
    File {
        path: PathBuf,
        file: File,
        name: &'static str,
    },
    Stdout {
        name: &'static str,
    },
}

impl Log {
    /// Opens the log of `format` for appending: `path`, created with the header line if it does
    /// not exist (an existing file must start with that header), or stdout (the header printed
    /// by rank 0 only, `first_rank`). Every rank of a job may open the same file.
    fn open(path: Option<&Path>, first_rank: bool, format: &LogFormat) -> Result<Log> {
        let LogFormat { header, name, what } = *format;
        let Some(path) = path else {
            let mut log = Log::Stdout { name };
            if first_rank {
                log.append(&format!("{header}\n"))?;
            }
            return Ok(log);
        };
        let opened = |e: io::Error| anyhow!("opening {name} {}: {}", path.display(), describe(&e));
        match OpenOptions::new().append(true).create_new(true).open(path) {
            Ok(file) => {
                let mut log = Log::File {
                    path: path.to_path_buf(),
                    file,
                    name,
                };
                log.append(&format!("{header}\n"))?;
                Ok(log)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // Empty: another rank made it and has not written the header yet.
                let text = std::fs::read_to_string(path).unwrap_or_default();
                let first = text.lines().next().unwrap_or("").trim();
                if !first.is_empty() && first != header {
                    bail!(
                        "{name} {}: exists and is not {what} (its first line is {first:?})",
                        path.display()
                    );
                }
                Ok(Log::File {
                    path: path.to_path_buf(),
                    file: OpenOptions::new().append(true).open(path).map_err(opened)?,
                    name,
                })
            }
            Err(e) => Err(opened(e)),
        }
    }

    fn row(&mut self, row: &PhaseRow) -> Result<()> {
        self.append(&row.to_line())
    }

    /// Appends `line` in one `write`, so that rows of ranks sharing the file never interleave.
    fn append(&mut self, line: &str) -> Result<()> {
        match self {
            Log::File { path, file, name } => loop {
                match file.write(line.as_bytes()) {
                    Ok(n) if n == line.len() => return Ok(()),
                    Ok(n) => bail!(
                        "{name} {}: short write ({n} of {} bytes)",
                        path.display(),
                        line.len()
                    ),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => bail!("writing {name} {}: {}", path.display(), describe(&e)),
                }
            },
            Log::Stdout { name } => {
                let mut out = io::stdout().lock();
                out.write_all(line.as_bytes())
                    .and_then(|()| out.flush())
                    .map_err(|e| anyhow!("writing the {name} to stdout: {}", describe(&e)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_is_made_with_its_header_and_refused_if_it_is_another_apps() {
        let dir = std::env::temp_dir().join(format!("iosets-app-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("phases.csv");
        let mut first = Log::open(Some(&path), true, &PHASE_LOG).unwrap();
        let mut second = Log::open(Some(&path), false, &PHASE_LOG).unwrap();
        first.append("a\n").unwrap();
        second.append("b\n").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{HEADER}\na\nb\n"));
        let other = dir.join("other.csv");
        std::fs::write(&other, "job,rank,iteration,kind\n").unwrap();
        let e = Log::open(Some(&other), false, &PHASE_LOG).unwrap_err();
        assert!(
            e.to_string().contains("is not a periodic app's phase log"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
