//! A connection's answers, written by whoever has one.
//!
//! # What it is
//! A worker that finished a request used to hand its answer to the connection's writer task,
//! which woke the network thread to write it: one thread hand-off per request, about as costly
//! on a virtual machine as the `stat` it answers. Now the worker writes the answer itself when
//! it can do so at once: nothing is queued before it and the socket takes the whole frame
//! without waiting (a non-blocking write). Otherwise the answer (or the rest of a frame the
//! socket took part of) goes to the writer task, which writes in order, gathering what waits,
//! under the write timeout as before.
//!
//! # Invariants
//! - Frames never interleave: a direct write happens only under the lock, with the socket's
//!   writing side present (the writer task takes it out while it writes) and nothing queued; a
//!   frame the socket took part of is queued, and everything after it queues behind it.
//! - `queued` counts the answers sent to the writer task and not yet written, under the lock.
//! - An answer's allowance is released once its frame is written (or dropped with the
//!   connection).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use iosets_proto::Encoded;
use parking_lot::Mutex;
use tokio::io::AsyncWrite;
use tokio::sync::mpsc;

use crate::state::Allowance;

/// A connection's writing side (a TCP stream's or a Unix socket's).
pub(crate) type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// An answer for the writer task: its frame, how much of it a direct write already put on the
/// socket, and the request's in-flight allowance, given back once the answer is written (so
/// backpressure bounds the answers waiting to be sent too).
#[derive(Debug)]
pub(crate) struct Queued {
    pub(crate) frame: Encoded,
    pub(crate) written: usize,
    /// Held for its drop.
    pub(crate) _permit: Option<Allowance>,
}

impl Queued {
    /// The frame's bytes not written yet: the rest of its head, then of its data.
    pub(crate) fn rest(&self) -> [&[u8]; 2] {
        rest_of(&self.frame, self.written)
    }
}

fn rest_of(frame: &Encoded, written: usize) -> [&[u8]; 2] {
    let head = frame.head.len();
    if written < head {
        [&frame.head[written..], &frame.data[..]]
    } else {
        [&[], &frame.data[(written - head).min(frame.data.len())..]]
    }
}

struct Direct {
    /// The socket's writing side: `None` while the writer task writes with it, and for good
    /// once a write failed or the writer task ended.
    wr: Option<Writer>,
    /// Answers sent to the writer task and not written yet.
    queued: usize,
}

/// Where a connection's answers go ([`send`](Answers::send)); cloned into every request.
#[derive(Clone)]
pub(crate) struct Answers {
    direct: Arc<Mutex<Direct>>,
    tx: mpsc::UnboundedSender<Queued>,
}

impl std::fmt::Debug for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Answers").finish_non_exhaustive()
    }
}

/// What a direct write did.
enum Now {
    /// The whole frame is on the socket.
    All,
    /// This much of it; the socket would block for the rest.
    Part(usize),
    /// The socket failed (the peer is gone).
    Failed,
}

/// The writer task's side: the queue's receiving end and the socket. It holds no sender, so
/// its queue ends when the connection and every request it queued are gone.
pub(crate) struct Backlog {
    direct: Arc<Mutex<Direct>>,
    pub(crate) rx: mpsc::UnboundedReceiver<Queued>,
}

impl Backlog {
    /// The socket's writing side, taken out while the writer task writes (`None` once a
    /// direct write failed).
    pub(crate) fn take_writer(&self) -> Option<Writer> {
        self.direct.lock().wr.take()
    }

    /// `n` queued answers are written; the socket goes back for direct writes.
    pub(crate) fn written(&self, n: usize, wr: Writer) {
        let mut d = self.direct.lock();
        d.queued = d.queued.saturating_sub(n);
        d.wr = Some(wr);
    }
}

impl Answers {
    /// The answers of a connection writing to `wr`, and the writer task's side.
    pub(crate) fn new(wr: Writer) -> (Answers, Backlog) {
        let (tx, rx) = mpsc::unbounded_channel();
        let direct = Arc::new(Mutex::new(Direct {
            wr: Some(wr),
            queued: 0,
        }));
        let backlog = Backlog {
            direct: direct.clone(),
            rx,
        };
        (Answers { direct, tx }, backlog)
    }

    /// Sends one answer: written now when nothing waits before it and the socket takes it
    /// whole without waiting, else queued for the writer task. `false` if the connection is
    /// gone (the answer is dropped; the work was done either way).
    pub(crate) fn send(&self, frame: Encoded, permit: Option<Allowance>) -> bool {
        let mut d = self.direct.lock();
        let mut written = 0;
        if d.queued == 0 {
            if let Some(wr) = d.wr.as_mut() {
                match write_now(wr, &frame) {
                    Now::All => return true,
                    Now::Part(n) => written = n,
                    // Queued all the same: the writer task wakes, finds no socket, and ends
                    // the connection.
                    Now::Failed => d.wr = None,
                }
            }
        }
        let queued = Queued {
            frame,
            written,
            _permit: permit,
        };
        if self.tx.send(queued).is_err() {
            return false;
        }
        d.queued += 1;
        true
    }

    /// Resolves when the writer task has ended (the connection is closing).
    pub(crate) async fn closed(&self) {
        self.tx.closed().await;
    }
}

/// Writes as much of `frame` as the socket takes without waiting: its head and data in one
/// vectored write where the socket takes both.
fn write_now(wr: &mut Writer, frame: &Encoded) -> Now {
    let mut cx = Context::from_waker(Waker::noop());
    let mut done = 0;
    let total = frame.wire_len();
    while done < total {
        let [head, data] = rest_of(frame, done);
        let parts = [std::io::IoSlice::new(head), std::io::IoSlice::new(data)];
        match Pin::new(&mut *wr).poll_write_vectored(&mut cx, &parts) {
            Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Now::Failed,
            Poll::Ready(Ok(n)) => done += n,
            Poll::Pending => return Now::Part(done),
        }
    }
    Now::All
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use tokio::io::AsyncReadExt;

    fn frame(head: &[u8], data: &[u8]) -> Encoded {
        Encoded {
            head: head.to_vec(),
            data: Bytes::copy_from_slice(data),
        }
    }

    #[test]
    fn the_rest_of_a_frame_skips_what_was_written() {
        let f = frame(b"abc", b"defg");
        let q = |written| Queued {
            frame: f.clone(),
            written,
            _permit: None,
        };
        assert_eq!(q(0).rest(), [&b"abc"[..], &b"defg"[..]]);
        assert_eq!(q(2).rest(), [&b"c"[..], &b"defg"[..]]);
        assert_eq!(q(3).rest(), [&b""[..], &b"defg"[..]]);
        assert_eq!(q(6).rest(), [&b""[..], &b"g"[..]]);
        assert_eq!(q(7).rest(), [&b""[..], &b""[..]]);
    }

    /// A frame the socket takes whole is written by the sender (nothing queued); one larger
    /// than the socket's buffer is queued with what was written counted, and what follows it
    /// queues behind it, so the bytes arrive whole and in order.
    #[test]
    fn answers_go_out_directly_until_the_socket_is_full_then_in_order() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (a, mut b) = tokio::io::duplex(64);
            let (answers, mut backlog) = Answers::new(Box::new(a));
            let rx = &mut backlog.rx;
            assert!(answers.send(frame(b"one", b""), None));
            assert!(rx.try_recv().is_err(), "written directly, not queued");
            let mut got = [0u8; 3];
            b.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"one");
            // 100 bytes into a 64-byte pipe: 64 written now, the rest queued.
            let big: Vec<u8> = (0..100u8).collect();
            assert!(answers.send(frame(b"", &big), None));
            assert!(answers.send(frame(b"two", b""), None));
            let first = rx.try_recv().unwrap();
            assert_eq!(first.written, 64);
            let second = rx.try_recv().unwrap();
            assert_eq!(
                second.written, 0,
                "queued behind the partial frame, not written"
            );
            // The writer task's part: write the rests in order, then give the socket back.
            let mut wr = backlog.take_writer().unwrap();
            let reader = tokio::spawn(async move {
                let mut all = vec![0u8; 100 + 3];
                b.read_exact(&mut all).await.unwrap();
                (all, b)
            });
            for q in [&first, &second] {
                for part in q.rest() {
                    tokio::io::AsyncWriteExt::write_all(&mut wr, part)
                        .await
                        .unwrap();
                }
            }
            let (all, mut b) = reader.await.unwrap();
            assert_eq!(&all[..100], &big[..]);
            assert_eq!(&all[100..], b"two");
            backlog.written(2, wr);
            assert!(answers.send(frame(b"three", b""), None));
            assert!(
                backlog.rx.try_recv().is_err(),
                "direct again once the queue is empty"
            );
            let mut got = [0u8; 5];
            b.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"three");
        });
    }
}
