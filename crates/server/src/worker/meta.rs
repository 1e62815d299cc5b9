//! Metadata requests as scheduled work, and the emulation of a slow back end behind them.
//!
//! # What it is
//! Every file-system metadata request (lookup, create, unlink, readdir, …) is a [`MetaOp`]: the
//! connection checks its paths, submits it to the runtime scheduler as an [`Op::Meta`] request,
//! and a worker serves it in the policy's order, as it serves reads and writes (DESIGN: "metadata
//! operations are scheduled requests like data, never a side path"). A create storm is then
//! queued, ordered and shared like any other load, instead of running beside the scheduler.
//!
//! # Cost
//! The policy sees a metadata request as `meta_cost_bytes` bytes (default one page), so that
//! byte-weighted policies (wfq, iosets across sets) charge it like a small request: with a cost of
//! zero a job could issue metadata for free. The completion reports 0 bytes moved, so job
//! statistics and bandwidth meters count the operation (`ops`) but no data.
//!
//! # The slow back end (seed 003)
//! On a parallel file system a metadata server's threads wait for the storage servers: a create
//! or an unlink touches every stripe object of the file, so its cost grows with the stripe
//! count, and when the storage servers are congested every service thread ends up blocked
//! (seed 003, "quite slow MDS response"). With `meta_latency_ms > 0` the worker that served an
//! operation holds its thread for `calls × meta_latency_ms` before completing it, `calls` being 1,
//! or the directory's stripe count for the operations that touch every stripe object
//! ([`MetaOp::touches_stripes`]). The stripe count is the parent directory's extended attribute
//! [`STRIPE_COUNT_XATTR`] (like `lfs setstripe -c N dir`), else `meta_fanout`.
//!
//! # What it is not
//! Not a metadata server: the operations run on the backing file system at once; only the waiting
//! is emulated. The emulated time is counted from the calls (`calls × latency`), not measured.

use iosets_proto::{Attr, Creds, OpCode, OpenFlags, Reply, Request, SetAttr};
use rustix::io::Errno;

use crate::root::{check_path, FsError, Root};

#[cfg(doc)]
use iosets_types::Op;

/// The extended attribute of a backing directory that gives the stripe count of the files in it
/// (an ASCII decimal, e.g. `setfattr -n user.iosets.stripe_count -v 8 dir`).
pub(crate) const STRIPE_COUNT_XATTR: &str = "user.iosets.stripe_count";

/// The largest stripe count accepted, from the attribute or `meta_fanout` (Lustre's own limit
/// is 2000 stripes; the bound only rejects nonsense).
pub(crate) const MAX_FANOUT: u32 = 4096;

/// Longest attribute value read: a stripe count has at most a few digits (the rest is room for
/// surrounding whitespace); a longer value is malformed.
const XATTR_MAX: usize = 32;

/// A metadata request, its paths checked ([`check_path`]): what a worker serves.
#[derive(Debug)]
pub(crate) enum MetaOp {
    /// Attributes, following a final symlink.
    Lookup { path: String },
    /// Attributes of the object itself.
    Lstat { path: String },
    /// Create a regular file.
    Create {
        path: String,
        mode: u32,
        exclusive: bool,
    },
    /// Create a special file.
    Mknod { path: String, mode: u32, rdev: u64 },
    /// Create a symbolic link.
    Symlink { path: String, target: String },
    /// Read a symbolic link.
    Readlink { path: String },
    /// A new name for a file.
    Link { from: String, to: String },
    /// Change attributes.
    Setattr { path: String, set: SetAttr },
    /// Capacity of the file system.
    Statfs,
    /// Open (and perhaps create or truncate).
    Open { path: String, flags: OpenFlags },
    /// Set a file's length.
    Truncate { path: String, size: u64 },
    /// Remove a file.
    Unlink { path: String },
    /// Create a directory.
    Mkdir { path: String, mode: u32 },
    /// Remove an empty directory.
    Rmdir { path: String },
    /// List a directory.
    Readdir { path: String },
    /// List a directory with every entry's attributes.
    ReaddirPlus { path: String },
    /// Rename.
    Rename { from: String, to: String },
}

/// Every metadata operation, in the order of [`MetaOp::index`] (the server's per-operation
/// counters).
pub(crate) const META_OPS: [OpCode; 17] = [
    OpCode::Lookup,
    OpCode::Lstat,
    OpCode::Create,
    OpCode::Mknod,
    OpCode::Symlink,
    OpCode::Readlink,
    OpCode::Link,
    OpCode::Setattr,
    OpCode::Statfs,
    OpCode::Open,
    OpCode::Truncate,
    OpCode::Unlink,
    OpCode::Mkdir,
    OpCode::Rmdir,
    OpCode::Readdir,
    OpCode::ReaddirPlus,
    OpCode::Rename,
];

impl MetaOp {
    /// The metadata request `req`, its paths checked. A data, transport or control request is
    /// refused (`EPROTO`): the connection routes those elsewhere.
    pub(crate) fn checked(req: Request) -> Result<MetaOp, FsError> {
        Ok(match req {
            Request::Lookup { path } => MetaOp::Lookup {
                path: check_path(&path)?,
            },
            Request::Lstat { path } => MetaOp::Lstat {
                path: check_path(&path)?,
            },
            Request::Create {
                path,
                mode,
                exclusive,
            } => MetaOp::Create {
                path: check_path(&path)?,
                mode,
                exclusive,
            },
            Request::Mknod { path, mode, rdev } => MetaOp::Mknod {
                path: check_path(&path)?,
                mode,
                rdev,
            },
            Request::Symlink { path, target } => MetaOp::Symlink {
                path: check_path(&path)?,
                target,
            },
            Request::Readlink { path } => MetaOp::Readlink {
                path: check_path(&path)?,
            },
            Request::Link { from, to } => MetaOp::Link {
                from: check_path(&from)?,
                to: check_path(&to)?,
            },
            Request::Setattr { path, set } => MetaOp::Setattr {
                path: check_path(&path)?,
                set,
            },
            Request::Statfs => MetaOp::Statfs,
            Request::Open { path, flags } => MetaOp::Open {
                path: check_path(&path)?,
                flags,
            },
            Request::Truncate { path, size } => MetaOp::Truncate {
                path: check_path(&path)?,
                size,
            },
            Request::Unlink { path } => MetaOp::Unlink {
                path: check_path(&path)?,
            },
            Request::Mkdir { path, mode } => MetaOp::Mkdir {
                path: check_path(&path)?,
                mode,
            },
            Request::Rmdir { path } => MetaOp::Rmdir {
                path: check_path(&path)?,
            },
            Request::Readdir { path } => MetaOp::Readdir {
                path: check_path(&path)?,
            },
            Request::ReaddirPlus { path } => MetaOp::ReaddirPlus {
                path: check_path(&path)?,
            },
            Request::Rename { from, to } => MetaOp::Rename {
                from: check_path(&from)?,
                to: check_path(&to)?,
            },
            Request::Read { .. }
            | Request::Write { .. }
            | Request::ReadShared { .. }
            | Request::WriteShared { .. }
            | Request::Fsync { .. }
            | Request::LocalTransport
            | Request::Auth { .. }
            | Request::AttachRegion { .. }
            | Request::PhaseEnd
            | Request::JobName { .. }
            | Request::Control { .. } => {
                return Err(FsError {
                    errno: Errno::PROTO.raw_os_error(),
                    message: format!(
                        "internal: {} request routed to the metadata path",
                        req.op().as_str()
                    ),
                })
            }
        })
    }

    /// The protocol operation.
    pub(crate) fn opcode(&self) -> OpCode {
        match self {
            MetaOp::Lookup { .. } => OpCode::Lookup,
            MetaOp::Lstat { .. } => OpCode::Lstat,
            MetaOp::Create { .. } => OpCode::Create,
            MetaOp::Mknod { .. } => OpCode::Mknod,
            MetaOp::Symlink { .. } => OpCode::Symlink,
            MetaOp::Readlink { .. } => OpCode::Readlink,
            MetaOp::Link { .. } => OpCode::Link,
            MetaOp::Setattr { .. } => OpCode::Setattr,
            MetaOp::Statfs => OpCode::Statfs,
            MetaOp::Open { .. } => OpCode::Open,
            MetaOp::Truncate { .. } => OpCode::Truncate,
            MetaOp::Unlink { .. } => OpCode::Unlink,
            MetaOp::Mkdir { .. } => OpCode::Mkdir,
            MetaOp::Rmdir { .. } => OpCode::Rmdir,
            MetaOp::Readdir { .. } => OpCode::Readdir,
            MetaOp::ReaddirPlus { .. } => OpCode::ReaddirPlus,
            MetaOp::Rename { .. } => OpCode::Rename,
        }
    }

    /// Its place in [`META_OPS`].
    pub(crate) fn index(&self) -> usize {
        let op = self.opcode();
        META_OPS
            .iter()
            .position(|&o| o == op)
            .expect("META_OPS lists every metadata operation")
    }

    /// The path the operation targets: its file id for the scheduler is the path's FNV-1a
    /// hash, as for data requests. The source for `link` and `rename`; `.` (the root) for
    /// `statfs`.
    pub(crate) fn target(&self) -> &str {
        match self {
            MetaOp::Lookup { path }
            | MetaOp::Lstat { path }
            | MetaOp::Create { path, .. }
            | MetaOp::Mknod { path, .. }
            | MetaOp::Symlink { path, .. }
            | MetaOp::Readlink { path }
            | MetaOp::Setattr { path, .. }
            | MetaOp::Open { path, .. }
            | MetaOp::Truncate { path, .. }
            | MetaOp::Unlink { path }
            | MetaOp::Mkdir { path, .. }
            | MetaOp::Rmdir { path }
            | MetaOp::Readdir { path }
            | MetaOp::ReaddirPlus { path } => path,
            MetaOp::Link { from, .. } | MetaOp::Rename { from, .. } => from,
            MetaOp::Statfs => ".",
        }
    }

    /// Whether the operation touches every stripe object of its file on a parallel file system
    /// (Lustre creates, destroys or relinks the objects on every storage target of the layout),
    /// so that its back-end calls are the stripe count, not one. `mkdir` and `rmdir` make or
    /// remove no data objects; `open` with `CREATE` is counted as an open (it usually finds the
    /// file: the kernel asks `create` for a new one).
    pub(crate) fn touches_stripes(&self) -> bool {
        matches!(
            self,
            MetaOp::Create { .. }
                | MetaOp::Mknod { .. }
                | MetaOp::Unlink { .. }
                | MetaOp::Link { .. }
                | MetaOp::Rename { .. }
                | MetaOp::Symlink { .. }
        )
    }

    /// Does the operation on the backing store (the caller's credentials own what it creates).
    pub(crate) fn serve(&self, root: &Root, creds: Option<Creds>) -> Result<Reply, FsError> {
        match self {
            MetaOp::Lookup { path } => root.lookup(path).map(Reply::Attr),
            MetaOp::Lstat { path } => root.lstat(path).map(Reply::Attr),
            MetaOp::Create {
                path,
                mode,
                exclusive,
            } => root
                .create(path, *mode, *exclusive, creds)
                .map(|(attr, dir)| entry(attr, dir)),
            MetaOp::Mknod { path, mode, rdev } => {
                root.mknod(path, *mode, *rdev, creds).map(Reply::Attr)
            }
            MetaOp::Symlink { path, target } => root.symlink(path, target, creds).map(Reply::Attr),
            MetaOp::Readlink { path } => root.readlink(path).map(|t| Reply::Data(t.into())),
            MetaOp::Link { from, to } => root.link(from, to).map(Reply::Attr),
            MetaOp::Setattr { path, set } => root.setattr(path, set).map(Reply::Attr),
            MetaOp::Statfs => root.statfs().map(Reply::Statfs),
            MetaOp::Open { path, flags } => root.open_with(path, *flags).map(Reply::Attr),
            MetaOp::Truncate { path, size } => root.truncate(path, *size).map(|()| Reply::Done),
            MetaOp::Unlink { path } => root.unlink(path).map(removed),
            MetaOp::Mkdir { path, mode } => root
                .mkdir(path, *mode, creds)
                .map(|(attr, dir)| entry(attr, dir)),
            MetaOp::Rmdir { path } => root.rmdir(path).map(removed),
            MetaOp::Readdir { path } => root.readdir(path).map(Reply::Entries),
            MetaOp::ReaddirPlus { path } => root.readdir_plus(path).map(Reply::EntriesPlus),
            MetaOp::Rename { from, to } => root.rename(from, to).map(|()| Reply::Done),
        }
    }

    /// How many calls to the emulated back end the operation makes: its parent directory's
    /// stripe count ([`STRIPE_COUNT_XATTR`], else `default_fanout`) if it
    /// [touches every stripe](MetaOp::touches_stripes), else 1. Reads the attribute, so call it
    /// only when the back end is emulated.
    pub(crate) fn backend_calls(&self, root: &Root, default_fanout: u32) -> u32 {
        if !self.touches_stripes() {
            return 1;
        }
        let path = self.target();
        match root.parent_xattr(path, STRIPE_COUNT_XATTR, XATTR_MAX) {
            Ok(None) => default_fanout,
            Ok(Some(value)) => parse_stripe_count(&value).unwrap_or_else(|| {
                tracing::debug!(
                    path,
                    value = %String::from_utf8_lossy(&value),
                    "malformed {STRIPE_COUNT_XATTR}: using meta_fanout"
                );
                default_fanout
            }),
            Err(e) => {
                tracing::debug!(path, error = %e.message, "{STRIPE_COUNT_XATTR} unreadable: using meta_fanout");
                default_fanout
            }
        }
    }
}

/// The answer to a new entry whose attributes are `attr`: with its directory's after the
/// change ([`Reply::Entry`]), or without them if the directory could not be stat'ed.
fn entry(attr: Attr, dir: Option<Attr>) -> Reply {
    match dir {
        Some(dir) => Reply::Entry { attr, dir },
        None => Reply::Attr(attr),
    }
}

/// The answer to a removal: its directory's attributes after the change ([`Reply::Removed`]),
/// or [`Reply::Done`] if the directory could not be stat'ed.
fn removed(dir: Option<Attr>) -> Reply {
    dir.map_or(Reply::Done, |dir| Reply::Removed { dir })
}

/// A stripe count written in an extended attribute: ASCII digits, surrounding ASCII whitespace
/// allowed (a value written with `echo`), in `1..=MAX_FANOUT`. `None` for anything else (no
/// sign, no fraction, no zero).
pub(crate) fn parse_stripe_count(value: &[u8]) -> Option<u32> {
    let digits = value.trim_ascii();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // All ASCII digits: valid UTF-8; too many digits overflow and are refused by `parse`.
    let n: u32 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    (1..=MAX_FANOUT).contains(&n).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripe_counts_are_plain_decimals_in_range() {
        assert_eq!(parse_stripe_count(b"5"), Some(5));
        assert_eq!(parse_stripe_count(b" 12\n"), Some(12));
        assert_eq!(parse_stripe_count(b"4096"), Some(MAX_FANOUT));
        for bad in [
            &b""[..],
            b" ",
            b"0",
            b"4097",
            b"-3",
            b"+3",
            b"1.5",
            b"5 stripes",
            b"0x10",
            b"99999999999999999999",
            b"\xff\xfe",
        ] {
            assert_eq!(parse_stripe_count(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn every_metadata_request_becomes_its_operation() {
        let reqs = [
            Request::Lookup { path: "a".into() },
            Request::Lstat { path: "a".into() },
            Request::Create {
                path: "d/a".into(),
                mode: 0o644,
                exclusive: true,
            },
            Request::Mknod {
                path: "a".into(),
                mode: 0o644,
                rdev: 0,
            },
            Request::Symlink {
                path: "a".into(),
                target: "b".into(),
            },
            Request::Readlink { path: "a".into() },
            Request::Link {
                from: "x/a".into(),
                to: "b".into(),
            },
            Request::Setattr {
                path: "a".into(),
                set: SetAttr::default(),
            },
            Request::Statfs,
            Request::Open {
                path: "a".into(),
                flags: OpenFlags::default(),
            },
            Request::Truncate {
                path: "a".into(),
                size: 1,
            },
            Request::Unlink { path: "a".into() },
            Request::Mkdir {
                path: "a".into(),
                mode: 0o755,
            },
            Request::Rmdir { path: "a".into() },
            Request::Readdir { path: "".into() },
            Request::ReaddirPlus { path: "".into() },
            Request::Rename {
                from: "./y//a".into(),
                to: "b".into(),
            },
        ];
        let mut seen = [false; META_OPS.len()];
        for req in reqs {
            let code = req.op();
            let op = MetaOp::checked(req).unwrap();
            assert_eq!(op.opcode(), code);
            assert_eq!(META_OPS[op.index()], code);
            seen[op.index()] = true;
            let want_target = match code {
                OpCode::Create => "d/a",
                OpCode::Link => "x/a",
                OpCode::Rename => "y/a",
                OpCode::Statfs | OpCode::Readdir | OpCode::ReaddirPlus => ".",
                _ => "a",
            };
            assert_eq!(op.target(), want_target, "{code:?}");
        }
        assert!(seen.iter().all(|&s| s), "every operation has a request");
    }

    #[test]
    fn paths_are_checked_before_scheduling_and_data_is_refused() {
        let e = MetaOp::checked(Request::Unlink {
            path: "../x".into(),
        })
        .unwrap_err();
        assert_eq!(e.errno, Errno::ACCESS.raw_os_error());
        let e = MetaOp::checked(Request::Rename {
            from: "a".into(),
            to: "/etc/passwd".into(),
        })
        .unwrap_err();
        assert_eq!(e.errno, Errno::ACCESS.raw_os_error());
        let e = MetaOp::checked(Request::Fsync { path: "a".into() }).unwrap_err();
        assert_eq!(e.errno, Errno::PROTO.raw_os_error());
    }

    #[test]
    fn only_object_changing_operations_fan_out() {
        let fan = |req| MetaOp::checked(req).unwrap().touches_stripes();
        assert!(fan(Request::Create {
            path: "a".into(),
            mode: 0,
            exclusive: false
        }));
        assert!(fan(Request::Unlink { path: "a".into() }));
        assert!(fan(Request::Rename {
            from: "a".into(),
            to: "b".into()
        }));
        assert!(!fan(Request::Mkdir {
            path: "a".into(),
            mode: 0
        }));
        assert!(!fan(Request::Rmdir { path: "a".into() }));
        assert!(!fan(Request::Lookup { path: "a".into() }));
        assert!(!fan(Request::Open {
            path: "a".into(),
            flags: OpenFlags::default()
        }));
    }
}
