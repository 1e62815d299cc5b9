//! The limit on data batches in service (`Scheduler::set_inservice_limit`): priorities act only
//! where requests queue, so with every request in service at once the policy orders nothing;
//! with the limit, the rest wait in the policy and its order decides. Metadata is not held by
//! the limit, a parked batch is never lost, and the wait of a request held back by the limit is
//! charged to whoever holds the slots, not to the policy.
//!
//! The device here is a FIFO the test drives: batches are handed out with `try_next`, complete
//! in the order they went into service, and each completion brings its job's next request at
//! once (closed-loop clients, like synchronous `dd` writers). Deterministic: one thread.

use std::collections::VecDeque;

use iosets_runtime::{Counted, InServiceLimit, Next, RuntimeError, Scheduler, Work};
use iosets_types::{FileId, JobId, Op, Outcome, Priority, Request};

const HIGH: JobId = JobId(1);
const LOW: JobId = JobId(2);
const MIB: u64 = 1 << 20;

fn write(job: JobId, file: u64) -> Request {
    Request::builder(job, Op::Write)
        .file(FileId(file))
        .range(0, MIB)
        .build()
}

fn scheduler(limit: InServiceLimit) -> Scheduler<JobId> {
    let s = Scheduler::new(Counted::build("iosets", &[]).unwrap());
    s.set_service_threads(16).unwrap();
    s.set_inservice_limit(limit).unwrap();
    s.set_priority(HIGH, Priority::new(1.0));
    s.set_priority(LOW, Priority::new(0.01));
    s
}

/// Hands out everything the scheduler lets go now, into the device FIFO.
fn fill(s: &Scheduler<JobId>, device: &mut VecDeque<Work<JobId>>) {
    loop {
        match s.try_next() {
            Next::Work(w) => device.push_back(w),
            Next::TimedOut | Next::Shutdown => return,
        }
    }
}

/// Four closed-loop writers per job; `completions` completions on the FIFO device. Returns the
/// MiB each job had completed, and the most batches ever in service at once.
fn run(limit: InServiceLimit, completions: usize) -> (u64, u64, usize) {
    let s = scheduler(limit);
    for k in 0..4 {
        s.submit(write(HIGH, k), HIGH).unwrap();
        s.submit(write(LOW, 10 + k), LOW).unwrap();
    }
    let mut device = VecDeque::new();
    let (mut hi, mut lo, mut most) = (0, 0, 0);
    for n in 0..completions {
        fill(&s, &mut device);
        most = most.max(device.len());
        let w = device.pop_front().expect("something in service");
        for job in w.complete(Outcome::Done { bytes: MIB }) {
            if job == HIGH {
                hi += 1;
            } else {
                lo += 1;
            }
            s.submit(write(job, n as u64), job).unwrap();
        }
    }
    s.check_balance().unwrap();
    (hi, lo, most)
}

#[test]
fn with_every_request_in_service_priorities_do_nothing() {
    let (hi, lo, most) = run(InServiceLimit::Off, 800);
    assert_eq!(most, 8, "all eight writers' requests in service at once");
    assert_eq!(
        hi, lo,
        "a FIFO device serves the two jobs alike: {hi} vs {lo}"
    );
}

#[test]
fn a_limit_below_the_favoured_jobs_concurrency_gives_it_its_weighted_share() {
    for n in [1, 2, 3] {
        let (hi, lo, most) = run(InServiceLimit::Fixed(n), 800);
        assert_eq!(most, n, "limit {n}");
        let share = hi as f64 / (hi + lo) as f64;
        // Weights 1 : 0.01: 1/1.01 = 0.990 of the bytes while both are backlogged.
        assert!(
            share >= 0.98,
            "limit {n}: high's share {share:.3} ({hi} vs {lo})"
        );
        assert!(lo > 0, "limit {n}: the low job is not starved");
    }
    // At the job's own concurrency the limit no longer makes it queue.
    let (hi, lo, _) = run(InServiceLimit::Fixed(4), 800);
    assert!(
        (hi as f64) / ((hi + lo) as f64) < 0.9,
        "limit 4 with 4 writers: {hi} vs {lo}"
    );
}

#[test]
fn metadata_is_not_held_by_the_limit() {
    let s = scheduler(InServiceLimit::Fixed(1));
    s.submit(write(HIGH, 1), HIGH).unwrap();
    s.submit(write(HIGH, 2), HIGH).unwrap();
    let Next::Work(first) = s.try_next() else {
        panic!("the first write goes")
    };
    assert!(
        matches!(s.try_next(), Next::TimedOut),
        "a second write waits for the slot"
    );
    // A stat of the low job: the policy may hand it out (it needs no data slot) — or, when a
    // data batch comes first in its order, that one is parked and handed out when the slot frees.
    s.submit(Request::builder(LOW, Op::Other).build(), LOW)
        .unwrap();
    let mut out = Vec::new();
    while let Next::Work(w) = s.try_next() {
        out.push(w);
    }
    let st = s.stats();
    assert_eq!(st.inservice.data_in_service, 1);
    let ops: Vec<Op> = out
        .iter()
        .map(|w| w.completion().batch().head().op)
        .collect();
    assert!(
        ops.iter().all(|&o| o == Op::Other),
        "only metadata passes a full limit: {ops:?}"
    );
    // Whatever was parked goes once the slot frees; nothing is lost.
    for w in out {
        w.complete(Outcome::Done { bytes: 0 });
    }
    first.complete(Outcome::Done { bytes: MIB });
    let mut rest = 0;
    while let Next::Work(w) = s.try_next() {
        rest += 1;
        w.complete(Outcome::Done { bytes: MIB });
    }
    assert!(rest >= 1, "the second write goes when the slot frees");
    s.check_balance().unwrap();
    let st = s.stats();
    assert_eq!((st.queued, st.in_flight, st.counters.completed), (0, 0, 3));
}

#[test]
fn a_zero_limit_is_refused() {
    let s = scheduler(InServiceLimit::Auto);
    assert!(matches!(
        s.set_inservice_limit(InServiceLimit::Fixed(0)),
        Err(RuntimeError::InService { .. })
    ));
    assert_eq!(s.stats().inservice.mode, InServiceLimit::Auto);
}

#[test]
fn shutdown_hands_out_a_parked_batch_before_the_workers_leave() {
    let s = scheduler(InServiceLimit::Fixed(1));
    s.submit(write(HIGH, 1), HIGH).unwrap();
    let Next::Work(first) = s.try_next() else {
        panic!("the first write goes")
    };
    s.submit(write(HIGH, 2), HIGH).unwrap();
    // A metadata request makes the scheduler ask the policy with the limit full: the write
    // ahead of it in the job's queue is parked.
    s.submit(Request::builder(HIGH, Op::Other).build(), HIGH)
        .unwrap();
    assert!(matches!(s.try_next(), Next::TimedOut));
    assert!(s.stats().inservice.parked, "the second write is parked");
    s.shutdown();
    assert!(
        matches!(s.try_next(), Next::TimedOut),
        "not Shutdown while a batch is parked"
    );
    first.complete(Outcome::Done { bytes: MIB });
    let mut ops = Vec::new();
    loop {
        match s.try_next() {
            Next::Work(w) => {
                ops.push(w.completion().batch().head().op);
                w.complete(Outcome::Done { bytes: 0 });
            }
            Next::Shutdown => break,
            Next::TimedOut => panic!("work left but none handed out: {:?}", s.stats()),
        }
    }
    assert_eq!(ops, [Op::Write, Op::Other], "the job's order is kept");
    s.check_balance().unwrap();
}
