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
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
    Request, TimeOrNow, WriteFlags,
};
use iosets_client::{Attr, Client, ClientError, Control, Creds, FileKind, Reply, SetAttr, SetTime};
use iosets_proto::{Groups, JobsReport, ServerReport};
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
    /// A directory listing taken at opendir.
    Dir {
        entries: Vec<(u64, FileType, String)>,
    },
    /// A control file: its text, taken at open.
    Control { text: Vec<u8> },
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
        }
    }

    /// Runs `f` on the client's runtime, bounded by the mount's timeout (`EIO` past it: a
    /// dead server never hangs the caller).
    fn run<T>(&self, f: impl Future<Output = Result<T, ClientError>>) -> Result<T, Errno> {
        let timeout = self.cfg.timeout;
        match self
            .rt
            .block_on(async { tokio::time::timeout(timeout, f).await })
        {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                let errno = errno_of(&e);
                if errno == Errno::EIO {
                    tracing::warn!(error = %e, "I/O failed");
                } else {
                    tracing::debug!(error = %e, "request failed");
                }
                Err(errno)
            }
            Err(_) => {
                tracing::warn!(timeout = ?timeout, "request timed out: EIO");
                Err(Errno::EIO)
            }
        }
    }

    /// The job of the caller of `req` (its thread id and uid).
    fn job_of(&self, req: &Who) -> JobId {
        let job = self.resolver.resolve(req.pid(), req.uid()).job;
        let mut seen = self.seen_jobs.lock();
        if seen.len() < 65_536 {
            seen.insert(job.0);
        }
        job
    }

    /// The caller's credentials as the servers check them: uid, gid and (for a caller other
    /// than root, whose groups change nothing) its supplementary groups, read from procfs.
    fn creds(&self, req: &Who) -> Creds {
        let mut c = Creds::new(req.uid(), req.gid());
        if req.uid() != 0 {
            if let Some(g) = self.resolver.groups(req.pid()) {
                c.groups = Groups::new(&g);
            }
        }
        c
    }

    /// A client handle for the caller of `req`.
    fn caller(&self, req: &Who) -> Client {
        self.client
            .as_caller(self.job_of(req), Some(self.creds(req)))
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

    /// Records a new kernel reference to the object at `path` and answers its entry.
    fn entry(&self, path: &str, a: &Attr, reply: ReplyEntry) {
        let key = (self.client.layout().home(path), a.ino);
        let ino = self.inodes.lock().remember(path, key, a.nlink);
        reply.entry(&self.cfg.attr_ttl, &self.attr(ino, a), Generation(0));
    }

    fn control_attr(&self, ino: u64, node: Ctl) -> FileAttr {
        let now = SystemTime::now();
        FileAttr {
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
    fn reports<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        op: Control,
    ) -> Result<Vec<(String, T)>, Errno> {
        let token = self.token()?.to_owned();
        let client = self.client.clone();
        self.run(async move {
            let mut out = Vec::new();
            for (i, addr) in client.servers().iter().enumerate() {
                if let Reply::Json(text) = client.control(i, &token, op.clone()).await? {
                    let r: T = serde_json::from_str(&text).map_err(|e| ClientError::Protocol {
                        server: *addr,
                        reason: format!("{} report: {e}", op.op().as_str()),
                    })?;
                    out.push((addr.to_string(), r));
                }
            }
            Ok(out)
        })
    }

    fn jobs_reports(&self) -> Result<Vec<(String, JobsReport)>, Errno> {
        self.reports(Control::Jobs)
    }

    fn control_text(&self, node: Ctl) -> Result<Vec<u8>, Errno> {
        Ok(match node {
            Ctl::Priority(job) => control::priority_text(job, &self.jobs_reports()?),
            Ctl::Stats(job) => control::stats_text(job, &self.jobs_reports()?),
            Ctl::Policy => control::policy_text(&self.reports::<ServerReport>(Control::Stats)?),
            Ctl::Readme => control::README.to_string(),
            _ => return Err(Errno::EISDIR),
        }
        .into_bytes())
    }

    /// A write to `jobs/<id>/priority`: root may set any job's; another process as
    /// [`control::may_set`] says (its own job by its Slurm cgroup, within the servers' hint
    /// cap). A malformed value is `EINVAL`, a refusal `EACCES`; both are logged once.
    fn control_write(&self, req: &Who, job: JobId, data: &[u8]) -> Result<(), Errno> {
        let Some(what) = control::parse_priority(data) else {
            self.refusals
                .lock()
                .malformed(req.pid(), req.uid(), job, data);
            return Err(Errno::EINVAL);
        };
        if req.uid() != 0 {
            let mode = self.cfg.self_priority;
            // Only the cgroup counts: the environment is the user's to set.
            let own = self.resolver.slurm_job(req.pid());
            let cap = match (mode, what) {
                (control::SelfPriority::Capped, PriorityWrite::Set(_)) if own == Some(job) => {
                    let reports = self.reports::<ServerReport>(Control::Stats)?;
                    control::Cap::of(reports.iter().map(|(_, r)| r.hints.as_str()))
                }
                _ => control::Cap::None,
            };
            if let Err(why) = control::may_set(mode, own, job, what, cap) {
                self.refusals
                    .lock()
                    .refused(req.pid(), req.uid(), job, &why);
                return Err(Errno::EACCES);
            }
        }
        let token = self.token()?.to_owned();
        let client = self.client.clone();
        let op = match what {
            PriorityWrite::Set(priority) => Control::SetPriority { job, priority },
            PriorityWrite::Clear => Control::ClearPriority { job },
        };
        self.run(async move {
            for i in 0..client.servers().len() {
                client.control(i, &token, op.clone()).await?;
            }
            Ok(())
        })
    }

    fn control_lookup(&self, parent: Ctl, name: &OsStr, reply: ReplyEntry) {
        let Some(node) = name.to_str().and_then(|n| control::child(parent, n)) else {
            return reply.error(Errno::ENOENT);
        };
        let ino = self.slots.lock().ino(node);
        reply.entry(
            &self.cfg.attr_ttl,
            &self.control_attr(ino, node),
            Generation(0),
        );
    }

    fn control_listing(&self, node: Ctl) -> Result<Vec<(u64, FileType, String)>, Errno> {
        let names: Vec<(Ctl, String)> = match node {
            Ctl::Dir => vec![
                (Ctl::Readme, "README".into()),
                (Ctl::Jobs, "jobs".into()),
                (Ctl::Policy, "policy".into()),
            ],
            Ctl::Jobs => {
                let mut jobs: std::collections::BTreeSet<u64> = self.seen_jobs.lock().clone();
                if self.cfg.token.is_some() {
                    for (_, r) in self.jobs_reports()? {
                        jobs.extend(r.jobs.iter().map(|j| j.job));
                    }
                }
                jobs.into_iter()
                    .map(|j| (Ctl::JobDir(JobId(j)), j.to_string()))
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

    fn new_fh(&self, h: Handle) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().insert(fh, h);
        fh
    }

    fn open_flags(&self) -> FopenFlags {
        if self.cfg.cache {
            FopenFlags::empty()
        } else {
            FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
        }
    }

    /// The client handle of an open file: its opener's job and user.
    fn file_caller(&self, fh: u64) -> Result<(u64, Client), Errno> {
        match self.handles.lock().get(&fh) {
            Some(Handle::File { ino, job, creds }) => {
                Ok((*ino, self.client.as_caller(*job, Some(*creds))))
            }
            _ => Err(Errno::EBADF),
        }
    }
}

#[allow(clippy::too_many_arguments)] // fuser's request shapes
impl Inner {
    pub(crate) fn lookup(&self, req: &Who, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if let Some(p) = self.control_node(parent.0) {
            return self.control_lookup(p, name, reply);
        }
        if parent.0 == ROOT && name == control::CONTROL_DIR {
            return self.control_lookup_root(reply);
        }
        let path = match self.path(parent.0).and_then(|p| join(&p, name)) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let client = self.caller(req);
        match self.run(async { client.lstat(&path).await }) {
            Ok(a) => self.entry(&path, &a, reply),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn forget(&self, _req: &Who, ino: INodeNo, nlookup: u64) {
        if !control::is_control(ino.0) {
            self.inodes.lock().forget(ino.0, nlookup);
        }
    }

    pub(crate) fn getattr(
        &self,
        req: &Who,
        ino: INodeNo,
        _fh: Option<FileHandle>,
        reply: ReplyAttr,
    ) {
        if let Some(node) = self.control_node(ino.0) {
            return reply.attr(&self.cfg.attr_ttl, &self.control_attr(ino.0, node));
        }
        let path = match self.path(ino.0) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let client = self.caller(req);
        match self.run(async { client.lstat(&path).await }) {
            Ok(mut a) => {
                // Unlinked while open: its hidden name is not a link.
                if self.inodes.lock().is_silly(ino.0) {
                    a.nlink = a.nlink.saturating_sub(1);
                }
                reply.attr(&self.cfg.attr_ttl, &self.attr(ino.0, &a))
            }
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn setattr(
        &self,
        req: &Who,
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
        if let Some(node) = self.control_node(ino.0) {
            // `echo 5 > priority` truncates first: nothing to do. Other changes are refused.
            return if mode.is_none() && uid.is_none() && gid.is_none() && size == Some(0) {
                reply.attr(&self.cfg.attr_ttl, &self.control_attr(ino.0, node))
            } else {
                reply.error(Errno::EPERM)
            };
        }
        let path = match self.path(ino.0) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        // A truncate through an open file is done for its opener's job.
        let client = match fh.map(|f| self.file_caller(f.0)) {
            Some(Ok((_, c))) => c,
            _ => self.caller(req),
        };
        let set = SetAttr {
            mode: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size,
            atime: atime.map(set_time),
            mtime: mtime.map(set_time),
        };
        match self.run(async { client.setattr(&path, set).await }) {
            Ok(a) => reply.attr(&self.cfg.attr_ttl, &self.attr(ino.0, &a)),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn readlink(&self, req: &Who, ino: INodeNo, reply: ReplyData) {
        let path = match self.path(ino.0) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let client = self.caller(req);
        match self.run(async { client.readlink(&path).await }) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn mknod(
        &self,
        req: &Who,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let path = match self.child_path(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let client = self.caller(req);
        let mode = mode & !(umask & 0o777);
        match self.run(async { client.mknod(&path, mode, u64::from(rdev)).await }) {
            Ok(a) => self.entry(&path, &a, reply),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn mkdir(
        &self,
        req: &Who,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let path = match self.child_path(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let client = self.caller(req);
        let mode = mode & !umask & 0o7777;
        match self.run(async { client.mkdir(&path, mode).await }) {
            Ok(a) => self.entry(&path, &a, reply),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn unlink(&self, req: &Who, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let path = match self.child_path(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let client = self.caller(req);
        // Unlinked while open: renamed to a hidden name until its last close (NFS's "silly
        // rename"), so the open descriptors keep reading and writing it.
        let open_ino = self
            .inodes
            .lock()
            .by_path(&path)
            .filter(|&ino| self.open_count(ino) > 0);
        if let Some(ino) = open_ino {
            let silly = match path.rsplit_once('/') {
                Some((dir, _)) => format!("{dir}/{SILLY_PREFIX}{ino:x}"),
                None => format!("{SILLY_PREFIX}{ino:x}"),
            };
            return match self.run(async { client.rename(&path, &silly).await }) {
                Ok(()) => {
                    let mut t = self.inodes.lock();
                    t.renamed(&path, &silly);
                    t.set_silly(ino, &silly);
                    drop(t);
                    if let Some(c) = client.creds() {
                        self.unlinked_by.lock().insert(ino, c);
                    }
                    reply.ok()
                }
                Err(e) => reply.error(e),
            };
        }
        match self.run(async { client.unlink(&path).await }) {
            Ok(()) => {
                self.inodes.lock().unlinked(&path);
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn rmdir(&self, req: &Who, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let path = match self.child_path(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let client = self.caller(req);
        match self.run(async { client.rmdir(&path).await }) {
            Ok(()) => {
                self.inodes.lock().unlinked(&path);
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn symlink(
        &self,
        req: &Who,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let path = match self.child_path(parent, link_name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let Some(target) = target.to_str() else {
            return reply.error(Errno::EINVAL);
        };
        let client = self.caller(req);
        match self.run(async { client.symlink(&path, target).await }) {
            Ok(a) => self.entry(&path, &a, reply),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn rename(
        &self,
        req: &Who,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.bits() != 0 {
            // RENAME_NOREPLACE, RENAME_EXCHANGE: not in the protocol.
            return reply.error(Errno::EINVAL);
        }
        let (from, to) = match (
            self.child_path(parent, name),
            self.child_path(newparent, newname),
        ) {
            (Ok(f), Ok(t)) => (f, t),
            (Err(e), _) | (_, Err(e)) => return reply.error(e),
        };
        let client = self.caller(req);
        match self.run(async { client.rename(&from, &to).await }) {
            Ok(()) => {
                self.inodes.lock().renamed(&from, &to);
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn link(
        &self,
        req: &Who,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let (from, to) = match (self.path(ino.0), self.child_path(newparent, newname)) {
            (Ok(f), Ok(t)) => (f, t),
            (Err(e), _) | (_, Err(e)) => return reply.error(e),
        };
        let client = self.caller(req);
        match self.run(async { client.link(&from, &to).await }) {
            Ok(a) => {
                // The new name is the same object: key it by the source's home server.
                let key = (self.client.layout().home(&from), a.ino);
                // The object's path becomes the new name: both name it.
                let ino = self.inodes.lock().remember(&to, key, a.nlink);
                reply.entry(&self.cfg.attr_ttl, &self.attr(ino, &a), Generation(0));
            }
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn open(&self, req: &Who, ino: INodeNo, flags: FuseOpen, reply: ReplyOpen) {
        if let Some(node) = self.control_node(ino.0) {
            if node.is_dir() {
                return reply.error(Errno::EISDIR);
            }
            let writing = flags.0 & libc::O_ACCMODE != libc::O_RDONLY;
            if writing && !matches!(node, Ctl::Priority(_)) {
                return reply.error(Errno::EACCES);
            }
            // A priority file opened only to write needs no snapshot (and no token to read).
            let text = if writing && flags.0 & libc::O_ACCMODE == libc::O_WRONLY {
                Vec::new()
            } else {
                match self.control_text(node) {
                    Ok(t) => t,
                    Err(e) => return reply.error(e),
                }
            };
            let fh = self.new_fh(Handle::Control { text });
            return reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO);
        }
        let job = self.job_of(req);
        self.inodes.lock().set_job(ino.0, job);
        let fh = self.new_fh(Handle::File {
            ino: ino.0,
            job,
            creds: self.creds(req),
        });
        reply.opened(FileHandle(fh), self.open_flags());
    }

    pub(crate) fn read(
        &self,
        _req: &Who,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: FuseOpen,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if control::is_control(ino.0) {
            let handles = self.handles.lock();
            return match handles.get(&fh.0) {
                Some(Handle::Control { text, .. }) => {
                    let start = (offset as usize).min(text.len());
                    let end = start.saturating_add(size as usize).min(text.len());
                    reply.data(&text[start..end])
                }
                _ => reply.error(Errno::EBADF),
            };
        }
        let (ino, client) = match self.file_caller(fh.0) {
            Ok(c) => c,
            Err(e) => return reply.error(e),
        };
        let path = match self.path(ino) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match self.run(async { client.read_at(&path, offset, size as usize).await }) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn write(
        &self,
        req: &Who,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: iosets_proto::Bytes,
        _write_flags: WriteFlags,
        _flags: FuseOpen,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if let Some(node) = self.control_node(ino.0) {
            return match node {
                Ctl::Priority(job) => match self.control_write(req, job, &data) {
                    Ok(()) => reply.written(data.len() as u32),
                    Err(e) => reply.error(e),
                },
                _ => reply.error(Errno::EACCES),
            };
        }
        let (ino, client) = match self.file_caller(fh.0) {
            Ok(c) => c,
            Err(e) => return reply.error(e),
        };
        let path = match self.path(ino) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match self.run(async { client.write_at(&path, offset, data).await }) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn flush(
        &self,
        _req: &Who,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Every write went to the servers before it returned: nothing is buffered here.
        reply.ok();
    }

    pub(crate) fn release(
        &self,
        _req: &Who,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: FuseOpen,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let closed = self.handles.lock().remove(&fh.0);
        if let Some(Handle::File { ino, job, creds }) = closed {
            // Taken in its own statement: the table's lock must not be held across the
            // request below (it is taken again after it).
            let silly = if self.open_count(ino) == 0 {
                self.inodes.lock().take_silly(ino)
            } else {
                None
            };
            {
                if let Some(silly) = silly {
                    let by = self.unlinked_by.lock().remove(&ino).unwrap_or(creds);
                    let client = self.client.as_caller(job, Some(by));
                    if self.run(async { client.unlink(&silly).await }).is_ok() {
                        self.inodes.lock().unlinked(&silly);
                    }
                }
            }
        }
        reply.ok();
    }

    /// How many open handles `ino` has.
    fn open_count(&self, ino: u64) -> usize {
        self.handles.lock().open_count(ino)
    }

    pub(crate) fn fsync(
        &self,
        _req: &Who,
        ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if control::is_control(ino.0) {
            return reply.ok();
        }
        let (ino, client) = match self.file_caller(fh.0) {
            Ok(c) => c,
            Err(e) => return reply.error(e),
        };
        let path = match self.path(ino) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match self.run(async { client.fsync(&path).await }) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn opendir(&self, req: &Who, ino: INodeNo, _flags: FuseOpen, reply: ReplyOpen) {
        if let Some(node) = self.control_node(ino.0) {
            return match self.control_listing(node) {
                Ok(entries) => {
                    let fh = self.new_fh(Handle::Dir { entries });
                    reply.opened(FileHandle(fh), FopenFlags::empty())
                }
                Err(e) => reply.error(e),
            };
        }
        let path = match self.path(ino.0) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let client = self.caller(req);
        let listing = match self.run(async { client.readdir(&path).await }) {
            Ok(l) => l,
            Err(e) => return reply.error(e),
        };
        let parent = match path.rsplit_once('/') {
            Some((p, _)) => self.inodes.lock().by_path(p).unwrap_or(ROOT),
            None => ROOT,
        };
        let mut entries = vec![
            (ino.0, FileType::Directory, ".".to_string()),
            (parent, FileType::Directory, "..".to_string()),
        ];
        {
            let t = self.inodes.lock();
            for e in listing {
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
            }
        }
        let fh = self.new_fh(Handle::Dir { entries });
        reply.opened(FileHandle(fh), FopenFlags::empty());
    }

    pub(crate) fn readdir(
        &self,
        _req: &Who,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let handles = self.handles.lock();
        let Some(Handle::Dir { entries }) = handles.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    pub(crate) fn releasedir(
        &self,
        _req: &Who,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: FuseOpen,
        reply: ReplyEmpty,
    ) {
        self.handles.lock().remove(&fh.0);
        reply.ok();
    }

    pub(crate) fn fsyncdir(
        &self,
        _req: &Who,
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

    pub(crate) fn statfs(&self, req: &Who, _ino: INodeNo, reply: ReplyStatfs) {
        let client = self.caller(req);
        match self.run(async { client.statfs().await }) {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
            ),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn setxattr(
        &self,
        _req: &Who,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::from_i32(libc::ENOTSUP));
    }

    pub(crate) fn getxattr(
        &self,
        _req: &Who,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        reply.error(Errno::from_i32(libc::ENOTSUP));
    }

    pub(crate) fn listxattr(&self, _req: &Who, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::from_i32(libc::ENOTSUP));
    }

    pub(crate) fn removexattr(&self, _req: &Who, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::from_i32(libc::ENOTSUP));
    }

    pub(crate) fn create(
        &self,
        req: &Who,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let path = match self.child_path(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let job = self.job_of(req);
        let creds = self.creds(req);
        let client = self.client.as_caller(job, Some(creds));
        let mode = mode & !umask & 0o7777;
        let exclusive = flags & libc::O_EXCL != 0;
        let a = match self.run(async { client.create(&path, mode, exclusive).await }) {
            Ok(a) => a,
            Err(e) => return reply.error(e),
        };
        let key = (self.client.layout().home(&path), a.ino);
        let ino = {
            let mut t = self.inodes.lock();
            let ino = t.remember(&path, key, a.nlink);
            t.set_job(ino, job);
            ino
        };
        let fh = self.new_fh(Handle::File { ino, job, creds });
        reply.created(
            &self.cfg.attr_ttl,
            &self.attr(ino, &a),
            Generation(0),
            FileHandle(fh),
            self.open_flags(),
        );
    }
}

impl Inner {
    fn child_path(&self, parent: INodeNo, name: &OsStr) -> Result<String, Errno> {
        if self.control_node(parent.0).is_some() {
            return Err(Errno::EACCES);
        }
        if parent.0 == ROOT && name == control::CONTROL_DIR {
            return Err(Errno::EACCES);
        }
        self.path(parent.0).and_then(|p| join(&p, name))
    }

    fn control_lookup_root(&self, reply: ReplyEntry) {
        reply.entry(
            &self.cfg.attr_ttl,
            &self.control_attr(control::DIR, Ctl::Dir),
            Generation(0),
        );
    }
}

/// Who made a kernel request: what the request carries of its caller.
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
    fn pid(&self) -> u32 {
        self.pid
    }
    fn uid(&self) -> u32 {
        self.uid
    }
    fn gid(&self) -> u32 {
        self.gid
    }
}

/// The file system as fuser sees it. Every request that talks to the servers is handed to a
/// thread of the client runtime's blocking pool and answered from there, so a FUSE thread
/// never waits on a server: as many requests as callers can be queued at the servers (where
/// the scheduler orders them), not only as many as there are FUSE threads. The caller itself
/// still waits for its answer (direct I/O is synchronous for the application).
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

    fn pool(&self, f: impl FnOnce(&Inner) + Send + 'static) {
        let inner = self.inner.clone();
        self.inner.rt.spawn_blocking(move || f(&inner));
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
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let (who, name) = (Who::of(req), name.to_owned());
        self.pool(move |s| s.lookup(&who, parent, &name, reply));
    }

    fn forget(&self, req: &Request, ino: INodeNo, nlookup: u64) {
        self.inner.forget(&Who::of(req), ino, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let who = Who::of(req);
        self.pool(move |s| s.getattr(&who, ino, fh, reply));
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
        ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        crtime: Option<SystemTime>,
        chgtime: Option<SystemTime>,
        bkuptime: Option<SystemTime>,
        flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let who = Who::of(req);
        self.pool(move |s| {
            s.setattr(
                &who, ino, mode, uid, gid, size, atime, mtime, ctime, fh, crtime, chgtime,
                bkuptime, flags, reply,
            )
        });
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        let who = Who::of(req);
        self.pool(move |s| s.readlink(&who, ino, reply));
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
        self.pool(move |s| s.mknod(&who, parent, &name, mode, umask, rdev, reply));
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
        self.pool(move |s| s.mkdir(&who, parent, &name, mode, umask, reply));
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let (who, name) = (Who::of(req), name.to_owned());
        self.pool(move |s| s.unlink(&who, parent, &name, reply));
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let (who, name) = (Who::of(req), name.to_owned());
        self.pool(move |s| s.rmdir(&who, parent, &name, reply));
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
        self.pool(move |s| s.symlink(&who, parent, &name, &target, reply));
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
        self.pool(move |s| s.rename(&who, parent, &name, newparent, &newname, flags, reply));
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
        self.pool(move |s| s.link(&who, ino, newparent, &newname, reply));
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: FuseOpen, reply: ReplyOpen) {
        let who = Who::of(req);
        self.pool(move |s| s.open(&who, ino, flags, reply));
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        flags: FuseOpen,
        lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let who = Who::of(req);
        self.pool(move |s| s.read(&who, ino, fh, offset, size, flags, lock_owner, reply));
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: FuseOpen,
        lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // The one copy of the data: the pieces sent to the servers are slices of it.
        let (who, data) = (Who::of(req), iosets_proto::Bytes::copy_from_slice(data));
        self.pool(move |s| {
            s.write(
                &who,
                ino,
                fh,
                offset,
                data,
                write_flags,
                flags,
                lock_owner,
                reply,
            )
        });
    }

    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.inner.flush(&Who::of(req), ino, fh, lock_owner, reply);
    }

    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: FuseOpen,
        lock_owner: Option<LockOwner>,
        flush: bool,
        reply: ReplyEmpty,
    ) {
        let who = Who::of(req);
        self.pool(move |s| s.release(&who, ino, fh, flags, lock_owner, flush, reply));
    }

    fn fsync(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let who = Who::of(req);
        self.pool(move |s| s.fsync(&who, ino, fh, datasync, reply));
    }

    fn opendir(&self, req: &Request, ino: INodeNo, flags: FuseOpen, reply: ReplyOpen) {
        let who = Who::of(req);
        self.pool(move |s| s.opendir(&who, ino, flags, reply));
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.inner.readdir(&Who::of(req), ino, fh, offset, reply);
    }

    fn releasedir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: FuseOpen,
        reply: ReplyEmpty,
    ) {
        self.inner.releasedir(&Who::of(req), ino, fh, flags, reply);
    }

    fn fsyncdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.inner.fsyncdir(&Who::of(req), ino, fh, datasync, reply);
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        let who = Who::of(req);
        self.pool(move |s| s.statfs(&who, ino, reply));
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        self.inner
            .setxattr(&Who::of(req), ino, name, value, flags, position, reply);
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        self.inner.getxattr(&Who::of(req), ino, name, size, reply);
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.inner.listxattr(&Who::of(req), ino, size, reply);
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.inner.removexattr(&Who::of(req), ino, name, reply);
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
        self.pool(move |s| s.create(&who, parent, &name, mode, umask, flags, reply));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        h.insert(3, Handle::Dir { entries: vec![] });
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
