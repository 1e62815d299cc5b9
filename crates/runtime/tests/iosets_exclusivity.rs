//! IO-SETS with real threads: two jobs of one set are never in service at the same time, while
//! the worker pool still serves in parallel.

use crate::common;

use iosets_types::FileId;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{join_within, policy, LIMIT};
use iosets_runtime::Scheduler;
use iosets_types::{JobId, Op, Outcome, Priority, Request};

const WORKERS: usize = 4;
const PER_JOB: u64 = 40;

/// Jobs 1..=4 share hint 0.1 (one set), jobs 5..=7 share 0.01 (another), job 8 has no hint.
fn hint(job: u64) -> Option<Priority> {
    match job {
        1..=4 => Priority::new(0.1),
        5..=7 => Priority::new(0.01),
        _ => None,
    }
}

/// A service interval on a logical clock: `start` is taken after the batch is handed out, `end`
/// before it is completed, both from one sequentially consistent counter.
#[derive(Clone, Copy, Debug)]
struct Served {
    job: JobId,
    start: u64,
    end: u64,
}

#[test]
fn jobs_of_one_set_never_overlap_in_service() {
    let sched: Scheduler<u64> = Scheduler::new(policy("iosets"));
    let tick = Arc::new(AtomicU64::new(0));
    let log = Arc::new(Mutex::new(Vec::<Served>::new()));

    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (sched, tick, log) = (sched.clone(), tick.clone(), log.clone());
            thread::spawn(move || {
                while let Some(work) = sched.next() {
                    let start = tick.fetch_add(1, Ordering::SeqCst);
                    thread::sleep(Duration::from_micros(300));
                    let end = tick.fetch_add(1, Ordering::SeqCst);
                    let mut log = log.lock().unwrap();
                    log.extend(work.batch().requests().map(|r| Served {
                        job: r.job,
                        start,
                        end,
                    }));
                    drop(log);
                    let bytes = work.batch().bytes();
                    work.complete(Outcome::Done { bytes });
                }
            })
        })
        .collect();
    let producers: Vec<_> = (1..=8u64)
        .map(|job| {
            let sched = sched.clone();
            thread::spawn(move || {
                for i in 0..PER_JOB {
                    let mut r = Request::builder(JobId(job), Op::Write)
                        .file(FileId(job))
                        .range(i * 4096, 4096)
                        .build();
                    r.priority = hint(job);
                    sched.submit(r, job).unwrap();
                    if i % 10 == 9 {
                        thread::sleep(Duration::from_millis(1)); // bursts
                    }
                }
            })
        })
        .collect();
    join_within(producers, LIMIT);
    sched.shutdown();
    join_within(workers, LIMIT);

    let log = log.lock().unwrap().clone();
    assert_eq!(log.len() as u64, 8 * PER_JOB);
    let overlap = |a: &Served, b: &Served| a.start < b.end && b.start < a.end;
    let set_of = |job: JobId| hint(job.0).map(|p| p.key());
    let mut parallel = 0;
    for (i, a) in log.iter().enumerate() {
        for b in &log[i + 1..] {
            if !overlap(a, b) {
                continue;
            }
            parallel += 1;
            if a.job != b.job && set_of(a.job).is_some() && set_of(a.job) == set_of(b.job) {
                panic!(
                    "jobs {} and {} of one set were in service together: {a:?} {b:?}",
                    a.job, b.job
                );
            }
        }
    }
    assert!(
        parallel > 0,
        "the workers never served in parallel: the test proves nothing"
    );
    sched.check_balance().unwrap();
    assert_eq!(sched.stats().total_ops(), 8 * PER_JOB);
}
