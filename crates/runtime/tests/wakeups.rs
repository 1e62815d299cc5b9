//! Wakeups: no wake is lost when workers sleep between requests, a completion wakes a worker
//! blocked behind it, and an idle scheduler does not consult its policy (no spinning).

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use common::{join_within, policy, LIMIT};
use iosets_policy::{Counted, Dispatch, Policy};
use iosets_runtime::{Scheduler, Work};
use iosets_types::{Nanos, Op, Outcome, Priority, Request};

/// Spawns `n` workers that complete every batch and report its payloads on `done`.
fn workers(
    sched: &Scheduler<u32>,
    n: usize,
    done: &mpsc::Sender<u32>,
) -> Vec<thread::JoinHandle<()>> {
    (0..n)
        .map(|_| {
            let (sched, done) = (sched.clone(), done.clone());
            thread::spawn(move || {
                while let Some(work) = sched.next() {
                    for p in work.complete(Outcome::Done { bytes: 1 }) {
                        done.send(p).unwrap();
                    }
                }
            })
        })
        .collect()
}

#[test]
fn no_wake_is_lost_when_workers_sleep_between_requests() {
    // Ping-pong: every submit finds all workers asleep and must wake one.
    const ROUNDS: u32 = 20_000;
    let sched: Scheduler<u32> = Scheduler::new(policy("wfq"));
    let (done, finished) = mpsc::channel();
    let pool = workers(&sched, 4, &done);
    for i in 0..ROUNDS {
        sched
            .submit(common::request(u64::from(i % 5), Op::Read, 1, 0, 1), i)
            .unwrap();
        assert_eq!(
            finished.recv_timeout(LIMIT),
            Ok(i),
            "request {i} was never served"
        );
    }
    sched.shutdown();
    join_within(pool, LIMIT);
    sched.check_balance().unwrap();
}

#[test]
fn a_completion_wakes_the_worker_blocked_behind_it() {
    // Two jobs of one IO-SETS set, submitted together: the second job's request can go only when
    // the first job's completes. Workers hand every batch to a separate completer thread and go
    // straight back to `next`, so only the completion itself can wake them.
    const ROUNDS: u32 = 5_000;
    let sched: Scheduler<u32> = Scheduler::new(policy("iosets"));
    let (to_complete, batches) = mpsc::channel::<Work<u32>>();
    let (done, finished) = mpsc::channel();
    let takers: Vec<_> = (0..2)
        .map(|_| {
            let (sched, to_complete) = (sched.clone(), to_complete.clone());
            thread::spawn(move || {
                while let Some(work) = sched.next() {
                    to_complete.send(work).unwrap();
                }
            })
        })
        .collect();
    drop(to_complete);
    let completer = thread::spawn(move || {
        for work in batches {
            for p in work.complete(Outcome::Done { bytes: 1 }) {
                done.send(p).unwrap();
            }
        }
    });
    for i in 0..ROUNDS {
        for job in [1, 2] {
            let mut r = common::request(job, Op::Write, job, 0, 1);
            r.priority = Priority::new(0.5);
            sched.submit(r, 2 * i + job as u32).unwrap();
        }
        let first = finished.recv_timeout(LIMIT).expect("first request served");
        let second = finished
            .recv_timeout(LIMIT)
            .expect("second request served after the first");
        assert_eq!(
            [first, second],
            [2 * i + 1, 2 * i + 2],
            "round {i}: one job at a time"
        );
    }
    sched.shutdown();
    join_within(takers, LIMIT);
    join_within(vec![completer], LIMIT);
    sched.check_balance().unwrap();
}

/// Any registered policy, counting how often it is asked to dispatch.
#[derive(Debug)]
struct CountingDispatch {
    inner: Box<dyn Policy>,
    asked: Arc<AtomicU64>,
}

impl Policy for CountingDispatch {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn enqueue(&mut self, req: Request, now: Nanos) {
        self.inner.enqueue(req, now);
    }
    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.asked.fetch_add(1, Ordering::Relaxed);
        self.inner.dispatch(now)
    }
    fn queued(&self) -> usize {
        self.inner.queued()
    }
    fn drain(&mut self) -> Vec<Request> {
        self.inner.drain()
    }
    fn complete(&mut self, id: iosets_types::RequestId, outcome: Outcome, now: Nanos) {
        self.inner.complete(id, outcome, now);
    }
}

#[test]
fn an_idle_scheduler_does_not_consult_its_policy() {
    let asked = Arc::new(AtomicU64::new(0));
    let counting = CountingDispatch {
        inner: iosets_policy::build("noop", &[]).unwrap(),
        asked: asked.clone(),
    };
    let sched: Scheduler<u32> = Scheduler::new(Counted::new(Box::new(counting)));
    let (done, finished) = mpsc::channel();
    let pool = workers(&sched, 4, &done);
    sched
        .submit(common::request(1, Op::Read, 1, 0, 1), 1)
        .unwrap();
    assert_eq!(finished.recv_timeout(LIMIT), Ok(1));
    // Give every worker time to go back to sleep, then watch the policy while nothing happens.
    thread::sleep(Duration::from_millis(50));
    let before = asked.load(Ordering::Relaxed);
    thread::sleep(Duration::from_millis(200));
    let after = asked.load(Ordering::Relaxed);
    assert_eq!(
        before, after,
        "workers consulted the policy while idle: they spin"
    );
    assert!(before < 20, "a single request took {before} dispatch calls");
    sched.shutdown();
    join_within(pool, LIMIT);
}

/// Telling a job's account can make its queued work dispatchable (`iosets key=account,set`: it
/// moves to its account's own set): a sleeping worker is woken for it, not left for the next
/// completion.
#[test]
fn a_job_told_its_account_is_served_at_once() {
    let opts = [("key".to_string(), "account,set".to_string())];
    let sched: Scheduler<u32> = Scheduler::new(Counted::build("iosets", &opts).unwrap());
    for job in [1u64, 2] {
        let mut r = common::request(job, Op::Write, job, 0, 4096);
        r.priority = Priority::new(0.5);
        sched.submit(r, job as u32).unwrap();
    }
    // Job 1 holds set 0.5 (no account), its request in service; job 2 waits for the set.
    let first = sched.next().expect("job 1's request");
    assert_eq!(first.payloads(), [1]);
    let (tx, rx) = mpsc::channel();
    let worker = {
        let sched = sched.clone();
        thread::spawn(move || {
            if let Some(w) = sched.next() {
                tx.send(w.payloads()[0]).unwrap();
                w.complete(Outcome::Done { bytes: 4096 });
            }
        })
    };
    // The worker is asleep: nothing it may take. Job 2 is told its account: alone in bio's set.
    thread::sleep(Duration::from_millis(100));
    sched
        .set_job_info(iosets_types::JobId(2), Some("bio"), None)
        .unwrap();
    // Unwoken, it would sleep until job 1's completion below (or the runtime's sweep).
    let got = rx.recv_timeout(Duration::from_secs(10));
    first.complete(Outcome::Done { bytes: 4096 });
    assert_eq!(got.expect("the worker was not woken for job 2"), 2);
    join_within(vec![worker], LIMIT);
}
