//! The iosets I/O server (`iosets serve`): a stand-alone I/O-forwarding daemon in front of any
//! POSIX file system, whose queue is ordered by an iosets policy.
//!
//! # What it is
//! The server of seed 004 (a storage server with an IO-SETS queue), made independent of any file
//! system. Clients ([`iosets-client`], `iosets demo`) send [`iosets_proto`] frames over TCP; each
//! frame names a job. The server:
//!
//! - reads frames on async sockets (tokio), checking the length before allocating, and counts
//!   the bytes of requests in flight against a budget per connection and one for the server,
//!   which a frame takes as its bytes arrive, with a share per frame (never on the length it
//!   announces: see the `conn` module);
//! - sends every **file-system request** — data (read, write, fsync) and metadata (lookup,
//!   create, open, setattr, truncate, unlink, mkdir, rmdir, readdir, rename, …) — through one
//!   runtime [`Scheduler`] with the configured policy, so the order in which the worker threads
//!   serve them is the policy's; a metadata request is `Op::Meta` and weighs
//!   `meta_cost_bytes` in the policy's byte accounting (it moves no data); the workers are OS
//!   threads doing the blocking system calls on files under the root ([`root`]), with an
//!   optional emulated slow metadata back end (`meta_latency_ms`, stripe fan-out);
//! - holds requests a **quota rule** governs (thread quotas, rates, reservations:
//!   [`iosets_runtime::quota`]) until the rule admits them; rules come from `[quota]`,
//!   `--quota` or `iosets ctl rule`, and match on job, uid, gid, client address and class;
//! - answers **control** requests authenticated by a token: set or clear a job's priority, switch
//!   the policy at run time (queued requests move, none lost), job statistics like seed 004's
//!   `beegfs-ctl --jobstats`, server statistics with the conservation counters;
//! - exposes Prometheus metrics at `GET /metrics`, and job and server statistics at `GET /jobs`
//!   and `GET /stats`, on its **admin address** (`admin_listen`, loopback by default, apart
//!   from the data port; `none` for no admin endpoint);
//! - with `auto_priority`, detects each job's I/O period from its requests and moves it to its
//!   Set-10 set, as seed 004 did with FTIO: the runtime's job book does it
//!   ([`iosets_runtime::book`]), with the statistics, meters and forgetting of idle jobs;
//! - lets only a few **data requests into service** at once (`inservice_limit`, default `auto`,
//!   adapted to the device's service times; [`iosets_runtime::inservice`]), so that the rest
//!   queue in the policy and its order (priorities) decides, whatever the number of workers;
//! - can emulate a slower device ([`throttle`], `--throttle-mib-s`);
//! - stops gracefully: no new frames are read, everything queued is served and answered, every
//!   written file is fsynced, then the server returns.
//!
//! # What it is not
//! Not a file system: no caching, no striping, no replication. Striping is the client's
//! ([`iosets-client`]); many servers run side by side with no central controller, each scheduling
//! its own queue. A client is trusted as a node of the cluster, not as a user: it proves the
//! cluster secret ([`ServerConfig::auth`]), or is this process ([`ServerHandle::in_process`]),
//! or (without a secret) is root or the server's own user on the same-host socket, or the
//! server was told to trust its host ([`ServerConfig::insecure_loopback`]). The job id is what
//! a trusted client says.
//!
//! # Permissions
//! A request that carries a user's credentials (the mount's, as NFS `AUTH_SYS`) is done **as
//! that user** when the server runs as root: the worker thread takes the user's uid, gid and
//! groups for the operation, so the kernel checks every permission on the objects it resolves
//! beneath the root (reads and writes through kept descriptors are checked the same way, with
//! NFS's owner override). `root_squash` makes a claim of uid 0 act as `nobody`; `no_creds`
//! decides what a request without credentials acts as (the server's user by default). A server
//! that is not root does everything as its own user. The model is in the `access` module.
//!
//! # Invariants
//! - No path leaves the root: every path is checked ([`root::check_path`]) and resolved by the
//!   kernel beneath the root's descriptor (`openat2` with `RESOLVE_BENEATH`).
//! - A write is acknowledged only after `pwrite` returned; at shutdown every file written since its
//!   last fsync is fsynced before [`ServerHandle::shutdown`] returns. Nothing acknowledged is lost.
//! - Decoding a frame never panics; a malformed frame is answered with an error (or, if its
//!   length is unusable, the connection is closed) and other clients are not affected.
//!
//! [`iosets-client`]: https://docs.rs/iosets-client
#![deny(missing_docs)]

mod access;
mod config;
mod conn;
mod control;
mod error;
mod guard;
mod http;
mod limits;
mod metrics;
pub mod root;
pub mod settings;
mod state;
#[cfg(test)]
mod test_support;
pub mod throttle;
mod worker;

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use iosets_runtime::{BookConfig, Clock, Counted, MonotonicClock, Scheduler};
use iosets_types::UnixNanos;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

pub use access::NoCreds;
pub use config::{
    mib_bytes, read_auth_file, read_token_file, ServerConfig, MAX_INFLIGHT_BYTES,
    MIN_INFLIGHT_BYTES, STATE_FILE_NAME,
};
pub use error::ServerError;
pub use iosets_proto::hints::{HintPolicy, DEFAULT_HINT_CAP};

use crate::state::Shared;

/// Starts servers. See the crate documentation.
#[derive(Debug)]
pub struct Server;

/// What a graceful shutdown did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Requests the scheduler completed over the server's life.
    pub completed: u64,
    /// Files fsynced at shutdown.
    pub fsynced_files: usize,
    /// Whether the conservation counters balanced at the end.
    pub balanced: bool,
}

/// A running server. Dropping it stops the server (gracefully) and waits for it.
#[derive(Debug)]
pub struct ServerHandle {
    addr: Option<SocketAddr>,
    admin: Option<SocketAddr>,
    in_process: InProcess,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<Result<ShutdownReport, ServerError>>>,
}

impl Server {
    /// Validates `config`, binds the listen address, opens the root, starts the worker threads
    /// and the network runtime, and returns at once.
    pub fn start(mut config: ServerConfig) -> Result<ServerHandle, ServerError> {
        let from_state = config.load_state()?;
        config.validate()?;
        if !access::can_switch() {
            tracing::info!(
                "not running as root: every request is done as this server's own user \
                 (claimed credentials are not checked; root_squash has no effect)"
            );
        }
        let policy = Counted::build(&config.policy, &config.policy_options)?;
        let nofile = limits::raise_nofile().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "keeping the current descriptor limit");
            limits::current_nofile()
        });
        let fds = limits::FdBudget::from_limit(nofile, config.workers).map_err(|e| {
            ServerError::Config {
                reason: e.to_string(),
            }
        })?;
        let root =
            root::Root::open_bounded(&config.root, fds.root_capacity()).map_err(|source| {
                ServerError::Io {
                    what: format!("opening root {}", config.root.display()),
                    source,
                }
            })?;
        let listener = if config.listen_tcp {
            Some(bind(&config.listen, "")?)
        } else {
            None
        };
        let addr = listener.as_ref().map(|(_, a)| *a);
        let admin = match &config.admin_listen {
            None => None,
            Some(a) => Some(bind(a, "the admin address ")?),
        };
        let admin_addr = admin.as_ref().map(|(_, a)| *a);
        let clock = MonotonicClock::new();
        let clock_zero = UnixNanos::now().before(clock.now());
        let trace = match &config.trace {
            None => None,
            Some(p) => Some(Mutex::new(open_trace(p, clock_zero)?)),
        };
        let sched = scheduler(&config, policy, clock)?;
        let shared = Arc::new(Shared {
            throttle: config.throttle_mib_s.map(throttle::Throttle::new),
            sched,
            root,
            fds,
            counters: state::Counters::default(),
            start: Instant::now(),
            trace,
            clock_zero,
            guard: guard::Guard::default(),
            connections: guard::Connections::new(),
            inflight_bytes: guard::ByteBudget::with_max_frame(
                config.max_inflight_bytes,
                config.max_frame,
            ),
            max_connections: config.max_connections.unwrap_or(fds.connections),
            hints_overridden: Default::default(),
            admin: admin_addr,
            state_lock: std::sync::Mutex::new(()),
            phase_conns: parking_lot::Mutex::new(Default::default()),
            config,
        });
        let workers = (0..shared.config.workers)
            .map(|i| {
                let s = shared.clone();
                std::thread::Builder::new()
                    .name(format!("iosets-io-{i}"))
                    .spawn(move || worker::run(s))
                    .map_err(|source| ServerError::Io {
                        what: "starting a worker thread".into(),
                        source,
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (stop, stop_rx) = watch::channel(false);
        let (in_process, in_process_rx) = tokio::sync::mpsc::unbounded_channel();
        let main = main_loop(
            shared.clone(),
            listener.map(|(l, _)| l),
            admin.map(|(l, _)| l),
            in_process_rx,
            stop_rx,
            workers,
        );
        let thread = spawn_network(main, shared.config.net_threads).inspect_err(|_| {
            // The workers are running: they return once the scheduler is shut down.
            shared.sched.shutdown();
        })?;
        log_start(&shared, addr, admin_addr);
        if let (Some(rules), Some(path)) = (from_state, &shared.config.state_file) {
            tracing::info!(
                state_file = %path.display(),
                rules,
                "quota rules from the state file (in place of the configuration's [quota]; \
                 delete the file to go back to the configuration's rules)"
            );
        }
        Ok(ServerHandle {
            addr,
            admin: admin_addr,
            in_process: InProcess(in_process),
            stop,
            thread: Some(thread),
        })
    }
}

/// Starts the network thread: a tokio runtime of `threads` threads running `main` (the
/// server's loop).
fn spawn_network<F>(
    main: F,
    threads: usize,
) -> Result<std::thread::JoinHandle<Result<ShutdownReport, ServerError>>, ServerError>
where
    F: std::future::Future<Output = Result<ShutdownReport, ServerError>> + Send + 'static,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("iosets-net")
        .enable_all()
        .build()
        .map_err(|source| ServerError::Io {
            what: "starting the network runtime".into(),
            source,
        })?;
    std::thread::Builder::new()
        .name("iosets-server".into())
        .spawn(move || rt.block_on(main))
        .map_err(|source| ServerError::Io {
            what: "starting the server thread".into(),
            source,
        })
}

/// Binds `addr` (`what` names it in errors: "" or "the admin address "), non-blocking; the
/// listener and the address it got.
fn bind(
    addr: &str,
    what: &str,
) -> Result<(std::net::TcpListener, std::net::SocketAddr), ServerError> {
    let io = |doing: &str| {
        let what = format!("{doing} {what}{addr}");
        move |source| ServerError::Io { what, source }
    };
    let l = std::net::TcpListener::bind(addr).map_err(io("binding"))?;
    l.set_nonblocking(true).map_err(io("configuring"))?;
    let at = l.local_addr().map_err(io("reading the bound address of"))?;
    Ok((l, at))
}

/// Creates the request trace at `path`, its header written.
fn open_trace(
    path: &std::path::Path,
    clock_zero: UnixNanos,
) -> Result<iosets_period::trace::TraceWriter<std::fs::File>, ServerError> {
    let io = |source| ServerError::Io {
        what: format!("creating trace {}", path.display()),
        source,
    };
    let file = std::fs::File::create(path).map_err(io)?;
    let mut w =
        iosets_period::trace::TraceWriter::with_clock_zero(file, clock_zero.0).map_err(io)?;
    w.flush().map_err(io)?;
    Ok(w)
}

/// The runtime around `policy`: its job book, thread quotas (percentages of the workers this
/// server runs) and in-service limit, from `config`.
fn scheduler(
    config: &ServerConfig,
    policy: Counted,
    clock: MonotonicClock,
) -> Result<Scheduler<state::Pending>, ServerError> {
    let config_err = |e: String| ServerError::Config { reason: e };
    let book = BookConfig::default()
        .auto_priority(config.auto_priority)
        .forget_after(Duration::from_secs_f64(config.forget_idle_s))
        .max_jobs(config.max_jobs)
        .period_error(config.period_error, config.period_error_seed)
        .map_err(|e| config_err(e.to_string()))?;
    let sched = Scheduler::with_book(policy, Arc::new(clock), book);
    let quota_err = |e: iosets_runtime::RuntimeError| config_err(format!("quota: {e}"));
    sched
        .set_service_threads(config.workers)
        .map_err(quota_err)?;
    sched.set_quota(config.quota.clone()).map_err(quota_err)?;
    sched.set_shares(config.shares.clone()).map_err(quota_err)?;
    sched
        .set_inservice_limit(config.inservice_limit)
        .map_err(|e| config_err(e.to_string()))?;
    Ok(sched)
}

/// Logs how the server started, and warns about what is open to more than it should be.
fn log_start(
    shared: &Shared,
    addr: Option<std::net::SocketAddr>,
    admin_addr: Option<std::net::SocketAddr>,
) {
    let c = &shared.config;
    tracing::info!(
        addr = %addr.map_or_else(|| "none (in process only)".to_string(), |a| a.to_string()),
        admin = %admin_addr.map_or_else(|| "none".to_string(), |a| a.to_string()),
        policy = shared.sched.policy_name(),
        workers = c.workers,
        net_threads = c.net_threads,
        hints = %c.hints,
        max_connections = shared.max_connections,
        fd_limit = shared.fds.limit,
        cached_files = shared.fds.cached_files,
        dirty_files = shared.fds.dirty_files,
        authentication = if c.auth.is_some() {
            "cluster secret"
        } else if c.insecure_loopback {
            "none: every local client trusted"
        } else {
            "none: root and own user on the same-host socket, in process"
        },
        "serving"
    );
    if c.auth.is_none() && c.insecure_loopback {
        tracing::warn!(
            "--insecure-loopback: clients on this host are served without proving anything \
                 and the uid they claim is believed: any local user can act as any user; give \
                 every node the same secret file (--auth-file) instead"
        );
    } else if c.auth.is_none() && c.listen_tcp {
        tracing::warn!(
            "no cluster secret (--auth-file) and not --insecure-loopback: no TCP client will \
                 be served, on loopback neither"
        );
    }
    if admin_addr.is_some_and(|a| !a.ip().is_loopback()) {
        tracing::warn!(
            admin = %admin_addr.map_or_else(String::new, |a| a.to_string()),
            "the admin address (metrics, job statistics) is not on loopback: anyone who \
             reaches it sees every job's statistics"
        );
    }
}

/// Makes connections to a server from inside its own process
/// ([`ServerHandle::in_process`]): each is one end of a Unix socket pair whose other end the
/// server serves. No other process can reach such a connection (it has no name and no port),
/// so it is served without a proof, whatever the server's secret: whoever holds this handle is
/// the process that started the server. Cheap to clone.
#[derive(Clone, Debug)]
pub struct InProcess(tokio::sync::mpsc::UnboundedSender<std::os::unix::net::UnixStream>);

impl InProcess {
    /// A new connection to the server (blocking mode; the client library makes it
    /// non-blocking). Requests on it are the TCP protocol's, and a shared region may be
    /// attached with its first frame as on the same-host socket.
    ///
    /// # Errors
    /// When no socket pair can be made (out of descriptors), or the server has stopped
    /// (`NotConnected`).
    pub fn connect(&self) -> std::io::Result<std::os::unix::net::UnixStream> {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
        self.0.send(theirs).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::NotConnected, "the server has stopped")
        })?;
        Ok(ours)
    }
}

impl ServerHandle {
    /// The address the server listens on: the unspecified address `0.0.0.0:0` when it has no
    /// TCP listener ([`ServerConfig::listen_tcp`] false; see [`ServerHandle::tcp_addr`]).
    pub fn addr(&self) -> SocketAddr {
        self.addr
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// The TCP address the server listens on, if it listens on one.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// A maker of connections to this server from inside this process, served without a
    /// proof (see [`InProcess`]).
    pub fn in_process(&self) -> InProcess {
        self.in_process.clone()
    }

    /// One connection from inside this process (see [`InProcess::connect`]).
    ///
    /// # Errors
    /// As [`InProcess::connect`].
    pub fn connect_in_process(&self) -> std::io::Result<std::os::unix::net::UnixStream> {
        self.in_process.connect()
    }

    /// The admin address (`GET /metrics`, `/jobs`, `/stats`), if the server has one.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
    }

    /// Stops the server gracefully and waits until it has: no new frames are read, every queued
    /// request is served and answered, written files are fsynced.
    pub fn shutdown(mut self) -> Result<ShutdownReport, ServerError> {
        let _ = self.stop.send(true);
        self.join()
    }

    /// Waits until the server stops by itself (on SIGTERM/SIGINT when the configuration asks
    /// for signal handling).
    pub fn wait(mut self) -> Result<ShutdownReport, ServerError> {
        self.join()
    }

    fn join(&mut self) -> Result<ShutdownReport, ServerError> {
        match self.thread.take() {
            None => Err(ServerError::Internal("server already stopped".into())),
            Some(t) => t
                .join()
                .map_err(|_| ServerError::Internal("the server thread panicked".into()))?,
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.stop.send(true);
            let _ = self.join();
        }
    }
}

#[cfg(unix)]
async fn signal_or_never(kind: Option<tokio::signal::unix::SignalKind>) {
    match kind.and_then(|k| tokio::signal::unix::signal(k).ok()) {
        Some(mut s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// Admits a new connection (`peer`: a TCP peer's address; `None`: the same-host socket or in
/// process): a peer off this host is refused without a cluster secret (one on this host is
/// refused after, by its connection, unless the server trusts its host); at the connection cap the connection idle
/// the longest makes room, or the new one is refused. Refusals are logged and counted.
pub(crate) fn admit(shared: &Shared, peer: Option<SocketAddr>) -> Option<guard::Registered> {
    let ip = peer.map(|p| p.ip().to_canonical());
    if shared.config.auth.is_none() && ip.is_some_and(|ip| !ip.is_loopback()) {
        shared.guard.refuse(
            guard::Refusal::NotLoopback,
            ip,
            "refused: this server has no cluster secret (--auth-file) and accepts loopback \
             peers only",
        );
        return None;
    }
    match shared.connections.admit(shared.max_connections) {
        guard::Admission::In(r) => Some(r),
        guard::Admission::Full => {
            shared.guard.refuse(
                guard::Refusal::ConnectionCap,
                ip,
                "refused: the connection cap is reached and every connection has requests \
                 in flight",
            );
            None
        }
    }
}

async fn main_loop(
    shared: Arc<Shared>,
    listener: Option<std::net::TcpListener>,
    admin: Option<std::net::TcpListener>,
    mut in_process: tokio::sync::mpsc::UnboundedReceiver<std::os::unix::net::UnixStream>,
    mut stop: watch::Receiver<bool>,
    workers: Vec<JoinHandle<()>>,
) -> Result<ShutdownReport, ServerError> {
    use tokio::signal::unix::SignalKind;
    let listener = listener
        .map(TcpListener::from_std)
        .transpose()
        .map_err(|source| ServerError::Io {
            what: "registering the listener".into(),
            source,
        })?;
    let signals = shared.config.handle_signals;
    let term = signal_or_never(signals.then(SignalKind::terminate));
    let int = signal_or_never(signals.then(SignalKind::interrupt));
    tokio::pin!(term, int);
    let admin = match admin.map(TcpListener::from_std).transpose() {
        Ok(a) => a,
        Err(source) => {
            return Err(ServerError::Io {
                what: "registering the admin listener".into(),
                source,
            })
        }
    };
    let (conn_stop, conn_stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    let mut admin_conns = JoinSet::new();
    // The TCP port names the server on this node (0 without TCP).
    let port = listener
        .as_ref()
        .and_then(|l| l.local_addr().ok())
        .map_or(0, |a| a.port());
    // The same-host socket is offered to TCP clients: none without TCP.
    if let Some(l) = &listener {
        conn::local::spawn(&shared, l, &mut conns, &conn_stop_rx);
    }
    // The runtime forgets idle jobs by itself (on completions and on an idle worker's timer);
    // this tick only makes it prompt when every worker is busy elsewhere.
    let mut sweep = tokio::time::interval(shared.sched.book_config().sweep_interval());
    loop {
        tokio::select! {
            _ = sweep.tick() => {
                let s = shared.clone();
                tokio::task::spawn_blocking(move || s.sched.forget_idle());
            }
            _ = stop.changed() => break,
            _ = &mut term => { tracing::info!("SIGTERM: stopping gracefully"); break }
            _ = &mut int => { tracing::info!("SIGINT: stopping gracefully"); break }
            Some(stream) = in_process.recv() => {
                serve_in_process(&shared, stream, port, &mut conns, &conn_stop_rx);
            }
            accepted = accept_on(listener.as_ref()) => match accepted {
                Ok((stream, peer)) => {
                    let Some(reg) = admit(&shared, Some(peer)) else {
                        drop(stream);
                        continue;
                    };
                    let s = shared.clone();
                    let rx = conn_stop_rx.clone();
                    s.counters.connection_opened();
                    conns.spawn(async move {
                        conn::serve(s.clone(), stream, reg, rx).await;
                        s.counters.connection_closed();
                    });
                }
                Err(e) => {
                    // Out of descriptors and the like: wait a little rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            },
            accepted = accept_on(admin.as_ref()) => {
                if let Ok((stream, _)) = accepted {
                    // One request each, bounded in time; at most a few at once.
                    if admin_conns.len() < MAX_ADMIN_CONNECTIONS {
                        let s = shared.clone();
                        admin_conns.spawn(async move { http::serve_admin(&s, stream).await });
                    }
                }
            }
            Some(_) = admin_conns.join_next(), if !admin_conns.is_empty() => {}
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(admin);
    admin_conns.abort_all();
    shut_down(shared, listener, conn_stop, conns, workers).await
}

/// Serves a connection made from inside this process (one end of a socket pair), if the
/// connection cap admits it.
fn serve_in_process(
    shared: &Arc<Shared>,
    stream: std::os::unix::net::UnixStream,
    port: u16,
    conns: &mut JoinSet<()>,
    stop: &watch::Receiver<bool>,
) {
    let Some(reg) = admit(shared, None) else {
        return;
    };
    let stream = stream
        .set_nonblocking(true)
        .and_then(|()| tokio::net::UnixStream::from_std(stream));
    let Ok(stream) = stream else {
        tracing::warn!("an in-process connection could not be registered");
        return;
    };
    let s = shared.clone();
    let rx = stop.clone();
    s.counters.connection_opened();
    conns.spawn(async move {
        let via = conn::local::Via::InProcess;
        conn::local::serve(s.clone(), stream, port, reg, rx, via).await;
        s.counters.connection_closed();
    });
}

/// The graceful stop, in order: no new connections or frames; everything queued served and
/// the workers joined; every acknowledged write made durable; the connections' last answers
/// sent (bounded). Then the report.
async fn shut_down(
    shared: Arc<Shared>,
    listener: Option<TcpListener>,
    conn_stop: watch::Sender<bool>,
    mut conns: JoinSet<()>,
    workers: Vec<JoinHandle<()>>,
) -> Result<ShutdownReport, ServerError> {
    // 1. No new connections, no new frames.
    drop(listener);
    let _ = conn_stop.send(true);
    // 2. Serve everything already queued; the workers return once the queue is empty.
    shared.sched.shutdown();
    let joined = tokio::task::spawn_blocking(move || workers.into_iter().all(|w| w.join().is_ok()))
        .await
        .unwrap_or(false);
    // 3. Make every acknowledged write durable.
    let s = shared.clone();
    let (fsynced, fsync_err) = tokio::task::spawn_blocking(move || s.root.fsync_dirty())
        .await
        .unwrap_or((0, None));
    // 4. Let the connections send their last answers (bounded: a client that stopped reading
    //    does not hold the server forever).
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    conns.abort_all();
    let stats = shared.sched.stats();
    let balanced = shared.sched.check_balance().is_ok();
    if !joined {
        return Err(ServerError::Internal("a worker thread panicked".into()));
    }
    if let Some(e) = fsync_err {
        return Err(ServerError::Internal(format!(
            "fsync at shutdown: {}",
            e.message
        )));
    }
    Ok(ShutdownReport {
        completed: stats.counters.completed,
        fsynced_files: fsynced,
        balanced,
    })
}

/// Admin (HTTP) connections served at once; more wait in the kernel's backlog.
const MAX_ADMIN_CONNECTIONS: usize = 16;

/// The next connection on `l` (the TCP or the admin listener), or never when there is none.
async fn accept_on(
    l: Option<&TcpListener>,
) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
    match l {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}
