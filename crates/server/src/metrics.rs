//! Prometheus text exposition (`GET /metrics` on the server's port) and the histograms behind it.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Instant;

use crate::state::Shared;

/// Upper bounds of the latency histograms' buckets, in seconds.
const BOUNDS_S: [f64; 13] = [
    1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0,
];

/// A cumulative-bucket latency histogram (Prometheus' `histogram` type).
#[derive(Clone, Debug, Default)]
pub(crate) struct Histogram {
    counts: [u64; BOUNDS_S.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    pub(crate) fn record(&mut self, secs: f64) {
        for (i, b) in BOUNDS_S.iter().enumerate() {
            if secs <= *b {
                self.counts[i] += 1;
            }
        }
        self.count += 1;
        self.sum += secs;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        for (i, b) in BOUNDS_S.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels},le=\"{b}\"}} {}",
                self.counts[i]
            );
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

/// Queue-wait and service-time histograms per policy name, and request counts per operation.
#[derive(Debug, Default)]
pub(crate) struct Histograms {
    /// (policy, op) → (queue wait, service time).
    pub(crate) by_policy: BTreeMap<(&'static str, &'static str), (Histogram, Histogram)>,
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A job's value for one series.
type JobValue = fn(&iosets_runtime::JobStats) -> u64;
/// A per-job metric: name, type, help, and its series (label suffix, value of a job).
type JobMetric = (
    &'static str,
    &'static str,
    &'static str,
    &'static [(&'static str, JobValue)],
);

/// The whole exposition.
pub(crate) fn render(shared: &Shared) -> String {
    let mut out = String::with_capacity(8192);
    let stats = shared.sched.stats();
    let policy = stats.policy;
    let c = &stats.counters;

    header(
        &mut out,
        "iosets_up_seconds",
        "gauge",
        "Seconds since the server started.",
    );
    let _ = writeln!(
        out,
        "iosets_up_seconds {}",
        shared.start.elapsed().as_secs_f64()
    );
    header(
        &mut out,
        "iosets_policy_info",
        "gauge",
        "The active scheduling policy (value 1).",
    );
    let _ = writeln!(out, "iosets_policy_info{{policy=\"{policy}\"}} 1");

    header(
        &mut out,
        "iosets_policy_requests_total",
        "counter",
        "Conservation counters, summed over every policy instance the server has run.",
    );
    for (what, v) in [
        ("inserted", c.inserted),
        ("merged", c.merged),
        ("dispatched", c.dispatched),
        ("completed", c.completed),
        ("failed", c.failed),
        ("withdrawn", c.withdrawn),
    ] {
        let _ = writeln!(
            out,
            "iosets_policy_requests_total{{policy=\"{policy}\",counter=\"{what}\"}} {v}"
        );
    }
    header(
        &mut out,
        "iosets_queued_requests",
        "gauge",
        "Requests waiting in the policy.",
    );
    let _ = writeln!(
        out,
        "iosets_queued_requests{{policy=\"{policy}\"}} {}",
        stats.queued
    );
    header(
        &mut out,
        "iosets_in_service_requests",
        "gauge",
        "Requests being served.",
    );
    let _ = writeln!(
        out,
        "iosets_in_service_requests{{policy=\"{policy}\"}} {}",
        stats.requests_in_service
    );
    header(
        &mut out,
        "iosets_policy_switches_total",
        "counter",
        "Run-time policy switches.",
    );
    let _ = writeln!(out, "iosets_policy_switches_total {}", stats.switches);

    let n = &shared.counters;
    header(
        &mut out,
        "iosets_connections",
        "gauge",
        "Open client connections.",
    );
    let _ = writeln!(out, "iosets_connections {}", n.connections());
    header(
        &mut out,
        "iosets_frames_total",
        "counter",
        "Frames received.",
    );
    let _ = writeln!(out, "iosets_frames_total {}", n.frames());
    header(
        &mut out,
        "iosets_bad_frames_total",
        "counter",
        "Frames refused as malformed.",
    );
    let _ = writeln!(out, "iosets_bad_frames_total {}", n.bad_frames());
    header(
        &mut out,
        "iosets_error_replies_total",
        "counter",
        "Requests answered with an errno.",
    );
    let _ = writeln!(out, "iosets_error_replies_total {}", n.errors());

    {
        let h = shared.histograms.lock();
        header(
            &mut out,
            "iosets_queue_wait_seconds",
            "histogram",
            "Time from arrival to dispatch, per policy and operation.",
        );
        for ((p, op), (wait, _)) in &h.by_policy {
            wait.render(
                &mut out,
                "iosets_queue_wait_seconds",
                &format!("policy=\"{p}\",op=\"{op}\""),
            );
        }
        header(
            &mut out,
            "iosets_service_seconds",
            "histogram",
            "Time from dispatch to completion (I/O and emulated device), per policy and operation.",
        );
        for ((p, op), (_, service)) in &h.by_policy {
            service.render(
                &mut out,
                "iosets_service_seconds",
                &format!("policy=\"{p}\",op=\"{op}\""),
            );
        }
    }

    let now = Instant::now();
    let priorities = shared.priorities.lock().clone();
    let meters = shared.meters.lock();
    let per_job: [JobMetric; 5] = [
        (
            "iosets_job_ops_total",
            "counter",
            "Requests completed per job.",
            &[("", |j| j.ops)],
        ),
        (
            "iosets_job_bytes_total",
            "counter",
            "Bytes moved per job and direction.",
            &[
                (",direction=\"read\"", |j| j.bytes_read),
                (",direction=\"write\"", |j| j.bytes_written),
            ],
        ),
        (
            "iosets_job_failed_total",
            "counter",
            "Failed requests per job.",
            &[("", |j| j.failed)],
        ),
        (
            "iosets_job_queued_requests",
            "gauge",
            "Queued requests per job.",
            &[("", |j| j.queued)],
        ),
        (
            "iosets_job_in_service_requests",
            "gauge",
            "Requests in service per job.",
            &[("", |j| j.in_service)],
        ),
    ];
    for (name, kind, help, series) in per_job {
        header(&mut out, name, kind, help);
        for j in &stats.jobs {
            for (label, value) in series {
                let _ = writeln!(out, "{name}{{job=\"{}\"{label}}} {}", j.job, value(j));
            }
        }
    }
    header(
        &mut out,
        "iosets_job_bandwidth_mib_s",
        "gauge",
        "Bandwidth per job over the last 1 s and 10 s.",
    );
    for j in &stats.jobs {
        let (one, ten) = meters.bandwidth(j.job, now);
        for (window, v) in [("1s", one), ("10s", ten)] {
            let _ = writeln!(
                out,
                "iosets_job_bandwidth_mib_s{{job=\"{}\",window=\"{window}\"}} {v}",
                j.job
            );
        }
    }
    header(
        &mut out,
        "iosets_job_queue_wait_seconds",
        "summary",
        "Queue wait per job (quantiles from an HDR histogram, 2 significant digits).",
    );
    for j in &stats.jobs {
        let w = &j.queue_wait;
        for (q, v) in [("0.5", w.p50_ns), ("0.99", w.p99_ns)] {
            let _ = writeln!(
                out,
                "iosets_job_queue_wait_seconds{{job=\"{}\",quantile=\"{q}\"}} {}",
                j.job,
                v as f64 / 1e9
            );
        }
        let _ = writeln!(
            out,
            "iosets_job_queue_wait_seconds_sum{{job=\"{}\"}} {}",
            j.job,
            w.mean_ns as f64 * w.count as f64 / 1e9
        );
        let _ = writeln!(
            out,
            "iosets_job_queue_wait_seconds_count{{job=\"{}\"}} {}",
            j.job, w.count
        );
    }
    header(
        &mut out,
        "iosets_job_priority",
        "gauge",
        "Priority in force per job.",
    );
    for (job, (p, source)) in &priorities {
        let _ = writeln!(
            out,
            "iosets_job_priority{{job=\"{job}\",source=\"{}\"}} {p}",
            source.as_str()
        );
    }
    out
}
