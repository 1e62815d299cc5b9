//! The server's file descriptors: how many it may have (`RLIMIT_NOFILE`) and how it spends them.
//!
//! # What it is
//! At start the server raises its soft `RLIMIT_NOFILE` to the hard limit ([`raise_nofile`]),
//! then splits the resulting limit into an [`FdBudget`]: a reserve for the descriptors every
//! server holds or opens briefly, a share for client connections (the connection cap), and a
//! share for the backing store's bounded sets (open-file cache, dirty files, dirty directories;
//! see [`crate::root`]). Each set stays within its share by itself (eviction, or fsync and close
//! under pressure), so no request fails with `EMFILE` because the server hoarded descriptors.
//!
//! # What it is not
//! Not a guard against other code in the same process: the budget assumes one server per process
//! (tests that start several servers in one process share the limit, and stay far below it).
//!
//! # The arithmetic
//! `reserve = FIXED + PER_WORKER × workers + ACCEPT_SLACK`, where
//! - [`FIXED`] = 16: standard streams (3), the root's descriptor (1), the TCP listener (1), the
//!   same-host Unix listener (1), the network runtime's epoll instance and waker eventfd (2), the
//!   signal driver's socket pair (2), the trace file (1), and 5 spare for what the binary or a
//!   library opens (a log file, `/proc` reads);
//! - [`PER_WORKER`] = 4: what a worker holds beside the bounded sets during one request — a
//!   metadata operation opens up to 4 at once (a rename's two parent directories; a create's
//!   new file, its parent directory, and the object and parent `own` opens to chown it), a data
//!   request at most 2 (the file it serves, evicted from the cache meanwhile by another worker,
//!   and the oldest dirty file it fsyncs and closes under pressure);
//! - [`ACCEPT_SLACK`] = 16: connections accepted only to be refused at the connection cap, and
//!   same-host region descriptors received before they are mapped and closed.
//!
//! The rest is split half to connections (a TCP or same-host connection holds one descriptor)
//! and half to files: of those, 1/2 to the open-file cache, 1/8 to dirty directories and the
//! rest to dirty files. A file both cached and dirty holds one descriptor, so the sets together
//! never exceed their shares' sum.

use std::fmt;

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

use crate::root::Capacity;

/// The most descriptors the server asks for, whatever the hard limit (Linux's default
/// `fs.nr_open`, the most `setrlimit` accepts without tuning).
pub(crate) const MAX_NOFILE: u64 = 1 << 20;
/// The smallest limit the server runs with.
pub(crate) const MIN_LIMIT: u64 = 128;
/// Descriptors held whatever the load (see the module docs).
pub(crate) const FIXED: usize = 16;
/// Descriptors a worker may hold beside the bounded sets (see the module docs).
pub(crate) const PER_WORKER: usize = 4;
/// Descriptors for refused accepts and same-host regions in transit (see the module docs).
pub(crate) const ACCEPT_SLACK: usize = 16;
/// The fewest descriptors left for connections and files together after the reserve: 32
/// connections and 32 files (16 cached, 12 dirty files, 4 dirty directories).
pub(crate) const MIN_SHARED: usize = 64;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (capped at [`MAX_NOFILE`]) and returns the
/// resulting soft limit. A soft limit already at or above that is left alone. If the kernel
/// refuses (a hard limit above `fs.nr_open`), the refusal is returned as an error.
pub(crate) fn raise_nofile() -> std::io::Result<u64> {
    let now = getrlimit(Resource::Nofile);
    let soft = now.current.unwrap_or(u64::MAX);
    let target = now.maximum.unwrap_or(u64::MAX).min(MAX_NOFILE);
    if soft >= target {
        return Ok(soft.min(MAX_NOFILE));
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(target),
            maximum: now.maximum,
        },
    )
    .map_err(|e| {
        std::io::Error::other(format!(
            "raising RLIMIT_NOFILE from {soft} to {target}: {e}"
        ))
    })?;
    Ok(target)
}

/// The current soft `RLIMIT_NOFILE` (unlimited read as [`MAX_NOFILE`]), without changing it.
pub(crate) fn current_nofile() -> u64 {
    getrlimit(Resource::Nofile)
        .current
        .unwrap_or(u64::MAX)
        .min(MAX_NOFILE)
}

/// How the server spends its descriptors (see the module docs for the arithmetic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FdBudget {
    /// The soft `RLIMIT_NOFILE` the budget was made for (at most [`MAX_NOFILE`]).
    pub limit: u64,
    /// Descriptors held whatever the load, or briefly by workers and accepts.
    pub reserve: usize,
    /// Client connections the server may hold at once (the connection cap).
    pub connections: usize,
    /// Open files the backing store's cache keeps.
    pub cached_files: usize,
    /// Files written since their last fsync the backing store keeps open; more are fsynced and
    /// closed, oldest first.
    pub dirty_files: usize,
    /// Directories whose entries changed the backing store keeps open; more are fsynced and
    /// closed, oldest first.
    pub dirty_dirs: usize,
}

/// The descriptor limit is too low for the server's reserve plus a minimal share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TooFewDescriptors {
    /// The soft `RLIMIT_NOFILE`.
    pub limit: u64,
    /// The worker threads configured.
    pub workers: usize,
    /// The smallest limit that would do for that many workers.
    pub needed: u64,
}

impl fmt::Display for TooFewDescriptors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the descriptor limit (RLIMIT_NOFILE) is {}, below the {} the server needs with {} \
             workers ({FIXED} fixed + {PER_WORKER} per worker + {ACCEPT_SLACK} for accepts, and \
             {MIN_SHARED} for connections and files; never less than {MIN_LIMIT}): raise the \
             hard limit (ulimit -Hn, LimitNOFILE=) or run fewer workers",
            self.limit, self.needed, self.workers
        )
    }
}

impl std::error::Error for TooFewDescriptors {}

impl FdBudget {
    /// The budget for a soft limit of `limit` descriptors (capped at [`MAX_NOFILE`]) and
    /// `workers` worker threads. Fails below [`MIN_LIMIT`] or when the reserve leaves fewer than
    /// [`MIN_SHARED`] descriptors for connections and files.
    pub(crate) fn from_limit(limit: u64, workers: usize) -> Result<FdBudget, TooFewDescriptors> {
        let limit = limit.min(MAX_NOFILE);
        let reserve = FIXED + PER_WORKER * workers + ACCEPT_SLACK;
        let needed = ((reserve + MIN_SHARED) as u64).max(MIN_LIMIT);
        if limit < needed {
            return Err(TooFewDescriptors {
                limit,
                workers,
                needed,
            });
        }
        // At most 1 << 20: fits a usize.
        let rest = limit as usize - reserve;
        let connections = rest / 2;
        let files = rest - connections;
        let cached_files = files / 2;
        let dirty_dirs = files / 8;
        let dirty_files = files - cached_files - dirty_dirs;
        Ok(FdBudget {
            limit,
            reserve,
            connections,
            cached_files,
            dirty_files,
            dirty_dirs,
        })
    }

    /// The budget for the current soft limit (not raised) and `workers` workers.
    pub(crate) fn current(workers: usize) -> Result<FdBudget, TooFewDescriptors> {
        FdBudget::from_limit(current_nofile(), workers)
    }

    /// The backing store's share.
    pub(crate) fn root_capacity(&self) -> Capacity {
        Capacity {
            cached_files: self.cached_files,
            dirty_files: self.dirty_files,
            dirty_dirs: self.dirty_dirs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole budget: reserve plus shares, exactly the limit.
    fn total(b: &FdBudget) -> u64 {
        (b.reserve + b.connections + b.cached_files + b.dirty_files + b.dirty_dirs) as u64
    }

    #[test]
    fn the_budget_spends_exactly_the_limit() {
        for workers in [1, 4, 16, 64] {
            for limit in [256u64, 1024, 20_000, 1 << 20] {
                let Ok(b) = FdBudget::from_limit(limit, workers) else {
                    // Only 64 workers at 256 descriptors: 288 reserved.
                    assert_eq!((workers, limit), (64, 256));
                    continue;
                };
                assert_eq!(total(&b), limit, "{b:?}");
                assert_eq!(b.reserve, 32 + 4 * workers);
                assert!(b.connections >= b.cached_files + b.dirty_files + b.dirty_dirs - 1);
                assert!(b.cached_files >= 1 && b.dirty_files >= 1 && b.dirty_dirs >= 1);
            }
        }
    }

    #[test]
    fn numbers_at_1024_and_20000() {
        for (limit, want) in [
            (1024, (48, 488, 244, 183, 61)),
            (20_000, (48, 9976, 4988, 3741, 1247)),
        ] {
            let b = FdBudget::from_limit(limit, 4).unwrap();
            assert_eq!(
                (
                    b.reserve,
                    b.connections,
                    b.cached_files,
                    b.dirty_files,
                    b.dirty_dirs
                ),
                want,
                "limit {limit}"
            );
        }
    }

    #[test]
    fn a_limit_above_the_cap_counts_as_the_cap() {
        let b = FdBudget::from_limit(u64::MAX, 4).unwrap();
        assert_eq!(b.limit, MAX_NOFILE);
        assert_eq!(total(&b), MAX_NOFILE);
    }

    #[test]
    fn too_few_descriptors_is_a_clear_error() {
        let e = FdBudget::from_limit(100, 4).unwrap_err();
        assert_eq!(e.needed, MIN_LIMIT);
        assert!(e.to_string().contains("is 100, below the 128"), "{e}");
        assert!(FdBudget::from_limit(128, 4).is_ok());
        // Many workers need more than the minimum.
        let e = FdBudget::from_limit(1024, 1024).unwrap_err();
        assert_eq!(e.needed, (32 + 4 * 1024 + 64) as u64);
        assert!(e.to_string().contains("1024 workers"), "{e}");
    }

    #[test]
    fn raising_reaches_the_hard_limit_or_the_cap() {
        let hard = getrlimit(Resource::Nofile).maximum.unwrap_or(u64::MAX);
        let got = raise_nofile().unwrap();
        assert_eq!(got, hard.min(MAX_NOFILE));
        assert_eq!(current_nofile(), got);
    }
}
