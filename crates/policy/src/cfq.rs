//! `cfq`: Completely Fair Queuing (Linux's former default, seed 002) by job.
//!
//! Each job has its own queue; jobs with queued requests wait in a round robin. The job at the front
//! becomes *active* for a time slice (`slice_ms`, default 100 ms): only its requests are dispatched,
//! reads before writes, each direction in ascending `(file, offset)` sweeps with contiguous requests
//! merged. When the active job runs out of queued requests, the slice is not given up at once: once
//! its last request in service completes, CFQ idles up to `slice_idle_ms` (default 8 ms) for the same
//! job's next request (a synchronous reader issues it right after the previous one completes), then
//! moves on. The slice ends at its time limit; the job goes to the back of the round robin if it
//! still has requests. Equal slices mean equal *service time* per job, whatever the request sizes.
//!
//! Timers: while idling, `dispatch` answers `NotBefore(end of the idle window)`; while the active
//! job has requests in service and none queued, it answers `Idle` (the completion re-arms it).

use std::collections::VecDeque;

use crate::sorted::{direction, SortedQueue};
use crate::tunables::{TunableSpec, Tunables};
use crate::{Dispatch, FileId, JobId, Nanos, Outcome, Policy, PolicyError, Request, RequestId};
use iosets_types::hash::IdMap;

/// Registry name.
pub const NAME: &str = "cfq";
/// Tunables of `cfq` (Linux's names, with units).
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec { name: "slice_ms", default: "100", help: "time slice of the active job (ms, 1 .. 60000)" },
    TunableSpec { name: "slice_idle_ms", default: "8", help: "idle window for the active job's next request after its last completes (ms, 0 = none, up to 1000)" },
    TunableSpec { name: "max_merge_bytes", default: "1048576", help: "largest merged batch in bytes (0 = never merge)" },
];

#[derive(Debug, Default)]
struct CfqJob {
    /// Reads and writes, by [`direction`].
    queues: [SortedQueue; 2],
    head: (FileId, u64),
    in_service: u32,
    in_round_robin: bool,
}

impl CfqJob {
    fn queued(&self) -> usize {
        self.queues.iter().map(SortedQueue::len).sum()
    }
}

#[derive(Clone, Copy, Debug)]
struct Active {
    job: JobId,
    slice_end: Nanos,
    idle_until: Option<Nanos>,
}

/// Completely fair queuing by job.
#[derive(Debug)]
pub struct Cfq {
    slice: Nanos,
    idle: Nanos,
    max_merge_bytes: u64,
    jobs: IdMap<JobId, CfqJob>,
    round_robin: VecDeque<JobId>,
    active: Option<Active>,
    in_service: IdMap<RequestId, JobId>,
    len: usize,
    seq: u64,
}

impl Cfq {
    /// CFQ with slices of `slice`, an idle window of `idle` (zero: none) and merging up to
    /// `max_merge_bytes`.
    pub fn new(slice: Nanos, idle: Nanos, max_merge_bytes: u64) -> Cfq {
        Cfq {
            slice,
            idle,
            max_merge_bytes,
            jobs: IdMap::default(),
            round_robin: VecDeque::new(),
            active: None,
            in_service: IdMap::default(),
            len: 0,
            seq: 0,
        }
    }

    pub(crate) fn from_tunables(t: &mut Tunables) -> Result<Cfq, PolicyError> {
        Ok(Cfq::new(
            Nanos::from_millis(t.u64_in("slice_ms", 1, 60_000)?),
            Nanos::from_millis(t.u64_in("slice_idle_ms", 0, 1000)?),
            t.u64_in("max_merge_bytes", 0, 1 << 30)?,
        ))
    }

    /// Ends the active job's slice: back of the round robin if it has requests, forgotten if it has
    /// nothing at all.
    fn expire(&mut self) {
        let Some(a) = self.active.take() else { return };
        self.requeue_or_forget(a.job);
    }

    fn requeue_or_forget(&mut self, id: JobId) {
        let job = self.jobs.get_mut(&id).expect("job");
        if job.queued() > 0 {
            if !job.in_round_robin {
                job.in_round_robin = true;
                self.round_robin.push_back(id);
            }
        } else if job.in_service == 0 {
            self.jobs.remove(&id);
        }
    }
}

impl Policy for Cfq {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enqueue(&mut self, req: Request, _now: Nanos) {
        self.seq += 1;
        self.len += 1;
        let job = self.jobs.entry(req.job).or_default();
        job.queues[direction(req.op)].insert(self.seq, req);
        match &mut self.active {
            Some(a) if a.job == req.job => a.idle_until = None,
            _ if !job.in_round_robin => {
                job.in_round_robin = true;
                self.round_robin.push_back(req.job);
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        loop {
            let Some(a) = self.active else {
                let Some(id) = self.round_robin.pop_front() else {
                    return Dispatch::Idle;
                };
                self.jobs.get_mut(&id).expect("queued job").in_round_robin = false;
                self.active = Some(Active {
                    job: id,
                    slice_end: now + self.slice,
                    idle_until: None,
                });
                continue;
            };
            if now >= a.slice_end {
                self.expire();
                continue;
            }
            let job = self.jobs.get_mut(&a.job).expect("active job");
            // Reads first: direction 0, then 1.
            let head = job.head;
            let key = (0..2).find_map(|d| job.queues[d].next_cscan(head).map(|k| (d, k)));
            if let Some((d, key)) = key {
                let batch =
                    job.queues[d].take_batch(key, self.max_merge_bytes, usize::MAX, |_, _| {});
                job.head = (batch.head().file, batch.end());
                job.in_service += 1;
                self.len -= batch.len();
                self.in_service.insert(batch.id(), a.job);
                self.active = Some(Active {
                    idle_until: None,
                    ..a
                });
                return Dispatch::Ready(batch);
            }
            if job.in_service > 0 {
                // Its completion arms the idle window (or brings more work).
                return Dispatch::Idle;
            }
            match a.idle_until {
                Some(t) if now < t => return Dispatch::NotBefore(t.min(a.slice_end)),
                _ => self.expire(),
            }
        }
    }

    fn complete(&mut self, id: RequestId, _outcome: Outcome, now: Nanos) {
        let Some(job_id) = self.in_service.remove(&id) else {
            return;
        };
        let job = self.jobs.get_mut(&job_id).expect("job in service");
        job.in_service -= 1;
        let idle = job.in_service == 0 && job.queued() == 0;
        match &mut self.active {
            Some(a) if a.job == job_id => {
                if idle && self.idle > Nanos::ZERO {
                    a.idle_until = Some(now + self.idle);
                } else if idle {
                    self.expire();
                }
            }
            _ => {
                if idle {
                    self.jobs.remove(&job_id);
                }
            }
        }
    }

    fn queued(&self) -> usize {
        self.len
    }

    fn drain(&mut self) -> Vec<Request> {
        let mut ids: Vec<JobId> = self.jobs.keys().copied().collect();
        ids.sort_unstable();
        let mut out = Vec::with_capacity(self.len);
        for id in ids {
            let job = self.jobs.get_mut(&id).expect("job");
            for q in &mut job.queues {
                out.extend(q.drain().map(|(_, r)| r));
            }
            job.in_round_robin = false;
            if job.in_service == 0 && self.active.is_none_or(|a| a.job != id) {
                self.jobs.remove(&id);
            }
        }
        self.round_robin.clear();
        self.len = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{head_at, request};
    use crate::Op;

    /// The head of the batch `p` dispatches at `now` ms.
    fn take(p: &mut Cfq, now: u64) -> Request {
        head_at(p, Nanos::from_millis(now))
    }

    #[test]
    fn idles_for_the_active_jobs_next_request_then_moves_on() {
        let mut p = Cfq::new(Nanos::from_millis(100), Nanos::from_millis(8), 0);
        p.enqueue(request(1, 1, Op::Read, 1, 0, 10), Nanos::ZERO);
        p.enqueue(request(2, 2, Op::Read, 2, 0, 10), Nanos::ZERO);
        let a = take(&mut p, 0);
        assert_eq!(a.job.0, 1);
        // Job 1 has a request in service and none queued: nothing goes (not even job 2's).
        assert_eq!(p.dispatch(Nanos::from_millis(1)), Dispatch::Idle);
        p.complete(a.id, Outcome::Done { bytes: 10 }, Nanos::from_millis(2));
        // Idle window until 2 + 8 = 10 ms.
        assert_eq!(
            p.dispatch(Nanos::from_millis(3)),
            Dispatch::NotBefore(Nanos::from_millis(10))
        );
        // Job 1's next read arrives inside the window: it goes first.
        p.enqueue(request(3, 1, Op::Read, 1, 10, 10), Nanos::from_millis(4));
        let b = take(&mut p, 4);
        assert_eq!(b.id.0, 3);
        p.complete(b.id, Outcome::Done { bytes: 10 }, Nanos::from_millis(5));
        // This time the window passes: job 2 gets the device.
        assert!(matches!(
            p.dispatch(Nanos::from_millis(6)),
            Dispatch::NotBefore(_)
        ));
        assert_eq!(take(&mut p, 13).job.0, 2);
    }

    #[test]
    fn reads_before_writes_within_the_active_job() {
        let mut p = Cfq::new(Nanos::from_millis(100), Nanos::ZERO, 0);
        p.enqueue(request(1, 1, Op::Write, 1, 0, 10), Nanos::ZERO);
        p.enqueue(request(2, 1, Op::Read, 1, 50, 10), Nanos::ZERO);
        assert_eq!(take(&mut p, 0).op, Op::Read);
        assert_eq!(take(&mut p, 0).op, Op::Write);
    }
}
