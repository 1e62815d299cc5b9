//! The backing store: files under one root directory, with every path confined to it.
//!
//! Every path a client sends is first checked by [`check_path`] (relative, no `..`, no NUL, not
//! too long), then resolved by the kernel with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`
//! from a descriptor of the root: a symlink whose target leaves the root fails with `EXDEV`,
//! whatever races happen in the directory tree meanwhile. Operations on a name (mkdir, unlink,
//! rmdir, rename) open the parent directory that way and act on the last component, which
//! [`check_path`] has made a plain name.
//!
//! # Descriptors the store keeps
//! Three bounded sets, their sizes given by [`Capacity`] (the server derives it from its
//! descriptor limit: `RLIMIT_NOFILE`, split by the server's descriptor budget); a file both cached and dirty holds one descriptor:
//!
//! - **Open files by path** (read-write when allowed, read-only otherwise), so a stream of reads
//!   and writes costs one `pread`/`pwrite` each, not an open and a close. When full, the CLOCK
//!   algorithm evicts a file not used since the hand last passed (an approximation of least
//!   recently used). Namespace changes through the server (unlink, rename, rmdir — even failed
//!   ones, since in a shared root another server may have made them) empty the cache, since a
//!   renamed directory or symlink changes what many paths name; a file opened while one
//!   happened is not cached (it may be the file just renamed or unlinked), and `open` always
//!   opens afresh. Files renamed or unlinked *behind the server's back* (by another process)
//!   are not noticed while cached: the root is meant to be changed through the servers only.
//! - **Dirty files**: every file written since its last fsync, by identity (`st_dev`,
//!   `st_ino`, so a rename does not confuse it) with the descriptor written through. When full,
//!   the oldest is fsynced and closed by the worker that added the newest — under pressure,
//!   durability work happens early, never is skipped. A failure there is counted, logged, and
//!   reported by [`Root::fsync_dirty`] at shutdown.
//! - **Dirty directories**: every directory whose entries changed (create, mknod, symlink, link,
//!   mkdir, unlink, rmdir, rename), by identity, with an `O_RDONLY` descriptor taken beneath the
//!   root when the change was made, so the shutdown fsyncs that very directory wherever it has
//!   moved since (never a path re-resolved at shutdown, which may meanwhile be a symlink out of
//!   the root). Bounded and fsynced under pressure like the dirty files. Changing a
//!   directory's entries therefore needs read permission on it (for that descriptor), as its
//!   fsync at shutdown always did.
//!
//! Unlinking a file, or renaming another over it, drops the store's descriptors of it (cached
//! and dirty) once the kernel reports it has no link left (`st_nlink == 0`), so its space is
//! freed at once and never fsynced; a file that still has another name stays dirty, to be
//! fsynced under pressure or at shutdown like any other. Removed directories likewise. A write
//! racing the unlink may mark the gone file dirty again; it is then closed by the pressure or
//! the shutdown fsync, like any dirty file.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use iosets_proto::local::PeerRegion;
use iosets_proto::{Attr, Creds, DirEntry, FileKind, OpenFlags, SetAttr, SetTime, Statfs};
use parking_lot::Mutex;
use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::access::Want;

/// Longest path accepted, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATH: usize = 4096;

/// A failed file operation: the errno the client receives and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsError {
    /// The POSIX errno.
    pub errno: i32,
    /// What went wrong, for people.
    pub message: String,
}

impl FsError {
    fn new(errno: Errno, message: impl Into<String>) -> FsError {
        FsError {
            errno: errno.raw_os_error(),
            message: message.into(),
        }
    }

    fn io(e: Errno, what: &str, path: &str) -> FsError {
        if backing_failed(e) {
            let err = std::io::Error::from_raw_os_error(e.raw_os_error());
            if BACKING_LOG.due() {
                tracing::warn!(
                    op = what,
                    path,
                    error = %err,
                    suppressed = BACKING_LOG.suppressed(),
                    "the file system under the root failed (a node of the PFS down?): \
                     answering EIO"
                );
            }
            return FsError::new(Errno::IO, format!("{what} {path:?}: {err}"));
        }
        let message = if e == Errno::XDEV {
            format!("{what} {path:?}: path escapes the server's root")
        } else {
            format!(
                "{what} {path:?}: {}",
                std::io::Error::from_raw_os_error(e.raw_os_error())
            )
        };
        FsError::new(e, message)
    }
}

/// Whether `e`, from the file system under the root, says that it failed rather than that the
/// request did: a network file system's node down or unreachable (GlusterFS answers ENOTCONN
/// for a brick that is gone), or an I/O error. The client gets EIO for all of them (an
/// application knows what to do with EIO, not with "transport endpoint is not connected" on a
/// local path), and the server logs it.
fn backing_failed(e: Errno) -> bool {
    matches!(
        e,
        Errno::IO
            | Errno::NOTCONN
            | Errno::CONNREFUSED
            | Errno::CONNRESET
            | Errno::CONNABORTED
            | Errno::HOSTDOWN
            | Errno::HOSTUNREACH
            | Errno::NETDOWN
            | Errno::NETUNREACH
            | Errno::TIMEDOUT
            | Errno::REMOTEIO
    )
}

/// At most one log line a second about a failing file system under the root, with how many
/// were left out since the last.
struct RateLimit {
    last_s: AtomicU64,
    left_out: AtomicU64,
}

static BACKING_LOG: RateLimit = RateLimit {
    last_s: AtomicU64::new(0),
    left_out: AtomicU64::new(0),
};

impl RateLimit {
    /// Whether to log now; counts one left out if not.
    fn due(&self) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let last = self.last_s.load(Ordering::Relaxed);
        if now > last
            && self
                .last_s
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return true;
        }
        self.left_out.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// The lines left out since the last logged, reset.
    fn suppressed(&self) -> u64 {
        self.left_out.swap(0, Ordering::Relaxed)
    }
}

fn std_errno(e: &std::io::Error) -> Errno {
    Errno::from_raw_os_error(e.raw_os_error().unwrap_or(libc_eio()))
}

fn libc_eio() -> i32 {
    Errno::IO.raw_os_error()
}

/// Checks a client path: relative, `/`-separated, no `..` component, no NUL byte, at most
/// [`MAX_PATH`] bytes. `""` and `"."` name the root. Returns the path without empty and `.`
/// components (`"."` for the root).
pub fn check_path(path: &str) -> Result<String, FsError> {
    if path.len() > MAX_PATH {
        return Err(FsError::new(
            Errno::NAMETOOLONG,
            format!("path of {} bytes is longer than {MAX_PATH}", path.len()),
        ));
    }
    if path.contains('\0') {
        return Err(FsError::new(Errno::INVAL, "path contains a NUL byte"));
    }
    if path.starts_with('/') {
        return Err(FsError::new(
            Errno::ACCESS,
            format!(
                "{path:?}: absolute paths are refused; paths are relative to the server's root"
            ),
        ));
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(FsError::new(
                    Errno::ACCESS,
                    format!("{path:?}: '..' is refused; paths stay beneath the server's root"),
                ))
            }
            p => parts.push(p),
        }
    }
    Ok(if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    })
}

/// Splits a checked path into its parent (`"."` for the root) and its last component. The root
/// itself has no name: `EINVAL`.
fn split(path: &str) -> Result<(&str, &str), FsError> {
    if path == "." {
        return Err(FsError::new(
            Errno::INVAL,
            "the root itself cannot be changed",
        ));
    }
    Ok(match path.rsplit_once('/') {
        Some((parent, name)) => (parent, name),
        None => (".", path),
    })
}

fn kind_of_type(t: rustix::fs::FileType) -> FileKind {
    use rustix::fs::FileType as T;
    match t {
        T::RegularFile => FileKind::File,
        T::Directory => FileKind::Dir,
        T::Symlink => FileKind::Symlink,
        T::Fifo => FileKind::Fifo,
        T::Socket => FileKind::Socket,
        T::CharacterDevice => FileKind::CharDevice,
        T::BlockDevice => FileKind::BlockDevice,
        T::Unknown => FileKind::Other,
    }
}

/// `Ok` if `mode` is a regular file's; else `EISDIR` for a directory and `EINVAL` for anything
/// else, naming `path`.
fn regular_file(mode: u32, path: &str) -> Result<(), FsError> {
    match kind_of(mode) {
        FileKind::File => Ok(()),
        kind => Err(FsError::new(
            if kind == FileKind::Dir {
                Errno::ISDIR
            } else {
                Errno::INVAL
            },
            format!("{path:?} is not a regular file"),
        )),
    }
}

fn kind_of(mode: u32) -> FileKind {
    kind_of_type(rustix::fs::FileType::from_raw_mode(mode))
}

fn ns(secs: i64, nsec: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsec)
}

fn attr_of(st: &rustix::fs::Stat) -> Attr {
    Attr {
        kind: kind_of(st.st_mode),
        size: st.st_size as u64,
        mode: st.st_mode & 0o7777,
        mtime_ns: ns(st.st_mtime, st.st_mtime_nsec as i64),
        atime_ns: ns(st.st_atime, st.st_atime_nsec as i64),
        ctime_ns: ns(st.st_ctime, st.st_ctime_nsec as i64),
        ino: st.st_ino,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev,
        blocks: st.st_blocks as u64,
    }
}

/// A `/proc/self/fd/N` path naming the object an `O_PATH` descriptor refers to, for the calls
/// that have no descriptor form for `O_PATH` (chmod, utimens): the kernel resolves it to that
/// very inode, never to whatever now has its name.
/// The attributes of the object `fd` refers to, if it can be stat'ed.
fn stat_of(fd: &OwnedFd) -> Option<Attr> {
    rustix::fs::fstat(fd).ok().map(|st| attr_of(&st))
}

fn proc_fd_path(fd: &OwnedFd) -> String {
    use std::os::fd::AsRawFd;
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

fn timestamp(t: Option<SetTime>) -> rustix::fs::Timespec {
    // UTIME_NOW and UTIME_OMIT, as Linux defines them.
    const UTIME_NOW: i64 = (1 << 30) - 1;
    const UTIME_OMIT: i64 = (1 << 30) - 2;
    match t {
        None => rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_OMIT as _,
        },
        Some(SetTime::Now) => rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_NOW as _,
        },
        Some(SetTime::At(ns)) => rustix::fs::Timespec {
            tv_sec: ns.div_euclid(1_000_000_000),
            tv_nsec: ns.rem_euclid(1_000_000_000) as _,
        },
    }
}

/// Opens the object `fd` (an `O_PATH` descriptor) again with `flags`: the very inode, whatever
/// its path names now.
fn reopen(fd: &OwnedFd, flags: OFlags) -> Result<OwnedFd, Errno> {
    rustix::fs::open(
        proc_fd_path(fd).as_str(),
        flags | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Whether this process may give files away (`chown` to another user): root, in practice.
fn can_chown() -> bool {
    rustix::process::geteuid().is_root()
}

/// A file's or directory's identity: its device and inode numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Key {
    dev: u64,
    ino: u64,
}

impl Key {
    fn of(st: &rustix::fs::Stat) -> Key {
        Key {
            dev: st.st_dev,
            ino: st.st_ino,
        }
    }
}

/// How many descriptors each of the backing store's bounded sets may keep (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Open files cached by path.
    pub cached_files: usize,
    /// Files written since their last fsync; more are fsynced and closed, oldest first.
    pub dirty_files: usize,
    /// Directories whose entries changed; more are fsynced and closed, oldest first.
    pub dirty_dirs: usize,
}

impl Capacity {
    fn check(&self) -> std::io::Result<()> {
        for (what, n) in [
            ("cached_files", self.cached_files),
            ("dirty_files", self.dirty_files),
            ("dirty_dirs", self.dirty_dirs),
        ] {
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("backing store capacity {what} = 0: must be at least 1"),
                ));
            }
        }
        Ok(())
    }
}

/// What the backing store holds and has done under pressure, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RootStats {
    /// Open files in the cache.
    pub cached_files: usize,
    /// Files written since their last fsync.
    pub dirty_files: usize,
    /// Directories whose entries changed since they were last fsynced.
    pub dirty_dirs: usize,
    /// Dirty files fsynced and closed early because the dirty set was full.
    pub pressure_fsyncs_files: u64,
    /// Dirty directories fsynced and closed early because their set was full.
    pub pressure_fsyncs_dirs: u64,
    /// Of those fsyncs, how many failed (each is reported again at shutdown, the first one as
    /// the shutdown's error).
    pub pressure_fsync_errors: u64,
}

/// An open file in the cache, its identity, and whether it could be opened for writing.
#[derive(Debug, Clone)]
struct Open {
    file: Arc<File>,
    key: Key,
    writable: bool,
}

/// A cached file and its CLOCK reference bit.
#[derive(Debug)]
struct Slot {
    path: String,
    open: Open,
    referenced: bool,
}

/// Open files by path, at most `capacity`, evicted by CLOCK: a hit sets the file's reference
/// bit; to make room, the hand sweeps the slots, clearing set bits, and evicts the first file
/// whose bit is clear. `generation` grows with every namespace change; a file opened while it
/// changed is not cached (it may be the file that was just renamed or unlinked).
///
/// Evicted and removed files are handed back, to be dropped (closed, if no request holds them)
/// after the lock is released.
#[derive(Debug)]
struct Cache {
    generation: u64,
    capacity: usize,
    index: HashMap<String, usize>,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    hand: usize,
}

impl Cache {
    fn new(capacity: usize) -> Cache {
        Cache {
            generation: 0,
            capacity,
            index: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            hand: 0,
        }
    }

    fn len(&self) -> usize {
        self.index.len()
    }

    fn get(&mut self, path: &str) -> Option<Open> {
        let i = *self.index.get(path)?;
        let slot = self.slots[i].as_mut()?;
        slot.referenced = true;
        Some(slot.open.clone())
    }

    /// Caches `open` under `path`; returns what it replaced or evicted.
    #[must_use]
    fn insert(&mut self, path: &str, open: Open) -> Option<Open> {
        if let Some(&i) = self.index.get(path) {
            if let Some(slot) = self.slots[i].as_mut() {
                slot.referenced = true;
                return Some(std::mem::replace(&mut slot.open, open));
            }
        }
        let (i, evicted) = if let Some(i) = self.free.pop() {
            (i, None)
        } else if self.slots.len() < self.capacity {
            self.slots.push(None);
            (self.slots.len() - 1, None)
        } else {
            let (i, old) = self.evict();
            (i, Some(old))
        };
        self.slots[i] = Some(Slot {
            path: path.to_string(),
            open,
            referenced: false,
        });
        self.index.insert(path.to_string(), i);
        evicted
    }

    /// Frees the slot of a file not referenced since the hand last passed. Only called when
    /// every slot is full (no free slot, `capacity` slots), so two sweeps at most.
    fn evict(&mut self) -> (usize, Open) {
        loop {
            let i = self.hand;
            self.hand = (self.hand + 1) % self.slots.len();
            match self.slots[i].as_mut() {
                Some(slot) if slot.referenced => slot.referenced = false,
                Some(_) => {
                    let Some(slot) = self.slots[i].take() else {
                        unreachable!("the slot was just seen full")
                    };
                    self.index.remove(&slot.path);
                    return (i, slot.open);
                }
                None => {}
            }
        }
    }

    #[must_use]
    fn remove(&mut self, path: &str) -> Option<Open> {
        let i = self.index.remove(path)?;
        self.free.push(i);
        self.slots[i].take().map(|s| s.open)
    }

    /// Empties the cache; returns what it held.
    #[must_use]
    fn clear(&mut self) -> Vec<Option<Slot>> {
        self.index.clear();
        self.free.clear();
        self.hand = 0;
        std::mem::take(&mut self.slots)
    }
}

/// Objects by identity in the order they entered, at most `capacity`: the dirty files and the
/// dirty directories.
#[derive(Debug)]
struct Fifo<V> {
    capacity: usize,
    next: u64,
    entries: HashMap<Key, (u64, V)>,
    order: BTreeMap<u64, Key>,
}

impl<V> Fifo<V> {
    fn new(capacity: usize) -> Fifo<V> {
        Fifo {
            capacity,
            next: 0,
            entries: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn contains(&self, key: &Key) -> bool {
        self.entries.contains_key(key)
    }

    fn get(&self, key: &Key) -> Option<&V> {
        self.entries.get(key).map(|(_, v)| v)
    }

    /// Adds `value` as the newest entry (the caller checked `key` is absent); returns the
    /// oldest entry if that made one too many.
    #[must_use]
    fn push(&mut self, key: Key, value: V) -> Option<(Key, V)> {
        let seq = self.next;
        self.next += 1;
        if let Some((old, _)) = self.entries.insert(key, (seq, value)) {
            self.order.remove(&old);
        }
        self.order.insert(seq, key);
        if self.entries.len() > self.capacity {
            let (_, oldest) = self.order.pop_first()?;
            return self.entries.remove(&oldest).map(|(_, v)| (oldest, v));
        }
        None
    }

    #[must_use]
    fn remove(&mut self, key: &Key) -> Option<V> {
        let (seq, v) = self.entries.remove(key)?;
        self.order.remove(&seq);
        Some(v)
    }

    /// Every entry, oldest first, leaving the set empty.
    fn drain(&mut self) -> Vec<(Key, V)> {
        let order = std::mem::take(&mut self.order);
        let mut entries = std::mem::take(&mut self.entries);
        order
            .into_values()
            .filter_map(|k| entries.remove(&k).map(|(_, v)| (k, v)))
            .collect()
    }
}

/// A dirty file: the descriptor written through, and the path it was last written under (for
/// messages).
#[derive(Debug)]
struct DirtyFile {
    file: Arc<File>,
    path: String,
}

/// A directory whose entries changed: a descriptor of it (`O_RDONLY`, which `fsync` needs) and
/// the path it had then (for messages).
#[derive(Debug)]
struct DirtyDir {
    fd: OwnedFd,
    path: String,
}

/// The backing store.
#[derive(Debug)]
pub struct Root {
    dir: OwnedFd,
    capacity: Capacity,
    cache: Mutex<Cache>,
    /// Files written since their last fsync.
    dirty: Mutex<Fifo<DirtyFile>>,
    /// Directories whose entries changed since they were last fsynced.
    dirty_dirs: Mutex<Fifo<DirtyDir>>,
    pressure_fsyncs_files: AtomicU64,
    pressure_fsyncs_dirs: AtomicU64,
    pressure_fsync_errors: AtomicU64,
    /// The first failed fsync under pressure, reported by [`Root::fsync_dirty`].
    pressure_error: Mutex<Option<FsError>>,
    /// Every object fsynced through the dirty sets (under pressure or at shutdown), in order.
    #[cfg(test)]
    synced: Mutex<Vec<Key>>,
    /// How many of the next dirty-set fsyncs fail with `EIO`.
    #[cfg(test)]
    fail_fsyncs: std::sync::atomic::AtomicU32,
}

const BENEATH: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// The parent directory of a checked path (`"."` for the root's entries).
fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map_or(".", |(p, _)| p)
}

/// The identity of the entry `name` in `dir` (a final symlink not followed), if there is one.
fn key_at(dir: &OwnedFd, name: &str) -> Option<Key> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| Key::of(&st))
}

/// Whether the object `fd` refers to has no name left.
fn unlinked(fd: impl AsFd) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| st.st_nlink == 0)
}

impl Root {
    /// Opens `dir` as the root, with capacities for the current descriptor limit and the
    /// default 4 workers (the server's descriptor budget). Fails with a clear message on kernels without
    /// `openat2` (Linux before 5.6), which the confinement of every path relies on, and when the
    /// descriptor limit is too low for a server.
    pub fn open(dir: &Path) -> std::io::Result<Root> {
        let budget = crate::limits::FdBudget::current(4)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        Root::open_bounded(dir, budget.root_capacity())
    }

    /// Opens `dir` as the root, keeping at most `capacity` descriptors in each set. Fails on
    /// kernels without `openat2` and on a capacity of 0.
    pub fn open_bounded(dir: &Path, capacity: Capacity) -> std::io::Result<Root> {
        capacity.check()?;
        let fd = rustix::fs::open(
            dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        match rustix::fs::openat2(
            &fd,
            ".",
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            BENEATH,
        ) {
            Err(Errno::NOSYS) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "this kernel has no openat2 (Linux 5.6 or later is needed to keep paths \
                     beneath the root)",
                ))
            }
            r => drop(r?),
        }
        Ok(Root {
            dir: fd,
            capacity,
            cache: Mutex::new(Cache::new(capacity.cached_files)),
            dirty: Mutex::new(Fifo::new(capacity.dirty_files)),
            dirty_dirs: Mutex::new(Fifo::new(capacity.dirty_dirs)),
            pressure_fsyncs_files: AtomicU64::new(0),
            pressure_fsyncs_dirs: AtomicU64::new(0),
            pressure_fsync_errors: AtomicU64::new(0),
            pressure_error: Mutex::new(None),
            #[cfg(test)]
            synced: Mutex::new(Vec::new()),
            #[cfg(test)]
            fail_fsyncs: std::sync::atomic::AtomicU32::new(0),
        })
    }

    /// The capacities the store was opened with.
    pub fn capacity(&self) -> Capacity {
        self.capacity
    }

    /// What the store holds now, and its pressure fsyncs so far.
    pub fn stats(&self) -> RootStats {
        RootStats {
            cached_files: self.cache.lock().len(),
            dirty_files: self.dirty.lock().len(),
            dirty_dirs: self.dirty_dirs.lock().len(),
            pressure_fsyncs_files: self.pressure_fsyncs_files.load(Ordering::Relaxed),
            pressure_fsyncs_dirs: self.pressure_fsyncs_dirs.load(Ordering::Relaxed),
            pressure_fsync_errors: self.pressure_fsync_errors.load(Ordering::Relaxed),
        }
    }

    fn open_beneath(&self, path: &str, flags: OFlags, mode: u32) -> Result<OwnedFd, Errno> {
        Self::open_beneath_at(&self.dir, path, flags, mode)
    }

    /// Opens `path` beneath the directory `dir` (itself beneath the root).
    fn open_beneath_at(
        dir: &OwnedFd,
        path: &str,
        flags: OFlags,
        mode: u32,
    ) -> Result<OwnedFd, Errno> {
        // openat2 refuses a mode without O_CREAT.
        let mode = if flags.contains(OFlags::CREATE) {
            mode
        } else {
            0
        };
        rustix::fs::openat2(
            dir,
            path,
            flags | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
            BENEATH,
        )
    }

    /// The directory `parent`, to change an entry of: `O_RDONLY`, so that the same descriptor
    /// can be kept and fsynced ([`Root::dir_changed`]).
    ///
    /// A user the worker acts as ([`crate::access`]) needs search permission on the path, not read
    /// permission on the directory (POSIX asks none to create or remove an entry): when the
    /// user may not read it, the directory the user resolved is reopened by the server.
    fn parent(&self, parent: &str, what: &str, path: &str) -> Result<OwnedFd, FsError> {
        match self.open_beneath(parent, OFlags::RDONLY | OFlags::DIRECTORY, 0) {
            Err(Errno::ACCESS) if crate::access::current().is_some() => {
                let fd = self
                    .open_beneath(parent, OFlags::PATH | OFlags::DIRECTORY, 0)
                    .map_err(|e| FsError::io(e, what, path))?;
                crate::access::as_server(|| {
                    reopen(&fd, OFlags::RDONLY | OFlags::DIRECTORY)
                        .map_err(|e| FsError::io(e, what, path))
                })
            }
            r => r.map_err(|e| FsError::io(e, what, path)),
        }
    }

    /// The directory `parent`, to look at an entry of (`O_PATH`: no read permission needed).
    fn parent_path(&self, parent: &str, what: &str, path: &str) -> Result<OwnedFd, FsError> {
        self.open_beneath(parent, OFlags::PATH | OFlags::DIRECTORY, 0)
            .map_err(|e| FsError::io(e, what, path))
    }

    /// The open file at `path`, from the cache or opened (never created) now. When the worker
    /// acts as a user ([`crate::access`]), that user resolves the path and must be allowed
    /// `want` on the object found, and the descriptor answered is one of that very object.
    fn cached(&self, path: &str, want: Want) -> Result<Open, FsError> {
        let Some(_) = crate::access::current() else {
            if let Some(o) = self.cache.lock().get(path) {
                return Ok(o);
            }
            return self.open_file(None, path, OFlags::empty(), 0o644);
        };
        let fd = self
            .open_beneath(path, OFlags::PATH, 0)
            .map_err(|e| FsError::io(e, "open", path))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io(e, "stat", path))?;
        crate::access::may(&fd, &st, want, path)?;
        let key = Key::of(&st);
        if let Some(o) = self.cache.lock().get(path) {
            if o.key == key {
                return Ok(o);
            }
        }
        // Opened by the server (the owner of a mode-0 file may still use it), from the object
        // the user resolved, never from the path again; not cached, as the path may name
        // another object by now.
        crate::access::as_server(|| {
            let (file, writable) = match reopen(&fd, OFlags::RDWR | OFlags::NONBLOCK) {
                Err(Errno::ACCESS) | Err(Errno::ROFS) => {
                    (reopen(&fd, OFlags::RDONLY | OFlags::NONBLOCK), false)
                }
                r => (r, true),
            };
            let file = file.map_err(|e| FsError::io(e, "open", path))?;
            regular_file(st.st_mode, path)?;
            Ok(Open {
                file: Arc::new(File::from(file)),
                key,
                writable,
            })
        })
    }

    /// The open file at `path` (for reading).
    pub fn file(&self, path: &str) -> Result<Arc<File>, FsError> {
        Ok(self.cached(path, Want::Read)?.file)
    }

    /// Opens the regular file at `path` and caches it (unless the namespace changed meanwhile).
    /// With `at` = (directory, name), the file is opened as `name` in that directory, which
    /// must be `path`'s parent; otherwise `path` is resolved from the root.
    fn open_file(
        &self,
        at: Option<(&OwnedFd, &str)>,
        path: &str,
        extra: OFlags,
        mode: u32,
    ) -> Result<Open, FsError> {
        let generation = self.cache.lock().generation;
        // NONBLOCK: opening a FIFO must not hang a worker (it is refused below); it changes
        // nothing for regular files.
        let extra = extra | OFlags::NONBLOCK;
        let (dir, rel) = at.unwrap_or((&self.dir, path));
        let (fd, writable) = match Self::open_beneath_at(dir, rel, OFlags::RDWR | extra, mode) {
            Err(Errno::ACCESS) | Err(Errno::ROFS) => {
                Self::open_beneath_at(dir, rel, OFlags::RDONLY | extra, mode).map(|fd| (fd, false))
            }
            r => r.map(|fd| (fd, true)),
        }
        .map_err(|e| FsError::io(e, "open", path))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io(e, "stat", path))?;
        regular_file(st.st_mode, path)?;
        let open = Open {
            file: Arc::new(File::from(fd)),
            key: Key::of(&st),
            writable,
        };
        let mut cache = self.cache.lock();
        let evicted = if cache.generation == generation {
            cache.insert(path, open.clone())
        } else {
            None
        };
        drop(cache);
        // Closed (if no request holds it) after the lock is released.
        drop(evicted);
        Ok(open)
    }

    /// `pread`: up to `len` bytes at `offset` (fewer at the end of the file), into a buffer that
    /// is not zeroed first (the kernel fills it).
    pub fn read(&self, path: &str, offset: u64, len: u32) -> Result<Vec<u8>, FsError> {
        let file = self.file(path)?;
        let len = len as usize;
        let mut buf = Vec::with_capacity(len);
        while buf.len() < len {
            let at = offset + buf.len() as u64;
            match rustix::io::pread(&*file, rustix::buffer::spare_capacity(&mut buf), at) {
                Ok(0) => break,
                Ok(_) => {}
                Err(Errno::INTR) => {}
                Err(e) => return Err(FsError::io(e, "read", path)),
            }
        }
        // The spare capacity may exceed `len` (the allocator's choice): never answer more.
        buf.truncate(len);
        Ok(buf)
    }

    /// `pread` of up to `len` bytes at `offset` into a same-host client's shared region at
    /// `at` (checked against the region); returns how many (fewer at the end of the file).
    pub fn read_into(
        &self,
        path: &str,
        offset: u64,
        len: u32,
        region: &PeerRegion,
        at: u64,
    ) -> Result<u32, FsError> {
        let file = self.file(path)?;
        region
            .read_from(file.as_fd(), at, len, offset)
            .map_err(|e| FsError {
                errno: e.errno(),
                message: format!("read {path:?}: {e}"),
            })
    }

    /// `pwrite`: all of `data` at `offset`.
    pub fn write(&self, path: &str, offset: u64, data: &[u8]) -> Result<u32, FsError> {
        let open = self.writable(path)?;
        open.file
            .write_all_at(data, offset)
            .map_err(|e| FsError::io(std_errno(&e), "write", path))?;
        self.written(path, open);
        Ok(data.len() as u32)
    }

    /// `pwrite` of the `len` bytes at `at` in a same-host client's shared region (checked
    /// against the region), all of them, at `offset`.
    pub fn write_from(
        &self,
        path: &str,
        offset: u64,
        region: &PeerRegion,
        at: u64,
        len: u32,
    ) -> Result<u32, FsError> {
        let open = self.writable(path)?;
        let n = region
            .write_to(open.file.as_fd(), at, len, offset)
            .map_err(|e| FsError {
                errno: e.errno(),
                message: format!("write {path:?}: {e}"),
            })?;
        self.written(path, open);
        Ok(n)
    }

    /// The open file at `path`, if the server may write it.
    fn writable(&self, path: &str) -> Result<Open, FsError> {
        let open = self.cached(path, Want::Write)?;
        if !open.writable {
            return Err(FsError::new(
                Errno::ACCESS,
                format!("write {path:?}: the file is read-only for the server"),
            ));
        }
        Ok(open)
    }

    /// Remembers that the file `open` was written under `path`: it is fsynced under pressure or
    /// at shutdown.
    fn written(&self, path: &str, open: Open) {
        self.mark_dirty(open.key, || DirtyFile {
            file: open.file,
            path: path.to_string(),
        });
    }

    /// Adds the file `key` to the dirty set unless it is there; if the set is then over its
    /// capacity, fsyncs and closes the oldest dirty file (outside the lock).
    fn mark_dirty(&self, key: Key, make: impl FnOnce() -> DirtyFile) {
        let mut dirty = self.dirty.lock();
        if dirty.contains(&key) {
            return;
        }
        let pushed_out = dirty.push(key, make());
        drop(dirty);
        if let Some((key, old)) = pushed_out {
            self.sync_early(
                key,
                old.file.as_fd(),
                &old.path,
                &self.pressure_fsyncs_files,
            );
            // `old` is dropped here: its descriptor closes unless cached or in use.
        }
    }

    /// Fsyncs an object pushed out of a dirty set (counted in `counter`); a failure is
    /// counted, logged, and kept for [`Root::fsync_dirty`].
    fn sync_early(&self, key: Key, fd: BorrowedFd<'_>, path: &str, counter: &AtomicU64) {
        match self.durable(key, fd) {
            Ok(true) => {
                counter.fetch_add(1, Ordering::Relaxed);
            }
            Ok(false) => {}
            Err(e) => {
                counter.fetch_add(1, Ordering::Relaxed);
                self.pressure_fsync_errors.fetch_add(1, Ordering::Relaxed);
                let err = FsError::io(e, "fsync", path);
                tracing::warn!(
                    error = %err.message,
                    "fsync under descriptor pressure failed (reported again at shutdown)"
                );
                self.pressure_error.lock().get_or_insert(err);
            }
        }
    }

    /// Fsyncs the object `key` through `fd` for a dirty set: `Ok(false)` without fsync if the
    /// object has no name left (nothing to make durable).
    fn durable(&self, key: Key, fd: BorrowedFd<'_>) -> Result<bool, Errno> {
        if unlinked(fd) {
            return Ok(false);
        }
        #[cfg(test)]
        if self
            .fail_fsyncs
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(Errno::IO);
        }
        rustix::fs::fsync(fd)?;
        #[cfg(test)]
        self.synced.lock().push(key);
        #[cfg(not(test))]
        let _ = key;
        Ok(true)
    }

    /// `fsync` of one file. A write that lands while it runs stays marked dirty.
    pub fn fsync(&self, path: &str) -> Result<(), FsError> {
        let open = self.cached(path, Want::Either)?;
        let was = self.dirty.lock().remove(&open.key);
        if let Err(e) = rustix::fs::fsync(&*open.file) {
            if let Some(d) = was {
                self.mark_dirty(open.key, || d);
            }
            return Err(FsError::io(e, "fsync", path));
        }
        Ok(())
    }

    /// Fsyncs every file written since its last fsync (through the descriptor it was written
    /// with, wherever it lives now) and every directory whose entries changed (through the
    /// descriptor taken when they changed), at shutdown, and closes them. Returns how many
    /// files it fsynced (files with no name left are closed without), and the first failure —
    /// an fsync that failed under pressure earlier counts first.
    pub fn fsync_dirty(&self) -> (usize, Option<FsError>) {
        let mut first_err = self.pressure_error.lock().take();
        let mut synced = 0;
        let files = self.dirty.lock().drain();
        for (key, d) in &files {
            match self.durable(*key, d.file.as_fd()) {
                Ok(true) => synced += 1,
                Ok(false) => {}
                Err(e) => {
                    first_err.get_or_insert(FsError::io(e, "fsync", &d.path));
                }
            }
        }
        drop(files);
        let dirs = self.dirty_dirs.lock().drain();
        for (key, d) in &dirs {
            if let Err(e) = self.durable(*key, d.fd.as_fd()) {
                first_err.get_or_insert(FsError::io(e, "fsync directory", &d.path));
            }
        }
        (synced, first_err)
    }

    /// Remembers that entries of the directory `dir` (open `O_RDONLY`, found at `path`)
    /// changed: it is fsynced through that descriptor under pressure or at shutdown. Returns
    /// the directory's attributes after the change (`None` if it cannot be stat'ed), from the
    /// `fstat` that tells which directory it is.
    fn dir_changed(&self, dir: OwnedFd, path: &str) -> Option<Attr> {
        let (key, attr) = match rustix::fs::fstat(&dir) {
            Ok(st) => (Key::of(&st), attr_of(&st)),
            // Which directory it is cannot be told: make it durable now.
            Err(_) => {
                let key = Key { dev: 0, ino: 0 };
                self.sync_early(key, dir.as_fd(), path, &self.pressure_fsyncs_dirs);
                return None;
            }
        };
        let mut dirs = self.dirty_dirs.lock();
        if dirs.contains(&key) {
            return Some(attr);
        }
        let pushed_out = dirs.push(
            key,
            DirtyDir {
                fd: dir,
                path: path.to_string(),
            },
        );
        drop(dirs);
        if let Some((key, old)) = pushed_out {
            self.sync_early(key, old.fd.as_fd(), &old.path, &self.pressure_fsyncs_dirs);
        }
        Some(attr)
    }

    /// Opens the parent of `path` and remembers that its entries changed, for the changes made
    /// by path from the root (`open` with `O_CREAT`). Fails if the parent is gone meanwhile (a
    /// concurrent rename): the client is then not told the entry is safe.
    fn parent_changed(&self, path: &str) -> Result<(), FsError> {
        let parent = parent_of(path);
        let dir = self.parent(parent, "open", path)?;
        self.dir_changed(dir, parent);
        Ok(())
    }

    /// Drops the dirty descriptors of the object `key` if it has no name left (the caller just
    /// unlinked, removed or renamed over it): there is nothing to make durable, and its space is
    /// freed as soon as no request holds it. An object with another name stays dirty.
    fn removed(&self, key: Key) {
        let mut dirty = self.dirty.lock();
        let file = match dirty.get(&key) {
            Some(d) if unlinked(&*d.file) => dirty.remove(&key),
            _ => None,
        };
        drop(dirty);
        drop(file);
        let mut dirs = self.dirty_dirs.lock();
        let dir = match dirs.get(&key) {
            Some(d) if unlinked(&d.fd) => dirs.remove(&key),
            _ => None,
        };
        drop(dirs);
        drop(dir);
    }

    /// Attributes of `path` (following a symlink that stays beneath the root).
    pub fn lookup(&self, path: &str) -> Result<Attr, FsError> {
        if path == "." {
            return self.root_attr();
        }
        let fd = self
            .open_beneath(path, OFlags::PATH, 0)
            .map_err(|e| FsError::io(e, "lookup", path))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io(e, "stat", path))?;
        Ok(attr_of(&st))
    }

    /// Attributes of `path` itself, a final symlink not followed (`lstat`).
    pub fn lstat(&self, path: &str) -> Result<Attr, FsError> {
        if path == "." {
            return self.root_attr();
        }
        let fd = self.object(path, "lstat")?;
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io(e, "stat", path))?;
        Ok(attr_of(&st))
    }

    /// Attributes of the root. Its own mode is not checked for them, as `stat` of a mount point
    /// needs no permission on the directory itself.
    fn root_attr(&self) -> Result<Attr, FsError> {
        let st = rustix::fs::fstat(&self.dir).map_err(|e| FsError::io(e, "stat", "."))?;
        Ok(attr_of(&st))
    }

    /// An `O_PATH` descriptor of the object at `path`, a final symlink not followed.
    fn object(&self, path: &str, what: &str) -> Result<OwnedFd, FsError> {
        self.open_beneath(path, OFlags::PATH | OFlags::NOFOLLOW, 0)
            .map_err(|e| FsError::io(e, what, path))
    }

    /// Gives a new object the caller's ownership and its exact permission bits (the caller's
    /// kernel applied the umask). In a set-group-id directory the object keeps the directory's
    /// group, as on a local file system. Without credentials, or when this process cannot give
    /// files away (not root), the object keeps the server's ownership.
    fn own(&self, path: &str, creds: Option<Creds>, mode: Option<u32>) -> Result<(), FsError> {
        let fd = self.object(path, "chown")?;
        if let Some(c) = creds {
            if can_chown() {
                let parent = self
                    .open_beneath(parent_of(path), OFlags::PATH | OFlags::DIRECTORY, 0)
                    .map_err(|e| FsError::io(e, "stat", path))?;
                let pst = rustix::fs::fstat(&parent).map_err(|e| FsError::io(e, "stat", path))?;
                let gid = if pst.st_mode & 0o2000 != 0 {
                    None
                } else {
                    Some(rustix::fs::Gid::from_raw(c.gid))
                };
                rustix::fs::chownat(
                    &fd,
                    "",
                    Some(rustix::fs::Uid::from_raw(c.uid)),
                    gid,
                    AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW,
                )
                .map_err(|e| FsError::io(e, "chown", path))?;
            }
        }
        if let Some(mode) = mode {
            let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io(e, "stat", path))?;
            // A new directory in a set-group-id directory inherits the bit.
            let keep = if kind_of(st.st_mode) == FileKind::Dir {
                st.st_mode & 0o2000
            } else {
                0
            };
            rustix::fs::chmod(
                proc_fd_path(&fd).as_str(),
                Mode::from_raw_mode((mode & 0o7777) | keep),
            )
            .map_err(|e| FsError::io(e, "chmod", path))?;
        }
        Ok(())
    }

    /// The mode a new object is made with, and the exact mode it gets once made: a caller with
    /// credentials (the mount, whose kernel checked the caller and applied its umask) gets
    /// exactly `mode`, set after creation, past this process's umask; a caller without gets
    /// `mode & keep` (no set-id bits) masked by this process's umask.
    fn modes(creds: Option<Creds>, mode: u32, keep: u32) -> (u32, Option<u32>) {
        match creds {
            Some(_) => (0o600, Some(mode & 0o7777)),
            None => (mode & keep, None),
        }
    }

    /// Creates a regular file (or keeps an existing one unless `exclusive`), owned by `creds`
    /// when given. Without credentials, permission bits above `0o777` (setuid, setgid, sticky)
    /// are dropped. An exclusive create of any existing name, a symbolic link included (even
    /// one whose target does not exist), is `EEXIST`; a name that is a symbolic link otherwise
    /// is followed beneath the root (`create_through_link`). Answers the file's attributes
    /// and its directory's after the create (from the `fstat` that records the change; `None`
    /// if the directory cannot be stat'ed).
    pub fn create(
        &self,
        path: &str,
        mode: u32,
        exclusive: bool,
        creds: Option<Creds>,
    ) -> Result<(Attr, Option<Attr>), FsError> {
        let (parent, name) = split(path)?;
        let stale = self.cache.lock().remove(path);
        drop(stale);
        let (initial, exact) = Self::modes(creds, mode, 0o777);
        // Created in the parent's descriptor (with O_EXCL no symlink is followed), so that the
        // directory marked changed is the one that got the entry.
        let dir = self.parent(parent, "create", path)?;
        let created = match self.open_file(
            Some((&dir, name)),
            path,
            OFlags::CREATE | OFlags::EXCL,
            initial,
        ) {
            Ok(_) => true,
            Err(e) if e.errno == Errno::EXIST.raw_os_error() && !exclusive => {
                let link = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| kind_of(st.st_mode) == FileKind::Symlink);
                if link {
                    let attr = self.create_through_link(path, initial, creds, exact)?;
                    return Ok((attr, stat_of(&dir)));
                }
                false
            }
            Err(e) => return Err(e),
        };
        let dir_attr = if created {
            let dir_attr = self.dir_changed(dir, parent);
            if creds.is_some() {
                self.own(path, creds, exact)?;
            }
            dir_attr
        } else {
            stat_of(&dir)
        };
        Ok((self.lstat(path)?, dir_attr))
    }

    /// `create` (not exclusive) of a name that is a symbolic link: as `open(O_CREAT)` on Linux,
    /// the link is followed, beneath the root. A target inside the root is kept if it exists
    /// and created if not (a dangling link inside the root makes its target, as on a local file
    /// system), and the answer is the file's attributes, not the link's. A target that leaves
    /// the root (an absolute target, or `..` past the root) is never followed: `EEXIST`, the
    /// name exists and nothing is made outside (`O_CREAT|O_EXCL`'s answer; unconfined Linux
    /// would create the target wherever it points). A loop of links: `ELOOP`.
    fn create_through_link(
        &self,
        path: &str,
        initial: u32,
        creds: Option<Creds>,
        exact: Option<u32>,
    ) -> Result<Attr, FsError> {
        let outward = |e: FsError| {
            if e.errno == Errno::XDEV.raw_os_error() {
                FsError::new(
                    Errno::EXIST,
                    format!(
                        "create {path:?}: the name exists, a symbolic link leading out of the \
                         server's root (not followed)"
                    ),
                )
            } else {
                e
            }
        };
        let file = match self.open_file(None, path, OFlags::empty(), 0) {
            // The target exists beneath the root: kept, as open(O_CREAT) keeps it.
            Ok(o) => o.file,
            Err(e) if e.errno == Errno::NOENT.raw_os_error() => {
                let o = self
                    .open_file(None, path, OFlags::CREATE, initial)
                    .map_err(outward)?;
                // The new entry is in the target's directory, not the link's.
                let made = self.beneath(&*o.file).ok_or_else(|| {
                    FsError::new(
                        Errno::IO,
                        format!("create {path:?}: where its link's target was made is unknown"),
                    )
                })?;
                self.parent_changed(&made)?;
                if creds.is_some() {
                    self.own(&made, creds, exact)?;
                }
                o.file
            }
            Err(e) => return Err(outward(e)),
        };
        let st = rustix::fs::fstat(&*file).map_err(|e| FsError::io(e, "stat", path))?;
        Ok(attr_of(&st))
    }

    /// The path beneath the root of the object `fd` refers to, as the kernel names it now.
    fn beneath(&self, fd: &impl AsFd) -> Option<String> {
        use std::os::fd::AsRawFd;
        let name = |raw: i32| std::fs::read_link(format!("/proc/self/fd/{raw}")).ok();
        let root = name(self.dir.as_raw_fd())?;
        let object = name(fd.as_fd().as_raw_fd())?;
        let rel = object.strip_prefix(&root).ok()?.to_str()?;
        (!rel.is_empty()).then(|| rel.to_string())
    }

    /// Creates a special file (FIFO, socket, device) or a regular file, `mode` carrying the
    /// type bits, owned by `creds` when given.
    pub fn mknod(
        &self,
        path: &str,
        mode: u32,
        rdev: u64,
        creds: Option<Creds>,
    ) -> Result<Attr, FsError> {
        let (parent, name) = split(path)?;
        let dir = self.parent(parent, "mknod", path)?;
        let file_type = rustix::fs::FileType::from_raw_mode(mode);
        if matches!(
            file_type,
            rustix::fs::FileType::Directory | rustix::fs::FileType::Symlink
        ) {
            return Err(FsError::new(
                Errno::INVAL,
                format!("mknod {path:?}: use mkdir or symlink for this file type"),
            ));
        }
        let (initial, exact) = Self::modes(creds, mode, 0o777);
        rustix::fs::mknodat(&dir, name, file_type, Mode::from_raw_mode(initial), rdev)
            .map_err(|e| FsError::io(e, "mknod", path))?;
        self.dir_changed(dir, parent);
        if creds.is_some() {
            self.own(path, creds, exact)?;
        }
        self.lstat(path)
    }

    /// Creates a symbolic link to `target` (stored as given), owned by `creds` when given.
    pub fn symlink(&self, path: &str, target: &str, creds: Option<Creds>) -> Result<Attr, FsError> {
        let (parent, name) = split(path)?;
        if target.is_empty() || target.contains('\0') {
            return Err(FsError::new(
                Errno::NOENT,
                format!("symlink {path:?}: empty target"),
            ));
        }
        let dir = self.parent(parent, "symlink", path)?;
        rustix::fs::symlinkat(target, &dir, name).map_err(|e| FsError::io(e, "symlink", path))?;
        self.dir_changed(dir, parent);
        if creds.is_some() {
            self.own(path, creds, None)?;
        }
        self.lstat(path)
    }

    /// The target of the symbolic link at `path`.
    pub fn readlink(&self, path: &str) -> Result<Vec<u8>, FsError> {
        let (parent, name) = split(path)?;
        let dir = self.parent_path(parent, "readlink", path)?;
        rustix::fs::readlinkat(&dir, name, Vec::new())
            .map(|t| t.into_bytes())
            .map_err(|e| FsError::io(e, "readlink", path))
    }

    /// Makes `to` a new name of the file at `from` (a final symlink is linked, not followed).
    pub fn link(&self, from: &str, to: &str) -> Result<Attr, FsError> {
        let (fp, fname) = split(from)?;
        let (tp, tname) = split(to)?;
        let fdir = self.parent_path(fp, "link", from)?;
        let tdir = self.parent(tp, "link", to)?;
        rustix::fs::linkat(&fdir, fname, &tdir, tname, AtFlags::empty())
            .map_err(|e| FsError::io(e, "link", from))?;
        self.dir_changed(tdir, tp);
        self.lstat(to)
    }

    /// Changes what `set` asks of `path` (a final symlink not followed: its owner changes, its
    /// mode cannot, as on Linux) and answers the new attributes. The order is Linux's
    /// `notify_change`: owner, then mode (so a chown's clearing of set-id bits can be undone by an
    /// explicit mode), then size, then times.
    pub fn setattr(&self, path: &str, set: &SetAttr) -> Result<Attr, FsError> {
        let fd = self.object(path, "setattr")?;
        if set.uid.is_some() || set.gid.is_some() {
            rustix::fs::chownat(
                &fd,
                "",
                set.uid.map(rustix::fs::Uid::from_raw),
                set.gid.map(rustix::fs::Gid::from_raw),
                AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(|e| FsError::io(e, "chown", path))?;
        }
        if let Some(mode) = set.mode {
            let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io(e, "stat", path))?;
            if kind_of(st.st_mode) == FileKind::Symlink {
                return Err(FsError::new(
                    Errno::OPNOTSUPP,
                    format!("chmod {path:?}: a symbolic link has no mode of its own"),
                ));
            }
            rustix::fs::chmod(
                proc_fd_path(&fd).as_str(),
                Mode::from_raw_mode(mode & 0o7777),
            )
            .map_err(|e| FsError::io(e, "chmod", path))?;
        }
        if let Some(size) = set.size {
            self.truncate(path, size)?;
        }
        if set.atime.is_some() || set.mtime.is_some() {
            let times = rustix::fs::Timestamps {
                last_access: timestamp(set.atime),
                last_modification: timestamp(set.mtime),
            };
            rustix::fs::utimensat(
                rustix::fs::CWD,
                proc_fd_path(&fd).as_str(),
                &times,
                AtFlags::empty(),
            )
            .map_err(|e| FsError::io(e, "utimens", path))?;
        }
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io(e, "stat", path))?;
        Ok(attr_of(&st))
    }

    /// The capacity of the file system under the root.
    pub fn statfs(&self) -> Result<Statfs, FsError> {
        let v = rustix::fs::fstatvfs(&self.dir).map_err(|e| FsError::io(e, "statfs", "."))?;
        Ok(Statfs {
            blocks: v.f_blocks,
            bfree: v.f_bfree,
            bavail: v.f_bavail,
            files: v.f_files,
            ffree: v.f_ffree,
            bsize: v.f_bsize as u32,
            namelen: v.f_namemax as u32,
            frsize: v.f_frsize as u32,
        })
    }

    /// Opens `path` as `flags` asks (creating or truncating it if asked) and returns its
    /// attributes. Always opens afresh (a client opening a file expects the file now at that
    /// path), and refuses `WRITE` on a file the server can only read.
    ///
    /// When the worker acts as a user, the user opens the file with the access asked (the
    /// kernel checks it, creating it the user's if asked), and nothing is cached.
    pub fn open_with(&self, path: &str, flags: OpenFlags) -> Result<Attr, FsError> {
        if crate::access::current().is_some() {
            return self.open_as_user(path, flags);
        }
        let mut extra = OFlags::empty();
        if flags.has(OpenFlags::CREATE) {
            split(path)?;
            extra |= OFlags::CREATE;
        }
        let stale = self.cache.lock().remove(path);
        drop(stale);
        let o = self.open_file(None, path, extra, 0o644)?;
        if extra.contains(OFlags::CREATE) {
            // Whether the file was created cannot be told: the parent is marked either way.
            self.parent_changed(path)?;
        }
        if (flags.has(OpenFlags::WRITE) || flags.has(OpenFlags::TRUNCATE)) && !o.writable {
            return Err(FsError::new(
                Errno::ACCESS,
                format!("open {path:?} for writing: the file is read-only for the server"),
            ));
        }
        if flags.has(OpenFlags::TRUNCATE) {
            rustix::fs::ftruncate(&*o.file, 0).map_err(|e| FsError::io(e, "truncate", path))?;
        }
        let st = rustix::fs::fstat(&*o.file).map_err(|e| FsError::io(e, "stat", path))?;
        Ok(attr_of(&st))
    }

    /// [`Root::open_with`] for a user: the open is the user's, with exactly the access asked.
    fn open_as_user(&self, path: &str, flags: OpenFlags) -> Result<Attr, FsError> {
        let write = flags.has(OpenFlags::WRITE) || flags.has(OpenFlags::TRUNCATE);
        let mut how = match (write, flags.has(OpenFlags::READ)) {
            (true, true) => OFlags::RDWR,
            (true, false) => OFlags::WRONLY,
            (false, _) => OFlags::RDONLY,
        } | OFlags::NONBLOCK;
        if flags.has(OpenFlags::CREATE) {
            split(path)?;
            how |= OFlags::CREATE;
        }
        let stale = self.cache.lock().remove(path);
        drop(stale);
        let fd = self
            .open_beneath(path, how, 0o644)
            .map_err(|e| FsError::io(e, "open", path))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io(e, "stat", path))?;
        regular_file(st.st_mode, path)?;
        if how.contains(OFlags::CREATE) {
            self.parent_changed(path)?;
        }
        if flags.has(OpenFlags::TRUNCATE) {
            rustix::fs::ftruncate(&fd, 0).map_err(|e| FsError::io(e, "truncate", path))?;
        }
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io(e, "stat", path))?;
        Ok(attr_of(&st))
    }

    /// Sets the length of the file at `path`.
    pub fn truncate(&self, path: &str, size: u64) -> Result<(), FsError> {
        let o = self.cached(path, Want::Write)?;
        if !o.writable {
            return Err(FsError::new(
                Errno::ACCESS,
                format!("truncate {path:?}: the file is read-only for the server"),
            ));
        }
        rustix::fs::ftruncate(&*o.file, size).map_err(|e| FsError::io(e, "truncate", path))
    }

    /// Removes a file.
    /// Answers the directory's attributes after the change (`None` if it cannot be stat'ed).
    pub fn unlink(&self, path: &str) -> Result<Option<Attr>, FsError> {
        self.remove(path, "unlink", AtFlags::empty())
    }

    /// Removes the name `path` (a file, or with `AtFlags::REMOVEDIR` an empty directory) for
    /// `op`, and forgets what the server held of it. Answers the directory's attributes after
    /// the change.
    fn remove(
        &self,
        path: &str,
        op: &'static str,
        flags: AtFlags,
    ) -> Result<Option<Attr>, FsError> {
        let (parent, name) = split(path)?;
        let r = self.parent(parent, op, path).and_then(|dir| {
            let victim = key_at(&dir, name);
            rustix::fs::unlinkat(&dir, name, flags).map_err(|e| FsError::io(e, op, path))?;
            Ok((dir, victim))
        });
        // Even on failure: another server may have made the change in a shared root.
        self.forget_all();
        let (dir, victim) = r?;
        if let Some(k) = victim {
            self.removed(k);
        }
        Ok(self.dir_changed(dir, parent))
    }

    /// Creates a directory owned by `creds` when given (without credentials, permission bits
    /// above `0o1777` are dropped) and answers its attributes and its parent's after the
    /// change (`None` if the parent cannot be stat'ed).
    pub fn mkdir(
        &self,
        path: &str,
        mode: u32,
        creds: Option<Creds>,
    ) -> Result<(Attr, Option<Attr>), FsError> {
        let (parent, name) = split(path)?;
        let dir = self.parent(parent, "mkdir", path)?;
        let (initial, exact) = Self::modes(creds, mode, 0o1777);
        rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(initial))
            .map_err(|e| FsError::io(e, "mkdir", path))?;
        let dir_attr = self.dir_changed(dir, parent);
        if creds.is_some() {
            self.own(path, creds, exact)?;
        }
        Ok((self.lstat(path)?, dir_attr))
    }

    /// Removes an empty directory; answers its parent's attributes after the change.
    pub fn rmdir(&self, path: &str) -> Result<Option<Attr>, FsError> {
        self.remove(path, "rmdir", AtFlags::REMOVEDIR)
    }

    /// Renames `from` to `to`.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), FsError> {
        let (fp, fname) = split(from)?;
        let (tp, tname) = split(to)?;
        let r = self.parent(fp, "rename", from).and_then(|fdir| {
            let tdir = self.parent(tp, "rename", to)?;
            // What `to` names now, replaced by the rename.
            let victim = key_at(&tdir, tname);
            rustix::fs::renameat(&fdir, fname, &tdir, tname)
                .map_err(|e| FsError::io(e, "rename", from))?;
            Ok((fdir, tdir, victim))
        });
        self.forget_all();
        let (fdir, tdir, victim) = r?;
        if let Some(k) = victim {
            self.removed(k);
        }
        self.dir_changed(fdir, fp);
        self.dir_changed(tdir, tp);
        Ok(())
    }

    /// Lists a directory, sorted by name, without `.` and `..`.
    pub fn readdir(&self, path: &str) -> Result<Vec<DirEntry>, FsError> {
        let listed = self.list(path, |_, entry| {
            let entry = DirEntry {
                name: entry.file_name().to_string_lossy().into_owned(),
                kind: kind_of_type(entry.file_type()),
                ino: entry.ino(),
            };
            Ok(Some((entry, ())))
        })?;
        Ok(listed.into_iter().map(|(entry, ())| entry).collect())
    }

    /// [`readdir`](Root::readdir), each entry with its attributes (`fstatat` in the directory,
    /// a final symlink not followed). An entry removed between the listing and its `fstatat`
    /// is left out: it is gone.
    pub fn readdir_plus(&self, path: &str) -> Result<Vec<(DirEntry, Attr)>, FsError> {
        self.list(path, |dir, entry| {
            let name = entry.file_name();
            let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::NOENT) => return Ok(None),
                Err(e) => return Err(e),
            };
            let attr = attr_of(&st);
            let name = name.to_string_lossy().into_owned();
            let (kind, ino) = (attr.kind, attr.ino);
            Ok(Some((DirEntry { name, kind, ino }, attr)))
        })
    }

    /// The entries of the directory at `path` but `.` and `..`, each as `make` gives it (left
    /// out for `None`) with what it adds, sorted by name.
    fn list<T>(
        &self,
        path: &str,
        mut make: impl FnMut(&OwnedFd, &rustix::fs::DirEntry) -> Result<Option<(DirEntry, T)>, Errno>,
    ) -> Result<Vec<(DirEntry, T)>, FsError> {
        let io = |e| FsError::io(e, "readdir", path);
        let fd = self
            .open_beneath(path, OFlags::RDONLY | OFlags::DIRECTORY, 0)
            .map_err(io)?;
        let dir = rustix::fs::Dir::read_from(&fd).map_err(io)?;
        let mut out = Vec::new();
        for entry in dir {
            let entry = entry.map_err(io)?;
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            out.extend(make(&fd, &entry).map_err(io)?);
        }
        out.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        Ok(out)
    }

    /// The extended attribute `name` of the directory holding `path` (the root for the root's
    /// entries), that directory resolved beneath the root like every other path. `Ok(None)` if
    /// the directory has no such attribute or its file system keeps none (`ENODATA`,
    /// `ENOTSUP`). A value longer than `max` bytes is an error (`ERANGE`), never truncated.
    pub fn parent_xattr(
        &self,
        path: &str,
        name: &str,
        max: usize,
    ) -> Result<Option<Vec<u8>>, FsError> {
        // O_RDONLY, not O_PATH: fgetxattr refuses an O_PATH descriptor (EBADF).
        let dir = self
            .open_beneath(parent_of(path), OFlags::RDONLY | OFlags::DIRECTORY, 0)
            .map_err(|e| FsError::io(e, "getxattr", path))?;
        let mut value = Vec::with_capacity(max);
        match rustix::fs::fgetxattr(&dir, name, rustix::buffer::spare_capacity(&mut value)) {
            // The allocator may have given more room than `max`: the bound is ours.
            Ok(_) if value.len() > max => Err(FsError::new(
                Errno::RANGE,
                format!("getxattr {path:?}: {name} is longer than {max} bytes"),
            )),
            Ok(_) => Ok(Some(value)),
            Err(Errno::NODATA) | Err(Errno::NOTSUP) => Ok(None),
            Err(e) => Err(FsError::io(e, "getxattr", path)),
        }
    }

    /// Drops every cached descriptor after a namespace change (files being served stay open
    /// through their `Arc`), and stops files being opened meanwhile from entering the cache.
    fn forget_all(&self) {
        let mut cache = self.cache.lock();
        cache.generation += 1;
        let held = cache.clear();
        drop(cache);
        // Closed (unless a request holds them) after the lock is released.
        drop(held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::temp_dir;
    use std::collections::HashMap;
    use tempfile::TempDir;

    fn small(dir: &TempDir, cached: usize, dirty: usize, dirs: usize) -> Root {
        Root::open_bounded(
            dir.path(),
            Capacity {
                cached_files: cached,
                dirty_files: dirty,
                dirty_dirs: dirs,
            },
        )
        .unwrap()
    }

    #[test]
    fn a_failing_file_system_underneath_is_eio_and_other_errors_stay_as_they_are() {
        for e in [
            Errno::NOTCONN,
            Errno::HOSTUNREACH,
            Errno::TIMEDOUT,
            Errno::IO,
        ] {
            let err = FsError::io(e, "read", "d/f");
            assert_eq!(err.errno, Errno::IO.raw_os_error(), "{e:?}");
            assert!(err.message.contains("d/f"), "{}", err.message);
        }
        for e in [Errno::NOENT, Errno::ACCESS, Errno::NOSPC, Errno::STALE] {
            assert_eq!(FsError::io(e, "read", "d/f").errno, e.raw_os_error());
        }
        // The log line about it is rate-limited: at most one a second, the rest counted.
        let limit = RateLimit {
            last_s: AtomicU64::new(0),
            left_out: AtomicU64::new(0),
        };
        let logged = (0..1000).filter(|_| limit.due()).count();
        assert!((1..=2).contains(&logged), "{logged}");
        assert_eq!(limit.suppressed() as usize, 1000 - logged);
        assert_eq!(limit.suppressed(), 0);
    }

    fn key(path: &Path) -> Key {
        Key::of(&rustix::fs::lstat(path).unwrap())
    }

    /// How many times each object was fsynced through the dirty sets.
    fn sync_counts(root: &Root) -> HashMap<Key, usize> {
        let mut n = HashMap::new();
        for k in root.synced.lock().iter() {
            *n.entry(*k).or_default() += 1;
        }
        n
    }

    #[test]
    fn bounded_dirty_sets_fsync_every_written_file_exactly_once() {
        let tmp = temp_dir("bounded");
        let root = small(&tmp, 4, 3, 2);
        let mut files = Vec::new();
        for d in 0..5 {
            root.mkdir(&format!("d{d}"), 0o755, None).unwrap();
            for f in 0..10 {
                let path = format!("d{d}/f{f}");
                root.create(&path, 0o644, false, None).unwrap();
                let data = format!("contents of {path}");
                root.write(&path, 0, data.as_bytes()).unwrap();
                let st = root.stats();
                assert!(st.cached_files <= 4 && st.dirty_files <= 3 && st.dirty_dirs <= 2);
                files.push((path, data));
            }
        }
        let pressure = root.stats().pressure_fsyncs_files;
        assert_eq!(pressure, 50 - 3, "all but the 3 newest were fsynced early");
        // The directory set holds 2: creating in d1 pushes the root out (fsynced), mkdir d2
        // dirties it again and pushes d0 out, and so on — 6 early fsyncs, 2 left at shutdown.
        assert_eq!(root.stats().pressure_fsyncs_dirs, 6);
        let (at_shutdown, err) = root.fsync_dirty();
        assert_eq!(err, None);
        assert_eq!(at_shutdown, 3);
        let counts = sync_counts(&root);
        for (path, _) in &files {
            assert_eq!(counts.get(&key(&tmp.path().join(path))), Some(&1), "{path}");
        }
        for d in ["d0", "d1", "d2", "d3", "d4"] {
            assert_eq!(
                counts.get(&key(&tmp.path().join(d))),
                Some(&1),
                "directory {d}"
            );
        }
        // Changed again by mkdir d2 and d4 after each of its 2 early fsyncs.
        assert_eq!(counts.get(&key(tmp.path())), Some(&3), "the root");
        assert_eq!(counts.len(), 50 + 6);
        let st = root.stats();
        assert_eq!((st.dirty_files, st.dirty_dirs), (0, 0));
        drop(root);
        // No byte lost: read back through a fresh store.
        let root = small(&tmp, 4, 3, 2);
        for (path, data) in &files {
            assert_eq!(root.read(path, 0, 100).unwrap(), data.as_bytes(), "{path}");
        }
    }

    #[test]
    fn a_file_written_again_after_its_early_fsync_is_fsynced_again() {
        let tmp = temp_dir("again");
        let root = small(&tmp, 2, 1, 1);
        root.create("a", 0o644, false, None).unwrap();
        root.create("b", 0o644, false, None).unwrap();
        root.write("a", 0, b"1").unwrap();
        root.write("b", 0, b"2").unwrap(); // pushes `a` out: fsynced
        root.write("a", 1, b"3").unwrap(); // dirty again; pushes `b` out
        assert_eq!(root.fsync_dirty(), (1, None));
        let counts = sync_counts(&root);
        assert_eq!(counts[&key(&tmp.path().join("a"))], 2);
        assert_eq!(counts[&key(&tmp.path().join("b"))], 1);
        assert_eq!(std::fs::read(tmp.path().join("a")).unwrap(), b"13");
    }

    #[test]
    fn the_cache_evicts_by_clock_and_stays_within_capacity() {
        let tmp = temp_dir("clock");
        for f in ["a", "b", "c", "d", "e"] {
            std::fs::write(tmp.path().join(f), f).unwrap();
        }
        let root = small(&tmp, 4, 4, 4);
        for f in ["a", "b", "c", "d"] {
            root.read(f, 0, 1).unwrap();
        }
        root.read("a", 0, 1).unwrap(); // `a` used again: kept
        root.read("e", 0, 1).unwrap(); // evicts `b`, the first not used since
        let cache = root.cache.lock();
        let mut cached: Vec<&str> = cache.index.keys().map(String::as_str).collect();
        cached.sort_unstable();
        assert_eq!(cached, ["a", "c", "d", "e"]);
    }

    #[test]
    fn dirty_files_are_known_by_identity_across_renames() {
        let tmp = temp_dir("identity");
        let root = small(&tmp, 8, 8, 8);
        root.create("a", 0o644, false, None).unwrap();
        root.write("a", 0, b"x").unwrap();
        root.rename("a", "b").unwrap();
        root.write("b", 1, b"y").unwrap();
        assert_eq!(
            root.stats().dirty_files,
            1,
            "one file, under two names in turn"
        );
        assert_eq!(root.fsync_dirty(), (1, None));
    }

    /// D4: the dirty set and the cache held the descriptor of an unlinked file, so its space was
    /// not freed while the server ran.
    #[test]
    fn unlink_and_rename_over_drop_the_descriptors_of_files_without_a_name() {
        let tmp = temp_dir("unlink");
        let root = small(&tmp, 8, 8, 8);
        for f in ["gone", "target", "source", "linked"] {
            root.create(f, 0o644, false, None).unwrap();
            root.write(f, 0, f.as_bytes()).unwrap();
        }
        assert_eq!(root.stats().dirty_files, 4);
        root.unlink("gone").unwrap();
        assert_eq!(root.stats().dirty_files, 3);
        assert_eq!(root.stats().cached_files, 0);
        // `target` is replaced: its inode has no name left. `source` lives on as `target`.
        let source = key(&tmp.path().join("source"));
        root.rename("source", "target").unwrap();
        assert_eq!(root.stats().dirty_files, 2);
        // A file with another name stays dirty.
        root.link("linked", "other").unwrap();
        root.unlink("linked").unwrap();
        assert_eq!(root.stats().dirty_files, 2);
        let other = key(&tmp.path().join("other"));
        assert_eq!(root.fsync_dirty(), (2, None));
        let counts = sync_counts(&root);
        assert_eq!(counts.get(&source), Some(&1));
        assert_eq!(counts.get(&other), Some(&1));
        assert_eq!(std::fs::read(tmp.path().join("target")).unwrap(), b"source");
    }

    #[test]
    fn a_removed_directory_is_no_longer_held() {
        let tmp = temp_dir("rmdir");
        let root = small(&tmp, 8, 8, 8);
        root.mkdir("d", 0o755, None).unwrap();
        root.create("d/f", 0o644, false, None).unwrap();
        root.unlink("d/f").unwrap();
        assert_eq!(root.stats().dirty_dirs, 2, "the root and d");
        root.rmdir("d").unwrap();
        assert_eq!(root.stats().dirty_dirs, 1, "the root");
        assert_eq!(root.fsync_dirty(), (0, None));
    }

    /// D5: directories were fsynced at shutdown by a path re-resolved then, which a rename and
    /// a symlink swap had pointed out of the root ("path escapes the server's root").
    #[test]
    fn directories_are_fsynced_by_descriptor_after_a_rename_and_a_symlink_swap() {
        let tmp = temp_dir("swap");
        let root = small(&tmp, 8, 8, 8);
        root.mkdir("a", 0o755, None).unwrap();
        root.create("a/f", 0o644, false, None).unwrap();
        root.write("a/f", 0, b"data").unwrap();
        let a = key(&tmp.path().join("a"));
        root.rename("a", "b").unwrap();
        std::os::unix::fs::symlink("/", tmp.path().join("a")).unwrap();
        assert_eq!(root.fsync_dirty(), (1, None));
        let counts = sync_counts(&root);
        assert_eq!(counts.get(&a), Some(&1), "the directory now named b");
        assert_eq!(counts.get(&key(tmp.path())), Some(&1), "the root");
    }

    #[test]
    fn a_failed_fsync_under_pressure_is_reported_at_shutdown() {
        let tmp = temp_dir("fail");
        let root = small(&tmp, 4, 1, 4);
        root.create("first", 0o644, false, None).unwrap();
        root.create("second", 0o644, false, None).unwrap();
        root.write("first", 0, b"1").unwrap();
        root.fail_fsyncs.store(1, Ordering::Relaxed);
        root.write("second", 0, b"2").unwrap(); // pushes `first` out: its fsync fails
        let st = root.stats();
        assert_eq!((st.pressure_fsyncs_files, st.pressure_fsync_errors), (1, 1));
        let (n, err) = root.fsync_dirty();
        assert_eq!(n, 1);
        let err = err.expect("the early failure is reported");
        assert_eq!(err.errno, Errno::IO.raw_os_error());
        assert!(err.message.contains("\"first\""), "{}", err.message);
    }

    #[test]
    fn a_zero_capacity_is_refused() {
        let tmp = temp_dir("zero");
        let e = Root::open_bounded(
            tmp.path(),
            Capacity {
                cached_files: 1,
                dirty_files: 0,
                dirty_dirs: 1,
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("dirty_files = 0"), "{e}");
    }

    #[test]
    fn paths_are_checked() {
        assert_eq!(check_path("").unwrap(), ".");
        assert_eq!(check_path("./a//b/").unwrap(), "a/b");
        assert_eq!(
            check_path("/etc/passwd").unwrap_err().errno,
            Errno::ACCESS.raw_os_error()
        );
        assert_eq!(
            check_path("a/../../b").unwrap_err().errno,
            Errno::ACCESS.raw_os_error()
        );
        assert_eq!(
            check_path("..").unwrap_err().errno,
            Errno::ACCESS.raw_os_error()
        );
        assert_eq!(
            check_path("a\0b").unwrap_err().errno,
            Errno::INVAL.raw_os_error()
        );
        let long = "a".repeat(MAX_PATH + 1);
        assert_eq!(
            check_path(&long).unwrap_err().errno,
            Errno::NAMETOOLONG.raw_os_error()
        );
    }
}
