//! `Scheduler::book_memory` is an honest estimate: what it reports for tens of thousands of jobs
//! is what the process's resident memory grew by while the book filled. One test in this binary,
//! so that nothing else allocates meanwhile.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use iosets_runtime::{BookConfig, Clock, Scheduler};
use iosets_types::{FileId, JobId, Nanos, Op, Outcome, Request};

#[derive(Default)]
struct ManualClock(AtomicU64);

impl Clock for ManualClock {
    fn now(&self) -> Nanos {
        Nanos(self.0.load(Ordering::SeqCst))
    }
}

/// This process's resident memory, bytes.
fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

/// Each of `jobs` jobs (from `first`) writes `per_job` times, waits spread over 1 µs to 10 ms.
fn fill(sched: &Scheduler<u64>, clock: &ManualClock, first: u64, jobs: u64, per_job: u64) {
    for k in 0..per_job {
        for job in first..first + jobs {
            let t = Nanos(clock.now().0 + 1_000);
            clock.0.store(t.0, Ordering::SeqCst);
            sched
                .submit(
                    Request::builder(JobId(job), Op::Write)
                        .file(FileId(job))
                        .range(k * 4096, 4096)
                        .build(),
                    job,
                )
                .unwrap();
            // Waits from 1 µs to about 10 ms, different per job and request.
            let wait = 1_000 * (1 + (job * 7 + k * 13) % 10_000);
            clock.0.store(t.0 + wait, Ordering::SeqCst);
            let work = sched.try_next().work().expect("noop serves at once");
            let bytes = work.batch().bytes();
            work.complete(Outcome::Done { bytes });
        }
    }
}

#[test]
fn book_memory_matches_the_resident_memory_it_takes() {
    const JOBS: u64 = 50_000;
    let clock = Arc::new(ManualClock::default());
    let sched: Scheduler<u64> = Scheduler::with_book(
        common::policy("noop"),
        clock.clone(),
        BookConfig::default()
            .auto_priority(true)
            .max_jobs(1 << 20)
            .forget_after(std::time::Duration::from_secs(1 << 20)),
    );
    // What every job shares (the policy's and the latency histograms' allocations) first.
    fill(&sched, &clock, 0, 16, 3);
    let (before, _) = sched.book_memory();
    let rss_before = rss();
    fill(&sched, &clock, 1_000, JOBS, 3);
    let grown = rss().saturating_sub(rss_before);
    let (after, jobs) = sched.book_memory();
    assert_eq!(jobs as u64, JOBS + 16);
    let reported = after - before;
    println!(
        "{JOBS} jobs: book_memory grew by {reported} bytes ({} per job), resident memory by \
         {grown} bytes ({} per job)",
        reported / JOBS as usize,
        grown / JOBS as usize
    );
    // Within a quarter either way (the allocator's free lists and the maps' old tables, freed
    // as they grew, are in the resident figure and not in the book's).
    assert!(
        reported * 4 >= grown * 3 && reported * 4 <= grown * 5,
        "book_memory says {reported} bytes, the process grew by {grown}"
    );
    sched.check_balance().unwrap();
}
