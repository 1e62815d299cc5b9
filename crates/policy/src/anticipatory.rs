//! `anticipatory`: deadline plus anticipation (Linux's former anticipatory scheduler, seed 002).
//!
//! After a read completes, the scheduler waits a short while (`antic_expire_ms`, default 6 ms) for
//! the same job's next read near where the last one ended (within `antic_distance_bytes`) instead of
//! seeking away to serve someone else: a synchronous reader sends its next read right after the
//! previous one returns, and serving it keeps the disk head where it is. When such a read arrives in
//! the window it goes at once; when the window closes, or any queued request of deadline's FIFOs is
//! past due, anticipation ends and deadline decides. The scheduler only holds the device while
//! nothing else is in service: with other requests in flight (several service slots) there is no
//! head position to protect, and deadline dispatches as usual. Everything else is
//! [`crate::deadline`].
//!
//! The wait is bounded: `dispatch` answers `NotBefore(completion + antic_expire)` at most, so the
//! device never idles longer than the window while work is queued.

use crate::deadline::{self, Deadline};
use crate::tunables::{TunableSpec, Tunables};
use crate::{
    Batch, Dispatch, FileId, JobId, Nanos, Op, Outcome, Policy, PolicyError, Request, RequestId,
};
use iosets_types::hash::IdMap;

/// Registry name.
pub const NAME: &str = "anticipatory";
/// Tunables of `anticipatory`: deadline's, plus the anticipation window.
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "antic_expire_ms",
        default: "6",
        help: "longest wait for the same job's next nearby read (ms, 1 .. 1000)",
    },
    TunableSpec {
        name: "antic_distance_bytes",
        default: "1048576",
        help: "how near the last read's end the next read must start (bytes)",
    },
    deadline::SPECS[0],
    deadline::SPECS[1],
    deadline::SPECS[2],
    deadline::SPECS[3],
    deadline::SPECS[4],
];

/// What the scheduler is waiting for.
#[derive(Clone, Copy, Debug)]
struct Anticipation {
    job: JobId,
    file: FileId,
    pos: u64,
    until: Nanos,
}

/// Deadline with anticipation.
#[derive(Debug)]
pub struct Anticipatory {
    deadline: Deadline,
    expire: Nanos,
    distance: u64,
    anticipating: Option<Anticipation>,
    /// In-service batch → (job, op, file, end).
    in_service: IdMap<RequestId, (JobId, Op, FileId, u64)>,
}

impl Anticipatory {
    /// Anticipation of `expire` within `distance` bytes on top of `deadline`.
    pub fn new(deadline: Deadline, expire: Nanos, distance: u64) -> Anticipatory {
        Anticipatory {
            deadline,
            expire,
            distance,
            anticipating: None,
            in_service: IdMap::default(),
        }
    }

    pub(crate) fn from_tunables(t: &mut Tunables) -> Result<Anticipatory, PolicyError> {
        let expire = Nanos::from_millis(t.u64_in("antic_expire_ms", 1, 1000)?);
        let distance = t.u64_in("antic_distance_bytes", 0, u64::MAX)?;
        Ok(Anticipatory::new(
            Deadline::from_tunables(t)?,
            expire,
            distance,
        ))
    }

    fn record(&mut self, batch: Batch) -> Dispatch {
        let h = batch.head();
        self.in_service
            .insert(batch.id(), (h.job, h.op, h.file, batch.end()));
        Dispatch::Ready(batch)
    }
}

impl Policy for Anticipatory {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enqueue(&mut self, req: Request, now: Nanos) {
        self.deadline.enqueue(req, now);
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        if let Some(a) = self.anticipating {
            if let Some(key) = self.deadline.read_near(a.job, a.file, a.pos, self.distance) {
                self.anticipating = None;
                let batch = self.deadline.take_read(key);
                return self.record(batch);
            }
            if now < a.until && !self.deadline.any_expired(now) && self.in_service.is_empty() {
                return Dispatch::NotBefore(a.until);
            }
            self.anticipating = None;
        }
        match self.deadline.dispatch(now) {
            Dispatch::Ready(batch) => self.record(batch),
            other => other,
        }
    }

    fn complete(&mut self, id: RequestId, outcome: Outcome, now: Nanos) {
        let Some((job, op, file, end)) = self.in_service.remove(&id) else {
            return;
        };
        self.deadline.complete(id, outcome, now);
        if op == Op::Read {
            self.anticipating = Some(Anticipation {
                job,
                file,
                pos: end,
                until: now + self.expire,
            });
        }
    }

    fn queued(&self) -> usize {
        self.deadline.queued()
    }

    fn drain(&mut self) -> Vec<Request> {
        self.anticipating = None;
        self.deadline.drain()
    }
}
