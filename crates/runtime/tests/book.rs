//! The job book: automatic priorities from detected periods, priority provenance, forgetting of
//! idle jobs and the bound on the book's size.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iosets_runtime::book::{DETECTOR_BYTES, JOB_RECORD_BYTES};
use iosets_runtime::{BookConfig, Clock, PrioritySource, Scheduler};
use iosets_types::{JobId, Nanos, Op, Outcome, Priority};

/// A clock the test moves by hand.
#[derive(Default)]
struct ManualClock(AtomicU64);

impl ManualClock {
    fn set(&self, t: Nanos) {
        self.0.store(t.0, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Nanos {
        Nanos(self.0.load(Ordering::SeqCst))
    }
}

fn scheduler(book: BookConfig) -> (Scheduler<u64>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::default());
    let sched = Scheduler::with_book(common::policy("iosets"), clock.clone(), book);
    (sched, clock)
}

/// Submits one request of `job` at `at`, serves it at once and completes it `service` later.
fn serve_one(
    sched: &Scheduler<u64>,
    clock: &ManualClock,
    job: u64,
    at: Nanos,
    service: Nanos,
    hint: Option<f64>,
) {
    clock.set(at);
    let mut req = common::request(job, Op::Write, job, 0, 1 << 20);
    req.priority = hint.and_then(Priority::new);
    sched.submit(req, job).unwrap();
    let work = sched.try_next().work().expect("the request can go at once");
    clock.set(at + service);
    let bytes = work.batch().bytes();
    work.complete(Outcome::Done { bytes });
}

#[test]
fn a_periodic_job_moves_to_its_set_and_the_control_plane_wins() {
    let (sched, clock) = scheduler(BookConfig::default().auto_priority(true));
    // Job 1: a burst of ten 1 MiB writes every 20 s (Set-10 set 1, priority 0.1), 12 periods.
    // Job 2: the same every 2 s (set 0, priority 1), 60 periods, carrying a hint of 0.5.
    let mut events: Vec<(Nanos, u64)> = Vec::new();
    for k in 0..12u64 {
        for r in 0..10u64 {
            events.push((Nanos::from_millis(k * 20_000 + r * 20), 1));
        }
    }
    for k in 0..60u64 {
        for r in 0..10u64 {
            events.push((Nanos::from_millis(k * 2_000 + 1_000 + r * 20), 2));
        }
    }
    events.sort();
    for (at, job) in events {
        let hint = (job == 2).then_some(0.5);
        serve_one(&sched, &clock, job, at, Nanos::from_millis(20), hint);
    }
    let one = sched.priority(JobId(1)).expect("job 1 has a priority");
    assert_eq!(
        (one.value.get(), one.source),
        (0.1, PrioritySource::Auto),
        "{one:?}"
    );
    let two = sched.priority(JobId(2)).expect("job 2 has a priority");
    assert_eq!(
        (two.value.get(), two.source),
        (1.0, PrioritySource::Auto),
        "auto beats the hint: {two:?}"
    );
    let stats = sched.job_stats(JobId(1)).unwrap();
    assert_eq!(stats.set, Some(1));
    let period = stats.period.unwrap().as_secs_f64();
    assert!((period - 20.0).abs() < 1.0, "period {period}");
    assert_eq!(stats.ops, 120);
    assert_eq!(stats.bytes_written, 120 << 20);

    // The control plane overrides, and clearing it puts the automatic priority back.
    sched.set_priority(JobId(1), Priority::new(5.0));
    let p = sched.priority(JobId(1)).unwrap();
    assert_eq!((p.value.get(), p.source), (5.0, PrioritySource::Control));
    sched.set_priority(JobId(1), None);
    let p = sched.priority(JobId(1)).unwrap();
    assert_eq!((p.value.get(), p.source), (0.1, PrioritySource::Auto));

    // A job with hints only reports its last hint.
    serve_one(
        &sched,
        &clock,
        3,
        Nanos::from_secs_f64(200.0),
        Nanos(1),
        Some(0.25),
    );
    let p = sched.priority(JobId(3)).unwrap();
    assert_eq!((p.value.get(), p.source), (0.25, PrioritySource::Hint));
    sched.check_balance().unwrap();
}

#[test]
fn without_automatic_priorities_nothing_moves() {
    let (sched, clock) = scheduler(BookConfig::default());
    for k in 0..12u64 {
        for r in 0..10u64 {
            let at = Nanos::from_millis(k * 20_000 + r * 20);
            serve_one(&sched, &clock, 1, at, Nanos::from_millis(20), None);
        }
    }
    assert_eq!(sched.priority(JobId(1)), None);
    let stats = sched.job_stats(JobId(1)).unwrap();
    assert_eq!((stats.set, stats.period, stats.ops), (None, None, 120));
}

#[test]
fn idle_jobs_are_forgotten_and_control_priorities_stay() {
    let (sched, clock) = scheduler(
        BookConfig::default()
            .auto_priority(true)
            .forget_after(Duration::from_secs(10)),
    );
    for job in 0..1_000u64 {
        serve_one(&sched, &clock, job, Nanos(job * 1_000), Nanos(500), None);
    }
    sched.set_priority(JobId(5), Priority::new(2.0));
    // Job 7 has a request queued when the sweep runs: it stays.
    clock.set(Nanos::from_millis(5_000));
    sched
        .submit(common::request(7, Op::Read, 7, 0, 4096), 7)
        .unwrap();
    let (bytes, jobs) = sched.book_memory();
    assert_eq!(jobs, 1_000);
    assert!(
        bytes <= 1_000 * (JOB_RECORD_BYTES + DETECTOR_BYTES) + 64 * 1024,
        "{bytes} bytes for 1,000 jobs"
    );

    clock.set(Nanos::from_millis(9_000));
    assert_eq!(sched.forget_idle(), 0, "nobody is idle for 10 s yet");
    clock.set(Nanos::from_millis(20_000));
    assert_eq!(sched.forget_idle(), 999);
    let stats = sched.stats();
    let known: Vec<u64> = stats.jobs.iter().map(|j| j.job.0).collect();
    assert_eq!(
        known,
        vec![5, 7],
        "only the controlled and the busy job remain"
    );
    let five = stats.job(JobId(5)).unwrap();
    assert_eq!(five.ops, 0, "its statistics were forgotten");
    assert_eq!(
        five.priority.map(|p| (p.value.get(), p.source)),
        Some((2.0, PrioritySource::Control))
    );
    assert_eq!(stats.forgotten_jobs, 999);
    let (bytes, jobs) = sched.book_memory();
    assert_eq!(jobs, 1, "job 7's record");
    assert!(bytes <= 64 * 1024, "{bytes} bytes left for one job");
    sched.check_balance().unwrap();
}

#[test]
fn the_book_keeps_at_most_max_jobs() {
    let (sched, clock) = scheduler(BookConfig::default().max_jobs(256));
    for job in 0..100_000u64 {
        serve_one(&sched, &clock, job, Nanos(job * 1_000), Nanos(100), None);
    }
    let (bytes, jobs) = sched.book_memory();
    assert!(jobs <= 256, "{jobs} jobs kept");
    assert!(
        bytes <= 256 * JOB_RECORD_BYTES + 64 * 1024,
        "{bytes} bytes for {jobs} jobs"
    );
    let stats = sched.stats();
    assert_eq!(stats.evicted_jobs as usize + jobs, 100_000);
    // The most recent jobs are the ones kept.
    assert!(stats.job(JobId(99_999)).is_some());
    assert!(stats.job(JobId(0)).is_none());
    sched.check_balance().unwrap();
}

#[test]
fn an_idle_scheduler_forgets_by_itself() {
    // Real time: a worker blocked in `next` wakes once per sweep interval (here 100 ms) to
    // forget jobs idle for 200 ms, with no completion and no call from the caller.
    let sched: Scheduler<u64> = Scheduler::with_book(
        common::policy("noop"),
        Arc::new(iosets_runtime::MonotonicClock::new()),
        BookConfig::default().forget_after(Duration::from_millis(200)),
    );
    let worker = {
        let sched = sched.clone();
        std::thread::spawn(move || {
            while let Some(work) = sched.next() {
                let bytes = work.batch().bytes();
                work.complete(Outcome::Done { bytes });
            }
        })
    };
    for job in 0..50u64 {
        sched
            .submit(common::request(job, Op::Write, job, 0, 4096), job)
            .unwrap();
    }
    assert!(sched.wait_idle_timeout(common::LIMIT));
    assert_eq!(sched.book_memory().1, 50);
    let deadline = Instant::now() + common::LIMIT;
    while sched.book_memory().1 > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(sched.book_memory().1, 0, "idle jobs still remembered");
    assert_eq!(sched.stats().forgotten_jobs, 50);
    sched.shutdown();
    common::join_within(vec![worker], common::LIMIT);
    sched.check_balance().unwrap();
}

#[test]
fn evicted_and_forgotten_jobs_add_up() {
    let (sched, clock) = scheduler(
        BookConfig::default()
            .max_jobs(256)
            .forget_after(Duration::from_millis(300)),
    );
    for job in 0..20_000u64 {
        serve_one(&sched, &clock, job, Nanos(job * 100_000), Nanos(100), None);
    }
    clock.set(Nanos::from_millis(10_000));
    sched.forget_idle();
    let stats = sched.stats();
    assert_eq!(sched.book_memory().1, 0);
    assert_eq!(stats.forgotten_jobs + stats.evicted_jobs, 20_000);
}
