//! The asynchronous client.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use iosets_proto::local::{Region, Slot};
use iosets_proto::{
    Attr, Control, Creds, DirEntry, FileKind, OpenFlags, Reply, Request, Response, SetAttr, Statfs,
};
use iosets_types::{JobId, Priority};

use crate::phase::{PhaseClock, Quiet, Stamped};

use crate::config::ClientConfig;
use crate::conn::{read_range, Caller, Connector, Endpoint, Landing, Local, LOCAL_MIN};
use crate::error::ClientError;
use crate::layout::{normalize_path, Layout};

/// A client of one or many I/O servers, on a tokio runtime. Cheap to clone: clones share the
/// connections.
///
/// Every operation takes a path relative to the servers' root (see
/// [`normalize_path`](crate::normalize_path)). File data is striped over the servers by the
/// [`Layout`]; see the [crate documentation](crate) for which server gets which request.
#[derive(Clone, Debug)]
pub struct Client {
    inner: Arc<Inner>,
    /// The job this handle's requests are done for.
    job: JobId,
    /// The local user this handle acts for, if any.
    creds: Option<Creds>,
}

#[derive(Debug)]
struct Inner {
    cfg: ClientConfig,
    layout: Layout,
    endpoints: Vec<Endpoint>,
    /// The priority hint's bits; 0 for none (0.0 is not a valid priority).
    priority: AtomicU64,
    /// The shared region of the same-host transport, when it is on.
    local: Option<Local>,
    /// Each job's I/O phase, when requests carry phase stamps.
    phases: Option<PhaseClock>,
    /// What each job's other servers served it, told to each server (with several servers).
    served: Option<crate::served::Served>,
    /// Names of jobs ([`Client::name_job`]), told to each server before a job's first request
    /// on each connection; `has_names` spares the lock while there is none.
    names: std::sync::RwLock<Names>,
    has_names: std::sync::atomic::AtomicBool,
}

/// Job names by id, at most [`MAX_NAMES`], the oldest forgotten first.
#[derive(Debug, Default)]
struct Names {
    by_job: iosets_types::hash::IdMap<u64, std::sync::Arc<str>>,
    order: std::collections::VecDeque<u64>,
}

/// The most job names a client keeps.
pub const MAX_NAMES: usize = 65_536;

/// A buffer to fill and then write with [`Client::write_at`] (after
/// [`freeze`](WriteBuf::freeze)). From [`Client::buffer`]: in the shared region of the
/// same-host transport when the client has one and it has room, so that a write to a server on
/// this host copies nothing in the client; in ordinary memory otherwise. Any `Bytes` can be
/// written; this one saves a copy.
#[derive(Debug)]
pub struct WriteBuf(Buf);

#[derive(Debug)]
enum Buf {
    Shared(Slot),
    Heap(BytesMut),
}

impl WriteBuf {
    /// Whether it lies in the shared region.
    pub fn is_shared(&self) -> bool {
        matches!(self.0, Buf::Shared(_))
    }

    /// The filled buffer, to pass to [`Client::write_at`] (as often as needed: clones share it).
    pub fn freeze(self) -> Bytes {
        match self.0 {
            Buf::Shared(s) => s.freeze(),
            Buf::Heap(b) => b.freeze(),
        }
    }
}

impl std::ops::Deref for WriteBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Buf::Shared(s) => s,
            Buf::Heap(b) => b,
        }
    }
}

impl std::ops::DerefMut for WriteBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.0 {
            Buf::Shared(s) => s,
            Buf::Heap(b) => b,
        }
    }
}

/// Awaits every future, concurrently, and returns their outputs in order.
async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (f, out) in futures.iter_mut().zip(outputs.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *out = Some(v),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// The attributes a reply carries: of [`Reply::Attr`], or of a new entry ([`Reply::Entry`]).
fn attr_in(r: &Reply) -> Option<&Attr> {
    match r {
        Reply::Attr(a) | Reply::Entry { attr: a, .. } => Some(a),
        _ => None,
    }
}

/// A new entry ([`Client::create_entry`], [`Client::mkdir_entry`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Entry {
    /// Its attributes (as [`Client::lookup`] gives them).
    pub attr: Attr,
    /// Its directory's attributes right after the change, from the directory's home server
    /// (`None` when that server did not give them). A caller that caches the directory's
    /// attributes can take these instead of asking again.
    pub dir: Option<Attr>,
}

/// Adds the other servers' `answers` to `replies`; a server's error of kind `tolerated` (the
/// change already seen through a shared root, or a file a server holds no part of) is skipped,
/// any other error returned.
fn keep_answers<T>(
    replies: &mut Vec<T>,
    answers: impl IntoIterator<Item = Result<T, ClientError>>,
    tolerated: Option<std::io::ErrorKind>,
) -> Result<(), ClientError> {
    for a in answers {
        match a {
            Ok(r) => replies.push(r),
            Err(e) if tolerated.is_some_and(|k| e.errno().is_some() && e.kind() == k) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A regular file's attributes widened by one of its parts on another server: the file is as
/// long as its longest part, changed when its latest part was.
fn widen(file: &mut Attr, part: &Attr) {
    file.size = file.size.max(part.size);
    file.mtime_ns = file.mtime_ns.max(part.mtime_ns);
    file.ctime_ns = file.ctime_ns.max(part.ctime_ns);
    file.blocks = file.blocks.max(part.blocks);
}

/// Resolves `host:port` strings (the first address of each).
pub(crate) async fn resolve<S: AsRef<str>>(addrs: &[S]) -> Result<Vec<SocketAddr>, ClientError> {
    let mut out = Vec::with_capacity(addrs.len());
    for a in addrs {
        let a = a.as_ref();
        let mut found = tokio::net::lookup_host(a)
            .await
            .map_err(|e| ClientError::Resolve {
                addr: a.to_owned(),
                reason: e.to_string(),
            })?;
        out.push(found.next().ok_or_else(|| ClientError::Resolve {
            addr: a.to_owned(),
            reason: "no address".into(),
        })?);
    }
    Ok(out)
}

fn unexpected(server: SocketAddr, op: &str, reply: &Reply) -> ClientError {
    ClientError::Protocol {
        server,
        reason: format!("unexpected reply to {op}: {reply:?}"),
    }
}

impl Client {
    /// Connects to every server of `servers` (the order defines the layout: every client of a
    /// file must list the same servers in the same order). Fails if any server cannot be
    /// reached (after the configured retries); later connection losses are repaired on use.
    pub async fn connect(servers: &[SocketAddr], cfg: ClientConfig) -> Result<Client, ClientError> {
        let servers: Vec<_> = servers.iter().map(|&a| (a, None)).collect();
        Client::connect_endpoints(&servers, cfg).await
    }

    /// Connects to one server that runs inside this process, through `connector` (see
    /// [`Connector`]): no address or port, nothing another process or user could connect to.
    /// `name` stands for the server in errors and in [`Client::servers`].
    pub async fn connect_in_process(
        name: SocketAddr,
        connector: Connector,
        cfg: ClientConfig,
    ) -> Result<Client, ClientError> {
        Client::connect_endpoints(&[(name, Some(connector))], cfg).await
    }

    async fn connect_endpoints(
        servers: &[(SocketAddr, Option<Connector>)],
        cfg: ClientConfig,
    ) -> Result<Client, ClientError> {
        cfg.validate()?;
        let layout = Layout::new(cfg.chunk_size, servers.len())?;
        // A region the kernel refuses (no memfd) only means no same-host transport.
        let local = cfg
            .local
            .then(|| Region::create(cfg.local_region as usize).ok())
            .flatten()
            .map(Local::new);
        let mut endpoints = Vec::with_capacity(servers.len());
        for (addr, connector) in servers {
            let mut attempt = 0;
            let ep = loop {
                match Endpoint::connect(*addr, connector.clone(), &cfg, local.clone()).await {
                    Ok(ep) => break ep,
                    Err(e) if attempt >= cfg.retries => return Err(e),
                    Err(_) => {
                        tokio::time::sleep(cfg.backoff_for(attempt)).await;
                        attempt += 1;
                    }
                }
            };
            endpoints.push(ep);
        }
        let priority = AtomicU64::new(cfg.priority.map_or(0, |p| p.get().to_bits()));
        let phases = cfg
            .phase_stamps
            .then(|| PhaseClock::new(cfg.phase_gap, cfg.max_phase));
        Ok(Client {
            job: cfg.job,
            creds: None,
            inner: Arc::new(Inner {
                cfg,
                layout,
                endpoints,
                priority,
                local,
                phases,
                served: crate::served::Served::new(servers.len()),
                names: std::sync::RwLock::new(Names::default()),
                has_names: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// [`connect`](Client::connect) to servers given as `host:port` strings.
    pub async fn connect_to<S: AsRef<str>>(
        servers: &[S],
        cfg: ClientConfig,
    ) -> Result<Client, ClientError> {
        let addrs = resolve(servers).await?;
        Client::connect(&addrs, cfg).await
    }

    /// The servers, in layout order.
    pub fn servers(&self) -> Vec<SocketAddr> {
        self.inner.endpoints.iter().map(|e| e.addr).collect()
    }

    /// The striping layout.
    pub fn layout(&self) -> Layout {
        self.inner.layout
    }

    /// The job this client's requests are done for.
    pub fn job(&self) -> JobId {
        self.job
    }

    /// The local user this handle's requests act for, if any.
    pub fn creds(&self) -> Option<Creds> {
        self.creds
    }

    /// A handle on the same connections whose requests are done for job `job` and, when
    /// `creds` is given, a local user (the server makes new files theirs). This is how one
    /// process serves many jobs and users: the mount makes one per file system request. Cheap:
    /// an `Arc` clone.
    pub fn as_caller(&self, job: JobId, creds: Option<Creds>) -> Client {
        Client {
            inner: self.inner.clone(),
            job,
            creds,
        }
    }

    /// Gives job `job` its name (as the mount names jobs: `IOSETS_JOB_ID`'s value, Slurm's job
    /// id, `procname.uid`): each server is told it before the job's first request on each
    /// connection, and shows it in its reports and matches quota rules' `job=` patterns on it.
    /// Ignored unless `job` is the id made from `name` ([`JobId::of_name`]). At most
    /// [`MAX_NAMES`] names are kept, the oldest forgotten first.
    pub fn name_job(&self, job: JobId, name: &str) {
        if JobId::of_name(name) != Some(job) {
            return;
        }
        if self
            .inner
            .names
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .by_job
            .get(&job.0)
            .is_some_and(|n| &**n == name)
        {
            return;
        }
        let mut names = self.inner.names.write().unwrap_or_else(|e| e.into_inner());
        if names.by_job.insert(job.0, name.into()).is_none() {
            names.order.push_back(job.0);
            while names.order.len() > MAX_NAMES {
                if let Some(old) = names.order.pop_front() {
                    names.by_job.remove(&old);
                }
            }
        }
        self.inner.has_names.store(true, Ordering::Relaxed);
    }

    /// This handle's job's name, if one was given ([`Client::name_job`]).
    fn job_name(&self) -> Option<std::sync::Arc<str>> {
        self.name_of(self.job)
    }

    /// The name given to `job` ([`Client::name_job`]), if any.
    pub fn name_of(&self, job: JobId) -> Option<std::sync::Arc<str>> {
        if !self.inner.has_names.load(Ordering::Relaxed) {
            return None;
        }
        self.inner
            .names
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .by_job
            .get(&job.0)
            .cloned()
    }

    /// The priority hint sent with every request, if any.
    pub fn priority_hint(&self) -> Option<Priority> {
        Priority::new(f64::from_bits(self.inner.priority.load(Ordering::Relaxed)))
    }

    /// Changes the priority hint sent with the following requests (`None`: send none).
    pub fn set_priority_hint(&self, priority: Option<Priority>) {
        let bits = priority.map_or(0, |p| p.get().to_bits());
        self.inner.priority.store(bits, Ordering::Relaxed);
    }

    /// A buffer of `len` bytes (zeroed) to fill and write with [`write_at`](Client::write_at):
    /// in the shared region when the same-host transport is on and the region has room (then a
    /// write of it to a server on this host copies nothing in the client), in ordinary memory
    /// otherwise. Either way it can be written to any server.
    pub fn buffer(&self, len: usize) -> WriteBuf {
        let slot = self.inner.local.as_ref().and_then(|l| l.region.alloc(len));
        match slot {
            Some(mut s) => {
                s.fill(0);
                WriteBuf(Buf::Shared(s))
            }
            None => WriteBuf(Buf::Heap(BytesMut::zeroed(len))),
        }
    }

    /// Whether requests to server number `server` currently go through the same-host
    /// transport (after a first read or write of 64 KiB or more to it).
    pub fn is_local(&self, server: usize) -> bool {
        self.inner
            .endpoints
            .get(server)
            .is_some_and(Endpoint::is_local)
    }

    /// Sends `req` to server `server` and turns an errno answer into [`ClientError::Errno`].
    async fn request(&self, server: usize, req: Request) -> Result<Reply, ClientError> {
        self.request_into(server, req, None).await
    }

    /// [`request`](Client::request), with where a read's bytes should land.
    async fn request_into(
        &self,
        server: usize,
        req: Request,
        landing: Option<Landing>,
    ) -> Result<Reply, ClientError> {
        let ep = &self.inner.endpoints[server];
        let stamped = self.inner.phases.as_ref().map(|clock| Stamped {
            client: self,
            clock,
            job: self.job,
        });
        // Control requests are not scheduled: they neither carry nor count service.
        let served = self
            .inner
            .served
            .as_ref()
            .filter(|_| !matches!(req, Request::Control { .. }));
        let who = Caller {
            job: self.job,
            priority: self.priority_hint(),
            creds: self.creds,
            phase: stamped.as_ref().map(|s| s.clock.begin(s.job, server)),
            elsewhere: served.and_then(|s| s.take(self.job, server)),
        };
        // Looked up only when the connection has not told the job's name yet.
        let name_of = || self.job_name();
        let named = self.inner.has_names.load(Ordering::Relaxed);
        let resp = ep
            .call(
                &self.inner.cfg,
                who,
                req,
                landing.as_ref(),
                named.then_some(&name_of as crate::conn::NameOf<'_>),
            )
            .await?;
        if let Some(s) = served {
            let bytes = match &resp {
                Response::Ok(Reply::Data(d)) => d.len() as u64,
                Response::Ok(Reply::Written(n)) => u64::from(*n),
                _ => 0,
            };
            s.record(self.job, server, bytes);
        }
        match resp {
            Response::Ok(reply) => Ok(reply),
            Response::Err { errno, message } => Err(ClientError::Errno {
                errno,
                message,
                server: ep.addr,
            }),
        }
    }

    /// Sends the end of this job's phase `quiet` to the servers it touched, if the job has
    /// begun nothing since (see the `phase` module). Failures are ignored: a server that misses
    /// it keeps the set for its `open_hold_ms` at most.
    pub(crate) async fn phase_over(&self, quiet: Quiet) {
        let Some(clock) = &self.inner.phases else {
            return;
        };
        if !clock.still_quiet(self.job, quiet) {
            return;
        }
        let sends = quiet.servers(self.inner.endpoints.len()).map(|s| {
            let who = Caller {
                job: self.job,
                priority: None,
                creds: None,
                phase: Some(quiet.stamp),
                elsewhere: None,
            };
            self.inner.endpoints[s].call(&self.inner.cfg, who, Request::PhaseEnd, None, None)
        });
        let _ = join_all(sends.collect()).await;
    }

    fn addr(&self, server: usize) -> SocketAddr {
        self.inner.endpoints[server].addr
    }

    fn others(&self, home: usize) -> impl Iterator<Item = usize> {
        (0..self.inner.endpoints.len()).filter(move |&s| s != home)
    }

    /// Removes the name `path` with `make(path)` from every server (home first; the others may
    /// already miss it through a shared root).
    /// Returns the directory's attributes after the change, when its home server gave them.
    async fn remove(
        &self,
        path: &str,
        make: impl FnOnce(String) -> Request,
    ) -> Result<Option<Attr>, ClientError> {
        let path = normalize_path(path)?;
        let (_, replies) = self
            .change(&path, Some(std::io::ErrorKind::NotFound), make)
            .await?;
        Ok(self.dir_after(&path, &replies))
    }

    /// A namespace change of `path` (normalized): `make(path)` sent
    /// [`everywhere`](Self::everywhere) from `path`'s home server, errors of kind `tolerated`
    /// ignored on the others. Returns the home server and the answers by server, its own first.
    async fn change(
        &self,
        path: &str,
        tolerated: Option<std::io::ErrorKind>,
        make: impl FnOnce(String) -> Request,
    ) -> Result<(usize, Vec<(usize, Reply)>), ClientError> {
        let home = self.inner.layout.home(path);
        let req = make(path.to_owned());
        let replies = self.everywhere(home, req.clone(), req, tolerated).await?;
        Ok((home, replies))
    }

    /// Sends `make()` to each of `servers` at once; their answers in the same order.
    async fn ask_each(
        &self,
        servers: impl Iterator<Item = usize>,
        make: impl Fn() -> Request,
    ) -> Vec<Result<Reply, ClientError>> {
        join_all(servers.map(|s| self.request(s, make())).collect()).await
    }

    /// [`ask_each`](Self::ask_each), each answer with its server's number.
    async fn ask_each_numbered(
        &self,
        servers: impl Iterator<Item = usize>,
        make: impl Fn() -> Request,
    ) -> Vec<Result<(usize, Reply), ClientError>> {
        let asks = servers.map(|s| {
            let req = make();
            async move { self.request(s, req).await.map(|r| (s, r)) }
        });
        join_all(asks.collect()).await
    }

    /// A namespace change: first on the home server, whose answer decides success; then on
    /// every other server concurrently (with `others_req`), where errors of kind `tolerated`
    /// (the change already visible through a shared root) are ignored.
    async fn everywhere(
        &self,
        home: usize,
        req: Request,
        others_req: Request,
        tolerated: Option<std::io::ErrorKind>,
    ) -> Result<Vec<(usize, Reply)>, ClientError> {
        let first = self.request(home, req).await?;
        let rest = self
            .ask_each_numbered(self.others(home), || others_req.clone())
            .await;
        let mut replies = vec![(home, first)];
        keep_answers(&mut replies, rest, tolerated)?;
        Ok(replies)
    }

    /// A namespace change that answers attributes: `make(path)` [`everywhere`](Self::everywhere)
    /// (errors of kind `tolerated` ignored on the other servers), the answers merged as
    /// [`merge_attrs`](Self::merge_attrs) does; `op` names it in errors.
    async fn change_attrs(
        &self,
        path: &str,
        op: &str,
        tolerated: Option<std::io::ErrorKind>,
        make: impl FnOnce(String) -> Request,
    ) -> Result<Attr, ClientError> {
        let path = normalize_path(path)?;
        let (home, replies) = self.change(&path, tolerated, make).await?;
        self.merge_attrs(home, op, replies.iter().map(|(_, r)| r))
    }

    /// The home server's attributes with the size replaced by the largest of `replies`
    /// (servers hold sparse parts of a file when their roots are separate).
    /// A new entry's attributes count as attributes ([`Reply::Entry`]).
    fn merge_attrs<'a>(
        &self,
        home: usize,
        op: &str,
        replies: impl IntoIterator<Item = &'a Reply>,
    ) -> Result<Attr, ClientError> {
        let mut replies = replies.into_iter();
        let mut attr = match replies.next() {
            Some(r) => *attr_in(r).ok_or_else(|| unexpected(self.addr(home), op, r))?,
            None => return Err(ClientError::Config("no reply".into())),
        };
        if attr.kind == FileKind::File {
            for r in replies {
                if let Some(a) = attr_in(r) {
                    widen(&mut attr, a);
                }
            }
        }
        Ok(attr)
    }

    /// The attributes of `path` itself, a final symbolic link not followed (lstat); asked of
    /// every server for a regular file, as [`lookup`](Client::lookup).
    pub async fn lstat(&self, path: &str) -> Result<Attr, ClientError> {
        let path = normalize_path(path)?;
        self.attrs_everywhere(&path, "lstat", || Request::Lstat { path: path.clone() })
            .await
    }

    /// [`lstat`](Client::lstat) of a name the caller has not seen, most often one about to be
    /// made (a file system's lookup before a create): its home server first, alone, whose
    /// answer decides as in [`lstat`](Client::lstat); the other servers only if it is a regular
    /// file, for the sizes of their parts. A name that is not there, or is not a file, costs one
    /// request, not one per server; an existing file costs a second round trip.
    pub async fn lstat_unseen(&self, path: &str) -> Result<Attr, ClientError> {
        let path = normalize_path(path)?;
        let make = || Request::Lstat { path: path.clone() };
        let home = self.inner.layout.home(&path);
        let first = self.request(home, make()).await?;
        let is_file = attr_in(&first).is_some_and(|a| a.kind == FileKind::File);
        let mut replies = vec![first];
        if is_file {
            let rest = self.ask_each(self.others(home), &make).await;
            keep_answers(&mut replies, rest, Some(std::io::ErrorKind::NotFound))?;
        }
        self.merge_attrs(home, "lstat", &replies)
    }

    /// Changes the attributes `set` names (chmod, chown, truncate, utimens) of `path` on every
    /// server (home first; a final symbolic link is not followed) and returns the new
    /// attributes (as [`lstat`](Client::lstat)).
    pub async fn setattr(&self, path: &str, set: SetAttr) -> Result<Attr, ClientError> {
        self.change_attrs(path, "setattr", None, |path| Request::Setattr { path, set })
            .await
    }

    /// Creates a symbolic link `path` pointing to `target` on every server (home first).
    pub async fn symlink(&self, path: &str, target: &str) -> Result<Attr, ClientError> {
        self.change_attrs(
            path,
            "symlink",
            Some(std::io::ErrorKind::AlreadyExists),
            |path| Request::Symlink {
                path,
                target: target.to_owned(),
            },
        )
        .await
    }

    /// The target of the symbolic link `path`, from its home server.
    pub async fn readlink(&self, path: &str) -> Result<Bytes, ClientError> {
        let path = normalize_path(path)?;
        let home = self.inner.layout.home(&path);
        match self.request(home, Request::Readlink { path }).await? {
            Reply::Data(d) => Ok(d),
            other => Err(unexpected(self.addr(home), "readlink", &other)),
        }
    }

    /// Creates a special file (FIFO, socket, device: `mode` carries the type bits) on every
    /// server (home first).
    pub async fn mknod(&self, path: &str, mode: u32, rdev: u64) -> Result<Attr, ClientError> {
        self.change_attrs(
            path,
            "mknod",
            Some(std::io::ErrorKind::AlreadyExists),
            |path| Request::Mknod { path, mode, rdev },
        )
        .await
    }

    /// Makes `to` a new name (hard link) of the file `from`. Only with one server: the layout
    /// is a function of the name, so over several servers (with separate roots) the new
    /// name's chunks would be looked for where the old name's are not
    /// ([`ClientError::Unsupported`], `ENOTSUP` through the mount).
    pub async fn link(&self, from: &str, to: &str) -> Result<Attr, ClientError> {
        if self.inner.endpoints.len() != 1 {
            return Err(ClientError::Unsupported(format!(
                "hard link {from:?} -> {to:?}: hard links need a single server (the striping \
                 layout is a function of the name; there are {} servers)",
                self.inner.endpoints.len()
            )));
        }
        let from = normalize_path(from)?;
        let to = normalize_path(to)?;
        match self.request(0, Request::Link { from, to }).await? {
            Reply::Attr(a) => Ok(a),
            other => Err(unexpected(self.addr(0), "link", &other)),
        }
    }

    /// The capacity of the file system under the servers' root, as the home server of the
    /// root sees it (with one shared root every server sees the same).
    pub async fn statfs(&self) -> Result<Statfs, ClientError> {
        let home = self.inner.layout.home("");
        match self.request(home, Request::Statfs).await? {
            Reply::Statfs(s) => Ok(s),
            other => Err(unexpected(self.addr(home), "statfs", &other)),
        }
    }

    /// The attributes of `path` (stat), a final symbolic link followed. Asked of every server
    /// at once: the kind, mode and times are the home server's, the size of a regular file is
    /// the largest any server reports (each may hold a sparse part of it).
    pub async fn lookup(&self, path: &str) -> Result<Attr, ClientError> {
        let path = normalize_path(path)?;
        self.attrs_everywhere(&path, "lookup", || Request::Lookup { path: path.clone() })
            .await
    }

    /// The attributes `make()` asks for, of every server at once (`op` names it in errors).
    /// The home server's answer decides: an error, or anything but a regular file, is the
    /// answer as soon as it comes (the others' are not waited for: a directory's stat does
    /// not wait on a server that holds no part of it). A regular file's attributes are merged
    /// with the others' ([`merge_attrs`](Self::merge_attrs)); a server lacking it holds no
    /// part. Asked together, not after the home's answer: a stat over several servers takes
    /// one round trip, not two.
    async fn attrs_everywhere(
        &self,
        path: &str,
        op: &str,
        make: impl Fn() -> Request,
    ) -> Result<Attr, ClientError> {
        let home = self.inner.layout.home(path);
        let mut first = std::pin::pin!(self.request(home, make()));
        let mut rest = std::pin::pin!(self.ask_each(self.others(home), &make));
        let mut rest_done = None;
        let first = loop {
            tokio::select! {
                r = &mut first => break r?,
                r = &mut rest, if rest_done.is_none() => rest_done = Some(r),
            }
        };
        let is_file = attr_in(&first).is_some_and(|a| a.kind == FileKind::File);
        let mut replies = vec![first];
        if is_file {
            let rest = match rest_done {
                Some(r) => r,
                None => rest.await,
            };
            keep_answers(&mut replies, rest, Some(std::io::ErrorKind::NotFound))?;
        }
        self.merge_attrs(home, op, &replies)
    }

    /// Creates a regular file with permission bits `mode` on every server. With `exclusive`,
    /// fails with `EEXIST` if it exists on its home server; otherwise an existing file is kept.
    /// Returns its attributes (as [`lookup`](Client::lookup)).
    pub async fn create(
        &self,
        path: &str,
        mode: u32,
        exclusive: bool,
    ) -> Result<Attr, ClientError> {
        Ok(self.create_entry(path, mode, exclusive).await?.attr)
    }

    /// [`create`](Client::create), with the directory's attributes after the change.
    pub async fn create_entry(
        &self,
        path: &str,
        mode: u32,
        exclusive: bool,
    ) -> Result<Entry, ClientError> {
        let path = normalize_path(path)?;
        let home = self.inner.layout.home(&path);
        let req = Request::Create {
            path: path.clone(),
            mode,
            exclusive,
        };
        if exclusive {
            // The home server first, alone: it judges exclusivity, and through one shared root
            // the others would race it for the name. They then see the file it made.
            let others = Request::Create {
                path: path.clone(),
                mode,
                exclusive: false,
            };
            let replies = self.everywhere(home, req, others, None).await?;
            return self.entry_of(&path, home, "create", &replies);
        }
        // Every server at once (one round trip, not two in turn); the home server's answer
        // decides. A create never truncates, so what the others do while the home server
        // refuses is at most an empty part no listing shows.
        let mut answers = self
            .ask_each_numbered(std::iter::once(home).chain(self.others(home)), || {
                req.clone()
            })
            .await
            .into_iter();
        let first = answers.next().expect("the home server was asked")?;
        let mut replies = vec![first];
        keep_answers(&mut replies, answers, None)?;
        self.entry_of(&path, home, "create", &replies)
    }

    /// The new entry `path` whose servers answered `replies` (`home`'s first): its attributes
    /// merged ([`merge_attrs`](Self::merge_attrs)), and its directory's as the directory's
    /// home server gave them.
    fn entry_of(
        &self,
        path: &str,
        home: usize,
        op: &str,
        replies: &[(usize, Reply)],
    ) -> Result<Entry, ClientError> {
        Ok(Entry {
            attr: self.merge_attrs(home, op, replies.iter().map(|(_, r)| r))?,
            dir: self.dir_after(path, replies),
        })
    }

    /// The attributes of the directory holding `path` after a change of its entries, from the
    /// answer of the directory's home server among `replies` (none if it did not give them:
    /// it was not asked, or could not read the directory).
    fn dir_after(&self, path: &str, replies: &[(usize, Reply)]) -> Option<Attr> {
        let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
        let home = self.inner.layout.home(parent);
        replies.iter().find_map(|(s, r)| match r {
            Reply::Entry { dir, .. } | Reply::Removed { dir } if *s == home => Some(*dir),
            _ => None,
        })
    }

    /// Checks that `path` can be opened with `flags` on every server, creating or truncating
    /// it there if the flags say so. Returns its attributes (as [`lookup`](Client::lookup)).
    pub async fn open(&self, path: &str, flags: OpenFlags) -> Result<Attr, ClientError> {
        self.change_attrs(path, "open", None, |path| Request::Open { path, flags })
            .await
    }

    /// Reads up to `len` bytes of `path` at `offset`: fewer at the end of the file, none past
    /// it. The chunks are read from their servers concurrently. A server's backing file may be
    /// shorter than the logical file (it holds a sparse part); its missing bytes read as zeros
    /// up to the logical size, the largest size any server reports.
    pub async fn read_at(&self, path: &str, offset: u64, len: usize) -> Result<Bytes, ClientError> {
        let path = normalize_path(path)?;
        self.read_pieces(&path, &path, offset, len).await
    }

    /// [`read_at`](Client::read_at) of a file whose chunks lie where the striping layout puts
    /// those of the name `layout` (its name when they were written): a file renamed since,
    /// with separate roots, still has them there (see [`rename`](Client::rename)).
    pub async fn read_at_laid_out_as(
        &self,
        path: &str,
        layout: &str,
        offset: u64,
        len: usize,
    ) -> Result<Bytes, ClientError> {
        let (path, layout) = (normalize_path(path)?, normalize_path(layout)?);
        self.read_pieces(&path, &layout, offset, len).await
    }

    /// A read of normalized `path`, its chunks where `layout`'s are.
    async fn read_pieces(
        &self,
        path: &str,
        layout: &str,
        offset: u64,
        len: usize,
    ) -> Result<Bytes, ClientError> {
        let pieces = self.inner.layout.pieces(layout, offset, len as u64);
        // Through the same-host transport, the pieces land side by side in one range of the
        // region, and the result is that range: no copy to join them.
        let landing = self.landing(&pieces, len);
        let answers = join_all(
            pieces
                .iter()
                .map(|p| {
                    self.request_into(
                        p.server,
                        Request::Read {
                            path: path.to_owned(),
                            offset: p.offset,
                            // A piece is at most one chunk, and chunks fit in a u32.
                            len: p.len as u32,
                        },
                        landing.as_ref().map(|slot| Landing {
                            slot: slot.clone(),
                            at: p.at as usize,
                        }),
                    )
                })
                .collect(),
        )
        .await;
        let mut data = Vec::with_capacity(pieces.len());
        let mut short = false;
        for (p, a) in pieces.iter().zip(answers) {
            match a? {
                Reply::Data(d) if d.len() as u64 <= p.len => {
                    short |= (d.len() as u64) < p.len;
                    data.push(d);
                }
                other => return Err(unexpected(self.addr(p.server), "read", &other)),
            }
        }
        if !short {
            if data.len() == 1 {
                return Ok(data.pop().expect("one piece"));
            }
            if let Some(slot) = landing.filter(|slot| landed(slot, &pieces, &data)) {
                return Ok(slot.slice(..len));
            }
            let mut out = BytesMut::with_capacity(len);
            for d in &data {
                out.extend_from_slice(d);
            }
            return Ok(out.freeze());
        }
        // Some server's file ends inside the range: cut at the logical size.
        let end = if self.inner.endpoints.len() == 1 {
            // One server holds the whole file: its first short piece is the end.
            let (p, d) = pieces
                .iter()
                .zip(&data)
                .find(|(p, d)| (d.len() as u64) < p.len)
                .expect("a short piece");
            p.offset + d.len() as u64
        } else {
            self.size_of(path).await?
        };
        let want = end.saturating_sub(offset).min(len as u64) as usize;
        let mut out = BytesMut::zeroed(want);
        for (p, d) in pieces.iter().zip(&data) {
            let at = p.at as usize;
            if at >= want {
                break;
            }
            let n = d.len().min(want - at);
            out[at..at + n].copy_from_slice(&d[..n]);
        }
        Ok(out.freeze())
    }

    /// One range of the shared region for a read of `len` bytes cut into `pieces`, when more
    /// than one piece goes to a server on the same-host transport.
    fn landing(&self, pieces: &[crate::layout::Piece], len: usize) -> Option<Bytes> {
        let local = self.inner.local.as_ref()?;
        let eps = &self.inner.endpoints;
        let through_region = pieces
            .iter()
            .filter(|p| p.len as usize >= LOCAL_MIN && eps[p.server].is_local())
            .count();
        (pieces.len() > 1 && through_region > 0)
            .then(|| read_range(&local.region, len))
            .flatten()
    }

    /// The logical size of a file: the largest size any server reports.
    async fn size_of(&self, path: &str) -> Result<u64, ClientError> {
        Ok(self.lookup(path).await?.size)
    }

    /// Writes `data` into `path` at `offset` (the file must exist: [`create`](Client::create)
    /// or [`open`](Client::open) with `CREATE` first). Each chunk's piece goes to its server,
    /// all concurrently, without copying the data. Returns the number of bytes written (all of
    /// them, or an error).
    pub async fn write_at(
        &self,
        path: &str,
        offset: u64,
        data: impl Into<Bytes>,
    ) -> Result<u64, ClientError> {
        let path = normalize_path(path)?;
        self.write_pieces(&path, &path, offset, data.into()).await
    }

    /// [`write_at`](Client::write_at) of a file whose chunks lie where the striping layout puts
    /// those of the name `layout` (as [`read_at_laid_out_as`](Client::read_at_laid_out_as)).
    pub async fn write_at_laid_out_as(
        &self,
        path: &str,
        layout: &str,
        offset: u64,
        data: impl Into<Bytes>,
    ) -> Result<u64, ClientError> {
        let (path, layout) = (normalize_path(path)?, normalize_path(layout)?);
        self.write_pieces(&path, &layout, offset, data.into()).await
    }

    /// A write of normalized `path`, its chunks where `layout`'s are.
    async fn write_pieces(
        &self,
        path: &str,
        layout: &str,
        offset: u64,
        data: Bytes,
    ) -> Result<u64, ClientError> {
        let pieces = self.inner.layout.pieces(layout, offset, data.len() as u64);
        let answers = join_all(
            pieces
                .iter()
                .map(|p| {
                    let at = p.at as usize;
                    self.request(
                        p.server,
                        Request::Write {
                            path: path.to_owned(),
                            offset: p.offset,
                            data: data.slice(at..at + p.len as usize),
                        },
                    )
                })
                .collect(),
        )
        .await;
        for (p, a) in pieces.iter().zip(answers) {
            match a? {
                Reply::Written(n) if u64::from(n) == p.len => {}
                Reply::Written(n) => {
                    return Err(ClientError::Short {
                        server: self.addr(p.server),
                        op: "write",
                        offset: p.offset,
                        expected: p.len,
                        done: u64::from(n),
                    })
                }
                other => return Err(unexpected(self.addr(p.server), "write", &other)),
            }
        }
        Ok(data.len() as u64)
    }

    /// Flushes `path`'s data to stable storage on every server (each may hold some of its
    /// chunks), concurrently.
    pub async fn fsync(&self, path: &str) -> Result<(), ClientError> {
        let path = normalize_path(path)?;
        let n = self.inner.endpoints.len();
        let answers = self
            .ask_each(0..n, || Request::Fsync { path: path.clone() })
            .await;
        for a in answers {
            a?;
        }
        Ok(())
    }

    /// Sets the length of `path` to `size` on every server (home first), so the logical size
    /// ([`lookup`](Client::lookup)) becomes `size`.
    pub async fn truncate(&self, path: &str, size: u64) -> Result<(), ClientError> {
        let path = normalize_path(path)?;
        self.change(&path, None, |path| Request::Truncate { path, size })
            .await?;
        Ok(())
    }

    /// Removes the file `path` from every server (home first; the others may already miss it
    /// through a shared root).
    pub async fn unlink(&self, path: &str) -> Result<(), ClientError> {
        self.unlink_entry(path).await.map(drop)
    }

    /// [`unlink`](Client::unlink), answering the directory's attributes after the change (when
    /// its home server gave them).
    pub async fn unlink_entry(&self, path: &str) -> Result<Option<Attr>, ClientError> {
        self.remove(path, |path| Request::Unlink { path }).await
    }

    /// Creates the directory `path` on every server (home first) and returns its attributes
    /// as its home server sees them.
    pub async fn mkdir(&self, path: &str, mode: u32) -> Result<Attr, ClientError> {
        Ok(self.mkdir_entry(path, mode).await?.attr)
    }

    /// [`mkdir`](Client::mkdir), with its parent directory's attributes after the change.
    pub async fn mkdir_entry(&self, path: &str, mode: u32) -> Result<Entry, ClientError> {
        let path = normalize_path(path)?;
        let exists = Some(std::io::ErrorKind::AlreadyExists);
        let (home, replies) = self
            .change(&path, exists, |path| Request::Mkdir { path, mode })
            .await?;
        self.entry_of(&path, home, "mkdir", &replies)
    }

    /// Removes the empty directory `path` from every server (home first).
    pub async fn rmdir(&self, path: &str) -> Result<(), ClientError> {
        self.rmdir_entry(path).await.map(drop)
    }

    /// [`rmdir`](Client::rmdir), answering its parent directory's attributes after the change
    /// (when their home server gave them).
    pub async fn rmdir_entry(&self, path: &str) -> Result<Option<Attr>, ClientError> {
        self.remove(path, |path| Request::Rmdir { path }).await
    }

    /// Lists the directory `path` as [`readdir`](Client::readdir) does, each entry with its
    /// attributes as [`lstat`](Client::lstat) gives them: every server is asked at once (one
    /// round trip), the directory's home server's listing decides which names there are, an
    /// entry's attributes come from the entry's own home server, and a regular file's size and
    /// times are the largest any server reports (its parts). `ls -l` in one request per server
    /// instead of one lookup per entry. When a server other than the directory's home does not
    /// answer, the entries it would have told something of (its own, and every regular file's
    /// size) come without attributes (`None`): ask those one by one.
    pub async fn readdir_plus(
        &self,
        path: &str,
    ) -> Result<Vec<(DirEntry, Option<Attr>)>, ClientError> {
        let path = normalize_path(path)?;
        let home = self.inner.layout.home(&path);
        let servers = std::iter::once(home).chain(self.others(home));
        let answers = self
            .ask_each_numbered(servers, || Request::ReaddirPlus { path: path.clone() })
            .await;
        let mut lists: Vec<Option<Vec<(DirEntry, Attr)>>> = vec![None; self.inner.endpoints.len()];
        for (i, answer) in answers.into_iter().enumerate() {
            match answer {
                Ok((s, Reply::EntriesPlus(entries))) => lists[s] = Some(entries),
                Ok((s, other)) => return Err(unexpected(self.addr(s), "readdirplus", &other)),
                // The directory's home server decides; another's failure is told per entry.
                Err(e) if i == 0 => return Err(e),
                Err(_) => {}
            }
        }
        let all_answered = lists.iter().all(Option::is_some);
        // A server's attributes of `name` (every listing is sorted by name); `None` when that
        // server did not answer.
        let find = |s: usize, name: &str| -> Option<Option<Attr>> {
            let list = lists[s].as_ref()?;
            let i = list.binary_search_by(|(e, _)| e.name.as_str().cmp(name));
            Some(i.ok().map(|i| list[i].1))
        };
        let Some(listing) = lists[home].as_ref() else {
            return Err(ClientError::Config("no listing".into()));
        };
        let mut out = Vec::with_capacity(listing.len());
        for (entry, attr) in listing {
            let child = if path.is_empty() {
                entry.name.clone()
            } else {
                format!("{path}/{}", entry.name)
            };
            let attr = match find(self.inner.layout.home(&child), &entry.name) {
                None => None,
                Some(own) => {
                    let mut a = own.unwrap_or(*attr);
                    if a.kind != FileKind::File {
                        Some(a)
                    } else if !all_answered {
                        None
                    } else {
                        for s in 0..lists.len() {
                            let part = find(s, &entry.name).flatten();
                            if let Some(p) = part.filter(|p| p.kind == FileKind::File) {
                                widen(&mut a, &p);
                            }
                        }
                        Some(a)
                    }
                }
            };
            out.push((entry.clone(), attr));
        }
        Ok(out)
    }

    /// Lists the directory `path` (`""` or `"/"` for the root), sorted by name, as its home
    /// server sees it (every server has the same namespace).
    pub async fn readdir(&self, path: &str) -> Result<Vec<DirEntry>, ClientError> {
        let path = normalize_path(path)?;
        let home = self.inner.layout.home(&path);
        match self.request(home, Request::Readdir { path }).await? {
            Reply::Entries(e) => Ok(e),
            other => Err(unexpected(self.addr(home), "readdir", &other)),
        }
    }

    /// Renames `from` to `to` on every server (the home of `from` first), replacing `to`.
    ///
    /// The layout is a function of the path, so a renamed file's chunks stay where the old
    /// name put them. With one shared root (the deployment iosets is made for: I/O-forwarding
    /// servers in front of one PFS) every backing file is complete and nothing is lost; with
    /// separate roots and more than one server, a renamed file's data no longer matches its
    /// new name's layout.
    pub async fn rename(&self, from: &str, to: &str) -> Result<(), ClientError> {
        let from = normalize_path(from)?;
        let to = normalize_path(to)?;
        self.change(&from, Some(std::io::ErrorKind::NotFound), |from| {
            Request::Rename { from, to }
        })
        .await?;
        Ok(())
    }

    /// Sends a control request, authenticated by `token`, to server number `server` (an index
    /// into [`servers`](Client::servers)) and returns its reply.
    pub async fn control(
        &self,
        server: usize,
        token: &str,
        op: Control,
    ) -> Result<Reply, ClientError> {
        if server >= self.inner.endpoints.len() {
            return Err(ClientError::Config(format!(
                "no server number {server} (there are {})",
                self.inner.endpoints.len()
            )));
        }
        self.request(
            server,
            Request::Control {
                token: token.to_owned(),
                op,
            },
        )
        .await
    }
}

/// Whether every piece's bytes were placed in `slot` at the piece's place, whole: the read's
/// result is then `slot` itself.
fn landed(slot: &Bytes, pieces: &[crate::layout::Piece], data: &[Bytes]) -> bool {
    let base = slot.as_ptr() as usize;
    pieces
        .iter()
        .zip(data)
        .all(|(p, d)| d.len() as u64 == p.len && d.as_ptr() as usize == base + p.at as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn join_all_keeps_the_order() {
        let futs: Vec<_> = (0..5u64)
            .map(|i| async move {
                tokio::time::sleep(std::time::Duration::from_millis(5 * (5 - i))).await;
                i
            })
            .collect();
        assert_eq!(join_all(futs).await, vec![0, 1, 2, 3, 4]);
    }
}
