//! A queue sorted by position — `(file, offset)` — with one-way (C-SCAN) sweeps and merging of
//! contiguous requests: the machinery the elevator, deadline, anticipatory and CFQ policies share.
//!
//! Requests are kept in a `BTreeMap` keyed by `(file, offset, sequence)`, the sequence number breaking
//! ties between requests at the same position by arrival. A sweep serves the first request at or
//! after the head position, then moves the head to that request's end; when nothing lies ahead the
//! sweep wraps to the lowest position (C-SCAN: always ascending, so every request is reached within
//! one sweep). Merging takes along queued requests of the same file and operation that continue the
//! batch exactly (start where it ends), up to a byte cap.

use std::collections::BTreeMap;

use crate::{Batch, FileId, Op, Request};

/// The direction of a request: 0 for reads, 1 for everything else. The sorting schedulers keep the
/// two apart (reads before writes, separate sweeps and expiries).
pub(crate) fn direction(op: Op) -> usize {
    usize::from(op != Op::Read)
}

/// A position in the sort order: `(file, offset, arrival sequence)`.
pub(crate) type SortKey = (FileId, u64, u64);

/// Requests sorted by position.
#[derive(Debug, Default)]
pub(crate) struct SortedQueue {
    map: BTreeMap<SortKey, Request>,
}

impl SortedQueue {
    pub(crate) fn insert(&mut self, seq: u64, req: Request) -> SortKey {
        let key = (req.file, req.offset, seq);
        self.map.insert(key, req);
        key
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The first request at or after `head` (a `(file, offset)` position), if any.
    pub(crate) fn next_at_or_after(&self, head: (FileId, u64)) -> Option<SortKey> {
        self.map
            .range((head.0, head.1, 0)..)
            .next()
            .map(|(k, _)| *k)
    }

    /// The first request at or after `head`, wrapping to the lowest position (C-SCAN).
    pub(crate) fn next_cscan(&self, head: (FileId, u64)) -> Option<SortKey> {
        self.next_at_or_after(head)
            .or_else(|| self.map.keys().next().copied())
    }

    /// Queued requests of `file` whose offset is in `[from, to]`, in position order.
    pub(crate) fn in_range(
        &self,
        file: FileId,
        from: u64,
        to: u64,
    ) -> impl Iterator<Item = (&SortKey, &Request)> + '_ {
        self.map.range((file, from, 0)..=(file, to, u64::MAX))
    }

    /// Removes the request at `key` and, when `max_merge_bytes > 0`, the queued requests that
    /// continue it (same file and operation, starting where the batch ends) while the batch stays
    /// within `max_merge_bytes` and `max_requests`. Calls `taken` with the key of every request
    /// removed.
    ///
    /// # Panics
    /// If `key` is not queued (a caller bug).
    pub(crate) fn take_batch(
        &mut self,
        key: SortKey,
        max_merge_bytes: u64,
        max_requests: usize,
        mut taken: impl FnMut(SortKey, &Request),
    ) -> Batch {
        let first = self.map.remove(&key).expect("key is queued");
        taken(key, &first);
        let mut batch = Batch::single(first);
        if max_merge_bytes == 0 || !matches!(first.op, Op::Read | Op::Write) || first.len == 0 {
            return batch;
        }
        let mut bytes = first.len;
        loop {
            let end = batch.end();
            let next = self
                .map
                .range((first.file, end, 0)..=(first.file, end, u64::MAX))
                .find(|(_, r)| r.op == first.op && r.len > 0)
                .map(|(k, r)| (*k, r.len));
            match next {
                Some((k, len)) if bytes + len <= max_merge_bytes && batch.len() < max_requests => {
                    let r = self.map.remove(&k).expect("found above");
                    taken(k, &r);
                    bytes += len;
                    batch.push_merged(r);
                }
                _ => return batch,
            }
        }
    }

    /// How many requests [`SortedQueue::take_batch`] would take at `key` with these caps.
    pub(crate) fn batch_len(
        &self,
        key: SortKey,
        max_merge_bytes: u64,
        max_requests: usize,
    ) -> usize {
        let Some(first) = self.map.get(&key) else {
            return 0;
        };
        if max_merge_bytes == 0 || !matches!(first.op, Op::Read | Op::Write) || first.len == 0 {
            return 1;
        }
        let (mut n, mut bytes, mut end) = (1, first.len, first.end());
        while n < max_requests {
            let next = self
                .map
                .range((first.file, end, 0)..=(first.file, end, u64::MAX))
                .find(|(k, r)| k.2 != key.2 && r.op == first.op && r.len > 0);
            match next {
                Some((_, r)) if bytes + r.len <= max_merge_bytes => {
                    n += 1;
                    bytes += r.len;
                    end = r.end();
                }
                _ => break,
            }
        }
        n
    }

    /// Removes every request, in position order.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (SortKey, Request)> {
        std::mem::take(&mut self.map).into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::request;

    fn r(id: u64, file: u64, off: u64, len: u64, op: Op) -> Request {
        request(id, 1, op, file, off, len)
    }

    #[test]
    fn cscan_wraps_to_the_lowest_position() {
        let mut q = SortedQueue::default();
        q.insert(0, r(1, 1, 100, 10, Op::Read));
        q.insert(1, r(2, 1, 10, 10, Op::Read));
        q.insert(2, r(3, 2, 0, 10, Op::Read));
        assert_eq!(q.next_cscan((FileId(1), 50)), Some((FileId(1), 100, 0)));
        assert_eq!(q.next_cscan((FileId(3), 0)), Some((FileId(1), 10, 1)));
    }

    #[test]
    fn merging_takes_exact_continuations_of_the_same_op_up_to_the_cap() {
        let mut q = SortedQueue::default();
        let k = q.insert(0, r(1, 1, 0, 10, Op::Write));
        q.insert(1, r(2, 1, 10, 10, Op::Read)); // other op at the continuation
        q.insert(2, r(3, 1, 10, 10, Op::Write));
        q.insert(3, r(4, 1, 20, 10, Op::Write));
        q.insert(4, r(5, 1, 30, 10, Op::Write));
        let mut seen = Vec::new();
        let b = q.take_batch(k, 30, usize::MAX, |k, _| seen.push(k.2));
        let ids: Vec<u64> = b.requests().map(|r| r.id.0).collect();
        assert_eq!(ids, vec![1, 3, 4]);
        assert_eq!(seen, vec![0, 2, 3]);
        assert_eq!(q.len(), 2);
        let k = q.next_cscan((FileId(1), 0)).unwrap();
        assert_eq!(
            q.take_batch(k, 0, usize::MAX, |_, _| {}).len(),
            1,
            "no merging with a zero cap"
        );
    }
}
