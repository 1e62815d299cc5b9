//! D7: a frame's memory is taken as its bytes arrive, not when its length is announced (200
//! connections announcing 64 MiB frames reserved 13.7 GB of address space: one 64 MiB mapping
//! each). Alone in its file: it reads the process's mappings, which other tests running at once
//! would change.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::{eventually, metrics, value, TempDir};
use iosets_server::{Server, ServerConfig};

/// MiB of writable anonymous mappings of at least 60 MiB in this process (the kernel merges
/// adjacent ones): what 64 MiB buffers allocated whole become (glibc maps allocations that large
/// on their own). The allocator's arenas, which reserve 64 MiB of address space per thread, are
/// mostly inaccessible (`---p`) and do not count, so this measures frame buffers, not threads.
fn big_writable_mib() -> u64 {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter(|l| {
            // "start-end perms offset dev inode [path]"; an anonymous mapping has no path.
            let mut f = l.split_whitespace();
            let (Some(range), Some(perms)) = (f.next(), f.next()) else {
                return false;
            };
            let path = l.split_whitespace().nth(5);
            let Some((a, b)) = range.split_once('-') else {
                return false;
            };
            let size = u64::from_str_radix(b, 16).unwrap() - u64::from_str_radix(a, 16).unwrap();
            perms.starts_with("rw") && path.is_none() && size >= 60 << 20
        })
        .map(|l| {
            let (a, b) = l
                .split_whitespace()
                .next()
                .unwrap()
                .split_once('-')
                .unwrap();
            u64::from_str_radix(b, 16).unwrap() - u64::from_str_radix(a, 16).unwrap()
        })
        .sum::<u64>()
        >> 20
}

#[test]
fn announced_frames_take_memory_as_their_bytes_arrive() {
    // D7: 200 connections announcing 64 MiB frames reserved 13.7 GB of address space.
    let root = TempDir::new("hostile-announce");
    let server = Server::start(ServerConfig::new(&root.0).with_insecure_loopback()).unwrap();
    let admin = server.admin_addr().unwrap();
    let before = big_writable_mib();
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
    let grown = big_writable_mib().saturating_sub(before);
    assert!(
        grown < 256,
        "20 announced 64 MiB frames took {grown} MiB of address space"
    );
    drop(conns);
    assert!(server.shutdown().unwrap().balanced);
}
