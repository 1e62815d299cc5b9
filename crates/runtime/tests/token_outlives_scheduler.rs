//! A completion token keeps the scheduler's state alive: answering it after every scheduler handle
//! is dropped works and does not panic.

use crate::common;

use std::sync::{Arc, Mutex};

use common::policy;
use iosets_runtime::{CompletionEvent, Scheduler, Work};
use iosets_types::{Op, Outcome};

fn scheduler_with_log() -> (Scheduler<String>, Arc<Mutex<Vec<Outcome>>>) {
    let sched: Scheduler<String> = Scheduler::new(policy("wfq"));
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    sched.set_listener(move |e: &CompletionEvent| seen.lock().unwrap().push(e.outcome));
    (sched, log)
}

/// One read of job 1 handed out, then every scheduler handle dropped: its work and the log.
fn orphaned_read() -> (Work<String>, Arc<Mutex<Vec<Outcome>>>) {
    let (sched, log) = scheduler_with_log();
    sched
        .submit(common::request(1, Op::Read, 1, 0, 100), "reply".to_string())
        .unwrap();
    let work = sched.try_next().work().unwrap();
    drop(sched);
    (work, log)
}

#[test]
fn completing_after_the_scheduler_is_dropped_does_not_panic() {
    let (sched, log) = scheduler_with_log();
    sched
        .submit(
            common::request(1, Op::Write, 1, 0, 100),
            "reply".to_string(),
        )
        .unwrap();
    sched
        .submit(
            common::request(2, Op::Write, 2, 0, 100),
            "left queued".to_string(),
        )
        .unwrap();
    let work = sched.try_next().work().unwrap();
    drop(sched);
    let payloads = work.complete(Outcome::Done { bytes: 100 });
    assert_eq!(payloads, vec!["reply".to_string()]);
    assert_eq!(*log.lock().unwrap(), vec![Outcome::Done { bytes: 100 }]);
}

#[test]
fn dropping_a_token_after_the_scheduler_is_dropped_does_not_panic() {
    let (work, log) = orphaned_read();
    let (payloads, token) = work.into_parts();
    drop(payloads);
    drop(token);
    assert_eq!(*log.lock().unwrap(), vec![Outcome::Abandoned]);
}

#[test]
fn completing_on_another_thread_after_the_scheduler_is_dropped() {
    let (work, log) = orphaned_read();
    std::thread::spawn(move || {
        work.complete(Outcome::Failed { errno: 5 });
    })
    .join()
    .unwrap();
    assert_eq!(*log.lock().unwrap(), vec![Outcome::Failed { errno: 5 }]);
}
