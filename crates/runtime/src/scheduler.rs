//! The scheduler: one mutex around the policy, two condition variables, nothing else shared.

use std::fmt;
use std::mem;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use iosets_policy::{Counted, Counters, Dispatch, PolicyError};
use iosets_types::{Batch, JobId, Nanos, Op, Outcome, Priority, Request, RequestId};

use crate::book::{BookConfig, BookEntry, JobBook, Move};
use crate::clock::{Clock, MonotonicClock};
use crate::gate::Gate;
use crate::inservice::{governed, InServiceLimit, Limiter};
use crate::quota::{Origin, QuotaConfig, RuleSpec};
use crate::share::{JobInfo, ShareSpec};
use crate::stats::{
    add_counters, InServiceStats, JobEntry, JobPriority, JobStats, PrioritySource, SchedulerStats,
};
use crate::sync::{AtomicU64, Condvar, Instant, Mutex, MutexGuard, Ordering};
use crate::why::{Snap, Splits, Why};
use crate::work::{moved_bytes, Completion, CompletionEvent, Dispatched, Next, Sink, Work};
use crate::RuntimeError;
use iosets_types::hash::IdMap;

/// The completion listener's type.
type ListenerFn = dyn Fn(&CompletionEvent) + Send + Sync;

/// How long a worker waits when a policy answers `NotBefore(t)` with `t` already past (a policy
/// bug): long enough that a misbehaving policy cannot turn a worker into a spinning loop.
const PAST_TIMER_WAIT: Duration = Duration::from_micros(100);

/// A thread-safe scheduler around one [`Counted`] policy, carrying a payload of type `T` with each
/// request.
///
/// Cloning is cheap (an [`Arc`] inside); every clone drives the same scheduler. See the
/// [crate documentation](crate) for the model and its invariants.
pub struct Scheduler<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for Scheduler<T> {
    fn clone(&self) -> Scheduler<T> {
        Scheduler {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<T> {
    clock: Arc<dyn Clock>,
    state: Mutex<State<T>>,
    /// Everything per job beyond the queue counts; its shards' locks are never taken while
    /// `state` is held.
    book: JobBook,
    /// When the book next looks for idle jobs (scheduler time, ns); claimed by compare-and-swap.
    next_sweep: AtomicU64,
    /// Workers waiting in `next`.
    work_cv: Condvar,
    /// Callers of `wait_idle`.
    idle_cv: Condvar,
}

/// One policy instance and the generation the runtime numbered it with; completions are routed by
/// generation to the instance that dispatched the batch.
#[derive(Debug)]
struct Instance {
    generation: u64,
    policy: Counted,
}

/// The most job names a scheduler keeps ([`Scheduler::name_job`]): 65,536 × 80 bytes.
pub const MAX_JOB_NAMES: usize = 1 << 16;

/// What the control plane told of a job, with its account's name for reports.
#[derive(Clone, Debug)]
struct JobRecord {
    info: JobInfo,
    account: Option<Box<str>>,
}

struct State<T> {
    active: Instance,
    /// Switched-out instances with batches still in service.
    retired: Vec<Instance>,
    /// Counters of switched-out instances that have been dropped.
    retired_counters: Counters,
    /// The payload of every queued request (and its wait snapshot), by request id.
    payloads: IdMap<RequestId, Queued<T>>,
    /// Jobs with requests queued or in service (an entry goes when both counts reach zero).
    jobs: IdMap<JobId, JobEntry>,
    /// Priorities set by the control plane and by detection, per job: the one home of
    /// priorities, applied to the policy by precedence and re-applied to a policy switched in.
    priorities: IdMap<JobId, Provenance>,
    /// Share weights of the fair-share tree, applied to the policy and re-applied to a policy
    /// switched in.
    shares: Vec<ShareSpec>,
    /// What the control plane told of jobs (account, node count), likewise; at most
    /// [`crate::share::MAX_JOB_INFO`] jobs.
    job_info: IdMap<JobId, JobRecord>,
    /// The names clients told of their jobs ([`Scheduler::name_job`]), at most
    /// [`MAX_JOB_NAMES`], the oldest told forgotten first.
    names: IdMap<JobId, crate::quota::JobName>,
    names_order: std::collections::VecDeque<JobId>,
    listener: Option<Arc<ListenerFn>>,
    next_id: u64,
    /// The latest time handed to a policy; time never goes backwards for a policy even when two
    /// threads read the clock in one order and take the lock in the other.
    last_now: Nanos,
    submitted: u64,
    requests_in_service: u64,
    /// Requests completed (successfully or not).
    completed: u64,
    switches: u64,
    rejected_completions: u64,
    shutdown: bool,
    /// Workers blocked in `work_cv`.
    waiting: usize,
    /// Notifications sent to `work_cv` that their worker has not yet observed. parking_lot's
    /// condition variable has no spurious wakeups and reports a wait ended by a notification as not
    /// timed out, so this count is exact; a waker skips the notification when every sleeper is
    /// already woken.
    wakes_pending: usize,
    /// The earliest policy timer some waiting worker will wake up for.
    timer: Option<Nanos>,
    /// Callers blocked in `idle_cv`.
    idle_waiters: usize,
    /// Whether a waiting worker sleeps with the book's next sweep as its deadline.
    sweep_watched: bool,
    /// The quota layer in front of the policy, when rules are set.
    gate: Option<Gate>,
    /// The service threads the caller runs (what thread quotas are percentages of); 0: not told.
    service_threads: usize,
    /// The wait accounting by cause ([`crate::why`]).
    why: Why,
    /// The limit on data batches in service ([`crate::inservice`]).
    limiter: Limiter,
    /// A data batch the policy dispatched while the limit was reached, handed out first when a
    /// slot frees; nothing more is asked of the policy meanwhile.
    parked: Option<Parked<T>>,
    /// Requests of `Op::Other` (metadata, fsync) submitted and not yet dispatched: with the
    /// limit reached, the policy is asked only if there are some (one may come first in its
    /// order and needs no data slot).
    other_waiting: usize,
}

/// A dispatched batch waiting for a data slot ([`crate::inservice`]): dispatched for the policy
/// and the accounting (its payloads taken, its wait split at `at`), not yet handed to a worker.
struct Parked<T> {
    batch: Batch,
    payloads: Vec<T>,
    splits: Splits,
    generation: u64,
    policy: &'static str,
    at: Nanos,
}

/// A queued (or quota-held) request's payload and the snapshot its wait split is computed from
/// (taken when the policy gets it).
struct Queued<T> {
    payload: T,
    snap: Snap,
}

/// `req` goes into `policy` at `now`, with its job's wait snapshot stored by its payload.
fn admit<T>(
    why: &mut Why,
    jobs: &mut IdMap<JobId, JobEntry>,
    payloads: &mut IdMap<RequestId, Queued<T>>,
    policy: &mut Counted,
    req: Request,
    now: Nanos,
) {
    if let Some(e) = jobs.get_mut(&req.job) {
        let snap = why.admit(&mut e.why, policy, &req, now);
        if let Some(q) = payloads.get_mut(&req.id) {
            q.snap = snap;
        }
    }
    policy.enqueue(req, now);
}

/// A job's priorities by source; the one in force is the control plane's, else the automatic one
/// (hints travel with the requests and are the policy's to apply).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Provenance {
    control: Option<Priority>,
    auto: Option<Priority>,
}

impl Provenance {
    fn effective(self) -> Option<Priority> {
        self.control.or(self.auto)
    }

    fn in_force(self) -> Option<JobPriority> {
        match (self.control, self.auto) {
            (Some(value), _) => Some(JobPriority {
                value,
                source: PrioritySource::Control,
            }),
            (None, Some(value)) => Some(JobPriority {
                value,
                source: PrioritySource::Auto,
            }),
            (None, None) => None,
        }
    }
}

impl<T> State<T> {
    fn tick(&mut self, raw: Nanos) -> Nanos {
        if raw > self.last_now {
            self.last_now = raw;
        }
        self.last_now
    }

    fn queued(&self) -> usize {
        self.active.policy.queued()
    }

    /// Whether a worker woken now has something to do: ask the policy (requests queued, none
    /// parked, and a data slot free or metadata waiting) or take the parked batch (a slot is
    /// free).
    fn pending(&self) -> bool {
        match self.parked {
            None => self.queued() > 0 && self.may_ask(),
            Some(_) => self.limiter.room(),
        }
    }

    /// Whether the policy may be asked for a batch (nothing parked): with a data slot free,
    /// anything may go; with the limit reached, only if something that needs no slot waits.
    /// Data is then ordered when a slot frees, with what is queued at that moment.
    fn may_ask(&self) -> bool {
        self.limiter.room() || self.other_waiting > 0
    }

    /// What the wait accounting counts as every thread busy: the service threads, or fewer
    /// under the in-service limit.
    fn capacity(&self) -> usize {
        match (self.limiter.limit(), self.service_threads) {
            (None, t) => t,
            (Some(l), 0) => l,
            (Some(l), t) => l.min(t),
        }
    }

    /// Requests held by the quota gate.
    fn held(&self) -> usize {
        self.gate.as_ref().map_or(0, Gate::held)
    }

    /// Lets the quota gate admit into the policy what its rules allow at `now`.
    fn pump(&mut self, now: Nanos) {
        // Nothing to compute on the common path, a scheduler without quotas.
        if self.gate.is_none() {
            return;
        }
        let busy = self.queued() + self.in_flight();
        let Some(gate) = self.gate.as_mut() else {
            return;
        };
        // Always asked, even with nothing held: it gives back kept threads and clears its
        // timer (a stale timer would wake a worker over and over).
        let idle = gate.threads().saturating_sub(busy);
        let policy = &mut self.active.policy;
        let (why, jobs, payloads) = (&mut self.why, &mut self.jobs, &mut self.payloads);
        gate.pump(now, idle, &mut |req| {
            admit(why, jobs, payloads, policy, req, now);
        });
    }

    fn in_flight(&self) -> usize {
        self.active.policy.in_flight()
            + self
                .retired
                .iter()
                .map(|r| r.policy.in_flight())
                .sum::<usize>()
    }

    fn counters(&self) -> Counters {
        let mut c = add_counters(self.retired_counters, self.active.policy.counters());
        for r in &self.retired {
            c = add_counters(c, r.policy.counters());
        }
        c
    }

    /// Moves the payloads of `batch`, dispatched at `now`, into `out` and records the dispatch
    /// in the job statistics. Returns its requests' waits split by cause.
    fn take_payloads(&mut self, batch: &Batch, out: &mut Vec<T>, now: Nanos) -> Splits {
        out.reserve(batch.len());
        let split_on = self.why.on();
        #[cfg_attr(feature = "bench-without-wait-causes", allow(unused_mut))]
        let mut splits = if split_on {
            Splits::with_capacity(batch.len())
        } else {
            Splits::none()
        };
        for (i, r) in batch.requests().enumerate() {
            let queued = self.payloads.remove(&r.id).expect(
                "a policy dispatched a request the runtime never gave it (policy contract broken)",
            );
            out.push(queued.payload);
            if r.op == Op::Other {
                self.other_waiting = self.other_waiting.saturating_sub(1);
            }
            if let Some(gate) = self.gate.as_mut() {
                gate.dispatched(r.id);
            }
            let mut job = self.jobs.get_mut(&r.job);
            if let Some(job) = job.as_deref_mut() {
                job.queued = job.queued.saturating_sub(1);
                job.in_service += 1;
            }
            #[cfg(not(feature = "bench-without-wait-causes"))]
            if split_on {
                let split = match job {
                    Some(job) => self
                        .why
                        .dispatch(&mut job.why, &queued.snap, r.arrival, now),
                    // Unreachable (a queued request's job has an entry); its wait stays whole.
                    None => [0, 0, 0, 0, now.saturating_sub(r.arrival).0],
                };
                splits.push(i, split);
            }
            #[cfg(feature = "bench-without-wait-causes")]
            let _ = (i, job, queued.snap, now);
        }
        self.why.batch_out();
        self.requests_in_service += batch.len() as u64;
        splits
    }

    /// Parks `batch`, dispatched at `now` while the in-service limit is reached: it is out of
    /// the policy and accounted as dispatched, and goes to the next worker once a slot frees.
    fn park(&mut self, batch: Batch, now: Nanos) {
        debug_assert!(self.parked.is_none(), "one parked batch at a time");
        let mut payloads = Vec::with_capacity(batch.len());
        let splits = self.take_payloads(&batch, &mut payloads, now);
        self.limiter.held_back();
        self.parked = Some(Parked {
            batch,
            payloads,
            splits,
            generation: self.active.generation,
            policy: self.active.policy.name(),
            at: now,
        });
    }

    /// Numbers `req`, stamps its arrival (from the clock reading `raw`) and queues it with its
    /// payload. Returns its id and the time used.
    fn enqueue(
        &mut self,
        mut req: Request,
        origin: Option<&Origin>,
        payload: T,
        raw: Nanos,
    ) -> Result<(RequestId, Nanos), RuntimeError> {
        if self.shutdown {
            return Err(RuntimeError::ShutDown);
        }
        let now = self.tick(raw);
        let id = RequestId(self.next_id);
        self.next_id += 1;
        self.submitted += 1;
        req.id = id;
        req.arrival = now;
        if req.op == Op::Other {
            self.other_waiting += 1;
        }
        // Service the job had on other servers: fair queuing charges it (job-wide shares).
        if let Some(bytes) = origin.map(|o| o.elsewhere_bytes).filter(|&b| b > 0) {
            self.active.policy.charge_elsewhere(&req, bytes);
        }
        if let Some(gate) = self.gate.as_mut() {
            let mut origin = origin.copied().unwrap_or_default();
            // Rules may match on the job's account (the control plane's, kept here) and on its
            // name, by pattern: both go with the request, so that a rule added while it is
            // held classifies it as one present at its arrival would.
            origin.account = self.job_info.get(&req.job).and_then(|r| r.info.account);
            origin.job_name = self.names.get(&req.job).copied();
            if let Some(rule) = gate.classify(&req, &origin) {
                self.jobs.entry(req.job).or_default().queued += 1;
                self.payloads.insert(
                    id,
                    Queued {
                        payload,
                        snap: Snap::default(),
                    },
                );
                gate.hold(rule, req, origin, now);
                self.pump(now);
                return Ok((id, now));
            }
        }
        let entry = self.jobs.entry(req.job).or_default();
        entry.queued += 1;
        let snap = self
            .why
            .admit(&mut entry.why, &self.active.policy, &req, now);
        self.payloads.insert(id, Queued { payload, snap });
        self.active.policy.enqueue(req, now);
        Ok((id, now))
    }

    /// Sets `job`'s priority from `source` (control or auto) and applies the one in force to the
    /// active policy. Returns what the policy answered (false: it has no notion of priority).
    fn set_source(
        &mut self,
        job: JobId,
        source: PrioritySource,
        priority: Option<Priority>,
        now: Nanos,
    ) -> bool {
        let prov = self.priorities.entry(job).or_default();
        let before = prov.effective();
        match source {
            PrioritySource::Control => prov.control = priority,
            PrioritySource::Auto => prov.auto = priority,
            PrioritySource::Hint => unreachable!("hints travel with the requests"),
        }
        let after = prov.effective();
        if after.is_none() {
            self.priorities.remove(&job);
        }
        if before == after && source == PrioritySource::Auto {
            return true;
        }
        let known = self.active.policy.set_priority(job, after, now);
        // The job may have changed sets (IO-SETS places jobs by priority).
        if let Some(e) = self.jobs.get_mut(&job) {
            self.why.replace(job, &mut e.why, &self.active.policy, now);
        }
        known
    }

    /// Completes batch `id` in the instance of `generation`. Returns a retired instance that has
    /// nothing left in service, for the caller to drop outside the lock.
    fn complete_in(
        &mut self,
        generation: u64,
        id: RequestId,
        outcome: Outcome,
        now: Nanos,
    ) -> (Result<(), PolicyError>, Option<Counted>) {
        if self.active.generation == generation {
            return (self.active.policy.complete(id, outcome, now), None);
        }
        let Some(i) = self.retired.iter().position(|r| r.generation == generation) else {
            return (Err(PolicyError::NotInService { id }), None);
        };
        let result = self.retired[i].policy.complete(id, outcome, now);
        if self.retired[i].policy.in_flight() > 0 {
            return (result, None);
        }
        let done = self.retired.swap_remove(i).policy;
        self.retired_counters = add_counters(self.retired_counters, done.counters());
        (result, Some(done))
    }
}

impl<T> Inner<T> {
    /// Wakes one waiting worker unless every waiting worker has already been woken.
    fn wake_one(&self, st: &mut State<T>) {
        if st.waiting > st.wakes_pending && self.work_cv.notify_one() {
            st.wakes_pending += 1;
        }
    }

    /// Wakes every waiting worker.
    fn wake_all(&self, st: &mut State<T>) {
        if st.waiting > st.wakes_pending {
            // Counts only the workers still parked: one that timed out and waits for the lock was
            // not woken and will not consume a pending wake.
            st.wakes_pending += self.work_cv.notify_all();
        }
    }

    /// Applies the set changes the book's detectors found, under the scheduler lock.
    fn apply_moves(&self, moves: &[Move]) {
        let raw = self.clock.now();
        let mut st = self.state.lock();
        let now = st.tick(raw);
        for m in moves {
            st.set_source(m.job, PrioritySource::Auto, Some(m.priority), now);
        }
        if st.queued() > 0 {
            self.wake_one(&mut st);
        }
        drop(st);
        for m in moves {
            tracing::info!(job = %m.job, period_s = m.period.as_secs_f64(), set = m.set, priority = %m.priority, "automatic priority");
        }
    }

    /// Claims the next sweep if it is due at `now`; the caller then runs [`Inner::sweep`].
    fn claim_sweep(&self, now: Nanos) -> bool {
        let due = self.next_sweep.load(Ordering::Relaxed);
        if now.0 < due {
            return false;
        }
        let interval =
            u64::try_from(self.book.config().sweep_interval().as_nanos()).unwrap_or(u64::MAX);
        self.next_sweep
            .compare_exchange(
                due,
                now.0.saturating_add(interval),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    fn maybe_sweep(&self, now: Nanos) {
        if self.claim_sweep(now) {
            self.sweep(now);
        }
    }

    /// Forgets every job idle for the forget interval at `now`: its record goes, its automatic
    /// priority is withdrawn (a control-plane priority stays). Never called with the scheduler
    /// lock held. Returns the number of jobs forgotten.
    fn sweep(&self, now: Nanos) -> usize {
        let forget_after = Nanos(
            u64::try_from(self.book.config().forget_interval().as_nanos()).unwrap_or(u64::MAX),
        );
        if let Some(gate) = self.state.lock().gate.as_mut() {
            // Rate buckets of jobs with nothing held or in service, once full again.
            gate.forget_idle(now);
        }
        let Some(cutoff) = now.0.checked_sub(forget_after.0).map(Nanos) else {
            return 0;
        };
        let candidates = self.book.idle_since(cutoff);
        let candidates: Vec<JobId> = {
            let st = self.state.lock();
            candidates
                .into_iter()
                .filter(|j| !st.jobs.contains_key(j))
                .collect()
        };
        let removed: Vec<JobId> = candidates
            .into_iter()
            .filter(|&j| self.book.remove_if_idle(j, cutoff))
            .collect();
        // Automatic priorities of jobs with no record left (forgotten now, or evicted earlier).
        let autos: Vec<JobId> = {
            let st = self.state.lock();
            st.priorities
                .iter()
                .filter(|(_, p)| p.auto.is_some())
                .map(|(&j, _)| j)
                .collect()
        };
        let orphans: Vec<JobId> = autos
            .into_iter()
            .filter(|&j| !self.book.contains(j))
            .collect();
        if !orphans.is_empty() {
            let raw = self.clock.now();
            let mut st = self.state.lock();
            let now = st.tick(raw);
            for j in orphans {
                // A job that came back with work (between the book's removal and now) keeps its
                // priority; it is looked at again once idle.
                if !st.jobs.contains_key(&j) {
                    st.set_source(j, PrioritySource::Auto, None, now);
                }
            }
        }
        if !removed.is_empty() {
            tracing::debug!(jobs = removed.len(), "forgot idle jobs");
        }
        removed.len()
    }

    /// When a waiting worker should wake up to sweep, if the book holds anything.
    fn sweep_deadline(&self) -> Option<Nanos> {
        (self.book.count() > 0).then(|| Nanos(self.next_sweep.load(Ordering::Relaxed)))
    }
}

impl<T: Send + 'static> Sink for Inner<T> {
    fn finish(&self, batch: &Batch, from: &Dispatched, outcome: Outcome) {
        let Dispatched {
            generation,
            policy,
            at: dispatched_at,
            handed_at,
            ref splits,
        } = *from;
        let raw = self.clock.now();
        // The book first, outside the scheduler's lock: once the scheduler is seen idle (or the
        // caller replies), the statistics include this batch. (A completion the policy refuses,
        // a runtime bug that is logged below, is in the book too.)
        let moves = self.book.record_split(
            batch,
            outcome,
            dispatched_at,
            raw.max(dispatched_at),
            policy,
            splits.as_slice(),
        );
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let now = st.tick(raw);
        let (result, retired) = st.complete_in(generation, batch.id(), outcome, now);
        if result.is_ok() {
            for req in batch.requests() {
                if let Some(job) = st.jobs.get_mut(&req.job) {
                    job.in_service = job.in_service.saturating_sub(1);
                    st.why.complete(&mut job.why, now);
                    if job.is_idle() {
                        st.why.leave(&job.why);
                        st.jobs.remove(&req.job);
                    }
                }
            }
            st.why.batch_done(now);
            if governed(batch) {
                let bytes = batch.requests().map(|r| r.len).sum();
                if st
                    .limiter
                    .completed(bytes, now.saturating_sub(handed_at).0)
                    .is_some()
                {
                    let capacity = st.capacity();
                    st.why.set_threads(capacity, now);
                }
            }
            st.requests_in_service -= batch.len() as u64;
            st.completed += batch.len() as u64;
            if let Some(gate) = st.gate.as_mut() {
                let mut governed = false;
                for req in batch.requests() {
                    governed |= gate.completed(req.id, now);
                }
                if governed || gate.held() > 0 {
                    // A thread came back: a held request may have its turn.
                    st.pump(now);
                }
            }
        } else {
            st.rejected_completions += 1;
        }
        // A completion can unblock a queue (IO-SETS releases a set, a time slice ends) or free a
        // slot for a parked batch.
        if st.pending() {
            self.wake_one(st);
        }
        if st.idle_waiters > 0 && st.queued() == 0 && st.in_flight() == 0 && st.held() == 0 {
            self.idle_cv.notify_all();
        }
        let listener = if result.is_ok() {
            st.listener.clone()
        } else {
            None
        };
        drop(guard);
        drop(retired);

        if let Err(e) = result {
            tracing::error!(batch = %batch.id(), generation, error = %e, "completion refused by the policy");
            return;
        }
        if !moves.is_empty() {
            self.apply_moves(&moves);
        }
        self.maybe_sweep(now);
        let Some(listener) = listener else { return };
        for (req, moved) in moved_bytes(batch, outcome) {
            let event = CompletionEvent {
                id: req.id,
                job: req.job,
                op: req.op,
                batch: batch.id(),
                bytes: moved,
                outcome,
                queue_wait: dispatched_at - req.arrival,
                service_time: now - dispatched_at,
            };
            if catch_unwind(AssertUnwindSafe(|| listener(&event))).is_err() {
                tracing::error!(request = %req.id, "completion listener panicked; event dropped");
            }
        }
    }
}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        let st = self.state.get_mut();
        let queued = st.queued();
        if queued > 0 {
            tracing::warn!(
                queued,
                policy = st.active.policy.name(),
                "scheduler dropped with requests still queued; their payloads are dropped unanswered"
            );
        }
    }
}

impl<T: Send + 'static> Scheduler<T> {
    /// A scheduler around `policy` on the real monotonic clock (time zero = now).
    ///
    /// # Panics
    /// If `policy` already holds queued or in-service requests: the runtime must see every request
    /// its policy holds, to carry its payload.
    pub fn new(policy: Counted) -> Scheduler<T> {
        Scheduler::with_clock(policy, Arc::new(MonotonicClock::new()))
    }

    /// A scheduler around `policy` reading time from `clock`.
    ///
    /// # Panics
    /// As [`Scheduler::new`].
    pub fn with_clock(policy: Counted, clock: Arc<dyn Clock>) -> Scheduler<T> {
        Scheduler::with_book(policy, clock, BookConfig::default())
    }

    /// A scheduler around `policy` reading time from `clock`, with the job book set up by `book`
    /// (automatic priorities, forget interval, size).
    ///
    /// # Panics
    /// As [`Scheduler::new`].
    pub fn with_book(policy: Counted, clock: Arc<dyn Clock>, book: BookConfig) -> Scheduler<T> {
        assert!(
            policy.queued() == 0 && policy.in_flight() == 0,
            "Scheduler needs an empty policy, got {} with {} queued and {} in service",
            policy.name(),
            policy.queued(),
            policy.in_flight()
        );
        let state = State {
            active: Instance {
                generation: 0,
                policy,
            },
            retired: Vec::new(),
            retired_counters: Counters::default(),
            payloads: IdMap::default(),
            jobs: IdMap::default(),
            priorities: IdMap::default(),
            shares: Vec::new(),
            job_info: IdMap::default(),
            names: IdMap::default(),
            names_order: std::collections::VecDeque::new(),
            listener: None,
            next_id: 1,
            last_now: Nanos::ZERO,
            submitted: 0,
            requests_in_service: 0,
            completed: 0,
            switches: 0,
            rejected_completions: 0,
            shutdown: false,
            waiting: 0,
            wakes_pending: 0,
            timer: None,
            idle_waiters: 0,
            sweep_watched: false,
            gate: None,
            service_threads: 0,
            why: Why::default(),
            limiter: Limiter::default(),
            parked: None,
            other_waiting: 0,
        };
        let first_sweep =
            Nanos(u64::try_from(book.sweep_interval().as_nanos()).unwrap_or(u64::MAX));
        Scheduler {
            inner: Arc::new(Inner {
                clock,
                state: Mutex::new(state),
                work_cv: Condvar::new(),
                idle_cv: Condvar::new(),
                book: JobBook::new(book),
                next_sweep: AtomicU64::new(first_sweep.0),
            }),
        }
    }

    /// The scheduler's current time (what its clock says).
    pub fn now(&self) -> Nanos {
        self.inner.clock.now()
    }

    /// Queues `req` with its `payload`. The runtime assigns the request id (overwriting `req.id`)
    /// and the arrival time (`req.arrival` = now); the id is returned. Wakes one waiting worker.
    ///
    /// # Errors
    /// [`RuntimeError::ShutDown`] after [`Scheduler::shutdown`]; the payload is dropped.
    pub fn submit(&self, req: Request, payload: T) -> Result<RequestId, RuntimeError> {
        let raw = self.inner.clock.now();
        let mut st = self.inner.state.lock();
        let (id, _) = st.enqueue(req, None, payload, raw)?;
        self.inner.wake_one(&mut st);
        Ok(id)
    }

    /// [`Scheduler::submit`] for a request whose sender is known: quota rules may match on its
    /// user, group and address ([`crate::quota`]). A request a rule governs is held until the
    /// rule admits it; nothing is dropped. The address is noted among the job's peers
    /// ([`crate::Peers`], in [`JobStats::peers`]).
    ///
    /// # Errors
    /// [`RuntimeError::ShutDown`] after [`Scheduler::shutdown`]; the payload is dropped (the
    /// address is noted all the same: it is noted before the scheduler's lock is taken).
    pub fn submit_from(
        &self,
        req: Request,
        origin: &Origin,
        payload: T,
    ) -> Result<RequestId, RuntimeError> {
        let raw = self.inner.clock.now();
        // Before the request can be served: once it is, its answer may reach the client, which
        // may then ask for the job's peers. The book's locks are never taken under the
        // scheduler's.
        if let Some(addr) = origin.addr {
            self.inner.book.note_peer(req.job, addr, raw);
        }
        let mut st = self.inner.state.lock();
        let (id, _) = st.enqueue(req, Some(origin), payload, raw)?;
        self.inner.wake_one(&mut st);
        Ok(id)
    }

    /// [`Scheduler::submit`] then [`Scheduler::try_next`] under one lock and one clock read: the
    /// request is queued and, if the policy lets a batch go now (this request's or another's), the
    /// caller gets it ([`Next::Work`]); otherwise [`Next::TimedOut`] and, as after a submit, a
    /// waiting worker is woken. For callers that dispatch on the submitting thread (the AGIOS
    /// shim's inline callbacks).
    ///
    /// # Errors
    /// [`RuntimeError::ShutDown`] after [`Scheduler::shutdown`]; the payload is dropped.
    pub fn submit_and_try_next(&self, req: Request, payload: T) -> Result<Next<T>, RuntimeError> {
        let raw = self.inner.clock.now();
        let payloads = Vec::with_capacity(1);
        let mut st = self.inner.state.lock();
        let (_, now) = st.enqueue(req, None, payload, raw)?;
        if st.parked.is_some() || !st.may_ask() {
            // The limit is reached: a slot that frees takes the batch the policy then chooses.
            self.inner.wake_one(&mut st);
            return Ok(Next::TimedOut);
        }
        match st.active.policy.dispatch(now) {
            Dispatch::Ready(batch) if !governed(&batch) || st.limiter.room() => {
                Ok(Next::Work(self.hand_out(st, batch, now, payloads)))
            }
            Dispatch::Ready(batch) => {
                st.park(batch, now);
                Ok(Next::TimedOut)
            }
            Dispatch::NotBefore(_) | Dispatch::Idle => {
                self.inner.wake_one(&mut st);
                Ok(Next::TimedOut)
            }
        }
    }

    /// Hands `batch`, just dispatched at `now`, to the caller: its payloads, the wake passed on
    /// if more is queued, and its completion token. Releases the lock.
    fn hand_out(
        &self,
        mut st: MutexGuard<'_, State<T>>,
        batch: Batch,
        now: Nanos,
        mut payloads: Vec<T>,
    ) -> Work<T> {
        let splits = st.take_payloads(&batch, &mut payloads, now);
        let generation = st.active.generation;
        let policy = st.active.policy.name();
        self.give(
            st,
            Parked {
                batch,
                payloads,
                splits,
                generation,
                policy,
                at: now,
            },
            now,
        )
    }

    /// Gives the worker `out`, dispatched at `out.at` and handed out at `now`: counts it in
    /// service against the limit, passes the wake on if more is queued, and makes its completion
    /// token. Releases the lock.
    fn give(&self, mut st: MutexGuard<'_, State<T>>, out: Parked<T>, now: Nanos) -> Work<T> {
        let inner = &*self.inner;
        let Parked {
            batch,
            payloads,
            splits,
            generation,
            policy,
            at,
        } = out;
        if governed(&batch) {
            st.limiter.started();
        }
        if st.pending() {
            // More may be dispatchable and another worker may be idle: pass the wake on.
            inner.wake_one(&mut st);
        } else if st.shutdown {
            // The last queued request is out: the others can return.
            inner.wake_all(&mut st);
        }
        drop(st);
        let sink: Arc<dyn Sink> = self.inner.clone();
        Work::new(
            payloads,
            Completion::new(
                sink,
                batch,
                Dispatched {
                    generation,
                    policy,
                    at,
                    handed_at: now,
                    splits,
                },
            ),
        )
    }

    /// The next batch to serve, blocking until one can be handed out. `None` once the scheduler is
    /// shut down and every queued request has been handed out.
    ///
    /// Honours the policy's timers: on `NotBefore(t)` one waiting worker sleeps until `t` (or until
    /// a submit or completion wakes it) and asks again; on `Idle` it sleeps until woken.
    pub fn next(&self) -> Option<Work<T>> {
        match self.take(None, false) {
            Next::Work(w) => Some(w),
            Next::TimedOut | Next::Shutdown => None,
        }
    }

    /// As [`Scheduler::next`], giving up after `timeout` with [`Next::TimedOut`].
    pub fn next_timeout(&self, timeout: Duration) -> Next<T> {
        let deadline = Instant::now().checked_add(timeout);
        match deadline {
            Some(d) => self.take(Some(d), false),
            None => self.take(None, false),
        }
    }

    /// A batch if one can be handed out right now, [`Next::TimedOut`] if not, [`Next::Shutdown`] if
    /// the scheduler is shut down and empty. Does not wait, beyond taking the lock.
    pub fn try_next(&self) -> Next<T> {
        // No clock read for a deadline: a batch that is ready goes at once, else nothing waits.
        self.take(None, true)
    }

    /// Hands out a batch, waiting until `deadline` (none: as long as it takes) unless `no_wait`.
    fn take(&self, deadline: Option<Instant>, no_wait: bool) -> Next<T> {
        let inner = &*self.inner;
        // Most batches hold one request: allocate its payload slot before taking the lock.
        let payloads = Vec::with_capacity(1);
        let mut st = inner.state.lock();
        loop {
            let now = st.tick(inner.clock.now());
            st.pump(now);
            let timer = if st.parked.is_some() {
                if st.limiter.room() {
                    let out = st.parked.take().expect("checked");
                    return Next::Work(self.give(st, out, now));
                }
                // Nothing more from the policy until the parked batch goes: a completion wakes.
                None
            } else if !st.may_ask() {
                // The limit is reached: the policy chooses when a slot frees (a completion wakes).
                None
            } else {
                match st.active.policy.dispatch(now) {
                    Dispatch::Ready(batch) if !governed(&batch) || st.limiter.room() => {
                        return Next::Work(self.hand_out(st, batch, now, payloads));
                    }
                    Dispatch::Ready(batch) => {
                        st.park(batch, now);
                        continue;
                    }
                    Dispatch::NotBefore(t) => Some(t),
                    Dispatch::Idle => None,
                }
            };
            // A request held back by a rate goes when its bucket refills.
            let timer = match (timer, st.gate.as_ref().and_then(Gate::timer)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if st.shutdown && st.queued() == 0 && st.held() == 0 && st.parked.is_none() {
                return Next::Shutdown;
            }
            if inner.claim_sweep(now) {
                // Forgetting idle jobs takes the book's locks: never under the scheduler's.
                MutexGuard::unlocked(&mut st, || inner.sweep(now));
                continue;
            }
            // One waiting worker watches the earliest timer; the others sleep until woken.
            let watch = timer.filter(|&t| st.timer.is_none_or(|held| t < held));
            let real_now = Instant::now();
            if no_wait || deadline.is_some_and(|d| real_now >= d) {
                if watch.is_some() {
                    // Nobody watches this timer: hand it to a waiting worker before leaving.
                    inner.wake_one(&mut st);
                }
                return Next::TimedOut;
            }
            let mut wake_at = deadline;
            // One waiting worker also wakes for the book's next sweep, so that idle jobs are
            // forgotten even when nothing completes (one wake-up per sweep interval).
            let sweep = if st.sweep_watched {
                None
            } else {
                inner.sweep_deadline()
            };
            if let Some(t) = sweep {
                let wait = Duration::from_nanos(t.saturating_sub(now).0);
                if let Some(at) = real_now.checked_add(wait) {
                    wake_at = Some(wake_at.map_or(at, |d| d.min(at)));
                }
                st.sweep_watched = true;
            }
            if let Some(t) = watch {
                let wait = if t > now {
                    Duration::from_nanos((t - now).0)
                } else {
                    PAST_TIMER_WAIT
                };
                if let Some(at) = real_now.checked_add(wait) {
                    wake_at = Some(wake_at.map_or(at, |d| d.min(at)));
                }
                st.timer = Some(t);
            }
            st.waiting += 1;
            let notified = match wake_at {
                Some(at) => !inner.work_cv.wait_until(&mut st, at).timed_out(),
                None => {
                    inner.work_cv.wait(&mut st);
                    true
                }
            };
            st.waiting -= 1;
            if notified {
                st.wakes_pending = st.wakes_pending.saturating_sub(1);
            }
            debug_assert!(
                st.wakes_pending <= st.waiting,
                "more wakes pending than sleepers"
            );
            if watch.is_some() && st.timer == watch {
                st.timer = None;
            }
            if sweep.is_some() {
                st.sweep_watched = false;
            }
        }
    }

    /// Calls `listener` for every original request that completes (after the scheduler lock is
    /// released, on the completing thread), replacing any previous listener. A panicking listener is
    /// caught and logged.
    pub fn set_listener<F>(&self, listener: F)
    where
        F: Fn(&CompletionEvent) + Send + Sync + 'static,
    {
        let listener: Arc<ListenerFn> = Arc::new(listener);
        self.inner.state.lock().listener = Some(listener);
    }

    /// Removes the completion listener.
    pub fn clear_listener(&self) {
        let old = self.inner.state.lock().listener.take();
        drop(old);
    }

    /// Sets (`Some`) or clears (`None`) `job`'s control-plane priority. It overrides the
    /// automatic priority and the hints its requests carry; clearing it puts the automatic one (if
    /// any) back in force. Remembered and re-applied when another policy is switched in, and never
    /// forgotten with an idle job. Returns false if the active policy has no notion of priority.
    pub fn set_priority(&self, job: JobId, priority: Option<Priority>) -> bool {
        let raw = self.inner.clock.now();
        let mut st = self.inner.state.lock();
        let now = st.tick(raw);
        let known = st.set_source(job, PrioritySource::Control, priority, now);
        if st.queued() > 0 {
            self.inner.wake_one(&mut st);
        }
        known
    }

    /// Puts the share weights `shares` in force in place of the ones in force: a node no longer
    /// listed goes back to weight 1. Applied to the policy now and to any policy switched in.
    /// Returns whether the active policy has a fair-share tree that uses them.
    ///
    /// # Errors
    /// [`RuntimeError::Share`] naming a node given twice or with a weight ≤ 0; nothing is
    /// changed then.
    pub fn set_shares(&self, shares: Vec<ShareSpec>) -> Result<bool, RuntimeError> {
        crate::share::check_shares(&shares)?;
        let raw = self.inner.clock.now();
        let mut st = self.inner.state.lock();
        st.tick(raw);
        let old = std::mem::take(&mut st.shares);
        for s in &old {
            if !shares.iter().any(|n| n.level == s.level && n.key == s.key) {
                st.active.policy.set_share(s.level, s.key, None);
            }
        }
        let mut used = false;
        for s in &shares {
            used |= st.active.policy.set_share(s.level, s.key, Some(s.weight));
        }
        st.shares = shares;
        Ok(used)
    }

    /// The share weights in force, in the order they were given.
    pub fn shares(&self) -> Vec<ShareSpec> {
        self.inner.state.lock().shares.clone()
    }

    /// The levels of the active policy's fair-share tree, top first (empty: it has none).
    pub fn share_levels(&self) -> Vec<crate::ShareLevel> {
        self.inner.state.lock().active.policy.share_levels()
    }

    /// Every job with an account or node count: (job, account, nodes), by job id.
    pub fn job_infos(&self) -> Vec<(JobId, Option<String>, Option<u32>)> {
        let st = self.inner.state.lock();
        let mut out: Vec<_> = st
            .job_info
            .iter()
            .map(|(&j, r)| (j, r.account.as_deref().map(str::to_owned), r.info.nodes))
            .collect();
        out.sort_unstable_by_key(|e| e.0);
        out
    }

    /// Records what the control plane knows of `job`: its account (by name) and node count;
    /// both `None` forgets the job's record. Applied to the policy now and to any policy
    /// switched in; kept until cleared (a job's end, through Slurm's epilog). Returns whether
    /// the active policy uses it.
    ///
    /// # Errors
    /// [`RuntimeError::Share`] for a bad account name, a node count of zero, or a new job past
    /// [`crate::share::MAX_JOB_INFO`] records; nothing is changed then.
    pub fn set_job_info(
        &self,
        job: JobId,
        account: Option<&str>,
        nodes: Option<u32>,
    ) -> Result<bool, RuntimeError> {
        let bad = |reason: String| RuntimeError::Share {
            node: format!("job={job}"),
            reason,
        };
        if let Some(a) = account {
            crate::share::check_account(a).map_err(bad)?;
        }
        if nodes == Some(0) {
            return Err(bad("a job runs on at least one node".into()));
        }
        let info = JobInfo {
            account: account.map(crate::share::account_key),
            nodes,
        };
        let raw = self.inner.clock.now();
        let mut st = self.inner.state.lock();
        let now = st.tick(raw);
        if info == JobInfo::default() {
            st.job_info.remove(&job);
        } else {
            if !st.job_info.contains_key(&job) && st.job_info.len() >= crate::share::MAX_JOB_INFO {
                return Err(bad(format!(
                    "{} jobs already have an account or node count (the bound); clear ended \
                     jobs' records",
                    crate::share::MAX_JOB_INFO
                )));
            }
            st.job_info.insert(
                job,
                JobRecord {
                    info,
                    account: account.map(Box::from),
                },
            );
        }
        let used = st.active.policy.set_job_info(job, info, now);
        // A job moved to its account's sets may be dispatchable now (`iosets key=account,set`).
        if st.queued() > 0 {
            self.inner.wake_one(&mut st);
        }
        Ok(used)
    }

    /// A client tells `job`'s name (`name` must be what [`JobId::of_name`] makes `job` from, so
    /// that no client can name another's job). Kept for reports and for `job=` patterns of
    /// quota rules; at most [`MAX_JOB_NAMES`], the oldest told forgotten first.
    ///
    /// # Errors
    /// [`RuntimeError::Share`] if `name` is not `job`'s.
    pub fn name_job(&self, job: JobId, name: &str) -> Result<(), RuntimeError> {
        let name_ok = JobId::of_name(name) == Some(job);
        let inline = crate::quota::JobName::new(name).filter(|_| name_ok);
        let Some(inline) = inline else {
            return Err(RuntimeError::Share {
                node: format!("job={job}"),
                reason: format!("`{name}` is not this job's name (its id is made from its name)"),
            });
        };
        let mut st = self.inner.state.lock();
        if st.names.contains_key(&job) {
            return Ok(());
        }
        if st.names.len() >= MAX_JOB_NAMES {
            // The oldest told go first, but never the name of a job with requests here (a
            // flood of names must not take a working job's name, and its rules' patterns, away).
            let st = &mut *st;
            // The 256 oldest at most: a bounded look under the lock.
            let mut tries = st.names_order.len().min(256);
            let evicted = loop {
                let Some(old) = st.names_order.pop_front() else {
                    break false;
                };
                if !st.jobs.contains_key(&old) {
                    st.names.remove(&old);
                    break true;
                }
                st.names_order.push_back(old);
                tries -= 1;
                if tries == 0 {
                    break false;
                }
            };
            if !evicted {
                return Err(RuntimeError::Share {
                    node: format!("job={job}"),
                    reason: format!(
                        "{MAX_JOB_NAMES} job names are kept, all of jobs with requests here"
                    ),
                });
            }
        }
        st.names.insert(job, inline);
        st.names_order.push_back(job);
        Ok(())
    }

    /// Every job name clients told (at most [`MAX_JOB_NAMES`]).
    pub fn job_names(&self) -> Vec<String> {
        let st = self.inner.state.lock();
        st.names.values().map(|n| n.as_str().to_owned()).collect()
    }

    /// The name a client told of `job`, if any (a numeric job's name is its number).
    pub fn job_name(&self, job: JobId) -> Option<String> {
        self.names_of([job]).pop().flatten()
    }

    /// The names clients told of `jobs`, in their order (`None` for a job not named), under
    /// one lock: what a report of many jobs asks.
    pub fn names_of(&self, jobs: impl IntoIterator<Item = JobId>) -> Vec<Option<String>> {
        let st = self.inner.state.lock();
        jobs.into_iter()
            .map(|j| st.names.get(&j).map(|n| n.as_str().to_owned()))
            .collect()
    }

    /// The client says job `job`'s I/O phase stamped `phase` (in this scheduler's time base) is
    /// over; see [`iosets_policy::Policy::phase_end`]. A set it frees is served at once.
    pub fn phase_end(&self, job: JobId, phase: Nanos) {
        self.tell_policy(|policy, now| policy.phase_end(job, phase, now));
    }

    /// The client that stamped job `job`'s phase `phase` is gone (its connection closed); see
    /// [`iosets_policy::Policy::phase_gone`]. A set it frees is served at once.
    pub fn phase_gone(&self, job: JobId, phase: Nanos) {
        self.tell_policy(|policy, now| policy.phase_gone(job, phase, now));
    }

    /// Tells the active policy something at the current time, then wakes a worker if work is
    /// queued (what it was told may have made some dispatchable).
    fn tell_policy(&self, tell: impl FnOnce(&mut Counted, Nanos)) {
        let raw = self.inner.clock.now();
        let mut st = self.inner.state.lock();
        let now = st.tick(raw);
        tell(&mut st.active.policy, now);
        if st.queued() > 0 {
            self.inner.wake_one(&mut st);
        }
    }

    /// The priority in force for `job` and its source: control, else automatic, else the last
    /// hint its requests carried. `None` if it has none.
    pub fn priority(&self, job: JobId) -> Option<JobPriority> {
        let prov = self.inner.state.lock().priorities.get(&job).copied();
        if let Some(p) = prov.and_then(Provenance::in_force) {
            return Some(p);
        }
        let hint = self.inner.book.entry(job, self.now())?.hint?;
        Some(JobPriority {
            value: hint,
            source: PrioritySource::Hint,
        })
    }

    /// The job book's settings.
    pub fn book_config(&self) -> &BookConfig {
        self.inner.book.config()
    }

    /// Forgets now every job idle for the forget interval (this also happens by itself, on
    /// completions and on an idle worker's timer, once per sweep interval). Returns how many
    /// were forgotten.
    pub fn forget_idle(&self) -> usize {
        let now = self.now();
        self.inner.sweep(now)
    }

    /// Bytes held by the job book's records (see [`crate::book`] for the bound) and how many
    /// jobs it holds.
    pub fn book_memory(&self) -> (usize, usize) {
        (self.inner.book.job_bytes(), self.inner.book.count())
    }

    /// Queue-wait and service-time histograms per (policy, operation), since the start.
    pub fn latency(&self) -> Vec<crate::OpLatency> {
        self.inner.book.latency()
    }

    /// Replaces the active policy with `new` at run time.
    ///
    /// Queued requests are drained from the old policy and enqueued into `new` in the old policy's
    /// order, keeping their ids, arrival times and payloads; priorities set through
    /// [`Scheduler::set_priority`] are applied to `new` first. Batches the old policy dispatched
    /// stay in service and complete against the old instance, which is kept until its last batch
    /// completes. `new` knows nothing of those batches: an `iosets` policy switched in does not keep
    /// a set exclusive for a job whose request is still in service in the old instance.
    ///
    /// # Errors
    /// [`RuntimeError::PolicyNotEmpty`] if `new` already holds requests.
    pub fn switch_policy(&self, mut new: Counted) -> Result<(), RuntimeError> {
        if new.queued() != 0 || new.in_flight() != 0 {
            return Err(RuntimeError::PolicyNotEmpty {
                policy: new.name(),
                queued: new.queued(),
                in_flight: new.in_flight(),
            });
        }
        let raw = self.inner.clock.now();
        let mut st = self.inner.state.lock();
        let now = st.tick(raw);
        let moved = st.active.policy.drain();
        let stranded = st.active.policy.queued();
        for (&job, p) in &st.priorities {
            new.set_priority(job, p.effective(), now);
        }
        for s in &st.shares {
            new.set_share(s.level, s.key, Some(s.weight));
        }
        for (&job, r) in &st.job_info {
            new.set_job_info(job, r.info, now);
        }
        for req in moved {
            new.enqueue(req, now);
        }
        let generation = st.active.generation + 1;
        let old = mem::replace(
            &mut st.active,
            Instance {
                generation,
                policy: new,
            },
        );
        st.switches += 1;
        // The new policy's sets from now on (the rest of a queued request's wait is charged
        // under them).
        let s = &mut *st;
        for (&job, e) in s.jobs.iter_mut() {
            s.why.replace(job, &mut e.why, &s.active.policy, now);
        }
        let dropped = if old.policy.in_flight() > 0 {
            st.retired.push(old);
            None
        } else {
            st.retired_counters = add_counters(st.retired_counters, old.policy.counters());
            Some(old)
        };
        // Every waiting worker asks the new policy; timers of the old one no longer hold.
        st.timer = None;
        self.inner.wake_all(&mut st);
        drop(st);
        drop(dropped);
        if stranded > 0 {
            tracing::error!(
                stranded,
                "old policy kept requests after drain (policy contract broken)"
            );
        }
        Ok(())
    }

    /// Tells the scheduler how many service threads (workers) the caller runs: thread quotas
    /// are percentages of this. Rules in force are recomputed for the new count.
    ///
    /// # Errors
    /// [`RuntimeError::Quota`] if `threads` is 0.
    pub fn set_service_threads(&self, threads: usize) -> Result<(), RuntimeError> {
        if threads == 0 {
            return Err(RuntimeError::Quota {
                rule: "*".into(),
                reason: "the number of service threads must be at least 1".into(),
            });
        }
        let raw = self.inner.clock.now();
        {
            let mut st = self.inner.state.lock();
            let now = st.tick(raw);
            st.service_threads = threads;
            st.limiter.set_threads(threads);
            let capacity = st.capacity();
            st.why.set_threads(capacity, now);
        }
        self.update_quota(|current| Ok(current.cloned()))
    }

    /// Turns the wait-cause split ([`crate::why`]) on (the default) or off. Off, no request's
    /// wait is split and every job's [`JobStats::wait_causes`](crate::JobStats::wait_causes)
    /// stays as it is: for a caller that never shows them (the AGIOS shim), whose every request
    /// then costs less.
    ///
    /// # Errors
    /// [`RuntimeError::NotIdle`] unless nothing is queued, held or in service (the split of a
    /// request follows it from admission to completion); nothing is changed then.
    pub fn set_wait_causes(&self, on: bool) -> Result<(), RuntimeError> {
        let mut st = self.inner.state.lock();
        let busy = st.queued() + st.held() + st.in_flight() + usize::from(st.parked.is_some());
        if busy > 0 {
            return Err(RuntimeError::NotIdle {
                setting: "the wait-cause split",
                busy,
            });
        }
        st.why.set_on(on);
        Ok(())
    }

    /// Puts the limit on data batches in service in force ([`crate::inservice`]): `Off` (the
    /// default), `Fixed(n)` or `Auto`. What `auto` learnt of the device is kept across changes.
    /// A lower limit takes effect as batches complete; nothing in service is taken back.
    ///
    /// # Errors
    /// [`RuntimeError::InService`] for `Fixed(0)`; nothing is changed then.
    pub fn set_inservice_limit(&self, limit: InServiceLimit) -> Result<(), RuntimeError> {
        if let InServiceLimit::Fixed(n) = limit {
            InServiceLimit::fixed(n).map_err(|reason| RuntimeError::InService { reason })?;
        }
        let raw = self.inner.clock.now();
        let mut st = self.inner.state.lock();
        let now = st.tick(raw);
        st.limiter.set_mode(limit);
        let capacity = st.capacity();
        st.why.set_threads(capacity, now);
        // A higher limit may let a parked batch or a queued one go.
        if st.pending() {
            self.inner.wake_all(&mut st);
        }
        Ok(())
    }

    /// Puts the quota rules `quota` in force (`None`: no quota layer), at run time, losing
    /// nothing: a rule that keeps its name keeps its counts; requests held under a rule that
    /// goes are classified again (and go to the policy if no rule governs them any more);
    /// requests already admitted complete normally. See [`crate::quota`].
    ///
    /// # Errors
    /// [`RuntimeError::Quota`] naming the rule at fault if the set is invalid, or if it has
    /// rules and [`Scheduler::set_service_threads`] was never called; nothing is changed then.
    pub fn set_quota(&self, quota: Option<QuotaConfig>) -> Result<(), RuntimeError> {
        self.update_quota(|_| Ok(quota))
    }

    /// Computes the new rule set from the one in force and puts it in force, under one lock (so
    /// that two concurrent changes never lose one another).
    fn update_quota(
        &self,
        change: impl FnOnce(Option<&QuotaConfig>) -> Result<Option<QuotaConfig>, RuntimeError>,
    ) -> Result<(), RuntimeError> {
        let raw = self.inner.clock.now();
        let mut st = self.inner.state.lock();
        let quota = change(st.gate.as_ref().map(Gate::config))?;
        if let Some(cfg) = &quota {
            cfg.validate()?;
        }
        let now = st.tick(raw);
        let threads = st.service_threads;
        // Every rule needs it, not only thread quotas: the gate admits at most one request per
        // service thread, so that its order (reservations, weights) is the one that counts.
        if let (Some(cfg), 0) = (&quota, threads) {
            if let Some(r) = cfg.rules.first() {
                return Err(RuntimeError::Quota {
                    rule: r.name.clone(),
                    reason: "quota rules need the number of service threads \
                             (set_service_threads)"
                        .into(),
                });
            }
        }
        let threads = threads.max(1);
        let free = match (quota, st.gate.take()) {
            (None, None) => Vec::new(),
            (None, Some(mut old)) => old.reconfigure(QuotaConfig::default(), now),
            (Some(cfg), None) => {
                st.gate = Some(Gate::new(cfg, threads));
                Vec::new()
            }
            (Some(cfg), Some(old)) => {
                // A new thread count changes the caps; counts carry over by rule name.
                let mut gate = old.with_threads(threads);
                let free = gate.reconfigure(cfg, now);
                st.gate = Some(gate);
                free
            }
        };
        let s = &mut *st;
        for req in free {
            admit(
                &mut s.why,
                &mut s.jobs,
                &mut s.payloads,
                &mut s.active.policy,
                req,
                now,
            );
        }
        st.pump(now);
        self.inner.wake_all(&mut st);
        Ok(())
    }

    /// The quota rules in force, if any.
    pub fn quota(&self) -> Option<QuotaConfig> {
        self.inner
            .state
            .lock()
            .gate
            .as_ref()
            .map(|g| g.config().clone())
    }

    /// Adds `rule` to the rules in force, at position `at` (`None`: last; rules are tried in
    /// order), without a restart; see [`Scheduler::set_quota`].
    ///
    /// # Errors
    /// [`RuntimeError::Quota`] if a rule of that name exists or the new set is invalid.
    pub fn add_rule(&self, rule: RuleSpec, at: Option<usize>) -> Result<(), RuntimeError> {
        self.update_quota(|current| {
            let mut cfg = current.cloned().unwrap_or_default();
            if cfg.rules.iter().any(|r| r.name == rule.name) {
                return Err(RuntimeError::Quota {
                    rule: rule.name,
                    reason: "a rule of this name exists (delete it first)".into(),
                });
            }
            let at = at.unwrap_or(cfg.rules.len()).min(cfg.rules.len());
            cfg.rules.insert(at, rule);
            Ok(Some(cfg))
        })
    }

    /// Removes the rule named `name`; its held requests are classified again.
    ///
    /// # Errors
    /// [`RuntimeError::Quota`] if no rule has that name.
    pub fn remove_rule(&self, name: &str) -> Result<(), RuntimeError> {
        self.update_quota(|current| {
            let mut cfg = current.cloned().unwrap_or_default();
            let Some(i) = cfg.rules.iter().position(|r| r.name == name) else {
                return Err(RuntimeError::Quota {
                    rule: name.into(),
                    reason: "no rule has this name".into(),
                });
            };
            cfg.rules.remove(i);
            Ok(Some(cfg))
        })
    }

    /// The quota rules in force with their counters (empty without quotas).
    pub fn rules(&self) -> Vec<crate::RuleStats> {
        let now = self.inner.clock.now();
        let st = self.inner.state.lock();
        let now = now.max(st.last_now);
        st.gate.as_ref().map(|g| g.stats(now)).unwrap_or_default()
    }

    /// The active policy's name.
    pub fn policy_name(&self) -> &'static str {
        self.inner.state.lock().active.policy.name()
    }

    /// Refuses new requests from now on. Workers keep receiving what is queued; `next` returns
    /// `None` once the queue is empty. Batches in service complete normally.
    pub fn shutdown(&self) {
        let mut st = self.inner.state.lock();
        st.shutdown = true;
        self.inner.wake_all(&mut st);
    }

    /// Whether [`Scheduler::shutdown`] was called.
    pub fn is_shut_down(&self) -> bool {
        self.inner.state.lock().shutdown
    }

    /// Blocks until nothing is queued and nothing is in service. Needs workers to make progress.
    pub fn wait_idle(&self) {
        let mut st = self.inner.state.lock();
        while st.queued() > 0 || st.in_flight() > 0 || st.held() > 0 {
            st.idle_waiters += 1;
            self.inner.idle_cv.wait(&mut st);
            st.idle_waiters -= 1;
        }
    }

    /// As [`Scheduler::wait_idle`], giving up after `timeout`; returns whether the scheduler is idle.
    pub fn wait_idle_timeout(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        let mut st = self.inner.state.lock();
        while st.queued() > 0 || st.in_flight() > 0 || st.held() > 0 {
            let Some(deadline) = deadline else {
                st.idle_waiters += 1;
                self.inner.idle_cv.wait(&mut st);
                st.idle_waiters -= 1;
                continue;
            };
            st.idle_waiters += 1;
            let timed_out = self.inner.idle_cv.wait_until(&mut st, deadline).timed_out();
            st.idle_waiters -= 1;
            if timed_out {
                return st.queued() == 0 && st.in_flight() == 0 && st.held() == 0;
            }
        }
        true
    }

    /// A snapshot of the counters and of every job's statistics.
    pub fn stats(&self) -> SchedulerStats {
        let st = self.inner.state.lock();
        let now = st.last_now.max(self.inner.clock.now());
        let active: Vec<(JobId, u64, u64)> = st
            .jobs
            .iter()
            .map(|(&j, e)| (j, e.queued, e.in_service))
            .collect();
        let prios: Vec<(JobId, Provenance)> = st.priorities.iter().map(|(&j, &p)| (j, p)).collect();
        let mut stats = SchedulerStats {
            policy: st.active.policy.name(),
            counters: st.counters(),
            submitted: st.submitted,
            queued: st.queued(),
            held: st.held(),
            rules: st.gate.as_ref().map(|g| g.stats(now)).unwrap_or_default(),
            in_flight: st.in_flight(),
            requests_in_service: st.requests_in_service,
            retired_policies: st.retired.len(),
            switches: st.switches,
            rejected_completions: st.rejected_completions,
            shut_down: st.shutdown,
            inservice: InServiceStats {
                mode: st.limiter.mode(),
                limit: st.limiter.limit(),
                data_in_service: st.limiter.in_service(),
                parked: st.parked.is_some(),
                changes: st.limiter.changes(),
            },
            jobs: Vec::new(),
            forgotten_jobs: 0,
            evicted_jobs: 0,
        };
        // The book's locks are taken only once the scheduler's is released.
        drop(st);
        stats.evicted_jobs = self.inner.book.evicted();
        stats.forgotten_jobs = self.inner.book.forgotten();
        // One vector, sorted once: what a report of 100,000 jobs holds is their statistics,
        // not also a map of them. The jobs with work or a priority (few) are merged in.
        let mut jobs = self
            .inner
            .book
            .entries(now, |job, e| with_entry(JobStats::idle(job), e));
        jobs.sort_unstable_by_key(|j| j.job);
        let known = jobs.len();
        // The jobs not in the book, by id: where each was appended.
        let mut extra: IdMap<JobId, usize> = IdMap::default();
        let mut at = |jobs: &mut Vec<JobStats>, job: JobId| -> usize {
            match jobs[..known].binary_search_by_key(&job, |j| j.job) {
                Ok(i) => i,
                Err(_) => *extra.entry(job).or_insert_with(|| {
                    jobs.push(JobStats::idle(job));
                    jobs.len() - 1
                }),
            }
        };
        for (job, queued, in_service) in active {
            let i = at(&mut jobs, job);
            jobs[i].queued = queued;
            jobs[i].in_service = in_service;
        }
        for (job, prov) in prios {
            let i = at(&mut jobs, job);
            jobs[i].priority = prov.in_force();
        }
        if jobs.len() > known {
            jobs.sort_unstable_by_key(|j| j.job);
        }
        stats.jobs = jobs;
        stats
    }

    /// One job's statistics, if the scheduler knows it (as in [`Scheduler::stats`]).
    pub fn job_stats(&self, job: JobId) -> Option<JobStats> {
        let (active, prov, now) = {
            let st = self.inner.state.lock();
            let active = st.jobs.get(&job).map(|e| (e.queued, e.in_service));
            let now = st.last_now.max(self.inner.clock.now());
            (active, st.priorities.get(&job).copied(), now)
        };
        let entry = self.inner.book.entry(job, now);
        if active.is_none() && prov.is_none() && entry.is_none() {
            return None;
        }
        let mut j = JobStats::idle(job);
        if let Some(e) = &entry {
            j = with_entry(j, e);
        }
        if let Some((queued, in_service)) = active {
            j.queued = queued;
            j.in_service = in_service;
        }
        if let Some(p) = prov.and_then(Provenance::in_force) {
            j.priority = Some(p);
        }
        Some(j)
    }

    /// Removes and returns `job`'s statistics, if the job is known and has nothing queued or in
    /// service (a server calls this when a job ends, to bound memory); its automatic priority is
    /// withdrawn, a control-plane one stays. `None` otherwise.
    pub fn forget_job(&self, job: JobId) -> Option<JobStats> {
        let raw = self.inner.clock.now();
        let now = {
            let mut st = self.inner.state.lock();
            if st.jobs.contains_key(&job) {
                return None;
            }
            let now = st.tick(raw);
            st.set_source(job, PrioritySource::Auto, None, now);
            now
        };
        let entry = self.inner.book.remove(job, now)?;
        Some(with_entry(JobStats::idle(job), &entry))
    }

    /// Checks every conservation invariant: each policy instance's own balance, the aggregate
    /// counters, and the runtime's bookkeeping (payloads held, per-job counts, requests accounted
    /// for as queued, in service or completed).
    ///
    /// # Errors
    /// The first invariant found broken.
    pub fn check_balance(&self) -> Result<(), RuntimeError> {
        let st = self.inner.state.lock();
        st.active.policy.check_balance()?;
        for r in &st.retired {
            r.policy.check_balance()?;
        }
        let c = st.counters();
        let queued = st.queued() as u64;
        let held = st.held() as u64;
        let ops = st.completed;
        if let Some(gate) = &st.gate {
            if let Err((what, expected, found)) = gate.check() {
                return Err(RuntimeError::Unbalanced {
                    what,
                    expected,
                    found,
                });
            }
        }
        let (why_requests, why_batches) = st.why.in_service();
        let checks: [(&'static str, u64, u64); 8] = [
            (
                "requests in service in the wait accounting",
                st.requests_in_service,
                why_requests,
            ),
            (
                "batches in service in the wait accounting",
                st.in_flight() as u64,
                why_batches as u64,
            ),
            (
                "queued requests (inserted − merged − dispatched − withdrawn)",
                c.queued(),
                queued,
            ),
            (
                "batches in service (dispatched − completed)",
                c.in_flight(),
                st.in_flight() as u64,
            ),
            (
                "payloads held for queued and quota-held requests",
                queued + held,
                st.payloads.len() as u64,
            ),
            (
                "per-job queued requests (in the policy or held by the quota gate)",
                queued + held,
                st.jobs.values().map(|j| j.queued).sum(),
            ),
            (
                "per-job requests in service",
                st.requests_in_service,
                st.jobs.values().map(|j| j.in_service).sum(),
            ),
            (
                "requests submitted (queued + held + in service + completed)",
                st.submitted,
                queued + held + st.requests_in_service + ops,
            ),
        ];
        for (what, expected, found) in checks {
            if expected != found {
                return Err(RuntimeError::Unbalanced {
                    what,
                    expected,
                    found,
                });
            }
        }
        let net_inserted = c.inserted.saturating_sub(c.withdrawn);
        if net_inserted + held != st.submitted {
            return Err(RuntimeError::Unbalanced {
                what: "requests inserted − withdrawn + held by the quota gate (submitted)",
                expected: st.submitted,
                found: net_inserted + held,
            });
        }
        Ok(())
    }
}

impl<T> fmt::Debug for Scheduler<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Scheduler");
        match self.inner.state.try_lock() {
            Some(st) => d
                .field("policy", &st.active.policy.name())
                .field("queued", &st.queued())
                .field("in_flight", &st.in_flight())
                .field("shut_down", &st.shutdown)
                .finish(),
            None => d.finish_non_exhaustive(),
        }
    }
}

/// `j` with the book's figures.
fn with_entry(mut j: JobStats, e: &BookEntry) -> JobStats {
    j.ops = e.ops;
    j.bytes_read = e.bytes_read;
    j.bytes_written = e.bytes_written;
    j.failed = e.failed;
    j.queue_wait = e.wait;
    j.wait_causes = e.causes;
    j.bandwidth = e.bandwidth;
    j.last_active = e.last_active;
    j.period = e.period;
    j.set = e.set;
    j.peers = e.peers;
    j.priority = e.hint.map(|value| JobPriority {
        value,
        source: PrioritySource::Hint,
    });
    j
}
