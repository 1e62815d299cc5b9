//! The behaviour that defines each classic scheduler (seed 002, Linux's elevators), one test each.

mod common;

use common::{policy, run_device, run_slots, Served};
use iosets_policy::{Nanos, Op, Request};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn req(id: u64, job: u64, file: u64, offset: u64, len: u64, op: Op, at: Nanos) -> Request {
    let mut r = Request::new(id, job, file, offset, len, op);
    r.arrival = at;
    r
}

/// Splits dispatches into sweeps (a sweep ends when the position goes down) and checks that inside
/// each sweep positions ascend.
fn sweeps(served: &[Served]) -> usize {
    let mut count = 1;
    for w in served.windows(2) {
        let (a, b) = (&w[0].req, &w[1].req);
        if (b.file, b.offset) < (a.file, a.offset) {
            count += 1;
        }
    }
    count
}

#[test]
fn elevator_sweeps_ascending_and_merges_each_request_once() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    // 3 files; blocks of 4 KiB at random positions, a third of them contiguous runs; arrivals
    // spread over time so that sweeps wrap.
    let mut reqs = Vec::new();
    for i in 0..600u64 {
        let file = rng.gen_range(1..=3);
        let block = if i % 3 == 0 && i > 0 {
            reqs.last().map_or(0, |r: &Request| r.end() / 4096)
        } else {
            rng.gen_range(0..1000)
        };
        reqs.push(req(
            i,
            file,
            file,
            block * 4096,
            4096,
            Op::Write,
            Nanos::from_micros(i * 200),
        ));
    }
    let mut p = policy("elevator", &["max_merge_bytes=65536"]);
    let served = run_slots(&mut p, &reqs, 1, Nanos::from_micros(500));
    // Every request exactly once (run_slots checks the count; ids must be unique).
    let mut ids: Vec<u64> = served.iter().map(|s| s.req.id.0).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), reqs.len());
    // Merged batches share a start time; within a batch offsets are contiguous.
    let c = p.counters();
    assert!(c.merged > 20, "contiguous requests were merged: {c:?}");
    // Within a sweep, positions ascend; the sweep wraps several times as requests keep arriving.
    let n = sweeps(&served);
    assert!(n > 2, "{n} sweeps");
    let descents = served
        .windows(2)
        .filter(|w| (w[1].req.file, w[1].req.offset) < (w[0].req.file, w[0].req.offset))
        .count();
    assert_eq!(descents + 1, n);
    // Compared with arrival order (noop), the elevator changes direction far less often.
    let mut noop = policy("noop", &[]);
    let noop_served = run_slots(&mut noop, &reqs, 1, Nanos::from_micros(500));
    assert!(
        sweeps(&noop_served) > 10 * n,
        "noop {} vs elevator {n}",
        sweeps(&noop_served)
    );
}

#[test]
fn deadline_serves_every_read_within_its_expiry_plus_a_batch_under_a_write_flood() {
    let service = Nanos::from_micros(2_000); // 2 ms per request
    let mut reqs = Vec::new();
    // A flood: 3,000 sorted writes at t=0, and 3,000 more arriving over the run.
    for i in 0..3000u64 {
        reqs.push(req(i, 1, 1, i * 4096, 4096, Op::Write, Nanos::ZERO));
        reqs.push(req(
            10_000 + i,
            2,
            2,
            i * 4096,
            4096,
            Op::Write,
            Nanos::from_millis(i * 2),
        ));
    }
    // Reads scattered in a third file, one every 37 ms, at positions all over the place.
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for i in 0..150u64 {
        reqs.push(req(
            20_000 + i,
            3,
            3,
            rng.gen_range(0..100_000) * 4096,
            4096,
            Op::Read,
            Nanos::from_millis(i * 37),
        ));
    }
    let mut p = policy("deadline", &["max_merge_bytes=0"]);
    let served = run_slots(&mut p, &reqs, 1, service);
    let bound = Nanos::from_millis(500) + Nanos(service.0 * 16);
    let worst = served
        .iter()
        .filter(|s| s.req.op == Op::Read)
        .map(|s| s.start - s.req.arrival)
        .max()
        .unwrap();
    assert!(worst <= bound, "a read waited {worst} > {bound}");
}

#[test]
fn deadline_sorts_within_a_direction() {
    // Writes arrive in descending order: deadline serves them ascending (one sweep).
    let reqs: Vec<Request> = (0..100u64)
        .map(|i| req(i, 1, 1, (100 - i) * 4096, 4096, Op::Write, Nanos::ZERO))
        .collect();
    let mut p = policy("deadline", &[]);
    let served = run_device(&mut p, &reqs, 1, |b| {
        Nanos::from_micros(10 * b.len() as u64)
    });
    assert_eq!(sweeps(&served), 1);
    assert!(
        p.counters().merged > 90,
        "contiguous writes merged: {:?}",
        p.counters()
    );
}
