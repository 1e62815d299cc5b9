//! A raw protocol client for the server's tests (no client library: the tests see the wire).
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use iosets_proto::io::{read_frame_blocking, write_frame_blocking, ReadError};
use iosets_proto::{
    encode, Bytes, Control, Frame, Header, Reply, Request, Response, DEFAULT_MAX_FRAME,
};
use iosets_server::{Server, ServerConfig, ServerHandle};
use iosets_types::{JobId, Priority};

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

/// A fresh empty directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "iosets-server-test-{}-{}-{}",
            std::process::id(),
            name,
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server on loopback (no credentials needed) serving a fresh root named after `name`, its
/// configuration changed by `tune` first; the root lives as long as the returned [`TempDir`].
pub fn serve(name: &str, tune: impl FnOnce(&mut ServerConfig)) -> (TempDir, ServerHandle) {
    let root = TempDir::new(name);
    let mut config = ServerConfig::new(&root.0).with_insecure_loopback();
    tune(&mut config);
    let server = Server::start(config).unwrap();
    (root, server)
}

/// One connection; requests may be pipelined (`send` then `recv`).
pub struct Conn {
    pub stream: TcpStream,
    pub job: u64,
    pub priority: Option<f64>,
    /// The caller's user and group the requests carry (what quota rules match `uid=`/`gid=` on).
    pub creds: Option<iosets_proto::Creds>,
    next_tag: u64,
}

impl Conn {
    pub fn connect(addr: SocketAddr, job: u64) -> Conn {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        Conn::from_stream(stream, job)
    }

    /// A connection over `stream` (e.g. a clone, to send from another thread).
    pub fn from_stream(stream: TcpStream, job: u64) -> Conn {
        Conn {
            stream,
            job,
            priority: None,
            creds: None,
            next_tag: 1,
        }
    }

    /// Sends `req`; returns its tag.
    pub fn send(&mut self, req: Request) -> u64 {
        let tag = self.next_tag;
        self.next_tag += 1;
        let h = Header {
            priority: self.priority.and_then(Priority::new),
            creds: self.creds,
            ..Header::new(tag, JobId(self.job))
        };
        let enc = encode(&Frame::Request(h, req));
        write_frame_blocking(&mut self.stream, &enc).unwrap();
        tag
    }

    /// The next response: (tag, response); `None` when the server closed the connection.
    pub fn recv(&mut self) -> Option<(u64, Response)> {
        match read_frame_blocking(&mut self.stream, DEFAULT_MAX_FRAME) {
            Ok(Frame::Response(h, _, r)) => Some((h.tag, r)),
            Ok(f) => panic!("server sent a request: {f:?}"),
            Err(ReadError::Closed) => None,
            Err(e) => panic!("reading an answer: {e}"),
        }
    }

    /// Sends and waits for the answer.
    pub fn call(&mut self, req: Request) -> Response {
        let tag = self.send(req);
        let (t, r) = self.recv().expect("connection closed");
        assert_eq!(t, tag);
        r
    }

    pub fn ok(&mut self, req: Request) -> Reply {
        match self.call(req.clone()) {
            Response::Ok(r) => r,
            Response::Err { errno, message } => panic!("{req:?} failed: {errno} {message}"),
        }
    }

    pub fn errno(&mut self, req: Request) -> (i32, String) {
        match self.call(req.clone()) {
            Response::Err { errno, message } => (errno, message),
            Response::Ok(r) => panic!("{req:?} should have failed, got {r:?}"),
        }
    }

    pub fn control(&mut self, token: &str, op: Control) -> Response {
        self.call(Request::Control {
            token: token.into(),
            op,
        })
    }

    /// Sets `job`'s priority to `priority` through the control channel; panics unless done.
    pub fn set_priority(&mut self, token: &str, job: u64, priority: f64) {
        let r = self.control(
            token,
            Control::SetPriority {
                job: JobId(job),
                priority: Priority::new(priority).unwrap(),
            },
        );
        assert_eq!(
            r,
            Response::Ok(Reply::Done),
            "set_priority {job} {priority}"
        );
    }

    /// Sends all of `reqs` pipelined, then collects every answer by tag.
    pub fn pipeline(&mut self, reqs: Vec<Request>) -> HashMap<u64, Response> {
        let tags: Vec<u64> = reqs.into_iter().map(|r| self.send(r)).collect();
        let mut out = HashMap::new();
        for _ in &tags {
            let (t, r) = self.recv().expect("connection closed");
            out.insert(t, r);
        }
        out
    }
}

pub fn create(path: &str) -> Request {
    Request::Create {
        path: path.into(),
        mode: 0o644,
        exclusive: false,
    }
}

pub fn write(path: &str, offset: u64, data: Vec<u8>) -> Request {
    Request::Write {
        path: path.into(),
        offset,
        data: Bytes::from(data),
    }
}

pub fn read(path: &str, offset: u64, len: u32) -> Request {
    Request::Read {
        path: path.into(),
        offset,
        len,
    }
}

/// The JSON report of a control reply.
pub fn json<T: serde::de::DeserializeOwned>(r: Response) -> T {
    match r {
        Response::Ok(Reply::Json(t)) => serde_json::from_str(&t).unwrap(),
        r => panic!("{r:?}"),
    }
}

/// The server's `/metrics` page (Prometheus text), checked to be a 200.
pub fn metrics(addr: SocketAddr) -> String {
    let mut http = TcpStream::connect(addr).unwrap();
    http.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    http.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    text
}

/// What follows `series ` on the line of `/metrics` text that starts with it (the series' name
/// and labels exactly as exported), if there is one.
pub fn sample<'a>(text: &'a str, series: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
}

/// The value of the metric line starting with `series ` (0 if absent).
pub fn value(text: &str, series: &str) -> f64 {
    sample(text, series).map_or(0.0, |v| v.trim().parse().unwrap())
}

/// The value of the metric line starting with `series ` (its name and labels exactly as
/// exported), read as a `T`; panics naming the series if there is none or it is not a `T`.
pub fn required<T: std::str::FromStr>(text: &str, series: &str) -> T {
    let v = sample(text, series).and_then(|v| v.trim().parse().ok());
    v.unwrap_or_else(|| panic!("{series} missing from /metrics (or not a number)"))
}

/// The refusals for `reason` counted on the `/metrics` page at `admin`.
pub fn refusals(admin: SocketAddr, reason: &str) -> f64 {
    value(
        &metrics(admin),
        &format!("iosets_refusals_total{{reason=\"{reason}\"}}"),
    )
}

/// Waits (at most 30 s) until `cond` holds; panics with `what` otherwise.
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < end, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Keeps `depth` writes of `size` bytes outstanding for `job` until `until`, then waits for the
/// last answers; with `creds`, as that user (the file `job<job>` must be writable by them).
/// Returns the number of writes acknowledged.
pub fn saturate(
    addr: SocketAddr,
    job: u64,
    creds: Option<iosets_proto::Creds>,
    size: usize,
    depth: usize,
    until: Instant,
) -> u64 {
    let mut c = Conn::connect(addr, job);
    c.creds = creds;
    let mut sender = Conn::from_stream(c.stream.try_clone().unwrap(), job);
    sender.creds = creds;
    let (credit_tx, credit_rx) = std::sync::mpsc::channel::<()>();
    let (total_tx, total_rx) = std::sync::mpsc::channel::<u64>();
    for _ in 0..depth {
        credit_tx.send(()).unwrap();
    }
    let path = format!("job{job}");
    let send = std::thread::spawn(move || {
        let mut sent = 0u64;
        while Instant::now() < until {
            if credit_rx.recv_timeout(Duration::from_millis(20)).is_err() {
                continue;
            }
            let offset = (sent % 256) * size as u64;
            sender.send(write(&path, offset, vec![job as u8; size]));
            sent += 1;
        }
        // A last request whose answer tells the reader that nothing more is coming.
        total_tx.send(sent).unwrap();
        sender.send(iosets_proto::Request::Fsync { path });
    });
    let (mut acked, mut total) = (0u64, None);
    while total != Some(acked) {
        let (_, r) = c.recv().expect("answer");
        match r {
            Response::Ok(Reply::Written(_)) => {
                acked += 1;
                let _ = credit_tx.send(());
            }
            Response::Ok(Reply::Done) => total = Some(total_rx.recv().unwrap()),
            r => panic!("{r:?}"),
        }
    }
    send.join().unwrap();
    acked
}

/// One served write of a server's trace.
pub struct Served {
    pub job: u64,
    pub bytes: u64,
    pub dispatch_s: f64,
    pub complete_s: f64,
}

/// The (dispatch, completion) times, in seconds, of job `job`'s requests in `served`.
pub fn intervals(served: &[Served], job: u64) -> Vec<(f64, f64)> {
    served
        .iter()
        .filter(|s| s.job == job)
        .map(|s| (s.dispatch_s, s.complete_s))
        .collect()
}

/// The writes of the server's trace file `path`.
pub fn read_trace(path: &std::path::Path) -> Vec<Served> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    // The trace opens with its clock's UNIX zero, then the header.
    assert!(lines
        .next()
        .unwrap()
        .starts_with(iosets_period::trace::requests::CLOCK_ZERO));
    assert_eq!(
        lines.next().unwrap(),
        "job,tag,op,path,offset,len,arrival_ns,dispatch_ns,complete_ns,errno"
    );
    lines
        .filter(|l| l.split(',').nth(2) == Some("write"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f[9], "0", "{l}");
            Served {
                job: f[0].parse().unwrap(),
                bytes: f[5].parse().unwrap(),
                dispatch_s: f[7].parse::<f64>().unwrap() / 1e9,
                complete_s: f[8].parse::<f64>().unwrap() / 1e9,
            }
        })
        .collect()
}
