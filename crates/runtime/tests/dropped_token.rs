//! A completion token dropped unanswered fails its batch: the request is failed, never lost.

use crate::common;

use std::sync::{Arc, Mutex};

use common::policy;
use iosets_runtime::{CompletionEvent, Scheduler};
use iosets_types::{JobId, Op, Outcome};

#[test]
fn dropped_token_fails_its_request_and_the_books_balance() {
    let sched: Scheduler<&'static str> = Scheduler::new(policy("noop"));
    let events = Arc::new(Mutex::new(Vec::<CompletionEvent>::new()));
    let seen = events.clone();
    sched.set_listener(move |e: &CompletionEvent| seen.lock().unwrap().push(*e));

    let lost = sched
        .submit(common::request(1, Op::Write, 1, 0, 4096), "job 1")
        .unwrap();
    let kept = sched
        .submit(common::request(2, Op::Read, 2, 0, 4096), "job 2")
        .unwrap();

    let work = sched
        .try_next()
        .work()
        .expect("noop hands out the first request");
    assert_eq!(work.id(), lost);
    drop(work); // a worker bailed out without answering
    sched
        .try_next()
        .work()
        .expect("second request")
        .complete(Outcome::Done { bytes: 4096 });

    let events = events.lock().unwrap().clone();
    assert_eq!(
        events.len(),
        2,
        "the listener hears about both requests: {events:?}"
    );
    assert_eq!(
        (events[0].id, events[0].outcome, events[0].bytes),
        (lost, Outcome::Abandoned, 0)
    );
    assert_eq!(
        (events[1].id, events[1].outcome),
        (kept, Outcome::Done { bytes: 4096 })
    );

    let stats = sched.stats();
    let job1 = stats.job(JobId(1)).unwrap();
    assert_eq!(
        (job1.ops, job1.failed, job1.bytes_written, job1.in_service),
        (1, 1, 0, 0)
    );
    let job2 = stats.job(JobId(2)).unwrap();
    assert_eq!((job2.ops, job2.failed, job2.bytes_read), (1, 0, 4096));
    assert_eq!(stats.total_failed(), 1);
    assert_eq!((stats.counters.completed, stats.counters.failed), (2, 1));
    assert_eq!((stats.in_flight, stats.queued), (0, 0));
    sched.check_balance().unwrap();
}

#[test]
fn token_dropped_on_a_panicking_worker_fails_the_request() {
    let sched: Scheduler<u32> = Scheduler::new(policy("noop"));
    let failed = Arc::new(Mutex::new(Vec::new()));
    let seen = failed.clone();
    sched.set_listener(move |e: &CompletionEvent| seen.lock().unwrap().push(e.outcome));
    sched
        .submit(common::request(9, Op::Read, 1, 0, 512), 7)
        .unwrap();
    let worker = {
        let sched = sched.clone();
        std::thread::spawn(move || {
            let _work = sched.next().unwrap();
            panic!("worker dies while serving");
        })
    };
    assert!(worker.join().is_err(), "the worker panicked");
    assert_eq!(*failed.lock().unwrap(), vec![Outcome::Abandoned]);
    assert_eq!(sched.stats().job(JobId(9)).unwrap().failed, 1);
    sched.check_balance().unwrap();
}
