//! `iosets`: the IO-SETS method (Boito et al., TPDS 2023; seed 004's server-side form).
//!
//! Jobs are grouped into *sets* by priority: all jobs with the same priority form one set (Set-10
//! gives set `i` the priority `10^-i`, see [`crate::set10`]). Two rules:
//!
//! 1. **Inside a set, one job at a time.** The job holding the set is served until it has nothing
//!    queued *and* nothing in service; only then does the set pass on. While the holder has a request
//!    in service and nothing queued, other jobs of the set wait (the set is blocked, not idle-able by
//!    timer: it resumes on the holder's completion). The next holder is the waiting job whose current
//!    I/O phase began first by the stamp its client put on the requests (`order=phase`, the
//!    default: the same choice on every server, see below), whose burst arrived first here
//!    (`order=arrival`, the paper's rule), or the next job id after the last holder, wrapping
//!    around (`order=jobid`, seed 004's BeeGFS rule).
//! 2. **Across sets, weighted fair queuing by bytes** with the set priorities as weights
//!    ([`crate::wf2q::Wf2q`]): sets with priorities 0.1 and 0.01, both backlogged, get 10:1 of the
//!    bytes; a set with nothing dispatchable takes no share.
//!
//! A job's burst starts when a request arrives while the job has nothing queued and nothing in
//! service. A holder that has held its set for `max_exclusive_ms` *while another job of the set
//! waits* yields: it dispatches nothing more, its in-service requests finish, and it queues behind
//! the others with a new burst time (under `order=phase`, the rest of that phase queues as of the
//! yield, so its old stamp does not put it first again). This bounds the starvation seed 004
//! worries about. By default (`auto`) the bound is 1 s / the set's priority, from 1 s to 60 s:
//! under Set-10 a set of priority `10^-i` holds jobs whose period is about `10^i` s, and a turn
//! longer than that is no I/O phase of the set (a stream, a stuck job). Under `order=phase` a
//! holder whose queue empties between two requests of one phase and takes the set back with the
//! same stamp goes on with the same turn: a stream is one turn, not one per request.
//!
//! **Safe for jobs that are not periodic** (DESIGN; most jobs of a real machine are `cp`, `tar`,
//! `ls`, streams and shells). Three defaults, each measured through the mount (issue 27):
//! - **Metadata apart** (`metadata=apart`, the `meta` module): lookups, stats, readdirs, creates, … go to a
//!   class of their own, one more flow of the fair queuing across sets (weight `meta_weight`),
//!   fair among jobs, never held by any job's phase; they neither start, keep nor open a phase.
//!   Data and fsyncs stay in the sets. `metadata=sets` is the behaviour before.
//! - **A newcomer that outstays the new set leaves it**: a job of the shared new set whose turn
//!   has lasted longer than `unknown_hold_ms` (2 s), or than twice its longest turn in an earlier
//!   phase when that is longer (a periodic job with long phases keeps them), is no periodic
//!   newcomer once another newcomer waits: it moves, with its queue, to a fair-share set of its
//!   own, as a job past `unknown_phases` does. The turn counts from its start, so each server
//!   moves a stream as soon as it sees a waiter, whatever the other servers do.
//! - **Open phases hold only for clients that end them**: the open-phase hold below applies to a
//!   job once its client has sent a phase's end; a hold that runs out without one withdraws that
//!   until the next end. A client that never sends one (crashed, or another implementation) costs
//!   the others nothing, per job rather than per request.
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
//! **The device may wait for a holder whose set is next (`slice_idle_us`, off by default).**
//! A holder with one request in flight (a synchronous writer, a job of one process) has nothing
//! queued while that request is in service, nor in the moment before its client sends the next.
//! Were its set then not backlogged across sets, every such gap would give the device to another
//! set's request, and WF²Q+ would start the set afresh each time (an idle flow banks no credit):
//! a set of priority 10 against one of priority 1 got half the device, not ten elevenths
//! (measured on the servers' traces of `iosets experiment random`). So a holder that would
//! linger keeps its set backlogged across sets from the dispatch of its last queued request, its
//! head as long as that request: while the request is in service (a data request: an fsync or a
//! request without data, often a phase's last, can be long and never makes the device wait), and
//! then for up to `slice_idle_us` (within the linger) for the next one. When the fair queuing
//! picks the set meanwhile, the device waits (`Idle` until the completion, then `NotBefore`);
//! when it picks another set, that set goes. Past the slice the set leaves the fair queuing
//! until its holder's next request (BFQ idles the device for the queue in service the same
//! way, `slice_idle`). It is off by default
//! (`slice_idle_us=0`): on four random workloads at 2 ms it gave the high-frequency class more
//! of its share (I/O slowdown 2.56 → 1.61 in the heaviest) but the device idled in the gaps and
//! the other classes lost more than that (EXPERIMENTS.md, issue 27).
//!
//! **Exclusivity across servers (`order=phase`).** A job's file is striped over servers that never
//! talk to each other. The client (`iosets_client`, hence the mount) stamps every request with
//! the start of its job's current I/O phase, the same stamp on every server; the server turns it
//! into its own time base ([`Request::phase`]). A job's burst is keyed by `(stamp, job id)`; a
//! waiting job whose key is lower than the holder's takes the set as soon as the holder's
//! requests in service finish (the holder waits with its own key, so it is next), and a
//! lingering holder whose next request carries a *new* stamp queues like any other job. So every
//! server serves the job whose phase began first, whichever request reached it first. Failure
//! cases, bounded: a server that has not yet seen the earlier job serves the later one until the
//! earlier one's first request arrives (one request of overlap). **Open phases**: a holder
//! whose phase is open (its requests carry the stamp and the client has not yet sent the
//! phase's end, [`Policy::phase_end`]) keeps its set with nothing queued here for up to
//! `open_hold_ms` (its processes are waiting on other servers for a moment), so no server hands
//! the set to the next job in the middle of the phase; the client's `PhaseEnd` passes it on at
//! once everywhere, and a lost `PhaseEnd` costs at most `open_hold_ms` of idle set, once per job,
//! and only to the set's other jobs (other sets keep their shares); only jobs whose client has
//! sent a `PhaseEnd` before hold at all (see above). Client
//! clocks that disagree change who goes first, never whether servers agree; a stamp older than
//! `max_phase_age_ms` when seen counts as that old (a lying or stuck client cannot hold a set
//! forever; an honest client stamps an endless phase anew after its `max_phase`); equal stamps
//! go by job id. Requests without a stamp are keyed by their arrival here.
//!
//! **Under accounts (`key=`).** `key=set` (the default) is the paper's: all jobs of a priority
//! form one set of the device. `key=account,set`, `user,set` or `account,user,set` put a
//! fair-share tree above the sets (the `groups` module, as `wfq`'s [`crate::fairshare`]): every
//! group (an account, a user, a user of an account) has sets of its own, exclusive inside the
//! group, and a metadata class of its own; the group's sets and class share what the group
//! gets by priority (and `meta_weight`); groups share by their share weights
//! ([`Policy::set_share`], default 1). A job's account comes from the control plane
//! ([`Policy::set_job_info`]; a job told a new account moves with its queue of data; metadata
//! already queued is served in the old account's class), its user from the uid its requests
//! carry (the latest that carried one). Groups' shares are charged job-wide across servers
//! ([`Policy::charge_elsewhere`]); sets' shares stay per server, as in the paper. A share at
//! level `set` (`set=0.1`) reweighs the sets of that priority under every key.
//!
//! A job's priority, first match wins: set from the control plane ([`Policy::set_priority`]); from its
//! period given as tunable `period.<job>=<seconds>`, mapped by Set-b with base `base`
//! ([`crate::set10::SetMapping`]); the hint on its latest request; else none — then it joins the
//! shared **new** set at `default_priority` (1/50, `unknown=shared`, DESIGN.md: newcomers take
//! turns from their first phase instead of sharing the device and staying in step), or, with
//! `unknown=own` (seed 004's prior), a set of its own. A job still without priority after
//! `unknown_phases` distinct phase stamps is aperiodic: it leaves the new set for a set of its own.
//!
//! When a job's priority changes it moves, with its queue, to the new set. If it had a request in
//! service, the old set is released at once and in the new set it holds only if the set was free:
//! exclusivity is relaxed for that one moment (documented, rare: priorities change on new period
//! estimates).
//!
//! Costs: `O(log n)` per call in jobs and sets; jobs and sets exist only while they have work (or
//! linger). With `hold_idle_ms=0` the anticipation costs one branch per call.

mod groups;
mod linger;
mod meta;

/// Open phase stamps kept per job ([`Job::open`]): a job's compute nodes in one phase, each with
/// its own stamp; past this many the oldest is dropped (its client's phase end then ends
/// nothing, and the open-phase hold bounds it as a lost phase end).
const MAX_OPEN_STAMPS: usize = 64;
#[cfg(test)]
mod group_tests;
#[cfg(test)]
mod safe_tests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, VecDeque};

use slab::Slab;

use crate::fairshare::{JobInfo, ShareLevel, NO_ACCOUNT, NO_USER};
use crate::set10::{SetMapping, DEFAULT_PRIORITY};
use crate::tunables::{TunableSpec, Tunables};
use crate::{
    Batch, Dispatch, JobId, Nanos, Op, Outcome, Policy, PolicyError, Priority, QueueId,
    QueueWeight, Request, RequestId,
};
use groups::{Group, GroupId, Groups, SetSched, GROUP_LEVELS};
use iosets_types::hash::IdMap;
use linger::Lingering;
use meta::MetaClass;

/// Registry name.
pub const NAME: &str = "iosets";
/// Tunables of `iosets`.
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "key",
        default: "set",
        help: "the fair-share tree above the sets: set (the sets share the device by priority), \
               or group levels from account, user, then set, joined by commas, top first \
               (account,set; user,set; account,user,set): each group has sets of its own, one job \
               at a time per set, and groups share by their share weights (default 1)",
    },
    TunableSpec {
        name: "order",
        default: "phase",
        help: "who holds a set next: arrival (first burst to arrive here, the paper), jobid (next id, \
               seed 004) or phase (earliest phase stamp from the client, the same on every server)",
    },
    TunableSpec {
        name: "max_phase_age_ms",
        default: "120000",
        help: "order=phase: a phase stamp older than this (in the server's time) counts as this old, \
               so a client cannot hold a set forever with an old stamp, in ms (>= 1)",
    },
    TunableSpec {
        name: "open_hold_ms",
        default: "500",
        help: "order=phase: how long a holder whose phase is still open (its client has not sent the \
               phase's end) keeps its set with nothing here, in ms (its requests are on other \
               servers for a moment); the phase's end passes the set on at once (0 = no such hold)",
    },
    TunableSpec {
        name: "unknown",
        default: "shared",
        help: "where a job without priority goes: shared (one \"new\" set, exclusive among newcomers, \
               DESIGN) or own (a set of its own, seed 004)",
    },
    TunableSpec {
        name: "unknown_phases",
        default: "16",
        help: "unknown=shared: a job still without priority after this many distinct phase stamps \
               (aperiodic) leaves the new set for a set of its own (0 = never)",
    },
    TunableSpec {
        name: "unknown_hold_ms",
        default: "2000",
        help: "unknown=shared: a job whose turn holding the new set lasts longer than this, or \
               than twice its longest earlier turn in the set if that is longer (at most 60 s), is \
               no periodic newcomer (a stream, a copy): once another newcomer waits it leaves the \
               new set for a fair-share set of its own, in ms (0 = never)",
    },
    TunableSpec {
        name: "max_exclusive_ms",
        default: "auto",
        help: "longest a job holds its set while another job of the set waits, in ms (0 = \
               unbounded); auto: 1 s / the set's priority (the order of its jobs' I/O period under \
               Set-10), from 1 s to 60 s",
    },
    TunableSpec {
        name: "metadata",
        default: "apart",
        help: "where metadata requests go: apart (a class of their own beside the sets, fair \
               among jobs: never held by another job's I/O phase) or sets (in the job's set, like \
               data, as before 2026-11)",
    },
    TunableSpec {
        name: "meta_weight",
        default: "1",
        help: "metadata=apart: the weight of the metadata class in the fair queuing across sets \
               (set priorities are the other weights), > 0",
    },
    TunableSpec {
        name: "hold_idle_ms",
        default: "0",
        help: "anticipation: how long a holder with nothing queued or in service keeps its set for its \
               next request (synchronous I/O, fsync after writes), in ms, 0 .. 60000 (0 = pass the \
               set on at once, the paper)",
    },
    TunableSpec {
        name: "slice_idle_us",
        default: "0",
        help: "how long the device waits for the next request of a lingering holder (hold_idle_ms, \
               or an open phase) when the fair queuing across sets would serve its set next, in µs, \
               0 .. 1000000 (BFQ's slice_idle: without it a holder with few requests in flight \
               loses its set's share to sets with many; 0 = never wait, the default)",
    },
    TunableSpec {
        name: "default_priority",
        default: "0.02",
        help: "priority of the set of jobs with no priority yet (seed 004: 1/50)",
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
    /// The job whose current I/O phase began first, by the stamp its client put on every
    /// request of the phase ([`Request::phase`]), ties by job id. All servers see the same stamps,
    /// so all pick the same job: exclusivity holds across servers. A job with an earlier stamp
    /// takes the set from a later holder as soon as one of its requests arrives (after the
    /// holder's requests in service finish). Requests without a stamp use their arrival time.
    Phase,
}

/// Where a job without priority goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unknown {
    /// One shared "new" set at the default priority, exclusive among newcomers (DESIGN.md).
    Shared,
    /// A set of its own at the default priority (seed 004).
    Own,
}

/// How long a holder may keep its set while another job of the set waits (`max_exclusive_ms`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExclusiveBound {
    /// Unbounded (the paper's rule).
    Off,
    /// The same bound for every set.
    Fixed(Nanos),
    /// By the set's priority: 1 s / priority, from [`AUTO_BOUND_MIN`] to [`AUTO_BOUND_MAX`]. Under
    /// Set-10 a set of priority `10^-i` holds jobs whose I/O period is about `10^i` s, so a phase
    /// longer than the period's order is no phase of that set (a stream, a stuck job).
    Auto,
}

/// The shortest bound of [`ExclusiveBound::Auto`].
pub const AUTO_BOUND_MIN: Nanos = Nanos(1_000_000_000);
/// The longest bound of [`ExclusiveBound::Auto`]: a minute, so that nobody waits minutes.
pub const AUTO_BOUND_MAX: Nanos = Nanos(60_000_000_000);

impl ExclusiveBound {
    /// The bound of a set of priority `p`, or `None` if unbounded.
    pub fn of(self, p: Priority) -> Option<Nanos> {
        match self {
            ExclusiveBound::Off => None,
            ExclusiveBound::Fixed(b) => Some(b),
            ExclusiveBound::Auto => {
                let ns = (1e9 / p.get()).clamp(AUTO_BOUND_MIN.0 as f64, AUTO_BOUND_MAX.0 as f64);
                Some(Nanos(ns as u64))
            }
        }
    }
}

/// The bounds on a job's turn that an `iosets` policy applies while another job of its set waits:
/// what a model of the policy needs besides the sets (the fluid simulator's `SimOptions::bounds`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnBounds {
    /// `max_exclusive_ms`: a holder past it yields and queues behind the others.
    pub max_exclusive: ExclusiveBound,
    /// `unknown_hold_ms` (`None`: 0, never): a newcomer holding the shared new set past it, or
    /// past twice its longest earlier turn there (at most [`AUTO_BOUND_MAX`]), moves to a
    /// fair-share set of its own at the default priority.
    pub unknown_hold: Option<Nanos>,
}

impl TurnBounds {
    /// No bounds: the paper's rule (a holder keeps its set for its whole phase).
    pub const NONE: TurnBounds = TurnBounds {
        max_exclusive: ExclusiveBound::Off,
        unknown_hold: None,
    };
}

/// The [`TurnBounds`] of an `iosets` policy built from `tunables` (`key=value` pairs, as
/// [`crate::build`] takes them), with the same defaults and the same errors.
///
/// # Errors
/// [`PolicyError`] for a key `iosets` does not take or a value it refuses.
pub fn turn_bounds(tunables: &[(String, String)]) -> Result<TurnBounds, PolicyError> {
    let mut t = Tunables::new(NAME, TUNABLES, tunables)?;
    let policy = IoSets::from_tunables(&mut t)?;
    t.finish()?;
    Ok(TurnBounds {
        max_exclusive: policy.bound,
        unknown_hold: policy.unknown_hold,
    })
}

/// What the policy remembers of a job without priority (`unknown=shared`), across its phases.
#[derive(Clone, Copy, Debug, Default)]
struct Newcomer {
    /// Distinct phase stamps seen.
    phases: u32,
    /// The last stamp.
    last: Nanos,
    /// Its longest turn holding the new set, of the phases before [`Newcomer::turn_at`].
    longest: Nanos,
    /// The burst of its latest turn in the new set, and how long that turn has lasted so far (a
    /// turn goes on while the job takes the set back in the same phase).
    turn_at: Nanos,
    turn_len: Nanos,
    /// It held the new set past the bound while others waited: it is no periodic newcomer.
    outstayed: bool,
}

/// How many jobs' counts of phases without priority are kept before they are all dropped (the
/// aperiodic guard then starts counting again).
const MAX_UNKNOWN_TRACKED: usize = 65_536;

/// Makes room in `map` for `key`: a map of [`MAX_UNKNOWN_TRACKED`] entries without `key` is
/// emptied (what the policy remembers per job is advice; forgetting it all at once is safe and
/// keeps memory bounded without a scan).
fn make_room<V>(map: &mut IdMap<JobId, V>, key: JobId) {
    if map.len() >= MAX_UNKNOWN_TRACKED && !map.contains_key(&key) {
        map.clear();
    }
}

/// How many emptied job queues are kept for reuse.
const SPARE_QUEUES: usize = 256;

/// A set: all jobs of one priority, the jobs without priority yet, or one job alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum SetKey {
    Priority(GroupId, u64),
    /// The shared set of jobs without priority (`unknown=shared`).
    New(GroupId),
    Solo(GroupId, JobId),
    /// Not a set: the metadata class (`metadata=apart`), a flow of the fair queuing beside the
    /// sets (the `meta` module), one per group.
    Meta(GroupId),
}

impl SetKey {
    /// The group whose sets this is one of (`key=`; group 0 under `key=set`).
    fn group(self) -> GroupId {
        match self {
            SetKey::Priority(g, _) | SetKey::New(g) | SetKey::Solo(g, _) | SetKey::Meta(g) => g,
        }
    }
}

/// Which set of its group a job belongs to (its key without the group).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Priority(u64),
    New,
    Solo,
}

impl Place {
    /// The key of this set of group `g` for job `job`.
    fn key(self, g: GroupId, job: JobId) -> SetKey {
        match self {
            Place::Priority(bits) => SetKey::Priority(g, bits),
            Place::New => SetKey::New(g),
            Place::Solo => SetKey::Solo(g, job),
        }
    }
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
            Order::Arrival | Order::Phase => Waiters::Arrival(BTreeSet::new()),
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
    /// `order=phase`: the latest phase stamp its requests carried.
    phase_seen: Option<Nanos>,
    /// `order=phase`: the stamps of its open phases here, those whose client has not said they
    /// are over: one per client (compute node) of a job on several nodes, each of which stamps
    /// its own phase start and ends its own phase; the job's phase is open while any is (at most
    /// [`MAX_OPEN_STAMPS`], the oldest dropped).
    open: Vec<Nanos>,
    hint: Option<Priority>,
    /// The uid its latest request carried (the `user` level of `key=`).
    user: Option<u32>,
    /// The length of its latest request dispatched.
    last_len: u64,
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
    /// The holder yields to a job with an earlier phase (`order=phase`): it queues again with
    /// its own burst, not a new one.
    keep_burst: bool,
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
    /// The device waits for the holder's next request (`slice_idle_us`): from the dispatch of
    /// its last queued request, while that is in service (`None`), then until the time given.
    /// Meanwhile the set stays backlogged in the fair queuing across sets, its head the length
    /// of the holder's last request, as if that next request were here: it keeps its share.
    anticipate: Option<(Option<Nanos>, u64)>,
    /// The set is backlogged in [`IoSets::sched`] (a copy of `sched.is_backlogged(key)`, kept
    /// because the policy is the only one that changes it, and asking the scheduler is a lookup).
    backlogged: bool,
}

/// A holder's turn, kept when it lets the set go (see [`IoSets::turns`]).
#[derive(Clone, Copy, Debug)]
struct Turn {
    /// The burst's time.
    at: Nanos,
    held_since: Nanos,
    contended_since: Option<Nanos>,
}

/// The IO-SETS policy.
#[derive(Debug)]
pub struct IoSets {
    order: Order,
    unknown: Unknown,
    /// `order=phase`: the oldest a stamp may be, relative to the time it is seen.
    max_phase_age: Nanos,
    /// `order=phase`: how long a holder whose phase is open keeps its set without work here.
    open_hold: Option<Nanos>,
    /// `unknown=shared`: phases after which a job still without priority gets a set of its own
    /// (0: never).
    unknown_phases: u32,
    /// Jobs without priority: their phases and turns in the new set.
    unknown_seen: IdMap<JobId, Newcomer>,
    /// `unknown=shared`: the shortest a newcomer may hold the new set while others wait before it
    /// is moved to a set of its own (`None`: never).
    unknown_hold: Option<Nanos>,
    /// Jobs whose client has sent a phase's end ([`Policy::phase_end`]): only their open phases
    /// hold a set (`open_hold_ms`). A client that never sends one costs others nothing; an open
    /// hold that runs out without the end takes the job off this list until its next end.
    enders: IdMap<JobId, ()>,
    bound: ExclusiveBound,
    /// `order=phase`: jobs that yielded their set past the bound, with the stamp of the phase
    /// they yielded in and when: the rest of that phase queues as of then, behind the jobs that
    /// waited (a stream's stamp would otherwise put it first again at once).
    renewed: IdMap<JobId, (Nanos, Nanos)>,
    /// `order=phase`: each job's latest turn holding its set, so that a job taking a set back in
    /// the same phase goes on with that turn (its tenure counts from the turn's start, whoever
    /// held the set in between): a stream whose queue empties between two requests, or whose
    /// client ends its phase for a moment, is one turn, not many.
    turns: IdMap<JobId, Turn>,
    /// `metadata=apart`: metadata requests go to [`IoSets::metas`], not to the sets.
    meta_apart: bool,
    meta_weight: f64,
    /// The metadata class of each group (one, group 0, under `key=set`).
    metas: IdMap<GroupId, MetaClass>,
    /// The groups' ids in set keys.
    groups: Groups,
    /// The group levels above the sets (`key=`), top first: empty, or from `account`, `user`.
    levels: Vec<ShareLevel>,
    /// Share weights of groups (and of sets, by priority), from the control plane.
    shares: IdMap<(ShareLevel, u64), f64>,
    /// Jobs' accounts, from the control plane (the `account` level).
    job_info: IdMap<u64, JobInfo>,
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
    /// Fair queuing across sets, keyed by set (a set that re-forms keeps its WF²Q+ debt), under
    /// the groups' tree if `key=` has group levels.
    sched: SetSched,
    /// Anticipation window (`hold_idle_ms`); `None`: a holder without work passes its set on at once.
    hold_idle: Option<Nanos>,
    /// `slice_idle_us` (`None`: 0, never).
    slice_idle: Option<Nanos>,
    /// Lingering sets by window end (see [`linger`]).
    lingering: Lingering,
    len: usize,
    seq: u64,
}

impl IoSets {
    /// An `iosets` policy as the paper states it: `max_exclusive = None` leaves holding
    /// unbounded; a job without priority gets a set of its own; metadata is scheduled in the
    /// job's set like data ([`IoSets::with_metadata_apart`] changes that). The registry's
    /// defaults (`iosets` by name) are safer: see [`TUNABLES`].
    pub fn new(order: Order, max_exclusive: Option<Nanos>, default_priority: Priority) -> IoSets {
        IoSets {
            order,
            unknown: Unknown::Own,
            max_phase_age: Nanos::from_millis(120_000),
            open_hold: None,
            unknown_phases: 0,
            unknown_seen: IdMap::default(),
            unknown_hold: None,
            enders: IdMap::default(),
            bound: max_exclusive.map_or(ExclusiveBound::Off, ExclusiveBound::Fixed),
            renewed: IdMap::default(),
            turns: IdMap::default(),
            meta_apart: false,
            meta_weight: 1.0,
            metas: IdMap::default(),
            groups: Groups::default(),
            levels: Vec::new(),
            shares: IdMap::default(),
            job_info: IdMap::default(),
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
            sched: SetSched::new(0),
            hold_idle: None,
            slice_idle: None,
            lingering: Lingering::default(),
            len: 0,
            seq: 0,
        }
    }

    /// Where jobs without priority go; with [`Unknown::Shared`], a job still without priority
    /// after `aperiodic_after` distinct phase stamps (0: never) gets a set of its own.
    pub fn with_unknown(mut self, unknown: Unknown, aperiodic_after: u32) -> IoSets {
        self.unknown = unknown;
        self.unknown_phases = aperiodic_after;
        self
    }

    /// How long a holder may keep its set while another job of the set waits.
    pub fn with_exclusive_bound(mut self, bound: ExclusiveBound) -> IoSets {
        self.bound = bound;
        self
    }

    /// `unknown=shared`: a newcomer holding the new set while others wait for longer than `hold`
    /// (or twice its longest earlier turn there, if longer) moves to a set of its own (`None` or
    /// zero: never).
    pub fn with_unknown_hold(mut self, hold: Option<Nanos>) -> IoSets {
        self.unknown_hold = hold.filter(|h| *h > Nanos::ZERO);
        self
    }

    /// Metadata requests ([`Op::Meta`]) in a class of their own beside the sets, with `weight` in
    /// the fair queuing across sets (see the `meta` module); `None`: in the job's set, like data.
    ///
    /// # Panics
    /// If `weight` is not a finite number > 0.
    pub fn with_metadata_apart(mut self, weight: Option<f64>) -> IoSets {
        debug_assert_eq!(self.len, 0, "set before use");
        match weight {
            Some(w) => {
                assert!(w.is_finite() && w > 0.0, "meta weight must be > 0, got {w}");
                self.meta_apart = true;
                self.meta_weight = w;
            }
            None => self.meta_apart = false,
        }
        self
    }

    /// Puts the sets under a fair-share tree of groups (`key=account,set`): `levels` are the
    /// group levels above the sets, top first, from [`ShareLevel::Account`] and
    /// [`ShareLevel::User`], each once (empty: the sets share the device directly).
    ///
    /// # Panics
    /// If a level is `set` or `job`, is given twice, or there are more than two.
    pub fn with_groups(mut self, levels: &[ShareLevel]) -> IoSets {
        debug_assert_eq!(self.len, 0, "set before use");
        assert!(
            levels.len() <= GROUP_LEVELS,
            "at most {GROUP_LEVELS} group levels"
        );
        for (i, l) in levels.iter().enumerate() {
            assert!(
                matches!(l, ShareLevel::Account | ShareLevel::User) && !levels[..i].contains(l),
                "group levels are account and user, each once: {levels:?}"
            );
        }
        self.levels = levels.to_vec();
        self.sched = SetSched::new(levels.len());
        self
    }

    /// Parses `key=`: `set`, or group levels then `set` (`account,user,set`).
    fn parse_key(text: &str) -> Result<Vec<ShareLevel>, String> {
        let mut levels = Vec::new();
        for item in text.split(',').map(str::trim) {
            let level: ShareLevel = item.parse()?;
            if levels.contains(&level) {
                return Err(format!("level `{level}` is given twice"));
            }
            levels.push(level);
        }
        match levels.pop() {
            Some(ShareLevel::Set) => {}
            _ => {
                return Err(
                    "the last level is `set` (jobs are below sets, one at a time per \
                            set): set, account,set, user,set or account,user,set"
                        .into(),
                )
            }
        }
        if let Some(l) = levels
            .iter()
            .find(|l| !matches!(l, ShareLevel::Account | ShareLevel::User))
        {
            return Err(format!(
                "`{l}` cannot be above the sets (levels above them: account, user)"
            ));
        }
        Ok(levels)
    }

    /// The group of a job of account `job`'s, whose requests carry uid `user`.
    fn group_of(&self, job: JobId, user: Option<u32>) -> Group {
        let mut g = Group::default();
        for (i, level) in self.levels.iter().enumerate() {
            g.0[i] = match level {
                ShareLevel::Account => self
                    .job_info
                    .get(&job.0)
                    .and_then(|i| i.account)
                    .unwrap_or(NO_ACCOUNT),
                _ => user.map_or(NO_USER, u64::from),
            };
        }
        g
    }

    /// The share weights of group `g`'s node at each group level (default 1).
    fn group_weights(&self, g: Group) -> [f64; GROUP_LEVELS] {
        let mut w = [1.0; GROUP_LEVELS];
        for (i, &level) in self.levels.iter().enumerate() {
            w[i] = self.shares.get(&(level, g.0[i])).copied().unwrap_or(1.0);
        }
        w
    }

    /// The weight of a set of priority `p` across sets: a share set for it (`set=P`), else `p`.
    fn set_weight(&self, p: Priority) -> f64 {
        if self.shares.is_empty() {
            return p.get();
        }
        self.shares
            .get(&(ShareLevel::Set, p.key()))
            .copied()
            .unwrap_or(p.get())
    }

    /// `order=phase`: how long a holder whose phase is still open keeps its set with nothing
    /// queued or in service here (`None` or zero: no such hold; `hold_idle` still applies).
    pub fn with_open_hold(mut self, hold: Option<Nanos>) -> IoSets {
        self.open_hold = hold.filter(|h| *h > Nanos::ZERO);
        self
    }

    /// `order=phase`: a stamp older than `age` when seen counts as that old.
    pub fn with_max_phase_age(mut self, age: Nanos) -> IoSets {
        self.max_phase_age = age;
        self
    }

    /// Sets the anticipation window (`hold_idle_ms`, see the module docs); `None` or zero: none.
    pub fn with_hold_idle(mut self, hold: Option<Nanos>) -> IoSets {
        self.hold_idle = hold.filter(|h| *h > Nanos::ZERO);
        self
    }

    /// How long the device waits for a lingering holder's next request when its set is next
    /// across sets (`slice_idle_us`; `None` or zero: never).
    pub fn with_slice_idle(mut self, slice: Option<Nanos>) -> IoSets {
        self.slice_idle = slice.filter(|s| *s > Nanos::ZERO);
        self
    }

    pub(crate) fn from_tunables(t: &mut Tunables) -> Result<IoSets, PolicyError> {
        let key = t.raw_str("key");
        let levels = IoSets::parse_key(&key).map_err(|e| t.bad_value("key", &key, e))?;
        let order = match t.choice("order", &["arrival", "jobid", "phase"])? {
            "jobid" => Order::JobId,
            "phase" => Order::Phase,
            _ => Order::Arrival,
        };
        let unknown = match t.choice("unknown", &["shared", "own"])? {
            "own" => Unknown::Own,
            _ => Unknown::Shared,
        };
        let unknown_phases = t.u64_in("unknown_phases", 0, 1_000_000)? as u32;
        let age_ms = t.u64_in("max_phase_age_ms", 1, 86_400_000)?;
        let open_ms = t.u64_in("open_hold_ms", 0, 60_000)?;
        let unknown_hold_ms = t.u64_in("unknown_hold_ms", 0, 86_400_000)?;
        let bound = match t.u64_in_or_auto("max_exclusive_ms", 0, 86_400_000)? {
            None => ExclusiveBound::Auto,
            Some(0) => ExclusiveBound::Off,
            Some(ms) => ExclusiveBound::Fixed(Nanos::from_millis(ms)),
        };
        let meta_apart = t.choice("metadata", &["apart", "sets"])? == "apart";
        let meta_weight = t.positive_f64("meta_weight")?;
        let hold_ms = t.u64_in("hold_idle_ms", 0, 60_000)?;
        let slice_us = t.u64_in("slice_idle_us", 0, 1_000_000)?;
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
        let mut policy = IoSets::new(order, None, default_priority)
            .with_groups(&levels)
            .with_exclusive_bound(bound)
            .with_unknown_hold(Some(Nanos::from_millis(unknown_hold_ms)))
            .with_metadata_apart(meta_apart.then_some(meta_weight))
            .with_hold_idle(Some(Nanos::from_millis(hold_ms)))
            .with_slice_idle(Some(Nanos(slice_us * 1_000)))
            .with_unknown(unknown, unknown_phases)
            .with_max_phase_age(Nanos::from_millis(age_ms))
            .with_open_hold(Some(Nanos::from_millis(open_ms)));
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

    /// The group, set and priority a job whose requests carry uid `user` belongs to now.
    fn placement(
        &self,
        job: JobId,
        hint: Option<Priority>,
        user: Option<u32>,
    ) -> (Group, Place, Priority) {
        let g = self.group_of(job, user);
        let (place, p) = match self
            .explicit
            .get(&job)
            .or_else(|| self.configured.get(&job))
            .copied()
            .or(hint)
        {
            Some(p) => (Place::Priority(p.key()), p),
            None if self.unknown == Unknown::Shared && !self.aperiodic(job) => {
                (Place::New, self.default_priority)
            }
            None => (Place::Solo, self.default_priority),
        };
        (g, place, p)
    }

    /// True if job `job`, without priority, has shown more phases than `unknown_phases` allows,
    /// or outstayed the new set's bound.
    fn aperiodic(&self, job: JobId) -> bool {
        self.unknown_seen.get(&job).is_some_and(|n| {
            n.outstayed || (self.unknown_phases > 0 && n.phases > self.unknown_phases)
        })
    }

    /// The record of newcomer `job`, made if need be (all are dropped when too many are kept).
    fn newcomer(&mut self, job: JobId) -> &mut Newcomer {
        make_room(&mut self.unknown_seen, job);
        self.unknown_seen.entry(job).or_default()
    }

    /// True if job `h`, holder of the new set `set`, has held it for longer than the bound
    /// (`unknown_hold_ms`, or twice its longest earlier turn) and another newcomer waits.
    ///
    /// The turn counts from its start, not from when the other began to wait: a server sees a
    /// striped stream's waiter only while that waiter's own request is there, so a bound counted
    /// from the wait would start anew on each server in turn (two `dd`s over two servers: 2 s of
    /// nothing on one server, then 2 s on the other).
    fn outstayed(&self, set: &Set, h: Slot, now: Nanos) -> bool {
        let Some(floor) = self.unknown_hold else {
            return false;
        };
        if set.waiting.is_empty() {
            return false;
        }
        let at = self.jobs[h].burst.at;
        let longest = self
            .unknown_seen
            .get(&self.jobs[h].id)
            .map_or(Nanos::ZERO, |n| {
                if n.turn_at == at {
                    n.longest
                } else {
                    n.longest.max(n.turn_len)
                }
            });
        let bound = floor.max(Nanos(longest.0.saturating_mul(2)).min(AUTO_BOUND_MAX));
        now.saturating_sub(set.held_since) >= bound
    }

    /// Job `h` outstayed the new set: it is no periodic newcomer and moves, with its queue, to a
    /// fair-share set of its own; the new set passes on.
    fn evict_newcomer(&mut self, h: Slot, now: Nanos) {
        let id = self.jobs[h].id;
        self.newcomer(id).outstayed = true;
        self.place(h, now);
    }

    /// Counts a burst of job `job`, without priority, that carries phase stamp `phase`: a new
    /// stamp is a new phase (bursts of one phase carry the same stamp).
    fn count_unknown_phase(&mut self, job: JobId, phase: Nanos) {
        if self.unknown_phases == 0 || self.unknown != Unknown::Shared {
            return;
        }
        let e = self.newcomer(job);
        if e.phases == 0 || e.last != phase {
            e.phases = e.phases.saturating_add(1);
            e.last = phase;
        }
    }

    /// The burst a request of job `job` that finds it with nothing queued or in service begins:
    /// its phase stamp under `order=phase` (no older than `max_phase_age`, ties by job id), else
    /// its arrival with a fresh sequence number.
    fn burst_of(&mut self, job: JobId, phase: Option<Nanos>, now: Nanos) -> Burst {
        match self.order {
            Order::Phase => Burst {
                at: self.stamp_at(job, phase, now),
                seq: job.0,
            },
            _ => Burst {
                at: now,
                seq: self.next_seq(),
            },
        }
    }

    /// `order=phase`: job `j` has a request stamped `phase`: that phase is open.
    fn saw_phase(&mut self, j: Slot, phase: Option<Nanos>) {
        if let (Order::Phase, Some(p)) = (self.order, phase) {
            let job = &mut self.jobs[j];
            job.phase_seen = job.phase_seen.max(Some(p));
            if !job.open.contains(&p) {
                if job.open.len() >= MAX_OPEN_STAMPS {
                    let oldest = (0..job.open.len())
                        .min_by_key(|&i| job.open[i])
                        .expect("not empty");
                    job.open.swap_remove(oldest);
                }
                job.open.push(p);
            }
        }
    }

    /// How long job `j`, holding set `s`, would keep it if it ran out of work now (`None`: it
    /// would retire): it holds (`hold_for`), has not yielded, is not alone in a set of its own,
    /// and is within its tenure.
    fn may_linger(&self, s: Slot, j: Slot, now: Nanos) -> Option<Nanos> {
        let set = &self.sets[s];
        let holds = set.holder == Some(j)
            && !set.yielding
            && !matches!(set.key, SetKey::Solo(..))
            && !self.expired(set, now);
        self.hold_for(j).filter(|_| holds)
    }

    /// True if the device should wait for the next request of job `h`, holder of set `s`, when
    /// it runs out of work (`slice_idle_us`): it would linger, so it keeps its set's share too.
    fn may_anticipate(&self, s: Slot, h: Slot, now: Nanos) -> bool {
        self.slice_idle.is_some() && self.may_linger(s, h, now).is_some()
    }

    /// How long job `j`, holder without work, keeps its set: the open-phase hold while its
    /// phase is open and its client is one that sends phase ends (if longer than
    /// anticipation), else `hold_idle_ms`.
    fn hold_for(&self, j: Slot) -> Option<Nanos> {
        let open = !self.jobs[j].open.is_empty() && self.enders.contains_key(&self.jobs[j].id);
        match (open, self.open_hold, self.hold_idle) {
            (true, Some(open), Some(idle)) => Some(open.max(idle)),
            (true, Some(open), None) => Some(open),
            (_, _, idle) => idle,
        }
    }

    /// `order=phase`: when a request stamped `phase` seen at `now` says its phase began.
    fn phase_at(&self, phase: Option<Nanos>, now: Nanos) -> Nanos {
        phase.map_or(now, |p| p.max(now.saturating_sub(self.max_phase_age)))
    }

    /// `order=phase`: where a request of `job` stamped `phase`, seen at `now`, queues: its
    /// phase's start ([`IoSets::phase_at`]), or, if the job yielded its set past the bound in that
    /// phase, the time it yielded.
    fn stamp_at(&self, job: JobId, phase: Option<Nanos>, now: Nanos) -> Nanos {
        let at = self.phase_at(phase, now);
        match (phase, self.renewed.get(&job)) {
            (Some(p), Some(&(stamp, since))) if p == stamp => at.max(since),
            _ => at,
        }
    }

    /// A burst for job `j` queueing again after yielding its set at `now` (its tenure ran out):
    /// under `order=phase` the rest of its phase queues as of `now`.
    fn renewed_burst(&mut self, j: Slot, now: Nanos) -> Burst {
        let seq = match self.order {
            Order::Phase => {
                let job = &self.jobs[j];
                if let Some(stamp) = job.phase_seen {
                    make_room(&mut self.renewed, job.id);
                    self.renewed.insert(job.id, (stamp, now));
                }
                job.id.0
            }
            _ => self.next_seq(),
        };
        Burst { at: now, seq }
    }

    /// `order=phase`: if waiting job `j` began its phase before the holder of its set, the
    /// holder gives the set up (at once if it has nothing in service, else once that finishes)
    /// and queues again with its own burst; `j` is next.
    fn challenge(&mut self, j: Slot, now: Nanos) {
        if self.order != Order::Phase || !self.jobs[j].waiting {
            return;
        }
        let s = self.jobs[j].set;
        let set = &self.sets[s];
        let Some(h) = set.holder else {
            return;
        };
        if set.yielding || self.jobs[h].burst <= self.jobs[j].burst {
            return;
        }
        let holder = &self.jobs[h];
        if holder.in_service > 0 {
            let set = &mut self.sets[s];
            set.yielding = true;
            set.keep_burst = true;
        } else if holder.queue.is_empty() {
            // A lingering holder: its linger ends and it retires.
            self.retire(h, now);
            return;
        } else {
            let id = holder.id;
            let set = &mut self.sets[s];
            set.holder = None;
            set.linger = None;
            set.anticipate = None;
            set.last_holder = Some(id);
            self.start_waiting(h, now);
        }
        self.refresh(s);
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
        let head = self.jobs[job].queue.front().map(|r| r.len);
        head.or(set.anticipate.map(|(_, len)| len))
    }

    /// The waiting job that takes the set when it is free.
    fn next_waiter(&self, set: &Set) -> Option<Slot> {
        set.waiting.next(set.last_holder)
    }

    /// Brings the fair-queuing state of set `s` in line with what it can dispatch, and removes the
    /// set once it has no members.
    fn refresh(&mut self, s: Slot) {
        let head = self.head_len(s);
        let (key, priority) = (self.sets[s].key, self.sets[s].priority);
        let backlogged = self.sets[s].backlogged;
        let path = self.groups.path(key.group());
        debug_assert_eq!(backlogged, self.sched.is_backlogged(key, path));
        match (head, backlogged) {
            (Some(len), false) => {
                let weights = self.group_weights(path);
                let w = self.set_weight(priority);
                self.sched.arrive(key, w, len, path, &weights);
            }
            (None, true) => self.sched.leave(key, path),
            _ => {}
        }
        let set = &mut self.sets[s];
        set.backlogged = head.is_some();
        if set.members == 0 {
            debug_assert!(head.is_none());
            let set = self.sets.remove(s);
            if !matches!(set.key, SetKey::Solo(..)) {
                self.set_slots.remove(&set.key);
            }
            self.groups.release(set.key.group());
            if self.spare_waiters.len() < SPARE_QUEUES {
                debug_assert!(set.waiting.is_empty());
                self.spare_waiters.push(set.waiting);
            }
        }
    }

    /// Set `s` stops being backlogged in the fair queuing across sets (blocked or empty).
    fn unschedule(&mut self, s: Slot) {
        let set = &mut self.sets[s];
        self.sched.leave(set.key, self.groups.path(set.key.group()));
        set.backlogged = false;
    }

    /// The slot of set `key`, which exists.
    fn set_slot(&self, key: SetKey) -> Slot {
        match key {
            SetKey::Priority(..) | SetKey::New(_) => self.set_slots[&key],
            SetKey::Solo(_, job) => self.jobs[self.job_slots[&job]].set,
            SetKey::Meta(_) => {
                unreachable!("the metadata class is served before sets are looked up")
            }
        }
    }

    /// Adds job `j` to the set `key` (creating it), as waiter or holder.
    fn join(&mut self, j: Slot, key: SetKey, priority: Priority, now: Nanos) -> Slot {
        let existing = match key {
            SetKey::Priority(..) | SetKey::New(_) => self.set_slots.get(&key).copied(),
            // A job's own set exists only while the job is in it, and it is joining now.
            SetKey::Solo(..) => None,
            SetKey::Meta(_) => unreachable!("no job joins the metadata class"),
        };
        let s = match existing {
            Some(s) => s,
            None => {
                // The set holds its group's id while it lives.
                self.groups.hold(key.group());
                let s = self.sets.insert(Set {
                    key,
                    priority,
                    members: 0,
                    holder: None,
                    yielding: false,
                    keep_burst: false,
                    held_since: now,
                    contended_since: None,
                    last_holder: None,
                    waiting: self
                        .spare_waiters
                        .pop()
                        .unwrap_or_else(|| Waiters::new(self.order)),
                    linger: None,
                    anticipate: None,
                    backlogged: false,
                });
                if !matches!(key, SetKey::Solo(..)) {
                    self.set_slots.insert(key, s);
                }
                s
            }
        };
        let set = &mut self.sets[s];
        set.members += 1;
        let job = &mut self.jobs[j];
        job.set = s;
        if let SetKey::Solo(..) = key {
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

    /// Takes job `j` out of its set at `now` (releasing the set if it held it); returns the set's
    /// slot.
    fn leave_set(&mut self, j: Slot, now: Nanos) -> Slot {
        self.stop_waiting(j);
        let (id, s, at) = (self.jobs[j].id, self.jobs[j].set, self.jobs[j].burst.at);
        if matches!(self.sets[s].key, SetKey::New(_)) && self.sets[s].holder == Some(j) {
            // Its turn in the new set: the bound of its later phases' turns is derived from it.
            let turn = now.saturating_sub(self.sets[s].held_since);
            let n = self.newcomer(id);
            if n.turn_at != at {
                n.longest = n.longest.max(n.turn_len);
                n.turn_at = at;
            }
            n.turn_len = turn;
        }
        if self.order == Order::Phase && self.sets[s].holder == Some(j) {
            make_room(&mut self.turns, id);
            let set = &self.sets[s];
            self.turns.insert(
                id,
                Turn {
                    at,
                    held_since: set.held_since,
                    contended_since: set.contended_since,
                },
            );
        }
        let job = &self.jobs[j];
        let set = &mut self.sets[job.set];
        set.members -= 1;
        if set.holder == Some(j) {
            set.holder = None;
            set.yielding = false;
            set.keep_burst = false;
            set.linger = None;
            set.anticipate = None;
            set.last_holder = Some(job.id);
        }
        job.set
    }

    /// Moves job `j` to the set its current priority says, if that changed.
    fn place(&mut self, j: Slot, now: Nanos) {
        let job = &self.jobs[j];
        let (path, place, priority) = self.placement(job.id, job.hint, job.user);
        let current = self.sets[job.set].key;
        if self.groups.lookup(path).map(|g| place.key(g, job.id)) == Some(current) {
            return;
        }
        if job.queue.is_empty() && job.in_service == 0 {
            // A lingering holder has no work to move: its linger ends and it retires.
            self.retire(j, now);
            return;
        }
        let key = place.key(self.groups.intern(path), job.id);
        let old = self.leave_set(j, now);
        let new = self.join(j, key, priority, now);
        self.refresh(old);
        self.refresh(new);
    }

    /// Makes the next waiter of set `s` the holder; returns it.
    fn hand_over(&mut self, s: Slot, now: Nanos) -> Option<Slot> {
        let next = self.next_waiter(&self.sets[s])?;
        self.stop_waiting(next);
        let (id, at) = (self.jobs[next].id, self.jobs[next].burst.at);
        // The same job back with the same burst goes on with its turn.
        let turn = self.turns.get(&id).copied().filter(|t| t.at == at);
        let set = &mut self.sets[s];
        set.holder = Some(next);
        set.anticipate = None;
        set.yielding = false;
        set.keep_burst = false;
        set.held_since = turn.map_or(now, |t| t.held_since);
        set.contended_since =
            (!set.waiting.is_empty()).then(|| turn.and_then(|t| t.contended_since).unwrap_or(now));
        Some(next)
    }

    /// The longest the holder of `set` may hold it while another job waits (`None`: unbounded).
    fn bound_of(&self, set: &Set) -> Option<Nanos> {
        self.bound.of(set.priority)
    }

    /// True if the holder of `set` has held it past the bound while another job waits.
    fn expired(&self, set: &Set, now: Nanos) -> bool {
        match (self.bound_of(set), set.contended_since) {
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
        let burst = self.renewed_burst(h, now);
        let set = &mut self.sets[s];
        set.holder = None;
        set.anticipate = None;
        set.last_holder = Some(self.jobs[h].id);
        let job = &mut self.jobs[h];
        job.burst = burst;
        if !job.queue.is_empty() {
            self.start_waiting(h, now);
        }
    }

    /// Job `job`'s phase stamped `phase` is over (its client ended it, or is gone): the job's
    /// phase stays open while another stamp of it is; else a holder lingering for the rest of
    /// the phase retires and its set passes on.
    fn end_phase(&mut self, job: JobId, phase: Nanos, now: Nanos) {
        let Some(&j) = self.job_slots.get(&job) else {
            return;
        };
        let job = &mut self.jobs[j];
        // That client's phase is over; a later phase of the same client (a stamp seen since),
        // or another node's phase of the job, keeps it open. A stamp not seen here ends nothing.
        let Some(i) = job.open.iter().position(|&p| p == phase) else {
            return;
        };
        job.open.swap_remove(i);
        if !job.open.is_empty() {
            return;
        }
        if job.queue.is_empty() && job.in_service == 0 {
            // The holder lingered for the rest of its phase: it is over, the set passes on.
            self.retire(j, now);
        }
    }

    /// Forgets job `j`, which has nothing queued and nothing in service, at `now`, and refreshes
    /// its set.
    fn retire(&mut self, j: Slot, now: Nanos) {
        let s = self.leave_set(j, now);
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
        if self.meta_apart && req.op == Op::Meta {
            // The job's uid as its data has it when the request carries none.
            let user = req.user.or_else(|| {
                self.job_slots
                    .get(&req.job)
                    .and_then(|&j| self.jobs[j].user)
            });
            let path = self.group_of(req.job, user);
            let g = self.groups.intern(path);
            let meta = match self.metas.entry(g) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    // The class holds its group's id while it is kept.
                    self.groups.hold(g);
                    e.insert(MetaClass::default())
                }
            };
            if meta.push(req) {
                let weights = self.group_weights(path);
                self.sched
                    .arrive(SetKey::Meta(g), self.meta_weight, req.len, path, &weights);
            }
            return;
        }
        if self.order == Order::Phase && req.phase.is_some() {
            if let Some(&j) = self.job_slots.get(&req.job) {
                let at = self.stamp_at(req.job, req.phase, now);
                let job = &self.jobs[j];
                if job.queue.is_empty() && job.in_service == 0 && at != job.burst.at {
                    // A lingering holder's request of a new phase: the linger ends, and the new
                    // phase queues like any other.
                    self.retire(j, now);
                } else if job.waiting && at < job.burst.at {
                    // The job's phase began earlier elsewhere (another node of the job stamped
                    // it first): it takes the earlier place.
                    self.stop_waiting(j);
                    self.jobs[j].burst.at = at;
                    self.start_waiting(j, now);
                    self.challenge(j, now);
                }
            }
        }
        let Some(&j) = self.job_slots.get(&req.job) else {
            let burst = self.burst_of(req.job, req.phase, now);
            if self.unknown == Unknown::Shared
                && req.phase.is_some()
                && !self.explicit.contains_key(&req.job)
                && !self.configured.contains_key(&req.job)
                && req.priority.is_none()
            {
                self.count_unknown_phase(req.job, burst.at);
            }
            let (path, place, priority) = self.placement(req.job, req.priority, req.user);
            let key = place.key(self.groups.intern(path), req.job);
            let mut queue = self.spare.pop().unwrap_or_default();
            queue.push_back(req);
            let j = self.jobs.insert(Job {
                id: req.job,
                queue,
                in_service: 0,
                set: 0,
                waiting: false,
                burst,
                phase_seen: None,
                open: Vec::new(),
                hint: req.priority,
                user: req.user,
                last_len: req.len,
            });
            self.saw_phase(j, req.phase);
            self.job_slots.insert(req.job, j);
            let s = self.join(j, key, priority, now);
            self.refresh(s);
            self.challenge(j, now);
            return;
        };
        self.saw_phase(j, req.phase);
        let job = &mut self.jobs[j];
        job.queue.push_back(req);
        let hint_changed = req.priority.is_some() && req.priority != job.hint;
        if hint_changed {
            job.hint = req.priority;
        }
        // Under a `user` level, a job whose requests carry another uid moves with them.
        let user_changed = req.user.is_some() && req.user != job.user;
        if user_changed {
            job.user = req.user;
        }
        // Its set may change with its hint, or with its uid under a `user` level.
        let may_move = hint_changed || (user_changed && self.levels.contains(&ShareLevel::User));
        let set = &mut self.sets[job.set];
        if set.holder == Some(j) {
            // A lingering holder's next request: it goes on holding, same burst (a set the device
            // waited for is backlogged already, and its head is this request).
            set.linger = None;
            set.anticipate = None;
        } else if !job.waiting {
            self.start_waiting(j, now);
            self.challenge(j, now);
        }
        if may_move {
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
            if let SetKey::Meta(g) = key {
                let meta = self.metas.get_mut(&g).expect("a backlogged class exists");
                let req = meta.pop().expect("the metadata class is backlogged");
                let next = meta.head_len();
                let path = self.groups.path(g);
                self.sched.served(key, path, req.len, next);
                if next.is_none() && self.metas.len() > SPARE_QUEUES {
                    // Many groups: an emptied class is not kept.
                    self.metas.remove(&g);
                    self.groups.release(g);
                }
                self.len -= 1;
                return Dispatch::Ready(Batch::single(req));
            }
            let s = self.set_slot(key);
            match self.sets[s].anticipate {
                // Its turn across sets, and its holder's next request is anticipated: the device
                // waits, for the request in service to complete...
                Some((None, _)) => {
                    return self
                        .next_linger_end()
                        .map_or(Dispatch::Idle, Dispatch::NotBefore)
                }
                // ...then for at most `slice_idle`.
                Some((Some(until), _)) if now < until => {
                    let end = self.next_linger_end().map_or(until, |l| l.min(until));
                    return Dispatch::NotBefore(end);
                }
                Some(_) => {
                    // The wait is over: the set holds on, but takes no turn until the request
                    // comes.
                    self.sets[s].anticipate = None;
                    self.refresh(s);
                    continue;
                }
                None => {}
            }
            let mut holder = match self.sets[s].holder {
                Some(h) => Some(h),
                None => self.hand_over(s, now),
            };
            // The bounds on a turn (a holder handed the set back goes on with its turn).
            if let Some(h) = holder {
                let set = &self.sets[s];
                if matches!(key, SetKey::New(_)) && self.outstayed(set, h, now) {
                    self.evict_newcomer(h, now);
                    continue;
                }
                if self.expired(set, now) {
                    self.yield_holder(s, now);
                    if self.sets[s].yielding {
                        self.unschedule(s);
                        continue;
                    }
                    holder = self.hand_over(s, now);
                }
            }
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
            job.last_len = req.len;
            // The holder keeps the set (it has a request in service): its next request is the
            // set's head; without one the set is blocked or empty, unless the device waits for
            // that next request (then the head is as long as this one).
            let mut next = job.queue.front().map(|r| r.len);
            if next.is_none() && req.len > 0 && self.may_anticipate(s, h, now) {
                self.sets[s].anticipate = Some((None, req.len));
                next = Some(req.len);
            }
            self.len -= 1;
            self.in_service.insert(req.id, h);
            let path = self.groups.path(key.group());
            self.sched.served(key, path, req.len, next);
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
            // the job queues again, with a new burst (its tenure ran out) or its own (a job with
            // an earlier phase took the set).
            let burst = if self.sets[s].keep_burst {
                self.jobs[j].burst
            } else {
                self.renewed_burst(j, now)
            };
            let set = &mut self.sets[s];
            set.holder = None;
            set.anticipate = None;
            set.yielding = false;
            set.keep_burst = false;
            set.last_holder = Some(self.jobs[j].id);
            self.jobs[j].burst = burst;
            self.start_waiting(j, now);
        }
        self.refresh(s);
    }

    fn queue_weight(&self, req: &Request) -> Option<QueueWeight> {
        let known = self
            .job_slots
            .get(&req.job)
            .and_then(|&j| self.jobs[j].hint);
        // A job's metadata (`metadata=apart`) is reported under its set.
        let (_, place, priority) = self.placement(req.job, req.priority.or(known), req.user);
        let queue = match place {
            Place::Priority(bits) => QueueId::Set(bits),
            Place::New => QueueId::Set(self.default_priority.key()),
            Place::Solo => QueueId::Job(req.job),
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
        let mut groups: Vec<(Group, GroupId)> = self
            .metas
            .keys()
            .map(|&g| (self.groups.path(g), g))
            .collect();
        groups.sort_unstable();
        for (path, g) in groups {
            let meta = self.metas.get_mut(&g).expect("listed");
            if meta.len() > 0 {
                self.sched.leave(SetKey::Meta(g), path);
                out.extend(meta.drain());
            }
        }
        for (_, s) in sets {
            let set = &self.sets[s];
            let order: Vec<Slot> = set.holder.into_iter().chain(set.waiting.slots()).collect();
            for j in order {
                self.stop_waiting(j);
                out.extend(self.jobs[j].queue.drain(..));
                if self.jobs[j].in_service == 0 {
                    // Drained, not finished: its turn is not one to learn a bound from.
                    let held_since = self.sets[s].held_since;
                    self.retire(j, held_since);
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

    fn phase_end(&mut self, job: JobId, phase: Nanos, now: Nanos) {
        if self.order != Order::Phase {
            return;
        }
        // Its client sends phase ends: its open phases may hold its set from now on.
        make_room(&mut self.enders, job);
        self.enders.insert(job, ());
        self.end_phase(job, phase, now);
    }

    fn phase_gone(&mut self, job: JobId, phase: Nanos, now: Nanos) {
        if self.order == Order::Phase {
            self.end_phase(job, phase, now);
        }
    }

    fn set_priority(&mut self, job: JobId, priority: Option<Priority>, now: Nanos) -> bool {
        match priority {
            Some(p) => {
                self.unknown_seen.remove(&job);
                self.explicit.insert(job, p)
            }
            None => self.explicit.remove(&job),
        };
        if let Some(&j) = self.job_slots.get(&job) {
            self.place(j, now);
        }
        true
    }

    fn set_job_info(&mut self, job: JobId, info: JobInfo, now: Nanos) -> bool {
        crate::fairshare::keep_job_info(&mut self.job_info, job.0, info);
        let used = self.levels.contains(&ShareLevel::Account);
        if used {
            // Its account changed: it moves, with its queue, to its account's set.
            if let Some(&j) = self.job_slots.get(&job) {
                self.place(j, now);
            }
        }
        used
    }

    fn set_share(&mut self, level: ShareLevel, key: u64, weight: Option<f64>) -> bool {
        // As in `wfq`: a new weight applies from the node's next backlog period.
        crate::fairshare::keep_share(&mut self.shares, level, key, weight);
        self.share_levels().contains(&level)
    }

    fn share_levels(&self) -> Vec<ShareLevel> {
        let mut levels = self.levels.clone();
        levels.push(ShareLevel::Set);
        levels
    }

    fn charge_elsewhere(&mut self, req: &Request, bytes: u64) {
        // Groups' shares hold job-wide across servers, as `wfq`'s tree's do. The sets' own
        // shares stay per server, as the paper's (and `key=set`'s) always were.
        if self.levels.is_empty() {
            return;
        }
        let g = self.group_of(req.job, req.user);
        let weights = self.group_weights(g);
        self.sched.charge(g, &weights, bytes);
    }
}
