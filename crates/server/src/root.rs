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
//! (unlink, rename, rmdir) empty the cache. Paths written since the last fsync are remembered so a
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

/// The backing store.
#[derive(Debug)]
pub struct Root {
    dir: OwnedFd,
    cache: Mutex<HashMap<String, Arc<File>>>,
    dirty: Mutex<HashSet<String>>,
}

const BENEATH: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

impl Root {
    /// Opens `dir` as the root.
    pub fn open(dir: &Path) -> std::io::Result<Root> {
        let fd = rustix::fs::open(
            dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Root {
            dir: fd,
            cache: Mutex::new(HashMap::new()),
            dirty: Mutex::new(HashSet::new()),
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
    pub fn file(&self, path: &str) -> Result<Arc<File>, FsError> {
        if let Some(f) = self.cache.lock().get(path) {
            return Ok(f.clone());
        }
        self.open_file(path, OFlags::empty(), 0o644)
    }

    fn open_file(&self, path: &str, extra: OFlags, mode: u32) -> Result<Arc<File>, FsError> {
        let fd = match self.open_beneath(path, OFlags::RDWR | extra, mode) {
            Err(Errno::ACCESS) | Err(Errno::ROFS) => {
                self.open_beneath(path, OFlags::RDONLY | extra, mode)
            }
            r => r,
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
        let file = Arc::new(File::from(fd));
        let mut cache = self.cache.lock();
        if cache.len() >= CACHE_CAPACITY {
            cache.clear();
        }
        cache.insert(path.to_string(), file.clone());
        Ok(file)
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
        let file = self.file(path)?;
        file.write_all_at(data, offset)
            .map_err(|e| FsError::io(std_errno(&e), "write", path))?;
        let mut dirty = self.dirty.lock();
        if !dirty.contains(path) {
            dirty.insert(path.to_string());
        }
        Ok(data.len() as u32)
    }

    /// `fsync` of one file.
    pub fn fsync(&self, path: &str) -> Result<(), FsError> {
        let file = self.file(path)?;
        rustix::fs::fsync(&*file).map_err(|e| FsError::io(e, "fsync", path))?;
        self.dirty.lock().remove(path);
        Ok(())
    }

    /// Fsyncs every file written since its last fsync (at shutdown). Returns how many, and the
    /// first failure.
    pub fn fsync_dirty(&self) -> (usize, Option<FsError>) {
        let paths: Vec<String> = self.dirty.lock().drain().collect();
        let mut first_err = None;
        for p in &paths {
            let r = self
                .file(p)
                .and_then(|f| rustix::fs::fsync(&*f).map_err(|e| FsError::io(e, "fsync", p)));
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        (paths.len(), first_err)
    }

    /// Attributes of `path` (following a symlink that stays beneath the root).
    pub fn lookup(&self, path: &str) -> Result<Attr, FsError> {
        let fd = self
            .open_beneath(path, OFlags::PATH, 0)
            .map_err(|e| FsError::io(e, "lookup", path))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io(e, "stat", path))?;
        Ok(attr_of(&st))
    }

    /// Creates a regular file (or keeps an existing one unless `exclusive`).
    pub fn create(&self, path: &str, mode: u32, exclusive: bool) -> Result<Attr, FsError> {
        split(path)?;
        let mut flags = OFlags::CREATE;
        if exclusive {
            flags |= OFlags::EXCL;
        }
        self.cache.lock().remove(path);
        let f = self.open_file(path, flags, mode & 0o7777)?;
        let st = rustix::fs::fstat(&*f).map_err(|e| FsError::io(e, "stat", path))?;
        Ok(attr_of(&st))
    }

    /// Opens `path` as `flags` asks (creating or truncating it if asked) and returns its attributes.
    pub fn open_with(&self, path: &str, flags: OpenFlags) -> Result<Attr, FsError> {
        let mut extra = OFlags::empty();
        if flags.has(OpenFlags::CREATE) {
            split(path)?;
            extra |= OFlags::CREATE;
        }
        let f = if extra.is_empty() {
            self.file(path)?
        } else {
            self.cache.lock().remove(path);
            self.open_file(path, extra, 0o644)?
        };
        if flags.has(OpenFlags::TRUNCATE) {
            rustix::fs::ftruncate(&*f, 0).map_err(|e| FsError::io(e, "truncate", path))?;
        }
        let st = rustix::fs::fstat(&*f).map_err(|e| FsError::io(e, "stat", path))?;
        Ok(attr_of(&st))
    }

    /// Sets the length of the file at `path`.
    pub fn truncate(&self, path: &str, size: u64) -> Result<(), FsError> {
        let f = self.file(path)?;
        rustix::fs::ftruncate(&*f, size).map_err(|e| FsError::io(e, "truncate", path))
    }

    /// Removes a file.
    pub fn unlink(&self, path: &str) -> Result<(), FsError> {
        let (parent, name) = split(path)?;
        let dir = self.parent(parent, "unlink", path)?;
        rustix::fs::unlinkat(&dir, name, AtFlags::empty())
            .map_err(|e| FsError::io(e, "unlink", path))?;
        self.forget_all();
        Ok(())
    }

    /// Creates a directory.
    pub fn mkdir(&self, path: &str, mode: u32) -> Result<(), FsError> {
        let (parent, name) = split(path)?;
        let dir = self.parent(parent, "mkdir", path)?;
        rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(mode & 0o7777))
            .map_err(|e| FsError::io(e, "mkdir", path))
    }

    /// Removes an empty directory.
    pub fn rmdir(&self, path: &str) -> Result<(), FsError> {
        let (parent, name) = split(path)?;
        let dir = self.parent(parent, "rmdir", path)?;
        rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR)
            .map_err(|e| FsError::io(e, "rmdir", path))?;
        self.forget_all();
        Ok(())
    }

    /// Renames `from` to `to`.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), FsError> {
        let (fp, fname) = split(from)?;
        let (tp, tname) = split(to)?;
        let fdir = self.parent(fp, "rename", from)?;
        let tdir = self.parent(tp, "rename", to)?;
        rustix::fs::renameat(&fdir, fname, &tdir, tname)
            .map_err(|e| FsError::io(e, "rename", from))?;
        self.forget_all();
        Ok(())
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

    /// Drops every cached descriptor (after a namespace change; files being served stay open
    /// through their `Arc`).
    fn forget_all(&self) {
        self.cache.lock().clear();
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
