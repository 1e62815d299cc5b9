//! The fair-share tree above IO-SETS' sets (`key=account,set`, `key=user,set`,
//! `key=account,user,set`; see the [module docs](super)).
//!
//! With `key=set` (the default) the sets share the device by priority in one WF²Q+, as the paper
//! says. With group levels above them, every group (an account, or a user of an account) has
//! sets of its own, and the groups share the device by their share weights: the accounts share
//! the device, each account's users share what their account gets, and inside a group its sets
//! (and its metadata class) share what the group gets by priority. Exclusivity is per set, so
//! per group: one job at a time of an account's set of priority 0.1; a job of another account in
//! the same class of period runs beside it, each within its account's share.
//!
//! The tree is hierarchical WF²Q+ as in [`crate::fairshare`], over flows that are sets rather
//! than queues: the caller says when a set becomes dispatchable ([`SetSched::arrive`]), what it
//! served ([`SetSched::served`]) and when it stops being dispatchable ([`SetSched::leave`]). An
//! inner node's head is the head of the set it would serve next. A group that empties leaves its
//! parent at once: its share goes to its siblings (no credit banked).
//!
//! Memory: one node per group with a dispatchable set, plus at most [`IDLE_NODES_KEPT`] emptied
//! ones kept for reuse; past that every emptied node is freed (its debt stays in its parent's
//! scheduler, bounded by WF²Q+ itself).

use iosets_types::hash::IdMap;
use slab::Slab;

use super::SetKey;
use crate::fairshare::IDLE_NODES_KEPT;
use crate::wf2q::Wf2q;

/// The most group levels above the sets (`account` and `user`).
pub(super) const GROUP_LEVELS: usize = 2;

/// A group of jobs: its key at each group level, top first (unused levels are 0). Under
/// `key=set` every job is in the one group `Group::default()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Group(pub(super) [u64; GROUP_LEVELS]);

impl std::hash::Hash for Group {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Word by word: an array hashes as bytes, which the id hasher takes one at a time.
        for &k in &self.0 {
            state.write_u64(k);
        }
    }
}

/// A group's id in set keys: set keys stay two words, as under `key=set` (a group's path would
/// double them and cost the default policy ~20 ns a request). Id 0 is the path of zeros, the one
/// group of every job under `key=set`.
pub(super) type GroupId = u32;

/// The groups that have sets or a metadata class, by id. An id lives while something holds it
/// (each set and metadata class of the group holds it once) and is reused after.
#[derive(Debug)]
pub(super) struct Groups {
    paths: Vec<Group>,
    refs: Vec<u32>,
    ids: IdMap<Group, GroupId>,
    free: Vec<GroupId>,
}

impl Default for Groups {
    fn default() -> Groups {
        let mut ids = IdMap::default();
        ids.insert(Group::default(), 0);
        // Id 0 is held for good: under `key=set` nothing is ever looked up or freed.
        Groups {
            paths: vec![Group::default()],
            refs: vec![1],
            ids,
            free: Vec::new(),
        }
    }
}

impl Groups {
    /// The id of group `g`, if it has one.
    pub(super) fn lookup(&self, g: Group) -> Option<GroupId> {
        if g == Group::default() {
            return Some(0);
        }
        self.ids.get(&g).copied()
    }

    /// The id of group `g`, given one if need be; the caller holds it ([`Groups::hold`]) before
    /// anything else is interned.
    pub(super) fn intern(&mut self, g: Group) -> GroupId {
        if let Some(id) = self.lookup(g) {
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.paths[id as usize] = g;
                id
            }
            None => {
                self.paths.push(g);
                self.refs.push(0);
                (self.paths.len() - 1) as GroupId
            }
        };
        self.ids.insert(g, id);
        id
    }

    /// One more set or metadata class of group `id`.
    pub(super) fn hold(&mut self, id: GroupId) {
        self.refs[id as usize] += 1;
    }

    /// One set or metadata class of group `id` fewer; the id is freed with the last.
    pub(super) fn release(&mut self, id: GroupId) {
        let r = &mut self.refs[id as usize];
        *r -= 1;
        if *r == 0 {
            debug_assert_ne!(id, 0, "group 0 is held for good");
            self.ids.remove(&self.paths[id as usize]);
            self.free.push(id);
        }
    }

    /// The path of group `id`.
    pub(super) fn path(&self, id: GroupId) -> Group {
        self.paths[id as usize]
    }

    /// Ids in use (for tests of the memory bound).
    #[cfg(test)]
    pub(super) fn live(&self) -> usize {
        self.ids.len()
    }
}

/// A child of a node: a group below it, or a set (flows of the nodes of the last group level).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Child {
    Node(u64),
    Set(SetKey),
}

#[derive(Debug)]
struct Node {
    parent: usize,
    key: u64,
    depth: usize,
    children: IdMap<u64, usize>,
    sched: Wf2q<Child>,
}

impl Node {
    fn new(parent: usize, key: u64, depth: usize) -> Node {
        Node {
            parent,
            key,
            depth,
            children: IdMap::default(),
            sched: Wf2q::new(),
        }
    }
}

/// Fair queuing across sets under a tree of groups.
#[derive(Debug)]
pub(super) struct GroupTree {
    /// Group levels above the sets, 1 ..= [`GROUP_LEVELS`].
    levels: usize,
    nodes: Slab<Node>,
    root: usize,
    /// Nodes (the root apart) with nothing dispatchable below them.
    idle: usize,
}

/// Fair queuing across sets: flat (`key=set`, one WF²Q+ over the sets) or under a tree of
/// groups.
#[derive(Debug)]
pub(super) enum SetSched {
    Flat(Wf2q<SetKey>),
    Tree(GroupTree),
}

impl SetSched {
    /// Sets under `levels` group levels (0: the sets share the device directly).
    pub(super) fn new(levels: usize) -> SetSched {
        assert!(
            levels <= GROUP_LEVELS,
            "at most {GROUP_LEVELS} group levels"
        );
        if levels == 0 {
            SetSched::Flat(Wf2q::new())
        } else {
            SetSched::Tree(GroupTree::new(levels))
        }
    }

    /// True if set `key` of group `path` is dispatchable.
    pub(super) fn is_backlogged(&self, key: SetKey, path: Group) -> bool {
        match self {
            SetSched::Flat(f) => f.is_backlogged(key),
            SetSched::Tree(t) => t.is_backlogged(key, path),
        }
    }

    /// Set `key` of group `path` becomes dispatchable with a head of `head` bytes at weight
    /// `weight`; `group_weights[i]` is the weight of its group's node at level `i`.
    pub(super) fn arrive(
        &mut self,
        key: SetKey,
        weight: f64,
        head: u64,
        path: Group,
        group_weights: &[f64],
    ) {
        match self {
            SetSched::Flat(f) => f.arrive(key, weight, head),
            SetSched::Tree(t) => t.arrive(key, weight, head, path, group_weights),
        }
    }

    /// The set to serve next.
    pub(super) fn select(&mut self) -> Option<SetKey> {
        match self {
            SetSched::Flat(f) => f.select(),
            SetSched::Tree(t) => t.select(),
        }
    }

    /// Set `key` of group `path` (dispatchable) was served `len` bytes; `next` is its new head,
    /// `None` if it is no longer dispatchable.
    pub(super) fn served(&mut self, key: SetKey, path: Group, len: u64, next: Option<u64>) {
        match self {
            SetSched::Flat(f) => f.served(key, len, next),
            SetSched::Tree(t) => t.served(key, path, len, next),
        }
    }

    /// Set `key` of group `path` (dispatchable) stops being dispatchable without being served.
    pub(super) fn leave(&mut self, key: SetKey, path: Group) {
        match self {
            SetSched::Flat(f) => f.leave(key),
            SetSched::Tree(t) => t.leave(key, path),
        }
    }

    /// Group `g`'s jobs received `len` bytes of service elsewhere (nothing under `key=set`: the
    /// sets' shares are per server, as in the paper).
    pub(super) fn charge(&mut self, g: Group, group_weights: &[f64], len: u64) {
        if let SetSched::Tree(t) = self {
            t.charge(g, group_weights, len);
        }
    }

    /// Sets and groups dispatchable at the top (0: nothing is).
    #[cfg(test)]
    pub(super) fn backlogged(&self) -> usize {
        match self {
            SetSched::Flat(f) => f.backlogged(),
            SetSched::Tree(t) => t.nodes[t.root].sched.backlogged(),
        }
    }

    /// Nodes of the tree held, the root included (for tests of the memory bound).
    #[cfg(test)]
    pub(super) fn nodes(&self) -> usize {
        match self {
            SetSched::Flat(_) => 1,
            SetSched::Tree(t) => t.nodes.len(),
        }
    }
}

impl GroupTree {
    fn new(levels: usize) -> GroupTree {
        let mut nodes = Slab::new();
        let root = nodes.insert(Node::new(usize::MAX, 0, 0));
        GroupTree {
            levels,
            nodes,
            root,
            idle: 0,
        }
    }

    /// The node of group `g`'s sets, if it exists.
    fn find(&self, g: Group) -> Option<usize> {
        let mut n = self.root;
        for &key in &g.0[..self.levels] {
            n = *self.nodes[n].children.get(&key)?;
        }
        Some(n)
    }

    /// True if set `key` is dispatchable.
    fn is_backlogged(&self, key: SetKey, path: Group) -> bool {
        self.find(path)
            .is_some_and(|n| self.nodes[n].sched.is_backlogged(Child::Set(key)))
    }

    /// Set `key` becomes dispatchable with a head of `head` bytes at weight `weight`;
    /// `group_weights[i]` is the weight of its group's node at level `i`, used by each node that
    /// becomes dispatchable with it.
    fn arrive(&mut self, key: SetKey, weight: f64, head: u64, path: Group, group_weights: &[f64]) {
        let mut n = self.root;
        for (d, &k) in path.0[..self.levels].iter().enumerate() {
            n = match self.nodes[n].children.get(&k) {
                Some(&c) => c,
                None => {
                    let c = self.nodes.insert(Node::new(n, k, d + 1));
                    self.nodes[n].children.insert(k, c);
                    // Made dispatchable below at once: never counted idle.
                    self.idle += 1;
                    c
                }
            };
        }
        let mut was_idle = self.nodes[n].sched.backlogged() == 0;
        self.nodes[n].sched.arrive(Child::Set(key), weight, head);
        while was_idle && n != self.root {
            self.idle -= 1;
            let (parent, k, depth) = (self.nodes[n].parent, self.nodes[n].key, self.nodes[n].depth);
            was_idle = self.nodes[parent].sched.backlogged() == 0;
            self.nodes[parent]
                .sched
                .arrive(Child::Node(k), group_weights[depth - 1], head);
            n = parent;
        }
    }

    /// The set to serve next.
    fn select(&mut self) -> Option<SetKey> {
        let mut n = self.root;
        loop {
            match self.nodes[n].sched.select()? {
                Child::Node(k) => n = self.nodes[n].children[&k],
                Child::Set(key) => return Some(key),
            }
        }
    }

    /// The length of the head of what node `n` (dispatchable) would serve next.
    fn head_len(&mut self, mut n: usize) -> u64 {
        loop {
            match self.nodes[n].sched.select_head() {
                Some((Child::Node(k), _)) => n = self.nodes[n].children[&k],
                Some((Child::Set(_), head)) => return head,
                None => return 0,
            }
        }
    }

    /// Set `key` (dispatchable) was served `len` bytes; `next` is its new head, `None` if it is
    /// no longer dispatchable.
    fn served(&mut self, key: SetKey, path: Group, len: u64, next: Option<u64>) {
        let mut n = self.find(path).expect("a dispatchable set's group");
        self.nodes[n].sched.served(Child::Set(key), len, next);
        while n != self.root {
            let next = if self.nodes[n].sched.backlogged() > 0 {
                Some(self.head_len(n))
            } else {
                self.idle += 1;
                None
            };
            let (parent, k) = (self.nodes[n].parent, self.nodes[n].key);
            self.nodes[parent].sched.served(Child::Node(k), len, next);
            n = parent;
        }
        self.free_idle();
    }

    /// Set `key` (dispatchable) stops being dispatchable without being served; so does every
    /// group above it left with nothing dispatchable.
    fn leave(&mut self, key: SetKey, path: Group) {
        let mut n = self.find(path).expect("a dispatchable set's group");
        self.nodes[n].sched.leave(Child::Set(key));
        while n != self.root && self.nodes[n].sched.backlogged() == 0 {
            self.idle += 1;
            let (parent, k) = (self.nodes[n].parent, self.nodes[n].key);
            self.nodes[parent].sched.leave(Child::Node(k));
            n = parent;
        }
        self.free_idle();
    }

    /// Group `g`'s jobs received `len` bytes of service elsewhere (other servers): each of its
    /// nodes is charged them in its parent's scheduler, as far down as nodes exist here.
    fn charge(&mut self, g: Group, group_weights: &[f64], len: u64) {
        let mut n = self.root;
        for (d, &k) in g.0[..self.levels].iter().enumerate() {
            self.nodes[n]
                .sched
                .charge(Child::Node(k), len, group_weights[d]);
            match self.nodes[n].children.get(&k) {
                Some(&c) => n = c,
                None => return,
            }
        }
    }

    /// Frees every idle node once more than [`IDLE_NODES_KEPT`] are kept (an idle node's
    /// children are idle too).
    fn free_idle(&mut self) {
        if self.idle <= IDLE_NODES_KEPT {
            return;
        }
        let idle: Vec<usize> = self
            .nodes
            .iter()
            .filter(|&(i, node)| i != self.root && node.sched.backlogged() == 0)
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
}
