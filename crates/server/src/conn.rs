//! One client connection: frames in, requests out to the scheduler (every file operation, data
//! and metadata alike) or answered beside it (the control plane: control requests on a blocking
//! task, phase ends and the same-host transport's set-up at once), responses out in completion
//! order. A connection is TCP, or the same-host Unix socket of a client on this node ([`local`]);
//! the frames are the same.

pub(crate) mod local;

use iosets_types::FileId;
use std::sync::Arc;

use iosets_proto::{
    decode, encode, frame_len, Bytes, Encoded, Frame, Header, OpCode, Reply, Request, Response,
};
use iosets_types::hash::fnv1a64;
use iosets_types::{JobId, Nanos, Op};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use crate::control;
use crate::root::{check_path, FsError};
use crate::state::{Outgoing, Pending, ScheduledOp, Shared};
use crate::worker::meta::MetaOp;
use local::{LocalLink, Payload};

use rustix::io::Errno;

/// The writer's buffer: small frames gather in it; larger data bypasses it.
const WRITE_BUFFER: usize = 64 * 1024;

const EPROTO: i32 = Errno::PROTO.raw_os_error();
const EBADMSG: i32 = Errno::BADMSG.raw_os_error();
const EMSGSIZE: i32 = Errno::MSGSIZE.raw_os_error();
const ESHUTDOWN: i32 = Errno::SHUTDOWN.raw_os_error();

/// What a connection is, for the requests that depend on it.
#[derive(Debug)]
pub(crate) struct Link {
    /// The TCP port the server listens on (part of its identity on this node).
    pub(crate) port: u16,
    /// On the same-host socket: its descriptor and shared region.
    pub(crate) local: Option<LocalLink>,
    /// The client's address, for quota rules matching `client=` (a same-host client reads as
    /// loopback).
    pub(crate) peer: Option<std::net::IpAddr>,
}

/// Serves one TCP connection until the peer closes it, it sends an unreadable frame, or the
/// server stops (then requests already read are still answered).
pub(crate) async fn serve(
    shared: Arc<Shared>,
    mut stream: TcpStream,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let port = stream.local_addr().map_or(0, |a| a.port());
    let mut prefix = [0u8; 4];
    let first = tokio::select! {
        biased;
        _ = stop.changed() => return,
        r = stream.read_exact(&mut prefix) => r,
    };
    if first.is_err() {
        return;
    }
    if &prefix == b"GET " {
        crate::http::serve(&shared, stream).await;
        return;
    }
    let peer = stream.peer_addr().ok().map(|a| a.ip());
    let (rd, wr) = stream.into_split();
    let link = Link {
        port,
        local: None,
        peer,
    };
    serve_frames(shared, rd, wr, Some(prefix), link, stop).await;
}

/// Serves the frames of one connection (`first`: a length prefix already read).
pub(crate) async fn serve_frames<R, W>(
    shared: Arc<Shared>,
    rd: R,
    wr: W,
    first: Option<[u8; 4]>,
    mut link: Link,
    mut stop: watch::Receiver<bool>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut rd = BufReader::with_capacity(64 * 1024, rd);
    let (tx, mut rx) = mpsc::unbounded_channel::<Outgoing>();
    let writer = tokio::spawn(async move {
        let mut wr = BufWriter::with_capacity(WRITE_BUFFER, wr);
        while let Some((msg, permit)) = rx.recv().await {
            if write_one(&mut wr, &msg).await.is_err() {
                return;
            }
            drop(permit);
            // Gather what is already waiting before flushing.
            while let Ok((msg, permit)) = rx.try_recv() {
                if write_one(&mut wr, &msg).await.is_err() {
                    return;
                }
                drop(permit);
            }
            if wr.flush().await.is_err() {
                return;
            }
        }
        let _ = wr.shutdown().await;
    });

    let inflight = Arc::new(Semaphore::new(shared.config.max_inflight_per_conn));
    let mut have_prefix = first.is_some();
    let mut prefix = first.unwrap_or_default();
    loop {
        // Backpressure: wait for an answer to go out before reading more than the limit.
        let permit = tokio::select! {
            biased;
            _ = stop.changed() => break,
            p = inflight.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        if !have_prefix {
            let read = tokio::select! {
                biased;
                _ = stop.changed() => break,
                r = rd.read_exact(&mut prefix) => r,
            };
            if read.is_err() {
                break; // closed by the peer (or reset)
            }
        }
        have_prefix = false;
        shared.counters.frame();
        let len = match frame_len(prefix, shared.config.max_frame) {
            Ok(len) => len,
            Err(e) => {
                // The stream cannot be resynchronised after a bad length: answer and close.
                shared.counters.bad_frame();
                let _ = tx.send((
                    error_frame(no_header(), OpCode::Lookup, EMSGSIZE, e.to_string()),
                    None,
                ));
                break;
            }
        };
        let buf = match read_body(&mut rd, len, &mut stop).await {
            Some(b) => b,
            None => break,
        };
        match decode(buf.clone()) {
            Ok(Frame::Request(header, req)) => handle(&shared, header, req, &tx, permit, &mut link),
            Ok(Frame::Response(header, op, _)) => {
                shared.counters.bad_frame();
                let _ = tx.send((
                    error_frame(
                        header,
                        op,
                        EPROTO,
                        "a server accepts requests, not responses".into(),
                    ),
                    None,
                ));
            }
            Err(e) => {
                // The frame was read whole, so the stream is still in step: answer, go on.
                shared.counters.bad_frame();
                let mut header = no_header();
                if buf.len() >= 12 {
                    header.tag = u64::from_le_bytes(buf[4..12].try_into().unwrap_or([0; 8]));
                }
                let _ = tx.send((
                    error_frame(header, OpCode::Lookup, EBADMSG, e.to_string()),
                    None,
                ));
            }
        }
    }
    drop(tx);
    let _ = writer.await;
}

/// Writes one frame. Bulk data larger than the buffer goes out with its head in one `writev`
/// (after what is buffered), straight from where it lies: no copy into the buffer, one system
/// call instead of two.
async fn write_one<W: AsyncWrite + Unpin>(
    w: &mut BufWriter<W>,
    frame: &Encoded,
) -> std::io::Result<()> {
    if frame.data.len() < WRITE_BUFFER {
        w.write_all(&frame.head).await?;
        if !frame.data.is_empty() {
            w.write_all(&frame.data).await?;
        }
        return Ok(());
    }
    w.flush().await?;
    let mut parts = [
        std::io::IoSlice::new(&frame.head),
        std::io::IoSlice::new(&frame.data),
    ];
    let mut parts = &mut parts[..];
    while !parts.is_empty() {
        let n = w.get_mut().write_vectored(parts).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        std::io::IoSlice::advance_slices(&mut parts, n);
    }
    Ok(())
}

/// Reads exactly `len` bytes without zeroing a buffer first. `None` if the peer closed the
/// connection mid-frame or the server is stopping.
async fn read_body<R: AsyncRead + Unpin>(
    rd: &mut R,
    len: usize,
    stop: &mut watch::Receiver<bool>,
) -> Option<Bytes> {
    let mut buf = bytes::BytesMut::with_capacity(len);
    while buf.len() < len {
        let want = (len - buf.len()) as u64;
        let mut limited = (&mut *rd).take(want);
        let n = tokio::select! {
            biased;
            _ = stop.changed() => return None,
            r = limited.read_buf(&mut buf) => r.ok()?,
        };
        if n == 0 {
            return None;
        }
    }
    Some(buf.freeze())
}

fn no_header() -> Header {
    Header {
        phase: None,
        tag: 0,
        job: JobId(0),
        priority: None,
        creds: None,
        elsewhere: None,
    }
}

fn error_frame(header: Header, op: OpCode, errno: i32, message: String) -> Encoded {
    encode(&Frame::Response(
        header,
        op,
        Response::Err { errno, message },
    ))
}

/// Sends the answer to a request (counting errors), with the connection's allowance.
pub(crate) fn reply(
    tx: &mpsc::UnboundedSender<Outgoing>,
    permit: Option<OwnedSemaphorePermit>,
    shared: &Shared,
    h: Header,
    op: OpCode,
    r: Result<Reply, FsError>,
) {
    let resp = match r {
        Ok(reply) => Response::Ok(reply),
        Err(e) => {
            shared.counters.error();
            Response::Err {
                errno: e.errno,
                message: e.message,
            }
        }
    };
    let _ = tx.send((encode(&Frame::Response(h, op, resp)), permit));
}

/// Routes one request: the control plane is answered beside the scheduler; every file operation
/// (data or metadata) is checked, then submitted to the scheduler (refused with `ESHUTDOWN` once
/// the server is stopping).
fn handle(
    shared: &Arc<Shared>,
    header: Header,
    req: Request,
    tx: &mpsc::UnboundedSender<Outgoing>,
    permit: OwnedSemaphorePermit,
    link: &mut Link,
) {
    let op = req.op();
    // One request moves at most a frame's worth of data, whichever way it travels.
    let too_large = |len: u32| {
        (len > shared.config.max_frame - 64).then(|| FsError {
            errno: EMSGSIZE,
            message: format!("{} of {len} bytes exceeds the frame limit", op.as_str()),
        })
    };
    let scheduled = match req {
        Request::Read { path, offset, len } => {
            if let Some(e) = too_large(len) {
                return reply(tx, Some(permit), shared, header, op, Err(e));
            }
            check_path(&path).map(|path| ScheduledOp::Read {
                path,
                offset,
                len,
                into: None,
            })
        }
        Request::Write { path, offset, data } => check_path(&path).map(|path| ScheduledOp::Write {
            path,
            offset,
            data: Payload::Inline(data),
        }),
        Request::ReadShared {
            path,
            offset,
            len,
            at,
        } => too_large(len)
            .map_or(Ok(()), Err)
            .and_then(|()| local::place(link, at, len))
            .and_then(|place| {
                check_path(&path).map(|path| ScheduledOp::Read {
                    path,
                    offset,
                    len,
                    into: Some(place),
                })
            }),
        Request::WriteShared {
            path,
            offset,
            len,
            at,
        } => too_large(len)
            .map_or(Ok(()), Err)
            .and_then(|()| local::place(link, at, len))
            .and_then(|place| {
                check_path(&path).map(|path| ScheduledOp::Write {
                    path,
                    offset,
                    data: Payload::Shared { place, len },
                })
            }),
        Request::Fsync { path } => check_path(&path).map(|path| ScheduledOp::Fsync { path }),
        Request::LocalTransport => {
            let r = local::offer(shared, link);
            return reply(tx, Some(permit), shared, header, op, r);
        }
        Request::AttachRegion { len } => {
            let r = local::attach(shared, link, len);
            return reply(tx, Some(permit), shared, header, op, r);
        }
        Request::PhaseEnd => {
            if let Some(unix) = header.phase {
                let phase = Nanos(unix.saturating_sub(shared.clock_zero_unix_ns));
                shared.sched.phase_end(JobId(header.job.0), phase);
            }
            return reply(tx, Some(permit), shared, header, op, Ok(Reply::Done));
        }
        Request::Control { token, op: ctl } => {
            let shared = shared.clone();
            let tx = tx.clone();
            tokio::task::spawn_blocking(move || {
                let r = control::handle(&shared, &token, ctl);
                reply(&tx, Some(permit), &shared, header, op, r);
            });
            return;
        }
        // Every other request is a metadata operation: scheduled like data (DESIGN: never a
        // side path), so that a create storm is ordered and shared by the policy.
        meta => MetaOp::checked(meta).map(ScheduledOp::Meta),
    };
    // A bad path or size is answered at once, never scheduled.
    let scheduled = match scheduled {
        Ok(s) => s,
        Err(e) => return reply(tx, Some(permit), shared, header, op, Err(e)),
    };
    let (file, offset, len, kind) = match &scheduled {
        ScheduledOp::Read {
            path, offset, len, ..
        } => (fnv1a64(path.as_bytes()), *offset, u64::from(*len), Op::Read),
        ScheduledOp::Write { path, offset, data } => (
            fnv1a64(path.as_bytes()),
            *offset,
            data.len() as u64,
            Op::Write,
        ),
        ScheduledOp::Fsync { path } => (fnv1a64(path.as_bytes()), 0, 0, Op::Other),
        // Never merged (Op::Other); costs the policy `meta_cost_bytes`, like a small request.
        ScheduledOp::Meta(m) => (
            fnv1a64(m.target().as_bytes()),
            0,
            shared.config.meta_cost_bytes,
            Op::Other,
        ),
    };
    // The hint travels with the request: the policy applies it, the runtime's job book records it.
    // A phase stamp is the client's wall clock; the policy compares it in the scheduler's time
    // base (a stamp from before the server started reads as its start).
    let phase = header
        .phase
        .map(|unix| Nanos(unix.saturating_sub(shared.clock_zero_unix_ns)));
    let mut request = iosets_types::Request::builder(JobId(header.job.0), kind)
        .file(FileId(file))
        .range(offset, len)
        .phase(phase)
        .build();
    request.priority = header.priority;
    let pending = Pending {
        header,
        op: scheduled,
        reply: tx.clone(),
        permit,
    };
    // Quota rules may match on who sent it.
    let origin = iosets_runtime::Origin {
        uid: header.creds.map(|c| c.uid),
        gid: header.creds.map(|c| c.gid),
        addr: link.peer,
        elsewhere_ops: header.elsewhere.map_or(0, |e| u64::from(e.ops)),
        elsewhere_bytes: header.elsewhere.map_or(0, |e| e.bytes),
    };
    if let Err(refused) = shared.sched.submit_from(request, &origin, pending) {
        let msg = "the server is shutting down".to_string();
        drop(refused);
        reply(
            tx,
            None,
            shared,
            header,
            op,
            Err(FsError {
                errno: ESHUTDOWN,
                message: msg,
            }),
        );
    }
}
