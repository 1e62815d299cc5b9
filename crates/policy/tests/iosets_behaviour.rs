//! IO-SETS behaviours on a modelled device with several service slots: exclusivity inside a set,
//! first-come first-served by burst, the `max_exclusive_ms` bounds, 10:1 bytes between sets
//! with priorities 0.1 and 0.01, and `hold_idle_ms` keeping a synchronous job's phase together.

use crate::common;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use common::{drain_backlog, policy, run_slots, Served};
use iosets_policy::{Counted, Dispatch, Nanos, Op, Outcome, Priority, Request, RequestId};

/// `n` requests of `len` bytes by `job`, arriving at `at`, with priority hint `prio`.
fn burst(first_id: u64, job: u64, n: u64, len: u64, at: Nanos, prio: f64) -> Vec<Request> {
    (0..n)
        .map(|i| {
            let mut r = common::request(first_id + i, job, Op::Write, job, i * len, len);
            r.arrival = at;
            r.priority = Priority::new(prio);
            r
        })
        .collect()
}

/// Asserts that no two different jobs of `jobs` are ever in service at the same time.
fn assert_exclusive(served: &[Served], jobs: &[u64]) {
    let mine: Vec<&Served> = served
        .iter()
        .filter(|s| jobs.contains(&s.req.job.0))
        .collect();
    for a in &mine {
        for b in &mine {
            if a.req.job != b.req.job {
                let overlap = a.start < b.end && b.start < a.end;
                assert!(
                    !overlap,
                    "jobs {} and {} in service together: {a:?} {b:?}",
                    a.req.job, b.req.job
                );
            }
        }
    }
}

/// The requests of `job` in `served`.
fn of_job(served: &[Served], job: u64) -> impl Iterator<Item = &Served> {
    served.iter().filter(move |s| s.req.job.0 == job)
}

/// When `job` first started service.
fn first_start(served: &[Served], job: u64) -> Nanos {
    of_job(served, job).map(|s| s.start).min().unwrap()
}

/// When `job`'s last request finished.
fn last_end(served: &[Served], job: u64) -> Nanos {
    of_job(served, job).map(|s| s.end).max().unwrap()
}

#[test]
fn two_jobs_of_one_set_never_share_the_device() {
    // Three jobs in set 0.1 and one in set 0.01, interleaved arrivals, 4 slots.
    let mut reqs = Vec::new();
    for (k, job) in [1u64, 2, 3].iter().enumerate() {
        for b in 0..5u64 {
            let at = Nanos::from_millis(b * 50 + k as u64 * 7);
            reqs.extend(burst(reqs.len() as u64, *job, 8, 4096, at, 0.1));
        }
    }
    reqs.extend(burst(reqs.len() as u64, 9, 40, 4096, Nanos::ZERO, 0.01));
    let mut p = policy("iosets", &[]);
    let served = run_slots(&mut p, &reqs, 4, Nanos::from_millis(3));
    assert_exclusive(&served, &[1, 2, 3]);
    // The other set is served alongside: job 9 overlaps with some job of set 0.1.
    let overlaps = served.iter().filter(|s| s.req.job.0 == 9).any(|s9| {
        served
            .iter()
            .any(|o| o.req.job.0 != 9 && o.start < s9.end && s9.start < o.end)
    });
    assert!(overlaps, "sets must share the device");
}

#[test]
fn the_burst_that_arrived_first_finishes_first() {
    let mut reqs = Vec::new();
    // Arrival order of bursts: job 5, then 3, then 8 (ids deliberately not in that order).
    for (k, job) in [5u64, 3, 8].iter().enumerate() {
        reqs.extend(burst(
            reqs.len() as u64,
            *job,
            20,
            4096,
            Nanos(k as u64 * 1000),
            0.1,
        ));
    }
    let mut p = policy("iosets", &[]);
    let served = run_slots(&mut p, &reqs, 4, Nanos::from_millis(1));
    let (start, finish) = (|j| first_start(&served, j), |j| last_end(&served, j));
    assert!(
        finish(5) <= start(3) && finish(3) <= start(8),
        "FCFS by burst arrival"
    );

    // With order=jobid the set goes by job id instead.
    let mut p = policy("iosets", &["order=jobid"]);
    let served = run_slots(&mut p, &reqs, 4, Nanos::from_millis(1));
    let (start, finish) = (|j| first_start(&served, j), |j| last_end(&served, j));
    // Job 5 took the free set first; then the next id after 5 is 8, then 3 (wrapping).
    assert!(
        finish(5) <= start(8) && finish(8) <= start(3),
        "next job id after the last holder"
    );
}

#[test]
fn max_exclusive_bounds_holding_and_waiting() {
    let bound = Nanos::from_millis(50);
    let service = Nanos::from_millis(4);
    let slots = 3;
    // Four jobs of one set, each with a long burst, arriving a little apart.
    let mut reqs = Vec::new();
    for (k, job) in [1u64, 2, 3, 4].iter().enumerate() {
        reqs.extend(burst(
            reqs.len() as u64,
            *job,
            200,
            4096,
            Nanos::from_millis(k as u64),
            0.1,
        ));
    }
    let mut p = policy("iosets", &["max_exclusive_ms=50"]);
    let served = run_slots(&mut p, &reqs, slots, service);
    assert_exclusive(&served, &[1, 2, 3, 4]);

    // Tenures: maximal runs of consecutive dispatches of one job.
    let mut tenures: Vec<(u64, Nanos, Nanos)> = Vec::new();
    for s in &served {
        match tenures.last_mut() {
            Some((job, _, end)) if *job == s.req.job.0 => *end = (*end).max(s.end),
            _ => tenures.push((s.req.job.0, s.start, s.end)),
        }
    }
    assert!(
        tenures.len() > 8,
        "jobs must take turns: {} tenures",
        tenures.len()
    );
    for &(job, start, end) in &tenures {
        // Since when another job of the set has been waiting during this tenure.
        let waiting_since = served
            .iter()
            .filter(|o| o.req.job.0 != job && o.req.arrival <= end && o.start >= end)
            .map(|o| o.req.arrival)
            .min();
        if let Some(w) = waiting_since {
            let held = end - start.max(w);
            assert!(
                held <= bound + service,
                "job {job} held its set {held} while another waited"
            );
        }
    }
    // Each job's first service starts within (jobs ahead) × (bound + one request).
    for (ahead, job) in [1u64, 2, 3, 4].iter().enumerate() {
        let first = served
            .iter()
            .filter(|s| s.req.job.0 == *job)
            .map(|s| s.start)
            .min()
            .unwrap();
        let arrived = Nanos::from_millis(ahead as u64);
        let limit = Nanos((bound + service).0 * ahead as u64);
        assert!(
            first - arrived <= limit,
            "job {job} waited {} > {limit}",
            first - arrived
        );
    }

    // Without the bound, job 1 keeps the set for its whole burst.
    let mut p = policy("iosets", &[]);
    let served = run_slots(&mut p, &reqs, slots, service);
    assert!(served[..200].iter().all(|s| s.req.job.0 == 1));
}

#[test]
fn sets_with_priorities_one_tenth_and_one_hundredth_get_ten_to_one() {
    // Two jobs in set 0.1 and two in set 0.01; everything backlogged from the start.
    let mut reqs = Vec::new();
    for (job, prio) in [(1u64, 0.1), (2, 0.1), (3, 0.01), (4, 0.01)] {
        reqs.extend(burst(
            reqs.len() as u64,
            job,
            3000,
            4096 + job * 1000,
            Nanos::ZERO,
            prio,
        ));
    }
    let mut p = policy("iosets", &[]);
    let order = drain_backlog(&mut p, &reqs);
    // Until the first set drains, bytes go 10:1.
    let last_high = order.iter().rposition(|r| r.job.0 <= 2).unwrap();
    let last_low = order.iter().rposition(|r| r.job.0 >= 3).unwrap();
    let both = last_high.min(last_low);
    let (mut high, mut low) = (0f64, 0f64);
    for r in &order[..both] {
        if r.job.0 <= 2 {
            high += r.len as f64;
        } else {
            low += r.len as f64;
        }
    }
    let ratio = high / low;
    assert!(
        (ratio - 10.0).abs() <= 0.5,
        "bytes ratio {ratio:.3}, want 10 ± 5%"
    );
    // Inside each set one job at a time: job 1 finishes before job 2 starts.
    let first2 = order.iter().position(|r| r.job.0 == 2).unwrap();
    let last1 = order.iter().rposition(|r| r.job.0 == 1).unwrap();
    assert!(last1 < first2);
}

/// Job 1 is synchronous: `writes` writes then an fsync, each sent `think` after the previous one is
/// answered (one outstanding). Job 2 arrives just after job 1's first write with `backlog` requests
/// at once. Both are in set 0.1; the device has `slots` slots and serves a request in `service`.
fn synchronous_against_backlog(p: &mut Counted, writes: u64, backlog: u64) -> Vec<Served> {
    let (slots, service, think) = (4, Nanos::from_millis(1), Nanos::from_micros(100));
    let sync_req = |k: u64| {
        let op = if k < writes { Op::Write } else { Op::Other };
        let mut r = common::request(k, 1, op, 1, k * 4096, 4096);
        r.priority = Priority::new(0.1);
        r
    };
    let mut backlogged = burst(1000, 2, backlog, 4096, Nanos::from_micros(10), 0.1);
    let mut next_sync = Some((Nanos::ZERO, 0u64));
    let mut busy: BinaryHeap<Reverse<(Nanos, RequestId)>> = BinaryHeap::new();
    let mut out = Vec::new();
    let mut now = Nanos::ZERO;
    loop {
        if let Some((at, k)) = next_sync.filter(|&(at, _)| at <= now) {
            let mut r = sync_req(k);
            r.arrival = at;
            p.enqueue(r, now);
            next_sync = None;
        }
        for r in backlogged.iter_mut().filter(|r| r.arrival <= now) {
            p.enqueue(*r, now);
            r.arrival = Nanos(u64::MAX);
        }
        backlogged.retain(|r| r.arrival != Nanos(u64::MAX));
        let mut timer = None;
        while busy.len() < slots {
            match p.dispatch(now) {
                Dispatch::Ready(b) => {
                    let r = *b.head();
                    out.push(Served {
                        req: r,
                        start: now,
                        end: now + service,
                    });
                    busy.push(Reverse((now + service, r.id)));
                }
                Dispatch::NotBefore(t) => {
                    timer = Some(t);
                    break;
                }
                Dispatch::Idle => break,
            }
        }
        let next_done = busy.peek().map(|Reverse((t, _))| *t);
        let next_in = backlogged.iter().map(|r| r.arrival).min();
        let candidates = [next_done, next_sync.map(|(t, _)| t), next_in, timer];
        let Some(t) = candidates.into_iter().flatten().min() else {
            break;
        };
        now = t;
        while let Some(&Reverse((t, id))) = busy.peek() {
            if t > now {
                break;
            }
            busy.pop();
            p.complete(id, Outcome::Done { bytes: 4096 }, now).unwrap();
            if id.0 < writes {
                next_sync = Some((now + think, id.0 + 1));
            }
        }
    }
    p.check_balance().unwrap();
    assert_eq!(
        out.len() as u64,
        writes + 1 + backlog,
        "every request served"
    );
    out
}

#[test]
fn hold_idle_keeps_a_synchronous_phase_and_its_fsync_together() {
    let (writes, backlog) = (20, 60);
    let fsync_end = |served: &[Served]| served.iter().find(|s| s.req.op == Op::Other).unwrap().end;

    // The paper's rule: job 1's set passes on after each write, so its second write and its fsync
    // wait behind job 2's whole backlog.
    let mut p = policy("iosets", &[]);
    let served = synchronous_against_backlog(&mut p, writes, backlog);
    assert_exclusive(&served, &[1, 2]);
    assert!(fsync_end(&served) > last_end(&served, 2));

    // With 2 ms of anticipation the whole phase goes first; job 2 gets the set when the holder's
    // linger after the fsync expires, not before.
    let mut p = policy("iosets", &["hold_idle_ms=2"]);
    let served = synchronous_against_backlog(&mut p, writes, backlog);
    assert_exclusive(&served, &[1, 2]);
    assert_eq!(last_end(&served, 1), fsync_end(&served));
    assert_eq!(
        first_start(&served, 2),
        fsync_end(&served) + Nanos::from_millis(2)
    );
    assert!(served[..=writes as usize].iter().all(|s| s.req.job.0 == 1));
}
