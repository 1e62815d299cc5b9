//! What a worker receives: the batch, its payloads and the completion token.

use std::fmt;
use std::sync::Arc;

use iosets_types::{Batch, JobId, Nanos, Op, Outcome, Request, RequestId};

use crate::why::Splits;

/// The scheduler side of a completion token (type-erased so that [`Completion`] does not carry the
/// payload type).
pub(crate) trait Sink: Send + Sync {
    /// The batch `batch`, dispatched as `from` says, ended with `outcome`.
    fn finish(&self, batch: &Batch, from: &Dispatched, outcome: Outcome);
}

/// Who dispatched a batch and when: what its completion reports back with it.
pub(crate) struct Dispatched {
    /// The policy instance that dispatched it.
    pub(crate) generation: u64,
    /// That policy's name.
    pub(crate) policy: &'static str,
    /// When the policy dispatched it.
    pub(crate) at: Nanos,
    /// When it was handed to a worker: later than `at` when it waited for a slot of the
    /// in-service limit.
    pub(crate) handed_at: Nanos,
    /// Its requests' waits by cause, in batch order.
    pub(crate) splits: Splits,
}

/// The answer to [`crate::Scheduler::next_timeout`] and [`crate::Scheduler::try_next`].
#[derive(Debug)]
#[must_use]
// `Work` is the common answer and is moved once, to the worker: boxing it would cost an
// allocation per dispatched request to save a few hundred bytes of stack on the rare answers.
#[allow(clippy::large_enum_variant)]
pub enum Next<T> {
    /// A batch to serve.
    Work(Work<T>),
    /// Nothing could be handed out before the timeout (for `try_next`: nothing can go right now).
    TimedOut,
    /// The scheduler is shut down and nothing is left queued.
    Shutdown,
}

impl<T> Next<T> {
    /// The work, if any.
    pub fn work(self) -> Option<Work<T>> {
        match self {
            Next::Work(w) => Some(w),
            Next::TimedOut | Next::Shutdown => None,
        }
    }
}

/// One dispatched batch: the requests, their payloads (one per request, in batch order) and the
/// token that must answer it.
///
/// Dropping a `Work` without completing it fails the batch as [`Outcome::Abandoned`] (see
/// [`Completion`]).
pub struct Work<T> {
    payloads: Vec<T>,
    completion: Completion,
}

impl<T> Work<T> {
    pub(crate) fn new(payloads: Vec<T>, completion: Completion) -> Work<T> {
        debug_assert_eq!(payloads.len(), completion.batch.len());
        Work {
            payloads,
            completion,
        }
    }

    /// The batch to serve.
    pub fn batch(&self) -> &Batch {
        &self.completion.batch
    }

    /// The batch's id (its first request's id).
    pub fn id(&self) -> RequestId {
        self.completion.batch.id()
    }

    /// The payloads, one per request of [`Work::batch`], in the same order.
    pub fn payloads(&self) -> &[T] {
        &self.payloads
    }

    /// The payloads, mutably (to fill a read buffer, for example).
    pub fn payloads_mut(&mut self) -> &mut [T] {
        &mut self.payloads
    }

    /// Each request with its payload, in batch order.
    pub fn iter(&self) -> impl Iterator<Item = (&Request, &T)> + '_ {
        self.completion.batch.requests().zip(self.payloads.iter())
    }

    /// The token, for inspection.
    pub fn completion(&self) -> &Completion {
        &self.completion
    }

    /// Splits the work into its payloads and its token, to answer the requests and complete the
    /// batch at different moments.
    pub fn into_parts(self) -> (Vec<T>, Completion) {
        (self.payloads, self.completion)
    }

    /// Completes the batch with `outcome` and gives the payloads back (to reply through them).
    pub fn complete(self, outcome: Outcome) -> Vec<T> {
        let (payloads, completion) = self.into_parts();
        completion.complete(outcome);
        payloads
    }
}

impl<T> fmt::Debug for Work<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Work")
            .field("batch", self.batch())
            .field("payloads", &self.payloads.len())
            .finish()
    }
}

/// The token of one dispatched batch. Use [`Completion::complete`] exactly once; it consumes the
/// token.
///
/// Dropping the token unanswered completes the batch as [`Outcome::Abandoned`], logs a warning and
/// counts every request of it as failed: a dispatched request is failed, never lost. The token holds
/// the scheduler's shared state alive, so it may be completed after every [`crate::Scheduler`]
/// handle is gone.
pub struct Completion {
    sink: Arc<dyn Sink>,
    batch: Batch,
    from: Dispatched,
    answered: bool,
}

impl Completion {
    pub(crate) fn new(sink: Arc<dyn Sink>, batch: Batch, from: Dispatched) -> Completion {
        Completion {
            sink,
            batch,
            from,
            answered: false,
        }
    }

    /// The batch this token answers.
    pub fn batch(&self) -> &Batch {
        &self.batch
    }

    /// The batch's id.
    pub fn id(&self) -> RequestId {
        self.batch.id()
    }

    /// The name of the policy that dispatched the batch.
    pub fn policy(&self) -> &'static str {
        self.from.policy
    }

    /// When the batch was dispatched, on the scheduler's clock.
    pub fn dispatched_at(&self) -> Nanos {
        self.from.at
    }

    /// Reports how the batch ended: counts it, records statistics, wakes waiting workers and calls
    /// the completion listener once per request (outside the scheduler lock, on this thread).
    pub fn complete(mut self, outcome: Outcome) {
        self.answer(outcome);
    }

    /// Tells the scheduler how the batch ended; the token is answered.
    fn answer(&mut self, outcome: Outcome) {
        self.answered = true;
        self.sink.finish(&self.batch, &self.from, outcome);
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if !self.answered {
            tracing::warn!(
                batch = %self.batch.id(),
                job = %self.batch.head().job,
                requests = self.batch.len(),
                "completion token dropped unanswered; failing the batch as abandoned"
            );
            self.answer(Outcome::Abandoned);
        }
    }
}

impl fmt::Debug for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completion")
            .field("batch", &self.batch.id())
            .field("requests", &self.batch.len())
            .field("dispatched_at", &self.from.at)
            .finish()
    }
}

/// How one original request ended; given to the completion listener
/// ([`crate::Scheduler::set_listener`]) once per request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompletionEvent {
    /// The request.
    pub id: RequestId,
    /// Its job.
    pub job: JobId,
    /// Read, write or other.
    pub op: Op,
    /// The batch it was served in (the batch's first request id; equal to `id` when not merged).
    pub batch: RequestId,
    /// Bytes moved for this request: on [`Outcome::Done`] the batch's bytes are given to its
    /// requests in order (a short transfer shortens the last ones); zero otherwise.
    pub bytes: u64,
    /// The batch's outcome.
    pub outcome: Outcome,
    /// Dispatch time − arrival time.
    pub queue_wait: Nanos,
    /// Completion time − dispatch time.
    pub service_time: Nanos,
}

/// The bytes each request of `batch` moved, given the batch's `outcome`.
pub(crate) fn moved_bytes(
    batch: &Batch,
    outcome: Outcome,
) -> impl Iterator<Item = (&Request, u64)> + '_ {
    let mut left = if let Outcome::Done { bytes } = outcome {
        bytes
    } else {
        0
    };
    batch.requests().map(move |r| {
        let moved = r.len.min(left);
        left -= moved;
        (r, moved)
    })
}
