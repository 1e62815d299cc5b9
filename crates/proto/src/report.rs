//! The reports control requests return (as JSON text): `iosets ctl jobs` and `iosets ctl stats`.

use serde::{Deserialize, Serialize};

/// Queue-wait percentiles of one job, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitReport {
    /// Requests dispatched.
    pub count: u64,
    /// Mean wait.
    pub mean_us: f64,
    /// Median wait.
    pub p50_us: f64,
    /// 99th-percentile wait.
    pub p99_us: f64,
    /// Longest wait.
    pub max_us: f64,
}

/// One job's line of `iosets ctl jobs` (seed 004's `beegfs-ctl --jobstats`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobReport {
    /// The job id.
    pub job: u64,
    /// The priority in force: the control plane's, else the automatic one, else the last client
    /// hint; none if none.
    pub priority: Option<f64>,
    /// Where the priority came from: `"control"`, `"auto"`, `"hint"` or `"none"`.
    pub priority_source: String,
    /// The IO-SETS set index (priority `10^-set`) when the priority maps to one.
    pub set: Option<i32>,
    /// The job's I/O period in seconds, when automatic priorities detected one.
    #[serde(default)]
    pub period_s: Option<f64>,
    /// Requests completed (successfully or not).
    pub ops: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Requests that failed.
    pub failed: u64,
    /// Bandwidth over the last second, MiB/s (reads and writes).
    pub bw_1s_mib_s: f64,
    /// Bandwidth over the last ten seconds, MiB/s.
    pub bw_10s_mib_s: f64,
    /// Requests waiting in the queue.
    pub queued: u64,
    /// Requests being served.
    pub in_service: u64,
    /// Queue waits.
    pub queue_wait: WaitReport,
}

/// The answer to `iosets ctl jobs`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobsReport {
    /// The active policy.
    pub policy: String,
    /// One line per job the server knows, by job id.
    pub jobs: Vec<JobReport>,
}

/// The answer to `iosets ctl stats`: the server's totals and the conservation counters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    /// The active policy.
    pub policy: String,
    /// Seconds since the server started.
    pub uptime_s: f64,
    /// Worker threads doing the I/O.
    pub workers: usize,
    /// The emulated device's bandwidth, if throttled.
    pub throttle_mib_s: Option<f64>,
    /// Open client connections.
    pub connections: u64,
    /// Frames received, over all connections.
    pub frames: u64,
    /// Frames refused as malformed.
    pub bad_frames: u64,
    /// Requests answered with an error.
    pub errors: u64,
    /// Requests submitted to the scheduler.
    pub submitted: u64,
    /// Conservation counter: requests inserted into a policy (again after a switch).
    pub inserted: u64,
    /// Conservation counter: requests merged into another's batch.
    pub merged: u64,
    /// Conservation counter: batches dispatched.
    pub dispatched: u64,
    /// Conservation counter: requests completed.
    pub completed: u64,
    /// Conservation counter: requests failed.
    pub failed: u64,
    /// Conservation counter: requests withdrawn by a policy switch.
    pub withdrawn: u64,
    /// Requests queued now.
    pub queued: u64,
    /// Requests in service now.
    pub in_service: u64,
    /// Whether the counters balance.
    pub balanced: bool,
    /// Policy switches so far.
    pub switches: u64,
    /// Bytes read from the backing store.
    pub bytes_read: u64,
    /// Bytes written to the backing store.
    pub bytes_written: u64,
    /// Jobs the runtime's job book remembers now.
    #[serde(default)]
    pub jobs_known: u64,
    /// Bytes the job book's records hold (bounded by `max_jobs` records).
    #[serde(default)]
    pub job_book_bytes: u64,
    /// Jobs forgotten after being idle for the forget interval.
    #[serde(default)]
    pub jobs_forgotten: u64,
    /// Job records dropped to keep the book within `max_jobs`.
    #[serde(default)]
    pub jobs_evicted: u64,
}
