//! `wfq`: weighted fair queuing by bytes among queues keyed by job (or by class).
//!
//! While `k` queues are backlogged, queue `i` receives `weight_i / Σ weights` of the bytes served;
//! when a queue empties its share goes to the others at once (work-conserving), and an idle queue
//! banks no credit. The order comes from [`crate::wf2q::Wf2q`] (WF²Q+), which keeps every backlogged
//! queue within one request size of its exact fluid share at every moment.
//!
//! A queue's weight, first match wins: a priority set from the control plane
//! ([`Policy::set_priority`], job-keyed queues only), the tunable `weight.<queue>`, the priority hint
//! of the request that opened the queue's current backlog, `default_weight`.
//!
//! Inside a queue requests keep their arrival order. Nothing is merged.

use std::collections::VecDeque;

use crate::tunables::{TunableSpec, Tunables};
use crate::wf2q::Wf2q;
use crate::{
    Batch, ClassId, Dispatch, JobId, Nanos, Policy, PolicyError, Priority, QueueId, QueueWeight,
    Request,
};
use iosets_types::hash::IdMap;

/// Registry name.
pub const NAME: &str = "wfq";
/// Tunables of `wfq`.
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "key",
        default: "job",
        help: "what a queue is: job (one queue per job id) or class (per caller-given class; none = class 0)",
    },
    TunableSpec {
        name: "default_weight",
        default: "1",
        help: "weight of a queue with no configured weight and no priority hint (> 0)",
    },
    TunableSpec {
        name: "weight.<queue>",
        default: "",
        help: "weight of queue <queue> (a job id or class id), > 0; e.g. weight.3=1500",
    },
];

/// How many emptied queues are kept for reuse.
const SPARE_QUEUES: usize = 256;

/// What a queue is keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyBy {
    /// One queue per job.
    Job,
    /// One queue per caller-given class (requests without a class go to class 0).
    Class,
}

/// Weighted fair queuing by bytes.
#[derive(Debug)]
pub struct Wfq {
    key_by: KeyBy,
    default_weight: f64,
    weights: IdMap<u64, f64>,
    overrides: IdMap<u64, f64>,
    queues: IdMap<u64, VecDeque<Request>>,
    /// Emptied queues kept for reuse, so that a queue that empties and refills does not allocate.
    spare: Vec<VecDeque<Request>>,
    sched: Wf2q<u64>,
    len: usize,
}

impl Wfq {
    /// A `wfq` keyed by `key_by`, with per-queue `weights` and a `default_weight` for the rest.
    ///
    /// # Panics
    /// If a weight is not finite and positive (the registry validates them first).
    pub fn new(key_by: KeyBy, default_weight: f64, weights: &[(u64, f64)]) -> Wfq {
        assert!(default_weight.is_finite() && default_weight > 0.0);
        assert!(weights.iter().all(|&(_, w)| w.is_finite() && w > 0.0));
        Wfq {
            key_by,
            default_weight,
            weights: weights.iter().copied().collect(),
            overrides: IdMap::default(),
            queues: IdMap::default(),
            spare: Vec::new(),
            sched: Wf2q::new(),
            len: 0,
        }
    }

    pub(crate) fn from_tunables(t: &mut Tunables) -> Result<Wfq, PolicyError> {
        let key_by = match t.choice("key", &["job", "class"])? {
            "class" => KeyBy::Class,
            _ => KeyBy::Job,
        };
        let default_weight = t.positive_f64("default_weight")?;
        let weights = t.family_positive_f64("weight.")?;
        Ok(Wfq::new(key_by, default_weight, &weights))
    }

    fn key(&self, req: &Request) -> u64 {
        match self.key_by {
            KeyBy::Job => req.job.0,
            KeyBy::Class => req.class.map_or(0, |c| c.0),
        }
    }

    fn weight(&self, key: u64, hint: Option<Priority>) -> f64 {
        self.overrides
            .get(&key)
            .or_else(|| self.weights.get(&key))
            .copied()
            .or(hint.map(Priority::get))
            .unwrap_or(self.default_weight)
    }
}

impl Policy for Wfq {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enqueue(&mut self, req: Request, _now: Nanos) {
        let key = self.key(&req);
        let spare = &mut self.spare;
        let q = self
            .queues
            .entry(key)
            .or_insert_with(|| spare.pop().unwrap_or_default());
        q.push_back(req);
        self.len += 1;
        if q.len() == 1 {
            let w = self.weight(key, req.priority);
            self.sched.arrive(key, w, req.len);
        }
    }

    fn dispatch(&mut self, _now: Nanos) -> Dispatch {
        let Some(key) = self.sched.select() else {
            return Dispatch::Idle;
        };
        let q = self
            .queues
            .get_mut(&key)
            .expect("a backlogged flow has a queue");
        let req = q.pop_front().expect("a backlogged queue is not empty");
        let next = q.front().map(|r| r.len);
        if next.is_none() {
            let q = self.queues.remove(&key).expect("queue");
            if self.spare.len() < SPARE_QUEUES {
                self.spare.push(q);
            }
        }
        self.sched.served(key, req.len, next);
        self.len -= 1;
        Dispatch::Ready(Batch::single(req))
    }

    fn queued(&self) -> usize {
        self.len
    }

    fn drain(&mut self) -> Vec<Request> {
        let mut keys: Vec<u64> = self.queues.keys().copied().collect();
        keys.sort_unstable();
        let out: Vec<Request> = keys
            .into_iter()
            .flat_map(|k| self.queues.remove(&k).unwrap_or_default())
            .collect();
        self.sched.clear();
        self.len = 0;
        out
    }

    fn queue_weight(&self, req: &Request) -> Option<QueueWeight> {
        let key = self.key(req);
        let queue = match self.key_by {
            KeyBy::Job => QueueId::Job(JobId(key)),
            KeyBy::Class => QueueId::Class(ClassId(key)),
        };
        // A backlogged queue keeps the weight it opened its backlog with; otherwise this request
        // would open one.
        Some(QueueWeight {
            queue,
            weight: self.weight(key, req.priority),
        })
    }

    fn set_priority(&mut self, job: JobId, priority: Option<Priority>, _now: Nanos) -> bool {
        if self.key_by != KeyBy::Job {
            return false;
        }
        match priority {
            Some(p) => self.overrides.insert(job.0, p.get()),
            None => self.overrides.remove(&job.0),
        };
        // The new weight applies from the queue's next backlog period: WF²Q+ tags already given
        // stay valid, and a backlogged queue picks the weight up when it next empties and refills.
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::request;
    use crate::Op;

    fn drive(p: &mut Wfq, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| match p.dispatch(Nanos::ZERO) {
                Dispatch::Ready(b) => b.head().job.0,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn weights_from_tunables_split_requests() {
        let mut p = Wfq::new(KeyBy::Job, 1.0, &[(1, 1.0), (2, 3.0)]);
        for i in 0..100 {
            p.enqueue(request(i, 1 + i % 2, Op::Read, 0, 0, 10), Nanos::ZERO);
        }
        let order = drive(&mut p, 40);
        let twos = order.iter().filter(|&&j| j == 2).count();
        assert_eq!(twos, 30, "{order:?}");
    }

    #[test]
    fn class_key_groups_jobs() {
        let mut p = Wfq::new(KeyBy::Class, 1.0, &[]);
        for i in 0..30 {
            let mut r = request(i, i, Op::Read, 0, 0, 10);
            r.class = Some(crate::ClassId(i % 3));
            p.enqueue(r, Nanos::ZERO);
        }
        let first: Vec<u64> = (0..3)
            .map(|_| match p.dispatch(Nanos::ZERO) {
                Dispatch::Ready(b) => b.head().class.unwrap().0,
                other => panic!("{other:?}"),
            })
            .collect();
        let mut sorted = first.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2], "{first:?}");
    }

    #[test]
    fn control_priority_overrides_config() {
        let mut p = Wfq::new(KeyBy::Job, 1.0, &[(1, 1.0), (2, 1.0)]);
        assert!(p.set_priority(JobId(2), Priority::new(9.0), Nanos::ZERO));
        for i in 0..100 {
            p.enqueue(request(i, 1 + i % 2, Op::Read, 0, 0, 10), Nanos::ZERO);
        }
        let twos = drive(&mut p, 40).iter().filter(|&&j| j == 2).count();
        assert_eq!(twos, 36);
    }

    #[test]
    fn drain_empties_everything() {
        let mut p = Wfq::new(KeyBy::Job, 1.0, &[]);
        for i in 0..10 {
            p.enqueue(request(i, i % 3, Op::Read, 0, 0, 10), Nanos::ZERO);
        }
        drive(&mut p, 2);
        assert_eq!(p.drain().len(), 8);
        assert_eq!(p.queued(), 0);
        assert_eq!(p.dispatch(Nanos::ZERO), Dispatch::Idle);
    }
}
