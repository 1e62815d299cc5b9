//! The FUSE file system: kernel requests to client-library calls, each done for the job of the
//! process that made it.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags as FuseOpen, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use iosets_client::{
    Attr, Client, ClientError, Control, Creds, FileKind, Reply, SetAttr, SetTime, Statfs,
};
use iosets_proto::{Bytes, Groups, JobsReport, ServerReport};
use iosets_types::JobId;
use parking_lot::Mutex;

use crate::control::{self, JobSlots, Node as Ctl, PriorityWrite};
use crate::ident::JobResolver;
use crate::inodes::{Inodes, ROOT};

/// The name prefix of files unlinked while open (hidden from listings, removed at last close).
const SILLY_PREFIX: &str = ".iosets-unlinked-";

/// What the file system needs besides its client.
#[derive(Debug, Clone)]
pub(crate) struct FsConfig {
    /// Page cache for file data (`--cache`); direct I/O otherwise.
    pub cache: bool,
    /// How long the kernel may keep attributes and names.
    pub attr_ttl: Duration,
    /// The bound on any one file system request.
    pub timeout: Duration,
    /// The servers' control token, if the mount has one.
    pub token: Option<String>,
    /// `st_blksize`: the striping chunk, so `cp` and friends move whole chunks.
    pub blksize: u32,
    /// The largest write the kernel sends.
    pub max_write: u32,
    /// Who besides root may set a priority through `.iosets/` (`--self-priority`).
    pub self_priority: control::SelfPriority,
}

/// An open file or directory.
#[derive(Debug)]
enum Handle {
    /// A file of the servers, with the job and user it was opened for.
    File { ino: u64, job: JobId, creds: Creds },
    /// A directory listing taken at opendir: the kernel's number, kind and name of each
    /// entry, and, when the kernel reads directories with their attributes (READDIRPLUS),
    /// each entry's attributes as the servers gave them (`None` for `.` and `..`, for every
    /// entry without READDIRPLUS, and empty for control directories, whose attributes the
    /// mount makes itself).
    Dir {
        entries: Vec<(u64, FileType, String)>,
        attrs: Vec<Option<Attr>>,
    },
    /// A control file: its text, taken at open.
    Control { text: Bytes },
}

/// The open handles, and how many files are open per inode (so an unlink and a release learn
/// whether a file is still open without scanning every handle).
#[derive(Debug, Default)]
struct Handles {
    by_fh: HashMap<u64, Handle>,
    open: HashMap<u64, usize>,
}

impl Handles {
    fn insert(&mut self, fh: u64, h: Handle) {
        if let Handle::File { ino, .. } = &h {
            *self.open.entry(*ino).or_default() += 1;
        }
        self.by_fh.insert(fh, h);
    }

    fn get(&self, fh: &u64) -> Option<&Handle> {
        self.by_fh.get(fh)
    }

    fn remove(&mut self, fh: &u64) -> Option<Handle> {
        let h = self.by_fh.remove(fh)?;
        if let Handle::File { ino, .. } = &h {
            if let Some(n) = self.open.get_mut(ino) {
                *n -= 1;
                if *n == 0 {
                    self.open.remove(ino);
                }
            }
        }
        Some(h)
    }

    fn open_count(&self, ino: u64) -> usize {
        self.open.get(&ino).copied().unwrap_or(0)
    }
}

/// The file system's state, shared by the tasks serving kernel requests.
#[derive(Debug)]
pub(crate) struct Inner {
    rt: tokio::runtime::Handle,
    client: Client,
    cfg: FsConfig,
    resolver: Arc<JobResolver>,
    inodes: Mutex<Inodes>,
    handles: Mutex<Handles>,
    next_fh: AtomicU64,
    slots: Mutex<JobSlots>,
    /// Jobs this mount resolved (listed under `.iosets/jobs` with the servers' jobs).
    seen_jobs: Mutex<std::collections::BTreeSet<u64>>,
    /// Who unlinked each file still open (renamed to a hidden name): the last close removes it
    /// as that user, who was allowed to, not as the file's last opener.
    unlinked_by: Mutex<HashMap<u64, Creds>>,
    /// Refused and malformed control writes already logged (once per process, job and reason).
    refusals: Mutex<control::Refusals>,
    /// Directories' attributes as a server answered them with a change of their entries made
    /// through this mount ([`DirsAfter`]).
    dirs_after: Mutex<DirsAfter>,
    /// Whether the kernel reads directories with their attributes (it accepted
    /// `FUSE_DO_READDIRPLUS` at init): opendir then asks the servers for them.
    plus: std::sync::atomic::AtomicBool,
}

/// Directories' attributes right after a change of their entries (create, mkdir, unlink, rmdir
/// through this mount), as the server answered them with the change. The kernel drops its copy
/// of a directory's attributes when an entry changes and asks for them again before the next
/// change in it (a permission check on the directory): that request is answered from here,
/// without a round trip, if it comes within `attr_ttl` of the server's answer (the staleness
/// the kernel's own cache is allowed). Each is answered once; a change of the directory whose
/// answer has no attributes (rename, symlink, link, mknod, its own setattr) drops it, and so
/// does the kernel's forgetting the inode (its number may name another object next). At most
/// [`DirsAfter::MAX`] are kept: a full table drops its expired ones, then all.
#[derive(Debug, Default)]
struct DirsAfter(HashMap<u64, (Attr, std::time::Instant)>);

impl DirsAfter {
    /// The most directories kept at once.
    const MAX: usize = 4096;

    /// Keeps `dir` for inode `ino` (the newer by change time if two changes race) for `ttl`,
    /// or drops what was kept when the change's answer did not say (`None`).
    fn note(&mut self, ino: u64, dir: Option<Attr>, ttl: Duration) {
        let Some(dir) = dir.filter(|_| !ttl.is_zero()) else {
            self.0.remove(&ino);
            return;
        };
        if self.0.len() >= Self::MAX {
            self.0.retain(|_, (_, at)| at.elapsed() < ttl);
            if self.0.len() >= Self::MAX {
                self.0.clear();
            }
        }
        let newer = |kept: &Attr| (dir.ctime_ns, dir.mtime_ns) >= (kept.ctime_ns, kept.mtime_ns);
        match self.0.get(&ino) {
            Some((kept, _)) if !newer(kept) => {}
            _ => {
                self.0.insert(ino, (dir, std::time::Instant::now()));
            }
        }
    }

    /// The attributes kept for `ino` if they are younger than `ttl` (taken: answered once).
    fn take(&mut self, ino: u64, ttl: Duration) -> Option<Attr> {
        let (a, at) = self.0.remove(&ino)?;
        (at.elapsed() < ttl).then_some(a)
    }
}

fn errno_of(e: &ClientError) -> Errno {
    match e {
        ClientError::Errno { errno, .. } => Errno::from_i32(*errno),
        ClientError::InvalidPath { .. } | ClientError::Config(_) => Errno::EINVAL,
        ClientError::Unsupported(_) => Errno::from_i32(libc::ENOTSUP),
        // A server unreachable, a connection lost, a timeout, a garbled answer: the I/O failed.
        _ => Errno::EIO,
    }
}

fn system_time(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

fn file_type(k: FileKind) -> FileType {
    match k {
        FileKind::File | FileKind::Other => FileType::RegularFile,
        FileKind::Dir => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
        FileKind::Fifo => FileType::NamedPipe,
        FileKind::Socket => FileType::Socket,
        FileKind::CharDevice => FileType::CharDevice,
        FileKind::BlockDevice => FileType::BlockDevice,
    }
}

fn ns_of(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
    }
}

fn set_time(t: TimeOrNow) -> SetTime {
    match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(t) => SetTime::At(ns_of(t)),
    }
}

/// `parent/name`, refusing names that are not UTF-8 (the protocol's paths are) and `/`.
fn join(parent: &str, name: &OsStr) -> Result<String, Errno> {
    let name = name.to_str().ok_or(Errno::EINVAL)?;
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(Errno::EINVAL);
    }
    Ok(if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    })
}

/// A failed client call as the caller sees it: its `errno`, logged (a warning for `EIO`).
fn failed(e: ClientError) -> Errno {
    let errno = errno_of(&e);
    if errno == Errno::EIO {
        tracing::warn!(error = %e, "I/O failed");
    } else {
        tracing::debug!(error = %e, "request failed");
    }
    errno
}

/// Attributes as the kernel may keep them: for `ttl`.
pub(crate) struct Attrs {
    ttl: Duration,
    attr: FileAttr,
}

/// A file just created and opened: its attributes, handle and open flags.
pub(crate) struct Created {
    attrs: Attrs,
    fh: FileHandle,
    flags: FopenFlags,
}

/// A kernel request's reply, answered exactly once: by its operation's result, or (dropped
/// unanswered: the task panicked, or the runtime shut down first) with `EIO` by fuser.
trait Answer: Send + 'static {
    /// What a success carries.
    type Ok: Send;
    fn ok(self, v: Self::Ok);
    fn error(self, e: Errno);
}

/// `Answer` for a fuser reply: `$ok` answered by `$answer`, an error by the reply's own
/// `error` (an inherent method: it takes precedence over the trait's).
macro_rules! answer {
    ($reply:ty, $ok:ty, |$r:ident, $v:ident| $answer:expr) => {
        impl Answer for $reply {
            type Ok = $ok;
            fn ok(self, $v: $ok) {
                let $r = self;
                $answer
            }
            fn error(self, e: Errno) {
                self.error(e)
            }
        }
    };
}

answer!(ReplyEntry, Attrs, |r, a| r.entry(
    &a.ttl,
    &a.attr,
    Generation(0)
));
answer!(ReplyAttr, Attrs, |r, a| r.attr(&a.ttl, &a.attr));
answer!(ReplyEmpty, (), |r, _v| r.ok());
answer!(ReplyData, Bytes, |r, d| r.data(&d));
answer!(ReplyOpen, (FileHandle, FopenFlags), |r, o| r
    .opened(o.0, o.1));
answer!(ReplyWrite, u32, |r, n| r.written(n));
answer!(ReplyStatfs, Statfs, |r, s| r.statfs(
    s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize
));
answer!(ReplyCreate, Created, |r, c| r.created(
    &c.attrs.ttl,
    &c.attrs.attr,
    Generation(0),
    c.fh,
    c.flags
));

/// A release's reply: `ok` whatever happened, a timeout included. The close has returned
/// already and the kernel ignores the answer; a hidden file whose unlink failed stays hidden.
struct Released(ReplyEmpty);

/// The hidden name of a file unlinked while open, to remove at its last close, and for whom.
#[derive(Debug)]
pub(crate) struct Silly {
    path: String,
    job: JobId,
    by: Creds,
}

impl Answer for Released {
    type Ok = ();
    fn ok(self, _: ()) {
        self.0.ok()
    }
    fn error(self, _: Errno) {
        self.0.ok()
    }
}

impl Inner {
    pub(crate) fn new(
        rt: tokio::runtime::Handle,
        client: Client,
        cfg: FsConfig,
        resolver: Arc<JobResolver>,
    ) -> Inner {
        Inner {
            rt,
            client,
            cfg,
            resolver,
            inodes: Mutex::new(Inodes::new()),
            handles: Mutex::new(Handles::default()),
            next_fh: AtomicU64::new(1),
            slots: Mutex::new(JobSlots::default()),
            seen_jobs: Mutex::new(Default::default()),
            unlinked_by: Mutex::new(HashMap::new()),
            refusals: Mutex::new(control::Refusals::default()),
            dirs_after: Mutex::new(DirsAfter::default()),
            plus: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The job of the caller `who` (its thread id and uid). A cached answer is taken here, on
    /// the runtime's worker (a pidfd poll); a cold resolution on a blocking thread: it reads
    /// `/proc/TID/environ`, which waits for the caller's memory map lock, and a page fault on
    /// this very mount may hold that lock until the mount answers it.
    async fn job_of(&self, who: &Who) -> Result<JobId, Errno> {
        let resolved = match self.resolver.cached(who.pid, who.uid) {
            Some(r) => r,
            None => {
                let (resolver, who) = (self.resolver.clone(), *who);
                tokio::task::spawn_blocking(move || resolver.resolve(who.pid, who.uid))
                    .await
                    .map_err(|e| {
                        tracing::error!(error = %e, "resolving a job failed");
                        Errno::EIO
                    })?
            }
        };
        let job = resolved.job;
        let new = {
            let mut seen = self.seen_jobs.lock();
            seen.len() >= 65_536 || seen.insert(job.0)
        };
        if new {
            // The servers learn the job's name before its first request on each connection,
            // for their reports and the `job=` patterns of their rules.
            self.client.name_job(job, &resolved.name);
        }
        Ok(job)
    }

    /// The caller's credentials as the servers check them: uid, gid and (for a caller other
    /// than root, whose groups change nothing) its supplementary groups, read from procfs
    /// (`/proc/TID/status`: a short read that takes no lock of the caller's).
    fn creds(&self, who: &Who) -> Creds {
        let mut c = Creds::new(who.uid, who.gid);
        if who.uid != 0 {
            if let Some(g) = self.resolver.groups(who.pid) {
                c.groups = Groups::new(&g);
            }
        }
        c
    }

    /// A client handle for the caller `who`.
    async fn caller(&self, who: &Who) -> Result<Client, Errno> {
        let job = self.job_of(who).await?;
        Ok(self.client.as_caller(job, Some(self.creds(who))))
    }

    fn path(&self, ino: u64) -> Result<String, Errno> {
        self.inodes.lock().path(ino).ok_or(Errno::ENOENT)
    }

    fn attr(&self, ino: u64, a: &Attr) -> FileAttr {
        FileAttr {
            ino: INodeNo(ino),
            size: a.size,
            blocks: a.blocks,
            atime: system_time(a.atime_ns),
            mtime: system_time(a.mtime_ns),
            ctime: system_time(a.ctime_ns),
            crtime: UNIX_EPOCH,
            kind: file_type(a.kind),
            perm: (a.mode & 0o7777) as u16,
            nlink: a.nlink,
            uid: a.uid,
            gid: a.gid,
            rdev: a.rdev as u32,
            blksize: self.cfg.blksize,
            flags: 0,
        }
    }

    fn attrs(&self, ino: u64, a: &Attr) -> Attrs {
        Attrs {
            ttl: self.cfg.attr_ttl,
            attr: self.attr(ino, a),
        }
    }

    /// Records a new kernel reference to the object at `path` (keyed by `home`'s server) and
    /// returns its entry.
    fn entry_at(&self, path: &str, home: &str, a: &Attr) -> Attrs {
        let key = (self.client.layout().home(home), a.ino);
        let ino = self.inodes.lock().remember(path, key, a.nlink);
        self.attrs(ino, a)
    }

    /// [`entry_at`](Self::entry_at) keyed by `path` itself.
    fn entry(&self, path: &str, a: &Attr) -> Attrs {
        self.entry_at(path, path, a)
    }

    fn control_entry(&self, ino: u64, node: Ctl) -> Attrs {
        let now = SystemTime::now();
        let attr = FileAttr {
            ino: INodeNo(ino),
            size: 0,
            blocks: 0,
            atime: now,
            mtime: now,
            ctime: now,
            crtime: UNIX_EPOCH,
            kind: if node.is_dir() {
                FileType::Directory
            } else {
                FileType::RegularFile
            },
            perm: node.perm(),
            nlink: if node.is_dir() { 2 } else { 1 },
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        };
        Attrs {
            ttl: self.cfg.attr_ttl,
            attr,
        }
    }

    fn control_node(&self, ino: u64) -> Option<Ctl> {
        if !control::is_control(ino) {
            return None;
        }
        self.slots.lock().node(ino)
    }

    fn token(&self) -> Result<&str, Errno> {
        self.cfg.token.as_deref().ok_or_else(|| {
            tracing::warn!("control through .iosets needs the servers' token (--token-file)");
            Errno::EACCES
        })
    }

    /// Every server's control report `op` (JSON), parsed as `T`, with the server's address.
    async fn reports<T: serde::de::DeserializeOwned + Send>(
        &self,
        op: Control,
    ) -> Result<Vec<(String, T)>, Errno> {
        let token = self.token()?;
        let mut out = Vec::new();
        for (i, addr) in self.client.servers().iter().enumerate() {
            let reply = self.client.control(i, token, op.clone()).await;
            if let Reply::Json(text) = reply.map_err(failed)? {
                let r: T = serde_json::from_str(&text).map_err(|e| {
                    failed(ClientError::Protocol {
                        server: *addr,
                        reason: format!("{} report: {e}", op.op().as_str()),
                    })
                })?;
                out.push((addr.to_string(), r));
            }
        }
        Ok(out)
    }

    async fn jobs_reports(&self) -> Result<Vec<(String, JobsReport)>, Errno> {
        self.reports(Control::Jobs).await
    }

    async fn control_text(&self, node: Ctl) -> Result<Vec<u8>, Errno> {
        Ok(match node {
            Ctl::Priority(job) => control::priority_text(job, &self.jobs_reports().await?),
            Ctl::Stats(job) => control::stats_text(job, &self.jobs_reports().await?),
            Ctl::Policy => {
                control::policy_text(&self.reports::<ServerReport>(Control::Stats).await?)
            }
            Ctl::Readme => control::README.to_string(),
            _ => return Err(Errno::EISDIR),
        }
        .into_bytes())
    }

    /// A write to `jobs/<id>/priority`: root may set any job's; another process as
    /// [`control::may_set`] says (its own job by its Slurm cgroup, within the servers' hint
    /// cap). A malformed value is `EINVAL`, a refusal `EACCES`; both are logged once.
    async fn control_write(&self, who: &Who, job: JobId, data: &[u8]) -> Result<(), Errno> {
        let Some(what) = control::parse_priority(data) else {
            self.refusals.lock().malformed(who.pid, who.uid, job, data);
            return Err(Errno::EINVAL);
        };
        if who.uid != 0 {
            let mode = self.cfg.self_priority;
            // Only the cgroup counts: the environment is the user's to set.
            let own = self.resolver.slurm_job(who.pid);
            let cap = match (mode, what) {
                (control::SelfPriority::Capped, PriorityWrite::Set(_)) if own == Some(job) => {
                    let reports = self.reports::<ServerReport>(Control::Stats).await?;
                    control::Cap::of(reports.iter().map(|(_, r)| r.hints.as_str()))
                }
                _ => control::Cap::None,
            };
            if let Err(why) = control::may_set(mode, own, job, what, cap) {
                self.refusals.lock().refused(who.pid, who.uid, job, &why);
                return Err(Errno::EACCES);
            }
        }
        let token = self.token()?;
        let op = match what {
            PriorityWrite::Set(priority) => Control::SetPriority { job, priority },
            PriorityWrite::Clear => Control::ClearPriority { job },
        };
        for i in 0..self.client.servers().len() {
            self.client
                .control(i, token, op.clone())
                .await
                .map_err(failed)?;
        }
        Ok(())
    }

    fn control_lookup(&self, parent: Ctl, name: &OsStr) -> Result<Attrs, Errno> {
        let Some(node) = name.to_str().and_then(|n| control::child(parent, n)) else {
            return Err(Errno::ENOENT);
        };
        let ino = self.slots.lock().ino(node);
        Ok(self.control_entry(ino, node))
    }

    async fn control_listing(&self, node: Ctl) -> Result<Vec<(u64, FileType, String)>, Errno> {
        let names: Vec<(Ctl, String)> = match node {
            Ctl::Dir => vec![
                (Ctl::Readme, "README".into()),
                (Ctl::Jobs, "jobs".into()),
                (Ctl::Policy, "policy".into()),
            ],
            Ctl::Jobs => {
                let mut jobs: std::collections::BTreeMap<u64, Option<String>> =
                    self.seen_jobs.lock().iter().map(|&j| (j, None)).collect();
                if self.cfg.token.is_some() {
                    for (_, r) in self.jobs_reports().await? {
                        for j in &r.jobs {
                            let name = jobs.entry(j.job).or_default();
                            if name.is_none() {
                                name.clone_from(&j.name);
                            }
                        }
                    }
                }
                // A job is listed by its name when it has one that makes a file name (its
                // directory is the same by name or by number).
                jobs.into_iter()
                    .map(|(j, name)| {
                        let name = name
                            .or_else(|| self.client.name_of(JobId(j)).map(|n| n.to_string()))
                            .filter(|n| {
                                !n.is_empty() && n != "." && n != ".." && !n.contains(['/', '\0'])
                            })
                            .unwrap_or_else(|| j.to_string());
                        (Ctl::JobDir(JobId(j)), name)
                    })
                    .collect()
            }
            Ctl::JobDir(j) => vec![
                (Ctl::Priority(j), "priority".into()),
                (Ctl::Stats(j), "stats".into()),
            ],
            _ => return Err(Errno::ENOTDIR),
        };
        let mut slots = self.slots.lock();
        let parent_ino = match node {
            Ctl::Dir => ROOT,
            Ctl::Jobs => control::DIR,
            Ctl::JobDir(_) => control::JOBS,
            _ => ROOT,
        };
        let mut out = vec![
            (slots.ino(node), FileType::Directory, ".".to_string()),
            (parent_ino, FileType::Directory, "..".to_string()),
        ];
        for (n, name) in names {
            let kind = if n.is_dir() {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            out.push((slots.ino(n), kind, name));
        }
        Ok(out)
    }

    fn new_fh(&self, h: Handle) -> FileHandle {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().insert(fh, h);
        FileHandle(fh)
    }

    fn open_flags(&self) -> FopenFlags {
        if self.cfg.cache {
            FopenFlags::empty()
        } else {
            FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
        }
    }

    /// The path of an open file and a client handle of its opener's job and user.
    fn file_caller(&self, fh: FileHandle) -> Result<(String, Client), Errno> {
        let (ino, client) = self.handle_caller(fh)?;
        Ok((self.path(ino)?, client))
    }

    /// [`file_caller`](Self::file_caller) for reads and writes: also the name whose layout
    /// the file's chunks follow when it is not its path (it was hidden when unlinked while
    /// open).
    fn data_caller(&self, fh: FileHandle) -> Result<(String, Option<String>, Client), Errno> {
        let (ino, client) = self.handle_caller(fh)?;
        let t = self.inodes.lock();
        let path = t.path(ino).ok_or(Errno::ENOENT)?;
        Ok((path, t.laid_out_as(ino), client))
    }

    /// The inode of open file `fh` and a client handle of its opener's job and user.
    fn handle_caller(&self, fh: FileHandle) -> Result<(u64, Client), Errno> {
        match self.handles.lock().get(&fh.0) {
            Some(Handle::File { ino, job, creds }) => {
                Ok((*ino, self.client.as_caller(*job, Some(*creds))))
            }
            _ => Err(Errno::EBADF),
        }
    }

    /// How many open handles `ino` has.
    fn open_count(&self, ino: u64) -> usize {
        self.handles.lock().open_count(ino)
    }

    /// The path of `name` in `parent`, for a request that makes or removes it: refused in and
    /// for the control directory.
    fn child_path(&self, parent: INodeNo, name: &OsStr) -> Result<String, Errno> {
        if self.control_node(parent.0).is_some() {
            return Err(Errno::EACCES);
        }
        if parent.0 == ROOT && name == control::CONTROL_DIR {
            return Err(Errno::EACCES);
        }
        join(&self.path(parent.0)?, name)
    }
}

/// The requests, each one task on the client runtime: the server calls are awaited in it
/// (no lock is held across them), and its result answers the kernel.
impl Inner {
    pub(crate) async fn lookup(
        &self,
        who: &Who,
        parent: INodeNo,
        name: &OsStr,
    ) -> Result<Attrs, Errno> {
        if let Some(p) = self.control_node(parent.0) {
            return self.control_lookup(p, name);
        }
        if parent.0 == ROOT && name == control::CONTROL_DIR {
            return Ok(self.control_entry(control::DIR, Ctl::Dir));
        }
        let path = join(&self.path(parent.0)?, name)?;
        // A name this mount holds no inode for is most often one about to be made (the
        // kernel's lookup before a create) or a directory on a path walk: its home server
        // alone answers that, and only a regular file needs the others' sizes. A name it
        // holds is asked of every server at once (one round trip for a file's stat).
        let seen = self.inodes.lock().by_path(&path).is_some();
        let client = self.caller(who).await?;
        let got = if seen {
            client.lstat(&path).await
        } else {
            client.lstat_unseen(&path).await
        };
        match got.map_err(failed) {
            Ok(a) => Ok(self.entry(&path, &a)),
            // A name that is not there: the kernel keeps that for `attr_ttl` as well (a
            // negative entry), so a stat then a create, or a search along a path list, asks
            // once. A name made through this mount replaces it at once; one made elsewhere
            // shows within `attr_ttl`, as every other change does.
            Err(Errno::ENOENT) if !self.cfg.attr_ttl.is_zero() => Ok(self.negative_entry()),
            Err(e) => Err(e),
        }
    }

    /// The answer for a name that does not exist, kept by the kernel for `attr_ttl`: an entry
    /// numbered 0 (FUSE's negative entry; the kernel holds no inode and forgets nothing).
    fn negative_entry(&self) -> Attrs {
        Attrs {
            ttl: self.cfg.attr_ttl,
            attr: FileAttr {
                ino: INodeNo(0),
                size: 0,
                blocks: 0,
                atime: UNIX_EPOCH,
                mtime: UNIX_EPOCH,
                ctime: UNIX_EPOCH,
                crtime: UNIX_EPOCH,
                kind: FileType::RegularFile,
                perm: 0,
                nlink: 0,
                uid: 0,
                gid: 0,
                rdev: 0,
                blksize: self.cfg.blksize,
                flags: 0,
            },
        }
    }

    pub(crate) fn forget(&self, ino: INodeNo, nlookup: u64) {
        if !control::is_control(ino.0) {
            self.dirs_after.lock().0.remove(&ino.0);
            self.inodes.lock().forget(ino.0, nlookup);
        }
    }

    /// Notes what a change through this mount left of directory `ino`'s attributes
    /// ([`DirsAfter`]): `dir` as the server answered it with the change, or `None`.
    fn note_dir(&self, ino: u64, dir: Option<Attr>) {
        self.dirs_after.lock().note(ino, dir, self.cfg.attr_ttl);
    }

    pub(crate) async fn getattr(&self, who: &Who, ino: INodeNo) -> Result<Attrs, Errno> {
        if let Some(node) = self.control_node(ino.0) {
            return Ok(self.control_entry(ino.0, node));
        }
        if let Some(dir) = self.dirs_after.lock().take(ino.0, self.cfg.attr_ttl) {
            return Ok(self.attrs(ino.0, &dir));
        }
        let path = self.path(ino.0)?;
        let mut a = self.caller(who).await?.lstat(&path).await.map_err(failed)?;
        // Unlinked while open: its hidden name is not a link.
        if self.inodes.lock().is_silly(ino.0) {
            a.nlink = a.nlink.saturating_sub(1);
        }
        Ok(self.attrs(ino.0, &a))
    }

    /// A change of attributes: `set` (its times taken as the kernel gave them).
    pub(crate) async fn setattr(
        &self,
        who: &Who,
        ino: INodeNo,
        fh: Option<FileHandle>,
        set: SetAttr,
    ) -> Result<Attrs, Errno> {
        if let Some(node) = self.control_node(ino.0) {
            // `echo 5 > priority` truncates first: nothing to do. Other changes are refused.
            let truncate = set.mode.is_none() && set.uid.is_none() && set.gid.is_none();
            return if truncate && set.size == Some(0) {
                Ok(self.control_entry(ino.0, node))
            } else {
                Err(Errno::EPERM)
            };
        }
        let path = self.path(ino.0)?;
        // A truncate through an open file is done for its opener's job.
        let client = match fh.map(|f| self.file_caller(f)) {
            Some(Ok((_, c))) => c,
            _ => self.caller(who).await?,
        };
        let a = client.setattr(&path, set).await;
        self.note_dir(ino.0, None);
        Ok(self.attrs(ino.0, &a.map_err(failed)?))
    }

    pub(crate) async fn readlink(&self, who: &Who, ino: INodeNo) -> Result<Bytes, Errno> {
        let path = self.path(ino.0)?;
        let client = self.caller(who).await?;
        client.readlink(&path).await.map_err(failed)
    }

    pub(crate) async fn mknod(
        &self,
        who: &Who,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
    ) -> Result<Attrs, Errno> {
        let path = self.child_path(parent, name)?;
        let client = self.caller(who).await?;
        let mode = mode & !(umask & 0o777);
        let a = client.mknod(&path, mode, u64::from(rdev)).await;
        self.note_dir(parent.0, None);
        Ok(self.entry(&path, &a.map_err(failed)?))
    }

    pub(crate) async fn mkdir(
        &self,
        who: &Who,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
    ) -> Result<Attrs, Errno> {
        let path = self.child_path(parent, name)?;
        let client = self.caller(who).await?;
        let made = client.mkdir_entry(&path, mode & !umask & 0o7777).await;
        let made = made.map_err(failed)?;
        self.note_dir(parent.0, made.dir);
        Ok(self.entry(&path, &made.attr))
    }

    pub(crate) async fn unlink(
        &self,
        who: &Who,
        parent: INodeNo,
        name: &OsStr,
    ) -> Result<(), Errno> {
        let path = self.child_path(parent, name)?;
        let client = self.caller(who).await?;
        // Unlinked while open: renamed to a hidden name until its last close (NFS's "silly
        // rename"), so the open descriptors keep reading and writing it.
        let open_ino = self
            .inodes
            .lock()
            .by_path(&path)
            .filter(|&ino| self.open_count(ino) > 0);
        let Some(ino) = open_ino else {
            let dir = self
                .remove(&path, client.unlink_entry(&path), |t| t.unlinked(&path))
                .await?;
            self.note_dir(parent.0, dir);
            return Ok(());
        };
        let silly = match path.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/{SILLY_PREFIX}{ino:x}"),
            None => format!("{SILLY_PREFIX}{ino:x}"),
        };
        let renamed = client.rename(&path, &silly).await;
        self.note_dir(parent.0, None);
        renamed.map_err(failed)?;
        {
            let mut t = self.inodes.lock();
            t.renamed(&path, &silly);
            t.set_silly(ino, &silly, &path);
        }
        if let Some(c) = client.creds() {
            self.unlinked_by.lock().insert(ino, c);
        }
        Ok(())
    }

    /// Sends `removal` (the client's unlink or rmdir of `path`, or a rename over it), which takes
    /// the name `path` away on the servers. Its object's key leaves the inode table first
    /// ([`Inodes::removing`]: a new object given the same backing number meanwhile must not get
    /// this inode), and comes back if the removal fails; `done` updates the table after it.
    async fn remove<T>(
        &self,
        path: &str,
        removal: impl Future<Output = Result<T, ClientError>>,
        done: impl FnOnce(&mut Inodes),
    ) -> Result<T, Errno> {
        let detached = self.inodes.lock().removing(path);
        let answer = match removal.await {
            Ok(answer) => answer,
            Err(e) => {
                if let Some(d) = detached {
                    self.inodes.lock().kept(d);
                }
                return Err(failed(e));
            }
        };
        done(&mut self.inodes.lock());
        Ok(answer)
    }

    pub(crate) async fn rmdir(
        &self,
        who: &Who,
        parent: INodeNo,
        name: &OsStr,
    ) -> Result<(), Errno> {
        let path = self.child_path(parent, name)?;
        let client = self.caller(who).await?;
        let dir = self
            .remove(&path, client.rmdir_entry(&path), |t| t.unlinked(&path))
            .await?;
        self.note_dir(parent.0, dir);
        Ok(())
    }

    pub(crate) async fn symlink(
        &self,
        who: &Who,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
    ) -> Result<Attrs, Errno> {
        let path = self.child_path(parent, link_name)?;
        let target = target.to_str().ok_or(Errno::EINVAL)?;
        let client = self.caller(who).await?;
        let a = client.symlink(&path, target).await;
        self.note_dir(parent.0, None);
        Ok(self.entry(&path, &a.map_err(failed)?))
    }

    pub(crate) async fn rename(
        &self,
        who: &Who,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
    ) -> Result<(), Errno> {
        if flags.bits() != 0 {
            // RENAME_NOREPLACE, RENAME_EXCHANGE: not in the protocol.
            return Err(Errno::EINVAL);
        }
        let (from, to) = (
            self.child_path(parent, name),
            self.child_path(newparent, newname),
        );
        let (from, to) = (from?, to?);
        let client = self.caller(who).await?;
        let renamed = self
            .remove(&to, client.rename(&from, &to), |t| t.renamed(&from, &to))
            .await;
        self.note_dir(parent.0, None);
        self.note_dir(newparent.0, None);
        renamed
    }

    pub(crate) async fn link(
        &self,
        who: &Who,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
    ) -> Result<Attrs, Errno> {
        let (from, to) = (self.path(ino.0), self.child_path(newparent, newname));
        let (from, to) = (from?, to?);
        let client = self.caller(who).await?;
        let a = client.link(&from, &to).await;
        self.note_dir(newparent.0, None);
        let a = a.map_err(failed)?;
        // The new name is the same object: keyed by the source's home server. The object's
        // path becomes the new name: both name it.
        Ok(self.entry_at(&to, &from, &a))
    }

    pub(crate) async fn open(
        &self,
        who: &Who,
        ino: INodeNo,
        flags: FuseOpen,
    ) -> Result<(FileHandle, FopenFlags), Errno> {
        if let Some(node) = self.control_node(ino.0) {
            if node.is_dir() {
                return Err(Errno::EISDIR);
            }
            let writing = flags.0 & libc::O_ACCMODE != libc::O_RDONLY;
            if writing && !matches!(node, Ctl::Priority(_)) {
                return Err(Errno::EACCES);
            }
            // A priority file opened only to write needs no snapshot (and no token to read).
            let text = if writing && flags.0 & libc::O_ACCMODE == libc::O_WRONLY {
                Vec::new()
            } else {
                self.control_text(node).await?
            };
            let fh = self.new_fh(Handle::Control { text: text.into() });
            return Ok((fh, FopenFlags::FOPEN_DIRECT_IO));
        }
        let job = self.job_of(who).await?;
        self.inodes.lock().set_job(ino.0, job);
        let fh = self.new_fh(Handle::File {
            ino: ino.0,
            job,
            creds: self.creds(who),
        });
        Ok((fh, self.open_flags()))
    }

    pub(crate) async fn read(
        &self,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
    ) -> Result<Bytes, Errno> {
        if control::is_control(ino.0) {
            return match self.handles.lock().get(&fh.0) {
                Some(Handle::Control { text }) => {
                    let start = (offset as usize).min(text.len());
                    let end = start.saturating_add(size as usize).min(text.len());
                    Ok(text.slice(start..end))
                }
                _ => Err(Errno::EBADF),
            };
        }
        let (path, layout, client) = self.data_caller(fh)?;
        let d = match layout {
            None => client.read_at(&path, offset, size as usize).await,
            Some(l) => {
                client
                    .read_at_laid_out_as(&path, &l, offset, size as usize)
                    .await
            }
        };
        d.map_err(failed)
    }

    pub(crate) async fn write(
        &self,
        who: &Who,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: Bytes,
    ) -> Result<u32, Errno> {
        if let Some(node) = self.control_node(ino.0) {
            let Ctl::Priority(job) = node else {
                return Err(Errno::EACCES);
            };
            self.control_write(who, job, &data).await?;
            return Ok(data.len() as u32);
        }
        let (path, layout, client) = self.data_caller(fh)?;
        let n = match layout {
            None => client.write_at(&path, offset, data).await,
            Some(l) => client.write_at_laid_out_as(&path, &l, offset, data).await,
        };
        Ok(n.map_err(failed)? as u32)
    }

    /// Closes handle `fh` (no server request): `None`, or, when it was the last handle of a
    /// file unlinked while open, what [`remove_silly`](Self::remove_silly) must remove.
    pub(crate) fn release(&self, fh: FileHandle) -> Option<Silly> {
        let closed = self.handles.lock().remove(&fh.0);
        let Some(Handle::File { ino, job, creds }) = closed else {
            return None;
        };
        // Taken in its own statement: the table's lock must not be held while the inodes'
        // is taken.
        let silly = if self.open_count(ino) == 0 {
            self.inodes.lock().take_silly(ino)
        } else {
            None
        }?;
        let by = self.unlinked_by.lock().remove(&ino).unwrap_or(creds);
        Some(Silly {
            path: silly,
            job,
            by,
        })
    }

    /// Removes the hidden name a file unlinked while open kept until its last close.
    pub(crate) async fn remove_silly(&self, silly: Silly) -> Result<(), Errno> {
        let client = self.client.as_caller(silly.job, Some(silly.by));
        // A failure is logged by `remove`; the close itself succeeded.
        let _ = self
            .remove(&silly.path, client.unlink(&silly.path), |t| {
                t.unlinked(&silly.path)
            })
            .await;
        Ok(())
    }

    pub(crate) async fn fsync(&self, ino: INodeNo, fh: FileHandle) -> Result<(), Errno> {
        if control::is_control(ino.0) {
            return Ok(());
        }
        let (path, client) = self.file_caller(fh)?;
        client.fsync(&path).await.map_err(failed)
    }

    pub(crate) async fn opendir(
        &self,
        who: &Who,
        ino: INodeNo,
    ) -> Result<(FileHandle, FopenFlags), Errno> {
        let (entries, attrs) = match self.control_node(ino.0) {
            Some(node) => (self.control_listing(node).await?, Vec::new()),
            None => self.listing(who, ino).await?,
        };
        let fh = self.new_fh(Handle::Dir { entries, attrs });
        Ok((fh, FopenFlags::empty()))
    }

    /// The entries of directory `ino` (`.`, `..`, then the servers' but the hidden ones), and
    /// their attributes when the kernel reads them with the listing ([`Handle::Dir`]).
    async fn listing(
        &self,
        who: &Who,
        ino: INodeNo,
    ) -> Result<(Vec<(u64, FileType, String)>, Vec<Option<Attr>>), Errno> {
        let path = self.path(ino.0)?;
        let client = self.caller(who).await?;
        let plus = self.plus.load(Ordering::Relaxed);
        let listing: Vec<(iosets_client::DirEntry, Option<Attr>)> = if plus {
            client.readdir_plus(&path).await.map_err(failed)?
        } else {
            let l = client.readdir(&path).await.map_err(failed)?;
            l.into_iter().map(|e| (e, None)).collect()
        };
        let parent = match path.rsplit_once('/') {
            Some((p, _)) => self.inodes.lock().by_path(p).unwrap_or(ROOT),
            None => ROOT,
        };
        let mut entries = vec![
            (ino.0, FileType::Directory, ".".to_string()),
            (parent, FileType::Directory, "..".to_string()),
        ];
        let mut attrs = vec![None, None];
        let t = self.inodes.lock();
        for (e, a) in listing {
            if (path.is_empty() && e.name == control::CONTROL_DIR)
                || e.name.starts_with(SILLY_PREFIX)
            {
                continue;
            }
            let child = join(&path, OsStr::new(&e.name)).unwrap_or_default();
            // The kernel's number when it holds the object; the backing number (high bit
            // set, never a number this table hands out) otherwise.
            let d_ino = t.by_path(&child).unwrap_or(e.ino | (1 << 63));
            entries.push((d_ino, file_type(e.kind), e.name));
            attrs.push(a);
        }
        Ok((entries, attrs))
    }

    pub(crate) fn readdir(&self, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let handles = self.handles.lock();
        let Some(Handle::Dir { entries, .. }) = handles.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    /// A listing with each entry's attributes: the kernel makes an entry (a lookup) of every
    /// one it receives but `.` and `..`, so each is remembered as a lookup would be, and
    /// forgotten again when the reply had no room for it.
    pub(crate) fn readdirplus(
        &self,
        dir: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let handles = self.handles.lock();
        let Some(Handle::Dir { entries, attrs }) = handles.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let dir_path = self.path(dir.0).ok();
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            let path = || {
                let dir = dir_path.as_deref()?;
                join(dir, OsStr::new(name)).ok()
            };
            let (entry, remembered) = if i < 2 {
                (self.bare_entry(*ino, *kind), None) // `.` and `..`
            } else if let Some(node) = self.control_node(*ino) {
                (self.control_entry(*ino, node), None)
            } else if let (Some(a), Some(path)) = (attrs.get(i).copied().flatten(), path()) {
                let e = self.entry(&path, &a);
                let ino = e.attr.ino.0;
                (e, Some(ino))
            } else {
                // Number 0: listed, but the kernel makes no entry of it (it looks it up).
                (self.bare_entry(0, *kind), None)
            };
            let (i, ttl) = ((i + 1) as u64, entry.ttl);
            if reply.add(entry.attr.ino, i, name, &ttl, &entry.attr, Generation(0)) {
                if let Some(ino) = remembered {
                    self.inodes.lock().forget(ino, 1);
                }
                break;
            }
        }
        reply.ok();
    }

    /// An entry the kernel does not make (`.` and `..`) or that names no object of the servers'
    /// (a name that is not UTF-8): its number and kind, no attributes to keep.
    fn bare_entry(&self, ino: u64, kind: FileType) -> Attrs {
        let mut a = self.negative_entry();
        a.attr.ino = INodeNo(ino);
        a.attr.kind = kind;
        a.ttl = Duration::ZERO;
        a
    }

    pub(crate) fn releasedir(&self, fh: FileHandle) {
        self.handles.lock().remove(&fh.0);
    }

    pub(crate) async fn statfs(&self, who: &Who) -> Result<Statfs, Errno> {
        let client = self.caller(who).await?;
        client.statfs().await.map_err(failed)
    }

    pub(crate) async fn create(
        &self,
        who: &Who,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    ) -> Result<Created, Errno> {
        let path = self.child_path(parent, name)?;
        let job = self.job_of(who).await?;
        let creds = self.creds(who);
        let client = self.client.as_caller(job, Some(creds));
        let mode = mode & !umask & 0o7777;
        let exclusive = flags & libc::O_EXCL != 0;
        let made = client.create_entry(&path, mode, exclusive).await;
        let made = made.map_err(failed)?;
        self.note_dir(parent.0, made.dir);
        let a = made.attr;
        let key = (self.client.layout().home(&path), a.ino);
        let ino = {
            let mut t = self.inodes.lock();
            let ino = t.remember(&path, key, a.nlink);
            t.set_job(ino, job);
            ino
        };
        Ok(Created {
            attrs: self.attrs(ino, &a),
            fh: self.new_fh(Handle::File { ino, job, creds }),
            flags: self.open_flags(),
        })
    }
}

/// Who made a kernel request: what the request carries of its caller, taken on the fuser
/// thread.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Who {
    pid: u32,
    uid: u32,
    gid: u32,
}

impl Who {
    fn of(req: &Request) -> Who {
        Who {
            pid: req.pid(),
            uid: req.uid(),
            gid: req.gid(),
        }
    }
}

/// The file system as fuser sees it. A request that needs more than the mount's own tables
/// (every one that talks to the servers or resolves its caller's job) is handed off once, as
/// a task on the client runtime ([`spawn`](IosetsFs::spawn)), and answered from there: a
/// FUSE thread never waits on a server, and as many requests as callers can be queued at the
/// servers (where the scheduler orders them), not only as many as there are FUSE threads.
/// The caller itself still waits for its answer (direct I/O is synchronous for the
/// application). The rest (forget, readdir of a listing taken at opendir, flush, a release
/// that removes nothing, the unsupported extended attributes) is answered on the FUSE thread.
#[derive(Debug)]
pub(crate) struct IosetsFs {
    inner: Arc<Inner>,
}

impl IosetsFs {
    pub(crate) fn new(inner: Inner) -> IosetsFs {
        IosetsFs {
            inner: Arc::new(inner),
        }
    }

    /// Hands a request off: `op`'s future runs as one task on the client runtime, bounded as a
    /// whole by the mount's timeout (`EIO` past it: a dead or unreachable server never hangs
    /// the caller, however many calls, retries and reconnections the request makes), and its
    /// result answers `reply`. The one timeout: the client's own `request_timeout` is off.
    /// `reply` is answered exactly once: the task owns it, and a task that panics or is
    /// dropped at the runtime's shutdown drops it unanswered, which fuser answers with `EIO`.
    fn spawn<R, F>(&self, reply: R, op: impl FnOnce(Arc<Inner>) -> F)
    where
        R: Answer,
        F: Future<Output = Result<R::Ok, Errno>> + Send + 'static,
    {
        let timeout = self.inner.cfg.timeout;
        let op = op(self.inner.clone());
        self.inner.rt.spawn(async move {
            let answer = tokio::time::timeout(timeout, op).await.unwrap_or_else(|_| {
                tracing::warn!(timeout = ?timeout, "request timed out: EIO");
                Err(Errno::EIO)
            });
            match answer {
                Ok(v) => reply.ok(v),
                Err(e) => reply.error(e),
            }
        });
    }
}

impl Filesystem for IosetsFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let max_write = self.inner.cfg.max_write;
        if let Err(nearest) = config.set_max_write(max_write) {
            tracing::info!(nearest, "the kernel limits max_write");
            let _ = config.set_max_write(nearest);
        }
        // mmap of direct-I/O files (the kernel keeps the mapped pages coherent with the direct
        // reads and writes), and lookups/readdirs of one directory in parallel.
        for flag in [
            fuser::InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP,
            fuser::InitFlags::FUSE_PARALLEL_DIROPS,
        ] {
            if config.add_capabilities(flag).is_err() {
                tracing::info!(?flag, "the kernel does not offer this capability");
            }
        }
        // Listings with their entries' attributes: `ls -l` is one request per server, not a
        // lookup per entry.
        let plus = fuser::InitFlags::FUSE_DO_READDIRPLUS;
        match config.add_capabilities(plus) {
            Ok(()) => self.inner.plus.store(true, Ordering::Relaxed),
            Err(_) => tracing::info!(flag = ?plus, "the kernel does not offer this capability"),
        }
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let (who, name) = (Who::of(req), name.to_owned());
        self.spawn(reply, move |s| async move {
            s.lookup(&who, parent, &name).await
        });
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.inner.forget(ino, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let who = Who::of(req);
        self.spawn(reply, move |s| async move { s.getattr(&who, ino).await });
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let who = Who::of(req);
        let set = SetAttr {
            mode: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size,
            atime: atime.map(set_time),
            mtime: mtime.map(set_time),
        };
        self.spawn(reply, move |s| async move {
            s.setattr(&who, ino, fh, set).await
        });
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        let who = Who::of(req);
        self.spawn(reply, move |s| async move { s.readlink(&who, ino).await });
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let (who, name) = (Who::of(req), name.to_owned());
        self.spawn(reply, move |s| async move {
            s.mknod(&who, parent, &name, mode, umask, rdev).await
        });
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let (who, name) = (Who::of(req), name.to_owned());
        self.spawn(reply, move |s| async move {
            s.mkdir(&who, parent, &name, mode, umask).await
        });
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let (who, name) = (Who::of(req), name.to_owned());
        self.spawn(reply, move |s| async move {
            s.unlink(&who, parent, &name).await
        });
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let (who, name) = (Who::of(req), name.to_owned());
        self.spawn(
            reply,
            move |s| async move { s.rmdir(&who, parent, &name).await },
        );
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let (who, name, target) = (Who::of(req), link_name.to_owned(), target.to_owned());
        self.spawn(reply, move |s| async move {
            s.symlink(&who, parent, &name, &target).await
        });
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (who, name, newname) = (Who::of(req), name.to_owned(), newname.to_owned());
        self.spawn(reply, move |s| async move {
            s.rename(&who, parent, &name, newparent, &newname, flags)
                .await
        });
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let (who, newname) = (Who::of(req), newname.to_owned());
        self.spawn(reply, move |s| async move {
            s.link(&who, ino, newparent, &newname).await
        });
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: FuseOpen, reply: ReplyOpen) {
        let who = Who::of(req);
        self.spawn(
            reply,
            move |s| async move { s.open(&who, ino, flags).await },
        );
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: FuseOpen,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.spawn(reply, move |s| async move {
            s.read(ino, fh, offset, size).await
        });
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: FuseOpen,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // The one copy of the data: the pieces sent to the servers are slices of it.
        let (who, data) = (Who::of(req), Bytes::copy_from_slice(data));
        self.spawn(reply, move |s| async move {
            s.write(&who, ino, fh, offset, data).await
        });
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Every write went to the servers before it returned: nothing is buffered here.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: FuseOpen,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // A close costs no server request, and is answered here, on the FUSE thread (no
        // hand-off to the client runtime), unless it was the last of a file unlinked while
        // open: its hidden name is removed first.
        match self.inner.release(fh) {
            None => reply.ok(),
            Some(silly) => {
                self.spawn(Released(reply), move |s| async move {
                    s.remove_silly(silly).await
                });
            }
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.spawn(reply, move |s| async move { s.fsync(ino, fh).await });
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: FuseOpen, reply: ReplyOpen) {
        let who = Who::of(req);
        self.spawn(reply, move |s| async move { s.opendir(&who, ino).await });
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.inner.readdir(fh, offset, reply);
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        self.inner.readdirplus(ino, fh, offset, reply);
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: FuseOpen,
        reply: ReplyEmpty,
    ) {
        self.inner.releasedir(fh);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // The servers fsync the directories whose entries changed at shutdown; an fsync of a
        // directory through the protocol is not there yet, so answer what is true: done by
        // the backing file system's ordering, not forced.
        reply.ok();
    }

    fn statfs(&self, req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let who = Who::of(req);
        self.spawn(reply, move |s| async move { s.statfs(&who).await });
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::from_i32(libc::ENOTSUP));
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        reply.error(Errno::from_i32(libc::ENOTSUP));
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::from_i32(libc::ENOTSUP));
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::from_i32(libc::ENOTSUP));
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let (who, name) = (Who::of(req), name.to_owned());
        self.spawn(reply, move |s| async move {
            s.create(&who, parent, &name, mode, umask, flags).await
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_kept_after_a_change_is_answered_once_the_newest_and_while_fresh() {
        let dir = |ctime_ns, size| {
            let mut a = Attr::new(FileKind::Dir, size, 0o755);
            a.ctime_ns = ctime_ns;
            a
        };
        let ttl = Duration::from_secs(60);
        let mut d = DirsAfter::default();
        assert_eq!(d.take(5, ttl), None);
        d.note(5, Some(dir(20, 2)), ttl);
        // An older answer arriving late does not replace a newer one.
        d.note(5, Some(dir(10, 1)), ttl);
        assert_eq!(d.take(5, ttl), Some(dir(20, 2)));
        assert_eq!(d.take(5, ttl), None, "answered once");
        // A change without attributes drops what was kept.
        d.note(5, Some(dir(30, 3)), ttl);
        d.note(5, None, ttl);
        assert_eq!(d.take(5, ttl), None);
        // With no attribute cache (attr_ttl 0) nothing is kept.
        d.note(7, Some(dir(50, 5)), Duration::ZERO);
        assert!(d.0.is_empty());
        // A full table makes room: the expired first, then everything.
        for ino in 0..DirsAfter::MAX as u64 {
            d.note(1000 + ino, Some(dir(1, 1)), ttl);
        }
        d.note(8, Some(dir(60, 6)), ttl);
        assert_eq!(d.0.len(), 1, "a full table of fresh entries is emptied");
        assert_eq!(d.take(8, ttl), Some(dir(60, 6)));
        // Past the time the kernel may keep attributes, the server is asked again.
        d.note(6, Some(dir(40, 4)), ttl);
        assert_eq!(d.take(6, Duration::ZERO), None);
        assert_eq!(d.take(6, ttl), None, "an expired entry is gone");
    }

    #[test]
    fn open_counts_follow_file_handles_only() {
        let mut h = Handles::default();
        let file = |ino| Handle::File {
            ino,
            job: JobId(1),
            creds: Creds::new(0, 0),
        };
        h.insert(1, file(7));
        h.insert(2, file(7));
        h.insert(
            3,
            Handle::Dir {
                entries: vec![],
                attrs: vec![],
            },
        );
        assert_eq!(h.open_count(7), 2);
        assert!(h.remove(&1).is_some());
        assert_eq!(h.open_count(7), 1);
        assert!(h.remove(&3).is_some());
        assert!(h.remove(&2).is_some());
        assert_eq!(h.open_count(7), 0);
        assert!(h.open.is_empty());
        assert!(h.remove(&2).is_none());
    }
}
