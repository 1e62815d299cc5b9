//! `mlf`: AGIOS' multilevel feedback (MLF, the "asynchronous aIOLi").
//!
//! Requests are kept per (file, direction), sorted by offset. Files are visited in round robin (file
//! id order); one visit serves at most one batch. Every request carries a quantum factor that grows
//! each time its queue is visited: 0, 1, 2, 4, 8, … A request may go once `factor × quantum ≥ its
//! length` (`quantum_bytes`, AGIOS `mlf_quantum`, default 8192): a request up to one quantum goes on
//! its first visit, a request of `L` bytes after `1 + ceil(log2(L / quantum))` visits. A visit serves
//! the first eligible request of the file's reads in offset order (possibly skipping a large head
//! for a smaller one behind it), else of its writes, merged with up to `max_aggregation` contiguous
//! requests. Small requests flow; large ones wait a few rounds, without starving.
//!
//! Waiting heuristics (AGIOS `waiting_common.c`, shared with aIOLi): when a queue has just gone
//! backwards, its next request is expected where the last one ended; a candidate beyond that point
//! makes the whole file wait `waiting_time_us` (default 900 µs) for the expected request. When the
//! last batch was a bigger aggregation than the candidate and the candidate lies after it, the file
//! waits too, hoping to aggregate again. Each trigger fires once. While a file waits its factors keep
//! growing and other files are served; if every file with requests waits, `dispatch` answers
//! `NotBefore(the earliest end of a wait)`. AGIOS counts waits down and subtracts elapsed time more
//! than once (so its waits end early); we keep a deadline per file, the intent.

use std::collections::BTreeMap;

use crate::sorted::{direction, SortKey, SortedQueue};
use crate::tunables::{TunableSpec, Tunables};
use crate::{Batch, Dispatch, FileId, Nanos, Policy, PolicyError, Request};
use iosets_types::hash::IdMap;

/// Registry name.
pub const NAME: &str = "mlf";
/// Tunables of `mlf`.
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "quantum_bytes",
        default: "8192",
        help: "AGIOS mlf_quantum: bytes a request may move per unit of its factor (1 .. 1 GiB)",
    },
    TunableSpec {
        name: "max_aggregation",
        default: "16",
        help: "most requests merged into one batch (1 .. 1024)",
    },
    WAITING_TIME,
];

/// The waiting time tunable, shared with aIOLi.
pub(crate) const WAITING_TIME: TunableSpec = TunableSpec {
    name: "waiting_time_us",
    default: "900",
    help: "AGIOS waiting_time: how long a file waits for an expected contiguous request (µs, 0 = never, up to 1 s)",
};

/// The factor after `visits` visits: 0, 1, 2, 4, …
pub(crate) fn factor(visits: u64) -> u64 {
    match visits {
        0 => 0,
        k => 1u64 << (k - 1).min(62),
    }
}

/// AGIOS' waiting heuristics state of one queue (`waiting_common.c`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Shift {
    last_start: u64,
    last_end: u64,
    predicted: Option<u64>,
    last_aggregation: usize,
}

impl Shift {
    /// AGIOS `check_selection`: true if a candidate batch starting at `offset` with `count`
    /// requests should make its file wait. Each trigger is consumed once.
    pub(crate) fn should_wait(&mut self, offset: u64, count: usize) -> bool {
        if let Some(p) = self.predicted.take() {
            return offset > p;
        }
        if offset > self.last_end && self.last_aggregation > count {
            self.last_aggregation = 0;
            return true;
        }
        false
    }

    /// AGIOS `waiting_algorithms_postprocess`, after `batch` was handed out.
    pub(crate) fn served(&mut self, batch: &Batch) {
        let (start, end) = (batch.head().offset, batch.end());
        self.last_end = end;
        if start < self.last_start && self.predicted.is_none() {
            self.predicted = Some(end);
        }
        self.last_start = start;
        self.last_aggregation = batch.len();
    }
}

/// How many idle files keep their waiting-heuristics state (and aIOLi quanta) for when they come back.
const REMEMBERED_FILES: usize = 4096;

/// Per-file state kept while a file has no request, so that a synchronous reader — one request at a
/// time, its queue empty in between — still feeds the heuristics. Bounded: past
/// `REMEMBERED_FILES` idle files, an arbitrary one is forgotten.
#[derive(Debug)]
pub(crate) struct Remembered<T>(IdMap<FileId, T>);

impl<T> Default for Remembered<T> {
    fn default() -> Self {
        Remembered(IdMap::default())
    }
}

impl<T> Remembered<T> {
    pub(crate) fn keep(&mut self, file: FileId, state: T) {
        if self.0.len() >= REMEMBERED_FILES {
            if let Some(&victim) = self.0.keys().next() {
                self.0.remove(&victim);
            }
        }
        self.0.insert(file, state);
    }

    pub(crate) fn take(&mut self, file: FileId) -> Option<T> {
        self.0.remove(&file)
    }

    /// `file`'s entry in `files`; a new one is given back, by `restore`, what was kept of the
    /// file while it was idle.
    pub(crate) fn entry<'a, F: Default>(
        &mut self,
        files: &'a mut BTreeMap<FileId, F>,
        file: FileId,
        restore: impl FnOnce(&mut F, T),
    ) -> &'a mut F {
        files.entry(file).or_insert_with(|| {
            let mut f = F::default();
            if let Some(kept) = self.take(file) {
                restore(&mut f, kept);
            }
            f
        })
    }
}

/// One direction of one file, with the visit count at which each request arrived.
#[derive(Debug, Default)]
pub(crate) struct FactorQueue {
    pub(crate) sorted: SortedQueue,
    /// Arrival sequence → visits of this queue when the request arrived.
    pub(crate) arrived_at: IdMap<u64, u64>,
    pub(crate) visits: u64,
    pub(crate) shift: Shift,
}

impl FactorQueue {
    pub(crate) fn insert(&mut self, seq: u64, req: Request) {
        self.sorted.insert(seq, req);
        self.arrived_at.insert(seq, self.visits);
    }

    /// True if the request at `key` of `len` bytes has a big enough factor.
    pub(crate) fn eligible(&self, key: &SortKey, len: u64, quantum: u64) -> bool {
        let since = self.visits - self.arrived_at[&key.2];
        u128::from(factor(since)) * u128::from(quantum) >= u128::from(len)
    }

    /// Runs AGIOS' check on the candidate at `key`: true if its file should wait.
    pub(crate) fn should_wait(&mut self, key: SortKey, max_aggregation: usize) -> bool {
        let count = self.sorted.batch_len(key, u64::MAX, max_aggregation);
        self.shift.should_wait(key.1, count)
    }

    /// Every queued request, in position order.
    pub(crate) fn into_requests(mut self) -> impl Iterator<Item = Request> {
        self.sorted.drain().map(|(_, r)| r)
    }

    /// Takes the batch at `key` and records it for the waiting heuristics.
    pub(crate) fn take(&mut self, key: SortKey, max_aggregation: usize) -> Batch {
        let arrived_at = &mut self.arrived_at;
        let batch = self
            .sorted
            .take_batch(key, u64::MAX, max_aggregation, |k, _| {
                arrived_at.remove(&k.2);
            });
        self.shift.served(&batch);
        batch
    }
}

/// What one visit to a file gave.
enum Visit {
    Served(Batch),
    Waiting,
    Nothing,
}

/// A file: its reads and writes, and until when it waits.
#[derive(Debug, Default)]
struct MlfFile {
    queues: [FactorQueue; 2],
    wait_until: Option<Nanos>,
}

/// Multilevel feedback over files.
#[derive(Debug)]
pub struct Mlf {
    quantum: u64,
    max_aggregation: usize,
    waiting_time: Nanos,
    files: BTreeMap<FileId, MlfFile>,
    idle: Remembered<[Shift; 2]>,
    cursor: Option<FileId>,
    len: usize,
    seq: u64,
}

impl Mlf {
    /// MLF with `quantum` bytes per factor unit, `max_aggregation` requests per batch, and files
    /// waiting `waiting_time` on AGIOS' heuristics (zero: never).
    pub fn new(quantum: u64, max_aggregation: usize, waiting_time: Nanos) -> Mlf {
        Mlf {
            quantum,
            max_aggregation,
            waiting_time,
            files: BTreeMap::new(),
            idle: Remembered::default(),
            cursor: None,
            len: 0,
            seq: 0,
        }
    }

    pub(crate) fn from_tunables(t: &mut Tunables) -> Result<Mlf, PolicyError> {
        Ok(Mlf::new(
            t.u64_in("quantum_bytes", 1, 1 << 30)?,
            t.u64_in("max_aggregation", 1, 1024)? as usize,
            Nanos::from_micros(t.u64_in("waiting_time_us", 0, 1_000_000)?),
        ))
    }

    /// One visit to `file`: grows the factors and serves its first eligible request, unless the
    /// file waits.
    fn visit(&mut self, file: FileId, now: Nanos) -> Visit {
        let f = self.files.get_mut(&file).expect("visited file exists");
        let waiting = f.wait_until.is_some_and(|t| now < t);
        if !waiting {
            f.wait_until = None;
        }
        for q in f.queues.iter_mut() {
            if q.sorted.is_empty() {
                continue;
            }
            q.visits += 1;
            let pick = q
                .sorted
                .in_range(file, 0, u64::MAX)
                .find(|(k, r)| q.eligible(k, r.len, self.quantum))
                .map(|(k, _)| *k);
            let Some(key) = pick else { continue };
            if waiting {
                return Visit::Waiting;
            }
            if self.waiting_time > Nanos::ZERO && q.should_wait(key, self.max_aggregation) {
                f.wait_until = Some(now + self.waiting_time);
                return Visit::Waiting;
            }
            return Visit::Served(q.take(key, self.max_aggregation));
        }
        if waiting {
            Visit::Waiting
        } else {
            Visit::Nothing
        }
    }
}

impl Policy for Mlf {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enqueue(&mut self, req: Request, _now: Nanos) {
        self.seq += 1;
        self.len += 1;
        let d = direction(req.op);
        let f = self
            .idle
            .entry(&mut self.files, req.file, |f: &mut MlfFile, shifts| {
                f.queues[0].shift = shifts[0];
                f.queues[1].shift = shifts[1];
            });
        f.queues[d].insert(self.seq, req);
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        if self.len == 0 {
            return Dispatch::Idle;
        }
        // Round robin over files; factors double every round, so unless every file waits this ends
        // within 1 + log2(longest request / quantum) rounds.
        let (mut visited, mut waiting) = (0, 0);
        loop {
            let next = match self.cursor {
                Some(c) => self.files.range(FileId(c.0.saturating_add(1))..).next(),
                None => None,
            }
            .or_else(|| self.files.iter().next())
            .map(|(f, _)| *f)
            .expect("files hold the queued requests");
            self.cursor = Some(next);
            match self.visit(next, now) {
                Visit::Served(batch) => {
                    self.len -= batch.len();
                    if self.files[&next].queues.iter().all(|q| q.sorted.is_empty()) {
                        let f = self.files.remove(&next).expect("file");
                        self.idle.keep(next, [f.queues[0].shift, f.queues[1].shift]);
                    }
                    return Dispatch::Ready(batch);
                }
                Visit::Waiting => waiting += 1,
                Visit::Nothing => {}
            }
            visited += 1;
            if visited == self.files.len() {
                if waiting == visited {
                    let until = self.files.values().filter_map(|f| f.wait_until).min();
                    return Dispatch::NotBefore(until.expect("waiting files have deadlines"));
                }
                (visited, waiting) = (0, 0);
            }
        }
    }

    fn queued(&self) -> usize {
        self.len
    }

    fn drain(&mut self) -> Vec<Request> {
        self.len = 0;
        std::mem::take(&mut self.files)
            .into_values()
            .flat_map(|f| f.queues.into_iter().flat_map(FactorQueue::into_requests))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::request;
    use crate::Op;

    #[test]
    fn large_requests_wait_for_their_factor_small_ones_flow() {
        // The spec's example: Q = 8 KiB; file 1 has one 64 KiB read, file 2 four 4 KiB reads far
        // apart. File 2's requests go one per round; file 1's goes on its 4th visit (factor 8).
        let mut p = Mlf::new(8192, 16, Nanos::ZERO);
        p.enqueue(request(1, 1, Op::Read, 1, 0, 65_536), Nanos::ZERO);
        for i in 0..4 {
            p.enqueue(request(10 + i, 1, Op::Read, 2, i << 20, 4096), Nanos::ZERO);
        }
        let mut order = Vec::new();
        while let Dispatch::Ready(b) = p.dispatch(Nanos::ZERO) {
            order.push(b.id().0);
        }
        assert_eq!(order, vec![10, 11, 12, 1, 13]);
    }

    #[test]
    fn a_small_request_behind_a_large_head_goes_first() {
        let mut p = Mlf::new(8192, 16, Nanos::ZERO);
        p.enqueue(request(1, 1, Op::Read, 1, 0, 1 << 20), Nanos::ZERO);
        p.enqueue(request(2, 1, Op::Read, 1, 2 << 20, 4096), Nanos::ZERO);
        let Dispatch::Ready(b) = p.dispatch(Nanos::ZERO) else {
            panic!()
        };
        assert_eq!(b.id().0, 2);
    }

    #[test]
    fn after_a_backward_jump_a_gap_makes_the_file_wait_for_the_expected_request() {
        // The spec's shift test: 4 KiB reads, each enqueued after the previous left: 1 MiB, then 0
        // (backwards: the next is expected at 4 KiB). A head at 100 KiB waits; 4 KiB goes at once.
        let k = 4096;
        let wait = Nanos::from_micros(900);
        let mut p = Mlf::new(8192, 16, wait);
        let take = |p: &mut Mlf, id: u64, off: u64, now: Nanos| {
            p.enqueue(request(id, 1, Op::Read, 1, off, k), now);
            p.dispatch(now)
        };
        assert!(matches!(
            take(&mut p, 1, 1 << 20, Nanos(0)),
            Dispatch::Ready(_)
        ));
        assert!(matches!(take(&mut p, 2, 0, Nanos(1)), Dispatch::Ready(_)));
        let now = Nanos(2);
        assert_eq!(
            take(&mut p, 3, 100 * k, now),
            Dispatch::NotBefore(now + wait)
        );
        // The expected request arrives during the wait: once the wait ends, both go in offset order.
        p.enqueue(request(4, 1, Op::Read, 1, k, k), Nanos(3));
        assert!(matches!(p.dispatch(Nanos(3)), Dispatch::NotBefore(_)));
        let Dispatch::Ready(b) = p.dispatch(now + wait) else {
            panic!()
        };
        assert_eq!(b.id().0, 4);

        // Same history, but the expected request is the next one: no wait.
        let mut p = Mlf::new(8192, 16, wait);
        assert!(matches!(
            take(&mut p, 1, 1 << 20, Nanos(0)),
            Dispatch::Ready(_)
        ));
        assert!(matches!(take(&mut p, 2, 0, Nanos(1)), Dispatch::Ready(_)));
        assert!(matches!(take(&mut p, 3, k, Nanos(2)), Dispatch::Ready(_)));
    }
}
