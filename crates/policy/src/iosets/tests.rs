//! Unit tests of `iosets`: exclusivity inside a set, the two waiting orders, the tenure bound,
//! anticipation (lingers) and the bookkeeping each leaves behind.

use super::*;
use crate::test_support::{head_at, request};
use crate::Op;

fn req(id: u64, job: u64, prio: f64) -> Request {
    let mut r = request(id, job, Op::Write, job, id * 10, 10);
    r.priority = Priority::new(prio);
    r
}

/// The head of the batch `p` dispatches at `now` ns.
fn take(p: &mut IoSets, now: u64) -> Request {
    head_at(p, Nanos(now))
}

#[test]
fn one_job_per_set_until_its_burst_ends() {
    let mut p = IoSets::new(Order::Arrival, None, Priority::new(0.02).unwrap());
    p.enqueue(req(1, 7, 0.1), Nanos(0));
    p.enqueue(req(2, 8, 0.1), Nanos(1));
    p.enqueue(req(3, 7, 0.1), Nanos(2));
    let a = take(&mut p, 3);
    let b = take(&mut p, 3);
    assert_eq!((a.job.0, b.job.0), (7, 7));
    // Job 7 has two in service and nothing queued: job 8 must wait.
    assert_eq!(p.dispatch(Nanos(4)), Dispatch::Idle);
    p.complete(a.id, Outcome::Done { bytes: 10 }, Nanos(5));
    assert_eq!(p.dispatch(Nanos(5)), Dispatch::Idle);
    p.complete(b.id, Outcome::Done { bytes: 10 }, Nanos(6));
    assert_eq!(take(&mut p, 6).job.0, 8);
}

#[test]
fn jobs_without_priority_do_not_exclude_each_other() {
    let mut p = IoSets::new(Order::Arrival, None, Priority::new(0.02).unwrap());
    p.enqueue(request(1, 1, Op::Read, 1, 0, 10), Nanos(0));
    p.enqueue(request(2, 2, Op::Read, 2, 0, 10), Nanos(0));
    let a = take(&mut p, 0);
    let b = take(&mut p, 0);
    assert_ne!(a.job, b.job);
}

#[test]
fn jobid_order_cycles_through_ids() {
    let mut p = IoSets::new(Order::JobId, None, Priority::new(0.02).unwrap());
    for (i, j) in [(1, 5), (2, 3), (3, 9)] {
        p.enqueue(req(i, j, 0.1), Nanos(i));
    }
    let mut served = Vec::new();
    for t in 0..3 {
        let r = take(&mut p, 10 + t);
        served.push(r.job.0);
        p.complete(r.id, Outcome::Done { bytes: 10 }, Nanos(10 + t));
    }
    assert_eq!(served, vec![3, 5, 9]);
}

#[test]
fn holder_yields_after_max_exclusive() {
    let mut p = IoSets::new(
        Order::Arrival,
        Some(Nanos(100)),
        Priority::new(0.02).unwrap(),
    );
    for i in 0..10 {
        p.enqueue(req(i, 1, 0.1), Nanos(0));
    }
    p.enqueue(req(100, 2, 0.1), Nanos(0));
    let mut t = 0;
    let mut jobs = Vec::new();
    while p.queued() > 0 {
        let r = take(&mut p, t);
        jobs.push(r.job.0);
        t += 40;
        p.complete(r.id, Outcome::Done { bytes: 10 }, Nanos(t));
    }
    // Job 1 holds from t=0; at t=120 (>= 100) it yields to job 2, then gets the set back.
    assert_eq!(jobs, vec![1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1]);
}

#[test]
fn configured_periods_place_jobs_by_set10() {
    let pairs = crate::tunables::parse_pairs(&["period.1=40", "period.2=200", "period.3=640"]);
    let mut p = crate::build(NAME, &pairs.unwrap()).unwrap();
    // Jobs 1 and 2 (40 s and 200 s) share set 2; job 3 (640 s) is in set 3.
    for (id, job) in [(1, 1), (2, 2), (3, 3)] {
        p.enqueue(request(id, job, Op::Write, job, 0, 10), Nanos(id));
    }
    let mut served = Vec::new();
    while let Dispatch::Ready(b) = p.dispatch(Nanos(5)) {
        served.push(b.head().job.0);
    }
    served.sort_unstable();
    assert_eq!(served, vec![1, 3], "job 2 waits behind job 1 in set 2");
    let err = crate::build(NAME, &[("base".into(), "1".into())]).unwrap_err();
    assert!(err.to_string().contains("> 1"), "{err}");
}

#[test]
fn priority_change_moves_queued_work() {
    let mut p = IoSets::new(Order::Arrival, None, Priority::new(0.02).unwrap());
    p.enqueue(req(1, 1, 0.1), Nanos(0));
    p.enqueue(req(2, 1, 0.1), Nanos(0));
    p.enqueue(req(3, 2, 0.1), Nanos(0));
    // Job 2 leaves job 1's set: both can now be served side by side.
    assert!(p.set_priority(JobId(2), Priority::new(0.01), Nanos(1)));
    let a = take(&mut p, 1);
    let b = take(&mut p, 1);
    assert_ne!(a.job, b.job);
    assert!(p.set_priority(JobId(2), None, Nanos(1)));
    assert_eq!(p.queued(), 1);
    assert_eq!(p.drain().len(), 1);
}

const MS: u64 = 1_000_000;

fn holding(hold_ms: u64) -> IoSets {
    IoSets::new(Order::Arrival, None, Priority::new(0.02).unwrap())
        .with_hold_idle(Some(Nanos::from_millis(hold_ms)))
}

fn done(p: &mut IoSets, r: &Request, now: u64) {
    p.complete(r.id, Outcome::Done { bytes: r.len }, Nanos(now));
}

/// Nothing left behind: no job, set or linger once nothing is queued, in service or lingering.
fn assert_empty(p: &IoSets) {
    assert!(p.jobs.is_empty() && p.job_slots.is_empty(), "{:?}", p.jobs);
    assert!(p.sets.is_empty() && p.set_slots.is_empty(), "{:?}", p.sets);
    assert!(p.in_service.is_empty() && p.sched.backlogged() == 0);
}

#[test]
fn a_synchronous_holder_keeps_its_set_through_its_phase() {
    let mut p = holding(10);
    // Job 1 is synchronous: one request at a time, then its "fsync" (id 5). Job 2 is backlogged.
    p.enqueue(req(1, 1, 0.1), Nanos(0));
    for i in 0..4 {
        p.enqueue(req(100 + i, 2, 0.1), Nanos(1));
    }
    let mut t = 2 * MS;
    for id in 1..=5 {
        if id > 1 {
            p.enqueue(req(id, 1, 0.1), Nanos(t));
        }
        let r = take(&mut p, t);
        assert_eq!(r.id.0, id, "job 1's request {id} goes before job 2");
        assert_eq!(p.dispatch(Nanos(t)), Dispatch::Idle, "job 2 waits");
        t += MS;
        done(&mut p, &r, t);
        // Job 1 lingers: the set waits for its next request.
        assert_eq!(
            p.dispatch(Nanos(t)),
            Dispatch::NotBefore(Nanos(t + 10 * MS))
        );
        t += MS;
    }
    let end = t - MS + 10 * MS;
    assert_eq!(p.dispatch(Nanos(end - 1)), Dispatch::NotBefore(Nanos(end)));
    // The linger ends: job 2 takes the set, and job 1's next request is a new burst behind it.
    let b = take(&mut p, end);
    assert_eq!(b.job.0, 2);
    p.enqueue(req(6, 1, 0.1), Nanos(end + 1));
    let mut served = vec![b.job.0];
    let mut in_service = vec![b];
    let mut now = end + 1;
    while p.queued() > 0 {
        match p.dispatch(Nanos(now)) {
            Dispatch::Ready(batch) => {
                served.push(batch.head().job.0);
                in_service.push(*batch.head());
            }
            Dispatch::Idle => {
                for r in in_service.drain(..) {
                    done(&mut p, &r, now);
                }
            }
            // Job 2 lingers in turn; then job 1's new burst goes.
            Dispatch::NotBefore(t) => now = t.0,
        }
    }
    assert_eq!(served, vec![2, 2, 2, 2, 1]);
}

#[test]
fn another_set_is_served_while_one_lingers() {
    let mut p = holding(10);
    p.enqueue(req(1, 1, 0.1), Nanos(0));
    p.enqueue(req(2, 2, 0.1), Nanos(0));
    let a = take(&mut p, 0);
    done(&mut p, &a, MS);
    // Set 0.1 lingers for job 1; set 0.01 has work and goes at once.
    p.enqueue(req(3, 3, 0.01), Nanos(MS));
    p.enqueue(req(4, 3, 0.01), Nanos(MS));
    assert_eq!(take(&mut p, MS).id.0, 3);
    assert_eq!(take(&mut p, MS).id.0, 4);
    assert_eq!(p.dispatch(Nanos(MS)), Dispatch::NotBefore(Nanos(11 * MS)));
    assert_eq!(take(&mut p, 11 * MS).job.0, 2);
}

#[test]
fn hold_zero_and_solo_sets_never_linger() {
    let mut p = holding(0);
    p.enqueue(req(1, 1, 0.1), Nanos(0));
    p.enqueue(req(2, 2, 0.1), Nanos(0));
    let a = take(&mut p, 0);
    done(&mut p, &a, 1);
    assert_eq!(
        take(&mut p, 1).job.0,
        2,
        "hold_idle_ms=0: the set passes on at once"
    );

    // A job without priority is alone in its set: nobody could take it, so it does not linger.
    let mut p = holding(10);
    p.enqueue(request(1, 1, Op::Read, 1, 0, 10), Nanos(0));
    let a = take(&mut p, 0);
    done(&mut p, &a, 1);
    assert_eq!(p.dispatch(Nanos(1)), Dispatch::Idle);
    assert_empty(&p);
}

#[test]
fn an_expired_linger_leaves_nothing_behind() {
    let mut p = holding(10);
    p.enqueue(req(1, 1, 0.1), Nanos(0));
    let a = take(&mut p, 0);
    done(&mut p, &a, 0);
    assert_eq!(p.jobs.len(), 1, "the lingering holder is kept");
    assert_eq!(p.dispatch(Nanos(10 * MS)), Dispatch::Idle);
    assert_empty(&p);
    assert!(p.lingering.is_empty());
}

#[test]
fn a_priority_change_ends_a_linger() {
    let mut p = holding(10);
    p.enqueue(req(1, 1, 0.1), Nanos(0));
    p.enqueue(req(2, 2, 0.1), Nanos(0));
    let a = take(&mut p, 0);
    done(&mut p, &a, 0);
    // Same set: the linger goes on.
    assert!(p.set_priority(JobId(1), Priority::new(0.1), Nanos(1)));
    assert_eq!(p.dispatch(Nanos(1)), Dispatch::NotBefore(Nanos(10 * MS)));
    // Another set: job 1 has no work to move, it retires and job 2 takes the set.
    assert!(p.set_priority(JobId(1), Priority::new(0.01), Nanos(2)));
    assert!(!p.job_slots.contains_key(&JobId(1)));
    let b = take(&mut p, 2);
    assert_eq!(b.job.0, 2);
    done(&mut p, &b, 3);
    // The stale heap entry of job 1's linger is skipped; job 2's own linger remains.
    assert_eq!(
        p.dispatch(Nanos(3)),
        Dispatch::NotBefore(Nanos(3 + 10 * MS))
    );
    assert_eq!(p.dispatch(Nanos(3 + 10 * MS)), Dispatch::Idle);
    assert_empty(&p);
}

#[test]
fn drain_ends_lingers_and_the_policy_starts_afresh() {
    let mut p = holding(10);
    p.enqueue(req(1, 1, 0.1), Nanos(0));
    p.enqueue(req(2, 2, 0.1), Nanos(0));
    p.enqueue(req(3, 3, 0.01), Nanos(0));
    let a = take(&mut p, 0);
    let c = take(&mut p, 0);
    assert_eq!((a.job.0, c.job.0), (1, 3));
    done(&mut p, &a, 0);
    let drained: Vec<u64> = p.drain().iter().map(|r| r.id.0).collect();
    assert_eq!(drained, vec![2]);
    // Job 3 is still in service; job 1's linger is over.
    assert_eq!(p.dispatch(Nanos(1)), Dispatch::Idle);
    done(&mut p, &c, 1);
    assert_eq!(
        p.dispatch(Nanos(1)),
        Dispatch::NotBefore(Nanos(1 + 10 * MS))
    );
    assert_eq!(p.dispatch(Nanos(1 + 10 * MS)), Dispatch::Idle);
    assert_empty(&p);
    p.enqueue(req(4, 2, 0.1), Nanos(20 * MS));
    assert_eq!(take(&mut p, 20 * MS).id.0, 4);
}

#[test]
fn a_linger_counts_in_the_tenure_bound() {
    let mut p = IoSets::new(
        Order::Arrival,
        Some(Nanos::from_millis(5)),
        Priority::new(0.02).unwrap(),
    )
    .with_hold_idle(Some(Nanos::from_millis(10)));
    p.enqueue(req(1, 1, 0.1), Nanos(0));
    p.enqueue(req(2, 2, 0.1), Nanos(0));
    let a = take(&mut p, 0);
    // Job 2 has waited since 0: job 1's linger ends by the 5 ms bound, not at 1 + 10 ms.
    done(&mut p, &a, MS);
    assert_eq!(p.dispatch(Nanos(MS)), Dispatch::NotBefore(Nanos(5 * MS)));
    p.enqueue(req(3, 1, 0.1), Nanos(2 * MS));
    let a = take(&mut p, 2 * MS);
    assert_eq!(a.id.0, 3, "a request in the window goes on the same tenure");
    // Past the bound, with job 2 waiting, job 1 does not linger.
    done(&mut p, &a, 6 * MS);
    assert_eq!(take(&mut p, 6 * MS).job.0, 2);
}

#[test]
fn jobid_order_goes_on_after_the_lingering_holder() {
    let mut p = IoSets::new(Order::JobId, None, Priority::new(0.02).unwrap())
        .with_hold_idle(Some(Nanos::from_millis(1)));
    for (i, j) in [(1, 5), (2, 3), (3, 9)] {
        p.enqueue(req(i, j, 0.1), Nanos(i));
    }
    let mut served = Vec::new();
    let mut t = 10;
    while p.queued() > 0 {
        match p.dispatch(Nanos(t)) {
            Dispatch::Ready(b) => {
                served.push(b.head().job.0);
                done(&mut p, b.head(), t);
            }
            Dispatch::NotBefore(at) => t = at.0,
            Dispatch::Idle => panic!("work queued and nothing in service"),
        }
    }
    assert_eq!(served, vec![3, 5, 9]);
}

proptest::proptest! {
    /// Whatever the calls, once everything is served and every linger has ended, no job, set
    /// or heap entry is left behind, and a new request goes at once.
    #[test]
    fn lingers_leave_no_phantom_state(
        steps in proptest::collection::vec((0u8..16, 1u64..5, 0u8..3, 0u64..4 * MS), 1..200)
    ) {
        let mut p = IoSets::new(
            Order::Arrival,
            Some(Nanos::from_millis(3)),
            Priority::new(0.02).unwrap(),
        )
        .with_hold_idle(Some(Nanos::from_millis(2)));
        let prio = |c: u8| [None, Priority::new(0.1), Priority::new(0.01)][c as usize];
        let (mut now, mut id, mut in_service) = (0u64, 0u64, Vec::new());
        for (op, job, c, dt) in steps {
            match op {
                0..=4 => {
                    id += 1;
                    let mut r = request(id, job, Op::Write, job, 0, 10);
                    r.priority = prio(c);
                    p.enqueue(r, Nanos(now));
                }
                5..=8 => {
                    if let Dispatch::Ready(b) = p.dispatch(Nanos(now)) {
                        in_service.push(*b.head());
                    }
                }
                9..=11 => {
                    if !in_service.is_empty() {
                        let r = in_service.swap_remove(dt as usize % in_service.len());
                        done(&mut p, &r, now);
                    }
                }
                12 | 13 => now += dt,
                14 => {
                    p.set_priority(JobId(job), prio(c), Nanos(now));
                }
                _ => {
                    p.drain();
                }
            }
        }
        loop {
            for r in in_service.drain(..) {
                done(&mut p, &r, now);
            }
            match p.dispatch(Nanos(now)) {
                Dispatch::Ready(b) => in_service.push(*b.head()),
                Dispatch::NotBefore(t) => {
                    proptest::prop_assert!(t.0 > now);
                    now = t.0;
                }
                Dispatch::Idle => break,
            }
        }
        proptest::prop_assert_eq!(p.queued(), 0);
        assert_empty(&p);
        proptest::prop_assert!(p.lingering.is_empty());
        p.enqueue(req(1 << 40, 1, 0.1), Nanos(now));
        proptest::prop_assert_eq!(take(&mut p, now).id.0, 1 << 40);
    }
}

#[test]
fn hold_idle_ms_is_validated() {
    for bad in ["hold_idle_ms=60001", "hold_idle_ms=-1", "hold_idle_ms=1.5"] {
        let pairs = crate::tunables::parse_pairs(&[bad]).unwrap();
        let err = crate::build(NAME, &pairs).unwrap_err();
        assert!(err.to_string().contains("hold_idle_ms"), "{err}");
    }
    let pairs = crate::tunables::parse_pairs(&["hold_idle_ms=60000"]).unwrap();
    assert!(crate::build(NAME, &pairs).is_ok());
}

/// A request of `job` (priority 0.1) stamped with phase `phase`.
fn phased(id: u64, job: u64, phase: u64) -> Request {
    let mut r = req(id, job, 0.1);
    r.phase = Some(Nanos(phase));
    r
}

fn by_phase() -> IoSets {
    IoSets::new(Order::Phase, None, Priority::new(0.02).unwrap())
}

/// Feeds `arrivals` (request, time) to `p`, serving one request at a time (one worker), and
/// returns the jobs in the order they were served.
fn serve_one_at_a_time(p: &mut IoSets, arrivals: &[(Request, u64)]) -> Vec<u64> {
    let mut served = Vec::new();
    let mut now = 0;
    let mut next = 0;
    let mut in_service: Option<Request> = None;
    loop {
        while next < arrivals.len() && arrivals[next].1 <= now {
            p.enqueue(arrivals[next].0, Nanos(now));
            next += 1;
        }
        if let Some(r) = in_service.take() {
            p.complete(r.id, Outcome::Done { bytes: r.len }, Nanos(now));
        }
        match p.dispatch(Nanos(now)) {
            Dispatch::Ready(b) => {
                served.push(b.head().job.0);
                in_service = Some(*b.head());
            }
            _ if next == arrivals.len() => break,
            _ => {}
        }
        now += 1;
    }
    served
}

#[test]
fn phase_order_makes_two_servers_pick_the_same_job() {
    // Job 5's phase began at 100, job 6's at 50 (its client stamped it first), both in one
    // set. Server A sees job 5's requests first, server B job 6's; each request takes one
    // tick to serve.
    let five = |i: u64| phased(i, 5, 100);
    let six = |i: u64| phased(10 + i, 6, 50);
    let a: Vec<(Request, u64)> = vec![(five(1), 0), (five(2), 0), (six(1), 1), (six(2), 1)];
    let b: Vec<(Request, u64)> = vec![(six(1), 0), (six(2), 0), (five(1), 1), (five(2), 1)];
    // A started job 5 (the only job it knew), then hands the set to job 6 as soon as job 5's
    // request in service is done; B serves job 6 first anyway.
    assert_eq!(serve_one_at_a_time(&mut by_phase(), &a), [5, 6, 6, 5]);
    assert_eq!(serve_one_at_a_time(&mut by_phase(), &b), [6, 6, 5, 5]);
    // By arrival, A would have served all of job 5 first while B served job 6.
    let mut arrival = IoSets::new(Order::Arrival, None, Priority::new(0.02).unwrap());
    assert_eq!(serve_one_at_a_time(&mut arrival, &a), [5, 5, 6, 6]);
}

#[test]
fn equal_stamps_are_ordered_by_job_id_on_every_server() {
    for first in [7, 3] {
        let second = 10 - first;
        let arrivals = vec![
            (phased(1, first, 40), 0),
            (phased(2, first, 40), 0),
            (phased(3, second, 40), 0),
        ];
        // Whoever arrived first, all of job 3 goes first.
        let order = serve_one_at_a_time(&mut by_phase(), &arrivals);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(order, sorted);
    }
}

#[test]
fn a_new_phase_of_a_lingering_holder_queues_behind_earlier_phases() {
    let mut p = by_phase().with_hold_idle(Some(Nanos(100)));
    p.enqueue(phased(1, 5, 10), Nanos(0));
    let r = take(&mut p, 0);
    p.enqueue(phased(2, 6, 20), Nanos(1));
    done(&mut p, &r, 2);
    // Job 5 lingers (nothing of it queued); its next request is of the same phase: it goes on.
    p.enqueue(phased(3, 5, 10), Nanos(3));
    assert_eq!(take(&mut p, 3).job.0, 5);
    let mut p = by_phase().with_hold_idle(Some(Nanos(100)));
    p.enqueue(phased(1, 5, 10), Nanos(0));
    let r = take(&mut p, 0);
    p.enqueue(phased(2, 6, 20), Nanos(1));
    done(&mut p, &r, 2);
    // Now a request of a *new* phase (stamped 30): job 6's phase began earlier.
    p.enqueue(phased(3, 5, 30), Nanos(3));
    assert_eq!(take(&mut p, 3).job.0, 6);
}

#[test]
fn an_old_stamp_counts_only_as_old_as_the_bound() {
    for (age, next) in [(1_000, 6), (1_000_000, 5)] {
        let mut p = by_phase().with_max_phase_age(Nanos(age));
        // Job 6's phase began at 4,500; it holds the set.
        p.enqueue(phased(1, 6, 4_500), Nanos(5_000));
        p.enqueue(phased(2, 6, 4_500), Nanos(5_000));
        let r = take(&mut p, 5_000);
        // Job 5 claims a phase from time 0, seen at 10,000: with a bound of 1,000 it counts as
        // 9,000 and waits; unbounded, it would take the set.
        p.enqueue(phased(3, 5, 0), Nanos(10_000));
        done(&mut p, &r, 10_001);
        assert_eq!(take(&mut p, 10_001).job.0, next, "age {age}");
    }
}

#[test]
fn jobs_without_priority_share_one_new_set() {
    let mut p = crate::build(NAME, &[("order".into(), "phase".into())]).unwrap();
    let unknown = |id: u64, job: u64, phase: u64| {
        let mut r = request(id, job, Op::Write, job, 0, 10);
        r.phase = Some(Nanos(phase));
        r
    };
    // Job 1's client sends phase ends (one came for an earlier phase): its open phases hold.
    p.phase_end(JobId(1), Nanos(0), Nanos(0));
    p.enqueue(unknown(1, 1, 0), Nanos(0));
    p.enqueue(unknown(2, 2, 1), Nanos(0));
    let a = head_at(&mut *p, Nanos(0));
    assert_eq!(a.job.0, 1);
    // Exclusive among newcomers: job 2 waits while job 1 has a request in service.
    assert_eq!(p.dispatch(Nanos(1)), Dispatch::Idle);
    p.complete(a.id, Outcome::Done { bytes: 10 }, Nanos(2));
    // Job 1's phase is open (open_hold_ms): the set waits for it until its client ends it.
    assert!(matches!(p.dispatch(Nanos(2)), Dispatch::NotBefore(_)));
    p.phase_end(JobId(1), Nanos(0), Nanos(3));
    assert!(matches!(p.dispatch(Nanos(3)), Dispatch::Ready(_)));
    // Seed 004's prior on request: a set each.
    let mut own = crate::build(NAME, &[("unknown".into(), "own".into())]).unwrap();
    own.enqueue(unknown(1, 1, 0), Nanos(0));
    own.enqueue(unknown(2, 2, 0), Nanos(0));
    assert!(matches!(own.dispatch(Nanos(0)), Dispatch::Ready(_)));
    assert!(matches!(own.dispatch(Nanos(0)), Dispatch::Ready(_)));
}

#[test]
fn an_aperiodic_job_leaves_the_new_set_after_its_phases() {
    let mut p = by_phase().with_unknown(Unknown::Shared, 2);
    let unknown = |id: u64, job: u64, phase: u64| {
        let mut r = phased(id, job, phase);
        r.priority = None;
        r
    };
    // Job 9 holds the new set throughout (a request in service).
    p.enqueue(unknown(100, 9, 0), Nanos(0));
    let held = take(&mut p, 0);
    let mut blocked = Vec::new();
    // Job 4 shows phases 10, 20, 30 (one request each): after 2 it is aperiodic.
    for (i, phase) in [10, 20, 30].into_iter().enumerate() {
        let id = i as u64 + 1;
        p.enqueue(unknown(id, 4, phase), Nanos(phase));
        match p.dispatch(Nanos(phase)) {
            Dispatch::Ready(b) => {
                assert_eq!(b.head().job.0, 4);
                done(&mut p, b.head(), phase + 1);
            }
            _ => {
                blocked.push(phase);
                // Take it back out so the next phase is a new burst.
                let drained = p.drain();
                assert_eq!(drained.len(), 1);
                assert_eq!(drained[0].job.0, 4);
            }
        }
    }
    // Its first two phases waited behind job 9 (shared set); the third has a set of its own.
    assert_eq!(blocked, [10, 20]);
    assert_eq!(held.job.0, 9);
}

#[test]
fn order_and_unknown_are_validated() {
    for (k, v) in [
        ("order", "fastest"),
        ("unknown", "ignore"),
        ("max_phase_age_ms", "0"),
    ] {
        let err = crate::build(NAME, &[(k.into(), v.into())]).unwrap_err();
        assert!(err.to_string().contains(k), "{err}");
    }
}

#[test]
fn an_open_phase_keeps_its_set_until_its_end_arrives() {
    // No anticipation configured: only the open-phase hold keeps job 5's set (its client sends
    // phase ends: one came for an earlier phase).
    let mut p = by_phase().with_open_hold(Some(Nanos(1_000)));
    p.phase_end(JobId(5), Nanos(1), Nanos(0));
    p.enqueue(phased(1, 5, 10), Nanos(0));
    let r = take(&mut p, 0);
    p.enqueue(phased(2, 6, 20), Nanos(1));
    done(&mut p, &r, 2);
    // Job 5's requests are elsewhere for a moment: its set waits for it...
    assert_eq!(p.dispatch(Nanos(300)), Dispatch::NotBefore(Nanos(1_002)));
    // ...and a request of its phase goes on at once.
    p.enqueue(phased(3, 5, 10), Nanos(400));
    let r = take(&mut p, 400);
    assert_eq!(r.job.0, 5);
    done(&mut p, &r, 401);
    // The client says the phase is over: the set passes on now, not at the hold's end.
    p.phase_end(JobId(5), Nanos(10), Nanos(402));
    assert_eq!(take(&mut p, 402).job.0, 6);
    assert!(p.lingering.is_empty() || p.next_linger_end().is_none());
}

#[test]
fn the_end_of_an_older_phase_does_not_close_a_newer_one() {
    let mut p = by_phase().with_open_hold(Some(Nanos(1_000)));
    p.phase_end(JobId(5), Nanos(1), Nanos(0));
    p.enqueue(phased(1, 5, 10), Nanos(0));
    p.enqueue(phased(2, 6, 20), Nanos(0));
    let r = take(&mut p, 0);
    assert_eq!(r.job.0, 5);
    done(&mut p, &r, 1);
    // A late end of an earlier phase (stamp 5) leaves phase 10 open.
    p.phase_end(JobId(5), Nanos(5), Nanos(2));
    assert_eq!(p.dispatch(Nanos(3)), Dispatch::NotBefore(Nanos(1_001)));
    // Without stamps (or with open_hold 0) nothing waits: the paper's rule.
    let mut p = by_phase().with_open_hold(None);
    p.enqueue(phased(1, 5, 10), Nanos(0));
    p.enqueue(phased(2, 6, 20), Nanos(0));
    let r = take(&mut p, 0);
    done(&mut p, &r, 1);
    assert_eq!(take(&mut p, 1).job.0, 6);
}

#[test]
fn a_job_on_two_nodes_keeps_its_set_until_both_end_their_phase() {
    // Job 5 runs on two compute nodes: each node's client stamps its own phase start (10 and
    // 12) and sends its own phase end. The first node's end must not pass the set to job 6
    // while the second node is still in the phase.
    let mut p = by_phase().with_open_hold(Some(Nanos(1_000)));
    p.phase_end(JobId(5), Nanos(1), Nanos(0));
    p.enqueue(phased(1, 5, 10), Nanos(0));
    p.enqueue(phased(2, 5, 12), Nanos(0));
    p.enqueue(phased(3, 6, 20), Nanos(0));
    let a = take(&mut p, 0);
    let b = take(&mut p, 0);
    assert_eq!((a.job.0, b.job.0), (5, 5));
    done(&mut p, &a, 1);
    done(&mut p, &b, 2);
    // Node one is done: job 5's phase stays open (node two's requests are elsewhere).
    p.phase_end(JobId(5), Nanos(10), Nanos(3));
    assert_eq!(p.dispatch(Nanos(4)), Dispatch::NotBefore(Nanos(1_002)));
    // Node two's next request goes on at once, before job 6.
    p.enqueue(phased(4, 5, 12), Nanos(5));
    let c = take(&mut p, 5);
    assert_eq!(c.job.0, 5);
    done(&mut p, &c, 6);
    // Node two is done too: the set passes on now.
    p.phase_end(JobId(5), Nanos(12), Nanos(7));
    assert_eq!(take(&mut p, 7).job.0, 6);
}
