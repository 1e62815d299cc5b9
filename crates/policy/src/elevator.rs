//! `elevator`: requests sorted by `(file, offset)` and served in one-way sweeps (C-SCAN), contiguous
//! requests merged — the sorting and merging of Linux's elevators (seed 002).
//!
//! The head starts at the lowest position. Each dispatch serves the first queued request at or after
//! the head, merged with the queued requests that continue it (same file and operation) up to
//! `max_merge_bytes`, and moves the head to the end of the batch. When nothing lies ahead the sweep
//! wraps to the lowest position: within a sweep every file's offsets are served in ascending order,
//! and a request waits at most one full sweep. No timers.

use crate::sorted::SortedQueue;
use crate::tunables::{TunableSpec, Tunables};
use crate::{Dispatch, FileId, Nanos, Policy, PolicyError, Request};

/// Registry name.
pub const NAME: &str = "elevator";
/// Tunables of `elevator`.
pub const TUNABLES: &[TunableSpec] = &[TunableSpec {
    name: "max_merge_bytes",
    default: "1048576",
    help: "largest merged batch in bytes (0 = never merge; up to 1 GiB)",
}];

/// C-SCAN with merging.
#[derive(Debug)]
pub struct Elevator {
    max_merge_bytes: u64,
    queue: SortedQueue,
    head: (FileId, u64),
    seq: u64,
}

impl Elevator {
    /// An elevator merging up to `max_merge_bytes` per batch (0: no merging).
    pub fn new(max_merge_bytes: u64) -> Elevator {
        Elevator {
            max_merge_bytes,
            queue: SortedQueue::default(),
            head: (FileId(0), 0),
            seq: 0,
        }
    }

    pub(crate) fn from_tunables(t: &mut Tunables) -> Result<Elevator, PolicyError> {
        Ok(Elevator::new(t.u64_in("max_merge_bytes", 0, 1 << 30)?))
    }
}

impl Policy for Elevator {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enqueue(&mut self, req: Request, _now: Nanos) {
        self.seq += 1;
        self.queue.insert(self.seq, req);
    }

    fn dispatch(&mut self, _now: Nanos) -> Dispatch {
        let Some(key) = self.queue.next_cscan(self.head) else {
            return Dispatch::Idle;
        };
        let batch = self
            .queue
            .take_batch(key, self.max_merge_bytes, usize::MAX, |_, _| {});
        self.head = (batch.head().file, batch.end());
        Dispatch::Ready(batch)
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn drain(&mut self) -> Vec<Request> {
        self.queue.drain().map(|(_, r)| r).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::request;
    use crate::Op;

    #[test]
    fn serves_ascending_then_wraps() {
        let mut p = Elevator::new(0);
        for (id, off) in [(1, 50), (2, 10), (3, 30)] {
            p.enqueue(request(id, 1, Op::Read, 1, off, 5), Nanos::ZERO);
        }
        let mut order = Vec::new();
        // Serve one, then a request behind the head arrives: it waits for the next sweep.
        let Dispatch::Ready(b) = p.dispatch(Nanos::ZERO) else {
            panic!()
        };
        order.push(b.head().offset);
        p.enqueue(request(4, 1, Op::Read, 1, 0, 5), Nanos::ZERO);
        while let Dispatch::Ready(b) = p.dispatch(Nanos::ZERO) {
            order.push(b.head().offset);
        }
        assert_eq!(order, vec![10, 30, 50, 0]);
    }
}
