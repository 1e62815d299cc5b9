//! Issue 27 item 4: the server's in-flight byte budget is charged as a frame's bytes arrive,
//! with a share per frame, not on the length a frame announces. 32 connections announcing
//! 64 MiB frames and sending nothing (or a byte now and then) held the whole 2 GiB budget until
//! the 30 s frame timeout, and small requests of other clients got 0 of 4 answers meanwhile.
//! Through real sockets on loopback against a real server.

use crate::common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{create, eventually, metrics, read, refusals, value, write, Conn, TempDir};
use iosets_proto::{Reply, Request, Response};
use iosets_server::{Server, ServerConfig};

/// Samples `/metrics` every 20 ms until told to stop; answers the most in-flight bytes seen
/// and the most held by frames being received.
fn sampler(admin: SocketAddr, done: Arc<AtomicBool>) -> std::thread::JoinHandle<(f64, f64)> {
    std::thread::spawn(move || {
        let (mut inflight, mut receiving) = (0f64, 0f64);
        while !done.load(Ordering::Relaxed) {
            let text = metrics(admin);
            inflight = inflight.max(value(&text, "iosets_inflight_bytes"));
            receiving = receiving.max(value(&text, "iosets_receiving_bytes"));
            std::thread::sleep(Duration::from_millis(20));
        }
        (inflight, receiving)
    })
}

/// A frame's length prefix announcing `len` bytes.
fn announce(addr: SocketAddr, len: u32, first: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&len.to_le_bytes()).unwrap();
    s.write_all(first).unwrap();
    s
}

/// Four small requests (two stats, two 4 KiB reads): each answered, with its latency.
fn four_small_requests(c: &mut Conn) -> Vec<Duration> {
    let mut took = Vec::new();
    for i in 0..4 {
        let start = Instant::now();
        let reply = if i % 2 == 0 {
            c.ok(Request::Lookup {
                path: "small".into(),
            })
        } else {
            c.ok(read("small", 0, 4096))
        };
        took.push(start.elapsed());
        match reply {
            Reply::Attr(a) => assert_eq!(a.size, 4096),
            Reply::Data(d) => assert_eq!(&d[..], &[5u8; 4096][..]),
            r => panic!("{r:?}"),
        }
    }
    took
}

/// The well-behaved client of these tests (job 2), its file `small` written (4 KiB); its read
/// timeout is a hang guard only: the goal (and the measure) is well under a second.
fn good_client(addr: SocketAddr) -> Conn {
    let mut good = Conn::connect(addr, 2);
    good.stream
        .set_read_timeout(Some(Duration::from_secs(25)))
        .unwrap();
    good.ok(create("small"));
    good.ok(write("small", 0, vec![5u8; 4096]));
    good
}

#[test]
fn slow_announcements_hold_a_step_each_and_other_clients_are_answered() {
    // The attack at the server's defaults (2 GiB, 64 MiB frames): 32 connections
    // announce 64 MiB frames; half send 100 bytes and then nothing, half a byte every 100 ms.
    let root = TempDir::new("receiving-slow");
    let server = Server::start(ServerConfig::new(&root.0).with_insecure_loopback()).unwrap();
    let admin = server.admin_addr().unwrap();
    let mut good = good_client(server.addr());

    let done = Arc::new(AtomicBool::new(false));
    let silent: Vec<TcpStream> = (0..16)
        .map(|_| announce(server.addr(), 64 << 20, &[0u8; 100]))
        .collect();
    let tricklers: Vec<_> = (0..16)
        .map(|_| {
            let mut s = announce(server.addr(), 64 << 20, &[0u8; 1]);
            let done = done.clone();
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) && s.write_all(&[0]).is_ok() {
                    std::thread::sleep(Duration::from_millis(100));
                }
                s
            })
        })
        .collect();
    eventually("32 frames being received", || {
        value(&metrics(admin), "iosets_receiving_frames") >= 32.0
    });
    let watch = sampler(admin, done.clone());

    let took = four_small_requests(&mut good);
    // A large write of the same client gets through too, beside the 32 frames.
    let big: Vec<u8> = (0..(16u32 << 20)).map(|i| (i % 253) as u8).collect();
    let start = Instant::now();
    match good.ok(write("small", 0, big.clone())) {
        Reply::Written(n) => assert_eq!(n as usize, big.len()),
        r => panic!("{r:?}"),
    }
    let big_took = start.elapsed();
    let text = metrics(admin);
    let still = value(&text, "iosets_receiving_frames");
    let largest = value(&text, "iosets_receiving_largest_bytes");
    done.store(true, Ordering::Relaxed);
    let (max_inflight, max_receiving) = watch.join().unwrap();
    let worst = took.iter().max().unwrap();
    println!(
        "small requests under 32 slow 64 MiB announcements: {:?} (worst {:.1} ms); a 16 MiB \
         write {:.0} ms; receiving at most {:.0} KiB in all, largest {:.0} KiB; in flight at \
         most {:.0} KiB",
        took,
        worst.as_secs_f64() * 1e3,
        big_took.as_secs_f64() * 1e3,
        max_receiving / 1024.0,
        largest / 1024.0,
        max_inflight / 1024.0
    );
    // Answered while every attacker still held its connection and its frame.
    assert_eq!(still, 32.0, "the attackers were let go before the answers");
    assert_eq!(refusals(admin, "frame_timeout"), 0.0);
    // Each holds one step ahead of its bytes (64 KiB), not its announced 64 MiB.
    assert!(largest <= 64.0 * 1024.0, "a frame held {largest} bytes");
    assert!(
        max_receiving <= 32.0 * 64.0 * 1024.0 + 16.0 * 1048576.0 + 64.0 * 1024.0,
        "32 frames and the write held {max_receiving} bytes"
    );
    match good.ok(read("small", 0, 16 << 20)) {
        Reply::Data(d) => assert!(d[..] == big[..], "the large write's bytes read back differ"),
        r => panic!("{r:?}"),
    }
    drop(silent);
    for t in tricklers {
        drop(t.join().unwrap());
    }
    assert!(server.shutdown().unwrap().balanced);
}

#[test]
fn frames_sent_almost_whole_then_stalled_leave_the_reserve_and_are_closed_for_a_waiter() {
    // The costlier attack: 16 connections announce 4 MiB frames, send all but a byte and stall.
    // With a 32 MiB budget, 4 MiB frames: frames being received hold at most 28 MiB (an eighth
    // is reserved for requests read whole), so the other client's small requests are answered;
    // a large frame of another client waiting for its share gets the stalled frames that hold
    // more than theirs closed after a second without bytes, not by their frame timeout.
    let root = TempDir::new("receiving-stall");
    let mut config = ServerConfig::new(&root.0).with_insecure_loopback();
    config.max_inflight_bytes = 32 << 20;
    config.max_frame = (4 << 20) + (64 << 10);
    // Far beyond the run: what frees the room must be the stalled frames' closing, not timeouts.
    config.frame_timeout_s = 120.0;
    let server = Server::start(config).unwrap();
    let admin = server.admin_addr().unwrap();
    let mut good = good_client(server.addr());
    let done = Arc::new(AtomicBool::new(false));
    let watch = sampler(admin, done.clone());

    let len = 4u32 << 20;
    let senders: Vec<_> = (0..16)
        .map(|_| {
            let addr = server.addr();
            std::thread::spawn(move || {
                let mut s = announce(addr, len, &[]);
                // All but the last byte; the server stops reading when it holds its share, so
                // the rest waits in the socket (a write that cannot finish is left to time out).
                s.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
                let _ = s.write_all(&vec![0u8; len as usize - 1]);
                s
            })
        })
        .collect();
    eventually("the stalled frames to fill what receiving may hold", || {
        let t = metrics(admin);
        value(&t, "iosets_receiving_frames") >= 16.0
            && value(&t, "iosets_receiving_bytes") >= 20.0 * 1048576.0
    });
    let took = four_small_requests(&mut good);
    println!("small requests beside 16 stalled 4 MiB frames: {took:?}");
    assert_eq!(refusals(admin, "frame_timeout"), 0.0);

    // A legitimate 4 MiB write of another client, behind the stalled frames.
    let mut writer = Conn::connect(server.addr(), 3);
    writer
        .stream
        .set_read_timeout(Some(Duration::from_secs(100)))
        .unwrap();
    let start = Instant::now();
    let data: Vec<u8> = (0..(3u32 << 20)).map(|i| (i % 251) as u8).collect();
    match writer.call(write("small", 0, data.clone())) {
        Response::Ok(Reply::Written(n)) => assert_eq!(n as usize, data.len()),
        r => panic!("{r:?}"),
    }
    let waited = start.elapsed();
    let stalled = refusals(admin, "frame_stalled");
    done.store(true, Ordering::Relaxed);
    let (max_inflight, max_receiving) = watch.join().unwrap();
    println!(
        "a 3 MiB write behind them: {:.0} ms, {stalled} stalled frames closed; in flight at \
         most {:.0} KiB, receiving at most {:.0} KiB",
        waited.as_secs_f64() * 1e3,
        max_inflight / 1024.0,
        max_receiving / 1024.0
    );
    assert!(
        stalled >= 1.0,
        "no stalled frame was closed for the waiting write"
    );
    assert_eq!(
        refusals(admin, "frame_timeout"),
        0.0,
        "served before any timeout"
    );
    assert!(max_inflight <= 32.0 * 1048576.0, "{max_inflight}");
    assert!(
        max_receiving <= 28.0 * 1048576.0,
        "frames being received held {max_receiving} bytes, past the reserve"
    );
    match good.ok(read("small", 0, 3 << 20)) {
        Reply::Data(d) => assert!(d[..] == data[..], "the write's bytes read back differ"),
        r => panic!("{r:?}"),
    }
    for s in senders {
        drop(s.join().unwrap());
    }
    assert!(server.shutdown().unwrap().balanced);
}

#[test]
fn large_writes_from_many_connections_complete_within_the_budget() {
    // Legitimate large writes, more than the budget at once: 6 connections each pipeline 4
    // writes of 3 MiB through an 8 MiB budget with 4 MiB frames. Frames are received a step at
    // a time, the oldest first: every write completes (no two frames deadlock holding parts
    // of the budget), every byte reads back, and the server never holds more than its budget.
    let (_root, server) = common::serve("receiving-large", |config| {
        config.max_inflight_bytes = 8 << 20;
        config.max_frame = (4 << 20) + (64 << 10);
    });
    let admin = server.admin_addr().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let watch = sampler(admin, done.clone());
    let chunk = 3usize << 20;
    let writers: Vec<_> = (0..6u8)
        .map(|w| {
            let addr = server.addr();
            std::thread::spawn(move || {
                let mut c = Conn::connect(addr, 10 + u64::from(w));
                let name = format!("big{w}");
                c.ok(create(&name));
                let reqs = (0..4u64)
                    .map(|i| write(&name, i * chunk as u64, vec![w ^ i as u8; chunk]))
                    .collect();
                for (_, r) in c.pipeline(reqs) {
                    match r {
                        Response::Ok(Reply::Written(n)) => assert_eq!(n as usize, chunk),
                        r => panic!("{r:?}"),
                    }
                }
                c
            })
        })
        .collect();
    let mut conns: Vec<Conn> = writers.into_iter().map(|t| t.join().unwrap()).collect();
    done.store(true, Ordering::Relaxed);
    let (max_inflight, max_receiving) = watch.join().unwrap();
    println!(
        "24 writes of 3 MiB through 8 MiB: in flight at most {:.0} KiB, receiving at most \
         {:.0} KiB",
        max_inflight / 1024.0,
        max_receiving / 1024.0
    );
    assert!(max_inflight <= 8.0 * 1048576.0, "{max_inflight}");
    assert!(max_inflight > 0.0);
    for (w, c) in conns.iter_mut().enumerate() {
        for i in 0..4u64 {
            match c.ok(read(&format!("big{w}"), i * chunk as u64, chunk as u32)) {
                Reply::Data(d) => {
                    assert_eq!(d.len(), chunk);
                    assert!(d.iter().all(|&b| b == w as u8 ^ i as u8), "big{w} #{i}");
                }
                r => panic!("{r:?}"),
            }
        }
    }
    let text = metrics(admin);
    assert_eq!(value(&text, "iosets_receiving_frames"), 0.0);
    assert_eq!(value(&text, "iosets_inflight_bytes"), 0.0);
    assert!(server.shutdown().unwrap().balanced);
}
