//! Switching policies at run time loses nothing: queued requests move with their payloads,
//! in-service batches complete against the instance that dispatched them, the books balance.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{hinted_request, join_within, policy, spawn_workers, Ledger, LIMIT};
use iosets_runtime::{Next, Scheduler};
use iosets_types::{Op, Outcome};

const PRODUCERS: u64 = 4;
const WORKERS: usize = 4;
const PER_PRODUCER: u64 = 50_000;

#[test]
fn switching_under_load_completes_everything_exactly_once() {
    let total = PRODUCERS * PER_PRODUCER;
    let sched: Scheduler<u32> = Scheduler::new(policy("noop"));
    let ledger = Arc::new(Ledger::new(total as usize));
    let submitted = Arc::new(AtomicU64::new(0));
    let workers = spawn_workers(&sched, WORKERS, &ledger);
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (sched, submitted) = (sched.clone(), submitted.clone());
            thread::spawn(move || {
                for i in 0..PER_PRODUCER {
                    let n = p * PER_PRODUCER + i;
                    sched.submit(hinted_request(n % 64, n), n as u32).unwrap();
                    submitted.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let switcher = {
        let (sched, submitted) = (sched.clone(), submitted.clone());
        thread::spawn(move || {
            for (k, name) in ["wfq", "iosets", "noop"].into_iter().enumerate() {
                // Switch at a quarter, half and three quarters of the load, while producers run.
                let mark = total * (k as u64 + 1) / 4;
                let give_up = Instant::now() + LIMIT;
                while submitted.load(Ordering::Relaxed) < mark && Instant::now() < give_up {
                    thread::sleep(Duration::from_micros(200));
                }
                sched.switch_policy(policy(name)).unwrap();
            }
        })
    };
    join_within(producers, LIMIT);
    join_within(vec![switcher], LIMIT);
    sched.shutdown();
    join_within(workers, LIMIT);

    ledger.assert_exactly_once();
    sched.check_balance().unwrap();
    let stats = sched.stats();
    assert_eq!(stats.policy, "noop");
    assert_eq!(stats.switches, 3);
    assert_eq!((stats.retired_policies, stats.rejected_completions), (0, 0));
    assert_eq!(
        (stats.submitted, stats.total_ops(), stats.total_failed()),
        (total, total, 0)
    );
    let c = stats.counters;
    assert_eq!(
        c.inserted - c.withdrawn,
        total,
        "a switch re-inserts exactly what it withdraws"
    );
    assert_eq!(c.dispatched + c.merged + c.withdrawn, c.inserted);
    assert_eq!(c.completed, c.dispatched);
}

#[test]
fn a_batch_in_service_completes_against_the_policy_that_dispatched_it() {
    let sched: Scheduler<&'static str> = Scheduler::new(policy("noop"));
    sched
        .submit(common::request(1, Op::Read, 1, 0, 10), "first")
        .unwrap();
    sched
        .submit(common::request(2, Op::Read, 2, 0, 10), "second")
        .unwrap();
    let first = sched.try_next().work().unwrap();

    sched.switch_policy(policy("wfq")).unwrap();
    assert_eq!(sched.policy_name(), "wfq");
    let stats = sched.stats();
    assert_eq!(
        (stats.retired_policies, stats.queued, stats.in_flight),
        (1, 1, 1)
    );
    sched.check_balance().unwrap();

    let second = sched
        .try_next()
        .work()
        .expect("the queued request moved to wfq with its payload");
    assert_eq!(second.payloads(), &["second"]);
    assert_eq!(first.complete(Outcome::Done { bytes: 10 }), vec!["first"]);
    assert_eq!(
        sched.stats().retired_policies,
        0,
        "the old instance is dropped after its last completion"
    );
    second.complete(Outcome::Done { bytes: 10 });
    assert!(matches!(sched.try_next(), Next::TimedOut));

    sched.check_balance().unwrap();
    let stats = sched.stats();
    assert_eq!(stats.rejected_completions, 0);
    let c = stats.counters;
    assert_eq!(
        (c.inserted, c.withdrawn, c.dispatched, c.completed),
        (3, 1, 2, 2)
    );
}
