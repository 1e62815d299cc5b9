//! Hostile and unlucky clients (issue 16): a client that never reads, silent and trickling
//! connections, a flood of connections at the cap, frames announced but not sent, many large
//! requests at once, peers without the cluster secret or off the host, and inflated priority
//! hints. Each is bounded by the server; everyone else is still served.

use crate::common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{create, eventually, json, metrics, read, refusals, value, write, Conn, TempDir};
use iosets_client::{BlockingClient, ClientConfig, ClientError, Secret};
use iosets_proto::{
    encode, Control, Frame, Header, JobsReport, Reply, Request, Response, RulesReport,
};
use iosets_server::{HintPolicy, Server, ServerConfig};
use iosets_types::{JobId, Priority};

const EACCES: i32 = 13;
const TOKEN: &str = "hostile-test-token";

/// Whether the server closed `s` (EOF or reset) within 30 s, reading and dropping whatever it
/// sent before.
fn closed_by_server(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn a_client_that_never_reads_is_stopped_by_backpressure() {
    // D1: error answers to undecodable frames were queued without bound. Now each holds the
    // frame's slot until written, so the server stops reading a client that does not read.
    // (On this kernel the old server also stopped reading such a client, at about 76,000
    // frames, so this pins the behaviour rather than reproducing the defect; the soak suite's
    // `noread` probe measures the memory.)
    let (_root, server) = common::serve("hostile-noread", |config| {
        config.max_inflight_per_conn = 16;
    });
    let mut flood = TcpStream::connect(server.addr()).unwrap();
    // Never read; write bad frames (a wrong version) until the server stops taking them.
    let mut frame = 48u32.to_le_bytes().to_vec();
    frame.extend_from_slice(&[9u8; 48]);
    let batch: Vec<u8> = frame
        .iter()
        .copied()
        .cycle()
        .take(frame.len() * 8192)
        .collect();
    flood.set_nonblocking(true).unwrap();
    const CEILING: usize = 256 << 20;
    let (mut sent, mut stuck_since) = (0usize, None::<Instant>);
    while sent < CEILING {
        match flood.write(&batch) {
            Ok(n) => {
                sent += n;
                stuck_since = None;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let since = *stuck_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_secs(2) {
                    break; // the server has stopped reading
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("{e}"),
        }
    }
    // Socket buffers on both sides hold a few MB; the server itself holds 16 answers.
    assert!(
        sent < 64 << 20,
        "the server kept reading a client that never reads: {sent} bytes taken"
    );
    // Everyone else is served meanwhile.
    let mut good = Conn::connect(server.addr(), 1);
    good.ok(create("f"));
    good.ok(write("f", 0, b"still here".to_vec()));
    drop(flood);
    assert!(server.shutdown().unwrap().balanced);
}

#[test]
fn silent_and_trickling_connections_are_closed() {
    let (_root, server) = common::serve("hostile-timeouts", |config| {
        config.idle_timeout_s = 0.5;
        config.frame_timeout_s = 0.5;
    });
    let admin = server.admin_addr().unwrap();
    // Silent from the start.
    let mut silent = TcpStream::connect(server.addr()).unwrap();
    // Silent after a request.
    let mut after = Conn::connect(server.addr(), 1);
    after.ok(create("f"));
    // A frame trickled a byte at a time, far slower than the frame timeout allows.
    let mut slow = TcpStream::connect(server.addr()).unwrap();
    slow.write_all(&1000u32.to_le_bytes()).unwrap();
    let mut trickled = 0;
    while trickled < 20 && slow.write_all(&[0]).is_ok() {
        trickled += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(trickled < 20 || closed_by_server(&mut slow));
    assert!(closed_by_server(&mut silent), "a silent connection stays");
    assert!(
        closed_by_server(&mut after.stream),
        "an idle connection stays"
    );
    assert!(refusals(admin, "idle_timeout") >= 2.0);
    assert!(refusals(admin, "frame_timeout") >= 1.0);
    // A new connection is served as usual.
    let mut good = Conn::connect(server.addr(), 2);
    good.ok(create("g"));
    assert!(server.shutdown().unwrap().balanced);
}

#[test]
fn at_the_connection_cap_the_longest_idle_connection_makes_room() {
    let (_root, server) = common::serve("hostile-cap", |config| {
        config.max_connections = Some(8);
    });
    let admin = server.admin_addr().unwrap();
    // Opened a few milliseconds apart: the first is the one idle the longest.
    let mut silent: Vec<TcpStream> = (0..8)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(5));
            TcpStream::connect(server.addr()).unwrap()
        })
        .collect();
    // Let the server accept them all.
    eventually("8 connections open", || {
        value(&metrics(admin), "iosets_connections_open") >= 8.0
    });
    let mut good = Conn::connect(server.addr(), 3);
    good.ok(create("f"));
    good.ok(write("f", 0, b"abc".to_vec()));
    match good.ok(read("f", 0, 3)) {
        Reply::Data(d) => assert_eq!(&d[..], b"abc"),
        r => panic!("{r:?}"),
    }
    let text = metrics(admin);
    assert!(value(&text, "iosets_connections_evicted_total") >= 1.0);
    assert!(value(&text, "iosets_connections_open") <= 8.0);
    // The first silent connection was the one idle the longest: closed.
    assert!(closed_by_server(&mut silent[0]));
    assert!(server.shutdown().unwrap().balanced);
}

#[test]
fn in_flight_bytes_are_bounded_per_connection_and_per_server() {
    // D8: backpressure counted requests (256 per connection), not bytes.
    let root = TempDir::new("hostile-bytes");
    let mut config = ServerConfig::new(&root.0).with_insecure_loopback();
    config.token = Some(TOKEN.into());
    config.max_inflight_bytes_per_conn = 1 << 20;
    config.max_inflight_bytes = 3 << 19; // 1.5 MiB for the whole server
    config
        .set_quota_toml(
            "[[rule]]\nname = \"hold\"\nmatch = \"job=5\"\nrate_ops = 0.001\nstrict = true\n",
        )
        .unwrap();
    let server = Server::start(config).unwrap();
    let admin = server.admin_addr().unwrap();
    let mut setup = Conn::connect(server.addr(), 1);
    setup.ok(create("f"));
    // Two connections of job 5 each pipeline 16 writes of 256 KiB; the rule holds them.
    let chunk = vec![7u8; 256 << 10];
    let mut conns: Vec<Conn> = (0..2).map(|_| Conn::connect(server.addr(), 5)).collect();
    let senders: Vec<_> = conns
        .iter()
        .map(|c| {
            let mut c = Conn::from_stream(c.stream.try_clone().unwrap(), 5);
            let chunk = chunk.clone();
            std::thread::spawn(move || {
                for i in 0..16u64 {
                    c.send(write("f", i * (256 << 10), chunk.clone()));
                }
            })
        })
        .collect();
    let rules = |setup: &mut Conn| -> RulesReport { json(setup.control(TOKEN, Control::Rules)) };
    // Let the server take all it will take.
    let mut last = (u64::MAX, u64::MAX);
    eventually("the server to stop taking requests", || {
        std::thread::sleep(Duration::from_millis(300));
        let r = rules(&mut setup);
        let now = (r.rules[0].matched_total, r.rules[0].held);
        let settled = now == last && now.0 > 0;
        last = now;
        settled
    });
    let r = rules(&mut setup);
    let inside = r.rules[0].held + r.rules[0].in_service;
    // 257 KiB per frame: 5 fit in 1.5 MiB (and 3 per connection).
    assert!(
        (1..=5).contains(&inside),
        "{inside} requests of 256 KiB in a server bounded at 1.5 MiB"
    );
    let inflight = value(&metrics(admin), "iosets_inflight_bytes");
    assert!(inflight <= 1.5 * 1048576.0 && inflight > 0.0, "{inflight}");
    // Lift the hold: all 32 writes are served, none lost.
    match setup.control(
        TOKEN,
        Control::RuleDel {
            name: "hold".into(),
        },
    ) {
        Response::Ok(Reply::Done) => {}
        r => panic!("{r:?}"),
    }
    for s in senders {
        s.join().unwrap();
    }
    for c in &mut conns {
        for _ in 0..16 {
            match c.recv().expect("an answer") {
                (_, Response::Ok(Reply::Written(n))) => assert_eq!(n, 256 << 10),
                r => panic!("{r:?}"),
            }
        }
    }
    assert!(server.shutdown().unwrap().balanced);
}

fn secret_file(dir: &TempDir, name: &str, text: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.0.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

#[test]
fn only_clients_proving_the_cluster_secret_are_served() {
    let root = TempDir::new("hostile-auth");
    let keys = TempDir::new("hostile-auth-keys");
    let good = secret_file(&keys, "good", "0123456789abcdef0123456789abcdef\n");
    let bad = secret_file(&keys, "bad", "fedcba9876543210fedcba9876543210\n");
    let mut config = ServerConfig::new(&root.0);
    config.auth = Some(iosets_server::read_auth_file(&good).unwrap());
    config.token = Some(TOKEN.into());
    let server = Server::start(config).unwrap();
    let admin = server.admin_addr().unwrap();
    let addr = server.addr().to_string();
    let client = |secret: Option<Secret>, local: bool| {
        let mut cfg = ClientConfig::new(JobId(4));
        cfg.auth = secret;
        cfg.retries = 0;
        cfg.local = local;
        BlockingClient::connect_to(&[addr.as_str()], cfg)
    };
    // The right secret, over TCP and over the same-host transport (a 1 MiB write goes through
    // the shared region, on a Unix socket that is authenticated too).
    for local in [false, true] {
        let c = client(Some(iosets_server::read_auth_file(&good).unwrap()), local).unwrap();
        let name = format!("f{local}");
        c.create(&name, 0o644, false).unwrap();
        let data = vec![local as u8 + 1; 1 << 20];
        assert_eq!(
            c.write_at(&name, 0, data.clone()).unwrap(),
            data.len() as u64
        );
        assert_eq!(&c.read_at(&name, 0, 1 << 20).unwrap()[..], &data[..]);
    }
    // A wrong secret: the handshake fails, and says so.
    match client(Some(iosets_server::read_auth_file(&bad).unwrap()), false)
        .and_then(|c| c.lookup("f"))
    {
        Err(ClientError::Auth { reason, .. }) => {
            assert!(reason.contains("authentication failed"), "{reason}")
        }
        r => panic!("{r:?}"),
    }
    // No secret: refused with EACCES and a message that says what to do.
    match client(None, false).and_then(|c| c.lookup("f")) {
        Err(ClientError::Errno { errno, message, .. }) => {
            assert_eq!(errno, EACCES);
            assert!(message.contains("IOSETS_AUTH_FILE"), "{message}");
        }
        r => panic!("{r:?}"),
    }
    // A raw peer that answers the challenge with a made-up proof.
    let mut raw = TcpStream::connect(server.addr()).unwrap();
    let mut conn = Conn::from_stream(raw.try_clone().unwrap(), 9);
    match conn.recv() {
        Some((0, Response::Ok(Reply::Challenge { .. }))) => {}
        r => panic!("{r:?}"),
    }
    conn.send(Request::Auth {
        nonce: [1; 32],
        proof: [2; 32],
    });
    match conn.recv() {
        Some((_, Response::Err { errno: EACCES, .. })) => {}
        r => panic!("{r:?}"),
    }
    assert!(closed_by_server(&mut raw));
    assert!(refusals(admin, "auth_failed") >= 2.0);
    assert!(refusals(admin, "auth_missing") >= 1.0);
    // Control needs the connection's proof and the token: a wrong token is refused and logged.
    let mut cfg = ClientConfig::new(JobId(0));
    cfg.auth = Some(iosets_server::read_auth_file(&good).unwrap());
    let ctl = BlockingClient::connect_to(&[addr.as_str()], cfg).unwrap();
    assert!(matches!(
        ctl.control(0, "wrong", Control::Stats),
        Err(ClientError::Errno { errno: EACCES, .. })
    ));
    assert!(matches!(
        ctl.control(0, TOKEN, Control::Stats),
        Ok(Reply::Json(_))
    ));
    assert!(refusals(admin, "control_token") >= 1.0);
    // An HTTP scrape sent to the data port (no secret: it cannot prove one) is pointed to the
    // admin address in plain HTTP, not sent a binary challenge. The server tells it by its
    // speaking first, within 20 ms of connecting: a test thread descheduled longer between its
    // connect and its write gets the challenge, so a few tries are allowed (each must end with
    // the connection closed, never a hang).
    let answers: Vec<String> = (0..5)
        .map(|_| {
            let mut http = TcpStream::connect(server.addr()).unwrap();
            http.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            let mut bytes = Vec::new();
            let _ = http.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .collect();
    assert!(
        answers.iter().any(|text| text.starts_with("HTTP/1.1 421")
            && text.contains(&format!("http://{admin}/metrics"))),
        "{answers:?}"
    );
    assert!(server.shutdown().unwrap().balanced);
}

/// A non-loopback address of this host, if it has one (no packet is sent: a UDP socket is only
/// connected, to learn the route's source address).
fn host_address() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("10.255.255.255:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn without_a_secret_no_tcp_client_is_served_on_loopback_neither() {
    let root = TempDir::new("hostile-nosecret");
    std::fs::write(root.0.join("private"), b"root only").unwrap();
    let server = Server::start(ServerConfig::new(&root.0)).unwrap();
    let admin = server.admin_addr().unwrap();
    // A loopback peer (any local user could be it) is answered EACCES, with what to do, and
    // closed; its request is not served.
    let mut peer = Conn::connect(server.addr(), 1);
    let tag = peer.send(write("private", 0, b"overwritten".to_vec()));
    match peer.recv() {
        Some((t, Response::Err { errno, message })) => {
            assert_eq!((t, errno), (tag, EACCES));
            assert!(message.contains("--insecure-loopback"), "{message}");
        }
        r => panic!("{r:?}"),
    }
    assert!(closed_by_server(&mut peer.stream));
    assert_eq!(refusals(admin, "unauthenticated"), 1.0);
    // The client library is told the same.
    let mut cfg = ClientConfig::new(JobId(2));
    cfg.retries = 0;
    let addr = server.addr().to_string();
    match BlockingClient::connect_to(&[addr.as_str()], cfg).and_then(|c| c.read_at("private", 0, 9))
    {
        Err(ClientError::Errno { errno, .. }) => assert_eq!(errno, EACCES),
        r => panic!("{r:?}"),
    }
    assert_eq!(std::fs::read(root.0.join("private")).unwrap(), b"root only");
    // This process reaches it through its handle, with no proof.
    let mut w = server.connect_in_process().unwrap();
    let mut r = w.try_clone().unwrap();
    w.write_all(&encode(&Frame::Request(header(1, None), read("private", 0, 9))).head)
        .unwrap();
    match iosets_proto::io::read_frame_blocking(&mut r, 1 << 20).unwrap() {
        Frame::Response(_, _, Response::Ok(Reply::Data(d))) => assert_eq!(&d[..], b"root only"),
        f => panic!("{f:?}"),
    }
    assert!(refusals(admin, "unauthenticated") >= 2.0);
    assert!(server.shutdown().unwrap().balanced);
}

#[test]
fn with_insecure_loopback_only_loopback_peers_are_served() {
    let Some(ip) = host_address() else {
        eprintln!("skipped: this host has no non-loopback address to connect from");
        return;
    };
    let (_root, server) = common::serve("hostile-loopback", |config| {
        config.listen = "0.0.0.0:0".into();
    });
    let port = server.addr().port();
    let admin = server.admin_addr().unwrap();
    assert!(
        admin.ip().is_loopback(),
        "the admin address defaults to loopback"
    );
    let mut off_host = TcpStream::connect((ip, port)).unwrap();
    let _ = off_host.write_all(&encode(&Frame::Request(header(1, None), create("x"))).head);
    assert!(closed_by_server(&mut off_host));
    assert_eq!(refusals(admin, "not_loopback"), 1.0);
    let mut local = Conn::connect(SocketAddr::from(([127, 0, 0, 1], port)), 1);
    local.ok(create("f"));
    assert!(server.shutdown().unwrap().balanced);
}

fn header(job: u64, priority: Option<f64>) -> Header {
    Header {
        priority: priority.and_then(Priority::new),
        ..Header::new(1, JobId(job))
    }
}

fn jobs_over_http(admin: SocketAddr) -> JobsReport {
    let mut s = TcpStream::connect(admin).unwrap();
    s.write_all(b"GET /jobs HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    serde_json::from_str(body).unwrap()
}

#[test]
fn priority_hints_are_capped_by_default_and_the_policy_is_the_servers() {
    for (hints, expect) in [
        (HintPolicy::default(), Some(1.0)),
        ("trust".parse().unwrap(), Some(1e300)),
        ("ignore".parse().unwrap(), None),
        ("cap=0.01".parse().unwrap(), Some(0.01)),
    ] {
        let (_root, server) = common::serve("hostile-hints", |config| {
            config.hints = hints;
        });
        let mut c = Conn::connect(server.addr(), 77);
        c.priority = Some(1e300);
        c.ok(create("f"));
        let report = jobs_over_http(server.admin_addr().unwrap());
        let job = report.jobs.iter().find(|j| j.job == 77).unwrap();
        assert_eq!(job.priority, expect, "{hints}");
        let overridden = value(
            &metrics(server.admin_addr().unwrap()),
            "iosets_hints_overridden_total",
        );
        assert_eq!(
            overridden,
            if hints == HintPolicy::Trust { 0.0 } else { 1.0 }
        );
        assert!(server.shutdown().unwrap().balanced);
    }
    for bad in ["cap=0", "cap=-1", "cap=x", "maybe", ""] {
        let e = bad.parse::<HintPolicy>().unwrap_err().to_string();
        assert!(e.contains("trust"), "{bad}: {e}");
    }
}

#[test]
fn clients_that_never_read_cannot_hold_the_servers_bytes_from_the_others() {
    // The server's byte budget full of answers nobody reads: their connections are closed
    // (after a second without progress), so a new client is served.
    let (_root, server) = common::serve("hostile-pressure", |config| {
        config.max_inflight_bytes = 4 << 20;
    });
    let admin = server.admin_addr().unwrap();
    let mut setup = Conn::connect(server.addr(), 1);
    setup.ok(create("big"));
    setup.ok(write("big", 0, vec![1u8; 64 << 10]));
    // Four connections each ask for 64 KiB reads, 256 at a time, and never read an answer.
    let flooders: Vec<TcpStream> = (0..4)
        .map(|_| {
            let s = TcpStream::connect(server.addr()).unwrap();
            let mut c = Conn::from_stream(s.try_clone().unwrap(), 2);
            std::thread::spawn(move || {
                for _ in 0..256 {
                    if c.stream
                        .write_all(&{
                            let h = header(2, None);
                            encode(&Frame::Request(h, read("big", 0, 64 << 10)))
                                .head
                                .to_vec()
                        })
                        .is_err()
                    {
                        return;
                    }
                }
            });
            s
        })
        .collect();
    eventually("the budget to fill, or the flooders to be closed", || {
        value(&metrics(admin), "iosets_inflight_bytes") >= 0.9 * 4.0 * 1048576.0
            || refusals(admin, "write_timeout") >= 1.0
    });
    // A new client is served, and the flooders are closed (after a second without progress
    // under pressure). The client may be served before the first close when the budget is at
    // 90 % but not yet full, so the close is awaited, not expected at once (it failed 1 run in
    // 6 under load when it was).
    let mut good = Conn::connect(server.addr(), 3);
    good.ok(create("f"));
    good.ok(write("f", 0, b"served".to_vec()));
    eventually("a flooder to be closed for making no progress", || {
        refusals(admin, "write_timeout") >= 1.0
    });
    drop(flooders);
    assert!(server.shutdown().unwrap().balanced);
}
