//! A fair-share tree: hierarchical WF²Q+ over levels an admin chooses from `account`, `user` and
//! `job` (Slurm's fair-share tree, ThemisIO's composite policies), used by `wfq` with
//! `key=account,user,job` and its presets.
//!
//! Each level shares its parent's bandwidth among its backlogged children by weight: with
//! `key=account,user,job`, the accounts share the device, each account's users share what the
//! account gets, each user's jobs share what the user gets. Every internal node runs its own
//! [`Wf2q`] over its children, so each level keeps WF²Q+'s bound (every backlogged child within
//! one request of its fluid share), and a node that empties leaves its parent's scheduler at
//! once: its share goes to its siblings, and up the tree when it was the last one (no credit is
//! banked by an idle node, as DESIGN.md's credit rule asks of every flow).
//!
//! The head of an internal node (what its parent's tags are charged for next) is the head of
//! the child it would serve next, as in Bennett and Zhang's H-WF²Q+.
//!
//! # What it is not
//! The tree does not know weights: its caller gives each level's weight with the request that
//! makes a node backlogged. A weight changed later applies from the node's next backlog period,
//! as in flat `wfq`.
//!
//! # Cost
//! Per request, `O(depth · log n)` scheduler calls plus one head lookup per level: about three
//! times flat WF²Q+'s work at three levels (`cargo bench -p iosets-policy --bench policies --
//! fairshare`). Memory: one node per backlogged account, user and job, plus at most
//! [`IDLE_NODES_KEPT`] emptied ones kept for reuse (a job sending one request at a time empties
//! its nodes after each: keeping them spares an allocation of each node's queue and scheduler
//! per request). Past that bound every emptied node is freed at once; only its debt stays in its
//! parent's scheduler (bounded by WF²Q+ itself). An emptied node kept or freed behaves the same:
//! its own scheduler has nothing backlogged, so it holds no debt.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

use iosets_types::hash::IdMap;
use slab::Slab;

use crate::wf2q::Wf2q;
use crate::Request;

/// A level of the fair-share tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ShareLevel {
    /// The Slurm account a job runs under (told by the control plane; a job with none is in
    /// account [`NO_ACCOUNT`]).
    Account,
    /// The caller's user id (a request without credentials is user [`NO_USER`]).
    User,
    /// IO-SETS' set: the jobs of one priority (Set-10 puts a job of I/O period ~10^i s in the
    /// set of priority 10^-i). A set weighs its priority, as IO-SETS' sets share bandwidth; the
    /// jobs without a priority are one set ([`NO_SET`]) of `default_weight`. The key is the
    /// priority's bits.
    Set,
    /// The job.
    Job,
}

/// The set key of the jobs without a priority.
pub const NO_SET: u64 = 0;

/// The account key of a job the control plane told no account of.
pub const NO_ACCOUNT: u64 = 0;
/// The user key of a request that carries no credentials.
pub const NO_USER: u64 = u64::MAX;

/// Emptied nodes kept for reuse before they are all freed.
pub const IDLE_NODES_KEPT: usize = 1024;

impl ShareLevel {
    /// Every level, in the order a tree usually nests them.
    pub const ALL: [ShareLevel; 4] = [
        ShareLevel::Account,
        ShareLevel::User,
        ShareLevel::Set,
        ShareLevel::Job,
    ];

    /// Its name in `key=` and in `iosets ctl share`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShareLevel::Account => "account",
            ShareLevel::User => "user",
            ShareLevel::Set => "set",
            ShareLevel::Job => "job",
        }
    }
}

impl fmt::Display for ShareLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ShareLevel {
    type Err = String;

    fn from_str(s: &str) -> Result<ShareLevel, String> {
        ShareLevel::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| format!("unknown level `{s}` (levels: account, user, set, job)"))
    }
}

/// What the control plane tells of a job beyond its priority (Slurm's view of it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct JobInfo {
    /// Its account's key (the account name hashed, `fnv1a64`), if known.
    pub account: Option<u64>,
    /// How many nodes it runs on, if known (`size-fair` weighs jobs by it).
    pub nodes: Option<u32>,
}

/// The key of account `name` in the tree and in share weights.
pub fn account_key(name: &str) -> u64 {
    match iosets_types::hash::fnv1a64(name.as_bytes()) {
        // The one hash that would collide with "no account" moves aside.
        NO_ACCOUNT => 1,
        k => k,
    }
}

/// Keeps `info` as job `job`'s record in `jobs` (the default record removes it). At most
/// [`crate::wfq::MAX_JOB_INFO`] are kept: the runtime refuses a new job past it; a caller that
/// does not bound what it tells has an arbitrary record dropped instead.
pub(crate) fn keep_job_info(jobs: &mut IdMap<u64, JobInfo>, job: u64, info: JobInfo) {
    if info == JobInfo::default() {
        jobs.remove(&job);
        return;
    }
    if jobs.len() >= crate::wfq::MAX_JOB_INFO && !jobs.contains_key(&job) {
        if let Some(&k) = jobs.keys().next() {
            jobs.remove(&k);
        }
    }
    jobs.insert(job, info);
}

/// Sets (`Some`) or clears (`None`) the share weight of node `key` at `level` in `shares`.
///
/// # Panics
/// If the weight is not finite and positive (the runtime checks weights first).
pub(crate) fn keep_share(
    shares: &mut IdMap<(ShareLevel, u64), f64>,
    level: ShareLevel,
    key: u64,
    weight: Option<f64>,
) {
    match weight {
        Some(w) => {
            assert!(w.is_finite() && w > 0.0, "share weight {w}");
            shares.insert((level, key), w);
        }
        None => {
            shares.remove(&(level, key));
        }
    }
}

/// A node: the root (depth 0), an inner node (a scheduler over its children) or a leaf (a queue).
#[derive(Debug)]
struct Node {
    parent: usize,
    key: u64,
    depth: usize,
    children: IdMap<u64, usize>,
    sched: Wf2q<u64>,
    queue: VecDeque<Request>,
}

impl Node {
    fn new(parent: usize, key: u64, depth: usize) -> Node {
        Node {
            parent,
            key,
            depth,
            children: IdMap::default(),
            sched: Wf2q::new(),
            queue: VecDeque::new(),
        }
    }
}

/// The tree of queues. The caller gives each request's path (one key per level) and the
/// weights of its nodes.
#[derive(Debug)]
pub struct ShareTree {
    depth: usize,
    nodes: Slab<Node>,
    root: usize,
    len: usize,
    /// Nodes (the root apart) with nothing backlogged below them.
    idle: usize,
}

impl ShareTree {
    /// A tree of `depth` levels (at least one).
    ///
    /// # Panics
    /// If `depth` is zero.
    pub fn new(depth: usize) -> ShareTree {
        assert!(depth > 0, "a fair-share tree has at least one level");
        let mut nodes = Slab::new();
        let root = nodes.insert(Node::new(usize::MAX, 0, 0));
        ShareTree {
            depth,
            nodes,
            root,
            len: 0,
            idle: 0,
        }
    }

    /// Requests queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Nodes held, the root included (for tests of the memory bound).
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Queues `req` at the leaf `path` (one key per level, top first); `weights[i]` is the
    /// weight of the node at level `i` of the path, used if that node becomes backlogged now.
    ///
    /// # Panics
    /// If `path` or `weights` is not one entry per level, or a weight is not positive.
    pub fn enqueue(&mut self, req: Request, path: &[u64], weights: &[f64]) {
        assert_eq!(path.len(), self.depth);
        assert_eq!(weights.len(), self.depth);
        let mut n = self.root;
        let mut created = 0;
        for (d, &key) in path.iter().enumerate() {
            n = match self.nodes[n].children.get(&key) {
                Some(&c) => c,
                None => {
                    let c = self.nodes.insert(Node::new(n, key, d + 1));
                    self.nodes[n].children.insert(key, c);
                    created += 1;
                    c
                }
            };
        }
        let len = req.len;
        self.nodes[n].queue.push_back(req);
        self.len += 1;
        if self.nodes[n].queue.len() > 1 {
            return;
        }
        // The leaf became backlogged: so does every ancestor that was not. The new nodes are on
        // that path; the others were idle.
        let mut child = n;
        let mut woken = 0;
        loop {
            let parent = self.nodes[child].parent;
            let (key, depth) = (self.nodes[child].key, self.nodes[child].depth);
            let was_idle = self.nodes[parent].sched.backlogged() == 0;
            self.nodes[parent]
                .sched
                .arrive(key, weights[depth - 1], len);
            woken += 1;
            if !was_idle || parent == self.root {
                break;
            }
            child = parent;
        }
        self.idle -= woken - created;
    }

    /// The leaf `path` received `len` bytes of service elsewhere: every node on the path is
    /// charged them in its parent's scheduler ([`Wf2q::charge`]), as far down as nodes exist
    /// here (below, nothing is queued to be fair to).
    pub fn charge(&mut self, path: &[u64], weights: &[f64], len: u64) {
        let mut n = self.root;
        for (d, &key) in path.iter().enumerate() {
            self.nodes[n].sched.charge(key, len, weights[d]);
            match self.nodes[n].children.get(&key) {
                Some(&c) => n = c,
                None => return,
            }
        }
    }

    /// Takes the next request by the tree's shares, with its path's leaf kept until it empties.
    pub fn dispatch(&mut self) -> Option<Request> {
        if self.nodes[self.root].sched.backlogged() == 0 {
            return None;
        }
        let n = self.next_leaf(self.root);
        let req = self.nodes[n]
            .queue
            .pop_front()
            .expect("a backlogged leaf is not empty");
        self.len -= 1;
        let mut child = n;
        let mut next = self.nodes[n].queue.front().map(|r| r.len);
        loop {
            let parent = self.nodes[child].parent;
            let key = self.nodes[child].key;
            self.nodes[parent].sched.served(key, req.len, next);
            if next.is_none() {
                // Emptied: kept for reuse; its debt is in the parent's scheduler.
                self.idle += 1;
            }
            if parent == self.root {
                break;
            }
            next = (self.nodes[parent].sched.backlogged() > 0).then(|| self.head_len(parent));
            child = parent;
        }
        if self.idle > IDLE_NODES_KEPT {
            self.free_idle();
        }
        Some(req)
    }

    /// Frees every idle node (an idle node's children are idle too).
    fn free_idle(&mut self) {
        let idle: Vec<usize> = self
            .nodes
            .iter()
            .filter(|&(i, node)| {
                i != self.root
                    && if node.depth == self.depth {
                        node.queue.is_empty()
                    } else {
                        node.sched.backlogged() == 0
                    }
            })
            .map(|(i, _)| i)
            .collect();
        for i in idle {
            let node = self.nodes.remove(i);
            if let Some(parent) = self.nodes.get_mut(node.parent) {
                parent.children.remove(&node.key);
            }
        }
        self.idle = 0;
    }

    /// The leaf whose request node `n` (backlogged) would serve next.
    fn next_leaf(&mut self, mut n: usize) -> usize {
        while self.nodes[n].depth < self.depth {
            let key = self.nodes[n]
                .sched
                .select()
                .expect("a backlogged node has a backlogged child");
            n = self.nodes[n].children[&key];
        }
        n
    }

    /// The length of the request `n` would serve next (`n` backlogged).
    fn head_len(&mut self, n: usize) -> u64 {
        let leaf = self.next_leaf(n);
        self.nodes[leaf].queue.front().map_or(0, |r| r.len)
    }

    /// Every queued request, leaf by leaf in key order (a path's keys, top first), arrival order
    /// inside a leaf; the tree is left empty.
    pub fn drain(&mut self) -> Vec<Request> {
        let mut leaves: Vec<(Vec<u64>, usize)> = Vec::new();
        for (i, node) in &self.nodes {
            if node.depth == self.depth {
                let mut path = Vec::with_capacity(self.depth);
                let mut n = i;
                while n != self.root {
                    path.push(self.nodes[n].key);
                    n = self.nodes[n].parent;
                }
                path.reverse();
                leaves.push((path, i));
            }
        }
        leaves.sort_unstable();
        let mut out = Vec::with_capacity(self.len);
        for (_, i) in leaves {
            out.extend(self.nodes[i].queue.drain(..));
        }
        *self = ShareTree::new(self.depth);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::request;
    use crate::Op;

    /// Bytes served per leaf key over `n` dispatches.
    fn serve(t: &mut ShareTree, n: usize) -> IdMap<u64, u64> {
        let mut out = IdMap::default();
        for _ in 0..n {
            let r = t.dispatch().expect("backlogged");
            *out.entry(r.job.0).or_default() += r.len;
        }
        out
    }

    #[test]
    fn each_level_shares_its_parents_bandwidth() {
        // Two accounts 3:1; account A has two users 1:1, user 1 of A has two jobs, user 2
        // one; account B one user with three jobs.
        let mut t = ShareTree::new(3);
        let jobs: [(u64, u64, u64, f64); 6] = [
            (1, 1, 11, 3.0),
            (1, 1, 12, 3.0),
            (1, 2, 13, 3.0),
            (2, 3, 21, 1.0),
            (2, 3, 22, 1.0),
            (2, 3, 23, 1.0),
        ];
        let mut id = 0;
        for _ in 0..2000 {
            for &(a, u, j, w) in &jobs {
                id += 1;
                t.enqueue(
                    request(id, j, Op::Read, 0, 0, 4096),
                    &[a, u, j],
                    &[w, 1.0, 1.0],
                );
            }
        }
        let got = serve(&mut t, 4800);
        let total: u64 = got.values().sum();
        let share = |j: u64| got.get(&j).copied().unwrap_or(0) as f64 / total as f64;
        // A: 3/4, split 1/2 by user: user 1's two jobs 3/16 each, user 2's job 3/8; B: 1/12 each.
        for (j, want) in [
            (11, 3.0 / 16.0),
            (12, 3.0 / 16.0),
            (13, 3.0 / 8.0),
            (21, 1.0 / 12.0),
            (22, 1.0 / 12.0),
            (23, 1.0 / 12.0),
        ] {
            assert!(
                (share(j) - want).abs() < 0.002,
                "job {j}: {} vs {want}",
                share(j)
            );
        }
    }

    #[test]
    fn an_idle_node_gives_its_share_to_its_siblings_first() {
        // Account 1: users 1 and 2; account 2: user 3. User 2 has nothing queued: user 1 takes
        // all of account 1's half, and account 2 keeps its half.
        let mut t = ShareTree::new(2);
        for i in 0..1000 {
            t.enqueue(request(2 * i, 1, Op::Read, 0, 0, 100), &[1, 1], &[1.0, 1.0]);
            t.enqueue(
                request(2 * i + 1, 3, Op::Read, 0, 0, 100),
                &[2, 3],
                &[1.0, 1.0],
            );
        }
        let got = serve(&mut t, 1000);
        assert_eq!(got[&1], got[&3], "{got:?}");
    }

    #[test]
    fn request_sizes_are_charged_in_bytes_at_every_level() {
        // Two users 1:1, one sending 1 MiB requests, the other 4 KiB: equal bytes.
        let mut t = ShareTree::new(1);
        for i in 0..300 {
            t.enqueue(request(i, 1, Op::Write, 0, 0, 1 << 20), &[1], &[1.0]);
        }
        for i in 0..80_000 {
            t.enqueue(request(1000 + i, 2, Op::Write, 0, 0, 4096), &[2], &[1.0]);
        }
        let mut got: IdMap<u64, u64> = IdMap::default();
        while got.get(&1).copied().unwrap_or(0) < 200 << 20 {
            let r = t.dispatch().unwrap();
            *got.entry(r.job.0).or_default() += r.len;
        }
        let ratio = got[&2] as f64 / got[&1] as f64;
        assert!((ratio - 1.0).abs() < 0.01, "{got:?}");
    }

    #[test]
    fn emptied_nodes_are_bounded_and_drain_returns_everything() {
        let mut t = ShareTree::new(3);
        for i in 0..30 {
            t.enqueue(
                request(i, i % 5, Op::Read, 0, 0, 10),
                &[i % 2, i % 3, i % 5],
                &[1.0; 3],
            );
        }
        assert_eq!(t.len(), 30);
        for _ in 0..30 {
            t.dispatch().unwrap();
        }
        assert!(t.dispatch().is_none());
        assert_eq!(t.idle, t.nodes() - 1, "every node but the root is idle");
        // 10,000 jobs one request at a time: the idle nodes kept stay bounded, and the count
        // of idle ones stays exact through reuse and freeing.
        for i in 0..10_000u64 {
            let path = [i % 7, i % 13, i];
            t.enqueue(request(i, i, Op::Read, 0, 0, 10), &path, &[1.0; 3]);
            if i % 3 == 0 {
                let again = [i % 7, 1, i % 50];
                t.enqueue(request(i, i % 50, Op::Read, 0, 0, 10), &again, &[1.0; 3]);
                t.dispatch().unwrap();
            }
            t.dispatch().unwrap();
            assert!(t.nodes() <= 1 + IDLE_NODES_KEPT + 3, "{} nodes", t.nodes());
        }
        assert!(t.is_empty());
        assert_eq!(t.idle, t.nodes() - 1);
        for i in 0..12 {
            t.enqueue(
                request(i, i % 4, Op::Read, 0, 0, 10),
                &[i % 2, 0, i % 4],
                &[1.0; 3],
            );
        }
        t.dispatch().unwrap();
        let rest = t.drain();
        assert_eq!(rest.len(), 11);
        assert!(t.is_empty() && t.dispatch().is_none() && t.nodes() == 1);
    }

    #[test]
    fn level_names_parse_and_print() {
        for l in ShareLevel::ALL {
            assert_eq!(l.as_str().parse::<ShareLevel>(), Ok(l));
        }
        assert!("project"
            .parse::<ShareLevel>()
            .unwrap_err()
            .contains("levels"));
        assert_ne!(account_key("physics"), account_key("chemistry"));
        assert_ne!(account_key(""), NO_ACCOUNT);
    }
}
