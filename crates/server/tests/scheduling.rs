//! The policy decides what the disk serves: two jobs at priorities 10:1 saturating a throttled
//! server get 10:1 of the bytes over 5 s windows, and two jobs of one IO-SETS set are never in
//! service together. Measured from the server's own trace (dispatch and completion times).

use crate::common;

use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use common::{create, read_trace, saturate, Conn, TempDir};
use iosets_server::{Server, ServerConfig};

fn start(
    root: &TempDir,
    trace: &std::path::Path,
    opts: &[(&str, &str)],
) -> iosets_server::ServerHandle {
    let mut config = ServerConfig::new(&root.0).with_insecure_loopback();
    config.policy = "iosets".into();
    config.policy_options = opts
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    config.throttle_mib_s = Some(16.0);
    config.workers = 4;
    config.token = Some("t".into());
    config.trace = Some(trace.to_path_buf());
    Server::start(config).unwrap()
}

fn prioritise(addr: SocketAddr, jobs: &[(u64, f64)]) {
    let mut c = Conn::connect(addr, 0);
    for &(job, p) in jobs {
        c.set_priority("t", job, p);
        c.ok(create(&format!("job{job}")));
    }
}

#[test]
fn priorities_ten_to_one_get_ten_to_one_of_the_bytes() {
    let root = TempDir::new("shares");
    let trace = root.0.join("trace.csv");
    let server = start(&root, &trace, &[]);
    let addr = server.addr();
    // Different sets (priorities 1 and 0.1): IO-SETS shares by weighted fair queuing.
    prioritise(addr, &[(1, 1.0), (2, 0.1)]);
    let t0 = Instant::now();
    let until = t0 + Duration::from_millis(10_600);
    let a = thread::spawn(move || saturate(addr, 1, None, 64 * 1024, 64, until));
    let b = thread::spawn(move || saturate(addr, 2, None, 64 * 1024, 64, until));
    let (acked_a, acked_b) = (a.join().unwrap(), b.join().unwrap());
    server.shutdown().unwrap();
    let served = read_trace(&trace);
    assert_eq!(served.len() as u64, acked_a + acked_b);
    // Two 5 s windows while both are backlogged (after a 0.3 s ramp-up).
    let first = served.iter().map(|s| s.complete_s).fold(f64::MAX, f64::min);
    for w in 0..2 {
        let lo = first + 0.3 + 5.0 * w as f64;
        let hi = lo + 5.0;
        let bytes = |job| -> u64 {
            served
                .iter()
                .filter(|s| s.job == job && s.complete_s >= lo && s.complete_s < hi)
                .map(|s| s.bytes)
                .sum()
        };
        let (x, y) = (bytes(1), bytes(2));
        let ratio = x as f64 / y as f64;
        eprintln!("window {w}: job 1 {x} B, job 2 {y} B, ratio {ratio:.2}");
        assert!(y > 0, "the low-priority job is not starved");
        assert!(
            (9.0..=11.0).contains(&ratio),
            "window {w}: ratio {ratio:.2}, want 10 ±10%"
        );
    }
}

#[test]
fn two_jobs_of_one_set_are_never_in_service_together() {
    let root = TempDir::new("exclusive");
    let trace = root.0.join("trace.csv");
    // A bounded tenure so both jobs take turns while both stay backlogged.
    let server = start(&root, &trace, &[("max_exclusive_ms", "200")]);
    let addr = server.addr();
    prioritise(addr, &[(1, 0.1), (2, 0.1), (3, 1.0)]);
    let until = Instant::now() + Duration::from_millis(2_500);
    let jobs: Vec<_> = [1u64, 2, 3]
        .into_iter()
        .map(|job| thread::spawn(move || saturate(addr, job, None, 32 * 1024, 8, until)))
        .collect();
    for j in jobs {
        assert!(j.join().unwrap() > 0);
    }
    server.shutdown().unwrap();
    let served = read_trace(&trace);
    let intervals = |job| common::intervals(&served, job);
    let (one, two, three) = (intervals(1), intervals(2), intervals(3));
    assert!(
        !one.is_empty() && !two.is_empty(),
        "both jobs of the set were served"
    );
    for a in &one {
        for b in &two {
            assert!(
                a.1 <= b.0 || b.1 <= a.0,
                "jobs 1 and 2 overlap: {a:?} {b:?}"
            );
        }
    }
    // The job of the other set does run alongside them (sets share the device).
    let overlaps = three
        .iter()
        .filter(|c| one.iter().chain(&two).any(|a| a.0 < c.1 && c.0 < a.1))
        .count();
    assert!(
        overlaps > 0,
        "the other set's job never overlapped: sets are not concurrent"
    );
}
