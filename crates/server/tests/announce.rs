//! D7: a frame's memory is taken as its bytes arrive, not when its length is announced (200
//! connections announcing 64 MiB frames reserved 13.7 GB of address space). Alone in its file:
//! it reads the process's address space, which other tests running at once would change.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{metrics, TempDir};
use iosets_server::{Server, ServerConfig};

fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < end, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn vm_size_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn announced_frames_take_memory_as_their_bytes_arrive() {
    // D7: 200 connections announcing 64 MiB frames reserved 13.7 GB of address space.
    let root = TempDir::new("hostile-announce");
    let server = Server::start(ServerConfig::new(&root.0)).unwrap();
    let admin = server.admin_addr().unwrap();
    let before = vm_size_kib();
    let frames0 = value(&metrics(admin), "iosets_frames_total");
    let conns: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = TcpStream::connect(server.addr()).unwrap();
            s.write_all(&(64u32 << 20).to_le_bytes()).unwrap();
            s.write_all(&[0u8; 100]).unwrap();
            s
        })
        .collect();
    eventually("20 frames announced", || {
        value(&metrics(admin), "iosets_frames_total") >= frames0 + 20.0
    });
    std::thread::sleep(Duration::from_millis(200));
    let grown_mib = vm_size_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 256,
        "20 announced 64 MiB frames grew the address space by {grown_mib} MiB"
    );
    drop(conns);
    assert!(server.shutdown().unwrap().balanced);
}
