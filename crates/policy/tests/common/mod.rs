//! Drivers shared by the policy tests: a backlog drain (seed 000's method) and a small
//! discrete-event device with `slots` parallel service slots and a fixed service time.
#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use iosets_policy::{Counted, Dispatch, Nanos, Op, Outcome, Request};
use iosets_types::{FileId, JobId, RequestId};

/// Builds a policy from `name` and `key=value` strings.
pub fn policy(name: &str, opts: &[&str]) -> Counted {
    let pairs = iosets_policy::tunables::parse_pairs(opts).unwrap();
    Counted::build(name, &pairs).unwrap()
}

/// A request `id` by `job` of `len` bytes at `offset` in `file`, with no class, priority or phase.
pub fn request(id: u64, job: u64, op: Op, file: u64, offset: u64, len: u64) -> Request {
    Request::builder(JobId(job), op)
        .id(RequestId(id))
        .file(FileId(file))
        .range(offset, len)
        .build()
}

/// Enqueues everything at time 0, then dispatches one batch at a time and completes it at once.
/// Returns the dispatched requests in order (merged requests in batch order).
pub fn drain_backlog(p: &mut Counted, reqs: &[Request]) -> Vec<Request> {
    for r in reqs {
        p.enqueue(*r, Nanos::ZERO);
    }
    let mut out = Vec::with_capacity(reqs.len());
    loop {
        match p.dispatch(Nanos::ZERO) {
            Dispatch::Ready(b) => {
                let id = b.id();
                let bytes = b.bytes();
                out.extend(b.into_requests());
                p.complete(id, Outcome::Done { bytes }, Nanos::ZERO)
                    .unwrap();
            }
            Dispatch::Idle => break,
            Dispatch::NotBefore(t) => panic!("unexpected timer {t:?} in a backlog drain"),
        }
    }
    p.check_balance().unwrap();
    assert_eq!(out.len(), reqs.len(), "every request dispatched");
    out
}

/// A request in service on the modelled device.
#[derive(Clone, Copy, Debug)]
pub struct Served {
    pub req: Request,
    pub start: Nanos,
    pub end: Nanos,
}

/// Runs `arrivals` (any order; `arrival` set) through `p` on a device with `slots` parallel slots,
/// each request taking `service` regardless of size. Returns every request with its service
/// interval, in dispatch order.
pub fn run_slots(
    p: &mut Counted,
    arrivals: &[Request],
    slots: usize,
    service: Nanos,
) -> Vec<Served> {
    run_device(p, arrivals, slots, |_| service)
}

/// As [`run_slots`], a batch taking `service(batch)`.
pub fn run_device(
    p: &mut Counted,
    arrivals: &[Request],
    slots: usize,
    service: impl Fn(&iosets_policy::Batch) -> Nanos,
) -> Vec<Served> {
    let mut arrivals = arrivals.to_vec();
    arrivals.sort_by_key(|r| (r.arrival, r.id));
    let mut next_arrival = 0;
    let mut busy: BinaryHeap<Reverse<(Nanos, u64, usize)>> = BinaryHeap::new();
    let mut out: Vec<Served> = Vec::new();
    let mut now = Nanos::ZERO;
    loop {
        while next_arrival < arrivals.len() && arrivals[next_arrival].arrival <= now {
            p.enqueue(arrivals[next_arrival], now);
            next_arrival += 1;
        }
        let mut timer = None;
        while busy.len() < slots {
            match p.dispatch(now) {
                Dispatch::Ready(b) => {
                    let first = out.len();
                    let end = now + service(&b);
                    for r in b.requests() {
                        out.push(Served {
                            req: *r,
                            start: now,
                            end,
                        });
                    }
                    busy.push(Reverse((end, b.id().0, first)));
                }
                Dispatch::NotBefore(t) => {
                    timer = Some(t);
                    break;
                }
                Dispatch::Idle => break,
            }
        }
        let next_done = busy.peek().map(|Reverse((t, _, _))| *t);
        let next_in = arrivals.get(next_arrival).map(|r| r.arrival);
        let Some(t) = [next_done, next_in, timer].into_iter().flatten().min() else {
            break;
        };
        now = t;
        while let Some(&Reverse((t, id, _))) = busy.peek() {
            if t > now {
                break;
            }
            busy.pop();
            p.complete(
                iosets_policy::RequestId(id),
                Outcome::Done { bytes: 0 },
                now,
            )
            .unwrap();
        }
    }
    p.check_balance().unwrap();
    assert_eq!(out.len(), arrivals.len(), "every request served");
    out
}
