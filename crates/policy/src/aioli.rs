//! `aioli`: AGIOS' aIOLi (Lebre et al., Cluster 2006, as adapted in AGIOS).
//!
//! Requests are kept per (file, direction), sorted by offset. Every dispatch that starts a new visit
//! is a *scan*; each scan grows the quantum factor of every request of the files that are not waiting
//! (0, 1, 2, 4, …, as in [`crate::mlf`]). A file offers its reads' first request in offset order if
//! its factor covers its length (`factor × quantum_bytes ≥ len`), else its writes' first request
//! likewise. Among the files that offer one, the request that arrived first wins (first come, first
//! served across files; offset order inside a file; reads before writes inside a file). The chosen
//! queue is then served for its quantum: consecutive batches from its head while they fit in the bytes
//! it was granted (the first always goes). The next quantum follows how much of this one was used —
//! ≥ 175 %: doubled, ≥ 125 %: × 1.5, ≥ 75 %: kept, else halved — starting at 0 (one batch) and
//! bounded by `max_aggregation × quantum_bytes`. Batches merge up to `max_aggregation` contiguous
//! requests.
//!
//! Before a chosen head goes, AGIOS' waiting heuristics run (see [`crate::mlf`]): the file may wait
//! `waiting_time_us` for an expected contiguous request. A waiting file is skipped by scans (its
//! factors do not grow); if only waiting files have requests, `dispatch` answers
//! `NotBefore(the earliest end of a wait)`.
//!
//! Differences from AGIOS' code, on purpose: its quantum bound compares bytes with a request count
//! (16 bytes), which after two visits leaves one batch per visit; we bound by
//! `max_aggregation × quantum_bytes`, the intent. Its waits end early (elapsed time subtracted more
//! than once); we keep deadlines. The factor grows per scan for both directions of a file, not only
//! for writes when the reads had nothing to offer.

use std::collections::BTreeMap;

use crate::mlf::{FactorQueue, Remembered, Shift, WAITING_TIME};
use crate::sorted::direction;
use crate::tunables::{TunableSpec, Tunables};
use crate::{Dispatch, FileId, Nanos, Policy, PolicyError, Request};

/// Registry name.
pub const NAME: &str = "aioli";
/// Tunables of `aioli`.
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "quantum_bytes",
        default: "65536",
        help: "AGIOS aioli_quantum: bytes per unit of a request's factor, and the first granted quantum (1 .. 1 GiB)",
    },
    TunableSpec {
        name: "max_aggregation",
        default: "16",
        help: "most requests merged into one batch (1 .. 1024)",
    },
    WAITING_TIME,
];

/// A queue of one file and direction, with the quantum it gets on its next visit.
#[derive(Debug, Default)]
struct Queue {
    factors: FactorQueue,
    next_quantum: u64,
}

/// A file: its reads and writes, and until when it waits.
#[derive(Debug, Default)]
struct AioliFile {
    queues: [Queue; 2],
    wait_until: Option<Nanos>,
}

/// The visit under way: which queue, the bytes granted, the bytes used.
#[derive(Clone, Copy, Debug)]
struct Visit {
    file: FileId,
    dir: usize,
    granted: u64,
    used: u64,
}

/// What a scan found.
enum Scan {
    /// The offered head that arrived first: (file, direction).
    Pick(FileId, usize),
    /// Every file with requests waits; the earliest wait ends then.
    AllWaiting(Nanos),
    /// No head is eligible yet.
    Nothing,
}

/// aIOLi.
#[derive(Debug)]
pub struct Aioli {
    quantum: u64,
    max_aggregation: usize,
    waiting_time: Nanos,
    files: BTreeMap<FileId, AioliFile>,
    /// Idle files' heuristics state and next quanta.
    idle: Remembered<[(Shift, u64); 2]>,
    visit: Option<Visit>,
    len: usize,
    seq: u64,
}

impl Aioli {
    /// aIOLi with `quantum` bytes per factor unit, `max_aggregation` requests per batch, and files
    /// waiting `waiting_time` on AGIOS' heuristics (zero: never).
    pub fn new(quantum: u64, max_aggregation: usize, waiting_time: Nanos) -> Aioli {
        Aioli {
            quantum,
            max_aggregation,
            waiting_time,
            files: BTreeMap::new(),
            idle: Remembered::default(),
            visit: None,
            len: 0,
            seq: 0,
        }
    }

    pub(crate) fn from_tunables(t: &mut Tunables) -> Result<Aioli, PolicyError> {
        Ok(Aioli::new(
            t.u64_in("quantum_bytes", 1, 1 << 30)?,
            t.u64_in("max_aggregation", 1, 1024)? as usize,
            Nanos::from_micros(t.u64_in("waiting_time_us", 0, 1_000_000)?),
        ))
    }

    /// The next quantum after using `used` of `granted` bytes.
    fn adjust(&self, used: u64, granted: u64) -> u64 {
        let next = match used.saturating_mul(100).checked_div(granted) {
            None => self.quantum,
            Some(175..) => granted.saturating_mul(2),
            Some(125..) => granted.saturating_add(granted / 2),
            Some(75..) => granted,
            Some(_) => granted / 2,
        };
        let next = if next == 0 { self.quantum } else { next };
        next.min(self.quantum.saturating_mul(self.max_aggregation as u64))
    }

    /// Ends the visit under way, setting its queue's next quantum.
    fn end_visit(&mut self) {
        if let Some(v) = self.visit.take() {
            let next = self.adjust(v.used, v.granted);
            if let Some(f) = self.files.get_mut(&v.file) {
                f.queues[v.dir].next_quantum = next;
            }
        }
    }

    /// One scan: grows the factors of the files not waiting and finds the head to serve.
    fn scan(&mut self, now: Nanos) -> Scan {
        let mut best: Option<(u64, FileId, usize)> = None;
        let mut earliest_wait: Option<Nanos> = None;
        let mut any_free = false;
        for (&file, f) in self.files.iter_mut() {
            match f.wait_until {
                Some(t) if now < t => {
                    earliest_wait = Some(earliest_wait.map_or(t, |e| e.min(t)));
                    continue;
                }
                _ => f.wait_until = None,
            }
            any_free = true;
            for q in f.queues.iter_mut() {
                if !q.factors.sorted.is_empty() {
                    q.factors.visits += 1;
                }
            }
            let offer = (0..2).find_map(|d| {
                let fq = &f.queues[d].factors;
                let (k, r) = fq.sorted.in_range(file, 0, u64::MAX).next()?;
                fq.eligible(k, r.len, self.quantum)
                    .then_some((k.2, file, d))
            });
            if let Some(o) = offer {
                if best.is_none_or(|b| o.0 < b.0) {
                    best = Some(o);
                }
            }
        }
        match (best, any_free, earliest_wait) {
            (Some((_, file, dir)), _, _) => Scan::Pick(file, dir),
            (None, false, Some(t)) => Scan::AllWaiting(t),
            _ => Scan::Nothing,
        }
    }

    /// The head key of (file, dir).
    fn head(&self, file: FileId, dir: usize) -> Option<crate::sorted::SortKey> {
        let q = &self.files.get(&file)?.queues[dir].factors;
        q.sorted.in_range(file, 0, u64::MAX).next().map(|(k, _)| *k)
    }

    /// Sets `file` aside once it has no request (ending its visit), keeping its heuristics state
    /// and quanta among the bounded set of remembered idle files.
    fn forget_if_empty(&mut self, file: FileId) {
        if self.files[&file]
            .queues
            .iter()
            .all(|q| q.factors.sorted.is_empty())
        {
            if self.visit.is_some_and(|v| v.file == file) {
                self.end_visit();
            }
            let f = self.files.remove(&file).expect("file");
            let [r, w] = f.queues;
            self.idle.keep(
                file,
                [
                    (r.factors.shift, r.next_quantum),
                    (w.factors.shift, w.next_quantum),
                ],
            );
        }
    }

    fn serve(&mut self, file: FileId, dir: usize) -> crate::Batch {
        let key = self.head(file, dir).expect("served queue has a head");
        let q = &mut self
            .files
            .get_mut(&file)
            .expect("served file exists")
            .queues[dir]
            .factors;
        let batch = q.take(key, self.max_aggregation);
        self.len -= batch.len();
        batch
    }
}

impl Policy for Aioli {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enqueue(&mut self, req: Request, _now: Nanos) {
        self.seq += 1;
        self.len += 1;
        let d = direction(req.op);
        let f = self
            .idle
            .entry(&mut self.files, req.file, |f: &mut AioliFile, saved| {
                for (q, (shift, quantum)) in f.queues.iter_mut().zip(saved) {
                    q.factors.shift = shift;
                    q.next_quantum = quantum;
                }
            });
        f.queues[d].factors.insert(self.seq, req);
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        if self.len == 0 {
            self.end_visit();
            return Dispatch::Idle;
        }
        // Continue the visit under way while the queue's head fits in what is left of its quantum.
        if let Some(v) = self.visit {
            let fits = self.head(v.file, v.dir).is_some_and(|k| {
                let r = self.files[&v.file].queues[v.dir]
                    .factors
                    .sorted
                    .in_range(v.file, k.1, k.1)
                    .next();
                r.is_some_and(|(_, r)| v.used + r.len <= v.granted)
            });
            if fits {
                let batch = self.serve(v.file, v.dir);
                self.visit = Some(Visit {
                    used: v.used + batch.bytes(),
                    ..v
                });
                self.forget_if_empty(v.file);
                return Dispatch::Ready(batch);
            }
            self.end_visit();
        }
        // A new visit. Factors double every scan, so unless every file waits some head becomes
        // eligible within 1 + log2(longest request / quantum) scans.
        loop {
            let (file, dir) = match self.scan(now) {
                Scan::Pick(file, dir) => (file, dir),
                Scan::AllWaiting(t) => return Dispatch::NotBefore(t),
                Scan::Nothing => continue,
            };
            let key = self.head(file, dir).expect("picked queue has a head");
            let f = self.files.get_mut(&file).expect("picked file exists");
            if self.waiting_time > Nanos::ZERO
                && f.queues[dir].factors.should_wait(key, self.max_aggregation)
            {
                f.wait_until = Some(now + self.waiting_time);
                continue;
            }
            let granted = f.queues[dir].next_quantum;
            let batch = self.serve(file, dir);
            self.visit = Some(Visit {
                file,
                dir,
                granted,
                used: batch.bytes(),
            });
            self.forget_if_empty(file);
            return Dispatch::Ready(batch);
        }
    }

    fn queued(&self) -> usize {
        self.len
    }

    fn drain(&mut self) -> Vec<Request> {
        self.len = 0;
        self.visit = None;
        std::mem::take(&mut self.files)
            .into_values()
            .flat_map(|f| f.queues.into_iter().flat_map(|q| q.factors.into_requests()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::request;
    use crate::Op;

    #[test]
    fn first_come_first_served_across_files_offset_order_inside() {
        // The spec's example: f1 @300 (first), f2 @0, f1 @100; f1's head is @100 (arrived third), so
        // f2 @0 goes first, then f1 @100, then f1 @300.
        let mut p = Aioli::new(65_536, 16, Nanos::ZERO);
        p.enqueue(request(1, 1, Op::Read, 1, 300, 64), Nanos::ZERO);
        p.enqueue(request(2, 1, Op::Read, 2, 0, 64), Nanos::ZERO);
        p.enqueue(request(3, 1, Op::Read, 1, 100, 64), Nanos::ZERO);
        let mut order = Vec::new();
        while let Dispatch::Ready(b) = p.dispatch(Nanos::ZERO) {
            order.push(b.id().0);
        }
        assert_eq!(order, vec![2, 3, 1]);
    }

    #[test]
    fn quantum_grows_with_use() {
        let p = Aioli::new(1000, 16, Nanos::ZERO);
        assert_eq!(p.adjust(10, 0), 1000);
        assert_eq!(p.adjust(2000, 1000), 2000);
        assert_eq!(p.adjust(1300, 1000), 1500);
        assert_eq!(p.adjust(800, 1000), 1000);
        assert_eq!(p.adjust(100, 1000), 500);
        assert_eq!(
            p.adjust(100_000, 10_000),
            16_000,
            "bounded by max_aggregation × quantum"
        );
    }
}
