//! What the scheduler reports: aggregate counters and per-job service statistics.

use std::net::IpAddr;

use hdrhistogram::Histogram;
use iosets_policy::Counters;
use iosets_types::{JobId, Nanos, Op, Priority};

use crate::why::{JobAcc, WaitCauses};

/// Longest latency the histograms resolve (one hour); longer ones are recorded as one hour (sums
/// and counts stay exact).
pub(crate) const HIGHEST_NS: u64 = 3_600 * 1_000_000_000;

/// A summary of a job's queue waits (dispatch time − arrival time), in nanoseconds.
///
/// `p50_ns` and `p99_ns` come from a log-linear histogram with 8 buckets per power of two, as
/// the middle of their bucket (within 1/16 of the true value, never above the maximum); `count`,
/// `mean_ns` and `max_ns` are exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitSummary {
    /// Requests dispatched.
    pub count: u64,
    /// Sum of the waits (exact, saturating at `u64::MAX`): what [`JobStats::wait_causes`]
    /// splits.
    pub sum_ns: u64,
    /// Mean wait.
    pub mean_ns: u64,
    /// Median wait.
    pub p50_ns: u64,
    /// 99th-percentile wait.
    pub p99_ns: u64,
    /// Longest wait.
    pub max_ns: u64,
}

pub use iosets_types::PrioritySource;

/// The priority in force for a job and where it comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct JobPriority {
    /// The priority.
    pub value: Priority,
    /// Its provenance.
    pub source: PrioritySource,
}

/// One job's statistics since the scheduler started (or since the job was last forgotten).
///
/// Counts are in original requests, not batches: a batch of three merged requests counts three ops.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct JobStats {
    /// The job.
    pub job: JobId,
    /// Requests completed, successfully or not.
    pub ops: u64,
    /// Bytes moved by completed reads.
    pub bytes_read: u64,
    /// Bytes moved by completed writes.
    pub bytes_written: u64,
    /// Requests whose batch failed or was abandoned.
    pub failed: u64,
    /// Requests submitted and not yet dispatched.
    pub queued: u64,
    /// Requests dispatched and not yet completed.
    pub in_service: u64,
    /// Queue waits (dispatch time − arrival time) of the requests completed so far. Quantiles
    /// within 1/16 of the true value, never above the maximum (see [`WaitSummary`]); count,
    /// mean and maximum exact.
    pub queue_wait: WaitSummary,
    /// The same waits split by cause ([`crate::why`]): `wait_causes.total_ns() ==
    /// queue_wait.sum_ns` exactly.
    pub wait_causes: WaitCauses,
    /// Bytes per second over the last second and over the last ten seconds.
    pub bandwidth: (f64, f64),
    /// When the job last completed a request (scheduler time).
    pub last_active: Nanos,
    /// The priority in force, if any, and its source.
    pub priority: Option<JobPriority>,
    /// The job's I/O period, when automatic priorities found one.
    pub period: Option<Nanos>,
    /// The job's Set-10 set, when automatic priorities placed it.
    pub set: Option<i32>,
    /// The network addresses its requests came from, most recent first.
    pub peers: Peers,
}

impl JobStats {
    /// The statistics of a job that has done nothing yet (all counts zero).
    pub fn idle(job: JobId) -> JobStats {
        JobStats {
            job,
            ops: 0,
            bytes_read: 0,
            bytes_written: 0,
            failed: 0,
            queued: 0,
            in_service: 0,
            queue_wait: WaitSummary::default(),
            wait_causes: WaitCauses::default(),
            bandwidth: (0.0, 0.0),
            last_active: Nanos::ZERO,
            priority: None,
            period: None,
            set: None,
            peers: Peers::default(),
        }
    }
}

/// Most peer addresses kept per job ([`Peers`]).
pub const PEERS_KEPT: usize = 4;

/// The distinct network addresses a job's requests came from (those submitted with
/// [`crate::Scheduler::submit_from`] and an address), most recent first: at most
/// [`PEERS_KEPT`], a new address pushing out the one unseen for longest. Fixed size, no
/// allocation: a job id claimed from many hosts costs no more than one claimed from one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peers([Option<IpAddr>; PEERS_KEPT]);

impl Peers {
    /// `addr` sent the job's latest request: it moves (or enters) first.
    pub fn note(&mut self, addr: IpAddr) {
        let at = self
            .0
            .iter()
            .position(|p| *p == Some(addr))
            .unwrap_or(PEERS_KEPT - 1);
        self.0[..=at].rotate_right(1);
        self.0[0] = Some(addr);
    }

    /// The addresses, most recent first.
    pub fn iter(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.0.iter().map_while(|p| *p)
    }

    /// How many addresses are kept.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether no address was seen.
    pub fn is_empty(&self) -> bool {
        self.0[0].is_none()
    }
}

/// A snapshot of the whole scheduler, taken under its lock.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SchedulerStats {
    /// The active policy's name.
    pub policy: &'static str,
    /// The conservation counters summed over every policy instance the scheduler has driven (the
    /// active one and every one switched out). A switch moves each queued request out of the old
    /// instance (`withdrawn`) and into the new one (`inserted` again), so `inserted − withdrawn`
    /// is the number of requests submitted.
    pub counters: Counters,
    /// Requests accepted by `submit`.
    pub submitted: u64,
    /// Requests queued in the active policy.
    pub queued: usize,
    /// Requests held by the quota gate, waiting for their rule to admit them (not yet in the
    /// policy; see [`crate::quota`]).
    pub held: usize,
    /// The quota rules in force, in order, with their counters (empty without quotas).
    pub rules: Vec<crate::RuleStats>,
    /// Batches in service, in every policy instance.
    pub in_flight: usize,
    /// Original requests in service (a merged batch counts each of its requests).
    pub requests_in_service: u64,
    /// Switched-out policy instances still waiting for their in-service batches to complete.
    pub retired_policies: usize,
    /// Successful calls to `switch_policy`.
    pub switches: u64,
    /// Completions a policy refused (a runtime bug if ever non-zero; each is logged).
    pub rejected_completions: u64,
    /// Whether `shutdown` was called.
    pub shut_down: bool,
    /// The limit on data batches in service and what it holds ([`crate::inservice`]).
    pub inservice: InServiceStats,
    /// Per-job statistics, by job id: every job the book remembers, has work queued or in service,
    /// or has a priority.
    pub jobs: Vec<JobStats>,
    /// Jobs forgotten after being idle for the forget interval, since the start.
    pub forgotten_jobs: u64,
    /// Job records dropped to keep the book within its size, since the start.
    pub evicted_jobs: u64,
}

/// The in-service limit's state ([`crate::inservice`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InServiceStats {
    /// The mode set: off, a fixed number, or auto.
    pub mode: crate::InServiceLimit,
    /// The limit in force (for `auto`, the one it adapted to); `None` when off.
    pub limit: Option<usize>,
    /// Data batches (reads, writes) handed to workers and not completed.
    pub data_in_service: usize,
    /// Whether a dispatched data batch waits for a slot.
    pub parked: bool,
    /// Times the limit changed since the start.
    pub changes: u64,
}

impl SchedulerStats {
    /// The statistics of `job`, if the scheduler knows it.
    pub fn job(&self, job: JobId) -> Option<&JobStats> {
        self.jobs
            .binary_search_by_key(&job, |j| j.job)
            .ok()
            .map(|i| &self.jobs[i])
    }

    /// Requests completed, over all jobs.
    pub fn total_ops(&self) -> u64 {
        self.jobs.iter().map(|j| j.ops).sum()
    }

    /// Requests failed or abandoned, over all jobs.
    pub fn total_failed(&self) -> u64 {
        self.jobs.iter().map(|j| j.failed).sum()
    }
}

/// A job's requests queued and in service, held under the scheduler lock (removed when both are
/// zero: everything else about the job is in the [`crate::book`]).
#[derive(Debug, Default)]
pub(crate) struct JobEntry {
    pub(crate) queued: u64,
    pub(crate) in_service: u64,
    /// Its wait accounting ([`crate::why`]).
    pub(crate) why: JobAcc,
}

impl JobEntry {
    pub(crate) fn is_idle(&self) -> bool {
        self.queued == 0 && self.in_service == 0
    }
}

/// A latency distribution: an HDR histogram with two significant digits from 1 ns to one hour,
/// with an exact count and sum.
#[derive(Clone, Debug)]
pub struct Latency {
    hist: Histogram<u64>,
    sum_ns: u128,
}

impl Latency {
    fn new() -> Latency {
        Latency {
            hist: Histogram::new_with_bounds(1, HIGHEST_NS, 2)
                .expect("constant histogram bounds are valid"),
            sum_ns: 0,
        }
    }

    fn record(&mut self, t: Nanos) {
        self.hist.saturating_record(t.0);
        self.sum_ns += u128::from(t.0);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Sum of the values recorded, in nanoseconds (exact).
    pub fn sum_ns(&self) -> u128 {
        self.sum_ns
    }

    /// Values recorded at or below `ns` (exact to within the histogram's 1% resolution around
    /// `ns`).
    pub fn count_at_most(&self, ns: u64) -> u64 {
        self.hist.count_between(0, ns)
    }

    /// The value at quantile `q` (0 to 1), in nanoseconds; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        self.hist.value_at_quantile(q)
    }
}

/// Queue wait (arrival to dispatch) and service time (dispatch to completion) of the requests one
/// policy served for one operation, on the scheduler's clock.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OpLatency {
    /// The policy's name.
    pub policy: &'static str,
    /// The operation.
    pub op: Op,
    /// Queue waits.
    pub wait: Latency,
    /// Service times.
    pub service: Latency,
}

impl OpLatency {
    pub(crate) fn new(policy: &'static str, op: Op) -> OpLatency {
        OpLatency {
            policy,
            op,
            wait: Latency::new(),
            service: Latency::new(),
        }
    }

    pub(crate) fn record(&mut self, wait: Nanos, service: Nanos) {
        self.wait.record(wait);
        self.service.record(service);
    }

    pub(crate) fn merge(&mut self, other: &OpLatency) {
        // Same bounds on both sides: adding cannot fail.
        let _ = self.wait.hist.add(&other.wait.hist);
        let _ = self.service.hist.add(&other.service.hist);
        self.wait.sum_ns += other.wait.sum_ns;
        self.service.sum_ns += other.service.sum_ns;
    }
}

/// `a + b`, field by field.
pub(crate) fn add_counters(a: Counters, b: Counters) -> Counters {
    Counters {
        inserted: a.inserted + b.inserted,
        merged: a.merged + b.merged,
        dispatched: a.dispatched + b.dispatched,
        completed: a.completed + b.completed,
        failed: a.failed + b.failed,
        withdrawn: a.withdrawn + b.withdrawn,
    }
}
