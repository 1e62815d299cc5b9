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
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use iosets_proto::{Attr, DirEntry, FileKind, OpenFlags};
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

fn kind_of(mode: u32) -> FileKind {
    match rustix::fs::FileType::from_raw_mode(mode) {
        rustix::fs::FileType::RegularFile => FileKind::File,
        rustix::fs::FileType::Directory => FileKind::Dir,
        rustix::fs::FileType::Symlink => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

fn attr_of(st: &rustix::fs::Stat) -> Attr {
    Attr {
        kind: kind_of(st.st_mode),
        size: st.st_size as u64,
        mode: st.st_mode & 0o7777,
        mtime_ns: st.st_mtime.saturating_mul(1_000_000_000) + st.st_mtime_nsec as i64,
    }
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

    /// `pread`: up to `len` bytes at `offset` (fewer at the end of the file).
    pub fn read(&self, path: &str, offset: u64, len: u32) -> Result<Vec<u8>, FsError> {
        let file = self.file(path)?;
        let mut buf = vec![0u8; len as usize];
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(FsError::io(std_errno(&e), "read", path)),
            }
        }
        buf.truncate(done);
        Ok(buf)
    }

    /// `pwrite`: all of `data` at `offset`.
    pub fn write(&self, path: &str, offset: u64, data: &[u8]) -> Result<u32, FsError> {
        let open = self.cached(path)?;
        if !open.writable {
            return Err(FsError::new(
                Errno::ACCESS,
                format!("write {path:?}: the file is read-only for the server"),
            ));
        }
        open.file
            .write_all_at(data, offset)
            .map_err(|e| FsError::io(std_errno(&e), "write", path))?;
        let mut dirty = self.dirty.lock();
        if !dirty.contains_key(path) {
            dirty.insert(path.to_string(), open.file);
        }
        Ok(data.len() as u32)
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

    /// Creates a regular file (or keeps an existing one unless `exclusive`). Permission bits
    /// above `0o777` (setuid, setgid, sticky) are dropped.
    pub fn create(&self, path: &str, mode: u32, exclusive: bool) -> Result<Attr, FsError> {
        split(path)?;
        let mut flags = OFlags::CREATE;
        if exclusive {
            flags |= OFlags::EXCL;
        }
        self.cache.lock().files.remove(path);
        let o = self.open_file(path, flags, mode & 0o777)?;
        self.dir_changed(path);
        let st = rustix::fs::fstat(&*o.file).map_err(|e| FsError::io(e, "stat", path))?;
        Ok(attr_of(&st))
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

    /// Creates a directory (permission bits above `0o1777` dropped).
    pub fn mkdir(&self, path: &str, mode: u32) -> Result<(), FsError> {
        let (parent, name) = split(path)?;
        let dir = self.parent(parent, "mkdir", path)?;
        rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(mode & 0o1777))
            .map_err(|e| FsError::io(e, "mkdir", path))?;
        self.dir_changed(path);
        Ok(())
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
            let kind = match entry.file_type() {
                rustix::fs::FileType::RegularFile => FileKind::File,
                rustix::fs::FileType::Directory => FileKind::Dir,
                rustix::fs::FileType::Symlink => FileKind::Symlink,
                _ => FileKind::Other,
            };
            out.push(DirEntry { name, kind });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
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
