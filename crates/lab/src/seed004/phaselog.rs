//! Phase logs of periodic applications, and seed 004's metrics computed from them (its §4.3).
//!
//! A phase log is the CSV `iosets app periodic` writes: one row per rank per phase, with the
//! columns of [`HEADER`]:
//!
//! ```text
//! job,rank,iteration,kind,start_unix_s,end_unix_s,bytes
//! 7,0,0,compute,1718000000.000000,1718000018.000312,0
//! 7,0,0,io,1718000018.000312,1718000019.172004,134217728
//! ```
//!
//! `kind` is `compute` or `io`; times are UNIX epoch seconds; `bytes` is what that rank wrote in
//! that phase (0 for compute). An empty `end_unix_s` marks a phase that started and never ended
//! (the application failed inside it). Every rank of a job appends to the same file, so the header
//! line may be missing, repeated or not first: readers skip it wherever it is.
//!
//! The metrics follow seed 004 §4.3: [`merge_ranks`] makes one phase per job, iteration and kind
//! (the ranks meet at barriers at the start and end of each I/O phase, so the job's phase runs from
//! its first rank's start to its last rank's end); times are taken relative to the start of the
//! first application `t0`; phases outside the window `[T_begin, T_end]` are dropped; a compute
//! phase cut by an edge counts for its part inside; an I/O phase cut by an edge counts for the
//! bytes it would have moved inside at the bandwidth it had over its whole length. For job `j`,
//! `e_j^cpu` is its compute time inside the window and `e_j^io` its bytes inside over the
//! bandwidth `B` an application gets alone ([`unshared_bandwidths`] and [`median`] give seed 004's
//! `B`: the median bandwidth of the I/O phases that shared the file system with no other job).
//! With `T = T_end − T_begin`: stretch `= T / (e_j^cpu + e_j^io)`, I/O slowdown
//! `= (T − e_j^cpu) / e_j^io`, both as geometric means over the jobs (and the stretch's maximum),
//! and utilization `= Σ_j e_j^cpu / (N · T)` with `N` the number of jobs measured.
//!
//! A job that cannot be measured is listed with the reason in [`Seed004Metrics::excluded`] and the
//! others are still measured: one with an I/O phase that started before `T_end` and never ended
//! (its bandwidth is unknown, seed 004's case of a phase cut at `T_end`), one whose log ends before
//! `T_end` (it crashed), and one that did no work inside the window.
//!
//! What this module is not: it does not run or schedule anything, and it does not decide which
//! jobs exist — a job whose log holds no row at all is simply absent from the result.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use iosets_sim::fluid::metrics::{JobWork, Metrics};
use iosets_sim::fluid::model::Window;

/// Why a phase log could not be read, or seed 004's metrics not computed from it.
#[derive(Debug, thiserror::Error)]
pub enum PhaseLogError {
    /// Reading the log failed.
    #[error("{}: {error}", path.as_ref().map_or_else(|| "I/O".to_string(), |p| p.display().to_string()))]
    Io {
        /// The file, when known.
        path: Option<PathBuf>,
        /// The underlying error (shown in this error's message, so not chained as its source).
        error: std::io::Error,
    },
    /// A row of the log could not be used.
    #[error("phase log {}line {line}: {problem}", path.as_ref().map_or_else(String::new, |p| format!("{}, ", p.display())))]
    Line {
        /// The log file, when read from one.
        path: Option<PathBuf>,
        /// 1-based line number in the log.
        line: usize,
        /// What is wrong on that line.
        problem: String,
    },
    /// An input of [`seed004_metrics`] is out of range.
    #[error("seed 004 metrics: {field} = {value}: {expected}")]
    InvalidMetricsInput {
        /// The input (`window`, `bandwidth`, `t0`).
        field: &'static str,
        /// The value given, as text.
        value: String,
        /// What would have been accepted.
        expected: &'static str,
    },
    /// Every job was excluded from seed 004's metrics, so there is nothing to report.
    #[error(
        "seed 004 metrics: no job could be measured{}",
        describe_excluded(excluded)
    )]
    NoJobMeasured {
        /// Each job left out, with the reason.
        excluded: Vec<(u64, String)>,
    },
}

fn describe_excluded(excluded: &[(u64, String)]) -> String {
    if excluded.is_empty() {
        return " (no job in the log)".to_string();
    }
    let jobs: Vec<String> = excluded
        .iter()
        .map(|(job, why)| format!("job {job}: {why}"))
        .collect();
    format!(" ({})", jobs.join("; "))
}

/// The header line of a phase log (without its newline).
pub const HEADER: &str = "job,rank,iteration,kind,start_unix_s,end_unix_s,bytes";

/// What an application does during a phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PhaseKind {
    /// Computing (a sleep in the periodic application): no I/O.
    Compute,
    /// Writing its data.
    Io,
}

impl PhaseKind {
    /// The name used in the log's `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            PhaseKind::Compute => "compute",
            PhaseKind::Io => "io",
        }
    }
}

impl fmt::Display for PhaseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of a phase log: one phase of one rank.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PhaseRow {
    /// The job.
    pub job: u64,
    /// The rank (process of the job) that ran the phase.
    pub rank: u32,
    /// The iteration the phase belongs to (0-based; each iteration is a compute phase then an I/O
    /// phase).
    pub iteration: u32,
    /// Compute or I/O.
    pub kind: PhaseKind,
    /// Start, UNIX epoch seconds.
    pub start: f64,
    /// End, UNIX epoch seconds; `f64::INFINITY` when the phase never ended.
    pub end: f64,
    /// Bytes this rank wrote during the phase (0 for compute).
    pub bytes: u64,
}

impl PhaseRow {
    /// The row as one line of a phase log, newline included: times with 6 decimals (microseconds),
    /// an empty `end_unix_s` when the phase never ended.
    pub fn to_line(&self) -> String {
        let end = if self.end.is_finite() {
            format!("{:.6}", self.end)
        } else {
            String::new()
        };
        format!(
            "{},{},{},{},{:.6},{end},{}\n",
            self.job, self.rank, self.iteration, self.kind, self.start, self.bytes
        )
    }
}

/// Parses a phase log (see the [module docs](self)). Empty lines and header lines are skipped
/// wherever they are; any other line must be a complete, consistent row, else the error names its
/// line number. Two rows for the same job, rank, iteration and kind are an error too (two runs
/// appended to one log). A log with no row gives an empty list.
pub fn parse_phase_log(text: &str) -> Result<Vec<PhaseRow>, PhaseLogError> {
    parse(text, None)
}

/// Reads and parses the phase log at `path` (see [`parse_phase_log`]).
pub fn read_phase_log(path: &Path) -> Result<Vec<PhaseRow>, PhaseLogError> {
    let text = std::fs::read_to_string(path).map_err(|error| PhaseLogError::Io {
        path: Some(path.to_path_buf()),
        error,
    })?;
    parse(&text, Some(path))
}

fn parse(text: &str, path: Option<&Path>) -> Result<Vec<PhaseRow>, PhaseLogError> {
    let bad = |line: usize, problem: String| PhaseLogError::Line {
        path: path.map(Path::to_path_buf),
        line,
        problem,
    };
    let mut rows = Vec::new();
    let mut seen: HashMap<(u64, u32, u32, PhaseKind), usize> = HashMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed == HEADER {
            continue;
        }
        let row = parse_row(trimmed).map_err(|problem| bad(line, problem))?;
        if let Some(first) = seen.insert((row.job, row.rank, row.iteration, row.kind), line) {
            return Err(bad(
                line,
                format!(
                    "second row for job {} rank {} iteration {} {} (the first is on line {first})",
                    row.job, row.rank, row.iteration, row.kind
                ),
            ));
        }
        rows.push(row);
    }
    Ok(rows)
}

fn parse_row(line: &str) -> Result<PhaseRow, String> {
    let fields: Vec<&str> = line.split(',').map(str::trim).collect();
    if fields.first() == Some(&"job") {
        return Err(format!("unexpected header {line:?}: expected {HEADER:?}"));
    }
    if fields.len() != 7 {
        return Err(format!(
            "expected 7 fields ({HEADER}), found {}",
            fields.len()
        ));
    }
    fn int<T: std::str::FromStr>(column: &str, value: &str) -> Result<T, String> {
        value.parse().map_err(|_| {
            format!("column {column}: bad number {value:?}: expected an unsigned integer")
        })
    }
    fn time(column: &str, value: &str) -> Result<f64, String> {
        match value.parse::<f64>() {
            Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
            _ => Err(format!(
                "column {column}: bad time {value:?}: expected seconds, finite and >= 0"
            )),
        }
    }
    let kind = match fields[3] {
        "compute" => PhaseKind::Compute,
        "io" => PhaseKind::Io,
        other => return Err(format!("column kind: {other:?}: expected compute or io")),
    };
    let start = time("start_unix_s", fields[4])?;
    let end = if fields[5].is_empty() {
        f64::INFINITY
    } else {
        time("end_unix_s", fields[5])?
    };
    if end < start {
        return Err(format!(
            "end_unix_s {} is before start_unix_s {}",
            fields[5], fields[4]
        ));
    }
    let bytes: u64 = int("bytes", fields[6])?;
    if kind == PhaseKind::Compute && bytes != 0 {
        return Err(format!(
            "a compute phase writes no bytes, but this row says {bytes}"
        ));
    }
    Ok(PhaseRow {
        job: int("job", fields[0])?,
        rank: int("rank", fields[1])?,
        iteration: int("iteration", fields[2])?,
        kind,
        start,
        end,
        bytes,
    })
}

/// One phase of a whole job (its ranks merged).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Phase {
    /// Compute or I/O.
    pub kind: PhaseKind,
    /// When its first rank started it, UNIX epoch seconds.
    pub start: f64,
    /// When its last rank ended it, UNIX epoch seconds; `f64::INFINITY` if some rank never did.
    pub end: f64,
    /// Bytes its ranks wrote in it.
    pub bytes: u64,
}

/// Every phase of one job.
#[derive(Clone, Debug, PartialEq)]
pub struct JobPhases {
    /// The job.
    pub job: u64,
    /// Its phases, sorted by start.
    pub phases: Vec<Phase>,
}

/// Merges the ranks of each job: one phase per (job, iteration, kind): start = min, end = max,
/// bytes = sum. A phase that some rank of the job (one seen anywhere in the job's rows) has no row
/// for never ended: its end is `f64::INFINITY`. Jobs come sorted by id.
pub fn merge_ranks(rows: &[PhaseRow]) -> Vec<JobPhases> {
    struct Acc {
        start: f64,
        end: f64,
        bytes: u64,
        ranks: BTreeSet<u32>,
    }
    type JobAcc = (BTreeSet<u32>, BTreeMap<(u32, PhaseKind), Acc>);
    let mut jobs: BTreeMap<u64, JobAcc> = BTreeMap::new();
    for row in rows {
        let (ranks, phases) = jobs.entry(row.job).or_default();
        ranks.insert(row.rank);
        let acc = phases
            .entry((row.iteration, row.kind))
            .or_insert_with(|| Acc {
                start: row.start,
                end: row.end,
                bytes: 0,
                ranks: BTreeSet::new(),
            });
        acc.start = acc.start.min(row.start);
        acc.end = acc.end.max(row.end);
        acc.bytes = acc.bytes.saturating_add(row.bytes);
        acc.ranks.insert(row.rank);
    }
    jobs.into_iter()
        .map(|(job, (ranks, accs))| {
            let mut phases: Vec<Phase> = accs
                .into_iter()
                .map(|((_, kind), acc)| Phase {
                    kind,
                    start: acc.start,
                    end: if acc.ranks.len() < ranks.len() {
                        f64::INFINITY
                    } else {
                        acc.end
                    },
                    bytes: acc.bytes,
                })
                .collect();
            phases.sort_by(|a, b| a.start.total_cmp(&b.start).then(a.end.total_cmp(&b.end)));
            JobPhases { job, phases }
        })
        .collect()
}

/// The earliest phase start of all jobs (seed 004's `t0`, "the beginning of the first application
/// to start"), UNIX epoch seconds; `None` without any phase.
pub fn first_start(jobs: &[JobPhases]) -> Option<f64> {
    jobs.iter()
        .flat_map(|j| j.phases.iter().map(|p| p.start))
        .min_by(f64::total_cmp)
}

/// Bandwidth (bytes/s) of every I/O phase that overlaps no other job's I/O phase (seed 004's
/// "did NOT share the file system"), in the order of `jobs` and of each job's phases. Each entry
/// of `jobs` counts as one job. Two phases overlap when they share a moment of positive length (one
/// ending exactly when the other starts do not); a phase that never ended overlaps everything after
/// its start and has no bandwidth itself. Phases of zero length or zero bytes have no bandwidth and
/// are left out.
pub fn unshared_bandwidths(jobs: &[JobPhases]) -> Vec<f64> {
    unshared_bandwidths_of_jobs(jobs)
        .into_iter()
        .map(|(_, b)| b)
        .collect()
}

/// [`unshared_bandwidths`], each with the index in `jobs` of the job whose phase it is.
pub fn unshared_bandwidths_of_jobs(jobs: &[JobPhases]) -> Vec<(usize, f64)> {
    struct Io {
        owner: usize,
        start: f64,
        end: f64,
    }
    let mut ios: Vec<Io> = Vec::new();
    let mut index: Vec<(usize, usize)> = Vec::new();
    for (owner, job) in jobs.iter().enumerate() {
        for (n, p) in job.phases.iter().enumerate() {
            if p.kind == PhaseKind::Io {
                ios.push(Io {
                    owner,
                    start: p.start,
                    end: p.end,
                });
                index.push((owner, n));
            }
        }
    }
    let mut order: Vec<usize> = (0..ios.len()).collect();
    order.sort_by(|&a, &b| ios[a].start.total_cmp(&ios[b].start));
    let mut shared = vec![false; ios.len()];
    // The latest end among the phases already visited (those starting no later than the current
    // one), and the latest among those of any other job than the first's: enough to know whether
    // some other job's earlier phase is still running when the current one starts.
    let mut latest: Option<(f64, usize)> = None;
    let mut latest_other: Option<(f64, usize)> = None;
    for (pos, &i) in order.iter().enumerate() {
        let me = &ios[i];
        let earlier = match latest {
            Some((end, owner)) if owner != me.owner => Some(end),
            _ => latest_other.map(|(end, _)| end),
        };
        let mut overlaps = earlier.is_some_and(|end| end > me.start && me.start < me.end);
        for &j in &order[pos + 1..] {
            if overlaps || ios[j].start >= me.end {
                break;
            }
            overlaps = ios[j].owner != me.owner && ios[j].end > me.start;
        }
        shared[i] = overlaps;
        match latest {
            None => latest = Some((me.end, me.owner)),
            Some((end, owner)) if owner == me.owner => latest = Some((end.max(me.end), owner)),
            Some((end, owner)) if me.end > end => {
                latest_other = Some((end, owner));
                latest = Some((me.end, me.owner));
            }
            Some(_) => {
                if latest_other.is_none_or(|(end, _)| me.end > end) {
                    latest_other = Some((me.end, me.owner));
                }
            }
        }
    }
    index
        .iter()
        .zip(shared)
        .filter(|(_, shared)| !shared)
        .filter_map(|(&(owner, n), _)| {
            let p = &jobs[owner].phases[n];
            let len = p.end - p.start;
            (p.end.is_finite() && len > 0.0 && p.bytes > 0).then(|| (owner, p.bytes as f64 / len))
        })
        .collect()
}

/// The median of `values` (the mean of the two middle ones for an even count); `None` when empty.
/// Values are ordered by [`f64::total_cmp`].
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// One job's share of seed 004's metrics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JobMetrics {
    /// The job.
    pub job: u64,
    /// `e^cpu`: its compute seconds inside the window.
    pub e_cpu: f64,
    /// `e^io`: the bytes it wrote inside the window over `B`, in seconds.
    pub e_io: f64,
    /// `(T_end − T_begin) / (e^cpu + e^io)`.
    pub stretch: f64,
    /// `(T_end − T_begin − e^cpu) / e^io`; NaN when it did no I/O inside the window (and then left
    /// out of the geometric mean).
    pub io_slowdown: f64,
}

/// Seed 004's four metrics over one window, with each measured job's values and the jobs that
/// could not be measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Seed004Metrics {
    /// The largest stretch of the measured jobs.
    pub max_stretch: f64,
    /// The geometric mean of their stretches.
    pub geomean_stretch: f64,
    /// The geometric mean of their I/O slowdowns (NaN if none did I/O inside the window).
    pub io_slowdown: f64,
    /// `Σ e^cpu / (N · (T_end − T_begin))`, `N` the number of jobs measured.
    pub utilization: f64,
    /// Each measured job, in the order of the input.
    pub jobs: Vec<JobMetrics>,
    /// Each job left out, with the reason, in the order of the input.
    pub excluded: Vec<(u64, String)>,
}

/// Seed 004 §4.3: times relative to `t0` (the start of the first application, UNIX epoch
/// seconds); window [begin, end] in seconds after t0; B in bytes/s. See the
/// [module docs](self) for the rules. Errors when the window is empty or not finite, `t0` is not
/// finite, `bandwidth` is not a finite number > 0, or no job could be measured.
pub fn seed004_metrics(
    jobs: &[JobPhases],
    t0: f64,
    begin: f64,
    end: f64,
    bandwidth: f64,
) -> Result<Seed004Metrics, PhaseLogError> {
    if !(begin.is_finite() && end.is_finite() && begin < end) {
        return Err(PhaseLogError::InvalidMetricsInput {
            field: "window",
            value: format!("[{begin}, {end}] s"),
            expected: "finite bounds with begin < end",
        });
    }
    if !t0.is_finite() {
        return Err(PhaseLogError::InvalidMetricsInput {
            field: "t0",
            value: t0.to_string(),
            expected: "a finite UNIX time in seconds",
        });
    }
    if !(bandwidth.is_finite() && bandwidth > 0.0) {
        return Err(PhaseLogError::InvalidMetricsInput {
            field: "bandwidth",
            value: bandwidth.to_string(),
            expected: "a finite number of bytes/s > 0",
        });
    }
    let window = end - begin;
    let mut measured = Vec::new();
    let mut excluded = Vec::new();
    for job in jobs {
        match job_work(job, t0, begin, end) {
            Ok((e_cpu, bytes)) => {
                let w = JobWork {
                    e_cpu,
                    e_io: bytes / bandwidth,
                };
                measured.push(JobMetrics {
                    job: job.job,
                    e_cpu,
                    e_io: w.e_io,
                    stretch: w.stretch(window).unwrap_or(f64::NAN),
                    io_slowdown: w.io_slowdown(window).unwrap_or(f64::NAN),
                });
            }
            Err(reason) => excluded.push((job.job, reason)),
        }
    }
    if measured.is_empty() {
        return Err(PhaseLogError::NoJobMeasured { excluded });
    }
    // The paper's four metrics, computed as the fluid simulator computes them (one
    // implementation).
    let work: Vec<JobWork> = measured
        .iter()
        .map(|m| JobWork {
            e_cpu: m.e_cpu,
            e_io: m.e_io,
        })
        .collect();
    let m = Metrics::compute(Window { begin, end }, &work);
    Ok(Seed004Metrics {
        max_stretch: m.max_stretch,
        geomean_stretch: m.geomean_stretch,
        io_slowdown: m.io_slowdown,
        utilization: m.utilization,
        jobs: measured,
        excluded,
    })
}

/// `e^cpu` (seconds) and the bytes written inside `[begin, end]` (seconds after `t0`) by one job,
/// or why it cannot be measured.
fn job_work(job: &JobPhases, t0: f64, begin: f64, end: f64) -> Result<(f64, f64), String> {
    let rel = |t: f64| t - t0;
    if let Some(p) = job
        .phases
        .iter()
        .find(|p| p.kind == PhaseKind::Io && !p.end.is_finite() && rel(p.start) < end)
    {
        return Err(format!(
            "its I/O phase starting at {:.3} s never ended (job stopped): its bandwidth is unknown",
            rel(p.start)
        ));
    }
    let log_end = job
        .phases
        .iter()
        .map(|p| p.end)
        .filter(|e| e.is_finite())
        .max_by(f64::total_cmp)
        .map(rel);
    match log_end {
        None => return Err("its log holds no finished phase".to_string()),
        Some(last) if last < end => {
            return Err(format!("log ends at {last:.3} s, before the window's end"))
        }
        Some(_) => {}
    }
    if let Some(p) = job
        .phases
        .iter()
        .find(|p| !p.end.is_finite() && rel(p.start) < end)
    {
        return Err(format!(
            "its {} phase starting at {:.3} s never ended (job stopped)",
            p.kind,
            rel(p.start)
        ));
    }
    let (mut e_cpu, mut bytes) = (0.0, 0.0);
    for p in &job.phases {
        let (start, stop) = (rel(p.start), rel(p.end));
        if stop < begin || start > end {
            continue;
        }
        let inside = stop.min(end) - start.max(begin);
        match p.kind {
            PhaseKind::Compute => e_cpu += inside.max(0.0),
            PhaseKind::Io if start >= begin && stop <= end => bytes += p.bytes as f64,
            PhaseKind::Io if inside > 0.0 => bytes += p.bytes as f64 * inside / (stop - start),
            PhaseKind::Io => {}
        }
    }
    if e_cpu + bytes <= 0.0 {
        return Err("it did no work inside the window".to_string());
    }
    Ok((e_cpu, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9
    }

    /// An I/O phase from `start` to `end` moving `bytes`.
    fn io(start: f64, end: f64, bytes: u64) -> Phase {
        Phase {
            kind: PhaseKind::Io,
            start,
            end,
            bytes,
        }
    }

    /// A compute phase from `start` to `end`.
    fn compute(start: f64, end: f64) -> Phase {
        Phase {
            kind: PhaseKind::Compute,
            ..io(start, end, 0)
        }
    }

    /// Three jobs, times relative to t0 = 1000 s (absolute = 1000 + relative):
    ///
    /// - job 1, two ranks: compute [0, 8], io [8, 12] (rank 0 [8, 11.5] 200 B, rank 1 [8.2, 12]
    ///   200 B), compute [12, 30], io [30, 34] 400 B, compute [34, 52], io [52, 55] 300 B;
    /// - job 2, one rank: compute [1, 20], io [20, 26] 600 B, compute [26, 45], io [45, 49]
    ///   200 B, compute [49, 60] (cut by --stop-at);
    /// - job 3, one rank, crashed: compute [0, 15], io [15, 18] 300 B, compute [18, 36], then
    ///   nothing.
    const LOG: &str = "\
job,rank,iteration,kind,start_unix_s,end_unix_s,bytes
1,0,0,compute,1000.000000,1008.000000,0
1,1,0,compute,1000.000000,1008.000000,0
2,0,0,compute,1001.000000,1020.000000,0
3,0,0,compute,1000.000000,1015.000000,0
1,0,0,io,1008.000000,1011.500000,200
1,1,0,io,1008.200000,1012.000000,200
3,0,0,io,1015.000000,1018.000000,300
1,0,1,compute,1012.000000,1030.000000,0
job,rank,iteration,kind,start_unix_s,end_unix_s,bytes
1,1,1,compute,1012.000000,1030.000000,0
2,0,0,io,1020.000000,1026.000000,600
1,0,1,io,1030.000000,1033.000000,250
1,1,1,io,1030.500000,1034.000000,150
2,0,1,compute,1026.000000,1045.000000,0
1,0,2,compute,1034.000000,1052.000000,0
1,1,2,compute,1034.000000,1052.000000,0
3,0,1,compute,1018.000000,1036.000000,0
2,0,1,io,1045.000000,1049.000000,200
2,0,2,compute,1049.000000,1060.000000,0
1,0,2,io,1052.000000,1055.000000,100
1,1,2,io,1052.000000,1054.000000,200
";

    #[test]
    fn hand_computed_metrics_of_three_jobs() {
        let jobs = merge_ranks(&parse_phase_log(LOG).unwrap());
        assert_eq!(jobs.len(), 3);
        // Window [10, 50] s after t0, T = 40 s, B = 200 B/s.
        //
        // Job 1: compute [12, 30] = 18 s and [34, 50] (cut) = 16 s: e_cpu = 34 s. I/O: [8, 12]
        // is half inside, 400 B * 2/4 = 200 B; [30, 34] whole, 400 B; [52, 55] outside. 600 B /
        // 200 B/s: e_io = 3 s. Stretch 40/37, I/O slowdown (40 - 34)/3 = 2.
        //
        // Job 2: compute [10, 20] (cut) = 10 s, [26, 45] = 19 s, [49, 50] (cut) = 1 s: e_cpu =
        // 30 s. I/O: 600 B + 200 B = 800 B: e_io = 4 s. Stretch 40/34, I/O slowdown (40 - 30)/4
        // = 2.5.
        //
        // Job 3: its log ends at 36 s < 50 s: excluded.
        //
        // Max stretch 40/34; geomean stretch sqrt(40/37 * 40/34); I/O slowdown sqrt(2 * 2.5) =
        // sqrt(5); utilization (34 + 30) / (2 * 40) = 0.8.
        let m = seed004_metrics(&jobs, 1000.0, 10.0, 50.0, 200.0).unwrap();
        assert_eq!(m.jobs.len(), 2);
        let (j1, j2) = (m.jobs[0], m.jobs[1]);
        assert_eq!((j1.job, j2.job), (1, 2));
        assert!(close(j1.e_cpu, 34.0) && close(j1.e_io, 3.0), "{j1:?}");
        assert!(close(j1.stretch, 40.0 / 37.0) && close(j1.io_slowdown, 2.0));
        assert!(close(j2.e_cpu, 30.0) && close(j2.e_io, 4.0), "{j2:?}");
        assert!(close(j2.stretch, 40.0 / 34.0) && close(j2.io_slowdown, 2.5));
        assert!(close(m.max_stretch, 40.0 / 34.0));
        assert!(close(
            m.geomean_stretch,
            (40.0 / 37.0 * 40.0 / 34.0_f64).sqrt()
        ));
        assert!(close(m.io_slowdown, 5.0_f64.sqrt()));
        assert!(close(m.utilization, 0.8));
        assert_eq!(
            m.excluded,
            vec![(
                3,
                "log ends at 36.000 s, before the window's end".to_string()
            )]
        );
        // The first application started at 1000 s.
        assert_eq!(first_start(&jobs), Some(1000.0));
    }

    #[test]
    fn ranks_merge_into_one_phase_per_iteration_and_kind() {
        let jobs = merge_ranks(&parse_phase_log(LOG).unwrap());
        let j1 = &jobs[0];
        assert_eq!(j1.job, 1);
        let got: Vec<(PhaseKind, f64, f64, u64)> = j1
            .phases
            .iter()
            .map(|p| (p.kind, p.start, p.end, p.bytes))
            .collect();
        use PhaseKind::{Compute, Io};
        assert_eq!(
            got,
            vec![
                (Compute, 1000.0, 1008.0, 0),
                (Io, 1008.0, 1012.0, 400),
                (Compute, 1012.0, 1030.0, 0),
                (Io, 1030.0, 1034.0, 400),
                (Compute, 1034.0, 1052.0, 0),
                (Io, 1052.0, 1055.0, 300),
            ]
        );
        // Jobs sorted by id, single-rank jobs unchanged.
        assert_eq!(jobs.iter().map(|j| j.job).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(jobs[1].phases.len(), 5);
        assert_eq!(jobs[2].phases.len(), 3);
    }

    #[test]
    fn a_phase_missing_a_rank_never_ended() {
        let rows =
            parse_phase_log("5,0,0,compute,10,20,0\n5,1,0,compute,10,20,0\n5,0,0,io,20,22,100\n")
                .unwrap();
        let jobs = merge_ranks(&rows);
        assert_eq!(jobs[0].phases[1].kind, PhaseKind::Io);
        assert_eq!(jobs[0].phases[1].end, f64::INFINITY);
        assert_eq!(jobs[0].phases[1].bytes, 100);
    }

    #[test]
    fn an_io_phase_cut_by_the_window_counts_its_bytes_at_its_whole_bandwidth() {
        // One job: compute [0, 10], I/O [10, 20] moving 1000 B (100 B/s), compute [20, 40].
        // B = 50 B/s.
        let jobs = vec![JobPhases {
            job: 9,
            phases: vec![
                compute(0.0, 10.0),
                io(10.0, 20.0, 1000),
                compute(20.0, 40.0),
            ],
        }];
        // Cut at T_end: window [5, 15]: compute 5 s; I/O [10, 15] = half, 500 B, e_io = 10 s.
        let m = seed004_metrics(&jobs, 0.0, 5.0, 15.0, 50.0).unwrap();
        assert!(
            close(m.jobs[0].e_cpu, 5.0) && close(m.jobs[0].e_io, 10.0),
            "{m:?}"
        );
        // Stretch 10/15; I/O slowdown (10 - 5)/10 = 0.5; utilization 5/10.
        assert!(close(m.max_stretch, 10.0 / 15.0) && close(m.io_slowdown, 0.5));
        assert!(close(m.utilization, 0.5));
        // Cut at T_begin: window [16, 30]: I/O [16, 20] = 4/10 of 1000 B = 400 B, e_io = 8 s;
        // compute [20, 30] = 10 s.
        let m = seed004_metrics(&jobs, 0.0, 16.0, 30.0, 50.0).unwrap();
        assert!(
            close(m.jobs[0].e_cpu, 10.0) && close(m.jobs[0].e_io, 8.0),
            "{m:?}"
        );
        // Cut at both: window [12, 14]: 2/10 of 1000 B = 200 B, e_io = 4 s, no compute.
        let m = seed004_metrics(&jobs, 0.0, 12.0, 14.0, 50.0).unwrap();
        assert!(
            close(m.jobs[0].e_cpu, 0.0) && close(m.jobs[0].e_io, 4.0),
            "{m:?}"
        );
        assert!(close(m.jobs[0].io_slowdown, 0.5) && close(m.utilization, 0.0));
        // Times relative to t0: the same job shifted by 1000 s gives the same numbers.
        let shifted: Vec<JobPhases> = jobs
            .iter()
            .map(|j| JobPhases {
                job: j.job,
                phases: j
                    .phases
                    .iter()
                    .map(|p| Phase {
                        start: p.start + 1000.0,
                        end: p.end + 1000.0,
                        ..*p
                    })
                    .collect(),
            })
            .collect();
        let m = seed004_metrics(&shifted, 1000.0, 12.0, 14.0, 50.0).unwrap();
        assert!(close(m.jobs[0].e_io, 4.0), "{m:?}");
    }

    #[test]
    fn an_io_phase_that_never_ended_excludes_its_job_and_not_the_others() {
        let rows = parse_phase_log(
            "1,0,0,compute,0,10,0\n1,0,0,io,10,,300\n\
             2,0,0,compute,0,10,0\n2,0,0,io,10,12,200\n2,0,1,compute,12,40,0\n",
        )
        .unwrap();
        assert_eq!(rows[1].end, f64::INFINITY);
        let m = seed004_metrics(&merge_ranks(&rows), 0.0, 5.0, 30.0, 100.0).unwrap();
        assert_eq!(m.jobs.len(), 1);
        assert_eq!(m.jobs[0].job, 2);
        assert_eq!(m.excluded.len(), 1);
        assert_eq!(m.excluded[0].0, 1);
        assert!(
            m.excluded[0].1.contains("10.000 s never ended"),
            "{:?}",
            m.excluded
        );
        // Job 2 alone: compute [5, 10] + [12, 30] = 23 s, 200 B / 100 B/s = 2 s: stretch 25/25,
        // utilization 23/25.
        assert!(close(m.max_stretch, 1.0) && close(m.utilization, 23.0 / 25.0));
        // The unfinished phase starting after T_end does not matter.
        let m = seed004_metrics(&merge_ranks(&rows), 0.0, 0.0, 9.0, 100.0).unwrap();
        assert_eq!(m.jobs.len(), 2, "{m:?}");
    }

    #[test]
    fn a_crashed_job_is_excluded_and_the_others_are_computed() {
        let jobs = merge_ranks(&parse_phase_log(LOG).unwrap());
        // With a window ending at 35 s, job 3's log (ending at 36 s) covers it: three jobs.
        let m = seed004_metrics(&jobs, 1000.0, 10.0, 35.0, 200.0).unwrap();
        assert_eq!(m.jobs.len(), 3);
        assert!(m.excluded.is_empty());
        // Job 3 in [10, 35]: compute [10, 15] + [18, 35] = 22 s, I/O 300 B = 1.5 s.
        assert!(close(m.jobs[2].e_cpu, 22.0) && close(m.jobs[2].e_io, 1.5));
        // Ending at 37 s, it is excluded and the two others still measured.
        let m = seed004_metrics(&jobs, 1000.0, 10.0, 37.0, 200.0).unwrap();
        assert_eq!(m.jobs.iter().map(|j| j.job).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(m.excluded[0].0, 3);
        // Only crashed jobs: an error listing them.
        let err = seed004_metrics(&jobs[2..], 1000.0, 10.0, 50.0, 200.0).unwrap_err();
        assert!(matches!(err, PhaseLogError::NoJobMeasured { .. }));
        assert!(
            err.to_string().contains("job 3: log ends at 36.000 s"),
            "{err}"
        );
    }

    #[test]
    fn unshared_bandwidths_leave_out_phases_overlapping_another_jobs() {
        let jobs = vec![
            // A: [0, 10] overlaps B's [5, 8]; [20, 30] alone (500 B: 50 B/s); [60, 70] overlaps
            // C's unfinished phase; its compute phase overlaps everything but does not count.
            JobPhases {
                job: 1,
                phases: vec![
                    io(0.0, 10.0, 1000),
                    io(20.0, 30.0, 500),
                    compute(30.0, 60.0),
                    io(60.0, 70.0, 100),
                ],
            },
            // B: [5, 8] shared; [30, 35] only touches A's [20, 30] (200 B/s); [36, 37] and
            // [36.5, 38] overlap each other but are both B's: alone (100 B/s, 150 B/s).
            JobPhases {
                job: 2,
                phases: vec![
                    io(5.0, 8.0, 10),
                    io(30.0, 35.0, 1000),
                    io(36.0, 37.0, 100),
                    io(36.5, 38.0, 225),
                ],
            },
            // C: never ended, no bandwidth of its own; a zero-length phase has none either.
            JobPhases {
                job: 3,
                phases: vec![io(40.0, 40.0, 10), io(50.0, f64::INFINITY, 10)],
            },
        ];
        assert_eq!(unshared_bandwidths(&jobs), vec![50.0, 200.0, 100.0, 150.0]);
        assert_eq!(median(&unshared_bandwidths(&jobs)), Some(125.0));
        // An earlier long phase of another job shares with a later short one.
        let long = vec![
            JobPhases {
                job: 1,
                phases: vec![io(0.0, 100.0, 100)],
            },
            JobPhases {
                job: 2,
                phases: vec![io(1.0, 2.0, 10), io(3.0, 4.0, 10)],
            },
            JobPhases {
                job: 3,
                phases: vec![io(200.0, 201.0, 7)],
            },
        ];
        assert_eq!(unshared_bandwidths(&long), vec![7.0]);
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn corrupt_rows_name_their_line() {
        let cases: [(&str, usize, &str); 9] = [
            (
                "1,0,0,compute,0,1,0\n1,0,0,io,1,2\n",
                2,
                "expected 7 fields",
            ),
            ("1,0,0,sleep,0,1,0\n", 1, "column kind"),
            ("\n1,0,0,io,5,4,10\n", 2, "before start_unix_s"),
            ("1,0,0,io,NaN,4,10\n", 1, "column start_unix_s"),
            ("1,0,0,io,1,inf,10\n", 1, "column end_unix_s"),
            ("1,0,0,compute,0,1,5\n", 1, "compute phase writes no bytes"),
            ("x,0,0,io,0,1,5\n", 1, "column job"),
            ("1,0,0,io,0,1,5\n1,0,0,io,2,3,5\n", 2, "first is on line 1"),
            ("job,rank,kind\n", 1, "unexpected header"),
        ];
        for (text, line, needle) in cases {
            let err = parse_phase_log(text).unwrap_err();
            let PhaseLogError::Line { line: got, .. } = &err else {
                panic!("{text:?}: {err}");
            };
            assert_eq!(*got, line, "{text:?}: {err}");
            assert!(err.to_string().contains(needle), "{text:?}: {err}");
            assert!(err.to_string().contains(&format!("line {line}:")), "{err}");
        }
    }

    #[test]
    fn headers_anywhere_or_missing_and_crlf_are_accepted() {
        let text = "7,0,0,compute,0.5,1.25,0\r\njob,rank,iteration,kind,start_unix_s,end_unix_s,bytes\r\n\
                    job,rank,iteration,kind,start_unix_s,end_unix_s,bytes\n7,0,0,io,1.25,2,1048576\n\n";
        let rows = parse_phase_log(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].bytes, 1 << 20);
        assert!(parse_phase_log("").unwrap().is_empty());
    }

    #[test]
    fn rows_round_trip_through_their_line() {
        let rows = [
            PhaseRow {
                job: 42,
                rank: 3,
                iteration: 7,
                kind: PhaseKind::Io,
                start: 1_718_000_018.000312,
                end: 1_718_000_019.5,
                bytes: 16 << 20,
            },
            PhaseRow {
                job: 42,
                rank: 3,
                iteration: 8,
                kind: PhaseKind::Compute,
                start: 1_718_000_019.5,
                end: f64::INFINITY,
                bytes: 0,
            },
        ];
        let text: String = rows.iter().map(PhaseRow::to_line).collect();
        assert_eq!(
            text,
            "42,3,7,io,1718000018.000312,1718000019.500000,16777216\n\
             42,3,8,compute,1718000019.500000,,0\n"
        );
        let back = parse_phase_log(&text).unwrap();
        assert_eq!(back.len(), 2);
        assert!((back[0].start - rows[0].start).abs() < 1e-6);
        assert_eq!(back[1].end, f64::INFINITY);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let jobs = merge_ranks(&parse_phase_log(LOG).unwrap());
        for (begin, end) in [
            (10.0, 10.0),
            (20.0, 10.0),
            (f64::NAN, 10.0),
            (0.0, f64::INFINITY),
        ] {
            let err = seed004_metrics(&jobs, 1000.0, begin, end, 1.0).unwrap_err();
            assert!(err.to_string().contains("window"), "{err}");
        }
        for b in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = seed004_metrics(&jobs, 1000.0, 10.0, 50.0, b).unwrap_err();
            assert!(err.to_string().contains("bandwidth"), "{err}");
        }
        let err = seed004_metrics(&jobs, f64::NAN, 10.0, 50.0, 1.0).unwrap_err();
        assert!(err.to_string().contains("t0"), "{err}");
        let err = seed004_metrics(&[], 0.0, 10.0, 50.0, 1.0).unwrap_err();
        assert!(
            err.to_string().contains("no job could be measured"),
            "{err}"
        );
        // A job that only starts after the window did no work inside it.
        let late = vec![JobPhases {
            job: 4,
            phases: vec![compute(100.0, 200.0)],
        }];
        let err = seed004_metrics(&late, 0.0, 10.0, 50.0, 1.0).unwrap_err();
        assert!(
            err.to_string()
                .contains("job 4: it did no work inside the window"),
            "{err}"
        );
    }
}
