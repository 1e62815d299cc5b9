//! `sjf`: AGIOS' shortest job first, where a "job" is one file's reads or one file's writes.
//!
//! Requests are kept per (file, direction), sorted by offset. Each dispatch serves the queue with the
//! fewest bytes queued — ties go to the lower file id, then reads before writes — starting at its
//! lowest offset and taking along up to `max_aggregation` contiguous requests of that queue (AGIOS:
//! 16) as one batch. Small files are finished first; a big one waits while smaller ones keep coming.
//! No timers.

use std::collections::BTreeSet;

use crate::sorted::{direction, SortedQueue};
use crate::tunables::{TunableSpec, Tunables};
use crate::{Dispatch, FileId, Nanos, Policy, PolicyError, Request};
use iosets_types::hash::IdMap;

/// Registry name.
pub const NAME: &str = "sjf";
/// Tunables of `sjf`.
pub const TUNABLES: &[TunableSpec] = &[TunableSpec {
    name: "max_aggregation",
    default: "16",
    help: "most requests merged into one batch (AGIOS MAX_AGGREG_SIZE; 1 = no merging, up to 1024)",
}];

/// A queue: one file's reads (0) or writes (1).
type QueueKey = (FileId, usize);

/// Shortest job first by queued bytes per file and direction.
#[derive(Debug)]
pub struct Sjf {
    max_aggregation: usize,
    queues: IdMap<QueueKey, (SortedQueue, u64)>,
    /// (queued bytes, queue) of every non-empty queue.
    by_size: BTreeSet<(u64, QueueKey)>,
    len: usize,
    seq: u64,
}

impl Sjf {
    /// SJF merging up to `max_aggregation` requests per batch.
    pub fn new(max_aggregation: usize) -> Sjf {
        Sjf {
            max_aggregation,
            queues: IdMap::default(),
            by_size: BTreeSet::new(),
            len: 0,
            seq: 0,
        }
    }

    pub(crate) fn from_tunables(t: &mut Tunables) -> Result<Sjf, PolicyError> {
        Ok(Sjf::new(t.u64_in("max_aggregation", 1, 1024)? as usize))
    }
}

impl Policy for Sjf {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enqueue(&mut self, req: Request, _now: Nanos) {
        self.seq += 1;
        self.len += 1;
        let key = (req.file, direction(req.op));
        let (queue, bytes) = self.queues.entry(key).or_default();
        self.by_size.remove(&(*bytes, key));
        queue.insert(self.seq, req);
        *bytes += req.len;
        self.by_size.insert((*bytes, key));
    }

    fn dispatch(&mut self, _now: Nanos) -> Dispatch {
        let Some((bytes, key)) = self.by_size.pop_first() else {
            return Dispatch::Idle;
        };
        let (queue, queued) = self.queues.get_mut(&key).expect("sized queue exists");
        let first = queue
            .next_cscan((key.0, 0))
            .expect("sized queue is not empty");
        let batch = queue.take_batch(first, u64::MAX, self.max_aggregation, |_, _| {});
        *queued = bytes - batch.bytes();
        self.len -= batch.len();
        if queue.is_empty() {
            self.queues.remove(&key);
        } else {
            self.by_size.insert((*queued, key));
        }
        Dispatch::Ready(batch)
    }

    fn queued(&self) -> usize {
        self.len
    }

    fn drain(&mut self) -> Vec<Request> {
        self.by_size.clear();
        self.len = 0;
        let mut keys: Vec<QueueKey> = self.queues.keys().copied().collect();
        keys.sort_unstable();
        keys.into_iter()
            .flat_map(|k| {
                self.queues
                    .remove(&k)
                    .map(|(mut q, _)| q.drain().map(|(_, r)| r).collect::<Vec<_>>())
                    .unwrap_or_default()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::request;
    use crate::Op;

    #[test]
    fn the_smallest_queue_goes_first_and_contiguous_requests_merge() {
        // The spec's example: file A has three non-contiguous 4 KiB reads (12 KiB), file B one
        // 64 KiB read; A's three go first, lowest offset first.
        let mut p = Sjf::new(16);
        let k = 4096;
        p.enqueue(request(1, 1, Op::Read, 2, 0, 16 * k), Nanos::ZERO);
        for (id, off) in [(2, 8 * k), (3, 0), (4, 4 * k)] {
            p.enqueue(request(id, 1, Op::Read, 1, off, k), Nanos::ZERO);
        }
        let mut order = Vec::new();
        while let Dispatch::Ready(b) = p.dispatch(Nanos::ZERO) {
            order.push(b.requests().map(|r| r.id.0).collect::<Vec<_>>());
        }
        assert_eq!(order, vec![vec![3], vec![4], vec![2], vec![1]]);
        // A contiguous fourth read leaves with its neighbour as one batch.
        let mut p = Sjf::new(16);
        p.enqueue(request(1, 1, Op::Read, 1, 0, k), Nanos::ZERO);
        p.enqueue(request(2, 1, Op::Read, 1, k, k), Nanos::ZERO);
        let Dispatch::Ready(b) = p.dispatch(Nanos::ZERO) else {
            panic!()
        };
        assert_eq!(b.len(), 2);
    }
}
