//! Wait causes ([`iosets_runtime::why`]) on constructed cases, on a hand-moved clock: each case
//! knows which cause every nanosecond of a wait belongs to; the property test checks that the
//! causes sum to the measured waits exactly, job by job, whatever happens.

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use iosets_runtime::quota::{Match, QuotaConfig, RuleSpec};
use iosets_runtime::{
    Clock, Counted, JobStats, Next, Origin, Scheduler, WaitCause, WaitCauses, Work,
};
use iosets_types::{FileId, JobId, Nanos, Op, Outcome, Priority, Request};
use proptest::prelude::*;

#[derive(Default)]
struct ManualClock(AtomicU64);

impl Clock for ManualClock {
    fn now(&self) -> Nanos {
        Nanos(self.0.load(Ordering::SeqCst))
    }
}

struct Rig {
    sched: Scheduler<u64>,
    clock: Arc<ManualClock>,
    seq: u64,
}

impl Rig {
    fn new(policy: &str, threads: usize) -> Rig {
        let clock = Arc::new(ManualClock::default());
        let sched = Scheduler::with_clock(
            Counted::build(policy, &[]).expect("registered"),
            clock.clone(),
        );
        sched.set_service_threads(threads).unwrap();
        Rig {
            sched,
            clock,
            seq: 0,
        }
    }

    fn at(&self, t: u64) {
        self.clock.0.store(t, Ordering::SeqCst);
    }

    fn request(&mut self, job: u64, priority: Option<f64>) -> Request {
        self.seq += 1;
        Request::builder(JobId(job), Op::Write)
            .file(FileId(job))
            .range(self.seq * 4096, 4096)
            .priority(priority.and_then(Priority::new))
            .build()
    }

    fn submit(&mut self, job: u64, priority: Option<f64>) {
        let req = self.request(job, priority);
        self.sched.submit(req, job).unwrap();
    }

    fn submit_from(&mut self, job: u64) {
        let req = self.request(job, None);
        self.sched
            .submit_from(req, &Origin::default(), job)
            .unwrap();
    }

    /// The next batch that can go now.
    fn take(&self) -> Option<Work<u64>> {
        match self.sched.try_next() {
            Next::Work(w) => Some(w),
            Next::TimedOut | Next::Shutdown => None,
        }
    }

    /// Completes `held`, then serves the one batch left, and returns `job`'s stats, checked to
    /// account for every nanosecond of its waits ([`exact`]).
    fn last_served(&self, held: Work<u64>, job: u64) -> JobStats {
        done(held);
        done(self.take().unwrap());
        let j = self.job(job);
        exact(&j);
        j
    }

    fn job(&self, job: u64) -> JobStats {
        self.sched.job_stats(JobId(job)).expect("known job")
    }
}

fn done(w: Work<u64>) {
    let bytes = w.batch().bytes();
    w.complete(Outcome::Done { bytes });
}

/// `(cause, ns)` of every cause with time, in order.
fn causes(c: &WaitCauses) -> Vec<(&'static str, u64)> {
    WaitCause::ALL
        .into_iter()
        .filter(|&k| c.ns(k) > 0)
        .map(|k| (k.as_str(), c.ns(k)))
        .collect()
}

fn exact(j: &JobStats) {
    assert_eq!(
        j.wait_causes.total_ns(),
        j.queue_wait.sum_ns,
        "job {}: causes {:?} against the measured waits",
        j.job,
        j.wait_causes
    );
}

#[test]
fn one_job_deeper_than_the_threads_waits_for_the_device() {
    let mut rig = Rig::new("noop", 1);
    for _ in 0..3 {
        rig.submit(1, None);
    }
    // One thread: the rig takes a batch only when the thread is free.
    let a = rig.take().expect("the first goes at once");
    rig.at(10);
    done(a);
    let b = rig.take().unwrap();
    rig.at(25);
    let j = rig.last_served(b, 1);
    assert_eq!(j.queue_wait.sum_ns, 10 + 25);
    assert_eq!(causes(&j.wait_causes), [("device", 35)]);
    assert_eq!(j.wait_causes.requests(WaitCause::Device), 2);
}

#[test]
fn turned_off_no_wait_is_split_and_it_turns_back_on_when_idle() {
    let mut rig = Rig::new("noop", 1);
    rig.sched.set_wait_causes(false).unwrap();
    for _ in 0..3 {
        rig.submit(1, None);
    }
    assert!(
        matches!(
            rig.sched.set_wait_causes(true),
            Err(iosets_runtime::RuntimeError::NotIdle { busy: 3, .. })
        ),
        "refused while three requests are queued"
    );
    let a = rig.take().unwrap();
    rig.at(10);
    done(a);
    let b = rig.take().unwrap();
    rig.at(25);
    done(b);
    done(rig.take().unwrap());
    let j = rig.job(1);
    assert_eq!(j.queue_wait.sum_ns, 10 + 25, "waits are still measured");
    assert_eq!(j.wait_causes, WaitCauses::default(), "none split");
    rig.sched.check_balance().unwrap();
    // Idle again: on, the next waits are split.
    rig.sched.set_wait_causes(true).unwrap();
    rig.submit(1, None);
    rig.submit(1, None);
    let c = rig.take().unwrap();
    rig.at(40);
    done(c);
    done(rig.take().unwrap());
    let j = rig.job(1);
    assert_eq!(j.queue_wait.sum_ns, 10 + 25 + 15);
    assert_eq!(causes(&j.wait_causes), [("device", 15)]);
    rig.sched.check_balance().unwrap();
}

#[test]
fn the_second_job_of_an_iosets_set_waits_for_exclusivity() {
    // Two threads: one stays free while job 2 waits; IO-SETS keeps the set for job 1.
    let mut rig = Rig::new("iosets", 2);
    rig.submit(1, Some(0.1));
    rig.submit(2, Some(0.1));
    let first = rig.take().unwrap();
    assert_eq!(first.payloads(), &[1]);
    assert!(
        rig.take().is_none(),
        "job 2 waits while job 1 holds the set"
    );
    rig.at(40);
    done(first);
    let second = rig.take().unwrap();
    assert_eq!(second.payloads(), &[2]);
    done(second);
    let j = rig.job(2);
    exact(&j);
    assert_eq!(causes(&j.wait_causes), [("exclusivity", 40)]);
    assert_eq!(causes(&rig.job(1).wait_causes), []);
    rig.sched.check_balance().unwrap();
}

#[test]
fn the_low_priority_set_waits_for_its_share() {
    for policy in ["iosets", "wfq"] {
        let mut rig = Rig::new(policy, 1);
        rig.submit(1, Some(1.0));
        rig.submit(2, Some(0.001));
        let first = rig.take().unwrap();
        assert_eq!(first.payloads(), &[1], "{policy}: the high priority first");
        rig.at(30);
        let j = rig.last_served(first, 2);
        assert_eq!(causes(&j.wait_causes), [("share", 30)], "{policy}");
    }
}

#[test]
fn a_busy_thread_is_shared_in_proportion_to_whose_requests_hold_it() {
    // noop, two threads, both held: one by job 1, one by job 2. Job 1's third request waits
    // 100 ns: half behind itself (device), half behind job 2 (another set: share).
    let mut rig = Rig::new("noop", 2);
    rig.submit(1, None);
    rig.submit(2, None);
    rig.submit(1, None);
    let a = rig.take().unwrap();
    let b = rig.take().unwrap();
    rig.at(100);
    done(a);
    let j = rig.last_served(b, 1);
    assert_eq!(causes(&j.wait_causes), [("device", 50), ("share", 50)]);
}

/// Three threads: two held by job 1, one by job 2; job 1's fourth request waits `step` ns,
/// 2/3 of it behind itself (device) and 1/3 behind job 2 (share). Job 1, checked exact.
fn job_1_behind_thirds(step: u64) -> JobStats {
    let mut rig = Rig::new("noop", 3);
    rig.submit(1, None);
    rig.submit(1, None);
    rig.submit(2, None);
    rig.submit(1, None);
    let held: Vec<_> = (0..3).map(|_| rig.take().unwrap()).collect();
    rig.at(step);
    for w in held {
        done(w);
    }
    done(rig.take().unwrap());
    let j = rig.job(1);
    exact(&j);
    j
}

#[test]
fn thirds_are_rounded_once_and_still_sum_exactly() {
    // 20/3 ns behind itself (device, 7 rounded), 10/3 behind job 2 (share, the rest: 3).
    let j = job_1_behind_thirds(10);
    assert_eq!(causes(&j.wait_causes), [("device", 7), ("share", 3)]);
}

#[test]
fn steps_longer_than_four_seconds_split_exactly_too() {
    // A 10 s step: past the 64-bit fast path of the busy integral.
    let j = job_1_behind_thirds(10_000_000_000);
    assert_eq!(
        causes(&j.wait_causes),
        [("device", 6_666_666_667), ("share", 3_333_333_333)]
    );
}

#[test]
fn a_thread_quota_holds_requests_as_rule() {
    let mut rig = Rig::new("noop", 2);
    let mut rule = RuleSpec::new("half", Match::parse("job=7").unwrap());
    rule.threads_pct = Some(50.0);
    rig.sched
        .set_quota(Some(QuotaConfig {
            rules: vec![rule],
            ..QuotaConfig::default()
        }))
        .unwrap();
    rig.submit_from(7);
    rig.submit_from(7);
    let a = rig.take().unwrap();
    assert!(rig.take().is_none(), "one thread of two for the rule");
    rig.at(70);
    let j = rig.last_served(a, 7);
    assert_eq!(causes(&j.wait_causes), [("rule", 70)]);
    assert_eq!(j.wait_causes.requests(WaitCause::Rule), 1);
}

#[test]
fn a_rate_holds_requests_as_rule() {
    let mut rig = Rig::new("noop", 4);
    let mut rule = RuleSpec::new("slow", Match::parse("job=3").unwrap());
    rule.rate_ops = Some(10.0);
    rule.strict = true;
    rig.sched
        .set_quota(Some(QuotaConfig {
            rules: vec![rule],
            ..QuotaConfig::default()
        }))
        .unwrap();
    for _ in 0..3 {
        rig.submit_from(3);
    }
    // Serve each as soon as the rate lets it (completing at once), in 1 ms steps.
    let mut t = 0;
    let mut served = 0;
    while served < 3 {
        while let Some(w) = rig.take() {
            done(w);
            served += 1;
        }
        t += 1_000_000;
        rig.at(t);
        assert!(t < 10_000_000_000, "the rate never admitted them");
    }
    let j = rig.job(3);
    exact(&j);
    assert!(j.queue_wait.sum_ns > 0, "a rate of 10/s held some");
    assert_eq!(
        causes(&j.wait_causes),
        [("rule", j.queue_wait.sum_ns)],
        "admitted only when a token came, dispatched at once"
    );
}

#[test]
fn a_policy_switch_mid_wait_charges_the_rest_under_the_new_sets() {
    // One thread, held by job 1; job 2 of the same IO-SETS set waits 10 ns (exclusivity), then
    // `noop` is switched in: job 2 is a set of its own there, and the 15 ns more behind job 1
    // are `share`.
    let mut rig = Rig::new("iosets", 1);
    rig.submit(1, Some(0.1));
    rig.submit(2, Some(0.1));
    let first = rig.take().unwrap();
    rig.at(10);
    rig.sched
        .switch_policy(Counted::build("noop", &[]).unwrap())
        .unwrap();
    rig.at(25);
    let j = rig.last_served(first, 2);
    assert_eq!(causes(&j.wait_causes), [("exclusivity", 10), ("share", 15)]);
    rig.sched.check_balance().unwrap();
}

#[test]
fn a_priority_change_mid_wait_moves_the_job_to_its_new_set() {
    // Jobs 1 and 2 in two sets (share); at 20 the control plane puts job 2 in job 1's set:
    // the rest is exclusivity.
    let mut rig = Rig::new("iosets", 1);
    rig.submit(1, Some(1.0));
    rig.submit(2, Some(0.01));
    let first = rig.take().unwrap();
    rig.at(20);
    rig.sched.set_priority(JobId(2), Priority::new(1.0));
    rig.at(50);
    let j = rig.last_served(first, 2);
    assert_eq!(causes(&j.wait_causes), [("exclusivity", 30), ("share", 20)]);
}

#[test]
fn a_forgotten_job_starts_again_from_nothing() {
    let mut rig = Rig::new("noop", 1);
    rig.submit(1, None);
    rig.submit(1, None);
    let a = rig.take().unwrap();
    rig.at(5);
    done(a);
    done(rig.take().unwrap());
    let gone = rig.sched.forget_job(JobId(1)).expect("idle");
    exact(&gone);
    assert_eq!(causes(&gone.wait_causes), [("device", 5)]);
    assert!(rig.sched.job_stats(JobId(1)).is_none());
    // It comes back behind job 2.
    rig.submit(2, None);
    rig.submit(1, None);
    let b = rig.take().unwrap();
    rig.at(12);
    let j = rig.last_served(b, 1);
    assert_eq!(causes(&j.wait_causes), [("share", 7)]);
    rig.sched.check_balance().unwrap();
}

#[test]
fn merged_batches_split_every_request() {
    let clock = Arc::new(ManualClock::default());
    let sched: Scheduler<u64> = Scheduler::with_clock(
        Counted::build("timeorder", &[("merge".into(), "true".into())]).unwrap(),
        clock.clone(),
    );
    sched.set_service_threads(1).unwrap();
    let req = |job: u64, off: u64| common::request(job, Op::Read, 1, off, 10);
    sched.submit(req(1, 0), 0).unwrap();
    let a = sched.try_next().work().unwrap();
    clock.0.store(9, Ordering::SeqCst);
    sched.submit(req(2, 10), 1).unwrap();
    sched.submit(req(3, 20), 2).unwrap();
    clock.0.store(13, Ordering::SeqCst);
    done(a);
    let b = sched.try_next().work().unwrap();
    assert_eq!(b.batch().len(), 2, "merged");
    done(b);
    for job in [2, 3] {
        let j = sched.job_stats(JobId(job)).unwrap();
        exact(&j);
        assert_eq!(causes(&j.wait_causes), [("share", 4)]);
    }
}

/// One step of the property test.
#[derive(Clone, Debug)]
enum Step {
    Submit { job: u64, set: u8, governed: bool },
    Take,
    Complete(usize),
    Advance(u64),
    Priority { job: u64, set: Option<u8> },
    Switch(u8),
    Rules(u8),
    Forget(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..6u64, 0..3u8, any::<bool>())
            .prop_map(|(job, set, governed)| Step::Submit { job, set, governed }),
        4 => Just(Step::Take),
        3 => (0..8usize).prop_map(Step::Complete),
        4 => (0..1_000_000u64).prop_map(Step::Advance),
        1 => (0..6u64, proptest::option::of(0..3u8))
            .prop_map(|(job, set)| Step::Priority { job, set }),
        1 => (0..4u8).prop_map(Step::Switch),
        1 => (0..3u8).prop_map(Step::Rules),
        1 => (0..6u64).prop_map(Step::Forget),
    ]
}

const POLICIES: [&str; 4] = ["iosets", "wfq", "noop", "deadline"];

fn rules(kind: u8) -> Option<QuotaConfig> {
    let mut r = RuleSpec::new("r", Match::parse("job={0 1 2}").unwrap());
    match kind {
        0 => return None,
        1 => r.threads_pct = Some(50.0),
        _ => {
            r.rate_ops = Some(2_000.0);
            r.strict = true;
        }
    }
    Some(QuotaConfig {
        rules: vec![r],
        ..QuotaConfig::default()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever is submitted, dispatched, completed, re-prioritised, switched, governed and
    /// forgotten, every job's causes sum to its measured waits exactly, and the forgotten
    /// records too.
    #[test]
    fn causes_sum_to_the_measured_waits(
        threads in 1..4usize,
        first in 0..4usize,
        steps in proptest::collection::vec(step(), 1..120),
    ) {
        let clock = Arc::new(ManualClock::default());
        let sched: Scheduler<u64> = Scheduler::with_clock(
            Counted::build(POLICIES[first], &[]).unwrap(),
            clock.clone(),
        );
        sched.set_service_threads(threads).unwrap();
        let mut in_service: Vec<Work<u64>> = Vec::new();
        let mut forgotten: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        let mut seq = 0u64;
        let mut t = 0u64;
        // Without weighted queues every job is a set of its own: nobody shares its set.
        let solo = matches!(POLICIES[first], "noop" | "deadline")
            && !steps.iter().any(|s| matches!(s, Step::Switch(_)));
        let priority = |set: u8| Priority::new(10f64.powi(-i32::from(set)));
        for s in steps {
            match s {
                Step::Submit { job, set, governed } => {
                    seq += 1;
                    let req = Request::builder(JobId(job), Op::Write)
                        .file(FileId(job))
                        .range(seq * 4096, 4096)
                        .priority(priority(set))
                        .build();
                    if governed {
                        sched.submit_from(req, &Origin::default(), seq).unwrap();
                    } else {
                        sched.submit(req, seq).unwrap();
                    }
                }
                Step::Take => {
                    if let Next::Work(w) = sched.try_next() {
                        in_service.push(w);
                    }
                }
                Step::Complete(i) => {
                    if !in_service.is_empty() {
                        let w = in_service.swap_remove(i % in_service.len());
                        done(w);
                    }
                }
                Step::Advance(dt) => {
                    t += dt;
                    clock.0.store(t, Ordering::SeqCst);
                }
                Step::Priority { job, set } => {
                    sched.set_priority(JobId(job), set.and_then(priority));
                }
                Step::Switch(p) => {
                    sched.switch_policy(Counted::build(POLICIES[usize::from(p)], &[]).unwrap()).unwrap();
                }
                Step::Rules(k) => sched.set_quota(rules(k)).unwrap(),
                Step::Forget(job) => {
                    if let Some(j) = sched.forget_job(JobId(job)) {
                        prop_assert_eq!(j.wait_causes.total_ns(), j.queue_wait.sum_ns);
                        let e = forgotten.entry(job).or_default();
                        e.0 += j.wait_causes.total_ns();
                        e.1 += j.queue_wait.sum_ns;
                    }
                }
            }
            sched.check_balance().unwrap();
        }
        // Drain: everything queued or held is served.
        sched.set_quota(None).unwrap();
        for w in in_service.drain(..) {
            done(w);
        }
        let mut rounds = 0;
        while sched.stats().queued + sched.stats().held > 0 {
            t += 1_000_000;
            clock.0.store(t, Ordering::SeqCst);
            while let Next::Work(w) = sched.try_next() {
                done(w);
            }
            rounds += 1;
            prop_assert!(rounds < 10_000, "the queue never drained");
        }
        sched.check_balance().unwrap();
        for j in sched.stats().jobs {
            prop_assert_eq!(
                j.wait_causes.total_ns(), j.queue_wait.sum_ns,
                "job {}: {:?}", j.job, j.wait_causes
            );
            if solo {
                prop_assert_eq!(j.wait_causes.ns(WaitCause::Exclusivity), 0, "job {}", j.job);
            }
            let counted: u64 = WaitCause::ALL.iter().map(|&c| j.wait_causes.requests(c)).max().unwrap_or(0);
            prop_assert!(counted <= j.queue_wait.count);
        }
    }
}

#[test]
fn many_sets_emptied_and_refilled_stay_exact() {
    // 100 IO-SETS sets (one priority each), taken in turns by 300 jobs: sets empty and fill
    // again, and the empty ones are dropped in bulk; every wait still splits exactly.
    let mut rig = Rig::new("iosets", 2);
    let mut t = 0;
    for round in 0..3u64 {
        for i in 0..100u64 {
            let p = 1.0 / (1.0 + i as f64);
            let (a, b) = (round * 1000 + i, round * 1000 + 500 + i);
            rig.submit(a, Some(p));
            rig.submit(b, Some(p));
            rig.submit(a, Some(p));
            let first = rig.take().unwrap();
            t += 7;
            rig.at(t);
            done(first);
            while let Some(w) = rig.take() {
                t += 3;
                rig.at(t);
                done(w);
            }
            for job in [a, b] {
                exact(&rig.job(job));
            }
        }
    }
    let stats = rig.sched.stats();
    assert_eq!(stats.total_ops(), 900);
    let excl: u64 = stats
        .jobs
        .iter()
        .map(|j| j.wait_causes.ns(WaitCause::Exclusivity))
        .sum();
    assert!(excl > 0, "the second job of each set waited for the first");
    rig.sched.check_balance().unwrap();
}
