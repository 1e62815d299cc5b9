//! Why a request waited: its queue wait split by cause, exactly.
//!
//! # The definition
//! A request's wait is `dispatch − arrival` on the scheduler's clock (what
//! [`crate::JobStats::queue_wait`] measures). It is split into five causes whose integer
//! nanoseconds sum to it exactly:
//!
//! - [`WaitCause::Rule`]: from arrival until the quota gate admitted it into the policy (a thread
//!   quota, a rate, an mClock reservation or weight held it; see [`crate::quota`]). Zero for a
//!   request no rule governs.
//! - From admission until dispatch the request is queued in the policy. Each instant of that time
//!   is charged by the state of the service threads at that instant:
//!   - **every service thread is busy** (batches in service ≥ [`crate::Scheduler::set_service_threads`];
//!     when the thread count was never given: at least one request is in service): the instant
//!     is shared among the requests in service, in proportion to their number. The share of the
//!     job's own requests is [`WaitCause::Device`] (it waits behind itself, i.e. the device's
//!     speed), that of other jobs of its set [`WaitCause::Exclusivity`], that of jobs of other
//!     sets [`WaitCause::Share`] (the policy's split between sets: WFQ's weights, IO-SETS'
//!     priorities);
//!   - **a thread is free** and the policy still did not dispatch the request: the instant is
//!     [`WaitCause::Exclusivity`] if another job of its set has a request in service (IO-SETS
//!     keeps a set for one job at a time), else [`WaitCause::Policy`] (a timer of the policy:
//!     anticipatory idling, deadline batching; or the workers' own time outside the scheduler:
//!     between a submit and a worker taking the request, between completing a batch and asking
//!     for the next).
//!
//! A job's **set** is the weighted queue the policy puts its requests in
//! ([`iosets_policy::Policy::queue_weight`], asked when the job starts sending, when a request
//! carries another class or hint than the previous one, when its priority changes and when a
//! policy is switched in): an IO-SETS set (jobs of one priority), a WFQ class, or the job
//! alone. For policies without weighted queues (`noop`, `timeorder`,
//! `deadline`, …) every job is a set of its own: `exclusivity` is then always zero and `share`
//! is the time spent behind other jobs' requests. A switch mid-wait charges the rest of the
//! wait under the new policy's sets.
//!
//! The proportional shares are kept in fixed point (2⁻³² ns) and rounded once per request:
//! `device` and `device + exclusivity` are each the exact rational value rounded to the nearest
//! nanosecond, `share` is the rest of the busy time, so each cause is within 1 ns of its exact
//! value and the five sum to the measured wait exactly.
//!
//! # Cost
//! No walk over jobs or requests: every event (admission, dispatch and completion of a request)
//! advances three global integrals — time with every thread busy, time with a thread free, and
//! ∫ busy / (requests in service). A job's and a set's integrals are kept as a base plus their
//! current rate times a global integral (`D = d + n·Q`), so they are read at any instant
//! without being written, and their bases change only when their rate does: when the job's
//! (or the set's) in-service count changes, or the job changes set. A request keeps a snapshot
//! of its job's integrals read at admission; at dispatch the differences are its split. A set
//! change of a job (rare) moves its in-service count from one set to the other.
//!
//! A build with the feature `bench-without-wait-causes` leaves all of it out (no snapshot, no
//! split): the baseline `bench/why_cost.sh` measures its cost against. It answers every job's
//! wait causes as zero and is for measuring only.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use iosets_policy::{Counted, QueueId};
use iosets_types::hash::IdBuildHasher;
use iosets_types::{ClassId, JobId, Nanos, Op, Priority, Request};

/// Fixed-point fraction bits of the proportional integrals.
const FRAC: u32 = 32;

/// One cause of a request's queue wait; see the [module documentation](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WaitCause {
    /// Held by a quota rule (thread quota, rate, reservation) before the policy saw it.
    Rule,
    /// Every service thread busy, with the job's own requests.
    Device,
    /// Behind another job of its set: its threads' share, or a free thread the policy kept
    /// for the set's job in service.
    Exclusivity,
    /// Every service thread busy, with jobs of other sets.
    Share,
    /// A thread free and nothing of its set in service, yet not dispatched (a policy timer).
    Policy,
}

impl WaitCause {
    /// Every cause, in report order.
    pub const ALL: [WaitCause; 5] = [
        WaitCause::Rule,
        WaitCause::Device,
        WaitCause::Exclusivity,
        WaitCause::Share,
        WaitCause::Policy,
    ];

    /// `rule`, `device`, `exclusivity`, `share` or `policy`.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitCause::Rule => "rule",
            WaitCause::Device => "device",
            WaitCause::Exclusivity => "exclusivity",
            WaitCause::Share => "share",
            WaitCause::Policy => "policy",
        }
    }

    /// The cause named `name` (as [`WaitCause::as_str`] spells it).
    pub fn from_name(name: &str) -> Option<WaitCause> {
        WaitCause::ALL.into_iter().find(|c| c.as_str() == name)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One request's wait, split: nanoseconds per cause, in [`WaitCause::ALL`] order.
pub(crate) type Split = [u64; 5];

/// A job's queue waits split by cause, over its completed requests: per cause the nanoseconds
/// and the number of requests that waited for it at all.
///
/// For the same requests, [`WaitCauses::total_ns`] equals the sum of their measured waits
/// (`JobStats::queue_wait.sum_ns`) exactly. Nanoseconds saturate at `u64::MAX` (584 years);
/// request counts at `u32::MAX` (4 billion requests of one job waiting for one cause), to keep
/// the job book's record small (issue 16's memory budget).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitCauses {
    ns: [u64; 5],
    requests: [u32; 5],
}

impl WaitCauses {
    /// Nanoseconds of wait charged to `cause`.
    pub fn ns(&self, cause: WaitCause) -> u64 {
        self.ns[cause.index()]
    }

    /// Requests that waited some time for `cause`.
    pub fn requests(&self, cause: WaitCause) -> u64 {
        u64::from(self.requests[cause.index()])
    }

    /// The sum over the causes: the total measured wait.
    pub fn total_ns(&self) -> u64 {
        self.ns.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// Adds `other`'s figures (a job's waits on several servers).
    pub fn merge(&mut self, other: &WaitCauses) {
        for i in 0..5 {
            self.ns[i] = self.ns[i].saturating_add(other.ns[i]);
            self.requests[i] = self.requests[i].saturating_add(other.requests[i]);
        }
    }

    /// Adds one request's split.
    pub(crate) fn add(&mut self, split: &Split) {
        for (i, &ns) in split.iter().enumerate() {
            if ns > 0 {
                self.ns[i] = self.ns[i].saturating_add(ns);
                self.requests[i] = self.requests[i].saturating_add(1);
            }
        }
    }
}

/// Whether requests' waits are split: false only in the measuring build without the split
/// (feature `bench-without-wait-causes`, the baseline `bench/why_cost.sh` measures against),
/// where every [`Why`] method returns at once and no snapshot or split is kept.
pub(crate) const SPLIT: bool = !cfg!(feature = "bench-without-wait-causes");

/// In the measuring build without the split: nothing.
#[cfg(feature = "bench-without-wait-causes")]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Snap {}

/// A request's snapshot of its job's integrals, taken when the policy got it.
#[cfg(not(feature = "bench-without-wait-causes"))]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Snap {
    /// Time held by the quota gate (admission − arrival).
    rule: u64,
    /// `G` then (`F` is derived: the time since admission minus `G`'s growth).
    g: u64,
    /// The job's `ap + k − r` then, wrapping: only its growth (never negative, below 2^64 ns)
    /// is used.
    x: u64,
    ae: u128,
    d: u128,
}

/// One set's integrals (see [`Why`]), each kept as a base plus its current rate times the global
/// integral it grows with, so that nothing is brought up to date at an event that does not
/// change a rate: `E = e + n·Q`, `P = p + [n > 0]·F`, `C = c + [holders ≥ 2]·F` (wrapping: only
/// differences are used, and they are below 2^128 and 2^64).
#[derive(Clone, Copy, Debug, Default)]
struct SetAcc {
    /// Jobs tracked in the set (0: kept empty, counted in [`Why::empty`]).
    members: u32,
    /// Jobs of the set with a request in service.
    holders: u32,
    /// Requests of the set in service.
    n: u64,
    /// `E − n·Q`, where `E = ∫ busy · n_S / N` (fixed point).
    e: u128,
    /// `P − [n > 0]·F`, where `P = ∫ free · [n_S > 0]`.
    p: u64,
    /// `C − [holders ≥ 2]·F`, where `C = ∫ free · [holders ≥ 2]`.
    c: u64,
}

impl SetAcc {
    #[inline]
    fn e_at(&self, q: u128) -> u128 {
        self.e.wrapping_add(u128::from(self.n).wrapping_mul(q))
    }

    #[inline]
    fn p_at(&self, f: u64) -> u64 {
        if self.n > 0 {
            self.p.wrapping_add(f)
        } else {
            self.p
        }
    }

    #[inline]
    fn c_at(&self, f: u64) -> u64 {
        if self.holders >= 2 {
            self.c.wrapping_add(f)
        } else {
            self.c
        }
    }

    /// `n` more requests in service (`holder`: one more job holding), at `q`, `f`; the
    /// integrals stay continuous.
    #[inline]
    fn add(&mut self, n: u64, holder: bool, q: u128, f: u64) {
        self.e = self.e.wrapping_sub(u128::from(n).wrapping_mul(q));
        if self.n == 0 && n > 0 {
            self.p = self.p.wrapping_sub(f);
        }
        self.n += n;
        if holder {
            self.holders += 1;
            if self.holders == 2 {
                self.c = self.c.wrapping_sub(f);
            }
        }
    }

    /// `n` fewer requests in service (`holder`: one job fewer holding), at `q`, `f`.
    #[inline]
    fn remove(&mut self, n: u64, holder: bool, q: u128, f: u64) {
        self.e = self.e.wrapping_add(u128::from(n).wrapping_mul(q));
        self.n -= n;
        if self.n == 0 && n > 0 {
            self.p = self.p.wrapping_add(f);
        }
        if holder {
            if self.holders == 2 {
                self.c = self.c.wrapping_add(f);
            }
            self.holders -= 1;
        }
    }
}

/// One job's integrals, kept while it has requests queued, held or in service, as bases (like
/// [`SetAcc`]'s): changed only when the job's in-service count or its set changes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct JobAcc {
    /// Its set, once the policy got one of its requests.
    set: Option<QueueId>,
    /// The class and priority hint of its latest admitted request, to ask the policy again
    /// for its set.
    template: Option<(Option<ClassId>, Option<Priority>)>,
    /// Its requests in service.
    n: u64,
    /// `D − n·Q`, where `D = ∫ busy · n_j / N` (fixed point).
    d: u128,
    /// `AE − E_S` in a set of several jobs, `AE − D` in a set of one, `AE` without a set, where
    /// `AE` is the sum over its time in a set of that set's `E` growth.
    ae: u128,
    /// `X − P_S − [n_j > 0]·(C_S − F)` in a set of several jobs, `X` otherwise, where
    /// `X = AP + K − R` (`AP`: its sets' `P` growth; `K = ∫ free · [n_j > 0] · [holders ≥ 2]`;
    /// `R = ∫ free · [n_j > 0]`): its growth over a wait is the free time charged to
    /// exclusivity, `∫ free · [another job of its set in service]`. In a set of one `X` does
    /// not grow (`AP = R`, `K = 0`).
    x: u64,
}

/// A job's integrals at one instant: `D`, `AE`, `X` (see [`JobAcc`]).
struct Values {
    d: u128,
    ae: u128,
    x: u64,
}

/// The scheduler's wait accounting, under its lock; see the [module documentation](self).
#[derive(Debug, Default)]
pub(crate) struct Why {
    /// Turned off ([`crate::Scheduler::set_wait_causes`]): every method returns at once.
    off: bool,
    last: Nanos,
    /// Service threads (0: not told).
    threads: usize,
    /// Batches in service, in every policy instance.
    batches: usize,
    /// Requests in service.
    n: u64,
    /// ∫ busy dt.
    g: u64,
    /// ∫ free dt.
    f: u64,
    /// ∫ busy / N dt (fixed point).
    q: u128,
    sets: HashMap<QueueId, SetAcc, IdBuildHasher>,
    /// Sets in `sets` with no member left, kept for a member that comes back (IO-SETS jobs of
    /// a set often take turns with nothing queued in between); dropped all at once when there
    /// are more than [`EMPTY_SETS_KEPT`] of them.
    empty: usize,
}

/// Empty sets kept before they are dropped (see [`Why::leave`]).
const EMPTY_SETS_KEPT: usize = 64;

impl Why {
    /// Brings the global integrals to `now`.
    #[inline]
    fn advance(&mut self, now: Nanos) {
        if now <= self.last {
            return;
        }
        let dt = now.0 - self.last.0;
        self.last = now;
        let busy = self.n > 0 && (self.threads == 0 || self.batches >= self.threads);
        if busy {
            self.g += dt;
            // A 64-bit division when the step is under 2^32 ns (4.3 s): nearly always.
            self.q += match dt.checked_shl(FRAC).filter(|_| dt >> (64 - FRAC) == 0) {
                Some(scaled) => u128::from(scaled / self.n),
                None => (u128::from(dt) << FRAC) / u128::from(self.n),
            };
        } else {
            self.f += dt;
        }
    }

    /// The service threads changed (at `now`).
    pub(crate) fn set_threads(&mut self, threads: usize, now: Nanos) {
        if !SPLIT || self.off {
            return;
        }
        self.advance(now);
        self.threads = threads;
    }

    /// `job`'s integrals now (the global integrals brought to now), and its set's entry when
    /// it is in a set of several jobs.
    #[inline]
    fn values<'s>(
        sets: &'s mut HashMap<QueueId, SetAcc, IdBuildHasher>,
        q: u128,
        f: u64,
        job: &JobAcc,
    ) -> (Values, Option<&'s mut SetAcc>) {
        let d = match job.n {
            0 => job.d,
            n => job.d.wrapping_add(u128::from(n).wrapping_mul(q)),
        };
        match job.set {
            None => (
                Values {
                    d,
                    ae: job.ae,
                    x: job.x,
                },
                None,
            ),
            // A set of one job needs no map entry: its integrals are the job's own
            // (`E = D`, `P = R`, `C = 0`).
            Some(QueueId::Job(_)) => (
                Values {
                    d,
                    ae: job.ae.wrapping_add(d),
                    x: job.x,
                },
                None,
            ),
            Some(key) => {
                let s = sets.get_mut(&key).expect("a tracked job's set is tracked");
                let mut x = job.x.wrapping_add(s.p_at(f));
                if job.n > 0 {
                    x = x.wrapping_add(s.c_at(f)).wrapping_sub(f);
                }
                let ae = job.ae.wrapping_add(s.e_at(q));
                (Values { d, ae, x }, Some(s))
            }
        }
    }

    /// Puts `job` in set `key`, moving its in-service count; its integrals stay continuous.
    fn place(&mut self, job: &mut JobAcc, key: QueueId) {
        if job.set == Some(key) {
            return;
        }
        let (q, f) = (self.q, self.f);
        if job.set.is_none() && job.n == 0 {
            // A job's first set (nothing in service yet): its integrals have not grown.
            if let QueueId::Job(_) = key {
                job.set = Some(key);
                job.ae = job.ae.wrapping_sub(job.d);
                return;
            }
        }
        let now = Why::values(&mut self.sets, q, f, job).0;
        if let Some(old) = job.set.take().filter(|k| !matches!(k, QueueId::Job(_))) {
            let s = self
                .sets
                .get_mut(&old)
                .expect("a tracked job's set is tracked");
            s.remove(job.n, job.n > 0, q, f);
            s.members -= 1;
            if s.members == 0 {
                self.emptied();
            }
        }
        job.set = Some(key);
        if let QueueId::Job(_) = key {
            job.ae = now.ae.wrapping_sub(now.d);
            job.x = now.x;
            return;
        }
        let (s, fresh) = match self.sets.entry(key) {
            Entry::Occupied(o) => (o.into_mut(), false),
            Entry::Vacant(v) => (v.insert(SetAcc::default()), true),
        };
        let revived = s.members == 0 && !fresh;
        s.add(job.n, job.n > 0, q, f);
        s.members += 1;
        job.ae = now.ae.wrapping_sub(s.e_at(q));
        let mut x = now.x.wrapping_sub(s.p_at(f));
        if job.n > 0 {
            x = x.wrapping_sub(s.c_at(f)).wrapping_add(f);
        }
        job.x = x;
        if revived {
            self.empty -= 1;
        }
    }

    /// `req` (of `job`) goes into `policy` at `now`: its set is looked up, and the snapshot its
    /// split will be computed from is returned.
    pub(crate) fn admit(
        &mut self,
        job: &mut JobAcc,
        policy: &Counted,
        req: &Request,
        now: Nanos,
    ) -> Snap {
        #[cfg(feature = "bench-without-wait-causes")]
        {
            let _ = (job, policy, req, now);
            Snap {}
        }
        #[cfg(not(feature = "bench-without-wait-causes"))]
        {
            if self.off {
                return Snap::default();
            }
            self.admit_split(job, policy, req, now)
        }
    }

    /// [`Why::admit`] in a build with the split.
    #[cfg(not(feature = "bench-without-wait-causes"))]
    fn admit_split(
        &mut self,
        job: &mut JobAcc,
        policy: &Counted,
        req: &Request,
        now: Nanos,
    ) -> Snap {
        self.advance(now);
        // The policy is asked only when the job has no set yet or the request carries another
        // class or hint than the last (a priority change or a switch asks it: `replace`).
        let template = Some((req.class, req.priority));
        if job.set.is_none() || job.template != template {
            let key = set_of(policy, req);
            if job.set != Some(key) {
                self.place(job, key);
            }
            job.template = template;
        }
        let v = Why::values(&mut self.sets, self.q, self.f, job).0;
        Snap {
            rule: now.0.saturating_sub(req.arrival.0),
            g: self.g,
            x: v.x,
            ae: v.ae,
            d: v.d,
        }
    }

    /// Asks `policy` again for `job`'s set (its priority changed, or `policy` was switched in).
    pub(crate) fn replace(&mut self, id: JobId, job: &mut JobAcc, policy: &Counted, now: Nanos) {
        if !SPLIT || self.off {
            return;
        }
        let Some((class, priority)) = job.template else {
            return;
        };
        let mut template = Request::builder(id, Op::Other).priority(priority).build();
        template.class = class;
        let key = set_of(policy, &template);
        if job.set != Some(key) {
            self.advance(now);
            self.place(job, key);
        }
    }

    /// One request of `job`, which arrived at `arrival` and was admitted with `snap`, is
    /// dispatched at `now`: its split.
    #[cfg(not(feature = "bench-without-wait-causes"))]
    pub(crate) fn dispatch(
        &mut self,
        job: &mut JobAcc,
        snap: &Snap,
        arrival: Nanos,
        now: Nanos,
    ) -> Split {
        self.advance(now);
        let (q, f) = (self.q, self.f);
        let (v, set_acc) = Why::values(&mut self.sets, q, f, job);
        let busy = self.g - snap.g;
        // Every instant since admission was busy or free.
        let queued = now.0.saturating_sub(arrival.0).saturating_sub(snap.rule);
        let free = queued.saturating_sub(busy);
        let round =
            |x: u128| -> u64 { u64::try_from((x + (1 << (FRAC - 1))) >> FRAC).unwrap_or(u64::MAX) };
        // Exact integrals guarantee d ≤ ae ≤ busy · 2^32; the bounds only guard the rounding.
        let set = round(v.ae.wrapping_sub(snap.ae)).min(busy);
        let device = round(v.d.wrapping_sub(snap.d)).min(set);
        let excl_free = v.x.wrapping_sub(snap.x).min(free);
        let split = [
            snap.rule,
            device,
            set - device + excl_free,
            busy - set,
            free - excl_free,
        ];
        // One more in service: `D`, `E`, `P`, `C` stay continuous, and so does `X` (its rate
        // gains `C_S − F` when the job starts holding).
        job.d = job.d.wrapping_sub(q);
        if let Some(s) = set_acc {
            let first = job.n == 0;
            s.add(1, first, q, f);
            if first {
                job.x = job.x.wrapping_sub(s.c_at(f)).wrapping_add(f);
            }
        }
        job.n += 1;
        self.n += 1;
        split
    }

    /// A batch was handed out (after its requests' [`Why::dispatch`]).
    pub(crate) fn batch_out(&mut self) {
        if !SPLIT || self.off {
            return;
        }
        self.batches += 1;
    }

    /// One request of `job` completed at `now`.
    pub(crate) fn complete(&mut self, job: &mut JobAcc, now: Nanos) {
        if !SPLIT || self.off {
            return;
        }
        self.advance(now);
        if job.n == 0 {
            return;
        }
        let (q, f) = (self.q, self.f);
        job.d = job.d.wrapping_add(q);
        if let Some(key) = job.set.filter(|k| !matches!(k, QueueId::Job(_))) {
            let s = self
                .sets
                .get_mut(&key)
                .expect("a tracked job's set is tracked");
            let last = job.n == 1;
            if last {
                job.x = job.x.wrapping_add(s.c_at(f)).wrapping_sub(f);
            }
            s.remove(1, last, q, f);
        }
        job.n -= 1;
        self.n -= 1;
    }

    /// A batch completed (after its requests' [`Why::complete`]), at `now`.
    pub(crate) fn batch_done(&mut self, now: Nanos) {
        if !SPLIT || self.off {
            return;
        }
        self.advance(now);
        self.batches = self.batches.saturating_sub(1);
    }

    /// `job` has nothing held, queued or in service any more: it leaves its set.
    pub(crate) fn leave(&mut self, job: &JobAcc) {
        if !SPLIT || self.off {
            return;
        }
        let Some(key) = job.set.filter(|k| !matches!(k, QueueId::Job(_))) else {
            return;
        };
        if let Some(s) = self.sets.get_mut(&key) {
            s.members -= 1;
            if s.members == 0 {
                self.emptied();
            }
        }
    }

    /// A set lost its last member: kept, unless too many are; then every empty one goes
    /// (amortised O(1): at least [`EMPTY_SETS_KEPT`] leaves between two sweeps).
    fn emptied(&mut self) {
        self.empty += 1;
        if self.empty > EMPTY_SETS_KEPT {
            self.sets.retain(|_, s| s.members > 0);
            self.empty = 0;
        }
    }

    /// Whether requests' waits are split (compiled in and not turned off).
    pub(crate) fn on(&self) -> bool {
        SPLIT && !self.off
    }

    /// Turns the split on or off; only while nothing is queued, held or in service (the
    /// caller checks), so that no integral counts a request it will not see leave.
    pub(crate) fn set_on(&mut self, on: bool) {
        self.off = !on;
    }

    /// Requests and batches in service, as the accounting counts them (for the balance checks).
    pub(crate) fn in_service(&self) -> (u64, usize) {
        (self.n, self.batches)
    }
}

/// The set `req` belongs to under `policy`: its weighted queue, else its job alone.
fn set_of(policy: &Counted, req: &Request) -> QueueId {
    policy
        .queue_weight(req)
        .map_or(QueueId::Job(req.job), |w| w.queue)
}

/// In the measuring build without the split: nothing kept.
#[cfg(feature = "bench-without-wait-causes")]
#[derive(Clone, Debug)]
pub(crate) struct Splits;

#[cfg(feature = "bench-without-wait-causes")]
impl Splits {
    /// Nothing, whatever the batch.
    pub(crate) fn with_capacity(_len: usize) -> Splits {
        Splits
    }

    /// No split.
    pub(crate) fn none() -> Splits {
        Splits
    }

    /// No split: none.
    pub(crate) fn as_slice(&self) -> &[Split] {
        &[]
    }
}

/// The splits of one batch's requests, in batch order (inline for the common batch of one).
#[cfg(not(feature = "bench-without-wait-causes"))]
#[derive(Clone, Debug)]
pub(crate) enum Splits {
    One(Split),
    Many(Vec<Split>),
}

#[cfg(not(feature = "bench-without-wait-causes"))]
impl Splits {
    /// No split kept (the split is off): none recorded.
    pub(crate) fn none() -> Splits {
        Splits::Many(Vec::new())
    }

    /// No split yet, for a batch of `len` requests.
    pub(crate) fn with_capacity(len: usize) -> Splits {
        if len == 1 {
            Splits::One([0; 5])
        } else {
            Splits::Many(Vec::with_capacity(len))
        }
    }

    /// Sets the split of the batch's `i`-th request (in order).
    pub(crate) fn push(&mut self, i: usize, split: Split) {
        match self {
            Splits::One(s) => {
                debug_assert_eq!(i, 0);
                *s = split;
            }
            Splits::Many(v) => v.push(split),
        }
    }

    /// The splits, in batch order.
    pub(crate) fn as_slice(&self) -> &[Split] {
        match self {
            Splits::One(s) => std::slice::from_ref(s),
            Splits::Many(v) => v,
        }
    }
}
