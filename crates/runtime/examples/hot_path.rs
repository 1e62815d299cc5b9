//! The runtime's hot path on one thread, for counting instructions (`valgrind --tool=callgrind`)
//! rather than timing on a shared machine: N requests of 64 jobs (four IO-SETS sets by hint),
//! each submitted, handed out and completed, with up to `DEPTH` in service at once.
//!
//! `cargo run --release -p iosets-runtime --example hot_path -- POLICY N`

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use iosets_runtime::{Clock, Counted, Scheduler, Work};
use iosets_types::{FileId, JobId, Op, Outcome, Priority, Request};

const JOBS: u64 = 64;

/// A clock that moves 1 µs per reading: runs are the same every time (a policy's timers see
/// the same instants), whatever the machine's load or valgrind's slowdown.
#[derive(Debug, Default)]
struct StepClock(AtomicU64);

impl Clock for StepClock {
    fn now(&self) -> iosets_types::Nanos {
        iosets_types::Nanos(self.0.fetch_add(1_000, Ordering::Relaxed))
    }
}
const DEPTH: usize = 4;

fn main() {
    let mut args = std::env::args().skip(1);
    let policy = args.next().unwrap_or_else(|| "iosets".into());
    let n: u64 = args
        .next()
        .map(|s| s.parse().expect("N is a count"))
        .unwrap_or(200_000);
    let sched: Scheduler<u64> = Scheduler::with_clock(
        Counted::build(&policy, &[]).expect("a registered policy"),
        Arc::new(StepClock::default()),
    );
    sched.set_service_threads(DEPTH).expect("DEPTH > 0");
    let mut in_service: VecDeque<Work<u64>> = VecDeque::new();
    let mut done = 0u64;
    for i in 0..n {
        let job = i % JOBS;
        let mut r = Request::builder(JobId(job), Op::Write)
            .file(FileId(job))
            .range(i * 4096, 4096)
            .build();
        r.priority = Priority::new(10f64.powi(-((job % 4) as i32)));
        sched.submit(r, i).expect("not shut down");
        while in_service.len() < DEPTH {
            match sched.try_next().work() {
                Some(w) => in_service.push_back(w),
                None => break,
            }
        }
        if in_service.len() == DEPTH || i + 1 == n {
            if let Some(w) = in_service.pop_front() {
                done += w.batch().len() as u64;
                let bytes = w.batch().bytes();
                w.complete(Outcome::Done { bytes });
            }
        }
    }
    sched.shutdown();
    loop {
        while in_service.len() < DEPTH {
            match sched.try_next().work() {
                Some(w) => in_service.push_back(w),
                None => break,
            }
        }
        let Some(w) = in_service.pop_front() else {
            break;
        };
        done += w.batch().len() as u64;
        let bytes = w.batch().bytes();
        w.complete(Outcome::Done { bytes });
    }
    assert_eq!(done, n, "every request served");
    sched.check_balance().expect("balanced");
    println!("{policy}: {n} requests served");
}
