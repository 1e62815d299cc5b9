//! `iosets mount`: a FUSE file system over the iosets servers, so unmodified applications
//! (`cp`, `tar`, IOR, a simulation code) are scheduled by the job they belong to.
//!
//! # What it is
//! A file system a user can `cd` into. Every kernel request becomes a client-library call
//! ([`iosets_client::Client`]), with the same striping layout as the library (a file written
//! through the mount reads back identically through the library and vice versa), done **for
//! the job of the calling process** ([`ident`]: Slurm's cgroup, then the environment, then
//! `procname.uid`) and **as the calling user** (the servers create files with the caller's uid
//! and gid and apply chmod/chown; the kernel checks permissions: `default_permissions`, and
//! `allow_other` when mounted by root, as a PFS client is shared by every user of a node).
//!
//! - **Direct I/O by default**: every read and write goes to the servers synchronously (the
//!   caller waits for its answer), so it is attributed to the right job and ordered by the
//!   servers' schedulers. `cache: true` (`--cache`) lets the page cache serve re-reads; attribution is
//!   then the file's opener's, and writes are still written through (no writeback cache).
//! - **Job identity** is resolved at open and create and bound to the file handle: reads,
//!   writes and fsyncs (which the kernel may send with no caller, at release or writeback) are
//!   done for the opener's job.
//! - **One hand-off, one timeout**: a FUSE thread takes what a request says of its caller (pid,
//!   uid, gid) and hands the request off once, as a task on the client's tokio runtime, where
//!   its server calls are awaited and its reply is sent; a FUSE thread never waits on a server.
//!   The mount's `timeout` bounds each request as a whole: past it the caller gets `EIO`, a dead
//!   or unreachable server never hangs it. A reply is sent exactly once: a task that panics or
//!   is dropped at shutdown drops its reply, which fuser answers with `EIO`.
//! - **Control** lives in `MOUNT/.iosets/` ([`control`]): job priorities (read and write), job
//!   statistics, the policy. The mount holds the servers' token.
//! - **A local server** ([`mount_local`]): a server in this process, reached by a channel no
//!   other process can use, so `iosets mount /mnt/x --local /data` works with nothing else
//!   running. The caller starts it (this crate depends on the client only) and hands it over
//!   as a [`LocalServer`]; the mount stops it at unmount.
//!
//! # What it is not
//! Not a cache-coherent cluster file system: attributes and names, and the absence of a name
//! (a negative entry), may be cached by the kernel for `attr_ttl` (1 s by default, as bindfs
//! and NFS's `acregmin`-style caching), so a change made on another node shows within that
//! time (tested with two mounts of the same servers). A directory changed through this mount (create,
//! mkdir, unlink, rmdir) is answered, the next time the kernel asks, with the attributes the
//! server gave with the change, if that was within `attr_ttl`: the same bound, one round trip
//! less per change. No extended attributes, no locks
//! (the kernel keeps `flock`/`fcntl` locks local to the node), no hard links over several
//! servers (`ENOTSUP`): the layout is a function of the name. `RENAME_NOREPLACE` and
//! `RENAME_EXCHANGE` answer `EINVAL`. File names must be UTF-8 (the protocol's paths are):
//! other names answer `EINVAL`. A file unlinked while open is not removed until its last close:
//! it is renamed to a hidden name (NFS's "silly rename"), so its open descriptors keep working.
//!
//! # Why
//! Seed 004's point: IO-SETS must schedule the applications users already run, by the job
//! they belong to, without changing them. A mount is how that happens on a compute node.
#![deny(missing_docs)]

pub mod control;
mod fs;
pub mod ident;
mod inodes;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use iosets_client::{Client, ClientConfig, JobId};

use crate::fs::{FsConfig, Inner, IosetsFs};
use crate::ident::{IdentConfig, JobResolver};

/// How to mount.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// Where.
    pub mountpoint: PathBuf,
    /// The servers (`host:port`), in layout order; empty for [`mount_local`].
    pub servers: Vec<String>,
    /// FUSE worker threads (each serves one kernel request at a time).
    pub threads: usize,
    /// Threads of the client runtime, where every request's server calls run (default 1:
    /// each extra one adds a wake-up to a small request's path, see `iosets serve
    /// --net-threads`).
    pub net_threads: usize,
    /// Let the page cache serve file data (attribution: the opener's job).
    pub cache: bool,
    /// The bound on any one file system request, all its calls to the servers included: past
    /// it the caller gets `EIO`. Also the bound on connecting at mount time.
    pub timeout: Duration,
    /// How long the kernel may keep attributes and names.
    pub attr_ttl: Duration,
    /// The servers' control token (for `.iosets/`); a local server's is the one it was given.
    pub token: Option<String>,
    /// Job identity: sources, variables, cache.
    pub ident: IdentConfig,
    /// The striping chunk (must be the one every client of the files uses).
    pub chunk_size: u64,
    /// The largest write the kernel sends (1 MiB).
    pub max_write: u32,
    /// Let every user of the node use the mount (`allow_other`); `None`: when run as root.
    pub allow_other: Option<bool>,
    /// The cluster's shared secret, for servers started with one (`--auth-file`).
    pub auth: Option<iosets_client::Secret>,
    /// Who besides root may set a priority through `.iosets/jobs/<id>/priority`
    /// (`--self-priority`; default `capped`, see [`control::README`]).
    pub self_priority: control::SelfPriority,
}

impl MountOptions {
    /// The defaults for `mountpoint`: 4 FUSE threads and 1 client thread, direct I/O, 30 s timeout, 1 s attribute
    /// cache, 1 MiB chunks and writes, the default job identity sources.
    pub fn new(mountpoint: impl Into<PathBuf>) -> MountOptions {
        MountOptions {
            mountpoint: mountpoint.into(),
            servers: Vec::new(),
            threads: 4,
            net_threads: 1,
            cache: false,
            timeout: Duration::from_secs(30),
            attr_ttl: Duration::from_secs(1),
            token: None,
            ident: IdentConfig::default(),
            chunk_size: iosets_client::DEFAULT_CHUNK_SIZE,
            max_write: 1 << 20,
            auth: None,
            allow_other: None,
            self_priority: control::SelfPriority::Capped,
        }
    }
}

/// Why a mount or an unmount failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountError {
    /// The mount point is unusable.
    #[error("mount point {path}: {reason}")]
    Mountpoint {
        /// The mount point.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Bad options.
    #[error("{0}")]
    Config(String),
    /// The servers could not be reached or did not answer as iosets servers.
    #[error("servers {servers:?}: {reason}")]
    Servers {
        /// The servers.
        servers: Vec<String>,
        /// Why.
        reason: String,
    },
    /// The in-process server ([`mount_local`]) failed to start or to stop cleanly.
    #[error("local server: {0}")]
    Local(String),
    /// Job identity configuration.
    #[error("job identity: {0}")]
    Ident(#[from] ident::IdentError),
    /// The kernel or `/dev/fuse` refused.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

/// The mount points of this mount namespace (`/proc/self/mountinfo`, octal escapes undone),
/// with their file system types.
fn mounts() -> Vec<(PathBuf, String)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            let dash = fields.iter().position(|f| *f == "-")?;
            let point = unescape(fields.get(4)?);
            let fstype = fields.get(dash + 1)?.to_string();
            Some((PathBuf::from(point), fstype))
        })
        .collect()
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The absolute form of `path` without following its last component (which may be a dead
/// mount that cannot be resolved).
fn absolute(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)
            .unwrap_or_else(|_| parent.to_path_buf())
            .join(name),
        _ => abs,
    }
}

/// Whether `path` is a mount point now, and of which type.
pub fn mounted_at(path: &Path) -> Option<String> {
    let path = absolute(path);
    mounts()
        .into_iter()
        .rev()
        .find(|(p, _)| *p == path)
        .map(|(_, t)| t)
}

/// Checks that `path` can be mounted on: it exists, is a directory, and nothing is mounted
/// there (a dead mount, after a `kill -9` of its process, is named as such).
pub fn check_mountpoint(path: &Path) -> Result<(), MountError> {
    let err = |reason: String| MountError::Mountpoint {
        path: path.to_path_buf(),
        reason,
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(err("not a directory".into())),
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
            return Err(err(format!(
                "a dead FUSE mount is there (its process was killed); run `iosets umount {}`",
                path.display()
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(err("does not exist".into()))
        }
        Err(e) => return Err(err(e.to_string())),
    }
    if let Some(fstype) = mounted_at(path) {
        return Err(err(format!("already mounted ({fstype})")));
    }
    Ok(())
}

/// A live mount: the FUSE session thread, the client's runtime and the local server.
#[derive(Debug)]
pub struct Mounted {
    mountpoint: PathBuf,
    session: Option<JoinHandle<std::io::Result<()>>>,
    ended: Option<std::sync::mpsc::Receiver<()>>,
    local: Option<Box<dyn LocalServer>>,
    servers: Vec<String>,
    rt: Option<tokio::runtime::Runtime>,
}

/// A server in this process that a mount reaches by a channel no other process or user can
/// use ([`mount_local`]; issue 33: no TCP port, no same-host socket).
pub trait LocalServer: Send + std::fmt::Debug {
    /// The directory it serves: the mount is named `iosets:ROOT` in `/proc/mounts`.
    fn root(&self) -> &Path;
    /// The address its clients report for it.
    fn addr(&self) -> std::net::SocketAddr;
    /// Opens connections to it.
    fn connector(&self) -> iosets_client::Connector;
    /// Stops it, its written files fsynced; called once, at unmount.
    fn shutdown(self: Box<Self>) -> Result<(), String>;
}

/// A fresh control token: 16 random bytes in hex, for a local server and its mount.
pub fn random_token() -> String {
    use std::io::Read;
    let mut b = [0u8; 16];
    let _ = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Mounts: checks the mount point and `/dev/fuse`, connects to the servers (every one must
/// answer, or nothing is mounted), and starts serving the kernel on `threads` threads. Returns
/// once the file system is mounted.
pub fn mount(opts: MountOptions) -> Result<Mounted, MountError> {
    if opts.servers.is_empty() {
        return Err(servers_or_local());
    }
    mount_with(opts, None)
}

/// A mount needs servers, or a local server, and not both.
fn servers_or_local() -> MountError {
    MountError::Config(
        "give either servers (--servers ADDR,...) or a local root (--local DIR)".into(),
    )
}

/// Starts a [`LocalServer`] (its error, as text, fails the mount).
pub type StartLocal = Box<dyn FnOnce() -> Result<Box<dyn LocalServer>, String> + Send>;

/// Mounts over a server in this process (see [`LocalServer`]), as [`mount`] does over remote
/// ones: `start` is called once the options, the mount point and `/dev/fuse` are checked, so a
/// mount refused for them starts nothing. `opts.servers` must be empty, and `opts.token` is the
/// token the server is started with (the control directory needs it). The mount stops the
/// server at unmount, and also when mounting fails after it started.
pub fn mount_local(opts: MountOptions, start: StartLocal) -> Result<Mounted, MountError> {
    if !opts.servers.is_empty() {
        return Err(servers_or_local());
    }
    mount_with(opts, Some(start))
}

fn mount_with(mut opts: MountOptions, start: Option<StartLocal>) -> Result<Mounted, MountError> {
    if opts.threads == 0 || opts.threads > 64 {
        return Err(MountError::Config(format!(
            "threads must be between 1 and 64, not {}",
            opts.threads
        )));
    }
    if opts.net_threads == 0 || opts.net_threads > 64 {
        return Err(MountError::Config(format!(
            "net threads must be between 1 and 64, not {}",
            opts.net_threads
        )));
    }
    if opts.timeout.is_zero() {
        return Err(MountError::Config("timeout must be positive".into()));
    }
    check_mountpoint(&opts.mountpoint)?;
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        return Err(MountError::Io {
            what: "/dev/fuse cannot be opened (is the fuse module loaded, and is this a \
                   container without the device?)"
                .into(),
            source: e,
        });
    }
    let resolver = Arc::new(JobResolver::new(opts.ident.clone())?);
    // Started only now that the checks passed; stopped on every path out of here but success.
    let mut local = StopOnDrop(match start {
        Some(start) => Some(start().map_err(MountError::Local)?),
        None => None,
    });
    if local.0.is_some() {
        opts.servers = vec!["in-process".into()];
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.net_threads)
        .max_blocking_threads(512)
        .thread_name("iosets-mount-net")
        .enable_all()
        .build()
        .map_err(|source| MountError::Io {
            what: "starting the client runtime".into(),
            source,
        })?;
    let mut ccfg = ClientConfig::new(JobId(0));
    ccfg.chunk_size = opts.chunk_size;
    // One timeout per file system request: the mount's, around the whole request (see
    // `IosetsFs::spawn`), which also bounds reconnections and the calls of a request that makes
    // several. A client timeout per call under it would be a second one, never the first to
    // end a request.
    ccfg.request_timeout = None;
    ccfg.connect_timeout = opts.timeout.min(Duration::from_secs(5));
    ccfg.retries = 2;
    ccfg.auth = opts.auth.clone();
    let servers_err = |reason: String| MountError::Servers {
        servers: opts.servers.clone(),
        reason,
    };
    let connect = async {
        let c = match &local.0 {
            Some(h) => Client::connect_in_process(h.addr(), h.connector(), ccfg).await?,
            None => Client::connect_to(&opts.servers, ccfg).await?,
        };
        c.statfs().await?;
        Ok::<_, iosets_client::ClientError>(c)
    };
    // Bounded by the mount's timeout as a file system request is (the timer is made inside
    // the runtime: it needs its clock).
    let client = rt
        .block_on(async { tokio::time::timeout(opts.timeout, connect).await })
        .map_err(|_| servers_err(format!("no response within {:?}", opts.timeout)))?
        .map_err(|e| servers_err(e.to_string()))?;
    let root_user = rustix::process::geteuid().is_root();
    let allow_other = opts.allow_other.unwrap_or(root_user);
    let fs = IosetsFs::new(Inner::new(
        rt.handle().clone(),
        client,
        FsConfig {
            cache: opts.cache,
            attr_ttl: opts.attr_ttl,
            timeout: opts.timeout,
            token: opts.token.clone(),
            blksize: opts.chunk_size.min(u64::from(u32::MAX)) as u32,
            max_write: opts.max_write,
            self_priority: opts.self_priority,
        },
        resolver,
    ));
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName(match &local.0 {
            Some(h) => format!("iosets:{}", h.root().display()),
            None => format!("iosets:{}", opts.servers.join(",")),
        }),
        fuser::MountOption::Subtype("iosets".into()),
        fuser::MountOption::DefaultPermissions,
        fuser::MountOption::Dev,
        fuser::MountOption::Suid,
    ];
    config.acl = if allow_other {
        fuser::SessionACL::All
    } else {
        fuser::SessionACL::Owner
    };
    config.n_threads = Some(opts.threads);
    config.clone_fd = true;
    let session =
        fuser::Session::new(fs, &opts.mountpoint, &config).map_err(|source| MountError::Io {
            what: format!("mounting on {}", opts.mountpoint.display()),
            source,
        })?;
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("iosets-fuse".into())
        .spawn(move || {
            let r = session.run();
            let _ = tx.send(());
            r
        })
        .map_err(|source| MountError::Io {
            what: "starting the FUSE session".into(),
            source,
        })?;
    tracing::info!(mountpoint = %opts.mountpoint.display(), servers = ?opts.servers, threads = opts.threads, net_threads = opts.net_threads, "mounted");
    Ok(Mounted {
        mountpoint: opts.mountpoint,
        session: Some(thread),
        ended: Some(rx),
        local: local.0.take(),
        servers: opts.servers,
        rt: Some(rt),
    })
}

impl Mounted {
    /// The mount point.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The servers it talks to (`in-process` with `local`: its server has no address).
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// Waits until the file system is unmounted from outside (`iosets umount`, `umount`) or
    /// one of `SIGTERM`, `SIGINT`, `SIGHUP` arrives; then unmounts and shuts down.
    pub fn serve_until_signal(mut self) -> Result<(), MountError> {
        let ended = self.ended.take().expect("not waited yet");
        let rt = self.rt.as_ref().expect("runtime");
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<&'static str>();
        rt.spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
                signal(SignalKind::hangup()),
            ) else {
                return;
            };
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
                _ = hup.recv() => "SIGHUP",
            };
            let _ = stop_tx.send(name);
        });
        loop {
            if ended.try_recv().is_ok() {
                tracing::info!("unmounted from outside");
                break;
            }
            if let Ok(sig) = stop_rx.recv_timeout(Duration::from_millis(100)) {
                tracing::info!(signal = sig, "unmounting");
                break;
            }
        }
        self.unmount()
    }

    /// Unmounts (lazily: files still open keep being served until closed), waits for the
    /// session to end, and shuts the local server down (its written files fsynced).
    pub fn unmount(mut self) -> Result<(), MountError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), MountError> {
        let mut first = None;
        // Lazily (MNT_DETACH, `fusermount3 -u -z`): fuser's own unmount is a plain umount(2)
        // that fails with EBUSY while a file is open, and the session would never end.
        if mounted_at(&self.mountpoint).is_some() {
            if let Err(e) = umount(&self.mountpoint) {
                first = Some(e);
            }
        }
        if let Some(t) = self.session.take() {
            // Files still open keep a detached mount alive: wait a little for them, then go
            // on; the process's exit closes /dev/fuse and their next request fails.
            let deadline = std::time::Instant::now() + Duration::from_secs(2);
            while !t.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if t.is_finished() {
                match t.join() {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::warn!(error = %e, "FUSE session ended with an error"),
                    Err(_) => tracing::error!("FUSE session thread panicked"),
                }
            } else {
                tracing::warn!("files are still open on the detached mount; exiting anyway");
            }
        }
        if let Some(h) = self.local.take() {
            if let Err(e) = h.shutdown() {
                first.get_or_insert(MountError::Local(e));
            }
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
        first.map_or(Ok(()), Err)
    }
}

/// A local server not (yet) owned by a [`Mounted`]: stopped when dropped.
struct StopOnDrop(Option<Box<dyn LocalServer>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            if let Err(e) = h.shutdown() {
                tracing::warn!(error = %e, "stopping the local server");
            }
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.session.is_some() {
            let _ = self.shutdown();
        }
    }
}

/// Unmounts the iosets mount at `path`, also after its process was killed (`kill -9` leaves
/// "Transport endpoint is not connected"): as root by `umount2(MNT_DETACH)`, otherwise through
/// `fusermount3 -u -z`. Refuses a path where no FUSE file system is mounted.
pub fn umount(path: &Path) -> Result<(), MountError> {
    let fstype = mounted_at(path).ok_or_else(|| MountError::Mountpoint {
        path: path.to_path_buf(),
        reason: "nothing is mounted there".into(),
    })?;
    if !fstype.starts_with("fuse") {
        return Err(MountError::Mountpoint {
            path: path.to_path_buf(),
            reason: format!("not a FUSE mount ({fstype}); refusing to unmount it"),
        });
    }
    if rustix::process::geteuid().is_root() {
        rustix::mount::unmount(path, rustix::mount::UnmountFlags::DETACH).map_err(|e| {
            MountError::Io {
                what: format!("unmounting {}", path.display()),
                source: e.into(),
            }
        })
    } else {
        let out = std::process::Command::new("fusermount3")
            .arg("-u")
            .arg("-z")
            .arg(path)
            .output()
            .map_err(|source| MountError::Io {
                what: "running fusermount3 (Debian package fuse3)".into(),
                source,
            })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(MountError::Mountpoint {
                path: path.to_path_buf(),
                reason: format!(
                    "fusermount3 failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            })
        }
    }
}
