//! Per-queue summary of a replay: weights, shares while all queues are backlogged, drain times,
//! queue waits; totals.
//!
//! The expected share of a queue is its weight over the sum of the weights of all queues. The
//! weights come from the policy itself ([`iosets_policy::Policy::queue_weight`]): [`expected_weights`]
//! builds the policy from its name and tunables and asks, for every request, which weighted queue it
//! joins. A queue of the report (a job, a class or a priority) has an expected share only when the
//! report's queues and the policy's weighted queues correspond one to one: jobs sharing an IO-SETS
//! set take turns, and policies without weights (noop, timeorder) have no stationary share — the
//! summary leaves those empty rather than guess.

use std::collections::{BTreeMap, HashMap};

use iosets_policy::{Counted, Op, QueueId, Request};
use iosets_types::Nanos;

use crate::replay::{ReplayResult, RequestRecord};
use crate::shares::{QueueKey, ShareKey, WindowShares};

/// Weights of the queues of `records` under `key`, as the policy `policy` built with `tunables`
/// gives them (see the [module docs](self)). Empty when the policy has no weights, or when the
/// report's queues do not map one to one onto the policy's weighted queues.
pub fn expected_weights(
    policy: &str,
    tunables: &[(String, String)],
    key: ShareKey,
    records: &[RequestRecord],
) -> BTreeMap<QueueKey, f64> {
    let Ok(policy) = Counted::build(policy, tunables) else {
        return BTreeMap::new();
    };
    let mut by_arrival: Vec<&RequestRecord> = records.iter().collect();
    by_arrival.sort_by_key(|r| (r.arrival, r.id));
    let mut weights: BTreeMap<QueueKey, (QueueId, f64)> = BTreeMap::new();
    let mut owner: HashMap<QueueId, QueueKey> = HashMap::new();
    for r in by_arrival {
        let mut req = Request::builder(r.job, Op::Write)
            .id(r.id)
            .range(0, r.bytes)
            .build();
        req.class = r.class;
        req.priority = r.priority;
        let Some(w) = policy.queue_weight(&req) else {
            return BTreeMap::new();
        };
        let q = QueueKey::of(r, key);
        // A queue keeps the weight its first request found.
        let (queue, _) = *weights.entry(q).or_insert((w.queue, w.weight));
        let one_to_one = queue == w.queue && *owner.entry(w.queue).or_insert(q) == q;
        if !one_to_one {
            return BTreeMap::new();
        }
    }
    weights.into_iter().map(|(q, (_, w))| (q, w)).collect()
}

/// One queue's line of the summary.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueSummary {
    /// The queue.
    pub queue: QueueKey,
    /// Its weight or priority, if known.
    pub weight: Option<f64>,
    /// weight / Σ weights, if every queue's weight is known.
    pub expected_share: Option<f64>,
    /// Requests.
    pub requests: usize,
    /// Bytes.
    pub bytes: u64,
    /// Share of the bytes dispatched while all queues were backlogged.
    pub busy_share: Option<f64>,
    /// Mean share over the windows where all queues were backlogged.
    pub window_mean: Option<f64>,
    /// Smallest share over those windows.
    pub window_min: Option<f64>,
    /// Largest share over those windows.
    pub window_max: Option<f64>,
    /// When its last request was dispatched.
    pub drain_time: Nanos,
    /// When its last request completed.
    pub last_completion: Nanos,
    /// Mean time its requests waited in the policy (dispatch − arrival).
    pub mean_wait: Nanos,
    /// 99th percentile of that wait (nearest rank).
    pub p99_wait: Nanos,
}

/// The summary of a replay.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// The policy's name.
    pub policy: &'static str,
    /// How queues were keyed.
    pub key: ShareKey,
    /// Requests per share window.
    pub window: usize,
    /// Number of windows.
    pub windows: usize,
    /// Windows in which every queue was backlogged.
    pub backlogged_windows: usize,
    /// One line per queue, in [`QueueKey`] order.
    pub queues: Vec<QueueSummary>,
    /// Requests in the workload.
    pub requests: usize,
    /// Batches dispatched (fewer than requests if the policy merged).
    pub batches: u64,
    /// Bytes served.
    pub bytes: u64,
    /// First arrival to last completion.
    pub makespan: Nanos,
    /// Bytes per second over the makespan.
    pub throughput: f64,
}

impl Summary {
    /// Summarises `result`, whose shares are `shares`, with queue weights `weights` (for example
    /// from [`expected_weights`]).
    pub fn new(
        result: &ReplayResult,
        shares: &WindowShares,
        weights: &BTreeMap<QueueKey, f64>,
    ) -> Summary {
        let mut waits: HashMap<QueueKey, Vec<Nanos>> = HashMap::new();
        let mut last: HashMap<QueueKey, Nanos> = HashMap::new();
        for r in &result.records {
            let q = QueueKey::of(r, shares.key);
            waits.entry(q).or_default().push(r.wait());
            let l = last.entry(q).or_default();
            *l = (*l).max(r.complete);
        }
        let all_known = shares.queues.iter().all(|q| weights.contains_key(&q.queue));
        let total_weight: f64 = shares
            .queues
            .iter()
            .filter_map(|q| weights.get(&q.queue))
            .sum();
        let backlog = shares.backlogged();
        let queues = shares
            .queues
            .iter()
            .zip(backlog)
            .map(|(q, b)| {
                let mut w = waits.remove(&q.queue).unwrap_or_default();
                w.sort();
                let weight = weights.get(&q.queue).copied();
                QueueSummary {
                    queue: q.queue,
                    weight,
                    expected_share: weight.filter(|_| all_known).map(|w| w / total_weight),
                    requests: q.requests,
                    bytes: q.bytes,
                    busy_share: b.busy_share,
                    window_mean: b.mean,
                    window_min: b.min,
                    window_max: b.max,
                    drain_time: q.drain_time,
                    last_completion: last.get(&q.queue).copied().unwrap_or_default(),
                    mean_wait: mean(&w),
                    p99_wait: percentile(&w, 0.99),
                }
            })
            .collect();
        Summary {
            policy: result.policy,
            key: shares.key,
            window: shares.window,
            windows: shares.windows.len(),
            backlogged_windows: shares.windows.iter().filter(|w| w.all_backlogged).count(),
            queues,
            requests: result.records.len(),
            batches: result.batches,
            bytes: result.total_bytes(),
            makespan: result.makespan(),
            throughput: result.throughput(),
        }
    }

    /// Expected share of each queue whose share is known (for [`crate::report::save_shares_svg`]).
    pub fn expected_shares(&self) -> BTreeMap<QueueKey, f64> {
        self.queues
            .iter()
            .filter_map(|q| Some((q.queue, q.expected_share?)))
            .collect()
    }

    /// The line of `queue`, if it exists.
    pub fn queue(&self, queue: QueueKey) -> Option<&QueueSummary> {
        self.queues.iter().find(|q| q.queue == queue)
    }
}

/// Mean of sorted or unsorted durations (0 for none).
pub fn mean(v: &[Nanos]) -> Nanos {
    if v.is_empty() {
        return Nanos::ZERO;
    }
    let sum: u128 = v.iter().map(|n| u128::from(n.0)).sum();
    Nanos((sum / v.len() as u128) as u64)
}

/// Nearest-rank percentile `p` (0..=1) of sorted durations (0 for none).
pub fn percentile(sorted: &[Nanos], p: f64) -> Nanos {
    if sorted.is_empty() {
        return Nanos::ZERO;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    use iosets_types::{ClassId, JobId, Priority, RequestId};

    fn rec(job: u64, class: Option<u64>, priority: Option<f64>) -> RequestRecord {
        RequestRecord {
            id: RequestId(job),
            job: JobId(job),
            class: class.map(ClassId),
            priority: priority.and_then(Priority::new),
            bytes: 1,
            order: job as usize,
            batch: RequestId(job),
            arrival: Nanos::ZERO,
            dispatch: Nanos::ZERO,
            complete: Nanos::ZERO,
        }
    }

    fn pairs(args: &[&str]) -> Vec<(String, String)> {
        iosets_policy::tunables::parse_pairs(args).unwrap()
    }

    fn weights(policy: &str, args: &[&str], key: ShareKey, recs: &[RequestRecord]) -> Vec<f64> {
        expected_weights(policy, &pairs(args), key, recs)
            .into_values()
            .collect()
    }

    #[test]
    fn wfq_weights_follow_its_rule() {
        let recs = [
            rec(1, None, None),
            rec(2, None, Some(5.0)),
            rec(3, None, None),
        ];
        // weight.<job>, else the hint, else default_weight.
        let w = weights(
            "wfq",
            &["weight.1=2", "default_weight=0.5"],
            ShareKey::Job,
            &recs,
        );
        assert_eq!(w, vec![2.0, 5.0, 0.5]);
        // Keyed by class: requests without a class are class 0.
        let recs = [rec(1, Some(4), None), rec(2, None, None)];
        let w = weights("wfq", &["key=class", "weight.0=3"], ShareKey::Class, &recs);
        assert_eq!(w, vec![3.0, 1.0]);
        // Shares keyed by class while wfq keys by job: known only if each class is one job.
        assert_eq!(weights("wfq", &[], ShareKey::Class, &recs), vec![1.0, 1.0]);
        let same_class = [rec(1, Some(4), None), rec(2, Some(4), None)];
        assert!(weights("wfq", &[], ShareKey::Class, &same_class).is_empty());
    }

    #[test]
    fn iosets_weights_only_where_shares_are_stationary() {
        let recs = [
            rec(1, None, Some(0.1)),
            rec(2, None, Some(0.01)),
            rec(3, None, None),
        ];
        assert_eq!(
            weights("iosets", &[], ShareKey::Job, &recs),
            vec![0.1, 0.01, 0.02]
        );
        // The job without a priority is alone in a set of its own with the default priority.
        let w = weights("iosets", &[], ShareKey::Priority, &recs);
        assert_eq!(w, vec![0.02, 0.01, 0.1]);
        // Two jobs without a priority: by default one shared "new" set, one weight...
        let two_new = [
            rec(1, None, Some(0.1)),
            rec(3, None, None),
            rec(4, None, None),
        ];
        assert_eq!(
            weights("iosets", &[], ShareKey::Priority, &two_new),
            vec![0.02, 0.1]
        );
        // ...with seed 004's prior, two sets: the "no priority" queue has no single weight.
        assert!(weights("iosets", &["unknown=own"], ShareKey::Priority, &two_new).is_empty());
        // Two jobs in one set: no stationary per-job share.
        let shared = [rec(1, None, Some(0.1)), rec(2, None, Some(0.1))];
        assert!(weights("iosets", &[], ShareKey::Job, &shared).is_empty());
        // Periods place jobs by Set-10: 40 s → set 2 (0.01), 640 s → set 3 (0.001).
        let w = weights(
            "iosets",
            &["period.1=40", "period.2=640"],
            ShareKey::Job,
            &shared,
        );
        assert_eq!(w.len(), 2);
        assert!(
            (w[0] - 0.01).abs() < 1e-15 && (w[1] - 0.001).abs() < 1e-15,
            "{w:?}"
        );
        assert!(weights("iosets", &["period.1=40"], ShareKey::Priority, &recs).is_empty());
    }

    #[test]
    fn unknown_policies_and_tunables_give_no_weights() {
        let recs = [rec(1, None, Some(0.1))];
        assert!(weights("noop", &[], ShareKey::Job, &recs).is_empty());
        assert!(weights("wfq", &["future_knob=1"], ShareKey::Job, &recs).is_empty());
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<Nanos> = (1..=100).map(Nanos).collect();
        assert_eq!(percentile(&v, 0.99), Nanos(99));
        assert_eq!(percentile(&v, 1.0), Nanos(100));
        assert_eq!(percentile(&v[..1], 0.99), Nanos(1));
        assert_eq!(mean(&v), Nanos(50));
    }
}
