//! `deadline`: Linux's deadline / mq-deadline scheduler (seed 002) on requests.
//!
//! Reads and writes (every non-read counts as a write) are each kept twice: sorted by
//! `(file, offset)` and in arrival order (a FIFO with an expiry time: `read_expire_ms`, default
//! 500 ms; `write_expire_ms`, default 5 s). Service goes in **batches** of up to `fifo_batch` requests
//! of one direction, each continuing the sorted sweep from the previous one. When a batch ends the
//! next direction is chosen: reads are preferred, but once writes have been passed over
//! `writes_starved` times in a row (default 2) while reads were queued, a write batch goes. A batch
//! starts from the oldest request of its direction when that request has expired or the sweep has
//! reached the end; otherwise it continues the sweep. Contiguous requests of one file and direction
//! are merged up to `max_merge_bytes`.
//!
//! What that guarantees: a read waits at most its expiry plus the batches already under way (at most
//! `writes_starved` read batches can pass over waiting writes, and one write batch then goes). No
//! timers: deadline is work-conserving.

use std::collections::BTreeMap;

use crate::sorted::{direction, SortKey, SortedQueue};
use crate::tunables::{TunableSpec, Tunables};
use crate::{Dispatch, FileId, Nanos, Policy, PolicyError, Request};

/// Registry name.
pub const NAME: &str = "deadline";
/// Tunables of `deadline` (Linux's names, with units).
pub const TUNABLES: &[TunableSpec] = &SPECS;

/// Deadline's tunables, shared with `anticipatory`.
pub(crate) const SPECS: [TunableSpec; 5] = [
    TunableSpec {
        name: "read_expire_ms",
        default: "500",
        help: "a read is due this long after arrival (ms, 1 .. 1 day)",
    },
    TunableSpec {
        name: "write_expire_ms",
        default: "5000",
        help: "a write is due this long after arrival (ms, 1 .. 1 day)",
    },
    TunableSpec {
        name: "fifo_batch",
        default: "16",
        help: "requests dispatched in one direction before choosing again (1 .. 1024)",
    },
    TunableSpec {
        name: "writes_starved",
        default: "2",
        help: "read batches that may pass over waiting writes (0 .. 1024)",
    },
    TunableSpec {
        name: "max_merge_bytes",
        default: "1048576",
        help: "largest merged batch in bytes (0 = never merge)",
    },
];

const READ: usize = 0;
const WRITE: usize = 1;

/// One direction: sorted and FIFO views of the same requests.
#[derive(Debug, Default)]
struct Direction {
    sorted: SortedQueue,
    /// Arrival sequence → (due time, sort key).
    fifo: BTreeMap<u64, (Nanos, SortKey)>,
    /// Where the sweep of this direction continues.
    head: (FileId, u64),
}

/// The deadline scheduler.
#[derive(Debug)]
pub struct Deadline {
    expire: [Nanos; 2],
    fifo_batch: u32,
    writes_starved: u32,
    max_merge_bytes: u64,
    dirs: [Direction; 2],
    /// The direction of the batch under way and how many it has dispatched.
    batch: Option<(usize, u32)>,
    starved: u32,
    seq: u64,
}

impl Deadline {
    /// A deadline scheduler with Linux's defaults for the given parameters.
    pub fn new(
        read_expire: Nanos,
        write_expire: Nanos,
        fifo_batch: u32,
        writes_starved: u32,
        max_merge_bytes: u64,
    ) -> Deadline {
        Deadline {
            expire: [read_expire, write_expire],
            fifo_batch,
            writes_starved,
            max_merge_bytes,
            dirs: Default::default(),
            batch: None,
            starved: 0,
            seq: 0,
        }
    }

    pub(crate) fn from_tunables(t: &mut Tunables) -> Result<Deadline, PolicyError> {
        let day = 86_400_000;
        Ok(Deadline::new(
            Nanos::from_millis(t.u64_in("read_expire_ms", 1, day)?),
            Nanos::from_millis(t.u64_in("write_expire_ms", 1, day)?),
            t.u64_in("fifo_batch", 1, 1024)? as u32,
            t.u64_in("writes_starved", 0, 1024)? as u32,
            t.u64_in("max_merge_bytes", 0, 1 << 30)?,
        ))
    }

    /// Chooses the direction of a new batch: reads first, unless writes have starved long enough.
    fn choose(&mut self) -> Option<usize> {
        let reads = !self.dirs[READ].sorted.is_empty();
        let writes = !self.dirs[WRITE].sorted.is_empty();
        match (reads, writes) {
            (true, true) if self.starved >= self.writes_starved => {
                self.starved = 0;
                Some(WRITE)
            }
            (true, _) => {
                if writes {
                    self.starved += 1;
                }
                Some(READ)
            }
            (false, true) => {
                self.starved = 0;
                Some(WRITE)
            }
            (false, false) => None,
        }
    }

    /// Takes the request at `key` of direction `d` (and what merges with it).
    fn take(&mut self, d: usize, key: SortKey) -> crate::Batch {
        let dir = &mut self.dirs[d];
        let fifo = &mut dir.fifo;
        let batch = dir
            .sorted
            .take_batch(key, self.max_merge_bytes, usize::MAX, |k, _| {
                fifo.remove(&k.2);
            });
        dir.head = (batch.head().file, batch.end());
        batch
    }
}

impl Deadline {
    /// The queued read of `job` in `file` nearest after `pos` within `distance` bytes (for
    /// anticipation), if any.
    pub(crate) fn read_near(
        &self,
        job: crate::JobId,
        file: FileId,
        pos: u64,
        distance: u64,
    ) -> Option<SortKey> {
        let reads = &self.dirs[READ].sorted;
        reads
            .in_range(file, pos, pos.saturating_add(distance))
            .chain(reads.in_range(file, pos.saturating_sub(distance), pos.saturating_sub(1)))
            .find(|(_, r)| r.job == job)
            .map(|(k, _)| *k)
    }

    /// True if the oldest queued request of either direction is past due at `now`.
    pub(crate) fn any_expired(&self, now: Nanos) -> bool {
        self.dirs.iter().any(|d| {
            d.fifo
                .first_key_value()
                .is_some_and(|(_, &(due, _))| due <= now)
        })
    }

    /// Dispatches the queued read at `key` as the start of a read batch.
    pub(crate) fn take_read(&mut self, key: SortKey) -> crate::Batch {
        self.batch = Some((READ, 1));
        self.take(READ, key)
    }
}

impl Default for Deadline {
    /// Linux's defaults: reads due in 500 ms, writes in 5 s, batches of 16, writes starved twice.
    fn default() -> Deadline {
        Deadline::new(
            Nanos::from_millis(500),
            Nanos::from_millis(5000),
            16,
            2,
            1 << 20,
        )
    }
}

impl Policy for Deadline {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enqueue(&mut self, req: Request, now: Nanos) {
        self.seq += 1;
        let d = direction(req.op);
        let key = self.dirs[d].sorted.insert(self.seq, req);
        self.dirs[d]
            .fifo
            .insert(self.seq, (now + self.expire[d], key));
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        // Continue the batch under way along its sweep.
        if let Some((d, n)) = self.batch {
            if n < self.fifo_batch {
                if let Some(key) = self.dirs[d].sorted.next_at_or_after(self.dirs[d].head) {
                    self.batch = Some((d, n + 1));
                    return Dispatch::Ready(self.take(d, key));
                }
            }
        }
        let Some(d) = self.choose() else {
            self.batch = None;
            return Dispatch::Idle;
        };
        let dir = &self.dirs[d];
        let (&_, &(due, oldest)) = dir.fifo.first_key_value().expect("direction is not empty");
        let key = match dir.sorted.next_at_or_after(dir.head) {
            Some(next) if due > now => next,
            _ => oldest,
        };
        self.batch = Some((d, 1));
        Dispatch::Ready(self.take(d, key))
    }

    fn queued(&self) -> usize {
        self.dirs[READ].sorted.len() + self.dirs[WRITE].sorted.len()
    }

    fn drain(&mut self) -> Vec<Request> {
        let mut out = Vec::with_capacity(self.queued());
        for dir in &mut self.dirs {
            dir.fifo.clear();
            out.extend(dir.sorted.drain().map(|(_, r)| r));
        }
        self.batch = None;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{head_at, request};
    use crate::Op;

    /// The head of the batch `p` dispatches at `now` ms.
    fn next(p: &mut Deadline, now: u64) -> Request {
        head_at(p, Nanos::from_millis(now))
    }

    #[test]
    fn reads_first_but_writes_get_a_batch_after_starving() {
        let mut p = Deadline::new(Nanos::from_millis(500), Nanos::from_millis(5000), 2, 2, 0);
        for i in 0..6 {
            p.enqueue(request(i, 1, Op::Read, 1, i * 100, 10), Nanos::ZERO);
            p.enqueue(request(100 + i, 2, Op::Write, 2, i * 100, 10), Nanos::ZERO);
        }
        let ops: Vec<Op> = (0..12).map(|_| next(&mut p, 0).op).collect();
        use Op::{Read as R, Write as W};
        // Batches of 2; two read batches may pass over waiting writes, then a write batch goes.
        assert_eq!(ops, vec![R, R, R, R, W, W, R, R, W, W, W, W]);
    }

    #[test]
    fn an_expired_request_interrupts_the_sweep() {
        let mut p = Deadline::new(Nanos::from_millis(100), Nanos::from_millis(100), 1, 2, 0);
        p.enqueue(request(1, 1, Op::Read, 1, 0, 10), Nanos::ZERO); // old, low offset
        assert_eq!(next(&mut p, 0).id.0, 1);
        p.enqueue(request(2, 1, Op::Read, 1, 5, 10), Nanos::ZERO); // behind the head
        p.enqueue(request(3, 1, Op::Read, 1, 500, 10), Nanos::from_millis(150));
        // At t=150 request 2 (due at 100) has expired: it goes before the sweep's next (3).
        assert_eq!(next(&mut p, 150).id.0, 2);
        assert_eq!(next(&mut p, 150).id.0, 3);
    }
}
