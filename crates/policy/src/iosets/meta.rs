//! The metadata class (`metadata=apart`, the default; see the [module docs](super)): metadata
//! requests ([`Op::Meta`](crate::Op::Meta): lookup, stat, readdir, create, unlink, …) never wait
//! for another job's I/O phase.
//!
//! Set exclusivity is a tool for periodic I/O *phases*: one job of a set moves its data at a time
//! so that the set's phases do not stretch each other. A `stat` or an `ls` is not part of a phase,
//! and holding it behind another job's phase only makes an interactive user wait (measured at
//! 4b4d877, before this class: while one unclassified job streamed, another user's `ls -l` and 20
//! `stat`s took 32.5 s through the mount and `ls` failed on the mount's 30 s timeout; 0.09 s under
//! `noop`). So metadata takes its own place in the order: one more flow of the fair queuing across
//! sets, with weight `meta_weight`, beside the sets and under the runtime's quota layer (a
//! metadata storm is what seed 003's thread quotas are for). Inside the class, jobs are served in
//! turn (WF²Q+ by cost among jobs with equal weights: one job's create storm does not hold another
//! job's `stat`), each job's requests in arrival order.
//!
//! What it is not: the class does not touch the sets. A metadata request neither starts a burst
//! nor keeps or opens a phase, and does not count as a phase of a job without priority; a job's
//! data and fsyncs ([`Op::Other`](crate::Op::Other)) stay in its set.

use std::collections::VecDeque;

use iosets_types::hash::IdMap;

use crate::wf2q::Wf2q;
use crate::{JobId, Request};

/// Jobs' queues of metadata requests, fair among jobs.
#[derive(Debug, Default)]
pub(super) struct MetaClass {
    queues: IdMap<JobId, VecDeque<Request>>,
    /// Turns among the jobs with metadata queued (equal weights).
    turns: Wf2q<JobId>,
    /// Emptied queues kept for reuse.
    spare: Vec<VecDeque<Request>>,
    len: usize,
}

/// How many emptied queues are kept for reuse.
const SPARE: usize = 64;

impl MetaClass {
    /// Queues `req`; true if the class had nothing queued before (it becomes backlogged).
    pub(super) fn push(&mut self, req: Request) -> bool {
        let was_empty = self.len == 0;
        self.len += 1;
        let spare = &mut self.spare;
        let queue = self
            .queues
            .entry(req.job)
            .or_insert_with(|| spare.pop().unwrap_or_default());
        queue.push_back(req);
        if queue.len() == 1 {
            self.turns.arrive(req.job, 1.0, req.len);
        }
        was_empty
    }

    /// The length of the request [`MetaClass::pop`] would hand out next, if any.
    pub(super) fn head_len(&mut self) -> Option<u64> {
        let job = self.turns.select()?;
        self.queues.get(&job).and_then(|q| q.front()).map(|r| r.len)
    }

    /// The next metadata request: the job whose turn it is, its oldest request.
    pub(super) fn pop(&mut self) -> Option<Request> {
        let job = self.turns.select()?;
        let queue = self
            .queues
            .get_mut(&job)
            .expect("a backlogged job has a queue");
        let req = queue
            .pop_front()
            .expect("a backlogged job's queue is not empty");
        let next = queue.front().map(|r| r.len);
        self.turns.served(job, req.len, next);
        if next.is_none() {
            let queue = self.queues.remove(&job).expect("present");
            if self.spare.len() < SPARE {
                self.spare.push(queue);
            }
        }
        self.len -= 1;
        Some(req)
    }

    /// Every queued request, by job id then arrival; the class is empty afterwards.
    pub(super) fn drain(&mut self) -> Vec<Request> {
        let mut jobs: Vec<JobId> = self.queues.keys().copied().collect();
        jobs.sort_unstable();
        let mut out = Vec::with_capacity(self.len);
        for job in jobs {
            if let Some(q) = self.queues.remove(&job) {
                out.extend(q);
            }
        }
        self.turns.clear();
        self.len = 0;
        out
    }

    /// Requests queued.
    pub(super) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;

    fn meta(job: u64, id: u64) -> Request {
        Request::builder(JobId(job), Op::Meta)
            .range(0, 4096)
            .id(crate::RequestId(id))
            .build()
    }

    #[test]
    fn jobs_take_turns_and_each_keeps_its_order() {
        let mut m = MetaClass::default();
        assert!(m.push(meta(1, 1)));
        for id in 2..=5 {
            assert!(!m.push(meta(1, id)));
        }
        m.push(meta(2, 10));
        m.push(meta(2, 11));
        let order: Vec<(u64, u64)> = std::iter::from_fn(|| m.pop())
            .map(|r| (r.job.0, r.id.0))
            .collect();
        // Job 2's two requests are not held behind job 1's five.
        let pos = |id| order.iter().position(|&(_, i)| i == id).unwrap();
        assert!(pos(10) <= 2 && pos(11) <= 4, "{order:?}");
        let ones: Vec<u64> = order.iter().filter(|o| o.0 == 1).map(|o| o.1).collect();
        assert_eq!(ones, vec![1, 2, 3, 4, 5]);
        assert_eq!(m.len(), 0);
        assert_eq!(m.head_len(), None);
    }

    #[test]
    fn drain_returns_everything() {
        let mut m = MetaClass::default();
        m.push(meta(3, 1));
        m.push(meta(1, 2));
        m.push(meta(3, 3));
        let ids: Vec<u64> = m.drain().iter().map(|r| r.id.0).collect();
        assert_eq!(ids, vec![2, 1, 3]);
        assert_eq!(m.len(), 0);
        assert!(m.push(meta(1, 4)));
        assert_eq!(m.pop().map(|r| r.id.0), Some(4));
    }
}
