//! Helpers shared by the integration tests: bounded joins, request makers, exactly-once ledgers.
#![allow(dead_code)]

use iosets_types::{FileId, JobId};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use iosets_runtime::{Counted, Scheduler, Work};
use iosets_types::{Op, Outcome, Priority, Request};

/// Longest any test waits for its threads; a test that would hang fails instead.
pub const LIMIT: Duration = Duration::from_secs(120);

/// Joins `handles`, failing the test if they have not all finished within `limit`.
pub fn join_within<T: Send + 'static>(handles: Vec<JoinHandle<T>>, limit: Duration) -> Vec<T> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let out: Vec<thread::Result<T>> = handles.into_iter().map(JoinHandle::join).collect();
        let _ = tx.send(out);
    });
    let results = rx
        .recv_timeout(limit)
        .unwrap_or_else(|_| panic!("threads still running after {limit:?}"));
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|_| panic!("a test thread panicked")))
        .collect()
}

/// Builds a registered policy with default tunables.
pub fn policy(name: &str) -> Counted {
    Counted::build(name, &[]).unwrap_or_else(|e| panic!("{e}"))
}

/// A request by `job` of `len` bytes at `offset` in `file`, with no class, priority or phase.
pub fn request(job: u64, op: Op, file: u64, offset: u64, len: u64) -> Request {
    Request::builder(JobId(job), op)
        .file(FileId(file))
        .range(offset, len)
        .build()
}

/// A request of 4 KiB by `job`, at slot `i` of its file, with IO-SETS priority hints for several
/// sets: job % 8 == 7 carries no hint (a set of its own), the others are in sets 0..4
/// (priorities 1, 0.1, 0.01, 0.001).
pub fn hinted_request(job: u64, i: u64) -> Request {
    let op = if i % 3 == 0 { Op::Read } else { Op::Write };
    let mut r = Request::builder(JobId(job), op)
        .file(FileId(job))
        .range(i * 4096, 4096)
        .build();
    if job % 8 != 7 {
        r.priority = Priority::new(10f64.powi(-((job % 4) as i32)));
    }
    r
}

/// One flag per payload index; counts how often each was completed.
pub struct Ledger {
    seen: Vec<AtomicU8>,
}

impl Ledger {
    pub fn new(n: usize) -> Ledger {
        Ledger {
            seen: (0..n).map(|_| AtomicU8::new(0)).collect(),
        }
    }

    pub fn mark(&self, i: usize) {
        self.seen[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Panics unless every index was marked exactly once.
    pub fn assert_exactly_once(&self) {
        let mut missing = 0usize;
        let mut repeated = 0usize;
        for s in &self.seen {
            match s.load(Ordering::Relaxed) {
                0 => missing += 1,
                1 => {}
                _ => repeated += 1,
            }
        }
        assert_eq!(
            (missing, repeated),
            (0, 0),
            "requests never completed / completed more than once"
        );
    }
}

/// Serves `work` trivially: marks every payload in `ledger` and completes the batch as done.
pub fn serve(work: Work<u32>, ledger: &Ledger) {
    for &p in work.payloads() {
        ledger.mark(p as usize);
    }
    let bytes = work.batch().bytes();
    work.complete(Outcome::Done { bytes });
}

/// Spawns `n` workers that serve until `next` returns `None`; each returns the batches it served.
pub fn spawn_workers(
    sched: &Scheduler<u32>,
    n: usize,
    ledger: &std::sync::Arc<Ledger>,
) -> Vec<JoinHandle<u64>> {
    (0..n)
        .map(|_| {
            let sched = sched.clone();
            let ledger = ledger.clone();
            thread::spawn(move || {
                let mut batches = 0;
                while let Some(work) = sched.next() {
                    serve(work, &ledger);
                    batches += 1;
                }
                batches
            })
        })
        .collect()
}
