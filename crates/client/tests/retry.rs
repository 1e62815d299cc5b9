//! Reconnection and retries: idempotent requests survive a lost connection, others are never
//! sent twice.

use crate::common;

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use common::{runtime, start, Scratch};
use iosets_client::{BlockingClient, Client, ClientConfig, ClientError, JobId};
use iosets_proto::{encode, Frame, Reply, Request, Response};

fn quick_retries() -> ClientConfig {
    let mut c = ClientConfig::new(JobId(3));
    c.retries = 4;
    c.backoff = Duration::from_millis(10);
    c.max_backoff = Duration::from_millis(100);
    c
}

/// A server restarted on the same port (same root) serves the same client again: the client
/// reconnects, and reads and writes at an offset go through.
#[test]
fn reads_work_after_a_server_restart_on_the_same_port() {
    let scratch = Scratch::new("restart");
    let root = scratch.sub("root");
    let first = start(&root, None);
    let addr = first.addr();
    let client = BlockingClient::connect(&[addr], quick_retries()).unwrap();
    client.create("f", 0o644, false).unwrap();
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    client.write_at("f", 0, data.clone()).unwrap();
    assert!(client.read_at("f", 0, data.len()).unwrap() == data);

    first.shutdown().unwrap();
    let second = start(&root, Some(addr));
    assert!(
        client.read_at("f", 0, data.len()).unwrap() == data,
        "read after the restart differs"
    );
    client.write_at("f", 10, vec![0u8; 10]).unwrap();
    assert_eq!(client.lookup("f").unwrap().size, data.len() as u64);
    drop(client);
    second.shutdown().unwrap();
}

/// Whether the `/metrics` of the server at `admin` has an `iosets_job_info` line for `name`.
fn job_info(admin: Option<SocketAddr>, name: &str) -> bool {
    let mut http = TcpStream::connect(admin.expect("an admin address")).unwrap();
    http.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut http, &mut text).unwrap();
    text.contains(&format!("job_name=\"{name}\"}} 1"))
}

/// A job's name goes to each server before the job's first request there, and again on a new
/// connection: a restarted server knows it as soon as the job sends again.
#[test]
fn a_jobs_name_is_told_again_after_a_server_restart() {
    let scratch = Scratch::new("restart-name");
    let root = scratch.sub("root");
    let first = start(&root, None);
    let addr = first.addr();
    let job = JobId::of_name("ior.1000").unwrap();
    let mut cfg = quick_retries();
    cfg.job = job;
    let client = BlockingClient::connect(&[addr], cfg).unwrap();
    // A name that is not the job's is not kept (and so never sent).
    client.name_job(job, "mdtest.1000");
    client.create("f", 0o644, false).unwrap();
    assert!(!job_info(first.admin_addr(), "mdtest.1000"));
    client.name_job(job, "ior.1000");
    client.write_at("f", 0, vec![1u8; 4096]).unwrap();
    assert!(
        job_info(first.admin_addr(), "ior.1000"),
        "the first server knows the name"
    );
    first.shutdown().unwrap();
    let second = start(&root, Some(addr));
    assert!(
        !job_info(second.admin_addr(), "ior.1000"),
        "a new server knows nothing yet"
    );
    client.write_at("f", 0, vec![2u8; 4096]).unwrap();
    assert!(
        job_info(second.admin_addr(), "ior.1000"),
        "told again on the new connection"
    );
    drop(client);
    second.shutdown().unwrap();
}

/// With no server at all, the client gives up after its retries with a connection error.
#[test]
fn no_server_is_a_connect_error_after_bounded_retries() {
    let scratch = Scratch::new("gone");
    let server = start(&scratch.sub("root"), None);
    let addr = server.addr();
    let client = BlockingClient::connect(&[addr], quick_retries()).unwrap();
    client.create("f", 0o644, false).unwrap();
    server.shutdown().unwrap();
    match client.read_at("f", 0, 10) {
        Err(ClientError::Connect { server, .. }) => assert_eq!(server, addr),
        other => panic!("expected a connect error, got {other:?}"),
    }
}

/// A fake server that reads request frames and, on each of its first `drop_first` connections,
/// closes the connection after the first frame without answering; later frames get `reply`
/// (none: never answered, the connection kept open).
struct Fake {
    addr: SocketAddr,
    frames: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn read_frame(s: &mut TcpStream) -> Option<Frame> {
    iosets_proto::io::read_frame_blocking(s, iosets_proto::DEFAULT_MAX_FRAME).ok()
}

impl Fake {
    fn start(drop_first: usize, reply: Option<Reply>) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let frames = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (f, st) = (frames.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut conns = 0;
            for stream in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut s) = stream else { continue };
                conns += 1;
                let dropping = conns <= drop_first;
                let (f, reply) = (f.clone(), reply.clone());
                std::thread::spawn(move || {
                    while let Some(Frame::Request(h, req)) = read_frame(&mut s) {
                        // A phase end follows an answered request when the job has nothing
                        // left in flight: not one of the requests these tests count (it made
                        // them flaky on a loaded machine).
                        if !matches!(req, Request::PhaseEnd) {
                            f.fetch_add(1, Ordering::SeqCst);
                        }
                        if dropping {
                            return; // closes the connection, the request unanswered
                        }
                        let Some(reply) = &reply else { continue };
                        let resp = Frame::Response(h, req.op(), Response::Ok(reply.clone()));
                        if s.write_all(&encode(&resp).to_vec()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Fake {
            addr,
            frames,
            stop,
            thread: Some(thread),
        }
    }

    fn frames(&self) -> usize {
        self.frames.load(Ordering::SeqCst)
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wakes the accept loop
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn an_idempotent_request_is_sent_again_after_a_lost_connection() {
    let fake = Fake::start(1, Some(Reply::Data(vec![5u8; 4].into())));
    let rt = runtime();
    rt.block_on(async {
        let client = Client::connect(&[fake.addr], quick_retries())
            .await
            .unwrap();
        let got = client.read_at("f", 0, 4).await.unwrap();
        assert_eq!(&got[..], &[5u8; 4]);
    });
    // Once on the dropped connection, once more on the new one.
    assert_eq!(fake.frames(), 2);
}

#[test]
fn a_non_idempotent_request_is_not_sent_again() {
    let fake = Fake::start(
        1,
        Some(Reply::Attr(iosets_proto::Attr::new(
            iosets_proto::FileKind::Dir,
            0,
            0o755,
        ))),
    );
    let rt = runtime();
    let err = rt.block_on(async {
        let client = Client::connect(&[fake.addr], quick_retries())
            .await
            .unwrap();
        let req = Request::Mkdir {
            path: "d".into(),
            mode: 0o755,
        };
        assert!(!req.is_idempotent());
        client.mkdir("d", 0o755).await.unwrap_err()
    });
    assert!(matches!(err, ClientError::ConnectionLost { .. }), "{err:?}");
    assert_eq!(fake.frames(), 1, "the mkdir was sent again");
    // The next request goes out on a new connection and is answered.
    rt.block_on(async {
        let client = Client::connect(&[fake.addr], quick_retries())
            .await
            .unwrap();
        client.mkdir("d", 0o755).await.unwrap();
    });
    assert_eq!(fake.frames(), 2);
}

/// A server's frame larger than the client's maximum is refused on its length prefix: the
/// connection is dropped and the request fails (after its retries), without allocating it.
#[test]
fn an_oversized_response_is_refused() {
    let fake = Fake::start(0, Some(Reply::Data(vec![0u8; 256 * 1024].into())));
    let mut cfg = quick_retries();
    cfg.chunk_size = 64 * 1024;
    cfg.max_frame = 128 * 1024;
    cfg.retries = 1;
    let rt = runtime();
    let err = rt.block_on(async {
        let client = Client::connect(&[fake.addr], cfg).await.unwrap();
        client.read_at("f", 0, 10).await.unwrap_err()
    });
    match err {
        ClientError::ConnectionLost { reason, .. } => {
            assert!(reason.contains("exceeds the maximum"), "{reason}")
        }
        other => panic!("expected a refused frame, got {other:?}"),
    }
    assert_eq!(fake.frames(), 2, "read sent once, and once more");
}

/// A real server (number 0, over `root`) beside one that reads frames and never answers
/// (number 1), and a client of both without retries whose requests give up after `timeout`
/// (none: they wait).
struct HalfSilent {
    _scratch: Scratch,
    root: std::path::PathBuf,
    server: iosets_server::ServerHandle,
    silent: Fake,
    cfg: ClientConfig,
}

impl HalfSilent {
    fn new(name: &str, timeout: Option<Duration>) -> HalfSilent {
        let scratch = Scratch::new(name);
        let root = scratch.sub("root");
        let server = start(&root, None);
        let silent = Fake::start(0, None);
        let mut cfg = quick_retries();
        cfg.retries = 0;
        cfg.request_timeout = timeout;
        HalfSilent {
            _scratch: scratch,
            root,
            server,
            silent,
            cfg,
        }
    }

    async fn client(&self) -> Client {
        Client::connect(&[self.server.addr(), self.silent.addr], self.cfg.clone())
            .await
            .unwrap()
    }
}

/// One of the names `PREFIX0` … `PREFIX63` whose home is server `home`.
fn homed_at(client: &Client, prefix: &str, home: usize) -> String {
    (0..64)
        .map(|i| format!("{prefix}{i}"))
        .find(|n| client.layout().home(n) == home)
        .expect("one of 64 names has each of two servers as its home")
}

/// A stat asks every server at once (one round trip over several servers, not two), and the
/// home server's answer decides when it is not a regular file: a directory's attributes come
/// back while another server holds the same request unanswered.
#[test]
fn a_stat_asks_every_server_at_once_and_a_directory_waits_for_its_home_only() {
    let h = HalfSilent::new("stat-at-once", None);
    let rt = runtime();
    rt.block_on(async {
        let client = h.client().await;
        // A directory whose home is the real server (index 0), made there directly.
        let dir = homed_at(&client, "d", 0);
        std::fs::create_dir(h.root.join(&dir)).unwrap();
        for (op, attr) in [
            ("lstat", client.lstat(&dir).await),
            ("lookup", client.lookup(&dir).await),
        ] {
            let attr = attr.unwrap_or_else(|e| panic!("{op} of {dir}: {e}"));
            assert_eq!(attr.kind, iosets_proto::FileKind::Dir, "{op}");
        }
    });
    // Both were sent to the silent server too, together with the home's (bounded wait: the
    // frames may still be in flight when the home answered).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while h.silent.frames() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        h.silent.frames(),
        2,
        "the other server was not asked at once"
    );
}

/// A create asks every server at once: the other server gets its part while the home server
/// has not answered yet (here: never; the create then fails when its time is up). With O_EXCL
/// the home server judges alone first: over an existing symbolic link nothing is made.
#[test]
fn a_create_asks_every_server_at_once_and_o_excl_never_follows_a_link() {
    let h = HalfSilent::new("create-at-once", Some(Duration::from_millis(500)));
    let rt = runtime();
    rt.block_on(async {
        let client = h.client().await;
        let name = homed_at(&client, "f", 1);
        let e = client.create_entry(&name, 0o644, false).await.unwrap_err();
        assert!(e.to_string().contains("no response within"), "{e}");
        // The part on the answering server was made together with the home's request.
        let made = h.root.join(&name).is_file();
        assert!(made, "the other server was not asked at once");
    });

    // Two real servers, separate roots: `l` is a link to a missing `t` on both.
    let scratch = Scratch::new("create-excl");
    let roots = [scratch.sub("a"), scratch.sub("b")];
    let servers: Vec<_> = roots.iter().map(|r| start(r, None)).collect();
    for r in &roots {
        std::os::unix::fs::symlink("t", r.join("l")).unwrap();
    }
    rt.block_on(async {
        let addrs: Vec<_> = servers.iter().map(|s| s.addr()).collect();
        let client = Client::connect(&addrs, quick_retries()).await.unwrap();
        let e = client.create_entry("l", 0o644, true).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
        // Without O_EXCL a create goes through the link, on every server, as open(2) does.
        client.create_entry("l", 0o644, false).await.unwrap();
    });
    for r in &roots {
        assert!(r.join("t").is_file());
    }
    for s in servers {
        s.shutdown().unwrap();
    }
}

/// A listing with attributes asks every server at once; when a server other than the
/// directory's home does not answer, the listing still comes (from the home server), and the
/// entries that server would have told something of (its own, every file's size) come without
/// attributes, to be asked one by one.
#[test]
fn a_listing_with_attributes_survives_a_silent_server() {
    let h = HalfSilent::new("plus-silent", Some(Duration::from_millis(300)));
    let rt = runtime();
    rt.block_on(async {
        let client = h.client().await;
        let dir = homed_at(&client, "d", 0);
        std::fs::create_dir(h.root.join(&dir)).unwrap();
        for i in 0..8 {
            std::fs::create_dir(h.root.join(format!("{dir}/sub{i}"))).unwrap();
            std::fs::write(h.root.join(format!("{dir}/f{i}")), b"abc").unwrap();
        }
        let listing = client.readdir_plus(&dir).await.unwrap();
        assert_eq!(listing.len(), 16);
        for (e, a) in &listing {
            let own_home = client.layout().home(&format!("{dir}/{}", e.name));
            match (e.kind, a) {
                (iosets_proto::FileKind::File, a) => assert!(a.is_none(), "{}", e.name),
                (iosets_proto::FileKind::Dir, Some(a)) => {
                    assert_eq!(own_home, 0, "{}", e.name);
                    assert_eq!(a.kind, iosets_proto::FileKind::Dir);
                }
                (iosets_proto::FileKind::Dir, None) => assert_eq!(own_home, 1, "{}", e.name),
                other => panic!("{other:?}"),
            }
        }
    });
}
