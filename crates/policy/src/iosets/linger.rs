//! Anticipation (`hold_idle_ms`, see the [module docs](super)): a holder that runs out of work
//! keeps its set until a window closes, waiting for its own next request.
//!
//! This file holds the order of window ends ([`Lingering`], earliest first) and the three steps
//! that use it: a holder starts lingering (or retires), lingers whose window has closed end, and the
//! earliest window still open (what [`Dispatch::NotBefore`](crate::Dispatch::NotBefore) answers).
//! Nothing here runs unless `hold_idle_ms > 0` and a set has more than one member.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{IoSets, Slot};
use crate::Nanos;

/// One linger's place among the window ends: the earliest end first, then the oldest linger
/// (`seq` is unique, so the set slot never decides).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct LingerEnd {
    /// When the window closes.
    until: Nanos,
    /// The linger's sequence number; the entry is live only while its set's
    /// [`Set::linger`](super::Set) is this number.
    seq: u64,
    /// The lingering set's slot.
    set: Slot,
}

/// Lingering sets by window end. Lazy deletion: an entry whose sequence number is not its set's
/// current linger (the linger ended early, the set was removed, or its slot now holds another set)
/// is stale, and skipped when it surfaces.
#[derive(Debug, Default)]
pub(super) struct Lingering(BinaryHeap<Reverse<LingerEnd>>);

impl Lingering {
    /// True if no entry, live or stale, is left.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Drops every entry.
    pub(super) fn clear(&mut self) {
        self.0.clear();
    }

    fn push(&mut self, end: LingerEnd) {
        self.0.push(Reverse(end));
    }

    fn peek(&self) -> Option<LingerEnd> {
        self.0.peek().map(|e| e.0)
    }

    fn pop(&mut self) {
        self.0.pop();
    }
}

impl IoSets {
    /// True if `end` is the current linger of its set.
    fn is_live(&self, end: LingerEnd) -> bool {
        self.sets
            .get(end.set)
            .is_some_and(|set| set.linger == Some(end.seq))
    }

    /// Job `j`, holder of its set, has just run out of work (nothing queued, nothing in service):
    /// it lingers if anticipation says so, else it retires.
    pub(super) fn linger_or_retire(&mut self, j: Slot, now: Nanos) {
        let s = self.jobs[j].set;
        let Some(hold) = self.may_linger(s, j, now) else {
            return self.retire(j, now);
        };
        let set = &self.sets[s];
        let mut until = now + hold;
        if let (Some(bound), Some(since), false) = (
            self.bound_of(set),
            set.contended_since,
            set.waiting.is_empty(),
        ) {
            // The linger is part of the tenure: it ends by the bound.
            until = until.min(since.max(set.held_since) + bound);
        }
        let seq = self.next_seq();
        let last_len = self.jobs[j].last_len;
        let set = &mut self.sets[s];
        set.linger = Some(seq);
        // After a data request, the device waits for its next one when its set is next
        // (`slice_idle_us`), within the linger.
        set.anticipate = self
            .slice_idle
            .filter(|_| last_len > 0)
            .map(|slice| (Some((now + slice).min(until)), last_len));
        self.lingering.push(LingerEnd { until, seq, set: s });
        self.refresh(s);
    }

    /// Retires the holders whose linger ended by `now`: their sets pass on.
    pub(super) fn expire_lingers(&mut self, now: Nanos) {
        while let Some(end) = self.lingering.peek() {
            if end.until > now {
                break;
            }
            self.lingering.pop();
            if self.is_live(end) {
                let h = self.sets[end.set]
                    .holder
                    .expect("a lingering set has a holder");
                if !self.jobs[h].open.is_empty() {
                    // Its open phase held the set to the end of the hold and no phase end came:
                    // its open phases hold nothing until its client sends one again.
                    self.enders.remove(&self.jobs[h].id);
                }
                self.retire(h, now);
            }
        }
    }

    /// The end of the earliest linger still on, dropping stale entries on the way.
    pub(super) fn next_linger_end(&mut self) -> Option<Nanos> {
        while let Some(end) = self.lingering.peek() {
            if self.is_live(end) {
                return Some(end.until);
            }
            self.lingering.pop();
        }
        None
    }
}
