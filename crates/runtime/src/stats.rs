//! What the scheduler reports: aggregate counters and per-job service statistics.

use hdrhistogram::Histogram;
use iosets_policy::Counters;
use iosets_types::{JobId, Nanos, Op, Outcome, Request};

/// Longest queue wait the histogram resolves (one hour); longer waits are recorded as one hour, and
/// [`WaitSummary::max_ns`] and [`WaitSummary::mean_ns`] stay exact.
const WAIT_HIGHEST_NS: u64 = 3_600 * 1_000_000_000;
/// Significant decimal digits the wait histogram keeps (1% relative error on quantiles).
const WAIT_SIGFIG: u8 = 2;

/// A summary of a job's queue waits (dispatch time − arrival time), in nanoseconds.
///
/// `p50_ns` and `p99_ns` come from an HDR histogram with two significant digits; `count`,
/// `mean_ns` and `max_ns` are exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitSummary {
    /// Requests dispatched.
    pub count: u64,
    /// Mean wait.
    pub mean_ns: u64,
    /// Median wait.
    pub p50_ns: u64,
    /// 99th-percentile wait.
    pub p99_ns: u64,
    /// Longest wait.
    pub max_ns: u64,
}

/// One job's statistics since the scheduler started (or since the job was last forgotten).
///
/// Counts are in original requests, not batches: a batch of three merged requests counts three ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    /// Queue waits of the requests dispatched so far.
    pub queue_wait: WaitSummary,
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
        }
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
    /// Per-job statistics, by job id.
    pub jobs: Vec<JobStats>,
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

/// A job's running statistics, held under the scheduler lock.
#[derive(Debug)]
pub(crate) struct JobEntry {
    pub(crate) ops: u64,
    pub(crate) bytes_read: u64,
    pub(crate) bytes_written: u64,
    pub(crate) failed: u64,
    pub(crate) queued: u64,
    pub(crate) in_service: u64,
    wait: Histogram<u64>,
    wait_sum: u128,
    wait_max: u64,
}

impl JobEntry {
    pub(crate) fn new() -> JobEntry {
        JobEntry {
            ops: 0,
            bytes_read: 0,
            bytes_written: 0,
            failed: 0,
            queued: 0,
            in_service: 0,
            wait: Histogram::new_with_bounds(1, WAIT_HIGHEST_NS, WAIT_SIGFIG)
                .expect("constant histogram bounds are valid"),
            wait_sum: 0,
            wait_max: 0,
        }
    }

    /// One of the job's requests left the queue after waiting `wait`.
    pub(crate) fn dispatched(&mut self, wait: Nanos) {
        self.queued = self.queued.saturating_sub(1);
        self.in_service += 1;
        self.wait.saturating_record(wait.0);
        self.wait_sum += u128::from(wait.0);
        self.wait_max = self.wait_max.max(wait.0);
    }

    /// One of the job's requests finished; `moved` bytes of it were served if `outcome` is ok.
    pub(crate) fn completed(&mut self, req: &Request, moved: u64, outcome: Outcome) {
        self.in_service = self.in_service.saturating_sub(1);
        self.ops += 1;
        if outcome.is_ok() {
            match req.op {
                Op::Read => self.bytes_read += moved,
                Op::Write => self.bytes_written += moved,
                Op::Other => {}
            }
        } else {
            self.failed += 1;
        }
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.queued == 0 && self.in_service == 0
    }

    pub(crate) fn snapshot(&self, job: JobId) -> JobStats {
        let count = self.wait.len();
        let queue_wait = if count == 0 {
            WaitSummary::default()
        } else {
            WaitSummary {
                count,
                mean_ns: u64::try_from(self.wait_sum / u128::from(count)).unwrap_or(u64::MAX),
                p50_ns: self.wait.value_at_quantile(0.5),
                p99_ns: self.wait.value_at_quantile(0.99),
                max_ns: self.wait_max,
            }
        };
        JobStats {
            job,
            ops: self.ops,
            bytes_read: self.bytes_read,
            bytes_written: self.bytes_written,
            failed: self.failed,
            queued: self.queued,
            in_service: self.in_service,
            queue_wait,
        }
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
