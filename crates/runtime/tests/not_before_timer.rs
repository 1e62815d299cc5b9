//! A policy's `NotBefore(t)` is honoured: nothing is handed out before `t` on the scheduler's
//! clock, and the work goes out after `t` with no submit or completion to wake the workers.

use crate::common;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::{join_within, LIMIT};
use iosets_policy::{Counted, Dispatch, Policy};
use iosets_runtime::{Clock, MonotonicClock, Next, Scheduler};
use iosets_types::{Batch, Nanos, Op, Outcome, Request};

/// Holds every request until `until`, answering `NotBefore(until)`; counts how often it is asked.
#[derive(Debug)]
struct HoldUntil {
    until: Nanos,
    queue: VecDeque<Request>,
    asked: Arc<AtomicU64>,
}

impl Policy for HoldUntil {
    fn name(&self) -> &'static str {
        "hold-until"
    }

    fn enqueue(&mut self, req: Request, _now: Nanos) {
        self.queue.push_back(req);
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.asked.fetch_add(1, Ordering::Relaxed);
        if self.queue.is_empty() {
            Dispatch::Idle
        } else if now < self.until {
            Dispatch::NotBefore(self.until)
        } else {
            Dispatch::Ready(Batch::single(self.queue.pop_front().expect("not empty")))
        }
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn drain(&mut self) -> Vec<Request> {
        self.queue.drain(..).collect()
    }
}

/// A scheduler whose policy holds everything until `hold` from now, on the scheduler's clock.
fn holding_scheduler(hold: Duration) -> (Scheduler<u32>, Nanos, Arc<AtomicU64>) {
    let clock = MonotonicClock::new();
    let until = clock.now() + Nanos(hold.as_nanos() as u64);
    let asked = Arc::new(AtomicU64::new(0));
    let policy = HoldUntil {
        until,
        queue: VecDeque::new(),
        asked: asked.clone(),
    };
    let sched = Scheduler::with_clock(Counted::new(Box::new(policy)), Arc::new(clock));
    (sched, until, asked)
}

#[test]
fn work_is_held_until_the_timer_and_then_handed_out_without_a_wake() {
    const WORKERS: usize = 3;
    let (sched, until, asked) = holding_scheduler(Duration::from_millis(300));
    let (tx, rx) = mpsc::channel();
    // Workers keep their batch until every worker has one, so no completion can wake anybody:
    // the watcher of the timer must take one batch and pass the wake on to the others.
    let all_served = Arc::new(Barrier::new(WORKERS + 1));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (sched, tx, all_served) = (sched.clone(), tx.clone(), all_served.clone());
            thread::spawn(move || {
                // Untimed: only the scheduler can wake this worker (a timed-out `next_timeout`
                // would ask the policy again by itself and hide a lost wake).
                let work = sched.next().expect("work");
                tx.send((work.completion().dispatched_at(), sched.now()))
                    .unwrap();
                all_served.wait();
                work.complete(Outcome::Done { bytes: 1 });
            })
        })
        .collect();
    // Let the workers block on the empty queue, then submit; after these submits nothing happens
    // until the gate opens.
    thread::sleep(Duration::from_millis(20));
    for i in 0..WORKERS {
        sched
            .submit(common::request(1, Op::Read, 1, i as u64, 1), i as u32)
            .unwrap();
    }
    match sched.try_next() {
        Next::TimedOut => {}
        Next::Work(w) => {
            // Only possible on a machine so slow that the gate opened already; put it back.
            assert!(
                w.completion().dispatched_at() >= until,
                "handed out before the gate"
            );
            w.complete(Outcome::Done { bytes: 1 });
            sched
                .submit(common::request(1, Op::Read, 1, 9, 1), 9)
                .unwrap();
        }
        Next::Shutdown => unreachable!("not shut down"),
    }
    let times: Vec<(Nanos, Nanos)> = (0..WORKERS)
        .map(|_| {
            rx.recv_timeout(LIMIT)
                .expect("every worker is handed a batch after the gate")
        })
        .collect();
    all_served.wait();
    join_within(workers, LIMIT);
    for (dispatched, received) in times {
        assert!(
            dispatched >= until,
            "dispatched at {dispatched}, gate at {until}"
        );
        assert!(received >= until);
    }
    // Sleeping workers ask the policy a handful of times, not in a loop.
    let asked = asked.load(Ordering::Relaxed);
    assert!(
        asked < 100,
        "the policy was asked {asked} times: workers spin instead of sleeping"
    );
    sched.check_balance().unwrap();
}

#[test]
fn timer_is_handed_over_when_its_watcher_gives_up() {
    let (sched, until, _asked) = holding_scheduler(Duration::from_millis(300));
    sched
        .submit(common::request(1, Op::Read, 1, 0, 1), 0)
        .unwrap();
    // An impatient worker arrives first and watches the timer, but gives up long before the gate.
    let impatient = {
        let sched = sched.clone();
        thread::spawn(move || {
            matches!(
                sched.next_timeout(Duration::from_millis(50)),
                Next::TimedOut
            )
        })
    };
    thread::sleep(Duration::from_millis(10));
    let (tx, rx) = mpsc::channel();
    let patient = {
        let sched = sched.clone();
        thread::spawn(move || {
            let work = sched.next().expect("work");
            tx.send(work.completion().dispatched_at()).unwrap();
            work.complete(Outcome::Done { bytes: 1 });
        })
    };
    assert_eq!(join_within(vec![impatient], LIMIT), vec![true]);
    let dispatched = rx
        .recv_timeout(LIMIT)
        .expect("the patient worker is handed the work after the gate");
    assert!(dispatched >= until);
    join_within(vec![patient], LIMIT);
    sched.check_balance().unwrap();
}
