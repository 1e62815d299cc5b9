//! The same-host transport, server side: a Unix-domain socket beside the TCP listener.
//!
//! # What it is
//! A client on this node asks over TCP which socket to use ([`Request::LocalTransport`], answered
//! by [`offer`]), connects to it, and sends [`Request::AttachRegion`] as its first frame with the
//! descriptor of its shared region alongside (`SCM_RIGHTS`). From then on its reads and writes
//! may name a range of that region instead of carrying bytes ([`Request::ReadShared`],
//! [`Request::WriteShared`]): they go through the scheduler like every data request, and the
//! worker `pread`s into the region or `pwrite`s from it ([`crate::root::Root::read_into`],
//! [`crate::root::Root::write_from`]), so the bytes are copied once, between the page cache and
//! the client's memory. Everything else on the socket (metadata, control, small reads and
//! writes with their bytes inline) is the TCP protocol unchanged.
//!
//! The socket is a Linux abstract socket named after the server (`@iosets-<pid>-<port>-<n>`,
//! nothing in the file system) unless [`ServerConfig::local_socket`](crate::ServerConfig) gives a
//! path. The client checks that the socket's peer is the process [`offer`] named and that
//! [`attach`] answers the identity [`offer`] gave, so it never mistakes another server for this
//! one.
//!
//! # Invariants
//! - A region belongs to one connection: it is mapped when that connection attaches it and
//!   unmapped when the connection and the requests it queued are gone.
//! - Every range is checked against the mapped length, without overflow, when its frame arrives
//!   ([`place`], answered `EFAULT` otherwise) and again before the I/O.
//! - A shared read or write on a connection without a region is answered `EPROTO`; a second
//!   region `EBUSY`; a region whose descriptor did not come with the first frame, is not a
//!   memfd sealed against shrinking, or is larger than the configured maximum, `EINVAL`.
//!
//! # What it is not
//! Not a way around the scheduler: a request through the region is queued, ordered and
//! accounted exactly as one with inline bytes, and acknowledged only after its `pwrite`.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixListener as StdListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use iosets_proto::local::{recv_with_fd, PeerRegion};
use iosets_proto::{Bytes, Reply};
use rustix::io::Errno;
use tokio::io::{AsyncReadExt, Interest};
use tokio::net::{TcpListener, UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

#[cfg(doc)]
use iosets_proto::Request;

use super::Link;
use crate::guard::Refusal;
use crate::root::FsError;
use crate::state::Shared;

/// A place in a connection's shared region.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    pub(crate) region: Arc<PeerRegion>,
    pub(crate) at: u64,
}

/// A write's bytes: in its frame, or in the connection's shared region.
#[derive(Debug)]
pub(crate) enum Payload {
    Inline(Bytes),
    Shared { place: Place, len: u32 },
}

impl Payload {
    /// How many bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Payload::Inline(b) => b.len(),
            Payload::Shared { len, .. } => *len as usize,
        }
    }
}

/// A same-host connection's state: the descriptor that came with its first bytes, until the
/// region is attached.
#[derive(Debug, Default)]
pub(crate) struct LocalLink {
    fd: Option<OwnedFd>,
    region: Option<Arc<PeerRegion>>,
}

fn fs_error(errno: Errno, message: impl Into<String>) -> FsError {
    FsError {
        errno: errno.raw_os_error(),
        message: message.into(),
    }
}

/// The server's identity on this node: its process, TCP port, and which server of the process
/// it is (several may run in one process, as in tests).
pub(crate) fn server_id(shared: &Arc<Shared>, port: u16) -> String {
    format!(
        "iosets-{}-{port}-{:x}",
        std::process::id(),
        Arc::as_ptr(shared) as usize
    )
}

/// The same-host socket as clients are told it: a path, or `@name` for an abstract socket.
/// `None` when the transport is off.
fn socket_name(shared: &Arc<Shared>, port: u16) -> Option<String> {
    if !shared.config.local {
        return None;
    }
    Some(match &shared.config.local_socket {
        Some(p) => p.display().to_string(),
        None => format!("@{}", server_id(shared, port)),
    })
}

/// Answers [`Request::LocalTransport`].
pub(crate) fn offer(shared: &Arc<Shared>, link: &Link) -> Result<Reply, FsError> {
    let socket = socket_name(shared, link.port)
        .ok_or_else(|| fs_error(Errno::NOTSUP, "this server offers no same-host transport"))?;
    Ok(Reply::LocalTransport {
        socket,
        id: server_id(shared, link.port),
        pid: std::process::id(),
    })
}

/// Answers [`Request::AttachRegion`]: maps the descriptor that came with the connection's first
/// bytes.
pub(crate) fn attach(shared: &Arc<Shared>, link: &mut Link, len: u64) -> Result<Reply, FsError> {
    let port = link.port;
    let local = link.local.as_mut().ok_or_else(|| {
        fs_error(
            Errno::PROTO,
            "a region is attached on the server's same-host socket only",
        )
    })?;
    if local.region.is_some() {
        return Err(fs_error(
            Errno::BUSY,
            "a region is already attached to this connection",
        ));
    }
    let fd = local.fd.take().ok_or_else(|| {
        fs_error(
            Errno::INVAL,
            "no descriptor came with the connection's first frame",
        )
    })?;
    let max = shared.config.local_region_max_mib << 20;
    let region = PeerRegion::attach(fd, len, max).map_err(|e| FsError {
        errno: e.errno(),
        message: e.to_string(),
    })?;
    local.region = Some(Arc::new(region));
    Ok(Reply::Attached {
        id: server_id(shared, port),
    })
}

/// The place of a shared read or write: `len` bytes at `at` of the connection's region.
pub(crate) fn place(link: &Link, at: u64, len: u32) -> Result<Place, FsError> {
    let region = link
        .local
        .as_ref()
        .and_then(|l| l.region.clone())
        .ok_or_else(|| {
            fs_error(
                Errno::PROTO,
                "no shared region is attached to this connection",
            )
        })?;
    region.check(at, u64::from(len)).map_err(|e| FsError {
        errno: e.errno(),
        message: e.to_string(),
    })?;
    Ok(Place { region, at })
}

/// Starts the same-host listener when the configuration asks for it, beside the TCP listener
/// `tcp`. Its connections are served by a thread of their own running a single-threaded
/// runtime: a request and its answer then cost one wake-up of that thread each, with no work
/// stealing between runtime threads. The thread is one task of `conns` (the server's connection
/// set): a graceful stop waits for it, and dropping that task stops it. A socket that cannot be
/// bound is logged and the server goes on without it: its clients stay on TCP.
pub(crate) fn spawn(
    shared: &Arc<Shared>,
    tcp: &TcpListener,
    conns: &mut JoinSet<()>,
    stop: &watch::Receiver<bool>,
) {
    let Ok(port) = tcp.local_addr().map(|a| a.port()) else {
        return;
    };
    let Some(name) = socket_name(shared, port) else {
        return;
    };
    let listener = match bind(&name) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(socket = %name, error = %e, "no same-host transport");
            return;
        }
    };
    let path = (!name.starts_with('@')).then(|| PathBuf::from(&name));
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    let (keep, dropped) = tokio::sync::oneshot::channel::<()>();
    let (s, stop) = (shared.clone(), stop.clone());
    let thread = std::thread::Builder::new()
        .name("iosets-local".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            match rt {
                Ok(rt) => rt.block_on(async move {
                    tokio::select! {
                        _ = accept(s, listener, port, path, stop) => {}
                        // The server gave up waiting: drop every connection.
                        _ = dropped => {}
                    }
                }),
                Err(e) => tracing::warn!(error = %e, "no same-host transport"),
            }
            let _ = done.send(());
        });
    match thread {
        Ok(_) => {
            tracing::info!(socket = %name, "same-host transport");
            conns.spawn(async move {
                let _keep = keep;
                let _ = finished.await;
            });
        }
        Err(e) => tracing::warn!(error = %e, "no same-host transport"),
    }
}

/// Binds the socket. A path left by a server that is gone (nothing accepts on it) is replaced;
/// one another server listens on is refused.
fn bind(name: &str) -> std::io::Result<StdListener> {
    let listener = match name.strip_prefix('@') {
        Some(abs) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(abs.as_bytes())?;
            StdListener::bind_addr(&addr)?
        }
        None => match StdListener::bind(name) {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                if std::os::unix::net::UnixStream::connect(name).is_ok() {
                    return Err(e);
                }
                std::fs::remove_file(name)?;
                StdListener::bind(name)?
            }
            r => r?,
        },
    };
    listener.set_nonblocking(true)?;
    Ok(listener)
}

async fn accept(
    shared: Arc<Shared>,
    listener: StdListener,
    port: u16,
    path: Option<PathBuf>,
    mut stop: watch::Receiver<bool>,
) {
    let listener = match UnixListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "no same-host transport");
            return;
        }
    };
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let Some(reg) = crate::admit(&shared, None) else {
                        continue;
                    };
                    let s = shared.clone();
                    let rx = stop.clone();
                    s.counters.connection_opened();
                    conns.spawn(async move {
                        serve(s.clone(), stream, port, reg, rx, Via::Socket).await;
                        s.counters.connection_closed();
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "same-host accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    if let Some(p) = path {
        let _ = std::fs::remove_file(p);
    }
    // Requests already read are answered, as on TCP.
    while conns.join_next().await.is_some() {}
}

/// How a same-host connection came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// Through the same-host socket, which any process of the node can connect to: its peer
    /// proves the cluster secret, or (without one) must be root or the server's own user
    /// (`SO_PEERCRED`), unless the server trusts its host (`insecure_loopback`).
    Socket,
    /// Through [`crate::ServerHandle::connect_in_process`]: a socket pair made inside this
    /// process, that no other process can reach; served as it is.
    InProcess,
}

/// Whether a same-host socket peer of uid `uid` may be served without a proof: root, or the
/// server's own user (who could read any secret the server holds anyway).
pub(crate) fn trusted_local_user(uid: u32) -> bool {
    uid == 0 || uid == rustix::process::geteuid().as_raw()
}

/// Serves one same-host connection: its first bytes are read with the descriptor that may come
/// with them, then it is a connection like any other.
pub(crate) async fn serve(
    shared: Arc<Shared>,
    mut stream: UnixStream,
    port: u16,
    reg: crate::guard::Registered,
    mut stop: watch::Receiver<bool>,
    via: Via,
) {
    let cred = stream.peer_cred().ok();
    let (mut rd, mut wr) = stream.split();
    if via == Via::Socket {
        if shared.config.auth.is_some() {
            // With a cluster secret, a same-host client proves it too, before its region comes.
            let passed = tokio::select! {
                biased;
                _ = stop.changed() => return,
                _ = reg.entry.evict.notified() => return,
                h = super::authenticate(&shared, &mut rd, &mut wr, None) => h,
            };
            if passed != super::Handshake::Passed {
                return;
            }
        } else if !shared.config.insecure_loopback
            && !cred.is_some_and(|c| trusted_local_user(c.uid()))
        {
            let who = cred.map_or_else(
                || "an unknown user".to_string(),
                |c| format!("uid {} (pid {})", c.uid(), c.pid().unwrap_or(0)),
            );
            let message = format!(
                "refused a same-host client of {who}: without a cluster secret this server \
                 serves root and its own user only on its socket"
            );
            super::refuse_unproven(
                &shared,
                &mut rd,
                &mut wr,
                None,
                Refusal::LocalUser,
                &message,
            )
            .await;
            return;
        }
    }
    let mut first = vec![0u8; 4096];
    let silent = Duration::from_secs_f64(shared.config.idle_timeout_s);
    let got = tokio::select! {
        biased;
        _ = stop.changed() => return,
        _ = reg.entry.evict.notified() => return,
        _ = tokio::time::sleep(silent) => return,
        r = stream.async_io(Interest::READABLE, || recv_with_fd(stream.as_fd(), &mut first)) => r,
    };
    let (n, fd) = match got {
        Ok((0, _)) | Err(_) => return,
        Ok(got) => got,
    };
    first.truncate(n);
    let (rd, wr) = stream.into_split();
    let rd = std::io::Cursor::new(first).chain(rd);
    let link = Link {
        port,
        local: Some(LocalLink { fd, region: None }),
        // A same-host client is on this node.
        peer: Some(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)),
        phases: super::OpenPhases::default(),
    };
    super::serve_frames(shared, rd, wr, None, link, reg, stop).await;
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::os::unix::net::UnixStream as StdUnix;

    use iosets_proto::local::{send_with_fd, Region, PAGE};
    use iosets_proto::{decode, encode, frame_len, Frame, Header, OpCode, Request, Response};
    use iosets_types::JobId;

    use super::*;
    use crate::test_support::temp_dir;
    use crate::{Server, ServerConfig, ServerHandle};
    use tempfile::TempDir;

    fn server(scratch: &TempDir, tune: impl FnOnce(&mut ServerConfig)) -> ServerHandle {
        let mut cfg = ServerConfig::new(scratch.path()).with_insecure_loopback();
        cfg.workers = 1;
        tune(&mut cfg);
        let s = Server::start(cfg).unwrap();
        std::fs::write(scratch.path().join("f"), vec![0u8; 3 * PAGE]).unwrap();
        s
    }

    fn frame(tag: u64, req: Request) -> Vec<u8> {
        let h = Header::new(tag, JobId(1));
        encode(&Frame::Request(h, req)).to_vec()
    }

    fn answer(s: &mut impl Read) -> (u64, OpCode, Response) {
        let mut prefix = [0u8; 4];
        s.read_exact(&mut prefix).unwrap();
        let mut buf = vec![0u8; frame_len(prefix, u32::MAX).unwrap()];
        s.read_exact(&mut buf).unwrap();
        match decode(buf.into()).unwrap() {
            Frame::Response(h, op, r) => (h.tag, op, r),
            other => panic!("not a response: {other:?}"),
        }
    }

    fn call<S: Read + Write>(s: &mut S, tag: u64, req: Request) -> Response {
        s.write_all(&frame(tag, req)).unwrap();
        let (t, _, r) = answer(s);
        assert_eq!(t, tag);
        r
    }

    fn errno(r: &Response) -> i32 {
        match r {
            Response::Err { errno, .. } => *errno,
            ok => panic!("expected an error, got {ok:?}"),
        }
    }

    /// The socket the server offers, asked over TCP.
    fn offered(h: &ServerHandle) -> String {
        let mut tcp = TcpStream::connect(h.addr()).unwrap();
        match call(&mut tcp, 1, Request::LocalTransport) {
            Response::Ok(Reply::LocalTransport { socket, id, pid }) => {
                assert_eq!(pid, std::process::id());
                assert!(
                    socket.starts_with("@iosets-") && socket[1..] == id,
                    "{socket}"
                );
                socket
            }
            other => panic!("no offer: {other:?}"),
        }
    }

    fn connect(socket: &str) -> StdUnix {
        use std::os::linux::net::SocketAddrExt;
        let addr =
            std::os::unix::net::SocketAddr::from_abstract_name(&socket.as_bytes()[1..]).unwrap();
        StdUnix::connect_addr(&addr).unwrap()
    }

    /// A same-host connection with `region` attached (its first frame carries the descriptor).
    fn attached(socket: &str, region: &Region) -> (StdUnix, Response) {
        let mut s = connect(socket);
        let f = frame(
            1,
            Request::AttachRegion {
                len: region.len() as u64,
            },
        );
        let n = send_with_fd(s.as_fd(), &f, region.fd()).unwrap();
        s.write_all(&f[n..]).unwrap();
        let (_, op, r) = answer(&mut s);
        assert_eq!(op, OpCode::AttachRegion);
        (s, r)
    }

    fn shared_write(at: u64, len: u32) -> Request {
        Request::WriteShared {
            path: "f".into(),
            offset: 0,
            len,
            at,
        }
    }

    #[test]
    fn shared_requests_without_a_region_are_refused() {
        let scratch = temp_dir("noregion");
        let h = server(&scratch, |_| {});
        let eproto = Errno::PROTO.raw_os_error();
        // Over TCP: no region, and none can be attached.
        let mut tcp = TcpStream::connect(h.addr()).unwrap();
        assert_eq!(errno(&call(&mut tcp, 1, shared_write(0, 10))), eproto);
        let attach = Request::AttachRegion { len: 4096 };
        assert_eq!(errno(&call(&mut tcp, 2, attach.clone())), eproto);
        // On the same-host socket before any region, and an attach without a descriptor.
        let mut s = connect(&offered(&h));
        assert_eq!(errno(&call(&mut s, 3, shared_write(0, 10))), eproto);
        let read = Request::ReadShared {
            path: "f".into(),
            offset: 0,
            len: 10,
            at: 0,
        };
        assert_eq!(errno(&call(&mut s, 4, read)), eproto);
        assert_eq!(errno(&call(&mut s, 5, attach)), Errno::INVAL.raw_os_error());
        // The connection still serves.
        assert!(matches!(
            call(&mut s, 6, Request::Lookup { path: "f".into() }),
            Response::Ok(Reply::Attr(_))
        ));
    }

    #[test]
    fn out_of_range_and_overflowing_ranges_are_refused() {
        let scratch = temp_dir("ranges");
        let h = server(&scratch, |_| {});
        let region = Region::create(2 * PAGE).unwrap();
        let (mut s, r) = attached(&offered(&h), &region);
        assert!(matches!(r, Response::Ok(Reply::Attached { .. })), "{r:?}");
        let efault = Errno::FAULT.raw_os_error();
        let p = 2 * PAGE as u64;
        let beyond = 3 * PAGE as u32;
        for (tag, (at, len)) in [(p, 1), (p - 1, 2), (u64::MAX - 10, 100), (0, beyond)]
            .into_iter()
            .enumerate()
        {
            let r = call(&mut s, tag as u64 + 10, shared_write(at, len));
            assert_eq!(errno(&r), efault, "write at {at} len {len}");
        }
        let read = Request::ReadShared {
            path: "f".into(),
            offset: 0,
            len: 2 * PAGE as u32,
            at: PAGE as u64,
        };
        assert_eq!(errno(&call(&mut s, 20, read)), efault);
        // More than a frame's worth is refused whatever the region.
        let r = call(&mut s, 19, shared_write(0, u32::MAX));
        assert_eq!(errno(&r), Errno::MSGSIZE.raw_os_error());
        // A second region is refused; the first stays usable.
        let again = Request::AttachRegion { len: p };
        assert_eq!(errno(&call(&mut s, 21, again)), Errno::BUSY.raw_os_error());
        let mut slot = region.alloc(PAGE).unwrap();
        slot.fill(0x42);
        let r = call(&mut s, 22, shared_write(slot.offset(), PAGE as u32));
        assert_eq!(r, Response::Ok(Reply::Written(PAGE as u32)));
        let on_disk = std::fs::read(scratch.path().join("f")).unwrap();
        assert!(on_disk[..PAGE].iter().all(|&b| b == 0x42));
        assert!(on_disk[PAGE..].iter().all(|&b| b == 0));
        // A read into the region, short at the end of the file.
        drop(slot);
        let back = region.alloc(2 * PAGE).unwrap();
        let read = Request::ReadShared {
            path: "f".into(),
            offset: 2 * PAGE as u64,
            len: 2 * PAGE as u32,
            at: back.offset(),
        };
        assert_eq!(
            call(&mut s, 23, read),
            Response::Ok(Reply::Placed(PAGE as u32))
        );
    }

    #[test]
    fn unusable_regions_are_refused() {
        let scratch = temp_dir("badregion");
        let h = server(&scratch, |c| c.local_region_max_mib = 1);
        let socket = offered(&h);
        let einval = Errno::INVAL.raw_os_error();
        // Larger than the server accepts.
        let big = Region::create(2 << 20).unwrap();
        assert_eq!(errno(&attached(&socket, &big).1), einval);
        // Not sealed against shrinking.
        let plain = rustix::fs::memfd_create("plain", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&plain, PAGE as u64).unwrap();
        let mut s = connect(&socket);
        let f = frame(1, Request::AttachRegion { len: PAGE as u64 });
        let n = send_with_fd(s.as_fd(), &f, plain.as_fd()).unwrap();
        s.write_all(&f[n..]).unwrap();
        let (_, _, r) = answer(&mut s);
        assert_eq!(errno(&r), einval);
        // A length that is not the descriptor's.
        let small = Region::create(PAGE).unwrap();
        let mut s = connect(&socket);
        let f = frame(
            1,
            Request::AttachRegion {
                len: 2 * PAGE as u64,
            },
        );
        let n = send_with_fd(s.as_fd(), &f, small.fd()).unwrap();
        s.write_all(&f[n..]).unwrap();
        let (_, _, r) = answer(&mut s);
        assert_eq!(errno(&r), einval);
    }

    #[test]
    fn no_offer_when_the_transport_is_off() {
        let scratch = temp_dir("off");
        let h = server(&scratch, |c| c.local = false);
        let mut tcp = TcpStream::connect(h.addr()).unwrap();
        let r = call(&mut tcp, 1, Request::LocalTransport);
        assert_eq!(errno(&r), Errno::NOTSUP.raw_os_error());
    }
}
