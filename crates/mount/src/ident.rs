//! Which job a FUSE caller is doing I/O for: the mount's answer to Lustre's `jobid_var`.
//!
//! FUSE tells the file system the *thread id* (tid) and uid of the caller of each LOOKUP, CREATE,
//! OPEN and metadata request, nothing more. The mount resolves a job when a file is opened or
//! created and binds it to the file handle; [`JobResolver::resolve`] is that resolution. It reads
//! `/proc/TID/...` through a list of [`Source`]s tried in order:
//!
//! - [`Source::Cgroup`]: a `job_<digits>` component that Slurm's slurmd put in the path of
//!   `/proc/TID/cgroup` (cgroup v1 `freezer:/slurm_host/uid_0/job_42/step_0`, v2
//!   `0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0`). The user cannot forge it:
//!   only a component below one naming slurm counts, and none inside `user.slice`, where
//!   systemd lets users make cgroups of their own.
//! - [`Source::Env`]: the first non-empty variable of [`IdentConfig::env_vars`] in
//!   `/proc/TID/environ` (the environment the process was started with). The user can set it.
//! - [`Source::ProcnameUid`]: `<comm>.<uid>`, like Lustre's `procname_uid`. This is also the last
//!   resort when no listed source answers, and `unknown.<uid>` when even the name is unreadable,
//!   so resolution never fails.
//!
//! A job *name* becomes a [`JobId`] by [`job_id_of`]: decimal names below 2^63 are their number,
//! other names hash into the upper half, so a hashed name never equals a numeric id. A value
//! that does not fit (more than [`MAX_NAME_LEN`] bytes, or a number above `i64::MAX`) is refused
//! with a warning and the next candidate is tried; it is never truncated.
//!
//! # Caching, and why pid reuse cannot leak a job
//!
//! A cold resolution reads four to six small procfs files (23 µs); a warm one must cost at most
//! a microsecond (0.23 µs, of which 0.17 µs is the pidfd poll; `cargo bench -p iosets-mount
//! --bench ident`, Linux 6.18, 2 cores). Entries are keyed by tid and carry the *identity* of the thread they were
//! read from ([`ReuseCheck`]): a pidfd of the thread, opened before anything is read and polled
//! with a zero timeout on every hit (readable means the thread has exited, so the tid may since
//! name another thread), or else its start time (field 22 of `/proc/TID/stat`), re-read and
//! compared on every hit. Either way an entry is only used while the very thread it was read from
//! is alive, and a cold result is only cached if that thread was still alive after the reads.
//! Entries also expire after [`IdentConfig::ttl`] (or the shorter
//! [`IdentConfig::fallback_ttl`] for `<comm>.<uid>` answers), so a changed environment or cgroup
//! is seen within a bounded time.
//!
//! The job is a property of the process, not of the thread: environ and cgroup are per process
//! and the `<comm>` of `procname-uid` is the process's (thread-group leader's) name, so every
//! thread of a process resolves to the same job even if threads are renamed.
//!
//! # What this module is not
//!
//! It does not decide anything about scheduling, and it does not watch processes: nothing runs
//! in the background. The mount calls [`JobResolver::prune`] from its own housekeeping to drop
//! entries of exited threads early; otherwise they leave by expiry or eviction.
//!
//! # Limits
//!
//! - A process that `exec`s keeps its pre-exec answer until the entry expires (the tid, start
//!   time and pidfd do not change on exec). `<comm>.<uid>` answers, typical of a shell that is
//!   about to exec the real program, expire after `fallback_ttl` (1 s by default) for that
//!   reason.
//! - `/proc` must be the procfs of the pid namespace FUSE reports pids in (the mounting
//!   process's); [`JobResolver::new`] checks this when [`ReuseCheck::Pidfd`] is used.

use std::fmt;
use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iosets_types::hash::{fnv1a64, IdMap};
use iosets_types::JobId;
use parking_lot::RwLock;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fs::OFlags;
use rustix::io::Errno;
use rustix::process::{getpid, getrlimit, pidfd_open, Pid, PidfdFlags, Resource};

/// The longest job name (in bytes) that [`job_id_of`] accepts; longer values are refused.
pub const MAX_NAME_LEN: usize = iosets_types::MAX_JOB_NAME_LEN;

/// The longest [`IdentConfig::ttl`] accepted: a day. Caching a job id longer than that is surely
/// a configuration mistake.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// `PIDFD_THREAD` (Linux 6.9): a pidfd of one thread rather than of a thread-group leader. The
/// kernel defines it as `O_EXCL`; rustix has no name for it, but accepts the bit.
const PIDFD_THREAD: PidfdFlags = PidfdFlags::from_bits_retain(OFlags::EXCL.bits());

/// Number of independently locked parts of the cache; a power of two.
const SHARDS: usize = 16;

/// The names [`Source`] accepts, for error messages.
const VALID_SOURCES: &str = "cgroup, env, procname-uid";

/// Where a job name can come from. Parsed from and shown as `cgroup`, `env`, `procname-uid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// A Slurm `job_<digits>` component in `/proc/TID/cgroup`; set by slurmd, not by the user.
    Cgroup,
    /// The first non-empty variable of [`IdentConfig::env_vars`] in `/proc/TID/environ`.
    Env,
    /// `<comm>.<uid>`: the process name and the caller's uid, like Lustre's `procname_uid`.
    ProcnameUid,
}

impl Source {
    /// Every source, in the default order.
    pub const ALL: [Source; 3] = [Source::Cgroup, Source::Env, Source::ProcnameUid];

    /// The source's name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Cgroup => "cgroup",
            Source::Env => "env",
            Source::ProcnameUid => "procname-uid",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Source {
    type Err = IdentError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Source::ALL
            .into_iter()
            .find(|source| source.as_str() == s)
            .ok_or_else(|| IdentError::UnknownSource { name: s.to_owned() })
    }
}

/// How a cache entry proves it still belongs to the thread it was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReuseCheck {
    /// Hold a pidfd of the thread and poll it (zero timeout) on every hit: one system call. Uses
    /// `PIDFD_THREAD` (Linux 6.9+). On older kernels a thread-group leader gets a pidfd of its
    /// process and other threads fall back to the start time. Entries beyond the pidfd budget
    /// (see [`ResolverStats::pidfd_budget`]) also use the start time. Needs
    /// [`IdentConfig::proc_root`] to be the procfs of this process's pid namespace.
    Pidfd,
    /// Re-read the thread's start time from `/proc/TID/stat` on every hit: an open, a read and
    /// a close, a few µs. Works on any tree, including the fake ones of tests.
    StartTime,
}

/// How [`JobResolver`] finds and caches jobs. Check it with [`IdentConfig::validate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdentConfig {
    /// Sources in the order tried. Default: cgroup, env, procname-uid.
    pub sources: Vec<Source>,
    /// Environment variables [`Source::Env`] reads, first non-empty wins. Default:
    /// `IOSETS_JOB_ID`, `SLURM_JOB_ID`; `--job-env VAR,...` appends.
    pub env_vars: Vec<String>,
    /// How long an answer from cgroup or env is used before it is read again. Default 30 s;
    /// zero reads `/proc` on every call; at most [`MAX_TTL`].
    pub ttl: Duration,
    /// How long a `<comm>.<uid>` or `unknown.<uid>` answer is used. Shorter than `ttl` because
    /// such answers often come from a shell or launcher about to exec the real program, whose
    /// environment carries the job. Default 1 s; at most `ttl`.
    pub fallback_ttl: Duration,
    /// Bound on cached threads (rounded up to a multiple of 16). Default 65,536. An entry costs
    /// 96 bytes in the map (up to twice that at the map's lowest load) plus its name (up to 64
    /// bytes), and with a pidfd about 1 KB of kernel memory (a `struct file`, a pidfs inode and
    /// dentry: 192 + 624 + 192 bytes, measured on Linux 6.18). A full default cache is thus about
    /// 10 to 20 MB of process memory and 64 MB of kernel memory.
    pub max_entries: usize,
    /// Where procfs is. Default `/proc`; tests point it at a fake tree.
    pub proc_root: PathBuf,
    /// How entries are checked against pid reuse. Default [`ReuseCheck::Pidfd`]; fake trees need
    /// [`ReuseCheck::StartTime`].
    pub reuse_check: ReuseCheck,
}

impl Default for IdentConfig {
    fn default() -> Self {
        IdentConfig {
            sources: Source::ALL.to_vec(),
            env_vars: vec!["IOSETS_JOB_ID".to_owned(), "SLURM_JOB_ID".to_owned()],
            ttl: Duration::from_secs(30),
            fallback_ttl: Duration::from_secs(1),
            max_entries: 65_536,
            proc_root: PathBuf::from("/proc"),
            reuse_check: ReuseCheck::Pidfd,
        }
    }
}

impl IdentConfig {
    /// Checks the knobs that need no system call: sources, variable names, times, sizes.
    /// [`JobResolver::new`] also checks `proc_root` for [`ReuseCheck::Pidfd`].
    pub fn validate(&self) -> Result<(), IdentError> {
        if self.sources.is_empty() {
            return Err(IdentError::NoSources);
        }
        for (i, source) in self.sources.iter().enumerate() {
            if self.sources[..i].contains(source) {
                return Err(IdentError::DuplicateSource { which: *source });
            }
        }
        if self.sources.contains(&Source::Env) && self.env_vars.is_empty() {
            return Err(IdentError::NoEnvVars);
        }
        for name in &self.env_vars {
            check_env_var_name(name)?;
        }
        if self.ttl > MAX_TTL {
            return Err(IdentError::TtlTooLong { ttl: self.ttl });
        }
        if self.fallback_ttl > self.ttl {
            return Err(IdentError::FallbackTtlAboveTtl {
                fallback_ttl: self.fallback_ttl,
                ttl: self.ttl,
            });
        }
        if self.max_entries == 0 {
            return Err(IdentError::ZeroMaxEntries);
        }
        Ok(())
    }
}

/// A resolved job: what [`JobResolver::resolve`] answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The job id sent on the wire; always `job_id_of(&name)`.
    pub job: JobId,
    /// The job's name: Slurm's job id, the variable's value, `<comm>.<uid>` or `unknown.<uid>`.
    pub name: String,
    /// The source that answered ([`Source::ProcnameUid`] for `unknown.<uid>` too).
    pub source: Source,
}

/// Counters of a [`JobResolver`] since it was made (or, for `entries` and `pidfds`, now).
///
/// Every call is a hit or one of the three misses: `resolves() = hits + misses()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResolverStats {
    /// Calls answered from the cache.
    pub hits: u64,
    /// Calls for a tid not in the cache.
    pub misses_new: u64,
    /// Calls whose entry had outlived its ttl (the thread itself was still the same).
    pub misses_expired: u64,
    /// Calls whose entry was stale: the thread had exited (its tid may name another thread
    /// now), or the caller's uid had changed.
    pub misses_stale: u64,
    /// Values longer than [`MAX_NAME_LEN`] bytes refused (counted at every read).
    pub refused_too_long: u64,
    /// Decimal values above `i64::MAX` refused (counted at every read).
    pub refused_out_of_range: u64,
    /// Reads that no job source (cgroup or env) answered: `<comm>.<uid>` or `unknown.<uid>`.
    pub fallbacks: u64,
    /// Reads that could not even read the process name: `unknown.<uid>`.
    pub unknown: u64,
    /// Reads whose answer was not cached: the thread was gone, or exited during the read.
    pub uncached: u64,
    /// Entries dropped to make room, or by [`JobResolver::prune`].
    pub evictions: u64,
    /// Entries in the cache now.
    pub entries: u64,
    /// Pidfds held by the cache now.
    pub pidfds: u64,
    /// Most pidfds the cache will hold: `min(max_entries, RLIMIT_NOFILE soft limit / 2)` when
    /// the resolver was made; 0 with [`ReuseCheck::StartTime`].
    pub pidfd_budget: u64,
}

impl ResolverStats {
    /// Calls that read `/proc`.
    pub fn misses(&self) -> u64 {
        self.misses_new + self.misses_expired + self.misses_stale
    }

    /// All calls.
    pub fn resolves(&self) -> u64 {
        self.hits + self.misses()
    }
}

/// A bad configuration or job name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdentError {
    /// A source name that is not one of `cgroup`, `env`, `procname-uid`.
    #[error("unknown job id source {name:?} (valid: {VALID_SOURCES})")]
    UnknownSource {
        /// The name given.
        name: String,
    },
    /// The list of sources is empty.
    #[error("no job id source given (valid: {VALID_SOURCES})")]
    NoSources,
    /// A source appears twice in the list.
    #[error("job id source {which} is listed twice")]
    DuplicateSource {
        /// The repeated source.
        which: Source,
    },
    /// The env source is listed but there are no variables to read.
    #[error("the env job id source needs at least one variable")]
    NoEnvVars,
    /// An environment variable name that is empty or holds `=` or NUL.
    #[error(
        "invalid environment variable name {name:?}: it must be non-empty, without '=' or NUL"
    )]
    InvalidEnvVar {
        /// The name given.
        name: String,
    },
    /// `ttl` above [`MAX_TTL`].
    #[error("job id ttl {ttl:?} is longer than the maximum {MAX_TTL:?}")]
    TtlTooLong {
        /// The ttl given.
        ttl: Duration,
    },
    /// `fallback_ttl` above `ttl`.
    #[error("fallback_ttl {fallback_ttl:?} is longer than ttl {ttl:?}")]
    FallbackTtlAboveTtl {
        /// The fallback ttl given.
        fallback_ttl: Duration,
        /// The ttl given.
        ttl: Duration,
    },
    /// `max_entries` is zero.
    #[error("max_entries must be at least 1")]
    ZeroMaxEntries,
    /// [`ReuseCheck::Pidfd`] with a `proc_root` that is not this pid namespace's procfs.
    #[error("the pidfd reuse check needs {path:?} to be the procfs of this process: {reason}")]
    ProcRoot {
        /// The `proc_root` given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An empty job name.
    #[error("empty job name")]
    EmptyName,
    /// A job name longer than [`MAX_NAME_LEN`] bytes.
    #[error("job name of {len} bytes is longer than {MAX_NAME_LEN}")]
    NameTooLong {
        /// The name's length in bytes.
        len: usize,
    },
    /// A decimal job name above `i64::MAX`.
    #[error("numeric job id {name} is above {}", i64::MAX)]
    NumberOutOfRange {
        /// The name.
        name: String,
    },
    /// A decimal job id, as the servers report it, above `u64::MAX`.
    #[error("{text}: a job id is at most {}", u64::MAX)]
    IdOutOfRange {
        /// The text given.
        text: String,
    },
}

/// Parses a comma-separated list of sources, e.g. `cgroup,env,procname-uid`. Spaces around names
/// are ignored; an unknown name, an empty list or a repeated source is an error.
pub fn parse_sources(s: &str) -> Result<Vec<Source>, IdentError> {
    let mut sources = Vec::new();
    for name in s.split(',').map(str::trim) {
        if name.is_empty() {
            continue;
        }
        let source: Source = name.parse()?;
        if sources.contains(&source) {
            return Err(IdentError::DuplicateSource { which: source });
        }
        sources.push(source);
    }
    if sources.is_empty() {
        return Err(IdentError::NoSources);
    }
    Ok(sources)
}

/// Parses a comma-separated list of environment variable names (`--job-env VAR,...`).
pub fn parse_env_vars(s: &str) -> Result<Vec<String>, IdentError> {
    s.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| check_env_var_name(name).map(|()| name.to_owned()))
        .collect()
}

fn check_env_var_name(name: &str) -> Result<(), IdentError> {
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err(IdentError::InvalidEnvVar {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// The job id of a job name: a decimal name up to `i64::MAX` is its number (so Slurm's job 42 is
/// `JobId(42)`); any other name of 1 to [`MAX_NAME_LEN`] bytes is `fnv1a64(name) | 1 << 63`, so it
/// can never equal a numeric id. Longer names and larger numbers are errors, never truncated.
pub fn job_id_of(name: &str) -> Result<JobId, IdentError> {
    if name.is_empty() {
        return Err(IdentError::EmptyName);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(IdentError::NameTooLong { len: name.len() });
    }
    JobId::of_name(name).ok_or_else(|| IdentError::NumberOutOfRange {
        name: name.to_owned(),
    })
}

/// A job as a person names it where jobs are looked up (the control directory's `jobs/`,
/// `iosets ctl`): its decimal id as the servers report it (a hashed name's too, so any `u64`),
/// or its name, hashed as [`job_id_of`] hashes it.
///
/// # Errors
/// [`IdentError::IdOutOfRange`] for digits above `u64::MAX`; [`job_id_of`]'s for a name.
pub fn job_named(text: &str) -> Result<JobId, IdentError> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse()
            .map(JobId)
            .map_err(|_| IdentError::IdOutOfRange {
                text: text.to_owned(),
            });
    }
    job_id_of(text)
}

/// Resolves callers' thread ids to jobs, with a cache. `Send + Sync`: share one among the FUSE
/// threads.
pub struct JobResolver {
    cfg: IdentConfig,
    shards: Box<[Shard]>,
    shard_cap: usize,
    counters: Counters,
    /// Pidfds open now, shared with every [`CountedPidfd`] so that dropping one counts it.
    open_pidfds: Arc<AtomicUsize>,
    pidfd_budget: usize,
    /// Whether the kernel accepts `PIDFD_THREAD`; cleared at the first `EINVAL`.
    thread_pidfds: AtomicBool,
}

/// One independently locked part of the cache. Aligned so that two shards' locks and hit
/// counters never share a cache line.
#[repr(align(128))]
struct Shard {
    map: RwLock<IdMap<u32, Entry>>,
    /// Hits are counted here, beside the lock the hit already touched, not in a shared line.
    hits: AtomicU64,
}

/// A cached answer for one thread: 96 bytes with its key (pinned by a test), plus the name's
/// heap allocation and, with a pidfd, about 1 KB of kernel memory (see
/// [`IdentConfig::max_entries`]).
#[derive(Debug)]
struct Entry {
    resolved: Resolved,
    /// When the answer must be read again.
    expires: Instant,
    identity: Identity,
    /// The uid the answer was made for (`<comm>.<uid>` depends on it).
    uid: u32,
    /// A refused value was already reported for this thread: do not warn again.
    warned: bool,
}

/// What ties an entry to one thread, whatever its tid names later.
#[derive(Debug)]
struct Identity {
    /// Field 22 of `/proc/TID/stat`: clock ticks after boot at which the thread started.
    start_time: u64,
    /// A pidfd of the thread (or, without `PIDFD_THREAD`, of its process if it is the leader);
    /// `None` means check `start_time` instead.
    pidfd: Option<CountedPidfd>,
}

/// A pidfd counted in [`JobResolver::open_pidfds`] while it is open.
#[derive(Debug)]
struct CountedPidfd {
    fd: OwnedFd,
    open: Arc<AtomicUsize>,
}

impl Drop for CountedPidfd {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Relaxed);
    }
}

#[derive(Debug, Default)]
struct Counters {
    misses_new: AtomicU64,
    misses_expired: AtomicU64,
    misses_stale: AtomicU64,
    refused_too_long: AtomicU64,
    refused_out_of_range: AtomicU64,
    fallbacks: AtomicU64,
    unknown: AtomicU64,
    uncached: AtomicU64,
    evictions: AtomicU64,
}

/// What a look-up in the cache found.
enum Lookup {
    Fresh(Resolved),
    Absent,
    Expired,
    Stale,
}

impl JobResolver {
    /// Makes a resolver after validating `cfg` ([`IdentConfig::validate`]) and, for
    /// [`ReuseCheck::Pidfd`], checking that `proc_root` is the procfs of this process's pid
    /// namespace. The pidfd budget is fixed here from `RLIMIT_NOFILE`: raise the limit first.
    pub fn new(cfg: IdentConfig) -> Result<Self, IdentError> {
        cfg.validate()?;
        let pidfd_budget = match cfg.reuse_check {
            ReuseCheck::Pidfd => {
                check_own_procfs(&cfg.proc_root)?;
                let soft = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
                cfg.max_entries
                    .min(usize::try_from(soft / 2).unwrap_or(usize::MAX))
            }
            ReuseCheck::StartTime => 0,
        };
        let shards = (0..SHARDS)
            .map(|_| Shard {
                map: RwLock::new(IdMap::default()),
                hits: AtomicU64::new(0),
            })
            .collect();
        Ok(JobResolver {
            shard_cap: cfg.max_entries.div_ceil(SHARDS),
            cfg,
            shards,
            counters: Counters::default(),
            open_pidfds: Arc::new(AtomicUsize::new(0)),
            pidfd_budget,
            thread_pidfds: AtomicBool::new(true),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &IdentConfig {
        &self.cfg
    }

    /// The Slurm job of thread `tid` from its cgroup only ([`Source::Cgroup`]), read now (not
    /// cached), whatever the configured sources: the one answer a user cannot forge, which
    /// decides whose priority a process may set. `None` outside a Slurm job's cgroup.
    pub fn slurm_job(&self, tid: u32) -> Option<JobId> {
        self.cgroup_answer(tid, false, &mut false).map(|r| r.job)
    }

    /// The supplementary groups of thread `tid` (the `Groups:` line of `/proc/TID/status`),
    /// read now; `None` if the thread is gone or the line is unreadable.
    pub fn groups(&self, tid: u32) -> Option<Vec<u32>> {
        let text = fs::read_to_string(self.proc_file(tid, "status")).ok()?;
        let line = text.lines().find_map(|l| l.strip_prefix("Groups:"))?;
        line.split_whitespace().map(|g| g.parse().ok()).collect()
    }

    /// The job that thread `tid`, running as `uid`, is doing I/O for. Never fails: when nothing
    /// else answers it is `<comm>.<uid>`, or `unknown.<uid>` if the thread is gone.
    pub fn resolve(&self, tid: u32, uid: u32) -> Resolved {
        self.resolve_at(tid, uid, Instant::now())
    }

    /// The warm half of [`resolve`](Self::resolve): the cached answer for `tid` and `uid` if
    /// it is fresh (counted as a hit), `None` otherwise (nothing counted, nothing read from
    /// `/proc` but the reuse check). The mount calls it on the client runtime's workers and
    /// takes the cold path, which reads `/proc/TID/environ` (under the caller's memory map
    /// lock), to a blocking thread.
    pub fn cached(&self, tid: u32, uid: u32) -> Option<Resolved> {
        match self.lookup(tid, uid, Instant::now()) {
            Lookup::Fresh(resolved) => Some(resolved),
            _ => None,
        }
    }

    /// [`resolve`](Self::resolve) at time `now` (entries expire relative to it).
    pub fn resolve_at(&self, tid: u32, uid: u32, now: Instant) -> Resolved {
        let shard = self.shard(tid);
        let prior = match self.lookup(tid, uid, now) {
            Lookup::Fresh(resolved) => return resolved,
            Lookup::Absent => {
                self.counters.misses_new.fetch_add(1, Relaxed);
                None
            }
            Lookup::Stale => {
                self.counters.misses_stale.fetch_add(1, Relaxed);
                // Dropped, and its pidfd closed, after the lock is released.
                let stale = shard.map.write().remove(&tid);
                drop(stale);
                None
            }
            // Same thread, answer too old: keep its identity (and pidfd) for the new answer.
            Lookup::Expired => {
                self.counters.misses_expired.fetch_add(1, Relaxed);
                shard.map.write().remove(&tid)
            }
        };
        self.read(tid, uid, now, prior)
    }

    /// Drops every entry whose answer has expired at `now` or whose thread has exited, and
    /// returns how many. Costs one `poll` per shard for the pidfd entries and one read per
    /// start-time entry; the mount may call it every `ttl` to release pidfds early.
    pub fn prune(&self, now: Instant) -> usize {
        let mut dropped = 0;
        for shard in self.shards.iter() {
            let mut map = shard.map.write();
            let before = map.len();
            map.retain(|_, entry| entry.expires > now);
            let exited = self.exited_in(&map);
            for tid in exited {
                map.remove(&tid);
            }
            dropped += before - map.len();
        }
        self.counters.evictions.fetch_add(dropped as u64, Relaxed);
        dropped
    }

    /// Drops every entry (the next call for each thread reads `/proc` again).
    pub fn clear(&self) {
        for shard in self.shards.iter() {
            shard.map.write().clear();
        }
    }

    /// The counters now.
    pub fn stats(&self) -> ResolverStats {
        let c = &self.counters;
        let mut stats = ResolverStats {
            misses_new: c.misses_new.load(Relaxed),
            misses_expired: c.misses_expired.load(Relaxed),
            misses_stale: c.misses_stale.load(Relaxed),
            refused_too_long: c.refused_too_long.load(Relaxed),
            refused_out_of_range: c.refused_out_of_range.load(Relaxed),
            fallbacks: c.fallbacks.load(Relaxed),
            unknown: c.unknown.load(Relaxed),
            uncached: c.uncached.load(Relaxed),
            evictions: c.evictions.load(Relaxed),
            pidfds: self.open_pidfds.load(Relaxed) as u64,
            pidfd_budget: self.pidfd_budget as u64,
            ..ResolverStats::default()
        };
        for shard in self.shards.iter() {
            stats.hits += shard.hits.load(Relaxed);
            stats.entries += shard.map.read().len() as u64;
        }
        stats
    }

    fn shard(&self, tid: u32) -> &Shard {
        &self.shards[tid as usize % SHARDS]
    }

    /// What the cache holds for `tid` and `uid` at `now`; a fresh answer counts as a hit.
    fn lookup(&self, tid: u32, uid: u32, now: Instant) -> Lookup {
        let shard = self.shard(tid);
        let found = match shard.map.read().get(&tid) {
            None => Lookup::Absent,
            Some(entry) => self.check(tid, entry, uid, now),
        };
        if let Lookup::Fresh(_) = found {
            shard.hits.fetch_add(1, Relaxed);
        }
        found
    }

    /// Whether `entry` may answer for `tid` and `uid` at `now`.
    fn check(&self, tid: u32, entry: &Entry, uid: u32, now: Instant) -> Lookup {
        if entry.uid != uid || !self.alive(tid, &entry.identity) {
            Lookup::Stale
        } else if now >= entry.expires {
            Lookup::Expired
        } else {
            Lookup::Fresh(entry.resolved.clone())
        }
    }

    /// Whether the thread `identity` was taken from is still the one named `tid`.
    fn alive(&self, tid: u32, identity: &Identity) -> bool {
        match &identity.pidfd {
            Some(pidfd) => !has_exited(&pidfd.fd),
            None => self.start_time(tid) == Some(identity.start_time),
        }
    }

    /// The tids of `map`'s entries whose thread has exited.
    fn exited_in(&self, map: &IdMap<u32, Entry>) -> Vec<u32> {
        let mut exited = Vec::new();
        let (with_fd, without_fd): (Vec<_>, Vec<_>) = map
            .iter()
            .partition(|(_, entry)| entry.identity.pidfd.is_some());
        let mut fds: Vec<PollFd<'_>> = with_fd
            .iter()
            .filter_map(|(_, entry)| entry.identity.pidfd.as_ref())
            .map(|pidfd| PollFd::new(&pidfd.fd, PollFlags::IN))
            .collect();
        if !fds.is_empty() && poll(&mut fds, Some(&Timespec::default())).is_ok() {
            for ((tid, _), fd) in with_fd.iter().zip(&fds) {
                if !fd.revents().is_empty() {
                    exited.push(**tid);
                }
            }
        }
        for (tid, entry) in without_fd {
            if !self.alive(*tid, &entry.identity) {
                exited.push(*tid);
            }
        }
        exited
    }

    /// The cold path: reads `/proc`, answers, and caches the answer if the thread stayed the
    /// same throughout. `prior` is the expired entry of the same thread, if any.
    fn read(&self, tid: u32, uid: u32, now: Instant, prior: Option<Entry>) -> Resolved {
        // Identity first, so that everything read below is checked against it at the end.
        let (thread_fd, prior_warned, prior_identity) = match prior {
            Some(entry) => (None, entry.warned, Some(entry.identity)),
            None if self.use_thread_pidfds() => (self.open_pidfd(tid, PIDFD_THREAD), false, None),
            None => (None, false, None),
        };
        let start_time = self.start_time(tid);
        let tgid = self.tgid(tid).unwrap_or(tid);
        let mut late_pidfd = false;
        let identity = match (prior_identity, start_time) {
            (Some(identity), _) => Some(identity),
            (None, Some(start_time)) => {
                let mut pidfd = thread_fd;
                // Without PIDFD_THREAD a leader's process pidfd will do (a leader's tid is not
                // reused while any thread of its process lives), but it was opened after the
                // start time was read, so the start time is checked once more below.
                if pidfd.is_none() && tgid == tid && self.cfg.reuse_check == ReuseCheck::Pidfd {
                    pidfd = self.open_pidfd(tid, PidfdFlags::empty());
                    late_pidfd = pidfd.is_some();
                }
                Some(Identity { start_time, pidfd })
            }
            (None, None) => None,
        };

        let mut refused = false;
        let warn = !prior_warned;
        let resolved = self.answer(tid, tgid, uid, warn, &mut refused);

        let keep = identity.filter(|identity| {
            self.alive(tid, identity)
                && (!late_pidfd || self.start_time(tid) == Some(identity.start_time))
        });
        let Some(identity) = keep else {
            self.counters.uncached.fetch_add(1, Relaxed);
            return resolved;
        };
        let ttl = match resolved.source {
            Source::ProcnameUid => self.cfg.fallback_ttl,
            Source::Cgroup | Source::Env => self.cfg.ttl,
        };
        let entry = Entry {
            resolved: resolved.clone(),
            expires: now + ttl,
            identity,
            uid,
            warned: prior_warned || refused,
        };
        self.insert(tid, entry, now);
        resolved
    }

    /// Tries the sources in order, then the last resort.
    fn answer(&self, tid: u32, tgid: u32, uid: u32, warn: bool, refused: &mut bool) -> Resolved {
        let mut comm_tried = false;
        for &source in &self.cfg.sources {
            let found = match source {
                Source::Cgroup => self.cgroup_answer(tid, warn, refused),
                Source::Env => self.env_answer(tid, warn, refused),
                Source::ProcnameUid => {
                    comm_tried = true;
                    self.comm_answer(tgid, uid)
                }
            };
            if let Some(resolved) = found {
                if source == Source::ProcnameUid {
                    self.counters.fallbacks.fetch_add(1, Relaxed);
                }
                return resolved;
            }
        }
        self.counters.fallbacks.fetch_add(1, Relaxed);
        if !comm_tried {
            if let Some(resolved) = self.comm_answer(tgid, uid) {
                return resolved;
            }
        }
        self.counters.unknown.fetch_add(1, Relaxed);
        let name = format!("unknown.{uid}");
        // Not numeric and at most 18 bytes: this is what `job_id_of` gives.
        let job = JobId(fnv1a64(name.as_bytes()) | iosets_types::HASHED_JOB_BIT);
        Resolved {
            job,
            name,
            source: Source::ProcnameUid,
        }
    }

    fn cgroup_answer(&self, tid: u32, warn: bool, refused: &mut bool) -> Option<Resolved> {
        let text = fs::read(self.proc_file(tid, "cgroup")).ok()?;
        let name = slurm_job_in_cgroup(&text)?;
        self.accept(tid, name, Source::Cgroup, warn, refused)
    }

    fn env_answer(&self, tid: u32, warn: bool, refused: &mut bool) -> Option<Resolved> {
        let environ = fs::read(self.proc_file(tid, "environ")).ok()?;
        self.cfg.env_vars.iter().find_map(|var| {
            let value = env_value(&environ, var)?;
            self.accept(tid, value, Source::Env, warn, refused)
        })
    }

    fn comm_answer(&self, tgid: u32, uid: u32) -> Option<Resolved> {
        let comm = fs::read(self.proc_file(tgid, "comm")).ok()?;
        let comm = comm.strip_suffix(b"\n").unwrap_or(&comm);
        let name = format!("{}.{uid}", String::from_utf8_lossy(comm));
        // A real comm is at most 15 bytes; only a fake tree can make the name too long.
        let job = job_id_of(&name).ok()?;
        Some(Resolved {
            job,
            name,
            source: Source::ProcnameUid,
        })
    }

    /// `value` as the answer, unless it is empty (skipped) or refused (counted, reported).
    fn accept(
        &self,
        tid: u32,
        value: &[u8],
        source: Source,
        warn: bool,
        refused: &mut bool,
    ) -> Option<Resolved> {
        let name = String::from_utf8_lossy(value);
        match job_id_of(&name) {
            Ok(job) => Some(Resolved {
                job,
                name: name.into_owned(),
                source,
            }),
            Err(IdentError::EmptyName) => None,
            Err(error) => {
                let counter = match error {
                    IdentError::NameTooLong { .. } => &self.counters.refused_too_long,
                    _ => &self.counters.refused_out_of_range,
                };
                counter.fetch_add(1, Relaxed);
                if warn {
                    tracing::warn!(tid, %source, %error, "job name refused, trying the next one");
                }
                *refused = true;
                None
            }
        }
    }

    fn insert(&self, tid: u32, entry: Entry, now: Instant) {
        let mut map = self.shard(tid).map.write();
        if map.len() >= self.shard_cap && !map.contains_key(&tid) {
            let before = map.len();
            map.retain(|_, entry| entry.expires > now);
            if map.len() >= self.shard_cap {
                let oldest = map
                    .iter()
                    .min_by_key(|(_, entry)| entry.expires)
                    .map(|(t, _)| *t);
                if let Some(oldest) = oldest {
                    map.remove(&oldest);
                }
            }
            self.counters
                .evictions
                .fetch_add((before - map.len()) as u64, Relaxed);
        }
        map.insert(tid, entry);
    }

    fn use_thread_pidfds(&self) -> bool {
        self.cfg.reuse_check == ReuseCheck::Pidfd && self.thread_pidfds.load(Relaxed)
    }

    /// A pidfd of `tid`, if the budget allows and the kernel gives one.
    fn open_pidfd(&self, tid: u32, flags: PidfdFlags) -> Option<CountedPidfd> {
        let pid = Pid::from_raw(i32::try_from(tid).ok()?)?;
        if self.open_pidfds.fetch_add(1, Relaxed) >= self.pidfd_budget {
            self.open_pidfds.fetch_sub(1, Relaxed);
            return None;
        }
        match pidfd_open(pid, flags) {
            Ok(fd) => Some(CountedPidfd {
                fd,
                open: Arc::clone(&self.open_pidfds),
            }),
            Err(errno) => {
                self.open_pidfds.fetch_sub(1, Relaxed);
                if errno == Errno::INVAL && flags.contains(PIDFD_THREAD) {
                    // Linux before 6.9: no thread pidfds. Leaders get process pidfds instead.
                    self.thread_pidfds.store(false, Relaxed);
                }
                None
            }
        }
    }

    fn start_time(&self, tid: u32) -> Option<u64> {
        parse_start_time(&fs::read(self.proc_file(tid, "stat")).ok()?)
    }

    fn tgid(&self, tid: u32) -> Option<u32> {
        parse_tgid(&fs::read(self.proc_file(tid, "status")).ok()?)
    }

    fn proc_file(&self, pid: u32, file: &str) -> PathBuf {
        let mut path = self.cfg.proc_root.join(pid.to_string());
        path.push(file);
        path
    }

    /// Stops using `PIDFD_THREAD`, as on a kernel before 6.9 (for tests of that path).
    #[cfg(test)]
    fn pretend_no_thread_pidfds(&self) {
        self.thread_pidfds.store(false, Relaxed);
    }
}

impl fmt::Debug for JobResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobResolver")
            .field("cfg", &self.cfg)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// Whether the process or thread of `pidfd` has exited: a zero-timeout poll, readable once it has.
fn has_exited(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    // An error (EINTR, ENOMEM) counts as exited: the caller then re-reads, which is always safe.
    !matches!(poll(&mut fds, Some(&Timespec::default())), Ok(0))
}

/// Checks that `root` is a procfs whose `self` is this process, i.e. that the pids it names are
/// the pids `pidfd_open` understands.
fn check_own_procfs(root: &Path) -> Result<(), IdentError> {
    let fail = |reason: String| IdentError::ProcRoot {
        path: root.to_owned(),
        reason,
    };
    let fs = rustix::fs::statfs(root).map_err(|e| fail(format!("statfs: {e}")))?;
    if fs.f_type != rustix::fs::PROC_SUPER_MAGIC {
        return Err(fail("not a procfs".to_owned()));
    }
    let me = fs::read_link(root.join("self")).map_err(|e| fail(format!("self: {e}")))?;
    let pid = getpid().as_raw_nonzero().get().to_string();
    if me.as_os_str() != pid.as_str() {
        return Err(fail(format!("its self is {me:?}, this process is {pid}")));
    }
    Ok(())
}

/// Field 22 (`starttime`) of a `/proc/TID/stat`. Field 2 is `(comm)`, which may itself hold
/// spaces and parentheses, so fields are counted from after the *last* `)`.
fn parse_start_time(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    // After `)` come fields 3, 4, ...: field 22 is the 20th.
    rest.split_ascii_whitespace().nth(22 - 3)?.parse().ok()
}

/// The `Tgid:` of a `/proc/TID/status`.
fn parse_tgid(status: &[u8]) -> Option<u32> {
    status.split(|&b| b == b'\n').find_map(|line| {
        let value = line.strip_prefix(b"Tgid:")?;
        std::str::from_utf8(value).ok()?.trim().parse().ok()
    })
}

/// The value of `var` in a NUL-separated environment block; the first definition wins, as with
/// `getenv`.
fn env_value<'a>(environ: &'a [u8], var: &str) -> Option<&'a [u8]> {
    environ
        .split(|&b| b == 0)
        .find_map(|entry| entry.strip_prefix(var.as_bytes())?.strip_prefix(b"="))
}

/// The Slurm job named in a `/proc/TID/cgroup`: the digits of the first `job_<digits>` path
/// component that lies below a component naming slurm (`slurm`, `slurm_<node>`,
/// `slurmstepd.scope`, `<node>_slurmstepd.scope`) and not inside `user.slice`, where systemd
/// lets users create cgroups of their own. Lines are `hierarchy:controllers:path`.
fn slurm_job_in_cgroup(text: &[u8]) -> Option<&[u8]> {
    text.split(|&b| b == b'\n').find_map(|line| {
        let path = line.splitn(3, |&b| b == b':').nth(2)?;
        let mut below_slurm = false;
        for component in path.split(|&b| b == b'/') {
            if component == b"user.slice" {
                return None;
            }
            if below_slurm {
                if let Some(digits) = component.strip_prefix(b"job_") {
                    if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
                        return Some(digits);
                    }
                }
            }
            below_slurm |= component.windows(5).any(|w| w == b"slurm");
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_line(tid: u32, comm: &str, start_time: u64) -> String {
        // Fields 3..=21, then 22 = start time, then a few more.
        format!("{tid} ({comm}) S 1 {tid} {tid} 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 {start_time} 12345 67 18446744073709551615 1 1 0 0 0")
    }

    #[test]
    fn start_time_is_field_22_even_when_comm_has_spaces_and_parentheses() {
        assert_eq!(
            parse_start_time(stat_line(7, "sleep", 4242).as_bytes()),
            Some(4242)
        );
        assert_eq!(
            parse_start_time(stat_line(7, "a) (b c) 9 9", 17).as_bytes()),
            Some(17)
        );
        assert_eq!(parse_start_time(stat_line(7, ")", 18).as_bytes()), Some(18));
        assert_eq!(parse_start_time(b"7 (x) S 1 2"), None);
        assert_eq!(parse_start_time(b"no parenthesis"), None);
    }

    #[test]
    fn tgid_is_read_from_status() {
        let status = b"Name:\tworker\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4100\nNgid:\t0\nPid:\t4107\n";
        assert_eq!(parse_tgid(status), Some(4100));
        assert_eq!(parse_tgid(b"Name:\tx\n"), None);
    }

    #[test]
    fn env_value_takes_the_first_exact_definition() {
        let environ =
            b"IOSETS_JOB_ID_X=1\0IOSETS_JOB_ID=\0PATH=/bin\0IOSETS_JOB_ID=9\0SLURM_JOB_ID=77\0";
        assert_eq!(env_value(environ, "IOSETS_JOB_ID"), Some(&b""[..]));
        assert_eq!(env_value(environ, "SLURM_JOB_ID"), Some(&b"77"[..]));
        assert_eq!(env_value(environ, "PATH"), Some(&b"/bin"[..]));
        assert_eq!(env_value(environ, "HOME"), None);
        assert_eq!(env_value(b"", "HOME"), None);
    }

    #[test]
    fn slurm_cgroup_paths_of_v1_and_v2_name_the_job() {
        let v1 = b"12:freezer:/slurm_host/uid_0/job_42/step_0\n11:memory:/slurm_host/uid_0/job_42/step_0/task_0\n";
        assert_eq!(slurm_job_in_cgroup(v1), Some(&b"42"[..]));
        let v2 = b"0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n";
        assert_eq!(slurm_job_in_cgroup(v2), Some(&b"42"[..]));
        let multi_slurmd =
            b"0::/system.slice/node7_slurmstepd.scope/job_9/step_batch/user/task_0\n";
        assert_eq!(slurm_job_in_cgroup(multi_slurmd), Some(&b"9"[..]));
        let later_line = b"13:cpuset:/\n12:freezer:/slurm/uid_1000/job_5/step_0\n";
        assert_eq!(slurm_job_in_cgroup(later_line), Some(&b"5"[..]));
    }

    #[test]
    fn cgroup_paths_a_user_could_make_name_no_job() {
        for text in [
            &b"0::/user.slice/user-1000.slice/user@1000.service/slurm/job_5\n"[..],
            b"0::/job_5\n",
            b"0::/system.slice/sshd.service/job_5\n",
            b"0::/system.slice/slurmstepd.scope/job_/step_0\n",
            b"0::/system.slice/slurmstepd.scope/job_12a/step_0\n",
            b"0::/system.slice/slurmstepd.scope/system\n",
            b"",
        ] {
            assert_eq!(
                slurm_job_in_cgroup(text),
                None,
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn numeric_names_are_their_number_and_others_hash_into_the_top_half() {
        assert_eq!(job_id_of("42"), Ok(JobId(42)));
        assert_eq!(job_id_of("0"), Ok(JobId(0)));
        assert_eq!(job_id_of("9223372036854775807"), Ok(JobId(i64::MAX as u64)));
        let hashed = job_id_of("sleep.1000").unwrap();
        assert_eq!(hashed, JobId(fnv1a64(b"sleep.1000") | 1 << 63));
        assert!(job_id_of("-1").unwrap().0 >= 1 << 63);
        assert!(job_id_of("4 2").unwrap().0 >= 1 << 63);
    }

    #[test]
    fn a_job_is_named_by_any_id_the_servers_report_or_by_its_name() {
        let hashed = job_id_of("sleep.1000").unwrap();
        assert_eq!(job_named("sleep.1000"), Ok(hashed));
        assert_eq!(job_named(&hashed.0.to_string()), Ok(hashed));
        assert_eq!(job_named("42"), Ok(JobId(42)));
        assert_eq!(job_named(&u64::MAX.to_string()), Ok(JobId(u64::MAX)));
        assert_eq!(
            job_named("18446744073709551616"),
            Err(IdentError::IdOutOfRange {
                text: "18446744073709551616".into()
            })
        );
        assert_eq!(job_named(""), Err(IdentError::EmptyName));
    }

    #[test]
    fn names_that_do_not_fit_are_refused_not_truncated() {
        assert_eq!(job_id_of(""), Err(IdentError::EmptyName));
        assert!(job_id_of(&"x".repeat(MAX_NAME_LEN)).is_ok());
        assert_eq!(
            job_id_of(&"x".repeat(65)),
            Err(IdentError::NameTooLong { len: 65 })
        );
        for big in [
            "9223372036854775808",
            "18446744073709551616",
            "99999999999999999999999",
        ] {
            assert_eq!(
                job_id_of(big),
                Err(IdentError::NumberOutOfRange {
                    name: big.to_owned()
                })
            );
        }
    }

    #[test]
    fn sources_parse_and_print_by_name() {
        for source in Source::ALL {
            assert_eq!(source.to_string().parse::<Source>(), Ok(source));
        }
        assert_eq!(
            parse_sources(" env , cgroup"),
            Ok(vec![Source::Env, Source::Cgroup])
        );
        let error = parse_sources("cgroup,jobstats").unwrap_err();
        assert_eq!(
            error,
            IdentError::UnknownSource {
                name: "jobstats".to_owned()
            }
        );
        assert!(error.to_string().contains("cgroup, env, procname-uid"));
        assert_eq!(parse_sources(""), Err(IdentError::NoSources));
        assert_eq!(parse_sources(" , "), Err(IdentError::NoSources));
        assert_eq!(
            parse_sources("env,env"),
            Err(IdentError::DuplicateSource { which: Source::Env })
        );
    }

    #[test]
    fn env_var_lists_parse_and_bad_names_are_refused() {
        assert_eq!(
            parse_env_vars("PBS_JOBID, LSB_JOBID"),
            Ok(vec!["PBS_JOBID".into(), "LSB_JOBID".into()])
        );
        assert!(matches!(
            parse_env_vars("A=B"),
            Err(IdentError::InvalidEnvVar { .. })
        ));
    }

    #[test]
    fn bad_configurations_are_refused() {
        let ok = IdentConfig::default();
        assert_eq!(ok.validate(), Ok(()));
        let bad = |edit: fn(&mut IdentConfig)| {
            let mut cfg = IdentConfig::default();
            edit(&mut cfg);
            cfg.validate().unwrap_err()
        };
        assert_eq!(bad(|c| c.sources.clear()), IdentError::NoSources);
        assert_eq!(bad(|c| c.env_vars.clear()), IdentError::NoEnvVars);
        assert_eq!(bad(|c| c.max_entries = 0), IdentError::ZeroMaxEntries);
        assert!(matches!(
            bad(|c| c.env_vars.push(String::new())),
            IdentError::InvalidEnvVar { .. }
        ));
        assert!(matches!(
            bad(|c| c.ttl = MAX_TTL * 2),
            IdentError::TtlTooLong { .. }
        ));
        assert!(matches!(
            bad(|c| c.ttl = Duration::ZERO),
            IdentError::FallbackTtlAboveTtl { .. }
        ));
        assert!(matches!(
            bad(|c| c.sources.push(Source::Cgroup)),
            IdentError::DuplicateSource {
                which: Source::Cgroup
            }
        ));
        let fake_root = IdentConfig {
            proc_root: std::env::temp_dir(),
            ..IdentConfig::default()
        };
        assert!(matches!(
            JobResolver::new(fake_root),
            Err(IdentError::ProcRoot { .. })
        ));
    }

    /// Pins the memory per entry that the docs state.
    #[test]
    fn an_entry_with_its_key_stays_within_96_bytes() {
        assert!(
            std::mem::size_of::<(u32, Entry)>() <= 96,
            "{}",
            std::mem::size_of::<(u32, Entry)>()
        );
    }

    #[test]
    fn resolver_is_send_and_sync() {
        fn shared<T: Send + Sync>() {}
        shared::<JobResolver>();
    }

    /// Kernels before 6.9 have no `PIDFD_THREAD`: a leader is checked through its process
    /// pidfd, any other thread through its start time, and both still hit.
    #[test]
    fn without_thread_pidfds_leaders_use_process_pidfds_and_threads_start_times() {
        let resolver = JobResolver::new(IdentConfig::default()).unwrap();
        resolver.pretend_no_thread_pidfds();
        let uid = rustix::process::getuid().as_raw();
        let leader = getpid().as_raw_nonzero().get() as u32;
        let this_thread = rustix::thread::gettid().as_raw_nonzero().get() as u32;
        let first = resolver.resolve(leader, uid);
        assert_eq!(resolver.stats().pidfds, 1);
        assert_eq!(resolver.resolve(leader, uid), first);
        if this_thread != leader {
            resolver.resolve(this_thread, uid);
            assert_eq!(
                resolver.stats().pidfds,
                1,
                "a non-leader thread gets no process pidfd"
            );
            resolver.resolve(this_thread, uid);
        }
        let stats = resolver.stats();
        assert_eq!(stats.misses(), stats.entries);
        assert_eq!(stats.hits, stats.entries);
    }
}
