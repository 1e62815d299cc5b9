//! The behaviour that defines each classic scheduler (seed 002, Linux's elevators), one test each.

use crate::common;

use common::{policy, run_device, run_slots, Served};
use iosets_policy::{Nanos, Op, Request};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn req(id: u64, job: u64, file: u64, offset: u64, len: u64, op: Op, at: Nanos) -> Request {
    let mut r = common::request(id, job, op, file, offset, len);
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

#[test]
fn cfq_gives_jobs_equal_service_time_whatever_their_request_sizes() {
    // Three jobs, backlogged, with 4 KiB, 64 KiB and 1 MiB requests; the device moves 100 MB/s, so
    // a request's service time is proportional to its size (40 µs .. 10 ms).
    let sizes = [4096u64, 65_536, 1 << 20];
    let mut reqs = Vec::new();
    for (j, &size) in sizes.iter().enumerate() {
        let n = (400 << 20) / size; // 400 MiB each: more than the run serves
        for i in 0..n {
            reqs.push(req(
                reqs.len() as u64,
                j as u64 + 1,
                j as u64 + 1,
                i * size,
                size,
                Op::Read,
                Nanos::ZERO,
            ));
        }
    }
    let mut p = policy("cfq", &["max_merge_bytes=0"]);
    let per_byte_ns = 10.0; // 100 MB/s
    let served = run_device(&mut p, &reqs, 1, |b| {
        Nanos((b.bytes() as f64 * per_byte_ns) as u64)
    });
    // Service time per job over the first 6 s (60 slices of 100 ms), while all three are backlogged.
    let horizon = Nanos::from_millis(6000);
    let mut time = [0u64; 4];
    for s in served.iter().filter(|s| s.end <= horizon) {
        time[s.req.job.0 as usize] += (s.end - s.start).0;
    }
    let mean = (time[1] + time[2] + time[3]) as f64 / 3.0;
    for (j, &t) in time.iter().enumerate().skip(1) {
        let dev = (t as f64 - mean).abs() / mean;
        assert!(
            dev <= 0.10,
            "job {j}: {:.3} s of service vs mean {:.3} s",
            t as f64 / 1e9,
            mean / 1e9
        );
    }
    // Under noop the small-request job gets a far smaller share of the device time.
    let mut noop = policy("noop", &[]);
    let mut interleaved = reqs.clone();
    interleaved.sort_by_key(|r| (r.offset / r.len, r.job));
    // Requests arriving together go by id: number them in the interleaved order.
    for (k, r) in interleaved.iter_mut().enumerate() {
        r.id = iosets_policy::RequestId(k as u64);
    }
    let served = run_device(&mut noop, &interleaved, 1, |b| {
        Nanos((b.bytes() as f64 * per_byte_ns) as u64)
    });
    let small: u64 = served
        .iter()
        .filter(|s| s.end <= horizon && s.req.job.0 == 1)
        .map(|s| (s.end - s.start).0)
        .sum();
    assert!(
        (small as f64) < 0.05 * horizon.0 as f64,
        "noop gave the 4 KiB job {small} ns"
    );
}

/// Two synchronous sequential readers, each reading its own file: one read outstanding each, the
/// next issued `think` after the previous completes. One service slot; a read costs `seek` unless
/// it starts where the previous read ended, plus `transfer`. Returns the served reads in order and
/// the longest time the device stood idle while a request was queued.
fn two_sync_readers(
    p: &mut iosets_policy::Counted,
    reads_each: u64,
    think: Nanos,
) -> (Vec<Request>, Nanos) {
    use iosets_policy::{Dispatch, Outcome};
    let (seek, transfer, len) = (Nanos::from_millis(8), Nanos::from_micros(500), 65_536u64);
    let mut issued = [0u64; 2];
    let mut next_arrival: [Option<Nanos>; 2] = [Some(Nanos::ZERO), Some(Nanos::ZERO)];
    let mut now = Nanos::ZERO;
    let mut busy: Option<(Nanos, Request)> = None;
    let mut last_end: Option<(u64, u64)> = None;
    let mut served = Vec::new();
    let mut idle_since: Option<Nanos> = Some(Nanos::ZERO);
    let mut worst_idle = Nanos::ZERO;
    let mut id = 0;
    loop {
        for r in 0..2 {
            if next_arrival[r].is_some_and(|t| t <= now) {
                next_arrival[r] = None;
                let job = r as u64 + 1;
                p.enqueue(req(id, job, job, issued[r] * len, len, Op::Read, now), now);
                id += 1;
                issued[r] += 1;
            }
        }
        if p.queued() > 0 && busy.is_none() && idle_since.is_none() {
            idle_since = Some(now);
        }
        let mut timer = None;
        if busy.is_none() {
            match p.dispatch(now) {
                Dispatch::Ready(b) => {
                    let r = *b.head();
                    if let Some(since) = idle_since.take() {
                        worst_idle = worst_idle.max(now - since);
                    }
                    let cost = if last_end == Some((r.file.0, r.offset)) {
                        transfer
                    } else {
                        seek + transfer
                    };
                    last_end = Some((r.file.0, b.end()));
                    busy = Some((now + cost, r));
                    served.push(r);
                }
                Dispatch::NotBefore(t) => timer = Some(t),
                Dispatch::Idle => {}
            }
        }
        let next = [busy.map(|b| b.0), timer, next_arrival[0], next_arrival[1]]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = next else { break };
        now = t;
        if let Some((end, r)) = busy {
            if end <= now {
                busy = None;
                idle_since = None;
                p.complete(r.id, Outcome::Done { bytes: r.len }, now)
                    .unwrap();
                let k = r.job.0 as usize - 1;
                if issued[k] < reads_each {
                    next_arrival[k] = Some(now + think);
                }
            }
        }
    }
    p.check_balance().unwrap();
    (served, worst_idle)
}

fn switches(served: &[Request]) -> usize {
    served.windows(2).filter(|w| w[0].job != w[1].job).count()
}

#[test]
fn anticipatory_serves_sequential_readers_in_long_runs_and_idles_within_its_bound() {
    let think = Nanos::from_millis(1);
    let (served, worst_idle) = two_sync_readers(&mut policy("anticipatory", &[]), 1000, think);
    assert_eq!(served.len(), 2000);
    let (noop_served, _) = two_sync_readers(&mut policy("noop", &[]), 1000, think);
    let (a, n) = (switches(&served), switches(&noop_served));
    // noop alternates between the readers at almost every read; anticipation keeps each reader
    // going until the other's oldest read is due (500 ms).
    assert!(n > 1500, "noop switched {n} times");
    assert!(a * 20 < n, "anticipatory switched {a} times, noop {n}");
    assert!(
        worst_idle <= Nanos::from_millis(6),
        "idled {worst_idle} with work queued"
    );
    // With a think time longer than the window, anticipation gives up at the bound each time.
    let (_, worst_idle) =
        two_sync_readers(&mut policy("anticipatory", &[]), 200, Nanos::from_millis(9));
    assert!(
        worst_idle <= Nanos::from_millis(6),
        "idled {worst_idle} with work queued"
    );
    assert!(
        worst_idle >= Nanos::from_millis(5),
        "the window was used: {worst_idle}"
    );
}
