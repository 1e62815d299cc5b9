//! The same-host transport through real servers and real files: data written through the shared
//! region reads back identical (1 and 3 servers, striped), a full region falls back to frames,
//! TCP and same-host clients share files, a region range is never reused while a server may still
//! write into it, and a client killed in the middle of its writes loses nothing acknowledged.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use common::{addrs, servers, Scratch};
use iosets_client::{BlockingClient, ClientConfig, JobId};
use iosets_server::{Server, ServerConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

fn config(job: u64, chunk: usize) -> ClientConfig {
    let mut c = ClientConfig::new(JobId(job));
    c.chunk_size = chunk as u64;
    c
}

/// Random writes (from plain `Bytes` and from region buffers) and reads of 1 byte to 1.5 MiB
/// over 128 KiB chunks, checked against a model of the file, then the whole file.
fn round_trip(n_servers: usize, seed: u64) {
    let scratch = Scratch::new(&format!("local-rt-{n_servers}"));
    let (handles, _) = servers(&scratch, n_servers, false);
    let client = BlockingClient::connect(&addrs(&handles), config(1, 128 * KIB)).unwrap();
    client.create("f", 0o644, false).unwrap();
    let mut model: Vec<u8> = Vec::new();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for step in 0..120 {
        let offset = rng.gen_range(0..6 * MIB);
        let len = match rng.gen_range(0..3) {
            0 => rng.gen_range(1..100),
            1 => rng.gen_range(60 * KIB..300 * KIB),
            _ => rng.gen_range(MIB..3 * MIB / 2),
        };
        if rng.gen_bool(0.5) {
            let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let bytes = if step % 2 == 0 {
                Bytes::from(data.clone())
            } else {
                let mut b = client.buffer(len);
                assert!(b.is_shared());
                b.copy_from_slice(&data);
                b.freeze()
            };
            assert_eq!(
                client.write_at("f", offset as u64, bytes).unwrap(),
                len as u64
            );
            if model.len() < offset + len {
                model.resize(offset + len, 0);
            }
            model[offset..offset + len].copy_from_slice(&data);
        } else {
            let got = client.read_at("f", offset as u64, len).unwrap();
            let end = model.len().min(offset + len).max(offset.min(model.len()));
            let want = &model[offset.min(model.len())..end];
            assert!(
                got == want,
                "step {step}: read of {len} at {offset} differs"
            );
        }
    }
    for s in 0..n_servers {
        assert!(client.is_local(s), "server {s} is reached over TCP");
    }
    let all = client.read_at("f", 0, model.len() + 10).unwrap();
    assert!(all == model, "the whole file differs");
    drop(client);
    for h in handles {
        assert!(h.shutdown().unwrap().balanced);
    }
}

#[test]
fn bytes_round_trip_through_the_region_on_one_server() {
    round_trip(1, 11);
}

#[test]
fn bytes_round_trip_through_the_region_striped_over_three_servers() {
    round_trip(3, 12);
}

/// A region with room for one chunk: an 8-chunk write and read fall back to frames for what
/// does not fit, and a buffer that holds the whole region sends everything through frames.
#[test]
fn a_full_region_falls_back_to_frames() {
    let scratch = Scratch::new("local-full");
    let (handles, _) = servers(&scratch, 1, false);
    let mut cfg = config(2, MIB);
    cfg.local_region = MIB as u64;
    let client = BlockingClient::connect(&addrs(&handles), cfg).unwrap();
    client.create("f", 0o644, false).unwrap();
    let data: Vec<u8> = (0..8 * MIB).map(|i| (i % 253) as u8).collect();
    client.write_at("f", 0, data.clone()).unwrap();
    assert!(client.is_local(0));
    assert!(client.read_at("f", 0, data.len()).unwrap() == data);
    let held = client.buffer(MIB);
    assert!(held.is_shared());
    let spare = client.buffer(MIB);
    assert!(!spare.is_shared(), "the region is full: an ordinary buffer");
    client.write_at("f", MIB as u64, spare.freeze()).unwrap();
    let got = client.read_at("f", 0, 2 * MIB).unwrap();
    assert!(got[..MIB] == data[..MIB] && got[MIB..].iter().all(|&b| b == 0));
    drop(held);
}

#[test]
fn a_server_without_the_transport_keeps_the_client_on_tcp() {
    let scratch = Scratch::new("local-off");
    let mut cfg = ServerConfig::new(scratch.sub("root")).with_insecure_loopback();
    cfg.local = false;
    let server = Server::start(cfg).unwrap();
    let client = BlockingClient::connect(&[server.addr()], config(3, MIB)).unwrap();
    client.create("f", 0o644, false).unwrap();
    let data = vec![7u8; 3 * MIB];
    client.write_at("f", 0, data.clone()).unwrap();
    assert!(client.read_at("f", 0, data.len()).unwrap() == data);
    assert!(!client.is_local(0));
}

/// A TCP client and a same-host client write interleaved chunks of one file at once; each reads
/// back what the other wrote.
#[test]
fn tcp_and_same_host_clients_share_a_file() {
    let scratch = Scratch::new("local-mixed");
    let (handles, roots) = servers(&scratch, 1, false);
    let addr = handles[0].addr();
    let mut tcp_cfg = config(4, MIB);
    tcp_cfg.local = false;
    let tcp = BlockingClient::connect(&[addr], tcp_cfg).unwrap();
    let local = BlockingClient::connect(&[addr], config(5, MIB)).unwrap();
    tcp.create("f", 0o644, false).unwrap();
    let chunk = |i: usize| vec![(i * 7 + 1) as u8; MIB];
    std::thread::scope(|s| {
        for (c, parity) in [(&tcp, 0), (&local, 1)] {
            s.spawn(move || {
                for i in (parity..16).step_by(2) {
                    c.write_at("f", (i * MIB) as u64, chunk(i)).unwrap();
                }
            });
        }
    });
    assert!(local.is_local(0) && !tcp.is_local(0));
    for c in [&tcp, &local] {
        let all = c.read_at("f", 0, 16 * MIB).unwrap();
        for i in 0..16 {
            assert!(all[i * MIB..(i + 1) * MIB] == chunk(i)[..], "chunk {i}");
        }
    }
    let on_disk = std::fs::read(roots[0].join("f")).unwrap();
    assert_eq!(on_disk.len(), 16 * MIB);
    assert!((0..16).all(|i| on_disk[i * MIB..(i + 1) * MIB] == chunk(i)[..]));
}

/// A read that timed out may still be queued on the server: its range of the region must not
/// be handed out again until the server has answered, or the late `pread` would land in
/// someone else's buffer.
#[test]
fn a_timed_out_reads_range_is_not_reused_before_its_answer() {
    let scratch = Scratch::new("local-late");
    let mut cfg = ServerConfig::new(scratch.sub("root")).with_insecure_loopback();
    // One worker, arrival order, and a slow device: a request waits behind the one before it.
    cfg.workers = 1;
    cfg.policy = "noop".into();
    cfg.throttle_mib_s = Some(4.0);
    let server = Server::start(cfg).unwrap();
    let addr = server.addr();
    let mut quick = config(6, MIB);
    quick.request_timeout = Some(Duration::from_millis(300));
    quick.retries = 0;
    let client = BlockingClient::connect(&[addr], quick).unwrap();
    let other = BlockingClient::connect(&[addr], config(7, MIB)).unwrap();
    client.create("a", 0o644, false).unwrap();
    client.create("b", 0o644, false).unwrap();
    other.write_at("a", 0, vec![0xaa; MIB]).unwrap();
    // Make the same-host connection before the slow part.
    client.write_at("b", 0, vec![1u8; MIB]).unwrap();
    assert!(client.is_local(0));
    std::thread::scope(|s| {
        // 4 MiB at 4 MiB/s: the worker is busy for about a second.
        s.spawn(|| other.write_at("b", 0, vec![2u8; 4 * MIB]).unwrap());
        std::thread::sleep(Duration::from_millis(100));
        let err = client.read_at("a", 0, MIB).unwrap_err();
        assert!(err.to_string().contains("no response"), "{err}");
        let mut buf = client.buffer(MIB);
        assert!(buf.is_shared());
        buf.fill(0x55);
        // Queued behind the timed-out read: when it is answered, the read was served.
        other.fsync("a").unwrap();
        assert!(
            buf.iter().all(|&b| b == 0x55),
            "the late read landed in a buffer handed out since"
        );
    });
}

/// What the killed child does: writes 8 MiB at a time (8 chunk requests in flight) through the
/// same-host transport and prints each acknowledged write.
fn child(addr: &str) {
    let client = BlockingClient::connect_to(&[addr], config(8, MIB)).unwrap();
    for i in 0..64 {
        let mut buf = client.buffer(8 * MIB);
        buf.fill(pattern(i));
        client
            .write_at("victim", (i * 8 * MIB) as u64, buf.freeze())
            .unwrap();
        println!("acked {i} local {}", client.is_local(0));
    }
}

fn pattern(i: usize) -> u8 {
    (i % 251) as u8 + 1
}

/// A client process killed (SIGKILL) while its writes are in flight: every write it saw
/// acknowledged is in the file, and the server goes on serving and stops balanced.
#[test]
fn a_client_killed_mid_stream_loses_nothing_acknowledged() {
    if let Ok(addr) = std::env::var("IOSETS_TEST_CHILD_SERVER") {
        child(&addr);
        return;
    }
    let scratch = Scratch::new("local-kill");
    let root = scratch.sub("root");
    let server = Server::start(ServerConfig::new(&root).with_insecure_loopback()).unwrap();
    let setup = BlockingClient::connect(&[server.addr()], config(9, MIB)).unwrap();
    setup.create("victim", 0o644, false).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            // Its name in the crate's one test binary (tests/main.rs): `<file>::<test>`.
            "local::a_client_killed_mid_stream_loses_nothing_acknowledged",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("IOSETS_TEST_CHILD_SERVER", server.addr().to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut acked = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("acked ") {
            let mut words = rest.split_whitespace();
            acked.push(words.next().unwrap().parse::<usize>().unwrap());
            assert_eq!(
                words.nth(1),
                Some("true"),
                "the child is on the same-host transport"
            );
            if acked.len() == 30 {
                child.kill().unwrap();
                break;
            }
        }
    }
    child.wait().unwrap();
    assert_eq!(acked.len(), 30, "the child stopped early");
    check_acknowledged(&root.join("victim"), &acked);
    // The server still serves, and everything it took in was completed.
    let after = BlockingClient::connect(&[server.addr()], config(10, MIB)).unwrap();
    after.write_at("victim", 0, vec![9u8; 2 * MIB]).unwrap();
    assert!(after
        .read_at("victim", 0, 2 * MIB)
        .unwrap()
        .iter()
        .all(|&b| b == 9));
    drop((after, setup));
    assert!(server.shutdown().unwrap().balanced);
}

/// Every acknowledged write is in the file, whole (each went to its own 8 MiB of the file).
fn check_acknowledged(file: &Path, acked: &[usize]) {
    let data = std::fs::read(file).unwrap();
    for &i in acked {
        assert!(i < 64, "write {i} reused a slot of the file");
        let at = i * 8 * MIB;
        assert!(
            data[at..at + 8 * MIB].iter().all(|&b| b == pattern(i)),
            "acknowledged write {i} is not in the file"
        );
    }
}

/// `iosets_phases_gone_total` on the server whose admin address is `admin`.
fn phases_gone(admin: std::net::SocketAddr) -> f64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(admin).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("iosets_phases_gone_total "))
        .expect("the series is exported")
        .trim()
        .parse()
        .unwrap()
}

/// A client moves from TCP to the same-host socket with its first large request, in the middle
/// of its job's phase: the TCP connection it drops ends no phase (the phase goes on through the
/// socket, whose attach carries its stamp), so the job keeps its IO-SETS set.
#[test]
fn moving_to_the_same_host_socket_ends_no_phase() {
    let scratch = Scratch::new("local-phase");
    let (handles, _) = servers(&scratch, 1, false);
    let admin = handles[0].admin_addr().expect("an admin address");
    for job in 1..=5u64 {
        let before = phases_gone(admin);
        let client = BlockingClient::connect(&addrs(&handles), config(job, MIB)).unwrap();
        let f = format!("f{job}");
        client.create(&f, 0o644, false).unwrap();
        client
            .write_at(&f, 0, Bytes::from(vec![1u8; 4 * KIB]))
            .unwrap();
        client
            .write_at(&f, 4096, Bytes::from(vec![2u8; 256 * KIB]))
            .unwrap();
        assert!(client.is_local(0), "the client moved to the socket");
        // Time for the server to see the TCP connection close.
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            phases_gone(admin),
            before,
            "job {job}: the TCP connection the socket replaced ended the job's phase"
        );
        drop(client);
        // Gone now: its phase ends with the socket, unless its client ended it first.
        std::thread::sleep(Duration::from_millis(100));
        let gone = phases_gone(admin) - before;
        assert!(gone <= 1.0, "job {job}: {gone} phases ended");
    }
}
