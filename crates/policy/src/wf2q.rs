//! WF²Q+ (Bennett and Zhang, 1997): weighted fair queuing by bytes with virtual time.
//!
//! This is the fairness engine shared by `wfq` (flows are jobs or classes) and `iosets` (flows are
//! sets). It does not hold requests: the caller tells it when a flow becomes backlogged
//! ([`Wf2q::arrive`]), asks which flow goes next ([`Wf2q::select`]), and reports what was served
//! ([`Wf2q::served`]) or that a flow stopped being dispatchable ([`Wf2q::leave`]).
//!
//! The model: a system virtual time `V` advances by `bytes / W` for every `bytes` served, where `W`
//! is the sum of the weights of the backlogged flows — the rate at which an ideal fluid (GPS) server
//! would advance each flow's normalised service. Each backlogged flow has a start tag `S` and a
//! finish tag `F = S + head_len / weight`. A flow is *eligible* when `S <= V`; among eligible flows
//! the one with the smallest `F` goes next. Then `V = max(V, min S)` over backlogged flows.
//!
//! Why WF²Q+ rather than seed 000's per-round byte credit or plain start-time fair queuing: its
//! eligibility test keeps every backlogged flow within one maximum request size of its fluid share at
//! every instant, so shares are right even over windows of a few requests and with request sizes that
//! differ by 1000×. A credit round only converges over whole rounds.
//!
//! Credit rules (DESIGN.md): an idle flow banks no credit — when it comes back its start tag is
//! `max(F_last, V)`. A flow that got ahead and went idle keeps its debt (`F_last > V`) until `V`
//! catches up; past that its state is forgotten, so memory is bounded by the flows that are
//! backlogged or still in debt. When nothing at all is backlogged, `V` restarts at zero and all debt
//! is forgiven (the device was idle: nobody was wronged).
//!
//! Costs: `O(log n)` per call in the number of flows, no scan. The three orders (eligible flows by
//! finish tag, pending flows by start tag, parked flows by finish tag) are binary heaps with lazy
//! deletion: a flow's entry carries the flow's generation, and an entry whose generation is stale is
//! dropped when it surfaces. Heaps are rebuilt when stale entries outnumber live flows.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::hash::Hash;

use iosets_types::hash::IdMap;

/// An `f64` with a total order, for tags in heaps.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tag(f64);

impl Eq for Tag {}

impl PartialOrd for Tag {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Tag {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Backlogged, waiting for `V` to reach its start tag.
    Pending,
    /// Backlogged and eligible.
    Eligible,
    /// Not backlogged, but in debt (`finish > V`); remembered until `V` passes `finish`.
    Parked,
    /// Slot free.
    Free,
}

#[derive(Debug)]
struct Flow<K> {
    key: K,
    weight: f64,
    start: f64,
    finish: f64,
    /// The length of its head request while backlogged ([`Wf2q::select_head`]).
    head: u64,
    state: State,
    /// Bumped whenever the flow enters or leaves a heap; heap entries with another value are stale.
    generation: u64,
}

/// A heap entry: (tag, flow index, generation), smallest tag first, ties by flow index.
type Entry = Reverse<(Tag, usize, u64)>;

/// A min-heap of flows by tag with lazy deletion.
#[derive(Debug, Default)]
struct Heap(BinaryHeap<Entry>);

impl Heap {
    fn push<K>(&mut self, flows: &mut [Flow<K>], i: usize, tag: f64) {
        flows[i].generation += 1;
        self.0.push(Reverse((Tag(tag), i, flows[i].generation)));
    }

    /// The smallest live entry, dropping stale ones on the way.
    fn peek<K>(&mut self, flows: &[Flow<K>]) -> Option<(f64, usize)> {
        while let Some(&Reverse((Tag(t), i, g))) = self.0.peek() {
            if flows[i].generation == g {
                return Some((t, i));
            }
            self.0.pop();
        }
        None
    }

    fn pop<K>(&mut self, flows: &[Flow<K>]) -> Option<(f64, usize)> {
        let top = self.peek(flows)?;
        self.0.pop();
        Some(top)
    }

    /// Drops stale entries when they outnumber `live` by far.
    fn compact<K>(&mut self, flows: &[Flow<K>], live: usize) {
        if self.0.len() > 2 * live + 64 {
            self.0
                .retain(|&Reverse((_, i, g))| flows[i].generation == g);
        }
    }
}

/// The WF²Q+ scheduler over flows named by `K`.
#[derive(Debug)]
pub struct Wf2q<K> {
    flows: Vec<Flow<K>>,
    free: Vec<usize>,
    index: IdMap<K, usize>,
    /// Eligible flows by finish tag.
    eligible: Heap,
    /// Backlogged but not yet eligible flows by start tag.
    pending: Heap,
    /// Idle flows in debt, by finish tag.
    parked: Heap,
    backlogged: usize,
    vtime: f64,
    active_weight: f64,
    /// The flow [`Wf2q::select`] answered last: the caller serves it or makes it leave next, so
    /// those calls find it without a lookup (checked: the slot must still hold that key, backlogged).
    selected: Option<usize>,
}

impl<K: Copy + Eq + Hash> Default for Wf2q<K> {
    fn default() -> Self {
        Wf2q {
            flows: Vec::new(),
            free: Vec::new(),
            index: IdMap::default(),
            eligible: Heap::default(),
            pending: Heap::default(),
            parked: Heap::default(),
            backlogged: 0,
            vtime: 0.0,
            active_weight: 0.0,
            selected: None,
        }
    }
}

/// The most bytes one [`Wf2q::charge`] counts (1 GiB): service elsewhere is what a client
/// says, and one say must not push a flow out of reach.
pub const MAX_CHARGE: u64 = 1 << 30;

/// The cost of serving `len` bytes: at least 1, so that zero-length operations are not free.
fn cost(len: u64) -> f64 {
    len.max(1) as f64
}

impl<K: Copy + Eq + Hash> Wf2q<K> {
    /// An empty scheduler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of backlogged flows.
    pub fn backlogged(&self) -> usize {
        self.backlogged
    }

    /// True if `key` is backlogged.
    pub fn is_backlogged(&self, key: K) -> bool {
        self.find_backlogged(key).is_some()
    }

    /// The system virtual time.
    pub fn virtual_time(&self) -> f64 {
        self.vtime
    }

    /// `key` becomes backlogged with a head request of `head_len` bytes, at weight `weight` (> 0).
    ///
    /// Its start tag is `max(F_last, V)`: no credit for the time it was idle.
    ///
    /// # Panics
    /// If `key` is already backlogged or `weight` is not positive: both are caller bugs.
    pub fn arrive(&mut self, key: K, weight: f64, head_len: u64) {
        assert!(
            weight.is_finite() && weight > 0.0,
            "weight must be positive, got {weight}"
        );
        let i = match self.index.get(&key) {
            Some(&i) => {
                assert_eq!(self.flows[i].state, State::Parked, "flow arrived twice");
                i
            }
            None => self.alloc(key),
        };
        let f = &mut self.flows[i];
        f.weight = weight;
        f.head = head_len;
        f.start = f.finish.max(self.vtime);
        f.finish = f.start + cost(head_len) / weight;
        self.active_weight += weight;
        self.backlogged += 1;
        self.insert_backlogged(i);
    }

    /// The flow to serve next, or `None` if none is backlogged. Does not change any tag.
    pub fn select(&mut self) -> Option<K> {
        self.promote();
        if self.eligible.peek(&self.flows).is_none() {
            // Only happens through float rounding: V = max(V, min S) makes some flow eligible.
            let (s, _) = self.pending.peek(&self.flows)?;
            self.vtime = self.vtime.max(s);
            self.promote();
        }
        let (_, i) = self.eligible.peek(&self.flows)?;
        self.selected = Some(i);
        Some(self.flows[i].key)
    }

    /// As [`Wf2q::select`], with the length of the flow's head request (what it arrived or was
    /// last served with as next): the head of a node of a tree of schedulers.
    pub fn select_head(&mut self) -> Option<(K, u64)> {
        let key = self.select()?;
        let i = self.selected.expect("select sets it");
        Some((key, self.flows[i].head))
    }

    /// `key`, backlogged, was served `len` bytes. With `next_len = Some(n)` it stays backlogged with
    /// a new head of `n` bytes; with `None` it is no longer backlogged.
    ///
    /// # Panics
    /// If `key` is not backlogged.
    pub fn served(&mut self, key: K, len: u64, next_len: Option<u64>) {
        let i = self.backlogged_index(key);
        let weight = self.flows[i].weight;
        // The tag is charged for what was actually served (a merged batch may exceed the head).
        let finish = self.flows[i].start + cost(len) / weight;
        self.vtime += cost(len) / self.active_weight;
        match next_len {
            Some(n) => {
                let f = &mut self.flows[i];
                f.head = n;
                f.start = finish;
                f.finish = finish + cost(n) / weight;
                self.insert_backlogged(i);
            }
            None => {
                self.flows[i].finish = finish;
                self.deactivate(i);
            }
        }
        self.settle();
    }

    /// `key`, backlogged, stops being dispatchable without being served (its work is blocked or was
    /// withdrawn). Its head was not served, so its finish tag falls back to its start tag.
    ///
    /// # Panics
    /// If `key` is not backlogged.
    pub fn leave(&mut self, key: K) {
        let i = self.backlogged_index(key);
        self.flows[i].finish = self.flows[i].start;
        self.deactivate(i);
        self.settle();
    }

    /// `key` received `len` bytes of service elsewhere (another server: dmClock's `delta`): its
    /// tags move on by `len / weight` as if it had been served here, without `V` moving, so its
    /// share here shrinks by what it had there. A flow not known here starts that much in debt
    /// (at `weight`), unless nothing is backlogged here (then there is nobody to be fair to).
    pub fn charge(&mut self, key: K, len: u64, weight: f64) {
        // A client says what it was served elsewhere: at most MAX_CHARGE a time, so that one
        // request cannot push a flow (and the nodes above it) out of reach.
        let len = len.min(MAX_CHARGE);
        if len == 0 {
            return;
        }
        match self.index.get(&key).copied() {
            Some(i) => {
                let d = len as f64 / self.flows[i].weight;
                if !d.is_finite() {
                    return;
                }
                let f = &mut self.flows[i];
                f.finish += d;
                match f.state {
                    State::Pending | State::Eligible => {
                        f.start += d;
                        self.insert_backlogged(i);
                    }
                    State::Parked => {
                        let finish = f.finish;
                        self.parked.push(&mut self.flows, i, finish);
                    }
                    State::Free => unreachable!("an indexed flow is live"),
                }
            }
            None => {
                if self.backlogged == 0 || !(weight.is_finite() && weight > 0.0) {
                    return;
                }
                let d = len as f64 / weight;
                if !d.is_finite() {
                    return;
                }
                let i = self.alloc(key);
                let f = &mut self.flows[i];
                f.weight = weight;
                f.finish = self.vtime + d;
                let finish = f.finish;
                self.parked.push(&mut self.flows, i, finish);
            }
        }
        // Charges push heap entries without serving anything: drop the stale ones here too.
        let live = self.index.len();
        self.eligible.compact(&self.flows, live);
        self.pending.compact(&self.flows, live);
        self.parked.compact(&self.flows, live);
    }

    /// Forgets every flow and restarts virtual time.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    fn backlogged_index(&self, key: K) -> usize {
        self.find_backlogged(key)
            .unwrap_or_else(|| panic!("flow is not backlogged"))
    }

    /// The slot of `key` if it is backlogged; the flow selected last is found without a lookup.
    fn find_backlogged(&self, key: K) -> Option<usize> {
        let backlogged = |i: usize| {
            let f = &self.flows[i];
            f.key == key && matches!(f.state, State::Pending | State::Eligible)
        };
        match self.selected {
            // A slot holds one flow at a time and a flow one slot: a live slot with `key` is its.
            Some(i) if backlogged(i) => Some(i),
            _ => self.index.get(&key).copied().filter(|&i| backlogged(i)),
        }
    }

    fn alloc(&mut self, key: K) -> usize {
        let mut flow = Flow {
            key,
            weight: 1.0,
            start: 0.0,
            finish: 0.0,
            head: 0,
            state: State::Parked,
            generation: 0,
        };
        let i = match self.free.pop() {
            Some(i) => {
                // Keep counting generations: entries of the slot's former flow stay stale.
                flow.generation = self.flows[i].generation + 1;
                self.flows[i] = flow;
                i
            }
            None => {
                self.flows.push(flow);
                self.flows.len() - 1
            }
        };
        self.index.insert(key, i);
        i
    }

    fn forget(&mut self, i: usize) {
        let f = &mut self.flows[i];
        f.state = State::Free;
        f.generation += 1;
        self.index.remove(&f.key);
        self.free.push(i);
    }

    /// Puts backlogged flow `i` in the eligible or the pending heap (dropping any older entry).
    fn insert_backlogged(&mut self, i: usize) {
        let (start, finish) = (self.flows[i].start, self.flows[i].finish);
        if start <= self.vtime {
            self.flows[i].state = State::Eligible;
            self.eligible.push(&mut self.flows, i, finish);
        } else {
            self.flows[i].state = State::Pending;
            self.pending.push(&mut self.flows, i, start);
        }
    }

    /// `i` stops being backlogged: park it if in debt, else forget it.
    fn deactivate(&mut self, i: usize) {
        self.active_weight -= self.flows[i].weight;
        self.backlogged -= 1;
        let finish = self.flows[i].finish;
        if finish > self.vtime {
            self.flows[i].state = State::Parked;
            self.parked.push(&mut self.flows, i, finish);
        } else {
            self.forget(i);
        }
    }

    /// Moves pending flows whose start tag `V` has reached into the eligible heap.
    fn promote(&mut self) {
        while let Some((s, i)) = self.pending.peek(&self.flows) {
            if s > self.vtime {
                break;
            }
            self.pending.pop(&self.flows);
            self.flows[i].state = State::Eligible;
            let finish = self.flows[i].finish;
            self.eligible.push(&mut self.flows, i, finish);
        }
    }

    /// After a change: `V = max(V, min S)`, forget flows whose debt `V` has passed, restart from
    /// zero when nothing is backlogged, and drop stale heap entries when they pile up.
    fn settle(&mut self) {
        if self.backlogged == 0 {
            // Idle: forgive all debt, restart virtual time (also bounds float growth).
            while let Some((_, i)) = self.parked.pop(&self.flows) {
                self.forget(i);
            }
            self.eligible.0.clear();
            self.pending.0.clear();
            self.parked.0.clear();
            self.vtime = 0.0;
            self.active_weight = 0.0;
            return;
        }
        if self.eligible.peek(&self.flows).is_none() {
            if let Some((s, _)) = self.pending.peek(&self.flows) {
                self.vtime = self.vtime.max(s);
            }
        }
        while let Some((f, i)) = self.parked.peek(&self.flows) {
            if f > self.vtime {
                break;
            }
            self.parked.pop(&self.flows);
            self.forget(i);
        }
        let live = self.index.len();
        self.eligible.compact(&self.flows, live);
        self.pending.compact(&self.flows, live);
        self.parked.compact(&self.flows, live);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves `n` requests of `len` bytes from always-backlogged flows; returns bytes per flow.
    fn run(weights: &[f64], lens: &[u64], n: usize) -> Vec<u64> {
        let mut s = Wf2q::new();
        for (k, &w) in weights.iter().enumerate() {
            s.arrive(k, w, lens[k]);
        }
        let mut got = vec![0u64; weights.len()];
        for _ in 0..n {
            let k = s.select().unwrap();
            got[k] += lens[k];
            s.served(k, lens[k], Some(lens[k]));
        }
        got
    }

    #[test]
    fn service_elsewhere_shrinks_a_flows_share_here() {
        // Flows 0 and 1 equal; flow 0 had 50 bytes served elsewhere before: flow 1 catches up
        // (5 of its 10-byte requests) before flow 0 is served again.
        let mut s = Wf2q::new();
        s.arrive(0u32, 1.0, 10);
        s.arrive(1u32, 1.0, 10);
        s.charge(0, 50, 1.0);
        let mut order = Vec::new();
        for _ in 0..8 {
            let k = s.select().unwrap();
            order.push(k);
            s.served(k, 10, Some(10));
        }
        assert_eq!(order, [1, 1, 1, 1, 1, 0, 1, 0], "{order:?}");
        // Unknown here and something backlogged: it starts in debt.
        s.charge(2, 30, 1.0);
        s.arrive(2, 1.0, 10);
        let k = s.select().unwrap();
        assert_ne!(k, 2, "the flow in debt waits");
        // A client's say is capped: u64::MAX counts as MAX_CHARGE, and a weight so small that
        // the charge would be infinite is not charged.
        let mut capped = Wf2q::new();
        const MIB: u64 = 1 << 20;
        capped.arrive(0u32, 1.0, MIB);
        capped.arrive(1u32, 1.0, MIB);
        capped.charge(0, u64::MAX, 1.0);
        capped.charge(9, 10, 1e-320);
        let mut one = 0u64;
        loop {
            let k = capped.select().unwrap();
            if k == 0 {
                break;
            }
            one += MIB;
            capped.served(k, MIB, Some(MIB));
        }
        assert!(
            one.abs_diff(MAX_CHARGE) <= MIB,
            "flow 1 caught up the capped charge, within a request: {one}"
        );
        // Nothing backlogged: nothing to charge against.
        let mut idle: Wf2q<u32> = Wf2q::new();
        idle.charge(7, 100, 1.0);
        idle.arrive(7, 1.0, 10);
        assert_eq!(idle.select(), Some(7));
    }

    #[test]
    fn equal_weights_alternate() {
        assert_eq!(run(&[1.0, 1.0], &[10, 10], 10), vec![50, 50]);
    }

    #[test]
    fn weights_split_bytes() {
        let got = run(&[1.0, 3.0], &[100, 100], 400);
        assert_eq!(got, vec![10_000, 30_000]);
    }

    #[test]
    fn sizes_differing_1000x_still_split_by_bytes() {
        // Flow 0 sends 1-byte requests, flow 1 sends 1000-byte ones, equal weights.
        let got = run(&[1.0, 1.0], &[1, 1000], 20_000);
        let (a, b) = (got[0] as f64, got[1] as f64);
        assert!((a / (a + b) - 0.5).abs() < 0.01, "{got:?}");
    }

    #[test]
    fn idle_flow_banks_no_credit() {
        let mut s = Wf2q::new();
        s.arrive(0u32, 1.0, 10);
        for _ in 0..100 {
            assert_eq!(s.select(), Some(0));
            s.served(0, 10, Some(10));
        }
        // Flow 1 shows up late: it must not get 100 requests in a row to "catch up".
        s.arrive(1u32, 1.0, 10);
        let mut run_of_ones = 0;
        let mut longest = 0;
        for _ in 0..20 {
            let k = s.select().unwrap();
            s.served(k, 10, Some(10));
            run_of_ones = if k == 1 { run_of_ones + 1 } else { 0 };
            longest = longest.max(run_of_ones);
        }
        assert!(longest <= 2, "late flow got {longest} in a row");
    }

    #[test]
    fn debt_is_kept_across_short_idleness_then_forgotten() {
        let mut s = Wf2q::new();
        s.arrive(0u32, 1.0, 100);
        s.arrive(1u32, 1.0, 100);
        // Flow 0 is served once and goes idle while in debt (F = 100 > V = 50).
        assert_eq!(s.select(), Some(0));
        s.served(0, 100, None);
        assert!(!s.is_backlogged(0));
        assert!(s.parked.peek(&s.flows).is_some());
        // It comes back at once: flow 1 (start 0) must go before it (start 100).
        s.arrive(0, 1.0, 100);
        assert_eq!(s.select(), Some(1));
        s.served(1, 100, None);
        s.served(0, 100, None);
        // Nothing is backlogged: all state is gone and V restarts.
        assert_eq!(s.backlogged(), 0);
        assert!(s.index.is_empty() && s.parked.0.is_empty());
        assert_eq!(s.virtual_time(), 0.0);
    }

    #[test]
    fn leave_gives_back_the_unserved_head() {
        let mut s = Wf2q::new();
        s.arrive(0u32, 1.0, 1_000_000);
        s.arrive(1u32, 1.0, 10);
        s.leave(0);
        assert_eq!(s.select(), Some(1));
        s.arrive(0, 1.0, 10);
        // Flow 0's start is max(0, V), it was not charged for the head it never sent.
        s.served(1, 10, Some(10));
        assert_eq!(s.select(), Some(0));
    }

    #[test]
    fn the_flow_selected_last_is_not_found_once_its_slot_holds_another() {
        let mut s = Wf2q::new();
        s.arrive(0u32, 1.0, 10);
        s.arrive(1u32, 1.0, 10);
        assert_eq!(s.select(), Some(0));
        // Flow 0 leaves without debt and is forgotten; flow 2 takes its slot.
        s.leave(0);
        assert!(!s.index.contains_key(&0), "flow 0 is forgotten");
        s.arrive(2u32, 1.0, 10);
        assert_eq!(s.index[&2], 0, "flow 2 reuses the selected slot");
        assert!(!s.is_backlogged(0));
        assert!(s.is_backlogged(2));
        // Serving flow 2 and flow 1 goes through their own slots.
        s.served(2, 10, None);
        assert!(!s.is_backlogged(2) && s.is_backlogged(1));
        assert_eq!(s.select(), Some(1));
        s.served(1, 10, None);
        assert_eq!(s.backlogged(), 0);
    }
}
