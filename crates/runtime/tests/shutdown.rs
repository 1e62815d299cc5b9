//! Shutdown refuses new requests, still delivers what is queued, then ends every worker.

use crate::common;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use common::{policy, LIMIT};
use iosets_runtime::{Next, RuntimeError, Scheduler};
use iosets_types::{Op, Outcome, Priority};

#[test]
fn submit_after_shutdown_is_refused_and_queued_work_is_still_delivered() {
    let sched: Scheduler<u32> = Scheduler::new(policy("noop"));
    for i in 0..3 {
        sched
            .submit(common::request(1, Op::Write, 1, i * 10, 10), i as u32)
            .unwrap();
    }
    sched.shutdown();
    assert!(sched.is_shut_down());
    assert_eq!(
        sched.submit(common::request(1, Op::Write, 1, 30, 10), 3),
        Err(RuntimeError::ShutDown)
    );

    let mut delivered = Vec::new();
    while let Some(work) = sched.next() {
        delivered.extend(work.complete(Outcome::Done { bytes: 10 }));
    }
    assert_eq!(delivered, vec![0, 1, 2]);
    assert!(sched.next().is_none(), "next keeps returning None");
    assert!(matches!(
        sched.next_timeout(Duration::from_secs(5)),
        Next::Shutdown
    ));
    assert!(matches!(sched.try_next(), Next::Shutdown));
    let stats = sched.stats();
    assert!(stats.shut_down);
    assert_eq!((stats.submitted, stats.total_ops()), (3, 3));
    sched.check_balance().unwrap();
}

#[test]
fn shutdown_wakes_a_worker_blocked_on_an_empty_queue() {
    let sched: Scheduler<u32> = Scheduler::new(policy("wfq"));
    let (tx, rx) = mpsc::channel();
    let worker = {
        let sched = sched.clone();
        thread::spawn(move || tx.send(sched.next().is_none()).unwrap())
    };
    thread::sleep(Duration::from_millis(20));
    sched.shutdown();
    assert_eq!(
        rx.recv_timeout(LIMIT),
        Ok(true),
        "the blocked worker returned None"
    );
    worker.join().unwrap();
}

#[test]
fn queued_work_blocked_behind_a_service_is_delivered_after_shutdown() {
    // Two jobs of one IO-SETS set: job 2 waits until job 1's request completes.
    let sched: Scheduler<u64> = Scheduler::new(policy("iosets"));
    let hint = Priority::new(0.1);
    for job in [1, 2] {
        let mut r = common::request(job, Op::Write, job, 0, 10);
        r.priority = hint;
        sched.submit(r, job).unwrap();
    }
    let first = sched.try_next().work().unwrap();
    assert_eq!(first.payloads(), &[1]);
    assert!(
        matches!(sched.try_next(), Next::TimedOut),
        "job 2 is blocked by job 1 in service"
    );
    sched.shutdown();

    let (tx, rx) = mpsc::channel();
    let worker = {
        let sched = sched.clone();
        thread::spawn(move || {
            let mut got = Vec::new();
            while let Some(work) = sched.next() {
                got.extend(work.complete(Outcome::Done { bytes: 10 }));
            }
            tx.send(got).unwrap();
        })
    };
    thread::sleep(Duration::from_millis(20));
    first.complete(Outcome::Done { bytes: 10 });
    assert_eq!(
        rx.recv_timeout(LIMIT),
        Ok(vec![2]),
        "the worker got job 2's request, then None"
    );
    worker.join().unwrap();
    sched.check_balance().unwrap();
    assert_eq!(sched.stats().total_ops(), 2);
}
