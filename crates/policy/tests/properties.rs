//! Properties every registered policy must keep, whatever the sequence of calls:
//! every enqueued request is dispatched exactly once (alone or merged into exactly one batch), the
//! conservation counters balance after every call, and a policy holding work that neither a timer
//! nor an in-service request gates never answers `Idle`.
//!
//! The policy list comes from the registry, so a newly registered policy is covered at once; each
//! also runs with non-default tunables that change its behaviour (merging, weights, bounds).

use crate::common;

use std::collections::HashSet;

use iosets_policy::registry::POLICIES;
use iosets_policy::{ClassId, Counted, Dispatch, Nanos, Op, Outcome, Priority, RequestId};
use proptest::prelude::*;

/// Every registered policy with its defaults, plus variants with tunables that change behaviour.
fn configurations() -> Vec<(String, Vec<(String, String)>)> {
    let mut out: Vec<(String, Vec<(String, String)>)> = POLICIES
        .iter()
        .map(|p| (p.name.to_string(), Vec::new()))
        .collect();
    let extra: &[(&str, &[&str])] = &[
        ("timeorder", &["merge=true", "max_merge_bytes=3000"]),
        ("wfq", &["weight.1=5", "weight.2=0.5", "default_weight=2"]),
        ("wfq", &["key=class", "weight.0=3"]),
        ("iosets", &["max_exclusive_ms=3"]),
        ("iosets", &["order=jobid", "max_exclusive_ms=1"]),
        (
            "iosets",
            &["period.1=5", "period.2=50", "period.3=40", "base=2"],
        ),
        ("iosets", &["hold_idle_ms=5"]),
        ("iosets", &["metadata=sets", "max_exclusive_ms=0"]),
        (
            "iosets",
            &["unknown_hold_ms=1", "hold_idle_ms=2", "meta_weight=0.001"],
        ),
        (
            "iosets",
            &["hold_idle_ms=5", "max_exclusive_ms=20", "order=jobid"],
        ),
    ];
    for (name, opts) in extra {
        out.push((
            name.to_string(),
            iosets_policy::tunables::parse_pairs(opts).unwrap(),
        ));
    }
    out
}

#[derive(Clone, Debug)]
enum Step {
    Enqueue {
        job: u64,
        file: u64,
        block: u64,
        blocks: u64,
        op: u8,
        class: u64,
        prio: u8,
    },
    Dispatch,
    /// Complete the in-service batch at this position (modulo their number).
    Complete(usize, bool),
    Advance(u64),
    SetPriority {
        job: u64,
        prio: u8,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1u64..6, 0u64..3, 0u64..12, 1u64..4, 0u8..4, 0u64..3, 0u8..4).prop_map(
            |(job, file, block, blocks, op, class, prio)| Step::Enqueue { job, file, block, blocks, op, class, prio }
        ),
        4 => Just(Step::Dispatch),
        3 => (any::<usize>(), prop::bool::weighted(0.9)).prop_map(|(i, ok)| Step::Complete(i, ok)),
        1 => (0u64..5_000_000).prop_map(Step::Advance),
        1 => (1u64..6, 0u8..4).prop_map(|(job, prio)| Step::SetPriority { job, prio }),
    ]
}

fn priority(code: u8) -> Option<Priority> {
    match code {
        0 => None,
        1 => Priority::new(0.1),
        2 => Priority::new(0.01),
        _ => Priority::new(1.0),
    }
}

struct Harness {
    policy: Counted,
    now: Nanos,
    next_id: u64,
    enqueued: HashSet<u64>,
    dispatched: HashSet<u64>,
    in_service: Vec<RequestId>,
}

impl Harness {
    fn new(name: &str, opts: &[(String, String)]) -> Harness {
        Harness {
            policy: Counted::build(name, opts).unwrap(),
            now: Nanos::ZERO,
            next_id: 0,
            enqueued: HashSet::new(),
            dispatched: HashSet::new(),
            in_service: Vec::new(),
        }
    }

    /// One dispatch; checks exactly-once and the no-idle rule. Returns false if nothing was ready.
    fn dispatch(&mut self) -> Result<bool, TestCaseError> {
        match self.policy.dispatch(self.now) {
            Dispatch::Ready(b) => {
                for r in b.requests() {
                    prop_assert!(
                        self.enqueued.contains(&r.id.0),
                        "dispatched unknown {}",
                        r.id
                    );
                    prop_assert!(self.dispatched.insert(r.id.0), "dispatched {} twice", r.id);
                }
                self.in_service.push(b.id());
                Ok(true)
            }
            Dispatch::NotBefore(t) => {
                prop_assert!(
                    t > self.now,
                    "timer {t:?} is not in the future ({:?})",
                    self.now
                );
                Ok(false)
            }
            Dispatch::Idle => {
                prop_assert!(
                    self.policy.queued() == 0 || !self.in_service.is_empty(),
                    "{} answered Idle holding {} queued requests with nothing in service",
                    self.policy.name(),
                    self.policy.queued()
                );
                Ok(false)
            }
        }
    }

    /// A harness of policy `name` with `opts` that has applied `steps`.
    fn after(
        name: &str,
        opts: &[(String, String)],
        steps: &[Step],
    ) -> Result<Harness, TestCaseError> {
        let mut h = Harness::new(name, opts);
        for s in steps {
            h.apply(s)?;
        }
        Ok(h)
    }

    fn apply(&mut self, s: &Step) -> Result<(), TestCaseError> {
        match *s {
            Step::Enqueue {
                job,
                file,
                block,
                blocks,
                op,
                class,
                prio,
            } => {
                let op = [Op::Read, Op::Write, Op::Other, Op::Meta][op as usize];
                let mut r =
                    common::request(self.next_id, job, op, file, block * 1000, blocks * 1000);
                r.class = Some(ClassId(class));
                r.priority = priority(prio);
                r.arrival = self.now;
                self.enqueued.insert(self.next_id);
                self.next_id += 1;
                self.policy.enqueue(r, self.now);
            }
            Step::Dispatch => {
                self.dispatch()?;
            }
            Step::Complete(i, ok) => {
                if !self.in_service.is_empty() {
                    let id = self.in_service.swap_remove(i % self.in_service.len());
                    let outcome = if ok {
                        Outcome::Done { bytes: 1 }
                    } else {
                        Outcome::Failed { errno: 5 }
                    };
                    self.policy
                        .complete(id, outcome, self.now)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                }
            }
            Step::Advance(ns) => self.now = self.now + Nanos(ns),
            Step::SetPriority { job, prio } => {
                self.policy
                    .set_priority(iosets_policy::JobId(job), priority(prio), self.now);
            }
        }
        self.policy
            .check_balance()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        Ok(())
    }

    /// Completes everything, then dispatches (advancing to timers) until all is served.
    fn finish(&mut self) -> Result<(), TestCaseError> {
        let mut rounds = 0;
        while self.policy.queued() > 0 || !self.in_service.is_empty() {
            rounds += 1;
            prop_assert!(rounds < 100_000, "{} does not drain", self.policy.name());
            for id in std::mem::take(&mut self.in_service) {
                self.policy
                    .complete(id, Outcome::Done { bytes: 1 }, self.now)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            if !self.dispatch()? {
                if let Dispatch::NotBefore(t) = self.policy.dispatch(self.now) {
                    self.now = t;
                }
            }
            self.policy
                .check_balance()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        prop_assert_eq!(
            &self.dispatched,
            &self.enqueued,
            "every request dispatched exactly once"
        );
        let c = self.policy.counters();
        prop_assert_eq!(c.inserted, c.merged + c.dispatched + c.withdrawn);
        prop_assert_eq!(c.dispatched, c.completed);
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_policy_conserves_requests(steps in prop::collection::vec(step(), 1..300)) {
        for (name, opts) in configurations() {
            Harness::after(&name, &opts, &steps)?.finish()?;
        }
    }

    #[test]
    fn drain_hands_back_exactly_what_is_queued(steps in prop::collection::vec(step(), 1..200)) {
        for (name, opts) in configurations() {
            let mut h = Harness::after(&name, &opts, &steps)?;
            let queued = h.policy.queued();
            let drained = h.policy.drain();
            prop_assert_eq!(drained.len(), queued);
            for r in &drained {
                prop_assert!(h.enqueued.contains(&r.id.0) && !h.dispatched.contains(&r.id.0));
                h.dispatched.insert(r.id.0);
            }
            prop_assert_eq!(h.policy.queued(), 0, "{} {:?}", name, opts);
            h.policy.check_balance().map_err(|e| TestCaseError::fail(e.to_string()))?;
            // In-service batches still complete after a drain.
            h.finish()?;
        }
    }
}

#[test]
fn completing_twice_or_unknown_is_an_error_not_a_panic() {
    for (name, opts) in configurations() {
        let mut p = Counted::build(&name, &opts).unwrap();
        p.enqueue(common::request(1, 1, Op::Read, 1, 0, 10), Nanos::ZERO);
        let Dispatch::Ready(b) = p.dispatch(Nanos::ZERO) else {
            panic!("{name}: nothing dispatched")
        };
        assert!(p
            .complete(RequestId(99), Outcome::Done { bytes: 0 }, Nanos::ZERO)
            .is_err());
        p.complete(b.id(), Outcome::Done { bytes: 10 }, Nanos::ZERO)
            .unwrap();
        assert!(
            p.complete(b.id(), Outcome::Done { bytes: 10 }, Nanos::ZERO)
                .is_err(),
            "{name}"
        );
        p.check_balance().unwrap();
    }
}
