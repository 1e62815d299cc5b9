//! One connection to one server, and the endpoint that reconnects and retries.
//!
//! A [`Conn`] is a TCP stream split in two tasks: a writer task that takes encoded frames from
//! an unbounded channel and writes them in order (buffering the small heads, flushing when the
//! channel is empty), and a reader task that reads frames (length prefix checked against the
//! maximum before allocating), and hands each response to the caller waiting on its tag through a
//! oneshot channel. Many requests may be outstanding on one connection; the server answers them
//! in any order. When either task hits an error or the end of the stream, the connection is
//! marked dead and every outstanding caller is told (`Lost`): their requests may or may not have
//! been carried out.
//!
//! An [`Endpoint`] holds the current connection to one server, makes a new one when the current
//! one is dead, and sends a request again after a lost connection only if it is idempotent.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::BytesMut;
use iosets_proto::{
    decode, encode, frame_len, Creds, Encoded, Frame, Header, OpCode, Request, Response,
};
use iosets_types::{JobId, Priority};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use crate::config::ClientConfig;
use crate::error::ClientError;

/// What a waiting caller receives: the echoed operation and the response, or why the
/// connection broke.
type Delivery = Result<(OpCode, Response), String>;

/// The state the caller side and the two tasks share.
#[derive(Debug, Default)]
struct State {
    /// Callers waiting for a response, by tag.
    pending: HashMap<u64, oneshot::Sender<Delivery>>,
    /// Why the connection is dead, once it is.
    dead: Option<String>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the map inconsistent (single inserts and
        // removals), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks the connection dead (the first reason wins) and fails every waiting caller.
    fn fail(&self, reason: String) {
        let pending = {
            let mut st = self.lock();
            if st.dead.is_none() {
                st.dead = Some(reason.clone());
            }
            std::mem::take(&mut st.pending)
        };
        for (_, tx) in pending {
            let _ = tx.send(Err(reason.clone()));
        }
    }

    fn deliver(&self, tag: u64, op: OpCode, resp: Response) {
        let tx = self.lock().pending.remove(&tag);
        // An unknown tag is the late answer to a request that timed out: dropped.
        if let Some(tx) = tx {
            let _ = tx.send(Ok((op, resp)));
        }
    }
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
}

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

/// One live (or dead) connection.
#[derive(Debug)]
pub(crate) struct Conn {
    server: SocketAddr,
    tx: mpsc::UnboundedSender<Encoded>,
    shared: Arc<Shared>,
    next_tag: AtomicU64,
    /// Dropping it stops the reader task.
    _close: oneshot::Sender<()>,
}

impl Conn {
    /// Connects to `server` and starts the reader and writer tasks on the current runtime.
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
        let (read, write) = stream.into_split();
        let shared = Arc::new(Shared::default());
        let (tx, rx) = mpsc::unbounded_channel();
        let (close, closed) = oneshot::channel();
        tokio::spawn(write_loop(
            BufWriter::with_capacity(64 * 1024, write),
            rx,
            shared.clone(),
        ));
        tokio::spawn(read_loop(
            BufReader::with_capacity(64 * 1024, read),
            shared.clone(),
            cfg.max_frame,
            closed,
        ));
        Ok(Conn {
            server,
            tx,
            shared,
            next_tag: AtomicU64::new(1),
            _close: close,
        })
    }

    fn alive(&self) -> bool {
        self.shared.lock().dead.is_none()
    }

    /// Sends `req` and waits for its response.
    async fn call(
        &self,
        who: Caller,
        req: Request,
        timeout: Option<Duration>,
    ) -> Result<Response, Attempt> {
        let tag = self.next_tag.fetch_add(1, Ordering::Relaxed);
        let op = req.op();
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.shared.lock();
            if let Some(reason) = &st.dead {
                return Err(Attempt::NotSent(self.lost(reason.clone())));
            }
            st.pending.insert(tag, tx);
        }
        let header = Header {
            tag,
            job: who.job,
            priority: who.priority,
            creds: who.creds,
        };
        let frame = encode(&Frame::Request(header, req));
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
                    self.shared.lock().pending.remove(&tag);
                    return Err(Attempt::Final(ClientError::Timeout {
                        server: self.server,
                        after,
                    }));
                }
            },
        };
        match delivered {
            Ok(Ok((echo, resp))) if echo == op => Ok(resp),
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

    fn lost(&self, reason: String) -> ClientError {
        ClientError::ConnectionLost {
            server: self.server,
            reason,
        }
    }
}

async fn write_frame(w: &mut BufWriter<OwnedWriteHalf>, frame: &Encoded) -> std::io::Result<()> {
    w.write_all(&frame.head).await?;
    if !frame.data.is_empty() {
        w.write_all(&frame.data).await?;
    }
    Ok(())
}

/// Writes frames in the order they were queued; flushes when no more are waiting.
async fn write_loop(
    mut w: BufWriter<OwnedWriteHalf>,
    mut rx: mpsc::UnboundedReceiver<Encoded>,
    shared: Arc<Shared>,
) {
    while let Some(mut frame) = rx.recv().await {
        loop {
            if let Err(e) = write_frame(&mut w, &frame).await {
                shared.fail(format!("write failed: {e}"));
                return;
            }
            match rx.try_recv() {
                Ok(next) => frame = next,
                Err(_) => break,
            }
        }
        if let Err(e) = w.flush().await {
            shared.fail(format!("write failed: {e}"));
            return;
        }
    }
    // The connection was dropped by the client: close our direction.
    let _ = w.shutdown().await;
}

/// Reads one frame: the length prefix, checked before allocating, then exactly that many bytes.
async fn read_frame(r: &mut BufReader<OwnedReadHalf>, max: u32) -> Result<Frame, String> {
    let mut prefix = [0u8; 4];
    if let Err(e) = r.read_exact(&mut prefix).await {
        return Err(if e.kind() == std::io::ErrorKind::UnexpectedEof {
            "closed by the server".into()
        } else {
            format!("read failed: {e}")
        });
    }
    let len = frame_len(prefix, max).map_err(|e| format!("protocol error: {e}"))?;
    let mut buf = BytesMut::with_capacity(len);
    while buf.len() < len {
        let want = (len - buf.len()) as u64;
        match (&mut *r).take(want).read_buf(&mut buf).await {
            Ok(0) => return Err("closed by the server in the middle of a frame".into()),
            Ok(_) => {}
            Err(e) => return Err(format!("read failed: {e}")),
        }
    }
    decode(buf.freeze()).map_err(|e| format!("protocol error: {e}"))
}

/// Hands each response to its caller until the stream ends, breaks, or the connection is
/// dropped.
async fn read_loop(
    mut r: BufReader<OwnedReadHalf>,
    shared: Arc<Shared>,
    max: u32,
    mut closed: oneshot::Receiver<()>,
) {
    let reason = loop {
        tokio::select! {
            _ = &mut closed => return,
            frame = read_frame(&mut r, max) => match frame {
                Ok(Frame::Response(h, op, resp)) => shared.deliver(h.tag, op, resp),
                Ok(Frame::Request(..)) => break "protocol error: the server sent a request".into(),
                Err(reason) => break reason,
            },
        }
    };
    shared.fail(reason);
}

/// One server: its address and the current connection to it.
#[derive(Debug)]
pub(crate) struct Endpoint {
    pub(crate) addr: SocketAddr,
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
}

impl Endpoint {
    /// An endpoint for `addr`, connected now.
    pub(crate) async fn connect(
        addr: SocketAddr,
        cfg: &ClientConfig,
    ) -> Result<Endpoint, ClientError> {
        let conn = Conn::connect(addr, cfg).await?;
        Ok(Endpoint {
            addr,
            conn: tokio::sync::Mutex::new(Some(Arc::new(conn))),
        })
    }

    /// The live connection, made anew if the last one died. Concurrent callers wait for one
    /// reconnection rather than each making one.
    async fn connection(&self, cfg: &ClientConfig) -> Result<Arc<Conn>, ClientError> {
        let mut current = self.conn.lock().await;
        if let Some(c) = current.as_ref() {
            if c.alive() {
                return Ok(c.clone());
            }
        }
        *current = None;
        let c = Arc::new(Conn::connect(self.addr, cfg).await?);
        *current = Some(c.clone());
        Ok(c)
    }

    /// Sends `req` and returns the server's response. A request that never left (no
    /// connection) is attempted again up to `cfg.retries` times; one whose connection broke
    /// while it was outstanding is sent again only if it is idempotent. Waits between attempts
    /// grow from `cfg.backoff`.
    pub(crate) async fn call(
        &self,
        cfg: &ClientConfig,
        who: Caller,
        req: Request,
    ) -> Result<Response, ClientError> {
        let idempotent = req.is_idempotent();
        let mut attempt = 0u32;
        loop {
            let err = match self.connection(cfg).await {
                Err(e) => e,
                Ok(conn) => match conn.call(who, req.clone(), cfg.request_timeout).await {
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
