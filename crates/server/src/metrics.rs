//! Prometheus text exposition (`GET /metrics` on the server's admin address).

use std::fmt::Write;

use iosets_runtime::{JobStats, Latency, SchedulerStats};
use iosets_types::OpClass;

use crate::state::{Counters, Shared};

/// Upper bounds of the latency histograms' buckets, in seconds.
const BOUNDS_S: [f64; 13] = [
    1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0,
];

/// A bucket bound in nanoseconds, as recorded and as rendered.
fn bound_ns(b: f64) -> u64 {
    (b * 1e9) as u64
}

/// Renders `h` as a Prometheus histogram (cumulative buckets at [`BOUNDS_S`]).
fn render_histogram(out: &mut String, name: &str, labels: &str, h: &Latency) {
    for b in BOUNDS_S {
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels},le=\"{b}\"}} {}",
            h.count_at_most(bound_ns(b))
        );
    }
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.count());
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum_ns() as f64 / 1e9);
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count());
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A job's value for one series.
type JobValue = fn(&JobStats) -> u64;
/// A per-job metric: name, type, help, and its series (label suffix, value of a job).
type JobMetric = (
    &'static str,
    &'static str,
    &'static str,
    &'static [(&'static str, JobValue)],
);

/// Connections, byte budgets, refusals and hints: the server's defences (issue 16).
fn render_guard(out: &mut String, shared: &Shared) {
    use std::sync::atomic::Ordering::Relaxed;
    let receiving = shared.inflight_bytes.receiving();
    let gauges = [
        (
            "iosets_connections_open",
            "Connections open now (TCP and same-host).",
            shared.connections.len() as f64,
        ),
        (
            "iosets_connections_limit",
            "The connection cap (max_connections).",
            shared.max_connections as f64,
        ),
        (
            "iosets_inflight_bytes",
            "Bytes of requests in the server now (frames, and the data of reads to answer).",
            (shared.inflight_bytes.used_kib() * 1024) as f64,
        ),
        (
            "iosets_inflight_limit_bytes",
            "The bound on in-flight bytes (max_inflight_bytes).",
            (u64::from(shared.inflight_bytes.kib) * 1024) as f64,
        ),
        (
            "iosets_receiving_frames",
            "Large frames being received now (charged to the in-flight bytes as they arrive).",
            receiving.0 as f64,
        ),
        (
            "iosets_receiving_bytes",
            "In-flight bytes held by frames being received (at most one step beyond their bytes).",
            (receiving.1 * 1024) as f64,
        ),
        (
            "iosets_receiving_largest_bytes",
            "In-flight bytes held by the frame being received that holds the most.",
            (receiving.2 * 1024) as f64,
        ),
    ];
    for (name, help, v) in gauges {
        header(out, name, "gauge", help);
        let _ = writeln!(out, "{name} {v}");
    }
    header(
        out,
        "iosets_connections_evicted_total",
        "counter",
        "Idle connections closed to make room for a new one at the cap.",
    );
    let _ = writeln!(
        out,
        "iosets_connections_evicted_total {}",
        shared.connections.evicted()
    );
    header(
        out,
        "iosets_refusals_total",
        "counter",
        "Peers, connections and requests refused or closed, by reason.",
    );
    for k in crate::guard::Refusal::ALL {
        let _ = writeln!(
            out,
            "iosets_refusals_total{{reason=\"{}\"}} {}",
            k.as_str(),
            shared.guard.count(k)
        );
    }
    header(
        out,
        "iosets_hints_overridden_total",
        "counter",
        "Priority hints lowered or dropped by the hint policy.",
    );
    let _ = writeln!(
        out,
        "iosets_hints_overridden_total {}",
        shared.hints_overridden.load(Relaxed)
    );
}

/// The whole exposition: every family with `# HELP` and `# TYPE` lines, names and labels as
/// listed in docs/metrics.md (per-job series labelled `job_id`, since Prometheus keeps `job`
/// for the scrape job).
pub(crate) fn render(shared: &Shared) -> String {
    let mut out = String::with_capacity(8192);
    let stats = shared.sched.stats();
    render_scheduler(&mut out, shared, &stats);
    render_guard(&mut out, shared);
    render_requests(&mut out, &stats);
    render_frames_and_files(&mut out, shared);
    render_latency(&mut out, shared);
    render_meta(&mut out, &shared.counters);
    render_jobs(&mut out, shared, &stats, shared.config.metrics_max_jobs);
    render_rules(&mut out, &stats.rules);
    out
}

/// A family of one series without labels: its header and its value.
fn single(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    header(out, name, kind, help);
    let _ = writeln!(out, "{name} {value}");
}

/// When the server started and the policy that runs.
fn render_scheduler(out: &mut String, shared: &Shared, stats: &SchedulerStats) {
    single(
        out,
        "iosets_start_time_seconds",
        "gauge",
        "When the server started (its scheduler clock's zero), in seconds since the UNIX epoch.",
        shared.clock_zero.0 as f64 / 1e9,
    );
    header(
        out,
        "iosets_policy_info",
        "gauge",
        "The active scheduling policy (value 1).",
    );
    let _ = writeln!(out, "iosets_policy_info{{policy=\"{}\"}} 1", stats.policy);
}

/// The conservation counters, the queue and the policy switches.
fn render_requests(out: &mut String, stats: &SchedulerStats) {
    let c = &stats.counters;
    // The conservation counters, one family each: they are stages of one request, so a sum
    // over a label joining them would mean nothing. No policy label: they are summed over
    // every policy instance the server has run (`iosets_policy_info` says which runs now).
    for (name, help, v) in [
        (
            "iosets_requests_inserted_total",
            "Requests inserted into the policy (every policy instance the server has run).",
            c.inserted,
        ),
        (
            "iosets_requests_merged_total",
            "Requests merged into a queued neighbour by the policy.",
            c.merged,
        ),
        (
            "iosets_requests_dispatched_total",
            "Requests dispatched by the policy to a worker.",
            c.dispatched,
        ),
        (
            "iosets_requests_completed_total",
            "Requests completed (successfully or not) after dispatch.",
            c.completed,
        ),
        (
            "iosets_requests_failed_total",
            "Requests whose batch failed or was abandoned.",
            c.failed,
        ),
        (
            "iosets_requests_withdrawn_total",
            "Requests withdrawn from the policy before dispatch.",
            c.withdrawn,
        ),
    ] {
        single(out, name, "counter", help, v);
    }
    single(
        out,
        "iosets_queued_requests",
        "gauge",
        "Requests waiting in the policy.",
        stats.queued,
    );
    single(
        out,
        "iosets_in_service_requests",
        "gauge",
        "Requests being served.",
        stats.requests_in_service,
    );
    single(
        out,
        "iosets_policy_switches_total",
        "counter",
        "Run-time policy switches.",
        stats.switches,
    );
}

/// Frames, error replies, the descriptor limit and the backing store's open files.
fn render_frames_and_files(out: &mut String, shared: &Shared) {
    let n = &shared.counters;
    single(
        out,
        "iosets_frames_total",
        "counter",
        "Frames received.",
        n.frames(),
    );
    single(
        out,
        "iosets_bad_frames_total",
        "counter",
        "Frames refused as malformed.",
        n.bad_frames(),
    );
    single(
        out,
        "iosets_phases_gone_total",
        "counter",
        "Phases ended because the last connection carrying them closed (a client gone without \
         ending its phase).",
        n.phases_gone(),
    );
    single(
        out,
        "iosets_error_replies_total",
        "counter",
        "Requests answered with an errno.",
        n.errors(),
    );
    let (fds, root) = (&shared.fds, shared.root.stats());
    for (name, kind, help, value) in [
        (
            "iosets_fd_limit",
            "gauge",
            "The soft RLIMIT_NOFILE the server runs with.",
            fds.limit,
        ),
        (
            "iosets_open_files_cached",
            "gauge",
            "Open files in the backing store's cache.",
            root.cached_files as u64,
        ),
        (
            "iosets_dirty_files",
            "gauge",
            "Files written since their last fsync, held open.",
            root.dirty_files as u64,
        ),
        (
            "iosets_dirty_dirs",
            "gauge",
            "Directories whose entries changed since their last fsync, held open.",
            root.dirty_dirs as u64,
        ),
        (
            "iosets_pressure_fsync_errors_total",
            "counter",
            "Early fsyncs that failed (reported at shutdown).",
            root.pressure_fsync_errors,
        ),
    ] {
        single(out, name, kind, help, value);
    }
    header(
        out,
        "iosets_pressure_fsyncs_total",
        "counter",
        "Dirty files and directories fsynced and closed early because their set was full.",
    );
    for (kind, v) in [
        ("file", root.pressure_fsyncs_files),
        ("dir", root.pressure_fsyncs_dirs),
    ] {
        let _ = writeln!(out, "iosets_pressure_fsyncs_total{{kind=\"{kind}\"}} {v}");
    }
}

/// Queue wait and service time per policy and operation class ([`OpClass`]), from the
/// runtime's histograms.
fn render_latency(out: &mut String, shared: &Shared) {
    let runtime = shared.sched.latency();
    let series: Vec<(&str, &str, &Latency, &Latency)> = runtime
        .iter()
        .map(|l| (l.policy, OpClass::of(l.op).as_str(), &l.wait, &l.service))
        .collect();
    header(
        out,
        "iosets_queue_wait_seconds",
        "histogram",
        "Time from arrival to dispatch, per policy and operation class (data-read, data-write, \
         data-fsync, meta; scheduler clock).",
    );
    for (policy, op, wait, _) in &series {
        let labels = format!("policy=\"{policy}\",op=\"{op}\"");
        render_histogram(out, "iosets_queue_wait_seconds", &labels, wait);
    }
    header(
        out,
        "iosets_service_seconds",
        "histogram",
        "Time from dispatch to completion (I/O, emulated device and emulated metadata back end), \
         per policy and operation class.",
    );
    for (policy, op, _, service) in &series {
        let labels = format!("policy=\"{policy}\",op=\"{op}\"");
        render_histogram(out, "iosets_service_seconds", &labels, service);
    }
}

/// Metadata requests per operation and the emulated metadata back end.
fn render_meta(out: &mut String, n: &Counters) {
    header(
        out,
        "iosets_meta_requests_total",
        "counter",
        "Metadata requests served through the scheduler (successfully or not), per operation.",
    );
    for (op, count) in n.meta_served_by_op() {
        let _ = writeln!(
            out,
            "iosets_meta_requests_total{{op=\"{}\"}} {count}",
            op.as_str()
        );
    }
    single(
        out,
        "iosets_meta_backend_calls_total",
        "counter",
        "Calls to the emulated slow metadata back end (meta_latency_ms): 1 per operation, the \
         stripe count for those touching every stripe object.",
        n.backend_calls(),
    );
    single(
        out,
        "iosets_meta_backend_blocked_seconds_total",
        "counter",
        "Time workers were held by the emulated metadata back end: calls times meta_latency_ms.",
        n.backend_blocked_ns() as f64 / 1e9,
    );
}

/// The quota rules' series: per rule (a bounded set, named by the administrator), its thread
/// cap, requests in service, held and admitted, and its conservation counters.
fn render_rules(out: &mut String, rules: &[iosets_runtime::RuleStats]) {
    type Gauge = fn(&iosets_runtime::RuleStats) -> Option<u64>;
    let series: [(&str, &str, &str, Gauge); 10] = [
        (
            "iosets_rule_threads",
            "gauge",
            "Service threads a quota rule may hold (rules with a thread quota).",
            |r| r.threads.map(|t| t as u64),
        ),
        (
            "iosets_rule_in_service_requests",
            "gauge",
            "Requests of a quota rule in service.",
            |r| Some(r.in_service),
        ),
        (
            "iosets_rule_peak_in_service_requests",
            "gauge",
            "The most requests a quota rule had in service at once (lent threads apart).",
            |r| Some(r.peak_in_service),
        ),
        (
            "iosets_rule_held_requests",
            "gauge",
            "Requests a quota rule holds back.",
            |r| Some(r.held),
        ),
        (
            "iosets_rule_matched_total",
            "counter",
            "Requests that fell under a quota rule.",
            |r| Some(r.matched_total),
        ),
        (
            "iosets_rule_admitted_total",
            "counter",
            "Requests a quota rule admitted to the policy.",
            |r| Some(r.admitted_total),
        ),
        (
            "iosets_rule_lent_total",
            "counter",
            "Requests admitted on lent threads or beyond a soft rate.",
            |r| Some(r.lent_total),
        ),
        (
            "iosets_rule_reserved_total",
            "counter",
            "Requests admitted by a reservation.",
            |r| Some(r.reserved_total),
        ),
        (
            "iosets_rule_kept_total",
            "counter",
            "Requests admitted on a thread kept for their job (keep_ms).",
            |r| Some(r.kept_total),
        ),
        (
            "iosets_rule_admitted_bytes_total",
            "counter",
            "Bytes of the requests a quota rule admitted.",
            |r| Some(r.admitted_bytes_total),
        ),
    ];
    for (name, kind, help, value) in series {
        header(out, name, kind, help);
        for r in rules {
            if let Some(v) = value(r) {
                let _ = writeln!(out, "{name}{{rule=\"{}\"}} {v}", r.name);
            }
        }
    }
    header(
        out,
        "iosets_rule_held_seconds_total",
        "counter",
        "Seconds the requests a quota rule admitted were held, by what held them: limit=\"threads\" \
         (its thread cap, a job's ceiling, every thread busy) or limit=\"rate\" (no token in \
         the job's or the rule's bucket).",
    );
    for r in rules {
        for (limit, ns) in [("threads", r.held_threads_ns), ("rate", r.held_rate_ns)] {
            let _ = writeln!(
                out,
                "iosets_rule_held_seconds_total{{rule=\"{}\",limit=\"{limit}\"}} {}",
                r.name,
                ns as f64 / 1e9
            );
        }
    }
    // Who was held most: at most 5 jobs and 5 users per rule and window (bounded cardinality:
    // the series follow the current top, as the job series follow the active jobs).
    header(
        out,
        "iosets_rule_top_held_seconds",
        "gauge",
        "Seconds a quota rule held the jobs and users it held most (at most 5 each, rank 1 the \
         most) over the last minute (window=\"1m\") and hour (window=\"1h\"): who=\"job\" \
         (id: the job id) or who=\"user\" (id: the uid).",
    );
    for r in rules {
        let t = &r.top;
        for (window, who, list) in [
            ("1m", "job", &t.jobs_1m),
            ("1m", "user", &t.users_1m),
            ("1h", "job", &t.jobs_1h),
            ("1h", "user", &t.users_1h),
        ] {
            for (rank, &(id, (threads, rate))) in list.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "iosets_rule_top_held_seconds{{rule=\"{}\",window=\"{window}\",who=\"{who}\",rank=\"{}\",id=\"{id}\"}} {}",
                    r.name,
                    rank + 1,
                    (threads + rate) as f64 / 1e9
                );
            }
        }
    }
}

/// The jobs given their own series: at most `max`, those with requests queued or in service
/// first, then the most recently active (latest completion first; the lower id on a tie). The
/// others are summed under `job_id="other"`.
fn listed_jobs(jobs: &[JobStats], max: usize) -> (Vec<&JobStats>, Vec<&JobStats>) {
    let mut all: Vec<&JobStats> = jobs.iter().collect();
    if all.len() <= max {
        return (all, Vec::new());
    }
    let rank = |j: &&JobStats| {
        (
            std::cmp::Reverse(j.queued + j.in_service > 0),
            std::cmp::Reverse(j.last_active),
            j.job,
        )
    };
    if max > 0 {
        // Linear in the number of jobs: only the listed ones are sorted.
        all.select_nth_unstable_by_key(max - 1, rank);
    }
    let rest = all.split_off(max);
    all.sort_unstable_by_key(|j| j.job);
    (all, rest)
}

/// The per-job part of the exposition (`iosets_jobs_*` and `iosets_job_*`): series for at most
/// `max` jobs ([`listed_jobs`]) and, when there are more, their sums under `job_id="other"` for
/// the series that add up (counts, bytes, bandwidth, the queue wait's sum and count; not its
/// quantiles, nor priorities). A job enters and leaves the listed set as it becomes active or
/// idle, so `other`'s counters can go down between two scrapes (Prometheus reads that as a
/// reset): they say how much the unlisted jobs did in total, not a rate to follow.
fn render_jobs(out: &mut String, shared: &Shared, stats: &SchedulerStats, max: usize) {
    let (listed, rest) = listed_jobs(&stats.jobs, max);
    render_job_book(out, shared, stats, listed.len());
    let other = (!rest.is_empty()).then(|| sum_of(&rest));
    let rows: Vec<(String, &JobStats)> = listed
        .iter()
        .map(|j| (j.job.0.to_string(), *j))
        .chain(other.as_ref().map(|o| ("other".to_string(), o)))
        .collect();
    render_job_counts(out, &rows);
    render_job_waits(out, &listed, &rows);
    render_job_placement(out, &listed);
    render_job_names(out, shared, &listed);
}

/// `iosets_job_info{job_id, job_name} 1` for each listed job whose client told its name: the
/// Prometheus idiom for a label to join on (`* on(job_id) group_left(job_name)`), so that the
/// other series keep one identity whether the name is known or not.
fn render_job_names(out: &mut String, shared: &Shared, listed: &[&JobStats]) {
    header(
        out,
        "iosets_job_info",
        "gauge",
        "1 for each listed job whose client told its name (job_name: IOSETS_JOB_ID's value, \
         Slurm's job id, procname.uid); join on job_id.",
    );
    let names = shared.sched.names_of(listed.iter().map(|j| j.job));
    for (j, name) in listed.iter().zip(names) {
        if let Some(name) = name {
            let _ = writeln!(
                out,
                "iosets_job_info{{job_id=\"{}\",job_name=\"{}\"}} 1",
                j.job,
                label_value(&name)
            );
        }
    }
}

/// A label value escaped as the text format asks: backslash, double quote and newline.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// How many jobs the server remembers, lists, forgot and evicted, and the book's memory.
fn render_job_book(out: &mut String, shared: &Shared, stats: &SchedulerStats, listed: usize) {
    single(
        out,
        "iosets_jobs_known",
        "gauge",
        "Jobs the server remembers (statistics, work or a priority).",
        stats.jobs.len(),
    );
    single(
        out,
        "iosets_jobs_in_metrics",
        "gauge",
        "Jobs with their own per-job series (metrics_max_jobs at most, the most recently \
         active); the others are summed under job_id=\"other\".",
        listed,
    );
    single(
        out,
        "iosets_jobs_forgotten_total",
        "counter",
        "Jobs forgotten after being idle for the forget interval.",
        stats.forgotten_jobs,
    );
    single(
        out,
        "iosets_jobs_evicted_total",
        "counter",
        "Job records dropped to keep the job book within max_jobs.",
        stats.evicted_jobs,
    );
    single(
        out,
        "iosets_job_book_bytes",
        "gauge",
        "Bytes held by the job book's per-job records.",
        shared.sched.book_memory().0,
    );
}

/// The sums of the unlisted jobs, as one more row (`job_id="other"`).
fn sum_of(rest: &[&JobStats]) -> JobStats {
    let mut o = JobStats::idle(iosets_types::JobId(0));
    for j in rest {
        o.ops += j.ops;
        o.bytes_read += j.bytes_read;
        o.bytes_written += j.bytes_written;
        o.failed += j.failed;
        o.queued += j.queued;
        o.in_service += j.in_service;
        o.bandwidth.0 += j.bandwidth.0;
        o.bandwidth.1 += j.bandwidth.1;
        o.queue_wait.count += j.queue_wait.count;
        o.queue_wait.sum_ns = o.queue_wait.sum_ns.saturating_add(j.queue_wait.sum_ns);
        o.wait_causes.merge(&j.wait_causes);
    }
    o
}

/// Per job (and `other`): requests, bytes, failures, queued and in service.
fn render_job_counts(out: &mut String, rows: &[(String, &JobStats)]) {
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
        header(out, name, kind, help);
        for (job, j) in rows {
            for (label, value) in series {
                let _ = writeln!(out, "{name}{{job_id=\"{job}\"{label}}} {}", value(j));
            }
        }
    }
}

/// Per job: its wait split by cause, its bandwidth, and its queue wait (quantiles for listed
/// jobs, sum and count for every row).
fn render_job_waits(out: &mut String, listed: &[&JobStats], rows: &[(String, &JobStats)]) {
    header(
        out,
        "iosets_job_wait_seconds_total",
        "counter",
        "Queue wait of each job's completed requests split by cause (docs/why.md): rule (held \
         by a quota rule), device (behind its own requests), exclusivity (behind another job of \
         its set), share (behind other sets), policy (a thread free, yet not dispatched). The \
         causes sum exactly to the measured wait.",
    );
    for (job, j) in rows {
        for cause in iosets_runtime::WaitCause::ALL {
            let _ = writeln!(
                out,
                "iosets_job_wait_seconds_total{{job_id=\"{job}\",cause=\"{}\"}} {}",
                cause.as_str(),
                j.wait_causes.ns(cause) as f64 / 1e9
            );
        }
    }
    header(
        out,
        "iosets_job_bandwidth_bytes_per_second",
        "gauge",
        "Bandwidth per job (reads and writes) over the last 1 s and 10 s.",
    );
    for (job, j) in rows {
        let (one, ten) = j.bandwidth;
        for (window, v) in [("1s", one), ("10s", ten)] {
            let _ = writeln!(
                out,
                "iosets_job_bandwidth_bytes_per_second{{job_id=\"{job}\",window=\"{window}\"}} {v}"
            );
        }
    }
    header(
        out,
        "iosets_job_queue_wait_seconds",
        "summary",
        "Queue wait per job (quantiles within 1/16, for listed jobs only).",
    );
    for j in listed {
        let w = &j.queue_wait;
        for (q, v) in [("0.5", w.p50_ns), ("0.99", w.p99_ns)] {
            let _ = writeln!(
                out,
                "iosets_job_queue_wait_seconds{{job_id=\"{}\",quantile=\"{q}\"}} {}",
                j.job,
                v as f64 / 1e9
            );
        }
    }
    for (job, j) in rows {
        // The exact sum of the waits (what the wait causes split), not mean × count.
        let _ = writeln!(
            out,
            "iosets_job_queue_wait_seconds_sum{{job_id=\"{job}\"}} {}",
            j.queue_wait.sum_ns as f64 / 1e9
        );
        let _ = writeln!(
            out,
            "iosets_job_queue_wait_seconds_count{{job_id=\"{job}\"}} {}",
            j.queue_wait.count
        );
    }
}

/// Per listed job: its priority, its IO-SETS set and its detected period.
fn render_job_placement(out: &mut String, listed: &[&JobStats]) {
    header(
        out,
        "iosets_job_priority",
        "gauge",
        "Priority in force per listed job.",
    );
    for j in listed {
        if let Some(p) = j.priority {
            let _ = writeln!(
                out,
                "iosets_job_priority{{job_id=\"{}\",source=\"{}\"}} {}",
                j.job,
                p.source.as_str(),
                p.value
            );
        }
    }
    header(
        out,
        "iosets_job_set",
        "gauge",
        "The IO-SETS set of each listed job, as `iosets ctl jobs` shows it: where automatic \
         priorities placed it (round(log10 of its I/O period in seconds)), else the set whose \
         priority (10^-set) is the one in force; none otherwise.",
    );
    for j in listed {
        let set = j.set.or_else(|| {
            j.priority
                .and_then(|p| crate::control::set_of(p.value.get()))
        });
        if let Some(set) = set {
            let _ = writeln!(out, "iosets_job_set{{job_id=\"{}\"}} {set}", j.job);
        }
    }
    header(
        out,
        "iosets_job_period_seconds",
        "gauge",
        "The I/O period automatic priorities found per listed job (mean time between the \
         starts of its I/O phases).",
    );
    for j in listed {
        if let Some(p) = j.period {
            let _ = writeln!(
                out,
                "iosets_job_period_seconds{{job_id=\"{}\"}} {}",
                j.job,
                p.0 as f64 / 1e9
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iosets_types::{JobId, Nanos};

    fn job(id: u64, last_active_s: u64, queued: u64) -> JobStats {
        let mut j = JobStats::idle(JobId(id));
        j.last_active = Nanos::from_millis(last_active_s * 1_000);
        j.queued = queued;
        j.ops = 1;
        j
    }

    #[test]
    fn jobs_with_work_then_the_most_recent_are_listed() {
        let jobs: Vec<JobStats> = (0..50u64)
            .map(|i| job(i, (i * 37) % 50, u64::from(i == 3)))
            .collect();
        let (listed, rest) = listed_jobs(&jobs, 4);
        // Job 3 has work; then last activity 49, 48, 47 s: jobs 27, 4, 31 ((i * 37) % 50).
        let ids: Vec<u64> = listed.iter().map(|j| j.job.0).collect();
        assert_eq!(ids, vec![3, 4, 27, 31]);
        assert_eq!(rest.len(), 46);
        assert!(rest.iter().all(|j| !ids.contains(&j.job.0)));
        // Few enough: all listed, in id order.
        let (listed, rest) = listed_jobs(&jobs[..4], 4);
        assert_eq!(listed.len(), 4);
        assert!(rest.is_empty());
        // None asked for: all summed.
        let (listed, rest) = listed_jobs(&jobs, 0);
        assert!(listed.is_empty());
        assert_eq!(rest.len(), 50);
    }
}
