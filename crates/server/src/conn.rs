//! One client connection: frames in, requests out to the scheduler (every file operation, data
//! and metadata alike) or answered beside it (the control plane: control requests on a blocking
//! task, phase ends and the same-host transport's set-up at once), responses out in completion
//! order. A connection is TCP, or the same-host Unix socket of a client on this node ([`local`]);
//! the frames are the same.
//!
//! # Bytes in flight
//! What a request holds from its frame's first byte until its answer is written is counted
//! against two budgets ([`ByteBudget`]): the connection's (`max_inflight_bytes_per_conn`,
//! charged on the frame's announced length: a connection waits only for its own requests) and
//! the server's (`max_inflight_bytes`), which every client shares. The server's is never
//! charged on a length's word: a large frame takes it a step (64 KiB) ahead of its bytes as
//! they arrive, the oldest frame first, the others a share each, and never the eighth of it
//! kept for requests read whole (the rules are [`ByteBudget`]'s). So 32 connections that
//! announce 64 MiB frames and send nothing hold 2 MiB, not the server's 2 GiB, and the small
//! requests of other clients are answered meanwhile. A frame that holds more than its share
//! (or is the oldest) while another waits for room, and receives nothing for a second, is
//! closed; otherwise a frame has the frame timeout to arrive, not counting the time it waited
//! for room while holding no more than its share. A small frame (64 KiB at most) is read
//! before it is charged, and charged once decoded (control never is), so control gets
//! through a server whose budget is full. A read's answer is charged once its request is
//! decoded.

pub(crate) mod answers;
pub(crate) mod local;

use iosets_types::FileId;
use std::sync::Arc;

use iosets_proto::io::WRITE_BUFFER;
use iosets_proto::{
    decode, encode, frame_len, Bytes, Encoded, Frame, Header, OpCode, Reply, Request, Response,
};
use iosets_types::hash::fnv1a64;
use iosets_types::{JobId, Op};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use std::time::Duration;

use crate::control;
use crate::guard::{ByteBudget, ConnEntry, Refusal, Registered};
use crate::root::{check_path, FsError};
use crate::state::{Allowance, Pending, ScheduledOp, Shared};
use crate::worker::meta::MetaOp;
use answers::Answers;
use local::{LocalLink, Payload};

use rustix::io::Errno;

/// A frame's buffer starts this large and doubles as its bytes arrive.
const READ_CHUNK: usize = 64 * 1024;
/// Frames up to this long are read before they are charged to the server's byte budget (one
/// at a time per connection), so control gets through a server whose budget is full.
const SMALL_FRAME: usize = 64 * 1024;

const EPROTO: i32 = Errno::PROTO.raw_os_error();
const EBADMSG: i32 = Errno::BADMSG.raw_os_error();
const EMSGSIZE: i32 = Errno::MSGSIZE.raw_os_error();
const ESHUTDOWN: i32 = Errno::SHUTDOWN.raw_os_error();
const EACCES: i32 = Errno::ACCESS.raw_os_error();
const EINVAL: i32 = Errno::INVAL.raw_os_error();

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
    /// The phases this connection's requests opened and it has not ended.
    pub(crate) phases: OpenPhases,
}

/// The open phases of one connection: each job's latest phase stamp its requests carried,
/// until a `PhaseEnd` of that stamp comes on the connection. When the last connection carrying
/// a phase closes, the phase is ended at once (`Policy::phase_gone`: `iosets` passes the set
/// on): a client that is gone sends no more of it, and its `PhaseEnd` may never come (a
/// process that exits right after its last write; the client's end is sent a moment after the
/// job goes quiet). Without this, the job's set stayed held for `open_hold_ms`: 14 jobs of one
/// set waited 0.5 s three times in one 1 GiB run of the loopback bench (16 jobs, `PART=tree`),
/// at 200–1,600 MiB/s against 8,000. A phase also carried by another open connection (the
/// same-host socket that replaces a client's TCP connection mid-phase: the client stamps its
/// attach and waits for the answer before it drops the TCP connection) is not ended
/// ([`Shared::phase_conns`]). Counted in `iosets_phases_gone_total`.
#[derive(Debug, Default)]
pub(crate) struct OpenPhases(iosets_types::hash::IdMap<JobId, iosets_types::UnixNanos>);

/// The most jobs' phases a connection remembers (a mount carries every job of its node);
/// past it, phases are not remembered (the open-phase hold bounds them, as before).
const MAX_OPEN_PHASES: usize = 4096;

impl OpenPhases {
    /// `job`'s request carried `stamp` (a `PhaseEnd` of it if `end`).
    fn saw(&mut self, shared: &Shared, job: JobId, stamp: iosets_types::UnixNanos, end: bool) {
        let held = self.0.get(&job).copied();
        if end {
            if held == Some(stamp) {
                self.0.remove(&job);
                release(shared, job, stamp);
            }
            return;
        }
        if held == Some(stamp) || (held.is_none() && self.0.len() >= MAX_OPEN_PHASES) {
            return;
        }
        // A new phase of the job on this connection: the earlier one is its client's past.
        if let Some(old) = self.0.insert(job, stamp) {
            release(shared, job, old);
        }
        *shared.phase_conns.lock().entry((job, stamp)).or_default() += 1;
    }

    /// The connection is closing: every phase it carried that no other open connection
    /// carries is ended.
    fn end_all(&mut self, shared: &Shared) {
        for (job, stamp) in self.0.drain() {
            if release(shared, job, stamp) {
                shared.counters.phase_gone();
                shared.sched.phase_gone(job, stamp.since(shared.clock_zero));
            }
        }
    }
}

/// One connection fewer carries `job`'s phase `stamp`; true if it was the last.
fn release(shared: &Shared, job: JobId, stamp: iosets_types::UnixNanos) -> bool {
    let mut conns = shared.phase_conns.lock();
    match conns.get_mut(&(job, stamp)) {
        Some(n) if *n > 1 => {
            *n -= 1;
            false
        }
        Some(_) => {
            conns.remove(&(job, stamp));
            true
        }
        None => true,
    }
}

/// How a connection's handshake ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Handshake {
    /// The peer proved the cluster secret (or the server has none): serve its frames.
    Passed,
    /// The peer sent an HTTP request (`GET `) instead.
    Http,
    /// Refused (logged and counted); close.
    Refused,
}

/// Serves one TCP connection until the peer closes it, it sends an unreadable frame, it stays
/// silent too long, is evicted for a new connection at the cap, or the server stops (then
/// requests already read are still answered).
pub(crate) async fn serve(
    shared: Arc<Shared>,
    mut stream: TcpStream,
    reg: Registered,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let port = stream.local_addr().map_or(0, |a| a.port());
    let peer = stream.peer_addr().ok().map(|a| a.ip().to_canonical());
    if shared.config.auth.is_some() && speaks_http_first(&stream).await {
        crate::http::misdirected(&shared, &mut stream).await;
        return;
    }
    let (mut rd, mut wr) = stream.split();
    let first = if shared.config.auth.is_some() {
        let handshake = tokio::select! {
            biased;
            _ = stop.changed() => return,
            _ = reg.entry.evict.notified() => return,
            h = authenticate(&shared, &mut rd, &mut wr, peer) => h,
        };
        match handshake {
            Handshake::Passed => None,
            Handshake::Http => {
                crate::http::misdirected(&shared, &mut wr).await;
                return;
            }
            Handshake::Refused => return,
        }
    } else if !shared.config.insecure_loopback {
        // Nothing to prove with, and the host is not trusted: a peer on loopback may be any
        // local user, claiming any uid.
        refuse_unproven(
            &shared,
            &mut rd,
            &mut wr,
            peer,
            Refusal::Unauthenticated,
            UNAUTHENTICATED,
        )
        .await;
        return;
    } else {
        // The first prefix tells a frame from an HTTP request that came to the wrong port.
        let mut prefix = [0u8; 4];
        let limit = Duration::from_secs_f64(shared.config.idle_timeout_s);
        let read = tokio::select! {
            biased;
            _ = stop.changed() => return,
            _ = reg.entry.evict.notified() => return,
            r = tokio::time::timeout(limit, rd.read_exact(&mut prefix)) => r,
        };
        match read {
            Err(_) => {
                shared
                    .guard
                    .refuse(Refusal::IdleTimeout, peer, "closing a silent connection");
                return;
            }
            Ok(Err(_)) => return,
            Ok(Ok(_)) => {}
        }
        if &prefix == b"GET " {
            crate::http::misdirected(&shared, &mut wr).await;
            return;
        }
        Some(prefix)
    };
    let (rd, wr) = stream.into_split();
    let link = Link {
        port,
        local: None,
        peer,
        phases: OpenPhases::default(),
    };
    serve_frames(shared, rd, wr, first, link, reg, stop).await;
}

/// The handshake of a server with a cluster secret ([`iosets_proto::auth`]): a challenge goes
/// out, and the first frame back must be its proof; it is answered with the server's proof.
/// Reads exactly the frame's bytes (a same-host client's region follows on the socket). Without
/// a secret there is nothing to prove: passed at once.
/// How long a new connection to a server with a secret is given to speak before the server
/// sends its challenge: an iosets client waits for the challenge, an HTTP client (a Prometheus
/// scrape sent to the data port instead of the admin port) sends its request at once. Only
/// connecting pays it, not requests.
const SPEAKS_FIRST: Duration = Duration::from_millis(20);

/// Whether the peer sends an HTTP request (`GET `, `HEAD`, `POST`) before any challenge: it is
/// then answered 421 with the admin address, as on a server without a secret, instead of
/// receiving a binary challenge it cannot read.
async fn speaks_http_first(stream: &TcpStream) -> bool {
    let mut probe = [0u8; 4];
    let Ok(Ok(n)) = tokio::time::timeout(SPEAKS_FIRST, stream.peek(&mut probe)).await else {
        return false;
    };
    if n == 0 {
        return false;
    }
    // A request line may arrive in pieces: what came must begin one of the methods.
    [&b"GET "[..], b"HEAD", b"POST"]
        .iter()
        .any(|m| m.starts_with(&probe[..n]))
}

pub(crate) async fn authenticate<R, W>(
    shared: &Shared,
    rd: &mut R,
    wr: &mut W,
    peer: Option<std::net::IpAddr>,
) -> Handshake
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let Some(secret) = &shared.config.auth else {
        return Handshake::Passed;
    };
    if shared.guard.blocked(peer) {
        shared.guard.refuse(
            Refusal::Blocked,
            peer,
            "refused without a challenge: too many failed proofs from this address lately",
        );
        return Handshake::Refused;
    }
    let nonce = match iosets_proto::auth::nonce() {
        Ok(n) => n,
        Err(e) => {
            tracing::error!(error = %e, "no randomness for an authentication nonce");
            return Handshake::Refused;
        }
    };
    let limit = Duration::from_secs_f64(shared.config.frame_timeout_s);
    let challenge = encode(&Frame::Response(
        no_header(),
        OpCode::Auth,
        Response::Ok(Reply::Challenge { nonce }),
    ));
    let answer = match exchange(rd, wr, &challenge, limit).await {
        Exchanged::TimedOut => {
            shared.guard.refuse(
                Refusal::FrameTimeout,
                peer,
                "no answer to the authentication challenge in time",
            );
            return Handshake::Refused;
        }
        Exchanged::Gone => return Handshake::Refused,
        Exchanged::Http => return Handshake::Http,
        Exchanged::Frame(frame) => frame.map(|f| *f),
    };
    let (header, op, refusal) = match answer {
        Some(Frame::Request(
            h,
            Request::Auth {
                nonce: theirs,
                proof,
            },
        )) => {
            if secret.check_client(&nonce, &theirs, &proof) {
                let ok = encode(&Frame::Response(
                    h,
                    OpCode::Auth,
                    Response::Ok(Reply::Authenticated {
                        proof: secret.server_proof(&nonce, &theirs),
                    }),
                ));
                let sent = tokio::time::timeout(limit, async {
                    wr.write_all(&ok.head).await?;
                    wr.flush().await
                })
                .await;
                return match sent {
                    Ok(Ok(())) => Handshake::Passed,
                    _ => Handshake::Refused,
                };
            }
            shared.guard.failed(peer);
            (h, OpCode::Auth, Refusal::AuthFailed)
        }
        Some(Frame::Request(h, req)) => (h, req.op(), Refusal::AuthMissing),
        _ => (no_header(), OpCode::Auth, Refusal::AuthMissing),
    };
    let message = if refusal == Refusal::AuthFailed {
        "authentication failed: the client's cluster secret is not this server's"
    } else {
        "this server requires authentication: give the client the cluster's secret file \
         (IOSETS_AUTH_FILE or --auth-file)"
    };
    shared.guard.refuse(refusal, peer, message);
    let refused = error_frame(header, op, EACCES, message.into());
    send_refusal(wr, &refused, limit).await;
    Handshake::Refused
}

/// What came back for a challenge.
enum Exchanged {
    TimedOut,
    /// The peer closed or failed.
    Gone,
    /// An HTTP request (a browser or a scraper on the data port).
    Http,
    /// A frame, or `None` if it was too long or did not decode (not a proof).
    Frame(Option<Box<Frame>>),
}

/// Sends `challenge` and reads the first frame back, all within `limit`.
async fn exchange<R, W>(rd: &mut R, wr: &mut W, challenge: &Encoded, limit: Duration) -> Exchanged
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let exchange = async {
        wr.write_all(&challenge.head).await.ok()?;
        wr.flush().await.ok()?;
        let mut prefix = [0u8; 4];
        rd.read_exact(&mut prefix).await.ok()?;
        if &prefix == b"GET " {
            return Some(Exchanged::Http);
        }
        // The proof is a small frame: anything long is not one (and is not buffered).
        let Ok(len) = frame_len(prefix, AUTH_FRAME_MAX) else {
            return Some(Exchanged::Frame(None));
        };
        let mut body = vec![0u8; len];
        rd.read_exact(&mut body).await.ok()?;
        Some(Exchanged::Frame(
            decode(Bytes::from(body)).ok().map(Box::new),
        ))
    };
    match tokio::time::timeout(limit, exchange).await {
        Err(_) => Exchanged::TimedOut,
        Ok(None) => Exchanged::Gone,
        Ok(Some(x)) => x,
    }
}

/// Writes `refused` to `wr` within `limit`; a peer that does not take it is left to the close.
async fn send_refusal<W: AsyncWrite + Unpin>(wr: &mut W, refused: &Encoded, limit: Duration) {
    let _ = tokio::time::timeout(limit, async {
        wr.write_all(&refused.head).await?;
        wr.write_all(&refused.data).await?;
        wr.flush().await
    })
    .await;
}

/// What a client of a server without a secret that does not trust its host is told.
const UNAUTHENTICATED: &str = "refused: this server serves only clients that prove the cluster \
     secret, and it has none (start it with --auth-file, or without one to make the default \
     secret, or with --insecure-loopback to trust every local user)";

/// Refuses a peer that cannot be served (logged and counted as `kind`): its first frame's tag
/// and operation are read (at most the first [`REFUSED_HEAD`] bytes, within the frame
/// timeout) so that the `EACCES` answer carrying `message` reaches the request that is waiting
/// for it; nothing else is read.
pub(crate) async fn refuse_unproven<R, W>(
    shared: &Shared,
    rd: &mut R,
    wr: &mut W,
    peer: Option<std::net::IpAddr>,
    kind: Refusal,
    message: &str,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    shared.guard.refuse(kind, peer, message);
    let limit = Duration::from_secs_f64(shared.config.frame_timeout_s);
    let first = tokio::time::timeout(limit, async {
        let mut prefix = [0u8; 4];
        rd.read_exact(&mut prefix).await.ok()?;
        let len = frame_len(prefix, u32::MAX).ok()?;
        let mut head = [0u8; REFUSED_HEAD];
        let head = &mut head[..len.min(REFUSED_HEAD)];
        rd.read_exact(head).await.ok()?;
        // version, kind, flags (u16), tag (u64), job, priority, uid, gid, phase; 12 more bytes
        // when flag 16 (served elsewhere) is set; then the operation.
        let tag = u64::from_le_bytes(head.get(4..12)?.try_into().ok()?);
        let flags = u16::from_le_bytes(head.get(2..4)?.try_into().ok()?);
        let at = if flags & 16 != 0 { 56 } else { 44 };
        let op = head.get(at).copied().and_then(OpCode::from_u8);
        Some((tag, op))
    })
    .await
    .ok()
    .flatten();
    let mut header = no_header();
    header.tag = first.map_or(0, |(tag, _)| tag);
    let op = first.and_then(|(_, op)| op).unwrap_or(OpCode::Auth);
    let refused = error_frame(header, op, EACCES, message.into());
    send_refusal(wr, &refused, limit).await;
}

/// The bytes of a refused peer's first frame read to answer it: its header and operation.
const REFUSED_HEAD: usize = 57;

/// The largest frame read during the handshake (a proof is about 100 bytes).
const AUTH_FRAME_MAX: u32 = 4096;

/// Serves the frames of one connection (`first`: a length prefix already read).
///
/// A frame's bytes count against the connection's budget before they are read (memory for them
/// is taken as they arrive): that bound is the connection's own. A large frame's count against
/// the server's as its bytes arrive, a step ahead of them, with a share per frame
/// ([`ByteBudget`]): announcing a length holds nothing of what other clients need. A small frame
/// is read first and charged to the server once decoded, unless it is control: a server whose
/// budget is held by requests a quota rule holds back must still read the control request that
/// lifts the rule.
pub(crate) async fn serve_frames<R, W>(
    shared: Arc<Shared>,
    rd: R,
    wr: W,
    first: Option<[u8; 4]>,
    mut link: Link,
    reg: Registered,
    mut stop: watch::Receiver<bool>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let config = &shared.config;
    let write_limit = Duration::from_secs_f64(config.write_timeout_s);
    let idle_limit = Duration::from_secs_f64(config.idle_timeout_s);
    let frame_limit = Duration::from_secs_f64(config.frame_timeout_s);
    let peer = link.peer;
    let entry = reg.entry.clone();
    let mut rd = BufReader::with_capacity(64 * 1024, rd);
    let (tx, backlog) = Answers::new(Box::new(wr));
    let writer = tokio::spawn(write_answers(shared.clone(), peer, write_limit, backlog));
    let inflight = Arc::new(Semaphore::new(config.max_inflight_per_conn));
    let conn_bytes = ByteBudget::new(config.max_inflight_bytes_per_conn);
    let mut have_prefix = first.is_some();
    let mut prefix = first.unwrap_or_default();
    loop {
        // Backpressure: wait for an answer to go out before reading more than the limit.
        let slot = tokio::select! {
            biased;
            _ = stop.changed() => break,
            _ = tx.closed() => break,
            p = inflight.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
        };
        if !have_prefix
            && !read_prefix(
                &shared,
                &mut rd,
                &mut prefix,
                &entry,
                &tx,
                &mut stop,
                idle_limit,
                peer,
            )
            .await
        {
            break; // stopping, closed, idle, evicted, or reset by the peer
        }
        have_prefix = false;
        let mut allowance = Allowance::for_frame(slot, &entry);
        shared.counters.frame();
        let len = match frame_len(prefix, config.max_frame) {
            Ok(len) => len,
            Err(e) => {
                // The stream cannot be resynchronised after a bad length: answer and close.
                shared.counters.bad_frame();
                shared.guard.refuse(Refusal::BadFrame, peer, &e.to_string());
                let refusal = error_frame(no_header(), OpCode::Lookup, EMSGSIZE, e.to_string());
                let _ = tx.send(refusal, Some(allowance));
                break;
            }
        };
        // Budgets: see the function's documentation.
        let small = len <= SMALL_FRAME;
        let Some(c) = charge(&conn_bytes, len as u64, 0, &mut stop).await else {
            break;
        };
        allowance.add_conn_bytes(c);
        let mut receiving = (!small).then(|| shared.inflight_bytes.receive());
        let buf = match read_frame(&mut rd, len, receiving.as_mut(), frame_limit, &mut stop).await {
            Ok(b) => b,
            Err(end) => {
                refuse_unread(&shared, peer, end);
                break;
            }
        };
        if let Some(permit) = receiving.and_then(|r| r.finish()) {
            allowance.add_server_bytes(permit);
        }
        let answered = answer_frame(
            &shared,
            buf,
            len,
            small,
            allowance,
            &conn_bytes,
            &tx,
            &mut link,
            &mut stop,
        )
        .await;
        if !answered {
            break;
        }
    }
    link.phases.end_all(&shared);
    drop(tx);
    let _ = writer.await;
    drop(reg);
}

/// Logs and counts why a frame was not read whole (nothing for a peer that closed).
fn refuse_unread(shared: &Shared, peer: Option<std::net::IpAddr>, end: FrameEnd) {
    match end {
        FrameEnd::Closed => {}
        FrameEnd::TimedOut => shared.guard.refuse(
            Refusal::FrameTimeout,
            peer,
            "closing a connection whose frame did not arrive whole in time",
        ),
        FrameEnd::Stalled => shared.guard.refuse(
            Refusal::FrameStalled,
            peer,
            "closing a connection whose frame held more than its share of the server's \
             in-flight bytes (or went first) and received nothing for a second while others \
             waited",
        ),
    }
}

/// Writes the answers a direct write could not ([`answers`]) as they come, gathering those
/// already waiting into one buffer; stops at the first write that fails or is stuck
/// ([`unstuck`]), or when the socket is gone.
async fn write_answers(
    shared: Arc<Shared>,
    peer: Option<std::net::IpAddr>,
    limit: Duration,
    mut backlog: answers::Backlog,
) {
    let s = &shared;
    let mut buf: Vec<u8> = Vec::with_capacity(WRITE_BUFFER);
    let mut batch = Vec::new();
    while let Some(first) = backlog.rx.recv().await {
        let Some(mut wr) = backlog.take_writer() else {
            return; // a direct write failed: the peer is gone
        };
        batch.push(first);
        while let Ok(q) = backlog.rx.try_recv() {
            batch.push(q);
        }
        let n = batch.len();
        let write = async {
            for q in &batch {
                for part in q.rest() {
                    if buf.len() + part.len() > WRITE_BUFFER && !buf.is_empty() {
                        wr.write_all(&buf).await?;
                        buf.clear();
                    }
                    if part.len() >= WRITE_BUFFER {
                        wr.write_all(part).await?;
                    } else {
                        buf.extend_from_slice(part);
                    }
                }
            }
            if !buf.is_empty() {
                wr.write_all(&buf).await?;
                buf.clear();
            }
            wr.flush().await
        };
        if !unstuck(s, peer, limit, write).await {
            return;
        }
        // Each allowance goes with its written answer.
        batch.clear();
        backlog.written(n, wr);
    }
    if let Some(mut wr) = backlog.take_writer() {
        let _ = wr.shutdown().await;
    }
}

/// Reads the next frame's length prefix; `false` if the connection is to close instead:
/// stopping, its answers' side closed, the peer gone, evicted for a new connection at the cap,
/// or silent with nothing in flight for the idle timeout. One read, kept across the checks (a
/// read of a prefix is not cancelled half-way).
#[allow(clippy::too_many_arguments)]
async fn read_prefix<R>(
    shared: &Shared,
    rd: &mut R,
    prefix: &mut [u8; 4],
    entry: &ConnEntry,
    tx: &Answers,
    stop: &mut watch::Receiver<bool>,
    idle_limit: Duration,
    peer: Option<std::net::IpAddr>,
) -> bool
where
    R: AsyncRead + Unpin,
{
    let read = rd.read_exact(prefix);
    tokio::pin!(read);
    loop {
        // While requests are in flight the connection is not idle: look again a whole
        // timeout later (not in a tight loop).
        let wait = if entry.in_flight() > 0 {
            idle_limit
        } else {
            idle_limit.saturating_sub(entry.idle_for())
        };
        tokio::select! {
            biased;
            _ = stop.changed() => return false,
            _ = entry.evict.notified() => {
                shared.guard.refuse(Refusal::Evicted, peer, "closing the connection idle the longest: the connection cap is reached");
                return false;
            }
            _ = tx.closed() => return false,
            r = &mut read => return r.is_ok(),
            _ = tokio::time::sleep(wait.max(Duration::from_millis(10))) => {
                if entry.in_flight() == 0 && entry.idle_for() >= idle_limit {
                    shared.guard.refuse(Refusal::IdleTimeout, peer, "closing an idle connection");
                    return false;
                }
            }
        }
    }
}

/// Answers one frame read whole: a request is charged to the budgets (a small one to the
/// server's now, a read for the data its answer will hold) and handled; a response or a frame
/// that does not decode is answered with an error, the stream still in step. `false` if the
/// connection is to close (stopping while waiting for budget).
#[allow(clippy::too_many_arguments)]
async fn answer_frame(
    shared: &Arc<Shared>,
    buf: Bytes,
    len: usize,
    small: bool,
    mut allowance: Allowance,
    conn_bytes: &ByteBudget,
    tx: &Answers,
    link: &mut Link,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    let peer = link.peer;
    match decode(buf.clone()) {
        Ok(Frame::Request(header, req)) => {
            let control = matches!(
                req,
                Request::Control { .. }
                    | Request::PhaseEnd
                    | Request::JobName { .. }
                    | Request::LocalTransport
                    | Request::AttachRegion { .. }
                    | Request::Auth { .. }
            );
            if small && !control {
                let Some(s) = charge(&shared.inflight_bytes, len as u64, 0, stop).await else {
                    return false;
                };
                allowance.add_server_bytes(s);
            }
            // A read's answer will hold its data: counted too, up to the whole budget.
            if let Request::Read { len: want, .. } = &req {
                let (held, want) = (len as u64, u64::from(*want));
                let Some(c) = charge(conn_bytes, want, held, stop).await else {
                    return false;
                };
                allowance.add_conn_bytes(c);
                let Some(s) = charge(&shared.inflight_bytes, want, held, stop).await else {
                    return false;
                };
                allowance.add_server_bytes(s);
            }
            handle(shared, header, req, tx, allowance, link)
        }
        Ok(Frame::Response(header, op, _)) => {
            shared.counters.bad_frame();
            shared.guard.refuse(
                Refusal::BadFrame,
                peer,
                "a server accepts requests, not responses",
            );
            let _ = tx.send(
                error_frame(
                    header,
                    op,
                    EPROTO,
                    "a server accepts requests, not responses".into(),
                ),
                Some(allowance),
            );
        }
        Err(e) => {
            // The frame was read whole, so the stream is still in step: answer, go on.
            shared.counters.bad_frame();
            shared.guard.refuse(Refusal::BadFrame, peer, &e.to_string());
            let mut header = no_header();
            if buf.len() >= 12 {
                header.tag = u64::from_le_bytes(buf[4..12].try_into().unwrap_or([0; 8]));
            }
            // The error answer holds the frame's allowance until it is written: a client
            // that never reads is stopped by backpressure, like any other.
            let _ = tx.send(
                error_frame(header, OpCode::Lookup, EBADMSG, e.to_string()),
                Some(allowance),
            );
        }
    }
    true
}

/// How often a blocked write looks at the server's byte budget.
const PRESSURE_CHECK: Duration = Duration::from_millis(250);
/// How long a write may make no progress while the server's byte budget is nearly all used
/// before its connection is closed.
const PRESSURE_STALL: Duration = Duration::from_secs(1);

/// Runs one write to a client; `false` (the connection is to close) if it failed, took longer
/// than `limit` (the client does not read its answers), or made no progress for
/// [`PRESSURE_STALL`] while the server's byte budget was nearly all used: answers a client does
/// not read must not hold the budget every other client needs (closing the connection drops
/// them, and the requests behind them were done either way).
async fn unstuck<F>(
    shared: &Shared,
    peer: Option<std::net::IpAddr>,
    limit: Duration,
    write: F,
) -> bool
where
    F: std::future::Future<Output = std::io::Result<()>>,
{
    tokio::pin!(write);
    let start = tokio::time::Instant::now();
    loop {
        tokio::select! {
            // The write first: one that completes at once (the common case) never arms a timer.
            biased;
            r = &mut write => return r.is_ok(),
            _ = tokio::time::sleep(PRESSURE_CHECK) => {
                let waited = start.elapsed();
                if waited >= limit {
                    shared.guard.refuse(
                        Refusal::WriteTimeout,
                        peer,
                        "closing a connection whose client does not read its answers",
                    );
                    return false;
                }
                if waited >= PRESSURE_STALL && shared.inflight_bytes.pressed() {
                    shared.guard.refuse(
                        Refusal::WriteTimeout,
                        peer,
                        "closing a connection whose client does not read its answers while \
                         the server's in-flight bytes are nearly all used",
                    );
                    return false;
                }
            }
        }
    }
}

/// Takes `bytes` (KiB, rounded up) from `budget`, at most what is left of it beyond the `held`
/// bytes the request already holds (so one request never waits for bytes it holds itself, and
/// the largest request is let in alone). `None` if the server is stopping.
async fn charge(
    budget: &ByteBudget,
    bytes: u64,
    held: u64,
    stop: &mut watch::Receiver<bool>,
) -> Option<OwnedSemaphorePermit> {
    let held = held.div_ceil(1024).min(u64::from(budget.kib));
    let want = bytes.div_ceil(1024).max(1);
    let n = u32::try_from(want.min(u64::from(budget.kib) - held)).unwrap_or(u32::MAX);
    tokio::select! {
        biased;
        _ = stop.changed() => None,
        p = budget.sem.clone().acquire_many_owned(n) => p.ok(),
    }
}

/// How a frame's reading ended early.
#[derive(Debug)]
enum FrameEnd {
    /// The peer closed the connection mid-frame, or the server is stopping.
    Closed,
    /// The frame did not arrive whole within the frame timeout (not counting waits for the
    /// server's budget that were not its own doing).
    TimedOut,
    /// It held more than its share of the server's budget while others waited, and received
    /// nothing for [`PRESSURE_STALL`].
    Stalled,
}

/// Reads exactly `len` bytes without zeroing a buffer first, within `limit`. With `receiving`
/// (a large frame), the server's byte budget is taken a step at a time ahead of the bytes: the
/// frame never reads more than it holds, and waits for its turn and share (`ByteBudget`); time
/// spent waiting under its share, or for budget others hold, does not count against `limit`.
async fn read_frame<R: AsyncRead + Unpin>(
    rd: &mut R,
    len: usize,
    mut receiving: Option<&mut crate::guard::Receiving<'_>>,
    limit: Duration,
    stop: &mut watch::Receiver<bool>,
) -> Result<Bytes, FrameEnd> {
    let mut deadline = tokio::time::Instant::now() + limit;
    // Memory is taken as bytes arrive, never on a length's word: a peer announcing 64 MiB and
    // sending a byte costs 64 KiB.
    let mut buf = bytes::BytesMut::with_capacity(len.min(READ_CHUNK));
    let mut progress = tokio::time::Instant::now();
    while buf.len() < len {
        let mut room = len - buf.len();
        if let Some(r) = receiving.as_deref_mut() {
            if r.covered(len) <= buf.len() {
                let excused = tokio::select! {
                    biased;
                    _ = stop.changed() => return Err(FrameEnd::Closed),
                    s = r.step(len, deadline) => s.map_err(|_| FrameEnd::TimedOut)?,
                };
                deadline += excused;
                progress = tokio::time::Instant::now();
            }
            room = r.covered(len).min(len) - buf.len();
        }
        if buf.capacity() == buf.len() {
            buf.reserve((len - buf.len()).min(buf.len().max(READ_CHUNK)));
        }
        let mut limited = (&mut *rd).take(room as u64);
        let n = loop {
            tokio::select! {
                biased;
                _ = stop.changed() => return Err(FrameEnd::Closed),
                r = limited.read_buf(&mut buf) => break r.map_err(|_| FrameEnd::Closed)?,
                _ = tokio::time::sleep_until(deadline) => return Err(FrameEnd::TimedOut),
                // A frame holding more than its share while others wait must keep receiving.
                _ = tokio::time::sleep(PRESSURE_CHECK), if receiving.is_some() => {
                    let crowding = receiving.as_deref().is_some_and(|r| r.crowding());
                    if crowding && progress.elapsed() >= PRESSURE_STALL {
                        return Err(FrameEnd::Stalled);
                    }
                }
            }
        };
        if n == 0 {
            return Err(FrameEnd::Closed);
        }
        progress = tokio::time::Instant::now();
    }
    Ok(buf.freeze())
}

fn no_header() -> Header {
    Header::new(0, JobId(0))
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
    tx: &Answers,
    permit: Option<Allowance>,
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
    let _ = tx.send(encode(&Frame::Response(h, op, resp)), permit);
}

/// What a request becomes: a file operation for the scheduler, a control request for the
/// blocking pool, or an answer given at once (a bad path or size, the transport, a phase's end).
enum Route {
    Schedule(ScheduledOp),
    Control {
        token: String,
        op: iosets_proto::Control,
    },
    Answer(Result<Reply, FsError>),
}

/// Routes one request: the control plane is answered beside the scheduler; every file operation
/// (data or metadata) is checked, then submitted to the scheduler (refused with `ESHUTDOWN` once
/// the server is stopping).
fn handle(
    shared: &Arc<Shared>,
    header: Header,
    req: Request,
    tx: &Answers,
    permit: Allowance,
    link: &mut Link,
) {
    let op = req.op();
    match route(shared, &header, op, req, link) {
        Route::Answer(r) => reply(tx, Some(permit), shared, header, op, r),
        Route::Control { token, op: ctl } => {
            let shared = shared.clone();
            let tx = tx.clone();
            let peer = link.peer;
            tokio::task::spawn_blocking(move || {
                let r = control::handle(&shared, &token, ctl, peer);
                reply(&tx, Some(permit), &shared, header, op, r);
            });
        }
        Route::Schedule(scheduled) => submit(shared, header, op, scheduled, tx, permit, link),
    }
}

/// Checks a request and says where it goes ([`Route`]).
fn route(
    shared: &Arc<Shared>,
    header: &Header,
    op: OpCode,
    req: Request,
    link: &mut Link,
) -> Route {
    if let Some(stamp) = header.phase {
        link.phases.saw(
            shared,
            JobId(header.job.0),
            stamp,
            matches!(req, Request::PhaseEnd),
        );
    }
    // One request moves at most a frame's worth of data, whichever way it travels.
    let too_large = |len: u32| {
        (len > shared.config.max_frame - 64).then(|| FsError {
            errno: EMSGSIZE,
            message: format!("{} of {len} bytes exceeds the frame limit", op.as_str()),
        })
    };
    // Where a read or write through the shared region puts its data, if it is not too large.
    let in_region = |link: &Link, at, len| {
        too_large(len)
            .map_or(Ok(()), Err)
            .and_then(|()| local::place(link, at, len))
    };
    let scheduled = match req {
        Request::Read { path, offset, len } => too_large(len).map_or(Ok(()), Err).and_then(|()| {
            check_path(&path).map(|path| ScheduledOp::Read {
                path,
                offset,
                len,
                into: None,
            })
        }),
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
        } => in_region(link, at, len).and_then(|place| {
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
        } => in_region(link, at, len).and_then(|place| {
            check_path(&path).map(|path| ScheduledOp::Write {
                path,
                offset,
                data: Payload::Shared { place, len },
            })
        }),
        Request::Fsync { path } => check_path(&path).map(|path| ScheduledOp::Fsync { path }),
        Request::LocalTransport => return Route::Answer(local::offer(shared, link)),
        Request::AttachRegion { len } => return Route::Answer(local::attach(shared, link, len)),
        Request::JobName { name } => {
            return Route::Answer(
                shared
                    .sched
                    .name_job(JobId(header.job.0), &name)
                    .map(|()| Reply::Done)
                    .map_err(|e| FsError {
                        errno: EINVAL,
                        message: e.to_string(),
                    }),
            );
        }
        Request::PhaseEnd => {
            if let Some(unix) = header.phase {
                let phase = unix.since(shared.clock_zero);
                shared.sched.phase_end(JobId(header.job.0), phase);
            }
            return Route::Answer(Ok(Reply::Done));
        }
        Request::Auth { .. } => {
            // Authentication is the handshake's; later it is a protocol error.
            return Route::Answer(Err(FsError {
                errno: EPROTO,
                message: if shared.config.auth.is_some() {
                    "already authenticated on this connection".into()
                } else {
                    "this server has no cluster secret: nothing to authenticate".into()
                },
            }));
        }
        Request::Control { token, op } => return Route::Control { token, op },
        // Every other request is a metadata operation: scheduled like data (DESIGN: never a
        // side path), so that a create storm is ordered and shared by the policy.
        meta => MetaOp::checked(meta).map(ScheduledOp::Meta),
    };
    // A bad path or size is answered at once, never scheduled.
    match scheduled {
        Ok(s) => Route::Schedule(s),
        Err(e) => Route::Answer(Err(e)),
    }
}

/// Submits a checked file operation to the scheduler, with the job, phase stamp, priority hint
/// and origin its header carries.
fn submit(
    shared: &Shared,
    header: Header,
    op: OpCode,
    scheduled: ScheduledOp,
    tx: &Answers,
    permit: Allowance,
    link: &Link,
) {
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
        // Never merged (Op::Meta); costs the policy `meta_cost_bytes`, like a small request.
        ScheduledOp::Meta(m) => (
            fnv1a64(m.target().as_bytes()),
            0,
            shared.config.meta_cost_bytes,
            Op::Meta,
        ),
    };
    // The hint travels with the request: the policy applies it, the runtime's job book records it.
    // A phase stamp is the client's wall clock; the policy compares it in the scheduler's time
    // base (a stamp from before the server started reads as its start).
    let phase = header.phase.map(|unix| unix.since(shared.clock_zero));
    let mut request = iosets_types::Request::builder(JobId(header.job.0), kind)
        .file(FileId(file))
        .range(offset, len)
        .phase(phase)
        .user(header.creds.map(|c| c.uid))
        .build();
    let (hint, overridden) = shared.config.hints.apply(header.priority);
    if overridden {
        shared
            .hints_overridden
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    request.priority = hint;
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
        // The scheduler fills it in from what the control plane told of the job.
        account: None,
        // What the request costs against ops/s rates (`[op_cost]`).
        op: Some(op.as_str()),
        // The scheduler fills it in when a rule matches job names by pattern.
        job_name: None,
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
