//! Unit tests of the fair-share tree above the sets (`key=account,set`, `user,set`,
//! `account,user,set`): groups share by weight, each group's sets by priority, exclusivity per
//! group's set.

use super::safe_tests::defaults as policy;
use super::*;
use crate::fairshare::account_key;
use crate::test_support::request;

fn write(id: u64, job: u64, prio: f64, user: Option<u32>, len: u64) -> Request {
    let mut r = request(id, job, Op::Write, job, id << 20, len);
    r.priority = Priority::new(prio);
    r.user = user;
    r
}

fn account(p: &mut IoSets, job: u64, name: &str) -> bool {
    p.set_job_info(
        JobId(job),
        JobInfo {
            account: Some(account_key(name)),
            nodes: None,
        },
        Nanos::ZERO,
    )
}

/// Jobs `(id, priority, user)` that always have a request queued: each dispatch of a job is
/// answered by its next request. Serves `n` requests one at a time; returns bytes by job.
fn streams(p: &mut IoSets, jobs: &[(u64, f64, Option<u32>)], n: usize) -> IdMap<u64, u64> {
    let mut id = 0;
    for &(job, prio, user) in jobs {
        for _ in 0..2 {
            id += 1;
            p.enqueue(write(id, job, prio, user, 1 << 16), Nanos(id));
        }
    }
    let mut bytes = IdMap::default();
    for t in 0..n as u64 {
        let now = Nanos(1_000 + t);
        let Dispatch::Ready(b) = p.dispatch(now) else {
            panic!("streams always have work")
        };
        let r = *b.head();
        *bytes.entry(r.job.0).or_default() += r.len;
        if let Some(&(_, prio, user)) = jobs.iter().find(|j| j.0 == r.job.0) {
            id += 1;
            p.enqueue(write(id, r.job.0, prio, user, r.len), now);
        }
        p.complete(r.id, Outcome::Done { bytes: r.len }, now);
    }
    bytes
}

fn share(bytes: &IdMap<u64, u64>, jobs: &[u64]) -> f64 {
    let all: u64 = bytes.values().sum();
    jobs.iter()
        .map(|j| bytes.get(j).copied().unwrap_or(0))
        .sum::<u64>() as f64
        / all as f64
}

#[test]
fn accounts_share_by_weight_and_their_sets_by_priority() {
    let mut p = policy(&[("key", "account,set")]);
    for (job, acct) in [(1, "physics"), (2, "physics"), (3, "bio"), (4, "bio")] {
        assert!(
            account(&mut p, job, acct),
            "the account level uses job info"
        );
    }
    assert!(p.set_share(ShareLevel::Account, account_key("physics"), Some(3.0)));
    // Each account: a job in set 0.1 and a job in set 0.01.
    let jobs = [
        (1, 0.1, None),
        (2, 0.01, None),
        (3, 0.1, None),
        (4, 0.01, None),
    ];
    let bytes = streams(&mut p, &jobs, 4_400);
    let physics = share(&bytes, &[1, 2]);
    assert!(
        (physics - 0.75).abs() < 0.01,
        "physics {physics}, {bytes:?}"
    );
    // Inside each account, its two sets 10:1.
    for (hi, lo) in [(1, 2), (3, 4)] {
        let inside = bytes[&hi] as f64 / (bytes[&hi] + bytes[&lo]) as f64;
        assert!((inside - 10.0 / 11.0).abs() < 0.01, "job {hi}: {inside}");
    }
    // Under key=set the same four jobs are two sets of the device: 10:1, accounts ignored.
    let mut flat = policy(&[]);
    for (job, acct) in [(1, "physics"), (2, "physics"), (3, "bio"), (4, "bio")] {
        assert!(
            !account(&mut flat, job, acct),
            "key=set has no account level"
        );
    }
    let bytes = streams(&mut flat, &jobs, 4_400);
    let high = share(&bytes, &[1, 3]);
    assert!((high - 10.0 / 11.0).abs() < 0.01, "{high}");
}

/// Two accounts, two jobs each in set 0.1, bursts of 4 requests, at most 2 requests in service.
/// Returns (two jobs of one account in service at once, jobs of both accounts at once) counts
/// over the run, and bytes by job.
fn bursts(p: &mut IoSets) -> (usize, usize, IdMap<u64, u64>) {
    let acct = |job: u64| if job <= 2 { 0 } else { 1 };
    let mut id = 0;
    let burst = |p: &mut IoSets, job: u64, now: u64, id: &mut u64| {
        for _ in 0..4 {
            *id += 1;
            p.enqueue(write(*id, job, 0.1, None, 1 << 16), Nanos(now));
        }
    };
    for job in 1..=4 {
        burst(p, job, 0, &mut id);
    }
    let mut left: IdMap<u64, u32> = (1..=4).map(|j| (j, 4)).collect();
    let mut in_service: VecDeque<Request> = VecDeque::new();
    let (mut same, mut both) = (0, 0);
    let mut bytes = IdMap::default();
    for t in 1..4_000u64 {
        while in_service.len() < 2 {
            match p.dispatch(Nanos(t)) {
                Dispatch::Ready(b) => in_service.push_back(*b.head()),
                _ => break,
            }
        }
        let jobs: Vec<u64> = in_service.iter().map(|r| r.job.0).collect();
        if jobs.len() == 2 && jobs[0] != jobs[1] {
            if acct(jobs[0]) == acct(jobs[1]) {
                same += 1;
            } else {
                both += 1;
            }
        }
        let r = in_service.pop_front().expect("someone always has work");
        p.complete(r.id, Outcome::Done { bytes: r.len }, Nanos(t));
        *bytes.entry(r.job.0).or_default() += r.len;
        let l = left.get_mut(&r.job.0).unwrap();
        *l -= 1;
        if *l == 0 {
            // The burst is over: the job's next one.
            *l = 4;
            burst(p, r.job.0, t, &mut id);
        }
    }
    (same, both, bytes)
}

#[test]
fn one_job_at_a_time_per_accounts_set_and_accounts_side_by_side() {
    let mut p = policy(&[("key", "account,set")]);
    for (job, acct) in [(1, "a"), (2, "a"), (3, "b"), (4, "b")] {
        account(&mut p, job, acct);
    }
    let (same, both, bytes) = bursts(&mut p);
    assert_eq!(
        same, 0,
        "two jobs of one account's set were in service at once"
    );
    assert!(
        both > 1_000,
        "the accounts' sets ran side by side only {both} times"
    );
    // Every job got its turns.
    for job in 1..=4 {
        let s = share(&bytes, &[job]);
        assert!((s - 0.25).abs() < 0.02, "job {job}: {s}");
    }
    // key=set: one set of the whole device, one job at a time, whatever the accounts.
    let mut flat = policy(&[]);
    for (job, acct) in [(1, "a"), (2, "a"), (3, "b"), (4, "b")] {
        account(&mut flat, job, acct);
    }
    let (same, both, _) = bursts(&mut flat);
    assert_eq!((same, both), (0, 0));
}

#[test]
fn users_share_equally_whatever_their_job_counts() {
    let mut p = policy(&[("key", "user,set")]);
    // User 1000: one job; user 2000: three, each in a set of its own priority.
    let jobs = [
        (1, 0.1, Some(1000)),
        (2, 0.1, Some(2000)),
        (3, 0.05, Some(2000)),
        (4, 0.2, Some(2000)),
    ];
    let bytes = streams(&mut p, &jobs, 4_000);
    let alone = share(&bytes, &[1]);
    assert!((alone - 0.5).abs() < 0.01, "user 1000: {alone}");
    // And a weight on a user.
    let mut p = policy(&[("key", "user,set")]);
    assert!(p.set_share(ShareLevel::User, 1000, Some(4.0)));
    let bytes = streams(&mut p, &jobs, 4_000);
    let alone = share(&bytes, &[1]);
    assert!((alone - 0.8).abs() < 0.01, "user 1000 at 4: {alone}");
}

#[test]
fn three_levels_nest() {
    let mut p = policy(&[("key", "account,user,set")]);
    assert_eq!(
        p.share_levels(),
        [ShareLevel::Account, ShareLevel::User, ShareLevel::Set]
    );
    // Account x: users 1 and 2 (one job each); account y: user 3 (two jobs, two sets).
    for (job, acct) in [(1, "x"), (2, "x"), (3, "y"), (4, "y")] {
        account(&mut p, job, acct);
    }
    let jobs = [
        (1, 0.1, Some(1)),
        (2, 0.1, Some(2)),
        (3, 0.1, Some(3)),
        (4, 0.01, Some(3)),
    ];
    let bytes = streams(&mut p, &jobs, 4_400);
    for (job, want) in [(1, 0.25), (2, 0.25), (3, 0.5 * 10.0 / 11.0)] {
        let s = share(&bytes, &[job]);
        assert!((s - want).abs() < 0.01, "job {job}: {s} (want {want})");
    }
}

#[test]
fn a_job_told_its_account_later_moves_with_its_queue() {
    let mut p = policy(&[("key", "account,set")]);
    account(&mut p, 1, "a");
    // Jobs 1 and 2 in set 0.1: job 1 in account a's, job 2 in the jobs' without an account.
    p.enqueue(write(1, 1, 0.1, None, 10), Nanos(0));
    p.enqueue(write(2, 2, 0.1, None, 10), Nanos(0));
    p.enqueue(write(3, 2, 0.1, None, 10), Nanos(0));
    let a = match p.dispatch(Nanos(1)) {
        Dispatch::Ready(b) => *b.head(),
        d => panic!("{d:?}"),
    };
    let b = match p.dispatch(Nanos(1)) {
        Dispatch::Ready(b) => *b.head(),
        d => panic!("{d:?}"),
    };
    // Two accounts' sets: both jobs go at once.
    assert_ne!(a.job, b.job);
    // Job 2 joins account a while job 1 holds a's set: its last request waits for the set.
    account(&mut p, 2, "a");
    let a1 = if a.job.0 == 1 { a } else { b };
    let held = p.dispatch(Nanos(2));
    if let Dispatch::Ready(r) = held {
        panic!("job 2 should wait for account a's set: {r:?}");
    }
    p.complete(a1.id, Outcome::Done { bytes: 10 }, Nanos(3));
    let left: Vec<u64> = p.drain().iter().map(|r| r.id.0).collect();
    assert_eq!(left, [3], "nothing lost in the move");
    assert_eq!(p.queued(), 0);
}

#[test]
fn an_accounts_metadata_storm_takes_its_own_share_not_anothers() {
    let quiet_share = |key: &str| {
        let mut p = policy(&[("key", key)]);
        account(&mut p, 1, "storm");
        account(&mut p, 2, "quiet");
        // Account storm: thousands of metadata requests of 64 KiB cost; account quiet: a
        // stream in set 0.1.
        for id in 0..3_000 {
            let mut m = request(100_000 + id, 1, Op::Meta, 1, 0, 1 << 16);
            m.priority = Priority::new(0.1);
            p.enqueue(m, Nanos(0));
        }
        let bytes = streams(&mut p, &[(2, 0.1, None)], 2_000);
        share(&bytes, &[2])
    };
    let quiet = quiet_share("account,set");
    assert!((quiet - 0.5).abs() < 0.01, "quiet account got {quiet}");
    // Under key=set the metadata class (weight 1) and the set (0.1) share the device 10:1.
    let flat = quiet_share("set");
    assert!((flat - 1.0 / 11.0).abs() < 0.01, "{flat}");
}

#[test]
fn service_elsewhere_is_charged_to_the_accounts() {
    let mut p = policy(&[("key", "account,set")]);
    account(&mut p, 1, "a");
    account(&mut p, 2, "b");
    let jobs = [(1, 0.1, None), (2, 0.1, None)];
    // Both backlogged here (two requests queued each, one more for each served); account a
    // was served as much elsewhere before each of its requests.
    let mut id = 0;
    for &(job, prio, user) in &jobs {
        for _ in 0..2 {
            id += 1;
            p.enqueue(write(id, job, prio, user, 1 << 16), Nanos(0));
        }
    }
    let mut bytes: IdMap<u64, u64> = IdMap::default();
    for t in 0..2_000u64 {
        let Dispatch::Ready(b) = p.dispatch(Nanos(t)) else {
            panic!("work")
        };
        let r = *b.head();
        *bytes.entry(r.job.0).or_default() += r.len;
        id += 1;
        let next = write(id, r.job.0, 0.1, None, r.len);
        if r.job.0 == 1 {
            p.charge_elsewhere(&next, 1 << 16);
        }
        p.enqueue(next, Nanos(t));
        p.complete(r.id, Outcome::Done { bytes: r.len }, Nanos(t));
    }
    // a got as much elsewhere as here: here it gets a third, so that job-wide it has a half.
    let a = share(&bytes, &[1]);
    assert!((a - 1.0 / 3.0).abs() < 0.02, "{a}");
}

#[test]
fn emptied_groups_are_bounded() {
    let mut p = policy(&[("key", "account,user,set")]);
    for i in 0..5_000u64 {
        account(&mut p, i, &format!("acct{i}"));
        p.enqueue(write(i, i, 0.1, Some(i as u32), 10), Nanos(i));
        let Dispatch::Ready(b) = p.dispatch(Nanos(i)) else {
            panic!("work")
        };
        p.complete(b.head().id, Outcome::Done { bytes: 10 }, Nanos(i));
    }
    let nodes = p.sched.nodes();
    assert!(
        nodes <= 2 * crate::fairshare::IDLE_NODES_KEPT + 4,
        "{nodes} nodes kept"
    );
    // Every set is gone: so are their groups' ids (the pinned group 0 aside).
    assert_eq!(p.groups.live(), 1);
    // Metadata classes hold their groups while kept: at most SPARE_QUEUES of them once empty.
    for i in 0..2_000u64 {
        account(&mut p, i, &format!("meta{i}"));
        p.enqueue(
            request(10_000 + i, i, Op::Meta, i, 0, 10),
            Nanos(10_000 + i),
        );
        let Dispatch::Ready(_) = p.dispatch(Nanos(10_000 + i)) else {
            panic!("work")
        };
    }
    assert!(p.groups.live() <= SPARE_QUEUES + 2, "{}", p.groups.live());
    assert!(p.metas.len() <= SPARE_QUEUES + 1, "{}", p.metas.len());
}

#[test]
fn keys_say_what_is_accepted() {
    for (key, says) in [
        ("job", "the last level is `set`"),
        ("account", "the last level is `set`"),
        ("set,account", "the last level is `set`"),
        ("job,set", "cannot be above the sets"),
        ("account,account,set", "given twice"),
        ("acct,set", "unknown level `acct`"),
        ("", "unknown level"),
    ] {
        let pairs = vec![("key".to_string(), key.to_string())];
        let mut t = Tunables::new(NAME, TUNABLES, &pairs).unwrap();
        let e = IoSets::from_tunables(&mut t).unwrap_err().to_string();
        assert!(e.contains(says), "key={key}: {e}");
    }
    assert_eq!(policy(&[]).share_levels(), [ShareLevel::Set]);
}

#[test]
fn a_set_share_reweighs_a_set() {
    let mut p = policy(&[]);
    assert!(p.set_share(
        ShareLevel::Set,
        Priority::new(0.01).unwrap().key(),
        Some(0.1)
    ));
    let bytes = streams(&mut p, &[(1, 0.1, None), (2, 0.01, None)], 2_000);
    let s = share(&bytes, &[1]);
    assert!((s - 0.5).abs() < 0.01, "{s}");
}
