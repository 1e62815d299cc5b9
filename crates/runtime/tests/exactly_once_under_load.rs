//! Many producers, a worker pool: every request is completed exactly once and the books balance.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use common::{hinted_request, join_within, policy, spawn_workers, Ledger, LIMIT};
use iosets_runtime::{CompletionEvent, Scheduler};

const PRODUCERS: u64 = 8;
const WORKERS: usize = 4;
const JOBS: u64 = 64;
/// The full load in every build: about 2 s for the three policies in release, 15 s in debug.
const PER_PRODUCER: u64 = 100_000;

fn run(name: &str) {
    let total = PRODUCERS * PER_PRODUCER;
    let sched: Scheduler<u32> = Scheduler::new(policy(name));
    let events = Arc::new(AtomicU64::new(0));
    let counted = events.clone();
    sched.set_listener(move |e: &CompletionEvent| {
        assert!(e.outcome.is_ok());
        counted.fetch_add(1, Ordering::Relaxed);
    });
    let ledger = Arc::new(Ledger::new(total as usize));
    let workers = spawn_workers(&sched, WORKERS, &ledger);
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let sched = sched.clone();
            thread::spawn(move || {
                for i in 0..PER_PRODUCER {
                    let job = (p * 13 + i) % JOBS;
                    let payload = (p * PER_PRODUCER + i) as u32;
                    sched
                        .submit(hinted_request(job, p * PER_PRODUCER + i), payload)
                        .unwrap();
                }
            })
        })
        .collect();
    join_within(producers, LIMIT);
    sched.shutdown();
    let batches: u64 = join_within(workers, LIMIT).into_iter().sum();

    ledger.assert_exactly_once();
    assert_eq!(
        events.load(Ordering::Relaxed),
        total,
        "listener called once per request"
    );
    sched.check_balance().unwrap();
    let stats = sched.stats();
    assert_eq!(stats.policy, name);
    assert_eq!(stats.submitted, total);
    assert_eq!(stats.total_ops(), total);
    assert_eq!(stats.total_failed(), 0);
    assert_eq!(
        (stats.queued, stats.in_flight, stats.requests_in_service),
        (0, 0, 0)
    );
    assert_eq!(stats.jobs.len() as u64, JOBS);
    let c = stats.counters;
    assert_eq!(c.inserted, total);
    assert_eq!(
        c.dispatched + c.merged,
        total,
        "every request left in exactly one batch"
    );
    assert_eq!(c.dispatched, batches);
    assert_eq!(c.completed, c.dispatched);
    assert_eq!((c.failed, c.withdrawn), (0, 0));
    let bytes: u64 = stats
        .jobs
        .iter()
        .map(|j| j.bytes_read + j.bytes_written)
        .sum();
    assert_eq!(bytes, total * 4096);
    let waits: u64 = stats.jobs.iter().map(|j| j.queue_wait.count).sum();
    assert_eq!(waits, total, "one queue wait recorded per request");
}

#[test]
fn noop_completes_every_request_exactly_once() {
    run("noop");
}

#[test]
fn wfq_completes_every_request_exactly_once() {
    run("wfq");
}

#[test]
fn iosets_completes_every_request_exactly_once() {
    run("iosets");
}
