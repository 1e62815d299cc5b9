//! `wfq`: weighted fair queuing by bytes among queues keyed by job, by class, or by a fair-share
//! tree of accounts, users and jobs.
//!
//! While `k` queues are backlogged, queue `i` receives `weight_i / Σ weights` of the bytes served;
//! when a queue empties its share goes to the others at once (work-conserving), and an idle queue
//! banks no credit. The order comes from [`crate::wf2q::Wf2q`] (WF²Q+), which keeps every backlogged
//! queue within one request size of its exact fluid share at every moment.
//!
//! A job's weight, first match wins: a priority set from the control plane
//! ([`Policy::set_priority`], job-keyed queues only), a share set for the job
//! ([`Policy::set_share`] at level `job`), the tunable `weight.<queue>`, the priority hint of the
//! request that opened the queue's current backlog, `default_weight`. With `job_weight=nodes`
//! it is the job's node count instead ([`Policy::set_job_info`]; 1 if unknown).
//!
//! # A fair-share tree
//! `key=account,user,job` (any of the levels `account`, `user`, `set`, `job`, each once, top
//! first) nests the queues:
//! the accounts share the device by their share weights, each account's users share what it
//! gets, each user's jobs share what the user gets ([`crate::fairshare`]). A job's account and
//! node count come from the control plane ([`Policy::set_job_info`]; Slurm's, through the SPANK
//! plugin or `iosets ctl job-info`), its user from the request's credentials; account and user
//! weights from [`Policy::set_share`] (default 1). The `set` level groups jobs by priority, the
//! way IO-SETS groups them into sets, and weighs each set by its priority (IO-SETS' shares
//! between sets; one job of a set at a time is the `iosets` policy's, not this one's):
//! `key=account,set,job` gives each account's sets their IO-SETS shares of what the account
//! gets. ThemisIO's policies are presets of `key`:
//! `job-fair` (`job`), `user-fair` (`user`), `size-fair` (`job`, weighted by node count) and
//! `user-then-job` (`user,job`).
//!
//! Inside a queue requests keep their arrival order. Nothing is merged.

use std::collections::VecDeque;

use crate::fairshare::{JobInfo, ShareLevel, ShareTree, NO_ACCOUNT, NO_SET, NO_USER};
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
        help: "what a queue is: job, class (per caller-given class; none = class 0), or a \
               fair-share tree: levels from account, user, set, job joined by commas, top first \
               (account,user,job; account,set,job), or a preset: job-fair, user-fair, size-fair, \
               user-then-job",
    },
    TunableSpec {
        name: "job_weight",
        default: "auto",
        help: "what weighs a job: priority (control priority, share, weight.<job>, hint, \
               default_weight) or nodes (its node count from the control plane, 1 if unknown); \
               auto: nodes for key=size-fair, else priority",
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

/// The most levels a tree has: each of [`ShareLevel::ALL`] once.
const LEVELS: usize = ShareLevel::ALL.len();

/// How many emptied queues are kept for reuse.
const SPARE_QUEUES: usize = 256;

/// The most job records (account, node count) kept. The runtime refuses a new job past it;
/// a caller that does not bound what it tells has an arbitrary record dropped instead.
pub const MAX_JOB_INFO: usize = 1 << 16;

/// What a queue is keyed by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyBy {
    /// One queue per job.
    Job,
    /// One queue per caller-given class (requests without a class go to class 0).
    Class,
    /// A fair-share tree over these levels, top first (each at most once).
    Tree(Vec<ShareLevel>),
}

impl KeyBy {
    /// Parses `key`: `job`, `class`, a level list or a preset; `nodes` is set for `size-fair`.
    fn parse(text: &str) -> Result<(KeyBy, bool), String> {
        use ShareLevel::{Job, User};
        Ok(match text {
            "job" | "job-fair" => (KeyBy::Job, false),
            "class" => (KeyBy::Class, false),
            "size-fair" => (KeyBy::Tree(vec![Job]), true),
            "user-fair" => (KeyBy::Tree(vec![User]), false),
            "user-then-job" => (KeyBy::Tree(vec![User, Job]), false),
            list => {
                let mut levels = Vec::new();
                for item in list.split(',').map(str::trim) {
                    let level: ShareLevel = item.parse().map_err(|e| {
                        format!("{e}; or job, class, job-fair, user-fair, size-fair, user-then-job")
                    })?;
                    if levels.contains(&level) {
                        return Err(format!("level `{level}` is given twice"));
                    }
                    levels.push(level);
                }
                if levels == [Job] {
                    (KeyBy::Job, false)
                } else {
                    (KeyBy::Tree(levels), false)
                }
            }
        })
    }
}

/// The queues: flat WF²Q+ over jobs or classes, or a fair-share tree.
#[derive(Debug)]
enum Engine {
    Flat {
        queues: IdMap<u64, VecDeque<Request>>,
        /// Emptied queues kept for reuse, so that a queue that empties and refills does not
        /// allocate.
        spare: Vec<VecDeque<Request>>,
        sched: Wf2q<u64>,
        len: usize,
    },
    Tree(ShareTree),
}

/// Weighted fair queuing by bytes.
#[derive(Debug)]
pub struct Wfq {
    key_by: KeyBy,
    by_nodes: bool,
    default_weight: f64,
    weights: IdMap<u64, f64>,
    overrides: IdMap<u64, f64>,
    shares: IdMap<(ShareLevel, u64), f64>,
    jobs: IdMap<u64, JobInfo>,
    engine: Engine,
}

impl Wfq {
    /// A `wfq` keyed by `key_by`, with per-queue `weights` and a `default_weight` for the rest.
    ///
    /// # Panics
    /// If a weight is not finite and positive (the registry validates them first).
    pub fn new(key_by: KeyBy, default_weight: f64, weights: &[(u64, f64)]) -> Wfq {
        assert!(default_weight.is_finite() && default_weight > 0.0);
        assert!(weights.iter().all(|&(_, w)| w.is_finite() && w > 0.0));
        let engine = match &key_by {
            KeyBy::Tree(levels) => Engine::Tree(ShareTree::new(levels.len())),
            _ => Engine::Flat {
                queues: IdMap::default(),
                spare: Vec::new(),
                sched: Wf2q::new(),
                len: 0,
            },
        };
        Wfq {
            key_by,
            by_nodes: false,
            default_weight,
            weights: weights.iter().copied().collect(),
            overrides: IdMap::default(),
            shares: IdMap::default(),
            jobs: IdMap::default(),
            engine,
        }
    }

    /// Weighs jobs by their node count ([`Policy::set_job_info`]) instead of their priority.
    pub fn weigh_jobs_by_nodes(mut self, by_nodes: bool) -> Wfq {
        self.by_nodes = by_nodes;
        if by_nodes && self.key_by == KeyBy::Job {
            // Node counts are the tree's: a one-level tree of jobs.
            self.key_by = KeyBy::Tree(vec![ShareLevel::Job]);
            self.engine = Engine::Tree(ShareTree::new(1));
        }
        self
    }

    pub(crate) fn from_tunables(t: &mut Tunables) -> Result<Wfq, PolicyError> {
        let key = t.raw_str("key");
        let (key_by, size_fair) = KeyBy::parse(&key).map_err(|e| t.bad_value("key", &key, e))?;
        let by_nodes = match t.choice("job_weight", &["auto", "priority", "nodes"])? {
            "nodes" => true,
            "priority" => false,
            _ => size_fair,
        };
        if by_nodes && key_by == KeyBy::Class {
            return Err(t.bad_value("job_weight", "nodes", "priority with key=class"));
        }
        let default_weight = t.positive_f64("default_weight")?;
        let weights = t.family_positive_f64("weight.")?;
        Ok(Wfq::new(key_by, default_weight, &weights).weigh_jobs_by_nodes(by_nodes))
    }

    fn key(&self, req: &Request) -> u64 {
        match self.key_by {
            KeyBy::Class => req.class.map_or(0, |c| c.0),
            _ => req.job.0,
        }
    }

    fn weight(&self, key: u64, hint: Option<Priority>) -> f64 {
        if self.by_nodes {
            return self
                .jobs
                .get(&key)
                .and_then(|i| i.nodes)
                .map_or(1.0, f64::from);
        }
        let job_share = || match self.key_by {
            KeyBy::Class => None,
            _ => self.shares.get(&(ShareLevel::Job, key)),
        };
        self.overrides
            .get(&key)
            .or_else(job_share)
            .or_else(|| self.weights.get(&key))
            .copied()
            .or(hint.map(Priority::get))
            .unwrap_or(self.default_weight)
    }

    /// The key and weight of `req`'s node at `level`.
    fn node(&self, level: ShareLevel, req: &Request) -> (u64, f64) {
        let share = |key: u64| self.shares.get(&(level, key)).copied().unwrap_or(1.0);
        match level {
            ShareLevel::Account => {
                let key = self
                    .jobs
                    .get(&req.job.0)
                    .and_then(|i| i.account)
                    .unwrap_or(NO_ACCOUNT);
                (key, share(key))
            }
            ShareLevel::User => {
                let key = req.user.map_or(NO_USER, u64::from);
                (key, share(key))
            }
            ShareLevel::Set => {
                // The job's priority in force: the control plane's, else its request's hint.
                match self
                    .overrides
                    .get(&req.job.0)
                    .copied()
                    .or(req.priority.map(Priority::get))
                {
                    Some(p) => {
                        let key = p.to_bits();
                        (key, self.shares.get(&(level, key)).copied().unwrap_or(p))
                    }
                    None => (NO_SET, self.default_weight),
                }
            }
            ShareLevel::Job => (req.job.0, self.weight(req.job.0, req.priority)),
        }
    }
}

impl Policy for Wfq {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enqueue(&mut self, req: Request, _now: Nanos) {
        if let KeyBy::Tree(levels) = &self.key_by {
            let mut path = [0u64; LEVELS];
            let mut weights = [1.0f64; LEVELS];
            for (i, &level) in levels.iter().enumerate() {
                (path[i], weights[i]) = self.node(level, &req);
            }
            let n = levels.len();
            if let Engine::Tree(tree) = &mut self.engine {
                tree.enqueue(req, &path[..n], &weights[..n]);
            }
            return;
        }
        let key = self.key(&req);
        let w = self.weight(key, req.priority);
        let Engine::Flat {
            queues,
            spare,
            sched,
            len,
        } = &mut self.engine
        else {
            unreachable!("a flat key has a flat engine")
        };
        let q = queues
            .entry(key)
            .or_insert_with(|| spare.pop().unwrap_or_default());
        q.push_back(req);
        *len += 1;
        if q.len() == 1 {
            sched.arrive(key, w, req.len);
        }
    }

    fn dispatch(&mut self, _now: Nanos) -> Dispatch {
        let req = match &mut self.engine {
            Engine::Tree(tree) => tree.dispatch(),
            Engine::Flat {
                queues,
                spare,
                sched,
                len,
            } => {
                let Some(key) = sched.select() else {
                    return Dispatch::Idle;
                };
                let q = queues.get_mut(&key).expect("a backlogged flow has a queue");
                let req = q.pop_front().expect("a backlogged queue is not empty");
                let next = q.front().map(|r| r.len);
                if next.is_none() {
                    let q = queues.remove(&key).expect("queue");
                    if spare.len() < SPARE_QUEUES {
                        spare.push(q);
                    }
                }
                sched.served(key, req.len, next);
                *len -= 1;
                Some(req)
            }
        };
        match req {
            Some(req) => Dispatch::Ready(Batch::single(req)),
            None => Dispatch::Idle,
        }
    }

    fn queued(&self) -> usize {
        match &self.engine {
            Engine::Tree(tree) => tree.len(),
            Engine::Flat { len, .. } => *len,
        }
    }

    fn drain(&mut self) -> Vec<Request> {
        match &mut self.engine {
            Engine::Tree(tree) => tree.drain(),
            Engine::Flat {
                queues, sched, len, ..
            } => {
                let mut keys: Vec<u64> = queues.keys().copied().collect();
                keys.sort_unstable();
                let out: Vec<Request> = keys
                    .into_iter()
                    .flat_map(|k| queues.remove(&k).unwrap_or_default())
                    .collect();
                sched.clear();
                *len = 0;
                out
            }
        }
    }

    fn queue_weight(&self, req: &Request) -> Option<QueueWeight> {
        // A tree's share is not one weight among flat queues: reports see each job alone.
        let queue = match self.key_by {
            KeyBy::Job => QueueId::Job(req.job),
            KeyBy::Class => QueueId::Class(ClassId(self.key(req))),
            KeyBy::Tree(_) => return None,
        };
        // A backlogged queue keeps the weight it opened its backlog with; otherwise this request
        // would open one.
        Some(QueueWeight {
            queue,
            weight: self.weight(self.key(req), req.priority),
        })
    }

    fn set_priority(&mut self, job: JobId, priority: Option<Priority>, _now: Nanos) -> bool {
        if self.key_by == KeyBy::Class {
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

    fn charge_elsewhere(&mut self, req: &Request, bytes: u64) {
        match (&self.key_by, &mut self.engine) {
            (KeyBy::Tree(levels), Engine::Tree(_)) => {
                let mut path = [0u64; LEVELS];
                let mut weights = [1.0f64; LEVELS];
                for (i, &level) in levels.iter().enumerate() {
                    (path[i], weights[i]) = self.node(level, req);
                }
                let n = levels.len();
                if let Engine::Tree(tree) = &mut self.engine {
                    tree.charge(&path[..n], &weights[..n], bytes);
                }
            }
            (KeyBy::Job, Engine::Flat { .. }) => {
                let w = self.weight(req.job.0, req.priority);
                if let Engine::Flat { sched, .. } = &mut self.engine {
                    sched.charge(req.job.0, bytes, w);
                }
            }
            _ => {}
        }
    }

    fn set_job_info(&mut self, job: JobId, info: JobInfo, _now: Nanos) -> bool {
        crate::fairshare::keep_job_info(&mut self.jobs, job.0, info);
        matches!(self.key_by, KeyBy::Tree(_))
    }

    fn set_share(&mut self, level: ShareLevel, key: u64, weight: Option<f64>) -> bool {
        crate::fairshare::keep_share(&mut self.shares, level, key, weight);
        self.share_levels().contains(&level)
    }

    fn share_levels(&self) -> Vec<ShareLevel> {
        match &self.key_by {
            KeyBy::Tree(levels) => levels.clone(),
            KeyBy::Job => vec![ShareLevel::Job],
            KeyBy::Class => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fairshare::account_key;
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

    fn tree(key: &str) -> Wfq {
        let pairs = vec![("key".to_string(), key.to_string())];
        let mut t = Tunables::new(NAME, TUNABLES, &pairs).unwrap();
        let p = Wfq::from_tunables(&mut t).unwrap();
        t.finish().unwrap();
        p
    }

    fn bytes_by_job(p: &mut Wfq, n: usize) -> IdMap<u64, u64> {
        let mut got = IdMap::default();
        for _ in 0..n {
            match p.dispatch(Nanos::ZERO) {
                Dispatch::Ready(b) => *got.entry(b.head().job.0).or_default() += b.head().len,
                other => panic!("{other:?}"),
            }
        }
        got
    }

    #[test]
    fn accounts_users_and_jobs_share_by_level() {
        // Accounts physics (weight 3) and bio (1); physics: user 1000 with jobs 1 and 2, user
        // 1001 with job 3; bio: user 1002 with job 4. Expected: 3/16, 3/16, 3/8, 1/4.
        let mut p = tree("account,user,job");
        let physics = account_key("physics");
        assert!(p.set_share(ShareLevel::Account, physics, Some(3.0)));
        for (job, account) in [(1, "physics"), (2, "physics"), (3, "physics"), (4, "bio")] {
            let info = JobInfo {
                account: Some(account_key(account)),
                nodes: None,
            };
            assert!(p.set_job_info(JobId(job), info, Nanos::ZERO));
        }
        let users = [(1, 1000), (2, 1000), (3, 1001), (4, 1002)];
        for i in 0..4000u64 {
            let (job, uid) = users[(i % 4) as usize];
            let mut r = request(i, job, Op::Write, 0, 0, 65536);
            r.user = Some(uid);
            p.enqueue(r, Nanos::ZERO);
        }
        let got = bytes_by_job(&mut p, 1600);
        let total: u64 = got.values().sum();
        for (job, want) in [(1, 3.0 / 16.0), (2, 3.0 / 16.0), (3, 3.0 / 8.0), (4, 0.25)] {
            let share = got[&job] as f64 / total as f64;
            assert!((share - want).abs() < 0.005, "job {job}: {share} vs {want}");
        }
        assert_eq!(p.queued(), 2400);
        assert_eq!(p.drain().len(), 2400);
        assert_eq!(p.dispatch(Nanos::ZERO), Dispatch::Idle);
    }

    #[test]
    fn presets_are_themisio_policies() {
        // user-fair: two users, one with three jobs, get half each.
        let mut p = tree("user-fair");
        for i in 0..400u64 {
            let job = i % 4;
            let mut r = request(i, job, Op::Read, 0, 0, 10);
            r.user = Some(if job == 0 { 1 } else { 2 });
            p.enqueue(r, Nanos::ZERO);
        }
        let got = bytes_by_job(&mut p, 200);
        assert_eq!(got[&0], got[&1] + got[&2] + got[&3], "{got:?}");
        // size-fair: a job on 3 nodes gets three times a 1-node job's bytes.
        let mut p = tree("size-fair");
        assert!(p.set_job_info(
            JobId(7),
            JobInfo {
                account: None,
                nodes: Some(3),
            },
            Nanos::ZERO,
        ));
        for i in 0..400u64 {
            p.enqueue(request(i, 7 + (i % 2), Op::Read, 0, 0, 10), Nanos::ZERO);
        }
        let got = bytes_by_job(&mut p, 200);
        assert_eq!((got[&7], got[&8]), (1500, 500), "{got:?}");
        // user-then-job: a user's jobs share the user's half.
        let mut p = tree("user-then-job");
        for i in 0..300u64 {
            let job = i % 3;
            let mut r = request(i, job, Op::Read, 0, 0, 10);
            r.user = Some(if job == 0 { 1 } else { 2 });
            p.enqueue(r, Nanos::ZERO);
        }
        let got = bytes_by_job(&mut p, 100);
        assert_eq!((got[&0], got[&1], got[&2]), (500, 250, 250), "{got:?}");
        // job-fair is flat WFQ by job.
        assert_eq!(tree("job-fair").key_by, KeyBy::Job);
    }

    #[test]
    fn a_set_level_shares_by_priority_inside_each_account() {
        // Two accounts 1:1. Account a: jobs 1, 2 in set 0.1 and job 3 in set 0.01; account b:
        // job 4 without priority. Sets of a: 0.1 : 0.01 = 10 : 1 of a's half.
        // Every level at once is a tree too (four levels).
        let mut all = tree("account,user,set,job");
        let mut r = request(0, 1, Op::Write, 0, 0, 100);
        r.user = Some(7);
        r.priority = Priority::new(0.1);
        all.enqueue(r, Nanos::ZERO);
        all.charge_elsewhere(&r, 4096);
        assert_eq!(bytes_by_job(&mut all, 1), [(1, 100)].into_iter().collect());
        let mut p = tree("account,set,job");
        for (job, account) in [(1, "a"), (2, "a"), (3, "a"), (4, "b")] {
            let info = JobInfo {
                account: Some(account_key(account)),
                nodes: None,
            };
            p.set_job_info(JobId(job), info, Nanos::ZERO);
        }
        assert!(p.set_priority(JobId(3), Priority::new(0.01), Nanos::ZERO));
        for i in 0..22_000u64 {
            let job = 1 + i % 4;
            let mut r = request(i, job, Op::Write, 0, 0, 100);
            if job <= 2 {
                r.priority = Priority::new(0.1);
            }
            p.enqueue(r, Nanos::ZERO);
        }
        let got = bytes_by_job(&mut p, 4_400);
        let total: u64 = got.values().sum();
        let share = |j: u64| got.get(&j).copied().unwrap_or(0) as f64 / total as f64;
        for (job, want) in [
            (1, 0.5 * 10.0 / 11.0 / 2.0),
            (2, 0.5 * 10.0 / 11.0 / 2.0),
            (3, 0.5 / 11.0),
            (4, 0.5),
        ] {
            assert!(
                (share(job) - want).abs() < 0.005,
                "job {job}: {} vs {want}",
                share(job)
            );
        }
        assert_eq!(
            p.share_levels(),
            [ShareLevel::Account, ShareLevel::Set, ShareLevel::Job]
        );
    }

    #[test]
    fn bad_keys_say_what_is_accepted() {
        for (key, needle) in [
            ("account,account", "given twice"),
            ("project,job", "unknown level `project`"),
            ("", "unknown level"),
        ] {
            let pairs = vec![("key".to_string(), key.to_string())];
            let mut t = Tunables::new(NAME, TUNABLES, &pairs).unwrap();
            let e = Wfq::from_tunables(&mut t).unwrap_err().to_string();
            assert!(e.contains(needle), "{key}: {e}");
        }
        let pairs = vec![
            ("key".to_string(), "class".to_string()),
            ("job_weight".to_string(), "nodes".to_string()),
        ];
        let mut t = Tunables::new(NAME, TUNABLES, &pairs).unwrap();
        assert!(Wfq::from_tunables(&mut t).is_err());
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
