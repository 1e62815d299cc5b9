//! The protocol's messages as values.

use bytes::Bytes;
use iosets_types::{JobId, Priority, UnixNanos};

/// What every frame carries besides its operation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Header {
    /// The client's tag for the request; the response echoes it. Unique among a connection's
    /// outstanding requests.
    pub tag: u64,
    /// The job the request is done for (Slurm's job id, `IOSETS_JOB_ID`).
    pub job: JobId,
    /// A priority the client suggests for its job; the server's control plane overrides it.
    pub priority: Option<Priority>,
    /// Whom the request is done for, when the client acts for a local user (the mount): the
    /// server gives files and directories it creates this owner and, running as root, does the
    /// request as this user, so the kernel checks its permissions there too (as an NFS server
    /// checks `AUTH_SYS` credentials against modes). Which client may claim users at all is
    /// the cluster secret's business.
    pub creds: Option<Creds>,
    /// When the job's current I/O phase started, in UNIX-epoch nanoseconds of the client's clock
    /// (the mount stamps every request of a phase with the same value). Servers order the jobs of
    /// an IO-SETS set by it, so all of them pick the same job without talking to each other.
    pub phase: Option<UnixNanos>,
    /// How much of the job this client had served by the job's *other* servers since its last
    /// request to this one (Ceph dmClock's `delta`): a server charges it to the job's rates and
    /// reservations, so that they hold job-wide across servers with no central controller.
    pub elsewhere: Option<Elsewhere>,
}

impl Header {
    /// The header of request `tag` of `job` and nothing more: no priority, credentials, phase
    /// or service elsewhere.
    pub fn new(tag: u64, job: JobId) -> Header {
        Header {
            tag,
            job,
            priority: None,
            creds: None,
            phase: None,
            elsewhere: None,
        }
    }
}

/// Service a job received from other servers (see [`Header::elsewhere`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Elsewhere {
    /// Requests completed.
    pub ops: u32,
    /// Bytes they moved.
    pub bytes: u64,
}

/// A caller's user and groups (the file system credentials the client's kernel gave it), as
/// NFS's `AUTH_SYS` carries them: a server that can act as other users checks every operation
/// against them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Creds {
    /// The user id.
    pub uid: u32,
    /// The (primary, or file system) group id.
    pub gid: u32,
    /// Supplementary groups, at most [`Groups::MAX`].
    pub groups: Groups,
}

impl Creds {
    /// `uid` and `gid` with no supplementary group.
    pub fn new(uid: u32, gid: u32) -> Creds {
        Creds {
            uid,
            gid,
            groups: Groups::default(),
        }
    }
}

/// Supplementary group ids, at most [`Groups::MAX`] (fixed storage, so that a header stays
/// `Copy`). Unused slots are zero, so equal lists compare equal.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Groups {
    len: u8,
    ids: [u32; Groups::MAX],
}

impl Groups {
    /// The most groups a header carries: 16, NFS `AUTH_SYS`'s limit. A caller in more groups
    /// is sent with its first 16 (as an NFS client does), so an access granted only through a
    /// later group is refused by a server that checks.
    pub const MAX: usize = 16;

    /// The first [`Groups::MAX`] of `ids`, in order.
    pub fn new(ids: &[u32]) -> Groups {
        let mut g = Groups::default();
        let n = ids.len().min(Groups::MAX);
        g.ids[..n].copy_from_slice(&ids[..n]);
        g.len = n as u8;
        g
    }

    /// The group ids.
    pub fn as_slice(&self) -> &[u32] {
        &self.ids[..usize::from(self.len)]
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Debug for Groups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// The kind byte of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A client's request.
    Request = 1,
    /// A server's response.
    Response = 2,
}

/// The operation codes on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum OpCode {
    Lookup = 1,
    Create = 2,
    Open = 3,
    Read = 4,
    Write = 5,
    Fsync = 6,
    Truncate = 7,
    Unlink = 8,
    Mkdir = 9,
    Rmdir = 10,
    Readdir = 11,
    Rename = 12,
    Lstat = 13,
    Setattr = 14,
    Symlink = 15,
    Readlink = 16,
    Mknod = 17,
    Link = 18,
    Statfs = 19,
    /// Which same-host transport the server offers ([`Request::LocalTransport`]).
    LocalTransport = 20,
    /// Attach a shared region to a same-host connection ([`Request::AttachRegion`]).
    AttachRegion = 21,
    /// The job's I/O phase stamped in the header is over ([`Request::PhaseEnd`]).
    PhaseEnd = 22,
    /// Node authentication ([`Request::Auth`], [`Reply::Challenge`], [`Reply::Authenticated`]).
    Auth = 23,
    /// A listing with every entry's attributes ([`Request::ReaddirPlus`]).
    ReaddirPlus = 24,
    /// The header's job's name ([`Request::JobName`]).
    JobName = 25,
    SetPriority = 64,
    ClearPriority = 65,
    Policy = 66,
    Jobs = 67,
    Stats = 68,
    /// Add a quota rule ([`Control::RuleAdd`]).
    RuleAdd = 69,
    /// Delete a quota rule ([`Control::RuleDel`]).
    RuleDel = 70,
    /// List the quota rules ([`Control::Rules`]).
    Rules = 71,
    /// Set or clear a share weight of the fair-share tree ([`Control::ShareSet`]).
    ShareSet = 72,
    /// Tell a job's account and node count ([`Control::JobInfo`]).
    JobInfo = 73,
    /// List the share weights and the jobs' accounts ([`Control::Shares`]).
    Shares = 74,
}

impl OpCode {
    /// The operation of code `code`, if there is one.
    pub fn from_u8(code: u8) -> Option<OpCode> {
        use OpCode::*;
        Some(match code {
            1 => Lookup,
            2 => Create,
            3 => Open,
            4 => Read,
            5 => Write,
            6 => Fsync,
            7 => Truncate,
            8 => Unlink,
            9 => Mkdir,
            10 => Rmdir,
            11 => Readdir,
            12 => Rename,
            13 => Lstat,
            14 => Setattr,
            15 => Symlink,
            16 => Readlink,
            17 => Mknod,
            18 => Link,
            19 => Statfs,
            20 => LocalTransport,
            21 => AttachRegion,
            22 => PhaseEnd,
            23 => Auth,
            24 => ReaddirPlus,
            25 => JobName,
            64 => SetPriority,
            65 => ClearPriority,
            66 => Policy,
            67 => Jobs,
            68 => Stats,
            69 => RuleAdd,
            70 => RuleDel,
            71 => Rules,
            72 => ShareSet,
            73 => JobInfo,
            74 => Shares,
            _ => return None,
        })
    }

    /// The lower-case name used in metrics and logs.
    pub fn as_str(self) -> &'static str {
        use OpCode::*;
        match self {
            Lookup => "lookup",
            Create => "create",
            Open => "open",
            Read => "read",
            Write => "write",
            Fsync => "fsync",
            Truncate => "truncate",
            Unlink => "unlink",
            Mkdir => "mkdir",
            Rmdir => "rmdir",
            Readdir => "readdir",
            ReaddirPlus => "readdirplus",
            Rename => "rename",
            Lstat => "lstat",
            Setattr => "setattr",
            Symlink => "symlink",
            Readlink => "readlink",
            Mknod => "mknod",
            Link => "link",
            Statfs => "statfs",
            LocalTransport => "local_transport",
            AttachRegion => "attach_region",
            PhaseEnd => "phase_end",
            JobName => "job_name",
            Auth => "auth",
            SetPriority => "set_priority",
            ClearPriority => "clear_priority",
            Policy => "policy",
            Jobs => "jobs",
            Stats => "stats",
            RuleAdd => "rule-add",
            RuleDel => "rule-del",
            Rules => "rules",
            ShareSet => "share-set",
            JobInfo => "job-info",
            Shares => "shares",
        }
    }
}

/// How [`Request::Open`] opens a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct OpenFlags(pub u32);

impl OpenFlags {
    /// Open for reading.
    pub const READ: u32 = 1;
    /// Open for writing.
    pub const WRITE: u32 = 2;
    /// Create the file if it does not exist.
    pub const CREATE: u32 = 4;
    /// Truncate it to zero length.
    pub const TRUNCATE: u32 = 8;
    /// Every defined bit.
    pub const ALL: u32 = 15;

    /// Whether `bit` is set.
    pub fn has(self, bit: u32) -> bool {
        self.0 & bit != 0
    }
}

/// A client's request. Paths are relative to the server's root, `/`-separated, without `..`.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// The attributes of a path (stat).
    Lookup {
        /// The path.
        path: String,
    },
    /// Create a regular file.
    Create {
        /// The path.
        path: String,
        /// Permission bits (`0o644`), masked by the server's umask.
        mode: u32,
        /// Fail with `EEXIST` if it exists (otherwise an existing file is kept as is).
        exclusive: bool,
    },
    /// Check that a file can be opened this way (creating or truncating it if asked).
    Open {
        /// The path.
        path: String,
        /// How.
        flags: OpenFlags,
    },
    /// Read up to `len` bytes at `offset` (fewer at the end of the file).
    Read {
        /// The path.
        path: String,
        /// Byte offset.
        offset: u64,
        /// How many bytes.
        len: u32,
    },
    /// Write `data` at `offset` (the file must exist).
    Write {
        /// The path.
        path: String,
        /// Byte offset.
        offset: u64,
        /// The bytes.
        data: Bytes,
    },
    /// Flush a file's data to stable storage.
    Fsync {
        /// The path.
        path: String,
    },
    /// Set a file's length.
    Truncate {
        /// The path.
        path: String,
        /// The new length.
        size: u64,
    },
    /// Remove a file.
    Unlink {
        /// The path.
        path: String,
    },
    /// Create a directory.
    Mkdir {
        /// The path.
        path: String,
        /// Permission bits.
        mode: u32,
    },
    /// Remove an empty directory.
    Rmdir {
        /// The path.
        path: String,
    },
    /// List a directory (without `.` and `..`), sorted by name.
    Readdir {
        /// The path (`""` or `"."` for the root).
        path: String,
    },
    /// List a directory as [`Request::Readdir`] does, each entry with its attributes (as
    /// [`Request::Lstat`] gives them; an entry gone before its `lstat` is left out): one request
    /// for `ls -l` instead of one per entry.
    ReaddirPlus {
        /// The path (`""` or `"."` for the root).
        path: String,
    },
    /// Rename `from` to `to`, replacing `to` if it exists.
    Rename {
        /// The old path.
        from: String,
        /// The new path.
        to: String,
    },
    /// The attributes of a path without following a final symlink (lstat).
    Lstat {
        /// The path.
        path: String,
    },
    /// Change attributes (chmod, chown, truncate, utimens) of a path, without following a final
    /// symlink; answers the new attributes.
    Setattr {
        /// The path.
        path: String,
        /// What to change.
        set: SetAttr,
    },
    /// Create a symbolic link at `path` pointing to `target` (stored as given, never followed
    /// by the server).
    Symlink {
        /// The link's path.
        path: String,
        /// What it points to.
        target: String,
    },
    /// The target of a symbolic link (answered as [`Reply::Data`]).
    Readlink {
        /// The link's path.
        path: String,
    },
    /// Create a special file (FIFO, socket, device) or a regular file; `mode` carries the
    /// file type bits (`S_IFIFO`...) and the permission bits.
    Mknod {
        /// The path.
        path: String,
        /// Type and permission bits.
        mode: u32,
        /// The device number, for character and block devices.
        rdev: u64,
    },
    /// Make `to` a new name (hard link) of the file at `from`.
    Link {
        /// The existing path.
        from: String,
        /// The new name.
        to: String,
    },
    /// The backing file system's capacity ([`Reply::Statfs`]).
    Statfs,
    /// Read up to `len` bytes at `offset` into the connection's shared region at `at`, instead
    /// of into the reply ([`Reply::Placed`]). Only on a same-host connection with a region
    /// attached ([`crate::local`]); on the wire an [`OpCode::Read`] with flag bit 2.
    ReadShared {
        /// The path.
        path: String,
        /// Byte offset in the file.
        offset: u64,
        /// How many bytes.
        len: u32,
        /// Where in the shared region the bytes go.
        at: u64,
    },
    /// Write the `len` bytes found at `at` in the connection's shared region into the file at
    /// `offset` ([`Reply::Written`]). Only on a same-host connection with a region attached; on
    /// the wire an [`OpCode::Write`] with flag bit 2.
    WriteShared {
        /// The path.
        path: String,
        /// Byte offset in the file.
        offset: u64,
        /// How many bytes.
        len: u32,
        /// Where in the shared region the bytes are.
        at: u64,
    },
    /// Which same-host transport the server offers ([`Reply::LocalTransport`]); `ENOTSUP` when
    /// none.
    LocalTransport,
    /// The I/O phase whose stamp the header carries is over for the header's job: the client had
    /// nothing of that job left in flight. Sent (to the servers the phase touched) the moment the
    /// job's last request is answered, so a server that kept the job's set through gaps of the
    /// phase (its requests momentarily all on other servers) passes the set on at once. Answered
    /// [`Reply::Done`].
    PhaseEnd,
    /// The name of the header's job, as the client names it (`IOSETS_JOB_ID`, Slurm's job id,
    /// `procname.uid`): the job id is made from the name (`JobId::of_name`), so the server
    /// checks that they agree and keeps the name for its reports and for `job=` patterns of its
    /// quota rules. Sent once per job on each connection, before the job's first request.
    /// Answered [`Reply::Done`]; `EINVAL` if the name is not the job's.
    JobName {
        /// The name.
        name: String,
    },
    /// The first request on a same-host connection: the client's shared region, `len` bytes,
    /// whose descriptor travels with this frame (`SCM_RIGHTS`). Answered [`Reply::Attached`].
    AttachRegion {
        /// The region's length in bytes (the server checks it against the descriptor).
        len: u64,
    },
    /// The answer to a server's [`Reply::Challenge`] (the first frame a server with a cluster
    /// secret sends): the client's own nonce and its proof of the secret over both nonces
    /// ([`crate::auth`]). Answered [`Reply::Authenticated`] with the server's proof, or an
    /// `EACCES` error and a closed connection.
    Auth {
        /// The client's nonce.
        nonce: [u8; crate::auth::NONCE_LEN],
        /// HMAC-SHA256 of the secret over both nonces (client side).
        proof: [u8; crate::auth::PROOF_LEN],
    },
    /// A control request, authenticated by the server's control token.
    Control {
        /// The token.
        token: String,
        /// What to do.
        op: Control,
    },
}

impl Request {
    /// The request's operation code.
    pub fn op(&self) -> OpCode {
        match self {
            Request::Lookup { .. } => OpCode::Lookup,
            Request::Create { .. } => OpCode::Create,
            Request::Open { .. } => OpCode::Open,
            Request::Read { .. } => OpCode::Read,
            Request::Write { .. } => OpCode::Write,
            Request::Fsync { .. } => OpCode::Fsync,
            Request::Truncate { .. } => OpCode::Truncate,
            Request::Unlink { .. } => OpCode::Unlink,
            Request::Mkdir { .. } => OpCode::Mkdir,
            Request::Rmdir { .. } => OpCode::Rmdir,
            Request::Readdir { .. } => OpCode::Readdir,
            Request::ReaddirPlus { .. } => OpCode::ReaddirPlus,
            Request::Rename { .. } => OpCode::Rename,
            Request::Lstat { .. } => OpCode::Lstat,
            Request::Setattr { .. } => OpCode::Setattr,
            Request::Symlink { .. } => OpCode::Symlink,
            Request::Readlink { .. } => OpCode::Readlink,
            Request::Mknod { .. } => OpCode::Mknod,
            Request::Link { .. } => OpCode::Link,
            Request::Statfs => OpCode::Statfs,
            Request::ReadShared { .. } => OpCode::Read,
            Request::WriteShared { .. } => OpCode::Write,
            Request::LocalTransport => OpCode::LocalTransport,
            Request::PhaseEnd => OpCode::PhaseEnd,
            Request::JobName { .. } => OpCode::JobName,
            Request::AttachRegion { .. } => OpCode::AttachRegion,
            Request::Auth { .. } => OpCode::Auth,
            Request::Control { op, .. } => op.op(),
        }
    }

    /// Whether sending it twice has the same effect as sending it once, so a client may retry
    /// it after a lost connection.
    pub fn is_idempotent(&self) -> bool {
        match self {
            Request::Lookup { .. }
            | Request::Read { .. }
            | Request::Write { .. }
            | Request::Fsync { .. }
            | Request::Truncate { .. }
            | Request::Readdir { .. }
            | Request::ReaddirPlus { .. }
            | Request::Lstat { .. }
            | Request::Setattr { .. }
            | Request::Readlink { .. }
            | Request::Statfs
            | Request::ReadShared { .. }
            | Request::WriteShared { .. }
            | Request::LocalTransport
            | Request::PhaseEnd
            | Request::JobName { .. }
            | Request::AttachRegion { .. } => true,
            Request::Create { exclusive, .. } => !exclusive,
            Request::Open { flags, .. } => !flags.has(OpenFlags::TRUNCATE),
            Request::Control { op, .. } => !matches!(op, Control::Policy { .. }),
            Request::Unlink { .. }
            | Request::Mkdir { .. }
            | Request::Rmdir { .. }
            | Request::Rename { .. }
            | Request::Symlink { .. }
            | Request::Mknod { .. }
            | Request::Link { .. } => false,
            // A proof answers one challenge, on one connection.
            Request::Auth { .. } => false,
        }
    }
}

/// A time to set ([`SetAttr`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetTime {
    /// The server's current time (`UTIME_NOW`).
    Now,
    /// Nanoseconds since the Unix epoch.
    At(i64),
}

/// The attribute changes of a [`Request::Setattr`]; `None` leaves an attribute as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SetAttr {
    /// New permission bits (`0o7777` at most).
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New length (regular files).
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<SetTime>,
    /// New modification time.
    pub mtime: Option<SetTime>,
}

/// Control operations (`iosets ctl`).
#[derive(Clone, Debug, PartialEq)]
pub enum Control {
    /// Give a job a priority (the control plane's value overrides client hints).
    SetPriority {
        /// The job.
        job: JobId,
        /// Its priority.
        priority: Priority,
    },
    /// Forget the priority the control plane gave a job.
    ClearPriority {
        /// The job.
        job: JobId,
    },
    /// Switch the scheduling policy; queued requests move to the new one.
    Policy {
        /// The policy's registry name.
        name: String,
        /// Its tunables.
        options: Vec<(String, String)>,
    },
    /// Per-job statistics ([`JobsReport`](crate::JobsReport) as JSON).
    Jobs,
    /// Server statistics ([`ServerReport`](crate::ServerReport) as JSON).
    Stats,
    /// Add a quota rule at run time: `rule` is a JSON object with the keys of a `[[rule]]`
    /// table of the server's quota file (`name`, `match`, `threads_pct`, `rate_ops`,
    /// `rate_bytes`, `strict`, `reserve_ops`, `weight`); `rank`: its position among the rules
    /// (rules are tried in order), `None` for last.
    RuleAdd {
        /// The rule, as JSON.
        rule: String,
        /// Its position, 0 first.
        rank: Option<u32>,
    },
    /// Delete the quota rule of this name.
    RuleDel {
        /// The rule's name.
        name: String,
    },
    /// The quota rules and their counters ([`RulesReport`](crate::RulesReport) as JSON).
    Rules,
    /// Set (`Some`, > 0) or clear (`None`) the share weight of a node of the fair-share tree:
    /// `account=NAME`, `user=NAME|UID` or `job=ID`. Kept in the server's state file.
    ShareSet {
        /// The node, `level=name`.
        node: String,
        /// Its weight; `None` puts it back to 1.
        weight: Option<f64>,
    },
    /// What Slurm knows of a job: its account and node count (both `None`: forget them).
    JobInfo {
        /// The job.
        job: JobId,
        /// Its account.
        account: Option<String>,
        /// How many nodes it runs on (> 0).
        nodes: Option<u32>,
    },
    /// The share weights and the jobs' accounts ([`SharesReport`](crate::SharesReport) as
    /// JSON).
    Shares,
}

impl Control {
    /// The operation code.
    pub fn op(&self) -> OpCode {
        match self {
            Control::SetPriority { .. } => OpCode::SetPriority,
            Control::ClearPriority { .. } => OpCode::ClearPriority,
            Control::Policy { .. } => OpCode::Policy,
            Control::Jobs => OpCode::Jobs,
            Control::Stats => OpCode::Stats,
            Control::RuleAdd { .. } => OpCode::RuleAdd,
            Control::RuleDel { .. } => OpCode::RuleDel,
            Control::Rules => OpCode::Rules,
            Control::ShareSet { .. } => OpCode::ShareSet,
            Control::JobInfo { .. } => OpCode::JobInfo,
            Control::Shares => OpCode::Shares,
        }
    }
}

/// The type of a directory entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum FileKind {
    File = 1,
    Dir = 2,
    Symlink = 3,
    /// A special file of no type below.
    Other = 4,
    Fifo = 5,
    Socket = 6,
    CharDevice = 7,
    BlockDevice = 8,
}

impl FileKind {
    pub(crate) fn from_u8(v: u8) -> Option<FileKind> {
        Some(match v {
            1 => FileKind::File,
            2 => FileKind::Dir,
            3 => FileKind::Symlink,
            4 => FileKind::Other,
            5 => FileKind::Fifo,
            6 => FileKind::Socket,
            7 => FileKind::CharDevice,
            8 => FileKind::BlockDevice,
            _ => return None,
        })
    }
}

/// A file's attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    /// What it is.
    pub kind: FileKind,
    /// Length in bytes.
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// Access time, nanoseconds since the Unix epoch.
    pub atime_ns: i64,
    /// Status change time, nanoseconds since the Unix epoch.
    pub ctime_ns: i64,
    /// The inode number in the server's backing file system.
    pub ino: u64,
    /// The number of hard links.
    pub nlink: u32,
    /// The owner.
    pub uid: u32,
    /// The group.
    pub gid: u32,
    /// The device number (character and block devices).
    pub rdev: u64,
    /// Space used, in 512-byte blocks.
    pub blocks: u64,
}

impl Attr {
    /// Attributes with every field but these zero (tests, synthetic entries).
    pub fn new(kind: FileKind, size: u64, mode: u32) -> Attr {
        Attr {
            kind,
            size,
            mode,
            mtime_ns: 0,
            atime_ns: 0,
            ctime_ns: 0,
            ino: 0,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            blocks: 0,
        }
    }
}

/// A file system's capacity ([`Request::Statfs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Statfs {
    /// Total blocks, in `frsize` units.
    pub blocks: u64,
    /// Free blocks.
    pub bfree: u64,
    /// Free blocks available to unprivileged users.
    pub bavail: u64,
    /// Total inodes.
    pub files: u64,
    /// Free inodes.
    pub ffree: u64,
    /// Preferred I/O block size.
    pub bsize: u32,
    /// Longest file name.
    pub namelen: u32,
    /// Fragment size (the unit of the block counts).
    pub frsize: u32,
}

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// Its name.
    pub name: String,
    /// What it is.
    pub kind: FileKind,
    /// Its inode number in the server's backing file system.
    pub ino: u64,
}

/// A successful reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// Attributes (lookup, open, setattr, …).
    Attr(Attr),
    /// A new entry (create, mkdir): its attributes, and its directory's right after the
    /// change, so that a client whose kernel asks for the directory's attributes next (it
    /// dropped them: the directory changed) can answer without another round trip.
    Entry {
        /// The new entry's attributes.
        attr: Attr,
        /// Its directory's attributes after the change.
        dir: Attr,
    },
    /// An entry removed (unlink, rmdir): its directory's attributes right after the change (as
    /// in [`Reply::Entry`]).
    Removed {
        /// The directory's attributes after the change.
        dir: Attr,
    },
    /// Bytes read.
    Data(Bytes),
    /// Bytes written.
    Written(u32),
    /// Done, nothing to return.
    Done,
    /// A directory listing.
    Entries(Vec<DirEntry>),
    /// A directory listing, each entry with its attributes ([`Request::ReaddirPlus`]).
    EntriesPlus(Vec<(DirEntry, Attr)>),
    /// A report, as JSON text.
    Json(String),
    /// A file system's capacity.
    Statfs(Statfs),
    /// Bytes read into the shared region ([`Request::ReadShared`]): how many (fewer than asked
    /// at the end of the file).
    Placed(u32),
    /// The same-host transport the server offers ([`Request::LocalTransport`]).
    LocalTransport {
        /// Its Unix socket: a path, or `@name` for a Linux abstract socket.
        socket: String,
        /// The server's identity, which [`Reply::Attached`] repeats on that socket.
        id: String,
        /// The server's process id (the client checks it against the socket's peer).
        pid: u32,
    },
    /// The region is attached ([`Request::AttachRegion`]).
    Attached {
        /// The server's identity (as in [`Reply::LocalTransport`]).
        id: String,
    },
    /// A server with a cluster secret asks the client to prove it holds the secret: the first
    /// frame on every connection of such a server (tag 0, unasked), answered by
    /// [`Request::Auth`].
    Challenge {
        /// The server's nonce, fresh for this connection.
        nonce: [u8; crate::auth::NONCE_LEN],
    },
    /// The client's proof was right ([`Request::Auth`]); the server proves the secret in turn.
    Authenticated {
        /// HMAC-SHA256 of the secret over both nonces (server side).
        proof: [u8; crate::auth::PROOF_LEN],
    },
}

/// A server's answer to one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    /// It worked.
    Ok(Reply),
    /// It failed with a POSIX errno, and a message for people.
    Err {
        /// The errno (positive).
        errno: i32,
        /// What went wrong.
        message: String,
    },
}
