//! `iosets`: the IO-SETS method (Boito et al., TPDS 2023; seed 004's server-side form).
//!
//! Jobs are grouped into *sets* by priority: all jobs with the same priority form one set (Set-10
//! gives set `i` the priority `10^-i`, see [`crate::set10`]). Two rules:
//!
//! 1. **Inside a set, one job at a time.** The job holding the set is served until it has nothing
//!    queued *and* nothing in service; only then does the set pass on. While the holder has a request
//!    in service and nothing queued, other jobs of the set wait (the set is blocked, not idle-able by
//!    timer: it resumes on the holder's completion). The next holder is the waiting job whose current
//!    burst arrived first (`order=arrival`, the paper's rule) or the next job id after the last
//!    holder, wrapping around (`order=jobid`, seed 004's BeeGFS rule).
//! 2. **Across sets, weighted fair queuing by bytes** with the set priorities as weights
//!    ([`crate::wf2q::Wf2q`]): sets with priorities 0.1 and 0.01, both backlogged, get 10:1 of the
//!    bytes; a set with nothing dispatchable takes no share.
//!
//! A job's burst starts when a request arrives while the job has nothing queued and nothing in
//! service. With `max_exclusive_ms > 0`, a holder that has held its set that long *while another
//! job of the set waits* yields: it dispatches nothing more, its in-service requests finish, and it
//! queues behind the others with a new burst time. This bounds the starvation seed 004 worries about.
//!
//! **Anticipation (`hold_idle_ms`).** Real applications do I/O synchronously: one request
//! outstanding, then the next; a write phase ends with an `fsync` sent only after the writes are
//! answered. Under rule 1 as the paper states it (`hold_idle_ms=0`, the default, exactly that rule),
//! the holder's queue is empty for a moment between two of its own requests, the set passes on at
//! once, and the holder's next request (or its `fsync`) starts a new burst behind every other job of
//! the set: the job loses its turn and IO-SETS its gain. With `hold_idle_ms > 0`, when the holder's
//! last in-service request completes and it has nothing queued, it keeps the set, *lingering*, until
//! `completion + hold_idle_ms` (Linux's anticipatory scheduler and CFQ's `slice_idle` idle the same
//! way for the same process's next request):
//! - while it lingers the set dispatches nothing and takes no share across sets (it is not
//!   backlogged in WF²Q+); other sets are served as usual; lingering is neither queued nor in
//!   service;
//! - a request of the holder arriving in the window ends the linger and the job goes on holding
//!   with its current burst (no new burst time);
//! - when the window closes (checked at the start of [`Policy::dispatch`]) the job retires exactly
//!   as with `hold_idle_ms=0`: the set passes to the next waiter, and a later request of the job is
//!   a new burst that queues behind them;
//! - `dispatch` answers [`Dispatch::NotBefore`] with the earliest window end, instead of `Idle`,
//!   when nothing can go now but some set lingers;
//! - a linger counts in the holder's tenure: it does not start once the holder is past
//!   `max_exclusive_ms` with another job waiting, and it ends no later than that bound when another
//!   job already waits as it starts; a holder that has yielded does not linger;
//! - a job alone in a set of its own never lingers (nobody could take its set); a priority change
//!   or a [`Policy::drain`] ends a linger and retires the job.
//!
//! A job's priority, first match wins: set from the control plane ([`Policy::set_priority`]); from its
//! period given as tunable `period.<job>=<seconds>`, mapped by Set-b with base `base`
//! ([`crate::set10::SetMapping`]); the hint on its latest request; else none — then it is put in a
//! set of its own (keyed by its job id) with `default_priority` (seed 004: 1/50), so jobs without an
//! estimate never exclude each other.
//!
//! When a job's priority changes it moves, with its queue, to the new set. If it had a request in
//! service, the old set is released at once and in the new set it holds only if the set was free:
//! exclusivity is relaxed for that one moment (documented, rare: priorities change on new period
//! estimates).
//!
//! Costs: `O(log n)` per call in jobs and sets; jobs and sets exist only while they have work (or
//! linger). With `hold_idle_ms=0` the anticipation costs one branch per call.

mod linger;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, VecDeque};

use slab::Slab;

use crate::set10::{SetMapping, DEFAULT_PRIORITY};
use crate::tunables::{TunableSpec, Tunables};
use crate::wf2q::Wf2q;
use crate::{
    Batch, Dispatch, JobId, Nanos, Outcome, Policy, PolicyError, Priority, QueueId, QueueWeight,
    Request, RequestId,
};
use iosets_types::hash::IdMap;
use linger::Lingering;

/// Registry name.
pub const NAME: &str = "iosets";
/// Tunables of `iosets`.
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "order",
        default: "arrival",
        help: "who holds a set next: arrival (first burst to arrive, the paper) or jobid (next id, seed 004)",
    },
    TunableSpec {
        name: "max_exclusive_ms",
        default: "0",
        help: "longest a job holds its set while another job of the set waits, in ms (0 = unbounded)",
    },
    TunableSpec {
        name: "hold_idle_ms",
        default: "0",
        help: "anticipation: how long a holder with nothing queued or in service keeps its set for its \
               next request (synchronous I/O, fsync after writes), in ms, 0 .. 60000 (0 = pass the \
               set on at once, the paper)",
    },
    TunableSpec {
        name: "default_priority",
        default: "0.02",
        help: "priority of a job with no priority yet; it gets a set of its own (seed 004: 1/50)",
    },
    TunableSpec {
        name: "base",
        default: "10",
        help: "base b of the Set-b mapping of period.<job>: set round(log_b w_iter), priority b^-set (> 1)",
    },
    TunableSpec {
        name: "period.<job>",
        default: "",
        help: "I/O period w_iter of job <job> in seconds; places it by Set-b (e.g. period.3=64)",
    },
];

/// Who holds a set next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// The waiting job whose burst arrived first (IO-SETS paper).
    Arrival,
    /// The next job id after the last holder, wrapping (seed 004's BeeGFS implementation).
    JobId,
}

/// How many emptied job queues are kept for reuse.
const SPARE_QUEUES: usize = 256;

/// A set: all jobs of one priority, or a job without priority alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum SetKey {
    Priority(u64),
    Solo(JobId),
}

/// A slot in the job or set slab.
type Slot = usize;

/// When a job's current burst arrived: the time, and a sequence number that orders bursts arriving
/// at the same instant (every burst gets a new one, so no two are equal).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Burst {
    at: Nanos,
    seq: u64,
}

/// A waiting job's place under `order=arrival`: the earliest burst first. The slot rides along for
/// direct access; it never decides the order (bursts are unique).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ArrivalKey {
    burst: Burst,
    slot: Slot,
}

/// A waiting job's place under `order=jobid`: by job id (unique in a set); the slot rides along.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct JobIdKey {
    job: JobId,
    slot: Slot,
}

/// The jobs of a set waiting for it, in the policy's [`Order`]: one key type per order, so the
/// two cannot be mixed in one list. A job's key is computed from the job itself (its burst or its
/// id, neither of which changes while it waits), so the job only records *that* it waits.
#[derive(Debug)]
enum Waiters {
    Arrival(BTreeSet<ArrivalKey>),
    JobId(BTreeSet<JobIdKey>),
}

impl Waiters {
    fn new(order: Order) -> Waiters {
        match order {
            Order::Arrival => Waiters::Arrival(BTreeSet::new()),
            Order::JobId => Waiters::JobId(BTreeSet::new()),
        }
    }

    fn insert(&mut self, job: &Job, slot: Slot) {
        let fresh = match self {
            Waiters::Arrival(w) => w.insert(ArrivalKey {
                burst: job.burst,
                slot,
            }),
            Waiters::JobId(w) => w.insert(JobIdKey { job: job.id, slot }),
        };
        debug_assert!(fresh, "job {} waits twice", job.id);
    }

    fn remove(&mut self, job: &Job, slot: Slot) {
        let found = match self {
            Waiters::Arrival(w) => w.remove(&ArrivalKey {
                burst: job.burst,
                slot,
            }),
            Waiters::JobId(w) => w.remove(&JobIdKey { job: job.id, slot }),
        };
        debug_assert!(found, "job {} was not waiting", job.id);
    }

    fn is_empty(&self) -> bool {
        match self {
            Waiters::Arrival(w) => w.is_empty(),
            Waiters::JobId(w) => w.is_empty(),
        }
    }

    /// The waiter that takes the set when it is free: the earliest burst, or the next job id after
    /// `last_holder`, wrapping around.
    fn next(&self, last_holder: Option<JobId>) -> Option<Slot> {
        match self {
            Waiters::Arrival(w) => w.first().map(|k| k.slot),
            Waiters::JobId(w) => {
                let after = last_holder.map(|last| JobIdKey {
                    job: JobId(last.0.saturating_add(1)),
                    slot: 0,
                });
                after
                    .and_then(|from| w.range(from..).next())
                    .or_else(|| w.first())
                    .map(|k| k.slot)
            }
        }
    }

    /// Every waiter's slot, in order.
    fn slots(&self) -> Vec<Slot> {
        match self {
            Waiters::Arrival(w) => w.iter().map(|k| k.slot).collect(),
            Waiters::JobId(w) => w.iter().map(|k| k.slot).collect(),
        }
    }
}

#[derive(Debug)]
struct Job {
    id: JobId,
    queue: VecDeque<Request>,
    in_service: u32,
    /// The slot of the job's set.
    set: Slot,
    /// The job is in its set's waiting list.
    waiting: bool,
    /// When its current burst arrived (the key of `order=arrival`).
    burst: Burst,
    hint: Option<Priority>,
}

#[derive(Debug)]
struct Set {
    key: SetKey,
    priority: Priority,
    members: usize,
    /// The slot of the job holding the set.
    holder: Option<Slot>,
    /// The holder exceeded `max_exclusive` and waits for its in-service requests to finish.
    yielding: bool,
    /// When the holder took the set.
    held_since: Nanos,
    /// Since when some other job has been waiting while the holder holds (None: nobody waits).
    contended_since: Option<Nanos>,
    /// The last job that held the set (for `order=jobid`).
    last_holder: Option<JobId>,
    waiting: Waiters,
    /// The holder lingers (`hold_idle_ms`): the sequence number of its entry in
    /// [`IoSets::lingering`]; any other entry for this set is stale.
    linger: Option<u64>,
    /// The set is backlogged in [`IoSets::sched`] (a copy of `sched.is_backlogged(key)`, kept
    /// because the policy is the only one that changes it, and asking the scheduler is a lookup).
    backlogged: bool,
}

/// The IO-SETS policy.
#[derive(Debug)]
pub struct IoSets {
    order: Order,
    max_exclusive: Option<Nanos>,
    default_priority: Priority,
    jobs: Slab<Job>,
    job_slots: IdMap<JobId, Slot>,
    sets: Slab<Set>,
    /// The sets of priorities by key. A job's own set ([`SetKey::Solo`]) is not in it: it exists
    /// exactly while its job does, and is found through the job.
    set_slots: IdMap<SetKey, Slot>,
    explicit: IdMap<JobId, Priority>,
    configured: IdMap<JobId, Priority>,
    /// In-service request → slot of its job.
    in_service: IdMap<RequestId, Slot>,
    /// Emptied job queues kept for reuse.
    spare: Vec<VecDeque<Request>>,
    /// Waiting lists of removed sets kept for reuse (an emptied `BTreeSet` keeps its node: a set
    /// formed from a spare list allocates nothing).
    spare_waiters: Vec<Waiters>,
    /// Fair queuing across sets, keyed by set (a set that re-forms keeps its WF²Q+ debt).
    sched: Wf2q<SetKey>,
    /// Anticipation window (`hold_idle_ms`); `None`: a holder without work passes its set on at once.
    hold_idle: Option<Nanos>,
    /// Lingering sets by window end (see [`linger`]).
    lingering: Lingering,
    len: usize,
    seq: u64,
}

impl IoSets {
    /// An `iosets` policy. `max_exclusive = None` leaves holding unbounded.
    pub fn new(order: Order, max_exclusive: Option<Nanos>, default_priority: Priority) -> IoSets {
        IoSets {
            order,
            max_exclusive,
            default_priority,
            jobs: Slab::new(),
            job_slots: IdMap::default(),
            sets: Slab::new(),
            set_slots: IdMap::default(),
            explicit: IdMap::default(),
            configured: IdMap::default(),
            in_service: IdMap::default(),
            spare: Vec::new(),
            spare_waiters: Vec::new(),
            sched: Wf2q::new(),
            hold_idle: None,
            lingering: Lingering::default(),
            len: 0,
            seq: 0,
        }
    }

    /// Sets the anticipation window (`hold_idle_ms`, see the module docs); `None` or zero: none.
    pub fn with_hold_idle(mut self, hold: Option<Nanos>) -> IoSets {
        self.hold_idle = hold.filter(|h| *h > Nanos::ZERO);
        self
    }

    pub(crate) fn from_tunables(t: &mut Tunables) -> Result<IoSets, PolicyError> {
        let order = match t.choice("order", &["arrival", "jobid"])? {
            "jobid" => Order::JobId,
            _ => Order::Arrival,
        };
        let ms = t.u64_in("max_exclusive_ms", 0, 86_400_000)?;
        let max_exclusive = (ms > 0).then(|| Nanos::from_millis(ms));
        let hold_ms = t.u64_in("hold_idle_ms", 0, 60_000)?;
        let p = t.positive_f64("default_priority")?;
        let default_priority =
            Priority::new(p).unwrap_or(Priority::new(DEFAULT_PRIORITY).expect("> 0"));
        let base = t.positive_f64("base")?;
        let mapping = SetMapping::new(base, default_priority).ok_or(PolicyError::BadValue {
            policy: NAME,
            key: "base".into(),
            value: base.to_string(),
            expected: "a finite number > 1".into(),
        })?;
        let mut policy = IoSets::new(order, max_exclusive, default_priority)
            .with_hold_idle(Some(Nanos::from_millis(hold_ms)));
        for (job, period) in t.family_positive_f64("period.")? {
            policy.configure_period(JobId(job), period, &mapping);
        }
        Ok(policy)
    }

    /// Places `job` by its I/O period `w_iter_secs` through `mapping` (Set-b), below a priority set
    /// from the control plane and above request hints.
    pub fn configure_period(&mut self, job: JobId, w_iter_secs: f64, mapping: &SetMapping) {
        self.configured
            .insert(job, mapping.assign(Some(w_iter_secs)).priority());
    }

    /// The set and priority a job belongs to now.
    fn placement(&self, job: JobId, hint: Option<Priority>) -> (SetKey, Priority) {
        match self
            .explicit
            .get(&job)
            .or_else(|| self.configured.get(&job))
            .copied()
            .or(hint)
        {
            Some(p) => (SetKey::Priority(p.key()), p),
            None => (SetKey::Solo(job), self.default_priority),
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Puts job `j` (which has queued work and is not the holder) in its set's waiting list.
    fn start_waiting(&mut self, j: Slot, now: Nanos) {
        let job = &mut self.jobs[j];
        job.waiting = true;
        let set = &mut self.sets[job.set];
        set.waiting.insert(job, j);
        if set.holder.is_some() && set.contended_since.is_none() {
            set.contended_since = Some(now);
        }
    }

    fn stop_waiting(&mut self, j: Slot) {
        let job = &mut self.jobs[j];
        if std::mem::take(&mut job.waiting) {
            let set = &mut self.sets[job.set];
            set.waiting.remove(job, j);
            if set.waiting.is_empty() {
                set.contended_since = None;
            }
        }
    }

    /// The length of the request set `s` would dispatch next, or `None` if it has nothing it may
    /// dispatch (empty, or blocked behind its holder's in-service requests).
    fn head_len(&self, s: Slot) -> Option<u64> {
        let set = &self.sets[s];
        let job = match set.holder {
            Some(_) if set.yielding => return None,
            Some(h) => h,
            None => self.next_waiter(set)?,
        };
        self.jobs[job].queue.front().map(|r| r.len)
    }

    /// The waiting job that takes the set when it is free.
    fn next_waiter(&self, set: &Set) -> Option<Slot> {
        set.waiting.next(set.last_holder)
    }

    /// Brings the fair-queuing state of set `s` in line with what it can dispatch, and removes the
    /// set once it has no members.
    fn refresh(&mut self, s: Slot) {
        let head = self.head_len(s);
        let set = &mut self.sets[s];
        debug_assert_eq!(set.backlogged, self.sched.is_backlogged(set.key));
        match (head, set.backlogged) {
            (Some(len), false) => self.sched.arrive(set.key, set.priority.get(), len),
            (None, true) => self.sched.leave(set.key),
            _ => {}
        }
        set.backlogged = head.is_some();
        if set.members == 0 {
            debug_assert!(head.is_none());
            let set = self.sets.remove(s);
            if let SetKey::Priority(_) = set.key {
                self.set_slots.remove(&set.key);
            }
            if self.spare_waiters.len() < SPARE_QUEUES {
                debug_assert!(set.waiting.is_empty());
                self.spare_waiters.push(set.waiting);
            }
        }
    }

    /// Set `s` stops being backlogged in the fair queuing across sets (blocked or empty).
    fn unschedule(&mut self, s: Slot) {
        let set = &mut self.sets[s];
        self.sched.leave(set.key);
        set.backlogged = false;
    }

    /// The slot of set `key`, which exists.
    fn set_slot(&self, key: SetKey) -> Slot {
        match key {
            SetKey::Priority(_) => self.set_slots[&key],
            SetKey::Solo(job) => self.jobs[self.job_slots[&job]].set,
        }
    }

    /// Adds job `j` to the set `key` (creating it), as waiter or holder.
    fn join(&mut self, j: Slot, key: SetKey, priority: Priority, now: Nanos) -> Slot {
        let existing = match key {
            SetKey::Priority(_) => self.set_slots.get(&key).copied(),
            // A job's own set exists only while the job is in it, and it is joining now.
            SetKey::Solo(_) => None,
        };
        let s = match existing {
            Some(s) => s,
            None => {
                let s = self.sets.insert(Set {
                    key,
                    priority,
                    members: 0,
                    holder: None,
                    yielding: false,
                    held_since: now,
                    contended_since: None,
                    last_holder: None,
                    waiting: self
                        .spare_waiters
                        .pop()
                        .unwrap_or_else(|| Waiters::new(self.order)),
                    linger: None,
                    backlogged: false,
                });
                if let SetKey::Priority(_) = key {
                    self.set_slots.insert(key, s);
                }
                s
            }
        };
        let set = &mut self.sets[s];
        set.members += 1;
        let job = &mut self.jobs[j];
        job.set = s;
        if let SetKey::Solo(_) = key {
            // Alone in its set, the job holds it from the start: nobody can wait for it, so the
            // holder's tenure never expires and it never lingers (the same as waiting, then being
            // handed the set by the next dispatch, without the waiting list).
            set.holder = Some(j);
            set.held_since = now;
        } else if job.in_service > 0 && set.holder.is_none() {
            set.holder = Some(j);
            set.held_since = now;
            set.contended_since = (!set.waiting.is_empty()).then_some(now);
        } else if !job.queue.is_empty() {
            self.start_waiting(j, now);
        }
        s
    }

    /// Takes job `j` out of its set (releasing the set if it held it); returns the set's slot.
    fn leave_set(&mut self, j: Slot) -> Slot {
        self.stop_waiting(j);
        let job = &self.jobs[j];
        let set = &mut self.sets[job.set];
        set.members -= 1;
        if set.holder == Some(j) {
            set.holder = None;
            set.yielding = false;
            set.linger = None;
            set.last_holder = Some(job.id);
        }
        job.set
    }

    /// Moves job `j` to the set its current priority says, if that changed.
    fn place(&mut self, j: Slot, now: Nanos) {
        let job = &self.jobs[j];
        let (key, priority) = self.placement(job.id, job.hint);
        if key == self.sets[job.set].key {
            return;
        }
        if job.queue.is_empty() && job.in_service == 0 {
            // A lingering holder has no work to move: its linger ends and it retires.
            self.retire(j);
            return;
        }
        let old = self.leave_set(j);
        let new = self.join(j, key, priority, now);
        self.refresh(old);
        self.refresh(new);
    }

    /// Makes the next waiter of set `s` the holder; returns it.
    fn hand_over(&mut self, s: Slot, now: Nanos) -> Option<Slot> {
        let next = self.next_waiter(&self.sets[s])?;
        self.stop_waiting(next);
        let set = &mut self.sets[s];
        set.holder = Some(next);
        set.yielding = false;
        set.held_since = now;
        set.contended_since = (!set.waiting.is_empty()).then_some(now);
        Some(next)
    }

    /// True if the holder of `set` has held it past the bound while another job waits.
    fn expired(&self, set: &Set, now: Nanos) -> bool {
        match (self.max_exclusive, set.contended_since) {
            (Some(bound), Some(since)) if !set.waiting.is_empty() => {
                now.saturating_sub(since.max(set.held_since)) >= bound
            }
            _ => false,
        }
    }

    /// The holder of set `s` gives the set up: it queues again behind the others with a new burst.
    fn yield_holder(&mut self, s: Slot, now: Nanos) {
        let h = self.sets[s].holder.expect("a holder yields");
        if self.jobs[h].in_service > 0 {
            self.sets[s].yielding = true;
            return;
        }
        let seq = self.next_seq();
        let set = &mut self.sets[s];
        set.holder = None;
        set.last_holder = Some(self.jobs[h].id);
        let job = &mut self.jobs[h];
        job.burst = Burst { at: now, seq };
        if !job.queue.is_empty() {
            self.start_waiting(h, now);
        }
    }

    /// Forgets job `j`, which has nothing queued and nothing in service, and refreshes its set.
    fn retire(&mut self, j: Slot) {
        let s = self.leave_set(j);
        let job = self.jobs.remove(j);
        debug_assert!(job.queue.is_empty() && job.in_service == 0);
        self.job_slots.remove(&job.id);
        if self.spare.len() < SPARE_QUEUES {
            self.spare.push(job.queue);
        }
        self.refresh(s);
    }
}

impl Policy for IoSets {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enqueue(&mut self, req: Request, now: Nanos) {
        self.len += 1;
        let seq = self.next_seq();
        let Some(&j) = self.job_slots.get(&req.job) else {
            let (key, priority) = self.placement(req.job, req.priority);
            let mut queue = self.spare.pop().unwrap_or_default();
            queue.push_back(req);
            let j = self.jobs.insert(Job {
                id: req.job,
                queue,
                in_service: 0,
                set: 0,
                waiting: false,
                burst: Burst { at: now, seq },
                hint: req.priority,
            });
            self.job_slots.insert(req.job, j);
            let s = self.join(j, key, priority, now);
            self.refresh(s);
            return;
        };
        let job = &mut self.jobs[j];
        job.queue.push_back(req);
        let hint_changed = req.priority.is_some() && req.priority != job.hint;
        if hint_changed {
            job.hint = req.priority;
        }
        let set = &mut self.sets[job.set];
        if set.holder == Some(j) {
            // A lingering holder's next request: it goes on holding, same burst.
            set.linger = None;
        } else if !job.waiting {
            self.start_waiting(j, now);
        }
        if hint_changed {
            self.place(j, now);
        }
        // An enqueue only adds work: a set already backlogged stays so with the same head.
        let s = self.jobs[j].set;
        if !self.sets[s].backlogged {
            self.refresh(s);
        }
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        if !self.lingering.is_empty() {
            self.expire_lingers(now);
        }
        while let Some(key) = self.sched.select() {
            let s = self.set_slot(key);
            let set = &self.sets[s];
            let holder = match set.holder {
                Some(_) if self.expired(set, now) => {
                    self.yield_holder(s, now);
                    if self.sets[s].yielding {
                        self.unschedule(s);
                        continue;
                    }
                    self.hand_over(s, now)
                }
                Some(h) => Some(h),
                None => self.hand_over(s, now),
            };
            let Some(h) = holder else {
                self.unschedule(s);
                continue;
            };
            let job = &mut self.jobs[h];
            let Some(req) = job.queue.pop_front() else {
                // Holder with only in-service work: the set is blocked until it completes.
                self.unschedule(s);
                continue;
            };
            job.in_service += 1;
            // The holder keeps the set (it has a request in service): its next request is the
            // set's head, and without one the set is blocked or empty.
            let next = job.queue.front().map(|r| r.len);
            self.len -= 1;
            self.in_service.insert(req.id, h);
            self.sched.served(key, req.len, next);
            self.sets[s].backlogged = next.is_some();
            return Dispatch::Ready(Batch::single(req));
        }
        if self.lingering.is_empty() {
            return Dispatch::Idle;
        }
        // Expired lingers were retired above: the earliest end still on is in the future.
        self.next_linger_end()
            .map_or(Dispatch::Idle, Dispatch::NotBefore)
    }

    fn complete(&mut self, id: RequestId, _outcome: Outcome, now: Nanos) {
        let Some(j) = self.in_service.remove(&id) else {
            return;
        };
        let job = &mut self.jobs[j];
        job.in_service -= 1;
        if job.in_service > 0 {
            return;
        }
        if job.queue.is_empty() {
            // The job's burst is over: it leaves its set (releasing it if it held it), unless it
            // holds the set and lingers for its next request.
            self.linger_or_retire(j, now);
            return;
        }
        let s = job.set;
        if self.sets[s].holder == Some(j) && self.sets[s].yielding {
            // The holder yielded and its last request in service is done: the set passes on and
            // the job queues again with a new burst.
            let seq = self.next_seq();
            let set = &mut self.sets[s];
            set.holder = None;
            set.yielding = false;
            set.last_holder = Some(self.jobs[j].id);
            self.jobs[j].burst = Burst { at: now, seq };
            self.start_waiting(j, now);
        }
        self.refresh(s);
    }

    fn queue_weight(&self, req: &Request) -> Option<QueueWeight> {
        let known = self
            .job_slots
            .get(&req.job)
            .and_then(|&j| self.jobs[j].hint);
        let (key, priority) = self.placement(req.job, req.priority.or(known));
        let queue = match key {
            SetKey::Priority(bits) => QueueId::Set(bits),
            SetKey::Solo(job) => QueueId::Job(job),
        };
        Some(QueueWeight {
            queue,
            weight: priority.get(),
        })
    }

    fn queued(&self) -> usize {
        self.len
    }

    fn drain(&mut self) -> Vec<Request> {
        let mut sets: Vec<(SetKey, Slot)> = self.sets.iter().map(|(s, set)| (set.key, s)).collect();
        sets.sort_unstable();
        let mut out = Vec::with_capacity(self.len);
        for (_, s) in sets {
            let set = &self.sets[s];
            let order: Vec<Slot> = set.holder.into_iter().chain(set.waiting.slots()).collect();
            for j in order {
                self.stop_waiting(j);
                out.extend(self.jobs[j].queue.drain(..));
                if self.jobs[j].in_service == 0 {
                    self.retire(j);
                }
            }
            if self.sets.contains(s) {
                self.refresh(s);
            }
        }
        self.len = 0;
        // Every lingering holder had no work and was retired above.
        debug_assert!(self.sets.iter().all(|(_, set)| set.linger.is_none()));
        self.lingering.clear();
        out
    }

    fn set_priority(&mut self, job: JobId, priority: Option<Priority>, now: Nanos) -> bool {
        match priority {
            Some(p) => self.explicit.insert(job, p),
            None => self.explicit.remove(&job),
        };
        if let Some(&j) = self.job_slots.get(&job) {
            self.place(j, now);
        }
        true
    }
}
