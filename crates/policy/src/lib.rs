//! Scheduling policies: which queued I/O request is served next.
//!
//! A policy is a deterministic state machine behind the [`Policy`] trait. Time is an argument
//! (`now`); a policy never reads a clock, sleeps, locks, spawns or does I/O. That is what lets the
//! server, the C library, the simulator and the tests drive the same code and get the same order.
//! Threads, timers and completion tokens belong to the `iosets-runtime` crate, not here.
//!
//! The contract:
//! - [`Policy::enqueue`] hands a request over;
//! - [`Policy::dispatch`] answers [`Dispatch::Ready`] with a [`Batch`] (one request, or several
//!   contiguous ones merged), [`Dispatch::NotBefore`] when a timer gates the next decision, or
//!   [`Dispatch::Idle`] when nothing can go now (nothing queued, or everything queued waits for a
//!   completion: IO-SETS keeps a set exclusive while its job has a request in service);
//! - [`Policy::complete`] reports how a dispatched batch ended (time slices, exclusivity and
//!   anticipation feed on it).
//!
//! **Work conservation**: a policy that holds a request which neither a timer nor an in-service
//! request gates never answers `Idle`. **Conservation of requests**: [`Counted`] wraps any policy,
//! keeps the counters `inserted / merged / dispatched / completed / withdrawn` and checks them
//! against the policy's own queue length; every request is dispatched exactly once, alone or merged
//! into exactly one batch.
//!
//! Policies are built by name with validated `key=value` tunables through [`registry::build`];
//! a bad name or value is an error listing the valid choices, never silently clamped.
#![deny(missing_docs)]

pub mod aioli;
pub mod anticipatory;
pub mod cfq;
pub mod deadline;
pub mod elevator;
mod error;
pub mod fairshare;
pub mod iosets;
pub mod mlf;
pub mod noop;
pub mod registry;
pub mod set10;
pub mod sjf;
mod sorted;
pub mod sw;
#[cfg(test)]
mod test_support;
pub mod timeorder;
pub mod tunables;
pub mod twins;
pub mod wf2q;
pub mod wfq;

use std::collections::HashMap;
use std::fmt;

pub use error::PolicyError;
pub use iosets_types::{
    Batch, ClassId, FileId, JobId, Nanos, Op, Outcome, Priority, Request, RequestId,
};
pub use registry::build;

/// A policy's answer to "what next?".
#[derive(Clone, Debug, PartialEq)]
pub enum Dispatch {
    /// Serve this batch now.
    Ready(Batch),
    /// Nothing may go before this time (a deadline, an anticipation window); ask again then, or
    /// earlier if a request arrives or completes.
    NotBefore(Nanos),
    /// Nothing can go until a request arrives or a dispatched one completes.
    Idle,
}

/// A queue that receives a share of the bandwidth by weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueueId {
    /// A job's own queue (`wfq` keyed by job; an IO-SETS job alone in a set of its own).
    Job(JobId),
    /// A caller-given class (`wfq` keyed by class).
    Class(ClassId),
    /// An IO-SETS set, named by the bits of its priority; its jobs take turns.
    Set(u64),
}

/// The weighted queue a request joins and that queue's weight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueueWeight {
    /// The queue.
    pub queue: QueueId,
    /// Its weight: while several queues are backlogged, each gets weight / Σ weights of the bytes.
    pub weight: f64,
}

/// A scheduling policy: the deterministic core the runtime, server, simulator and C library drive.
///
/// Implementors keep their own queues; [`Counted`] adds accounting around any of them.
pub trait Policy: Send + fmt::Debug {
    /// The registry name (`"wfq"`, `"iosets"`, ...).
    fn name(&self) -> &'static str;

    /// Takes a request. Its `arrival` is set by the caller.
    fn enqueue(&mut self, req: Request, now: Nanos);

    /// Picks what to serve next; see [`Dispatch`].
    fn dispatch(&mut self, now: Nanos) -> Dispatch;

    /// Number of requests queued (not yet dispatched).
    fn queued(&self) -> usize;

    /// Removes and returns every queued request, in the order they would have been considered,
    /// leaving in-service ones alone. Used to move a queue to another policy at run time.
    fn drain(&mut self) -> Vec<Request>;

    /// Feedback: the batch whose id is `id` ended with `outcome`. Default: ignored.
    fn complete(&mut self, id: RequestId, outcome: Outcome, now: Nanos) {
        let _ = (id, outcome, now);
    }

    /// The weighted queue `req` would join now, and its weight, for policies that share bandwidth by
    /// weight (reports use it to state each queue's expected share). Default: `None`, no weights.
    fn queue_weight(&self, req: &Request) -> Option<QueueWeight> {
        let _ = req;
        None
    }

    /// The control plane tells what it knows of a job beyond its priority: its account and
    /// node count (a fair-share tree places and weighs jobs by them), at `now` (a job may move
    /// to its account's queues). Returns false if the policy has no use for it.
    fn set_job_info(&mut self, job: JobId, info: fairshare::JobInfo, now: Nanos) -> bool {
        let _ = (job, info, now);
        false
    }

    /// Sets (`Some`) or clears (`None`) the share weight of a node of a fair-share tree: an
    /// account ([`fairshare::account_key`]), a user id or a job id at `level`. Returns false if
    /// the policy has no fair-share tree.
    fn set_share(&mut self, level: fairshare::ShareLevel, key: u64, weight: Option<f64>) -> bool {
        let _ = (level, key, weight);
        false
    }

    /// `req`'s job was served `bytes` elsewhere (other servers, since its last request here: the
    /// client's piggyback), told with `req` before it is enqueued. Fair-queuing policies charge
    /// it to the job's flows (dmClock's `delta`), so that shares hold job-wide across servers.
    /// Default: ignored.
    fn charge_elsewhere(&mut self, req: &Request, bytes: u64) {
        let _ = (req, bytes);
    }

    /// The levels of the policy's fair-share tree, top first, whose share weights it uses
    /// ([`Policy::set_share`]); empty if it has none.
    fn share_levels(&self) -> Vec<fairshare::ShareLevel> {
        Vec::new()
    }

    /// Sets (`Some`) or clears (`None`) a job's priority from the control plane, overriding the
    /// hints carried by its requests. Returns false if the policy has no notion of priority.
    fn set_priority(&mut self, job: JobId, priority: Option<Priority>, now: Nanos) -> bool {
        let _ = (job, priority, now);
        false
    }

    /// The client says job `job`'s I/O phase stamped `phase` (see [`Request::phase`]) is over:
    /// it has nothing of the job in flight. Policies that keep a job's turn through gaps of its
    /// phase (`iosets`) end it; others ignore it.
    fn phase_end(&mut self, job: JobId, phase: Nanos, now: Nanos) {
        let _ = (job, phase, now);
    }

    /// The client that stamped job `job`'s phase `phase` is gone (its connection closed): it
    /// sends nothing more of that phase. As [`Policy::phase_end`], except that it says nothing
    /// of whether the job's clients send phase ends.
    fn phase_gone(&mut self, job: JobId, phase: Nanos, now: Nanos) {
        let _ = (job, phase, now);
    }
}

/// Conservation counters of one policy instance.
///
/// `inserted` requests entered; each left the queue either as the head of a dispatched batch
/// (`dispatched` counts batches), merged into another request's batch (`merged`), or taken out by
/// a drain (`withdrawn`). `completed` counts finished batches, `failed` those of them that did not
/// succeed. Queued and in-flight are derived, never stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Requests enqueued.
    pub inserted: u64,
    /// Requests that were served inside another request's batch.
    pub merged: u64,
    /// Batches handed out.
    pub dispatched: u64,
    /// Batches reported complete (successfully or not).
    pub completed: u64,
    /// Completed batches whose outcome was not [`Outcome::Done`].
    pub failed: u64,
    /// Requests removed by [`Policy::drain`].
    pub withdrawn: u64,
}

impl Counters {
    /// Requests still queued: `inserted - merged - dispatched - withdrawn`.
    pub fn queued(&self) -> u64 {
        self.inserted - self.merged - self.dispatched - self.withdrawn
    }

    /// Batches in service: `dispatched - completed`.
    pub fn in_flight(&self) -> u64 {
        self.dispatched - self.completed
    }

    /// True when the counters are consistent with `queued` requests actually held.
    pub fn balanced_with(&self, queued: usize) -> bool {
        self.inserted >= self.merged + self.dispatched + self.withdrawn
            && self.dispatched >= self.completed
            && self.queued() == queued as u64
    }
}

/// Any policy with its conservation counters and exactly-once completion checks.
///
/// Every driver (runtime, simulator, C library, tests) goes through this wrapper, so the counters
/// mean the same everywhere. Completing an id that is not in service is an error, not a panic.
#[derive(Debug)]
pub struct Counted {
    policy: Box<dyn Policy>,
    counters: Counters,
    in_flight: HashMap<RequestId, u32, iosets_types::hash::IdBuildHasher>,
}

impl Counted {
    /// Wraps `policy`.
    pub fn new(policy: Box<dyn Policy>) -> Counted {
        Counted {
            policy,
            counters: Counters::default(),
            in_flight: HashMap::default(),
        }
    }

    /// Builds the named policy with tunables (`key=value` pairs); see [`registry::build`].
    pub fn build(name: &str, tunables: &[(String, String)]) -> Result<Counted, PolicyError> {
        Ok(Counted::new(registry::build(name, tunables)?))
    }

    /// The policy's registry name.
    pub fn name(&self) -> &'static str {
        self.policy.name()
    }

    /// Enqueues `req` (its `arrival` should already be set).
    pub fn enqueue(&mut self, req: Request, now: Nanos) {
        self.counters.inserted += 1;
        self.policy.enqueue(req, now);
    }

    /// Asks the policy for the next batch and records it as in service.
    pub fn dispatch(&mut self, now: Nanos) -> Dispatch {
        let d = self.policy.dispatch(now);
        if let Dispatch::Ready(batch) = &d {
            self.counters.dispatched += 1;
            self.counters.merged += batch.len() as u64 - 1;
            let previous = self.in_flight.insert(batch.id(), batch.len() as u32);
            debug_assert!(previous.is_none(), "policy dispatched {} twice", batch.id());
        }
        d
    }

    /// Reports the end of the in-service batch `id`.
    pub fn complete(
        &mut self,
        id: RequestId,
        outcome: Outcome,
        now: Nanos,
    ) -> Result<(), PolicyError> {
        if self.in_flight.remove(&id).is_none() {
            return Err(PolicyError::NotInService { id });
        }
        self.counters.completed += 1;
        if !outcome.is_ok() {
            self.counters.failed += 1;
        }
        self.policy.complete(id, outcome, now);
        Ok(())
    }

    /// Takes every queued request out (to hand it to another policy).
    pub fn drain(&mut self) -> Vec<Request> {
        let out = self.policy.drain();
        self.counters.withdrawn += out.len() as u64;
        out
    }

    /// Forwards a control-plane priority change; false if the policy has no priorities.
    pub fn set_priority(&mut self, job: JobId, priority: Option<Priority>, now: Nanos) -> bool {
        self.policy.set_priority(job, priority, now)
    }

    /// Forwards what the control plane knows of a job; see [`Policy::set_job_info`].
    pub fn set_job_info(&mut self, job: JobId, info: fairshare::JobInfo, now: Nanos) -> bool {
        self.policy.set_job_info(job, info, now)
    }

    /// Forwards a share weight; see [`Policy::set_share`].
    pub fn set_share(
        &mut self,
        level: fairshare::ShareLevel,
        key: u64,
        weight: Option<f64>,
    ) -> bool {
        self.policy.set_share(level, key, weight)
    }

    /// Forwards service elsewhere; see [`Policy::charge_elsewhere`].
    pub fn charge_elsewhere(&mut self, req: &Request, bytes: u64) {
        self.policy.charge_elsewhere(req, bytes);
    }

    /// The levels of the policy's fair-share tree; see [`Policy::share_levels`].
    pub fn share_levels(&self) -> Vec<fairshare::ShareLevel> {
        self.policy.share_levels()
    }

    /// Forwards a client's end of a job's phase; see [`Policy::phase_end`].
    pub fn phase_end(&mut self, job: JobId, phase: Nanos, now: Nanos) {
        self.policy.phase_end(job, phase, now);
    }

    /// Forwards the end of a gone client's phase; see [`Policy::phase_gone`].
    pub fn phase_gone(&mut self, job: JobId, phase: Nanos, now: Nanos) {
        self.policy.phase_gone(job, phase, now);
    }

    /// The weighted queue `req` would join and its weight; see [`Policy::queue_weight`].
    pub fn queue_weight(&self, req: &Request) -> Option<QueueWeight> {
        self.policy.queue_weight(req)
    }

    /// Requests queued, as the policy counts them.
    pub fn queued(&self) -> usize {
        self.policy.queued()
    }

    /// Batches in service.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The counters.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Checks the counters against the policy's queue and the in-service set.
    pub fn check_balance(&self) -> Result<(), PolicyError> {
        let c = self.counters;
        if c.balanced_with(self.policy.queued()) && c.in_flight() == self.in_flight.len() as u64 {
            Ok(())
        } else {
            Err(PolicyError::Unbalanced {
                counters: c,
                queued: self.policy.queued(),
                in_flight: self.in_flight.len(),
            })
        }
    }
}
