//! `timeorder`: arrival order, optionally merging contiguous requests (AGIOS "TO" and "TO-agg").
//!
//! Requests leave in arrival order. With `merge=true` the request at the head takes along every
//! queued request of the same file and operation that continues it (starts where the batch ends) or
//! precedes it (ends where the batch starts), wherever those sit in the queue, as long as the batch
//! stays within `max_merge_bytes`. Merging never reorders what it does not merge: the remaining
//! requests keep their arrival order. `other` operations are never merged.
//!
//! Lookups are by hash on `(file, op, offset)`, so a dispatch costs O(batch length), not O(queue).

use std::collections::VecDeque;

use crate::tunables::{TunableSpec, Tunables};
use crate::{Batch, Dispatch, FileId, Nanos, Op, Policy, PolicyError, Request};
use iosets_types::hash::IdMap;

/// Registry name.
pub const NAME: &str = "timeorder";
/// Tunables of `timeorder`.
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "merge",
        default: "false",
        help: "merge contiguous requests of the same file and operation (AGIOS TO-agg)",
    },
    TunableSpec {
        name: "max_merge_bytes",
        default: "1048576",
        help: "largest merged batch, in bytes (1 B .. 1 GiB); a single larger request still goes alone",
    },
];

type Key = (FileId, Op, u64);

/// Arrival order with optional merging.
#[derive(Debug)]
pub struct TimeOrder {
    merge: bool,
    max_merge_bytes: u64,
    /// Slot `i` holds the request of sequence number `base + i`, or `None` once merged away.
    slots: VecDeque<Option<Request>>,
    base: u64,
    len: usize,
    /// Queued requests by `(file, op, offset)` and by `(file, op, end)`: sequence numbers.
    by_start: IdMap<Key, u64>,
    by_end: IdMap<Key, u64>,
}

impl TimeOrder {
    /// A `timeorder` queue; `merge` enables merging up to `max_merge_bytes` per batch.
    pub fn new(merge: bool, max_merge_bytes: u64) -> TimeOrder {
        TimeOrder {
            merge,
            max_merge_bytes,
            slots: VecDeque::new(),
            base: 0,
            len: 0,
            by_start: IdMap::default(),
            by_end: IdMap::default(),
        }
    }

    pub(crate) fn from_tunables(t: &mut Tunables) -> Result<TimeOrder, PolicyError> {
        let merge = t.bool("merge")?;
        let max = t.u64_in("max_merge_bytes", 1, 1 << 30)?;
        Ok(TimeOrder::new(merge, max))
    }

    fn mergeable(r: &Request) -> bool {
        matches!(r.op, Op::Read | Op::Write) && r.len > 0
    }

    fn unindex(&mut self, seq: u64, r: &Request) {
        let s = (r.file, r.op, r.offset);
        if self.by_start.get(&s) == Some(&seq) {
            self.by_start.remove(&s);
        }
        let e = (r.file, r.op, r.end());
        if self.by_end.get(&e) == Some(&seq) {
            self.by_end.remove(&e);
        }
    }

    /// Takes queued request `seq` to merge into a batch of `bytes` so far, if the batch stays
    /// within `max_merge_bytes` with it; `bytes` then counts it.
    fn take_within(&mut self, seq: u64, bytes: &mut u64) -> Option<Request> {
        let len = self.slots[(seq - self.base) as usize]
            .as_ref()
            .map_or(0, |r| r.len);
        if *bytes + len > self.max_merge_bytes {
            return None;
        }
        *bytes += len;
        Some(self.take(seq))
    }

    /// Takes the queued request of sequence `seq` out of the middle of the queue.
    fn take(&mut self, seq: u64) -> Request {
        let r = self.slots[(seq - self.base) as usize]
            .take()
            .expect("indexed request is queued");
        self.unindex(seq, &r);
        self.len -= 1;
        r
    }

    fn pop_head(&mut self) -> Option<(u64, Request)> {
        while let Some(slot) = self.slots.pop_front() {
            let seq = self.base;
            self.base += 1;
            if let Some(r) = slot {
                self.len -= 1;
                if self.merge && Self::mergeable(&r) {
                    self.unindex(seq, &r);
                }
                return Some((seq, r));
            }
        }
        None
    }

    fn grow(&mut self, head: Request) -> Batch {
        let (file, op) = (head.file, head.op);
        let mut before: Vec<Request> = Vec::new();
        let mut start = head.offset;
        let mut batch = Batch::single(head);
        let mut bytes = head.len;
        // Forward: requests that continue the batch.
        while let Some(&seq) = self.by_start.get(&(file, op, batch.end())) {
            let Some(r) = self.take_within(seq, &mut bytes) else {
                break;
            };
            batch.push_merged(r);
        }
        // Backward: requests that end where the batch starts.
        while let Some(&seq) = self.by_end.get(&(file, op, start)) {
            let Some(r) = self.take_within(seq, &mut bytes) else {
                break;
            };
            start = r.offset;
            before.push(r);
        }
        if before.is_empty() {
            return batch;
        }
        // Rebuild in offset order: the earliest-offset request heads the batch.
        before.reverse();
        let mut it = before.into_iter().chain(batch.into_requests());
        let mut out = Batch::single(it.next().expect("batch is not empty"));
        for r in it {
            out.push_merged(r);
        }
        out
    }
}

impl Policy for TimeOrder {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enqueue(&mut self, req: Request, _now: Nanos) {
        let seq = self.base + self.slots.len() as u64;
        if self.merge && Self::mergeable(&req) {
            self.by_start
                .entry((req.file, req.op, req.offset))
                .or_insert(seq);
            self.by_end
                .entry((req.file, req.op, req.end()))
                .or_insert(seq);
        }
        self.slots.push_back(Some(req));
        self.len += 1;
    }

    fn dispatch(&mut self, _now: Nanos) -> Dispatch {
        match self.pop_head() {
            Some((_, r)) if self.merge && Self::mergeable(&r) => Dispatch::Ready(self.grow(r)),
            Some((_, r)) => Dispatch::Ready(Batch::single(r)),
            None => Dispatch::Idle,
        }
    }

    fn queued(&self) -> usize {
        self.len
    }

    fn drain(&mut self) -> Vec<Request> {
        let out: Vec<Request> = self.slots.drain(..).flatten().collect();
        self.base += out.len() as u64;
        self.by_start.clear();
        self.by_end.clear();
        self.len = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::request;

    fn w(id: u64, file: u64, off: u64, len: u64) -> Request {
        request(id, 1, Op::Write, file, off, len)
    }

    fn ids(b: &Batch) -> Vec<u64> {
        b.requests().map(|r| r.id.0).collect()
    }

    fn next(p: &mut TimeOrder) -> Batch {
        match p.dispatch(Nanos::ZERO) {
            Dispatch::Ready(b) => b,
            other => panic!("expected a batch, got {other:?}"),
        }
    }

    #[test]
    fn without_merge_is_arrival_order() {
        let mut p = TimeOrder::new(false, 1 << 20);
        for (i, off) in [(1, 0), (2, 10), (3, 20)] {
            p.enqueue(w(i, 1, off, 10), Nanos::ZERO);
        }
        assert_eq!(ids(&next(&mut p)), vec![1]);
        assert_eq!(ids(&next(&mut p)), vec![2]);
        assert_eq!(ids(&next(&mut p)), vec![3]);
        assert_eq!(p.dispatch(Nanos::ZERO), Dispatch::Idle);
    }

    #[test]
    fn merges_forward_and_backward_in_offset_order() {
        let mut p = TimeOrder::new(true, 1 << 20);
        p.enqueue(w(1, 1, 100, 10), Nanos::ZERO); // head
        p.enqueue(w(2, 2, 110, 10), Nanos::ZERO); // other file: not merged
        p.enqueue(w(3, 1, 110, 10), Nanos::ZERO); // continues 1
        p.enqueue(w(4, 1, 90, 10), Nanos::ZERO); // precedes 1
        p.enqueue(request(5, 1, Op::Read, 1, 120, 10), Nanos::ZERO); // other op
        let b = next(&mut p);
        assert_eq!(ids(&b), vec![4, 1, 3]);
        assert_eq!(b.head().offset, 90);
        assert_eq!(b.bytes(), 30);
        assert_eq!(ids(&next(&mut p)), vec![2]);
        assert_eq!(ids(&next(&mut p)), vec![5]);
        assert_eq!(p.queued(), 0);
    }

    #[test]
    fn merge_respects_the_byte_cap() {
        let mut p = TimeOrder::new(true, 25);
        for i in 0..4 {
            p.enqueue(w(i + 1, 1, i * 10, 10), Nanos::ZERO);
        }
        assert_eq!(ids(&next(&mut p)), vec![1, 2]);
        assert_eq!(ids(&next(&mut p)), vec![3, 4]);
    }

    #[test]
    fn drain_returns_what_is_left_in_order() {
        let mut p = TimeOrder::new(true, 1 << 20);
        p.enqueue(w(1, 1, 0, 10), Nanos::ZERO);
        p.enqueue(w(2, 2, 0, 10), Nanos::ZERO);
        p.enqueue(w(3, 1, 10, 10), Nanos::ZERO);
        p.enqueue(w(4, 3, 0, 10), Nanos::ZERO);
        assert_eq!(ids(&next(&mut p)), vec![1, 3]);
        let rest: Vec<u64> = p.drain().iter().map(|r| r.id.0).collect();
        assert_eq!(rest, vec![2, 4]);
        assert_eq!(p.queued(), 0);
        assert_eq!(p.dispatch(Nanos::ZERO), Dispatch::Idle);
    }
}
