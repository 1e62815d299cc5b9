//! The replay enforces the policy contract: timers are honoured, a policy that stops dispatching is
//! an error (not a hang), and a request dispatched twice or never enqueued is an error.

use iosets_types::{FileId, JobId, RequestId};
use std::collections::VecDeque;

use iosets_policy::{Counted, Dispatch, Policy};
use iosets_sim::{run, DeviceModel, SimError};
use iosets_types::{Batch, Nanos, Op, Request};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Behaviour {
    /// Holds each request until 1000 ns after its arrival (answers NotBefore).
    Delay,
    /// Never dispatches (answers Idle).
    Idle,
    /// Never dispatches (answers NotBefore(now + 1)).
    Procrastinate,
    /// Hands out the first request again, merged into the second one's batch.
    Repeat,
    /// Hands out a request it was never given.
    Invent,
}

#[derive(Debug)]
struct Broken {
    how: Behaviour,
    queue: VecDeque<Request>,
    first: Option<Request>,
}

impl Policy for Broken {
    fn name(&self) -> &'static str {
        "broken"
    }
    fn enqueue(&mut self, req: Request, _now: Nanos) {
        self.queue.push_back(req);
    }
    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        let Some(head) = self.queue.front().copied() else {
            return Dispatch::Idle;
        };
        match self.how {
            Behaviour::Delay if head.arrival + Nanos(1000) > now => {
                Dispatch::NotBefore(head.arrival + Nanos(1000))
            }
            Behaviour::Delay => Dispatch::Ready(Batch::single(self.queue.pop_front().unwrap())),
            Behaviour::Idle => Dispatch::Idle,
            Behaviour::Procrastinate => Dispatch::NotBefore(now + Nanos(1)),
            Behaviour::Repeat => {
                let r = self.queue.pop_front().unwrap();
                match self.first {
                    None => {
                        self.first = Some(r);
                        Dispatch::Ready(Batch::single(r))
                    }
                    Some(f) => {
                        let mut again = f;
                        again.offset = r.end();
                        let mut b = Batch::single(r);
                        again.file = r.file;
                        b.push_merged(again);
                        Dispatch::Ready(b)
                    }
                }
            }
            Behaviour::Invent => {
                self.queue.pop_front();
                let mut fake = head;
                fake.id.0 += 1_000_000;
                Dispatch::Ready(Batch::single(fake))
            }
        }
    }
    fn queued(&self) -> usize {
        self.queue.len()
    }
    fn drain(&mut self) -> Vec<Request> {
        self.queue.drain(..).collect()
    }
}

fn replay(how: Behaviour) -> Result<iosets_sim::ReplayResult, SimError> {
    let policy = Counted::new(Box::new(Broken {
        how,
        queue: VecDeque::new(),
        first: None,
    }));
    let workload: Vec<Request> = (0..3)
        .map(|i| {
            let mut r = Request::builder(JobId(1), Op::Write)
                .id(RequestId(i))
                .file(FileId(1))
                .range(i * 100, 100)
                .build();
            r.arrival = Nanos(i * 10);
            r
        })
        .collect();
    run(
        policy,
        workload,
        DeviceModel::new(1e9, Nanos::ZERO, 1).unwrap(),
    )
}

#[test]
fn not_before_is_a_timer_the_replay_honours() {
    let r = replay(Behaviour::Delay).unwrap();
    let dispatch: Vec<u64> = r.records.iter().map(|x| x.dispatch.0).collect();
    assert_eq!(dispatch, vec![1000, 1100, 1200]);
    let complete: Vec<u64> = r.records.iter().map(|x| x.complete.0).collect();
    assert_eq!(complete, vec![1100, 1200, 1300]);
}

#[test]
fn a_policy_that_answers_idle_forever_is_an_error_not_a_hang() {
    let err = replay(Behaviour::Idle).unwrap_err();
    assert!(
        matches!(
            err,
            SimError::Stalled {
                queued: 3,
                undispatched: 3,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("stalled"), "{err}");
}

#[test]
fn a_policy_that_defers_forever_is_an_error_not_a_hang() {
    let err = replay(Behaviour::Procrastinate).unwrap_err();
    assert!(matches!(err, SimError::Stalled { .. }), "{err}");
    assert!(err.to_string().contains("NotBefore"), "{err}");
}

#[test]
fn dispatching_a_request_twice_is_an_error() {
    let err = replay(Behaviour::Repeat).unwrap_err();
    assert!(matches!(err, SimError::DispatchedTwice { .. }), "{err}");
}

#[test]
fn dispatching_an_unknown_request_is_an_error() {
    let err = replay(Behaviour::Invent).unwrap_err();
    assert!(matches!(err, SimError::UnknownRequest { .. }), "{err}");
}
