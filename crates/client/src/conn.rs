//! One connection to one server, and the endpoint that reconnects and retries.
//!
//! A [`Conn`] is a stream split in two tasks: a writer task that takes encoded frames from an
//! unbounded channel and writes them in order (buffering the small heads, flushing when the
//! channel is empty), and a reader task that reads frames (length prefix checked against the
//! maximum before allocating), and hands each response to the caller waiting on its tag through a
//! oneshot channel. Many requests may be outstanding on one connection; the server answers them
//! in any order. When either task hits an error or the end of the stream, the connection is
//! marked dead and every outstanding caller is told (`Lost`): their requests may or may not have
//! been carried out.
//!
//! The stream is TCP, or, for a server on this host that offers it, its same-host Unix socket
//! with the client's shared region attached ([`iosets_proto::local`]). Then a read or write of
//! [`LOCAL_MIN`] bytes or more, or of bytes already in the region, names a range of the region
//! instead of carrying its bytes: a write's bytes are copied into the region unless they are
//! there already, and a read's land there and are returned as a view of it, without a copy.
//! The region bytes of a request stay allocated until the server is known to be done with them:
//! its answer came, or it closed the connection (it closes only after answering everything it
//! read, or by dying). A connection this side gives up on (a malformed frame) leaves its ranges
//! in quarantine for the life of the client.
//!
//! An [`Endpoint`] holds the current connection to one server, makes a new one (TCP) when the
//! current one is dead, asks for the same-host transport with the first request that would use
//! it, and sends a request again after a lost connection only if it is idempotent.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use iosets_proto::io::{ReadError, WRITE_BUFFER};
use iosets_proto::local::{send_with_fd, Region};
use iosets_proto::{
    decode, encode, frame_len, Creds, Encoded, Frame, Header, OpCode, Reply, Request, Response,
};
use iosets_types::{JobId, Priority};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter, Interest};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::{mpsc, oneshot};

use crate::config::ClientConfig;
use crate::error::ClientError;

/// The reader's buffer grows by this much when it runs out of room.
const READ_BUFFER: usize = 64 * 1024;

/// Data of at least this many bytes goes through the shared region of a same-host connection;
/// smaller data travels in its frame (a region range costs an allocation; a few KiB cost less
/// to copy through the socket).
pub(crate) const LOCAL_MIN: usize = 64 * 1024;

/// What a waiting caller receives: the echoed operation and the response, or why the
/// connection broke.
type Delivery = Result<(OpCode, Response), String>;

/// A request waiting for its response.
#[derive(Debug)]
struct Waiting {
    tx: oneshot::Sender<Delivery>,
    /// The shared-region bytes the server may still read or write for this request: kept
    /// allocated until the server is known to be done with them.
    hold: Option<Bytes>,
}

/// The state the caller side and the two tasks share.
#[derive(Debug, Default)]
struct State {
    /// Callers waiting for a response, by tag.
    pending: HashMap<u64, Waiting>,
    /// Why the connection is dead, once it is.
    dead: Option<String>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    /// The client's shared region, on a same-host connection.
    local: Option<Local>,
}

/// How a connection broke, as far as the shared region is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// The server closed or reset the connection: it closes only after answering (or dropping)
    /// everything it had read, or when it died, so it will touch no region range again.
    ByServer,
    /// This side gave up (a malformed frame): the server may still be serving what it read.
    ByClient,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the map inconsistent (single inserts and
        // removals), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks the connection dead (the first reason wins) and fails every waiting caller.
    fn fail(&self, reason: String, end: End) {
        let pending = {
            let mut st = self.lock();
            if st.dead.is_none() {
                st.dead = Some(reason.clone());
            }
            std::mem::take(&mut st.pending)
        };
        for (_, w) in pending {
            let _ = w.tx.send(Err(reason.clone()));
            if let (Some(hold), End::ByClient, Some(local)) = (w.hold, end, &self.local) {
                local.quarantine(hold);
            }
        }
    }

    fn deliver(&self, tag: u64, op: OpCode, resp: Response) {
        let w = self.lock().pending.remove(&tag);
        // An unknown tag is the late answer to a request that timed out: dropped.
        if let Some(w) = w {
            let _ = w.tx.send(Ok((op, resp)));
        }
    }
}

/// The client's shared region and what it must never reuse.
#[derive(Clone, Debug)]
pub(crate) struct Local {
    pub(crate) region: Arc<Region>,
    /// Ranges a server may still be using after a connection this side gave up on: held for as
    /// long as the client lives.
    quarantined: Arc<Mutex<Vec<Bytes>>>,
}

impl Local {
    pub(crate) fn new(region: Arc<Region>) -> Local {
        Local {
            region,
            quarantined: Arc::default(),
        }
    }

    fn quarantine(&self, hold: Bytes) {
        self.quarantined
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(hold);
    }
}

/// How far into its range of the region a read's bytes land: 16 bytes, as in a buffer from
/// `malloc`. Measured here (`pread` of 1 MiB from the page cache, x86): a destination at the
/// start of a page copies 5 to 10% slower than one 16 bytes in.
pub(crate) const READ_SKEW: usize = 16;

/// A range of the region for a read of `len` bytes, [`READ_SKEW`] bytes into an allocation.
pub(crate) fn read_range(region: &Arc<Region>, len: usize) -> Option<Bytes> {
    let slot = region.alloc(len.checked_add(READ_SKEW)?)?;
    Some(slot.freeze().slice(READ_SKEW..READ_SKEW + len))
}

/// Where a read's bytes should land: `at` bytes into `slot`, a frozen range of the shared
/// region (so the pieces of one read land side by side and need no copy to be joined).
#[derive(Clone, Debug)]
pub(crate) struct Landing {
    pub(crate) slot: Bytes,
    pub(crate) at: usize,
}

/// Whom a request is done for: what its header carries besides the tag.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Caller {
    /// The job.
    pub job: JobId,
    /// The priority hint, if any.
    pub priority: Option<Priority>,
    /// The local user it acts for, if any (the mount).
    pub creds: Option<Creds>,
    /// The start of the job's current I/O phase, UNIX-epoch ns (see the `phase` module).
    pub phase: Option<iosets_types::UnixNanos>,
    /// What other servers served the job since its last request to this one (see the
    /// `served` module).
    pub elsewhere: Option<iosets_proto::Elsewhere>,
}

/// Looks up the name of the job a request is for ([`Endpoint::call`]).
pub(crate) type NameOf<'a> = &'a (dyn Fn() -> Option<std::sync::Arc<str>> + Send + Sync);

/// The most jobs a connection remembers having named; past it the set starts again (names are
/// then told again: harmless).
const NAMED_PER_CONN: usize = 65_536;

/// Why one attempt at a request failed, as far as retrying is concerned.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// The request never left this process: always safe to try again.
    NotSent(ClientError),
    /// The connection broke after the request was handed to it: it may have been carried out.
    Lost(ClientError),
    /// Anything else: returned as is.
    Final(ClientError),
}

/// A request as it goes on the wire, with the region bytes it uses.
struct Shaped {
    wire: Request,
    /// Kept allocated while the server may use them.
    hold: Option<Bytes>,
    /// For a read into the region: where its bytes land.
    view: Option<Bytes>,
}

/// One live (or dead) connection.
#[derive(Debug)]
pub(crate) struct Conn {
    server: SocketAddr,
    tx: mpsc::UnboundedSender<Encoded>,
    shared: Arc<Shared>,
    next_tag: AtomicU64,
    /// Whether the server runs on this host (the same-host transport may be asked for).
    same_host: bool,
    /// Whether the same-host transport was asked for on this connection already.
    probed: std::sync::atomic::AtomicBool,
    /// Jobs whose name this connection told its server ([`Request::JobName`]): each new
    /// connection (a restarted server) is told again. Cleared past [`NAMED_PER_CONN`].
    named: std::sync::Mutex<std::collections::HashSet<u64>>,
    /// Dropping it stops the reader task.
    _close: oneshot::Sender<()>,
}

impl Conn {
    /// Connects to `server` over TCP and starts the reader and writer tasks on the current
    /// runtime.
    async fn connect(server: SocketAddr, cfg: &ClientConfig) -> Result<Conn, ClientError> {
        let stream =
            match tokio::time::timeout(cfg.connect_timeout, TcpStream::connect(server)).await {
                Ok(Ok(s)) => s,
                Ok(Err(source)) => return Err(ClientError::Connect { server, source }),
                Err(_) => {
                    return Err(ClientError::Connect {
                        server,
                        source: std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!("no connection within {:?}", cfg.connect_timeout),
                        ),
                    })
                }
            };
        // Small frames (metadata, acknowledgements) should not wait for Nagle's algorithm.
        let _ = stream.set_nodelay(true);
        let mut stream = stream;
        if let Some(secret) = &cfg.auth {
            prove(&mut stream, secret, server, cfg).await?;
        }
        let same_host = match (stream.local_addr(), stream.peer_addr()) {
            (Ok(me), Ok(peer)) => me.ip() == peer.ip() || peer.ip().is_loopback(),
            _ => false,
        };
        let (read, write) = stream.into_split();
        let mut conn = Conn::start(server, read, write, cfg, None);
        conn.same_host = same_host;
        Ok(conn)
    }

    /// A connection to a server inside this process, made by `connector` (see [`Connector`]):
    /// no handshake (nothing outside the process can reach it); the client's region, when it
    /// has one, is attached with the first frame, so large reads and writes move through it as
    /// on the same-host socket. A region the server refuses leaves a connection without one.
    async fn in_process(
        server: SocketAddr,
        connector: &Connector,
        cfg: &ClientConfig,
        local: Option<&Local>,
    ) -> Result<Conn, ClientError> {
        let open = || -> Result<UnixStream, ClientError> {
            let stream = connector().map_err(|source| ClientError::Connect { server, source })?;
            stream
                .set_nonblocking(true)
                .and_then(|()| UnixStream::from_std(stream))
                .map_err(|source| ClientError::Connect { server, source })
        };
        let mut stream = open()?;
        let Some(local) = local else {
            let (read, write) = stream.into_split();
            return Ok(Conn::start(server, read, write, cfg, None));
        };
        let who = Caller {
            job: cfg.job,
            priority: None,
            creds: None,
            phase: None,
            elsewhere: None,
        };
        let attached = tokio::time::timeout(
            cfg.connect_timeout,
            attach(&mut stream, who, &local.region, None, cfg.max_frame),
        )
        .await;
        if !matches!(attached, Ok(Ok(()))) {
            // The stream's state is unknown after a failed attach: a fresh one, without region.
            let (read, write) = open()?.into_split();
            return Ok(Conn::start(server, read, write, cfg, None));
        }
        let (read, write) = stream.into_split();
        Ok(Conn::start(server, read, write, cfg, Some(local.clone())))
    }

    /// Starts the tasks of a connection over `read` and `write`.
    fn start<R, W>(
        server: SocketAddr,
        read: R,
        write: W,
        cfg: &ClientConfig,
        local: Option<Local>,
    ) -> Conn
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            local,
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let (close, closed) = oneshot::channel();
        tokio::spawn(write_loop(
            BufWriter::with_capacity(WRITE_BUFFER, write),
            rx,
            shared.clone(),
        ));
        tokio::spawn(read_loop(read, shared.clone(), cfg.max_frame, closed));
        Conn {
            server,
            tx,
            shared,
            next_tag: AtomicU64::new(1),
            same_host: false,
            probed: std::sync::atomic::AtomicBool::new(false),
            named: std::sync::Mutex::new(std::collections::HashSet::new()),
            _close: close,
        }
    }

    fn alive(&self) -> bool {
        self.shared.lock().dead.is_none()
    }

    /// Whether this is a same-host connection with the shared region attached.
    fn is_local(&self) -> bool {
        self.shared.local.is_some()
    }

    /// `req` as it goes on the wire: on a same-host connection, a write of region bytes (or of
    /// enough bytes to be worth copying there) and a read into a landing place (or large
    /// enough) name a range of the region instead of carrying bytes.
    fn shape(&self, req: Request, landing: Option<&Landing>) -> Shaped {
        let plain = |wire| Shaped {
            wire,
            hold: None,
            view: None,
        };
        let Some(local) = &self.shared.local else {
            return plain(req);
        };
        let region = &local.region;
        match req {
            Request::Write { path, offset, data } if !data.is_empty() => {
                let hold = if region.locate(&data).is_some() {
                    Some(data.clone())
                } else if data.len() >= LOCAL_MIN {
                    region.alloc(data.len()).map(|mut slot| {
                        slot.copy_from_slice(&data);
                        slot.freeze()
                    })
                } else {
                    None
                };
                match hold.as_ref().and_then(|h| region.locate(h)) {
                    Some(at) => Shaped {
                        wire: Request::WriteShared {
                            path,
                            offset,
                            len: data.len() as u32,
                            at,
                        },
                        hold,
                        view: None,
                    },
                    None => plain(Request::Write { path, offset, data }),
                }
            }
            Request::Read { path, offset, len } => {
                let view = match landing {
                    Some(l) => {
                        l.at.checked_add(len as usize)
                            .filter(|&end| end <= l.slot.len())
                            .map(|end| l.slot.slice(l.at..end))
                    }
                    None if len as usize >= LOCAL_MIN => read_range(region, len as usize),
                    None => None,
                };
                match view.as_ref().and_then(|v| region.locate(v)) {
                    Some(at) => Shaped {
                        wire: Request::ReadShared {
                            path,
                            offset,
                            len,
                            at,
                        },
                        hold: view.clone(),
                        view,
                    },
                    None => plain(Request::Read { path, offset, len }),
                }
            }
            other => plain(other),
        }
    }

    /// Sends `req` and waits for its response. A read may name where its bytes should land
    /// (used only on a same-host connection).
    async fn call(
        &self,
        who: Caller,
        req: Request,
        landing: Option<&Landing>,
        timeout: Option<Duration>,
    ) -> Result<Response, Attempt> {
        let tag = self.next_tag.fetch_add(1, Ordering::Relaxed);
        let op = req.op();
        let Shaped { wire, hold, view } = self.shape(req, landing);
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.shared.lock();
            if let Some(reason) = &st.dead {
                return Err(Attempt::NotSent(self.lost(reason.clone())));
            }
            st.pending.insert(tag, Waiting { tx, hold });
        }
        let header = Header {
            phase: who.phase,
            tag,
            job: who.job,
            priority: who.priority,
            creds: who.creds,
            elsewhere: who.elsewhere,
        };
        let frame = encode(&Frame::Request(header, wire));
        if self.tx.send(frame).is_err() {
            // The writer task is gone: the frame was never written.
            self.shared.lock().pending.remove(&tag);
            return Err(Attempt::NotSent(self.lost("writer stopped".into())));
        }
        let delivered = match timeout {
            None => rx.await,
            Some(after) => match tokio::time::timeout(after, rx).await {
                Ok(d) => d,
                Err(_) => {
                    let mut st = self.shared.lock();
                    // Region bytes stay held until the late answer (or the end of the
                    // connection): the request may still be queued on the server.
                    if st.pending.get(&tag).is_some_and(|w| w.hold.is_none()) {
                        st.pending.remove(&tag);
                    }
                    return Err(Attempt::Final(ClientError::Timeout {
                        server: self.server,
                        after,
                    }));
                }
            },
        };
        match delivered {
            Ok(Ok((echo, resp))) if echo == op => match (view, resp) {
                (Some(view), Response::Ok(Reply::Placed(n))) if n as usize <= view.len() => {
                    Ok(Response::Ok(Reply::Data(view.slice(..n as usize))))
                }
                (_, Response::Ok(Reply::Placed(n))) => Err(Attempt::Final(ClientError::Protocol {
                    server: self.server,
                    reason: format!("{n} bytes placed in the shared region for no such read"),
                })),
                (_, resp) => Ok(resp),
            },
            Ok(Ok((echo, _))) => Err(Attempt::Final(ClientError::Protocol {
                server: self.server,
                reason: format!(
                    "response to a {} request echoes operation {}",
                    op.as_str(),
                    echo.as_str()
                ),
            })),
            Ok(Err(reason)) => Err(Attempt::Lost(self.lost(reason))),
            Err(_) => Err(Attempt::Lost(self.lost("connection dropped".into()))),
        }
    }

    /// Tells the server `who`'s job's name (`name_of` looks it up, only when this connection
    /// has not told it yet), once per connection: before the job's first request on it. A
    /// refusal is not retried (the server keeps no name then).
    async fn name(
        &self,
        who: Caller,
        name_of: NameOf<'_>,
        cfg: &ClientConfig,
    ) -> Result<(), Attempt> {
        let job = who.job.0;
        if self
            .named
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&job)
        {
            return Ok(());
        }
        let Some(name) = name_of() else {
            return Ok(());
        };
        // Nothing scheduled: no phase stamp, and the service done elsewhere stays with the
        // request that follows.
        let plain = Caller {
            phase: None,
            elsewhere: None,
            ..who
        };
        let req = Request::JobName {
            name: name.to_string(),
        };
        // A refusal (a server that does not know the request, a name that is not the job's)
        // is not asked again on this connection: the name is only for reports and patterns.
        let _answer = self.call(plain, req, None, cfg.request_timeout).await?;
        let mut named = self.named.lock().unwrap_or_else(|e| e.into_inner());
        if named.len() >= NAMED_PER_CONN {
            named.clear();
        }
        named.insert(job);
        Ok(())
    }

    fn lost(&self, reason: String) -> ClientError {
        ClientError::ConnectionLost {
            server: self.server,
            reason,
        }
    }

    /// Asks the server over this (TCP) connection for its same-host transport, connects to it
    /// and attaches the client's region. `None` when the server offers none, is not the process
    /// that answered, or anything fails: the caller stays on TCP.
    async fn upgrade(&self, who: Caller, cfg: &ClientConfig, local: &Local) -> Option<Conn> {
        let offer = self
            .call(
                who,
                Request::LocalTransport,
                None,
                Some(cfg.connect_timeout),
            )
            .await;
        let Ok(Response::Ok(Reply::LocalTransport { socket, id, pid })) = offer else {
            return None;
        };
        let path = match socket.strip_prefix('@') {
            Some(name) => format!("\0{name}"),
            None => socket,
        };
        let handshake = async {
            let mut stream = UnixStream::connect(&path).await.ok()?;
            // The socket's peer must be the process that answered over TCP.
            if stream.peer_cred().ok()?.pid() != i32::try_from(pid).ok() {
                return None;
            }
            if let Some(secret) = &cfg.auth {
                prove(&mut stream, secret, self.server, cfg).await.ok()?;
            }
            attach(&mut stream, who, &local.region, Some(&id), cfg.max_frame)
                .await
                .ok()?;
            Some(stream)
        };
        let stream = tokio::time::timeout(cfg.connect_timeout, handshake)
            .await
            .ok()??;
        let (read, write) = stream.into_split();
        Some(Conn::start(
            self.server,
            read,
            write,
            cfg,
            Some(local.clone()),
        ))
    }
}

/// The cluster-secret handshake ([`iosets_proto::auth`]): the server's challenge, the client's
/// proof, the server's proof checked in turn; within the connect timeout.
async fn prove<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    secret: &iosets_proto::auth::Secret,
    server: SocketAddr,
    cfg: &ClientConfig,
) -> Result<(), ClientError> {
    let fail = |reason: String| ClientError::Auth { server, reason };
    let exchange = async {
        let server_nonce = match read_frame(stream, cfg.max_frame).await {
            Ok(Frame::Response(_, OpCode::Auth, Response::Ok(Reply::Challenge { nonce }))) => nonce,
            Ok(other) => {
                return Err(fail(format!(
                    "expected the server's challenge, got {other:?}"
                )))
            }
            Err(reason) => return Err(fail(reason)),
        };
        let nonce = iosets_proto::auth::nonce().map_err(|e| fail(format!("no nonce: {e}")))?;
        let header = Header::new(0, cfg.job);
        let proof = secret.client_proof(&server_nonce, &nonce);
        let frame = encode(&Frame::Request(header, Request::Auth { nonce, proof }));
        stream
            .write_all(&frame.head)
            .await
            .map_err(|e| fail(format!("sending the proof: {e}")))?;
        stream
            .flush()
            .await
            .map_err(|e| fail(format!("sending the proof: {e}")))?;
        match read_frame(stream, cfg.max_frame).await {
            Ok(Frame::Response(_, OpCode::Auth, Response::Ok(Reply::Authenticated { proof })))
                if secret.check_server(&server_nonce, &nonce, &proof) =>
            {
                Ok(())
            }
            Ok(Frame::Response(_, OpCode::Auth, Response::Ok(Reply::Authenticated { .. }))) => Err(
                fail("the server's proof is wrong: it does not hold this cluster's secret".into()),
            ),
            Ok(Frame::Response(_, _, Response::Err { message, .. })) => Err(fail(message)),
            Ok(other) => Err(fail(format!("unexpected answer to the proof: {other:?}"))),
            Err(reason) => Err(fail(reason)),
        }
    };
    tokio::time::timeout(cfg.connect_timeout, exchange)
        .await
        .unwrap_or_else(|_| {
            Err(fail(format!(
                "no response within {:?} to the authentication (no challenge or no proof came: \
                 is it an iosets server?)",
                cfg.connect_timeout
            )))
        })
}

/// The first exchange on a same-host socket: [`Request::AttachRegion`] with the region's
/// descriptor, answered [`Reply::Attached`] with the identity the server gave over TCP (`id`;
/// `None` in process, where there is no other server to mistake it for).
async fn attach(
    stream: &mut UnixStream,
    who: Caller,
    region: &Region,
    id: Option<&str>,
    max_frame: u32,
) -> Result<(), String> {
    // Stamped with the job's phase: the server then counts the phase on this socket before the
    // TCP connection it replaces closes, and that close ends nothing (`OpenPhases`).
    let header = Header {
        phase: who.phase,
        ..Header::new(0, who.job)
    };
    let len = region.len() as u64;
    let frame = encode(&Frame::Request(header, Request::AttachRegion { len })).to_vec();
    let sent = stream
        .async_io(Interest::WRITABLE, || {
            send_with_fd(stream.as_fd(), &frame, region.fd())
        })
        .await
        .map_err(|e| format!("sending the region: {e}"))?;
    stream
        .write_all(&frame[sent..])
        .await
        .map_err(|e| format!("sending the region: {e}"))?;
    match read_frame(stream, max_frame).await {
        Ok(Frame::Response(_, OpCode::AttachRegion, Response::Ok(Reply::Attached { id: got })))
            if id.is_none_or(|id| got == id) =>
        {
            Ok(())
        }
        Ok(other) => Err(format!("unexpected answer to the region: {other:?}")),
        Err(reason) => Err(reason),
    }
}

/// Writes frames in the order they were queued; flushes when no more are waiting.
async fn write_loop<W: AsyncWrite + Unpin>(
    mut w: BufWriter<W>,
    mut rx: mpsc::UnboundedReceiver<Encoded>,
    shared: Arc<Shared>,
) {
    while let Some(mut frame) = rx.recv().await {
        loop {
            if let Err(e) = iosets_proto::io::write_frame(&mut w, &frame).await {
                // The server's end is closed: it answered what it read, or died.
                shared.fail(format!("write failed: {e}"), End::ByServer);
                return;
            }
            match rx.try_recv() {
                Ok(next) => frame = next,
                Err(_) => break,
            }
        }
        if let Err(e) = w.flush().await {
            shared.fail(format!("write failed: {e}"), End::ByServer);
            return;
        }
    }
    // The connection was dropped by the client: close our direction.
    let _ = w.shutdown().await;
}

/// Reads one frame (`iosets_proto::io::read_frame`), its error told as the server's doing.
async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, max: u32) -> Result<Frame, String> {
    iosets_proto::io::read_frame(r, max)
        .await
        .map_err(|e| match e {
            ReadError::Closed => "closed by the server".to_string(),
            ReadError::Truncated => "closed by the server in the middle of a frame".to_string(),
            e => e.to_string(),
        })
}

/// Frames at least this long are handed out as slices of the connection's read buffer (whose
/// memory is reused once they are dropped); shorter ones are copied out, so that a small answer
/// kept for long does not pin a large buffer.
const SLICE_MIN: usize = 64 * 1024;

/// Hands each response to its caller until the stream ends, breaks, or the connection is
/// dropped. Reads into one buffer that frames are cut from: a large frame's bytes arrive straight
/// in the buffer, and the buffer's memory comes back when the frames cut from it are dropped (no
/// allocation per frame, which on a busy heap costs page faults).
async fn read_loop<R: AsyncRead + Unpin>(
    mut r: R,
    shared: Arc<Shared>,
    max: u32,
    mut closed: oneshot::Receiver<()>,
) {
    let mut buf = BytesMut::with_capacity(READ_BUFFER);
    let (reason, end) = 'read: loop {
        // Every complete frame in the buffer.
        while buf.len() >= 4 {
            let prefix = [buf[0], buf[1], buf[2], buf[3]];
            let len = match frame_len(prefix, max) {
                Ok(len) => len,
                Err(e) => break 'read (format!("protocol error: {e}"), End::ByClient),
            };
            if buf.len() < 4 + len {
                buf.reserve(4 + len - buf.len());
                break;
            }
            let _ = buf.split_to(4);
            let body = if len >= SLICE_MIN {
                buf.split_to(len).freeze()
            } else {
                Bytes::copy_from_slice(&buf.split_to(len))
            };
            match decode(body) {
                Ok(Frame::Response(h, op, resp)) => shared.deliver(h.tag, op, resp),
                Ok(Frame::Request(..)) => {
                    break 'read (
                        "protocol error: the server sent a request".into(),
                        End::ByClient,
                    )
                }
                Err(e) => break 'read (format!("protocol error: {e}"), End::ByClient),
            }
        }
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(READ_BUFFER);
        }
        tokio::select! {
            _ = &mut closed => return,
            n = r.read_buf(&mut buf) => match n {
                Ok(0) if buf.is_empty() => break ("closed by the server".into(), End::ByServer),
                Ok(0) => {
                    break (
                        "closed by the server in the middle of a frame".into(),
                        End::ByServer,
                    )
                }
                Ok(_) => {}
                Err(e) => break (format!("read failed: {e}"), End::ByServer),
            },
        }
    };
    shared.fail(reason, end);
}

/// Makes a connection to a server that runs inside this process: one end of a Unix socket
/// pair whose other end the server serves (`iosets_server::ServerHandle::in_process`). Such a
/// connection has no address or port another process could reach; the server serves it
/// without a proof. Called again to reconnect.
pub type Connector = Arc<dyn Fn() -> std::io::Result<std::os::unix::net::UnixStream> + Send + Sync>;

/// One server: its address and the current connection to it.
pub(crate) struct Endpoint {
    pub(crate) addr: SocketAddr,
    /// For a server in this process: how to reach it (instead of `addr`, then only a name).
    connector: Option<Connector>,
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    /// The client's shared region, when it may use the same-host transport.
    local: Option<Local>,
    /// Whether the current connection is a same-host one.
    is_local: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("addr", &self.addr)
            .field("in_process", &self.connector.is_some())
            .field("is_local", &self.is_local())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An endpoint for `addr`, connected now (over TCP: the same-host transport is asked for
    /// with the first request that would use it), or through `connector` for a server in this
    /// process (`addr` is then only its name in errors).
    pub(crate) async fn connect(
        addr: SocketAddr,
        connector: Option<Connector>,
        cfg: &ClientConfig,
        local: Option<Local>,
    ) -> Result<Endpoint, ClientError> {
        let ep = Endpoint {
            addr,
            connector,
            conn: tokio::sync::Mutex::new(None),
            local,
            is_local: std::sync::atomic::AtomicBool::new(false),
        };
        let conn = ep.open(cfg).await?;
        *ep.conn.lock().await = Some(Arc::new(conn));
        Ok(ep)
    }

    /// A new connection: TCP, or in process (its region attached when it can be).
    async fn open(&self, cfg: &ClientConfig) -> Result<Conn, ClientError> {
        match &self.connector {
            None => Conn::connect(self.addr, cfg).await,
            Some(c) => {
                let conn = Conn::in_process(self.addr, c, cfg, self.local.as_ref()).await?;
                self.is_local.store(conn.is_local(), Ordering::Relaxed);
                Ok(conn)
            }
        }
    }

    /// Whether requests to this server currently go through the same-host transport.
    pub(crate) fn is_local(&self) -> bool {
        self.is_local.load(Ordering::Relaxed)
    }

    /// Whether `req` would move its data through the shared region on a same-host connection.
    fn wants_region(&self, req: &Request) -> bool {
        let Some(local) = &self.local else {
            return false;
        };
        match req {
            Request::Write { data, .. } => {
                data.len() >= LOCAL_MIN || local.region.locate(data).is_some()
            }
            Request::Read { len, .. } => *len as usize >= LOCAL_MIN,
            _ => false,
        }
    }

    /// The live connection, made anew if the last one died. Concurrent callers wait for one
    /// reconnection rather than each making one. When `upgrade` and the server is on this host,
    /// a TCP connection that has not asked yet asks for the same-host transport and, if the
    /// server offers it, is replaced by it.
    async fn connection(
        &self,
        cfg: &ClientConfig,
        who: Caller,
        upgrade: bool,
    ) -> Result<Arc<Conn>, ClientError> {
        let mut current = self.conn.lock().await;
        let conn = match current.as_ref() {
            Some(c) if c.alive() => c.clone(),
            _ => {
                *current = None;
                self.is_local.store(false, Ordering::Relaxed);
                let c = Arc::new(self.open(cfg).await?);
                *current = Some(c.clone());
                c
            }
        };
        let Some(local) = self.local.as_ref().filter(|_| upgrade) else {
            return Ok(conn);
        };
        if conn.is_local() || !conn.same_host || conn.probed.swap(true, Ordering::Relaxed) {
            return Ok(conn);
        }
        match conn.upgrade(who, cfg, local).await {
            Some(l) => {
                let l = Arc::new(l);
                *current = Some(l.clone());
                self.is_local.store(true, Ordering::Relaxed);
                Ok(l)
            }
            None => Ok(conn),
        }
    }

    /// Sends `req` and returns the server's response. A request that never left (no
    /// connection) is attempted again up to `cfg.retries` times; one whose connection broke
    /// while it was outstanding is sent again only if it is idempotent. Waits between attempts
    /// grow from `cfg.backoff`. A read may name where its bytes should land in the shared
    /// region (used on a same-host connection only).
    pub(crate) async fn call(
        &self,
        cfg: &ClientConfig,
        who: Caller,
        req: Request,
        landing: Option<&Landing>,
        name: Option<NameOf<'_>>,
    ) -> Result<Response, ClientError> {
        let idempotent = req.is_idempotent();
        let upgrade = self.wants_region(&req);
        let mut attempt = 0u32;
        loop {
            let err = match self.connection(cfg, who, upgrade).await {
                Err(e) => e,
                Ok(conn) => match async {
                    if let Some(name) = name {
                        // The request itself was not sent: whatever became of its name, it
                        // may be tried again (never failed as lost: it may not be idempotent).
                        conn.name(who, name, cfg).await.map_err(|e| match e {
                            Attempt::NotSent(e) | Attempt::Lost(e) | Attempt::Final(e) => {
                                Attempt::NotSent(e)
                            }
                        })?;
                    }
                    conn.call(who, req.clone(), landing, cfg.request_timeout)
                        .await
                }
                .await
                {
                    Ok(resp) => return Ok(resp),
                    Err(Attempt::NotSent(e)) => e,
                    Err(Attempt::Lost(e)) if idempotent => e,
                    Err(Attempt::Lost(e) | Attempt::Final(e)) => return Err(e),
                },
            };
            if attempt >= cfg.retries {
                return Err(err);
            }
            tokio::time::sleep(cfg.backoff_for(attempt)).await;
            attempt += 1;
        }
    }
}
