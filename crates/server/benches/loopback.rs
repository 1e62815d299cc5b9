//! The server's cost on loopback, as ratios measured in the same run (BENCHMARKS.md):
//!
//! 1. 1 MiB sequential writes and reads through one server (client library → scheduler → worker
//!    `pwrite`/`pread`) vs this process doing direct `pwrite`/`pread` of 1 MiB on the same file:
//!    each measure is `PAIRS` (default 5) back-to-back pairs (direct over the whole file, then
//!    the server over the whole file); a run's ratio is the median of its pairs' ratios. Through the server at queue depth 1 (one request
//!    at a time) and 8 (the client library cuts an 8 MiB write or read into 8 chunk requests of
//!    1 MiB sent at once), over each transport: TCP (the same-host transport off), and the
//!    same-host transport (Unix socket, data in the client's shared region) with the data to
//!    write in a plain `Bytes` (the client copies it into the region) or in a `WriteBuf` from
//!    `Client::buffer` (already in the region: no copy in the client).
//! 2. 4 KiB random reads and writes per second through the server, `iosets` vs `noop`: 8 client
//!    threads (8 jobs, half with priority hints in two sets), one request each at a time (4 KiB
//!    requests stay on TCP: the same-host transport is asked for by requests of 64 KiB or more).
//!
//! `cargo bench -p iosets-server --bench loopback` (RUNS=n for n runs, default 3; QUICK=1 for a
//! short smoke run; PART=seq for the sequential measures only; PART=tree for the fair-share
//! tree's cost: 2 to 16 jobs writing 1 MiB requests, `wfq key=account,user,job` vs `noop`;
//! with `TREE_POLICY=iosets`, `iosets key=account,set` vs `iosets key=set`). Both sides run on the same
//! machine and the same page cache; nothing is fsynced in either (but the durable rows), so the
//! comparison is of the paths, not of the disk. `PROFILE=w1|w8|r1|r8` (with `TRANSPORT=tcp` for
//! TCP, `buf` for a `WriteBuf`; `DIRECT=0` to skip the direct measure) loops one pattern for
//! `perf record`; `PROFILE=small` measures the fixed cost of a request (4 KiB reads at depth 1),
//! `PROFILE=durable` alternates durable writes direct and through the server. `INSERVICE=off`
//! (or `auto`, or a number) sets the server's limit on data requests in service; `NET_THREADS=n`
//! its network threads.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use bytes::Bytes;
use iosets_client::{BlockingClient, ClientConfig};
use iosets_server::{Server, ServerConfig, ServerHandle};
use iosets_types::{JobId, Priority};

const MIB: usize = 1 << 20;

fn start(root: &std::path::Path, policy: &str) -> ServerHandle {
    let mut c = ServerConfig::new(root).with_insecure_loopback();
    c.policy = policy.into();
    c.workers = 4;
    // INSERVICE=auto|off|N: the limit on data requests in service (default: the server's, auto).
    if let Ok(l) = std::env::var("INSERVICE") {
        c.inservice_limit = l.parse().unwrap();
    }
    // NET_THREADS=n: the server's network threads (default: the server's, 1).
    if let Ok(n) = std::env::var("NET_THREADS") {
        c.net_threads = n.parse().unwrap();
    }
    // TRACE=file: the server's request trace (arrival, dispatch, completion of every request).
    c.trace = std::env::var_os("TRACE").map(std::path::PathBuf::from);
    Server::start(c).unwrap()
}

fn client(addr: std::net::SocketAddr, job: u64, priority: Option<f64>) -> BlockingClient {
    client_on(addr, job, priority, true)
}

/// A client with the same-host transport on (`local`) or off (TCP only).
fn client_on(
    addr: std::net::SocketAddr,
    job: u64,
    priority: Option<f64>,
    local: bool,
) -> BlockingClient {
    let mut cfg = ClientConfig::new(JobId(job));
    cfg.priority = priority.and_then(Priority::new);
    cfg.local = local;
    BlockingClient::connect(&[addr], cfg).unwrap()
}

/// Runs `f` once and returns `bytes` over its duration, in MiB/s.
fn timed(bytes: usize, f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    bytes as f64 / MIB as f64 / t.elapsed().as_secs_f64()
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// A measure through the server and its baseline (direct I/O, or the durable direct write),
/// MiB/s, from one run.
#[derive(Clone)]
struct Pair {
    base: f64,
    server: f64,
    /// The run's ratio (the median of its pairs' ratios).
    ratio: f64,
    /// Every pair's ratio.
    each: Vec<f64>,
}

/// `pairs` measures of (baseline, server) back to back; the medians of each, and of the
/// ratios. The median of several short pairs resists a burst of other work on a shared machine
/// better than one long measure.
fn paired(pairs: usize, measure: &mut dyn FnMut() -> (f64, f64)) -> Pair {
    let (mut base, mut server, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..pairs {
        let (b, s) = measure();
        base.push(b);
        server.push(s);
        ratio.push(s / b);
    }
    Pair {
        base: median(base),
        server: median(server),
        ratio: median(ratio.clone()),
        each: ratio,
    }
}

/// The sequential rows of one run, in table order.
struct Seq {
    rows: Vec<(String, Pair)>,
}

/// How a sequential pattern is sent.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    /// TCP only.
    Tcp,
    /// The same-host transport, data in a plain `Bytes`.
    Local,
    /// The same-host transport, data in a `WriteBuf` (already in the shared region).
    LocalBuf,
}

fn sequential(root: &std::path::Path, file_mib: usize, pairs: usize) -> Seq {
    let server = start(root, "iosets");
    let tcp = client_on(server.addr(), 1, None, false);
    let local = client_on(server.addr(), 1, None, true);
    tcp.create("seq", 0o644, false).unwrap();
    let path = root.join("seq");
    let buf = vec![0x5au8; MIB];
    let direct = File::options().read(true).write(true).open(&path).unwrap();
    // Warm up (allocates the file's pages).
    for i in 0..file_mib {
        direct.write_all_at(&buf, (i * MIB) as u64).unwrap();
    }
    let direct_w = || {
        timed(file_mib * MIB, || {
            for i in 0..file_mib {
                direct.write_all_at(&buf, (i * MIB) as u64).unwrap();
            }
        })
    };
    let mut rbuf = vec![0u8; MIB];
    let mut direct_r = || {
        timed(file_mib * MIB, || {
            for i in 0..file_mib {
                direct.read_exact_at(&mut rbuf, (i * MIB) as u64).unwrap();
            }
        })
    };
    // The data to write, once per form (as the direct side has its buffer ready).
    let plain1 = Bytes::from(buf.clone());
    let plain8 = Bytes::from(vec![0xa5u8; 8 * MIB]);
    let filled = |len: usize| {
        let mut b = local.buffer(len);
        assert!(b.is_shared(), "the region has room for the buffer");
        b.fill(0x3c);
        b.freeze()
    };
    let (shared1, shared8) = (filled(MIB), filled(8 * MIB));
    let write = |c: &BlockingClient, depth: usize, data: &Bytes| {
        timed(file_mib / depth * depth * MIB, || {
            for i in 0..file_mib / depth {
                c.write_at("seq", (i * depth * MIB) as u64, data.clone())
                    .unwrap();
            }
        })
    };
    let read = |c: &BlockingClient, depth: usize| {
        timed(file_mib / depth * depth * MIB, || {
            for i in 0..file_mib / depth {
                let d = c
                    .read_at("seq", (i * depth * MIB) as u64, depth * MIB)
                    .unwrap();
                assert_eq!(d.len(), depth * MIB);
            }
        })
    };
    // The same-host transport is asked for by the first large request: make it before timing.
    local.read_at("seq", 0, MIB).unwrap();
    assert!(local.is_local(0), "the same-host transport is in use");

    let mut rows = Vec::new();
    // Durable first: the same writes into a fresh file, then fsync, timed together (disk-bound),
    // before the cached measures leave gigabytes to write back. Every durable measure writes the
    // same file name, removed before each: on this VM, blocks the disk never held write several
    // times slower than blocks freed a moment ago, so each measure must get the same kind.
    direct.sync_all().unwrap();
    let fresh = || {
        let _ = std::fs::remove_file(root.join("dur"));
        tcp.create("dur", 0o644, false).unwrap();
    };
    fresh();
    let direct_wd = timed(file_mib * MIB, || {
        let f = File::options().write(true).open(root.join("dur")).unwrap();
        for i in 0..file_mib {
            f.write_all_at(&buf, (i * MIB) as u64).unwrap();
        }
        f.sync_all().unwrap();
    });
    for (depth, data) in [(1, &plain1), (8, &plain8)] {
        fresh();
        let server = timed(file_mib / depth * depth * MIB, || {
            for i in 0..file_mib / depth {
                local
                    .write_at("dur", (i * depth * MIB) as u64, data.clone())
                    .unwrap();
            }
            local.fsync("dur").unwrap();
        });
        rows.push((
            format!("1 MiB seq. write + fsync (durable), depth {depth}, same-host, `Bytes`"),
            Pair {
                base: direct_wd,
                server,
                ratio: server / direct_wd,
                each: vec![server / direct_wd],
            },
        ));
    }
    let _ = std::fs::remove_file(root.join("dur"));
    for via in [Via::Tcp, Via::Local, Via::LocalBuf] {
        let (c, name) = match via {
            Via::Tcp => (&tcp, "TCP"),
            Via::Local => (&local, "same-host, `Bytes`"),
            Via::LocalBuf => (&local, "same-host, `WriteBuf`"),
        };
        for depth in [1, 8] {
            let data = match (via, depth) {
                (Via::LocalBuf, 1) => &shared1,
                (Via::LocalBuf, _) => &shared8,
                (_, 1) => &plain1,
                _ => &plain8,
            };
            let pair = paired(pairs, &mut || (direct_w(), write(c, depth, data)));
            rows.push((format!("1 MiB seq. write, depth {depth}, {name}"), pair));
        }
    }
    for (via, name) in [(Via::Tcp, "TCP"), (Via::Local, "same-host")] {
        let c = if via == Via::Tcp { &tcp } else { &local };
        for depth in [1, 8] {
            let pair = paired(pairs, &mut || (direct_r(), read(c, depth)));
            rows.push((format!("1 MiB seq. read, depth {depth}, {name}"), pair));
        }
    }

    drop((tcp, local, shared1, shared8));
    server.shutdown().unwrap();
    Seq { rows }
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

/// Aggregate MiB/s of `jobs` jobs each writing its share of `total_mib` in 1 MiB writes (one at
/// a time, each to its own file) through a server running `policy` with `options`; the jobs
/// are told to the server in two accounts (the fair-share tree places them by it).
fn aggregate(
    root: &std::path::Path,
    policy: &str,
    options: &[(&str, &str)],
    jobs: u64,
    total_mib: usize,
) -> f64 {
    let mut c = ServerConfig::new(root).with_insecure_loopback();
    c.policy = policy.into();
    c.policy_options = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    c.workers = 4;
    c.token = Some("bench".into());
    // TRACE=path: the trace of each measure in turn (the last one stays).
    c.trace = std::env::var_os("TRACE").map(std::path::PathBuf::from);
    let server = Server::start(c).unwrap();
    let addr = server.addr();
    let setup = client(addr, 1000, None);
    for j in 1..=jobs {
        let op = iosets_proto::Control::JobInfo {
            job: JobId(j),
            account: Some(format!("account{}", j % 2)),
            nodes: Some(1 + (j % 4) as u32),
        };
        setup.control(0, "bench", op).unwrap();
    }
    let per_job = total_mib / jobs as usize;
    let barrier = Arc::new(std::sync::Barrier::new(jobs as usize + 1));
    let writers: Vec<_> = (1..=jobs)
        .map(|j| {
            let barrier = barrier.clone();
            thread::spawn(move || {
                let c = client(addr, j, None);
                let path = format!("agg{j}");
                c.create(&path, 0o644, false).unwrap();
                let block = Bytes::from(vec![j as u8; MIB]);
                barrier.wait();
                for i in 0..per_job {
                    c.write_at(&path, (i * MIB) as u64, block.clone()).unwrap();
                }
            })
        })
        .collect();
    barrier.wait();
    let t = Instant::now();
    for w in writers {
        w.join().unwrap();
    }
    let mib_s = (per_job * jobs as usize) as f64 / t.elapsed().as_secs_f64();
    server.shutdown().unwrap();
    // The files stay: the next measure overwrites them, so that none pays for allocating
    // blocks the other did not.
    mib_s
}

/// `PART=tree`: the fair-share tree's cost on the data path (issue 31): aggregate throughput of
/// 2, 4, 8 and 16 jobs writing 1 MiB requests, not throttled, `wfq key=account,user,job` vs
/// `noop`, the two alternating within each run.
fn tree_cost(root: &std::path::Path, runs: usize, total_mib: usize) {
    // KEY=job measures flat WFQ the same way. TREE_POLICY=iosets measures `iosets key=KEY`
    // (default account,set) against flat `iosets` (key=set) instead of noop: both keep one job
    // of a set at a time, so the difference is the tree's.
    let policy = std::env::var("TREE_POLICY").unwrap_or_else(|_| "wfq".into());
    let (base, base_opts): (&str, &[(&str, &str)]) = match policy.as_str() {
        "wfq" => ("noop", &[]),
        "iosets" => ("iosets", &[("key", "set")]),
        other => panic!("TREE_POLICY: wfq or iosets, not {other}"),
    };
    let default_key = if policy == "iosets" {
        "account,set"
    } else {
        "account,user,job"
    };
    let key = std::env::var("KEY").unwrap_or_else(|_| default_key.into());
    let tree: &[(&str, &str)] = &[("key", &key)];
    let mut rows: Vec<(u64, Vec<f64>, Vec<f64>)> = Vec::new();
    let counts: Vec<u64> = std::env::var("JOBS").map_or(vec![2, 4, 8, 16], |v| {
        v.split(',').map(|n| n.parse().unwrap()).collect()
    });
    for jobs in counts {
        // A measure not counted: the files exist and are cached before either side is timed.
        aggregate(root, base, base_opts, jobs, total_mib);
        let (mut noop, mut ours) = (Vec::new(), Vec::new());
        for run in 0..runs {
            if run % 2 == 0 {
                noop.push(aggregate(root, base, base_opts, jobs, total_mib));
                ours.push(aggregate(root, &policy, tree, jobs, total_mib));
            } else {
                ours.push(aggregate(root, &policy, tree, jobs, total_mib));
                noop.push(aggregate(root, base, base_opts, jobs, total_mib));
            }
            eprintln!(
                "{jobs} jobs, run {run}: {base} {:.0} MiB/s, tree {:.0} MiB/s (load average {})",
                noop.last().unwrap(),
                ours.last().unwrap(),
                loadavg()
            );
        }
        rows.push((jobs, noop, ours));
    }
    println!(
        "\n| jobs | {base} MiB/s (range) | tree MiB/s (range) | tree / {base} (median of runs) | per \
         run |"
    );
    println!("|---|---|---|---|---|");
    for (jobs, noop, ours) in rows {
        let ratios: Vec<f64> = noop.iter().zip(&ours).map(|(n, o)| o / n).collect();
        println!(
            "| {jobs} | {:.0} ({}) | {:.0} ({}) | **{:.1}%** | {} |",
            median(noop.clone()),
            range(&noop),
            median(ours.clone()),
            range(&ours),
            100.0 * median(ratios.clone()),
            ratios
                .iter()
                .map(|r| format!("{:.1}%", 100.0 * r))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    println!(
        "\n{runs} runs, {total_mib} MiB written per measure, 1 MiB requests, 4 workers, \
         {policy} key={key} against {base} {base_opts:?}"
    );
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
/// 5), for `perf record`; `TRANSPORT=tcp|local|buf` (default `local`: the same-host transport
/// with plain `Bytes`; `buf`: with a `WriteBuf`). Prints the mean time per 1 MiB request, and
/// that of direct `pwrite`/`pread` measured just before.
fn profile(root: &std::path::Path, which: &str) {
    let secs: f64 = std::env::var("SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    let transport = std::env::var("TRANSPORT").unwrap_or_else(|_| "local".into());
    let server = start(root, "iosets");
    let c = client_on(server.addr(), 1, None, transport != "tcp");
    c.create("prof", 0o644, false).unwrap();
    let file_mib = 64;
    let data = if transport == "buf" {
        let mut b = c.buffer(8 * MIB);
        assert!(b.is_shared());
        b.fill(0x5a);
        b.freeze()
    } else {
        Bytes::from(vec![0x5au8; 8 * MIB])
    };
    for i in 0..file_mib / 8 {
        c.write_at("prof", (i * 8 * MIB) as u64, data.clone())
            .unwrap();
    }
    if which == "durable" {
        // 512 MiB into a fresh file (the same name, removed first) then fsync: direct and
        // through the server, alternating, three times each.
        let data = Bytes::from(vec![0x5au8; MIB]);
        for round in 0..6 {
            let _ = std::fs::remove_file(root.join("dur"));
            c.create("dur", 0o644, false).unwrap();
            let t = Instant::now();
            if round % 2 == 0 {
                let f = File::options().write(true).open(root.join("dur")).unwrap();
                for i in 0..512 {
                    f.write_all_at(&data, (i * MIB) as u64).unwrap();
                }
                f.sync_all().unwrap();
            } else {
                for i in 0..512 {
                    c.write_at("dur", (i * MIB) as u64, data.clone()).unwrap();
                }
                c.fsync("dur").unwrap();
            }
            let what = if round % 2 == 0 {
                "direct"
            } else {
                transport.as_str()
            };
            println!(
                "durable {what}: {:.0} MiB/s",
                512.0 / t.elapsed().as_secs_f64()
            );
        }
        drop(c);
        server.shutdown().unwrap();
        return;
    }
    if which == "small" {
        // The fixed cost of a request: 4 KiB reads at depth 1 (after a large one, so that the
        // same-host transport, when on, is in use).
        c.read_at("prof", 0, MIB).unwrap();
        let t = Instant::now();
        let mut reqs = 0usize;
        while t.elapsed().as_secs_f64() < secs {
            for i in 0..1000u64 {
                assert_eq!(c.read_at("prof", i * 4096, 4096).unwrap().len(), 4096);
            }
            reqs += 1000;
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / reqs as f64;
        println!(
            "small {transport} (local: {}): {reqs} reads of 4 KiB, {us:.1} µs each",
            c.is_local(0)
        );
        drop(c);
        server.shutdown().unwrap();
        return;
    }
    let depth = if which.ends_with('8') { 8 } else { 1 };
    let direct = File::options()
        .read(true)
        .write(true)
        .open(root.join("prof"))
        .unwrap();
    let mut rbuf = vec![0u8; MIB];
    // `DIRECT=0`: no direct measure (a profile of the server path alone).
    let direct_secs = if std::env::var("DIRECT").is_ok_and(|v| v == "0") {
        0.0
    } else {
        1.0
    };
    let t = Instant::now();
    let mut reqs = 0usize;
    while t.elapsed().as_secs_f64() < direct_secs {
        for i in 0..file_mib {
            if which.starts_with('w') {
                direct.write_all_at(&data[..MIB], (i * MIB) as u64).unwrap();
            } else {
                direct.read_exact_at(&mut rbuf, (i * MIB) as u64).unwrap();
            }
            reqs += 1;
        }
    }
    let direct_us = t.elapsed().as_secs_f64() * 1e6 / reqs.max(1) as f64;
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
        "{which} {transport} (local: {}): {reqs} requests of 1 MiB, {us:.1} µs each; direct {direct_us:.1} µs; ratio {:.0}%",
        c.is_local(0),
        100.0 * direct_us / us
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
    // PAIRS=n: (direct, server) pairs per cached sequential measure and run (default 5).
    let pairs: usize = std::env::var("PAIRS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let root = std::env::temp_dir().join(format!("iosets-bench-loopback-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();

    let part = std::env::var("PART").unwrap_or_default();
    if part == "tree" {
        tree_cost(&root, runs, if quick { 64 } else { 1024 });
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    let mut seqs: Vec<Seq> = Vec::new();
    let (mut io, mut noop, mut io_sets, mut noop_sets) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        let before = loadavg();
        seqs.push(sequential(&root, file_mib, pairs));
        let s = seqs.last().unwrap();
        let mut line = format!("run {run} (load average {before} before");
        for (name, p) in &s.rows {
            line += &format!(
                "; {name}: {:.0} / direct {:.0} MiB/s = {:.0}% (pairs: {})",
                p.server,
                p.base,
                100.0 * p.ratio,
                p.each
                    .iter()
                    .map(|r| format!("{:.0}%", 100.0 * r))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        if part != "seq" {
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
            line += &format!(
                "; 4 KiB random own sets: noop {:.0} iosets {:.0} ops/s; with shared sets: noop {:.0} iosets {:.0} ops/s",
                noop.last().unwrap(), io.last().unwrap(), noop_sets.last().unwrap(), io_sets.last().unwrap()
            );
        }
        eprintln!("{line}; load average {} after)", loadavg());
    }
    let _ = std::fs::remove_dir_all(&root);

    println!("\n| measure | direct / noop | through the server / iosets | ratio (median of per-run ratios) | per-run ratios |");
    println!("|---|---|---|---|---|");
    let row = |name: &str, base: Vec<f64>, ours: Vec<f64>, ratios: Option<Vec<f64>>, unit: &str| {
        let ratios: Vec<f64> =
            ratios.unwrap_or_else(|| base.iter().zip(&ours).map(|(b, o)| o / b).collect());
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
    for (k, (name, _)) in seqs[0].rows.iter().enumerate() {
        let base = seqs.iter().map(|s| s.rows[k].1.base).collect();
        let ours = seqs.iter().map(|s| s.rows[k].1.server).collect();
        let ratios = seqs.iter().map(|s| s.rows[k].1.ratio).collect();
        row(name, base, ours, Some(ratios), "MiB/s");
    }
    if part != "seq" {
        row(
            "4 KiB random ops, iosets vs noop (8 jobs, a set each)",
            noop,
            io,
            None,
            "ops/s",
        );
        row(
            "4 KiB random ops, iosets vs noop (2 jobs in set 0, 2 in set 1, 4 alone)",
            noop_sets,
            io_sets,
            None,
            "ops/s",
        );
    }
    println!(
        "\n{runs} runs, file {file_mib} MiB, {pairs} (direct, server) pairs per cached measure \
         (medians), {ops} random ops per thread × 8 threads"
    );
}
