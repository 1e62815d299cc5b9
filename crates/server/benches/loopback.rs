//! The server's cost on loopback, as ratios measured in the same run (BENCHMARKS.md):
//!
//! 1. 1 MiB sequential writes and reads through one server (client library → TCP → scheduler →
//!    worker `pwrite`/`pread`) vs this process doing direct `pwrite`/`pread` of 1 MiB on the same
//!    file. Through the server at queue depth 1 (one request at a time) and 8 (the client library
//!    cuts an 8 MiB write into 8 chunk requests of 1 MiB sent at once).
//! 2. 4 KiB random reads and writes per second through the server, `iosets` vs `noop`: 8 client
//!    threads (8 jobs, half with priority hints in two sets), one request each at a time.
//!
//! `cargo bench -p iosets-server --bench loopback` (RUNS=n for n runs, default 3; QUICK=1 for a
//! short smoke run). Both sides run on the same machine and the same page cache; nothing is
//! fsynced in either, so the comparison is of the paths, not of the disk.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use iosets_client::{BlockingClient, ClientConfig};
use iosets_server::{Server, ServerConfig, ServerHandle};
use iosets_types::{JobId, Priority};

const MIB: usize = 1 << 20;

fn start(root: &std::path::Path, policy: &str) -> ServerHandle {
    let mut c = ServerConfig::new(root);
    c.policy = policy.into();
    c.workers = 4;
    Server::start(c).unwrap()
}

fn client(addr: std::net::SocketAddr, job: u64, priority: Option<f64>) -> BlockingClient {
    let mut cfg = ClientConfig::new(JobId(job));
    cfg.priority = priority.and_then(Priority::new);
    BlockingClient::connect(&[addr], cfg).unwrap()
}

/// Runs `f` once and returns `bytes` over its duration, in MiB/s.
fn timed(bytes: usize, f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    bytes as f64 / MIB as f64 / t.elapsed().as_secs_f64()
}

struct Seq {
    direct_wd: f64,
    server_wd1: f64,
    server_wd8: f64,
    direct_w: f64,
    server_w1: f64,
    server_w8: f64,
    direct_r: f64,
    server_r1: f64,
    server_r8: f64,
}

fn sequential(root: &std::path::Path, file_mib: usize) -> Seq {
    let server = start(root, "iosets");
    let c = client(server.addr(), 1, None);
    c.create("seq", 0o644, false).unwrap();
    let path = root.join("seq");
    let buf = vec![0x5au8; MIB];
    let big: Vec<u8> = vec![0xa5u8; 8 * MIB];
    let direct = File::options().read(true).write(true).open(&path).unwrap();
    // Warm up both paths once (allocates the file's pages).
    for i in 0..file_mib {
        direct.write_all_at(&buf, (i * MIB) as u64).unwrap();
    }

    let direct_w = timed(file_mib * MIB, || {
        for i in 0..file_mib {
            direct.write_all_at(&buf, (i * MIB) as u64).unwrap();
        }
    });

    let data = bytes::Bytes::from(buf.clone());
    let server_w1 = timed(file_mib * MIB, || {
        for i in 0..file_mib {
            c.write_at("seq", (i * MIB) as u64, data.clone()).unwrap();
        }
    });

    let data8 = bytes::Bytes::from(big);
    let server_w8 = timed(file_mib / 8 * 8 * MIB, || {
        for i in 0..file_mib / 8 {
            c.write_at("seq", (i * 8 * MIB) as u64, data8.clone())
                .unwrap();
        }
    });

    // Durable: the same writes into a fresh file, then fsync, timed together (disk-bound).
    let fresh = |name: &str| {
        let _ = std::fs::remove_file(root.join(name));
        c.create(name, 0o644, false).unwrap();
    };
    fresh("dur-direct");
    let direct_wd = timed(file_mib * MIB, || {
        let f = File::options()
            .write(true)
            .open(root.join("dur-direct"))
            .unwrap();
        for i in 0..file_mib {
            f.write_all_at(&buf, (i * MIB) as u64).unwrap();
        }
        f.sync_all().unwrap();
    });
    fresh("dur-d1");
    let server_wd1 = timed(file_mib * MIB, || {
        for i in 0..file_mib {
            c.write_at("dur-d1", (i * MIB) as u64, data.clone())
                .unwrap();
        }
        c.fsync("dur-d1").unwrap();
    });
    fresh("dur-d8");
    let server_wd8 = timed(file_mib / 8 * 8 * MIB, || {
        for i in 0..file_mib / 8 {
            c.write_at("dur-d8", (i * 8 * MIB) as u64, data8.clone())
                .unwrap();
        }
        c.fsync("dur-d8").unwrap();
    });
    for name in ["dur-direct", "dur-d1", "dur-d8"] {
        let _ = std::fs::remove_file(root.join(name));
    }

    let mut rbuf = vec![0u8; MIB];
    let direct_r = timed(file_mib * MIB, || {
        for i in 0..file_mib {
            direct.read_exact_at(&mut rbuf, (i * MIB) as u64).unwrap();
        }
    });

    let server_r1 = timed(file_mib * MIB, || {
        for i in 0..file_mib {
            let d = c.read_at("seq", (i * MIB) as u64, MIB).unwrap();
            assert_eq!(d.len(), MIB);
        }
    });

    let server_r8 = timed(file_mib / 8 * 8 * MIB, || {
        for i in 0..file_mib / 8 {
            let d = c.read_at("seq", (i * 8 * MIB) as u64, 8 * MIB).unwrap();
            assert_eq!(d.len(), 8 * MIB);
        }
    });
    drop(c);
    server.shutdown().unwrap();
    Seq {
        direct_wd,
        server_wd1,
        server_wd8,
        direct_w,
        server_w1,
        server_w8,
        direct_r,
        server_r1,
        server_r8,
    }
}

/// 4 KiB random operations per second through a server running `policy`.
fn random_ops(root: &std::path::Path, policy: &str, ops_per_thread: usize, sets: bool) -> f64 {
    const FILE: u64 = 64 * MIB as u64;
    const THREADS: u64 = 8;
    let server = start(root, policy);
    let addr = server.addr();
    let setup = client(addr, 100, None);
    setup.create("rand", 0o644, false).unwrap();
    setup.truncate("rand", FILE).unwrap();
    let barrier = Arc::new(std::sync::Barrier::new(THREADS as usize + 1));
    let workers: Vec<_> = (0..THREADS)
        .map(|j| {
            let barrier = barrier.clone();
            thread::spawn(move || {
                // Jobs 0-1 in set 0, 2-3 in set 1, 4-7 without priority (a set each).
                let prio = match j {
                    0 | 1 if sets => Some(1.0),
                    2 | 3 if sets => Some(0.1),
                    _ => None,
                };
                let c = client(addr, j + 1, prio);
                let block = bytes::Bytes::from(vec![j as u8; 4096]);
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ j;
                barrier.wait();
                for i in 0..ops_per_thread {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let off = (x % (FILE / 4096)) * 4096;
                    if i % 2 == 0 {
                        c.write_at("rand", off, block.clone()).unwrap();
                    } else {
                        assert_eq!(c.read_at("rand", off, 4096).unwrap().len(), 4096);
                    }
                }
            })
        })
        .collect();
    barrier.wait();
    let t = Instant::now();
    for w in workers {
        w.join().unwrap();
    }
    let secs = t.elapsed().as_secs_f64();
    server.shutdown().unwrap();
    (THREADS as usize * ops_per_thread) as f64 / secs
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn range(v: &[f64]) -> String {
    let lo = v.iter().cloned().fold(f64::MAX, f64::min);
    let hi = v.iter().cloned().fold(f64::MIN, f64::max);
    format!("{lo:.0}–{hi:.0}")
}

/// `PROFILE=w1|w8|r1|r8`: only that server-path pattern, in a loop for `SECS` seconds (default
/// 5), for `perf record`; prints the mean time per 1 MiB request.
fn profile(root: &std::path::Path, which: &str) {
    let secs: f64 = std::env::var("SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    let server = start(root, "iosets");
    let c = client(server.addr(), 1, None);
    c.create("prof", 0o644, false).unwrap();
    let file_mib = 64;
    let data = bytes::Bytes::from(vec![0x5au8; 8 * MIB]);
    for i in 0..file_mib / 8 {
        c.write_at("prof", (i * 8 * MIB) as u64, data.clone())
            .unwrap();
    }
    let depth = if which.ends_with('8') { 8 } else { 1 };
    let t = Instant::now();
    let mut reqs = 0usize;
    while t.elapsed().as_secs_f64() < secs {
        for i in 0..file_mib / depth {
            let off = (i * depth * MIB) as u64;
            if which.starts_with('w') {
                c.write_at("prof", off, data.slice(..depth * MIB)).unwrap();
            } else {
                assert_eq!(
                    c.read_at("prof", off, depth * MIB).unwrap().len(),
                    depth * MIB
                );
            }
            reqs += depth;
        }
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / reqs as f64;
    println!(
        "{which}: {reqs} requests of 1 MiB, {us:.1} µs each ({:.0} MiB/s)",
        1e6 / us
    );
    drop(c);
    server.shutdown().unwrap();
}

fn main() {
    if let Ok(which) = std::env::var("PROFILE") {
        let root =
            std::env::temp_dir().join(format!("iosets-bench-profile-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        profile(&root, &which);
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    // `cargo bench` passes --bench; ignore arguments.
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let quick = std::env::var("QUICK").is_ok_and(|v| v == "1");
    let (file_mib, ops) = if quick { (32, 1_000) } else { (512, 10_000) };
    let root = std::env::temp_dir().join(format!("iosets-bench-loopback-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();

    let mut seqs = Vec::new();
    let (mut io, mut noop, mut io_sets, mut noop_sets) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let part = std::env::var("PART").unwrap_or_default();
    for run in 0..runs {
        seqs.push(sequential(&root, file_mib));
        if part == "seq" {
            let s = seqs.last().unwrap();
            eprintln!("run {run}: cached write direct {:.0} / d1 {:.0} / d8 {:.0} MiB/s; read direct {:.0} / d1 {:.0} / d8 {:.0} MiB/s", s.direct_w, s.server_w1, s.server_w8, s.direct_r, s.server_r1, s.server_r8);
            continue;
        }
        // Alternate the order so drift on a shared machine does not favour one policy.
        let pair = |sets: bool, io: &mut Vec<f64>, noop: &mut Vec<f64>| {
            if run % 2 == 0 {
                noop.push(random_ops(&root, "noop", ops, sets));
                io.push(random_ops(&root, "iosets", ops, sets));
            } else {
                io.push(random_ops(&root, "iosets", ops, sets));
                noop.push(random_ops(&root, "noop", ops, sets));
            }
        };
        pair(false, &mut io, &mut noop);
        pair(true, &mut io_sets, &mut noop_sets);
        let s = seqs.last().unwrap();
        eprintln!(
            "run {run}: durable write direct {:.0} / server d1 {:.0} / d8 {:.0} MiB/s; cached write direct {:.0} / d1 {:.0} / d8 {:.0} MiB/s; read direct {:.0} / d1 {:.0} / d8 {:.0} MiB/s; 4 KiB random own sets: noop {:.0} iosets {:.0} ops/s; with shared sets: noop {:.0} iosets {:.0} ops/s",
            s.direct_wd, s.server_wd1, s.server_wd8,
            s.direct_w, s.server_w1, s.server_w8, s.direct_r, s.server_r1, s.server_r8,
            noop.last().unwrap(), io.last().unwrap(), noop_sets.last().unwrap(), io_sets.last().unwrap()
        );
    }
    let _ = std::fs::remove_dir_all(&root);

    println!("\n| measure | direct / noop | through the server / iosets | ratio (median of per-run ratios) | per-run ratios |");
    println!("|---|---|---|---|---|");
    let row = |name: &str, base: Vec<f64>, ours: Vec<f64>, unit: &str| {
        let ratios: Vec<f64> = base.iter().zip(&ours).map(|(b, o)| o / b).collect();
        println!(
            "| {name} | {:.0} {unit} ({}) | {:.0} {unit} ({}) | **{:.0}%** | {} |",
            median(base.clone()),
            range(&base),
            median(ours.clone()),
            range(&ours),
            100.0 * median(ratios.clone()),
            ratios
                .iter()
                .map(|r| format!("{:.0}%", 100.0 * r))
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let col = |f: fn(&Seq) -> f64| seqs.iter().map(f).collect::<Vec<f64>>();
    row(
        "1 MiB seq. write + fsync (durable), depth 1",
        col(|s| s.direct_wd),
        col(|s| s.server_wd1),
        "MiB/s",
    );
    row(
        "1 MiB seq. write + fsync (durable), depth 8",
        col(|s| s.direct_wd),
        col(|s| s.server_wd8),
        "MiB/s",
    );
    row(
        "1 MiB seq. write, depth 1",
        col(|s| s.direct_w),
        col(|s| s.server_w1),
        "MiB/s",
    );
    row(
        "1 MiB seq. write, depth 8",
        col(|s| s.direct_w),
        col(|s| s.server_w8),
        "MiB/s",
    );
    row(
        "1 MiB seq. read, depth 1",
        col(|s| s.direct_r),
        col(|s| s.server_r1),
        "MiB/s",
    );
    row(
        "1 MiB seq. read, depth 8",
        col(|s| s.direct_r),
        col(|s| s.server_r8),
        "MiB/s",
    );
    row(
        "4 KiB random ops, iosets vs noop (8 jobs, a set each)",
        noop,
        io,
        "ops/s",
    );
    row(
        "4 KiB random ops, iosets vs noop (2 jobs in set 0, 2 in set 1, 4 alone)",
        noop_sets,
        io_sets,
        "ops/s",
    );
    println!("\n{runs} runs, file {file_mib} MiB, {ops} random ops per thread × 8 threads");
}
