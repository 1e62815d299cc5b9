//! The soak tool's view of the wire: raw protocol frames over blocking loopback sockets (no
//! client library, so every answer, lost connection and error is seen as it is), checkable
//! record contents, the server's `/metrics` over HTTP, and a small deterministic generator.
//!
//! Every socket has read and write timeouts, so no soak thread waits on the server forever.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use iosets_proto::io::{read_frame_blocking, write_frame_blocking};
use iosets_proto::{encode, Bytes, Frame, Header, Reply, Request, Response, DEFAULT_MAX_FRAME};
use iosets_types::JobId;

/// The errno a server answers when it ran out of file descriptors.
pub(crate) const EMFILE: i32 = 24;
/// The errno of a full file system.
pub(crate) const ENOSPC: i32 = 28;

/// One protocol connection: requests may be pipelined (`send`, then `recv`).
#[derive(Debug)]
pub(crate) struct Conn {
    stream: TcpStream,
    job: u64,
    next_tag: u64,
}

impl Conn {
    /// Connects within `timeout`; reads and writes on it wait at most `timeout` too.
    pub(crate) fn connect(addr: SocketAddr, job: u64, timeout: Duration) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(Conn {
            stream,
            job,
            next_tag: 1,
        })
    }

    /// Sends `req` for this connection's job; returns its tag.
    pub(crate) fn send(&mut self, req: Request) -> io::Result<u64> {
        let job = self.job;
        self.send_as(job, req)
    }

    /// Sends `req` for `job`; returns its tag.
    pub(crate) fn send_as(&mut self, job: u64, req: Request) -> io::Result<u64> {
        let tag = self.next_tag;
        self.next_tag += 1;
        let enc = encode(&Frame::Request(header(tag, job), req));
        write_frame_blocking(&mut self.stream, &enc)?;
        Ok(tag)
    }

    /// The next answer: (tag, response). An end of stream is `UnexpectedEof`, an unreadable
    /// frame `InvalidData`.
    pub(crate) fn recv(&mut self) -> io::Result<(u64, Response)> {
        match read_frame_blocking(&mut self.stream, DEFAULT_MAX_FRAME)? {
            Frame::Response(h, _, r) => Ok((h.tag, r)),
            Frame::Request(..) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the server sent a request",
            )),
        }
    }

    /// Sends `req` and waits for its answer (nothing else may be outstanding).
    pub(crate) fn call(&mut self, req: Request) -> io::Result<Response> {
        let tag = self.send(req)?;
        let (t, r) = self.recv()?;
        if t != tag {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("answer for tag {t}, expected {tag}"),
            ));
        }
        Ok(r)
    }
}

/// A request header for `tag` and `job`, without hints.
pub(crate) fn header(tag: u64, job: u64) -> Header {
    Header::new(tag, JobId(job))
}

/// A whole encoded request frame in one buffer.
pub(crate) fn frame_bytes(tag: u64, job: u64, req: Request) -> Vec<u8> {
    encode(&Frame::Request(header(tag, job), req)).to_vec()
}

/// `Create` (keeping an existing file).
pub(crate) fn create(path: &str) -> Request {
    Request::Create {
        path: path.into(),
        mode: 0o644,
        exclusive: false,
    }
}

/// `Write` of `data` at `offset`.
pub(crate) fn write(path: &str, offset: u64, data: Vec<u8>) -> Request {
    Request::Write {
        path: path.into(),
        offset,
        data: Bytes::from(data),
    }
}

/// `Read` of `len` bytes at `offset`.
pub(crate) fn read(path: &str, offset: u64, len: u32) -> Request {
    Request::Read {
        path: path.into(),
        offset,
        len,
    }
}

/// What an answer was, for the checks.
#[derive(Debug, PartialEq)]
pub(crate) enum Answer {
    /// `Written(n)`.
    Written(u32),
    /// Bytes read.
    Data(Bytes),
    /// Done, attributes or another success.
    Ok,
    /// An errno.
    Err(i32, String),
}

impl From<Response> for Answer {
    fn from(r: Response) -> Answer {
        match r {
            Response::Ok(Reply::Written(n)) => Answer::Written(n),
            Response::Ok(Reply::Data(d)) => Answer::Data(d),
            Response::Ok(_) => Answer::Ok,
            Response::Err { errno, message } => Answer::Err(errno, message),
        }
    }
}

/// The `len` bytes of record `key`: a deterministic stream of the key, so that any record read
/// back can be checked without keeping a copy (never all zero: a lost record reads as zeros).
pub(crate) fn pattern(key: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng::new(key ^ 0x005e_ed0f_50a4);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next().to_le_bytes());
    }
    out.truncate(len);
    if let Some(b) = out.first_mut() {
        *b |= 1;
    }
    out
}

/// splitmix64: small, deterministic, good enough to pick offsets and delays.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Uniform in `[lo, hi)`.
    pub(crate) fn duration(&mut self, lo: Duration, hi: Duration) -> Duration {
        let span = hi.saturating_sub(lo).as_micros() as u64;
        lo + Duration::from_micros(self.below(span.max(1)))
    }
}

/// `GET /metrics` from `addr`: the body's size in bytes.
pub(crate) fn metrics_size(addr: &str, timeout: Duration) -> Result<usize> {
    let sock: SocketAddr = addr
        .parse()
        .with_context(|| format!("metrics address {addr:?} is not host:port"))?;
    let mut s = TcpStream::connect_timeout(&sock, timeout)
        .with_context(|| format!("connecting to {addr} for /metrics"))?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: iosets\r\n\r\n")?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .context("reading the server's /metrics")?;
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("/metrics: no end of the HTTP header"))?;
    let head = String::from_utf8_lossy(&raw[..end]);
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        bail!(
            "/metrics answered {:?}",
            head.lines().next().unwrap_or_default()
        );
    }
    Ok(raw.len() - end - 4)
}

/// An I/O error in words: a read timeout (`EAGAIN` on a socket) is "no answer within N s".
pub(crate) fn io_text(e: &io::Error, timeout: Duration) -> String {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            format!("no answer within {} s", timeout.as_secs())
        }
        io::ErrorKind::UnexpectedEof => "the server closed the connection".into(),
        _ => e.to_string(),
    }
}

/// What a well-behaved client saw: served (with its latency) or not (and why), and how many of
/// its answers were `EMFILE`.
#[derive(Debug)]
pub(crate) struct Served {
    /// `Ok(latency)` when its create, write and read-back worked and matched.
    pub(crate) result: std::result::Result<Duration, String>,
    /// `EMFILE` answers it got.
    pub(crate) emfile: u64,
}

impl Served {
    /// `yes (12 ms)` or `no (why)`.
    pub(crate) fn describe(&self) -> String {
        match &self.result {
            Ok(d) => format!("yes ({} ms)", d.as_millis()),
            Err(e) => format!("no ({e})"),
        }
    }

    /// Whether it was served.
    pub(crate) fn ok(&self) -> bool {
        self.result.is_ok()
    }
}

/// A new client connects, creates `path`, writes 4 KiB, reads them back and compares, each step
/// within `timeout`.
pub(crate) fn new_client_served(addr: SocketAddr, path: &str, timeout: Duration) -> Served {
    let t0 = Instant::now();
    let mut emfile = 0;
    let mut step =
        |conn: &mut Conn, req: Request, what: &str| -> std::result::Result<Answer, String> {
            match conn.call(req) {
                Ok(r) => match Answer::from(r) {
                    Answer::Err(errno, m) => {
                        if errno == EMFILE {
                            emfile += 1;
                        }
                        Err(format!("{what}: errno {errno} ({m})"))
                    }
                    a => Ok(a),
                },
                Err(e) => Err(format!("{what}: {}", io_text(&e, timeout))),
            }
        };
    let result = (|| {
        let mut conn = Conn::connect(addr, 7, timeout)
            .map_err(|e| format!("connecting: {}", io_text(&e, timeout)))?;
        step(&mut conn, create(path), "create")?;
        let data = pattern(0xc11e47, 4096);
        match step(&mut conn, write(path, 0, data.clone()), "write")? {
            Answer::Written(4096) => {}
            a => return Err(format!("write answered {a:?}")),
        }
        match step(&mut conn, read(path, 0, 4096), "read")? {
            Answer::Data(d) if d[..] == data[..] => Ok(t0.elapsed()),
            Answer::Data(d) => Err(format!("read back {} wrong bytes", d.len())),
            a => Err(format!("read answered {a:?}")),
        }
    })();
    Served { result, emfile }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_deterministic_distinct_and_never_zero() {
        assert_eq!(pattern(3, 100), pattern(3, 100));
        assert_ne!(pattern(3, 100), pattern(4, 100));
        assert_eq!(pattern(9, 13).len(), 13);
        assert!(pattern(0, 1)[0] != 0);
    }

    #[test]
    fn rng_stays_in_range() {
        let mut r = Rng::new(1);
        for _ in 0..1000 {
            assert!(r.below(7) < 7);
            let d = r.duration(Duration::from_millis(10), Duration::from_millis(20));
            assert!(d >= Duration::from_millis(10) && d < Duration::from_millis(20));
        }
    }
}
