//! The thread-safe scheduler that carries out a policy's decisions: many producer threads submit
//! requests, a pool of worker threads takes batches to serve, and every batch is answered through a
//! completion token.
//!
//! # What it is
//! A [`Scheduler<T>`] wraps one [`Counted`] policy (any policy of `iosets-policy`, with its
//! conservation counters) behind one mutex. `T` is the caller's payload per request (a reply
//! channel, a buffer, a C user pointer); it travels with the request and comes back to the worker
//! in the [`Work`], one payload per original request in batch order.
//!
//! - **Producers** call [`Scheduler::submit`]. The runtime numbers the request ([`RequestId`](iosets_types::RequestId)s come
//!   from a counter, starting at 1) and stamps its arrival with the scheduler's [`Clock`].
//! - **Workers** call [`Scheduler::next`] (blocking), [`Scheduler::next_timeout`] or
//!   [`Scheduler::try_next`]. The runtime asks the policy; on `Ready` the worker gets the batch, on
//!   `NotBefore(t)` one waiting worker sleeps on the condition variable until `t` (or until a submit
//!   or completion wakes it) and asks again, on `Idle` the workers sleep until woken. Workers never
//!   spin: an idle scheduler uses no CPU.
//! - **Completion**: the worker answers with [`Completion::complete`], exactly once (it consumes the
//!   token). The [`book::JobBook`] records it (per-job counts, meters, queue-wait histogram, and with
//!   automatic priorities the job's period detector), the outcome goes to the policy that
//!   dispatched the batch, waiting workers are woken if the completion may have unblocked a queue,
//!   and the optional listener ([`Scheduler::set_listener`]) is told about every original request —
//!   this is how a submitter learns that its request failed.
//! - **Per job** ([`book`]): a detector's confident period moves the job to its Set-10 set; each
//!   job's priority is kept by source and the one in force applied to the policy (control > auto >
//!   hint: [`Scheduler::priority`]); a job idle for the forget interval is forgotten, on a
//!   completion or on a waiting worker's timer (no thread of its own); the book holds at most
//!   `max_jobs` jobs ([`BookConfig`]). The server and the C library get all of it alike.
//! - **Quotas** ([`quota`]): with rules set ([`Scheduler::set_quota`], [`Scheduler::add_rule`]),
//!   a request a rule governs ([`Scheduler::submit_from`] says who sent it) is held in the quota
//!   gate until its rule lets it have a service thread, within its job's rates, then goes to the
//!   policy: seed 003's thread quotas with a fair share among a rule's jobs, Lustre NRS TBF's
//!   rates, Ceph mClock's reservations and weights. Whatever the policy, it sees only admitted
//!   requests, so the layer composes with every one. Held requests count in
//!   [`SchedulerStats::held`] and are never dropped.
//! - **Why it waited** ([`why`]): every request's queue wait (dispatch − arrival) is split into
//!   causes — held by a quota rule, behind its own requests with every thread busy (device),
//!   behind another job of its set (exclusivity), behind other sets (share), a free thread the
//!   policy did not use (policy) — in integer nanoseconds that sum to it exactly, at O(1) per
//!   event; per job in [`JobStats::wait_causes`]. A caller that never shows them turns the split
//!   off with [`Scheduler::set_wait_causes`].
//! - **In service** ([`inservice`]): with [`Scheduler::set_inservice_limit`], at most a fixed
//!   number of data batches (reads, writes) are handed out at once, or a number adapted to the
//!   device's service times (`auto`), so that requests queue in the policy, where the order is
//!   made, rather than in the device. Metadata and fsync are not counted. Off by default.
//! - **Control**: [`Scheduler::set_priority`], [`Scheduler::switch_policy`] (queued requests move to
//!   the new policy with their payloads; in-service batches complete against the old one),
//!   [`Scheduler::shutdown`], [`Scheduler::stats`], [`Scheduler::forget_idle`],
//!   [`Scheduler::check_balance`].
//!
//! Wakeups are counted: a submit or completion notifies a worker only if one is waiting and not
//! already woken; a worker that takes a batch while more is queued passes one wake on.
//!
//! # What it is not
//! It spawns no thread, does no I/O and makes no scheduling decision of its own: the workers are
//! the caller's threads (the server's pool, the C caller's threads), the I/O is theirs, and the
//! order is the policy's. It is not a simulator either: time is real (or whatever [`Clock`] the
//! caller gives, which must advance with real time); the simulator drives policies directly.
//!
//! # Invariants
//! - **Nothing is lost.** Every submitted request is, at any moment, exactly one of: held by the
//!   quota gate, queued in the active policy (with its payload held by the runtime), in service inside exactly one batch (its
//!   payload handed to a worker), or completed. A batch's token completes it exactly once; a token
//!   dropped unanswered completes it as [`Outcome::Abandoned`](iosets_types::Outcome::Abandoned), logs a warning and counts it failed.
//! - **Counters balance.** Each policy instance's [`Counters`] balance with its queue;
//!   [`SchedulerStats::counters`] sums every instance the scheduler has driven, so a switch shows as
//!   `withdrawn` from the old instance and `inserted` again into the new one.
//!   [`Scheduler::check_balance`] checks all of it, plus the runtime's own bookkeeping.
//! - **Time never goes backwards for a policy**, even when two threads read the clock in one order
//!   and take the lock in the other.
//! - **One scheduling lock.** The policy, the payloads, the queue counts, the priorities and the
//!   wake bookkeeping share one mutex. The job book's shards have their own locks, never taken
//!   while the scheduling lock is held; the listener and logging run outside both. A token keeps
//!   the scheduler's state alive, so completing after every [`Scheduler`] handle is dropped is fine.
//!
//! # Example
//! ```
//! use iosets_runtime::{Counted, Scheduler};
//! use iosets_types::{FileId, JobId, Op, Outcome, Request};
//!
//! let sched: Scheduler<&'static str> = Scheduler::new(Counted::build("noop", &[]).unwrap());
//! let req = Request::builder(JobId(7), Op::Write).file(FileId(1)).range(0, 4096).build();
//! sched.submit(req, "reply to client 7").unwrap();
//! sched.shutdown();
//! while let Some(work) = sched.next() {
//!     let bytes = work.batch().bytes();
//!     let replies = work.complete(Outcome::Done { bytes });
//!     assert_eq!(replies, ["reply to client 7"]);
//! }
//! sched.check_balance().unwrap();
//! assert_eq!(sched.stats().total_ops(), 1);
//! ```
#![deny(missing_docs)]

pub mod book;
mod clock;
mod error;
mod gate;
pub mod held;
pub mod inservice;
pub mod quota;
mod scheduler;
pub mod share;
mod stats;
mod sync;
pub mod why;
mod work;

pub use book::BookConfig;
pub use clock::{Clock, MonotonicClock};
pub use error::RuntimeError;
pub use gate::{RuleJob, RuleStats};
pub use inservice::InServiceLimit;
pub use iosets_policy::{Counted, Counters};
pub use quota::{Match, OpClass, Origin, QuotaConfig, RuleSpec};
pub use scheduler::{Scheduler, MAX_JOB_NAMES};
pub use share::{JobInfo, ShareLevel, ShareSpec};
pub use stats::{
    InServiceStats, JobPriority, JobStats, Latency, OpLatency, Peers, PrioritySource,
    SchedulerStats, WaitSummary, PEERS_KEPT,
};
pub use why::{WaitCause, WaitCauses};
pub use work::{Completion, CompletionEvent, Next, Work};

/// The model's clock and time, for loom model tests (`RUSTFLAGS="--cfg loom"`).
#[cfg(loom)]
pub use sync::model;

#[cfg(test)]
mod tests {
    use super::*;
    use iosets_types::{FileId, JobId, Op, Outcome, Request, RequestId};

    fn assert_send_sync<X: Send + Sync>() {}

    /// A request by `job` of `len` bytes at `offset` in `file`, with no class, priority or phase.
    fn request(job: u64, op: Op, file: u64, offset: u64, len: u64) -> Request {
        Request::builder(JobId(job), op)
            .file(FileId(file))
            .range(offset, len)
            .build()
    }

    #[test]
    fn handles_are_send_and_sync() {
        assert_send_sync::<Scheduler<Vec<u8>>>();
        assert_send_sync::<Completion>();
        assert_send_sync::<Work<std::sync::mpsc::Sender<u64>>>();
    }

    #[test]
    fn short_transfer_shortens_the_last_requests() {
        let sched: Scheduler<u32> = Scheduler::new(
            Counted::build("timeorder", &[("merge".into(), "true".into())]).unwrap(),
        );
        sched.submit(request(1, Op::Read, 1, 0, 10), 1).unwrap();
        sched.submit(request(1, Op::Read, 1, 10, 10), 2).unwrap();
        let events = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
        let seen = events.clone();
        sched.set_listener(move |e: &CompletionEvent| seen.lock().push((e.id.0, e.bytes)));
        let work = sched.try_next().work().expect("ready");
        assert_eq!(
            work.batch().len(),
            2,
            "timeorder merge=true merges contiguous requests"
        );
        assert_eq!(work.payloads(), &[1, 2]);
        work.complete(Outcome::Done { bytes: 15 });
        assert_eq!(*events.lock(), vec![(1, 10), (2, 5)]);
        let job = sched.stats().job(JobId(1)).copied().unwrap();
        assert_eq!((job.ops, job.bytes_read, job.failed), (2, 15, 0));
        sched.check_balance().unwrap();
    }

    #[test]
    fn submit_and_try_next_hands_out_what_can_go() {
        // Jobs 1 and 2 in one IO-SETS set (priority 0.1): one of them at a time.
        let req = |job| {
            Request::builder(JobId(job), Op::Write)
                .file(FileId(job))
                .range(0, 8)
                .priority(iosets_types::Priority::new(0.1))
                .build()
        };
        let sched: Scheduler<u64> = Scheduler::new(Counted::build("iosets", &[]).unwrap());
        let first = sched
            .submit_and_try_next(req(1), 1)
            .unwrap()
            .work()
            .unwrap();
        assert_eq!(
            first.payloads(),
            &[1],
            "job 1 alone goes at once, to this caller"
        );
        assert!(
            matches!(
                sched.submit_and_try_next(req(2), 2).unwrap(),
                Next::TimedOut
            ),
            "job 2 waits while job 1 holds the set"
        );
        first.complete(Outcome::Done { bytes: 8 });
        let second = sched.try_next().work().expect("the set is free again");
        assert_eq!(second.payloads(), &[2]);
        second.complete(Outcome::Done { bytes: 8 });
        sched.shutdown();
        assert!(matches!(
            sched.submit_and_try_next(req(3), 3),
            Err(RuntimeError::ShutDown)
        ));
        sched.check_balance().unwrap();
        assert_eq!(sched.stats().total_ops(), 2);
    }

    #[test]
    fn switching_in_a_busy_policy_is_refused() {
        let sched: Scheduler<()> = Scheduler::new(Counted::build("noop", &[]).unwrap());
        let mut busy = Counted::build("wfq", &[]).unwrap();
        busy.enqueue(
            Request::builder(JobId(1), Op::Read)
                .id(RequestId(1))
                .file(FileId(1))
                .range(0, 1)
                .build(),
            iosets_types::Nanos::ZERO,
        );
        let err = sched.switch_policy(busy).unwrap_err();
        assert!(
            matches!(err, RuntimeError::PolicyNotEmpty { queued: 1, .. }),
            "{err}"
        );
        assert_eq!(sched.policy_name(), "noop");
    }

    #[test]
    fn forgetting_a_job_keeps_the_books_balanced() {
        let sched: Scheduler<()> = Scheduler::new(Counted::build("noop", &[]).unwrap());
        sched.submit(request(3, Op::Write, 1, 0, 8), ()).unwrap();
        assert!(
            sched.forget_job(JobId(3)).is_none(),
            "a job with queued work is kept"
        );
        sched
            .try_next()
            .work()
            .unwrap()
            .complete(Outcome::Done { bytes: 8 });
        let gone = sched.forget_job(JobId(3)).unwrap();
        assert_eq!((gone.ops, gone.bytes_written), (1, 8));
        assert!(sched.stats().job(JobId(3)).is_none());
        sched.check_balance().unwrap();
    }
}
