//! The backing store: files under one root directory, with every path confined to it.
//!
//! Every path a client sends is first checked by [`check_path`] (relative, no `..`, no NUL, not
//! too long), then resolved by the kernel with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`
//! from a descriptor of the root: a symlink whose target leaves the root fails with `EXDEV`,
//! whatever races happen in the directory tree meanwhile. Operations on a name (mkdir, unlink,
//! rmdir, rename) open the parent directory that way and act on the last component, which
//! [`check_path`] has made a plain name.
//!
//! Open files are cached by path (read-write when allowed, read-only otherwise), so a stream of
//! reads and writes costs one `pread`/`pwrite` each, not an open and a close. Namespace changes
//! through the server (unlink, rename, rmdir — even failed ones, since in a shared root another
//! server may have made them) empty the cache, and `open` always opens afresh. Files renamed or
//! unlinked *behind the server's back* (by another process) are not noticed while cached: the
//! root is meant to be changed through the servers only. Files written since their last fsync
//! are remembered with their descriptor, and directories whose entries changed by path, so a
//! shutdown can fsync them all.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use iosets_proto::local::PeerRegion;
use iosets_proto::{Attr, Creds, DirEntry, FileKind, OpenFlags, SetAttr, SetTime, Statfs};
use parking_lot::Mutex;
use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Longest path accepted, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATH: usize = 4096;
/// Open files kept in the cache.
const CACHE_CAPACITY: usize = 4096;

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

/// Whether this process may give files away (`chown` to another user): root, in practice.
fn can_chown() -> bool {
    rustix::process::geteuid().is_root()
}

/// An open file in the cache, and whether it could be opened for writing.
#[derive(Debug, Clone)]
struct Open {
    file: Arc<File>,
    writable: bool,
}

/// Open files by path. `generation` grows with every namespace change; a file opened while it
/// changed is not cached (it may be the file that was just renamed or unlinked).
#[derive(Debug, Default)]
struct Cache {
    generation: u64,
    files: HashMap<String, Open>,
}

/// The backing store.
#[derive(Debug)]
pub struct Root {
    dir: OwnedFd,
    cache: Mutex<Cache>,
    /// Files written since their last fsync, by the path they were written under, with the
    /// descriptor written through (so a file renamed or unlinked since is still made durable).
    dirty: Mutex<HashMap<String, Arc<File>>>,
    /// Directories whose entries changed (create, mkdir, rename, unlink), fsynced at shutdown.
    dirty_dirs: Mutex<HashSet<String>>,
}

const BENEATH: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// The parent directory of a checked path (`"."` for the root's entries).
fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map_or(".", |(p, _)| p)
}

impl Root {
    /// Opens `dir` as the root. Fails with a clear message on kernels without `openat2` (Linux
    /// before 5.6), which the confinement of every path relies on.
    pub fn open(dir: &Path) -> std::io::Result<Root> {
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
            cache: Mutex::new(Cache::default()),
            dirty: Mutex::new(HashMap::new()),
            dirty_dirs: Mutex::new(HashSet::new()),
        })
    }

    fn open_beneath(&self, path: &str, flags: OFlags, mode: u32) -> Result<OwnedFd, Errno> {
        // openat2 refuses a mode without O_CREAT.
        let mode = if flags.contains(OFlags::CREATE) {
            mode
        } else {
            0
        };
        rustix::fs::openat2(
            &self.dir,
            path,
            flags | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
            BENEATH,
        )
    }

    fn parent(&self, parent: &str, what: &str, path: &str) -> Result<OwnedFd, FsError> {
        self.open_beneath(parent, OFlags::PATH | OFlags::DIRECTORY, 0)
            .map_err(|e| FsError::io(e, what, path))
    }

    /// The open file at `path`, from the cache or opened (never created) now.
    fn cached(&self, path: &str) -> Result<Open, FsError> {
        if let Some(o) = self.cache.lock().files.get(path) {
            return Ok(o.clone());
        }
        self.open_file(path, OFlags::empty(), 0o644)
    }

    /// The open file at `path` (for reading, fsync, truncate).
    pub fn file(&self, path: &str) -> Result<Arc<File>, FsError> {
        Ok(self.cached(path)?.file)
    }

    fn open_file(&self, path: &str, extra: OFlags, mode: u32) -> Result<Open, FsError> {
        let generation = self.cache.lock().generation;
        // NONBLOCK: opening a FIFO must not hang a worker (it is refused below); it changes
        // nothing for regular files.
        let extra = extra | OFlags::NONBLOCK;
        let (fd, writable) = match self.open_beneath(path, OFlags::RDWR | extra, mode) {
            Err(Errno::ACCESS) | Err(Errno::ROFS) => self
                .open_beneath(path, OFlags::RDONLY | extra, mode)
                .map(|fd| (fd, false)),
            r => r.map(|fd| (fd, true)),
        }
        .map_err(|e| FsError::io(e, "open", path))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io(e, "stat", path))?;
        if kind_of(st.st_mode) != FileKind::File {
            return Err(FsError::new(
                if kind_of(st.st_mode) == FileKind::Dir {
                    Errno::ISDIR
                } else {
                    Errno::INVAL
                },
                format!("{path:?} is not a regular file"),
            ));
        }
        let open = Open {
            file: Arc::new(File::from(fd)),
            writable,
        };
        let mut cache = self.cache.lock();
        if cache.generation == generation {
            if cache.files.len() >= CACHE_CAPACITY {
                cache.files.clear();
            }
            cache.files.insert(path.to_string(), open.clone());
        }
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
        self.written(path, open.file);
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
        self.written(path, open.file);
        Ok(n)
    }

    /// The open file at `path`, if the server may write it.
    fn writable(&self, path: &str) -> Result<Open, FsError> {
        let open = self.cached(path)?;
        if !open.writable {
            return Err(FsError::new(
                Errno::ACCESS,
                format!("write {path:?}: the file is read-only for the server"),
            ));
        }
        Ok(open)
    }

    /// Remembers that `file` was written under `path` (fsynced at shutdown).
    fn written(&self, path: &str, file: Arc<File>) {
        let mut dirty = self.dirty.lock();
        if !dirty.contains_key(path) {
            dirty.insert(path.to_string(), file);
        }
    }

    /// `fsync` of one file. A write that lands while it runs stays marked dirty.
    pub fn fsync(&self, path: &str) -> Result<(), FsError> {
        let file = self.file(path)?;
        let was = self.dirty.lock().remove(path);
        if let Err(e) = rustix::fs::fsync(&*file) {
            if let Some(f) = was {
                self.dirty.lock().entry(path.to_string()).or_insert(f);
            }
            return Err(FsError::io(e, "fsync", path));
        }
        Ok(())
    }

    /// Fsyncs every file written since its last fsync (through the descriptor it was written
    /// with, wherever it lives now) and every directory whose entries changed (at shutdown).
    /// Returns how many files, and the first failure.
    pub fn fsync_dirty(&self) -> (usize, Option<FsError>) {
        let files: Vec<(String, Arc<File>)> = self.dirty.lock().drain().collect();
        let mut first_err = None;
        for (p, f) in &files {
            if let Err(e) = rustix::fs::fsync(&**f) {
                first_err.get_or_insert(FsError::io(e, "fsync", p));
            }
        }
        let dirs: Vec<String> = self.dirty_dirs.lock().drain().collect();
        for d in &dirs {
            match self.open_beneath(d, OFlags::RDONLY | OFlags::DIRECTORY, 0) {
                Ok(fd) => {
                    if let Err(e) = rustix::fs::fsync(&fd) {
                        first_err.get_or_insert(FsError::io(e, "fsync", d));
                    }
                }
                // Removed or renamed since: its parent's entry is what matters, and that
                // directory is in the set too.
                Err(Errno::NOENT) | Err(Errno::NOTDIR) => {}
                Err(e) => {
                    first_err.get_or_insert(FsError::io(e, "fsync", d));
                }
            }
        }
        (files.len(), first_err)
    }

    fn dir_changed(&self, path: &str) {
        let parent = parent_of(path);
        let mut dirs = self.dirty_dirs.lock();
        if !dirs.contains(parent) {
            dirs.insert(parent.to_string());
        }
    }

    /// Attributes of `path` (following a symlink that stays beneath the root).
    pub fn lookup(&self, path: &str) -> Result<Attr, FsError> {
        let fd = self
            .open_beneath(path, OFlags::PATH, 0)
            .map_err(|e| FsError::io(e, "lookup", path))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io(e, "stat", path))?;
        Ok(attr_of(&st))
    }

    /// Attributes of `path` itself, a final symlink not followed (`lstat`).
    pub fn lstat(&self, path: &str) -> Result<Attr, FsError> {
        let fd = self.object(path, "lstat")?;
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io(e, "stat", path))?;
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
    /// are dropped.
    pub fn create(
        &self,
        path: &str,
        mode: u32,
        exclusive: bool,
        creds: Option<Creds>,
    ) -> Result<Attr, FsError> {
        split(path)?;
        self.cache.lock().files.remove(path);
        let (initial, exact) = Self::modes(creds, mode, 0o777);
        let created = match self.open_file(path, OFlags::CREATE | OFlags::EXCL, initial) {
            Ok(_) => true,
            Err(e) if e.errno == Errno::EXIST.raw_os_error() && !exclusive => false,
            Err(e) => return Err(e),
        };
        if created {
            self.dir_changed(path);
            if creds.is_some() {
                self.own(path, creds, exact)?;
            }
        }
        self.lstat(path)
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
        self.dir_changed(path);
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
        self.dir_changed(path);
        if creds.is_some() {
            self.own(path, creds, None)?;
        }
        self.lstat(path)
    }

    /// The target of the symbolic link at `path`.
    pub fn readlink(&self, path: &str) -> Result<Vec<u8>, FsError> {
        let (parent, name) = split(path)?;
        let dir = self.parent(parent, "readlink", path)?;
        rustix::fs::readlinkat(&dir, name, Vec::new())
            .map(|t| t.into_bytes())
            .map_err(|e| FsError::io(e, "readlink", path))
    }

    /// Makes `to` a new name of the file at `from` (a final symlink is linked, not followed).
    pub fn link(&self, from: &str, to: &str) -> Result<Attr, FsError> {
        let (fp, fname) = split(from)?;
        let (tp, tname) = split(to)?;
        let fdir = self.parent(fp, "link", from)?;
        let tdir = self.parent(tp, "link", to)?;
        rustix::fs::linkat(&fdir, fname, &tdir, tname, AtFlags::empty())
            .map_err(|e| FsError::io(e, "link", from))?;
        self.dir_changed(to);
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
    pub fn open_with(&self, path: &str, flags: OpenFlags) -> Result<Attr, FsError> {
        let mut extra = OFlags::empty();
        if flags.has(OpenFlags::CREATE) {
            split(path)?;
            extra |= OFlags::CREATE;
        }
        self.cache.lock().files.remove(path);
        let o = self.open_file(path, extra, 0o644)?;
        if extra.contains(OFlags::CREATE) {
            self.dir_changed(path);
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

    /// Sets the length of the file at `path`.
    pub fn truncate(&self, path: &str, size: u64) -> Result<(), FsError> {
        let o = self.cached(path)?;
        if !o.writable {
            return Err(FsError::new(
                Errno::ACCESS,
                format!("truncate {path:?}: the file is read-only for the server"),
            ));
        }
        rustix::fs::ftruncate(&*o.file, size).map_err(|e| FsError::io(e, "truncate", path))
    }

    /// Removes a file.
    pub fn unlink(&self, path: &str) -> Result<(), FsError> {
        let (parent, name) = split(path)?;
        let r = self.parent(parent, "unlink", path).and_then(|dir| {
            rustix::fs::unlinkat(&dir, name, AtFlags::empty())
                .map_err(|e| FsError::io(e, "unlink", path))
        });
        // Even on failure: another server may have made the change in a shared root.
        self.forget_all();
        r.map(|()| self.dir_changed(path))
    }

    /// Creates a directory owned by `creds` when given (without credentials, permission bits
    /// above `0o1777` are dropped) and answers its attributes.
    pub fn mkdir(&self, path: &str, mode: u32, creds: Option<Creds>) -> Result<Attr, FsError> {
        let (parent, name) = split(path)?;
        let dir = self.parent(parent, "mkdir", path)?;
        let (initial, exact) = Self::modes(creds, mode, 0o1777);
        rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(initial))
            .map_err(|e| FsError::io(e, "mkdir", path))?;
        self.dir_changed(path);
        if creds.is_some() {
            self.own(path, creds, exact)?;
        }
        self.lstat(path)
    }

    /// Removes an empty directory.
    pub fn rmdir(&self, path: &str) -> Result<(), FsError> {
        let (parent, name) = split(path)?;
        let r = self.parent(parent, "rmdir", path).and_then(|dir| {
            rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR)
                .map_err(|e| FsError::io(e, "rmdir", path))
        });
        self.forget_all();
        r.map(|()| self.dir_changed(path))
    }

    /// Renames `from` to `to`.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), FsError> {
        let (fp, fname) = split(from)?;
        let (tp, tname) = split(to)?;
        let r = self.parent(fp, "rename", from).and_then(|fdir| {
            let tdir = self.parent(tp, "rename", to)?;
            rustix::fs::renameat(&fdir, fname, &tdir, tname)
                .map_err(|e| FsError::io(e, "rename", from))
        });
        self.forget_all();
        r.map(|()| {
            self.dir_changed(from);
            self.dir_changed(to);
        })
    }

    /// Lists a directory, sorted by name, without `.` and `..`.
    pub fn readdir(&self, path: &str) -> Result<Vec<DirEntry>, FsError> {
        let fd = self
            .open_beneath(path, OFlags::RDONLY | OFlags::DIRECTORY, 0)
            .map_err(|e| FsError::io(e, "readdir", path))?;
        let dir = rustix::fs::Dir::read_from(&fd).map_err(|e| FsError::io(e, "readdir", path))?;
        let mut out = Vec::new();
        for entry in dir {
            let entry = entry.map_err(|e| FsError::io(e, "readdir", path))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "." || name == ".." {
                continue;
            }
            out.push(DirEntry {
                name,
                kind: kind_of_type(entry.file_type()),
                ino: entry.ino(),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
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
        cache.files.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
